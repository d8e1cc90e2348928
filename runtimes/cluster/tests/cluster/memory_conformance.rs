//! The in-memory engine passes the engine conformance checks.

use std::time::Duration;

use crate::support::conformance;
use agentwire_cluster::memory::MemoryCluster;

fn cluster() -> MemoryCluster {
    MemoryCluster::new(Duration::from_secs(6))
}

#[tokio::test]
async fn fenced_append_is_rejected() {
    conformance::fenced_append_is_rejected(&cluster().client("a")).await;
}

#[tokio::test]
async fn duplicate_message_id_is_not_stored() {
    conformance::duplicate_message_id_is_not_stored(&cluster().client("a")).await;
}

#[tokio::test]
async fn lost_acks_are_resolved() {
    conformance::lost_acks_are_resolved(&cluster().client("a")).await;
}

#[tokio::test]
async fn takeover_fences_the_old_owner() {
    let cluster = cluster();
    conformance::takeover_fences_the_old_owner(&cluster.client("a"), &cluster.client("b")).await;
}

#[tokio::test]
async fn kv_revisions_are_checked() {
    conformance::kv_revisions_are_checked(&cluster().client("a")).await;
}

#[tokio::test]
async fn kv_leases_expire() {
    let cluster = cluster();
    let engine = cluster.client("a");
    conformance::kv_leases_expire(&engine, || async {
        cluster.advance(Duration::from_secs(7));
    })
    .await;
}

#[tokio::test]
async fn subject_reads_start_at_a_sequence() {
    conformance::subject_reads_start_at_a_sequence(&cluster().client("a")).await;
}

#[tokio::test]
async fn live_subjects_deliver_in_order() {
    let cluster = cluster();
    conformance::live_subjects_deliver_in_order(&cluster.client("a"), &cluster.client("b")).await;
}

#[tokio::test]
async fn leases_renew_and_lapse() {
    let cluster = cluster();
    let engine = cluster.client("a");
    conformance::leases_renew_and_lapse(
        &engine,
        Duration::from_secs(6),
        || cluster.now(),
        |by| {
            cluster.advance(by);
            std::future::ready(())
        },
    )
    .await;
}

#[tokio::test]
async fn large_events_are_stored_in_pieces() {
    let cluster = cluster();
    conformance::large_events_are_stored_in_pieces(&cluster.client("a"), &cluster.client("b"))
        .await;
}
