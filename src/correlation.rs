//! Request/response correlation in both directions.
//!
//! * [`PendingRequests`] tracks **our** outgoing requests: it hands out fresh numeric ids and
//!   guarantees each request ends in exactly one [`Outcome`] (result, error, cancelled, timed
//!   out, or connection closed). Late, unknown and duplicate responses are counted and dropped.
//! * [`InFlight`] tracks the **peer's** incoming requests so each is answered exactly once,
//!   duplicate ids are detected, and cancellation (`$/cancelRequest`, `$/cancel_request`) is
//!   recorded; see [`parse_cancel`].
//!
//! Both are plain data structures: time comes in as [`Timestamp`] arguments, and every
//! collection is ordered (no hashing with random seeds), so behaviour is deterministic.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::jsonrpc::{ErrorObject, Id, OwnedId};
use crate::time::Timestamp;

/// The single way an outgoing request ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The peer answered with a result (raw JSON).
    Result(Box<RawValue>),
    /// The peer answered with an error object.
    Error(ErrorObject),
    /// We cancelled the request before an answer arrived.
    Cancelled,
    /// The request's deadline passed before an answer arrived.
    TimedOut,
    /// The connection closed before an answer arrived.
    Closed,
}

impl Outcome {
    /// Builds `Result` / `Error` from a parsed response's outcome.
    pub fn from_response(outcome: Result<&RawValue, ErrorObject>) -> Outcome {
        match outcome {
            Ok(result) => Outcome::Result(result.to_owned()),
            Err(error) => Outcome::Error(error),
        }
    }

    /// True for `Result`.
    pub fn is_result(&self) -> bool {
        matches!(self, Outcome::Result(_))
    }
}

impl PartialEq for Outcome {
    fn eq(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::Result(a), Outcome::Result(b)) => a.get() == b.get(),
            (Outcome::Error(a), Outcome::Error(b)) => a == b,
            (Outcome::Cancelled, Outcome::Cancelled)
            | (Outcome::TimedOut, Outcome::TimedOut)
            | (Outcome::Closed, Outcome::Closed) => true,
            _ => false,
        }
    }
}

struct Pending<T> {
    deadline: Option<Timestamp>,
    user: T,
}

/// Our outgoing requests awaiting an answer, each carrying caller data `T`.
///
/// Ids are fresh numbers counting up (from 0 unless [`PendingRequests::starting_at`]). Each
/// request leaves the table exactly once, through [`resolve`](Self::resolve),
/// [`cancel`](Self::cancel), [`handle_timeout`](Self::handle_timeout) or
/// [`close_all`](Self::close_all); whatever arrives for it afterwards is counted as a late
/// response and dropped.
///
/// Response ids are matched by numeric value: a response id `5` (or `5.0`) answers our request
/// `5`; the string `"5"` does not.
pub struct PendingRequests<T> {
    first_id: u64,
    next_id: u64,
    pending: BTreeMap<u64, Pending<T>>,
    deadlines: BTreeSet<(Timestamp, u64)>,
    unknown: u64,
    late: u64,
}

impl<T> Default for PendingRequests<T> {
    fn default() -> Self {
        PendingRequests::new()
    }
}

impl<T> std::fmt::Debug for PendingRequests<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingRequests")
            .field("next_id", &self.next_id)
            .field("pending", &self.pending.keys().collect::<Vec<_>>())
            .field("unknown", &self.unknown)
            .field("late", &self.late)
            .finish()
    }
}

impl<T> PendingRequests<T> {
    /// An empty table whose first id is 0.
    pub fn new() -> Self {
        PendingRequests::starting_at(0)
    }

    /// An empty table whose first id is `first_id`.
    pub fn starting_at(first_id: u64) -> Self {
        PendingRequests {
            first_id,
            next_id: first_id,
            pending: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            unknown: 0,
            late: 0,
        }
    }

    /// The id the next [`start`](Self::start) will use.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Registers a new request with an optional deadline and returns its fresh id.
    pub fn start(&mut self, deadline: Option<Timestamp>, user: T) -> OwnedId {
        let n = self.next_id;
        // 2^64 requests never happen in practice; saturate rather than reuse ids.
        self.next_id = self.next_id.saturating_add(1);
        self.insert(n, deadline, user);
        OwnedId::from_u64(n)
    }

