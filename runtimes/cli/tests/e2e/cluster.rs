//! Cluster mode end to end: two `agentwire --cluster` nodes on one real nats-server
//! (`$AGENTWIRE_NATS_SERVER`, or `target/nats/nats-server` installed by `scripts/install-test-servers`), driven by the
//! **official Copilot Rust SDK** over TCP.
//!
//! Node A runs a session through a client-tool turn and is killed with SIGKILL in the middle of
//! the next turn (a permission prompt open). A client of node B resumes the session once A's
//! lease has expired: B claims it, restores it from JetStream, ends the interrupted turn with
//! `session.error`, and the next turn works; `getMessages` on B holds every event the client of
//! A received, in order, nothing twice.
//!
//! Gateways: a client of node B drives a session owned by node A; when A dies (or stops) the
//! relayed client keeps its connection, follows the session to its new owner and carries on.

use crate::support::sdk_scenarios as sdk;

use crate::support;
use crate::support::wire as common;

use crate::support::fake_model;

use crate::support::nats;

use crate::support::cluster_node;

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_node::{client, ids, node, node_with, session_config, LEASE_TTL};
use fake_model::{FakeModel, FakeReply};
use github_copilot_sdk::handler::{PermissionHandler, PermissionResult};
use github_copilot_sdk::rpc::{SessionFsSetProviderConventions, SessionFsSetProviderRequest};
use github_copilot_sdk::session::Session;
use github_copilot_sdk::session_fs::{FileInfo, FsError, FsErrorKind, SessionFsProvider};
use github_copilot_sdk::tool::ToolHandler;
use github_copilot_sdk::types::{
    MessageOptions, PermissionRequestData, ProviderConfig, RequestId, ResumeSessionConfig,
    SessionConfig, SessionEvent, SessionId, ToolInvocation, ToolResult,
};
use github_copilot_sdk::Client;
use support::Agentwire;
use tokio::sync::Notify;

type BoxFut<'a, T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Approves the first `approve` permission prompts; later ones are never answered (the turn
/// waits on the client), and `asked` is notified of them.
struct ApproveFirst {
    approve: usize,
    seen: AtomicUsize,
    asked: Arc<Notify>,
}

impl PermissionHandler for ApproveFirst {
    fn handle<'life0, 'async_trait>(
        &'life0 self,
        _session_id: SessionId,
        _request_id: RequestId,
        _data: PermissionRequestData,
    ) -> BoxFut<'async_trait, PermissionResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        if self.seen.fetch_add(1, Ordering::SeqCst) < self.approve {
            return Box::pin(async { PermissionResult::approve_once() });
        }
        self.asked.notify_one();
        Box::pin(std::future::pending())
    }
}

/// Resumes `id` on `client`, retrying while the node cannot serve it yet (the dead owner's
/// lease has not expired).
async fn resume_when_claimable(client: &Client, id: &SessionId) -> Session {
    let tool_calls = Arc::new(Mutex::new(Vec::new()));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let config = ResumeSessionConfig::new(id.clone())
            .with_tools([sdk::weather_tool(tool_calls.clone())])
            .with_permission_handler(Arc::new(ApproveFirst {
                approve: usize::MAX,
                seen: AtomicUsize::new(0),
                asked: Arc::new(Notify::new()),
            }));
        match sdk::within("session.resume", client.resume_session(config)).await {
            Ok(session) => return session,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("session.resume on the surviving node kept failing: {e}"),
        }
    }
}

#[tokio::test]
async fn a_session_survives_kill_9_of_its_node_mid_turn() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let a = node(&url, "a").await;
        let b = node(&url, "b").await;
        takeover_mid_turn(a, b).await;
        drop(server);
    })
    .await
}

/// The same on a three-server JetStream cluster, the log stream and the lease bucket
/// replicated three times; the two nodes talk to different NATS servers.
#[tokio::test]
async fn a_session_survives_kill_9_of_its_node_on_a_three_server_nats_cluster() {
    sdk::bounded(async {
        let cluster = nats::NatsCluster::three();
        let urls = cluster.urls();
        // A fresh NATS cluster elects its JetStream leaders first (seconds on a loaded
        // machine): set the replicated stream and bucket up, as a node would, before the nodes
        // start, so their port lines come in time.
        jetstream_ready(&urls).await;
        let a = node_with(&urls.join(","), "a", "3").await;
        let b = node_with(&urls[1..].join(","), "b", "3").await;
        takeover_mid_turn(a, b).await;
        drop(cluster);
    })
    .await
}

/// Creates the cluster's stream and lease bucket (three replicas, the nodes' lease TTL) once
/// JetStream answers, and waits for their leaders.
async fn jetstream_ready(urls: &[String]) {
    jetstream_ready_with(urls, LEASE_TTL).await;
}

