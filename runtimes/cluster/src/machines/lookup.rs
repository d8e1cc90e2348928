//! Finding a session this node has not loaded, with no I/O: its log's last message is read;
//! a session in the log is claimed when its owner is gone (or the log was written by an
//! earlier incarnation of this node). An owner whose lease is alive but that does not answer
//! on its link subject (killed, its lease not expired yet) is waited for, up to two lease
//! TTLs and a second, claiming again every [`CLAIM_AGAIN`]; one that answers owns it.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::claim::{Claim, ClaimOutcome, ClaimStep, EngineCall};
use crate::call::{Call, Reply};
use crate::record::NodeIdentity;
use crate::writer::SessionWriter;

/// How long a lookup waits before claiming again from an owner that does not answer.
pub const CLAIM_AGAIN: Duration = Duration::from_millis(250);

/// How a lookup ended.
#[derive(Debug)]
pub enum LookupOutcome {
    /// The session is not in the log.
    NotFound,
    /// Whether the session can be served here could not be told (the log could not be read),
    /// or it is in the log and this node cannot claim it: why. The requests waiting for it
    /// fail (a `session.create` must not create a session the log may hold).
    Failed(String),
    /// A live node that answers owns it: relay this node's clients of it there.
    Owned(NodeIdentity),
    /// This node claimed it: restore it from `events`, then write with `writer`.
    Claimed {
        /// The fenced writer.
        writer: SessionWriter,
        /// The payloads of the session's events, in order.
        events: Vec<Bytes>,
    },
}

/// What a lookup wants next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupAction {
    /// Perform this call: [`Lookup::handle_reply`].
    Call(EngineCall),
    /// Whether this node answers on its link subject: [`Lookup::handle_probe`].
    Probe(NodeIdentity),
    /// Nothing until then: [`Lookup::handle_timeout`].
    WaitUntil(Instant),
    /// The lookup ended: [`Lookup::take_outcome`].
    Done,
}

#[derive(Debug)]
enum Step {
    /// Reading the log's last message.
    Reading(EngineCall),
    Claiming(Box<Claim>, EngineCall),
    Probing(NodeIdentity),
    Waiting(Instant),
    Done(Option<LookupOutcome>),
}

/// One lookup of a session.
#[derive(Debug)]
pub struct Lookup {
    me: NodeIdentity,
    subject: String,
    may_claim: bool,
    lease_ttl: Duration,
    /// Until when an owner that does not answer is waited for.
    deadline: Option<Instant>,
    step: Step,
}

impl Lookup {
    /// Looks up the session logged on `subject` for node `me`; `may_claim`: this node's lease
    /// is trusted (otherwise a session in the log is not served here).
    pub fn new(me: NodeIdentity, subject: String, lease_ttl: Duration, may_claim: bool) -> Self {
        let read = EngineCall {
            call: Call::LastMessage {
                subject: subject.clone(),
            },
            backoff: 0,
        };
        Lookup {
            me,
            subject,
            may_claim,
            lease_ttl,
            deadline: None,
            step: Step::Reading(read),
        }
    }

    /// What the lookup wants now.
    pub fn poll(&self) -> LookupAction {
        match &self.step {
            Step::Reading(call) | Step::Claiming(_, call) => LookupAction::Call(call.clone()),
            Step::Probing(owner) => LookupAction::Probe(owner.clone()),
            Step::Waiting(until) => LookupAction::WaitUntil(*until),
            Step::Done(_) => LookupAction::Done,
        }
    }

    /// How the lookup ended, once [`LookupAction::Done`].
    pub fn take_outcome(&mut self) -> Option<LookupOutcome> {
        match &mut self.step {
            Step::Done(outcome) => outcome.take(),
            _ => None,
        }
    }

    /// The reply to [`LookupAction::Call`] at `now`; `next_counter` gives claim counters.
    pub fn handle_reply(
        &mut self,
        now: Instant,
        reply: Reply,
        mut next_counter: impl FnMut() -> u64,
    ) {
        match std::mem::replace(&mut self.step, Step::Done(None)) {
            Step::Reading(_) => match reply {
                Reply::Message(Ok(Some(_))) if self.may_claim => {
                    self.deadline = Some(now + self.lease_ttl * 2 + Duration::from_secs(1));
                    self.claim(next_counter());
                }
                Reply::Message(Ok(Some(_))) => self.done(LookupOutcome::Failed(
                    "it is in the cluster log, and this node's cluster lease is not trusted"
                        .to_owned(),
                )),
                Reply::Message(Ok(None)) => self.done(LookupOutcome::NotFound),
                Reply::Message(Err(e)) => self.done(LookupOutcome::Failed(format!(
                    "the cluster log cannot be read: {e}"
                ))),
                _ => self.done(LookupOutcome::Failed(
                    "the engine answered the log read with something else".to_owned(),
                )),
            },
            Step::Claiming(mut claim, _) => match claim.handle_reply(reply, next_counter) {
                ClaimStep::Call(call) => self.step = Step::Claiming(claim, call),
                ClaimStep::Done(ClaimOutcome::Claimed { writer, events }) => {
                    self.done(LookupOutcome::Claimed { writer, events })
                }
                ClaimStep::Done(ClaimOutcome::Owned(owner)) => self.step = Step::Probing(owner),
                ClaimStep::Done(ClaimOutcome::Failed(why)) => self.done(LookupOutcome::Failed(
                    format!("it cannot be claimed: {why}"),
                )),
            },
            step => self.step = step,
        }
    }

    /// The answer to [`LookupAction::Probe`] at `now`.
    pub fn handle_probe(&mut self, now: Instant, answers: bool) {
        let Step::Probing(owner) = &self.step else {
            return;
        };
        if answers || self.deadline.is_some_and(|deadline| now > deadline) {
            let owner = owner.clone();
            self.done(LookupOutcome::Owned(owner));
        } else {
            self.step = Step::Waiting(now + CLAIM_AGAIN);
        }
    }

