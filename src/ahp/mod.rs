//! The Agent Host Protocol (AHP) 1.0 dialect, mapped onto the same sessions.
//!
//! AHP (`microsoft/agent-host-protocol`) is a multi-client protocol: the host owns each
//! session's state, clients mirror it through reducers. Clients connect over WebSocket (the
//! driver's `--ahp-port` listener hands each text message to the host whole) and speak
//! JSON-RPC 2.0; the wire types are those of the official `ahp-types` crate.
//!
//! * `channels`: the channel URIs (`ahp-root://`, `ahp-session:/<id>`, `ahp-chat:/<id>`).
//! * `methods`: the commands (`initialize`, `reconnect`, `ping`, `subscribe`,
//!   `createSession`, `disposeSession`, `listSessions`, `createChat`, `disposeChat`,
//!   `moveChat`, `fetchTurns`) and the
//!   `unsubscribe` / `dispatchAction` notifications.
//! * `dispatch`: actions clients dispatch (`chat/turnStarted` → a prompt,
//!   `chat/toolCallConfirmed` → the answer to a permission prompt, `chat/turnCancelled` → an
//!   abort, `session/activeClientSet` → tools the client provides, `chat/toolCallComplete` →
//!   a result of one of them, `session/titleChanged`); everything else is rejected with a
//!   reason.
//! * `chats`: several chats per session (`createChat`, `disposeChat`): each extra chat is
//!   a host session of its own, linked to its AHP session in its `session.start`.
//! * `input`: elicitations as chat input requests (`chat/inputRequested`) and their answers.
//! * `projection`: a session's chat as AHP sees it, kept from the session's events; each
//!   event becomes the actions its table lists.
//! * `snapshot`: root, session and chat snapshots, session summaries.
//! * `feed`: one `serverSeq` for the host, the subscribers of each channel, the envelopes a
//!   reconnecting client catches up from.
//! * `gateway`: a cluster node relaying its clients' channels to the nodes owning their
//!   sessions (routing by channel, one `serverSeq`, a `reconnect` that gathers snapshots).
//! * `relay`: what the node's cluster gateway remembers of a relayed AHP client.
//!
//! # Robustness
//!
//! Peer input never panics: junk gets `-32700`, unknown methods `-32601`, bad params
//! `-32602` with serde's reason, unknown channels `-32602` and missing sessions `-32001`;
//! a dispatched action that cannot be applied comes back to its sender alone as an
//! envelope with a `rejectionReason`. The connection keeps working.

mod channels;
mod chats;
mod dispatch;
mod feed;
mod gateway;
mod input;
mod methods;
mod projection;
pub(crate) mod relay;
mod snapshot;

use std::any::Any;

use ahp_types::actions::{
    ActionOrigin, PartialChatSummary, RootActiveSessionsChangedAction,
    SessionActiveClientRemovedAction, SessionChatUpdatedAction, StateAction,
};
use ahp_types::notifications::PartialSessionSummary;
use ahp_types::state::SessionStatus;
use serde_json::{json, Value};

use crate::host::dialect::OwnerFrameUse;
use crate::host::{ConnId, DialectHandler, DialectId, Host, SessionChange};
use crate::jsonrpc;
use crate::session::{Attachment, Event, ToolDecl};

use channels::{chat_uri, session_uri, ROOT};
use feed::Feed;
use projection::{ChatProjection, Produced, Scope};

pub use methods::METHODS;

/// The protocol versions this dialect speaks, most preferred first (`ahp-types`' list).
pub const PROTOCOL_VERSIONS: &[&str] = ahp_types::SUPPORTED_PROTOCOL_VERSIONS;

/// This dialect's entry in the host's dialect table (see [`crate::dialect`]).
pub(crate) const ID: DialectId = DialectId(3);

/// Per-connection state of the AHP dialect.
#[derive(Debug, Default)]
pub(crate) struct ConnState {
    /// `initialize` (or `reconnect`) succeeded.
    pub(crate) initialized: bool,
    /// The client's `clientId`.
    pub(crate) client_id: String,
    /// The version `initialize` agreed on (`None` after a `reconnect`).
    pub(crate) version: Option<String>,
    /// A `reconnect` gathering the snapshots of other nodes (see `gateway`).
    pub(crate) gathering: Option<gateway::Gathering>,
    /// How many `subscribe` requests gatherings made for the client (their ids).
    pub(crate) gathered: u64,
}

