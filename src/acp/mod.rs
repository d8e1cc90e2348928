//! The Agent Client Protocol (ACP) v1 dialect, mapped onto the same sessions.
//!
//! An editor (Zed, JetBrains, …) drives agentwire's sessions, agent and bridges over
//! newline-delimited JSON-RPC 2.0 (`agentwire --acp`; reference `acp.md`). The host routes
//! every message of an ACP connection ([`Dialect::Acp`](crate::host::Dialect::Acp)) here,
//! and every session event for attached ACP connections.
//!
//! * `methods`: the agent methods (`initialize`, `session/new`, `session/load`,
//!   `session/prompt`, …; see [`METHODS`]) and the `session/cancel` / `$/cancel_request`
//!   notifications.
//! * `update`: session events → `session/update` notifications, encoded once per event for
//!   all ACP connections.
//! * `permission`: permission prompts → `session/request_permission` (options `allow-once`,
//!   `allow-always`, `reject-once`), "always" approvals remembered for the session, hook
//!   prompts denied without asking.
//! * `client`: the client's capabilities ([`ClientCaps`]: `fs/*`, `terminal/*`) used by the
//!   built-in tools of [`agent::builtin`](crate::agent::builtin).
//! * `elicitation`: elicitations of the session (an MCP server's `elicitation/create`, a
//!   client's `session.ui.elicitation`) → `elicitation/create` to clients that advertised
//!   `elicitation.form` / `elicitation.url`; their answer resolves the elicitation.
//! * `modes`: the session modes (`interactive`, `autopilot`) and config options (`mode`,
//!   `model`).
//!
//! # Turns
//!
//! `session/prompt` queues the prompt for the session's agent with a fresh message id. The
//! agent's `user.message` with that id starts the connection's turn; the turn's
//! `session.idle` answers the prompt, after every update of the turn has been queued:
//! `{"stopReason":"end_turn"}`, or `"cancelled"` after `session/cancel` or an abort (never an
//! error), or a `-32603` error carrying the message of a `session.error`. A prompt that had
//! not started when `session/cancel` arrived is answered `cancelled` at once (the abort
//! drops it from the agent's queue).
//!
//! # Robustness
//!
//! Peer input never panics: malformed lines get the usual `-32700` error (`id: null`),
//! responses with `id: null` (the client could not parse something of ours) and responses
//! to unknown ids are counted ([`Host::acp_ignored_responses`]) and ignored, and the
//! connection keeps working. Our request ids and the client's are separate spaces.
//!
//! # Sessions across processes
//!
//! `session/load` replays what the session's persisted events hold, so a session restored
//! with [`Host::restore_session`] replays like one created in this process; what restores it
//! at start-up is the runtime's durable store.

mod client;
mod elicitation;
mod methods;
pub(crate) mod modes;
mod params;
mod permission;
pub(crate) mod relay;
mod relayed_prompts;
mod update;

#[cfg(test)]
mod tests;

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};

use bytes::{Bytes, BytesMut};
use serde_json::{json, Value};

use crate::agent::{BuiltinCall, BuiltinOp};
use crate::correlation::PendingRequests;
use crate::frame::{encode_frame, Framing};
use crate::host::{ConnId, DialectHandler, DialectId, Host};
use crate::jsonrpc::{self, ErrorObject, OwnedId};
use crate::session::Event;

pub use client::{ClientCaps, COMMAND_TIMEOUT, FS_TIMEOUT, OUTPUT_BYTE_LIMIT};
pub use methods::METHODS;
pub use permission::PERMISSION_TIMEOUT;

use client::{prompt_decided, response, tool_completed, Op, Out};
use methods::dispatch;
use update::{Audience, Mapped};

/// The ACP protocol version this dialect speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// The notification a relay group member (an editor a cluster gateway relays, see
/// [`ClusterApi::join_relay_group`]) gets after the updates of each durable event of a session, and
/// after the replay of `session/load` / `session/resume`: `{"sessionId", "eventId"}`, the last
/// durable event whose updates it has. ACP updates carry no event ids: this is where the
/// gateway learns how far its client got, to re-attach it after a takeover with
/// [`RELAY_REPLAY_AFTER`]. The gateway keeps it from the client.
pub const RELAY_POSITION: &str = "_agentwire/relay_position";

/// The `_meta` member of `session/load` / `session/resume` params naming an event of the
/// session: only the events after it are replayed (as `session/update`s), then the connection
/// is attached, so it misses nothing and gets nothing twice. An id the session's history does
/// not hold is refused (`-32602`). What a gateway sends to re-attach its client.
pub const RELAY_REPLAY_AFTER: &str = "agentwireReplayAfter";

