//! The gateway links, the relay groups and the sweep of the simulated nodes (`link.rs`,
//! `group.rs`, `node.rs`'s `sweep`).
//!
//! A client of node B whose session node A owns is relayed over a *link*: its frames go to A
//! on the link's own subject, numbered, with heartbeats. A serves it as a member of B's
//! *relay group* for A's incarnation: one connection of A's host, opened on the first link
//! opening naming the group, whose frames (every member's responses, requests and events, an
//! event for several members once, naming them) travel to B on the group's subject, numbered,
//! with heartbeats. B hands each group frame to the members it names.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentwire::frame::{encode_frame, Framing};
use agentwire::host::{ConnId, RelayFrame};
use agentwire_cluster::escape::{escape_id, unescape_id};
use agentwire_cluster::link_messages::{LinkReceiver, LinkSender, Received, HEARTBEAT};
use agentwire_cluster::takeover::preferred_claimant;
use agentwire_cluster::{Engine, LiveSubscription, NodeIdentity};
use bytes::{Bytes, BytesMut};

use super::super::node::{
    event_id, group_subject, in_subject, resend_subject, End, Gateway, GroupIn, GroupOut,
};
use super::super::now;
use super::{alive, Sim, NODES, TTL};

/// The key of an owner's incarnation in a node's `groups_in`.
type OwnerKey = (String, u64);

fn key(owner: &NodeIdentity) -> OwnerKey {
    (owner.node.clone(), owner.incarnation)
}

impl Sim {
    /// `gateway::gateway` + `link::open_remote`: B asks the owner to accept a link naming
    /// B's group to it (started if there is none), then relays the waiting frames.
    pub(super) fn open_gateway(
        &mut self,
        i: usize,
        conn: ConnId,
        session: &str,
        frames: Vec<Bytes>,
    ) {
        let t = self.t();
        let at = self.cluster.now();
        let b = self.node(i);
        let Some(owner) = b.owners.get(session).cloned() else {
            return;
        };
        let link = format!(
            "{}x{}x{}x0",
            escape_id(&b.me.node),
            b.me.incarnation,
            conn.as_u64()
        );
        let peer = b.me.clone();
        let authenticated = b.host.cluster().is_connection_authenticated(conn);
        let j = (0..NODES).find(|&j| self.nodes[j].as_ref().is_some_and(|n| n.me == owner));
        let up =
            j.is_some_and(|j| self.answers(&owner) && self.partitioned[i] == 0 && self.serving(j));
        let unanswered = format!(
            "session {session} is owned by node {}, which does not answer; reconnect and resume the session",
            owner.node
        );
        let Some(j) = j.filter(|_| up) else {
            self.node(i)
                .host
                .cluster()
                .end_forwarding(t, conn, unanswered);
            return;
        };
        // A group the owner ended meanwhile is refused: the next one is new.
        let mut accepted = None;
        for _ in 0..2 {
            let Some(group) = self.group_to(i, &owner) else {
                break;
            };
            match self.accept(j, &link, &peer, &group, authenticated) {
                Some(member) => {
                    accepted = Some((group, member));
                    break;
                }
                None => {
                    self.stats.groups_refused += 1;
                    self.trace(format!("node {j} refused relay group {group}"));
                    let why = "the owner node ended this node's relay group";
                    self.group_ends(i, &key(&owner), Some(why));
                }
            }
        }
        let Some((group, member)) = accepted else {
            self.node(i)
                .host
                .cluster()
                .end_forwarding(t, conn, unanswered);
            return;
        };
        self.stats.gateways += 1;
        self.trace(format!(
            "gateway {link}: node {i} -> node {j} for {session}, member {member} of {group}"
        ));
        let b = self.node(i);
        b.groups_in
            .get_mut(&key(&owner))
            .expect("the group the owner accepted")
            .members
            .insert(member, conn);
        b.relayed.insert(conn);
        let Ok(resend) = now(b.engine.subscribe_live(&resend_subject(&in_subject(&link)))) else {
            return;
        };
        let mut sender = LinkSender::default();
        for body in frames {
            for message in sender.frame(&body, usize::MAX) {
                now(b.engine.publish_live(&in_subject(&link), message)).expect("publish");
            }
        }
        b.gateways.insert(
            conn,
            Gateway {
                link,
                session: session.to_owned(),
                owner,
                group,
                member,
                sender,
                resend,
                next_heartbeat: at,
            },
        );
    }

