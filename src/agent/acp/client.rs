//! The ACP client role: one agent process's conversation as a sans-IO state machine.
//!
//! An [`AcpAgentClient`] wraps an [`Endpoint`] (client role, newline-delimited JSON, ACP's stdio
//! framing) and runs ACP v1 over it: `initialize` (protocol version 1, the
//! [`ClientCapabilities`] agentwire serves) → ready; then any number of sessions on the one
//! process: `session/new`, `session/load`, `session/resume`, `session/prompt`,
//! `session/set_mode`, `session/set_config_option` (each answered by
//! [`AcpAgentEvent::Done`] with the caller's token) and `session/cancel`.
//!
//! What the agent sends is checked here and handed up typed: `session/update` notifications
//! ([`AcpAgentEvent::Update`], the `update` object with its `sessionUpdate` variant), and the
//! agent's requests ([`AcpAgentEvent::Request`] with an [`AgentRequest`]:
//! `session/request_permission`, `fs/*`, `terminal/*`, `elicitation/create`), answered with
//! [`AcpAgentClient::respond`] / [`AcpAgentClient::respond_error`]. A request whose params do
//! not fit its method is answered `-32602` here, an unknown method `-32601`, a request for a
//! capability agentwire did not offer `-32601` too; a malformed notification is counted
//! ([`AcpAgentClient::malformed_notifications`]) and dropped.
//!
//! Whatever the agent does never panics: a line that is not JSON-RPC, a line over the frame
//! limit, an agent that exits, never answers `initialize`, or answers with a protocol version
//! other than 1 ends the client ([`AcpAgentEvent::Failed`] with the reason) and every pending
//! call fails with that reason.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::correlation::Outcome;
use crate::endpoint::child::StderrTail;
use crate::endpoint::{Endpoint, EndpointConfig, EndpointEvent, Role};
use crate::frame::Framing;
use crate::jsonrpc::{ErrorObject, OwnedId};
use crate::Timestamp;

/// The ACP protocol version agentwire speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// What agentwire offers the agent in `initialize` (`clientCapabilities`): only what the
/// session host really serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientCapabilities {
    /// `fs.readTextFile`: the agent may read the session's files through agentwire.
    pub read_text_file: bool,
    /// `fs.writeTextFile`.
    pub write_text_file: bool,
    /// `terminal`: agentwire runs the agent's commands.
    pub terminal: bool,
    /// `elicitation.form`: the agent may ask the session's clients to fill a form.
    pub elicitation_form: bool,
}

impl ClientCapabilities {
    fn to_json(self) -> Value {
        let mut caps = json!({
            "fs": {"readTextFile": self.read_text_file, "writeTextFile": self.write_text_file},
            "terminal": self.terminal,
        });
        if self.elicitation_form {
            caps["elicitation"] = json!({"form": {}});
        }
        caps
    }
}

/// How an [`AcpAgentClient`] behaves.
#[derive(Clone, Debug)]
pub struct AcpClientConfig {
    /// What `initialize` offers.
    pub capabilities: ClientCapabilities,
    /// How long the agent may take to answer `initialize`.
    pub initialize_timeout: Duration,
    /// How long the agent may take to answer a session request other than a prompt
    /// (`session/new`, `session/load`, …). A prompt has no deadline: a turn lasts as long as
    /// it lasts, and ends with `session/cancel`.
    pub request_timeout: Duration,
    /// `clientInfo.version`.
    pub client_version: String,
    /// The longest message accepted from the agent.
    pub max_message_bytes: usize,
}

impl Default for AcpClientConfig {
    fn default() -> Self {
        AcpClientConfig {
            capabilities: ClientCapabilities {
                read_text_file: true,
                write_text_file: true,
                terminal: true,
                elicitation_form: true,
            },
            initialize_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(120),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            max_message_bytes: 32 * 1024 * 1024,
        }
    }
}

