//! The owner's side of relaying, for every link and relay group of a node: the link openings
//! it accepts, the relayed clients it serves as members of their gateway node's relay group
//! ([`MemberLink`]), and those groups ([`GroupOut`], by name in [`GroupNames`]).
//!
//! A node runs one [`OwnerLinks`] whatever the transport: the tokio runtime over NATS
//! (`link.rs`) and the host simulation over the in-memory engine feed it the same inputs (an
//! opening, a live message on a subject it asked for, a frame the host wrote on a group
//! connection, a lease check's answer, the time) and perform what it hands out
//! ([`OwnerEvent`]: publish, subscribe, check a lease, a frame for the host, an end). Opening
//! the host's connections is the one synchronous call out, through [`RelayHost`].
//!
//! `C` is the host's connection id.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire::host::Dialect;
use bytes::Bytes;

use super::earliest;
use super::group_out::{Admission, GroupEnd, GroupNames, GroupOut, GroupOutEvent};
use super::live::LiveIo;
use super::member::{MemberEnd, MemberEvent, MemberLink};
use crate::layout::Layout;
use crate::record::NodeIdentity;

/// A link opening from a gateway node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    /// The link's name (a subject token).
    pub link: String,
    /// The gateway node.
    pub peer: NodeIdentity,
    /// The relay group the member joins, named by the gateway node.
    pub group: String,
    /// The client's dialect (a group carries one dialect).
    pub dialect: Dialect,
    /// The gateway node authenticated the client.
    pub authenticated: bool,
}

impl Opening {
    /// The opening as the gateway node sends it, with `handshake`, the requests that set the
    /// client's connection up there (replayed on the owner first).
    pub fn request(&self, handshake: &[String]) -> serde_json::Value {
        serde_json::json!({
            "link": self.link, "node": self.peer.node, "incarnation": self.peer.incarnation,
            "authenticated": self.authenticated, "group": self.group,
            "dialect": dialect_name(self.dialect), "handshake": handshake,
        })
    }

    /// The opening a request carries, and its handshake; `None` when it is not one (a name
    /// that is no subject token, an unknown dialect, a field missing).
    pub fn read(open: &serde_json::Value) -> Option<(Opening, Vec<Bytes>)> {
        let (Some(link), Some(peer), Some(incarnation), Some(group)) = (
            open["link"].as_str(),
            open["node"].as_str(),
            open["incarnation"].as_u64(),
            open["group"].as_str(),
        ) else {
            return None;
        };
        if !is_token(link) || !is_token(group) {
            return None;
        }
        let dialect = dialect_named(open["dialect"].as_str())?;
        // The set-up requests (one string, from a node before they were a list).
        let handshake: Vec<Bytes> = match &open["handshake"] {
            serde_json::Value::String(one) => vec![Bytes::from(one.clone())],
            serde_json::Value::Array(all) => all
                .iter()
                .filter_map(|h| h.as_str())
                .map(|h| Bytes::from(h.to_owned()))
                .collect(),
            _ => Vec::new(),
        };
        let opening = Opening {
            link: link.to_owned(),
            peer: NodeIdentity {
                node: peer.to_owned(),
                incarnation,
            },
            group: group.to_owned(),
            dialect,
            authenticated: open["authenticated"] == true,
        };
        Some((opening, handshake))
    }
}

/// Whether `name` is usable as a subject token of a link or group.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// How a link opening (and a group's name) names a dialect.
pub fn dialect_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::CopilotSdk => "copilot",
        Dialect::Acp => "acp",
        Dialect::Ahp => "ahp",
        // Never relayed: its requests name no session the lookup could follow.
        Dialect::ClientTools => "client-tools",
    }
}

/// The dialect a link opening names (the Copilot SDK protocol when it names none).
fn dialect_named(name: Option<&str>) -> Option<Dialect> {
    match name {
        None | Some("copilot") => Some(Dialect::CopilotSdk),
        Some("acp") => Some(Dialect::Acp),
        Some("ahp") => Some(Dialect::Ahp),
        Some(_) => None,
    }
}

