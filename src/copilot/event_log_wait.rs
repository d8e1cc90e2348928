//! Long-polling `session.eventLog.read`: a forward read at the tail of the log with
//! `waitMs > 0` (capped at [`MAX_WAIT_MS`]) is answered by the first event its filter admits
//! that the session emits before the deadline: persisted, or ephemeral unless
//! `includeEphemeral: false` (an ephemeral event delivered so is not replayable, as the
//! runtime documents). The answer's cursor is the log's tail at that moment. At the deadline
//! the read is answered as an ordinary read from its cursor (usually no events). The waiting
//! reads are kept with the session (in memory); deleting the session answers them with an
//! error.

use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::{ConnId, Host};
use crate::jsonrpc::OwnedId;
use crate::session::Event;
use crate::Timestamp;

use super::history::{self, Filter};
use super::method_table::{Call, Reply};
use super::session_state::session_id;
use super::surface::{decode, failed, known};

/// The longest a read waits (the runtime's cap).
pub(super) const MAX_WAIT_MS: u64 = 30_000;

/// A read waiting for an event.
#[derive(Debug)]
struct Waiting {
    conn: ConnId,
    id: OwnedId,
    /// The read's method (its failure names it).
    method: &'static str,
    params: Value,
    include_ephemeral: bool,
    timer: (Timestamp, u64),
}

/// The reads waiting on a session.
#[derive(Debug, Default)]
pub(super) struct Waiters(Vec<Waiting>);

/// `session.eventLog.read`; `None` when the read waits.
pub(super) fn read(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let (conn, id) = (call.conn, call.id);
    let p = match decode::<Value>(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let session = match session_id(&p).and_then(|s| known(host, call.method, &s).map(|()| s)) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    let answer = match history::read(host, &session, &p) {
        Ok(answer) => answer,
        Err(e) => return Some(Err(e)),
    };
    let wait_ms = p.get("waitMs").and_then(Value::as_u64).unwrap_or(0);
    let forward = p.get("direction").and_then(Value::as_str) != Some("backward");
    let empty = answer["events"].as_array().is_some_and(Vec::is_empty);
    if wait_ms == 0 || !forward || !empty || answer["cursorStatus"] != "ok" {
        return Some(Ok(answer));
    }
    let timer = host.timer_key(Duration::from_millis(wait_ms.min(MAX_WAIT_MS)));
    host.arm_dialect_timer(timer, super::ID, conn, id.clone());
    let include_ephemeral = p.get("includeEphemeral").and_then(Value::as_bool) != Some(false);
    if let Some(waiters) = host.session_state::<Waiters>(&session) {
        waiters.0.push(Waiting {
            conn,
            id: id.clone(),
            method: call.method,
            params: p,
            include_ephemeral,
            timer,
        });
    }
    None
}

/// An event of `session`: the waiting reads its filter admits are answered with it.
pub(super) fn event_emitted(host: &mut Host, session: &str, event: &Event) {
    if host
        .session_state_ref::<Waiters>(session)
        .is_none_or(|w| w.0.is_empty())
    {
        return;
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(&event.json) else {
        return;
    };
    super::stored_state::strip(&mut value);
    let Some(waiters) = host.session_state::<Waiters>(session) else {
        return;
    };
    let (done, kept): (Vec<Waiting>, Vec<Waiting>) =
        std::mem::take(&mut waiters.0).into_iter().partition(|w| {
            (w.include_ephemeral || !event.ephemeral)
                && Filter::of(&w.params).is_ok_and(|f| f.admits(&value))
        });
    waiters.0 = kept;
    if done.is_empty() {
        return;
    }
    let cursor = match host.session(session).and_then(|s| s.events().last()) {
        Some(e) => format!("after:{}", e.id),
        None => "start".to_owned(),
    };
    for w in done {
        host.cancel_timer(&w.timer);
        let answer = json!({"events": [value.clone()], "cursor": cursor, "hasMore": false,
                            "cursorStatus": "ok"});
        host.respond(w.conn, &w.id, Ok(answer));
    }
}

/// A waiting read's deadline: answered as an ordinary read from its cursor. Returns
/// `false` when no read of `conn` with `id` is waiting.
pub(super) fn timer_fired(host: &mut Host, conn: ConnId, id: &OwnedId) -> bool {
    let sessions: Vec<String> = host.sessions().map(|s| s.id.clone()).collect();
    for session in sessions {
        let Some(waiters) = host.session_state::<Waiters>(&session) else {
            continue;
        };
        let Some(i) = waiters.0.iter().position(|w| w.conn == conn && &w.id == id) else {
            continue;
        };
        let w = waiters.0.remove(i);
        let answer = history::read(host, &session, &w.params);
        host.respond(conn, id, answer);
        return true;
    }
    false
}

/// The session is being deleted: its waiting reads fail.
pub(super) fn session_deleting(host: &mut Host, session: &str) {
    let Some(waiters) = host.session_state::<Waiters>(session) else {
        return;
    };
    for w in std::mem::take(&mut waiters.0) {
        host.cancel_timer(&w.timer);
        host.respond(
            w.conn,
            &w.id,
            Err(failed(w.method, "the session was deleted")),
        );
    }
}
