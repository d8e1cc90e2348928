//! Interop with the **official Copilot Rust SDK** (`github-copilot-sdk`, unmodified) for the
//! host's client bridges: every permission decision kind a handler can return, elicitation
//! decline/cancel answered by another client, and a tool-owning client that vanishes mid-call.
//!
//! Driven like `tests/interop_copilot.rs`: the SDK's `Client::from_streams` on one end of a
//! `tokio::io::duplex` pipe, `agentwire_tokio::Server` (built-in scripted agent) on the other.

mod common;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use common::{
    assert_envelope, assert_subsequence, types, weather_declaration, weather_tool, within,
    Recorder, TOOL_REPLY, TURN, WEATHER_ANSWER, WEATHER_PROMPT,
};
use github_copilot_sdk::handler::{ElicitationHandler, PermissionHandler, PermissionResult};
use github_copilot_sdk::rpc::{PermissionDecision, PermissionDecisionApproveForSession};
use github_copilot_sdk::session::Session;
use github_copilot_sdk::tool::ToolHandler;
use github_copilot_sdk::types::{
    ElicitationRequest, ElicitationResult, MessageOptions, PermissionRequestData, RequestId,
    ResumeSessionConfig, SessionConfig, SessionEvent, SessionId, ToolInvocation, ToolResult,
};
use github_copilot_sdk::{Client, Error};
use serde_json::json;
use tokio::sync::oneshot;

const PIPE: usize = 64 * 1024;

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

fn server() -> Server {
    Server::new(HostConfig::default())
}

/// A client connected in-process to `server`, handshake done.
async fn connect(server: &Server) -> Client {
    let (client_end, server_end) = tokio::io::duplex(PIPE);
    let (server_read, server_write) = tokio::io::split(server_end);
    server.attach(server_read, server_write);
    let (client_read, client_write) = tokio::io::split(client_end);
    let client = Client::from_streams(client_read, client_write, PathBuf::from("/tmp"))
        .expect("Client::from_streams");
    within("connect", client.verify_protocol_version())
        .await
        .expect("connect handshake");
    client
}

/// Like [`connect`], but the bytes flow through a relay task; aborting the returned handle
/// cuts the connection (the host sees EOF), whatever the SDK is doing.
async fn connect_cuttable(server: &Server) -> (Client, tokio::task::JoinHandle<()>) {
    let (client_end, mut relay_a) = tokio::io::duplex(PIPE);
    let (mut relay_b, server_end) = tokio::io::duplex(PIPE);
    let relay = tokio::spawn(async move {
        let _ = tokio::io::copy_bidirectional(&mut relay_a, &mut relay_b).await;
    });
    let (server_read, server_write) = tokio::io::split(server_end);
    server.attach(server_read, server_write);
    let (client_read, client_write) = tokio::io::split(client_end);
    let client = Client::from_streams(client_read, client_write, PathBuf::from("/tmp"))
        .expect("Client::from_streams");
    within("connect", client.verify_protocol_version())
        .await
        .expect("connect handshake");
    (client, relay)
}

/// A permission handler answering a fixed decision and counting requests.
struct FixedPermission {
    result: PermissionResult,
    requests: Arc<Mutex<usize>>,
}

impl PermissionHandler for FixedPermission {
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
        *self.requests.lock().unwrap() += 1;
        let result = self.result.clone();
        Box::pin(async move { result })
    }
}

/// An elicitation handler answering a fixed action (no content) and recording requests.
struct FixedElicitation {
    action: &'static str,
    requests: Arc<Mutex<Vec<ElicitationRequest>>>,
}

impl ElicitationHandler for FixedElicitation {
    fn handle<'life0, 'async_trait>(
        &'life0 self,
        _session_id: SessionId,
        _request_id: RequestId,
        request: ElicitationRequest,
    ) -> BoxFut<'async_trait, ElicitationResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.requests.lock().unwrap().push(request);
        let action = self.action.to_string();
        Box::pin(async move {
            ElicitationResult {
                action,
                content: None,
            }
        })
    }
}

/// A tool handler that signals it was called and then never returns.
struct HangingTool {
    called: Mutex<Option<oneshot::Sender<ToolInvocation>>>,
}

impl ToolHandler for HangingTool {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        invocation: ToolInvocation,
    ) -> BoxFut<'async_trait, Result<ToolResult, Error>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        if let Some(tx) = self.called.lock().unwrap().take() {
            let _ = tx.send(invocation);
        }
        Box::pin(std::future::pending())
    }
}

struct PermSession {
    session: Session,
    events: Recorder,
    tool_calls: Arc<Mutex<Vec<ToolInvocation>>>,
    permissions: Arc<Mutex<usize>>,
}

