//! A node's lease in the KV bucket: created once, renewed with revision checks, self-fenced.
//!
//! The bucket's `max_age` (the TTL) decides expiry for everyone else: a key not written for a TTL
//! vanishes. The node itself cannot see the server's clock, so it counts on its own monotonic
//! clock from the moment it *sent* its last acknowledged write: the server applied that write no
//! earlier, so the key lives at least until `sent + ttl`. The lease is valid for the node until
//! `sent + ttl - margin` and, past that, [`NodeLease`] declares it lost and the node must fence
//! every session it owns. Another node only takes a session over after seeing the key gone, which
//! is later still, so a node that trusts its lease never overlaps with a claimant.
//!
//! The value is the node's incarnation: a claim record names `(node, incarnation)`, and the claim
//! is live only while the node's key holds that incarnation.

use std::time::Duration;

use bytes::Bytes;

use crate::call::{Call, Reply};
use crate::engine::KvError;

/// Lease timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The bucket's `max_age`: how long a key lives after its last write.
    pub ttl: Duration,
    /// How often the node renews (TTL/3 is usual).
    pub renew_every: Duration,
    /// How long before the TTL the node stops trusting its lease (clock drift, pauses).
    pub margin: Duration,
}

impl LeaseConfig {
    /// Renewal every TTL/3 and a margin of TTL/6.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            renew_every: ttl / 3,
            margin: ttl / 6,
        }
    }
}

/// What the lease wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseAction {
    /// Perform this call and feed its reply to [`NodeLease::on_reply`].
    Call(Call),
    /// Nothing to do before this time.
    IdleUntil(Duration),
    /// The lease is lost: fence every owned session. Terminal.
    Lost,
}

/// Where the lease is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Not yet created.
    New,
    /// A create was sent at `sent`.
    Creating { sent: Duration },
    /// A create's outcome is unknown; reading the key to find out.
    CheckingCreate { sent: Duration },
    /// The key is held by another incarnation (this node restarted before its old key expired,
    /// or another process uses the same node id): try creating again at `until`.
    Blocked { until: Duration },
    /// Held at `revision`, valid until `valid_until`; last write sent at `sent`.
    Held {
        revision: u64,
        sent: Duration,
        valid_until: Duration,
    },
    /// An update of `revision` was sent at `sent`.
    Renewing {
        revision: u64,
        sent: Duration,
        valid_until: Duration,
    },
    /// An update's outcome is unknown; reading the key to find out.
    Checking {
        revision: u64,
        sent: Duration,
        valid_until: Duration,
    },
    /// Lost for good.
    Lost,
}

/// One node's lease, as an I/O-free state machine driven by [`NodeLease::poll`].
#[derive(Debug, Clone)]
pub struct NodeLease {
    config: LeaseConfig,
    key: String,
    value: Bytes,
    state: State,
}

impl NodeLease {
    /// The lease of the node whose key is `key`; `incarnation` is stored as its value.
    pub fn new(config: LeaseConfig, key: String, incarnation: u64) -> Self {
        Self {
            config,
            key,
            value: Bytes::from(incarnation.to_string()),
            state: State::New,
        }
    }

    /// Whether this node may act as an owner at `now`.
    pub fn is_valid(&self, now: Duration) -> bool {
        match self.state {
            State::Held { valid_until, .. }
            | State::Renewing { valid_until, .. }
            | State::Checking { valid_until, .. } => now < valid_until,
            _ => false,
        }
    }

    /// Until when the lease is valid (see [`NodeLease::is_valid`]), if it is held.
    pub fn valid_until(&self) -> Option<Duration> {
        match self.state {
            State::Held { valid_until, .. }
            | State::Renewing { valid_until, .. }
            | State::Checking { valid_until, .. } => Some(valid_until),
            _ => None,
        }
    }

    /// Whether the lease was lost.
    pub fn is_lost(&self) -> bool {
        self.state == State::Lost
    }

