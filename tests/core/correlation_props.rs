//! Property tests: any interleaving of send / respond / timeout / cancel / close gives every
//! outgoing request exactly one outcome, and every dropped response is counted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentwire::correlation::{InFlight, Outcome, PendingRequests};
use agentwire::jsonrpc::{ErrorObject, Id, OwnedId};
use agentwire::Timestamp;
use proptest::prelude::*;
use serde_json::value::RawValue;

#[derive(Clone, Debug)]
enum Op {
    /// Send a request with an optional timeout (ms).
    Send(Option<u16>),
    /// Answer the `k`-th issued request (mod count), as a result or an error; it may already be
    /// done (a late or duplicate answer). `float` writes the id as `N.0`.
    Respond { k: usize, error: bool, float: bool },
    /// Answer an id we never issued: a big number, or the right number as a string.
    RespondUnknown { k: usize, string: bool },
    /// Time jumps forward.
    Advance(u16),
    /// Cancel the `k`-th issued request.
    Cancel(usize),
    /// The connection closes.
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::option::of(1u16..500).prop_map(Op::Send),
        4 => (any::<usize>(), any::<bool>(), any::<bool>())
            .prop_map(|(k, error, float)| Op::Respond { k, error, float }),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(k, string)| Op::RespondUnknown { k, string }),
        2 => (0u16..300).prop_map(Op::Advance),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => Just(Op::Close),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Result,
    Error,
    Cancelled,
    TimedOut,
    Closed,
}

