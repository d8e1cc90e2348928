//! The engine on a real NATS JetStream server, through the official `async-nats` client.
//!
//! [`NatsEngine::connect`] creates (or opens) the log stream and the lease bucket named by a
//! [`Layout`]. Reads that decide ownership or resolve an append go to the stream leader
//! (`STREAM.MSG.GET`, not direct get): direct gets may be served by followers, which do not
//! promise read-your-writes. Subject reads from a sequence use an ordered consumer.

mod convert;
mod engine;

use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};

use crate::layout::Layout;

pub use engine::NatsLive;

/// How to set the cluster's stream and bucket up.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// Names of the stream, subjects and bucket.
    pub layout: Layout,
    /// Replicas of the log stream and the lease bucket (1, or 3 on a three-node cluster).
    pub replicas: usize,
    /// The lease bucket's `max_age`.
    pub lease_ttl: Duration,
    /// How long an append or KV write waits for its acknowledgement.
    pub ack_timeout: Duration,
}

impl NatsConfig {
    /// The default layout, `replicas` replicas, 6 s leases and 2 s acknowledgement timeouts.
    pub fn new(replicas: usize) -> Self {
        Self {
            layout: Layout::default(),
            replicas,
            lease_ttl: Duration::from_secs(6),
            ack_timeout: Duration::from_secs(2),
        }
    }
}

/// [`crate::Engine`] on NATS JetStream.
#[derive(Debug, Clone)]
pub struct NatsEngine {
    client: async_nats::Client,
    context: jetstream::Context,
    log: stream::Stream,
    leases: kv::Store,
    lease_stream: stream::Stream,
    lease_subject_prefix: String,
    read_timeout: Duration,
}

/// Why [`NatsEngine::connect`] failed.
#[derive(Debug)]
pub struct ConnectError(pub String);

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot set up the NATS engine: {}", self.0)
    }
}

impl std::error::Error for ConnectError {}

/// How long [`NatsEngine::connect_client`] waits for the first connection.
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(30);

/// Whether `event` says the server refused the client's credentials.
fn is_refusal(event: &async_nats::Event) -> bool {
    match event {
        async_nats::Event::ServerError(async_nats::ServerError::AuthorizationViolation) => true,
        async_nats::Event::ClientError(async_nats::ClientError::Other(why)) => {
            why.contains("authorization violation")
        }
        _ => false,
    }
}

fn setup_error(what: &str, error: impl std::fmt::Display) -> ConnectError {
    ConnectError(format!("{what}: {error}"))
}

impl NatsEngine {
    /// Connects to `servers` (e.g. `["nats://127.0.0.1:4222"]`) and creates or opens the log
    /// stream and the lease bucket.
    pub async fn connect(servers: &[String], config: NatsConfig) -> Result<Self, ConnectError> {
        Self::connect_with(servers, async_nats::ConnectOptions::new(), config).await
    }

    /// Like [`NatsEngine::connect`], with the client's own options (credentials, TLS, name).
    pub async fn connect_with(
        servers: &[String],
        options: async_nats::ConnectOptions,
        config: NatsConfig,
    ) -> Result<Self, ConnectError> {
        let client = Self::connect_client(servers, options).await?;
        Self::with_client(client, config).await
    }

