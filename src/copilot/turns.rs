//! What the Copilot SDK dialect writes about sessions: the `session.event` envelope, the
//! `session.lifecycle` notifications and the answers to `session.sendAndWait`.

use serde_json::Value;

use crate::host::{ConnId, Host};
use crate::jsonrpc::{code, ErrorObject, OwnedId};
use crate::session::{push_json_str, Event};

use super::{SessionState, ID};

/// The `session.event` notification carrying `event` (built once per event, shared by every
/// Copilot SDK connection that receives it).
pub(super) fn event_body(session_id: &str, event: &Event) -> Vec<u8> {
    let json = super::stored_state::wire_json(event);
    let mut body = Vec::with_capacity(json.len() + 96);
    body.extend_from_slice(br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"#);
    push_json_str(&mut body, session_id);
    body.extend_from_slice(br#","event":"#);
    body.extend_from_slice(&json);
    body.extend_from_slice(b"}}");
    body
}

/// Sends a `session.lifecycle` notification of `kind` to every Copilot SDK connection.
///
/// `session.updated` says "this session's metadata is now this", so it is coalesced per
/// connection ([`Host::broadcast_latest`]): a connection that has not yet been written the
/// previous one for the session gets that one, at its place, with the newest metadata, and
/// no second one. Every other kind (created, deleted, foreground, background) is queued
/// after the updates before it and before the updates after it.
pub(super) fn lifecycle(host: &mut Host, kind: &str, session_id: &str) {
    let mut body = Vec::with_capacity(160);
    body.extend_from_slice(br#"{"jsonrpc":"2.0","method":"session.lifecycle","params":{"type":"#);
    push_json_str(&mut body, kind);
    body.extend_from_slice(br#","sessionId":"#);
    push_json_str(&mut body, session_id);
    if kind != "session.deleted" {
        if let Some(s) = host.session(session_id) {
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
    if kind == "session.updated" {
        host.broadcast_latest(ID, session_id, body);
    } else {
        host.end_latest(ID, session_id);
        host.broadcast(ID, body);
    }
}

/// `session.sendAndWait`: `conn`'s request `id` is answered when the turn of `message_id`
/// ends.
pub(super) fn wait_for_turn(
    host: &mut Host,
    session: &str,
    conn: ConnId,
    id: &OwnedId,
    message_id: String,
) {
    let relayed = host.is_relay_member(conn);
    if let Some(state) = host.session_state::<SessionState>(session) {
        state.waiters.push(Waiter {
            conn,
            id: id.clone(),
            message_id,
            relayed,
        });
    }
}

/// A `session.sendAndWait` caller waiting for its turn to end.
#[derive(Debug)]
pub(super) struct Waiter {
    /// Its connection.
    pub(super) conn: ConnId,
    /// Its request id.
    pub(super) id: OwnedId,
    /// The `messageId` of its prompt.
    pub(super) message_id: String,
    /// Its connection is a client a cluster gateway relays here: it is kept across a broken
    /// link ([`super::relayed_turns`]).
    pub(super) relayed: bool,
}

/// Follows the session's turns: the running turn's prompt (`user.message`), its last reply
/// (`assistant.message`), and its end (`session.idle` / `session.error`), which answers the
/// `sendAndWait` callers.
pub(super) fn event_emitted(host: &mut Host, session: &str, event: &Event, data: &Value) {
    match event.event_type.as_str() {
        "assistant.message" => {
            if let Some(state) = host.session_state::<SessionState>(session) {
                state.last_assistant = Some(event.clone());
            }
        }
        "user.message" => {
            if let Some(state) = host.session_state::<SessionState>(session) {
                // A new turn: its sendAndWait caller gets this turn's last reply.
                state.current_turn = data
                    .get("messageId")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                state.last_assistant = None;
            }
        }
        "session.idle" => {
            finish_waiters(host, session, false, data);
            super::tasks::session_idle(host, session);
        }
        "session.error" => finish_waiters(host, session, true, data),
        _ => {}
    }
}

/// Answers `session.sendAndWait` callers when the turn ends.
fn finish_waiters(host: &mut Host, session_id: &str, is_error: bool, data: &Value) {
    let now = host.now();
    let Some(state) = host.session_state::<SessionState>(session_id) else {
        return;
    };
    if state.waiters.is_empty() && !state.kept.any_waiting() {
        return;
    }
    // Only the caller whose prompt this turn answered is done; others wait for theirs.
    // An abort also drops the queued prompts, so then every caller is done (aborted).
    let turn = state.current_turn.take();
    let aborted_all = data.get("aborted").and_then(Value::as_bool) == Some(true);
    let ends = |message_id: &str| aborted_all || Some(message_id) == turn.as_deref();
    let (waiters, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut state.waiters)
        .into_iter()
        .partition(|w| ends(&w.message_id));
    state.waiters = rest;
    let last = state.last_assistant.take();
    let outcome = |message_id: &str| {
        if is_error {
            let message = data
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("session error")
                .to_owned();
            return Err(ErrorObject::new(code::INTERNAL_ERROR, message));
        }
        let own_turn = Some(message_id) == turn.as_deref();
        let mut result = serde_json::Map::new();
        result.insert("messageId".into(), Value::String(message_id.to_owned()));
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
    state.kept.end_waiting(now, |message_id| {
        ends(message_id).then(|| outcome(message_id))
    });
    let mut answers = Vec::with_capacity(waiters.len());
    for waiter in waiters {
        let result = outcome(&waiter.message_id);
        if waiter.relayed {
            let (conn, id) = (waiter.conn, waiter.id.clone());
            state.kept.answered(now, conn, id, result.clone());
        }
        answers.push((waiter.conn, waiter.id, result));
    }
    for (conn, id, result) in answers {
        host.respond(conn, &id, result);
    }
}

/// `conn` left the session: its `sendAndWait` callers are answered with an error (every
/// request gets its one response), except those of a relayed connection that ended, which
/// are kept for the gateway's re-attachment ([`super::relayed_turns`]).
pub(super) fn conn_detached(host: &mut Host, session: &str, conn: ConnId) {
    let ending = host.is_conn_ending(conn);
    let now = host.now();
    let Some(state) = host.session_state::<SessionState>(session) else {
        return;
    };
    let (departed, staying): (Vec<_>, Vec<_>) = std::mem::take(&mut state.waiters)
        .into_iter()
        .partition(|w| w.conn == conn);
    state.waiters = staying;
    let mut detached = Vec::new();
    for waiter in departed {
        if waiter.relayed && ending {
            state
                .kept
                .park(now, waiter.conn, waiter.id, waiter.message_id);
        } else {
            detached.push(waiter);
        }
    }
    for waiter in detached {
        host.respond(
            waiter.conn,
            &waiter.id,
            Err(ErrorObject::new(
                code::INTERNAL_ERROR,
                "Request session.sendAndWait failed with message: the caller detached from the session before the turn ended",
            )),
        );
    }
}

/// The session is being deleted: its `sendAndWait` callers are answered with an error.
pub(super) fn session_deleting(host: &mut Host, session: &str) {
    let Some(state) = host.session_state::<SessionState>(session) else {
        return;
    };
    let waiters = std::mem::take(&mut state.waiters);
    state.kept = Default::default();
    for Waiter { conn, id, .. } in waiters {
        host.respond(
            conn,
            &id,
            Err(ErrorObject::new(
                code::INTERNAL_ERROR,
                "Request session.sendAndWait failed with message: the session was deleted",
            )),
        );
    }
}