/// [`jetstream_ready`] with a lease TTL of `lease_ttl`; answers the engine it set them up with.
async fn jetstream_ready_with(
    urls: &[String],
    lease_ttl: &str,
) -> agentwire_cluster::nats::NatsEngine {
    let mut config = agentwire_cluster::nats::NatsConfig::new(3);
    config.lease_ttl = humantime::parse_duration(lease_ttl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let engine = loop {
        match agentwire_cluster::nats::NatsEngine::connect(urls, config.clone()).await {
            Ok(engine) => break engine,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "JetStream never became ready: {e}"
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    };
    assert!(engine.wait_for_leaders(Duration::from_secs(10)).await);
    engine
}

/// A client-tool turn on node `a`, a second turn stopped at a permission prompt, `kill -9` of
/// `a`, then a client of node `b` resumes: nothing the first client received is lost or
/// doubled, the interrupted turn ends with a reason, the next turn works.
async fn takeover_mid_turn(mut a: Agentwire, b: Agentwire) {
    {
        // Node A: a session with a client tool; one whole client-tool turn.
        let client_a = client(&a).await;
        let id = sdk::new_session_id();
        let tool_calls = Arc::new(Mutex::new(Vec::new()));
        let asked = Arc::new(Notify::new());
        let config = SessionConfig::default()
            .with_session_id(id.clone())
            .with_model("fake-model")
            .with_tools([sdk::weather_tool(tool_calls.clone())])
            .with_permission_handler(Arc::new(ApproveFirst {
                approve: 1,
                seen: AtomicUsize::new(0),
                asked: asked.clone(),
            }));
        let prepared = client_a.prepare_session(config).expect("prepare_session");
        let mut events = sdk::Recorder::new(prepared.subscribe());
        let session = sdk::within("session.create", prepared.start())
            .await
            .expect("session.create on node A");
        let reply = sdk::turn(&session, sdk::WEATHER_PROMPT).await;
        assert_eq!(sdk::str_field(&reply, "content"), Some(sdk::WEATHER_ANSWER));
        assert_eq!(tool_calls.lock().unwrap().len(), 1, "the client tool ran");

        // The next turn stops at a permission prompt nobody answers; node A dies there.
        sdk::within(
            "session.send",
            session.send(MessageOptions::new(sdk::WEATHER_PROMPT)),
        )
        .await
        .expect("session.send on node A");
        sdk::within("the second permission prompt", asked.notified()).await;
        a.child.start_kill().expect("SIGKILL node A");
        a.exit(sdk::STEP).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        events.drain();
        let received: Vec<SessionEvent> = events
            .seen
            .iter()
            .filter(|e| e.ephemeral.is_none())
            .cloned()
            .collect();
        assert!(
            received
                .iter()
                .any(|e| e.event_type == "permission.requested"),
            "{:?}",
            sdk::types(&received)
        );

        // Node B: the client resumes there; B claims the session and restores it.
        let client_b = client(&b).await;
        let session_b = resume_when_claimable(&client_b, &id).await;
        let history = sdk::within("session.getMessages on node B", session_b.get_events())
            .await
            .expect("getMessages");
        let received_ids = ids(&received);
        assert_eq!(
            ids(&history)[..received_ids.len()],
            received_ids[..],
            "every event the client of node A received is in the log, in order"
        );
        let unique: HashSet<&str> = ids(&history).into_iter().collect();
        assert_eq!(unique.len(), history.len(), "no event is stored twice");
        sdk::assert_chain(&history, None);
        let after: Vec<&str> = history[received.len()..]
            .iter()
            .map(|e| e.event_type.as_str())
            .collect();
        assert_eq!(
            after,
            ["permission.completed", "session.error", "session.resume"],
            "the interrupted turn ends with a reason, then the resume"
        );
        let error = &history[received.len() + 1];
        assert_eq!(sdk::str_field(error, "errorType"), Some("interrupted"));
        assert!(
            sdk::str_field(error, "message").is_some_and(|m| m.contains("node b")),
            "{:?}",
            error.data
        );

        // The session carries on at node B: a whole client-tool turn.
        let reply = sdk::turn(&session_b, sdk::WEATHER_PROMPT).await;
        assert_eq!(sdk::str_field(&reply, "content"), Some(sdk::WEATHER_ANSWER));
        let again = sdk::within("session.getMessages", session_b.get_events())
            .await
            .expect("getMessages");
        assert!(again.len() > history.len());
        assert_eq!(ids(&again)[..history.len()], ids(&history)[..]);
        sdk::assert_chain(&again, None);
    }
}

/// Approves every permission prompt.
fn approve_all() -> Arc<ApproveFirst> {
    Arc::new(ApproveFirst {
        approve: usize::MAX,
        seen: AtomicUsize::new(0),
        asked: Arc::new(Notify::new()),
    })
}

/// Gateways: a client of node B drives a session owned by live node A through a client-tool
/// turn; A's own client sees that turn too, and both nodes answer getMessages alike.
#[tokio::test]
async fn a_client_of_node_b_drives_a_session_owned_by_node_a() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let a = node(&url, "a").await;
        let b = node(&url, "b").await;

        let client_a = client(&a).await;
        let id = sdk::new_session_id();
        let calls_a = Arc::new(Mutex::new(Vec::new()));
        let config = SessionConfig::default()
            .with_session_id(id.clone())
            .with_model("fake-model")
            .with_tools([sdk::weather_tool(calls_a.clone())])
            .with_permission_handler(approve_all());
        let prepared = client_a.prepare_session(config).expect("prepare_session");
        let mut events_a = sdk::Recorder::new(prepared.subscribe());
        let session_a = sdk::within("session.create", prepared.start())
            .await
            .expect("session.create on node A");
        sdk::turn(&session_a, "hello").await;
        events_a.turn().await;

        // Node B relays its client to A, which owns the session.
        let client_b = client(&b).await;
        let calls_b = Arc::new(Mutex::new(Vec::new()));
        let config = ResumeSessionConfig::new(id.clone())
            .with_tools([sdk::weather_tool(calls_b.clone())])
            .with_permission_handler(approve_all());
        let session_b = sdk::within("session.resume on node B", client_b.resume_session(config))
            .await
            .expect("session.resume of a session owned by a live node");
        let reply = sdk::turn(&session_b, sdk::WEATHER_PROMPT).await;
        assert_eq!(sdk::str_field(&reply, "content"), Some(sdk::WEATHER_ANSWER));
        // Both clients declared the tool and see the request; the first answer wins.
        let tool_calls = calls_a.lock().unwrap().len() + calls_b.lock().unwrap().len();
        assert!(tool_calls >= 1, "a client ran the tool");

        // A's client saw B's turn, and both nodes hold the same history.
        let seen_by_a = events_a.turn().await;
        assert!(
            seen_by_a.iter().any(|e| e.id == reply.id),
            "{:?}",
            sdk::types(&seen_by_a)
        );
        let history_b = sdk::within("getMessages via B", session_b.get_events())
            .await
            .expect("getMessages");
        let history_a = sdk::within("getMessages on A", session_a.get_events())
            .await
            .expect("getMessages");
        assert_eq!(ids(&history_a), ids(&history_b));
        assert!(history_b.iter().any(|e| e.id == reply.id));
        let completed = history_b
            .iter()
            .filter(|e| e.event_type == "external_tool.completed")
            .count();
        assert_eq!(completed, 1, "the tool call completed once");
        sdk::assert_chain(&history_b, None);
        drop(server);
    })
    .await
}

/// A session created on node `a` by a client of `a` with `config` (the caller's adjustments of
/// the tests' session config with id `id`, every permission approved); the client and the
/// session, which the caller keeps alive.
async fn session_on(
    a: &Agentwire,
    id: &SessionId,
    adjust: impl FnOnce(SessionConfig) -> SessionConfig,
) -> (Client, Session) {
    let client_a = client(a).await;
    let config = adjust(session_config(id).with_permission_handler(approve_all()));
    let session = sdk::within("session.create on node A", client_a.create_session(config))
        .await
        .expect("session.create on node A");
    (client_a, session)
}

/// The prompt of `len` bytes among `history`'s `user.message`s.
fn prompt_of_len(history: &[SessionEvent], len: usize) -> Option<&str> {
    history
        .iter()
        .filter(|e| e.event_type == "user.message")
        .filter_map(|e| sdk::str_field(e, "content"))
        .find(|content| content.len() == len)
}

/// `kill -9` of owner `a`; returns once gateway `b` re-attached its client (as it logs).
async fn kill_owner_until_reattached(a: &mut Agentwire, b: &Agentwire) {
    a.child.start_kill().expect("SIGKILL node A");
    a.exit(sdk::STEP).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !b.stderr().contains("relayed client re-attached") {
        assert!(Instant::now() < deadline, "{}", b.stderr());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Gateways carry frames larger than NATS's `max_payload` (1 MiB by default) both ways, and
/// the log stores events larger than it: a relayed client of node B sends a 1.5 MiB prompt to
/// the session owned by node A, the turn runs, and the history read back through B (a
/// response over 1.5 MiB) holds the prompt whole. Then A is killed (`kill -9`): B takes the
/// session over, restoring it from the log, where the prompt's `user.message` is stored in
/// pieces; B's history holds it whole, and everything before, in order. Before the kill, B
/// lists the session from the log with the large prompt's start as its summary.
#[tokio::test]
async fn a_relayed_client_sends_and_receives_frames_larger_than_max_payload() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;

        let id = sdk::new_session_id();
        let _on_a = session_on(&a, &id, |c| c).await;

        let client_b = client(&b).await;
        let config = ResumeSessionConfig::new(id.clone()).with_permission_handler(approve_all());
        let session_b = sdk::within("session.resume on node B", client_b.resume_session(config))
            .await
            .expect("session.resume of a session owned by a live node");
        let prompt: String = "large prompt through the gateway. "
            .chars()
            .cycle()
            .take(1536 * 1024)
            .collect();
        sdk::turn(&session_b, &prompt).await;
        let history = sdk::within("getMessages via B", session_b.get_events())
            .await
            .expect("getMessages");
        let sent = prompt_of_len(&history, prompt.len());
        assert!(
            sent == Some(prompt.as_str()),
            "the prompt reached the owner whole and came back in the history"
        );
        // The link is still up: a small turn works after the large frames.
        let reply = sdk::turn(&session_b, "hello").await;
        assert_eq!(reply.event_type, "assistant.message");
        let before = sdk::within("getMessages via B", session_b.get_events())
            .await
            .expect("getMessages");
        // B lists the session from the log (it does not hold it): its summary is the first
        // prompt's start, read from the event stored in pieces.
        let summary: String = prompt.chars().take(200).collect();
        listed_all(&client_b, &[(id.clone(), summary.as_str())], "b").await;

        kill_owner_until_reattached(&mut a, &b).await;
        let after = sdk::within("getMessages on B", session_b.get_events())
            .await
            .expect("getMessages after the takeover");
        assert!(
            after.len() >= before.len() && ids(&after)[..before.len()] == ids(&before)[..],
            "the new owner restored every event, in order: {:?} after {:?}",
            sdk::types(&after),
            sdk::types(&before)
        );
        let restored = prompt_of_len(&after, prompt.len());
        assert!(
            restored == Some(prompt.as_str()),
            "the large prompt was restored whole from the log"
        );
        let reply = sdk::turn(&session_b, "after the takeover").await;
        assert_eq!(reply.event_type, "assistant.message");
        drop(server);
    })
    .await
}

