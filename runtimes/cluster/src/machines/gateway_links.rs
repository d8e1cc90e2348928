//! The gateway node's side of relaying, for every link and relay group of a node: the relay
//! groups it receives from owners (one live group per owner incarnation and dialect, with
//! its members' ends: [`GroupMembers`]) and the links it sends its relayed clients' frames
//! on ([`Outbound`]).
//!
//! A node runs one [`GatewayLinks`] whatever the transport: the tokio runtime over NATS
//! (`link.rs`) and the host simulation over the in-memory engine feed it the same inputs (a
//! live message on a subject it asked for, a client frame for a link, an opening's outcome,
//! the time) and perform what it hands out ([`GatewayEvent`]: publish, subscribe, an owner
//! frame for some links, a link's end). The opening itself (a request to the owner) is the
//! runtime's: between [`GatewayLinks::begin_open`] and its outcome, the group keeps what it
//! broadcasts for the member to come.
//!
//! `L` names one link (a relayed client connection's link to one owner).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use agentwire::host::Dialect;
use bytes::Bytes;

use super::earliest;
use super::group_in::{GroupIn, OwnerFrame};
use super::group_members::{GroupMembers, MembersEvent};
use super::live::LiveIo;
use super::outbound::Outbound;
use super::owner_links::dialect_name;
use crate::layout::Layout;
use crate::record::NodeIdentity;

/// Why a link's owner side ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEnd {
    /// The owner ended the relayed connection, or closed the group.
    Closed,
    /// The owner said the link broke (it lost a message of the client's, or went silent).
    LinkBroke(String),
    /// The group broke (a lost message, silence, junk), or the owner refused it.
    GroupBroke(String),
}

/// Why a group ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEnd {
    /// The owner closed it.
    Closed,
    /// It broke: why.
    Broken(String),
    /// The owner refused an opening naming it (it ended there).
    Refused,
}

/// What the gateway side hands out.
#[derive(Debug, Clone)]
pub enum GatewayEvent<L> {
    /// Subscribe, unsubscribe or publish on the live subjects.
    Live(LiveIo),
    /// One owner frame for these links' clients.
    Frame {
        /// The links (open ones only).
        to: Vec<L>,
        /// The frame.
        frame: OwnerFrame,
    },
    /// The owner side of `link` ended: its client's relayed connection is over there.
    LinkEnded {
        /// The link.
        link: L,
        /// The owner.
        owner: NodeIdentity,
        /// Why.
        end: LinkEnd,
    },
    /// The group `group` from `owner` ended (its links' ends come first).
    GroupEnded {
        /// The group's name.
        group: String,
        /// The owner.
        owner: NodeIdentity,
        /// Why.
        end: GroupEnd,
    },
}

/// One relay group from an owner.
struct Group<L> {
    owner: NodeIdentity,
    dialect: Dialect,
    members: GroupMembers<L>,
    refused: bool,
}

/// One link to an owner.
struct Link {
    subject: String,
    outbound: Outbound,
}

/// The gateway node's side of every link and relay group of one node.
pub struct GatewayLinks<L> {
    layout: Layout,
    me: NodeIdentity,
    max_frame: usize,
    /// Groups by name.
    groups: BTreeMap<String, Group<L>>,
    /// The live group of each owner and dialect.
    live: BTreeMap<(NodeIdentity, &'static str), String>,
    /// Subscribed subjects: a group's messages, or a link's resend requests.
    routes: HashMap<String, Route<L>>,
    links: BTreeMap<L, Link>,
    next_group: u64,
    events: VecDeque<GatewayEvent<L>>,
    resend_requests: u64,
}

enum Route<L> {
    /// A shared name, not a copy: it is looked up for every group message.
    Group(Arc<str>),
    Link(L),
}

impl<L: Clone + Ord + std::fmt::Debug> GatewayLinks<L> {
    /// The gateway side of node `me`, taking group frames of up to `max_frame` bytes, on
    /// `layout`'s subjects.
    pub fn new(layout: Layout, me: NodeIdentity, max_frame: usize) -> Self {
        GatewayLinks {
            layout,
            me,
            max_frame,
            groups: BTreeMap::new(),
            live: BTreeMap::new(),
            routes: HashMap::new(),
            links: BTreeMap::new(),
            next_group: 0,
            events: VecDeque::new(),
            resend_requests: 0,
        }
    }

