//! The messages of a gateway link, one direction at a time, with no I/O: numbering what is
//! sent and noticing what was lost.
//!
//! Link messages are core NATS messages, at most once: a slow consumer, a reconnect or a short
//! partition loses one without telling either side. So every message is numbered per
//! direction, and the sender sends a heartbeat every [`HEARTBEAT`] carrying the number of the
//! last message it sent. A message is a tag byte, an 8-byte big-endian sequence number, then:
//!
//! * `F` + a frame body (or the last part of a larger frame),
//! * `P` + a part of a frame larger than one message (more follow),
//! * `C`: the sender closed the link,
//! * `H`: a heartbeat; its sequence is the last one sent (a heartbeat takes no number).
//!
//! `F`, `P` and `C` take the next number (the first message is 1). The receiver
//! ([`LinkReceiver`]) counts the link **broken** when a number is skipped, when a heartbeat
//! names a number it never received, when a message is not of this format, and when
//! [`SILENT_HEARTBEATS`] heartbeat intervals pass with no message at all.

use bytes::{Bytes, BytesMut};

/// How often each side of an open link sends a heartbeat.
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(1);

/// How many heartbeat intervals without any message break a link.
pub const SILENT_HEARTBEATS: u32 = 5;

/// Tag byte plus sequence number.
const HEADER: usize = 9;

/// Numbers the messages of one direction of a link.
#[derive(Debug, Default)]
pub struct LinkSender {
    /// The last sequence number sent (0: none yet).
    last: u64,
}

fn message(tag: u8, seq: u64, rest: &[u8]) -> Bytes {
    let mut message = BytesMut::with_capacity(HEADER + rest.len());
    message.extend_from_slice(&[tag]);
    message.extend_from_slice(&seq.to_be_bytes());
    message.extend_from_slice(rest);
    message.freeze()
}

impl LinkSender {
    /// The messages carrying `body` when a message may hold `max_payload` bytes: `F` + body
    /// when it fits, otherwise `P` + part for each part but the last and `F` + the last part.
    pub fn frame(&mut self, body: &[u8], max_payload: usize) -> Vec<Bytes> {
        let part_len = max_payload.saturating_sub(HEADER).max(1);
        let parts: Vec<&[u8]> = if body.is_empty() {
            vec![body]
        } else {
            body.chunks(part_len).collect()
        };
        let last = parts.len() - 1;
        parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| {
                self.last += 1;
                message(if i == last { b'F' } else { b'P' }, self.last, part)
            })
            .collect()
    }

    /// The heartbeat naming the last message sent.
    pub fn heartbeat(&self) -> Bytes {
        message(b'H', self.last, &[])
    }

    /// The message closing the link.
    pub fn close(&mut self) -> Bytes {
        self.last += 1;
        message(b'C', self.last, &[])
    }
}

/// What one link message meant to its receiver.
#[derive(Debug, PartialEq)]
pub enum Received {
    /// A whole frame body.
    Frame(Bytes),
    /// A part of a larger frame (more follow), or a heartbeat that matched.
    Nothing,
    /// The sender closed the link.
    Closed,
    /// A message was lost, or the peer does not speak the link protocol: the reason.
    Broken(String),
}

/// Checks the numbers of one direction of a link and joins frames split over several
/// messages.
#[derive(Debug)]
pub struct LinkReceiver {
    /// The last sequence number received.
    last: u64,
    /// Parts of a frame received so far.
    parts: BytesMut,
    /// Heartbeat intervals since the last message.
    silent: u32,
    /// The largest frame accepted (a peer cannot grow one without bound).
    max_frame: usize,
}

