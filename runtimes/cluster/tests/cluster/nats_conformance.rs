//! The async-nats engine passes the engine conformance checks against a real nats-server
//! (one JetStream server per test, on a free loopback port, killed at the end).

use std::time::Duration;

use crate::support::nats::NatsServer;
use crate::support::{conformance, connect_nats};

/// The lease TTL of these tests' bucket: short, so expiry is quick to observe.
const TTL: Duration = Duration::from_secs(1);

#[tokio::test]
async fn fenced_append_is_rejected() {
    let server = NatsServer::single();
    let engine = connect_nats(&[server.url()], 1, TTL).await;
    conformance::fenced_append_is_rejected(&engine).await;
}

#[tokio::test]
async fn duplicate_message_id_is_not_stored() {
    let server = NatsServer::single();
    let engine = connect_nats(&[server.url()], 1, TTL).await;
    conformance::duplicate_message_id_is_not_stored(&engine).await;
}

#[tokio::test]
async fn lost_acks_are_resolved() {
    let server = NatsServer::single();
    let engine = connect_nats(&[server.url()], 1, TTL).await;
    conformance::lost_acks_are_resolved(&engine).await;
}

#[tokio::test]
async fn takeover_fences_the_old_owner() {
    let server = NatsServer::single();
    let a = connect_nats(&[server.url()], 1, Duration::from_secs(60)).await;
    let b = connect_nats(&[server.url()], 1, Duration::from_secs(60)).await;
    conformance::takeover_fences_the_old_owner(&a, &b).await;
}

#[tokio::test]
async fn kv_revisions_are_checked() {
    let server = NatsServer::single();
    let engine = connect_nats(&[server.url()], 1, Duration::from_secs(60)).await;
    conformance::kv_revisions_are_checked(&engine).await;
}

#[tokio::test]
async fn kv_leases_expire() {
    let server = NatsServer::single();
    let engine = connect_nats(&[server.url()], 1, TTL).await;
    conformance::kv_leases_expire(&engine, || tokio::time::sleep(TTL * 2)).await;
}

#[tokio::test]
async fn subject_reads_start_at_a_sequence() {
    let server = NatsServer::single();
    let engine = connect_nats(&[server.url()], 1, TTL).await;
    conformance::subject_reads_start_at_a_sequence(&engine).await;
}

#[tokio::test]
async fn live_subjects_deliver_in_order() {
    let server = NatsServer::single();
    let a = connect_nats(&[server.url()], 1, TTL).await;
    let b = connect_nats(&[server.url()], 1, TTL).await;
    conformance::live_subjects_deliver_in_order(&a, &b).await;
}

#[tokio::test]
async fn leases_renew_and_lapse() {
    let server = NatsServer::single();
    let ttl = Duration::from_secs(3);
    let engine = connect_nats(&[server.url()], 1, ttl).await;
    let start = std::time::Instant::now();
    conformance::leases_renew_and_lapse(&engine, ttl, || start.elapsed(), tokio::time::sleep).await;
}

/// An append larger than the server's `max_payload` is refused before it is sent (the server
/// would drop the connection, and a retry would do it again); the connection stays up and the
/// next append at the same sequence is stored.
#[tokio::test]
async fn an_append_over_max_payload_is_refused_and_the_connection_stays_up() {
    use agentwire_cluster::{AppendError, AppendRequest, Engine, Layout, RecordKind};
    let server = NatsServer::single();
    let engine = connect_nats(&[server.url()], 1, TTL).await;
    let subject = Layout::default().log_subject("big");
    let max_payload = engine.client().server_info().max_payload;
    let append = |msg_id: &str, payload: bytes::Bytes| AppendRequest {
        subject: subject.clone(),
        expected_last_subject_seq: 0,
        msg_id: msg_id.into(),
        kind: RecordKind::Event,
        payload,
    };
    let big = bytes::Bytes::from(vec![b'x'; max_payload + 1]);
    match engine.append(&append("big", big)).await {
        Err(AppendError::Failed(why)) => assert!(why.contains("max_payload"), "{why}"),
        other => panic!("an append over max_payload must be refused, got {other:?}"),
    }
    // Just under max_payload, but over it with the headers: refused too.
    let tight = bytes::Bytes::from(vec![b'x'; max_payload - 10]);
    assert!(matches!(
        engine.append(&append("tight", tight)).await,
        Err(AppendError::Failed(_))
    ));
    let ack = engine
        .append(&append("small", bytes::Bytes::from_static(b"{}")))
        .await
        .expect("the next append is stored");
    assert!(ack.seq > 0);
    assert_eq!(engine.client().connection_state().to_string(), "connected");
}

#[tokio::test]
async fn large_events_are_stored_in_pieces() {
    let server = NatsServer::single();
    let a = connect_nats(&[server.url()], 1, Duration::from_secs(60)).await;
    let b = connect_nats(&[server.url()], 1, Duration::from_secs(60)).await;
    conformance::large_events_are_stored_in_pieces(&a, &b).await;
}
