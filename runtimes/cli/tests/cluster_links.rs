//! Gateway links that lose a message, end to end: two `agentwire --cluster` nodes on one real
//! nats-server (`$AGENTWIRE_NATS_SERVER`, or `target/nats/nats-server` installed by `.ci/run`),
//! driven by the **official Copilot Rust SDK** over TCP.
//!
//! A client of node B drives a session owned by node A over a link. A heartbeat naming a link
//! message B never received is injected on the link's subject: B sees a message lost, counts the
//! link broken, and re-attaches its client to A over a new link. The client keeps its connection
//! and its next turn works.

#[path = "../../../tests/sdk_scenarios/mod.rs"]
mod sdk;

#[path = "../../tokio/tests/common/mod.rs"]
mod common;
#[path = "support/agentwire.rs"]
mod support;

#[allow(dead_code)]
#[path = "../../cluster/tests/support/server.rs"]
mod nats;

#[allow(dead_code)]
#[path = "support/cluster_node.rs"]
mod cluster_node;

use std::sync::{Arc, Mutex};

use cluster_node::{client, ids, node, session_config};
use futures::StreamExt;
use github_copilot_sdk::handler::ApproveAllHandler;
use github_copilot_sdk::types::ResumeSessionConfig;

#[tokio::test]
async fn a_relayed_client_whose_link_lost_a_message_is_re_attached_to_the_same_owner() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let a = node(&url, "a").await;
        let b = node(&url, "b").await;
        // Watches what A sends to B's relayed clients.
        let watcher = async_nats::connect(&url).await.expect("connect to NATS");
        let mut from_owner = watcher
            .subscribe("agentwire.live.out.>")
            .await
            .expect("subscribe");
        watcher.flush().await.expect("flush");

        let client_a = client(&a).await;
        let id = sdk::new_session_id();
        let config = session_config(&id).with_permission_handler(Arc::new(ApproveAllHandler));
        let session_a = sdk::within("session.create", client_a.create_session(config))
            .await
            .expect("session.create on node A");
        sdk::turn(&session_a, "hello").await;

        let client_b = client(&b).await;
        let calls_b = Arc::new(Mutex::new(Vec::new()));
        let config = ResumeSessionConfig::new(id.clone())
            .with_tools([sdk::weather_tool(calls_b.clone())])
            .with_permission_handler(Arc::new(ApproveAllHandler));
        let session_b = sdk::within("session.resume on node B", client_b.resume_session(config))
            .await
            .expect("session.resume of a session owned by a live node");
        let first = sdk::within("a link message from A", from_owner.next())
            .await
            .expect("a message")
            .subject;

        // A heartbeat naming a message B never received: one was lost.
        let mut heartbeat = vec![b'H'];
        heartbeat.extend_from_slice(&(1u64 << 40).to_be_bytes());
        watcher
            .publish(first.clone(), heartbeat.into())
            .await
            .expect("publish");
        watcher.flush().await.expect("flush");

        // B links to A again, on a new link.
        let second = loop {
            let m = sdk::within("a message on a new link", from_owner.next())
                .await
                .expect("a message");
            if m.subject != first {
                break m.subject;
            }
        };
        assert!(second.as_str().ends_with("x1"), "{second} after {first}");

        // The same connection carries on: a turn with a client tool, then the whole history.
        let reply = sdk::turn(&session_b, sdk::WEATHER_PROMPT).await;
        assert_eq!(sdk::str_field(&reply, "content"), Some(sdk::WEATHER_ANSWER));
        assert_eq!(calls_b.lock().unwrap().len(), 1, "B's client ran the tool");
        let history_b = sdk::within("getMessages via B", session_b.get_events())
            .await
            .expect("getMessages");
        let history_a = sdk::within("getMessages on A", session_a.get_events())
            .await
            .expect("getMessages");
        assert_eq!(ids(&history_a), ids(&history_b));
        assert!(history_b.iter().any(|e| e.id == reply.id));
        sdk::assert_chain(&history_b, None);
        let log = b.stderr();
        assert!(log.contains("the link to the owner node broke"), "{log}");
        assert!(log.contains("were lost"), "{log}");
        drop(server);
    })
    .await
}