/// A session with `get_weather` (recording handler) whose permission handler answers `result`.
async fn session_with_permission(client: &Client, result: PermissionResult) -> PermSession {
    let id = common::new_session_id();
    let tool_calls = Arc::new(Mutex::new(Vec::new()));
    let permissions = Arc::new(Mutex::new(0));
    let prepared = client
        .prepare_session(
            SessionConfig::default()
                .with_session_id(id.clone())
                .with_model("fake-model")
                .with_tools([weather_tool(tool_calls.clone())])
                .with_permission_handler(Arc::new(FixedPermission {
                    result,
                    requests: permissions.clone(),
                })),
        )
        .expect("prepare_session");
    let events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create");
    PermSession {
        session,
        events,
        tool_calls,
        permissions,
    }
}

/// Runs one weather turn (not requiring an assistant message) and returns its events.
async fn weather_turn(s: &mut PermSession) -> Vec<SessionEvent> {
    within(
        "send_and_wait",
        s.session
            .send_and_wait(MessageOptions::new(WEATHER_PROMPT).with_wait_timeout(TURN)),
    )
    .await
    .expect("the turn completes");
    let events = s.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    events
}

const PERMISSION_FLOW: &[&str] = &[
    "user.message",
    "tool.execution_start",
    "permission.requested",
    "permission.completed",
    "tool.execution_complete",
    "session.idle",
];

#[tokio::test]
async fn permission_approve_for_session() {
    common::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let decision =
            PermissionDecision::ApproveForSession(PermissionDecisionApproveForSession::default());
        let mut s = session_with_permission(&client, decision.into()).await;
        let events = weather_turn(&mut s).await;
        let idx = assert_subsequence(&events, PERMISSION_FLOW);
        assert_eq!(
            events[idx[3]].data["result"]["kind"], "approved-for-session",
            "permission.completed: {}",
            events[idx[3]].data
        );
        let complete = &events[idx[4]];
        assert_eq!(complete.data["success"], true, "{}", complete.data);
        assert_eq!(complete.data["result"]["content"], TOOL_REPLY);
        assert!(
            events.iter().any(|e| e.event_type == "assistant.message"
                && e.data["content"] == WEATHER_ANSWER),
            "the turn answers with the tool's result: {:?}",
            types(&events)
        );
        assert_eq!(*s.permissions.lock().unwrap(), 1);
        let calls = s.tool_calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1, "the tool ran once: {calls:?}");
        assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    })
    .await
}

#[tokio::test]
async fn permission_user_not_available() {
    common::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let mut s = session_with_permission(&client, PermissionResult::user_not_available()).await;
        let events = weather_turn(&mut s).await;
        let idx = assert_subsequence(&events, PERMISSION_FLOW);
        assert_eq!(
            events[idx[3]].data["result"]["kind"],
            "denied-no-approval-rule-and-could-not-request-from-user",
            "permission.completed: {}",
            events[idx[3]].data
        );
        let complete = &events[idx[4]];
        assert_eq!(complete.data["success"], false, "{}", complete.data);
        assert_eq!(
            complete.data["error"]["code"], "denied",
            "{}",
            complete.data
        );
        assert!(
            !events
                .iter()
                .any(|e| e.event_type == "external_tool.requested"),
            "no external_tool.requested after a denial: {:?}",
            types(&events)
        );
        assert!(
            s.tool_calls.lock().unwrap().is_empty(),
            "the tool never ran"
        );
        assert_eq!(*s.permissions.lock().unwrap(), 1);
    })
    .await
}

#[tokio::test]
async fn permission_reject_with_feedback() {
    common::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let mut s = session_with_permission(
            &client,
            PermissionResult::reject(Some("use the forecast API".to_string())),
        )
        .await;
        let events = weather_turn(&mut s).await;
        let idx = assert_subsequence(&events, PERMISSION_FLOW);
        let done = &events[idx[3]];
        assert_eq!(done.data["result"]["kind"], "denied-interactively-by-user");
        assert_eq!(done.data["result"]["feedback"], "use the forecast API");
        let complete = &events[idx[4]];
        assert_eq!(complete.data["success"], false, "{}", complete.data);
        assert_eq!(
            complete.data["error"]["code"], "denied",
            "{}",
            complete.data
        );
        assert!(
            s.tool_calls.lock().unwrap().is_empty(),
            "the tool never ran"
        );
        assert_eq!(*s.permissions.lock().unwrap(), 1);
    })
    .await
}