/// The AHP dialect's handler.
pub(crate) struct Ahp;

impl DialectHandler for Ahp {
    fn slow_reader_advice(&self) -> &'static str {
        "reconnect and send `reconnect` with the last serverSeq you saw to catch up"
    }

    fn new_conn_state(&self) -> Box<dyn Any + Send> {
        Box::<ConnState>::default()
    }

    fn handle_message(&self, host: &mut Host, conn: ConnId, message: jsonrpc::Message<'_>) {
        handle_message(host, conn, message);
    }

    fn named_session(&self, body: &[u8]) -> Option<String> {
        gateway::named_session(body)
    }

    fn relay_handshake(&self, host: &Host, conn: ConnId) -> Vec<Vec<u8>> {
        gateway::handshake(host, conn).into_iter().collect()
    }

    fn owner_frame(&self, host: &mut Host, conn: ConnId, body: &[u8]) -> OwnerFrameUse {
        gateway::owner_frame(host, conn, body)
    }

    fn cluster_sessions_changed(&self, host: &mut Host, added: &[String], removed: &[String]) {
        for id in added {
            let summary = host
                .cluster_sessions()
                .find(|s| s.id == *id)
                .map(snapshot::summary_elsewhere);
            if let Some(summary) = summary {
                announce_added(host, &summary);
            }
        }
        for id in removed {
            announce_removed(host, id);
        }
    }

    fn event_emitted(&self, host: &mut Host, session: &str, event: &Event, data: &Value) {
        let now = host.now();
        // A tool an AHP client provides: the call names that client as its contributor.
        let contributor = (event.event_type == "tool.execution_start")
            .then(|| tool_provider(host, session, data))
            .flatten();
        // The agent's queue may have changed (a turn ended: an abort may have cleared it;
        // `pending_messages.modified`): compare the queued messages with it now if it can be
        // read, else once the agent finished handling its input.
        let queue_changed = matches!(
            event.event_type.as_str(),
            "session.idle" | "pending_messages.modified"
        );
        let still: Option<Vec<String>> = if queue_changed {
            host.queued_prompt_ids(session)
        } else {
            None
        };
        let Some(chat) = host
            .session_state::<ChatProjection>(session)
            .filter(|c| c.live)
        else {
            return;
        };
        if let Some(client_id) = contributor {
            let call = data.get("toolCallId").and_then(Value::as_str).unwrap_or("");
            chat.note_contributor(call, client_id);
        }
        let mut produced = chat.on_event(&event.event_type, data, now);
        if queue_changed && chat.has_queued() {
            match still {
                Some(still) => produced.extend(chat.sync_queue(&still)),
                None => chat.queue_dirty = true,
            }
        }
        publish_all(host, session, produced);
        if event.event_type == "elicitation.requested" {
            cancel_unshown_elicitation(host, session, data);
        }
    }

    fn agent_input_handled(&self, host: &mut Host, session: &str) {
        let dirty = host
            .session_state_ref::<ChatProjection>(session)
            .is_some_and(|c| c.live && c.queue_dirty);
        if !dirty {
            return;
        }
        let Some(still) = host.queued_prompt_ids(session) else {
            return;
        };
        let Some(chat) = host.session_state::<ChatProjection>(session) else {
            return;
        };
        let produced = chat.sync_queue(&still);
        publish_all(host, session, produced);
    }

    fn permission_requested(&self, host: &mut Host, session: &str, request_id: &str) {
        let Some((tool_call_id, kind)) = host.pending_permission(session, request_id).map(|p| {
            let kind = p.request.get("kind").and_then(Value::as_str).unwrap_or("");
            (p.tool_call_id.to_owned(), kind.to_owned())
        }) else {
            return;
        };
        let ours = host.session(session).is_some_and(|s| {
            s.attached
                .keys()
                .any(|c| host.conn_state_ref::<ConnState>(*c).is_some())
        });
        let autopilot = host
            .session(session)
            .is_some_and(|s| crate::acp::modes::current(s.events()) == "autopilot");
        if ours && autopilot && kind != "hook" {
            // Autopilot: tool calls run without asking (as ACP's editors see it).
            host.resolve_permission(session, request_id, &json!({"kind": "approve-once"}));
            return;
        }
        let Some(chat) = host
            .session_state::<ChatProjection>(session)
            .filter(|c| c.live)
        else {
            return;
        };
        let produced = chat.confirmation_asked(&tool_call_id);
        publish_all(host, session, produced);
    }

    fn session_changed(&self, host: &mut Host, change: SessionChange, session: &str) {
        if change == SessionChange::Deleted {
            if let Some(feed) = host.dialect_state::<Feed>() {
                feed.drop_channel(&session_uri(session));
                feed.drop_channel(&chat_uri(session));
            }
        }
        // An extra chat is announced in its session, not to the root.
        if chats::chat_changed(host, change, session) {
            return;
        }
        match change {
            SessionChange::Created => {
                let Some(summary) = host.session(session).map(|s| snapshot::summary(host, s))
                else {
                    return;
                };
                announce_added(host, &summary);
            }
            SessionChange::Deleted => announce_removed(host, session),
            SessionChange::Updated => return,
        }
        let count = i64::try_from(snapshot::session_count(host)).unwrap_or(i64::MAX);
        feed::publish(
            host,
            ROOT,
            StateAction::RootActiveSessionsChanged(RootActiveSessionsChangedAction {
                active_sessions: count,
            }),
            None,
        );
    }

    fn conn_detached(&self, host: &mut Host, session: &str, conn: ConnId) {
        // Its tools left with it.
        let removed = host
            .session_state::<ChatProjection>(session)
            .map(|c| c.remove_active_clients(conn, None))
            .unwrap_or_default();
        for client_id in removed {
            feed::publish(
                host,
                &session_uri(session),
                StateAction::SessionActiveClientRemoved(SessionActiveClientRemovedAction {
                    client_id,
                }),
                None,
            );
        }
    }

    fn conn_ended(&self, host: &mut Host, conn: ConnId, _state: &mut (dyn Any + Send)) {
        if let Some(feed) = host.dialect_state::<Feed>() {
            feed.forget(conn);
        }
    }
}

