//! Shared scenarios for the interop tests that drive agentwire with the **official Copilot Rust
//! SDK** (`github-copilot-sdk`, unmodified). Every scenario takes an already constructed
//! [`Client`]; the test files decide the transport (in-process duplex pipe, TCP to the real
//! binary, stdio of the real binary).
//!
//! This file is also compiled into `runtimes/tokio/tests/interop_sdk_process.rs` (via
//! `#[path]`), so it only depends on the SDK, tokio and serde_json.
//!
//! Every wait is bounded: a single protocol step by [`STEP`], a whole test by [`TEST`].
#![allow(dead_code)]

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use github_copilot_sdk::handler::{ElicitationHandler, PermissionHandler, PermissionResult};
use github_copilot_sdk::rpc::ExecuteCommandParams;
use github_copilot_sdk::session::Session;
use github_copilot_sdk::subscription::{EventSubscription, LifecycleSubscription, RecvErrorKind};
use github_copilot_sdk::tool::ToolHandler;
use github_copilot_sdk::types::{
    CommandContext, CommandDefinition, CommandHandler, ElicitationRequest, ElicitationResult,
    MessageOptions, PermissionRequestData, RequestId, ResumeSessionConfig, SessionConfig,
    SessionEvent, SessionId, SessionLifecycleEvent, SessionLifecycleEventType, Tool,
    ToolInvocation, ToolResult,
};
use github_copilot_sdk::{Client, Error};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Upper bound for one protocol step (one RPC, one wait for an event).
pub const STEP: Duration = Duration::from_secs(10);
/// Upper bound for one whole test.
pub const TEST: Duration = Duration::from_secs(30);
/// `send_and_wait` timeout handed to the SDK (its default is 60 s).
pub const TURN: Duration = Duration::from_secs(10);

/// The prompt that makes the built-in scenario call the client tool `get_weather`.
pub const WEATHER_PROMPT: &str = "What is the weather in Paris?";
/// What the built-in scenario says after the tool call.
pub const WEATHER_ANSWER: &str = "It is sunny in Paris.";
/// What the client tool answers.
pub const TOOL_REPLY: &str = "sunny, 21 C";

/// Awaits `fut`, failing the test if it takes longer than [`STEP`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(STEP, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {STEP:?} waiting for: {what}"),
    }
}

/// Runs a whole test body, failing it if it takes longer than [`TEST`].
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(TEST, fut).await {
        Ok(v) => v,
        Err(_) => panic!("test exceeded {TEST:?}"),
    }
}

/// A fresh client-chosen session id, in UUID form (what the SDK itself would pick).
pub fn new_session_id() -> SessionId {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let state = RandomState::new();
    let mut h1 = state.build_hasher();
    h1.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h1.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    let a = h1.finish();
    let mut h2 = state.build_hasher();
    h2.write_u64(a);
    let b = h2.finish();
    let hi = (a & 0xffff_ffff_ffff_0fff) | 0x4000; // version 4
    let lo = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000; // variant 10
    SessionId::new(format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    ))
}

// ---------------------------------------------------------------------------------------------
// Envelope checks
// ---------------------------------------------------------------------------------------------

/// `8-4-4-4-12` hex digits.
pub fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let num = |r: std::ops::Range<usize>| -> u32 { s[r].parse().unwrap_or(99) };
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || !(b[10] == b'T' || b[10] == b't')
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    if !(1..=12).contains(&num(5..7))
        || !(1..=31).contains(&num(8..10))
        || num(11..13) > 23
        || num(14..16) > 59
        || num(17..19) > 60
    {
        return false;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        [b'Z'] | [b'z'] => true,
        [sign, h1, h2, b':', m1, m2] if *sign == b'+' || *sign == b'-' => {
            [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit())
        }
        _ => false,
    }
}

/// Event types that must be ephemeral (`ephemeral: true`) per the session-events schema.
pub const EPHEMERAL_TYPES: &[&str] = &[
    "session.idle",
    "session.title_changed",
    "assistant.message_start",
    "assistant.message_delta",
    "assistant.reasoning_delta",
    "assistant.streaming_delta",
    "assistant.idle",
    "assistant.usage",
    "pending_messages.modified",
    "commands.changed",
    "capabilities.changed",
];

/// Event types that must be persisted (no `ephemeral` flag).
pub const PERSISTED_TYPES: &[&str] = &[
    "session.start",
    "session.resume",
    "session.error",
    "user.message",
    "assistant.turn_start",
    "assistant.message",
    "assistant.turn_end",
    "tool.execution_start",
    "tool.execution_complete",
    "permission.requested",
    "permission.completed",
    "external_tool.requested",
];

/// Checks one event envelope: UUID id, RFC 3339 timestamp, object data, `ephemeral` either
/// absent or `true`, and matching the schema's E/P classification for known types.
pub fn assert_envelope(ev: &SessionEvent) {
    let ctx = || format!("{} event {}", ev.event_type, ev.id);
    assert!(is_uuid(&ev.id), "{}: id is not a UUID", ctx());
    assert!(
        is_rfc3339(&ev.timestamp),
        "{}: timestamp {:?} is not RFC 3339",
        ctx(),
        ev.timestamp
    );
    assert!(
        ev.data.is_object(),
        "{}: data {:?} is not an object",
        ctx(),
        ev.data
    );
    if let Some(parent) = &ev.parent_id {
        assert!(
            is_uuid(parent),
            "{}: parentId {parent:?} is not a UUID",
            ctx()
        );
    }
    assert_ne!(
        ev.ephemeral,
        Some(false),
        "{}: persisted events omit `ephemeral` (got ephemeral:false)",
        ctx()
    );
    if EPHEMERAL_TYPES.contains(&ev.event_type.as_str()) {
        assert_eq!(ev.ephemeral, Some(true), "{}: must be ephemeral", ctx());
    }
    if PERSISTED_TYPES.contains(&ev.event_type.as_str()) {
        assert_eq!(ev.ephemeral, None, "{}: must be persisted", ctx());
    }
    assert!(
        ev.agent_id.is_none(),
        "{}: main-agent events carry no agentId",
        ctx()
    );
}

