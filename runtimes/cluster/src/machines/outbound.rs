//! One sending direction of a link or relay group: frame bodies numbered into link messages
//! ([`crate::link_messages::LinkSender`]), a heartbeat every [`HEARTBEAT`], lost messages
//! published again when the receiver asks, and a close message at the end.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use crate::link_messages::{LinkSender, HEARTBEAT};

/// The sending side of one direction: everything it hands out is published on one subject.
#[derive(Debug)]
pub struct Outbound {
    sender: LinkSender,
    /// When the next heartbeat is due (`None` once closed).
    next_heartbeat: Option<Instant>,
    /// Messages to publish, in order.
    transmit: VecDeque<Bytes>,
    /// Resend requests answered so far.
    resends: u64,
}

impl Outbound {
    /// A direction opened at `now`: its first heartbeat is due at once.
    pub fn new(now: Instant) -> Self {
        Outbound {
            sender: LinkSender::default(),
            next_heartbeat: Some(now),
            transmit: VecDeque::new(),
            resends: 0,
        }
    }

    /// Sends one frame body, split to fit messages of `max_payload` bytes. Nothing once
    /// closed.
    pub fn send(&mut self, body: &[u8], max_payload: usize) {
        if self.next_heartbeat.is_some() {
            self.transmit.extend(self.sender.frame(body, max_payload));
        }
    }

    /// The receiver's resend request arrived (on the direction's resend subject): the kept
    /// messages it asks for are published again, or a `G` message when they are gone.
    pub fn handle_resend_request(&mut self, request: &[u8]) {
        let again = self.sender.resend(request);
        if !again.is_empty() {
            self.resends += 1;
        }
        self.transmit.extend(again);
    }

    /// Time passed: a heartbeat when one is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(due) = self.next_heartbeat.filter(|due| *due <= now) {
            self.transmit.push_back(self.sender.heartbeat());
            // A runner that fell behind sends one heartbeat, not one per missed interval.
            let next = due + HEARTBEAT;
            self.next_heartbeat = Some(if next <= now { now + HEARTBEAT } else { next });
        }
    }

    /// When [`Outbound::handle_timeout`] is wanted next; `None` once closed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_heartbeat
    }

    /// Ends the direction: a close message, and nothing more after it.
    pub fn close(&mut self) {
        if self.next_heartbeat.take().is_some() {
            self.transmit.push_back(self.sender.close());
        }
    }

    /// Whether [`Outbound::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.next_heartbeat.is_none()
    }

    /// The next message to publish on the direction's subject.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.transmit.pop_front()
    }

    /// How many resend requests were answered (lost messages repaired or refused).
    pub fn resends(&self) -> u64 {
        self.resends
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::link_messages::{LinkReceiver, Received};

    fn drain(out: &mut Outbound) -> Vec<Bytes> {
        std::iter::from_fn(|| out.poll_transmit()).collect()
    }

    #[test]
    fn heartbeats_come_every_interval_and_stop_with_the_close() {
        let t0 = Instant::now();
        let mut out = Outbound::new(t0);
        out.handle_timeout(t0);
        assert_eq!(drain(&mut out).len(), 1, "the first heartbeat at once");
        out.handle_timeout(t0 + HEARTBEAT / 2);
        assert!(drain(&mut out).is_empty());
        assert_eq!(out.poll_timeout(), Some(t0 + HEARTBEAT));
        // Far behind: one heartbeat, then the next a whole interval later.
        out.handle_timeout(t0 + HEARTBEAT * 10);
        assert_eq!(drain(&mut out).len(), 1);
        assert_eq!(out.poll_timeout(), Some(t0 + HEARTBEAT * 11));
        out.close();
        out.send(b"late", usize::MAX);
        let closing = drain(&mut out);
        assert_eq!(closing.len(), 1);
        let mut receiver = LinkReceiver::new(1024);
        // The receiver never got message 1.. : only the close, numbered 1.
        assert_eq!(receiver.push(&closing[0]), Received::Closed);
        assert_eq!(out.poll_timeout(), None);
        out.handle_timeout(t0 + Duration::from_secs(100));
        assert!(drain(&mut out).is_empty());
    }

    #[test]
    fn a_resend_request_publishes_the_lost_messages_again() {
        let t0 = Instant::now();
        let mut out = Outbound::new(t0);
        out.send(b"1", usize::MAX);
        out.send(b"2", usize::MAX);
        let sent = drain(&mut out);
        let mut receiver = LinkReceiver::new(1024);
        let Received::Resend(request) = receiver.push(&sent[1]) else {
            panic!("message 1 was lost");
        };
        out.handle_resend_request(&request);
        assert_eq!(drain(&mut out), sent);
        assert_eq!(out.resends(), 1);
        out.handle_resend_request(b"junk");
        assert!(drain(&mut out).is_empty());
        assert_eq!(out.resends(), 1);
    }
}