/// A `session/prompt` waiting for its turn to end.
#[derive(Debug)]
pub(crate) struct PromptWait {
    pub session: String,
    pub id: OwnedId,
    /// The message id the prompt was queued with (`user.message.messageId`).
    pub message_id: String,
    /// The agent started the turn.
    pub started: bool,
    /// `session/cancel` (or `$/cancel_request`) asked to stop it.
    pub cancelled: bool,
    /// A `session.error` of the turn.
    pub error: Option<String>,
    /// Its connection is an editor a cluster gateway relays here: it is kept across a broken
    /// link ([`relayed_prompts`]).
    pub relayed: bool,
}

impl PromptWait {
    /// Its answer, at the `session.idle` (with `data`) that ends its turn.
    fn outcome(&self, data: &Value) -> Result<Value, ErrorObject> {
        let aborted = data
            .get("aborted")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if self.cancelled || aborted {
            Ok(json!({"stopReason": "cancelled"}))
        } else if let Some(message) = &self.error {
            Err(ErrorObject::internal(message.clone()))
        } else {
            Ok(json!({"stopReason": "end_turn"}))
        }
    }
}

/// Per-connection state of the ACP dialect (kept by the host for each ACP connection).
#[derive(Debug, Default)]
pub(crate) struct ConnState {
    /// `initialize` succeeded.
    pub(crate) initialized: bool,
    /// What the client offers.
    pub(crate) caps: ClientCaps,
    /// Our requests to the client.
    pub(crate) out: PendingRequests<Out>,
    /// `session/prompt` requests waiting for their turn to end.
    pub(crate) prompts: Vec<PromptWait>,
    /// Message and reasoning ids this connection got deltas for (their full text is not
    /// sent again).
    pub(crate) streamed: BTreeSet<String>,
    /// Our open `session/request_permission` requests, by the host's request id.
    pub(crate) asks: BTreeMap<String, OwnedId>,
    /// Our open `elicitation/create` requests, by the host's request id.
    pub(crate) elicitations: BTreeMap<String, OwnedId>,
    /// Client operations of built-in tool calls, by tool call id.
    pub(crate) ops: BTreeMap<String, Op>,
    /// Responses ignored: `id: null` errors and unknown, late or duplicate ids.
    pub(crate) ignored_responses: u64,
    /// The params of the client's `initialize` (JSON), for relaying the connection.
    pub(crate) initialize_params: Option<String>,
}

/// This dialect's entry in the host's dialect table (see [`crate::dialect`]).
pub(crate) const ID: DialectId = DialectId(1);

/// The ACP dialect's handler.
pub(crate) struct Acp;

impl DialectHandler for Acp {
    fn slow_reader_advice(&self) -> &'static str {
        "reconnect and call session/load to catch up"
    }

    fn new_conn_state(&self) -> Box<dyn Any + Send> {
        Box::<ConnState>::default()
    }

    fn handle_message(&self, host: &mut Host, conn: ConnId, message: jsonrpc::Message<'_>) {
        handle_message(host, conn, message);
    }

    fn relay_handshake(&self, host: &Host, conn: ConnId) -> Vec<Vec<u8>> {
        initialize_again(host, conn).into_iter().collect()
    }

    fn deliver_event(&self, host: &mut Host, session: &str, event: &Event, conns: &[ConnId]) {
        on_event(host, session, event, conns);
    }

    fn event_emitted(&self, host: &mut Host, session: &str, event: &Event, data: &Value) {
        relayed_prompts::on_event(host, session, &event.event_type, data);
    }

    fn conn_detached(&self, host: &mut Host, session: &str, conn: ConnId) {
        if !host.is_conn_ending(conn) {
            return;
        }
        // Closed by the host (its state still there).
        let Some(c) = host.conn_state::<ConnState>(conn) else {
            return;
        };
        let prompts = relayed_prompts::take_relayed(c, Some(session));
        relayed_prompts::park(host, conn, prompts);
    }

    fn conn_ended(&self, host: &mut Host, conn: ConnId, state: &mut (dyn Any + Send)) {
        if let Some(c) = state.downcast_mut::<ConnState>() {
            let prompts = relayed_prompts::take_relayed(c, None);
            relayed_prompts::park(host, conn, prompts);
        }
    }

    fn session_deleting(&self, host: &mut Host, session: &str) {
        let attached: Vec<ConnId> = host
            .session(session)
            .map(|s| s.attached.keys().copied().collect())
            .unwrap_or_default();
        for conn in attached {
            answer_prompts_cancelled(host, conn, session);
        }
    }

    fn timer_fired(&self, host: &mut Host, conn: ConnId, id: &OwnedId) {
        client::timed_out(host, conn, id);
    }

    fn permission_requested(&self, host: &mut Host, session: &str, request_id: &str) {
        permission::permission_requested(host, session, request_id);
    }

    fn builtin_executor(&self, host: &Host, session: &str, op: &BuiltinOp) -> Option<ConnId> {
        client::executor(host, session, op)
    }

    fn start_builtin(
        &self,
        host: &mut Host,
        conn: ConnId,
        session: &str,
        request_id: &str,
        tool_call_id: &str,
        call: BuiltinCall,
    ) {
        client::start_builtin(host, conn, session, request_id, tool_call_id, call);
    }
}

