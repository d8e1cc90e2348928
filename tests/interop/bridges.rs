//! Interop with the **official Copilot Rust SDK** (`github-copilot-sdk`, unmodified) for the
//! host's client bridges: every permission decision kind a handler can return, two clients
//! answering the same permission prompt (first answer wins), elicitation decline/cancel
//! answered by another client, and a tool-owning client that vanishes mid-call.
//!
//! Driven like `tests/interop/copilot.rs`: the SDK's `Client::from_streams` on one end of a
//! `tokio::io::duplex` pipe, `agentwire_tokio::Server` (built-in scripted agent) on the other.

use crate::support::sdk_scenarios;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use crate::support::{connect, connect_cuttable};
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use github_copilot_sdk::handler::{ElicitationHandler, PermissionHandler, PermissionResult};
use github_copilot_sdk::rpc::{
    PermissionDecision, PermissionDecisionApproveForLocation,
    PermissionDecisionApproveForLocationApproval,
    PermissionDecisionApproveForLocationApprovalCustomTool, PermissionDecisionApproveForSession,
    PermissionDecisionApprovePermanently, PermissionDecisionReject, PermissionDecisionRequest,
};
use github_copilot_sdk::session::Session;
use github_copilot_sdk::session_events::{
    PermissionCompletedData, PermissionResult as CompletedResult,
};
use github_copilot_sdk::tool::ToolHandler;
use github_copilot_sdk::types::{
    ElicitationRequest, ElicitationResult, MessageOptions, PermissionRequestData, RequestId,
    ResumeSessionConfig, SessionConfig, SessionEvent, SessionId, ToolInvocation, ToolResult,
};
use github_copilot_sdk::{Client, Error};
use sdk_scenarios::{
    assert_envelope, assert_subsequence, types, weather_declaration, weather_tool, within,
    Recorder, TOOL_REPLY, TURN, WEATHER_ANSWER, WEATHER_PROMPT,
};
use serde_json::json;
use tokio::sync::oneshot;

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