    /// `group::GroupsIn::to`: B's live group to `owner`, started (subscribed before any
    /// opening names it) if there is none.
    fn group_to(&mut self, i: usize, owner: &NodeIdentity) -> Option<String> {
        let at = self.cluster.now();
        let b = self.node(i);
        if let Some(group) = b.groups_in.get(&key(owner)) {
            return Some(group.id.clone());
        }
        let n = b.next_group;
        b.next_group += 1;
        let id = format!(
            "{}x{}x{}x{}x{n}",
            escape_id(&b.me.node),
            b.me.incarnation,
            escape_id(&owner.node),
            owner.incarnation
        );
        let subscription = now(b.engine.subscribe_live(&group_subject(&id))).ok()?;
        b.groups_in.insert(
            key(owner),
            GroupIn {
                id: id.clone(),
                owner: owner.clone(),
                subscription,
                receiver: LinkReceiver::new(MAX_FRAME),
                next_tick: at + HEARTBEAT,
                members: BTreeMap::new(),
            },
        );
        Some(id)
    }

    /// `link::serve_links` + `serve_member` on A (node `j`): the opening of `link` from
    /// `peer` naming `group`. The group connection is started on the first opening naming it
    /// (`group::start_group`); the relayed connection joins it before the opening is
    /// answered. The member's id, or `None` when the opening is refused (the group ended).
    fn accept(
        &mut self,
        j: usize,
        link: &str,
        peer: &NodeIdentity,
        group: &str,
        authenticated: bool,
    ) -> Option<u64> {
        let t = self.t();
        let at = self.cluster.now();
        let a = self.node(j);
        if a.groups_ended.contains(group) {
            return None;
        }
        let group_conn = match a.groups_out.get(group) {
            Some(g) if g.ended => return None,
            Some(g) => g.conn,
            None => {
                let resend = now(a
                    .engine
                    .subscribe_live(&resend_subject(&group_subject(group))))
                .ok()?;
                let conn = a.host.open(t, Framing::ContentLength);
                // It never sends a request.
                a.host.cluster().authenticate_connection(conn);
                a.ends.insert(conn, End::Group(group.to_owned()));
                a.groups_out.insert(
                    group.to_owned(),
                    GroupOut {
                        conn,
                        peer: peer.clone(),
                        sender: LinkSender::default(),
                        resend,
                        next_heartbeat: at,
                        next_check: at + TTL / 2,
                        idle_checks: 0,
                        ended: false,
                        carried: BTreeSet::new(),
                    },
                );
                self.stats.groups += 1;
                self.trace(format!("node {j} started relay group {group}"));
                conn
            }
        };
        let a = self.node(j);
        let inbound = now(a.engine.subscribe_live(&in_subject(link))).ok()?;
        let member = a.host.open(t, Framing::ContentLength);
        if authenticated {
            a.host.cluster().authenticate_connection(member);
        }
        if !a.host.cluster().join_relay_group(member, group_conn) {
            // The group connection is gone from the host: the peer starts a new group.
            if let Some(g) = a.groups_out.get_mut(group) {
                g.ended = true;
            }
            a.host.handle_eof(t, member);
            return None;
        }
        a.ends.insert(
            member,
            End::Link {
                link: link.to_owned(),
                peer: peer.clone(),
                group: group.to_owned(),
                inbound,
                receiver: LinkReceiver::new(MAX_FRAME),
                next_tick: at + HEARTBEAT,
            },
        );
        Some(member.as_u64())
    }

    /// The `Links` task of node `i`: its relay groups from owners, its gateways, the links it
    /// serves as an owner and its groups to gateway nodes, each side numbering its messages,
    /// sending heartbeats and watching the other's lease.
    ///
    /// A broken link or group (a lost message, or silence) ends the relayed connection on
    /// both sides (the runtime's gateway re-attaches the client instead; the simulation ends
    /// it, as it does after a takeover).
    pub(super) fn links_step(&mut self, i: usize) {
        self.groups_in_step(i);
        self.gateways_step(i);
        self.members_step(i);
        self.groups_out_step(i);
    }