/// Nodes with `COPILOT_CONNECTION_TOKEN`: a client that authenticated with node B is
/// relayed to node A, which owns its session, as an authenticated connection (B vouches for
/// it); a client that did not authenticate is refused by B before anything is relayed.
#[tokio::test]
async fn a_client_authenticated_by_node_b_is_authenticated_at_the_owner() {
    use common::{frame, ping_ok};
    use tokio::io::AsyncWriteExt;
    const TOKEN: &str = "cluster-s3cret";
    let launch = |url: String, id: &'static str| async move {
        Agentwire::launch_with_token(
            [
                "--headless",
                "--port",
                "0",
                "--cluster",
                &url,
                "--node-id",
                id,
                "--cluster-lease-ttl",
                LEASE_TTL,
                "--seed",
                "7",
            ],
            Some(TOKEN),
        )
        .await
    };
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let a = launch(server.url(), "a").await;
        let b = launch(server.url(), "b").await;
        let request = |id: u64, method: &str, params: serde_json::Value| {
            frame(&serde_json::json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
        };

        // The session lives on A.
        let (mut ra, mut wa) = a.raw().await;
        wa.write_all(&request(1, "connect", serde_json::json!({"token": TOKEN})))
            .await
            .unwrap();
        assert!(ra.response(1).await.get("result").is_some());
        let session = sdk::new_session_id().to_string();
        wa.write_all(&request(
            2,
            "session.create",
            serde_json::json!({"sessionId": session}),
        ))
        .await
        .unwrap();
        let created = ra.response(2).await;
        assert_eq!(
            created["result"]["sessionId"],
            session.as_str(),
            "{created}"
        );

        // Without the token, B refuses the request itself.
        let (mut rx, mut wx) = b.raw().await;
        let messages = serde_json::json!({"sessionId": session});
        wx.write_all(&request(1, "session.getMessages", messages.clone()))
            .await
            .unwrap();
        let refused = rx.response(1).await;
        assert_eq!(refused["error"]["code"], -32001, "{refused}");

        // With it, B relays the connection to A, which serves it.
        let (mut rb, mut wb) = b.raw().await;
        wb.write_all(&request(1, "connect", serde_json::json!({"token": TOKEN})))
            .await
            .unwrap();
        assert!(rb.response(1).await.get("result").is_some());
        wb.write_all(&request(2, "session.getMessages", messages))
            .await
            .unwrap();
        let answer = rb.response(2).await;
        let events = answer["result"]["events"]
            .as_array()
            .unwrap_or_else(|| panic!("getMessages relayed to the owner: {answer}"));
        assert!(
            events.iter().any(|e| e["type"] == "session.start"),
            "{answer}"
        );
        assert!(
            b.stderr().contains("relayed to the owner node"),
            "the request went through the gateway"
        );
        ping_ok(&mut rb, &mut wb, 3).await;
        drop(server);
    })
    .await
}

/// Takeover through a gateway, seen from a new connection: node A dies mid-turn while a client
/// of node B is relayed to it; a fresh connection to B resumes the session (waiting for A's
/// lease to expire), B has claimed it, and nothing the first client received is lost or
/// doubled. (The first client keeps its connection, re-attached silently: see
/// `a_relayed_client_keeps_its_connection_when_the_owner_dies_mid_turn`.)
#[tokio::test]
async fn a_relayed_client_resumes_on_its_own_node_after_the_owner_dies() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;

        let client_a = client(&a).await;
        let id = sdk::new_session_id();
        let never = |asked: &Arc<Notify>| {
            Arc::new(ApproveFirst {
                approve: 0,
                seen: AtomicUsize::new(0),
                asked: asked.clone(),
            })
        };
        let asked_a = Arc::new(Notify::new());
        let config = SessionConfig::default()
            .with_session_id(id.clone())
            .with_model("fake-model")
            .with_tools([sdk::weather_tool(Arc::new(Mutex::new(Vec::new())))])
            .with_permission_handler(never(&asked_a));
        let session_a = sdk::within("session.create", client_a.create_session(config))
            .await
            .expect("session.create on node A");
        sdk::turn(&session_a, "hello").await;

        let client_b = client(&b).await;
        let asked_b = Arc::new(Notify::new());
        let config = ResumeSessionConfig::new(id.clone())
            .with_tools([sdk::weather_tool(Arc::new(Mutex::new(Vec::new())))])
            .with_permission_handler(never(&asked_b));
        let prepared = client_b.prepare_resume_session(config).expect("prepare");
        let mut events_b = sdk::Recorder::new(prepared.subscribe());
        let session_b = sdk::within("session.resume via B", prepared.start())
            .await
            .expect("relayed resume");
        sdk::within(
            "session.send via B",
            session_b.send(MessageOptions::new(sdk::WEATHER_PROMPT)),
        )
        .await
        .expect("session.send");
        sdk::within("the permission prompt at B's client", asked_b.notified()).await;
        a.child.start_kill().expect("SIGKILL node A");
        a.exit(sdk::STEP).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        events_b.drain();
        let received: Vec<SessionEvent> = events_b
            .seen
            .iter()
            .filter(|e| e.ephemeral.is_none())
            .cloned()
            .collect();
        assert!(
            received
                .iter()
                .any(|e| e.event_type == "permission.requested"),
            "{:?}",
            sdk::types(&received)
        );

        // A fresh connection to B: the resume waits until A's lease is gone, then B claims.
        drop(session_b);
        let client_b2 = client(&b).await;
        let session = resume_when_claimable(&client_b2, &id).await;
        let history = sdk::within("getMessages", session.get_events())
            .await
            .expect("getMessages");
        let position = |id: &str| history.iter().position(|e| e.id == id);
        let mut last = None;
        for event in &received {
            let at = position(&event.id)
                .unwrap_or_else(|| panic!("{} {} is not in the log", event.event_type, event.id));
            assert!(last < Some(at), "in order");
            last = Some(at);
        }
        let unique: HashSet<&str> = ids(&history).into_iter().collect();
        assert_eq!(unique.len(), history.len(), "no event is stored twice");
        sdk::assert_chain(&history, None);
        let tail: Vec<&str> = history[history.len() - 3..]
            .iter()
            .map(|e| e.event_type.as_str())
            .collect();
        assert_eq!(
            tail,
            ["permission.completed", "session.error", "session.resume"]
        );
        let reply = sdk::turn(&session, sdk::WEATHER_PROMPT).await;
        assert_eq!(sdk::str_field(&reply, "content"), Some(sdk::WEATHER_ANSWER));
        drop(server);
    })
    .await
}