/// What the agent said it can do (`initialize`'s `agentCapabilities` and `agentInfo`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentCapabilities {
    /// `loadSession`: `session/load` replays a session the agent kept.
    pub load_session: bool,
    /// `sessionCapabilities.resume`: `session/resume` reopens one without replay.
    pub resume_session: bool,
    /// `sessionCapabilities.close`.
    pub close_session: bool,
    /// `promptCapabilities.image`.
    pub prompt_image: bool,
    /// `promptCapabilities.audio`.
    pub prompt_audio: bool,
    /// `promptCapabilities.embeddedContext`.
    pub prompt_embedded_context: bool,
    /// `mcpCapabilities.http`.
    pub mcp_http: bool,
    /// `mcpCapabilities.sse`.
    pub mcp_sse: bool,
    /// `agentInfo` (`{name, title?, version}`), `null` when absent.
    pub agent_info: Value,
    /// `authMethods`.
    pub auth_methods: Vec<Value>,
}

impl AgentCapabilities {
    fn parse(result: &Value) -> AgentCapabilities {
        let caps = result.get("agentCapabilities").unwrap_or(&Value::Null);
        let flag = |pointer: &str| caps.pointer(pointer).and_then(Value::as_bool) == Some(true);
        // Presence-style capabilities: `{}` means supported, absent or null means not.
        let present = |pointer: &str| caps.pointer(pointer).is_some_and(Value::is_object);
        AgentCapabilities {
            load_session: flag("/loadSession"),
            resume_session: present("/sessionCapabilities/resume"),
            close_session: present("/sessionCapabilities/close"),
            prompt_image: flag("/promptCapabilities/image"),
            prompt_audio: flag("/promptCapabilities/audio"),
            prompt_embedded_context: flag("/promptCapabilities/embeddedContext"),
            mcp_http: flag("/mcpCapabilities/http"),
            mcp_sse: flag("/mcpCapabilities/sse"),
            agent_info: result.get("agentInfo").cloned().unwrap_or(Value::Null),
            auth_methods: result
                .get("authMethods")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        }
    }
}

/// One option of a permission request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PermissionOption {
    /// `optionId`, sent back when it is chosen.
    pub id: String,
    /// `name`, shown to the user.
    pub name: String,
    /// `kind`.
    pub kind: PermissionOptionKind,
}

/// `PermissionOptionKind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PermissionOptionKind {
    /// `allow_once`.
    AllowOnce,
    /// `allow_always`.
    AllowAlways,
    /// `reject_once`.
    RejectOnce,
    /// `reject_always`.
    RejectAlways,
}

impl PermissionOptionKind {
    fn parse(kind: &str) -> Option<PermissionOptionKind> {
        Some(match kind {
            "allow_once" => PermissionOptionKind::AllowOnce,
            "allow_always" => PermissionOptionKind::AllowAlways,
            "reject_once" => PermissionOptionKind::RejectOnce,
            "reject_always" => PermissionOptionKind::RejectAlways,
            _ => return None,
        })
    }

    /// Whether choosing it allows the tool call.
    pub fn allows(self) -> bool {
        matches!(
            self,
            PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
        )
    }
}

/// What the agent asks of its client, checked against the method's params.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentRequest {
    /// `session/request_permission`.
    Permission {
        /// `toolCall` (a `ToolCallUpdate`: `toolCallId` and whatever changed).
        tool_call: Value,
        /// `options`, in the agent's order.
        options: Vec<PermissionOption>,
    },
    /// `fs/read_text_file`.
    ReadTextFile {
        /// An absolute path.
        path: String,
        /// The first line to read (1-based).
        line: Option<u64>,
        /// How many lines.
        limit: Option<u64>,
    },
    /// `fs/write_text_file`.
    WriteTextFile {
        /// An absolute path.
        path: String,
        /// The whole new content.
        content: String,
    },
    /// `terminal/create`.
    TerminalCreate {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: Vec<(String, String)>,
        /// The working directory (absolute), if not the session's.
        cwd: Option<String>,
        /// Output kept (from the end) at most.
        output_byte_limit: Option<u64>,
    },
    /// `terminal/output`.
    TerminalOutput {
        /// The terminal.
        terminal_id: String,
    },
    /// `terminal/wait_for_exit`.
    TerminalWaitForExit {
        /// The terminal.
        terminal_id: String,
    },
    /// `terminal/kill`.
    TerminalKill {
        /// The terminal.
        terminal_id: String,
    },
    /// `terminal/release`.
    TerminalRelease {
        /// The terminal.
        terminal_id: String,
    },
    /// `elicitation/create` (its params as sent).
    Elicitation {
        /// `{message, requestedSchema, …}` or a URL elicitation.
        params: Value,
    },
}

