//! Measures fenced-append latency on a real nats-server: one session with one append in flight
//! (the protocol's per-session limit), then several sessions appending concurrently.
//!
//! ```text
//! cargo run --release -p agentwire-cluster --example append_latency -- [single|cluster] [appends]
//! ```
//!
//! It starts its own servers (`$AGENTWIRE_NATS_SERVER` or `target/nats/nats-server`, installed
//! by `scripts/install-test-servers`) on free loopback ports and kills them at the end. `cluster` runs three servers
//! with an R3 stream. Figures from a shared 2-core machine are order-of-magnitude only.

use std::time::{Duration, Instant};

use agentwire_testkit::nats as server;

use agentwire_cluster::drive::{append, take_over};
use agentwire_cluster::nats::{NatsConfig, NatsEngine};
use agentwire_cluster::takeover::TakeoverOutcome;
use agentwire_cluster::writer::SessionWriter;
use agentwire_cluster::{Layout, NodeIdentity};
use bytes::Bytes;

const CONCURRENT_SESSIONS: usize = 8;

async fn connect(urls: &[String], replicas: usize) -> NatsEngine {
    let config = NatsConfig::new(replicas);
    for _ in 0..120 {
        if let Ok(engine) = NatsEngine::connect(urls, config.clone()).await {
            return engine;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("JetStream did not become ready");
}

async fn writer(engine: &NatsEngine, session: &str, counter: u64) -> SessionWriter {
    let me = NodeIdentity {
        node: "bench".into(),
        incarnation: 1,
    };
    let subject = Layout::default().log_subject(session);
    match take_over(engine, me, counter, subject).await {
        TakeoverOutcome::Claimed { writer, .. } => writer,
        other => panic!("claim failed: {other:?}"),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "single".into());
    let appends: usize = args.next().map_or(2_000, |n| n.parse().expect("appends"));
    let payload = Bytes::from(vec![b'x'; 256]);

    let (_single, _cluster, urls, replicas) = match mode.as_str() {
        "single" => {
            let server = server::NatsServer::single();
            let urls = vec![server.url()];
            (Some(server), None, urls, 1)
        }
        "cluster" => {
            let cluster = server::NatsCluster::three();
            let urls = cluster.urls();
            (None, Some(cluster), urls, 3)
        }
        other => panic!("unknown mode {other}: single or cluster"),
    };
    let engine = connect(&urls, replicas).await;

    let mut one = writer(&engine, "latency", 1).await;
    let mut latencies = Vec::with_capacity(appends);
    let started = Instant::now();
    for _ in 0..appends {
        let t = Instant::now();
        append(&engine, &mut one, payload.clone())
            .await
            .expect("append");
        latencies.push(t.elapsed());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    println!(
        "{mode} (R{replicas}), one session, 256-byte events: {appends} appends in {elapsed:.2?} \
         = {:.0}/s; p50 {:?}, p99 {:?}, max {:?}",
        appends as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1],
    );

    let started = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..CONCURRENT_SESSIONS {
        let engine = engine.clone();
        let payload = payload.clone();
        let mut w = writer(&engine, &format!("concurrent-{s}"), 10 + s as u64).await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..appends / CONCURRENT_SESSIONS {
                append(&engine, &mut w, payload.clone())
                    .await
                    .expect("append");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let elapsed = started.elapsed();
    let total = appends / CONCURRENT_SESSIONS * CONCURRENT_SESSIONS;
    println!(
        "{mode} (R{replicas}), {CONCURRENT_SESSIONS} sessions concurrently: {total} appends in \
         {elapsed:.2?} = {:.0}/s",
        total as f64 / elapsed.as_secs_f64()
    );
}