/// Why an opening was refused; the gateway node starts a new group and tries again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The group ended here (or speaks another dialect), or its connection is gone from the
    /// host.
    Group,
    /// The host cannot open a connection (it is shutting down).
    HostGone,
    /// A link of that name is served already (link names are the gateway node's, never
    /// reused).
    LinkInUse,
}

/// The host's connections, as the owner side opens them.
pub trait RelayHost<C> {
    /// Opens the connection of relay group `group`, speaking `dialect`, counted as
    /// authenticated (it never sends a request); `None` when the host is gone.
    fn open_group(&mut self, group: &str, dialect: Dialect) -> Option<C>;
    /// Opens the relayed client's connection, authenticated when `authenticated`, and makes
    /// it a member of the group connection `group`; `None` when the host is gone or the
    /// group connection is (the member opened is ended again by the implementation).
    fn open_member(&mut self, dialect: Dialect, authenticated: bool, group: C) -> Option<C>;
}

/// What the owner side hands out.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnerEvent<C> {
    /// Subscribe, unsubscribe or publish on the live subjects.
    Live(LiveIo),
    /// Check whether `peer`'s lease still holds its incarnation; answer with
    /// [`OwnerLinks::handle_lease`].
    CheckLease(NodeIdentity),
    /// A frame body of the relayed client, for its connection `member` in the host.
    Deliver {
        /// The member's connection.
        member: C,
        /// The frame body.
        body: Bytes,
    },
    /// The link of `member` ended: when it broke, the host is told
    /// (`ClusterApi::relay_member_link_broke`, so its group tells the gateway node); then
    /// the connection ends (EOF).
    MemberEnded {
        /// The member's connection.
        member: C,
        /// The link's name.
        link: String,
        /// Why.
        end: MemberEnd,
    },
    /// The group on connection `conn` ended here: the connection ends (EOF), which ends the
    /// members left; its frames are still published until the host's last one
    /// ([`OwnerLinks::handle_group_closed`]).
    GroupEnded {
        /// The group connection.
        conn: C,
        /// The group's name.
        group: String,
        /// Why.
        end: GroupEnd,
    },
}

/// One relayed client.
struct Member {
    link: String,
    group: String,
    machine: MemberLink,
}

/// One relay group.
struct Group<C> {
    conn: C,
    dialect: Dialect,
    machine: GroupOut,
}

/// Where a subscribed subject's messages go.
enum Route<C> {
    /// A member's link messages.
    Member(C),
    /// A group's resend requests.
    Group(String),
}

/// Who asked for a lease check.
#[derive(Clone)]
enum Asker<C> {
    Member(C),
    Group(String),
}

/// The owner's side of every link and relay group of one node.
pub struct OwnerLinks<C> {
    layout: Layout,
    check_every: Duration,
    max_frame: usize,
    members: BTreeMap<C, Member>,
    /// Groups by name, from their start until the host wrote their last frame.
    groups: BTreeMap<String, Group<C>>,
    /// Group names by connection.
    group_conns: BTreeMap<C, Arc<str>>,
    /// Which names are live and which ended (an opening naming one is refused).
    names: GroupNames<String>,
    routes: HashMap<String, Route<C>>,
    /// Lease checks out, by peer: who asked.
    checks: BTreeMap<NodeIdentity, Vec<Asker<C>>>,
    events: VecDeque<OwnerEvent<C>>,
    groups_started: u64,
    resend_requests: u64,
}

impl<C: Copy + Ord + std::fmt::Debug> OwnerLinks<C> {
    /// An owner side whose links and groups check their peer's lease every `check_every` and
    /// take frames of up to `max_frame` bytes, on `layout`'s subjects.
    pub fn new(layout: Layout, check_every: Duration, max_frame: usize) -> Self {
        OwnerLinks {
            layout,
            check_every,
            max_frame,
            members: BTreeMap::new(),
            groups: BTreeMap::new(),
            group_conns: BTreeMap::new(),
            names: GroupNames::default(),
            routes: HashMap::new(),
            checks: BTreeMap::new(),
            events: VecDeque::new(),
            groups_started: 0,
            resend_requests: 0,
        }
    }