    /// The next thing to do at `now`. While a call is in flight it answers `IdleUntil` (the
    /// validity deadline), unless the lease ran out meanwhile.
    pub fn poll(&mut self, now: Duration) -> LeaseAction {
        let ttl = self.config.ttl;
        match self.state {
            State::Lost => return LeaseAction::Lost,
            State::New => {
                self.state = State::Creating { sent: now };
                return LeaseAction::Call(Call::KvCreate {
                    key: self.key.clone(),
                    value: self.value.clone(),
                });
            }
            State::Blocked { until } if now < until => return LeaseAction::IdleUntil(until),
            State::Blocked { .. } => {
                self.state = State::New;
                return self.poll(now);
            }
            State::Creating { sent } | State::CheckingCreate { sent } => {
                // No acknowledged write yet: nothing to lose, keep waiting for the answer.
                return LeaseAction::IdleUntil(sent + ttl);
            }
            _ => {}
        }
        if !self.is_valid(now) {
            self.state = State::Lost;
            return LeaseAction::Lost;
        }
        match self.state {
            State::Held {
                revision,
                sent,
                valid_until,
            } => {
                let due = sent + self.config.renew_every;
                if now < due {
                    return LeaseAction::IdleUntil(due);
                }
                self.state = State::Renewing {
                    revision,
                    sent: now,
                    valid_until,
                };
                LeaseAction::Call(Call::KvUpdate {
                    key: self.key.clone(),
                    value: self.value.clone(),
                    revision,
                })
            }
            State::Renewing { valid_until, .. } | State::Checking { valid_until, .. } => {
                LeaseAction::IdleUntil(valid_until)
            }
            _ => unreachable!("handled above"),
        }
    }

    /// Feeds the reply to the last call [`NodeLease::poll`] asked for; may ask for another.
    pub fn on_reply(&mut self, reply: Reply) -> Option<Call> {
        let fresh = |sent: Duration| sent + self.config.ttl.saturating_sub(self.config.margin);
        match (self.state.clone(), reply) {
            (State::Creating { sent }, Reply::KvWrite(Ok(revision)))
            | (State::Renewing { sent, .. }, Reply::KvWrite(Ok(revision))) => {
                self.state = State::Held {
                    revision,
                    sent,
                    valid_until: fresh(sent),
                };
                None
            }
            (State::Creating { sent }, Reply::KvWrite(Err(KvError::RevisionMismatch))) => {
                self.state = State::Blocked {
                    until: sent + self.config.ttl,
                };
                None
            }
            (State::Renewing { .. }, Reply::KvWrite(Err(KvError::RevisionMismatch))) => {
                // Our key expired, or another process took this node id: lost.
                self.state = State::Lost;
                None
            }
            (State::Creating { sent }, Reply::KvWrite(Err(KvError::Unknown(_)))) => {
                self.state = State::CheckingCreate { sent };
                Some(Call::KvGet {
                    key: self.key.clone(),
                })
            }
            (State::Creating { .. }, Reply::KvWrite(Err(_))) => {
                self.state = State::New;
                None
            }
            (State::CheckingCreate { sent }, Reply::KvEntry(result)) => {
                match result {
                    Ok(Some(entry)) if entry.value == self.value => {
                        // Our create landed.
                        self.state = State::Held {
                            revision: entry.revision,
                            sent,
                            valid_until: fresh(sent),
                        };
                    }
                    Ok(None) | Err(_) => self.state = State::New,
                    Ok(Some(_)) => {
                        self.state = State::Blocked {
                            until: sent + self.config.ttl,
                        }
                    }
                }
                None
            }
            (
                State::Renewing {
                    revision,
                    sent,
                    valid_until,
                },
                Reply::KvWrite(Err(KvError::Unknown(_))),
            ) => {
                self.state = State::Checking {
                    revision,
                    sent,
                    valid_until,
                };
                Some(Call::KvGet {
                    key: self.key.clone(),
                })
            }
            (
                State::Renewing {
                    revision,
                    valid_until,
                    ..
                },
                Reply::KvWrite(Err(KvError::Failed(_))),
            ) => {
                self.retry_later(revision, valid_until);
                None
            }
            (
                State::Checking {
                    revision,
                    sent,
                    valid_until,
                },
                Reply::KvEntry(result),
            ) => {
                match result {
                    Ok(Some(entry)) if entry.value == self.value && entry.revision > revision => {
                        // Our renewal landed.
                        self.state = State::Held {
                            revision: entry.revision,
                            sent,
                            valid_until: fresh(sent),
                        };
                    }
                    Ok(Some(entry)) if entry.value == self.value && entry.revision == revision => {
                        // It did not land: renew again at once.
                        self.retry_later(revision, valid_until);
                    }
                    Ok(_) => self.state = State::Lost,
                    Err(_) => self.retry_later(revision, valid_until),
                }
                None
            }
            (state, _) => {
                // A reply that does not belong to the state: keep the state.
                self.state = state;
                None
            }
        }
    }

