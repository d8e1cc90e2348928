//! The messages of a gateway link, one direction at a time, with no I/O: numbering what is
//! sent, noticing what was lost, and getting it sent again.
//!
//! Link messages are core NATS messages, at most once: a slow consumer, a reconnect or a short
//! partition loses one without telling either side. So every message is numbered per
//! direction, and the sender sends a heartbeat every [`HEARTBEAT`] carrying the number of the
//! last message it sent. A message is a tag byte, an 8-byte big-endian sequence number, then:
//!
//! * `F` + a frame body (or the last part of a larger frame),
//! * `P` + a part of a frame larger than one message (more follow),
//! * `C`: the sender closed the link,
//! * `H`: a heartbeat; its sequence is the last one sent (a heartbeat takes no number),
//! * `G`: the answer to a resend request the sender cannot serve: it no longer keeps message
//!   `seq` (or never sent it).
//!
//! `F`, `P` and `C` take the next number (the first message is 1).
//!
//! **Loss is repaired.** The sender keeps the messages it sent, up to [`RESEND_BYTES`]. When
//! the receiver ([`LinkReceiver`]) sees a number skipped, or a heartbeat naming a number it
//! never received, it holds what came after the gap and returns a resend request
//! ([`Received::Resend`], `R` + the first missing number) for the runtime to publish on the
//! sender's resend subject. The sender ([`LinkSender::resend`]) publishes the kept messages
//! again from that number, on the link's subject; the receiver ignores numbers it already has
//! and hands out the held frames in order once the gap is filled. So a lost message costs a
//! round trip, not the link.
//!
//! The receiver counts the link **broken** when the sender answers `G` (the lost messages
//! are no longer kept), when a gap is not filled within [`REPAIR_HEARTBEATS`] heartbeat
//! intervals (the request is sent again once, half way), when more than [`HELD_BYTES`] are
//! held behind a gap, when a heartbeat names a number before the last one received, when a
//! message is not of this format, and when [`SILENT_HEARTBEATS`] heartbeat intervals pass
//! with no message at all.

use std::collections::{BTreeMap, VecDeque};

use bytes::{Bytes, BytesMut};

/// How often each side of an open link sends a heartbeat.
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(1);

/// How many heartbeat intervals without any message break a link.
pub const SILENT_HEARTBEATS: u32 = 5;

/// How many bytes of its latest messages a sender keeps for resending (by default).
pub const RESEND_BYTES: usize = 8 * 1024 * 1024;

/// How many bytes a receiver holds behind a gap before it counts the link broken.
pub const HELD_BYTES: usize = 16 * 1024 * 1024;

/// How many heartbeat intervals a gap may stay open before the link counts as broken.
pub const REPAIR_HEARTBEATS: u32 = 4;

/// Tag byte plus sequence number.
const HEADER: usize = 9;

/// Numbers the messages of one direction of a link and keeps the latest for resending.
#[derive(Debug)]
pub struct LinkSender {
    /// The last sequence number sent (0: none yet).
    last: u64,
    /// The latest messages sent, oldest first: numbers `last - kept.len() + 1 ..= last`.
    kept: VecDeque<Bytes>,
    /// Their total size.
    kept_bytes: usize,
    /// How many bytes to keep at most.
    keep_bytes: usize,
}

impl Default for LinkSender {
    fn default() -> Self {
        LinkSender::keeping(RESEND_BYTES)
    }
}

fn message(tag: u8, seq: u64, rest: &[u8]) -> Bytes {
    let mut message = BytesMut::with_capacity(HEADER + rest.len());
    message.extend_from_slice(&[tag]);
    message.extend_from_slice(&seq.to_be_bytes());
    message.extend_from_slice(rest);
    message.freeze()
}

/// The sequence number of a resend request (`R` + 8 bytes), if it is one.
fn resend_request(request: &[u8]) -> Option<u64> {
    match request {
        [b'R', seq @ ..] if seq.len() == HEADER - 1 => {
            Some(u64::from_be_bytes(seq.try_into().ok()?))
        }
        _ => None,
    }
}

