//! Gateway links that lose a message, end to end: two `agentwire --cluster` nodes on one real
//! nats-server (`$AGENTWIRE_NATS_SERVER`, or `target/nats/nats-server` installed by `scripts/install-test-servers`),
//! driven by the **official Copilot Rust SDK** over TCP.
//!
//! A client of node B drives a session owned by node A over a link, A's frames for it coming
//! in B's relay group from A. A heartbeat naming a group message A never sent is injected on
//! the group's subject: B sees messages lost and asks A to send them again; A answers that it
//! does not keep them, so B counts the group (and so its client's link) broken, and
//! re-attaches its client to A over a new link in a new group. The client keeps its
//! connection and its next turn works. (A message that really was lost, and that A still
//! keeps, is sent again and nothing breaks: `link_messages`' tests and the host simulation.)

use crate::support::sdk_scenarios as sdk;

use crate::support;

use crate::support::nats;

use crate::support::cluster_node;

use std::sync::{Arc, Mutex};

use std::time::Duration;

use cluster_node::{app_session, client, ids, node, node_with_args};
use futures::StreamExt;
use github_copilot_sdk::handler::ApproveAllHandler;
use github_copilot_sdk::types::{MessageOptions, ResumeSessionConfig};

/// A nats-server, nodes A and B on it, a raw NATS client and its subscription.
type Watched = (
    nats::NatsServer,
    support::Agentwire,
    support::Agentwire,
    async_nats::Client,
    async_nats::Subscriber,
);

/// A nats-server, nodes A and B on it, and a raw NATS client subscribed to `subject` (what A
/// sends to B's relayed clients travels on `agentwire.live.grp.>`).
async fn two_nodes_watching(subject: &'static str) -> Watched {
    two_nodes_watching_with(subject, &[]).await
}

/// [`two_nodes_watching`], node A started with the arguments `a_args` too.
async fn two_nodes_watching_with(subject: &'static str, a_args: &[&str]) -> Watched {
    let server = nats::NatsServer::single();
    let url = server.url();
    let a = node_with_args(&url, "a", a_args).await;
    let b = node(&url, "b").await;
    let watcher = async_nats::connect(&url).await.expect("connect to NATS");
    let from_owner = watcher.subscribe(subject).await.expect("subscribe");
    watcher.flush().await.expect("flush");
    (server, a, b, watcher, from_owner)
}

/// `config`'s session resumed by `client` of node B, relayed to its owner: the session and
/// the subject of the first message the owner sent B for it (watched on `from_owner`).
async fn resume_relayed(
    client: &github_copilot_sdk::Client,
    config: ResumeSessionConfig,
    from_owner: &mut async_nats::Subscriber,
) -> (github_copilot_sdk::session::Session, async_nats::Subject) {
    let session = sdk::within("session.resume on node B", client.resume_session(config))
        .await
        .expect("session.resume of a session owned by a live node");
    let first = sdk::within("a link message from A", from_owner.next())
        .await
        .expect("a message")
        .subject;
    (session, first)
}

#[tokio::test]
async fn a_relayed_client_whose_link_lost_a_message_is_re_attached_to_the_same_owner() {
    sdk::bounded(async {
        let (server, a, b, watcher, mut from_owner) =
            two_nodes_watching("agentwire.live.grp.>").await;

        let (_client_a, id, session_a, _) = app_session(&a, Some("hello")).await;

        let client_b = client(&b).await;
        let calls_b = Arc::new(Mutex::new(Vec::new()));
        let config = ResumeSessionConfig::new(id.clone())
            .with_tools([sdk::weather_tool(calls_b.clone())])
            .with_permission_handler(Arc::new(ApproveAllHandler));
        let (session_b, first) = resume_relayed(&client_b, config, &mut from_owner).await;

        // A heartbeat naming a message B never received (nor A sent): B asks for it again,
        // and A says it does not keep it.
        cluster_node::inject_unsent_heartbeat(&watcher, first.clone()).await;

        // B links to A again, on a new link in a new group.
        let second = loop {
            let m = sdk::within("a message on a new link", from_owner.next())
                .await
                .expect("a message");
            if m.subject != first {
                break m.subject;
            }
        };
        assert!(
            second.as_str().ends_with("xcopilot1"),
            "{second} after {first}"
        );

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
        assert!(
            log.contains("the relay group from the owner node broke"),
            "{log}"
        );
        assert!(log.contains("relayed client re-attached"), "{log}");
        assert!(log.contains("asking for them again"), "{log}");
        assert!(log.contains("no longer keeps them"), "{log}");
        drop(server);
    })
    .await
}