fn is_persisted(ev: &SessionEvent) -> bool {
    ev.ephemeral != Some(true)
}

/// Checks the `parentId` rule over a contiguous stream of events as one connection received
/// them: each event's parent is the id of the most recent persisted event before it
/// (`last_persisted` before the first one; `None` at the start of a session). Returns the id of
/// the last persisted event.
pub fn assert_chain(events: &[SessionEvent], mut last_persisted: Option<String>) -> Option<String> {
    for ev in events {
        assert_eq!(
            ev.parent_id, last_persisted,
            "{} event {}: parentId must be the id of the most recent persisted event",
            ev.event_type, ev.id
        );
        if is_persisted(ev) {
            last_persisted = Some(ev.id.clone());
        }
    }
    last_persisted
}

/// The types of `events`, in order.
pub fn types(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event_type.as_str()).collect()
}

/// Asserts that `wanted` occurs in `events` as an ordered subsequence; returns the matched indices.
pub fn assert_subsequence(events: &[SessionEvent], wanted: &[&str]) -> Vec<usize> {
    let mut idx = Vec::new();
    let mut from = 0;
    for w in wanted {
        match events[from..].iter().position(|e| e.event_type == *w) {
            Some(p) => {
                idx.push(from + p);
                from += p + 1;
            }
            None => panic!(
                "expected ordered subsequence {wanted:?}; missing {w:?} after index {from} in {:?}",
                types(events)
            ),
        }
    }
    idx
}

fn str_field<'a>(ev: &'a SessionEvent, key: &str) -> Option<&'a str> {
    ev.data.get(key).and_then(Value::as_str)
}

// ---------------------------------------------------------------------------------------------
// Event recorder
// ---------------------------------------------------------------------------------------------

/// Collects the events of one [`EventSubscription`] in a background task.
pub struct Recorder {
    rx: mpsc::UnboundedReceiver<Result<SessionEvent, String>>,
    /// Every event received so far, in order.
    pub seen: Vec<SessionEvent>,
    /// Index in `seen` where the current turn starts (see [`Recorder::turn`]).
    cursor: usize,
}

impl Recorder {
    /// Starts forwarding `sub`'s events.
    pub fn new(mut sub: EventSubscription) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                match sub.recv().await {
                    Ok(ev) => {
                        if tx.send(Ok(ev)).is_err() {
                            break;
                        }
                    }
                    Err(e) if matches!(e.kind(), RecvErrorKind::Closed) => break,
                    Err(e) => {
                        let _ = tx.send(Err(format!("event subscription error: {e}")));
                    }
                }
            }
        });
        Recorder {
            rx,
            seen: Vec::new(),
            cursor: 0,
        }
    }

    async fn next(&mut self, what: &str) -> SessionEvent {
        match within(what, self.rx.recv()).await {
            Some(Ok(ev)) => {
                self.seen.push(ev.clone());
                ev
            }
            Some(Err(e)) => panic!("{e} while waiting for {what}"),
            None => panic!(
                "event subscription closed while waiting for {what}; seen {:?}",
                types(&self.seen)
            ),
        }
    }

    /// Receives until an event of type `ty` arrives and returns it.
    pub async fn wait_for(&mut self, ty: &str) -> SessionEvent {
        let what = format!("a {ty:?} event");
        loop {
            let ev = self.next(&what).await;
            if ev.event_type == ty {
                return ev;
            }
        }
    }

    /// Receives until the next `session.idle` and returns every event since the previous call
    /// (the events of one turn, idle included).
    pub async fn turn(&mut self) -> Vec<SessionEvent> {
        let start = self.cursor;
        // The idle may already be among the events received by an earlier wait_for.
        if !self.seen[start..]
            .iter()
            .any(|e| e.event_type == "session.idle")
        {
            self.wait_for("session.idle").await;
        }
        let end = start
            + self.seen[start..]
                .iter()
                .position(|e| e.event_type == "session.idle")
                .expect("idle present")
            + 1;
        self.cursor = end;
        self.seen[start..end].to_vec()
    }

    /// Takes whatever has arrived without waiting.
    pub fn drain(&mut self) {
        while let Ok(item) = self.rx.try_recv() {
            match item {
                Ok(ev) => self.seen.push(ev),
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Waits a little and asserts that nothing more arrived.
    pub async fn assert_quiet(&mut self, for_: Duration) {
        tokio::time::sleep(for_).await;
        let before = self.seen.len();
        self.drain();
        assert_eq!(
            self.seen.len(),
            before,
            "unexpected extra events: {:?}",
            types(&self.seen[before..])
        );
    }
}

/// Receives lifecycle notifications until one of `ty` for `session` arrives.
pub async fn wait_lifecycle(
    sub: &mut LifecycleSubscription,
    ty: SessionLifecycleEventType,
    session: &SessionId,
) -> SessionLifecycleEvent {
    let what = format!("lifecycle {ty:?} for {session}");
    within(&what, async {
        loop {
            match sub.recv().await {
                Ok(ev) if ev.event_type == ty && ev.session_id == *session => return ev,
                Ok(_) => continue,
                Err(e) => panic!("lifecycle subscription error: {e}"),
            }
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Handlers (implemented by hand: the traits are `#[async_trait]`, whose expansion is this)
// ---------------------------------------------------------------------------------------------

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A `get_weather` tool handler that records every invocation and answers [`TOOL_REPLY`].
pub struct RecordingTool {
    /// Every invocation, in order.
    pub calls: Arc<Mutex<Vec<ToolInvocation>>>,
}

impl ToolHandler for RecordingTool {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        invocation: ToolInvocation,
    ) -> BoxFut<'async_trait, Result<ToolResult, Error>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.calls.lock().unwrap().push(invocation);
        Box::pin(async { Ok(ToolResult::Text(TOOL_REPLY.to_string())) })
    }
}

/// A permission handler that records each request's event data and approves it once, or
/// rejects it with feedback when `reject` is set.
pub struct RecordingPermission {
    /// `(requestId, full permission.requested data)` for every request.
    pub requests: Arc<Mutex<Vec<(String, Value)>>>,
    /// `Some(feedback)`: answer `reject{feedback}` instead of `approve-once`.
    pub reject: Option<String>,
}

impl PermissionHandler for RecordingPermission {
    fn handle<'life0, 'async_trait>(
        &'life0 self,
        _session_id: SessionId,
        request_id: RequestId,
        data: PermissionRequestData,
    ) -> BoxFut<'async_trait, PermissionResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.requests
            .lock()
            .unwrap()
            .push((request_id.to_string(), data.extra));
        let result = match &self.reject {
            Some(feedback) => PermissionResult::reject(Some(feedback.clone())),
            None => PermissionResult::approve_once(),
        };
        Box::pin(async move { result })
    }
}

/// An elicitation handler that records each request and accepts with `{"confirmed": true}`.
pub struct RecordingElicitation {
    /// Every request, in order.
    pub requests: Arc<Mutex<Vec<ElicitationRequest>>>,
}

impl ElicitationHandler for RecordingElicitation {
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
        Box::pin(async {
            ElicitationResult {
                action: "accept".into(),
                content: Some(json!({"confirmed": true})),
            }
        })
    }
}

/// A slash-command handler that records each invocation.
pub struct RecordingCommand {
    /// Every invocation, in order.
    pub calls: Arc<Mutex<Vec<CommandContext>>>,
}

impl CommandHandler for RecordingCommand {
    fn on_command<'life0, 'async_trait>(
        &'life0 self,
        ctx: CommandContext,
    ) -> BoxFut<'async_trait, Result<(), Error>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.calls.lock().unwrap().push(ctx);
        Box::pin(async { Ok(()) })
    }
}

/// The `get_weather` tool declaration, without a handler (declaration-only).
pub fn weather_declaration() -> Tool {
    Tool::new("get_weather")
        .with_description("Get weather for a city")
        .with_parameters(json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"]
        }))
}