    /// Accepts `opening` at `now`: its group is started when it is new (its connection opened
    /// in `host`), and the relayed client's connection opened as a member of it. Answers the
    /// member's connection (the opening's answer names it); the link's messages are
    /// subscribed ([`LiveIo::Subscribe`], to perform before answering).
    pub fn accept(
        &mut self,
        now: Instant,
        opening: &Opening,
        host: &mut impl RelayHost<C>,
    ) -> Result<C, Refused> {
        let subject = self.layout.link_in_subject(&opening.link);
        if self.routes.contains_key(&subject) {
            return Err(Refused::LinkInUse);
        }
        let groups = &self.groups;
        let ended = |id: &String| groups.get(id).is_none_or(|g| g.machine.is_ended());
        let group_conn = match self.names.admit(&opening.group, ended) {
            Admission::Refused => return Err(Refused::Group),
            Admission::Live(id) => {
                let group = &self.groups[id];
                // A group carries one dialect, to the one gateway node that named it.
                if group.dialect != opening.dialect || group.machine.peer() != &opening.peer {
                    return Err(Refused::Group);
                }
                group.conn
            }
            Admission::New => {
                let conn = host
                    .open_group(&opening.group, opening.dialect)
                    .ok_or(Refused::HostGone)?;
                let machine = GroupOut::new(opening.peer.clone(), self.check_every, now);
                let group = Group {
                    conn,
                    dialect: opening.dialect,
                    machine,
                };
                let id = opening.group.clone();
                self.groups.insert(id.clone(), group);
                self.group_conns.insert(conn, Arc::from(id.as_str()));
                let groups = &self.groups;
                let ended = |id: &String| groups.get(id).is_none_or(|g| g.machine.is_ended());
                self.names.insert(&id, id.clone(), ended);
                self.groups_started += 1;
                let resend = self.resend_subject_of_group(&opening.group);
                self.subscribe(resend, Route::Group(opening.group.clone()));
                conn
            }
        };
        let group = self.groups.get_mut(&opening.group).expect("admitted");
        if !group.machine.enter() {
            return Err(Refused::Group);
        }
        let Some(member) = host.open_member(opening.dialect, opening.authenticated, group_conn)
        else {
            // The group connection is gone from the host: the peer starts a new group.
            group.machine.leave();
            group.machine.end();
            return Err(Refused::Group);
        };
        let machine = MemberLink::new(opening.peer.clone(), self.check_every, self.max_frame, now);
        self.members.insert(
            member,
            Member {
                link: opening.link.clone(),
                group: opening.group.clone(),
                machine,
            },
        );
        self.subscribe(subject, Route::Member(member));
        Ok(member)
    }

    /// A live message on `subject` (one [`LiveIo::Subscribe`] named) arrived at `now`.
    pub fn handle_message(&mut self, now: Instant, subject: &str, payload: &Bytes) {
        match self.routes.get(subject) {
            Some(Route::Member(member)) => {
                let member = *member;
                if let Some(m) = self.members.get_mut(&member) {
                    m.machine.handle_message(payload);
                }
                self.pump_member(now, member);
            }
            Some(Route::Group(id)) => {
                let id = id.clone();
                if let Some(group) = self.groups.get_mut(&id) {
                    group.machine.handle_resend_request(payload);
                    self.resend_requests += 1;
                }
                self.pump_group(now, &id);
            }
            None => {}
        }
    }