    /// `group::receive` on B: each group's frames dispatched to its members, until the owner
    /// closes it or it breaks.
    fn groups_in_step(&mut self, i: usize) {
        let at = self.cluster.now();
        let keys: Vec<OwnerKey> = self.node(i).groups_in.keys().cloned().collect();
        for key in keys {
            // `Some(None)`: closed; `Some(Some(why))`: broken.
            let mut end: Option<Option<String>> = None;
            loop {
                let node = self.node(i);
                let group = node.groups_in.get_mut(&key).expect("a group");
                let Some(message) = now(group.subscription.next(Duration::ZERO)) else {
                    break;
                };
                let mut next = Some(group.receiver.push(&message));
                while let Some(received) = next {
                    match received {
                        Received::Frame(body) => {
                            if let Err(why) = self.dispatch(i, &key, &body) {
                                end = Some(Some(format!("relay group ended ({why})")));
                            }
                        }
                        Received::Nothing => {}
                        Received::Resend(request) => self.ask_again(i, &key, request),
                        Received::Closed => end = Some(None),
                        Received::Broken(why) => end = Some(Some(why)),
                    }
                    if end.is_some() {
                        break;
                    }
                    let group = self.node(i).groups_in.get_mut(&key).expect("a group");
                    next = group.receiver.next_held();
                }
                if end.is_some() {
                    break;
                }
            }
            let group = self.node(i).groups_in.get_mut(&key).expect("a group");
            if end.is_none() && at >= group.next_tick {
                group.next_tick = at + HEARTBEAT;
                match group.receiver.tick() {
                    Received::Broken(why) => end = Some(Some(why)),
                    Received::Resend(request) => self.ask_again(i, &key, request),
                    _ => {}
                }
            }
            if let Some(broken) = end {
                if broken.is_some() {
                    self.stats.groups_broken += 1;
                }
                let id = self.node(i).groups_in[&key].id.clone();
                self.trace(format!("node {i}: relay group {id} ends: {broken:?}"));
                self.group_ends(i, &key, broken.as_deref());
            }
        }
    }

    /// `link::ask_again` for B's group to `key`'s owner: the receiver's resend request on
    /// the group's resend subject.
    fn ask_again(&mut self, i: usize, key: &OwnerKey, request: Bytes) {
        let node = self.node(i);
        let subject = resend_subject(&group_subject(&node.groups_in[key].id));
        now(node.engine.publish_live(&subject, request)).expect("publish");
    }

    /// `GroupIn::dispatch`: hands one group frame to the members it names; `Err` for junk
    /// and for the owner's closing frame.
    fn dispatch(&mut self, i: usize, key: &OwnerKey, body: &Bytes) -> Result<(), String> {
        let frame =
            RelayFrame::parse(body).map_err(|_| "the owner sent a malformed frame".to_owned())?;
        let node = self.node(i);
        let group = &node.groups_in[key];
        // Members whose gateway still relays from this group (a gateway that ended drops
        // what its group still brings).
        let live = |member: &u64| {
            group.members.get(member).copied().filter(|conn| {
                node.gateways
                    .get(conn)
                    .is_some_and(|g| g.group == group.id && g.member == *member)
            })
        };
        let (to, part): (Vec<ConnId>, &[u8]) = match frame {
            RelayFrame::All(part) => (group.members.keys().filter_map(live).collect(), part),
            RelayFrame::To {
                members: to,
                body: part,
            } => (to.iter().filter_map(live).collect(), part),
            RelayFrame::GroupEnded { reason } => {
                return Err(format!(
                    "the owner node closed it: {}",
                    String::from_utf8_lossy(reason)
                ));
            }
            RelayFrame::Ended {
                member,
                reason,
                link_broke,
            } => {
                let owner = group.owner.clone();
                let group = node.groups_in.get_mut(key).expect("a group");
                if let Some(conn) = group.members.remove(&member) {
                    let reason = if link_broke {
                        self.stats.ended_link_broke += 1;
                        broken(&owner, &String::from_utf8_lossy(reason))
                    } else {
                        format!("node {} closed the relayed connection", owner.node)
                    };
                    self.end_gateway(i, conn, reason);
                }
                return Ok(());
            }
        };
        let t = self.t();
        let event = event_id(part);
        if event.is_some() {
            self.stats.group_events += 1;
            if to.len() >= 2 {
                // One message, several of this node's clients.
                self.stats.shared_events += 1;
            }
        }
        let node = self.node(i);
        for conn in to {
            if let Some(id) = &event {
                assert!(
                    node.via_group.insert((conn, id.clone())),
                    "invariant 5: relay group {} handed event {id} twice to {conn:?}",
                    node.groups_in[key].id
                );
            }
            let route = node.gateways.get(&conn).map(|g| g.session.clone());
            let route = route.unwrap_or_default();
            node.host.cluster().deliver_forwarded(t, conn, &route, part);
        }
        Ok(())
    }