/// A paused owner is fenced: node A is stopped (SIGSTOP) past its lease, node B takes the
/// session over, then A is continued and asked for another turn by its old client. A's
/// append is refused (the claim of B is the fence), so none of that turn's persisted events
/// reaches A's client, and A shuts down.
#[tokio::test]
async fn a_paused_owner_is_fenced_and_its_client_sees_nothing_it_could_not_store() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;

        let client_a = client(&a).await;
        let id = sdk::new_session_id();
        let config = session_config(&id).with_permission_handler(approve_all());
        let prepared = client_a.prepare_session(config).expect("prepare_session");
        let mut events_a = sdk::Recorder::new(prepared.subscribe());
        let session_a = sdk::within("session.create", prepared.start())
            .await
            .expect("session.create on node A");
        sdk::turn(&session_a, "hello").await;

        a.signal("STOP");
        let client_b = client(&b).await;
        let session_b = resume_when_claimable(&client_b, &id).await;
        sdk::turn(&session_b, "hello from b").await;
        a.signal("CONT");

        // A still believes it owns the session; its turn cannot be stored.
        let _ = session_a.send(MessageOptions::new("late prompt")).await;
        a.exit(sdk::STEP).await;
        events_a.drain();
        let history = sdk::within("getMessages on B", session_b.get_events())
            .await
            .expect("getMessages");
        let stored: HashSet<&str> = ids(&history).into_iter().collect();
        for event in events_a.seen.iter().filter(|e| e.ephemeral.is_none()) {
            assert!(
                stored.contains(event.id.as_str()),
                "node A's client received {} {}, which is not in the log",
                event.event_type,
                event.id
            );
        }
        assert!(
            !history
                .iter()
                .any(|e| sdk::str_field(e, "content") == Some("late prompt")),
            "the fenced owner stored nothing"
        );
        assert!(
            a.stderr().contains("fenced") || a.stderr().contains("lease"),
            "{}",
            a.stderr()
        );
        drop(server);
    })
    .await
}

/// Takeover without a client: once node A is dead and its lease gone, node B (the only live
/// node, so the preferred claimant) claims A's session on its own and lists it.
#[tokio::test]
async fn a_dead_nodes_session_is_taken_over_without_a_client_asking() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;
        let client_a = client(&a).await;
        let id = sdk::new_session_id();
        let config = session_config(&id).with_permission_handler(approve_all());
        let session = sdk::within("session.create", client_a.create_session(config))
            .await
            .expect("session.create on node A");
        sdk::turn(&session, "remember me").await;
        a.child.start_kill().expect("SIGKILL node A");
        a.exit(sdk::STEP).await;

        let client_b = client(&b).await;
        // The session is listed from the log before and after the takeover: wait for the
        // takeover itself, then check B lists it.
        let deadline = Instant::now() + Duration::from_secs(15);
        while !b.stderr().contains("session taken over") {
            assert!(
                Instant::now() < deadline,
                "node B never took the session over: {}",
                b.stderr()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let listed = sdk::within("session.list on B", client_b.list_sessions(None))
            .await
            .expect("session.list");
        let meta = listed
            .iter()
            .find(|s| s.session_id == id)
            .expect("B lists the session it took over");
        assert_eq!(meta.summary.as_deref(), Some("remember me"));
        drop(server);
    })
    .await
}

/// Leaves the first permission prompt unanswered (notifying `asked`), approves the later ones.
struct HoldFirst {
    seen: AtomicUsize,
    asked: Arc<Notify>,
}

impl PermissionHandler for HoldFirst {
    fn handle<'life0, 'async_trait>(
        &'life0 self,
        _session_id: SessionId,
        _request_id: RequestId,
        _data: PermissionRequestData,
    ) -> BoxFut<'async_trait, PermissionResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        if self.seen.fetch_add(1, Ordering::SeqCst) > 0 {
            return Box::pin(async { PermissionResult::approve_once() });
        }
        self.asked.notify_one();
        Box::pin(std::future::pending())
    }
}

/// Takeover through a gateway, keeping the connection: a client of node B is relayed to node
/// A, which owns two sessions the client resumed, and waits on a permission prompt in one of
/// them when A is killed. The same
/// client object, without reconnecting, sees the interrupted turn end (`session.error`, then
/// `session.idle`), then runs a whole client-tool turn (its permission handler and client tool
/// re-attached at the new owner, node B). It received every durable event once, in the log's
/// order, and `getMessages` holds each once. The other session, idle, carries on as well.
#[tokio::test]
async fn a_relayed_client_keeps_its_connection_when_the_owner_dies_mid_turn() {
    relayed_client_keeps_its_connection("KILL", Hold::Permission).await;
}

/// The same when the turn waits on B's client running a client tool: the interrupted call
/// completes as failed, and the next turn's call of the same tool is answered.
#[tokio::test]
async fn a_relayed_client_keeps_its_connection_when_the_owner_dies_during_a_client_tool_call() {
    relayed_client_keeps_its_connection("KILL", Hold::Tool).await;
}

/// The same when the owner stops gracefully (SIGTERM, e.g. a rolling restart): its shutdown
/// notice is not passed on to the relayed client, which follows the session once the owner's
/// lease is gone.
#[tokio::test]
async fn a_relayed_client_keeps_its_connection_when_the_owner_is_stopped_mid_turn() {
    relayed_client_keeps_its_connection("TERM", Hold::Permission).await;
}

/// What B's client leaves unanswered in the first turn.
#[derive(Clone, Copy, PartialEq)]
enum Hold {
    Permission,
    Tool,
}

/// Leaves the first call unanswered (notifying `asked`), answers the later ones; records all.
struct HoldFirstTool {
    calls: Arc<Mutex<Vec<ToolInvocation>>>,
    asked: Arc<Notify>,
}

impl ToolHandler for HoldFirstTool {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        invocation: ToolInvocation,
    ) -> BoxFut<'async_trait, Result<ToolResult, github_copilot_sdk::Error>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let first = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(invocation);
            calls.len() == 1
        };
        if first {
            self.asked.notify_one();
            return Box::pin(std::future::pending());
        }
        Box::pin(async { Ok(ToolResult::Text(sdk::TOOL_REPLY.to_string())) })
    }
}

