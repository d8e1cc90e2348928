//! Events too large for one log message (the server's `max_payload`, 1 MiB by default): the
//! writer appends them as a run of pieces ([`RecordKind::Part`]), each a fenced append of its
//! own, and readers put complete runs back together. The event is acknowledged (and reaches
//! clients) once its last piece is; a run cut short (its writer died or was fenced, or a piece
//! was refused) is not an event, and the next owner's claim follows it.

use bytes::{Bytes, BytesMut};

use crate::engine::StoredMessage;
use crate::record::RecordKind;

/// The records `payload` is appended as when one message may hold `max_piece` bytes of it:
/// one [`RecordKind::Event`] when it fits, else pieces of at most `max_piece` bytes (slices
/// of `payload`, not copies).
pub fn split(payload: &Bytes, max_piece: usize) -> Vec<(RecordKind, Bytes)> {
    let max_piece = max_piece.max(1);
    if payload.len() <= max_piece {
        return vec![(RecordKind::Event, payload.clone())];
    }
    let count = payload.len().div_ceil(max_piece);
    let Ok(count) = u32::try_from(count) else {
        // Over 4 billion pieces: never appendable; the engine refuses the whole event.
        return vec![(RecordKind::Event, payload.clone())];
    };
    (0..count)
        .map(|index| {
            let start = index as usize * max_piece;
            let end = (start + max_piece).min(payload.len());
            (RecordKind::Part { index, count }, payload.slice(start..end))
        })
        .collect()
}

/// A run of pieces being put together.
struct Run {
    count: u32,
    next: u32,
    payload: BytesMut,
}

/// The session events among a subject's messages (oldest first), as [`RecordKind::Event`]
/// messages: each whole event as stored, and each complete run of pieces as one event (at the
/// sequence and with the message id of its last piece). Claims, foreign messages and
/// incomplete runs are left out.
pub fn events(messages: Vec<StoredMessage>) -> Vec<StoredMessage> {
    let mut events = Vec::new();
    let mut run: Option<Run> = None;
    for message in messages {
        match message.kind {
            Some(RecordKind::Event) => {
                run = None;
                events.push(message);
            }
            Some(RecordKind::Part { index: 0, count }) => {
                // Grown as pieces come: `count` is the log's word, not a size to trust.
                let payload = BytesMut::from(&message.payload[..]);
                run = Some(Run {
                    count,
                    next: 1,
                    payload,
                });
            }
            Some(RecordKind::Part { index, count }) => {
                let Some(mut current) = run.take() else {
                    continue;
                };
                if current.count != count || current.next != index {
                    continue;
                }
                current.payload.extend_from_slice(&message.payload);
                current.next += 1;
                if current.next < count {
                    run = Some(current);
                    continue;
                }
                events.push(StoredMessage {
                    kind: Some(RecordKind::Event),
                    payload: current.payload.freeze(),
                    ..message
                });
            }
            Some(RecordKind::Claim) | None => run = None,
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(seq: u64, kind: Option<RecordKind>, payload: &[u8]) -> StoredMessage {
        StoredMessage {
            seq,
            subject: "log.s".into(),
            msg_id: Some(format!("e:1:{}", seq - 1)),
            kind,
            payload: Bytes::copy_from_slice(payload),
        }
    }

    fn part(seq: u64, index: u32, count: u32, payload: &[u8]) -> StoredMessage {
        message(seq, Some(RecordKind::Part { index, count }), payload)
    }

    #[test]
    fn an_event_that_fits_is_one_record_and_a_larger_one_pieces_that_join_up() {
        let small = Bytes::from_static(b"0123");
        assert_eq!(split(&small, 4), [(RecordKind::Event, small.clone())]);
        let large = Bytes::from_static(b"0123456789");
        let pieces = split(&large, 4);
        let kinds: Vec<RecordKind> = pieces.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            kinds,
            [0, 1, 2].map(|index| RecordKind::Part { index, count: 3 })
        );
        assert!(pieces.iter().all(|(_, p)| p.len() <= 4));
        let stored: Vec<StoredMessage> = pieces
            .iter()
            .enumerate()
            .map(|(i, (kind, payload))| message(10 + i as u64, Some(*kind), payload))
            .collect();
        let joined = events(stored);
        assert_eq!(joined.len(), 1);
        assert_eq!(joined[0].payload, large);
        assert_eq!(joined[0].seq, 12, "at its last piece");
        assert_eq!(joined[0].msg_id.as_deref(), Some("e:1:11"));
        assert_eq!(joined[0].kind, Some(RecordKind::Event));
    }

    #[test]
    fn runs_cut_short_or_out_of_order_are_not_events() {
        let messages = vec![
            message(1, Some(RecordKind::Claim), b"claim"),
            message(2, Some(RecordKind::Event), b"a"),
            // A writer that stopped after two of three pieces; the next owner claims.
            part(3, 0, 3, b"x"),
            part(4, 1, 3, b"y"),
            message(5, Some(RecordKind::Claim), b"claim"),
            message(6, Some(RecordKind::Event), b"b"),
            // A piece refused: the next event follows an incomplete run.
            part(7, 0, 2, b"p"),
            message(8, Some(RecordKind::Event), b"c"),
            // Pieces of another run, or out of order, or with no start.
            part(9, 1, 2, b"q"),
            part(10, 0, 2, b"r"),
            part(11, 1, 3, b"s"),
            part(12, 0, 2, b"t"),
            part(13, 1, 2, b"u"),
            message(14, None, b"foreign"),
            // A run at the end, not finished.
            part(15, 0, 2, b"v"),
        ];
        let got: Vec<(u64, Bytes)> = events(messages)
            .into_iter()
            .map(|m| (m.seq, m.payload))
            .collect();
        assert_eq!(
            got,
            [
                (2, Bytes::from_static(b"a")),
                (6, Bytes::from_static(b"b")),
                (8, Bytes::from_static(b"c")),
                (13, Bytes::from_static(b"tu")),
            ]
        );
    }
}
