//! What a log message is: a session event or a claim record, and its message id.
//!
//! Every message on a session's log subject carries a `Nats-Msg-Id` that says who wrote it:
//!
//! * an event appended by the owner of epoch `E` after the message at stream sequence `P` has
//!   id `e:E:P` ([`MessageId::Event`]). The epoch is the stream sequence of the owner's claim
//!   record and `P` is the expected last subject sequence of the append, so the id is unique in
//!   the whole stream (stream sequences are), and a retry of the same append carries the same id;
//! * a claim record has id `c:<node token>:<incarnation>:<counter>` ([`MessageId::Claim`]): unique
//!   as long as a node never reuses an incarnation and counts its claims.
//!
//! The owner of any log position is therefore found from the last message alone: its id names
//! the epoch, and the message at that sequence is the claim naming the node.

use std::fmt;

use crate::escape::{escape_id, unescape_id};

/// The kind of a log message. The NATS engine carries it in the `Agentwire-Kind` header
/// (`event`, `claim`, `part:<index>:<count>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// A session event: exactly the bytes clients receive.
    Event,
    /// A claim record: the fence of a new owner. Not a session event; restores skip it.
    Claim,
    /// Piece `index` (from 0) of the `count` pieces of one event too large for one message,
    /// appended one after the other ([`crate::parts`]): the event is the concatenation of a
    /// complete run; an incomplete run (its writer stopped) is not an event.
    Part {
        /// Which piece.
        index: u32,
        /// How many pieces the event has (at least 2).
        count: u32,
    },
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Event => f.write_str("event"),
            Self::Claim => f.write_str("claim"),
            Self::Part { index, count } => write!(f, "part:{index}:{count}"),
        }
    }
}

impl RecordKind {
    /// Parses a header value written by [`fmt::Display`].
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "event" => Some(Self::Event),
            "claim" => Some(Self::Claim),
            _ => {
                let (index, count) = value.strip_prefix("part:")?.split_once(':')?;
                let (index, count) = (index.parse().ok()?, count.parse().ok()?);
                (index < count && count >= 2).then_some(Self::Part { index, count })
            }
        }
    }

    /// Whether a message of this kind holds a session event or a piece of one (its message
    /// id is then a [`MessageId::Event`]).
    pub fn is_event_data(self) -> bool {
        matches!(self, Self::Event | Self::Part { .. })
    }
}

/// Who a node is: its id and the incarnation of its current process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeIdentity {
    /// The node id (`--node-id`), any string.
    pub node: String,
    /// Distinguishes restarts of the same node id; must never repeat for a node (for example
    /// the start time in nanoseconds, supplied by the runtime).
    pub incarnation: u64,
}

impl NodeIdentity {
    /// The name of this node's link number `n` for its client connection `conn`: a subject
    /// token no other link of the cluster shares.
    pub fn link_name(&self, conn: u64, n: u64) -> String {
        format!("{}x{}x{conn}x{n}", escape_id(&self.node), self.incarnation)
    }

    /// The name of this node's relay group number `n` from `owner`, for clients of the
    /// dialect a link opening calls `dialect`: a subject token no other group shares.
    pub fn group_name(&self, owner: &NodeIdentity, dialect: &str, n: u64) -> String {
        format!(
            "{}x{}x{}x{}x{dialect}{n}",
            escape_id(&self.node),
            self.incarnation,
            escape_id(&owner.node),
            owner.incarnation
        )
    }
}

/// The message id of a log message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MessageId {
    /// An event of the owner of `epoch`, appended after the message at stream sequence `prev`.
    Event {
        /// Stream sequence of the writer's claim record.
        epoch: u64,
        /// The append's expected last subject sequence.
        prev: u64,
    },
    /// A claim record.
    Claim {
        /// The claiming node.
        claimant: NodeIdentity,
        /// The claimant's count of claims in this incarnation.
        counter: u64,
    },
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Event { epoch, prev } => write!(f, "e:{epoch}:{prev}"),
            Self::Claim { claimant, counter } => write!(
                f,
                "c:{}:{}:{counter}",
                escape_id(&claimant.node),
                claimant.incarnation
            ),
        }
    }
}

impl MessageId {
    /// Parses a message id written by [`fmt::Display`]; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split(':');
        let id = match parts.next()? {
            "e" => Self::Event {
                epoch: parts.next()?.parse().ok()?,
                prev: parts.next()?.parse().ok()?,
            },
            "c" => Self::Claim {
                claimant: NodeIdentity {
                    node: unescape_id(parts.next()?).ok()?,
                    incarnation: parts.next()?.parse().ok()?,
                },
                counter: parts.next()?.parse().ok()?,
            },
            _ => return None,
        };
        parts.next().is_none().then_some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn message_ids_round_trip(node in any::<String>(), a in any::<u64>(), b in any::<u64>()) {
            let event = MessageId::Event { epoch: a, prev: b };
            prop_assert_eq!(MessageId::parse(&event.to_string()), Some(event));
            let claim = MessageId::Claim {
                claimant: NodeIdentity { node, incarnation: a },
                counter: b,
            };
            let text = claim.to_string();
            prop_assert!(!text.contains(['\r', '\n', ' ']));
            prop_assert_eq!(MessageId::parse(&text), Some(claim));
        }
    }

    #[test]
    fn kinds_round_trip_and_malformed_parts_are_not_kinds() {
        for kind in [
            RecordKind::Event,
            RecordKind::Claim,
            RecordKind::Part { index: 0, count: 2 },
            RecordKind::Part { index: 6, count: 7 },
        ] {
            assert_eq!(RecordKind::parse(&kind.to_string()), Some(kind));
        }
        for bad in [
            "part:2:2",
            "part:0:1",
            "part:1",
            "part:a:3",
            "part:-1:3",
            "events",
        ] {
            assert_eq!(RecordKind::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn foreign_ids_are_not_ours() {
        assert_eq!(MessageId::parse("e:1"), None);
        assert_eq!(MessageId::parse("e:1:2:3"), None);
        assert_eq!(MessageId::parse("x:1:2"), None);
    }
}
