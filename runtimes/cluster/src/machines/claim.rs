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
