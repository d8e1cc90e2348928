//! `session/prompt`s of editors that a cluster gateway relays here, kept across a broken link
//! ([`crate::host::kept_requests`]): a relayed prompt whose connection ends is kept (its
//! turn's progress followed here, as its connection would), and so is the answer of every
//! relayed prompt; the gateway's re-attaching `session/resume` names, in its `_meta`, the
//! connection it replaces and the prompts its editor still waits for, and [`rebind`]
//! answers each on the new connection once.

use serde_json::Value;

use crate::host::cluster::kept_requests::{no_longer_known, KeptRequests};
use crate::host::{ConnId, Host};
use crate::jsonrpc::{ErrorObject, OwnedId};

use super::{ConnState, PromptWait};

/// The relayed prompts a session keeps.
type KeptPrompts = KeptRequests<PromptWait>;

/// Takes the relayed prompts (those of `session` only, when given) out of `c`, the state of
/// a connection that is ending, for [`park`].
pub(super) fn take_relayed(c: &mut ConnState, session: Option<&str>) -> Vec<PromptWait> {
    let (relayed, rest) = std::mem::take(&mut c.prompts)
        .into_iter()
        .partition(|p| p.relayed && session.is_none_or(|s| p.session == s));
    c.prompts = rest;
    relayed
}

/// `prompts`, relayed prompts of `conn`, which is ending, are kept for a re-attachment.
pub(super) fn park(host: &mut Host, conn: ConnId, prompts: Vec<PromptWait>) {
    let now = host.now();
    for p in prompts {
        if let Some(kept) = host.session_state::<KeptPrompts>(&p.session) {
            kept.park(now, conn, p.id.clone(), p);
        }
    }
}

/// The relayed prompt `prompt` of `conn` was answered `outcome`.
pub(super) fn answered(
    host: &mut Host,
    session: &str,
    conn: ConnId,
    prompt: &PromptWait,
    outcome: &Result<Value, ErrorObject>,
) {
    let now = host.now();
    if let Some(kept) = host.session_state::<KeptPrompts>(session) {
        kept.answered(now, conn, prompt.id.clone(), outcome.clone());
    }
}

/// A turn event of `session`: the kept prompts follow it as their connections would (a
/// prompt starts with its `user.message`, takes the turn's `session.error`, and is answered
/// at its `session.idle`).
pub(super) fn on_event(host: &mut Host, session: &str, event_type: &str, data: &Value) {
    if !matches!(
        event_type,
        "user.message" | "session.error" | "session.idle"
    ) {
        return;
    }
    let now = host.now();
    let Some(kept) = host.session_state_ref::<KeptPrompts>(session) else {
        return;
    };
    if !kept.any_waiting() {
        return;
    }
    let Some(kept) = host.session_state::<KeptPrompts>(session) else {
        return;
    };
    let field = |name: &str| data.get(name).and_then(Value::as_str).unwrap_or("");
    kept.end_waiting(now, |p| match event_type {
        "user.message" => {
            p.started |= p.message_id == field("messageId");
            None
        }
        "session.error" => {
            if p.started {
                p.error = Some(field("message").to_owned());
            }
            None
        }
        _ => p.started.then(|| p.outcome(data)),
    });
}

/// The gateway re-attached the editor of relayed connection `former` on `conn` (a
/// `session/resume` or `session/load` of `session`): each of `awaiting`, the ids of
/// `former`'s `session/prompt`s its editor still waits for, is answered once on `conn` — at
/// once when its turn ended, when the turn ends otherwise, or with an error when nothing of
/// it is kept.
pub(super) fn rebind(
    host: &mut Host,
    session: &str,
    conn: ConnId,
    former: ConnId,
    awaiting: &[OwnedId],
) {
    let now = host.now();
    let mut taken = Vec::new();
    for id in awaiting {
        // The former connection has not ended here yet (the link broke on the gateway's side).
        let live = host.conn_state::<ConnState>(former).and_then(|c| {
            let at = c
                .prompts
                .iter()
                .position(|p| p.session == session && p.id == *id)?;
            Some(c.prompts.remove(at))
        });
        let found = match live {
            Some(p) => Ok(p),
            None => match host.session_state::<KeptPrompts>(session) {
                Some(kept) => kept.take(now, former, id, "session/prompt"),
                None => Err(no_longer_known("session/prompt")),
            },
        };
        let (waiting, outcome) = match found {
            Ok(p) => (Some(p), None),
            Err(answer) => (None, Some(answer)),
        };
        if let (Some(p), Some(c)) = (waiting, host.conn_state::<ConnState>(conn)) {
            c.prompts.push(p);
        }
        taken.push((id.clone(), outcome));
    }
    for (id, outcome) in taken {
        host.answer_kept(conn, &id, outcome);
    }
}