/// The `get_weather` tool declaration, with a recording handler attached.
pub fn weather_tool(calls: Arc<Mutex<Vec<ToolInvocation>>>) -> Tool {
    weather_declaration().with_handler(Arc::new(RecordingTool { calls }))
}

/// How a test session is set up.
#[derive(Clone, Debug)]
pub struct Setup {
    /// `streaming` on `session.create`.
    pub streaming: bool,
    /// Attach a recording handler to `get_weather` (else declaration-only).
    pub tool_handler: bool,
    /// Install a recording permission handler.
    pub permission_handler: bool,
    /// Make that handler reject with this feedback.
    pub reject: Option<String>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            streaming: false,
            tool_handler: true,
            permission_handler: true,
            reject: None,
        }
    }
}

/// Everything a test needs to look at after creating a session through the SDK.
pub struct Created {
    pub session: Session,
    pub events: Recorder,
    pub tool_calls: Arc<Mutex<Vec<ToolInvocation>>>,
    pub permissions: Arc<Mutex<Vec<(String, Value)>>>,
}

/// Creates a session with a client-chosen id, the `get_weather` tool (with handler) and a
/// recording permission handler. The event subscription is installed before `session.create`
/// goes out (`prepare_session`), so the recorder sees every event, `session.start` included.
pub async fn create_session(client: &Client, id: &SessionId, streaming: bool) -> Created {
    create_session_with(
        client,
        id,
        Setup {
            streaming,
            ..Setup::default()
        },
    )
    .await
}

/// [`create_session`] with a custom [`Setup`].
pub async fn create_session_with(client: &Client, id: &SessionId, setup: Setup) -> Created {
    let tool_calls = Arc::new(Mutex::new(Vec::new()));
    let permissions = Arc::new(Mutex::new(Vec::new()));
    let tool = if setup.tool_handler {
        weather_tool(tool_calls.clone())
    } else {
        weather_declaration()
    };
    let mut config = SessionConfig::default()
        .with_session_id(id.clone())
        .with_model("fake-model")
        .with_streaming(setup.streaming)
        .with_tools([tool]);
    if setup.permission_handler {
        config = config.with_permission_handler(Arc::new(RecordingPermission {
            requests: permissions.clone(),
            reject: setup.reject.clone(),
        }));
    }
    let prepared = client
        .prepare_session(config)
        .expect("prepare_session accepts the config");
    let events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create succeeds");
    assert_eq!(session.id(), id, "the session keeps the client-chosen id");
    Created {
        session,
        events,
        tool_calls,
        permissions,
    }
}

/// Runs `send_and_wait(prompt)` and returns the assistant message it resolved with.
pub async fn turn(session: &Session, prompt: &str) -> SessionEvent {
    let reply = within(
        &format!("send_and_wait({prompt:?})"),
        session.send_and_wait(MessageOptions::new(prompt).with_wait_timeout(TURN)),
    )
    .await
    .unwrap_or_else(|e| panic!("send_and_wait({prompt:?}) failed: {e}"))
    .unwrap_or_else(|| panic!("send_and_wait({prompt:?}) returned no assistant message"));
    assert_eq!(reply.event_type, "assistant.message");
    assert_envelope(&reply);
    reply
}

