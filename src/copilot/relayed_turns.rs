//! `session.sendAndWait` callers that a cluster gateway relays here, kept across a broken
//! link ([`crate::host::kept_requests`]): a relayed caller whose connection ends is kept
//! (waiting, with its prompt's `messageId`) instead of answered "detached", and so is the
//! outcome of every relayed caller's turn; the gateway's re-attaching `session.resume`
//! names the connection it replaces and the callers its client still waits for, and
//! [`rebind`] answers each on the new connection once.

use crate::host::cluster::kept_requests::KeptRequests;
use crate::host::{ConnId, Host};
use crate::jsonrpc::OwnedId;

use super::turns::Waiter;
use super::SessionState;

/// The relayed callers a session keeps: waiting ones with their prompt's `messageId`.
pub(super) type KeptCallers = KeptRequests<String>;

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
    let mut taken = Vec::new();
    {
        let Some(state) = host.session_state::<SessionState>(session) else {
            return;
        };
        for id in awaiting {
            // Its connection has not ended here yet (the link broke on the gateway's side).
            if let Some(w) = state
                .waiters
                .iter_mut()
                .find(|w| w.conn == former && w.id == *id)
            {
                w.conn = conn;
                taken.push((id.clone(), None));
                continue;
            }
            let outcome = match state.kept.take(now, former, id, "session.sendAndWait") {
                Ok(message_id) => {
                    state.waiters.push(Waiter {
                        conn,
                        id: id.clone(),
                        message_id,
                        relayed: true,
                    });
                    None
                }
                Err(answer) => Some(answer),
            };
            taken.push((id.clone(), outcome));
        }
    }
    for (id, outcome) in taken {
        host.answer_kept(conn, &id, outcome);
    }
}