/// Stops node A with `signal` while a client of node B waits on a permission prompt or a
/// client tool call (`hold`) in A's session (see the tests above).
async fn relayed_client_keeps_its_connection(signal: &str, hold: Hold) {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;

        // A's own client never answers prompts and has no tools: B's client is asked.
        let client_a = client(&a).await;
        let id = sdk::new_session_id();
        let config = session_config(&id).with_permission_handler(Arc::new(ApproveFirst {
            approve: 0,
            seen: AtomicUsize::new(0),
            asked: Arc::new(Notify::new()),
        }));
        let session_a = sdk::within("session.create", client_a.create_session(config))
            .await
            .expect("session.create on node A");
        sdk::turn(&session_a, "hello").await;
        // A second session of A, idle when A dies, on the same relayed connection.
        let idle_id = sdk::new_session_id();
        let config = session_config(&idle_id).with_permission_handler(approve_all());
        let idle_a = sdk::within("session.create", client_a.create_session(config))
            .await
            .expect("second session.create on node A");
        sdk::turn(&idle_a, "idle").await;

        let client_b = client(&b).await;
        let config =
            ResumeSessionConfig::new(idle_id.clone()).with_permission_handler(approve_all());
        let idle_b = sdk::within(
            "second session.resume via B",
            client_b.resume_session(config),
        )
        .await
        .expect("relayed resume");
        let calls_b = Arc::new(Mutex::new(Vec::new()));
        let asked_b = Arc::new(Notify::new());
        let config = match hold {
            Hold::Permission => ResumeSessionConfig::new(id.clone())
                .with_tools([sdk::weather_tool(calls_b.clone())])
                .with_permission_handler(Arc::new(HoldFirst {
                    seen: AtomicUsize::new(0),
                    asked: asked_b.clone(),
                })),
            Hold::Tool => ResumeSessionConfig::new(id.clone())
                .with_tools([
                    sdk::weather_declaration().with_handler(Arc::new(HoldFirstTool {
                        calls: calls_b.clone(),
                        asked: asked_b.clone(),
                    })),
                ])
                .with_permission_handler(approve_all()),
        };
        let prepared = client_b.prepare_resume_session(config).expect("prepare");
        let mut events_b = sdk::Recorder::new(prepared.subscribe());
        let session_b = sdk::within("session.resume via B", prepared.start())
            .await
            .expect("relayed resume");
        sdk::within(
            "session.send via B",
            session_b.send(MessageOptions::new(sdk::WEATHER_PROMPT)),
        )
        .await
        .expect("session.send");
        sdk::within("B's client asked to answer", asked_b.notified()).await;
        a.signal(signal);
        a.exit(sdk::STEP).await;

        // A request sent while A is dead but its lease lives goes to A, which never answers:
        // the gateway answers it once, with the reason (served by the new owner instead if B
        // already saw the lease expire).
        match sdk::within("getMessages sent to the dead owner", idle_b.get_events()).await {
            Ok(history) => assert!(!history.is_empty()),
            Err(e) => assert!(
                e.to_string().contains("node a owning the session stopped"),
                "{e}"
            ),
        }

        // The same client: the interrupted turn ends with a reason, then idle.
        let error = events_b.wait_for("session.error").await;
        assert_eq!(sdk::str_field(&error, "errorType"), Some("interrupted"));
        assert!(
            sdk::str_field(&error, "message").is_some_and(|m| m.contains("node b")),
            "{:?}",
            error.data
        );
        let idle = events_b.wait_for("session.idle").await;
        assert_eq!(idle.parent_id.as_deref(), Some(error.id.as_str()));
        events_b.turn().await;

        // The next turn on the same session object: asked for permission (approved now) and
        // for the client tool, answered at the new owner.
        let reply = sdk::turn(&session_b, sdk::WEATHER_PROMPT).await;
        assert_eq!(sdk::str_field(&reply, "content"), Some(sdk::WEATHER_ANSWER));
        let calls = match hold {
            Hold::Permission => 1,
            Hold::Tool => 2,
        };
        assert_eq!(
            calls_b.lock().unwrap().len(),
            calls,
            "B's client ran the tool"
        );
        events_b.turn().await;
        events_b.drain();

        let history = sdk::within("getMessages via B", session_b.get_events())
            .await
            .expect("getMessages");
        let first = received_once_in_log_order(&history, &events_b.seen);
        let kinds = sdk::types(&history[first..]);
        let error_at = kinds
            .iter()
            .position(|k| *k == "session.error")
            .expect("session.error");
        let closed = match hold {
            Hold::Permission => "permission.completed",
            Hold::Tool => "tool.execution_complete",
        };
        assert_eq!(kinds[error_at + 1], "user.message", "{kinds:?}");
        let closed_at = if signal == "KILL" {
            // Killed: the new owner closed what A left open, right before the error.
            assert_eq!(kinds[error_at - 1], closed, "{kinds:?}");
            error_at - 1
        } else {
            // Stopped: A may have closed the open prompt or call itself while shutting down
            // (and stored its `session.shutdown`); either way it is closed before the error.
            let closed_at = kinds[..error_at]
                .iter()
                .rposition(|k| *k == closed)
                .expect("the held request was closed");
            assert!(
                kinds[closed_at + 1..error_at]
                    .iter()
                    .all(|k| matches!(*k, "tool.execution_complete" | "session.shutdown")),
                "{kinds:?}"
            );
            closed_at
        };
        if hold == Hold::Tool {
            let failed = &history[first + closed_at];
            assert_eq!(failed.data["success"], false, "{:?}", failed.data);
            assert!(kinds[..error_at].contains(&"external_tool.completed"));
        }
        assert!(
            !kinds[error_at..].contains(&"session.resume"),
            "the re-attachment adds no session.resume event: {kinds:?}"
        );
        assert!(b.stderr().contains("re-attached"), "{}", b.stderr());

        // The idle session carries on too, on the same connection.
        let before = sdk::within("getMessages", idle_b.get_events())
            .await
            .expect("getMessages");
        let reply = sdk::turn(&idle_b, "still here").await;
        let after = sdk::within("getMessages", idle_b.get_events())
            .await
            .expect("getMessages");
        assert_eq!(ids(&after)[..before.len()], ids(&before)[..]);
        assert!(after[before.len()..].iter().any(|e| e.id == reply.id));
        assert!(
            !sdk::types(&after).contains(&"session.error"),
            "nothing was interrupted in the idle session"
        );
        let unique: HashSet<&str> = ids(&after).into_iter().collect();
        assert_eq!(unique.len(), after.len(), "no event is stored twice");
        drop(server);
    })
    .await
}

/// The same with three nodes: while a client of node B waits on a permission prompt in a
/// session relayed to node A, A is killed and a client of node C resumes the session at once,
/// so C (polling for A's lease to expire) usually claims it before B's gateway notices: B then
/// re-attaches its client to C over a new link (or to itself if it claimed first). Either way
/// B's client keeps its connection, sees the interrupted turn end and runs the next turn, and
/// received every durable event once, in the log's order.
#[tokio::test]
async fn a_relayed_client_follows_its_session_to_whichever_node_takes_it_over() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;
        let c = node(&url, "c").await;

        let client_a = client(&a).await;
        let id = sdk::new_session_id();
        let config = session_config(&id).with_permission_handler(Arc::new(ApproveFirst {
            approve: 0,
            seen: AtomicUsize::new(0),
            asked: Arc::new(Notify::new()),
        }));
        let session_a = sdk::within("session.create", client_a.create_session(config))
            .await
            .expect("session.create on node A");
        sdk::turn(&session_a, "hello").await;

        let client_b = client(&b).await;
        let calls_b = Arc::new(Mutex::new(Vec::new()));
        let asked_b = Arc::new(Notify::new());
        let config = ResumeSessionConfig::new(id.clone())
            .with_tools([sdk::weather_tool(calls_b.clone())])
            .with_permission_handler(Arc::new(HoldFirst {
                seen: AtomicUsize::new(0),
                asked: asked_b.clone(),
            }));
        let prepared = client_b.prepare_resume_session(config).expect("prepare");
        let mut events_b = sdk::Recorder::new(prepared.subscribe());
        let session_b = sdk::within("session.resume via B", prepared.start())
            .await
            .expect("relayed resume");
        sdk::within(
            "session.send via B",
            session_b.send(MessageOptions::new(sdk::WEATHER_PROMPT)),
        )
        .await
        .expect("session.send");
        sdk::within("the permission prompt at B's client", asked_b.notified()).await;
        a.child.start_kill().expect("SIGKILL node A");
        a.exit(sdk::STEP).await;

        // C's client resumes while A's lease lives: C claims the moment it expires.
        let client_c = client(&c).await;
        let session_c = resume_when_claimable(&client_c, &id).await;

        let error = events_b.wait_for("session.error").await;
        assert_eq!(sdk::str_field(&error, "errorType"), Some("interrupted"));
        let idle = events_b.wait_for("session.idle").await;
        assert_eq!(idle.parent_id.as_deref(), Some(error.id.as_str()));
        events_b.turn().await;
        let claimed_by_c = c.stderr().contains("session taken over");
        eprintln!(
            "session taken over by node {}",
            if claimed_by_c { "c" } else { "b" }
        );

        let reply = sdk::turn(&session_b, sdk::WEATHER_PROMPT).await;
        assert_eq!(sdk::str_field(&reply, "content"), Some(sdk::WEATHER_ANSWER));
        events_b.turn().await;
        events_b.drain();

        let history = sdk::within("getMessages via B", session_b.get_events())
            .await
            .expect("getMessages");
        let history_c = sdk::within("getMessages via C", session_c.get_events())
            .await
            .expect("getMessages");
        assert_eq!(ids(&history), ids(&history_c));
        received_once_in_log_order(&history, &events_b.seen);
        let errors = history
            .iter()
            .filter(|e| e.event_type == "session.error")
            .count();
        assert_eq!(errors, 1, "{:?}", sdk::types(&history));
        drop(server);
    })
    .await
}