/// Publishes what a session's projection produced, each on its channel. A confirmation an
/// AHP client dispatched carries that client's origin.
fn publish_all(host: &mut Host, session: &str, produced: Vec<Produced>) {
    for Produced { scope, action } in produced {
        // A turn starting or ending changes the chat's and the session's status.
        let status = match &action {
            StateAction::ChatTurnStarted(_) => Some(SessionStatus::InProgress),
            StateAction::ChatTurnComplete(_) | StateAction::ChatTurnCancelled(_) => {
                Some(SessionStatus::Idle)
            }
            StateAction::ChatError(_) => Some(SessionStatus::Error),
            _ => None,
        };
        let channel = match scope {
            Scope::Chat => chat_uri(session),
            Scope::Session => session_uri(session),
        };
        let origin = match &action {
            StateAction::ChatToolCallConfirmed(a) => host
                .session_state::<ChatProjection>(session)
                .and_then(|c| c.take_origin(&a.tool_call_id, CONFIRMED)),
            StateAction::ChatToolCallComplete(a) => host
                .session_state::<ChatProjection>(session)
                .and_then(|c| c.take_origin(&a.tool_call_id, COMPLETE)),
            StateAction::SessionConfigChanged(_) => host
                .session_state::<ChatProjection>(session)
                .and_then(|c| c.take_origin(session, CONFIG_CHANGED)),
            StateAction::ChatInputCompleted(a) => host
                .session_state::<ChatProjection>(session)
                .and_then(|c| c.take_origin(&a.request_id, INPUT_COMPLETED)),
            _ => None,
        };
        feed::publish(host, &channel, action, origin);
        if let Some(status) = status {
            status_changed(host, session, status.bits());
        }
    }
}

