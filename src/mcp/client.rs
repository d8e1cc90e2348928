//! The MCP client role: one server's JSON-RPC conversation as a sans-IO state machine.
//!
//! An [`McpClient`] wraps an [`Endpoint`] (client role, newline-delimited JSON, the framing
//! of the stdio transport) and runs the protocol over it: `initialize` (offering
//! [`LATEST_PROTOCOL_VERSION`], accepting any of [`SUPPORTED_PROTOCOL_VERSIONS`]) →
//! `notifications/initialized` → `tools/list` (every page) → ready; `tools/call` with a
//! deadline each; a fresh listing on `notifications/tools/list_changed`. The server's own
//! requests are answered here (`ping`, `roots/list`) or handed up (`sampling/createMessage`,
//! `elicitation/create`); anything else gets `-32601`.
//!
//! Whatever the server does never panics: a line that is not JSON-RPC, a line over the frame
//! limit, a server that exits or stops answering ends the client ([`ClientEvent::Failed`]
//! with the reason) and every pending call fails with that reason. Responses to ids it never
//! used are counted and dropped.

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

use super::tool::{parse_tools_page, McpTool};

/// The protocol version offered in `initialize`.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
/// The versions a server may answer with.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Most `tools/list` pages read in one listing (a server that keeps returning cursors is cut
/// off there).
const MAX_PAGES: usize = 64;

/// What the client reports to its owner.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientEvent {
    /// `initialize` and the first tool listing are done.
    Ready,
    /// The client ended (the server exited, hung, broke the protocol, or it was stopped);
    /// every pending call was failed with this reason.
    Failed(String),
    /// A new tool listing (after `notifications/tools/list_changed`) replaced the tools.
    ToolsChanged,
    /// A call made with [`McpClient::call`] ended: its result, or why there is none.
    CallDone {
        /// The token passed to `call`.
        token: u64,
        /// The result object, or the reason.
        outcome: Result<Value, String>,
    },
    /// The server asked for something only the host can give (`sampling/createMessage`,
    /// `elicitation/create`); answer with [`McpClient::respond`] or
    /// [`McpClient::respond_error`].
    ServerRequest {
        /// The server's request id.
        id: OwnedId,
        /// Its method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
}

/// Where the conversation is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Initializing,
    Listing,
    Ready,
    Failed(String),
}

/// What one of our requests was for.
#[derive(Clone, Debug)]
enum Purpose {
    Initialize,
    ListTools { pages: usize },
    Call { token: u64, method: String },
}

/// One MCP server's conversation (see the [module docs](self)).
#[derive(Debug)]
pub struct McpClient {
    name: String,
    endpoint: Endpoint,
    state: State,
    timeout: Duration,
    requests: BTreeMap<OwnedId, Purpose>,
    tools: Vec<McpTool>,
    listing: Vec<McpTool>,
    /// A `list_changed` arrived while a listing was running: list again after it.
    relist: bool,
    protocol_version: Option<String>,
    server_info: Value,
    server_capabilities: Value,
    roots: Vec<String>,
    stderr_tail: StderrTail,
    events: VecDeque<ClientEvent>,
    client_version: String,
}

impl McpClient {
    /// A client for server `name` whose requests each get `timeout`; `roots` are the
    /// directories `roots/list` reports (the session's working directory).
    pub fn new(name: &str, timeout: Duration, roots: Vec<String>, client_version: &str) -> Self {
        let mut config = EndpointConfig::new(Framing::Ndjson);
        // MCP cancels with `notifications/cancelled {requestId, reason}`, sent here.
        config.cancel_method = None;
        McpClient {
            name: name.to_owned(),
            endpoint: Endpoint::new(Role::Client, config),
            state: State::Initializing,
            timeout,
            requests: BTreeMap::new(),
            tools: Vec::new(),
            listing: Vec::new(),
            relist: false,
            protocol_version: None,
            server_info: Value::Null,
            server_capabilities: Value::Null,
            roots,
            stderr_tail: StderrTail::default(),
            events: VecDeque::new(),
            client_version: client_version.to_owned(),
        }
    }

    /// Limits the size of one message from the server (default: 32 MiB); a longer line
    /// ends the client. Call before [`McpClient::start`].
    pub fn with_max_message_bytes(mut self, max: usize) -> Self {
        let mut config = self.endpoint.config().clone();
        config.frame_limits.max_frame_bytes = max;
        self.endpoint = Endpoint::new(Role::Client, config);
        self
    }