    /// Goes back to `Held` so the next poll renews at once.
    fn retry_later(&mut self, revision: u64, valid_until: Duration) {
        self.state = State::Held {
            revision,
            sent: Duration::ZERO,
            valid_until,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::KvEntry;

    const SEC: Duration = Duration::from_secs(1);

    fn lease() -> NodeLease {
        NodeLease::new(LeaseConfig::with_ttl(6 * SEC), "sA".into(), 7)
    }

    #[test]
    fn creates_then_renews_with_the_revision() {
        let mut lease = lease();
        assert!(matches!(
            lease.poll(SEC),
            LeaseAction::Call(Call::KvCreate { .. })
        ));
        assert!(!lease.is_valid(SEC));
        assert_eq!(lease.on_reply(Reply::KvWrite(Ok(3))), None);
        assert!(lease.is_valid(SEC));
        assert_eq!(lease.poll(2 * SEC), LeaseAction::IdleUntil(3 * SEC));
        match lease.poll(3 * SEC) {
            LeaseAction::Call(Call::KvUpdate { revision, .. }) => assert_eq!(revision, 3),
            other => panic!("expected a renewal, got {other:?}"),
        }
        lease.on_reply(Reply::KvWrite(Ok(8)));
        // Valid until sent (3 s) + ttl (6 s) - margin (1 s).
        assert!(lease.is_valid(7 * SEC + SEC / 2));
        assert!(!lease.is_valid(8 * SEC));
    }

    #[test]
    fn no_acknowledged_renewal_means_lost_before_the_server_expires_the_key() {
        let mut lease = lease();
        lease.poll(Duration::ZERO);
        lease.on_reply(Reply::KvWrite(Ok(1)));
        lease.poll(2 * SEC); // renewal sent, never answered
        assert!(lease.is_valid(4 * SEC));
        assert_eq!(lease.poll(5 * SEC), LeaseAction::Lost);
        assert!(!lease.is_valid(5 * SEC));
        assert_eq!(lease.poll(100 * SEC), LeaseAction::Lost);
    }

    #[test]
    fn a_revision_mismatch_loses_the_lease() {
        let mut lease = lease();
        lease.poll(Duration::ZERO);
        lease.on_reply(Reply::KvWrite(Ok(1)));
        lease.poll(2 * SEC);
        lease.on_reply(Reply::KvWrite(Err(KvError::RevisionMismatch)));
        assert!(lease.is_lost());
    }

    #[test]
    fn an_unknown_renewal_that_landed_is_adopted() {
        let mut lease = lease();
        lease.poll(Duration::ZERO);
        lease.on_reply(Reply::KvWrite(Ok(1)));
        lease.poll(2 * SEC);
        let check = lease.on_reply(Reply::KvWrite(Err(KvError::Unknown("timeout".into()))));
        assert!(matches!(check, Some(Call::KvGet { .. })));
        lease.on_reply(Reply::KvEntry(Ok(Some(KvEntry {
            value: Bytes::from_static(b"7"),
            revision: 4,
        }))));
        assert!(lease.is_valid(6 * SEC));
        match lease.poll(6 * SEC) {
            LeaseAction::Call(Call::KvUpdate { revision, .. }) => assert_eq!(revision, 4),
            other => panic!("expected a renewal, got {other:?}"),
        }
    }

    #[test]
    fn a_key_held_by_an_older_incarnation_blocks_creation_for_a_ttl() {
        let mut lease = lease();
        lease.poll(Duration::ZERO);
        lease.on_reply(Reply::KvWrite(Err(KvError::RevisionMismatch)));
        assert!(!lease.is_lost());
        assert!(!lease.is_valid(SEC));
        assert_eq!(lease.poll(SEC), LeaseAction::IdleUntil(6 * SEC));
        assert!(matches!(
            lease.poll(6 * SEC),
            LeaseAction::Call(Call::KvCreate { .. })
        ));
    }

    #[test]
    fn a_create_whose_ack_was_lost_is_adopted() {
        let mut lease = lease();
        lease.poll(Duration::ZERO);
        let check = lease.on_reply(Reply::KvWrite(Err(KvError::Unknown("timeout".into()))));
        assert!(matches!(check, Some(Call::KvGet { .. })));
        lease.on_reply(Reply::KvEntry(Ok(Some(KvEntry {
            value: Bytes::from_static(b"7"),
            revision: 2,
        }))));
        assert!(lease.is_valid(SEC));
        assert!(!lease.is_lost());
    }

    #[test]
    fn a_key_holding_another_incarnation_is_lost() {
        let mut lease = lease();
        lease.poll(Duration::ZERO);
        lease.on_reply(Reply::KvWrite(Ok(1)));
        lease.poll(2 * SEC);
        lease.on_reply(Reply::KvWrite(Err(KvError::Unknown("timeout".into()))));
        lease.on_reply(Reply::KvEntry(Ok(Some(KvEntry {
            value: Bytes::from_static(b"8"),
            revision: 5,
        }))));
        assert!(lease.is_lost());
    }
}