/// The client's `initialize` for relaying `conn`, under [`crate::host::RELAY_HANDSHAKE_ID`].
fn initialize_again(host: &Host, conn: ConnId) -> Option<Vec<u8>> {
    let params = host
        .conn_state_ref::<ConnState>(conn)?
        .initialize_params
        .as_deref()?;
    let params: &serde_json::value::RawValue = serde_json::from_str(params).ok()?;
    serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": crate::host::RELAY_HANDSHAKE_ID,
        "method": "initialize",
        "params": params,
    }))
    .ok()
}

/// The `session/update` notification body for one update.
pub(crate) fn update_body(session: &str, update: &Value) -> Vec<u8> {
    let mut body = Vec::with_capacity(128);
    // A `Value` always serialises.
    let _ = jsonrpc::write_notification(
        &mut body,
        "session/update",
        &json!({"sessionId": session, "update": update}),
    );
    body
}

impl Host {
    /// Responses an ACP connection sent that matched none of our requests (`id: null`
    /// errors, unknown, late or duplicate ids): counted and ignored. `None` for an unknown
    /// connection (0 for one that does not speak ACP).
    pub fn acp_ignored_responses(&self, conn: ConnId) -> Option<u64> {
        self.conn_dialect(conn)?;
        Some(
            self.conn_state_ref::<ConnState>(conn)
                .map_or(0, |c| c.ignored_responses),
        )
    }
}

/// Handles one message from an ACP connection.
pub(crate) fn handle_message(host: &mut Host, conn: ConnId, message: jsonrpc::Message<'_>) {
    match message {
        jsonrpc::Message::Request { id, method, params } => {
            let id = id.to_owned();
            if !host.admit_request(conn, &id, "Invalid request: ") {
                return;
            }
            if let Some(result) = dispatch(host, conn, &id, &method, params) {
                host.respond(conn, &id, result);
            }
        }
        jsonrpc::Message::Notification { method, params } => match method.as_ref() {
            "session/cancel" => {
                let raw = params.map(|p| p.get()).unwrap_or("{}");
                if let Ok(p) = serde_json::from_str::<params::SessionParams>(raw) {
                    cancel_turn(host, conn, &p.session_id);
                }
            }
            "$/cancel_request" => {
                let raw = params.map(|p| p.get()).unwrap_or("{}");
                if let Ok(p) = serde_json::from_str::<params::CancelRequestParams>(raw) {
                    cancel_request(host, conn, &p.request_id);
                }
            }
            // Unknown notifications are ignored (ACP extensibility rules).
            _ => {}
        },
        jsonrpc::Message::Response { id, outcome } => response(host, conn, &id, outcome),
    }
}

/// `session/cancel` (or a cancelled permission request): prompts of `conn` for the
/// session that have not started are answered `cancelled` now, the running one when its
/// turn ends; the session's agent is asked to abort.
pub(crate) fn cancel_turn(host: &mut Host, conn: ConnId, session: &str) {
    let Some(c) = host.conn_state::<ConnState>(conn) else {
        return;
    };
    let mut waiting = Vec::new();
    c.prompts.retain_mut(|p| {
        if p.session != session {
            return true;
        }
        p.cancelled = true;
        if p.started {
            return true;
        }
        waiting.push(p.id.clone());
        false
    });
    for id in waiting {
        host.respond(conn, &id, Ok(json!({"stopReason": "cancelled"})));
    }
    if host.session(session).is_some() {
        host.queue_agent_input(session, crate::agent::AgentInput::Abort);
    }
}

/// `$/cancel_request`: a running `session/prompt` is cancelled like `session/cancel`
/// (and answered with `stopReason: "cancelled"`). Other requests are answered at once,
/// so there is nothing else to cancel.
fn cancel_request(host: &mut Host, conn: ConnId, id: &OwnedId) {
    let session = host
        .conn_state_ref::<ConnState>(conn)
        .and_then(|c| c.prompts.iter().find(|p| &p.id == id))
        .map(|p| p.session.clone());
    if let Some(session) = session {
        cancel_turn(host, conn, &session);
    }
}

/// Answers every prompt of `conn` for `session` with `cancelled` (the connection leaves
/// the session). Returns whether there were any.
pub(crate) fn answer_prompts_cancelled(host: &mut Host, conn: ConnId, session: &str) -> bool {
    let Some(c) = host.conn_state::<ConnState>(conn) else {
        return false;
    };
    let mut ids = Vec::new();
    c.prompts.retain(|p| {
        if p.session == session {
            ids.push(p.id.clone());
            false
        } else {
            true
        }
    });
    let any = !ids.is_empty();
    for id in ids {
        host.respond(conn, &id, Ok(json!({"stopReason": "cancelled"})));
    }
    any
}

