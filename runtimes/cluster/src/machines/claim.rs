//! Claiming a session, with no I/O: the [`Takeover`] run to its end, tried again (up to
//! [`CLAIM_ATTEMPTS`] times, each with a new claim counter) while the log is contended or
//! unavailable, with the back-off the runner pauses before each call.

use bytes::Bytes;

use crate::call::{Call, Reply};
use crate::record::{NodeIdentity, RecordKind};
use crate::takeover::{Takeover, TakeoverOutcome, TakeoverStep};
use crate::writer::SessionWriter;

/// How many takeovers a claim tries before it gives up.
pub const CLAIM_ATTEMPTS: u32 = 5;

/// An engine call and how long to back off before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineCall {
    /// The call.
    pub call: Call,
    /// `0`: at once; otherwise pause for this retry (`Engine::pause`) first.
    pub backoff: u32,
}

/// How a claim ended.
#[derive(Debug)]
pub enum ClaimOutcome {
    /// This node owns the session: its writer, and the session's events in the log.
    Claimed {
        /// The fenced writer.
        writer: SessionWriter,
        /// The payloads of the events logged before the claim.
        events: Vec<Bytes>,
    },
    /// A live node owns the session.
    Owned(NodeIdentity),
    /// Anything else: why.
    Failed(String),
}

/// What a claim wants next.
#[derive(Debug)]
pub enum ClaimStep {
    /// Perform this call and answer with [`Claim::handle_reply`].
    Call(EngineCall),
    /// The claim ended.
    Done(ClaimOutcome),
}

/// One claim of a session, over several takeovers.
#[derive(Debug)]
pub struct Claim {
    me: NodeIdentity,
    subject: String,
    takeover: Takeover,
    /// The call being performed.
    call: Call,
    attempt: u32,
    /// Retries of the current takeover after its claim was sent.
    retries: u32,
}

impl Claim {
    /// Starts claiming the session logged on `subject` with claim counter `counter`; the
    /// first call.
    pub fn start(me: NodeIdentity, subject: String, counter: u64) -> (Claim, EngineCall) {
        let (takeover, call) = Takeover::start(me.clone(), counter, subject.clone());
        let first = EngineCall {
            call: call.clone(),
            backoff: 0,
        };
        let claim = Claim {
            me,
            subject,
            takeover,
            call,
            attempt: 1,
            retries: 0,
        };
        (claim, first)
    }

    /// The reply to the last call; `next_counter` gives a new claim counter when the claim
    /// is tried again.
    pub fn handle_reply(&mut self, reply: Reply, next_counter: impl FnOnce() -> u64) -> ClaimStep {
        let claimed = matches!(self.call, Call::Append(_));
        match self.takeover.on_reply(reply) {
            TakeoverStep::Call(next) => {
                // Calls after the claim was sent resolve or retry it: back off.
                let backoff = if claimed || self.retries > 0 {
                    self.retries += 1;
                    self.retries
                } else {
                    0
                };
                self.call = next.clone();
                ClaimStep::Call(EngineCall {
                    call: next,
                    backoff,
                })
            }
            TakeoverStep::Done(TakeoverOutcome::Claimed { writer, events }) => {
                let events = events
                    .into_iter()
                    .filter(|m| m.kind == Some(RecordKind::Event))
                    .map(|m| m.payload)
                    .collect();
                ClaimStep::Done(ClaimOutcome::Claimed { writer, events })
            }
            TakeoverStep::Done(TakeoverOutcome::OwnedBy(owner)) => {
                ClaimStep::Done(ClaimOutcome::Owned(owner))
            }
            TakeoverStep::Done(TakeoverOutcome::Foreign(seq)) => ClaimStep::Done(
                ClaimOutcome::Failed(format!("the log holds a foreign message at {seq}")),
            ),
            TakeoverStep::Done(TakeoverOutcome::Contended | TakeoverOutcome::Unavailable(_))
                if self.attempt < CLAIM_ATTEMPTS =>
            {
                let (takeover, call) =
                    Takeover::start(self.me.clone(), next_counter(), self.subject.clone());
                self.takeover = takeover;
                self.call = call.clone();
                self.retries = 0;
                let backoff = self.attempt;
                self.attempt += 1;
                ClaimStep::Call(EngineCall { call, backoff })
            }
            TakeoverStep::Done(_) => {
                ClaimStep::Done(ClaimOutcome::Failed("the claim did not settle".to_owned()))
            }
        }
    }
}