    /// Takes a fresh id without registering a request yet, for a message that is encoded now but
    /// may only be sent later; register it with [`start_reserved`](Self::start_reserved).
    pub fn reserve(&mut self) -> OwnedId {
        let n = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        OwnedId::from_u64(n)
    }

    /// Registers a request under an id obtained from [`reserve`](Self::reserve). Returns false
    /// (and changes nothing) if this table never issued `id` or it is already pending.
    pub fn start_reserved(&mut self, id: &OwnedId, deadline: Option<Timestamp>, user: T) -> bool {
        match id.as_u64() {
            Some(n) if n >= self.first_id && n < self.next_id && !self.pending.contains_key(&n) => {
                self.insert(n, deadline, user);
                true
            }
            _ => false,
        }
    }

    fn insert(&mut self, n: u64, deadline: Option<Timestamp>, user: T) {
        if let Some(old) = self.pending.insert(n, Pending { deadline, user }) {
            // Only reachable once ids saturate: keep the deadline index consistent.
            if let Some(d) = old.deadline {
                self.deadlines.remove(&(d, n));
            }
        }
        if let Some(d) = deadline {
            self.deadlines.insert((d, n));
        }
    }

    fn take(&mut self, n: u64) -> Option<T> {
        let entry = self.pending.remove(&n)?;
        if let Some(d) = entry.deadline {
            self.deadlines.remove(&(d, n));
        }
        Some(entry.user)
    }

    fn count_dropped(&mut self, n: Option<u64>) {
        self.unknown += 1;
        if n.is_some_and(|n| n >= self.first_id && n < self.next_id) {
            self.late += 1;
        }
    }

    /// Resolves the request a response with id `id` answers. Returns the caller data together
    /// with `outcome`, or `None` (counted in [`unknown_responses`](Self::unknown_responses)) if
    /// no such request is pending: an unknown id, a `null` id, or a late or duplicate answer.
    pub fn resolve(&mut self, id: &Id<'_>, outcome: Outcome) -> Option<(T, Outcome)> {
        let n = id.as_u64();
        match n.and_then(|n| self.take(n)) {
            Some(user) => Some((user, outcome)),
            None => {
                self.count_dropped(n);
                None
            }
        }
    }

    /// Cancels a pending request: it leaves the table (its outcome is [`Outcome::Cancelled`])
    /// and its caller data is returned. `None` if it is not pending.
    pub fn cancel(&mut self, id: &OwnedId) -> Option<T> {
        self.take(id.as_u64()?)
    }

    /// The earliest deadline of any pending request.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Removes every request whose deadline is at or before `now` (their outcome is
    /// [`Outcome::TimedOut`]), in deadline order.
    pub fn handle_timeout(&mut self, now: Timestamp) -> Vec<(OwnedId, T)> {
        let mut expired = Vec::new();
        while let Some(&(deadline, n)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(entry) = self.pending.remove(&n) {
                expired.push((OwnedId::from_u64(n), entry.user));
            }
        }
        expired
    }

    /// Removes every pending request (their outcome is [`Outcome::Closed`]), in id order.
    pub fn close_all(&mut self) -> Vec<(OwnedId, T)> {
        self.deadlines.clear();
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(n, entry)| (OwnedId::from_u64(n), entry.user))
            .collect()
    }

    /// Responses dropped because they matched no pending request (unknown, late or duplicate).
    pub fn unknown_responses(&self) -> u64 {
        self.unknown
    }

    /// The subset of [`unknown_responses`](Self::unknown_responses) whose id is one we issued
    /// earlier (a late or duplicate answer, e.g. after a timeout or cancel).
    pub fn late_responses(&self) -> u64 {
        self.late
    }

    /// Caller data of a pending request.
    pub fn get(&self, id: &OwnedId) -> Option<&T> {
        self.pending.get(&id.as_u64()?).map(|p| &p.user)
    }

    /// True if `id` is pending.
    pub fn contains(&self, id: &OwnedId) -> bool {
        self.get(id).is_some()
    }

    /// Number of pending requests.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True if nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// The peer's requests we have not answered yet.
