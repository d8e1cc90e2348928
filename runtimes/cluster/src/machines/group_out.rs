//! The owner's side of a relay group: the frames of the group connection in its host
//! published toward the gateway node ([`Outbound`]), its members counted, and its end: when
//! the gateway node's lease is gone, or after three checks in a row (every half lease TTL)
//! found no member. [`GroupNames`] keeps the owner's groups by name and refuses openings
//! naming one that ended.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::earliest;
use super::outbound::Outbound;
use crate::record::NodeIdentity;

/// Checks in a row without a member that end a group.
const IDLE_CHECKS: u32 = 3;

/// Why the owner ended a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupEnd {
    /// The gateway node's lease is gone.
    PeerGone,
    /// The group had no member for three checks in a row.
    Idle,
}

/// What the owner's side of a group hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupOutEvent {
    /// Check whether this node's lease still holds its incarnation; answer with
    /// [`GroupOut::handle_lease`].
    CheckLease(NodeIdentity),
    /// The group ended: its connection in the host ends (EOF), which ends the members left;
    /// once the host wrote its last frame, [`GroupOut::close`].
    Ended(GroupEnd),
}

/// The owner's side of one relay group.
#[derive(Debug)]
pub struct GroupOut {
    peer: NodeIdentity,
    outbound: Outbound,
    members: usize,
    idle_checks: u32,
    check_every: Duration,
    /// When the next check is due (`None` while one is out, or once ended).
    next_check: Option<Instant>,
    ended: bool,
    events: VecDeque<GroupOutEvent>,
}

impl GroupOut {
    /// A group to `peer` started at `now`, checked every `check_every`.
    pub fn new(peer: NodeIdentity, check_every: Duration, now: Instant) -> Self {
        GroupOut {
            peer,
            outbound: Outbound::new(now),
            members: 0,
            idle_checks: 0,
            check_every,
            next_check: Some(now + check_every),
            ended: false,
            events: VecDeque::new(),
        }
    }

    /// The gateway node.
    pub fn peer(&self) -> &NodeIdentity {
        &self.peer
    }

    /// Counts a member in (before it is attached); `false` when the group ended.
    pub fn enter(&mut self) -> bool {
        if self.ended {
            return false;
        }
        self.members += 1;
        true
    }

    /// Counts a member out.
    pub fn leave(&mut self) {
        self.members = self.members.saturating_sub(1);
    }

    /// How many members are counted in.
    pub fn members(&self) -> usize {
        self.members
    }

    /// The group ended in the host (its connection is gone): no member may join.
    pub fn end(&mut self) {
        self.ended = true;
        self.next_check = None;
    }

    /// Whether the group ended.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// A frame body the host wrote on the group connection, sent to the gateway node in
    /// messages of up to `max_payload` bytes.
    pub fn send(&mut self, body: &[u8], max_payload: usize) {
        self.outbound.send(body, max_payload);
    }

    /// The gateway node's resend request arrived.
    pub fn handle_resend_request(&mut self, request: &[u8]) {
        self.outbound.handle_resend_request(request);
    }

    /// Time passed: heartbeats, and the check when it is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.outbound.handle_timeout(now);
        if self.next_check.is_some_and(|due| due <= now) {
            self.next_check = None;
            self.events
                .push_back(GroupOutEvent::CheckLease(self.peer.clone()));
        }
    }

    /// The answer to [`GroupOutEvent::CheckLease`] at `now`.
    pub fn handle_lease(&mut self, now: Instant, alive: bool) {
        if self.ended {
            return;
        }
        self.idle_checks = match self.members {
            0 => self.idle_checks + 1,
            _ => 0,
        };
        let end = match (alive, self.idle_checks >= IDLE_CHECKS) {
            (false, _) => GroupEnd::PeerGone,
            (true, true) => GroupEnd::Idle,
            (true, false) => {
                self.next_check = Some(now + self.check_every);
                return;
            }
        };
        self.end();
        self.events.push_back(GroupOutEvent::Ended(end));
    }

    /// The host wrote the group connection's last frame: the gateway node is told the group
    /// is closed.
    pub fn close(&mut self) {
        self.end();
        self.outbound.close();
    }

    /// When [`GroupOut::handle_timeout`] is wanted next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest(self.outbound.poll_timeout(), self.next_check)
    }

    /// The next message to publish on the group's subject.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.outbound.poll_transmit()
    }

    /// The next thing to do.
    pub fn poll_event(&mut self) -> Option<GroupOutEvent> {
        self.events.pop_front()
    }

    /// How many resend requests were answered.
    pub fn resends(&self) -> u64 {
        self.outbound.resends()
    }
}

/// What an opening naming a group finds ([`GroupNames::admit`]).
#[derive(Debug)]
pub enum Admission<'a, G> {
    /// The group is live.
    Live(&'a mut G),
    /// No group has the name: start one ([`GroupNames::insert`]).
    New,
    /// The group ended: the opening is refused (the gateway node starts a new group).
    Refused,
}

/// The owner's groups by name, and the names of those that ended (never reused by their
/// gateway node, so an opening naming one is refused).
#[derive(Debug)]
pub struct GroupNames<G> {
    live: BTreeMap<String, G>,
    ended: BTreeSet<String>,
}