impl std::fmt::Display for ClaimOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimOutcome::Claimed { .. } => f.write_str("claimed"),
            ClaimOutcome::Owned(owner) => write!(f, "owned by live node {}", owner.node),
            ClaimOutcome::Failed(why) => f.write_str(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{AppendAck, AppendError, EngineError};

    fn me() -> NodeIdentity {
        NodeIdentity {
            node: "a".into(),
            incarnation: 1,
        }
    }

    /// Answers every call as an empty log whose appends lose the race (`append`).
    fn answer(call: &Call, append: fn() -> Result<AppendAck, AppendError>) -> Reply {
        match call {
            Call::LastMessage { .. } => Reply::Message(Ok(None)),
            Call::Append(_) => Reply::Append(append()),
            other => panic!("unexpected call {other:?}"),
        }
    }

    #[test]
    fn a_contended_claim_is_tried_again_with_a_new_counter_and_back_off_then_given_up() {
        let (mut claim, first) = Claim::start(me(), "log.s".into(), 1);
        assert_eq!(first.backoff, 0);
        let mut call = first.call;
        let mut counters = 1;
        let mut backoffs = Vec::new();
        let outcome = loop {
            match claim.handle_reply(
                answer(&call, || Err(AppendError::WrongLastSequence)),
                || {
                    counters += 1;
                    counters
                },
            ) {
                ClaimStep::Call(next) => {
                    backoffs.push(next.backoff);
                    call = next.call;
                }
                ClaimStep::Done(outcome) => break outcome,
            }
        };
        assert!(
            matches!(&outcome, ClaimOutcome::Failed(why) if why == "the claim did not settle"),
            "{outcome:?}"
        );
        assert_eq!(counters, CLAIM_ATTEMPTS as u64, "a new counter per attempt");
        // Each new attempt backs off longer (its last-message read); calls within one
        // attempt before its claim was sent do not.
        let attempts: Vec<u32> = backoffs.iter().copied().filter(|b| *b > 0).collect();
        assert_eq!(attempts, [1, 2, 3, 4]);
    }

    #[test]
    fn an_engine_that_fails_ends_the_claim_after_its_attempts_and_a_stored_claim_is_claimed() {
        let (mut claim, first) = Claim::start(me(), "log.s".into(), 1);
        let step = claim.handle_reply(answer(&first.call, || unreachable!()), || 2);
        let ClaimStep::Call(append) = step else {
            panic!("{step:?}");
        };
        assert!(matches!(append.call, Call::Append(_)));
        let step = claim.handle_reply(
            answer(&append.call, || {
                Ok(AppendAck {
                    seq: 1,
                    duplicate: false,
                })
            }),
            || 3,
        );
        assert!(
            matches!(step, ClaimStep::Done(ClaimOutcome::Claimed { ref events, .. }) if events.is_empty()),
            "{step:?}"
        );
        // An engine that fails every read: each attempt reads the log's end again.
        let (mut claim, first) = Claim::start(me(), "log.s".into(), 1);
        assert!(matches!(first.call, Call::LastMessage { .. }));
        let mut steps = 0;
        loop {
            steps += 1;
            let reply = Reply::Message(Err(EngineError("down".into())));
            match claim.handle_reply(reply, || 9) {
                ClaimStep::Call(next) => assert!(matches!(next.call, Call::LastMessage { .. })),
                ClaimStep::Done(outcome) => {
                    assert!(matches!(outcome, ClaimOutcome::Failed(_)), "{outcome:?}");
                    break;
                }
            }
        }
        assert_eq!(steps, CLAIM_ATTEMPTS);
    }
}