/// Asserts the `getMessages` contract against what the connection received: persisted events
/// only, in emission order, starting with `session.start` (parent null), linked by parentId.
pub async fn assert_history_matches(session: &Session, received: &[SessionEvent]) {
    let history = within("session.getMessages", session.get_events())
        .await
        .expect("session.getMessages succeeds");
    for ev in &history {
        assert_envelope(ev);
        assert_eq!(
            ev.ephemeral, None,
            "getMessages must hold persisted events only, got {} {}",
            ev.event_type, ev.id
        );
    }
    assert_chain(&history, None);
    assert_eq!(
        history.first().map(|e| e.event_type.as_str()),
        Some("session.start"),
        "history starts with session.start"
    );
    let persisted: Vec<&str> = received
        .iter()
        .filter(|e| is_persisted(e))
        .map(|e| e.id.as_str())
        .collect();
    let ids: Vec<&str> = history.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        persisted,
        "getMessages must equal the persisted events the client received, in order\n history: {:?}\nreceived: {:?}",
        types(&history),
        received.iter().filter(|e| is_persisted(e)).map(|e| e.event_type.as_str()).collect::<Vec<_>>()
    );
    for (h, r) in history
        .iter()
        .zip(received.iter().filter(|e| is_persisted(e)))
    {
        assert_eq!(h.event_type, r.event_type);
        assert_eq!(h.parent_id, r.parent_id);
        assert_eq!(h.timestamp, r.timestamp);
        assert_eq!(
            h.data, r.data,
            "{} data differs between stream and history",
            h.event_type
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

/// `connect` handshake plus the connection-level methods an SDK calls right after it.
pub async fn scenario_handshake(client: &Client) {
    within("connect", client.verify_protocol_version())
        .await
        .expect("connect handshake");
    assert_eq!(client.protocol_version(), Some(3), "protocol version 3");
    let pong = within("ping", client.ping(Some("hi"))).await.expect("ping");
    assert_eq!(pong.protocol_version, Some(3), "ping reports protocol 3");
    assert!(
        pong.message.starts_with("pong"),
        "ping message {:?}",
        pong.message
    );
    assert!(
        is_rfc3339(&pong.timestamp),
        "ping timestamp {:?} is RFC 3339",
        pong.timestamp
    );
    let status = within("status.get", client.get_status())
        .await
        .expect("status.get");
    assert_eq!(status.protocol_version, 3);
    assert!(!status.version.is_empty(), "status.get reports a version");
    let auth = within("auth.getStatus", client.get_auth_status())
        .await
        .expect("auth.getStatus");
    assert!(
        auth.is_authenticated,
        "a model-free host reports authenticated"
    );
    let models = within("models.list", client.list_models())
        .await
        .expect("models.list");
    assert!(!models.is_empty(), "models.list returns at least one model");
}

/// One plain turn: create with a client-chosen id, `send_and_wait` returns the scripted echo,
/// envelope + parentId chain on the stream, and `getMessages` = the persisted events.
pub async fn scenario_plain_turn(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let prompt = "hello agentwire";
    let reply = turn(&c.session, prompt).await;
    assert_eq!(
        reply.data.get("content").and_then(Value::as_str),
        Some(format!("You said: {prompt}").as_str()),
        "scripted echo"
    );
    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_eq!(
        events[0].event_type, "session.start",
        "first event is session.start"
    );
    assert_eq!(events[0].parent_id, None, "session.start has parentId null");
    assert_eq!(
        events[0].data.get("sessionId").and_then(Value::as_str),
        Some(id.as_str()),
        "session.start.data.sessionId"
    );
    assert_chain(&events, None);
    let idx = assert_subsequence(
        &events,
        &[
            "session.start",
            "user.message",
            "assistant.message",
            "session.idle",
        ],
    );
    let user = &events[idx[1]];
    let assistant = &events[idx[2]];
    assert_eq!(str_field(user, "content"), Some(prompt));
    let message_id = str_field(user, "messageId").expect("user.message.data.messageId");
    assert!(!message_id.is_empty());
    assert_eq!(
        str_field(assistant, "originatingMessageId"),
        Some(message_id),
        "assistant.message.originatingMessageId = user.message.messageId"
    );
    assert_eq!(
        assistant.id, reply.id,
        "send_and_wait returned the streamed assistant.message"
    );
    assert_eq!(
        events.last().unwrap().event_type,
        "session.idle",
        "turn ends with session.idle"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e.event_type == "session.idle")
            .count(),
        1
    );
    assert_history_matches(&c.session, &c.events.seen).await;
    within("session.detach", c.session.disconnect())
        .await
        .expect("detach");
}

/// The built-in weather scenario: permission → external tool on this client → final answer.
pub async fn scenario_tool_turn(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let reply = turn(&c.session, WEATHER_PROMPT).await;
    assert_eq!(
        reply.data.get("content").and_then(Value::as_str),
        Some(WEATHER_ANSWER)
    );
    let calls = c.tool_calls.lock().unwrap().clone();
    assert_eq!(
        calls.len(),
        1,
        "the tool handler ran exactly once: {calls:?}"
    );
    assert_eq!(calls[0].tool_name, "get_weather");
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    assert_eq!(calls[0].session_id, id);
    let permissions = c.permissions.lock().unwrap().clone();
    assert_eq!(
        permissions.len(),
        1,
        "one permission request: {permissions:?}"
    );

    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_chain(&events, None);
    let idx = assert_subsequence(
        &events,
        &[
            "user.message",
            "assistant.message",
            "tool.execution_start",
            "permission.requested",
            "external_tool.requested",
            "tool.execution_complete",
            "assistant.message",
            "session.idle",
        ],
    );
    let user = &events[idx[0]];
    let message_id = str_field(user, "messageId").expect("user.message.data.messageId");
    let call = &events[idx[1]];
    let requests = call
        .data
        .get("toolRequests")
        .and_then(Value::as_array)
        .expect("assistant.message.toolRequests");
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["name"], "get_weather");
    assert_eq!(requests[0]["arguments"], json!({"city": "Paris"}));
    let tool_call_id = requests[0]["toolCallId"]
        .as_str()
        .expect("toolRequests[0].toolCallId");
    assert_eq!(str_field(call, "originatingMessageId"), Some(message_id));
    let start = &events[idx[2]];
    assert_eq!(str_field(start, "toolCallId"), Some(tool_call_id));
    assert_eq!(str_field(start, "toolName"), Some("get_weather"));
    let perm = &events[idx[3]];
    assert_eq!(
        str_field(perm, "requestId"),
        Some(permissions[0].0.as_str()),
        "the handler answered the streamed permission request"
    );
    assert_eq!(perm.data["permissionRequest"]["kind"], "custom-tool");
    assert_eq!(perm.data["permissionRequest"]["toolName"], "get_weather");
    let perm_done = events
        .iter()
        .position(|e| e.event_type == "permission.completed")
        .expect("permission.completed");
    assert!(
        perm_done > idx[3] && perm_done < idx[5],
        "permission.completed lies between permission.requested and tool.execution_complete"
    );
    assert_eq!(events[perm_done].data["result"]["kind"], "approved");
    let ext = &events[idx[4]];
    assert_eq!(str_field(ext, "toolCallId"), Some(tool_call_id));
    assert_eq!(str_field(ext, "toolName"), Some("get_weather"));
    assert_eq!(str_field(ext, "sessionId"), Some(id.as_str()));
    assert_eq!(ext.data["arguments"], json!({"city": "Paris"}));
    let done = &events[idx[5]];
    assert_eq!(str_field(done, "toolCallId"), Some(tool_call_id));
    assert_eq!(done.data["success"], true);
    assert_eq!(
        done.data["result"]["content"], TOOL_REPLY,
        "the tool's answer reaches tool.execution_complete"
    );
    let answer = &events[idx[6]];
    assert_eq!(answer.id, reply.id);
    assert_eq!(str_field(answer, "originatingMessageId"), Some(message_id));
    assert_history_matches(&c.session, &c.events.seen).await;
    within("session.detach", c.session.disconnect())
        .await
        .expect("detach");
}

