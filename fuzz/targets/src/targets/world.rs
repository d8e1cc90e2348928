//! A host with simulated peers and an invariant checker, shared by the `host_sequence` fuzz
//! target (`fuzz/targets/src/targets.rs`) and the deterministic simulation (`tests/core/simulation.rs`).
//!
//! The [`World`] owns a [`Host`] and every connection's two byte streams: what the peer wrote
//! and the host has not read yet (`to_host`, delivered in chunks of any size), and what the host
//! queued and the peer has not read yet (the host's outbox, drained whenever the driver says).
//! Every frame the host writes is decoded and checked at once; [`World::settle`] then plays a
//! well-behaved client until nothing is left to do, and [`World::final_checks`] checks what must
//! hold at the end.
//!
//! Checked after every input:
//!
//! * the host's output decodes, frame after frame, as JSON-RPC messages;
//! * every response answers a request that was sent and not yet answered (at most one response
//!   per request; the model knows every body a peer wrote, including garbage ones, by parsing
//!   them with the same parser as the host), and at the end every request on a connection that
//!   is still open got exactly one;
//! * per connection, each event's `parentId` is the id of the previous persisted event of its
//!   session while the connection stays attached (wire order = emit order, nothing persisted
//!   is skipped);
//! * streaming deltas reach only connections attached with `streaming: true`;
//! * the outbox stays within its budget, or holds exactly one frame;
//! * a pending request id is accepted (`success: true`) at most once, and only if the host
//!   announced it;
//! * `session.getMessages` contains every persisted event its client saw in that session, in a
//!   consistent `parentId` chain;
//! * at the end: no timer left, no turn running (`session.metadata.isProcessing` false after a final resume).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::time::Duration;

use agentwire::agent::Scenario;
use agentwire::frame::{encode_frame, FrameDecoder, FrameLimits, Framing};
use agentwire::host::{ConnId, Host, HostConfig, Output};
use agentwire::is_streaming_delta_type;
use agentwire::jsonrpc::{self, Message, Parsed};
use agentwire::Timestamp;
use bytes::BytesMut;
use serde_json::{json, Value};

/// Start time of every world (the first `t` of `wire.jsonl`).
pub const T0: u64 = 1_795_983_976_952;

/// The connection token used when a world requires one.
pub const TOKEN: &str = "fuzz-token";

/// The scenario every world plays: plain answers, client tools with and without permission,
/// sleeps, errors and raw events.
pub const SCENARIO_JSON: &str = r#"{
  "rules": [
    {"match": "weather", "steps": [{"tool": "get_weather", "arguments": {"city": "Paris"}},
                                   {"say": "It is sunny in Paris."}]},
    {"match": "both", "steps": [{"tool": "get_weather", "arguments": {"city": "Oslo"}},
                                {"tool": "lookup", "arguments": {"q": "x"}},
                                {"say": "done"}]},
    {"match": "slow", "steps": [{"sleep_ms": 250}, {"say": "slept"}, {"sleep_ms": 40}]},
    {"match": "fail", "steps": [{"say": "about to fail"}, {"error": "boom"}]},
    {"match": "title", "steps": [{"event": "session.title_changed", "data": {"title": "T"},
                                  "ephemeral": true},
                                 {"event": "session.info", "data": {"message": "m"}},
                                 {"say": "titled"}]},
    {"match": "lookup", "steps": [{"tool": "lookup", "arguments": {"q": "y"}},
                                  {"sleep_ms": 10}, {"say": "found"}]},
    {"match": "ghost", "steps": [{"tool": "nobody_has_this", "arguments": {}}, {"say": "?"}]},
    {"match": "question", "steps": [{"user_input": "Which one?", "choices": ["a", "b"]},
                                    {"say": "noted"}]},
    {"match": "plan", "steps": [{"exit_plan_mode": "Plan ready", "plan": "do it",
                                 "actions": ["autopilot", "interactive"]}, {"say": "planned"}]},
    {"match": "mode", "steps": [{"auto_mode_switch": "rate_limited"}, {"say": "switched"}]},
    {"match": "hook", "steps": [{"hook": "preToolUse", "input": {"tool": "x"}}, {"say": "hooked"}]},
    {"match": "ask", "steps": [{"ask": "Proceed?", "schema": {"type": "object"}}, {"say": "asked"}]},
    {"match": "sample", "steps": [{"sample": {"messages": []}}, {"say": "sampled"}]},
    {"match": "cmd", "steps": [{"command": "/deploy prod"}, {"say": "commanded"}]}
  ],
  "default": [{"say": "You said: {prompt}"}]
}"#;

