//! `session.sendAndWait` callers that a cluster gateway relays here, kept across a broken
//! link.
//!
//! A client relayed here (a relay group member) may lose its link while its `sendAndWait`
//! waits for a turn. This host still owns the session and the turn goes on; the gateway
//! takes the client back over a new link with a `session.resume` that names the connection
//! it replaces ([`RELAY_FORMER_MEMBER`](crate::host::RELAY_FORMER_MEMBER)) and the callers
//! its client still waits for ([`RELAY_AWAITING`](crate::host::RELAY_AWAITING)). So a
//! relayed caller whose connection ends is kept instead of answered "detached", and the
//! outcome of every relayed caller's turn is kept too (its answer may have been lost with
//! the link), each for [`RELAYED_CALLER_KEPT_FOR`] ([`rebind`] answers them on the new
//! connection).

use serde_json::Value;

use crate::host::{ConnId, Host, RELAYED_CALLER_KEPT_FOR};
use crate::jsonrpc::{code, ErrorObject, OwnedId};
use crate::time::Timestamp;

use super::turns::Waiter;
use super::SessionState;

/// A relayed `sendAndWait` caller kept for a re-attachment.
#[derive(Debug)]
struct Kept {
    /// The relayed connection it came from.
    member: ConnId,
    /// Its request id.
    id: OwnedId,
    /// The `messageId` of its prompt.
    message_id: String,
    /// When its connection ended, or its turn did.
    since: Timestamp,
    /// Its answer, once its turn ended.
    outcome: Option<Result<Value, ErrorObject>>,
}

/// The relayed callers a session keeps (see the module docs).
#[derive(Debug, Default)]
pub(super) struct KeptCallers(Vec<Kept>);

impl KeptCallers {
    /// Forgets what was kept longer than [`RELAYED_CALLER_KEPT_FOR`] before `now`.
    fn expire(&mut self, now: Timestamp) {
        self.0
            .retain(|k| now.saturating_duration_since(k.since) < RELAYED_CALLER_KEPT_FOR);
    }

    /// `waiter`'s connection ended before its turn did: kept, waiting.
    pub(super) fn park(&mut self, now: Timestamp, waiter: Waiter) {
        self.expire(now);
        self.0.push(Kept {
            member: waiter.conn,
            id: waiter.id,
            message_id: waiter.message_id,
            since: now,
            outcome: None,
        });
    }

    /// `waiter`'s turn ended with `outcome` (also sent to its connection, which may be
    /// gone or lose it).
    pub(super) fn answered(
        &mut self,
        now: Timestamp,
        waiter: &Waiter,
        outcome: &Result<Value, ErrorObject>,
    ) {
        self.expire(now);
        self.0.push(Kept {
            member: waiter.conn,
            id: waiter.id.clone(),
            message_id: waiter.message_id.clone(),
            since: now,
            outcome: Some(outcome.clone()),
        });
    }

    /// Whether a kept caller still waits for its turn.
    pub(super) fn any_waiting(&self) -> bool {
        self.0.iter().any(|k| k.outcome.is_none())
    }

    /// A turn ended: each kept caller still waiting whose prompt's `messageId` `ends`
    /// accepts gets its `outcome`.
    pub(super) fn turn_ended(
        &mut self,
        now: Timestamp,
        ends: impl Fn(&str) -> bool,
        outcome: impl Fn(&str) -> Result<Value, ErrorObject>,
    ) {
        for kept in self.0.iter_mut().filter(|k| k.outcome.is_none()) {
            if ends(&kept.message_id) {
                kept.outcome = Some(outcome(&kept.message_id));
                kept.since = now;
            }
        }
    }

    /// Takes what is kept of `member`'s request `id`.
    fn take(&mut self, member: ConnId, id: &OwnedId) -> Option<Kept> {
        let at = self
            .0
            .iter()
            .position(|k| k.member == member && k.id == *id)?;
        Some(self.0.remove(at))
    }
}

/// The gateway re-attached the client of relayed connection `former` on `conn` (a
/// `session.resume` of `session`): each of `awaiting`, the ids of `former`'s `sendAndWait`s
/// its client still waits for, is answered once on `conn` — at once with its turn's outcome
/// when the turn ended, when the turn ends otherwise, or with an error when nothing of it
/// is kept (too long ago, or never a caller here).
pub(super) fn rebind(
    host: &mut Host,
    session: &str,
    conn: ConnId,
    former: ConnId,
    awaiting: &[OwnedId],
) {
    let now = host.now();
    let mut answers = Vec::new();
    let mut waiting = Vec::new();
    {
        let Some(state) = host.session_state::<SessionState>(session) else {
            return;
        };
        state.kept.expire(now);
        for id in awaiting {
            // Its connection has not ended here yet (the link broke on the gateway's side).
            if let Some(w) = state
                .waiters
                .iter_mut()
                .find(|w| w.conn == former && w.id == *id)
            {
                w.conn = conn;
                waiting.push(id.clone());
                continue;
            }
            match state.kept.take(former, id) {
                Some(Kept {
                    outcome: Some(outcome),
                    ..
                }) => answers.push((id.clone(), outcome)),
                Some(Kept { message_id, .. }) => {
                    state.waiters.push(Waiter {
                        conn,
                        id: id.clone(),
                        message_id,
                        relayed: true,
                    });
                    waiting.push(id.clone());
                }
                None => answers.push((
                    id.clone(),
                    Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        "Request session.sendAndWait failed with message: the owner no longer \
                         knows this request's turn (its link broke too long ago)",
                    )),
                )),
            }
        }
    }
    for id in waiting {
        // Answered on this connection when its turn ends.
        host.begin_request(conn, &id);
    }
    for (id, outcome) in answers {
        if host.begin_request(conn, &id) {
            host.respond(conn, &id, outcome);
        }
    }
}
