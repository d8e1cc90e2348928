//! Claiming a session: who owns it now, whether that owner is alive, and the fenced claim.
//!
//! Ownership lives in the session's log. The last message names its writer's epoch (see
//! [`crate::record`]); the claim record at that sequence names the owner `(node, incarnation)`.
//! The owner is alive while its node's lease key holds that incarnation. A [`Takeover`] claims
//! the session only if the log is empty or the owner is not alive (or is this very node): it
//! loads the log, then appends a claim record expecting the last sequence it loaded. That claim is
//! the fence: from then on every append of the previous owner expects an older sequence and fails.
//! Two claimants racing both expect the same sequence, so exactly one claim is stored.
//!
//! Which live node should claim an orphaned session is [`preferred_claimant`] (rendezvous
//! hashing), so that a dead node's sessions spread over the survivors without a race for each.

use bytes::Bytes;

use crate::call::{Call, Reply};
use crate::engine::{AppendError, AppendRequest, StoredMessage};
use crate::layout::lease_key;
use crate::record::{MessageId, NodeIdentity, RecordKind};
use crate::resolve::{resolve, Resolution};
use crate::writer::{SessionWriter, MAX_ATTEMPTS};

/// How a takeover ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeoverOutcome {
    /// The claim is stored: write with `writer`, after restoring the session from `events`
    /// (every event before the claim, in order; claim records left out).
    Claimed {
        /// The new single writer.
        writer: SessionWriter,
        /// The session's events, oldest first.
        events: Vec<StoredMessage>,
    },
    /// Another node owns the session and its lease is alive.
    OwnedBy(NodeIdentity),
    /// The log moved while claiming (another claimant or the old owner wrote): look again later.
    Contended,
    /// The log holds a message agentwire did not write; refusing to guess.
    Foreign(u64),
    /// The engine failed; nothing is known to be claimed.
    Unavailable(String),
}

/// What the takeover wants next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeoverStep {
    /// Perform this call and feed its reply to [`Takeover::on_reply`].
    Call(Call),
    /// Finished.
    Done(TakeoverOutcome),
}

/// Where the takeover is.
#[derive(Debug, Clone)]
enum State {
    ReadLast,
    FindClaim {
        last_seq: u64,
    },
    CheckOwner {
        owner: NodeIdentity,
        last_seq: u64,
    },
    Load {
        last_seq: u64,
    },
    Claim {
        request: AppendRequest,
        events: Vec<StoredMessage>,
        attempts: u32,
    },
    Resolve {
        request: AppendRequest,
        events: Vec<StoredMessage>,
        attempts: u32,
    },
    Done,
}

/// One attempt of a node to claim one session, as an I/O-free state machine.
#[derive(Debug, Clone)]
pub struct Takeover {
    me: NodeIdentity,
    claim_counter: u64,
    subject: String,
    state: State,
}

impl Takeover {
    /// Starts a takeover of the session logged on `subject` by `me`. `claim_counter` must differ
    /// for every claim `me` makes (it makes the claim's message id unique). Perform the call.
    pub fn start(me: NodeIdentity, claim_counter: u64, subject: String) -> (Self, Call) {
        let call = Call::LastMessage {
            subject: subject.clone(),
        };
        let takeover = Self {
            me,
            claim_counter,
            subject,
            state: State::ReadLast,
        };
        (takeover, call)
    }

    /// Feeds the reply to the last call.
    pub fn on_reply(&mut self, reply: Reply) -> TakeoverStep {
        let state = std::mem::replace(&mut self.state, State::Done);
        let step = self.advance(state, reply);
        if let TakeoverStep::Done(_) = step {
            self.state = State::Done;
        }
        step
    }