    /// The live group from `owner` for clients speaking `dialect` (a link opening names it),
    /// started at `now` if there is none: its subject is subscribed
    /// ([`LiveIo::Subscribe`], to perform before the opening is sent).
    pub fn group_to(&mut self, now: Instant, owner: &NodeIdentity, dialect: Dialect) -> String {
        let key = (owner.clone(), dialect_name(dialect));
        if let Some(id) = self.live.get(&key) {
            return id.clone();
        }
        let id = self
            .me
            .group_name(owner, dialect_name(dialect), self.next_group);
        self.next_group += 1;
        let group = Group {
            owner: owner.clone(),
            dialect,
            members: GroupMembers::new(GroupIn::new(self.max_frame, now)),
            refused: false,
        };
        self.groups.insert(id.clone(), group);
        self.live.insert(key, id.clone());
        let subject = self.layout.group_subject(&id);
        self.routes
            .insert(subject.clone(), Route::Group(Arc::from(id.as_str())));
        self.events
            .push_back(GatewayEvent::Live(LiveIo::Subscribe(subject)));
        id
    }

    /// An opening naming `group` is about to be sent: what the group broadcasts until its
    /// outcome ([`GatewayLinks::open_done`]) is kept for the member to come.
    pub fn begin_open(&mut self, group: &str) {
        if let Some(g) = self.groups.get_mut(group) {
            g.members.machine.begin_open();
        }
    }

    /// The opening's outcome is known (answered, refused or lost).
    pub fn open_done(&mut self, group: &str) {
        if let Some(g) = self.groups.get_mut(group) {
            g.members.machine.open_done();
        }
    }

    /// The owner refused an opening naming `group`: it ended there, and ends here (the next
    /// opening starts a new one).
    pub fn refused(&mut self, group: &str) {
        if let Some(g) = self.groups.get_mut(group) {
            g.refused = true;
            g.members.machine.refused();
        }
        self.pump_group(group);
    }

    /// The owner accepted link `link` (named `name`) as its member `member` of `group`: the
    /// link's messages go out from now on. `false` when the group ended meanwhile, or when
    /// the owner named a member the group has already (no link is opened).
    pub fn attach(&mut self, now: Instant, group: &str, member: u64, link: L, name: &str) -> bool {
        let Some(g) = self.groups.get_mut(group) else {
            return false;
        };
        if !g.members.add_member(member, link.clone()) {
            return false;
        }
        let subject = self.layout.link_in_subject(name);
        let resend = self.layout.resend_subject(&subject);
        self.routes
            .insert(resend.clone(), Route::Link(link.clone()));
        self.events
            .push_back(GatewayEvent::Live(LiveIo::Subscribe(resend)));
        let outbound = Outbound::new(now);
        self.links.insert(link, Link { subject, outbound });
        // The broadcasts since the opening was sent.
        self.pump_group(group);
        true
    }

    /// A frame body of `link`'s client for the owner, sent in messages of up to `max_payload`
    /// bytes.
    pub fn send(&mut self, link: &L, body: &[u8], max_payload: usize) {
        if let Some(l) = self.links.get_mut(link) {
            l.outbound.send(body, max_payload);
        }
        self.pump_link(link);
    }

    /// `link`'s client is gone (or relayed elsewhere): the owner is told the link is closed.
    /// Its group still names the member until the owner ends it.
    pub fn close_link(&mut self, link: &L) {
        if let Some(l) = self.links.get_mut(link) {
            l.outbound.close();
        }
        self.pump_link(link);
        if let Some(l) = self.links.remove(link) {
            let resend = self.layout.resend_subject(&l.subject);
            if self.routes.remove(&resend).is_some() {
                self.events
                    .push_back(GatewayEvent::Live(LiveIo::Unsubscribe(resend)));
            }
        }
    }

