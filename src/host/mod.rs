//! The session host: many connections, many sessions, one deterministic state machine.
//!
//! Inputs are `handle_*` calls, outputs are `poll_*` calls (see the crate docs for the run
//! loop). Connections attach to sessions; session events are encoded once and fanned out to
//! every attached connection by reference; client answers resolve the session's pending
//! requests (tools, permissions) exactly once.

mod audience;
mod bridge;
mod builtin;
mod canvas;
mod client_calls;
mod client_requests;
mod conn;
mod conn_table;
mod drive;
mod outbox;
mod publish;
mod restore;
mod shell;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use bytes::{Bytes, BytesMut};
use serde_json::Value;

use crate::agent::{scripted_factory, AgentFactory, AgentInput, Scenario};
use crate::frame::{encode_frame, FrameLimits, Framing};
use crate::ids::IdGenerator;
use crate::jsonrpc::{self, ErrorObject, OwnedId};
use crate::session::{push_json_str, Event, Session};
use crate::Timestamp;

pub use canvas::CANVAS_TOOLS;
pub use conn::{ConnId, Dialect};
pub use outbox::{Outbox, OutboxOverflow};
pub use restore::RestoreError;
pub use shell::ShellStream;

pub(crate) use bridge::{AnswerTo, Pending};
pub(crate) use canvas::{ActionParams, CanvasReply, CloseParams, OpenParams};
use conn::Conn;
use conn_table::ConnTable;

/// Protocol version of the Copilot SDK dialect.
pub const PROTOCOL_VERSION: u32 = 3;

/// Default per-connection outbox budget: 8 MiB.
pub const DEFAULT_OUTBOX_BUDGET: usize = 8 * 1024 * 1024;

/// Host configuration. Everything that varies between runs comes in here or through inputs.
#[derive(Clone)]
pub struct HostConfig {
    /// Seed for event and request ids (a whole run replays from its inputs and this seed).
    pub seed: u64,
    /// When set, clients must `connect` with this token first (`COPILOT_CONNECTION_TOKEN`).
    pub connection_token: Option<String>,
    /// Makes each session's agent. Default: the scripted agent with the built-in scenario.
    pub agent: AgentFactory,
    /// Version reported by `connect` and `status.get`.
    pub version: String,
    /// Framing limits for every connection.
    pub frame_limits: FrameLimits,
    /// Byte budget of each connection's outbox (see [`Outbox`] for the overflow policy).
    pub outbox_budget_bytes: usize,
    /// Directory reported as `<root>/session-state/<id>` in `workspacePath` (none: omitted).
    pub workspace_root: Option<String>,
    /// Emit [`Output::Persist`] for every persisted event and [`Output::SessionDeleted`] for
    /// deletions, so a runtime can keep a durable session store. Off by default.
    pub report_persisted_events: bool,
    /// Let clients run shell commands (`session.shell.exec`) through the runtime. Off by
    /// default: the method then fails with a reason.
    pub shell_enabled: bool,
    /// Honour `requestMcpApps` (the runtime's `COPILOT_MCP_APPS=true` gate). Off by default:
    /// a request is then answered without `ui.mcpApps` and a `session.warning` says why.
    pub mcp_apps_enabled: bool,
}

impl HostConfig {
    /// The default configuration with the scripted agent playing `scenario`.
    pub fn with_scenario(scenario: Scenario) -> Self {
        HostConfig {
            agent: scripted_factory(scenario),
            ..HostConfig::default()
        }
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            seed: 0,
            connection_token: None,
            agent: scripted_factory(Scenario::default()),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            frame_limits: FrameLimits::default(),
            outbox_budget_bytes: DEFAULT_OUTBOX_BUDGET,
            workspace_root: None,
            report_persisted_events: false,
            mcp_apps_enabled: false,
            shell_enabled: false,
        }
    }
}