/// How a world is set up.
#[derive(Clone, Debug)]
pub struct WorldConfig {
    /// Seed for the host's ids.
    pub seed: u64,
    /// Each connection's outbox budget.
    pub budget: usize,
    /// Require `connect {token}` first.
    pub token: bool,
    /// Framing limits.
    pub limits: FrameLimits,
    /// `report_persisted_events`: check `StoreOutput::Persist` against the logs and the frames.
    pub persist: bool,
    /// Sessions get a model agent whose endpoint is simulated in-process
    /// ([`SimModel`], answered from the seed) instead of the scripted agent.
    pub model: bool,
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            seed: 0,
            budget: agentwire::host::DEFAULT_OUTBOX_BUDGET,
            token: false,
            limits: FrameLimits::default(),
            persist: false,
            model: false,
        }
    }
}

/// A request the host has been sent and has not answered yet.
#[derive(Clone, Debug)]
pub struct Sent {
    /// Method name (empty for garbage bodies).
    pub method: String,
    /// Params as sent.
    pub params: Value,
    /// The host may answer it later (`sendAndWait`, elicitation, command execution, canvas
    /// round trips); every
    /// other request is answered while its frame is handled, in frame order.
    pub deferred: bool,
    /// When it was sent (the world's count of bodies queued so far).
    pub order: u64,
}

impl Sent {
    fn garbage() -> Sent {
        Sent {
            method: String::new(),
            params: Value::Null,
            deferred: false,
            order: 0,
        }
    }
}

/// Methods whose response may come after later requests' responses.
pub const DEFERRED_METHODS: &[&str] = &[
    "session.sendAndWait",
    "session.ui.elicitation",
    "session.commands.execute",
    // Answered when the canvas's provider answers its `canvas.*` request.
    "session.canvas.open",
    "session.canvas.close",
    "session.canvas.action.invoke",
    // A client-owned task's cancellation waits for its owner's `tasks.cancel` answer.
    "session.tasks.cancel",
];

/// What one connection knows about one session.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// A create/resume answered success and no detach since.
    pub attached: bool,
    /// The latest successful attach asked for streaming.
    pub streaming: bool,
    /// The latest successful attach declared `extensionInfo` (such a connection does not see
    /// `permission.requested` until its extension is approved).
    pub extension: bool,
    /// The id of the last persisted event seen (`Some(None)`: the session has none yet);
    /// `None` while unknown (just attached).
    pub last_persisted: Option<Option<String>>,
}

/// What kind of client answer a pending request wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskKind {
    /// `permission.requested` → `handlePendingPermissionRequest`.
    Permission,
    /// `external_tool.requested` → `handlePendingToolCall`.
    Tool,
    /// `elicitation.requested` → `handlePendingElicitation`.
    Elicitation,
    /// `command.execute` → `handlePendingCommand`.
    Command,
    /// `sampling.requested` → `handlePendingSampling`.
    Sampling,
}

/// A server-to-client request (`userInput.request`, `exitPlanMode.request`, …) a connection
/// received and has not answered; the host may cancel it (`$/cancelRequest`) at its deadline.
#[derive(Clone, Debug)]
pub struct Call {
    /// The connection it arrived on (the answer must go back there).
    pub conn: usize,
    /// Its raw id.
    pub id: String,
    /// Its method.
    pub method: String,
    /// Answered by the settle phase, or cancelled by the host.
    pub done: bool,
}

