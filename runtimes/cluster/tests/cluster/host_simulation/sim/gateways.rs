//! The gateways of the simulated nodes: each relayed client connection runs the crate's
//! [`Gateway`] machine, as `gateway.rs` runs it in the runtime, so a relayed client follows its
//! session when the owner dies or its link breaks (re-attached to the same owner, to the
//! session's new owner over a new link, or to this node's own host after it took the session
//! over, and caught up from the log).

use agentwire::frame::{encode_frame, Framing};
use agentwire::host::{ConnId, Dialect};
use agentwire_cluster::drive::{last_seqs, read_logs};
use agentwire_cluster::machines::gateway::{GatewayEvent, Target};
use agentwire_cluster::NodeIdentity;
use bytes::BytesMut;

use super::super::node::{alive, event_id, instant, End, LinkTo};
use super::super::now;
use super::{Sim, NODES};

impl Sim {
    /// Performs what node `i`'s gateway machines ask for, until none asks for anything;
    /// `true` if any did.
    pub(super) fn run_gateways(&mut self, i: usize) -> bool {
        let mut ran = false;
        loop {
            let Some(node) = self.nodes[i].as_mut() else {
                return ran;
            };
            let next = node
                .gateways
                .iter_mut()
                .find_map(|(conn, g)| g.machine.poll_event().map(|event| (*conn, event)));
            let Some((conn, event)) = next else {
                return ran;
            };
            ran = true;
            self.gateway_event(i, conn, event);
        }
    }

    /// Time passed for node `i`'s gateways.
    pub(super) fn gateway_timeouts(&mut self, i: usize) {
        let at = instant(self.cluster.now());
        for g in self.node(i).gateways.values_mut() {
            if g.machine.poll_timeout().is_some_and(|due| due <= at) {
                g.machine.handle_timeout(at);
            }
        }
    }

    fn gateway_event(&mut self, i: usize, conn: ConnId, event: GatewayEvent) {
        let (t, at) = (self.t(), self.cluster.now());
        let node = self.node(i);
        let Some(g) = node.gateways.get_mut(&conn) else {
            return;
        };
        match event {
            GatewayEvent::ToOwner(body) => match g.link {
                Some(LinkTo::Remote(n)) => node.gateway.send(&(conn, n), &body, usize::MAX),
                Some(LinkTo::Local(local)) => {
                    let mut framed = BytesMut::new();
                    encode_frame(Framing::ContentLength, &body, &mut framed);
                    node.feed(t, local, &framed);
                }
                None => {}
            },
            GatewayEvent::ToClient(body) => {
                let route = g.session.clone();
                self.handed(i, conn, &body);
                let node = self.node(i);
                node.host
                    .cluster()
                    .deliver_forwarded(t, conn, &route, &body);
            }
            GatewayEvent::EventToClient(frame) => {
                self.handed(i, conn, &frame.body);
                if let Some(head) = &frame.head {
                    let node = self.node(i);
                    let mut cluster = node.host.cluster();
                    cluster.deliver_forwarded_with_head(t, conn, &frame.body, head);
                }
            }
            GatewayEvent::DeltasLost { session, lost } => node
                .host
                .cluster()
                .forwarded_deltas_lost(t, conn, &session, lost),
            GatewayEvent::CheckLease(owner) => {
                let alive = alive(&node.engine, &owner);
                let g = node.gateways.get_mut(&conn).expect("a gateway");
                g.machine.handle_lease(instant(at), alive);
            }
            GatewayEvent::Probe(owner) => {
                let answers = self.answers(&owner) && self.partitioned[i] == 0;
                let g = self.node(i).gateways.get_mut(&conn).expect("a gateway");
                g.machine.handle_probe(answers);
            }
            GatewayEvent::FindOwner { session, dead } => {
                let found = if node.host.session_events(&session).is_some() {
                    Some(Target::Local)
                } else {
                    let owner = node.owners.get(&session).filter(|o| **o != dead).cloned();
                    owner.filter(|o| alive(&node.engine, o)).map(Target::Remote)
                };
                let g = node.gateways.get_mut(&conn).expect("a gateway");
                g.machine.handle_owner_found(instant(at), found);
            }
            GatewayEvent::LookUp(session) => node.sessions.load(&session, true),
            GatewayEvent::OpenLink(Target::Remote(owner)) => {
                let opened = self.open_remote(i, conn, &owner).map(Some);
                let g = self.node(i).gateways.get_mut(&conn).expect("a gateway");
                g.machine.handle_link_opened(instant(at), opened);
            }
            GatewayEvent::OpenLink(Target::Local) => {
                self.open_local(i, conn);
                let g = self.node(i).gateways.get_mut(&conn).expect("a gateway");
                g.machine.handle_link_opened(instant(at), Ok(None));
            }
            GatewayEvent::DrainLink => {
                // The owner's frames reach the machine as they arrive: nothing is left on the
                // link, which closes.
                let mut g = node.gateways.remove(&conn).expect("a gateway");
                node.close_link(conn, &mut g);
                g.machine.handle_drained(instant(at));
                node.gateways.insert(conn, g);
            }
            GatewayEvent::ReadLastSeqs(sessions) => {
                let seqs = now(last_seqs(&node.engine, &node.layout, sessions));
                let g = node.gateways.get_mut(&conn).expect("a gateway");
                g.machine.handle_last_seqs(seqs);
            }
            GatewayEvent::ReadLogs(sessions) => {
                let logs = now(read_logs(&node.engine, &node.layout, sessions));
                let g = node.gateways.get_mut(&conn).expect("a gateway");
                g.machine.handle_logs(logs, &t.to_rfc3339());
            }
            GatewayEvent::Reattached(to) => {
                self.stats.reattached += 1;
                self.stats.reattached_here += u64::from(to == Target::Local);
                self.trace(format!(
                    "node {i}: gateway of {conn:?} re-attached to {to:?}"
                ));
            }
            GatewayEvent::End(reason) => {
                self.trace(format!("gateway on node {i} ends: {reason}"));
                let node = self.node(i);
                node.close_gateway(conn);
                node.host.cluster().end_forwarding(t, conn, reason);
            }
        }
    }