/// A `session.sendAndWait` of B's client is in flight when its link to A breaks (A alive):
/// the turn goes on at A, B re-attaches the client to A over a new link naming the
/// `sendAndWait`, and A answers it there when the turn ends. The client gets the turn's
/// reply, not an error.
#[tokio::test]
async fn a_send_and_wait_in_flight_when_the_link_broke_ends_with_its_turn() {
    sdk::bounded(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let scenario = cluster_node::slow_scenario(dir.path());
        let (server, a, b, watcher, mut from_owner) =
            two_nodes_watching_with("agentwire.live.grp.>", &["--scenario", &scenario]).await;

        let (_client_a, id, session_a, _) = app_session(&a, None).await;
        let client_b = client(&b).await;
        let config = ResumeSessionConfig::new(id.clone())
            .with_permission_handler(Arc::new(ApproveAllHandler));
        let (session_b, first) = resume_relayed(&client_b, config, &mut from_owner).await;
        let session_b = Arc::new(session_b);
        let waiting = session_b.clone();
        let waited = tokio::spawn(async move {
            waiting
                .send_and_wait(MessageOptions::new("Reply slowly, please"))
                .await
        });
        // The turn started at A (its prompt is stored), then B's link breaks.
        cluster_node::until_prompted(&session_a, "slowly").await;
        cluster_node::inject_unsent_heartbeat(&watcher, first).await;

        let ended = tokio::time::timeout(Duration::from_secs(30), waited)
            .await
            .expect("sendAndWait ended")
            .expect("the task");
        let log = b.stderr();
        let reply = ended
            .unwrap_or_else(|e| panic!("sendAndWait failed: {e}\n---- node B ----\n{log}"))
            .expect("the turn's reply");
        assert_eq!(sdk::str_field(&reply, "content"), Some("Done slowly."));
        assert!(log.contains("relayed client re-attached"), "{log}");
        // The link did break mid-turn: the turn was still running when B re-attached.
        assert!(
            log.contains("the relay group from the owner node broke"),
            "{log}"
        );
        // The same connection carries on.
        let next = sdk::turn(&session_b, "hello again").await;
        assert_eq!(next.event_type, "assistant.message");
        drop(server);
    })
    .await
}

/// Three clients of node B on one session owned by node A: A sends each event **once** to B
/// (in B's relay group, naming the clients it is for), and every client receives every event
/// of the turn, in A's order.
#[tokio::test]
async fn an_event_for_several_clients_of_one_gateway_crosses_nats_once() {
    sdk::bounded(async {
        let (server, a, b, _watcher, mut from_owner) = two_nodes_watching("agentwire.live.>").await;

        let (_client_a, id, session_a, _) = app_session(&a, None).await;

        let mut clients = Vec::new();
        let mut recorders = Vec::new();
        let mut sessions = Vec::new();
        for _ in 0..3 {
            let client_b = client(&b).await;
            let config = ResumeSessionConfig::new(id.clone())
                .with_permission_handler(Arc::new(ApproveAllHandler));
            let prepared = client_b.prepare_resume_session(config).expect("prepare");
            recorders.push(sdk::Recorder::new(prepared.subscribe()));
            let session = sdk::within("session.resume via B", prepared.start())
                .await
                .expect("relayed resume");
            sessions.push(session);
            clients.push(client_b);
        }
        let reply = sdk::turn(&session_a, "hello").await;
        let mut turns = Vec::new();
        for recorder in &mut recorders {
            turns.push(recorder.turn().await);
        }
        // Every client got the whole turn (from its user.message; before it come the
        // session.resume events of the clients that attached later), in the same order.
        let turn_ids: Vec<Vec<String>> = turns
            .iter()
            .map(|t| {
                let start = t
                    .iter()
                    .position(|e| e.event_type == "user.message")
                    .expect("the turn's user.message");
                t[start..].iter().map(|e| e.id.clone()).collect()
            })
            .collect();
        assert!(turn_ids[0].len() >= 4, "{:?}", sdk::types(&turns[0]));
        assert!(
            turn_ids[0].contains(&reply.id),
            "{:?}",
            sdk::types(&turns[0])
        );
        assert_eq!(turn_ids[1], turn_ids[0]);
        assert_eq!(turn_ids[2], turn_ids[0]);

        // What crossed NATS from A to B's clients: each event of the turn in one message.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let mut messages = Vec::new();
        while let Ok(Some(m)) =
            tokio::time::timeout(std::time::Duration::from_millis(200), from_owner.next()).await
        {
            messages.push(m);
        }
        for event in &turn_ids[0] {
            let needle = format!("\"id\":\"{event}\"");
            let carrying: Vec<&str> = messages
                .iter()
                .filter(|m| {
                    m.payload
                        .windows(needle.len())
                        .any(|w| w == needle.as_bytes())
                })
                .map(|m| m.subject.as_str())
                .collect();
            assert_eq!(carrying.len(), 1, "event {event} crossed as {carrying:?}");
            assert!(carrying[0].contains(".grp."), "{carrying:?}");
        }
        drop(sessions);
        drop(clients);
        drop(server);
    })
    .await
}