///
/// [`begin`](Self::begin) when a request arrives, [`finish`](Self::finish) when answering it:
/// `finish` returns true exactly once per request, so a caller that only writes a response when
/// it returns true can never answer twice. Keyed by the id's raw text.
#[derive(Clone, Debug, Default)]
pub struct InFlight {
    /// id → cancellation requested.
    requests: BTreeMap<OwnedId, bool>,
}

impl InFlight {
    /// An empty set.
    pub fn new() -> Self {
        InFlight::default()
    }

    /// Records an incoming request. Returns false (and changes nothing) if a request with the same
    /// id is still in flight: the peer reused an id.
    pub fn begin(&mut self, id: OwnedId) -> bool {
        match self.requests.entry(id) {
            std::collections::btree_map::Entry::Occupied(_) => false,
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(false);
                true
            }
        }
    }

    /// Marks request `id` answered. True exactly once per [`begin`](Self::begin); false if it is
    /// not in flight (never begun, or already answered).
    pub fn finish(&mut self, id: &OwnedId) -> bool {
        self.requests.remove(id).is_some()
    }

    /// Records that the peer asked to cancel `id`. True if `id` is in flight (the application
    /// should be told, and must still answer it once, typically with
    /// [`REQUEST_CANCELLED`](crate::jsonrpc::code::REQUEST_CANCELLED)).
    pub fn mark_cancelled(&mut self, id: &OwnedId) -> bool {
        match self.requests.get_mut(id) {
            Some(cancelled) => {
                *cancelled = true;
                true
            }
            None => false,
        }
    }

    /// True if `id` is in flight and the peer asked to cancel it.
    pub fn is_cancelled(&self, id: &OwnedId) -> bool {
        self.requests.get(id).copied().unwrap_or(false)
    }

    /// True if `id` is in flight.
    pub fn contains(&self, id: &OwnedId) -> bool {
        self.requests.contains_key(id)
    }

    /// Number of requests in flight.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// True if no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Forgets every request (e.g. when the connection closes), returning their ids in order.
    pub fn clear(&mut self) -> Vec<OwnedId> {
        std::mem::take(&mut self.requests).into_keys().collect()
    }
}

/// The LSP / vscode-jsonrpc cancellation notification method.
pub const CANCEL_METHOD_LSP: &str = "$/cancelRequest";
/// The ACP cancellation notification method.
pub const CANCEL_METHOD_ACP: &str = "$/cancel_request";

/// Params of both cancellation notifications: `{"id": <id of the request to cancel>}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelParams {
    /// The id of the request to cancel.
    pub id: OwnedId,
}