    /// Invariant 5: each event a gateway hands its client, once (the relayed client's events
    /// all come from its gateway: from its relay group, its own host's link after a takeover,
    /// or the log in a catch-up).
    fn handed(&mut self, i: usize, conn: ConnId, body: &[u8]) {
        let Some(id) = event_id(body) else {
            return;
        };
        let node = self.node(i);
        assert!(
            node.via_gateway.insert((conn, id.clone())),
            "invariant 5: the gateway of {conn:?} on node {i} handed event {id} twice"
        );
    }

    /// `link::open_remote`: node `i` asks `owner` to accept a link for `conn` naming `i`'s
    /// group to it (started if there is none). The member the owner serves it as, or why the
    /// link did not open.
    fn open_remote(&mut self, i: usize, conn: ConnId, owner: &NodeIdentity) -> Result<u64, String> {
        let at = self.cluster.now();
        let b = self.node(i);
        let g = b.gateways.get_mut(&conn).expect("a gateway");
        let n = g.links_opened;
        g.links_opened += 1;
        let session = g.session.clone();
        let link = b.me.link_name(conn.as_u64(), n);
        let peer = b.me.clone();
        let authenticated = b.host.cluster().is_connection_authenticated(conn);
        let j = (0..NODES).find(|&j| self.nodes[j].as_ref().is_some_and(|n| &n.me == owner));
        let up =
            j.is_some_and(|j| self.answers(owner) && self.partitioned[i] == 0 && self.serving(j));
        let unanswered = format!(
            "the session is owned by node {}, which does not answer; reconnect and resume the \
             session",
            owner.node
        );
        let Some(j) = j.filter(|_| up) else {
            return Err(unanswered);
        };
        // A group the owner ended meanwhile is refused: the next one is new.
        for _ in 0..2 {
            let b = self.node(i);
            let group = b.gateway.group_to(instant(at), owner, Dialect::CopilotSdk);
            b.gateway.begin_open(&group);
            // The group's subject is subscribed before the opening is sent.
            self.gateway_events(i);
            let member = self.accept(j, &link, &peer, &group, authenticated);
            let b = self.node(i);
            let Some(member) = member else {
                b.gateway.refused(&group);
                b.gateway.open_done(&group);
                self.stats.groups_refused += 1;
                self.trace(format!("node {j} refused relay group {group}"));
                self.gateway_events(i);
                continue;
            };
            let attached = b
                .gateway
                .attach(instant(at), &group, member, (conn, n), &link);
            b.gateway.open_done(&group);
            assert!(attached, "a live group");
            b.gateways.get_mut(&conn).expect("a gateway").link = Some(LinkTo::Remote(n));
            self.stats.gateways += 1;
            self.trace(format!(
                "gateway {link}: node {i} -> node {j} for {session}, member {member} of {group}"
            ));
            self.gateway_events(i);
            return Ok(member);
        }
        Err(unanswered)
    }

    /// `link::open_local`: node `i` took the session of `conn`'s gateway over; the link is a
    /// connection of its own host, authenticated when `conn` is, set up as `conn` was.
    fn open_local(&mut self, i: usize, conn: ConnId) {
        let t = self.t();
        let node = self.node(i);
        let local = node.host.open(t, Framing::ContentLength);
        if node.host.cluster().is_connection_authenticated(conn) {
            node.host.cluster().authenticate_connection(local);
        }
        node.ends.insert(local, End::Local(conn));
        let handshake = node.host.cluster().relay_handshake(conn);
        for request in handshake {
            let mut framed = BytesMut::new();
            encode_frame(Framing::ContentLength, &request, &mut framed);
            node.feed(t, local, &framed);
        }
        node.gateways.get_mut(&conn).expect("a gateway").link = Some(LinkTo::Local(local));
    }
}
