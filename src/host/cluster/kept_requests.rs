//! Requests of relayed connections kept across a broken link, whatever the dialect.
//!
//! A client a cluster gateway relays here (a relay group member) may lose its link while a
//! request that ends with a turn waits (a Copilot SDK `session.sendAndWait`, an ACP
//! `session/prompt`). This host still owns the session and the turn goes on; the gateway takes
//! the client back over a new link with a re-attachment naming the connection it replaces
//! ([`RELAY_FORMER_MEMBER`]) and the requests its client still waits for
//! ([`RELAY_AWAITING`]). So a dialect keeps such a request when its connection ends, and the
//! outcome of every such request (its answer may have been lost with the link), each for
//! [`RELAYED_CALLER_KEPT_FOR`], in a [`KeptRequests`] per session; at the re-attachment it
//! takes them over for the new connection ([`Host::answer_kept`]).

use serde_json::Value;

use crate::host::{ConnId, Host, RELAYED_CALLER_KEPT_FOR};
#[cfg(doc)]
use crate::host::{RELAY_AWAITING, RELAY_FORMER_MEMBER};
use crate::jsonrpc::{code, ErrorObject, OwnedId};
use crate::time::Timestamp;

/// What is kept of one request: still waiting (with what the dialect needs to answer it), or
/// its answer.
#[derive(Debug)]
enum Kept<W> {
    /// Its turn has not ended.
    Waiting(W),
    /// Its answer.
    Answered(Result<Value, ErrorObject>),
}

/// One kept request.
#[derive(Debug)]
struct Entry<W> {
    /// The relayed connection it came from.
    member: ConnId,
    /// Its request id.
    id: OwnedId,
    /// When its connection ended, or its answer was made.
    since: Timestamp,
    state: Kept<W>,
}

/// The requests of relayed connections a session keeps (see the module docs).
#[derive(Debug)]
pub(crate) struct KeptRequests<W>(Vec<Entry<W>>);

impl<W> Default for KeptRequests<W> {
    fn default() -> Self {
        KeptRequests(Vec::new())
    }
}

impl<W> KeptRequests<W> {
    /// Forgets what was kept longer than [`RELAYED_CALLER_KEPT_FOR`] before `now`.
    fn expire(&mut self, now: Timestamp) {
        self.0
            .retain(|e| now.saturating_duration_since(e.since) < RELAYED_CALLER_KEPT_FOR);
    }

    /// Request `id` of `member`, whose connection ended, still waits for its turn.
    pub(crate) fn park(&mut self, now: Timestamp, member: ConnId, id: OwnedId, waiting: W) {
        self.expire(now);
        self.0.push(Entry {
            member,
            id,
            since: now,
            state: Kept::Waiting(waiting),
        });
    }

    /// Request `id` of `member` was answered `outcome` (the answer may be lost with the link).
    pub(crate) fn answered(
        &mut self,
        now: Timestamp,
        member: ConnId,
        id: OwnedId,
        outcome: Result<Value, ErrorObject>,
    ) {
        self.expire(now);
        self.0.push(Entry {
            member,
            id,
            since: now,
            state: Kept::Answered(outcome),
        });
    }

    /// Whether a kept request still waits for its turn.
    pub(crate) fn any_waiting(&self) -> bool {
        self.0.iter().any(|e| matches!(e.state, Kept::Waiting(_)))
    }

    /// Offers every waiting request to `end`, which answers those whose turn ended.
    pub(crate) fn end_waiting(
        &mut self,
        now: Timestamp,
        mut end: impl FnMut(&mut W) -> Option<Result<Value, ErrorObject>>,
    ) {
        for entry in &mut self.0 {
            if let Kept::Waiting(waiting) = &mut entry.state {
                if let Some(outcome) = end(waiting) {
                    entry.state = Kept::Answered(outcome);
                    entry.since = now;
                }
            }
        }
    }

    /// Takes what is kept of `member`'s request `id` of `method` for a re-attachment at
    /// `now`: `Ok` with what it waits with when its turn has not ended, else `Err` with its
    /// answer ([`no_longer_known`] when nothing is kept, or it expired).
    pub(crate) fn take(
        &mut self,
        now: Timestamp,
        member: ConnId,
        id: &OwnedId,
        method: &str,
    ) -> Result<W, Result<Value, ErrorObject>> {
        self.expire(now);
        let at = self
            .0
            .iter()
            .position(|e| e.member == member && e.id == *id);
        match at.map(|at| self.0.remove(at).state) {
            Some(Kept::Waiting(waiting)) => Ok(waiting),
            Some(Kept::Answered(outcome)) => Err(outcome),
            None => Err(no_longer_known(method)),
        }
    }
}

impl Host {
    /// A re-attachment of a relayed client took over request `id` of the connection it
    /// replaces on `conn`: it is in flight on `conn` from now on, and, when `outcome` is set
    /// (its turn ended, or nothing was kept of it: see [`KeptRequests::take`]), answered
    /// there now.
    pub(crate) fn answer_kept(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        outcome: Option<Result<Value, ErrorObject>>,
    ) {
        if !self.begin_request(conn, id) {
            return;
        }
        if let Some(outcome) = outcome {
            self.respond(conn, id, outcome);
        }
    }
}

/// The answer to a request a re-attachment names that nothing is kept of (its connection or
/// its turn ended too long ago, or it never was a relayed request here): `method` failed.
pub(crate) fn no_longer_known(method: &str) -> Result<Value, ErrorObject> {
    Err(ErrorObject::new(
        code::INTERNAL_ERROR,
        format!(
            "Request {method} failed with message: the owner no longer knows this request's \
             turn (its link broke too long ago)"
        ),
    ))
}