/// Announces the status of `session` and its chat: `session/chatUpdated` on the session
/// channel, `root/sessionSummaryChanged` to root subscribers.
pub(crate) fn status_changed(host: &mut Host, session: &str, status: u32) {
    // An extra chat's status is news in its session only.
    let parent = chats::parent_of(host, session);
    feed::publish(
        host,
        &session_uri(parent.as_deref().unwrap_or(session)),
        StateAction::SessionChatUpdated(SessionChatUpdatedAction {
            chat: chat_uri(session),
            changes: PartialChatSummary {
                status: Some(status),
                ..PartialChatSummary::default()
            },
        }),
        None,
    );
    if parent.is_some() {
        return;
    }
    let changes = PartialSessionSummary {
        status: Some(status),
        ..PartialSessionSummary::default()
    };
    feed::notify_subscribers(
        host,
        ROOT,
        "root/sessionSummaryChanged",
        &json!({"channel": ROOT, "session": session_uri(session), "changes": changes}),
    );
}

/// The `type` of `chat/toolCallConfirmed` (the key of its origin).
pub(crate) const CONFIRMED: &str = "chat/toolCallConfirmed";
/// The `type` of `chat/toolCallComplete` (the key of its origin).
pub(crate) const COMPLETE: &str = "chat/toolCallComplete";
/// The `type` of `session/configChanged` (the key of its origin, with the session id).
pub(crate) const CONFIG_CHANGED: &str = "session/configChanged";
/// The `type` of `chat/inputCompleted` (the key of its origin).
pub(crate) const INPUT_COMPLETED: &str = "chat/inputCompleted";

/// An elicitation outside a turn has no place in an AHP chat (input requests are parts of a
/// turn's response), so AHP clients never see it: when no client of another dialect can
/// answer it either, it is cancelled at once instead of waiting for an answer that cannot
/// come.
fn cancel_unshown_elicitation(host: &mut Host, session: &str, data: &Value) {
    let Some(request_id) = data.get("requestId").and_then(Value::as_str) else {
        return;
    };
    let in_turn = host
        .session_state_ref::<ChatProjection>(session)
        .is_some_and(|c| c.active_turn_id().is_some());
    if in_turn {
        return;
    }
    let Some(live) = host.session(session) else {
        return;
    };
    let mut ahp_handlers = 0;
    let mut other_handlers = 0;
    for (conn, attachment) in &live.attached {
        if !attachment.request_elicitation {
            continue;
        }
        if host.conn_state_ref::<ConnState>(*conn).is_some() {
            ahp_handlers += 1;
        } else {
            other_handlers += 1;
        }
    }
    if ahp_handlers > 0 && other_handlers == 0 {
        let request_id = request_id.to_owned();
        host.resolve_elicitation(session, &request_id, &json!({"action": "cancel"}));
    }
}

/// The `clientId` of the AHP client providing the tool a `tool.execution_start` (`data`)
/// calls, if an AHP client provides it.
fn tool_provider(host: &Host, session: &str, data: &Value) -> Option<String> {
    let name = data.get("toolName").and_then(Value::as_str)?;
    let (conn, _) = host.session(session)?.tool_provider(name)?;
    host.conn_state_ref::<ConnState>(conn)
        .map(|c| c.client_id.clone())
}

/// `root/sessionAdded` for `summary`, to the root's subscribers.
fn announce_added(host: &mut Host, summary: &ahp_types::state::SessionSummary) {
    let params = json!({"channel": ROOT, "summary": summary});
    feed::notify_subscribers(host, ROOT, "root/sessionAdded", &params);
}

/// `root/sessionRemoved` for session `id`, to the root's subscribers.
fn announce_removed(host: &mut Host, id: &str) {
    let params = json!({"channel": ROOT, "session": session_uri(id)});
    feed::notify_subscribers(host, ROOT, "root/sessionRemoved", &params);
}

