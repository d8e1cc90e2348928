//! A three-node JetStream cluster on loopback with an R3 log stream: `kill -9` of the stream
//! leader while a writer streams fenced appends over several sessions loses no acknowledged
//! append and stores none twice.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::connect_nats;
use crate::support::nats::NatsCluster;
use agentwire_cluster::drive::{append, take_over, AppendFailure};
use agentwire_cluster::nats::NatsEngine;
use agentwire_cluster::takeover::TakeoverOutcome;
use agentwire_cluster::writer::SessionWriter;
use agentwire_cluster::{Engine, Layout, NodeIdentity, RecordKind};
use bytes::Bytes;

const SESSIONS: usize = 8;

/// What the writer task did.
#[derive(Default)]
struct Outcome {
    /// (session, stream sequence, payload) of every acknowledged append.
    acked: Vec<(usize, u64, String)>,
    /// Appends the writer gave up on (their outcome stayed unknown; they may or may not be
    /// stored, and were never acknowledged).
    abandoned: Vec<(usize, String)>,
    /// Re-claims after a writer fenced itself.
    reclaims: u64,
    /// When each acknowledgement arrived.
    ack_times: Vec<Instant>,
}

/// Claims `session` for `me`, retrying while the cluster is electing a leader.
async fn claim(
    engine: &NatsEngine,
    me: &NodeIdentity,
    counter: &mut u64,
    session: usize,
) -> SessionWriter {
    let subject = Layout::default().log_subject(&format!("kill/{session}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        *counter += 1;
        match take_over(engine, me.clone(), *counter, subject.clone()).await {
            TakeoverOutcome::Claimed { writer, .. } => return writer,
            other => {
                assert!(
                    Instant::now() < deadline,
                    "could not claim {session}: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Appends round-robin over the sessions until `stop`.
async fn write(engine: NatsEngine, acks: Arc<AtomicU64>, stop: Arc<AtomicBool>) -> Outcome {
    let me = NodeIdentity {
        node: "writer".into(),
        incarnation: 1,
    };
    let mut counter = 0;
    let mut writers = Vec::new();
    for session in 0..SESSIONS {
        writers.push(claim(&engine, &me, &mut counter, session).await);
    }
    let mut outcome = Outcome::default();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let session = (n % SESSIONS as u64) as usize;
        let payload = format!("{session}:{n}");
        n += 1;
        match append(&engine, &mut writers[session], Bytes::from(payload.clone())).await {
            Ok(seq) => {
                outcome.acked.push((session, seq, payload));
                outcome.ack_times.push(Instant::now());
                acks.fetch_add(1, Ordering::Relaxed);
            }
            Err(AppendFailure::Fenced) => {
                outcome.abandoned.push((session, payload));
                outcome.reclaims += 1;
                writers[session] = claim(&engine, &me, &mut counter, session).await;
            }
            Err(other) => panic!("append failed: {other:?}"),
        }
    }
    outcome
}

async fn wait_for_acks(acks: &AtomicU64, at_least: u64, within: Duration) {
    let deadline = Instant::now() + within;
    while acks.load(Ordering::Relaxed) < at_least {
        assert!(
            Instant::now() < deadline,
            "only {} of {at_least} appends acknowledged in {within:?}",
            acks.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_stream_leader_loses_no_acknowledged_append() {
    let mut cluster = NatsCluster::three();
    let engine = connect_nats(&cluster.urls(), 3, Duration::from_secs(60)).await;
    let leader = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(leader) = engine.log_leader().await {
                break leader;
            }
            assert!(Instant::now() < deadline, "the log stream has no leader");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };

    let acks = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write(engine.clone(), acks.clone(), stop.clone()));
    wait_for_acks(&acks, 200, Duration::from_secs(60)).await;
    cluster.member(&leader).kill();
    let killed_at = Instant::now();
    let at_kill = acks.load(Ordering::Relaxed);
    wait_for_acks(&acks, at_kill + 200, Duration::from_secs(60)).await;
    stop.store(true, Ordering::Relaxed);
    let outcome = writer.await.expect("writer task");

    let new_leader = engine.log_leader().await;
    let pause = outcome
        .ack_times
        .windows(2)
        .filter(|w| w[1] > killed_at)
        .map(|w| w[1].duration_since(w[0]))
        .max();
    assert_ne!(
        new_leader.as_deref(),
        Some(leader.as_str()),
        "leader did not move"
    );
    eprintln!(
        "killed leader {leader}; new leader {new_leader:?}; {} acked ({at_kill} before the kill), \
         {} abandoned, {} re-claims; longest gap between acks after the kill {pause:?}",
        outcome.acked.len(),
        outcome.abandoned.len(),
        outcome.reclaims
    );

    let layout = Layout::default();
    let mut stored = std::collections::HashMap::new();
    for session in 0..SESSIONS {
        let subject = layout.log_subject(&format!("kill/{session}"));
        for message in engine.read_subject(&subject, 1).await.expect("read log") {
            if message.kind != Some(RecordKind::Event) {
                continue;
            }
            let payload = String::from_utf8(message.payload.to_vec()).unwrap();
            let previous = stored.insert(payload.clone(), (session, message.seq));
            assert!(previous.is_none(), "{payload} stored twice");
        }
    }
    for (session, seq, payload) in &outcome.acked {
        assert_eq!(
            stored.remove(payload),
            Some((*session, *seq)),
            "acknowledged append {payload} lost or moved"
        );
    }
    // Whatever is stored beyond the acknowledged appends was abandoned, never acknowledged.
    for payload in stored.keys() {
        assert!(
            outcome.abandoned.iter().any(|(_, p)| p == payload),
            "{payload} stored but neither acknowledged nor abandoned"
        );
    }
}
