//! One receiving direction of a link or relay group: link messages checked and joined into
//! frame bodies ([`crate::link_messages::LinkReceiver`]), lost ones asked for again, and the
//! end: closed by the sender, or broken (a loss not repaired, silence, junk).

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use crate::link_messages::{LinkReceiver, Received, HEARTBEAT};

/// What a receiving direction hands out.
#[derive(Debug, Clone, PartialEq)]
pub enum InboundEvent {
    /// A whole frame body, in order.
    Frame(Bytes),
    /// The sender closed the direction (nothing follows).
    Closed,
    /// The direction broke: why (nothing follows).
    Broken(String),
}

/// The receiving side of one direction.
#[derive(Debug)]
pub struct Inbound {
    receiver: LinkReceiver,
    /// When the current heartbeat interval ends (`None` once ended).
    next_tick: Option<Instant>,
    events: VecDeque<InboundEvent>,
    /// Resend requests to publish on the sender's resend subject.
    requests: VecDeque<Bytes>,
}

impl Inbound {
    /// A direction opened at `now`, taking frames of up to `max_frame` bytes.
    pub fn new(max_frame: usize, now: Instant) -> Self {
        Inbound {
            receiver: LinkReceiver::new(max_frame),
            next_tick: Some(now + HEARTBEAT),
            events: VecDeque::new(),
            requests: VecDeque::new(),
        }
    }

    /// Whether the direction ended (closed or broken).
    pub fn is_ended(&self) -> bool {
        self.next_tick.is_none()
    }

    /// A link message arrived. Nothing happens once the direction ended.
    pub fn handle_message(&mut self, payload: &Bytes) {
        if self.is_ended() {
            return;
        }
        let mut next = Some(self.receiver.push(payload));
        while let Some(received) = next {
            if !self.take(received) {
                return;
            }
            next = self.receiver.next_held();
        }
    }

    /// Time passed: a heartbeat interval that ended counts (silence or an open gap may break
    /// the direction, or ask for the gap again). A runner that fell behind counts one
    /// interval, not every one it missed: its own stall is not the sender's silence.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(due) = self.next_tick.filter(|due| *due <= now) else {
            return;
        };
        let next = due + HEARTBEAT;
        self.next_tick = Some(if next <= now { now + HEARTBEAT } else { next });
        let received = self.receiver.tick();
        self.take(received);
    }

    /// Takes one result of the receiver; `false` once the direction ended.
    fn take(&mut self, received: Received) -> bool {
        match received {
            Received::Frame(body) => self.events.push_back(InboundEvent::Frame(body)),
            Received::Nothing => {}
            Received::Resend(request) => self.requests.push_back(request),
            Received::Closed => self.end(InboundEvent::Closed),
            Received::Broken(why) => self.end(InboundEvent::Broken(why)),
        }
        !self.is_ended()
    }

    fn end(&mut self, event: InboundEvent) {
        self.next_tick = None;
        self.events.push_back(event);
    }

    /// When [`Inbound::handle_timeout`] is wanted next; `None` once ended.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_tick
    }

    /// The next frame, or the end.
    pub fn poll_event(&mut self) -> Option<InboundEvent> {
        self.events.pop_front()
    }

    /// The next resend request to publish on the sender's resend subject.
    pub fn poll_resend_request(&mut self) -> Option<Bytes> {
        self.requests.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link_messages::SILENT_HEARTBEATS;
    use crate::machines::outbound::Outbound;

    fn events(inbound: &mut Inbound) -> Vec<InboundEvent> {
        std::iter::from_fn(|| inbound.poll_event()).collect()
    }

    fn sent(out: &mut Outbound) -> Vec<Bytes> {
        std::iter::from_fn(|| out.poll_transmit()).collect()
    }

    #[test]
    fn heartbeat_silence_breaks_the_direction() {
        let t0 = Instant::now();
        // A stalled runner counts one interval however long it stalled.
        let mut inbound = Inbound::new(1024, t0);
        inbound.handle_timeout(t0 + HEARTBEAT * 100);
        assert!(events(&mut inbound).is_empty());
        let mut inbound = Inbound::new(1024, t0);
        for n in 1..=SILENT_HEARTBEATS {
            inbound.handle_timeout(t0 + HEARTBEAT * n);
        }
        assert!(events(&mut inbound).is_empty());
        inbound.handle_timeout(t0 + HEARTBEAT * (SILENT_HEARTBEATS + 1));
        let got = events(&mut inbound);
        assert!(matches!(&got[..], [InboundEvent::Broken(_)]), "{got:?}");
        assert!(inbound.is_ended());
        assert_eq!(inbound.poll_timeout(), None);
    }

    #[test]
    fn a_gap_in_the_numbers_is_asked_for_and_breaks_the_direction_when_not_filled() {
        let t0 = Instant::now();
        let mut out = Outbound::new(t0);
        let mut inbound = Inbound::new(1024, t0);
        out.send(b"1", usize::MAX);
        out.send(b"2", usize::MAX);
        let messages = sent(&mut out);
        inbound.handle_message(&messages[1]);
        assert!(events(&mut inbound).is_empty(), "2 waits for 1");
        let request = inbound.poll_resend_request().expect("1 is asked for");
        // Heartbeats keep it from being silent, but the gap stays open: it breaks.
        let mut now = t0;
        let mut broke = false;
        for _ in 0..10 {
            now += HEARTBEAT;
            out.handle_timeout(now);
            for m in sent(&mut out) {
                inbound.handle_message(&m);
            }
            inbound.handle_timeout(now);
            broke |= events(&mut inbound)
                .iter()
                .any(|e| matches!(e, InboundEvent::Broken(_)));
        }
        assert!(broke);
        // Repaired in time, both frames come out in order.
        let mut inbound = Inbound::new(1024, t0);
        inbound.handle_message(&messages[1]);
        out.handle_resend_request(&inbound.poll_resend_request().expect("asked"));
        assert_eq!(request, message_one_request());
        for m in sent(&mut out) {
            inbound.handle_message(&m);
        }
        assert_eq!(
            events(&mut inbound),
            [
                InboundEvent::Frame(Bytes::from_static(b"1")),
                InboundEvent::Frame(Bytes::from_static(b"2"))
            ]
        );
    }

    fn message_one_request() -> Bytes {
        let mut request = vec![b'R'];
        request.extend_from_slice(&1u64.to_be_bytes());
        request.into()
    }

    #[test]
    fn nothing_is_taken_after_the_close() {
        let t0 = Instant::now();
        let mut out = Outbound::new(t0);
        let mut inbound = Inbound::new(1024, t0);
        out.send(b"a", usize::MAX);
        out.close();
        for m in sent(&mut out) {
            inbound.handle_message(&m);
        }
        inbound.handle_message(&Bytes::from_static(b"junk"));
        assert_eq!(
            events(&mut inbound),
            [
                InboundEvent::Frame(Bytes::from_static(b"a")),
                InboundEvent::Closed
            ]
        );
    }
}