    /// The host wrote `body` on the group connection `conn`; it travels in messages of up to
    /// `max_payload` bytes.
    pub fn handle_group_frame(&mut self, now: Instant, conn: C, body: &[u8], max_payload: usize) {
        // A shared name, not a copy: this runs for every frame the group carries.
        if let Some(id) = self.group_conns.get(&conn).cloned() {
            if let Some(group) = self.groups.get_mut(&*id) {
                group.machine.send(body, max_payload);
            }
            self.pump_group(now, &id);
        }
    }

    /// The host is closing the group connection `conn` (it fell behind): no member joins it
    /// any more; its last frames follow, then [`OwnerLinks::handle_group_closed`].
    pub fn handle_group_closing(&mut self, conn: C) {
        if let Some(id) = self.group_conns.get(&conn) {
            if let Some(group) = self.groups.get_mut(&**id) {
                group.machine.end();
            }
        }
    }

    /// The host wrote the group connection's last frame: the gateway node is told the group
    /// is closed, and its name is refused from now on.
    pub fn handle_group_closed(&mut self, now: Instant, conn: C) {
        let Some(id) = self.group_conns.remove(&conn) else {
            return;
        };
        self.pump_group(now, &id);
        self.names.retire(&id);
        if let Some(mut group) = self.groups.remove(&*id) {
            group.machine.close();
            let subject = || self.layout.group_subject(&id);
            let next = || group.machine.poll_transmit();
            LiveIo::queue_each(&mut self.events, OwnerEvent::Live, false, subject, next);
        }
        let resend = self.resend_subject_of_group(&id);
        self.unsubscribe(resend);
    }

    /// The host ended the member's connection `member` (its client is gone from the host):
    /// it leaves its group, and its link's messages are no longer received.
    pub fn handle_member_closed(&mut self, member: C) {
        if let Some(m) = self.members.remove(&member) {
            self.forget_member(m);
        }
    }

    /// The answer to [`OwnerEvent::CheckLease`] for `peer`, at `now`.
    pub fn handle_lease(&mut self, now: Instant, peer: &NodeIdentity, alive: bool) {
        for asker in self.checks.remove(peer).unwrap_or_default() {
            match asker {
                Asker::Member(member) => {
                    if let Some(m) = self.members.get_mut(&member) {
                        m.machine.handle_lease(now, alive);
                    }
                    self.pump_member(now, member);
                }
                Asker::Group(id) => {
                    if let Some(group) = self.groups.get_mut(&id) {
                        group.machine.handle_lease(now, alive);
                    }
                    self.pump_group(now, &id);
                }
            }
        }
    }