    /// Sends `initialize`.
    pub fn start(&mut self, now: Timestamp) {
        let params = json!({
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {
                "roots": {"listChanged": false},
                "sampling": {},
                "elicitation": {"form": {}, "url": {}},
            },
            "clientInfo": {"name": "agentwire", "version": self.client_version},
        });
        self.request(now, "initialize", &params, Purpose::Initialize);
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the first listing is done and the client has not failed.
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

    /// The server's tools (from the latest complete listing).
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// The protocol version the server chose.
    pub fn protocol_version(&self) -> Option<&str> {
        self.protocol_version.as_deref()
    }

    /// `serverInfo` from `initialize`.
    pub fn server_info(&self) -> &Value {
        &self.server_info
    }

    /// Responses that matched none of our requests, dropped.
    pub fn unknown_responses(&self) -> u64 {
        self.endpoint.stats().unknown_responses
    }

    /// Bytes of the server's stdout.
    pub fn handle_stdout(&mut self, now: Timestamp, bytes: &[u8]) {
        if self.failure().is_some() {
            return;
        }
        let rejected = self.endpoint.stats().rejected;
        self.endpoint.handle_bytes(now, bytes);
        if self.endpoint.stats().rejected > rejected {
            self.fail("the server wrote a line that is not a JSON-RPC message".to_owned());
        }
        self.pump(now);
    }

    /// Bytes of the server's stderr (kept, the tail only, for error messages).
    pub fn handle_stderr(&mut self, bytes: &[u8]) {
        self.stderr_tail.push(bytes);
    }

    /// The server process ended (or could not be started: `message`).
    pub fn handle_exit(&mut self, now: Timestamp, code: Option<i32>, message: Option<&str>) {
        let reason = self.stderr_tail.exit_reason("the server", code, message);
        self.fail(reason);
        self.pump(now);
    }

    /// Ends the client (for example, the session is going away).
    pub fn stop(&mut self, now: Timestamp, reason: &str) {
        self.fail(reason.to_owned());
        self.pump(now);
    }

    /// Deadlines.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.endpoint.handle_timeout(now);
        self.pump(now);
    }