    /// Time passed; `next_counter` gives a claim counter when the lookup claims again.
    pub fn handle_timeout(&mut self, now: Instant, next_counter: impl FnOnce() -> u64) {
        if matches!(self.step, Step::Waiting(until) if until <= now) {
            self.claim(next_counter());
        }
    }

    fn claim(&mut self, counter: u64) {
        let (claim, call) = Claim::start(self.me.clone(), self.subject.clone(), counter);
        self.step = Step::Claiming(Box::new(claim), call);
    }

    fn done(&mut self, outcome: LookupOutcome) {
        self.step = Step::Done(Some(outcome));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machines::worker::tests::{lease, node, perform};
    use crate::machines::worker::{SessionWorker, WorkerEvent};
    use crate::memory::{MemoryCluster, MemoryEngine};

    const TTL: Duration = Duration::from_secs(6);

    /// Drives `lookup` on `engine`, probes answered by `answers`, the clock moved by waits;
    /// its outcome and when it ended.
    fn run(
        engine: &MemoryEngine,
        lookup: &mut Lookup,
        mut now: Instant,
        answers: impl Fn(Instant) -> bool,
    ) -> (LookupOutcome, Instant) {
        let mut counter = 0;
        let mut next = || {
            counter += 1;
            counter
        };
        loop {
            match lookup.poll() {
                LookupAction::Call(call) => {
                    lookup.handle_reply(now, perform(engine, &call), &mut next)
                }
                LookupAction::Probe(_) => lookup.handle_probe(now, answers(now)),
                LookupAction::WaitUntil(until) => {
                    now = until;
                    lookup.handle_timeout(now, &mut next);
                }
                LookupAction::Done => return (lookup.take_outcome().expect("an outcome"), now),
            }
        }
    }

    /// Node `who` writes `n` events of session `s` (claiming it).
    fn write(engine: &MemoryEngine, who: &str, n: u64) {
        let mut w = SessionWorker::new(node(who), "s".into(), "log.s".into(), None, usize::MAX);
        for mark in 1..=n {
            w.push(Bytes::from(format!("{{\"id\":\"e{mark}\"}}")), mark);
        }
        while let Some(call) = w.poll_call(|| 1) {
            w.handle_reply(perform(engine, &call), || 2);
        }
        assert!(matches!(w.poll_event(), Some(WorkerEvent::Acked { .. })));
    }

    fn lookup(may_claim: bool) -> Lookup {
        Lookup::new(node("a"), "log.s".into(), TTL, may_claim)
    }

    #[test]
    fn a_session_not_in_the_log_is_not_found() {
        let cluster = MemoryCluster::new(TTL);
        let (outcome, _) = run(
            &cluster.client("a"),
            &mut lookup(true),
            Instant::now(),
            |_| true,
        );
        assert!(matches!(outcome, LookupOutcome::NotFound), "{outcome:?}");
    }

    #[test]
    fn a_log_that_cannot_be_read_fails_the_lookup_rather_than_finding_nothing() {
        let mut lookup = lookup(true);
        assert!(matches!(lookup.poll(), LookupAction::Call(_)));
        let error = crate::engine::EngineError("partitioned".into());
        lookup.handle_reply(Instant::now(), Reply::Message(Err(error)), || 1);
        assert!(matches!(lookup.poll(), LookupAction::Done));
        let outcome = lookup.take_outcome();
        assert!(
            matches!(&outcome, Some(LookupOutcome::Failed(why))
                if why == "the cluster log cannot be read: engine error: partitioned"),
            "{outcome:?}"
        );
    }

    #[test]
    fn a_dead_owners_session_is_claimed_with_its_events_unless_the_lease_is_untrusted() {
        let cluster = MemoryCluster::new(TTL);
        write(&cluster.client("b"), "b", 2);
        let a = cluster.client("a");
        // Not "not found": a `session.create` of its id must not go on.
        let (outcome, _) = run(&a, &mut lookup(false), Instant::now(), |_| true);
        assert!(
            matches!(&outcome, LookupOutcome::Failed(why) if why.contains("lease is not trusted")),
            "{outcome:?}"
        );
        let (outcome, _) = run(&a, &mut lookup(true), Instant::now(), |_| true);
        let LookupOutcome::Claimed { events, .. } = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn a_live_owner_owns_it_once_it_answers_or_the_wait_is_over() {
        let cluster = MemoryCluster::new(TTL);
        let b = cluster.client("b");
        lease(&b, &node("b"));
        write(&b, "b", 1);
        let a = cluster.client("a");
        let t0 = Instant::now();
        let (outcome, at) = run(&a, &mut lookup(true), t0, |_| true);
        assert!(
            matches!(&outcome, LookupOutcome::Owned(o) if o == &node("b")),
            "{outcome:?}"
        );
        assert_eq!(at, t0);
        // Silent (killed, its lease not expired yet): claimed again every CLAIM_AGAIN until
        // it answers, or until two lease TTLs and a second passed.
        let (outcome, at) = run(&a, &mut lookup(true), t0, |now| now >= t0 + CLAIM_AGAIN * 3);
        assert!(matches!(outcome, LookupOutcome::Owned(_)));
        assert_eq!(at, t0 + CLAIM_AGAIN * 3);
        let (outcome, at) = run(&a, &mut lookup(true), t0, |_| false);
        assert!(matches!(outcome, LookupOutcome::Owned(_)));
        assert!(at > t0 + TTL * 2 + Duration::from_secs(1), "{:?}", at - t0);
    }
}