/// Streaming: `assistant.message_delta` events (ephemeral) add up to the final message.
pub async fn scenario_streaming(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, true).await;
    let prompt = "stream this please";
    let reply = turn(&c.session, prompt).await;
    let content = reply.data["content"].as_str().expect("content").to_string();
    assert_eq!(content, format!("You said: {prompt}"));
    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_chain(&events, None);
    let message_id = reply.data["messageId"]
        .as_str()
        .expect("assistant messageId");
    let deltas: Vec<&SessionEvent> = events
        .iter()
        .filter(|e| e.event_type == "assistant.message_delta")
        .collect();
    assert!(
        !deltas.is_empty(),
        "streaming:true yields assistant.message_delta events"
    );
    let mut joined = String::new();
    for d in &deltas {
        assert_eq!(str_field(d, "messageId"), Some(message_id));
        joined.push_str(str_field(d, "deltaContent").expect("deltaContent"));
    }
    assert_eq!(joined, content, "deltas add up to the final content");
    let last_delta = events
        .iter()
        .rposition(|e| e.event_type == "assistant.message_delta")
        .unwrap();
    let final_msg = events.iter().position(|e| e.id == reply.id).unwrap();
    assert!(
        last_delta < final_msg,
        "deltas come before the final assistant.message"
    );
    assert_history_matches(&c.session, &c.events.seen).await;
}

/// `session.list`, `session.getMetadata` (known and unknown id) and `session.getLastId`.
pub async fn scenario_list_and_metadata(client: &Client) {
    let id = new_session_id();
    let c = create_session(client, &id, false).await;
    turn(&c.session, "remember me").await;
    let sessions = within("session.list", client.list_sessions(None))
        .await
        .expect("session.list");
    let mine = sessions
        .iter()
        .find(|s| s.session_id == id)
        .unwrap_or_else(|| panic!("session.list contains {id}: {sessions:?}"));
    assert!(
        is_rfc3339(&mine.start_time),
        "startTime {:?}",
        mine.start_time
    );
    assert!(
        is_rfc3339(&mine.modified_time),
        "modifiedTime {:?}",
        mine.modified_time
    );
    assert!(
        mine.start_time <= mine.modified_time,
        "startTime <= modifiedTime"
    );
    assert!(!mine.is_remote);
    let meta = within("session.getMetadata", client.get_session_metadata(&id))
        .await
        .expect("session.getMetadata")
        .expect("metadata for a known session");
    assert_eq!(meta.session_id, id);
    assert_eq!(meta.start_time, mine.start_time);
    let unknown = new_session_id();
    let none = within(
        "session.getMetadata(unknown)",
        client.get_session_metadata(&unknown),
    )
    .await
    .expect("session.getMetadata for an unknown id is not an error");
    assert!(none.is_none(), "unknown id → no metadata, got {none:?}");
    let last = within("session.getLastId", client.get_last_session_id())
        .await
        .expect("session.getLastId");
    assert_eq!(last.as_ref(), Some(&id), "the most recently used session");
    within("session.detach", c.session.disconnect())
        .await
        .expect("detach");
}