/// Makes `session`'s projection live (built from its persisted events the first time);
/// `false` when no such session is loaded.
pub(crate) fn ensure_live(host: &mut Host, session: &str) -> bool {
    let Some(live) = host.session(session) else {
        return false;
    };
    if host
        .session_state_ref::<ChatProjection>(session)
        .is_some_and(|c| c.live)
    {
        return true;
    }
    let now = host.now();
    let events: Vec<(String, Value)> = live
        .events()
        .iter()
        .filter_map(|e| {
            let mut envelope = serde_json::from_slice::<Value>(&e.json).ok()?;
            let data = envelope
                .get_mut("data")
                .map(Value::take)
                .unwrap_or(Value::Null);
            Some((e.event_type.clone(), data))
        })
        .collect();
    let busy = host.session_busy(session);
    let Some(chat) = host.session_state::<ChatProjection>(session) else {
        return false;
    };
    chat.replay(
        events.iter().map(|(t, d)| (t.as_str(), d.clone(), now)),
        busy,
        now,
    );
    if let Some(feed) = host.dialect_state::<Feed>() {
        feed.note_live(&session_uri(session));
        feed.note_live(&chat_uri(session));
    }
    true
}

/// What an AHP connection declares when it attaches: it streams, provides `tools`, and,
/// when it `answers` (it is subscribed to the session's chat, where AHP shows them), answers
/// permission prompts (`chat/toolCallConfirmed`) and elicitations (`chat/inputCompleted`).
fn attachment(tools: Vec<ToolDecl>, answers: bool) -> Attachment {
    Attachment {
        streaming: true,
        include_sub_agent_streaming: true,
        request_permission: answers,
        request_elicitation: answers,
        tools,
        ..Attachment::default()
    }
}

/// Whether `conn` is attached to `session` as a client that answers prompts.
fn answers_prompts(host: &Host, conn: ConnId, session: &str) -> bool {
    host.session(session)
        .and_then(|s| s.attached.get(&conn))
        .is_some_and(|a| a.request_permission)
}

/// Attaches `conn` to `session` (once) as a client that streams; subscribing to the chat
/// (`chat`) makes it answer prompts too (it sees them there).
fn attach(host: &mut Host, conn: ConnId, session: &str, chat: bool) {
    let current = host
        .session(session)
        .and_then(|s| s.attached.get(&conn))
        .map(|a| (a.tools.clone(), a.request_permission));
    match current {
        None => host.attach(session, conn, attachment(Vec::new(), chat)),
        Some((tools, false)) if chat => host.attach(session, conn, attachment(tools, true)),
        Some(_) => {}
    }
}

/// `conn` no longer sees `session`'s chat (it unsubscribed from it but not from the
/// session): it stops answering prompts.
fn stop_answering(host: &mut Host, conn: ConnId, session: &str) {
    let tools = host
        .session(session)
        .and_then(|s| s.attached.get(&conn))
        .filter(|a| a.request_permission)
        .map(|a| a.tools.clone());
    if let Some(tools) = tools {
        host.attach(session, conn, attachment(tools, false));
    }
}

/// Attaches `conn` to `session` providing `tools` (replacing those it provided before);
/// whether it answers prompts does not change (it does when subscribed to the chat).
fn provide_tools(host: &mut Host, conn: ConnId, session: &str, tools: Vec<ToolDecl>) {
    let answers = answers_prompts(host, conn, session);
    host.attach(session, conn, attachment(tools, answers));
}

/// The origin of an action `conn` dispatched with `client_seq`.
fn origin(host: &Host, conn: ConnId, client_seq: i64) -> ActionOrigin {
    ActionOrigin {
        client_id: host
            .conn_state_ref::<ConnState>(conn)
            .map(|c| c.client_id.clone())
            .unwrap_or_default(),
        client_seq,
    }
}

/// Handles one message from an AHP connection.
pub(crate) fn handle_message(host: &mut Host, conn: ConnId, message: jsonrpc::Message<'_>) {
    match message {
        jsonrpc::Message::Request { id, method, params } => {
            let id = id.to_owned();
            if gateway::served_here(host, conn, &id) {
                return;
            }
            if !host.admit_request(conn, &id, "Invalid request: ") {
                return;
            }
            if gateway::gather(host, conn, &id, &method, params) {
                return;
            }
            let result = methods::dispatch(host, conn, &method, params);
            host.respond(conn, &id, result);
        }
        jsonrpc::Message::Notification { method, params } => {
            methods::notification(host, conn, &method, params);
        }
        // This dialect sends no requests to its clients: nothing to match.
        jsonrpc::Message::Response { .. } => {}
    }
}