/// The [`RELAY_POSITION`] notification: `conn` has the updates of `session` up to event `id`.
pub(crate) fn relay_position(host: &mut Host, conn: ConnId, session: &str, id: &str) {
    host.notify(
        conn,
        RELAY_POSITION,
        &json!({"sessionId": session, "eventId": id}),
    );
}

/// Delivers a session event to the ACP connections attached to the session: its updates
/// (each encoded once for all of them), then the turn and request bookkeeping, then, for
/// relay group members and a durable event, its [`RELAY_POSITION`].
pub(crate) fn on_event(host: &mut Host, session: &str, event: &Event, conns: &[ConnId]) {
    if !update::is_relevant(&event.event_type) {
        return;
    }
    let Ok(envelope) = serde_json::from_slice::<Value>(&event.json) else {
        return;
    };
    let data = envelope.get("data").unwrap_or(&Value::Null);
    let mapped = update::map_event(&event.event_type, data, false);
    let frames: Vec<Option<Bytes>> = mapped
        .iter()
        .map(|m| {
            m.update.as_ref().map(|u| {
                let body = update_body(session, u);
                let mut buf = BytesMut::with_capacity(body.len() + 1);
                encode_frame(Framing::Ndjson, &body, &mut buf);
                buf.freeze()
            })
        })
        .collect();
    for &conn in conns {
        for (m, frame) in mapped.iter().zip(&frames) {
            deliver_update(host, conn, session, m, frame.as_ref());
        }
        after_event(host, conn, session, &event.event_type, data);
        if !event.ephemeral && host.is_relay_member(conn) {
            relay_position(host, conn, session, &event.id);
        }
    }
}

/// Sends one mapped update to `conn` if its audience includes the connection.
fn deliver_update(host: &mut Host, conn: ConnId, session: &str, m: &Mapped, frame: Option<&Bytes>) {
    let Some(framing) = host.conn_framing(conn) else {
        return;
    };
    let Some(c) = host.conn_state::<ConnState>(conn) else {
        return;
    };
    let send = match &m.audience {
        Audience::All => true,
        Audience::Delta(id) => {
            if !c.streamed.contains(id) {
                c.streamed.insert(id.clone());
            }
            true
        }
        Audience::UnlessStreamed(id) => !c.streamed.remove(id),
        Audience::UnlessPromptedBy(message_id) => {
            !c.prompts.iter().any(|p| &p.message_id == message_id)
        }
    };
    if !send {
        return;
    }
    let (Some(frame), Some(update)) = (frame, &m.update) else {
        return;
    };
    if framing == Framing::Ndjson {
        // Never droppable: ACP clients have no way to catch up on a lost chunk.
        host.deliver(conn, frame.clone(), false);
    } else {
        host.send_body(conn, &update_body(session, update));
    }
}

/// The bookkeeping an event implies for one ACP connection.
fn after_event(host: &mut Host, conn: ConnId, session: &str, event_type: &str, data: &Value) {
    let field = |name: &str| data.get(name).and_then(Value::as_str).unwrap_or("");
    match event_type {
        "user.message" => {
            let message_id = field("messageId");
            if let Some(c) = host.conn_state::<ConnState>(conn) {
                if let Some(p) = c
                    .prompts
                    .iter_mut()
                    .find(|p| p.session == session && p.message_id == message_id)
                {
                    p.started = true;
                }
            }
        }
        "session.error" => {
            let message = field("message").to_owned();
            if let Some(p) = host.conn_state::<ConnState>(conn).and_then(|c| {
                c.prompts
                    .iter_mut()
                    .find(|p| p.session == session && p.started)
            }) {
                p.error = Some(message);
            }
        }
        "session.idle" => {
            let Some(c) = host.conn_state::<ConnState>(conn) else {
                return;
            };
            let Some(i) = c
                .prompts
                .iter()
                .position(|p| p.session == session && p.started)
            else {
                return;
            };
            let p = c.prompts.remove(i);
            let result = p.outcome(data);
            if p.relayed {
                relayed_prompts::answered(host, session, conn, &p, &result);
            }
            host.respond(conn, &p.id, result);
        }
        "permission.completed" => prompt_decided(host, conn, field("requestId")),
        "tool.execution_complete" => tool_completed(host, conn, field("toolCallId")),
        "elicitation.requested" => elicitation::ask(host, conn, session, data),
        "elicitation.completed" => elicitation::decided(host, conn, field("requestId")),
        _ => {}
    }
}