/// A second client resumes the session; both see the next turn's events, with identical ids;
/// the second client's view continues the parentId chain; history agrees on both.
pub async fn scenario_resume_shared(a: &Client, b: &Client) {
    let id = new_session_id();
    let mut ca = create_session(a, &id, false).await;
    turn(&ca.session, "first turn").await;
    ca.events.turn().await;
    let history_before = within("getMessages", ca.session.get_events())
        .await
        .expect("getMessages");
    let last_persisted = history_before.last().map(|e| e.id.clone());

    let prepared = b
        .prepare_resume_session(ResumeSessionConfig::new(id.clone()))
        .expect("prepare_resume_session");
    let mut eb = Recorder::new(prepared.subscribe());
    let sb = within("session.resume", prepared.start())
        .await
        .expect("session.resume of a live session (join) succeeds");
    assert_eq!(sb.id(), &id);
    // The resume event goes to every attached connection and continues the chain.
    let resume_b = eb.wait_for("session.resume").await;
    assert_envelope(&resume_b);
    assert_eq!(
        resume_b.parent_id, last_persisted,
        "session.resume continues the chain"
    );
    let resume_a = ca.events.wait_for("session.resume").await;
    assert_eq!(
        resume_a.id, resume_b.id,
        "both connections see the same session.resume"
    );

    // A drives the next turn; B observes it.
    let prompt = "second turn";
    let reply = turn(&ca.session, prompt).await;
    assert_eq!(reply.data["content"], format!("You said: {prompt}"));
    let ta = ca.events.turn().await;
    let tb = eb.turn().await;
    let ids_a: Vec<&str> = ta.iter().map(|e| e.id.as_str()).collect();
    let ids_b: Vec<&str> = tb.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids_a, ids_b,
        "both clients receive the same events in the same order"
    );
    assert_eq!(ta[0].event_type, "session.resume");
    for ev in &tb {
        assert_envelope(ev);
    }
    assert_chain(&tb, last_persisted.clone());
    assert_subsequence(
        &tb,
        &[
            "session.resume",
            "user.message",
            "assistant.message",
            "session.idle",
        ],
    );

    // B drives a turn; A observes it.
    let reply_b = turn(&sb, "from b").await;
    assert_eq!(reply_b.data["content"], "You said: from b");
    let ta2 = ca.events.turn().await;
    let tb2 = eb.turn().await;
    assert_eq!(
        ta2.iter().map(|e| &e.id).collect::<Vec<_>>(),
        tb2.iter().map(|e| &e.id).collect::<Vec<_>>()
    );

    let ha = within("getMessages(a)", ca.session.get_events())
        .await
        .expect("history a");
    let hb = within("getMessages(b)", sb.get_events())
        .await
        .expect("history b");
    assert_eq!(
        ha.iter().map(|e| &e.id).collect::<Vec<_>>(),
        hb.iter().map(|e| &e.id).collect::<Vec<_>>(),
        "both clients read the same history"
    );
    assert_history_matches(&ca.session, &ca.events.seen).await;

    within("detach b", sb.disconnect()).await.expect("detach b");
    within("detach a", ca.session.disconnect())
        .await
        .expect("detach a");
}

/// Lifecycle notifications, detach and delete.
pub async fn scenario_detach_delete(client: &Client) {
    let mut lifecycle = client.subscribe_lifecycle();
    let id = new_session_id();
    let c = create_session(client, &id, false).await;
    let created = wait_lifecycle(&mut lifecycle, SessionLifecycleEventType::Created, &id).await;
    if let Some(meta) = &created.metadata {
        assert!(is_rfc3339(&meta.start_time));
        assert!(is_rfc3339(&meta.modified_time));
    }
    turn(&c.session, "before detach").await;
    within("session.detach", c.session.disconnect())
        .await
        .expect("session.detach answers success:true");
    // Detached, not deleted: still listed and resumable.
    let listed = within("session.list", client.list_sessions(None))
        .await
        .expect("session.list");
    assert!(
        listed.iter().any(|s| s.session_id == id),
        "detached session still listed"
    );
    within("session.delete", client.delete_session(&id))
        .await
        .expect("session.delete");
    let deleted = wait_lifecycle(&mut lifecycle, SessionLifecycleEventType::Deleted, &id).await;
    assert_eq!(deleted.session_id, id);
    let listed = within("session.list", client.list_sessions(None))
        .await
        .expect("session.list");
    assert!(
        !listed.iter().any(|s| s.session_id == id),
        "deleted session is gone from session.list"
    );
    let meta = within("session.getMetadata", client.get_session_metadata(&id))
        .await
        .expect("session.getMetadata");
    assert!(meta.is_none(), "deleted session has no metadata");
    let resumed = within(
        "session.resume(deleted)",
        client.resume_session(ResumeSessionConfig::new(id.clone())),
    )
    .await;
    assert!(resumed.is_err(), "resuming a deleted session fails");
}

/// `Session::send` (no wait): the returned `messageId` is the one on `user.message`, and the
/// turn's `assistant.message` carries it as `originatingMessageId` — the correlation the
/// SDKs' event-based waits rely on.
pub async fn scenario_send_correlation(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let prompt = "fire and forget";
    let message_id = within("session.send", c.session.send(MessageOptions::new(prompt)))
        .await
        .expect("session.send");
    assert!(!message_id.is_empty(), "session.send returns a messageId");
    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_chain(&events, None);
    let idx = assert_subsequence(
        &events,
        &["user.message", "assistant.message", "session.idle"],
    );
    assert_eq!(
        str_field(&events[idx[0]], "messageId"),
        Some(message_id.as_str())
    );
    assert_eq!(str_field(&events[idx[0]], "content"), Some(prompt));
    assert_eq!(
        str_field(&events[idx[1]], "originatingMessageId"),
        Some(message_id.as_str())
    );
    assert_eq!(
        str_field(&events[idx[1]], "content"),
        Some(format!("You said: {prompt}").as_str())
    );
    assert_history_matches(&c.session, &c.events.seen).await;
}

/// Two `send_and_wait` calls in flight at once on one session: each resolves with the answer
/// to its own prompt (the SDK correlates by message id; the host queues the second turn).
pub async fn scenario_concurrent_sends(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let (one, two) = tokio::join!(turn(&c.session, "first"), turn(&c.session, "second"));
    assert_eq!(one.data["content"], "You said: first");
    assert_eq!(two.data["content"], "You said: second");
    assert_ne!(
        one.data["originatingMessageId"], two.data["originatingMessageId"],
        "each answer belongs to its own message"
    );
    let first = c.events.turn().await;
    let second = c.events.turn().await;
    let mut all = first.clone();
    all.extend(second.iter().cloned());
    for ev in &all {
        assert_envelope(ev);
    }
    assert_chain(&all, None);
    assert_history_matches(&c.session, &c.events.seen).await;
}