    /// Time passed: heartbeats, lost messages asked for again, silence, lease checks due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let members: Vec<C> = self.members.keys().copied().collect();
        for member in members {
            if let Some(m) = self.members.get_mut(&member) {
                m.machine.handle_timeout(now);
            }
            self.pump_member(now, member);
        }
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for id in ids {
            if let Some(group) = self.groups.get_mut(&id) {
                group.machine.handle_timeout(now);
            }
            self.pump_group(now, &id);
        }
    }

    /// When [`OwnerLinks::handle_timeout`] is wanted next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let members = self.members.values().map(|m| m.machine.poll_timeout());
        let groups = self.groups.values().map(|g| g.machine.poll_timeout());
        members.chain(groups).fold(None, earliest)
    }

    /// The next thing to do.
    pub fn poll_event(&mut self) -> Option<OwnerEvent<C>> {
        self.events.pop_front()
    }

    /// Whether `conn` is a relayed client's connection whose group is live: everything the
    /// host writes for it travels in the group (a frame written to the member itself would
    /// be lost; only a member whose group ended gets its own farewell).
    pub fn is_member_of_live_group(&self, conn: C) -> bool {
        self.members.get(&conn).is_some_and(|m| {
            self.groups
                .get(&m.group)
                .is_some_and(|g| !g.machine.is_ended())
        })
    }

    /// Whether `conn` is a relayed client's connection.
    pub fn is_member(&self, conn: C) -> bool {
        self.members.contains_key(&conn)
    }

    /// The name of the group whose connection is `conn`, until the host wrote its last frame.
    pub fn group_of(&self, conn: C) -> Option<String> {
        self.group_conns.get(&conn).map(|id| id.to_string())
    }

    /// Whether any link or group is served.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.groups.is_empty()
    }

    /// Relay groups started so far.
    pub fn groups_started(&self) -> u64 {
        self.groups_started
    }

    /// Resend requests the groups received so far.
    pub fn resend_requests(&self) -> u64 {
        self.resend_requests
    }

    fn subscribe(&mut self, subject: String, route: Route<C>) {
        self.routes.insert(subject.clone(), route);
        self.events
            .push_back(OwnerEvent::Live(LiveIo::Subscribe(subject)));
    }

    fn unsubscribe(&mut self, subject: String) {
        if self.routes.remove(&subject).is_some() {
            self.events
                .push_back(OwnerEvent::Live(LiveIo::Unsubscribe(subject)));
        }
    }

    fn resend_subject_of_group(&self, id: &str) -> String {
        self.layout.resend_subject(&self.layout.group_subject(id))
    }

    fn ask_lease(&mut self, peer: NodeIdentity, asker: Asker<C>) {
        let askers = self.checks.entry(peer.clone()).or_default();
        if askers.is_empty() {
            self.events.push_back(OwnerEvent::CheckLease(peer));
        }
        askers.push(asker);
    }

    /// Hands out what member `member`'s machine produced.
    fn pump_member(&mut self, _now: Instant, member: C) {
        let Some(m) = self.members.get_mut(&member) else {
            return;
        };
        let layout = &self.layout;
        let resend = || layout.resend_subject(&layout.link_in_subject(&m.link));
        let next = || m.machine.poll_resend_request();
        LiveIo::queue_each(&mut self.events, OwnerEvent::Live, true, resend, next);
        let mut ended = None;
        let mut checks = Vec::new();
        while let Some(event) = m.machine.poll_event() {
            match event {
                MemberEvent::Deliver(body) => {
                    self.events.push_back(OwnerEvent::Deliver { member, body })
                }
                MemberEvent::CheckLease(peer) => checks.push(peer),
                MemberEvent::Ended(end) => ended = Some(end),
            }
        }
        for peer in checks {
            self.ask_lease(peer, Asker::Member(member));
        }
        if let Some(end) = ended {
            let m = self.members.remove(&member).expect("a member");
            let link = m.link.clone();
            self.forget_member(m);
            self.events
                .push_back(OwnerEvent::MemberEnded { member, link, end });
        }
    }

    fn forget_member(&mut self, m: Member) {
        if let Some(group) = self.groups.get_mut(&m.group) {
            group.machine.leave();
        }
        let subject = self.layout.link_in_subject(&m.link);
        self.unsubscribe(subject);
    }

    /// Hands out what group `id`'s machine produced.
    fn pump_group(&mut self, _now: Instant, id: &str) {
        let Some(group) = self.groups.get_mut(id) else {
            return;
        };
        let subject = || self.layout.group_subject(id);
        let next = || group.machine.poll_transmit();
        LiveIo::queue_each(&mut self.events, OwnerEvent::Live, false, subject, next);
        let mut checks = Vec::new();
        let mut ended = None;
        while let Some(event) = group.machine.poll_event() {
            match event {
                GroupOutEvent::CheckLease(peer) => checks.push(peer),
                GroupOutEvent::Ended(end) => ended = Some(end),
            }
        }
        let conn = group.conn;
        for peer in checks {
            self.ask_lease(peer, Asker::Group(id.to_owned()));
        }
        if let Some(end) = ended {
            self.events.push_back(OwnerEvent::GroupEnded {
                conn,
                group: id.to_owned(),
                end,
            });
        }
    }
}