impl LinkSender {
    /// A sender keeping up to `keep_bytes` of its latest messages for resending (0: none).
    pub fn keeping(keep_bytes: usize) -> Self {
        LinkSender {
            last: 0,
            kept: VecDeque::new(),
            kept_bytes: 0,
            keep_bytes,
        }
    }

    /// Numbers and keeps one message.
    fn next(&mut self, tag: u8, rest: &[u8]) -> Bytes {
        self.last += 1;
        let m = message(tag, self.last, rest);
        self.kept_bytes += m.len();
        self.kept.push_back(m.clone());
        while self.kept_bytes > self.keep_bytes {
            match self.kept.pop_front() {
                Some(old) => self.kept_bytes -= old.len(),
                None => break,
            }
        }
        m
    }

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
            .map(|(i, part)| self.next(if i == last { b'F' } else { b'P' }, part))
            .collect()
    }

    /// The heartbeat naming the last message sent.
    pub fn heartbeat(&self) -> Bytes {
        message(b'H', self.last, &[])
    }

    /// The message closing the link.
    pub fn close(&mut self) -> Bytes {
        self.next(b'C', &[])
    }

    /// What to publish again on the link's subject for the receiver's resend `request`
    /// ([`Received::Resend`]): the kept messages from the number it names, or a `G` message
    /// when they are no longer kept (or were never sent). Nothing for a request that is not
    /// one.
    pub fn resend(&self, request: &[u8]) -> Vec<Bytes> {
        let Some(from) = resend_request(request) else {
            return Vec::new();
        };
        let first_kept = self.last + 1 - self.kept.len() as u64;
        if from < first_kept.max(1) || from > self.last {
            return vec![message(b'G', from, &[])];
        }
        self.kept
            .iter()
            .skip((from - first_kept) as usize)
            .cloned()
            .collect()
    }
}

/// What one link message meant to its receiver.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    /// A whole frame body.
    Frame(Bytes),
    /// A part of a larger frame (more follow), a message held behind a gap, a message
    /// received twice, or a heartbeat that matched.
    Nothing,
    /// The sender closed the link.
    Closed,
    /// Messages were lost: publish this resend request on the sender's resend subject (the
    /// sender answers with [`LinkSender::resend`]).
    Resend(Bytes),
    /// Messages were lost and not sent again, or the peer does not speak the link protocol:
    /// the reason.
    Broken(String),
}

/// A gap being repaired.
#[derive(Debug)]
struct Repair {
    /// Heartbeat intervals since the gap was seen.
    ticks: u32,
}