impl fmt::Debug for HostConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostConfig")
            .field("seed", &self.seed)
            .field(
                "connection_token",
                &self.connection_token.as_ref().map(|_| "<set>"),
            )
            .field("version", &self.version)
            .field("frame_limits", &self.frame_limits)
            .field("outbox_budget_bytes", &self.outbox_budget_bytes)
            .field("workspace_root", &self.workspace_root)
            .field("report_persisted_events", &self.report_persisted_events)
            .field("mcp_apps_enabled", &self.mcp_apps_enabled)
            .field("shell_enabled", &self.shell_enabled)
            .finish_non_exhaustive()
    }
}

/// An action the runtime must perform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Write every frame still queued for `conn` (drain [`Host::poll_transmit`]), then close it.
    Close {
        /// The connection to close.
        conn: ConnId,
        /// Why (also sent to the peer as a JSON-RPC error object before the close).
        reason: String,
    },
    /// A client asked the server to stop (`runtime.shutdown`): stop accepting, flush every
    /// connection (bounded by a timeout), then exit.
    Shutdown {
        /// Why.
        reason: String,
    },
    /// A persisted event to store durably (only when
    /// [`HostConfig::report_persisted_events`] is set): append `event` (one compact JSON
    /// object, no newline) as one line to the session's log. Outputs are produced before the
    /// frames carrying the same event can be taken, so a runtime that stores every `Persist`
    /// before writing the frames queued by the same input never shows a client an event it
    /// could lose.
    Persist {
        /// The session the event belongs to.
        session: String,
        /// The event as compact JSON (the same bytes clients receive inside `session.event`).
        event: Bytes,
    },
    /// A session was deleted (`session.delete`): remove its stored state (only when
    /// [`HostConfig::report_persisted_events`] is set).
    SessionDeleted {
        /// The deleted session.
        session: String,
    },
    /// Run `command` with `sh -c` in `cwd` (`session.shell.exec`, only with
    /// [`HostConfig::shell_enabled`]); report its output with [`Host::handle_shell_output`]
    /// and its end with [`Host::handle_shell_exit`]; kill it after `timeout_ms`.
    ShellExec {
        /// Id the client uses for this process.
        process_id: String,
        /// The command line.
        command: String,
        /// Working directory (the session's when the client gave none).
        cwd: Option<String>,
        /// Kill the command after this many milliseconds.
        timeout_ms: u64,
    },
    /// Send `signal` (e.g. `SIGTERM`) to a process started by [`Output::ShellExec`].
    ShellKill {
        /// The process.
        process_id: String,
        /// The signal's name.
        signal: String,
    },
}

/// A live session: its data, its agent and its pending requests.
pub(crate) struct Live {
    pub session: Session,
    pub agent: Option<Box<dyn crate::agent::Agent>>,
    /// Requests waiting for a client answer, by request id.
    pub pending: indexmap::IndexMap<String, Pending>,
    /// Request ids already answered (a later answer gets `{success:false}`).
    pub resolved: std::collections::BTreeSet<String>,
    /// The agent's timer key, if armed.
    pub timer: Option<(Timestamp, u64)>,
    /// `session.sendAndWait` callers waiting for the turn to end.
    pub waiters: Vec<(ConnId, OwnedId, String)>,
    /// The last `assistant.message` event of the running turn (for `sendAndWait`).
    pub last_assistant: Option<Event>,
    /// A turn has run since the session was loaded (decides `session.shutdown` on detach).
    pub ran_turn: bool,
    /// Extensions a non-extension client approved (`extension-permission-access`); their
    /// connections see `permission.requested`.
    pub approved_extensions: std::collections::BTreeSet<String>,
    /// The MCP Apps host context a client set (`session.mcp.apps.setHostContext`).
    pub mcp_host_context: Option<Value>,
    /// The `messageId` of the prompt whose turn is running (from its `user.message`).
    pub current_turn: Option<String>,
    /// Slash commands enqueued with `session.commands.enqueue`, not yet offered to clients.
    pub command_queue: std::collections::VecDeque<(String, String)>,
    /// A client answered `stopProcessingQueue`: the queue waits for the next request.
    pub command_queue_stopped: bool,
    /// Open canvas instances by `instanceId` (see `canvas.rs`).
    pub canvases: indexmap::IndexMap<String, canvas::OpenCanvas>,
}

