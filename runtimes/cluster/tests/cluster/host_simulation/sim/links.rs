//! The gateway links, the relay groups and the sweep of the simulated nodes (`link.rs`,
//! `group.rs`, `node.rs`'s `sweep`), run by the crate's own sans-IO machines
//! (`agentwire_cluster::machines`) over the in-memory engine's live subjects.
//!
//! A client of node B whose session node A owns is relayed over a *link*: its frames go to A
//! on the link's own subject ([`Outbound`]). A serves it as a member of B's *relay group* for
//! A's incarnation: one connection of A's host, opened on the first link
//! opening naming the group, whose frames (every member's responses, requests and events, an
//! event for several members once, naming them) travel to B on the group's subject. A's side
//! of both is the crate's [`agentwire_cluster::machines::owner_links::OwnerLinks`], as in the
//! runtime. B hands each group frame to the members it names ([`GroupIn`]).

use std::collections::BTreeMap;

use bytes::Bytes;

use agentwire::frame::Framing;
use agentwire::host::{ConnId, Dialect, Host};
use agentwire::Timestamp;
use agentwire_cluster::escape::escape_id;
use agentwire_cluster::machines::gateway_links::{GatewayEvent, GroupEnd, LinkEnd};
use agentwire_cluster::machines::owner_links::{Opening, RelayHost};
use agentwire_cluster::takeover::sessions_to_sweep;
use agentwire_cluster::{Engine, NodeIdentity};

use super::super::node::{alive, event_id, instant, End, Gateway};
use super::super::now;
use super::{Sim, NODES, TTL};

/// The host of a simulated node, as its owner side opens connections in it.
struct SimHost<'a> {
    host: &'a mut Host,
    ends: &'a mut BTreeMap<ConnId, End>,
    t: Timestamp,
}