    /// When [`McpClient::handle_timeout`] is due next.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.endpoint.poll_timeout()
    }

    /// The next framed message for the server's stdin.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.endpoint.poll_transmit()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Calls tool `tool` with `arguments`; the outcome arrives as [`ClientEvent::CallDone`]
    /// with `token` (at once, as an error, when the client is not ready).
    pub fn call_tool(&mut self, now: Timestamp, token: u64, tool: &str, arguments: &Value) {
        self.call_tool_with_meta(now, token, tool, arguments, None);
    }

    /// [`McpClient::call_tool`] with the request's `_meta` (a `preMcpToolCall` hook's
    /// `metaToUse`).
    pub fn call_tool_with_meta(
        &mut self,
        now: Timestamp,
        token: u64,
        tool: &str,
        arguments: &Value,
        meta: Option<&Value>,
    ) {
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta.clone();
        }
        self.call(now, token, "tools/call", &params);
    }

    /// Sends any request (`resources/read`, …); the outcome arrives as
    /// [`ClientEvent::CallDone`] with `token`.
    pub fn call(&mut self, now: Timestamp, token: u64, method: &str, params: &Value) {
        match &self.state {
            State::Ready => {}
            State::Failed(reason) => {
                let reason = reason.clone();
                self.events.push_back(ClientEvent::CallDone {
                    token,
                    outcome: Err(reason),
                });
                return;
            }
            State::Initializing | State::Listing => {
                self.events.push_back(ClientEvent::CallDone {
                    token,
                    outcome: Err("the server is still starting".to_owned()),
                });
                return;
            }
        }
        let purpose = Purpose::Call {
            token,
            method: method.to_owned(),
        };
        self.request(now, method, params, purpose);
    }

    /// Cancels call `token` (`notifications/cancelled`); its outcome is an error.
    pub fn cancel_call(&mut self, now: Timestamp, token: u64, reason: &str) {
        let id = self
            .requests
            .iter()
            .find(|(_, p)| matches!(p, Purpose::Call { token: t, .. } if *t == token))
            .map(|(id, _)| id.clone());
        if let Some(id) = id {
            self.send_cancelled(&id, reason);
            self.endpoint.cancel(&id);
            self.pump(now);
        }
    }

    /// Answers a [`ClientEvent::ServerRequest`].
    pub fn respond(&mut self, id: &OwnedId, result: &Value) {
        let _ = self.endpoint.respond(id, result);
    }

    /// Answers a [`ClientEvent::ServerRequest`] with an error.
    pub fn respond_error(&mut self, id: &OwnedId, code: i64, message: &str) {
        let _ = self
            .endpoint
            .respond_error(id, &ErrorObject::new(code, message.to_owned()));
    }

    // ----- internals -----

    fn request(&mut self, now: Timestamp, method: &str, params: &Value, purpose: Purpose) {
        match self
            .endpoint
            .send_request(now, method, params, Some(self.timeout))
        {
            Ok(id) => {
                self.requests.insert(id, purpose);
            }
            Err(e) => {
                let reason = format!("cannot send {method}: {e:?}");
                match purpose {
                    Purpose::Call { token, .. } => self.events.push_back(ClientEvent::CallDone {
                        token,
                        outcome: Err(reason),
                    }),
                    Purpose::Initialize | Purpose::ListTools { .. } => self.fail(reason),
                }
            }
        }
    }

    fn send_cancelled(&mut self, id: &OwnedId, reason: &str) {
        let id_value: Value = serde_json::from_str(id.as_raw()).unwrap_or(Value::Null);
        let _ = self.endpoint.send_notification(
            "notifications/cancelled",
            &json!({"requestId": id_value, "reason": reason}),
        );
    }

    fn fail(&mut self, reason: String) {
        if matches!(self.state, State::Failed(_)) {
            return;
        }
        self.state = State::Failed(reason.clone());
        // Every pending request ends `Closed`; the calls fail with this reason.
        self.endpoint.close(reason.clone());
        self.drain_endpoint_events();
        self.events.push_back(ClientEvent::Failed(reason));
    }

    /// Handles everything the endpoint reported.
    fn pump(&mut self, now: Timestamp) {
        while let Some(event) = self.endpoint.poll_event() {
            self.handle_event(now, event);
        }
    }

    fn drain_endpoint_events(&mut self) {
        while let Some(event) = self.endpoint.poll_event() {
            if let EndpointEvent::Outcome { id, outcome } = event {
                self.outcome(Timestamp::EPOCH, id, outcome);
            }
        }
    }

    fn handle_event(&mut self, now: Timestamp, event: EndpointEvent) {
        match event {
            EndpointEvent::Outcome { id, outcome } => self.outcome(now, id, outcome),
            EndpointEvent::Request(request) => {
                let params: Value = request.params().unwrap_or(Value::Null);
                let id = request.id().clone();
                match request.method() {
                    "ping" => self.respond(&id, &json!({})),
                    "roots/list" => {
                        let roots: Vec<Value> = self
                            .roots
                            .iter()
                            .map(|dir| json!({"uri": file_uri(dir), "name": dir}))
                            .collect();
                        self.respond(&id, &json!({"roots": roots}));
                    }
                    "sampling/createMessage" | "elicitation/create" => {
                        self.events.push_back(ClientEvent::ServerRequest {
                            id,
                            method: request.method().to_owned(),
                            params,
                        });
                    }
                    other => {
                        let error = ErrorObject::method_not_found(other);
                        let _ = self.endpoint.respond_error(&id, &error);
                    }
                }
            }
            EndpointEvent::Notification(n) => {
                if n.method() == "notifications/tools/list_changed" {
                    match self.state {
                        State::Ready => self.list_tools(now, 0),
                        State::Listing => self.relist = true,
                        State::Initializing | State::Failed(_) => {}
                    }
                }
            }
            // The server cannot cancel what we never let it start.
            EndpointEvent::CancelRequested { id } => {
                let _ = self
                    .endpoint
                    .respond_error(&id, &ErrorObject::request_cancelled());
            }
            EndpointEvent::Closed(reason) => {
                self.fail(format!("the connection to the server broke: {reason}"));
            }
        }
    }

    fn outcome(&mut self, now: Timestamp, id: OwnedId, outcome: Outcome) {
        let Some(purpose) = self.requests.remove(&id) else {
            return;
        };
        let secs = self.timeout.as_millis();
        let result = match outcome {
            Outcome::Result(raw) => {
                Ok(serde_json::from_str::<Value>(raw.get()).unwrap_or_default())
            }
            Outcome::Error(e) => Err(format!(
                "the server answered with error {}: {}",
                e.code, e.message
            )),
            Outcome::Cancelled => Err("the call was cancelled".to_owned()),
            Outcome::TimedOut => {
                self.send_cancelled(&id, "timed out");
                Err(format!("the server did not answer within {secs} ms"))
            }
            Outcome::Closed => Err(self
                .failure()
                .unwrap_or("the connection to the server closed")
                .to_owned()),
        };
        match purpose {
            Purpose::Call { token, method } => {
                let outcome = result.map_err(|e| format!("{method} failed: {e}"));
                self.events
                    .push_back(ClientEvent::CallDone { token, outcome });
            }
            Purpose::Initialize => match result {
                Ok(result) => self.initialized(now, &result),
                Err(e) => self.fail(format!("initialize failed: {e}")),
            },
            Purpose::ListTools { pages } => match result {
                Ok(result) => self.tools_page(now, &result, pages),
                Err(e) if self.state == State::Listing && self.tools.is_empty() => {
                    self.fail(format!("tools/list failed: {e}"))
                }
                // A failed re-listing keeps the tools of the last one.
                Err(_) => self.finish_listing(now, false),
            },
        }
    }

    fn initialized(&mut self, now: Timestamp, result: &Value) {
        let version = result.get("protocolVersion").and_then(Value::as_str);
        match version {
            Some(v) if SUPPORTED_PROTOCOL_VERSIONS.contains(&v) => {
                self.protocol_version = Some(v.to_owned())
            }
            other => {
                self.fail(format!(
                    "the server chose protocol version {} (supported: {})",
                    other.unwrap_or("none"),
                    SUPPORTED_PROTOCOL_VERSIONS.join(", ")
                ));
                return;
            }
        }
        self.server_info = result.get("serverInfo").cloned().unwrap_or_default();
        self.server_capabilities = result.get("capabilities").cloned().unwrap_or_default();
        let _ = self
            .endpoint
            .send_notification("notifications/initialized", &());
        if self.server_capabilities.get("tools").is_some() {
            self.state = State::Listing;
            self.list_tools(now, 0);
        } else {
            self.state = State::Ready;
            self.events.push_back(ClientEvent::Ready);
        }
    }

    fn list_tools(&mut self, now: Timestamp, pages: usize) {
        if pages == 0 {
            // (A re-listing: calls keep working meanwhile, with the old tools.)
            self.listing.clear();
            self.relist = false;
        }
        self.request(now, "tools/list", &json!({}), Purpose::ListTools { pages });
    }

    fn tools_page(&mut self, now: Timestamp, result: &Value, pages: usize) {
        let (tools, cursor) = parse_tools_page(result);
        self.listing.extend(tools);
        match cursor {
            Some(cursor) if pages + 1 < MAX_PAGES => {
                self.request(
                    now,
                    "tools/list",
                    &json!({"cursor": cursor}),
                    Purpose::ListTools { pages: pages + 1 },
                );
            }
            _ => self.finish_listing(now, true),
        }
    }

    fn finish_listing(&mut self, now: Timestamp, complete: bool) {
        if complete {
            let mut tools = std::mem::take(&mut self.listing);
            // First definition of a name wins.
            let mut seen = std::collections::BTreeSet::new();
            tools.retain(|t| seen.insert(t.name.clone()));
            self.tools = tools;
        }
        if self.state == State::Listing {
            self.state = State::Ready;
            self.events.push_back(ClientEvent::Ready);
        } else if complete {
            self.events.push_back(ClientEvent::ToolsChanged);
        }
        if self.relist && self.state == State::Ready {
            self.list_tools(now, 0);
        }
    }
}