    fn advance(&mut self, state: State, reply: Reply) -> TakeoverStep {
        match (state, reply) {
            (State::ReadLast, Reply::Message(Ok(None))) => self.claim(0, Vec::new()),
            (State::ReadLast, Reply::Message(Ok(Some(last)))) => {
                match (last.kind, last.msg_id.as_deref().and_then(MessageId::parse)) {
                    (Some(RecordKind::Claim), Some(MessageId::Claim { claimant, .. })) => {
                        self.check_owner(claimant, last.seq)
                    }
                    (Some(kind), Some(MessageId::Event { epoch, .. })) if kind.is_event_data() => {
                        self.state = State::FindClaim { last_seq: last.seq };
                        TakeoverStep::Call(Call::MessageAt { seq: epoch })
                    }
                    _ => done(TakeoverOutcome::Foreign(last.seq)),
                }
            }
            (State::FindClaim { last_seq }, Reply::Message(Ok(Some(claim)))) => {
                match (
                    claim.kind,
                    claim.msg_id.as_deref().and_then(MessageId::parse),
                ) {
                    (Some(RecordKind::Claim), Some(MessageId::Claim { claimant, .. })) => {
                        self.check_owner(claimant, last_seq)
                    }
                    _ => done(TakeoverOutcome::Foreign(claim.seq)),
                }
            }
            (State::FindClaim { last_seq }, Reply::Message(Ok(None))) => {
                done(TakeoverOutcome::Foreign(last_seq))
            }
            (State::CheckOwner { owner, last_seq }, Reply::KvEntry(Ok(entry))) => {
                let alive = entry
                    .is_some_and(|entry| entry.value == owner.incarnation.to_string().as_bytes());
                if alive && owner != self.me {
                    return done(TakeoverOutcome::OwnedBy(owner));
                }
                self.state = State::Load { last_seq };
                TakeoverStep::Call(Call::ReadSubject {
                    subject: self.subject.clone(),
                    from_seq: 1,
                })
            }
            (State::Load { last_seq }, Reply::Messages(Ok(messages))) => {
                if messages.last().map(|m| m.seq) != Some(last_seq) {
                    return done(TakeoverOutcome::Contended);
                }
                self.claim(last_seq, crate::parts::events(messages))
            }
            (
                State::Claim {
                    request,
                    events,
                    attempts,
                },
                Reply::Append(result),
            ) => match result {
                Ok(ack) => self.claimed(ack.seq, events),
                Err(AppendError::WrongLastSequence) => done(TakeoverOutcome::Contended),
                Err(AppendError::Failed(why)) => done(TakeoverOutcome::Unavailable(why)),
                Err(AppendError::Unknown(_)) => {
                    let call = Call::LastMessage {
                        subject: self.subject.clone(),
                    };
                    self.state = State::Resolve {
                        request,
                        events,
                        attempts,
                    };
                    TakeoverStep::Call(call)
                }
            },
            (
                State::Resolve {
                    request,
                    events,
                    attempts,
                },
                Reply::Message(Ok(last)),
            ) => match resolve(&request, last.as_ref()) {
                Resolution::Landed(seq) => self.claimed(seq, events),
                Resolution::Superseded => done(TakeoverOutcome::Contended),
                Resolution::NotStored if attempts < MAX_ATTEMPTS => {
                    let call = Call::Append(request.clone());
                    self.state = State::Claim {
                        request,
                        events,
                        attempts: attempts + 1,
                    };
                    TakeoverStep::Call(call)
                }
                Resolution::NotStored => {
                    done(TakeoverOutcome::Unavailable("claim outcome unknown".into()))
                }
            },
            (_, Reply::Message(Err(e)) | Reply::Messages(Err(e)) | Reply::KvEntry(Err(e))) => {
                done(TakeoverOutcome::Unavailable(e.0))
            }
            (_, other) => done(TakeoverOutcome::Unavailable(format!(
                "unexpected reply {other:?}"
            ))),
        }
    }

    /// Asks for the owner's lease.
    fn check_owner(&mut self, owner: NodeIdentity, last_seq: u64) -> TakeoverStep {
        let key = lease_key(&owner.node);
        self.state = State::CheckOwner { owner, last_seq };
        TakeoverStep::Call(Call::KvGet { key })
    }

    /// Appends the claim record expecting `last_seq`.
    fn claim(&mut self, last_seq: u64, events: Vec<StoredMessage>) -> TakeoverStep {
        let request = AppendRequest {
            subject: self.subject.clone(),
            expected_last_subject_seq: last_seq,
            msg_id: MessageId::Claim {
                claimant: self.me.clone(),
                counter: self.claim_counter,
            }
            .to_string(),
            kind: RecordKind::Claim,
            payload: Bytes::new(),
        };
        let call = Call::Append(request.clone());
        self.state = State::Claim {
            request,
            events,
            attempts: 1,
        };
        TakeoverStep::Call(call)
    }