/// The permission handler rejects: no `external_tool.requested`, the tool handler never runs,
/// `permission.completed` says `denied-interactively-by-user` with the feedback, and the tool
/// call completes with `success:false, error.code:"denied"`. The turn still ends normally.
pub async fn scenario_permission_denied(client: &Client) {
    let id = new_session_id();
    let mut c = create_session_with(
        client,
        &id,
        Setup {
            reject: Some("not now".into()),
            ..Setup::default()
        },
    )
    .await;
    within(
        "send_and_wait after a rejected permission",
        c.session
            .send_and_wait(MessageOptions::new(WEATHER_PROMPT).with_wait_timeout(TURN)),
    )
    .await
    .expect("the turn completes after a rejected permission");
    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_chain(&events, None);
    assert!(
        c.tool_calls.lock().unwrap().is_empty(),
        "a rejected tool call must not reach the tool handler"
    );
    assert_eq!(c.permissions.lock().unwrap().len(), 1);
    let idx = assert_subsequence(
        &events,
        &[
            "user.message",
            "tool.execution_start",
            "permission.requested",
            "permission.completed",
            "tool.execution_complete",
            "session.idle",
        ],
    );
    assert!(
        !events
            .iter()
            .any(|e| e.event_type == "external_tool.requested"),
        "no external_tool.requested after a rejection: {:?}",
        types(&events)
    );
    let done = &events[idx[3]];
    assert_eq!(done.data["result"]["kind"], "denied-interactively-by-user");
    assert_eq!(done.data["result"]["feedback"], "not now");
    let complete = &events[idx[4]];
    assert_eq!(complete.data["success"], false);
    assert_eq!(complete.data["error"]["code"], "denied");
}

/// Multi-client tool routing: A declares `get_weather` without a handler (declaration-only, so
/// A's SDK ignores the request), B joins with a handler and answers it; the turn A started
/// completes with the tool's result. Then both detach, A deletes the session and **both**
/// connections get the `session.deleted` lifecycle notification.
pub async fn scenario_tool_on_joined_client(a: &Client, b: &Client) {
    let id = new_session_id();
    let mut la = a.subscribe_lifecycle();
    let mut lb = b.subscribe_lifecycle();
    let mut ca = create_session_with(
        a,
        &id,
        Setup {
            tool_handler: false,
            ..Setup::default()
        },
    )
    .await;
    let calls_b = Arc::new(Mutex::new(Vec::new()));
    let prepared = b
        .prepare_resume_session(
            ResumeSessionConfig::new(id.clone()).with_tools([weather_tool(calls_b.clone())]),
        )
        .expect("prepare_resume_session");
    let mut eb = Recorder::new(prepared.subscribe());
    let sb = within("session.resume", prepared.start())
        .await
        .expect("join");
    let reply = turn(&ca.session, WEATHER_PROMPT).await;
    assert_eq!(reply.data["content"], WEATHER_ANSWER);
    let calls = calls_b.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "B's handler ran once: {calls:?}");
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    assert_eq!(
        ca.permissions.lock().unwrap().len(),
        1,
        "A answered the permission"
    );
    let ta = ca.events.turn().await;
    let idx = assert_subsequence(
        &ta,
        &[
            "external_tool.requested",
            "tool.execution_complete",
            "assistant.message",
            "session.idle",
        ],
    );
    assert_eq!(ta[idx[1]].data["success"], true);
    assert_eq!(ta[idx[1]].data["result"]["content"], TOOL_REPLY);
    let tb = eb.turn().await;
    assert!(
        tb.iter().any(|e| e.id == ta[idx[0]].id),
        "B saw the external_tool.requested it answered"
    );

    within("detach b", sb.disconnect()).await.expect("detach b");
    within("detach a", ca.session.disconnect())
        .await
        .expect("detach a");
    within("delete", a.delete_session(&id))
        .await
        .expect("delete");
    wait_lifecycle(&mut la, SessionLifecycleEventType::Deleted, &id).await;
    wait_lifecycle(&mut lb, SessionLifecycleEventType::Deleted, &id).await;
}

/// Elicitation on one client: the session advertises `capabilities.ui.elicitation`, and
/// `session.ui().confirm()` round-trips through `elicitation.requested` → the client's
/// handler → `session.ui.handlePendingElicitation` → `elicitation.completed`.
pub async fn scenario_elicitation(client: &Client) {
    let id = new_session_id();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let prepared = client
        .prepare_session(
            SessionConfig::default()
                .with_session_id(id.clone())
                .with_elicitation_handler(Arc::new(RecordingElicitation {
                    requests: requests.clone(),
                })),
        )
        .expect("prepare_session");
    let mut events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create");
    assert_eq!(
        session.capabilities().ui.and_then(|u| u.elicitation),
        Some(true),
        "a session whose client handles elicitation advertises ui.elicitation"
    );
    let confirmed = within("ui.confirm", session.ui().confirm("Proceed?"))
        .await
        .expect("session.ui.elicitation");
    assert!(confirmed, "the handler accepted with confirmed:true");
    let seen = requests.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "the handler ran once");
    assert_eq!(seen[0].message, "Proceed?");
    let schema = seen[0].requested_schema.clone().expect("requestedSchema");
    assert_eq!(schema["properties"]["confirmed"]["type"], "boolean");
    let requested = events.wait_for("elicitation.requested").await;
    let completed = events.wait_for("elicitation.completed").await;
    for ev in [&requested, &completed] {
        assert_envelope(ev);
        assert_eq!(ev.ephemeral, Some(true), "{} is ephemeral", ev.event_type);
    }
    assert_eq!(str_field(&requested, "message"), Some("Proceed?"));
    assert_eq!(
        str_field(&requested, "requestId"),
        str_field(&completed, "requestId")
    );
    assert_eq!(str_field(&completed, "action"), Some("accept"));
    assert_eq!(completed.data["content"], json!({"confirmed": true}));
    within("detach", session.disconnect())
        .await
        .expect("detach");
}