/// A (no elicitation handler) calls `session.ui.elicitation`; B's handler answers `action`.
async fn elicitation_answered_by_joined_client(action: &'static str) {
    let server = server();
    let a = connect(&server).await;
    let b = connect(&server).await;
    let id = common::new_session_id();
    let prepared = a
        .prepare_session(
            SessionConfig::default()
                .with_session_id(id.clone())
                .with_model("fake-model"),
        )
        .expect("prepare_session");
    let mut ea = Recorder::new(prepared.subscribe());
    let sa = within("session.create", prepared.start())
        .await
        .expect("session.create");
    let requests = Arc::new(Mutex::new(Vec::new()));
    let sb = within(
        "session.resume",
        b.resume_session(
            ResumeSessionConfig::new(id.clone()).with_elicitation_handler(Arc::new(
                FixedElicitation {
                    action,
                    requests: requests.clone(),
                },
            )),
        ),
    )
    .await
    .expect("join with an elicitation handler");
    ea.wait_for("capabilities.changed").await;
    let schema = json!({
        "type": "object",
        "properties": { "name": { "type": "string" } },
        "required": ["name"]
    });
    let result = within(
        "session.ui.elicitation",
        sa.ui().elicitation("Your name?", schema.clone()),
    )
    .await
    .expect("session.ui.elicitation answers");
    assert_eq!(result.action, action, "the caller gets B's action back");
    assert!(
        result.content.is_none(),
        "no content on {action}: {:?}",
        result.content
    );
    let seen = requests.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "B's handler ran once");
    assert_eq!(seen[0].message, "Your name?");
    assert_eq!(seen[0].requested_schema.clone(), Some(schema));
    let requested = ea.wait_for("elicitation.requested").await;
    let completed = ea.wait_for("elicitation.completed").await;
    for ev in [&requested, &completed] {
        assert_envelope(ev);
    }
    assert_eq!(requested.data["requestId"], completed.data["requestId"]);
    assert_eq!(completed.data["action"], action, "{}", completed.data);
    within("detach b", sb.disconnect()).await.expect("detach b");
    within("detach a", sa.disconnect()).await.expect("detach a");
}

#[tokio::test]
async fn elicitation_decline_via_joined_client() {
    common::bounded(elicitation_answered_by_joined_client("decline")).await
}

#[tokio::test]
async fn elicitation_cancel_via_joined_client() {
    common::bounded(elicitation_answered_by_joined_client("cancel")).await
}

/// A declares no tools; B joins declaring `get_weather` with a handler that never returns, and
/// B's connection is cut mid-call. A's turn must still end, with the tool call failed.
#[tokio::test]
async fn tool_owner_disconnects_mid_call() {
    common::bounded(async {
        let server = server();
        let a = connect(&server).await;
        let (b, relay) = connect_cuttable(&server).await;
        let id = common::new_session_id();
        let prepared = a
            .prepare_session(
                SessionConfig::default()
                    .with_session_id(id.clone())
                    .with_model("fake-model")
                    .with_permission_handler(Arc::new(FixedPermission {
                        result: PermissionResult::approve_once(),
                        requests: Arc::new(Mutex::new(0)),
                    })),
            )
            .expect("prepare_session");
        let mut ea = Recorder::new(prepared.subscribe());
        let sa = within("session.create", prepared.start())
            .await
            .expect("session.create");
        let (called_tx, called_rx) = oneshot::channel();
        let hanging = weather_declaration().with_handler(Arc::new(HangingTool {
            called: Mutex::new(Some(called_tx)),
        }));
        let sb = within(
            "session.resume",
            b.resume_session(ResumeSessionConfig::new(id.clone()).with_tools([hanging])),
        )
        .await
        .expect("B joins with the tool");
        within("send", sa.send(MessageOptions::new(WEATHER_PROMPT)))
            .await
            .expect("session.send");
        let invocation = within("B's tool handler is called", called_rx)
            .await
            .expect("handler called");
        assert_eq!(invocation.arguments, json!({"city": "Paris"}));
        // Cut B's connection while its handler is still running.
        relay.abort();
        let _ = relay.await;
        let events = ea.turn().await;
        let idx = assert_subsequence(
            &events,
            &[
                "external_tool.requested",
                "tool.execution_complete",
                "session.idle",
            ],
        );
        let complete = &events[idx[1]];
        assert_eq!(
            complete.data["success"], false,
            "the cut tool call fails: {}",
            complete.data
        );
        assert!(
            complete.data["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "the failure carries an error message: {}",
            complete.data
        );
        assert_eq!(
            complete.data["toolCallId"], events[idx[0]].data["toolCallId"],
            "the failure is for the requested call"
        );
        drop(sb);
        drop(b);
        within("detach a", sa.disconnect()).await.expect("detach a");
    })
    .await
}