    /// `GroupIn::end` and the gateways it ends: B's group to an owner is over, and every
    /// member's relayed connection ends (broken with `broken`, or closed by the owner).
    fn group_ends(&mut self, i: usize, key: &OwnerKey, broken_by: Option<&str>) {
        let Some(group) = self.node(i).groups_in.remove(key) else {
            return;
        };
        for conn in group.members.into_values() {
            let node = self.node(i);
            if broken_by.is_some() && node.gateways.contains_key(&conn) {
                self.stats.ended_group_broke += 1;
            }
            let reason = match broken_by {
                Some(why) => broken(&group.owner, why),
                None => format!("node {} closed the relayed connection", group.owner.node),
            };
            self.end_gateway(i, conn, reason);
        }
    }

    /// A gateway of node `i` ends: its link closes and the client's connection ends with
    /// `reason`.
    fn end_gateway(&mut self, i: usize, conn: ConnId, reason: String) {
        let t = self.t();
        let node = self.node(i);
        let Some(mut gateway) = node.gateways.remove(&conn) else {
            return;
        };
        now(node
            .engine
            .publish_live(&in_subject(&gateway.link), gateway.sender.close()))
        .expect("publish");
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("gateway on node {i} ends: {reason}");
        }
        node.host.cluster().end_forwarding(t, conn, reason);
    }

    /// B's gateways: heartbeats on each link, and the owner's lease watched.
    fn gateways_step(&mut self, i: usize) {
        let at = self.cluster.now();
        let conns: Vec<ConnId> = self.node(i).gateways.keys().copied().collect();
        for conn in conns {
            let node = self.node(i);
            let gateway = node.gateways.get_mut(&conn).expect("gateway");
            let subject = in_subject(&gateway.link);
            let mut resends = 0;
            while let Some(request) = now(gateway.resend.next(Duration::ZERO)) {
                resends += 1;
                for message in gateway.sender.resend(&request) {
                    now(node.engine.publish_live(&subject, message)).expect("publish");
                }
            }
            if at >= gateway.next_heartbeat {
                gateway.next_heartbeat = at + HEARTBEAT;
                let heartbeat = gateway.sender.heartbeat();
                now(node
                    .engine
                    .publish_live(&in_subject(&gateway.link), heartbeat))
                .expect("publish");
            }
            let owner = gateway.owner.clone();
            self.stats.resends += resends;
            let node = self.node(i);
            if !alive(node, &owner) {
                let reason = format!(
                    "the node owning this session ({}) stopped; reconnect and resume the session",
                    owner.node
                );
                self.end_gateway(i, conn, reason);
            }
        }
    }

    /// `serve_member` on A: the client's frames into the host; a broken link
    /// (`relay_member_link_broke`: the group tells B), a closed one or B's lease gone ends
    /// the member.
    fn members_step(&mut self, i: usize) {
        let t = self.t();
        let at = self.cluster.now();
        let node = self.node(i);
        let links: Vec<ConnId> = node
            .ends
            .iter()
            .filter(|(_, e)| matches!(e, End::Link { .. }))
            .map(|(c, _)| *c)
            .collect();
        for conn in links {
            let node = self.node(i);
            let Some(End::Link {
                link,
                inbound,
                peer,
                receiver,
                next_tick,
                ..
            }) = node.ends.get_mut(&conn)
            else {
                continue;
            };
            let (link, peer) = (link.clone(), peer.clone());
            let mut bytes = Vec::new();
            let mut closed = false;
            let mut broke = None;
            let mut requests = Vec::new();
            'messages: while let Some(message) = now(inbound.next(Duration::ZERO)) {
                let mut next = Some(receiver.push(&message));
                while let Some(received) = next {
                    match received {
                        Received::Frame(body) => {
                            let mut framed = BytesMut::new();
                            encode_frame(Framing::ContentLength, &body, &mut framed);
                            bytes.push(framed);
                        }
                        Received::Nothing => {}
                        Received::Resend(request) => requests.push(request),
                        Received::Closed => {
                            closed = true;
                            break 'messages;
                        }
                        Received::Broken(why) => {
                            broke = Some(why);
                            break 'messages;
                        }
                    }
                    next = receiver.next_held();
                }
            }
            if !closed && broke.is_none() && at >= *next_tick {
                *next_tick = at + HEARTBEAT;
                match receiver.tick() {
                    Received::Broken(why) => broke = Some(why),
                    Received::Resend(request) => requests.push(request),
                    _ => {}
                }
            }
            let resend = resend_subject(&in_subject(&link));
            for request in requests {
                now(node.engine.publish_live(&resend, request)).expect("publish");
            }
            for framed in bytes {
                node.feed(t, conn, &framed);
            }
            if let Some(why) = &broke {
                self.stats.links_broken += 1;
                self.trace(format!("node {i}: link {link} broke: {why}"));
                let node = self.node(i);
                node.host.cluster().relay_member_link_broke(t, conn, why);
            }
            let node = self.node(i);
            if closed || broke.is_some() || !alive(node, &peer) {
                node.ends.remove(&conn);
                node.held.remove(&conn);
                node.host.handle_eof(t, conn);
            }
        }
    }

    /// `group::start_group`'s publisher and watcher on A: heartbeats on each group, and a
    /// group ends (EOF to the host, which ends the members left) when its gateway node's
    /// lease is gone or it had no member for three checks in a row.
    fn groups_out_step(&mut self, i: usize) {
        let t = self.t();
        let at = self.cluster.now();
        let ids: Vec<String> = self.node(i).groups_out.keys().cloned().collect();
        for id in ids {
            let node = self.node(i);
            let group = node.groups_out.get_mut(&id).expect("a group");
            if group.ended {
                // Closing: the host's close ends it.
                continue;
            }
            let mut resends = 0;
            while let Some(request) = now(group.resend.next(Duration::ZERO)) {
                resends += 1;
                for message in group.sender.resend(&request) {
                    now(node.engine.publish_live(&group_subject(&id), message)).expect("publish");
                }
            }
            if at >= group.next_heartbeat {
                group.next_heartbeat = at + HEARTBEAT;
                let heartbeat = group.sender.heartbeat();
                now(node.engine.publish_live(&group_subject(&id), heartbeat)).expect("publish");
            }
            let due = at >= group.next_check;
            self.stats.resends += resends;
            if !due {
                continue;
            }
            let node = self.node(i);
            let group = node.groups_out.get_mut(&id).expect("a group");
            group.next_check = at + TTL / 2;
            let peer = group.peer.clone();
            let members = node
                .ends
                .values()
                .filter(|e| matches!(e, End::Link { group, .. } if *group == id))
                .count();
            let peer_alive = alive(node, &peer);
            let group = node.groups_out.get_mut(&id).expect("a group");
            group.idle_checks = if members == 0 {
                group.idle_checks + 1
            } else {
                0
            };
            if peer_alive && group.idle_checks <= 2 {
                continue;
            }
            group.ended = true;
            let conn = group.conn;
            node.ends.remove(&conn);
            node.held.remove(&conn);
            node.host.handle_eof(t, conn);
            node.group_closed(&id);
            if peer_alive {
                self.stats.groups_idle += 1;
            } else {
                self.stats.groups_peer_gone += 1;
            }
            self.trace(format!(
                "node {i} ended relay group {id} (peer alive {peer_alive}, {members} members)"
            ));
        }
    }

    /// `sweep`: sessions in the log this node should claim (preferred among the live nodes)
    /// and has not loaded are looked up.
    pub(super) fn sweep(&mut self, i: usize) {
        let t = self.t();
        let at = self.cluster.now();
        let names = self.names.clone();
        let prefix = format!("{}.", self.layout.log_prefix);
        let subjects: Vec<String> = self.index.subjects.keys().cloned().collect();
        let node = self.node(i);
        node.next_sweep = at + TTL;
        let mut live = Vec::new();
        for name in &names {
            match now(node.engine.kv_get(&node.layout.lease_key(name))) {
                Ok(Some(_)) => live.push(escape_id(name)),
                Ok(None) => {}
                Err(_) => return,
            }
        }
        let me = escape_id(&node.me.node);
        for subject in subjects {
            let Some(session) = subject
                .strip_prefix(&prefix)
                .and_then(|token| unescape_id(token).ok())
            else {
                continue;
            };
            let preferred = preferred_claimant(&session, live.iter().map(String::as_str));
            if node.host.session_events(&session).is_none() && preferred == Some(me.as_str()) {
                node.load(t, session);
            }
        }
    }
}

/// The largest frame a simulated link carries.
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// The reason a relayed client's connection ends with when its link or group broke.
fn broken(owner: &NodeIdentity, why: &str) -> String {
    format!(
        "the link to the node owning this session ({}) broke: {why}; reconnect and resume the session",
        owner.node
    )
}