impl LinkReceiver {
    /// A receiver accepting frames of up to `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        LinkReceiver {
            last: 0,
            parts: BytesMut::new(),
            silent: 0,
            max_frame,
        }
    }

    /// Takes the next message of the direction.
    pub fn push(&mut self, payload: &Bytes) -> Received {
        self.silent = 0;
        if payload.len() < HEADER {
            return Received::Broken("a link message is not of the link protocol".into());
        }
        let tag = payload[0];
        let seq = u64::from_be_bytes(payload[1..HEADER].try_into().expect("8 bytes"));
        let rest = payload.slice(HEADER..);
        if tag == b'H' {
            return match seq {
                s if s == self.last => Received::Nothing,
                s if s > self.last => Received::Broken(format!(
                    "link messages {}..={s} were lost (the peer's heartbeat names {s})",
                    self.last + 1
                )),
                s => Received::Broken(format!(
                    "the peer's heartbeat names message {s}, before the last one received ({})",
                    self.last
                )),
            };
        }
        if !matches!(tag, b'F' | b'P' | b'C') {
            return Received::Broken("a link message is not of the link protocol".into());
        }
        if seq != self.last.wrapping_add(1) {
            return Received::Broken(format!(
                "link message {} was lost (message {seq} came next)",
                self.last + 1
            ));
        }
        self.last = seq;
        if self.parts.len() + rest.len() > self.max_frame {
            return Received::Broken("a relayed frame is larger than the frame limit".into());
        }
        match tag {
            b'C' => Received::Closed,
            b'P' => {
                self.parts.extend_from_slice(&rest);
                Received::Nothing
            }
            _ if self.parts.is_empty() => Received::Frame(rest),
            _ => {
                self.parts.extend_from_slice(&rest);
                Received::Frame(std::mem::take(&mut self.parts).freeze())
            }
        }
    }

    /// One heartbeat interval passed; the reason the link is broken when too many passed with
    /// no message.
    pub fn tick(&mut self) -> Option<String> {
        self.silent += 1;
        (self.silent > SILENT_HEARTBEATS).then(|| {
            format!(
                "no link message or heartbeat for {} heartbeat intervals",
                SILENT_HEARTBEATS
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 16 * 1024 * 1024;

    fn join(messages: &[Bytes]) -> Vec<Received> {
        let mut receiver = LinkReceiver::new(MAX);
        messages.iter().map(|m| receiver.push(m)).collect()
    }

    fn broken(r: &Received) -> bool {
        matches!(r, Received::Broken(_))
    }

    #[test]
    fn a_frame_that_fits_is_one_message() {
        let mut sender = LinkSender::default();
        let messages = sender.frame(b"{}", 20);
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].len(), HEADER + 2);
        assert_eq!(
            join(&messages),
            [Received::Frame(Bytes::from_static(b"{}"))]
        );
        let mut sender = LinkSender::default();
        assert_eq!(
            join(&sender.frame(b"", 20)),
            [Received::Frame(Bytes::new())]
        );
    }

    #[test]
    fn a_larger_frame_is_split_to_fit_and_joined_in_order() {
        let body: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        for max_payload in [2, 10, 1000, 10_008, 10_009, 10_010] {
            let mut sender = LinkSender::default();
            let messages = sender.frame(&body, max_payload);
            assert!(
                messages
                    .iter()
                    .all(|m| m.len() <= max_payload.max(HEADER + 1)),
                "{max_payload}"
            );
            let mut received = join(&messages);
            assert_eq!(received.pop(), Some(Received::Frame(body.clone().into())));
            assert!(
                received.iter().all(|r| *r == Received::Nothing),
                "{max_payload}"
            );
        }
        let mut sender = LinkSender::default();
        let mut messages = sender.frame(&body, 3000);
        messages.extend(sender.frame(b"next", 3000));
        messages.push(sender.heartbeat());
        messages.push(sender.close());
        let frames: Vec<Received> = join(&messages)
            .into_iter()
            .filter(|r| *r != Received::Nothing)
            .collect();
        assert_eq!(
            frames,
            [
                Received::Frame(body.into()),
                Received::Frame(Bytes::from_static(b"next")),
                Received::Closed
            ]
        );
    }

    #[test]
    fn a_skipped_sequence_breaks_the_link() {
        let mut sender = LinkSender::default();
        let first = sender.frame(b"1", 100);
        let _lost = sender.frame(b"2", 100);
        let third = sender.frame(b"3", 100);
        let mut receiver = LinkReceiver::new(MAX);
        assert_eq!(receiver.push(&first[0]), Received::Frame("1".into()));
        assert!(broken(&receiver.push(&third[0])));
        // A lost part of a split frame too.
        let mut sender = LinkSender::default();
        let mut messages = sender.frame(&[7u8; 100], 20);
        messages.remove(2);
        assert!(join(&messages).iter().any(broken));
        // And a lost close.
        let mut sender = LinkSender::default();
        let _lost = sender.frame(b"x", 100);
        assert!(broken(&join(&[sender.close()])[0]));
    }

    #[test]
    fn a_heartbeat_beyond_the_last_received_breaks_the_link() {
        let mut sender = LinkSender::default();
        let mut receiver = LinkReceiver::new(MAX);
        assert_eq!(receiver.push(&sender.heartbeat()), Received::Nothing);
        let first = sender.frame(b"1", 100);
        assert_eq!(receiver.push(&first[0]), Received::Frame("1".into()));
        assert_eq!(receiver.push(&sender.heartbeat()), Received::Nothing);
        // The last message before a quiet spell is lost: only the heartbeat tells.
        let _lost = sender.frame(b"2", 100);
        assert!(broken(&receiver.push(&sender.heartbeat())));
    }

    #[test]
    fn silence_breaks_the_link_and_any_message_resets_it() {
        let sender = LinkSender::default();
        let mut receiver = LinkReceiver::new(MAX);
        for _ in 0..3 {
            for _ in 0..SILENT_HEARTBEATS {
                assert_eq!(receiver.tick(), None);
            }
            assert_eq!(receiver.push(&sender.heartbeat()), Received::Nothing);
        }
        for _ in 0..SILENT_HEARTBEATS {
            assert_eq!(receiver.tick(), None);
        }
        assert!(receiver.tick().is_some());
    }

    #[test]
    fn garbage_and_oversized_frames_break_the_link() {
        assert!(broken(&join(&[Bytes::from_static(b"C")])[0]));
        assert!(broken(&join(&[Bytes::new()])[0]));
        assert!(broken(&join(&[message(b'X', 1, b"junk")])[0]));
        let mut sender = LinkSender::default();
        let messages = sender.frame(&[0u8; 5000], 1000);
        let mut receiver = LinkReceiver::new(4096);
        let results: Vec<Received> = messages.iter().map(|m| receiver.push(m)).collect();
        assert!(
            results.iter().any(broken),
            "a peer cannot grow a frame without bound"
        );
    }
}