impl<G> Default for GroupNames<G> {
    fn default() -> Self {
        GroupNames {
            live: BTreeMap::new(),
            ended: BTreeSet::new(),
        }
    }
}

/// How many ended names are remembered before they are forgotten.
const ENDED_NAMES: usize = 4096;

impl<G> GroupNames<G> {
    /// What an opening naming group `id` finds; `is_ended` tells a group that ended since it
    /// was inserted (its name is remembered from now on).
    pub fn admit(&mut self, id: &str, is_ended: impl Fn(&G) -> bool) -> Admission<'_, G> {
        if self.live.get(id).is_some_and(&is_ended) {
            self.retire(id);
        }
        if self.ended.contains(id) {
            return Admission::Refused;
        }
        match self.live.get_mut(id) {
            Some(group) => Admission::Live(group),
            None => Admission::New,
        }
    }

    /// Registers a group started for an opening (after [`Admission::New`]); ended groups'
    /// names are moved aside first.
    pub fn insert(&mut self, id: &str, group: G, is_ended: impl Fn(&G) -> bool) {
        let ended: Vec<String> = self
            .live
            .iter()
            .filter(|(_, g)| is_ended(g))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ended {
            self.retire(&id);
        }
        if self.ended.len() > ENDED_NAMES {
            self.ended.clear();
        }
        self.live.insert(id.to_owned(), group);
    }

    /// Group `id` ended: it is dropped and its name refused from now on.
    pub fn retire(&mut self, id: &str) -> Option<G> {
        self.ended.insert(id.to_owned());
        self.live.remove(id)
    }

    /// The live group `id`.
    pub fn get(&self, id: &str) -> Option<&G> {
        self.live.get(id)
    }

    /// The live group `id`, to change.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut G> {
        self.live.get_mut(id)
    }

    /// The live groups' names, in order.
    pub fn ids(&self) -> Vec<String> {
        self.live.keys().cloned().collect()
    }

    /// How many groups are live.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether no group is live.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> NodeIdentity {
        NodeIdentity {
            node: "b".into(),
            incarnation: 7,
        }
    }

    fn events(g: &mut GroupOut) -> Vec<GroupOutEvent> {
        std::iter::from_fn(|| g.poll_event()).collect()
    }

    /// Runs checks every `every` answering `alive`, until the group ends; the checks made.
    fn checks_until_end(g: &mut GroupOut, mut now: Instant, every: Duration, alive: bool) -> u32 {
        for n in 1..100 {
            now += every;
            g.handle_timeout(now);
            for event in events(g) {
                if event == GroupOutEvent::CheckLease(peer()) {
                    g.handle_lease(now, alive);
                }
            }
            if g.is_ended() {
                return n;
            }
        }
        panic!("the group never ended");
    }

    #[test]
    fn a_group_without_members_ends_after_three_checks() {
        let (t0, every) = (Instant::now(), Duration::from_secs(3));
        let mut g = GroupOut::new(peer(), every, t0);
        assert_eq!(checks_until_end(&mut g, t0, every, true), IDLE_CHECKS);
        // A member keeps it; once it leaves, three more checks end it.
        let mut g = GroupOut::new(peer(), every, t0);
        assert!(g.enter());
        for n in 1..=10 {
            let now = t0 + every * n;
            g.handle_timeout(now);
            assert_eq!(events(&mut g), [GroupOutEvent::CheckLease(peer())]);
            g.handle_lease(now, true);
        }
        assert!(!g.is_ended());
        g.leave();
        assert_eq!(checks_until_end(&mut g, t0 + every * 10, every, true), 3);
        assert!(!g.enter(), "no member joins an ended group");
    }

    #[test]
    fn a_group_ends_when_the_gateway_nodes_lease_is_gone() {
        let (t0, every) = (Instant::now(), Duration::from_secs(3));
        let mut g = GroupOut::new(peer(), every, t0);
        assert!(g.enter());
        g.handle_timeout(t0 + every);
        assert_eq!(events(&mut g), [GroupOutEvent::CheckLease(peer())]);
        g.handle_lease(t0 + every, false);
        assert_eq!(events(&mut g), [GroupOutEvent::Ended(GroupEnd::PeerGone)]);
        // Its frames still go out until the host closes it, then the close.
        g.send(b"last", usize::MAX);
        g.close();
        let sent: Vec<Bytes> = std::iter::from_fn(|| g.poll_transmit()).collect();
        assert_eq!(sent.len(), 3, "a heartbeat, the last frame and the close");
        assert_eq!(sent[2][0], b'C');
    }

    #[test]
    fn an_opening_naming_an_ended_group_is_refused() {
        let mut names: GroupNames<bool> = GroupNames::default();
        let ended = |g: &bool| *g;
        assert!(matches!(names.admit("g1", ended), Admission::New));
        names.insert("g1", false, ended);
        assert!(matches!(names.admit("g1", ended), Admission::Live(_)));
        if let Admission::Live(g) = names.admit("g1", ended) {
            *g = true;
        }
        assert!(matches!(names.admit("g1", ended), Admission::Refused));
        assert!(matches!(names.admit("g1", ended), Admission::Refused));
        names.insert("g2", false, ended);
        names.retire("g2");
        assert!(matches!(names.admit("g2", ended), Admission::Refused));
        assert!(names.is_empty());
    }
}
