//! The owner's side of one link: a relayed client served as a member of its gateway node's
//! relay group. The client's frames come in over the link ([`Inbound`]); the member ends when
//! the gateway closes the link, when the link breaks (a loss not repaired, silence), or when
//! the gateway node's lease is gone (checked every half lease TTL).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::earliest;
use super::inbound::{Inbound, InboundEvent};
use crate::record::NodeIdentity;

/// Why a member's link ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberEnd {
    /// The gateway closed the link (its client is gone).
    Closed,
    /// The link lost a message or went silent: why. The host ends the relayed connection as
    /// when the gateway node dies, and its group tells the gateway node so that the client is
    /// attached again.
    Broken(String),
    /// The gateway node's lease is gone.
    PeerGone,
}

/// What a member hands out.
#[derive(Debug, Clone, PartialEq)]
pub enum MemberEvent {
    /// A frame body of the client, for the host's relayed connection.
    Deliver(Bytes),
    /// Check whether this node's lease still holds its incarnation; answer with
    /// [`MemberLink::handle_lease`].
    CheckLease(NodeIdentity),
    /// The link ended (nothing follows): the relayed connection ends.
    Ended(MemberEnd),
}

/// The owner's side of one link.
#[derive(Debug)]
pub struct MemberLink {
    peer: NodeIdentity,
    inbound: Inbound,
    check_every: Duration,
    /// When the gateway node's lease is checked next (`None` while a check is out or ended).
    next_check: Option<Instant>,
    events: VecDeque<MemberEvent>,
    ended: bool,
}

impl MemberLink {
    /// A link from `peer` accepted at `now`, its lease checked every `check_every`, taking
    /// frames of up to `max_frame` bytes.
    pub fn new(peer: NodeIdentity, check_every: Duration, max_frame: usize, now: Instant) -> Self {
        MemberLink {
            peer,
            inbound: Inbound::new(max_frame, now),
            check_every,
            next_check: Some(now + check_every),
            events: VecDeque::new(),
            ended: false,
        }
    }

    /// The gateway node.
    pub fn peer(&self) -> &NodeIdentity {
        &self.peer
    }

    /// Whether the link ended.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// A link message from the gateway arrived.
    pub fn handle_message(&mut self, payload: &Bytes) {
        self.inbound.handle_message(payload);
        self.pump();
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.inbound.handle_timeout(now);
        self.pump();
        if self.next_check.is_some_and(|due| due <= now) && !self.ended {
            self.next_check = None;
            self.events
                .push_back(MemberEvent::CheckLease(self.peer.clone()));
        }
    }

    /// The answer to [`MemberEvent::CheckLease`] at `now`.
    pub fn handle_lease(&mut self, now: Instant, alive: bool) {
        if self.ended {
            return;
        }
        if alive {
            self.next_check = Some(now + self.check_every);
        } else {
            self.end(MemberEnd::PeerGone);
        }
    }

    fn pump(&mut self) {
        while let Some(event) = self.inbound.poll_event() {
            match event {
                InboundEvent::Frame(body) => self.events.push_back(MemberEvent::Deliver(body)),
                InboundEvent::Closed => self.end(MemberEnd::Closed),
                InboundEvent::Broken(why) => self.end(MemberEnd::Broken(why)),
            }
        }
    }

    fn end(&mut self, end: MemberEnd) {
        if !self.ended {
            self.ended = true;
            self.next_check = None;
            self.events.push_back(MemberEvent::Ended(end));
        }
    }

    /// When [`MemberLink::handle_timeout`] is wanted next; `None` once ended.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.ended {
            return None;
        }
        earliest(self.inbound.poll_timeout(), self.next_check)
    }

    /// The next thing to do.
    pub fn poll_event(&mut self) -> Option<MemberEvent> {
        self.events.pop_front()
    }

    /// The next resend request to publish on the gateway's resend subject.
    pub fn poll_resend_request(&mut self) -> Option<Bytes> {
        self.inbound.poll_resend_request()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link_messages::HEARTBEAT;
    use crate::machines::outbound::Outbound;

    fn peer() -> NodeIdentity {
        NodeIdentity {
            node: "b".into(),
            incarnation: 1,
        }
    }

    fn events(m: &mut MemberLink) -> Vec<MemberEvent> {
        std::iter::from_fn(|| m.poll_event()).collect()
    }

    #[test]
    fn the_clients_frames_are_delivered_until_the_gateway_closes_the_link() {
        let t0 = Instant::now();
        let mut gateway = Outbound::new(t0);
        let mut member = MemberLink::new(peer(), Duration::from_secs(3), 1024, t0);
        gateway.send(b"{}", usize::MAX);
        gateway.close();
        while let Some(m) = gateway.poll_transmit() {
            member.handle_message(&m);
        }
        assert_eq!(
            events(&mut member),
            [
                MemberEvent::Deliver(Bytes::from_static(b"{}")),
                MemberEvent::Ended(MemberEnd::Closed)
            ]
        );
        assert_eq!(member.poll_timeout(), None);
    }

    #[test]
    fn the_gateway_nodes_lease_is_checked_and_its_loss_ends_the_member() {
        let t0 = Instant::now();
        let every = Duration::from_secs(3);
        let mut member = MemberLink::new(peer(), every, 1024, t0);
        let mut gateway = Outbound::new(t0);
        let mut now = t0;
        let mut checks = 0;
        while checks < 2 {
            now += HEARTBEAT;
            gateway.handle_timeout(now);
            while let Some(m) = gateway.poll_transmit() {
                member.handle_message(&m);
            }
            member.handle_timeout(now);
            for event in events(&mut member) {
                assert_eq!(event, MemberEvent::CheckLease(peer()));
                checks += 1;
                member.handle_lease(now, checks < 2);
            }
        }
        assert_eq!(
            events(&mut member),
            [MemberEvent::Ended(MemberEnd::PeerGone)]
        );
        assert!(member.is_ended());
        // Ended once, by the lease.
        let mut member = MemberLink::new(peer(), every, 1024, t0);
        member.handle_timeout(t0 + every);
        assert_eq!(events(&mut member), [MemberEvent::CheckLease(peer())]);
        member.handle_lease(t0 + every, false);
        assert_eq!(
            events(&mut member),
            [MemberEvent::Ended(MemberEnd::PeerGone)]
        );
    }

    #[test]
    fn a_silent_gateway_breaks_the_link() {
        let t0 = Instant::now();
        let mut member = MemberLink::new(peer(), Duration::from_secs(60), 1024, t0);
        for n in 1..=10 {
            member.handle_timeout(t0 + HEARTBEAT * n);
        }
        let got = events(&mut member);
        assert!(
            matches!(&got[..], [MemberEvent::Ended(MemberEnd::Broken(_))]),
            "{got:?}"
        );
    }
}