impl RelayHost<ConnId> for SimHost<'_> {
    fn open_group(&mut self, _group: &str, _dialect: Dialect) -> Option<ConnId> {
        let conn = self.host.open(self.t, Framing::ContentLength);
        self.host.cluster().authenticate_connection(conn);
        self.ends.insert(conn, End::Group);
        Some(conn)
    }

    fn open_member(
        &mut self,
        _dialect: Dialect,
        authenticated: bool,
        group: ConnId,
    ) -> Option<ConnId> {
        let member = self.host.open(self.t, Framing::ContentLength);
        if authenticated {
            self.host.cluster().authenticate_connection(member);
        }
        if !self.host.cluster().join_relay_group(member, group) {
            self.host.handle_eof(self.t, member);
            return None;
        }
        self.ends.insert(member, End::Member);
        Some(member)
    }
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
        let (t, at) = (self.t(), self.cluster.now());
        let b = self.node(i);
        let Some(owner) = b.owners.get(session).cloned() else {
            return;
        };
        let link = b.me.link_name(conn.as_u64(), 0);
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
            let b = self.node(i);
            let group = b.gateway.group_to(instant(at), &owner, Dialect::CopilotSdk);
            b.gateway.begin_open(&group);
            // The group's subject is subscribed before the opening is sent.
            self.gateway_events(i);
            let member = self.accept(j, &link, &peer, &group, authenticated);
            let b = self.node(i);
            match member {
                Some(member) => {
                    assert!(
                        b.gateway.attach(instant(at), &group, member, conn, &link),
                        "a live group"
                    );
                    b.gateway.open_done(&group);
                    accepted = Some((group, member));
                    break;
                }
                None => {
                    b.gateway.refused(&group);
                    b.gateway.open_done(&group);
                    self.stats.groups_refused += 1;
                    self.trace(format!("node {j} refused relay group {group}"));
                    self.gateway_events(i);
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
        b.relayed.insert(conn);
        for body in frames {
            b.gateway.send(&conn, &body, usize::MAX);
        }
        let session = session.to_owned();
        b.gateways.insert(conn, Gateway { session, owner });
        self.gateway_events(i);
    }

    /// `link::serve_links` on A (node `j`): the opening of `link` from `peer` naming
    /// `group`, accepted by A's [`OwnerLinks`]. The member's id, or `None` when the opening is
    /// refused (the group ended).
    fn accept(
        &mut self,
        j: usize,
        link: &str,
        peer: &NodeIdentity,
        group: &str,
        authenticated: bool,
    ) -> Option<u64> {
        let (t, at) = (self.t(), self.cluster.now());
        let a = self.node(j);
        let opening = Opening {
            link: link.to_owned(),
            peer: peer.clone(),
            group: group.to_owned(),
            dialect: Dialect::CopilotSdk,
            authenticated,
        };
        let started = a.owner.groups_started();
        let mut host = SimHost {
            host: &mut a.host,
            ends: &mut a.ends,
            t,
        };
        let member = a.owner.accept(instant(at), &opening, &mut host).ok();
        if a.owner.groups_started() > started {
            self.stats.groups += 1;
            self.trace(format!("node {j} started relay group {group}"));
        }
        // The link's messages are subscribed before the opening is answered.
        self.node(j).owner_events(t, at);
        member.map(ConnId::as_u64)
    }

    /// The `Links` task of node `i`: its relay groups from owners, its gateways, the links it
    /// serves as an owner and its groups to gateway nodes, each a machine fed its messages
    /// and the time, its messages published.
    ///
    /// A broken link or group (a lost message, or silence) ends the relayed connection on
    /// both sides (the runtime's gateway re-attaches the client instead; the simulation ends
    /// it, as it does after a takeover).
    pub(super) fn links_step(&mut self, i: usize) {
        let (t, at) = (self.t(), self.cluster.now());
        let node = self.node(i);
        let resends = node.owner.resend_requests() + node.gateway.resend_requests();
        node.owner_step(t, at);
        let node = self.node(i);
        self.stats.resends +=
            node.owner.resend_requests() + node.gateway.resend_requests() - resends;
        self.gateway_events(i);
        self.watch_owners(i);
    }

    /// What B's [`GatewayLinks`] handed out (`group.rs`'s task): frames to the members'
    /// gateways, links the owner ended, groups that ended.
    fn gateway_events(&mut self, i: usize) {
        let t = self.t();
        while let Some(event) = self.node(i).gateway.poll_event() {
            let node = self.node(i);
            match event {
                GatewayEvent::Subscribe(_)
                | GatewayEvent::Unsubscribe(_)
                | GatewayEvent::Publish { .. }
                | GatewayEvent::AskAgain { .. } => node.live_io(event),
                GatewayEvent::Frame { to, frame } => {
                    let event = event_id(&frame.body);
                    if event.is_some() {
                        self.stats.group_events += 1;
                        if to.len() >= 2 {
                            // One message, several of this node's clients.
                            self.stats.shared_events += 1;
                        }
                    }
                    let node = self.node(i);
                    for conn in to {
                        if let Some(event) = &event {
                            assert!(
                                node.via_group.insert((conn, event.clone())),
                                "invariant 5: a relay group handed event {event} twice to {conn:?}"
                            );
                        }
                        let route = node.gateways[&conn].session.clone();
                        let mut cluster = node.host.cluster();
                        cluster.deliver_forwarded(t, conn, &route, &frame.body);
                    }
                }
                GatewayEvent::LinkEnded { link, owner, end } => {
                    let relays = node.gateways.contains_key(&link);
                    let reason = match end {
                        LinkEnd::LinkBroke(why) => {
                            self.stats.ended_link_broke += 1;
                            broken(&owner, &why)
                        }
                        LinkEnd::GroupBroke(why) => {
                            self.stats.ended_group_broke += u64::from(relays);
                            broken(&owner, &why)
                        }
                        LinkEnd::Closed => {
                            format!("node {} closed the relayed connection", owner.node)
                        }
                    };
                    self.end_gateway(i, link, reason);
                }
                GatewayEvent::GroupEnded { group, end, .. } => {
                    if let GroupEnd::Broken(_) = end {
                        self.stats.groups_broken += 1;
                    }
                    self.trace(format!("node {i}: relay group {group} ends: {end:?}"));
                }
            }
        }
    }

    /// A gateway of node `i` ends: its link closes and the client's connection ends with
    /// `reason`.
    fn end_gateway(&mut self, i: usize, conn: ConnId, reason: String) {
        let t = self.t();
        let node = self.node(i);
        if node.close_gateway(conn).is_none() {
            return;
        }
        self.trace(format!("gateway on node {i} ends: {reason}"));
        self.node(i).host.cluster().end_forwarding(t, conn, reason);
        self.gateway_events(i);
    }

    /// B's gateways watch their owner's lease (`gateway::gateway`'s [`CheckLease`]; the
    /// simulation ends the relayed connection instead of re-attaching it).
    fn watch_owners(&mut self, i: usize) {
        let conns: Vec<ConnId> = self.node(i).gateways.keys().copied().collect();
        for conn in conns {
            let node = self.node(i);
            let owner = node.gateways[&conn].owner.clone();
            if !alive(&node.engine, &owner) {
                let reason = format!(
                    "the node owning this session ({}) stopped; reconnect and resume the session",
                    owner.node
                );
                self.end_gateway(i, conn, reason);
            }
        }
    }

    /// `sweep`: sessions in the log this node should claim (preferred among the live nodes)
    /// and has not loaded are looked up.
    pub(super) fn sweep(&mut self, i: usize) {
        let at = self.cluster.now();
        let names = self.names.clone();
        let subjects: Vec<String> = self.index.subjects.keys().cloned().collect();
        let log_prefix = self.layout.log_prefix.clone();
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
        let subjects = subjects.iter().map(String::as_str);
        let loaded = |session: &str| node.host.session_events(session).is_some();
        for session in sessions_to_sweep(subjects, &log_prefix, &me, &live, loaded) {
            node.sessions.load(&session, true);
        }
    }
}

/// The reason a relayed client's connection ends with when its link or group broke.
fn broken(owner: &NodeIdentity, why: &str) -> String {
    format!(
        "the link to the node owning this session ({}) broke: {why}; reconnect and resume the session",
        owner.node
    )
}