    /// A client connection to `servers` with `options` (retrying the first connect while no
    /// server answers, for up to [`FIRST_CONNECT_WAIT`]; the engine's set-up retries after
    /// that). A server that refuses the client's credentials is an error at once: retrying
    /// cannot fix them.
    pub async fn connect_client(
        servers: &[String],
        options: async_nats::ConnectOptions,
    ) -> Result<async_nats::Client, ConnectError> {
        let refused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = refused.clone();
        let client = options
            .connection_timeout(Duration::from_secs(5))
            .retry_on_initial_connect()
            .event_callback(move |event| {
                if is_refusal(&event) {
                    seen.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                async {}
            })
            .connect(servers)
            .await
            .map_err(|e| setup_error("connect", e))?;
        let deadline = std::time::Instant::now() + FIRST_CONNECT_WAIT;
        while client.connection_state() != async_nats::connection::State::Connected
            && std::time::Instant::now() < deadline
        {
            if refused.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(ConnectError(
                    "connect: the NATS server refused this node's credentials (authorization \
                     violation); check --cluster-creds"
                        .into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(client)
    }

    /// Sets the engine up on an existing connection.
    pub async fn with_client(
        client: async_nats::Client,
        config: NatsConfig,
    ) -> Result<Self, ConnectError> {
        let mut context = jetstream::new(client.clone());
        context.set_timeout(config.ack_timeout);
        let layout = &config.layout;
        let log = context
            .get_or_create_stream(stream::Config {
                name: layout.log_stream.clone(),
                subjects: vec![layout.log_filter()],
                storage: stream::StorageType::File,
                num_replicas: config.replicas,
                duplicate_window: Duration::from_secs(120),
                allow_direct: true,
                ..Default::default()
            })
            .await
            .map_err(|e| setup_error("log stream", e))?;
        let leases = match context.get_key_value(&layout.lease_bucket).await {
            Ok(store) => store,
            Err(_) => context
                .create_key_value(kv::Config {
                    bucket: layout.lease_bucket.clone(),
                    history: 1,
                    max_age: config.lease_ttl,
                    storage: stream::StorageType::File,
                    num_replicas: config.replicas,
                    ..Default::default()
                })
                .await
                .map_err(|e| setup_error("lease bucket", e))?,
        };
        let lease_stream = context
            .get_stream(format!("KV_{}", layout.lease_bucket))
            .await
            .map_err(|e| setup_error("lease bucket stream", e))?;
        Ok(Self {
            client,
            context,
            log,
            leases,
            lease_stream,
            lease_subject_prefix: format!("$KV.{}.", layout.lease_bucket),
            read_timeout: config.ack_timeout,
        })
    }

    /// The underlying connection.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// Every log subject that holds messages (`filter`: the log stream's subject filter).
    pub async fn log_subjects(&self, filter: &str) -> Result<Vec<String>, crate::EngineError> {
        use futures_util::TryStreamExt;
        let fail = |e: String| crate::EngineError(format!("list log subjects: {e}"));
        let subjects = self
            .log
            .info_with_subjects(filter)
            .await
            .map_err(|e| fail(e.to_string()))?;
        subjects
            .map_ok(|(subject, _)| subject)
            .try_collect()
            .await
            .map_err(|e| fail(e.to_string()))
    }

    /// Every log subject that holds messages, with how many (`filter`: the log stream's subject
    /// filter). A subject's count changes with every append to it.
    pub async fn log_subject_counts(
        &self,
        filter: &str,
    ) -> Result<Vec<(String, usize)>, crate::EngineError> {
        use futures_util::TryStreamExt;
        let fail = |e: String| crate::EngineError(format!("list log subjects: {e}"));
        let subjects = self
            .log
            .info_with_subjects(filter)
            .await
            .map_err(|e| fail(e.to_string()))?;
        subjects
            .try_collect()
            .await
            .map_err(|e| fail(e.to_string()))
    }

    /// The keys of the lease bucket: the escaped ids of the nodes whose lease is alive.
    pub async fn lease_keys(&self) -> Result<Vec<String>, crate::EngineError> {
        use futures_util::TryStreamExt;
        let fail = |e: String| crate::EngineError(format!("list leases: {e}"));
        let keys = self.leases.keys().await.map_err(|e| fail(e.to_string()))?;
        keys.try_collect().await.map_err(|e| fail(e.to_string()))
    }

    /// Removes every message of a log subject (a deleted session).
    pub async fn purge_subject(&self, subject: &str) -> Result<(), crate::EngineError> {
        self.log
            .purge()
            .filter(subject)
            .await
            .map(|_| ())
            .map_err(|e| crate::EngineError(format!("purge {subject}: {e}")))
    }

    /// Waits (at most `limit`) until the log stream and the lease bucket have a leader: a new
    /// replicated stream answers nothing before its first election. Answers whether they do.
    pub async fn wait_for_leaders(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let mut log = self.log.clone();
            let mut leases = self.lease_stream.clone();
            let has_leader = |info: Result<stream::Info, _>| match info {
                Ok(info) => info.cluster.is_none_or(|c| c.leader.is_some()),
                Err(_) => false,
            };
            if has_leader(log.info().await.cloned()) && has_leader(leases.info().await.cloned()) {
                return true;
            }
            if std::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The log stream's current leader, if the server reports one (clustered streams).
    pub async fn log_leader(&self) -> Option<String> {
        let mut stream = self.log.clone();
        let info = stream.info().await.ok()?;
        info.cluster.as_ref().and_then(|c| c.leader.clone())
    }
}