    fn claimed(&mut self, seq: u64, events: Vec<StoredMessage>) -> TakeoverStep {
        done(TakeoverOutcome::Claimed {
            writer: SessionWriter::new(self.subject.clone(), seq),
            events,
        })
    }
}

fn done(outcome: TakeoverOutcome) -> TakeoverStep {
    TakeoverStep::Done(outcome)
}

/// FNV-1a over `bytes`, continuing from `hash`.
fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
    }
    hash
}

/// The live node that should claim an orphaned `session` (highest rendezvous weight), or
/// `None` if no node is live. Deterministic: every node computes the same answer from the same
/// set of live nodes.
pub fn preferred_claimant<'a>(
    session: &str,
    live_nodes: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let base = fnv1a(0xCBF2_9CE4_8422_2325, session.as_bytes());
    live_nodes.into_iter().max_by_key(|node| {
        let hash = fnv1a(fnv1a(base, &[0xFF]), node.as_bytes());
        // Finalise (splitmix64) so that similar names spread well.
        let mut z = hash.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31), *node)
    })
}

/// The sessions a node's sweep looks up: of the log subjects `subjects` (each
/// `<log_prefix>.<escaped session id>`), those whose preferred claimant among the live nodes
/// `live` (escaped node ids) is `me` (escaped too) and that `loaded` says the node has not
/// loaded. A dead node's sessions are so taken over without a client asking.
pub fn sessions_to_sweep<'a>(
    subjects: impl IntoIterator<Item = &'a str>,
    log_prefix: &str,
    me: &str,
    live: &[String],
    loaded: impl Fn(&str) -> bool,
) -> Vec<String> {
    let prefix = format!("{log_prefix}.");
    subjects
        .into_iter()
        .filter_map(|subject| {
            let token = subject.strip_prefix(&prefix)?;
            crate::escape::unescape_id(token).ok()
        })
        .filter(|session| {
            preferred_claimant(session, live.iter().map(String::as_str)) == Some(me)
                && !loaded(session)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_is_deterministic_and_spreads() {
        let nodes = ["a", "b", "c"];
        let mut counts = [0usize; 3];
        for i in 0..300 {
            let session = format!("session-{i}");
            let first = preferred_claimant(&session, nodes).unwrap();
            let reversed = preferred_claimant(&session, nodes.iter().rev().copied()).unwrap();
            assert_eq!(first, reversed);
            counts[nodes.iter().position(|n| *n == first).unwrap()] += 1;
        }
        assert!(counts.iter().all(|&c| c > 50), "{counts:?}");
        assert_eq!(preferred_claimant("s", []), None);
    }

    #[test]
    fn a_sweep_looks_up_the_unloaded_sessions_this_node_should_claim() {
        let live = ["a".to_owned(), "b".to_owned()];
        let sessions: Vec<String> = (0..40).map(|i| format!("s{i}")).collect();
        let subjects: Vec<String> = sessions
            .iter()
            .map(|s| format!("log.{}", crate::escape::escape_id(s)))
            .collect();
        let subjects = subjects
            .iter()
            .map(String::as_str)
            .chain(["other.s1", "log."]);
        let mine = sessions_to_sweep(subjects.clone(), "log", "a", &live, |s| s == "s0");
        let expected: Vec<String> = sessions
            .iter()
            .filter(|s| preferred_claimant(s, ["a", "b"]) == Some("a") && *s != "s0")
            .cloned()
            .collect();
        assert!(!expected.is_empty() && expected.len() < sessions.len());
        assert_eq!(mine, expected);
        assert!(sessions_to_sweep(subjects, "log", "c", &live, |_| false).is_empty());
    }

    #[test]
    fn removing_a_node_only_moves_its_sessions() {
        for i in 0..200 {
            let session = format!("s{i}");
            let before = preferred_claimant(&session, ["a", "b", "c"]).unwrap();
            let after = preferred_claimant(&session, ["a", "b"]).unwrap();
            if before != "c" {
                assert_eq!(before, after);
            }
        }
    }
}