/// A pending request announced by the host in an event.
#[derive(Clone, Debug)]
pub struct Ask {
    /// The session.
    pub session: String,
    /// What it wants.
    pub kind: AskKind,
    /// The request id to answer.
    pub request_id: String,
    /// The tool call it is about (permissions and client tool calls), if any.
    pub tool_call_id: Option<String>,
    /// A completion event for it was seen.
    pub completed: bool,
    /// The settle phase answered it.
    pub settled: bool,
}

/// One connection and its peer's view.
pub struct Conn {
    /// The host's id for it.
    pub id: ConnId,
    /// Sessions this connection sent an attach with `extensionInfo` for.
    pub extension_sessions: std::collections::BTreeSet<String>,
    /// Its framing.
    pub framing: Framing,
    /// The client identity (several connections over time: reconnects).
    pub client: usize,
    /// Not ended by the peer or the runtime.
    pub open: bool,
    /// The host asked to close it (`ConnectionOutput::Close`).
    pub closed_by_host: bool,
    /// Raw bytes were written: the stream may be out of sync, so the request model is off.
    pub tainted: bool,
    /// A `connect` with the right token was answered with success.
    pub authenticated: bool,
    /// Bytes written by the peer, not yet read by the host.
    pub to_host: VecDeque<u8>,
    decoder: FrameDecoder,
    /// Responses still owed, by raw id text.
    owed: BTreeMap<String, u32>,
    /// Requests sent, by raw id text, in order.
    sent: BTreeMap<String, VecDeque<Sent>>,
    /// Raw ids of the requests answered in frame order (not deferred), in sending order.
    sync_order: VecDeque<String>,
    /// Per-session views.
    pub views: BTreeMap<String, View>,
    /// Every message received, when the world keeps them.
    pub inbox: Vec<Value>,
    /// Responses received (for drivers that wait on one).
    pub responses: BTreeMap<String, Value>,
    /// Frames received in total.
    pub frames_received: u64,
    /// The last message received is an error response with id null.
    last_is_null_error: bool,
    /// `World::host_closes` when this connection was last drained.
    host_closes_at_drain: u64,
    /// `World::inputs` when it was opened.
    opened_at: u64,
    /// `World::inputs` when it ended (EOF or closed by the host).
    ended_at: Option<u64>,
    next_id: u64,
    /// The most recent id sent (for duplicate-id requests).
    pub last_id: Option<String>,
    /// An AHP connection's view (`None` for the Copilot SDK dialect).
    pub ahp: Option<AhpView>,
}

impl Conn {
    /// Whether the exactly-once model holds for this connection.
    pub fn modelled(&self) -> bool {
        !self.tainted
    }

    /// Whether a request sent now would be read and answered.
    pub fn usable(&self) -> bool {
        self.open && !self.closed_by_host
    }

    /// Whether a deferred request (`sendAndWait`, elicitation, command) is still unanswered.
    pub fn owes_deferred(&self) -> bool {
        self.sent
            .values()
            .any(|q| q.iter().any(|s| s.deferred && !s.method.is_empty()))
    }

    /// Number of requests not answered yet.
    pub fn owed_total(&self) -> u32 {
        self.owed.values().sum()
    }

    /// Whether a request with this raw id is still unanswered.
    pub fn is_owed(&self, raw: &str) -> bool {
        self.owed.get(raw).is_some_and(|n| *n > 0)
    }
}

/// What the host says about one event (from its log or from a connection).
#[derive(Clone, Debug)]
struct EventInfo {
    session: String,
    parent: Option<String>,
}