/// The protocol host. See the crate docs for the run loop.
pub struct Host {
    pub(crate) config: HostConfig,
    pub(crate) ids: IdGenerator,
    pub(crate) now: Timestamp,
    pub(crate) conns: ConnTable,
    pub(crate) sessions: BTreeMap<String, Live>,
    ready: VecDeque<ConnId>,
    pub(crate) outputs: VecDeque<Output>,
    pub(crate) timers: BTreeMap<(Timestamp, u64), TimerTarget>,
    /// Tokens handed to agents by `ask_client`.
    pub(crate) next_token: u64,
    pub(crate) timer_seq: u64,
    pub(crate) agent_inputs: VecDeque<(String, AgentInput)>,
    /// Frames to emit after the response currently being built (e.g. `session.start`).
    pub(crate) after_response: Vec<AfterResponse>,
    pub(crate) foreground: Option<String>,
    /// Commands the runtime is running for clients, by process id.
    pub(crate) processes: BTreeMap<String, shell::ShellProcess>,
    pub(crate) last_session: Option<String>,
    /// The sub-agent the next emitted event comes from (set by `SessionControl::emit_as`).
    pub(crate) event_agent: Option<String>,
    unknown_responses: u64,
}

/// What a deadline in the host's timer map is for.
pub(crate) enum TimerTarget {
    /// The session's agent asked for a timer.
    Agent(String),
    /// A server-to-client request on a connection is due.
    ClientCall(ConnId, OwnedId),
    /// An ACP request of ours (`session/request_permission`, `fs/*`, `terminal/*`) is due.
    Acp(ConnId, OwnedId),
}

/// Work deferred until the current response has been queued.
pub(crate) enum AfterResponse {
    Emit {
        session: String,
        event_type: &'static str,
        data: Value,
        ephemeral: bool,
    },
    /// An ephemeral event for one attached connection only.
    EmitTo {
        session: String,
        event_type: &'static str,
        data: Value,
        only: ConnId,
    },
    Lifecycle {
        kind: &'static str,
        session: String,
    },
    /// An extension created the session: ask for its permission access after `session.start`.
    ExtensionAccess {
        session: String,
        extension: String,
    },
    Shutdown,
}