/// What the client reports to its owner.
#[derive(Clone, Debug, PartialEq)]
pub enum AcpAgentEvent {
    /// `initialize` is done: sessions may be opened.
    Ready,
    /// The client ended (the agent exited, hung, broke the protocol, or it was stopped); every
    /// pending call was failed with this reason.
    Failed(String),
    /// A session request ended: its result object, or why there is none.
    Done {
        /// The caller's token.
        token: u64,
        /// The result, or the reason.
        outcome: Result<Value, String>,
    },
    /// A `session/update` of one of the agent's sessions.
    Update {
        /// The agent's session id.
        session_id: String,
        /// The `update` object (`sessionUpdate` and the variant's fields).
        update: Value,
    },
    /// The agent asks; answer once with [`AcpAgentClient::respond`] or
    /// [`AcpAgentClient::respond_error`].
    Request {
        /// The agent's request id.
        id: OwnedId,
        /// The agent's session id it is about.
        session_id: String,
        /// What it asks.
        request: AgentRequest,
    },
    /// The agent withdrew its request `id` (`$/cancel_request`); it must still be answered.
    RequestCancelled {
        /// The agent's request id.
        id: OwnedId,
    },
}

/// Where the conversation is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    New,
    Initializing,
    Ready,
    Failed(String),
}

/// What one of our requests was for.
#[derive(Clone, Copy, Debug)]
enum Purpose {
    Initialize,
    Session { token: u64 },
}

/// One agent process's conversation (see the [module docs](self)).
#[derive(Debug)]
pub struct AcpAgentClient {
    endpoint: Endpoint,
    config: AcpClientConfig,
    state: State,
    requests: BTreeMap<OwnedId, Purpose>,
    capabilities: AgentCapabilities,
    stderr_tail: StderrTail,
    events: VecDeque<AcpAgentEvent>,
    malformed_notifications: u64,
}

impl AcpAgentClient {
    /// A client; nothing is sent before [`AcpAgentClient::start`].
    pub fn new(config: AcpClientConfig) -> Self {
        let mut endpoint_config = EndpointConfig::new(Framing::Ndjson);
        endpoint_config.frame_limits.max_frame_bytes = config.max_message_bytes;
        // ACP's protocol-level cancellation is `$/cancel_request`.
        endpoint_config.cancel_method = Some("$/cancel_request");
        AcpAgentClient {
            endpoint: Endpoint::new(Role::Client, endpoint_config),
            config,
            state: State::New,
            requests: BTreeMap::new(),
            capabilities: AgentCapabilities::default(),
            stderr_tail: StderrTail::default(),
            events: VecDeque::new(),
            malformed_notifications: 0,
        }
    }