/// If `method` is `$/cancelRequest` (LSP) or `$/cancel_request` (ACP) and `params` is
/// `{"id": <number or string>}`, the id of the request to cancel.
pub fn parse_cancel(method: &str, params: Option<&RawValue>) -> Option<OwnedId> {
    if method != CANCEL_METHOD_LSP && method != CANCEL_METHOD_ACP {
        return None;
    }
    let params = params?.get();
    if !params.starts_with('{') {
        return None;
    }
    let params: CancelParams = serde_json::from_str(params).ok()?;
    (!params.id.is_null()).then_some(params.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(raw: &str) -> Id<'_> {
        Id::from_raw(raw).unwrap()
    }

    fn ok(raw: &str) -> Outcome {
        Outcome::Result(RawValue::from_string(raw.to_string()).unwrap())
    }

    #[test]
    fn ids_count_up_and_match_numerically() {
        let mut p = PendingRequests::new();
        let a = p.start(None, "a");
        let b = p.start(None, "b");
        assert_eq!((a.as_raw(), b.as_raw()), ("0", "1"));
        assert!(
            p.resolve(&id("\"1\""), ok("1")).is_none(),
            "a string id is a different id"
        );
        let (user, outcome) = p.resolve(&id("1.0"), ok("2")).unwrap();
        assert_eq!((user, outcome), ("b", ok("2")));
        assert!(p.resolve(&id("1"), ok("3")).is_none(), "duplicate");
        assert!(p.resolve(&id("99"), ok("3")).is_none(), "never issued");
        assert!(p.resolve(&id("null"), ok("3")).is_none());
        assert_eq!(p.unknown_responses(), 4);
        assert_eq!(p.late_responses(), 1);
        assert_eq!(p.len(), 1);
        assert_eq!(p.close_all(), vec![(a, "a")]);
        assert!(p.is_empty());
    }

    #[test]
    fn deadlines_expire_in_order() {
        let t = Timestamp::from_millis;
        let mut p = PendingRequests::starting_at(1);
        let a = p.start(Some(t(30)), 'a');
        let b = p.start(Some(t(10)), 'b');
        let _c = p.start(None, 'c');
        let d = p.start(Some(t(20)), 'd');
        assert_eq!(a.as_raw(), "1");
        assert_eq!(p.poll_timeout(), Some(t(10)));
        assert!(p.handle_timeout(t(9)).is_empty());
        assert_eq!(p.handle_timeout(t(20)), vec![(b, 'b'), (d.clone(), 'd')]);
        assert_eq!(p.poll_timeout(), Some(t(30)));
        assert_eq!(p.cancel(&a), Some('a'));
        assert_eq!(p.poll_timeout(), None, "cancel removes the deadline");
        assert!(
            p.resolve(&d.as_id(), Outcome::Cancelled).is_none(),
            "late after timeout"
        );
        assert_eq!(p.late_responses(), 1);
    }

    #[test]
    fn reserved_ids_register_once() {
        let mut p = PendingRequests::starting_at(10);
        let r = p.reserve();
        let s = p.start(None, 's');
        assert_eq!((r.as_raw(), s.as_raw()), ("10", "11"));
        assert!(
            p.resolve(&r.as_id(), Outcome::Closed).is_none(),
            "not registered yet"
        );
        assert!(p.start_reserved(&r, None, 'r'));
        assert!(!p.start_reserved(&r, None, 'x'), "already pending");
        assert!(
            !p.start_reserved(&OwnedId::from_u64(12), None, 'x'),
            "never issued"
        );
        assert!(
            !p.start_reserved(&OwnedId::from_u64(9), None, 'x'),
            "never issued"
        );
        assert!(!p.start_reserved(&OwnedId::from_string("10"), None, 'x'));
        assert_eq!(
            p.resolve(&r.as_id(), Outcome::Closed),
            Some(('r', Outcome::Closed))
        );
    }

    #[test]
    fn in_flight_answers_once() {
        let mut f = InFlight::new();
        let a = OwnedId::from_string("a");
        assert!(f.begin(a.clone()));
        assert!(!f.begin(a.clone()), "duplicate id in flight");
        assert!(f.mark_cancelled(&a));
        assert!(f.is_cancelled(&a));
        assert!(f.finish(&a));
        assert!(!f.finish(&a));
        assert!(!f.mark_cancelled(&a));
        assert!(f.begin(a.clone()), "an id may be reused once answered");
        assert_eq!(f.clear(), vec![a]);
    }

    #[test]
    fn cancel_notifications() {
        let p = |s: &str| -> Box<RawValue> { RawValue::from_string(s.to_string()).unwrap() };
        let got = parse_cancel("$/cancelRequest", Some(&p(r#"{"id":5}"#)));
        assert_eq!(got, Some(OwnedId::from_u64(5)));
        let got = parse_cancel("$/cancel_request", Some(&p(r#"{"id":"x","extra":1}"#)));
        assert_eq!(got, Some(OwnedId::from_string("x")));
        assert_eq!(
            parse_cancel("$/cancelRequest", Some(&p(r#"{"id":null}"#))),
            None
        );
        assert_eq!(
            parse_cancel("$/cancelRequest", Some(&p(r#"{"id":[1]}"#))),
            None
        );
        assert_eq!(parse_cancel("$/cancelRequest", Some(&p(r#"[5]"#))), None);
        assert_eq!(parse_cancel("$/cancelRequest", None), None);
        assert_eq!(parse_cancel("cancel", Some(&p(r#"{"id":5}"#))), None);
    }
}
