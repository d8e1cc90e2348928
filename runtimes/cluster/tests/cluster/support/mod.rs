//! The `cluster` tier's set-up: engine conformance checks, and real nats-server processes
//! (from `agentwire-testkit`, shared with `agentwire-cli`'s tests).
#![allow(dead_code)]

pub mod conformance;

pub use agentwire_testkit::nats;

use std::time::Duration;

use agentwire_cluster::nats::{NatsConfig, NatsEngine};
use agentwire_cluster::Layout;

/// Connects an engine to `urls`, retrying while JetStream is still starting (a cluster elects
/// its meta leader first).
pub async fn connect_nats(urls: &[String], replicas: usize, lease_ttl: Duration) -> NatsEngine {
    let config = NatsConfig {
        layout: Layout::default(),
        replicas,
        lease_ttl,
        ack_timeout: Duration::from_secs(2),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match NatsEngine::connect(urls, config.clone()).await {
            Ok(engine) => return engine,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("engine not ready yet: {e}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("engine never became ready: {e}"),
        }
    }
}