/// Checks the numbers of one direction of a link, gets lost messages sent again, and joins
/// frames split over several messages.
#[derive(Debug)]
pub struct LinkReceiver {
    /// The last sequence number received in order.
    last: u64,
    /// Messages received after a gap, by number.
    held: BTreeMap<u64, Bytes>,
    /// Their total size.
    held_bytes: usize,
    /// The gap being repaired, if any.
    repair: Option<Repair>,
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
            held: BTreeMap::new(),
            held_bytes: 0,
            repair: None,
            parts: BytesMut::new(),
            silent: 0,
            max_frame,
        }
    }

    /// The resend request for everything after the last message received in order.
    fn request(&self) -> Bytes {
        message(b'R', self.last + 1, &[])
    }

    /// Starts repairing a gap: the request to publish.
    fn start_repair(&mut self) -> Received {
        if self.repair.is_some() {
            return Received::Nothing;
        }
        self.repair = Some(Repair { ticks: 0 });
        Received::Resend(self.request())
    }

    /// Takes the next message of the direction. After a message that fills a gap, the frames
    /// held behind it follow from [`LinkReceiver::next_held`]: call it until it returns `None`
    /// after every `push`.
    pub fn push(&mut self, payload: &Bytes) -> Received {
        self.silent = 0;
        if payload.len() < HEADER {
            return Received::Broken("a link message is not of the link protocol".into());
        }
        let tag = payload[0];
        let seq = u64::from_be_bytes(payload[1..HEADER].try_into().expect("8 bytes"));
        match tag {
            b'H' => {
                return match seq {
                    s if s > self.last => self.start_repair(),
                    s if s == self.last => Received::Nothing,
                    s => Received::Broken(format!(
                        "the peer's heartbeat names message {s}, before the last one received \
                         ({})",
                        self.last
                    )),
                }
            }
            b'G' if self.repair.is_some() && seq == self.last + 1 => {
                return Received::Broken(format!(
                    "link messages from {seq} were lost and the peer no longer keeps them"
                ));
            }
            // An answer to an earlier request, already repaired.
            b'G' => return Received::Nothing,
            b'F' | b'P' | b'C' => {}
            _ => return Received::Broken("a link message is not of the link protocol".into()),
        }
        if seq <= self.last {
            // Sent again for a gap already filled.
            return Received::Nothing;
        }
        if seq != self.last + 1 {
            if !self.held.contains_key(&seq) {
                self.held_bytes += payload.len();
                self.held.insert(seq, payload.clone());
            }
            if self.held_bytes > HELD_BYTES {
                return Received::Broken(format!(
                    "link messages from {} were lost and more than {HELD_BYTES} bytes came \
                     after them",
                    self.last + 1
                ));
            }
            return self.start_repair();
        }
        self.take(tag, seq, payload.slice(HEADER..))
    }

    /// The next frame released by a filled gap (see [`LinkReceiver::push`]).
    pub fn next_held(&mut self) -> Option<Received> {
        loop {
            let entry = self.held.first_entry()?;
            if *entry.key() != self.last + 1 {
                if *entry.key() <= self.last {
                    let m = entry.remove();
                    self.held_bytes -= m.len();
                    continue;
                }
                return None;
            }
            let m = entry.remove();
            self.held_bytes -= m.len();
            let got = self.take(m[0], self.last + 1, m.slice(HEADER..));
            if got != Received::Nothing {
                return Some(got);
            }
        }
    }

    /// Takes message `seq` (the next in order), tagged `tag`, with `rest` after its header.
    fn take(&mut self, tag: u8, seq: u64, rest: Bytes) -> Received {
        self.last = seq;
        if self.held.is_empty() {
            // Nothing is held behind a gap any more (a gap a heartbeat named with nothing
            // held closes with its first message; the next heartbeat opens it again if more
            // is missing).
            self.repair = None;
        }
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

    /// One heartbeat interval passed: [`Received::Broken`] when too many passed with no
    /// message or with a gap open, [`Received::Resend`] to ask for a gap again half way,
    /// otherwise [`Received::Nothing`].
    pub fn tick(&mut self) -> Received {
        self.silent += 1;
        if self.silent > SILENT_HEARTBEATS {
            return Received::Broken(format!(
                "no link message or heartbeat for {SILENT_HEARTBEATS} heartbeat intervals"
            ));
        }
        let Some(repair) = &mut self.repair else {
            return Received::Nothing;
        };
        repair.ticks += 1;
        if repair.ticks > REPAIR_HEARTBEATS {
            return Received::Broken(format!(
                "link messages from {} were lost and not sent again within {REPAIR_HEARTBEATS} \
                 heartbeat intervals",
                self.last + 1
            ));
        }
        if repair.ticks == REPAIR_HEARTBEATS / 2 {
            return Received::Resend(self.request());
        }
        Received::Nothing
    }

    /// Whether a gap is being repaired (frames after it are held).
    pub fn repairing(&self) -> bool {
        self.repair.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 16 * 1024 * 1024;

    /// What `receiver` makes of `messages`, the frames a filled gap releases included.
    fn feed(receiver: &mut LinkReceiver, messages: &[Bytes]) -> Vec<Received> {
        let mut out = Vec::new();
        for m in messages {
            out.push(receiver.push(m));
            while let Some(r) = receiver.next_held() {
                out.push(r);
            }
        }
        out
    }

    fn join(messages: &[Bytes]) -> Vec<Received> {
        feed(&mut LinkReceiver::new(MAX), messages)
    }

    fn frames(received: Vec<Received>) -> Vec<Received> {
        received
            .into_iter()
            .filter(|r| matches!(r, Received::Frame(_) | Received::Closed))
            .collect()
    }

    fn broken(r: &Received) -> bool {
        matches!(r, Received::Broken(_))
    }

    fn frame(body: &str) -> Received {
        Received::Frame(Bytes::copy_from_slice(body.as_bytes()))
    }

    #[test]
    fn a_frame_that_fits_is_one_message() {
        let mut sender = LinkSender::default();
        let messages = sender.frame(b"{}", 20);
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].len(), HEADER + 2);
        assert_eq!(join(&messages), [frame("{}")]);
        let mut sender = LinkSender::default();
        assert_eq!(join(&sender.frame(b"", 20)), [frame("")]);
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
        assert_eq!(
            frames(join(&messages)),
            [
                Received::Frame(body.into()),
                frame("next"),
                Received::Closed
            ]
        );
    }

    #[test]
    fn a_lost_message_is_asked_for_again_and_the_frames_after_it_wait_for_it() {
        let mut sender = LinkSender::default();
        let one = sender.frame(b"1", 100);
        let two = sender.frame(b"2", 100);
        let three = sender.frame(b"3", 100);
        let mut receiver = LinkReceiver::new(MAX);
        assert_eq!(feed(&mut receiver, &one), [frame("1")]);
        // 2 is lost: 3 is held, and the receiver asks for everything from 2.
        let asked = feed(&mut receiver, &three);
        let [Received::Resend(request)] = &asked[..] else {
            panic!("{asked:?}");
        };
        assert!(receiver.repairing());
        // The sender publishes 2 and 3 again; 3 is received twice and taken once.
        let again = sender.resend(request);
        assert_eq!(again, [two[0].clone(), three[0].clone()]);
        assert_eq!(
            frames(feed(&mut receiver, &again)),
            [frame("2"), frame("3")]
        );
        assert!(!receiver.repairing());
        let four = sender.frame(b"4", 100);
        assert_eq!(feed(&mut receiver, &four), [frame("4")]);
    }

    #[test]
    fn lost_parts_of_a_split_frame_and_a_lost_close_are_repaired() {
        let mut sender = LinkSender::default();
        let messages = sender.frame(&[7u8; 100], 20);
        let close = sender.close();
        let mut receiver = LinkReceiver::new(MAX);
        let mut lossy = messages.clone();
        lossy.remove(2);
        lossy.push(close);
        let got = feed(&mut receiver, &lossy);
        let Some(Received::Resend(request)) = got.iter().find(|r| matches!(r, Received::Resend(_)))
        else {
            panic!("{got:?}");
        };
        assert!(
            frames(got.clone()).is_empty(),
            "nothing before the gap is filled"
        );
        assert_eq!(
            frames(feed(&mut receiver, &sender.resend(request))),
            [Received::Frame(vec![7u8; 100].into()), Received::Closed]
        );
        // A close lost at the end of a quiet link: only the heartbeat tells.
        let mut sender = LinkSender::default();
        let mut receiver = LinkReceiver::new(MAX);
        let _lost = sender.close();
        let Received::Resend(request) = receiver.push(&sender.heartbeat()) else {
            panic!("the heartbeat names a message never received");
        };
        assert_eq!(
            feed(&mut receiver, &sender.resend(&request)),
            [Received::Closed]
        );
    }

    #[test]
    fn a_gap_the_sender_no_longer_keeps_breaks_the_link() {
        // A sender keeping only its latest message or so.
        let mut sender = LinkSender::keeping(12);
        let mut receiver = LinkReceiver::new(MAX);
        feed(&mut receiver, &sender.frame(b"1", 100));
        let _lost = sender.frame(b"2", 100);
        let three = sender.frame(b"3", 100);
        let Received::Resend(request) = receiver.push(&three[0]) else {
            panic!("a gap");
        };
        let answer = sender.resend(&request);
        assert_eq!(answer.len(), 1);
        assert!(broken(&receiver.push(&answer[0])));
        // A request for messages never sent (a heartbeat naming one) gets the same answer.
        let sender = LinkSender::default();
        assert_eq!(sender.resend(&message(b'R', 1, &[]))[0][0], b'G');
        assert!(sender.resend(b"junk").is_empty());
    }

    #[test]
    fn a_gap_not_filled_in_time_is_asked_again_then_breaks_the_link() {
        let mut sender = LinkSender::default();
        let mut receiver = LinkReceiver::new(MAX);
        let _lost = sender.frame(b"1", 100);
        let Received::Resend(first) = receiver.push(&sender.heartbeat()) else {
            panic!("a gap");
        };
        let mut ticks = Vec::new();
        for _ in 0..=REPAIR_HEARTBEATS {
            // Heartbeats keep coming, so the link is not silent.
            assert_eq!(receiver.push(&sender.heartbeat()), Received::Nothing);
            ticks.push(receiver.tick());
        }
        assert_eq!(
            ticks
                .iter()
                .filter(|t| **t == Received::Resend(first.clone()))
                .count(),
            1,
            "{ticks:?}"
        );
        assert!(broken(ticks.last().unwrap()), "{ticks:?}");
    }

    #[test]
    fn too_much_held_behind_a_gap_breaks_the_link() {
        let mut sender = LinkSender::keeping(0);
        let mut receiver = LinkReceiver::new(MAX);
        let _lost = sender.frame(b"1", usize::MAX);
        let big = vec![0u8; 1024 * 1024];
        let mut results = Vec::new();
        for _ in 0..=HELD_BYTES / big.len() {
            results.push(receiver.push(&sender.frame(&big, usize::MAX)[0]));
        }
        let first = results.iter().position(broken).expect("the link breaks");
        // Held: everything after the gap, until it is over the limit.
        assert_eq!(first + 1, HELD_BYTES / big.len(), "{:?}", &results[..first]);
    }

    #[test]
    fn a_heartbeat_before_the_last_received_breaks_the_link() {
        let mut sender = LinkSender::default();
        let mut receiver = LinkReceiver::new(MAX);
        let stale = sender.heartbeat();
        assert_eq!(receiver.push(&stale), Received::Nothing);
        feed(&mut receiver, &sender.frame(b"1", 100));
        assert_eq!(receiver.push(&sender.heartbeat()), Received::Nothing);
        assert!(broken(&receiver.push(&stale)));
    }

    #[test]
    fn silence_breaks_the_link_and_any_message_resets_it() {
        let sender = LinkSender::default();
        let mut receiver = LinkReceiver::new(MAX);
        for _ in 0..3 {
            for _ in 0..SILENT_HEARTBEATS {
                assert_eq!(receiver.tick(), Received::Nothing);
            }
            assert_eq!(receiver.push(&sender.heartbeat()), Received::Nothing);
        }
        for _ in 0..SILENT_HEARTBEATS {
            assert_eq!(receiver.tick(), Received::Nothing);
        }
        assert!(broken(&receiver.tick()));
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

    #[test]
    fn the_sender_keeps_at_most_its_budget() {
        let mut sender = LinkSender::keeping(100);
        for _ in 0..50 {
            sender.frame(&[1u8; 10], 100);
        }
        assert!(sender.kept_bytes <= 100);
        assert_eq!(sender.kept.len(), 100 / (HEADER + 10));
        // The kept ones are the latest: a request from the oldest kept is served whole.
        let from = sender.last + 1 - sender.kept.len() as u64;
        assert_eq!(
            sender.resend(&message(b'R', from, &[])).len(),
            sender.kept.len()
        );
        assert_eq!(sender.resend(&message(b'R', from - 1, &[]))[0][0], b'G');
    }
}