/// What a run exercised (for reports).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Responses checked against the request model.
    pub responses: u64,
    /// Session events received.
    pub events: u64,
    /// Streaming deltas received (by streaming attachments).
    pub deltas: u64,
    /// `session.getMessages` results checked against what their client saw.
    pub catch_ups: u64,
    /// Answers the host accepted (`success: true`).
    pub accepted: u64,
    /// Connections the host closed (framing errors, slow readers).
    pub host_closes: u64,
    /// AHP `action` envelopes received (accepted ones, live or replayed).
    pub actions: u64,
    /// AHP `reconnect` results checked.
    pub replays: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.responses += o.responses;
        self.events += o.events;
        self.deltas += o.deltas;
        self.catch_ups += o.catch_ups;
        self.accepted += o.accepted;
        self.host_closes += o.host_closes;
        self.actions += o.actions;
        self.replays += o.replays;
    }
}

/// The host, its peers and the checker.
pub struct World {
    /// The host under test.
    pub host: Host,
    /// Current input time.
    pub now: Timestamp,
    /// The configuration.
    pub config: WorldConfig,
    /// Every connection ever opened, by index.
    pub conns: Vec<Conn>,
    /// Pending requests announced in events.
    pub asks: Vec<Ask>,
    /// Server-to-client requests received.
    pub calls: Vec<Call>,
    ask_index: BTreeMap<String, usize>,
    /// `success: true` answers per request id.
    accepted: BTreeMap<String, u32>,
    /// Every event id seen (in a host log or on a connection).
    events: BTreeMap<String, EventInfo>,
    /// Persisted events each client saw, per session, in order.
    /// Persisted events each connection saw, per session, in order.
    seen_persisted: BTreeMap<(usize, String), Vec<String>>,
    /// Session ids ever named in a request or an event.
    pub session_ids: BTreeSet<String>,
    /// Ids of the client-owned tasks the host registered (`session.tasks.register`).
    pub task_ids: Vec<String>,
    /// A client asked for `runtime.shutdown`.
    pub shutdown_requested: bool,
    /// Keep every received message in `Conn::inbox`.
    pub keep_inbox: bool,
    /// Log of what happened (only when enabled; for replaying one failing seed).
    pub trace: Option<String>,
    /// The connection the settle phase answers through.
    settler: Option<usize>,
    /// Event ids reported by `StoreOutput::Persist`.
    stored: BTreeSet<String>,
    /// The durable store a runtime would keep from the outputs: event ids per session.
    store: BTreeMap<String, Vec<String>>,
    /// Inputs handed to the host so far.
    pub inputs: u64,
    /// Do not check that a `sendAndWait` response carries the reply to its own prompt (a known
    /// host issue; see fuzz/README.md).
    pub lenient_send_and_wait: bool,
    /// Tolerate a broken `parentId` chain on a connection drained after the host closed
    /// another connection (a known host issue; see fuzz/README.md).
    pub lenient_reentrant_emit: bool,
    /// Tolerate a turn stuck on a sampling request nobody can answer (a known host issue).
    pub lenient_orphan_sampling: bool,
    /// Connections the host closed so far.
    host_closes: u64,
    /// What this run exercised.
    pub stats: Stats,
    /// The simulated model endpoint (with [`WorldConfig::model`]).
    pub model: Option<SimModel>,
    /// Every AHP envelope any connection received: `serverSeq` → (channel, what it carried).
    ahp_known: BTreeMap<u64, (String, String)>,
    /// Sessions loaded in the host after the last input (to notice deletions).
    live_sessions: BTreeSet<String>,
    /// Bodies queued by peers so far.
    bodies_sent: u64,
}

/// A checker failure: what went wrong.
pub type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

// After `ensure!`: macros are in scope only below their definition.
mod ahp;
mod end;
mod inputs;
mod model;
mod outputs;

pub use ahp::{
    channel_session, chat_of, session_of, turn_started, AhpView, TurnState, AHP_REQUESTS,
};
pub use model::SimModel;

/// The scenario every world plays.
pub fn scenario() -> Scenario {
    Scenario::from_json(SCENARIO_JSON).expect("the world scenario is valid")
}