    /// A live message on `subject` arrived at `now`.
    pub fn handle_message(&mut self, subject: &str, payload: &Bytes) {
        match self.routes.get(subject) {
            Some(Route::Group(id)) => {
                let id = id.clone();
                if let Some(g) = self.groups.get_mut(&*id) {
                    g.members.machine.handle_message(payload);
                }
                self.pump_group(&id);
            }
            Some(Route::Link(link)) => {
                let link = link.clone();
                if let Some(l) = self.links.get_mut(&link) {
                    l.outbound.handle_resend_request(payload);
                    self.resend_requests += 1;
                }
                self.pump_link(&link);
            }
            None => {}
        }
    }

    /// The subscription of `subject` ended (the server dropped it): a group's ends.
    pub fn handle_unsubscribed(&mut self, subject: &str) {
        if let Some(Route::Group(id)) = self.routes.get(subject) {
            let id = id.clone();
            if let Some(g) = self.groups.get_mut(&*id) {
                g.members.machine.handle_unsubscribed();
            }
            self.pump_group(&id);
        }
    }

    /// Time passed: heartbeats, lost messages asked for again, silence.
    pub fn handle_timeout(&mut self, now: Instant) {
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for id in ids {
            if let Some(g) = self.groups.get_mut(&id) {
                g.members.machine.handle_timeout(now);
            }
            self.pump_group(&id);
        }
        let links: Vec<L> = self.links.keys().cloned().collect();
        for link in links {
            if let Some(l) = self.links.get_mut(&link) {
                l.outbound.handle_timeout(now);
            }
            self.pump_link(&link);
        }
    }

    /// When [`GatewayLinks::handle_timeout`] is wanted next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let groups = self
            .groups
            .values()
            .map(|g| g.members.machine.poll_timeout());
        let links = self.links.values().map(|l| l.outbound.poll_timeout());
        groups.chain(links).fold(None, earliest)
    }

    /// The next thing to do.
    pub fn poll_event(&mut self) -> Option<GatewayEvent<L>> {
        self.events.pop_front()
    }

    /// Whether any link or group is open.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty() && self.groups.is_empty()
    }

    /// How many groups and links are open.
    pub fn counts(&self) -> (usize, usize) {
        (self.groups.len(), self.links.len())
    }

    /// Resend requests the links received so far.
    pub fn resend_requests(&self) -> u64 {
        self.resend_requests
    }

    fn pump_link(&mut self, link: &L) {
        let Some(l) = self.links.get_mut(link) else {
            return;
        };
        let subject = || l.subject.clone();
        let next = || l.outbound.poll_transmit();
        LiveIo::queue_each(&mut self.events, GatewayEvent::Live, false, subject, next);
    }

    /// Hands out what group `id` produced.
    fn pump_group(&mut self, id: &str) {
        let Some(g) = self.groups.get_mut(id) else {
            return;
        };
        let layout = &self.layout;
        let resend = || layout.resend_subject(&layout.group_subject(id));
        let next = || g.members.machine.poll_resend_request();
        LiveIo::queue_each(&mut self.events, GatewayEvent::Live, true, resend, next);
        let out = &mut self.events;
        let mut ended = None;
        while let Some(event) = g.members.poll_event() {
            match event {
                MembersEvent::Frame { mut to, frame } => {
                    // Only the links still open (a closed one stays a member until the
                    // owner ends it).
                    to.retain(|l| self.links.contains_key(l));
                    if !to.is_empty() {
                        out.push_back(GatewayEvent::Frame { to, frame });
                    }
                }
                MembersEvent::MemberEnded { member, link_broke } => {
                    let end = link_broke.map_or(LinkEnd::Closed, LinkEnd::LinkBroke);
                    out.push_back(GatewayEvent::LinkEnded {
                        link: member,
                        owner: g.owner.clone(),
                        end,
                    });
                }
                MembersEvent::Ended { members, broken } => {
                    for member in members {
                        let end = broken.clone().map_or(LinkEnd::Closed, LinkEnd::GroupBroke);
                        out.push_back(GatewayEvent::LinkEnded {
                            link: member,
                            owner: g.owner.clone(),
                            end,
                        });
                    }
                    ended = Some(match (g.refused, broken) {
                        (true, _) => GroupEnd::Refused,
                        (false, Some(why)) => GroupEnd::Broken(why),
                        (false, None) => GroupEnd::Closed,
                    });
                }
            }
        }
        if let Some(end) = ended {
            let subject = self.layout.group_subject(id);
            let g = self.groups.remove(id).expect("a group");
            let key = (g.owner.clone(), dialect_name(g.dialect));
            if self.live.get(&key).is_some_and(|l| l == id) {
                self.live.remove(&key);
            }
            if self.routes.remove(&subject).is_some() {
                self.events
                    .push_back(GatewayEvent::Live(LiveIo::Unsubscribe(subject)));
            }
            self.events.push_back(GatewayEvent::GroupEnded {
                group: id.to_owned(),
                owner: g.owner,
                end,
            });
        }
    }
}