fn server() -> Server {
    Server::new(HostConfig::default())
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
    let id = sdk_scenarios::new_session_id();
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
    sdk_scenarios::bounded(async {
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
        // The SDK's default decision carries no approval: the host derives it from the
        // request, as the result union requires (and the SDK's typed result parses).
        assert_eq!(
            events[idx[3]].data["result"]["approval"],
            json!({"kind": "custom-tool", "toolName": "get_weather"}),
            "{}",
            events[idx[3]].data
        );
        let typed: PermissionCompletedData = serde_json::from_value(events[idx[3]].data.clone())
            .expect("typed permission.completed");
        assert!(
            matches!(typed.result, CompletedResult::ApprovedForSession(_)),
            "{:?}",
            typed.result
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
    sdk_scenarios::bounded(async {
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
    sdk_scenarios::bounded(async {
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
    let id = sdk_scenarios::new_session_id();
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
    sdk_scenarios::bounded(elicitation_answered_by_joined_client("decline")).await
}

#[tokio::test]
async fn elicitation_cancel_via_joined_client() {
    sdk_scenarios::bounded(elicitation_answered_by_joined_client("cancel")).await
}

/// A declares no tools; B joins declaring `get_weather` with a handler that never returns, and
/// B's connection is cut mid-call. A's turn must still end, with the tool call failed.
#[tokio::test]
async fn tool_owner_disconnects_mid_call() {
    sdk_scenarios::bounded(async {
        let server = server();
        let a = connect(&server).await;
        let (b, relay) = connect_cuttable(&server).await;
        let id = sdk_scenarios::new_session_id();
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

/// The reference's result for `approve-for-location`: `permission.completed` carries
/// `approved-for-location{approval, locationKey}` (the decision's fields, as the SDK's typed
/// `PermissionResult` requires), and the tool runs.
#[tokio::test]
async fn permission_approve_for_location() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let decision =
            PermissionDecision::ApproveForLocation(PermissionDecisionApproveForLocation {
                approval: PermissionDecisionApproveForLocationApproval::CustomTool(
                    PermissionDecisionApproveForLocationApprovalCustomTool {
                        tool_name: "get_weather".into(),
                        ..Default::default()
                    },
                ),
                kind: Default::default(),
                location_key: "/tmp/project".into(),
            });
        let mut s = session_with_permission(&client, decision.into()).await;
        let events = weather_turn(&mut s).await;
        let idx = assert_subsequence(&events, PERMISSION_FLOW);
        let done = &events[idx[3]];
        assert_eq!(
            done.data["result"],
            json!({
                "kind": "approved-for-location",
                "approval": {"kind": "custom-tool", "toolName": "get_weather"},
                "locationKey": "/tmp/project"
            }),
            "permission.completed: {}",
            done.data
        );
        let typed: PermissionCompletedData = done
            .typed_data()
            .unwrap_or_else(|| panic!("the SDK's typed permission.completed parses {}", done.data));
        match typed.result {
            CompletedResult::ApprovedForLocation(r) => assert_eq!(r.location_key, "/tmp/project"),
            other => panic!("typed result is approved-for-location, got {other:?}"),
        }
        assert_approved_tool_ran(&s, &events, idx[4]);
    })
    .await
}

/// `approve-permanently{domain}` has no result kind of its own in the reference's
/// `PermissionResult` union (`approved`, `approved-for-session{approval}`,
/// `approved-for-location{approval, locationKey}`, `cancelled`, `denied-*`); a domain is not a
/// session approval (`approval` is required there), so the call completes as plain `approved`
/// and the tool runs.
#[tokio::test]
async fn permission_approve_permanently() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let decision =
            PermissionDecision::ApprovePermanently(PermissionDecisionApprovePermanently {
                domain: "example.com".into(),
                kind: Default::default(),
            });
        let mut s = session_with_permission(&client, decision.into()).await;
        let events = weather_turn(&mut s).await;
        let idx = assert_subsequence(&events, PERMISSION_FLOW);
        let done = &events[idx[3]];
        assert_eq!(
            done.data["result"],
            json!({"kind": "approved"}),
            "permission.completed: {}",
            done.data
        );
        let typed: PermissionCompletedData = done
            .typed_data()
            .unwrap_or_else(|| panic!("the SDK's typed permission.completed parses {}", done.data));
        assert!(
            matches!(typed.result, CompletedResult::Approved(_)),
            "typed result is approved, got {:?}",
            typed.result
        );
        assert_approved_tool_ran(&s, &events, idx[4]);
    })
    .await
}

/// After an approving decision: `external_tool.requested` went out, the handler ran once with
/// the scenario's arguments, `tool.execution_complete` (at `complete`) succeeded with its
/// reply, and the turn answered with it.
fn assert_approved_tool_ran(s: &PermSession, events: &[SessionEvent], complete: usize) {
    assert!(
        events
            .iter()
            .any(|e| e.event_type == "external_tool.requested"),
        "an approved call asks the tool's owner: {:?}",
        types(events)
    );
    let complete = &events[complete];
    assert_eq!(complete.data["success"], true, "{}", complete.data);
    assert_eq!(complete.data["result"]["content"], TOOL_REPLY);
    assert!(
        events
            .iter()
            .any(|e| e.event_type == "assistant.message" && e.data["content"] == WEATHER_ANSWER),
        "the turn answers with the tool's result: {:?}",
        types(events)
    );
    assert_eq!(*s.permissions.lock().unwrap(), 1);
    let calls = s.tool_calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "the tool ran once: {calls:?}");
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
}

/// A permission handler that records each request id, optionally waits for a gate to open
/// before answering, and signals once it has returned its decision.
struct GatedPermission {
    result: PermissionResult,
    requests: Arc<Mutex<Vec<String>>>,
    gate: Mutex<Option<oneshot::Receiver<()>>>,
    answered: Mutex<Option<oneshot::Sender<()>>>,
}

impl GatedPermission {
    fn new(
        result: PermissionResult,
        gate: Option<oneshot::Receiver<()>>,
    ) -> (Arc<Self>, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let handler = Arc::new(GatedPermission {
            result,
            requests: Arc::new(Mutex::new(Vec::new())),
            gate: Mutex::new(gate),
            answered: Mutex::new(Some(tx)),
        });
        (handler, rx)
    }
}

impl PermissionHandler for GatedPermission {
    fn handle<'life0, 'async_trait>(
        &'life0 self,
        _session_id: SessionId,
        request_id: RequestId,
        _data: PermissionRequestData,
    ) -> BoxFut<'async_trait, PermissionResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.requests.lock().unwrap().push(request_id.to_string());
        let gate = self.gate.lock().unwrap().take();
        let answered = self.answered.lock().unwrap().take();
        let result = self.result.clone();
        Box::pin(async move {
            if let Some(gate) = gate {
                // A dropped sender opens the gate too: the handler never hangs the test.
                let _ = gate.await;
            }
            if let Some(tx) = answered {
                let _ = tx.send(());
            }
            result
        })
    }
}

/// Which of the two clients answers the shared permission prompt late.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Late {
    /// Both answer as soon as they see the request (a real race).
    Neither,
    /// A (the session's creator, approving) answers only after the prompt has completed.
    A,
    /// B (the joined client, rejecting) answers only after the prompt has completed.
    B,
}

const B_FEEDBACK: &str = "B says no";

/// A creates the session with `get_weather` and a permission handler that approves once; B
/// joins (`session.resume`) with a permission handler that rejects. Both handlers get the same
/// `permission.requested` and both answer. Exactly one answer wins: each client sees exactly
/// one `permission.completed` for that request id (the same event), whose result is the
/// winner's decision, and the tool outcome and the rest of the turn follow that decision.
/// With `late` set, that client's answer arrives after the completion and changes nothing;
/// a further explicit answer from it is refused with `success: false`.
async fn two_clients_answer_one_permission(late: Late) {
    let server = server();
    let a = connect(&server).await;
    let b = connect(&server).await;
    let id = sdk_scenarios::new_session_id();
    let (gate_a_tx, gate_a) = oneshot::channel();
    let (gate_b_tx, gate_b) = oneshot::channel();
    let (perm_a, answered_a) = GatedPermission::new(
        PermissionResult::approve_once(),
        (late == Late::A).then_some(gate_a),
    );
    let (perm_b, answered_b) = GatedPermission::new(
        PermissionDecision::Reject(PermissionDecisionReject {
            feedback: Some(B_FEEDBACK.into()),
            ..Default::default()
        })
        .into(),
        (late == Late::B).then_some(gate_b),
    );
    let tool_calls = Arc::new(Mutex::new(Vec::new()));
    let prepared = a
        .prepare_session(
            SessionConfig::default()
                .with_session_id(id.clone())
                .with_model("fake-model")
                .with_tools([weather_tool(tool_calls.clone())])
                .with_permission_handler(perm_a.clone()),
        )
        .expect("prepare_session");
    let mut ea = Recorder::new(prepared.subscribe());
    let sa = within("session.create", prepared.start())
        .await
        .expect("session.create");
    let prepared = b
        .prepare_resume_session(
            ResumeSessionConfig::new(id.clone()).with_permission_handler(perm_b.clone()),
        )
        .expect("prepare_resume_session");
    let mut eb = Recorder::new(prepared.subscribe());
    let sb = within("session.resume", prepared.start())
        .await
        .expect("B joins with a permission handler");
    // Both streams carry B's join before the turn starts.
    let resume_b = eb.wait_for("session.resume").await;
    let resume_a = ea.wait_for("session.resume").await;
    assert_eq!(resume_a.id, resume_b.id);

    within("session.send", sa.send(MessageOptions::new(WEATHER_PROMPT)))
        .await
        .expect("session.send");
    let ta = ea.turn().await;
    let tb = eb.turn().await;
    for ev in ta.iter().chain(&tb) {
        assert_envelope(ev);
    }

    // Both handlers saw the one request.
    let requested = ta
        .iter()
        .find(|e| e.event_type == "permission.requested")
        .unwrap_or_else(|| panic!("permission.requested on A: {:?}", types(&ta)));
    let request_id = requested.data["requestId"].as_str().expect("requestId");
    let late_session = match late {
        Late::Neither => {
            within("A's handler answered", answered_a).await.expect("A");
            within("B's handler answered", answered_b).await.expect("B");
            None
        }
        Late::A => {
            within("B's handler answered", answered_b).await.expect("B");
            drop(gate_a_tx);
            within("A's late handler answered", answered_a)
                .await
                .expect("A");
            Some(&sa)
        }
        Late::B => {
            within("A's handler answered", answered_a).await.expect("A");
            drop(gate_b_tx);
            within("B's late handler answered", answered_b)
                .await
                .expect("B");
            Some(&sb)
        }
    };
    assert_eq!(
        *perm_a.requests.lock().unwrap(),
        vec![request_id.to_owned()]
    );
    assert_eq!(
        *perm_b.requests.lock().unwrap(),
        vec![request_id.to_owned()]
    );

    if let Some(session) = late_session {
        // Whatever the late handler's own answer did, one more answer is refused.
        let refused = within(
            "a late handlePendingPermissionRequest",
            session
                .rpc()
                .permissions()
                .handle_pending_permission_request(PermissionDecisionRequest {
                    decision_context: None,
                    request_id: RequestId::new(request_id),
                    result: PermissionDecision::Reject(PermissionDecisionReject::default()),
                }),
        )
        .await
        .expect("a late answer is a result, not an error");
        assert!(!refused.success, "a late answer gets success:false");
    }
    // Give any wrongly accepted late answer time to show up as a second completion.
    ea.assert_quiet(std::time::Duration::from_millis(200)).await;
    eb.assert_quiet(std::time::Duration::from_millis(0)).await;

    let completions = |events: &[SessionEvent]| -> Vec<SessionEvent> {
        events
            .iter()
            .filter(|e| e.event_type == "permission.completed" && e.data["requestId"] == request_id)
            .cloned()
            .collect()
    };
    let all_a = ea.seen.clone();
    let all_b = eb.seen.clone();
    let done_a = completions(&all_a);
    let done_b = completions(&all_b);
    assert_eq!(
        done_a.len(),
        1,
        "A sees one completion: {:?}",
        types(&all_a)
    );
    assert_eq!(
        done_b.len(),
        1,
        "B sees one completion: {:?}",
        types(&all_b)
    );
    assert_eq!(done_a[0].id, done_b[0].id, "both see the same completion");
    assert_eq!(done_a[0].data, done_b[0].data);
    let result = &done_a[0].data["result"];
    let approved = match result["kind"].as_str() {
        Some("approved") => true,
        Some("denied-interactively-by-user") => {
            assert_eq!(result["feedback"], B_FEEDBACK, "{result}");
            false
        }
        _ => panic!("the result is one of the two decisions: {result}"),
    };
    match late {
        Late::Neither => {}
        Late::A => assert!(!approved, "B answered first and wins: {result}"),
        Late::B => assert!(approved, "A answered first and wins: {result}"),
    }

    // The tool outcome follows the winning decision, on both streams.
    for (who, turn) in [("A", &ta), ("B", &tb)] {
        let idx = assert_subsequence(turn, PERMISSION_FLOW);
        let complete = &turn[idx[4]];
        let asked = turn
            .iter()
            .filter(|e| e.event_type == "external_tool.requested")
            .count();
        if approved {
            assert_eq!(asked, 1, "{who}: the approved call asks the tool's owner");
            assert_eq!(complete.data["success"], true, "{who}: {}", complete.data);
            assert_eq!(complete.data["result"]["content"], TOOL_REPLY);
            assert!(
                turn.iter()
                    .any(|e| e.event_type == "assistant.message"
                        && e.data["content"] == WEATHER_ANSWER),
                "{who}: the turn answers with the tool's result: {:?}",
                types(turn)
            );
        } else {
            assert_eq!(asked, 0, "{who}: a rejected call never reaches the tool");
            assert_eq!(complete.data["success"], false, "{who}: {}", complete.data);
            assert_eq!(
                complete.data["error"]["code"], "denied",
                "{}",
                complete.data
            );
        }
        assert_eq!(
            turn.iter()
                .filter(|e| e.event_type == "tool.execution_complete")
                .count(),
            1,
            "{who}: the tool call completes once"
        );
    }
    assert_eq!(
        tool_calls.lock().unwrap().len(),
        usize::from(approved),
        "the tool ran iff approved"
    );
    // From B's join on, both clients received the same events in the same order.
    let from_join = |turn: &[SessionEvent]| -> Vec<String> {
        let at = turn
            .iter()
            .position(|e| e.id == resume_a.id)
            .expect("session.resume in the stream");
        turn[at..].iter().map(|e| e.id.clone()).collect()
    };
    assert_eq!(from_join(&ta), from_join(&tb), "A and B see the same turn");
    within("detach b", sb.disconnect()).await.expect("detach b");
    within("detach a", sa.disconnect()).await.expect("detach a");
}

#[tokio::test]
async fn two_clients_race_on_one_permission_exactly_one_wins() {
    sdk_scenarios::bounded(two_clients_answer_one_permission(Late::Neither)).await
}

#[tokio::test]
async fn two_clients_one_permission_late_rejection_changes_nothing() {
    sdk_scenarios::bounded(two_clients_answer_one_permission(Late::B)).await
}

#[tokio::test]
async fn two_clients_one_permission_late_approval_changes_nothing() {
    sdk_scenarios::bounded(two_clients_answer_one_permission(Late::A)).await
}