/// The summaries (`summary`, `startTime`) `client`'s node lists, once every session of
/// `expected` is listed with its summary.
async fn listed_all(
    client: &Client,
    expected: &[(SessionId, &str)],
    node: &str,
) -> Vec<github_copilot_sdk::types::SessionMetadata> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = sdk::within("session.list", client.list_sessions(None))
            .await
            .expect("session.list");
        let all = expected.iter().all(|(id, summary)| {
            listed
                .iter()
                .any(|m| m.session_id == *id && m.summary.as_deref() == Some(*summary))
        });
        if all {
            return listed;
        }
        assert!(
            Instant::now() < deadline,
            "node {node} never listed every session of the cluster: {:?}",
            listed
                .iter()
                .map(|m| (&m.session_id, &m.summary))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `client`'s node lists session `id` with the `startTime`, `modifiedTime` and
/// `summary` of `reference` (its owner's list).
async fn same_metadata(
    client: &Client,
    reference: &[github_copilot_sdk::types::SessionMetadata],
    id: &SessionId,
    node: &str,
) {
    let fields = |list: &[github_copilot_sdk::types::SessionMetadata]| {
        list.iter().find(|m| m.session_id == *id).map(|m| {
            (
                m.start_time.clone(),
                m.modified_time.clone(),
                m.summary.clone(),
            )
        })
    };
    let want = fields(reference).expect("the owner lists its session");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = sdk::within("session.list", client.list_sessions(None))
            .await
            .expect("session.list");
        let got = fields(&listed);
        if got.as_ref() == Some(&want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {node} lists {id:?} as {got:?}, its owner as {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `session.list` is cluster-wide: sessions created on nodes A and B are listed by A, B and C
/// with the metadata their owner lists (summary, start and modified times); `getMetadata` of B's session
/// works from C; after a `kill -9` of A, its sessions are still listed by B and C, before and
/// after they are taken over.
#[tokio::test]
async fn session_list_on_any_node_lists_every_session_of_the_cluster() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;
        let c = node(&url, "c").await;

        let mut expected = Vec::new();
        let mut sessions = Vec::new();
        let (client_a, client_b) = (client(&a).await, client(&b).await);
        for (on, prompt) in [
            (&client_a, "first on a"),
            (&client_a, "second on a"),
            (&client_b, "first on b"),
        ] {
            let id = sdk::new_session_id();
            let config = session_config(&id).with_permission_handler(approve_all());
            let session = sdk::within("session.create", on.create_session(config))
                .await
                .expect("session.create");
            sdk::turn(&session, prompt).await;
            expected.push((id, prompt));
            sessions.push(session);
        }

        let own_a = listed_all(&client_a, &expected, "a").await;
        let own_b = listed_all(&client_b, &expected, "b").await;
        let client_c = client(&c).await;
        listed_all(&client_c, &expected, "c").await;
        // Every node lists each session with the metadata its owner lists (once the last
        // events are read from the log).
        let owners = [(&own_a, &expected[..2]), (&own_b, &expected[2..])];
        for (node, lister) in [("a", &client_a), ("b", &client_b), ("c", &client_c)] {
            for (own, sessions) in owners {
                for (id, _) in sessions {
                    same_metadata(lister, own, id, node).await;
                }
            }
        }

        // getMetadata of B's session from C (the connection is relayed to B).
        let meta_client = client(&c).await;
        let meta = sdk::within(
            "session.getMetadata on C",
            meta_client.get_session_metadata(&expected[2].0),
        )
        .await
        .expect("getMetadata")
        .expect("C finds B's session");
        assert_eq!(meta.summary.as_deref(), Some("first on b"));

        // A dies: its sessions stay listed, then are taken over and still listed.
        a.child.start_kill().expect("SIGKILL node A");
        a.exit(sdk::STEP).await;
        listed_all(&client_b, &expected, "b").await;
        listed_all(&client_c, &expected, "c").await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(b.stderr().contains("session taken over")
            || c.stderr().contains("session taken over"))
        {
            assert!(
                Instant::now() < deadline,
                "A's sessions were never taken over"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        listed_all(&client_b, &expected, "b").await;
        listed_all(&client_c, &expected, "c").await;
        drop(sessions);
        drop(server);
    })
    .await
}

/// The lease TTL of the stream-leader test: longer than a JetStream leader election, so the
/// node keeps its lease while the log stream (and maybe the lease bucket) elects a new leader.
const ELECTION_PROOF_TTL: &str = "20s";

/// `kill -9` of the log stream's NATS leader mid-turn, under agentwire: three NATS servers,
/// R3, one agentwire node connected to the two servers that do not lead the log stream; a
/// client's turn persists an event every 100 ms while the leader is killed. The turn ends
/// (completed, or with `session.error`) with `session.idle`, the next turn works, and
/// `getMessages` holds every durable event the client received, in order, none twice.
#[tokio::test]
async fn killing_the_nats_stream_leader_mid_turn_loses_no_event_a_client_received() {
    let test = async {
        let mut cluster = nats::NatsCluster::three();
        let urls = cluster.urls();
        let engine = jetstream_ready_with(&urls, ELECTION_PROOF_TTL).await;
        let leader = log_leader(&engine).await;
        let others: Vec<String> = cluster
            .servers
            .iter()
            .filter(|s| s.name != leader)
            .map(|s| s.url())
            .collect();
        let dir = tempfile::tempdir().expect("temp dir");
        let scenario = dir.path().join("scenario.json");
        let mut steps: Vec<serde_json::Value> = Vec::new();
        for i in 0..40 {
            steps.push(serde_json::json!({"event": "session.info",
                "data": {"infoType": "notification", "message": format!("step {i}")}}));
            steps.push(serde_json::json!({"sleep_ms": 100}));
        }
        steps.push(serde_json::json!({"say": "all steps done"}));
        let rules = serde_json::json!({"rules": [{"match": "persist slowly", "steps": steps}],
            "default": [{"say": "You said: {prompt}"}]});
        std::fs::write(&scenario, rules.to_string()).expect("write the scenario");
        let a = Agentwire::launch([
            "--headless",
            "--port",
            "0",
            "--cluster",
            &others.join(","),
            "--node-id",
            "a",
            "--cluster-lease-ttl",
            ELECTION_PROOF_TTL,
            "--cluster-replicas",
            "3",
            "--seed",
            "7",
            "--scenario",
            scenario.to_str().unwrap(),
        ])
        .await;

        let client_a = client(&a).await;
        let id = sdk::new_session_id();
        let config = session_config(&id).with_permission_handler(approve_all());
        let prepared = client_a.prepare_session(config).expect("prepare_session");
        let mut events = sdk::Recorder::new(prepared.subscribe());
        let session = sdk::within("session.create", prepared.start())
            .await
            .expect("session.create");
        sdk::within(
            "session.send",
            session.send(MessageOptions::new("persist slowly")),
        )
        .await
        .expect("session.send");
        let infos = |events: &sdk::Recorder| {
            events
                .seen
                .iter()
                .filter(|e| e.event_type == "session.info")
                .count()
        };
        wait_until(&mut events, Duration::from_secs(20), |e| infos(e) >= 5).await;
        // Kill whichever server leads the log stream now.
        let leader = log_leader(&engine).await;
        cluster.member(&leader).kill();
        let killed_at = Instant::now();
        let infos_at_kill = infos(&events);
        let idle = |e: &sdk::Recorder| e.seen.iter().any(|e| e.event_type == "session.idle");
        wait_until(&mut events, Duration::from_secs(60), idle).await;
        let kill_to_idle = killed_at.elapsed();
        let turn: Vec<&str> = events.seen.iter().map(|e| e.event_type.as_str()).collect();
        let completed = events
            .seen
            .iter()
            .any(|e| sdk::str_field(e, "content") == Some("all steps done"));
        assert!(
            completed || turn.contains(&"session.error"),
            "the turn neither completed nor failed with session.error: {turn:?}"
        );
        assert!(infos(&events) >= infos_at_kill);

        // The next turn works (on the new stream leader).
        let reply = sdk::turn(&session, "hello after the election").await;
        assert_eq!(
            sdk::str_field(&reply, "content"),
            Some("You said: hello after the election")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        events.drain();
        let received: Vec<SessionEvent> = events
            .seen
            .iter()
            .filter(|e| e.ephemeral.is_none())
            .cloned()
            .collect();
        let history = sdk::within("getMessages", session.get_events())
            .await
            .expect("getMessages");
        let position = |id: &str| history.iter().position(|e| e.id == id);
        let mut last = None;
        for event in &received {
            let at = position(&event.id)
                .unwrap_or_else(|| panic!("{} {} is not in the log", event.event_type, event.id));
            assert!(last < Some(at), "in order");
            last = Some(at);
        }
        let unique: HashSet<&str> = ids(&history).into_iter().collect();
        assert_eq!(unique.len(), history.len(), "no event is stored twice");
        sdk::assert_chain(&history, None);
        eprintln!(
            "killed stream leader {leader} after {infos_at_kill} session.info events; turn \
             {} {kill_to_idle:?} after the kill; {} durable events received, {} in the log",
            if completed { "completed" } else { "failed" },
            received.len(),
            history.len()
        );
        drop(a);
        drop(cluster);
    };
    if tokio::time::timeout(Duration::from_secs(150), test)
        .await
        .is_err()
    {
        panic!("the stream-leader test exceeded 150 s");
    }
}

/// The log stream's current leader (retrying while it has none).
async fn log_leader(engine: &agentwire_cluster::nats::NatsEngine) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(leader) = engine.log_leader().await {
            return leader;
        }
        assert!(Instant::now() < deadline, "the log stream has no leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Receives `events` until `done` holds (at most `limit`).
async fn wait_until(
    events: &mut sdk::Recorder,
    limit: Duration,
    done: impl Fn(&sdk::Recorder) -> bool,
) {
    let deadline = Instant::now() + limit;
    loop {
        events.drain();
        if done(events) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "waited {limit:?}; seen {:?}",
            sdk::types(&events.seen)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Checks that the log `history` holds no event twice and chains, and that the durable events
/// among `seen` (what B's client received) are exactly the log from the first of them on,
/// once each, in order; returns where in the log that first one is.
fn received_once_in_log_order(history: &[SessionEvent], seen: &[SessionEvent]) -> usize {
    let unique: HashSet<&str> = ids(history).into_iter().collect();
    assert_eq!(unique.len(), history.len(), "no event is stored twice");
    sdk::assert_chain(history, None);
    let received: Vec<&SessionEvent> = seen.iter().filter(|e| e.ephemeral.is_none()).collect();
    let first = history
        .iter()
        .position(|e| e.id == received[0].id)
        .expect("the first event B's client received is in the log");
    assert_eq!(
        received.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ids(&history[first..]),
        "B's client received every durable event since it attached, once, in the log's order"
    );
    first
}

/// What the session filesystem of the client on node B serves: one file, and every path it was
/// asked for.
struct VirtualFs {
    asked: Arc<Mutex<Vec<String>>>,
}

/// The file [`VirtualFs`] holds.
const VIRTUAL_FILE: &str = "served by the client on node B";

type FsFuture<'a, T> = Pin<Box<dyn std::future::Future<Output = Result<T, FsError>> + Send + 'a>>;

impl VirtualFs {
    /// `found()` if `path` is the file, else "not found"; the question noted.
    fn answer<'a, T: Send + 'a>(&self, path: &str, found: impl FnOnce() -> T) -> FsFuture<'a, T> {
        self.asked.lock().unwrap().push(path.to_owned());
        let outcome = if path.ends_with("/notes.txt") {
            Ok(found())
        } else {
            Err(FsError::with_message(
                FsErrorKind::NotFound(path.to_owned()),
                "no such file",
            ))
        };
        Box::pin(std::future::ready(outcome))
    }
}

impl SessionFsProvider for VirtualFs {
    fn read_file<'life0, 'life1, 'async_trait>(
        &'life0 self,
        path: &'life1 str,
    ) -> FsFuture<'async_trait, String>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.answer(path, || VIRTUAL_FILE.to_owned())
    }

    fn stat<'life0, 'life1, 'async_trait>(
        &'life0 self,
        path: &'life1 str,
    ) -> FsFuture<'async_trait, FileInfo>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        let at = "2026-12-02T00:00:00.000Z";
        self.answer(path, || {
            FileInfo::new(true, false, VIRTUAL_FILE.len() as i64, at, at)
        })
    }
}

/// Makes `client` the filesystem of its sessions, rooted at `/virtual`
/// (`sessionFs.setProvider`).
async fn register_session_fs(client: &Client) {
    let rpc = client.rpc();
    let session_fs = rpc.session_fs();
    let registered = session_fs.set_provider(SessionFsSetProviderRequest {
        capabilities: None,
        conventions: SessionFsSetProviderConventions::Posix,
        initial_cwd: "/virtual".to_owned(),
        session_state_path: "/virtual/.state".to_owned(),
    });
    let registered = sdk::within("sessionFs.setProvider", registered)
        .await
        .expect("sessionFs.setProvider");
    assert!(registered.success);
}

/// A client of node B that is its sessions' filesystem (`sessionFs.setProvider`, sent before
/// it resumes a session owned by node A) keeps being it on A: the model's `view` on A reads the
/// client's file through B (a BYOK session on the fake model endpoint), not A's disk. After
/// `kill -9` of A, B takes the session over and the next `view` reads the client's file too.
#[tokio::test]
async fn a_relayed_client_that_provides_its_sessions_files_provides_them_on_the_owner() {
    sdk::bounded(async {
        let fake = FakeModel::start_script(vec![
            FakeReply::tool(
                "call_view",
                "view",
                serde_json::json!({"path": "notes.txt"}),
            ),
            FakeReply::Text("Read.".into()),
            FakeReply::tool(
                "call_again",
                "view",
                serde_json::json!({"path": "notes.txt"}),
            ),
            FakeReply::Text("Read again.".into()),
        ]);
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;
        let id = sdk::new_session_id();
        let provider = || {
            ProviderConfig::new(fake.base_url())
                .with_provider_type("openai")
                .with_api_key("sk-fake")
        };
        let _on_a = session_on(&a, &id, |c| {
            c.with_working_directory(std::path::Path::new("/virtual"))
                .with_provider(provider())
        })
        .await;

        let client_b = client(&b).await;
        register_session_fs(&client_b).await;
        let asked = Arc::new(Mutex::new(Vec::new()));
        let config = ResumeSessionConfig::new(id.clone())
            .with_provider(provider())
            .with_permission_handler(approve_all())
            .with_session_fs_provider(Arc::new(VirtualFs {
                asked: asked.clone(),
            }));
        let session_b = sdk::within("session.resume on node B", client_b.resume_session(config))
            .await
            .expect("session.resume of a session owned by a live node");
        let reply = sdk::turn(&session_b, "show my notes").await;
        assert_eq!(sdk::str_field(&reply, "content"), Some("Read."));
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 2);
        let results = bodies[1]["messages"].to_string();
        assert!(
            results.contains(VIRTUAL_FILE),
            "the view's result is the client's file: {results}\nasked: {:?}\n---- node A ----\n{}",
            asked.lock().unwrap(),
            a.stderr()
        );
        let first_reads = asked.lock().unwrap().len();
        assert!(first_reads > 0);
        assert!(b.stderr().contains("client relayed to the owner node"));

        // A dies: B takes the session over and re-attaches the client to its own host, set up
        // as the client's connection was: its files are still the client's.
        kill_owner_until_reattached(&mut a, &b).await;
        let reply = sdk::turn(&session_b, "show them again").await;
        assert_eq!(sdk::str_field(&reply, "content"), Some("Read again."));
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 4);
        assert!(bodies[3]["messages"].to_string().contains(VIRTUAL_FILE));
        let asked = asked.lock().unwrap().clone();
        assert!(asked.len() > first_reads, "{asked:?}");
        assert!(asked.iter().all(|p| p == "/virtual/notes.txt"), "{asked:?}");
        drop(server);
    })
    .await
}