impl<C> std::fmt::Debug for OwnerLinks<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerLinks")
            .field("members", &self.members.len())
            .field("groups", &self.groups.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machines::outbound::Outbound;

    /// A host whose connections are numbered; `gone` groups refuse members.
    #[derive(Default)]
    struct Host {
        next: u32,
        groups: Vec<u32>,
        gone: Vec<u32>,
    }

    impl RelayHost<u32> for Host {
        fn open_group(&mut self, _group: &str, _dialect: Dialect) -> Option<u32> {
            self.next += 1;
            self.groups.push(self.next);
            Some(self.next)
        }

        fn open_member(&mut self, _: Dialect, _: bool, group: u32) -> Option<u32> {
            self.next += 1;
            (!self.gone.contains(&group)).then_some(self.next)
        }
    }

    fn peer() -> NodeIdentity {
        NodeIdentity {
            node: "b".into(),
            incarnation: 1,
        }
    }

    fn opening(link: &str, group: &str) -> Opening {
        Opening {
            link: link.into(),
            peer: peer(),
            group: group.into(),
            dialect: Dialect::CopilotSdk,
            authenticated: false,
        }
    }

    fn events(links: &mut OwnerLinks<u32>) -> Vec<OwnerEvent<u32>> {
        std::iter::from_fn(|| links.poll_event()).collect()
    }

    fn owner() -> OwnerLinks<u32> {
        OwnerLinks::new(Layout::default(), Duration::from_secs(3), 1024)
    }

    #[test]
    fn openings_naming_one_group_share_its_connection_and_an_ended_group_is_refused() {
        let t0 = Instant::now();
        let (mut links, mut host) = (owner(), Host::default());
        let a = links.accept(t0, &opening("l1", "g1"), &mut host).unwrap();
        let b = links.accept(t0, &opening("l2", "g1"), &mut host).unwrap();
        assert_eq!(host.groups.len(), 1, "one group connection for both");
        let layout = Layout::default();
        let subscribed: Vec<_> = events(&mut links);
        assert_eq!(
            subscribed,
            [
                OwnerEvent::Live(LiveIo::Subscribe(
                    layout.resend_subject(&layout.group_subject("g1"))
                )),
                OwnerEvent::Live(LiveIo::Subscribe(layout.link_in_subject("l1"))),
                OwnerEvent::Live(LiveIo::Subscribe(layout.link_in_subject("l2"))),
            ]
        );
        assert!(links.is_member_of_live_group(a) && links.is_member_of_live_group(b));
        // The host's frames on the group connection travel on the group's subject.
        let group = host.groups[0];
        links.handle_group_frame(t0, group, b"{\"x\":1}", usize::MAX);
        let published = events(&mut links);
        assert!(
            matches!(&published[..], [OwnerEvent::Live(LiveIo::Publish { subject, .. })] if *subject == layout.group_subject("g1")),
            "{published:?}"
        );
        // The host closed the group: its name is refused from now on, and the gateway node
        // learns it is closed.
        links.handle_group_closing(group);
        assert_eq!(
            links.accept(t0, &opening("l3", "g1"), &mut host),
            Err(Refused::Group)
        );
        links.handle_group_closed(t0, group);
        assert!(events(&mut links)
            .iter()
            .any(|e| matches!(e, OwnerEvent::Live(LiveIo::Publish { subject, .. }) if *subject == layout.group_subject("g1"))));
        assert_eq!(links.group_of(group), None);
        assert_eq!(
            links.accept(t0, &opening("l4", "g1"), &mut host),
            Err(Refused::Group)
        );
    }

    #[test]
    fn a_members_frames_are_delivered_until_its_gateway_closes_the_link() {
        let t0 = Instant::now();
        let (mut links, mut host) = (owner(), Host::default());
        let member = links.accept(t0, &opening("l1", "g1"), &mut host).unwrap();
        events(&mut links);
        let subject = Layout::default().link_in_subject("l1");
        let mut gateway = Outbound::new(t0);
        gateway.send(b"{}", usize::MAX);
        gateway.close();
        while let Some(message) = gateway.poll_transmit() {
            links.handle_message(t0, &subject, &message);
        }
        assert_eq!(
            events(&mut links),
            [
                OwnerEvent::Deliver {
                    member,
                    body: Bytes::from_static(b"{}")
                },
                OwnerEvent::Live(LiveIo::Unsubscribe(subject.clone())),
                OwnerEvent::MemberEnded {
                    member,
                    link: "l1".into(),
                    end: MemberEnd::Closed
                },
            ]
        );
        assert!(!links.is_member(member));
        // A message arriving late for the ended link is dropped.
        links.handle_message(t0, &subject, &Bytes::from_static(b"junk"));
        assert_eq!(events(&mut links), []);
    }

    #[test]
    fn one_lease_check_per_peer_answers_every_link_and_group_and_its_loss_ends_them() {
        let t0 = Instant::now();
        let (mut links, mut host) = (owner(), Host::default());
        let m1 = links.accept(t0, &opening("l1", "g1"), &mut host).unwrap();
        let m2 = links.accept(t0, &opening("l2", "g1"), &mut host).unwrap();
        events(&mut links);
        let later = t0 + Duration::from_secs(3);
        links.handle_timeout(later);
        let checks: Vec<_> = events(&mut links)
            .into_iter()
            .filter(|e| matches!(e, OwnerEvent::CheckLease(_)))
            .collect();
        assert_eq!(checks, [OwnerEvent::CheckLease(peer())]);
        links.handle_lease(later, &peer(), false);
        let ended: Vec<_> = events(&mut links)
            .into_iter()
            .filter_map(|e| match e {
                OwnerEvent::MemberEnded { member, end, .. } => {
                    Some((Some(member), format!("{end:?}")))
                }
                OwnerEvent::GroupEnded { end, .. } => Some((None, format!("{end:?}"))),
                _ => None,
            })
            .collect();
        assert_eq!(
            ended,
            [
                (Some(m1), "PeerGone".to_owned()),
                (Some(m2), "PeerGone".to_owned()),
                (None, "PeerGone".to_owned())
            ]
        );
    }

    #[test]
    fn an_opening_reusing_a_served_link_name_or_naming_another_peers_group_is_refused() {
        let t0 = Instant::now();
        let (mut links, mut host) = (owner(), Host::default());
        let member = links.accept(t0, &opening("l1", "g1"), &mut host).unwrap();
        events(&mut links);
        assert_eq!(
            links.accept(t0, &opening("l1", "g2"), &mut host),
            Err(Refused::LinkInUse)
        );
        assert_eq!(
            host.groups.len(),
            1,
            "no group started for a refused opening"
        );
        let mut other = opening("l2", "g1");
        other.peer.incarnation = 2;
        assert_eq!(links.accept(t0, &other, &mut host), Err(Refused::Group));
        // The served link is untouched: its messages still reach its member.
        assert_eq!(events(&mut links), []);
        let mut gateway = Outbound::new(t0);
        gateway.send(b"{}", usize::MAX);
        let subject = Layout::default().link_in_subject("l1");
        while let Some(message) = gateway.poll_transmit() {
            links.handle_message(t0, &subject, &message);
        }
        assert_eq!(
            events(&mut links),
            [OwnerEvent::Deliver {
                member,
                body: Bytes::from_static(b"{}")
            }]
        );
    }

    #[test]
    fn a_member_whose_group_connection_is_gone_is_refused_and_the_group_ends() {
        let t0 = Instant::now();
        let (mut links, mut host) = (owner(), Host::default());
        links.accept(t0, &opening("l1", "g1"), &mut host).unwrap();
        host.gone.push(host.groups[0]);
        assert_eq!(
            links.accept(t0, &opening("l2", "g1"), &mut host),
            Err(Refused::Group)
        );
        assert_eq!(
            links.accept(t0, &opening("l3", "g1"), &mut host),
            Err(Refused::Group),
            "the group ended: the gateway node starts a new one"
        );
    }
}