/// Elicitation across clients: A has no elicitation handler, so its session starts without
/// `ui.elicitation`; when B joins with one, A is told by `capabilities.changed`, and A's
/// `ui().confirm()` is answered by B's handler.
pub async fn scenario_elicitation_via_joined_client(a: &Client, b: &Client) {
    let id = new_session_id();
    let mut ca = create_session(a, &id, false).await;
    assert_ne!(
        ca.session.capabilities().ui.and_then(|u| u.elicitation),
        Some(true),
        "no client can answer elicitation yet"
    );
    let requests = Arc::new(Mutex::new(Vec::new()));
    let sb = within(
        "session.resume",
        b.resume_session(
            ResumeSessionConfig::new(id.clone()).with_elicitation_handler(Arc::new(
                RecordingElicitation {
                    requests: requests.clone(),
                },
            )),
        ),
    )
    .await
    .expect("join with an elicitation handler");
    assert_eq!(
        sb.capabilities().ui.and_then(|u| u.elicitation),
        Some(true),
        "the joining client gets ui.elicitation in its resume result"
    );
    let changed = ca.events.wait_for("capabilities.changed").await;
    assert_envelope(&changed);
    assert_eq!(changed.data["ui"]["elicitation"], true);
    assert_eq!(
        ca.session.capabilities().ui.and_then(|u| u.elicitation),
        Some(true),
        "A's SDK applied capabilities.changed"
    );
    let confirmed = within("ui.confirm via B", ca.session.ui().confirm("Deploy?"))
        .await
        .expect("session.ui.elicitation");
    assert!(confirmed);
    assert_eq!(requests.lock().unwrap().len(), 1, "B's handler answered");
    within("detach b", sb.disconnect()).await.expect("detach b");
    within("detach a", ca.session.disconnect())
        .await
        .expect("detach a");
}

/// Slash commands: a command declared on `session.create` is executed with
/// `session.commands.execute`; the host emits `command.execute`, the SDK runs the handler and
/// answers `handlePendingCommand`; an undeclared command does not succeed.
pub async fn scenario_command(client: &Client) {
    let id = new_session_id();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let prepared = client
        .prepare_session(
            SessionConfig::default()
                .with_session_id(id.clone())
                .with_commands(vec![CommandDefinition::new(
                    "hello",
                    Arc::new(RecordingCommand {
                        calls: calls.clone(),
                    }),
                )
                .with_description("say hi")]),
        )
        .expect("prepare_session");
    let mut events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create");
    let result = within(
        "session.commands.execute",
        session.rpc().commands().execute(ExecuteCommandParams {
            command_name: "hello".into(),
            args: "world".into(),
        }),
    )
    .await
    .expect("session.commands.execute");
    assert_eq!(result.error, None, "the command succeeded");
    let seen = calls.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "the handler ran once");
    assert_eq!(seen[0].command_name, "hello");
    assert_eq!(seen[0].args, "world");
    assert_eq!(seen[0].command, "/hello world");
    assert_eq!(seen[0].session_id, id);
    let exec = events.wait_for("command.execute").await;
    let done = events.wait_for("command.completed").await;
    for ev in [&exec, &done] {
        assert_envelope(ev);
        assert_eq!(ev.ephemeral, Some(true), "{} is ephemeral", ev.event_type);
    }
    assert_eq!(str_field(&exec, "requestId"), str_field(&done, "requestId"));
    assert_eq!(str_field(&exec, "commandName"), Some("hello"));

    let unknown = within(
        "session.commands.execute(unknown)",
        session.rpc().commands().execute(ExecuteCommandParams {
            command_name: "nope".into(),
            args: String::new(),
        }),
    )
    .await;
    if let Ok(r) = unknown {
        assert!(r.error.is_some(), "an undeclared command reports an error");
    }
    assert_eq!(calls.lock().unwrap().len(), 1, "no handler ran for it");
    within("detach", session.disconnect())
        .await
        .expect("detach");
}

/// A scenario whose "slow" prompts sleep for 30 s before answering (for abort tests); other
/// prompts are echoed like the built-in scenario.
pub const SLOW_SCENARIO: &str = r#"{
  "rules": [ { "match": "slow", "steps": [ { "sleep_ms": 30000 }, { "say": "too late" } ] } ],
  "default": [ { "say": "You said: {prompt}" } ]
}"#;

/// `session.abort` during a turn (needs a server playing [`SLOW_SCENARIO`]): the pending
/// `send_and_wait` fails as aborted, the stream carries `abort` (persisted) and
/// `session.idle {aborted:true}`, no answer is produced, and the session takes the next turn.
pub async fn scenario_abort(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let session = &c.session;
    let events = &mut c.events;
    let (result, ()) = tokio::join!(
        within(
            "send_and_wait(slow)",
            session.send_and_wait(MessageOptions::new("slow please").with_wait_timeout(TURN)),
        ),
        async {
            events.wait_for("assistant.turn_start").await;
            within("session.abort", session.abort())
                .await
                .expect("session.abort");
        }
    );
    let err = result.expect_err("an aborted send_and_wait fails");
    assert!(
        err.to_string().contains("aborted"),
        "the SDK reports the abort: {err}"
    );
    let turn_events = c.events.turn().await;
    for ev in &turn_events {
        assert_envelope(ev);
    }
    assert_chain(&turn_events, None);
    let idx = assert_subsequence(&turn_events, &["user.message", "abort", "session.idle"]);
    assert_eq!(turn_events[idx[1]].ephemeral, None, "abort is persisted");
    assert_eq!(turn_events[idx[1]].data["reason"], "user_initiated");
    assert_eq!(turn_events[idx[2]].data["aborted"], true);
    assert!(
        !turn_events
            .iter()
            .any(|e| e.event_type == "assistant.message"),
        "an aborted turn says nothing: {:?}",
        types(&turn_events)
    );
    let reply = turn(&c.session, "after abort").await;
    assert_eq!(reply.data["content"], "You said: after abort");
    c.events.turn().await;
    assert_history_matches(&c.session, &c.events.seen).await;
}
