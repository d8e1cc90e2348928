//! `--cluster` and `--node-id`: run as one node of a cluster on NATS JetStream.

use std::path::PathBuf;
use std::time::Duration;

use agentwire_cluster::nats::NatsConfig;
use agentwire_cluster::node::NodeOptions;
use agentwire_cluster::Layout;

/// The cluster flags.
#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    /// Run as a node of a cluster: sessions' event logs live in NATS JetStream at these
    /// servers (comma-separated `nats://HOST:PORT`), owned by one node at a time; a session
    /// whose node died is taken over by the node a client resumes it on. Needs --node-id;
    /// replaces --data-dir. Tokio runtime only.
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    cluster: Vec<String>,

    /// This node's id in the cluster (unique per node; mixed into the id generator's seed).
    #[arg(long, value_name = "ID")]
    node_id: Option<String>,

    /// How long a node's lease lives without renewal (the lease bucket's max_age, set by the
    /// first node that creates it): a dead node's sessions can be taken over this long after
    /// it stopped.
    #[arg(long, value_name = "DURATION", default_value = "6s", value_parser = parse_duration)]
    cluster_lease_ttl: Duration,

    /// Replicas of the log stream and the lease bucket (3 on a three-server NATS cluster).
    #[arg(long, value_name = "N", default_value_t = 1)]
    cluster_replicas: usize,

    /// Prefix of the stream, subjects and bucket names (clusters sharing one NATS stay apart).
    #[arg(long, value_name = "NAME", default_value = "agentwire")]
    cluster_prefix: String,

    /// NATS user name (with --cluster-password-env).
    #[arg(long, value_name = "USER")]
    cluster_user: Option<String>,

    /// Environment variable holding the NATS password.
    #[arg(long, value_name = "VAR", requires = "cluster_user")]
    cluster_password_env: Option<String>,

    /// Environment variable holding a NATS authentication token.
    #[arg(long, value_name = "VAR")]
    cluster_token_env: Option<String>,

    /// NATS credentials file (`.creds`: a user JWT and its nkey seed, as `nsc` writes them);
    /// read and checked at startup.
    #[arg(long, value_name = "FILE")]
    cluster_creds: Option<PathBuf>,

    /// PEM file of the CA certificates that sign the NATS servers' certificates.
    #[arg(long, value_name = "FILE")]
    cluster_tls_ca: Option<PathBuf>,

    /// PEM client certificate for NATS (with --cluster-tls-key).
    #[arg(long, value_name = "FILE", requires = "cluster_tls_key")]
    cluster_tls_cert: Option<PathBuf>,

    /// PEM private key of --cluster-tls-cert.
    #[arg(long, value_name = "FILE", requires = "cluster_tls_cert")]
    cluster_tls_key: Option<PathBuf>,

    /// Refuse NATS connections without TLS.
    #[arg(long)]
    cluster_require_tls: bool,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d >= Duration::from_secs(1) => Ok(d),
        Ok(_) => Err("the lease TTL must be at least 1s".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// `connect` authenticating with the `.creds` file at `path`; an error naming the file when it
/// cannot be read or holds no user JWT and nkey seed.
fn with_credentials_file(
    connect: async_nats::ConnectOptions,
    path: &std::path::Path,
) -> Result<async_nats::ConnectOptions, String> {
    let contents = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read NATS credentials file {}: {e}", path.display()))?;
    connect
        .credentials(&contents)
        .map_err(|e| format!("invalid NATS credentials file {}: {e}", path.display()))
}

/// What the cluster flags ask for.
pub struct ClusterSetup {
    /// The node's options.
    pub node: NodeOptions,
    /// The NATS client's options (credentials, TLS).
    pub connect: async_nats::ConnectOptions,
}

impl ClusterArgs {
    /// `None` without `--cluster`; an error message for a bad combination.
    pub fn setup(&self) -> Result<Option<ClusterSetup>, String> {
        if self.cluster.is_empty() {
            if self.node_id.is_some() {
                return Err("--node-id needs --cluster".into());
            }
            return Ok(None);
        }
        let Some(node_id) = self.node_id.clone().filter(|id| !id.is_empty()) else {
            return Err("--cluster needs --node-id ID (unique per node)".into());
        };
        let mut nats = NatsConfig::new(self.cluster_replicas.max(1));
        nats.layout = Layout::with_prefix(&self.cluster_prefix);
        nats.lease_ttl = self.cluster_lease_ttl;
        let mut connect = async_nats::ConnectOptions::new().name(format!("agentwire {node_id}"));
        let env = |var: &str| {
            std::env::var(var)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("environment variable {var} is not set"))
        };
        if let Some(user) = &self.cluster_user {
            let password = match &self.cluster_password_env {
                Some(var) => env(var)?,
                None => String::new(),
            };
            connect = connect.user_and_password(user.clone(), password);
        }
        if let Some(var) = &self.cluster_token_env {
            connect = connect.token(env(var)?);
        }
        if let Some(path) = &self.cluster_creds {
            connect = with_credentials_file(connect, path)?;
        }
        if let Some(ca) = &self.cluster_tls_ca {
            connect = connect.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&self.cluster_tls_cert, &self.cluster_tls_key) {
            connect = connect.add_client_certificate(cert.clone(), key.clone());
        }
        if self.cluster_require_tls {
            connect = connect.require_tls(true);
        }
        let incarnation = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default();
        Ok(Some(ClusterSetup {
            node: NodeOptions {
                servers: self.cluster.clone(),
                node_id,
                incarnation,
                nats,
            },
            connect,
        }))
    }
}