/// A `file://` URI for a directory path.
fn file_uri(dir: &str) -> String {
    if dir.starts_with('/') {
        format!("file://{dir}")
    } else {
        format!("file:///{dir}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> Timestamp {
        Timestamp::from_millis(1_795_983_976_952)
    }

    /// Every frame the client wrote, parsed.
    fn written(c: &mut McpClient) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(frame) = c.poll_transmit() {
            out.push(serde_json::from_slice(&frame[..frame.len() - 1]).unwrap());
        }
        out
    }

    fn events(c: &mut McpClient) -> Vec<ClientEvent> {
        std::iter::from_fn(|| c.poll_event()).collect()
    }

    fn feed(c: &mut McpClient, v: Value) {
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        c.handle_stdout(t0(), &line);
    }

    fn ready_client() -> McpClient {
        let mut c = McpClient::new("s", Duration::from_secs(5), vec!["/w".into()], "1");
        c.start(t0());
        let init = written(&mut c);
        assert_eq!(init[0]["method"], "initialize");
        assert_eq!(
            init[0]["params"]["protocolVersion"],
            LATEST_PROTOCOL_VERSION
        );
        assert!(init[0]["params"]["capabilities"]["sampling"].is_object());
        feed(
            &mut c,
            json!({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}}),
        );
        let sent = written(&mut c);
        assert_eq!(sent[0]["method"], "notifications/initialized");
        assert_eq!(sent[1]["method"], "tools/list");
        feed(
            &mut c,
            json!({"jsonrpc": "2.0", "id": 1, "result": {
            "tools": [{"name": "a"}], "nextCursor": "p2"}}),
        );
        let sent = written(&mut c);
        assert_eq!(sent[0]["params"]["cursor"], "p2");
        feed(
            &mut c,
            json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "b"}]}}),
        );
        assert_eq!(events(&mut c), vec![ClientEvent::Ready]);
        assert_eq!(c.protocol_version(), Some("2025-06-18"));
        c
    }

    #[test]
    fn handshake_pagination_calls_and_relisting() {
        let mut c = ready_client();
        let names: Vec<&str> = c.tools().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        c.call_tool(t0(), 7, "a", &json!({"x": 1}));
        let sent = written(&mut c);
        assert_eq!(sent[0]["method"], "tools/call");
        assert_eq!(
            sent[0]["params"],
            json!({"name": "a", "arguments": {"x": 1}})
        );
        let id = sent[0]["id"].clone();
        feed(
            &mut c,
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}),
        );
        assert_eq!(
            events(&mut c),
            vec![ClientEvent::CallDone {
                token: 7,
                outcome: Ok(json!({"content": []}))
            }]
        );
        // The server's own requests.
        feed(
            &mut c,
            json!({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"}),
        );
        feed(
            &mut c,
            json!({"jsonrpc": "2.0", "id": "r2", "method": "tools/call"}),
        );
        let sent = written(&mut c);
        assert_eq!(sent[0]["result"]["roots"][0]["uri"], "file:///w");
        assert_eq!(sent[1]["error"]["code"], -32601);
        feed(
            &mut c,
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        );
        let sent = written(&mut c);
        let id = sent[0]["id"].clone();
        assert_eq!(sent[0]["method"], "tools/list");
        feed(
            &mut c,
            json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "c"}]}}),
        );
        assert_eq!(events(&mut c), vec![ClientEvent::ToolsChanged]);
        assert_eq!(c.tools()[0].name, "c");
    }

    #[test]
    fn a_hung_call_times_out_and_the_server_is_told() {
        let mut c = ready_client();
        c.call_tool(t0(), 1, "a", &json!({}));
        written(&mut c);
        let due = c.poll_timeout().expect("a deadline");
        c.handle_timeout(due);
        let sent = written(&mut c);
        assert_eq!(sent[0]["method"], "notifications/cancelled");
        let ev = events(&mut c);
        assert!(
            matches!(&ev[0], ClientEvent::CallDone { token: 1, outcome: Err(e) } if e.contains("did not answer")),
            "{ev:?}"
        );
    }

    #[test]
    fn junk_and_exit_fail_pending_calls_with_the_reason() {
        let mut c = ready_client();
        c.call_tool(t0(), 1, "a", &json!({}));
        c.handle_stdout(t0(), b"this is not json\n");
        let ev = events(&mut c);
        assert!(
            matches!(&ev[0], ClientEvent::CallDone { token: 1, outcome: Err(e) } if e.contains("not a JSON-RPC")),
            "{ev:?}"
        );
        assert!(matches!(&ev[1], ClientEvent::Failed(_)));
        let mut c = ready_client();
        c.call_tool(t0(), 2, "a", &json!({}));
        c.handle_stderr(b"boom: out of memory\n");
        c.handle_exit(t0(), Some(3), None);
        let ev = events(&mut c);
        assert!(
            matches!(&ev[0], ClientEvent::CallDone { token: 2, outcome: Err(e) } if e.contains("exited with code 3") && e.contains("out of memory")),
            "{ev:?}"
        );
    }

    #[test]
    fn an_unsupported_protocol_version_fails_the_server() {
        let mut c = McpClient::new("s", Duration::from_secs(5), vec![], "1");
        c.start(t0());
        feed(
            &mut c,
            json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "1.0"}}),
        );
        let ev = events(&mut c);
        assert!(
            matches!(&ev[0], ClientEvent::Failed(e) if e.contains("protocol version 1.0")),
            "{ev:?}"
        );
    }
}