impl Host {
    /// A host with no connections and no sessions.
    pub fn new(config: HostConfig) -> Self {
        Host {
            ids: IdGenerator::new(config.seed),
            config,
            now: Timestamp::EPOCH,
            conns: ConnTable::default(),
            sessions: BTreeMap::new(),
            ready: VecDeque::new(),
            outputs: VecDeque::new(),
            timers: BTreeMap::new(),
            next_token: 1,
            timer_seq: 0,
            agent_inputs: VecDeque::new(),
            after_response: Vec::new(),
            foreground: None,
            processes: BTreeMap::new(),
            last_session: None,
            event_agent: None,
            unknown_responses: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Opens a Copilot SDK connection that uses `framing` (Content-Length for the SDKs).
    pub fn open(&mut self, now: Timestamp, framing: Framing) -> ConnId {
        self.open_with(now, Dialect::CopilotSdk, framing)
    }

    /// Opens a connection speaking `dialect` with its usual framing
    /// ([`Dialect::default_framing`]).
    pub fn open_dialect(&mut self, now: Timestamp, dialect: Dialect) -> ConnId {
        self.open_with(now, dialect, dialect.default_framing())
    }

    /// Opens a connection speaking `dialect` over `framing`.
    pub fn open_with(&mut self, now: Timestamp, dialect: Dialect, framing: Framing) -> ConnId {
        self.advance_time(now);
        let authenticated = self.config.connection_token.is_none();
        self.conns.insert(Conn::new(
            dialect,
            framing,
            self.config.frame_limits,
            self.config.outbox_budget_bytes,
            authenticated,
        ))
    }

    /// Feeds bytes read from `conn`. Unknown or closing connections are ignored.
    pub fn handle_bytes(&mut self, now: Timestamp, conn: ConnId, bytes: &[u8]) {
        self.advance_time(now);
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.closing {
            return;
        }
        if let Err(e) = c.decoder.push(bytes) {
            self.fail_connection(conn, -32700, format!("framing error: {e}"));
            return;
        }
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if c.closing {
                return;
            }
            match c.decoder.next_frame() {
                Ok(Some(frame)) => self.handle_frame(conn, &frame),
                Ok(None) => break,
                Err(e) => {
                    self.fail_connection(conn, -32700, format!("framing error: {e}"));
                    return;
                }
            }
            self.run_agents();
        }
        self.run_agents();
    }

    /// The peer is gone (EOF or I/O error): detach it everywhere and forget it. Its pending
    /// answers are resolved (tool calls it owned fail; permission prompts nobody else can
    /// answer are denied).
    pub fn handle_eof(&mut self, now: Timestamp, conn: ConnId) {
        self.advance_time(now);
        let Some(mut c) = self.conns.remove(&conn) else {
            return;
        };
        for (_, call) in c.calls.close_all() {
            self.finish_client_call(call, crate::correlation::Outcome::Closed);
        }
        self.kill_processes_of(conn);
        for session in c.sessions {
            self.detach_conn(&session, conn);
        }
        self.run_agents();
    }

    /// Fires every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.advance_time(now);
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (key, target) = entry.remove_entry();
            match target {
                TimerTarget::Agent(session) => {
                    if let Some(live) = self.sessions.get_mut(&session) {
                        if live.timer == Some(key) {
                            live.timer = None;
                            self.agent_inputs.push_back((session, AgentInput::Timer));
                        }
                    }
                }
                TimerTarget::ClientCall(conn, id) => self.client_call_timed_out(conn, &id),
                TimerTarget::Acp(conn, id) => self.acp_timed_out(conn, &id),
            }
        }
        self.run_agents();
    }

    /// The next connection with frames to write. Each connection is reported once per
    /// transition from empty to non-empty; drain it with [`Host::poll_transmit`].
    #[must_use]
    pub fn poll_ready(&mut self) -> Option<ConnId> {
        while let Some(conn) = self.ready.pop_front() {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.in_ready = false;
                if !c.outbox.is_empty() {
                    return Some(conn);
                }
            }
        }
        None
    }

    /// The next frame to write to `conn`, in emit order.
    #[must_use]
    pub fn poll_transmit(&mut self, conn: ConnId) -> Option<Bytes> {
        self.conns.pop_frame(&conn)
    }

    /// Sends a lagging connection a `session.warning` (`warningType: "events_dropped"`)
    /// saying how many streaming events it lost; durable events are never dropped.
    fn report_drops(&mut self, conn: ConnId, session: &str, dropped: u64) {
        if dropped == 0 {
            return;
        }
        self.emit_to(
            session,
            "session.warning",
            &serde_json::json!({
                "warningType": "events_dropped",
                "message": format!("{dropped} streaming events were dropped because this client was not reading fast enough; durable events are complete (session.getMessages)"),
                "droppedCount": dropped,
            }),
            true,
            Some(conn),
        );
    }

    /// The next action for the runtime.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next deadline, if any: call [`Host::handle_timeout`] then.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.keys().next().map(|(t, _)| *t)
    }

    /// Number of open connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Number of loaded sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Bytes queued for `conn` and not yet taken by the runtime.
    pub fn queued_bytes(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn).map(|c| c.outbox.queued_bytes())
    }

    /// Responses that matched no pending request (late, duplicate or unknown): counted and
    /// dropped.
    pub fn unknown_responses(&self) -> u64 {
        self.unknown_responses
    }

    /// Persisted events of a session, in order (what `session.getMessages` returns).
    pub fn session_events(&self, session_id: &str) -> Option<&[Event]> {
        self.sessions.get(session_id).map(|l| l.session.events())
    }

    fn advance_time(&mut self, now: Timestamp) {
        // Time never goes backwards inside the host, whatever the runtime passes.
        if now > self.now {
            self.now = now;
        }
    }

    // ----- inbound -----

    fn handle_frame(&mut self, conn: ConnId, frame: &[u8]) {
        match jsonrpc::parse(frame) {
            jsonrpc::Parsed::Single(Ok(message)) => self.handle_message(conn, message),
            jsonrpc::Parsed::Single(Err(rejection)) => {
                let mut body = Vec::new();
                jsonrpc::write_error(&mut body, rejection.id.as_ref(), &rejection.error);
                self.send_body(conn, &body);
            }
            jsonrpc::Parsed::Batch(_) => {
                // Batches are off for this dialect (its clients never batch): one -32600.
                let mut body = Vec::new();
                let error = ErrorObject::new(
                    jsonrpc::code::INVALID_REQUEST,
                    "batch requests are not supported",
                );
                jsonrpc::write_error(&mut body, None, &error);
                self.send_body(conn, &body);
            }
        }
    }

    fn handle_message(&mut self, conn: ConnId, message: jsonrpc::Message<'_>) {
        if self.conns.get(&conn).map(|c| c.dialect) == Some(Dialect::Acp) {
            self.acp_handle_message(conn, message);
            self.run_after_response();
            return;
        }
        match message {
            jsonrpc::Message::Request { id, method, params } => {
                let id = id.to_owned();
                let fresh = self
                    .conns
                    .get_mut(&conn)
                    .is_some_and(|c| c.in_flight.begin(id.clone()));
                if !fresh {
                    let error = ErrorObject::new(
                        jsonrpc::code::INVALID_REQUEST,
                        format!("request id {} is already in flight", id.as_raw()),
                    );
                    let mut body = Vec::new();
                    jsonrpc::write_error(&mut body, Some(&id), &error);
                    self.send_body(conn, &body);
                    return;
                }
                let outcome = self.dispatch(conn, &id, &method, params);
                match outcome {
                    Some(result) => self.respond(conn, &id, result),
                    None => {
                        // Answered later (e.g. `session.sendAndWait`).
                    }
                }
                self.run_after_response();
            }
            jsonrpc::Message::Notification { method, params } => {
                if let Some(id) = crate::correlation::parse_cancel(&method, params) {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        // Every request completes synchronously except sendAndWait, which
                        // still answers once when its turn ends.
                        c.in_flight.mark_cancelled(&id);
                    }
                }
            }
            jsonrpc::Message::Response { id, outcome } => {
                let resolved = self.conns.get_mut(&conn).and_then(|c| {
                    c.calls
                        .resolve(&id, crate::correlation::Outcome::from_response(outcome))
                });
                match resolved {
                    Some((call, outcome)) => self.finish_client_call(call, outcome),
                    // Late, duplicate or unknown: counted and dropped.
                    None => self.unknown_responses += 1,
                }
            }
        }
    }

    /// Sends the response to request `id` on `conn` (exactly once).
    pub(crate) fn respond(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        result: Result<Value, ErrorObject>,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !c.in_flight.finish(id) {
            return;
        }
        let mut body = Vec::with_capacity(128);
        match result {
            Ok(value) => {
                if let Err(e) = jsonrpc::write_result_value(&mut body, id, &value) {
                    body.clear();
                    let error = ErrorObject::internal(format!("result not serialisable: {e}"));
                    jsonrpc::write_error(&mut body, Some(id), &error);
                }
            }
            Err(error) => jsonrpc::write_error(&mut body, Some(id), &error),
        }
        self.send_body(conn, &body);
    }

    pub(crate) fn run_after_response(&mut self) {
        let work = std::mem::take(&mut self.after_response);
        for item in work {
            match item {
                AfterResponse::Emit {
                    session,
                    event_type,
                    data,
                    ephemeral,
                } => {
                    self.emit(&session, event_type, &data, ephemeral);
                }
                AfterResponse::EmitTo {
                    session,
                    event_type,
                    data,
                    only,
                } => {
                    self.emit_to(&session, event_type, &data, true, Some(only));
                }
                AfterResponse::Lifecycle { kind, session } => self.lifecycle(kind, &session),
                AfterResponse::ExtensionAccess { session, extension } => {
                    self.request_extension_access(&session, &extension)
                }
                AfterResponse::Shutdown => self.outputs.push_back(Output::Shutdown {
                    reason: "runtime.shutdown requested by a client".into(),
                }),
            }
        }
    }

    // ----- outbound -----

    /// Frames `body` for `conn` and queues it (durable).
    pub(crate) fn send_body(&mut self, conn: ConnId, body: &[u8]) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let mut buf = BytesMut::with_capacity(body.len() + 32);
        encode_frame(c.framing, body, &mut buf);
        self.deliver(conn, buf.freeze(), false);
    }

    /// Queues an encoded frame on `conn`, closing the connection if it cannot keep up.
    pub(crate) fn deliver(&mut self, conn: ConnId, frame: Bytes, droppable: bool) {
        let Some((c, shared)) = self.conns.get_mut_and_frames(&conn) else {
            return;
        };
        if c.closing {
            return;
        }
        match c.outbox.push(frame, droppable, shared) {
            Ok(became_ready) => {
                if became_ready && !c.in_ready {
                    c.in_ready = true;
                    self.ready.push_back(conn);
                }
            }
            Err(OutboxOverflow::DurableDoesNotFit) => self.fail_slow_consumer(conn),
        }
    }

    /// Closes a connection whose outbox cannot take a durable frame: it is told why first.
    fn fail_slow_consumer(&mut self, conn: ConnId) {
        let budget = self.config.outbox_budget_bytes;
        self.fail_connection(
            conn,
            -32000,
            format!("connection closed: the client is not reading fast enough (outbox budget of {budget} bytes exceeded); reconnect, resume the session and call session.getMessages to catch up"),
        );
    }

    /// Sends a JSON-RPC error object with `id: null` carrying `reason`, then asks the runtime
    /// to close the connection after flushing it. Used for framing errors and slow consumers.
    pub(crate) fn fail_connection(&mut self, conn: ConnId, code: i64, reason: String) {
        let Some((c, shared)) = self.conns.get_mut_and_frames(&conn) else {
            return;
        };
        if c.closing {
            return;
        }
        // A slow consumer's queue is over budget: it is replaced by the reason. After a
        // framing error, what was already answered is still written, then the reason.
        if code != -32700 {
            c.outbox.clear(shared);
        }
        let mut body = Vec::new();
        jsonrpc::write_error(&mut body, None, &ErrorObject::new(code, reason.clone()));
        let mut buf = BytesMut::with_capacity(body.len() + 32);
        encode_frame(c.framing, &body, &mut buf);
        // Bypass the budget: the reason is the last frame this peer gets.
        c.outbox.push_final(buf.freeze());
        c.closing = true;
        if !c.in_ready {
            c.in_ready = true;
            self.ready.push_back(conn);
        }
        self.outputs.push_back(Output::Close { conn, reason });
        let calls = c.calls.close_all();
        let sessions = std::mem::take(&mut c.sessions);
        for (_, call) in calls {
            self.finish_client_call(call, crate::correlation::Outcome::Closed);
        }
        for session in sessions {
            self.detach_conn(&session, conn);
        }
    }

    /// Emits a session event to every attached connection (encoded once) and returns its id.
    /// Persisted events are logged and followed by a `session.updated` lifecycle notification.
    pub(crate) fn emit(
        &mut self,
        session_id: &str,
        event_type: &str,
        data: &Value,
        ephemeral: bool,
    ) -> Option<String> {
        self.emit_to(session_id, event_type, data, ephemeral, None)
    }

    /// Like [`Host::emit`], but when `only` is set the event goes to that attached connection
    /// alone (ownership routing, e.g. `command.execute` to the command's owner).
    pub(crate) fn emit_to(
        &mut self,
        session_id: &str,
        event_type: &str,
        data: &Value,
        ephemeral: bool,
        only: Option<ConnId>,
    ) -> Option<String> {
        let id = self.ids.next_uuid();
        let now = self.now;
        // Only this event comes from the sub-agent, not what emitting it triggers.
        let agent_id = self.event_agent.take();
        let live = self.sessions.get_mut(session_id)?;
        let event =
            live.session
                .record_from(id, event_type, data, ephemeral, now, agent_id.as_deref());
        if event_type == "assistant.message" {
            live.last_assistant = Some(event.clone());
        }
        if event_type == "user.message" {
            // A new turn: its sendAndWait caller gets this turn's last reply.
            live.current_turn = data
                .get("messageId")
                .and_then(Value::as_str)
                .map(str::to_owned);
            live.last_assistant = None;
        }
        if !ephemeral && self.config.report_persisted_events {
            self.outputs.push_back(Output::Persist {
                session: session_id.to_owned(),
                event: event.json.clone(),
            });
        }
        let mut body = Vec::with_capacity(event.json.len() + 96);
        body.extend_from_slice(
            br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"#,
        );
        push_json_str(&mut body, session_id);
        body.extend_from_slice(br#","event":"#);
        body.extend_from_slice(&event.json);
        body.extend_from_slice(b"}}");
        let streaming_only = event.is_streaming_delta();
        let droppable = ephemeral && streaming_only;
        let acp_targets = self.deliver_event(
            session_id,
            event_type,
            &body,
            droppable,
            only,
            agent_id.is_some(),
        )?;
        if !acp_targets.is_empty() {
            self.acp_on_event(session_id, &event, &acp_targets);
        }
        if !ephemeral {
            self.lifecycle("session.updated", session_id);
        }
        if event_type == "session.idle" || event_type == "session.error" {
            self.finish_waiters(session_id, event_type == "session.error", data);
        }
        if event_type == "session.idle" {
            // Queued slash commands run between turns.
            self.offer_queued_command(session_id);
        }
        Some(event.id)
    }

    /// Sends a `session.lifecycle` notification to every connection.
    pub(crate) fn lifecycle(&mut self, kind: &str, session_id: &str) {
        let mut body = Vec::with_capacity(160);
        body.extend_from_slice(
            br#"{"jsonrpc":"2.0","method":"session.lifecycle","params":{"type":"#,
        );
        push_json_str(&mut body, kind);
        body.extend_from_slice(br#","sessionId":"#);
        push_json_str(&mut body, session_id);
        if kind != "session.deleted" {
            if let Some(live) = self.sessions.get(session_id) {
                let s = &live.session;
                body.extend_from_slice(br#","metadata":{"startTime":"#);
                push_json_str(&mut body, &s.start_time.to_rfc3339());
                body.extend_from_slice(br#","modifiedTime":"#);
                push_json_str(&mut body, &s.modified_time.to_rfc3339());
                if let Some(summary) = &s.summary {
                    body.extend_from_slice(br#","summary":"#);
                    push_json_str(&mut body, summary);
                }
                body.push(b'}');
            }
        }
        body.extend_from_slice(b"}}");
        self.broadcast_sdk(&body);
    }

    /// Answers `session.sendAndWait` callers when the turn ends.
    fn finish_waiters(&mut self, session_id: &str, is_error: bool, data: &Value) {
        let Some(live) = self.sessions.get_mut(session_id) else {
            return;
        };
        if live.waiters.is_empty() {
            return;
        }
        // Only the caller whose prompt this turn answered is done; others wait for theirs.
        // An abort also drops the queued prompts, so then every caller is done (aborted).
        let turn = live.current_turn.take();
        let aborted_all = data.get("aborted").and_then(Value::as_bool) == Some(true);
        let (waiters, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut live.waiters)
            .into_iter()
            .partition(|(_, _, message_id)| aborted_all || Some(message_id) == turn.as_ref());
        live.waiters = rest;
        let last = live.last_assistant.take();
        for (conn, id, message_id) in waiters {
            let result = if is_error {
                let message = data
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("session error")
                    .to_owned();
                Err(ErrorObject::new(jsonrpc::code::INTERNAL_ERROR, message))
            } else {
                let own_turn = Some(&message_id) == turn.as_ref();
                let mut result = serde_json::Map::new();
                result.insert("messageId".into(), Value::String(message_id));
                if let Some(event) = last.as_ref().filter(|_| own_turn) {
                    let value: Value = serde_json::from_slice(&event.json).unwrap_or(Value::Null);
                    result.insert("response".into(), value);
                }
                let aborted = data
                    .get("aborted")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                result.insert("aborted".into(), Value::Bool(aborted));
                Ok(Value::Object(result))
            };
            self.respond(conn, &id, result);
        }
    }
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("now", &self.now)
            .field("connections", &self.conns.len())
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}