/// A client of node B waits in `session.sendAndWait` (the Rust SDK's `send_and_wait`) for a
/// turn of the session owned by node A, held at its own client tool; A is killed. The
/// `sendAndWait` ends as the owner would have ended it when the turn was interrupted: with
/// the interrupted turn's error (naming the node that took over), not a relay error; the
/// client's next turn on the same connection works.
#[tokio::test]
async fn a_relayed_send_and_wait_ends_with_the_turn_the_takeover_interrupted() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;
        let id = sdk::new_session_id();
        let _on_a = session_on(&a, &id, |c| c).await;

        let client_b = client(&b).await;
        let asked = Arc::new(Notify::new());
        let tool = sdk::weather_declaration().with_handler(Arc::new(HoldFirstTool {
            calls: Arc::new(Mutex::new(Vec::new())),
            asked: asked.clone(),
        }));
        let config = ResumeSessionConfig::new(id.clone())
            .with_tools([tool])
            .with_permission_handler(approve_all());
        let session_b = sdk::within("session.resume via B", client_b.resume_session(config))
            .await
            .expect("session.resume via B");
        let session_b = Arc::new(session_b);
        let waiting = session_b.clone();
        let waited = tokio::spawn(async move {
            waiting
                .send_and_wait(MessageOptions::new(sdk::WEATHER_PROMPT))
                .await
        });
        sdk::within("the tool call at B's client", asked.notified()).await;
        kill_owner_until_reattached(&mut a, &b).await;
        let ended = tokio::time::timeout(Duration::from_secs(30), waited)
            .await
            .expect("sendAndWait ended")
            .expect("the task");
        let error = ended.expect_err("the turn was interrupted").to_string();
        assert!(
            error.contains("the turn was interrupted") && error.contains("took the session over"),
            "{error}\n---- node B ----\n{}",
            b.stderr()
        );
        assert!(!error.contains("was not completed"), "{error}");
        let reply = sdk::turn(&session_b, "hello again").await;
        assert_eq!(reply.event_type, "assistant.message");
        drop(server);
    })
    .await
}