fn kind(o: &Outcome) -> Kind {
    match o {
        Outcome::Result(_) => Kind::Result,
        Outcome::Error(_) => Kind::Error,
        Outcome::Cancelled => Kind::Cancelled,
        Outcome::TimedOut => Kind::TimedOut,
        Outcome::Closed => Kind::Closed,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_request_gets_exactly_one_outcome(ops in proptest::collection::vec(op(), 0..80)) {
        let mut now = Timestamp::from_millis(1_000);
        let mut table: PendingRequests<u64> = PendingRequests::new();
        // Model: issued ids, pending ids with deadlines, outcomes seen per id.
        let mut issued: Vec<u64> = Vec::new();
        let mut model: BTreeMap<u64, Option<Timestamp>> = BTreeMap::new();
        let mut outcomes: BTreeMap<u64, Vec<Kind>> = BTreeMap::new();
        let mut expected_unknown = 0u64;

        for op in ops {
            match op {
                Op::Send(timeout) => {
                    let deadline = timeout.map(|ms| now.saturating_add(Duration::from_millis(ms.into())));
                    let n = issued.len() as u64;
                    let id = table.start(deadline, n);
                    prop_assert_eq!(id.as_u64(), Some(n), "fresh ids count up from 0");
                    issued.push(n);
                    model.insert(n, deadline);
                }
                Op::Respond { k, error, float } => {
                    if issued.is_empty() { continue; }
                    let n = issued[k % issued.len()];
                    let raw = if float { format!("{n}.0") } else { n.to_string() };
                    let id = Id::from_raw(&raw).unwrap();
                    let outcome = if error {
                        Outcome::Error(ErrorObject::internal("e"))
                    } else {
                        Outcome::Result(RawValue::from_string("1".into()).unwrap())
                    };
                    match table.resolve(&id, outcome) {
                        Some((user, outcome)) => {
                            prop_assert_eq!(user, n);
                            prop_assert!(model.remove(&n).is_some(), "resolved a request that was not pending");
                            outcomes.entry(n).or_default().push(kind(&outcome));
                        }
                        None => {
                            prop_assert!(!model.contains_key(&n), "a pending request was not matched");
                            expected_unknown += 1;
                        }
                    }
                }
                Op::RespondUnknown { k, string } => {
                    let raw = if string {
                        format!("\"{}\"", k % (issued.len() + 1))
                    } else {
                        (1_000_000 + (k % 1000)).to_string()
                    };
                    let id = Id::from_raw(&raw).unwrap();
                    prop_assert!(table.resolve(&id, Outcome::Cancelled).is_none());
                    expected_unknown += 1;
                }
                Op::Advance(ms) => {
                    now = now.saturating_add(Duration::from_millis(ms.into()));
                    let mut last = None;
                    for (id, user) in table.handle_timeout(now) {
                        let n = id.as_u64().unwrap();
                        prop_assert_eq!(n, user);
                        let deadline = model.remove(&n).flatten();
                        prop_assert!(deadline.is_some_and(|d| d <= now), "expired early or twice");
                        prop_assert!(last <= deadline, "expired in deadline order");
                        last = deadline;
                        outcomes.entry(n).or_default().push(Kind::TimedOut);
                    }
                    prop_assert!(model.values().all(|d| d.is_none_or(|d| d > now)), "an overdue request survived");
                }
                Op::Cancel(k) => {
                    if issued.is_empty() { continue; }
                    let n = issued[k % issued.len()];
                    match table.cancel(&OwnedId::from_u64(n)) {
                        Some(user) => {
                            prop_assert_eq!(user, n);
                            prop_assert!(model.remove(&n).is_some());
                            outcomes.entry(n).or_default().push(Kind::Cancelled);
                        }
                        None => prop_assert!(!model.contains_key(&n)),
                    }
                }
                Op::Close => {
                    for (id, user) in table.close_all() {
                        prop_assert_eq!(id.as_u64(), Some(user));
                        prop_assert!(model.remove(&user).is_some());
                        outcomes.entry(user).or_default().push(Kind::Closed);
                    }
                    prop_assert!(model.is_empty());
                }
            }
            prop_assert_eq!(table.len(), model.len());
            prop_assert_eq!(table.poll_timeout(), model.values().flatten().min().copied());
            prop_assert_eq!(table.unknown_responses(), expected_unknown);
        }
        // The connection ends: whatever is left is closed.
        for (id, user) in table.close_all() {
            prop_assert_eq!(id.as_u64(), Some(user));
            outcomes.entry(user).or_default().push(Kind::Closed);
        }
        prop_assert!(table.is_empty());
        prop_assert_eq!(table.poll_timeout(), None);
        for n in &issued {
            let seen = outcomes.get(n).map(Vec::len).unwrap_or(0);
            prop_assert_eq!(seen, 1, "request {} had outcomes {:?}", n, outcomes.get(n));
        }
        prop_assert_eq!(outcomes.len(), issued.len());
        prop_assert!(table.late_responses() <= table.unknown_responses());
    }

    #[test]
    fn every_incoming_request_is_answered_exactly_once(
        ops in proptest::collection::vec((0u8..4, 0u8..6, any::<bool>()), 0..100)
    ) {
        let mut in_flight = InFlight::new();
        let mut model: BTreeMap<OwnedId, bool> = BTreeMap::new();
        let mut begun = 0usize;
        let mut answered = 0usize;
        let mut answered_ids: BTreeSet<(OwnedId, usize)> = BTreeSet::new();
        for (action, which, string) in ops {
            let id = if string { OwnedId::from_string(&which.to_string()) } else { OwnedId::from_u64(which.into()) };
            match action {
                0 | 1 => {
                    let fresh = in_flight.begin(id.clone());
                    prop_assert_eq!(fresh, !model.contains_key(&id), "duplicate detection");
                    if fresh {
                        model.insert(id, false);
                        begun += 1;
                    }
                }
                2 => {
                    let first = in_flight.finish(&id);
                    prop_assert_eq!(first, model.remove(&id).is_some());
                    if first {
                        answered += 1;
                        prop_assert!(answered_ids.insert((id.clone(), begun)));
                    }
                    prop_assert!(!in_flight.finish(&id), "a second answer is refused");
                }
                _ => {
                    let known = in_flight.mark_cancelled(&id);
                    prop_assert_eq!(known, model.contains_key(&id));
                    if let Some(c) = model.get_mut(&id) { *c = true; }
                    prop_assert_eq!(in_flight.is_cancelled(&id), known, "cancelled stays in flight");
                }
            }
            prop_assert_eq!(in_flight.len(), model.len());
        }
        // Answer everything left: each exactly once.
        for id in model.keys() {
            prop_assert!(in_flight.finish(id));
            answered += 1;
        }
        prop_assert!(in_flight.is_empty());
        prop_assert_eq!(begun, answered);
    }
}
