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

use agentwire::frame::Framing;
use agentwire::host::{ConnId, Dialect, Host};
use agentwire::Timestamp;
use agentwire_cluster::escape::escape_id;
use agentwire_cluster::machines::gateway_links::{GatewayEvent, GroupEnd, LinkEnd};
use agentwire_cluster::machines::owner_links::{Opening, RelayHost};
use agentwire_cluster::takeover::sessions_to_sweep;
use agentwire_cluster::{Engine, NodeIdentity};

use super::super::node::{event_id, instant, End, LinkTo};
use super::super::now;
use super::{Sim, TTL};

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
    /// `link::serve_links` on A (node `j`): the opening of `link` from `peer` naming
    /// `group`, accepted by A's [`OwnerLinks`]. The member's id, or `None` when the opening is
    /// refused (the group ended).
    pub(super) fn accept(
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
    /// A broken link or group (a lost message, or silence) ends the link; its gateway
    /// machine re-attaches the client over a new one ([`Sim::gateway_events`]).
    pub(super) fn links_step(&mut self, i: usize) {
        let (t, at) = (self.t(), self.cluster.now());
        let node = self.node(i);
        let resends = node.owner.resend_requests() + node.gateway.resend_requests();
        node.owner_step(t, at);
        let node = self.node(i);
        self.stats.resends +=
            node.owner.resend_requests() + node.gateway.resend_requests() - resends;
        self.gateway_events(i);
        self.gateway_timeouts(i);
    }

    /// What B's [`GatewayLinks`] handed out (`group.rs`'s task): frames to the members'
    /// gateways, links the owner ended, groups that ended.
    pub(super) fn gateway_events(&mut self, i: usize) {
        let at = self.cluster.now();
        while let Some(event) = self.node(i).gateway.poll_event() {
            let node = self.node(i);
            match event {
                GatewayEvent::Live(io) => node.live_io(io),
                GatewayEvent::Frame { to, frame } => {
                    if event_id(&frame.body).is_some() {
                        self.stats.group_events += 1;
                        if to.len() >= 2 {
                            // One message, several of this node's clients.
                            self.stats.shared_events += 1;
                        }
                    }
                    let node = self.node(i);
                    for (conn, n) in to {
                        if let Some(g) = node.gateways.get_mut(&conn) {
                            if g.link == Some(LinkTo::Remote(n)) {
                                g.machine.handle_owner_frame(frame.clone());
                            }
                        }
                    }
                }
                GatewayEvent::LinkEnded {
                    link: (conn, n),
                    end,
                    ..
                } => {
                    let relays = self.node(i).gateways.contains_key(&conn);
                    let broken = match end {
                        LinkEnd::LinkBroke(why) => {
                            self.stats.ended_link_broke += 1;
                            Some(why)
                        }
                        LinkEnd::GroupBroke(why) => {
                            self.stats.ended_group_broke += u64::from(relays);
                            Some(why)
                        }
                        LinkEnd::Closed => None,
                    };
                    let node = self.node(i);
                    // The gateway's current link (an older one's end is stale).
                    let Some(g) = node
                        .gateways
                        .get_mut(&conn)
                        .filter(|g| g.link == Some(LinkTo::Remote(n)))
                    else {
                        continue;
                    };
                    g.link = None;
                    g.machine.handle_link_ended(instant(at), broken);
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