/// One client of node B uses three sessions at once: one owned by node A, one owned by node C
/// and one it creates on B. Each turn runs where its session is owned, both owners' requests
/// to the client (the session filesystem's reads, in flight at the same time) reach it and are
/// answered, and the session created on B runs on B. Then A is killed (`kill -9`): the session
/// A owned follows to its new owner, and the two others carry on, untouched, on the same
/// connection.
#[tokio::test]
async fn one_client_of_node_b_uses_sessions_of_three_nodes_at_once() {
    sdk::bounded(async {
        let script = |node: &str| {
            FakeModel::start_script(vec![
                FakeReply::tool(
                    "call_view",
                    "view",
                    serde_json::json!({"path": "notes.txt"}),
                ),
                FakeReply::Text(format!("Read on {node}.")),
                FakeReply::tool(
                    "call_again",
                    "view",
                    serde_json::json!({"path": "notes.txt"}),
                ),
                FakeReply::Text(format!("Read again on {node}.")),
            ])
        };
        let (fake_a, fake_c) = (script("a"), script("c"));
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let b = node(&url, "b").await;
        let c = node(&url, "c").await;
        let provider = |fake: &FakeModel| {
            ProviderConfig::new(fake.base_url())
                .with_provider_type("openai")
                .with_api_key("sk-fake")
        };
        let virtual_dir =
            |c: SessionConfig| c.with_working_directory(std::path::Path::new("/virtual"));
        let (id_a, id_c, id_b) = (
            sdk::new_session_id(),
            sdk::new_session_id(),
            sdk::new_session_id(),
        );
        let _on_a = session_on(&a, &id_a, |s| {
            virtual_dir(s).with_provider(provider(&fake_a))
        })
        .await;
        let _on_c = session_on(&c, &id_c, |s| {
            virtual_dir(s).with_provider(provider(&fake_c))
        })
        .await;

        let client_b = client(&b).await;
        let asked = Arc::new(Mutex::new(Vec::new()));
        let fs = || {
            Arc::new(VirtualFs {
                asked: asked.clone(),
            })
        };
        let resume = |id: &SessionId, fake: &FakeModel| {
            ResumeSessionConfig::new(id.clone())
                .with_provider(provider(fake))
                .with_permission_handler(approve_all())
                .with_session_fs_provider(fs())
        };
        let of_a = sdk::within(
            "resume A's session on B",
            client_b.resume_session(resume(&id_a, &fake_a)),
        )
        .await
        .expect("session.resume of the session owned by node A");
        // The client becomes its sessions' filesystem once A's session is relayed: A is
        // told too.
        register_session_fs(&client_b).await;
        let of_c = sdk::within(
            "resume C's session on B",
            client_b.resume_session(resume(&id_c, &fake_c)),
        )
        .await
        .expect("session.resume, on the same connection, of the session owned by node C");
        let config = session_config(&id_b)
            .with_permission_handler(approve_all())
            .with_session_fs_provider(fs());
        let of_b = sdk::within("session.create on B", client_b.create_session(config))
            .await
            .expect("session.create on the connection relaying two sessions");

        let (on_a, on_c, on_b) = tokio::join!(
            sdk::turn(&of_a, "show my notes"),
            sdk::turn(&of_c, "show my notes"),
            sdk::turn(&of_b, "hello"),
        );
        assert_eq!(sdk::str_field(&on_a, "content"), Some("Read on a."));
        assert_eq!(sdk::str_field(&on_c, "content"), Some("Read on c."));
        assert!(sdk::str_field(&on_b, "content").is_some());
        for fake in [&fake_a, &fake_c] {
            let bodies = fake.completion_bodies();
            assert_eq!(
                bodies.len(),
                2,
                "each owner's model was asked for its turn only"
            );
            assert!(
                bodies[1]["messages"].to_string().contains(VIRTUAL_FILE),
                "the view's result is the client's file"
            );
        }
        // The session created on the connection is B's: node A and node C never served it.
        let id_b_text = id_b.to_string();
        assert!(!a.stderr().contains(&id_b_text) && !c.stderr().contains(&id_b_text));
        assert_eq!(
            b.stderr()
                .matches("client relayed to the owner node")
                .count(),
            4,
            "two links (each logged by the link and its gateway)\n{}",
            b.stderr()
        );

        // A dies: its session follows to its new owner; the others are not disturbed.
        kill_owner_until_reattached(&mut a, &b).await;
        let (on_a, on_c, on_b) = tokio::join!(
            sdk::turn(&of_a, "show them again"),
            sdk::turn(&of_c, "show them again"),
            sdk::turn(&of_b, "hello again"),
        );
        assert_eq!(sdk::str_field(&on_a, "content"), Some("Read again on a."));
        assert_eq!(sdk::str_field(&on_c, "content"), Some("Read again on c."));
        assert!(sdk::str_field(&on_b, "content").is_some());
        let history = sdk::within("getMessages of C's session via B", of_c.get_events())
            .await
            .expect("getMessages");
        assert!(
            !history.iter().any(|e| e.event_type == "session.error"),
            "C's turn was not interrupted: {:?}",
            sdk::types(&history)
        );
        sdk::assert_chain(&history, None);
        drop(server);
    })
    .await
}
