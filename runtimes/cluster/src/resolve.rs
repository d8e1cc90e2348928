//! Resolving an append whose outcome is unknown, by reading the subject's last message.
//!
//! After a timeout, a lost acknowledgement or a `WrongLastSequence` answer, the writer cannot
//! tell from the answer alone whether its message is stored: on nats-server 2.15 a retry that
//! carries the same message id *and* the now-stale expected sequence gets `WrongLastSequence`,
//! not `duplicate`. The subject's last message (read from the stream leader) settles it.

use crate::engine::{AppendRequest, StoredMessage};

/// What the subject's last message says about an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The last message is ours: the append is stored at this sequence.
    Landed(u64),
    /// The subject is still where the append expected it: nothing is stored, a retry of the same
    /// request is safe (its message id keeps it idempotent).
    NotStored,
    /// Someone else's message follows the expected one: this writer is fenced.
    Superseded,
}

/// Decides what happened to `request` given the subject's last message.
///
/// If our message landed and then another writer appended after it, the answer is
/// [`Resolution::Superseded`]: the writer is fenced either way, and the new owner restores the
/// landed message from the log.
pub fn resolve(request: &AppendRequest, last: Option<&StoredMessage>) -> Resolution {
    match last {
        Some(message) if message.msg_id.as_deref() == Some(request.msg_id.as_str()) => {
            Resolution::Landed(message.seq)
        }
        Some(message) if message.seq == request.expected_last_subject_seq => Resolution::NotStored,
        None if request.expected_last_subject_seq == 0 => Resolution::NotStored,
        _ => Resolution::Superseded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordKind;
    use bytes::Bytes;

    fn request(prev: u64) -> AppendRequest {
        AppendRequest {
            subject: "s".into(),
            expected_last_subject_seq: prev,
            msg_id: format!("e:1:{prev}"),
            kind: RecordKind::Event,
            payload: Bytes::new(),
        }
    }

    fn message(seq: u64, id: &str) -> StoredMessage {
        StoredMessage {
            seq,
            subject: "s".into(),
            msg_id: Some(id.into()),
            kind: Some(RecordKind::Event),
            payload: Bytes::new(),
        }
    }

    #[test]
    fn our_id_last_means_landed() {
        assert_eq!(
            resolve(&request(4), Some(&message(9, "e:1:4"))),
            Resolution::Landed(9)
        );
    }

    #[test]
    fn unchanged_subject_means_not_stored() {
        assert_eq!(
            resolve(&request(4), Some(&message(4, "e:1:2"))),
            Resolution::NotStored
        );
        assert_eq!(resolve(&request(0), None), Resolution::NotStored);
    }

    #[test]
    fn another_message_means_fenced() {
        assert_eq!(
            resolve(&request(4), Some(&message(7, "c:sB:1:1"))),
            Resolution::Superseded
        );
        assert_eq!(resolve(&request(4), None), Resolution::Superseded);
    }
}