impl<L> std::fmt::Debug for GatewayLinks<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayLinks")
            .field("groups", &self.groups.len())
            .field("links", &self.links.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> NodeIdentity {
        NodeIdentity {
            node: "a".into(),
            incarnation: 1,
        }
    }

    fn gateway() -> GatewayLinks<u32> {
        let me = NodeIdentity {
            node: "b".into(),
            incarnation: 1,
        };
        GatewayLinks::new(Layout::default(), me, 1 << 20)
    }

    /// A gateway side with one group from `owner()`, whose member 7 is link 1 (`l1`).
    fn with_member() -> (Instant, GatewayLinks<u32>, String) {
        let t0 = Instant::now();
        let mut links = gateway();
        let group = links.group_to(t0, &owner(), Dialect::CopilotSdk);
        assert!(links.attach(t0, &group, 7, 1, "l1"));
        (t0, links, group)
    }

    fn events(links: &mut GatewayLinks<u32>) -> Vec<GatewayEvent<u32>> {
        std::iter::from_fn(|| links.poll_event()).collect()
    }

    /// The owner's side of `group`: publishes `bodies` as group messages into `links`.
    fn from_owner(
        links: &mut GatewayLinks<u32>,
        owner: &mut Outbound,
        group: &str,
        bodies: &[&[u8]],
    ) {
        let subject = Layout::default().group_subject(group);
        for body in bodies {
            owner.send(body, usize::MAX);
        }
        while let Some(message) = owner.poll_transmit() {
            links.handle_message(&subject, &message);
        }
    }

    /// What the links got: (links, body) of each frame, and each link's end.
    fn got(events: &[GatewayEvent<u32>]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                GatewayEvent::Frame { to, frame } => {
                    Some(format!("{to:?} {}", String::from_utf8_lossy(&frame.body)))
                }
                GatewayEvent::LinkEnded { link, end, .. } => Some(format!("{link} {end:?}")),
                GatewayEvent::GroupEnded { end, .. } => Some(format!("group {end:?}")),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn one_group_per_owner_carries_frames_to_the_links_it_names_and_a_broadcast_to_a_link_being_opened(
    ) {
        let t0 = Instant::now();
        let mut links = gateway();
        let group = links.group_to(t0, &owner(), Dialect::CopilotSdk);
        assert_eq!(links.group_to(t0, &owner(), Dialect::CopilotSdk), group);
        assert_ne!(
            links.group_to(t0, &owner(), Dialect::Acp),
            group,
            "a group per dialect"
        );
        let layout = Layout::default();
        assert!(
            matches!(&events(&mut links)[0], GatewayEvent::Live(LiveIo::Subscribe(s)) if *s == layout.group_subject(&group))
        );
        let mut a = Outbound::new(t0);
        links.begin_open(&group);
        assert!(links.attach(t0, &group, 7, 1, "l1"));
        links.open_done(&group);
        // A second opening: a broadcast sent meanwhile is the new member's too.
        links.begin_open(&group);
        from_owner(&mut links, &mut a, &group, &[b"{\"all\":1}"]);
        assert!(links.attach(t0, &group, 8, 2, "l2"));
        links.open_done(&group);
        from_owner(
            &mut links,
            &mut a,
            &group,
            &[b"@8\n{\"to\":8}", b"@!7\nbye"],
        );
        assert_eq!(
            got(&events(&mut links)),
            [
                "[1] {\"all\":1}",
                "[2] {\"all\":1}",
                "[2] {\"to\":8}",
                "1 Closed"
            ]
        );
        // A link's client frames go out on its subject.
        links.send(&2, b"{}", usize::MAX);
        let out = events(&mut links);
        assert!(
            matches!(&out[..], [GatewayEvent::Live(LiveIo::Publish { subject, .. })] if *subject == layout.link_in_subject("l2")),
            "{out:?}"
        );
    }

    #[test]
    fn a_broken_group_ends_its_links_with_the_reason_and_the_next_opening_starts_a_new_group() {
        let (t0, mut links, group) = with_member();
        events(&mut links);
        // A frame that is no relay frame breaks the group.
        let mut a = Outbound::new(t0);
        from_owner(&mut links, &mut a, &group, &[b"@x\n"]);
        let out = events(&mut links);
        let ends = got(&out);
        assert_eq!(ends.len(), 2, "{ends:?}");
        assert!(ends[0].starts_with("1 GroupBroke("), "{ends:?}");
        assert!(ends[1].starts_with("group Broken("), "{ends:?}");
        assert!(out
            .iter()
            .any(|e| matches!(e, GatewayEvent::Live(LiveIo::Unsubscribe(s)) if *s == Layout::default().group_subject(&group))));
        let next = links.group_to(t0, &owner(), Dialect::CopilotSdk);
        assert_ne!(next, group);
        assert!(
            !links.attach(t0, &group, 8, 2, "l2"),
            "the old group is gone"
        );
    }

    #[test]
    fn an_owner_naming_a_member_twice_does_not_take_the_first_links_frames() {
        let (t0, mut links, group) = with_member();
        assert!(
            !links.attach(t0, &group, 7, 2, "l2"),
            "member 7 is link 1's"
        );
        events(&mut links);
        let mut a = Outbound::new(t0);
        from_owner(&mut links, &mut a, &group, &[b"@7\n{\"to\":7}"]);
        assert_eq!(got(&events(&mut links)), ["[1] {\"to\":7}"]);
    }

    #[test]
    fn a_refused_group_ends_as_refused_and_a_closed_link_gets_no_frame() {
        let (t0, mut links, group) = with_member();
        assert!(links.attach(t0, &group, 8, 2, "l2"));
        links.close_link(&1);
        events(&mut links);
        let mut a = Outbound::new(t0);
        from_owner(&mut links, &mut a, &group, &[b"{\"all\":1}"]);
        assert_eq!(got(&events(&mut links)), ["[2] {\"all\":1}"]);
        links.refused(&group);
        let ends = got(&events(&mut links));
        assert_eq!(ends.len(), 3, "{ends:?}");
        assert!(
            ends.iter().any(|e| e.starts_with("2 GroupBroke(")),
            "{ends:?}"
        );
        assert_eq!(ends[2], "group Refused");
    }

    #[test]
    fn a_lost_group_message_is_asked_for_again() {
        let (t0, mut links, group) = with_member();
        events(&mut links);
        let mut a = Outbound::new(t0);
        a.send(b"{\"lost\":1}", usize::MAX);
        let _lost = a.poll_transmit();
        from_owner(&mut links, &mut a, &group, &[b"{\"next\":1}"]);
        let resend = Layout::default().resend_subject(&Layout::default().group_subject(&group));
        let out = events(&mut links);
        assert!(
            out.iter()
                .any(|e| matches!(e, GatewayEvent::Live(LiveIo::AskAgain { subject, .. }) if *subject == resend)),
            "{out:?}"
        );
    }
}