    /// Sends `initialize`.
    pub fn start(&mut self, now: Timestamp) {
        if self.state != State::New {
            return;
        }
        self.state = State::Initializing;
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": self.config.capabilities.to_json(),
            "clientInfo": {"name": "agentwire", "title": "agentwire",
                           "version": self.config.client_version},
        });
        let timeout = self.config.initialize_timeout;
        self.request(
            now,
            "initialize",
            &params,
            Some(timeout),
            Purpose::Initialize,
        );
    }

    /// Whether `initialize` is done and the client has not failed.
    pub fn is_ready(&self) -> bool {
        self.state == State::Ready
    }

    /// Why the client ended, if it did.
    pub fn failure(&self) -> Option<&str> {
        match &self.state {
            State::Failed(reason) => Some(reason),
            _ => None,
        }
    }

    /// What the agent can do (default until `initialize` is answered).
    pub fn capabilities(&self) -> &AgentCapabilities {
        &self.capabilities
    }

    /// Notifications from the agent that were dropped as malformed.
    pub fn malformed_notifications(&self) -> u64 {
        self.malformed_notifications
    }

    /// Responses that matched none of our requests, dropped.
    pub fn unknown_responses(&self) -> u64 {
        self.endpoint.stats().unknown_responses
    }

    /// `session/new` in `cwd` with the session's MCP servers (ACP `McpServer` objects); the
    /// result (`{sessionId, modes?, configOptions?}`) arrives as [`AcpAgentEvent::Done`].
    pub fn new_session(&mut self, now: Timestamp, token: u64, cwd: &str, mcp_servers: &[Value]) {
        let params = json!({"cwd": cwd, "mcpServers": mcp_servers});
        self.session_request(now, token, "session/new", &params, true);
    }

    /// `session/load` of a session the agent kept (only when
    /// [`AgentCapabilities::load_session`]); its replay arrives as updates before the result.
    pub fn load_session(
        &mut self,
        now: Timestamp,
        token: u64,
        session_id: &str,
        cwd: &str,
        mcp_servers: &[Value],
    ) {
        if !self.capabilities.load_session {
            return self.refuse(token, "the agent cannot load sessions (no loadSession)");
        }
        let params = json!({"sessionId": session_id, "cwd": cwd, "mcpServers": mcp_servers});
        self.session_request(now, token, "session/load", &params, true);
    }

    /// `session/resume` (only when [`AgentCapabilities::resume_session`]): no replay.
    pub fn resume_session(
        &mut self,
        now: Timestamp,
        token: u64,
        session_id: &str,
        cwd: &str,
        mcp_servers: &[Value],
    ) {
        if !self.capabilities.resume_session {
            return self.refuse(
                token,
                "the agent cannot resume sessions (no sessionCapabilities.resume)",
            );
        }
        let params = json!({"sessionId": session_id, "cwd": cwd, "mcpServers": mcp_servers});
        self.session_request(now, token, "session/resume", &params, true);
    }

    /// `session/prompt` with ACP content blocks; the result (`{stopReason}`) arrives when the
    /// turn ends, however long it runs.
    pub fn prompt(&mut self, now: Timestamp, token: u64, session_id: &str, prompt: &[Value]) {
        let params = json!({"sessionId": session_id, "prompt": prompt});
        self.session_request(now, token, "session/prompt", &params, false);
    }

    /// `session/cancel`: the agent ends the running turn with `stopReason: "cancelled"`.
    pub fn cancel(&mut self, session_id: &str) {
        if self.state == State::Ready {
            let _ = self
                .endpoint
                .send_notification("session/cancel", &json!({"sessionId": session_id}));
        }
    }

    /// `session/set_mode`.
    pub fn set_mode(&mut self, now: Timestamp, token: u64, session_id: &str, mode_id: &str) {
        let params = json!({"sessionId": session_id, "modeId": mode_id});
        self.session_request(now, token, "session/set_mode", &params, true);
    }

    /// `session/set_config_option` (the result carries the complete option list).
    pub fn set_config_option(
        &mut self,
        now: Timestamp,
        token: u64,
        session_id: &str,
        config_id: &str,
        value: &Value,
    ) {
        let mut params = json!({"sessionId": session_id, "configId": config_id, "value": value});
        if value.is_boolean() {
            params["type"] = json!("boolean");
        }
        self.session_request(now, token, "session/set_config_option", &params, true);
    }

    /// Answers an [`AcpAgentEvent::Request`].
    pub fn respond(&mut self, id: &OwnedId, result: &Value) {
        let _ = self.endpoint.respond(id, result);
    }

    /// Answers an [`AcpAgentEvent::Request`] with an error.
    pub fn respond_error(&mut self, id: &OwnedId, code: i64, message: &str) {
        let _ = self
            .endpoint
            .respond_error(id, &ErrorObject::new(code, message.to_owned()));
    }

    /// Bytes of the agent's stdout.
    pub fn handle_stdout(&mut self, now: Timestamp, bytes: &[u8]) {
        if self.failure().is_some() {
            return;
        }
        let rejected = self.endpoint.stats().rejected;
        self.endpoint.handle_bytes(now, bytes);
        if self.endpoint.stats().rejected > rejected {
            self.fail("the agent wrote a line that is not a JSON-RPC message".to_owned());
        }
        self.pump(now);
    }

    /// Bytes of the agent's stderr (its tail is kept for error messages).
    pub fn handle_stderr(&mut self, bytes: &[u8]) {
        self.stderr_tail.push(bytes);
    }

    /// The agent process ended with `code` (`None`: killed by a signal), or could not be
    /// started (`message`).
    pub fn handle_exit(&mut self, now: Timestamp, code: Option<i32>, message: Option<&str>) {
        let reason = self.stderr_tail.exit_reason("the agent", code, message);
        self.fail(reason);
        self.pump(now);
    }

    /// Ends the client (the process is being stopped).
    pub fn stop(&mut self, now: Timestamp, reason: &str) {
        self.fail(reason.to_owned());
        self.pump(now);
    }

    /// Deadlines.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.endpoint.handle_timeout(now);
        self.pump(now);
    }

    /// When [`AcpAgentClient::handle_timeout`] is due next.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.endpoint.poll_timeout()
    }

    /// The next framed message for the agent's stdin.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.endpoint.poll_transmit()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<AcpAgentEvent> {
        self.events.pop_front()
    }

    // ----- internals -----

    fn session_request(
        &mut self,
        now: Timestamp,
        token: u64,
        method: &str,
        params: &Value,
        deadline: bool,
    ) {
        match &self.state {
            State::Ready => {}
            State::Failed(reason) => {
                let reason = reason.clone();
                return self.refuse(token, &reason);
            }
            State::New | State::Initializing => {
                return self.refuse(token, "the agent is still starting")
            }
        }
        let timeout = deadline.then_some(self.config.request_timeout);
        self.request(now, method, params, timeout, Purpose::Session { token });
    }

    fn refuse(&mut self, token: u64, reason: &str) {
        self.events.push_back(AcpAgentEvent::Done {
            token,
            outcome: Err(reason.to_owned()),
        });
    }

    fn request(
        &mut self,
        now: Timestamp,
        method: &str,
        params: &Value,
        timeout: Option<Duration>,
        purpose: Purpose,
    ) {
        match self.endpoint.send_request(now, method, params, timeout) {
            Ok(id) => {
                self.requests.insert(id, purpose);
            }
            Err(e) => {
                let reason = format!("cannot send {method}: {e:?}");
                match purpose {
                    Purpose::Session { token } => self.refuse(token, &reason),
                    Purpose::Initialize => self.fail(reason),
                }
            }
        }
    }

    fn fail(&mut self, reason: String) {
        if matches!(self.state, State::Failed(_)) {
            return;
        }
        self.state = State::Failed(reason.clone());
        // Every pending request ends `Closed`; the calls fail with this reason.
        self.endpoint.close(reason.clone());
        while let Some(event) = self.endpoint.poll_event() {
            if let EndpointEvent::Outcome { id, .. } = event {
                if let Some(Purpose::Session { token }) = self.requests.remove(&id) {
                    self.refuse(token, &reason);
                }
            }
        }
        self.requests.clear();
        self.events.push_back(AcpAgentEvent::Failed(reason));
    }

    fn pump(&mut self, now: Timestamp) {
        while let Some(event) = self.endpoint.poll_event() {
            self.handle_event(now, event);
        }
    }

    fn handle_event(&mut self, _now: Timestamp, event: EndpointEvent) {
        match event {
            EndpointEvent::Outcome { id, outcome } => self.outcome(id, outcome),
            EndpointEvent::Request(request) => {
                let id = request.id().clone();
                let method = request.method().to_owned();
                let params: Value = request.params().unwrap_or(Value::Null);
                if self.state != State::Ready {
                    let error = ErrorObject::new(
                        -32600,
                        format!("Invalid request: '{method}' before initialize was answered"),
                    );
                    let _ = self.endpoint.respond_error(&id, &error);
                    return;
                }
                match parse_request(&method, &params, self.config.capabilities) {
                    Ok((session_id, request)) => self.events.push_back(AcpAgentEvent::Request {
                        id,
                        session_id,
                        request,
                    }),
                    Err(error) => {
                        let _ = self.endpoint.respond_error(&id, &error);
                    }
                }
            }
            EndpointEvent::Notification(n) => {
                // Elicitation completion and extension notifications need no answer.
                if n.method() == "session/update" {
                    let params: Value = n.params().unwrap_or(Value::Null);
                    match parse_update(&params) {
                        Some((session_id, update)) => self
                            .events
                            .push_back(AcpAgentEvent::Update { session_id, update }),
                        None => self.malformed_notifications += 1,
                    }
                }
            }
            EndpointEvent::CancelRequested { id } => {
                self.events
                    .push_back(AcpAgentEvent::RequestCancelled { id });
            }
            EndpointEvent::Closed(reason) => {
                self.fail(format!("the connection to the agent broke: {reason}"));
            }
        }
    }

    fn outcome(&mut self, id: OwnedId, outcome: Outcome) {
        let Some(purpose) = self.requests.remove(&id) else {
            return;
        };
        let result = match outcome {
            Outcome::Result(raw) => {
                Ok(serde_json::from_str::<Value>(raw.get()).unwrap_or_default())
            }
            Outcome::Error(e) => Err(format!(
                "the agent answered with error {}: {}",
                e.code, e.message
            )),
            Outcome::Cancelled => Err("the request was cancelled".to_owned()),
            Outcome::TimedOut => Err(match purpose {
                Purpose::Initialize => format!(
                    "the agent did not answer initialize within {} ms",
                    self.config.initialize_timeout.as_millis()
                ),
                Purpose::Session { .. } => format!(
                    "the agent did not answer within {} ms",
                    self.config.request_timeout.as_millis()
                ),
            }),
            Outcome::Closed => Err("the connection to the agent closed".to_owned()),
        };
        match purpose {
            Purpose::Session { token } => {
                // `session/load` and `session/set_mode` may answer `null` (the docs' example).
                let outcome = result.map(|v| if v.is_null() { json!({}) } else { v });
                self.events.push_back(AcpAgentEvent::Done { token, outcome });
            }
            Purpose::Initialize => match result {
                Err(reason) => self.fail(reason),
                Ok(result) => match result.get("protocolVersion").and_then(Value::as_u64) {
                    Some(PROTOCOL_VERSION) => {
                        self.capabilities = AgentCapabilities::parse(&result);
                        self.state = State::Ready;
                        self.events.push_back(AcpAgentEvent::Ready);
                    }
                    Some(other) => self.fail(format!(
                        "the agent speaks ACP version {other}; agentwire speaks version {PROTOCOL_VERSION}"
                    )),
                    None => self.fail(
                        "the agent's initialize result has no protocolVersion".to_owned(),
                    ),
                },
            },
        }
    }
}