/// Frames `body` for `framing`.
pub fn frame(framing: Framing, body: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_frame(framing, body, &mut out);
    out.to_vec()
}

/// The raw id texts a body asks a response for (what the host must answer), by parsing it as
/// the host does. `"null"` stands for `id: null`.
pub fn expected_responses(body: &[u8]) -> Vec<String> {
    match jsonrpc::parse(body) {
        Parsed::Single(Ok(Message::Request { id, .. })) => vec![id.as_raw().to_owned()],
        Parsed::Single(Ok(_)) => Vec::new(),
        Parsed::Single(Err(rejection)) => vec![rejection
            .id
            .as_ref()
            .map_or_else(|| "null".to_owned(), |id| id.as_raw().to_owned())],
        Parsed::Batch(_) => vec!["null".to_owned()],
    }
}

impl World {
    /// A world with no connections.
    pub fn new(config: WorldConfig) -> World {
        let mut host_config = HostConfig::with_scenario(scenario())
            .with_seed(config.seed)
            .with_connection_token(config.token.then(|| TOKEN.to_owned()))
            .with_frame_limits(config.limits)
            .with_outbox_budget_bytes(config.budget)
            .with_report_persisted_events(config.persist);
        if config.model {
            let default = agentwire::model::ServerDefault::from_flags(
                "http://sim-model.invalid/v1",
                Some("sim-model".into()),
                None,
            )
            .expect("a valid simulated provider");
            host_config = host_config.with_model_default(Some(default));
        }
        let host = Host::new(host_config);
        let model = config.model.then(|| SimModel::new(config.seed));
        World {
            host,
            now: Timestamp::from_millis(T0),
            config,
            conns: Vec::new(),
            asks: Vec::new(),
            calls: Vec::new(),
            ask_index: BTreeMap::new(),
            accepted: BTreeMap::new(),
            events: BTreeMap::new(),
            seen_persisted: BTreeMap::new(),
            session_ids: BTreeSet::new(),
            task_ids: Vec::new(),
            shutdown_requested: false,
            keep_inbox: false,
            trace: None,
            settler: None,
            stored: BTreeSet::new(),
            store: BTreeMap::new(),
            inputs: 0,
            lenient_send_and_wait: false,
            lenient_reentrant_emit: false,
            lenient_orphan_sampling: false,
            host_closes: 0,
            stats: Stats::default(),
            model,
            ahp_known: BTreeMap::new(),
            live_sessions: BTreeSet::new(),
            bodies_sent: 0,
        }
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            let _ = writeln!(t, "[{}] {}", self.now.as_millis() - T0, line());
        }
    }
}

/// A tiny deterministic generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// A response to the server-to-client request `id` (`method`): a valid result for `variant`
/// 0, other variants give other results or errors.
pub fn call_response(id: &str, method: &str, variant: u8) -> String {
    let result = match (method, variant % 4) {
        (_, 3) => {
            return format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":"handler failed"}}}}"#
            )
        }
        (_, 2) => json!({"unexpected": [1, 2]}),
        ("userInput.request", 1) => json!({"answer": "free text", "wasFreeform": true}),
        ("userInput.request", _) => json!({"answer": "a", "wasFreeform": false}),
        ("exitPlanMode.request", 1) => json!({"approved": false, "feedback": "not yet"}),
        ("exitPlanMode.request", _) => json!({"approved": true, "selectedAction": "autopilot"}),
        ("autoModeSwitch.request", 1) => json!("no"),
        ("autoModeSwitch.request", _) => json!("yes"),
        ("hooks.invoke", 1) => json!(null),
        ("tasks.cancel", 1) => json!({"cancelled": false}),
        ("tasks.cancel", _) => json!({"cancelled": true}),
        _ => json!({"output": {}}),
    };
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

/// `s` cut to `n` bytes (at a char boundary) for logs.
pub fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