/// The `sessionId` and `update` of a `session/update`, if they are well formed.
fn parse_update(params: &Value) -> Option<(String, Value)> {
    let session_id = params.get("sessionId")?.as_str()?.to_owned();
    let update = params.get("update")?;
    update.get("sessionUpdate")?.as_str()?;
    Some((session_id, update.clone()))
}

fn invalid(method: &str, what: &str) -> ErrorObject {
    ErrorObject::new(-32602, format!("Invalid params for {method}: {what}"))
}

fn string_field(method: &str, params: &Value, name: &str) -> Result<String, ErrorObject> {
    params
        .get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| invalid(method, &format!("`{name}` must be a string")))
}

fn optional_u64(method: &str, params: &Value, name: &str) -> Result<Option<u64>, ErrorObject> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(method, &format!("`{name}` must be a non-negative integer"))),
    }
}

fn absolute_path(method: &str, params: &Value) -> Result<String, ErrorObject> {
    let path = string_field(method, params, "path")?;
    if !crate::agent::builtin::is_absolute(&path) {
        return Err(invalid(method, "`path` must be absolute"));
    }
    Ok(path)
}

/// Checks an agent request against its method: its session and the typed request, or the
/// error to answer.
fn parse_request(
    method: &str,
    params: &Value,
    offered: ClientCapabilities,
) -> Result<(String, AgentRequest), ErrorObject> {
    let not_offered = || ErrorObject::method_not_found(method);
    let session_id = || string_field(method, params, "sessionId");
    let terminal_id = || string_field(method, params, "terminalId");
    let request = match method {
        "session/request_permission" => {
            let tool_call = params
                .get("toolCall")
                .filter(|t| t.get("toolCallId").and_then(Value::as_str).is_some())
                .cloned()
                .ok_or_else(|| invalid(method, "`toolCall.toolCallId` must be a string"))?;
            let options = params
                .get("options")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid(method, "`options` must be an array"))?
                .iter()
                .map(|o| {
                    let id = o.get("optionId").and_then(Value::as_str);
                    let name = o.get("name").and_then(Value::as_str);
                    let kind = o
                        .get("kind")
                        .and_then(Value::as_str)
                        .and_then(PermissionOptionKind::parse);
                    match (id, name, kind) {
                        (Some(id), Some(name), Some(kind)) => Ok(PermissionOption {
                            id: id.to_owned(),
                            name: name.to_owned(),
                            kind,
                        }),
                        _ => Err(invalid(
                            method,
                            "each option needs `optionId`, `name` and a `kind` of allow_once, \
                             allow_always, reject_once or reject_always",
                        )),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            if options.is_empty() {
                return Err(invalid(method, "`options` is empty"));
            }
            AgentRequest::Permission { tool_call, options }
        }
        "fs/read_text_file" => {
            if !offered.read_text_file {
                return Err(not_offered());
            }
            AgentRequest::ReadTextFile {
                path: absolute_path(method, params)?,
                line: optional_u64(method, params, "line")?,
                limit: optional_u64(method, params, "limit")?,
            }
        }
        "fs/write_text_file" => {
            if !offered.write_text_file {
                return Err(not_offered());
            }
            AgentRequest::WriteTextFile {
                path: absolute_path(method, params)?,
                content: string_field(method, params, "content")?,
            }
        }
        "terminal/create" => {
            if !offered.terminal {
                return Err(not_offered());
            }
            let args = match params.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| a.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| invalid(method, "`args` must be strings"))?,
                Some(_) => return Err(invalid(method, "`args` must be an array")),
            };
            let env = match params.get("env") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|e| {
                        Some((
                            e.get("name")?.as_str()?.to_owned(),
                            e.get("value")?.as_str()?.to_owned(),
                        ))
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| invalid(method, "`env` must be [{name, value}] strings"))?,
                Some(_) => return Err(invalid(method, "`env` must be an array")),
            };
            let cwd = match params.get("cwd") {
                None | Some(Value::Null) => None,
                Some(Value::String(dir)) if crate::agent::builtin::is_absolute(dir) => {
                    Some(dir.clone())
                }
                Some(_) => return Err(invalid(method, "`cwd` must be an absolute path")),
            };
            AgentRequest::TerminalCreate {
                command: string_field(method, params, "command")?,
                args,
                env,
                cwd,
                output_byte_limit: optional_u64(method, params, "outputByteLimit")?,
            }
        }
        "terminal/output" | "terminal/wait_for_exit" | "terminal/kill" | "terminal/release" => {
            if !offered.terminal {
                return Err(not_offered());
            }
            let terminal_id = terminal_id()?;
            match method {
                "terminal/output" => AgentRequest::TerminalOutput { terminal_id },
                "terminal/wait_for_exit" => AgentRequest::TerminalWaitForExit { terminal_id },
                "terminal/kill" => AgentRequest::TerminalKill { terminal_id },
                _ => AgentRequest::TerminalRelease { terminal_id },
            }
        }
        "elicitation/create" => {
            if !offered.elicitation_form {
                return Err(not_offered());
            }
            if !params.is_object() {
                return Err(invalid(method, "params must be an object"));
            }
            AgentRequest::Elicitation {
                params: params.clone(),
            }
        }
        _ => return Err(not_offered()),
    };
    Ok((session_id()?, request))
}

/// Why a turn ended (`session/prompt`'s `stopReason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `end_turn`.
    EndTurn,
    /// `max_tokens`.
    MaxTokens,
    /// `max_turn_requests`.
    MaxTurnRequests,
    /// `refusal`.
    Refusal,
    /// `cancelled`.
    Cancelled,
}

impl StopReason {
    /// The stop reason of a `session/prompt` result.
    pub fn of_result(result: &Value) -> Result<StopReason, String> {
        let reason = result.get("stopReason").and_then(Value::as_str);
        Ok(match reason {
            Some("end_turn") => StopReason::EndTurn,
            Some("max_tokens") => StopReason::MaxTokens,
            Some("max_turn_requests") => StopReason::MaxTurnRequests,
            Some("refusal") => StopReason::Refusal,
            Some("cancelled") => StopReason::Cancelled,
            Some(other) => {
                return Err(format!(
                    "the agent ended the turn with an unknown stopReason `{other}`"
                ))
            }
            None => return Err("the agent's prompt result has no stopReason".to_owned()),
        })
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurnRequests => "max_turn_requests",
            StopReason::Refusal => "refusal",
            StopReason::Cancelled => "cancelled",
        }
    }
}
