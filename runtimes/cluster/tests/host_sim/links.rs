//! The gateway links and the sweep of the simulated nodes (`link.rs`, `node.rs`'s `sweep`).

use std::time::Duration;

use agentwire::frame::{encode_frame, Framing};
use agentwire::host::ConnId;
use agentwire_cluster::escape::{escape_id, unescape_id};
use agentwire_cluster::link_messages::{LinkReceiver, LinkSender, Received, HEARTBEAT};
use agentwire_cluster::takeover::preferred_claimant;
use agentwire_cluster::{Engine, LiveSubscription};
use bytes::BytesMut;

use super::super::node::{in_subject, out_subject, End, Gateway};
use super::super::now;
use super::{alive, Sim, NODES, TTL};

impl Sim {
    /// `link::gateway`: B asks the owner to accept a link, then relays the waiting frames.
    pub(super) fn open_gateway(
        &mut self,
        i: usize,
        conn: ConnId,
        session: &str,
        frames: Vec<bytes::Bytes>,
    ) {
        let t = self.t();
        let b = self.node(i);
        let Some(owner) = b.owners.get(session).cloned() else {
            return;
        };
        let link = format!(
            "{}x{}x{}",
            escape_id(&b.me.node),
            b.me.incarnation,
            conn.as_u64()
        );
        let peer = b.me.clone();
        let outbound = now(b.engine.subscribe_live(&out_subject(&link))).expect("subscribe");
        let j = (0..NODES).find(|&j| self.nodes[j].as_ref().is_some_and(|n| n.me == owner));
        let up =
            j.is_some_and(|j| self.answers(&owner) && self.partitioned[i] == 0 && self.serving(j));
        let Some(j) = j.filter(|_| up) else {
            let reason = format!(
                "session {session} is owned by node {}, which does not answer; reconnect and resume the session",
                owner.node
            );
            self.node(i).host.end_forwarding(t, conn, reason);
            return;
        };
        let at = self.cluster.now();
        let a = self.node(j);
        let conn_a = a.host.open(t, Framing::ContentLength);
        let inbound = now(a.engine.subscribe_live(&in_subject(&link))).expect("subscribe");
        a.ends.insert(
            conn_a,
            End::Link {
                link: link.clone(),
                peer,
                inbound,
                sender: LinkSender::default(),
                receiver: LinkReceiver::new(MAX_FRAME),
                next_heartbeat: at,
            },
        );
        self.stats.gateways += 1;
        self.trace(format!(
            "gateway {link}: node {i} -> node {j} for {session}"
        ));
        let b = self.node(i);
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
                owner,
                outbound,
                sender,
                receiver: LinkReceiver::new(MAX_FRAME),
                next_heartbeat: at,
            },
        );
    }

    /// Both sides of every link of node `i`: numbered frames in, heartbeats out, and each side
    /// watching the other's lease and the link's numbers (`link::gateway`, `link::owner_link`).
    /// A broken link (a lost message, or silence) ends the relayed connection on both sides
    /// (the runtime's gateway re-attaches the client instead; the simulation ends it, as it
    /// does after a takeover).
    pub(super) fn links_step(&mut self, i: usize) {
        let t = self.t();
        let at = self.cluster.now();
        let mut broke = 0;
        let node = self.node(i);
        let conns: Vec<ConnId> = node.gateways.keys().copied().collect();
        for conn in conns {
            let node = self.node(i);
            let gateway = node.gateways.get_mut(&conn).expect("gateway");
            let mut end = None;
            while let Some(message) = now(gateway.outbound.next(Duration::ZERO)) {
                match gateway.receiver.push(&message) {
                    Received::Frame(body) => node.host.deliver_forwarded(t, conn, &body),
                    Received::Nothing => {}
                    Received::Closed => {
                        end = Some(format!(
                            "node {} closed the relayed connection",
                            gateway.owner.node
                        ));
                        break;
                    }
                    Received::Broken(why) => {
                        broke += 1;
                        end = Some(broken(&gateway.owner, &why));
                        break;
                    }
                }
            }
            if end.is_none() && at >= gateway.next_heartbeat {
                gateway.next_heartbeat = at + HEARTBEAT;
                let heartbeat = gateway.sender.heartbeat();
                now(node
                    .engine
                    .publish_live(&in_subject(&gateway.link), heartbeat))
                .expect("publish");
                if let Some(why) = gateway.receiver.tick() {
                    broke += 1;
                    end = Some(broken(&gateway.owner, &why));
                }
            }
            let gateway = node.gateways.get(&conn).expect("gateway");
            if end.is_none() && !alive(node, &gateway.owner) {
                end = Some(format!(
                    "the node owning this session ({}) stopped; reconnect and resume the session",
                    gateway.owner.node
                ));
            }
            if let Some(reason) = end {
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!("gateway on node {i} ends: {reason}");
                }
                node.gateways.remove(&conn);
                node.host.end_forwarding(t, conn, reason);
            }
        }
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
                sender,
                receiver,
                next_heartbeat,
            }) = node.ends.get_mut(&conn)
            else {
                continue;
            };
            let peer = peer.clone();
            let mut bytes = Vec::new();
            let mut closed = false;
            while let Some(message) = now(inbound.next(Duration::ZERO)) {
                match receiver.push(&message) {
                    Received::Frame(body) => {
                        let mut framed = BytesMut::new();
                        encode_frame(Framing::ContentLength, &body, &mut framed);
                        bytes.push(framed);
                    }
                    Received::Nothing => {}
                    Received::Closed => {
                        closed = true;
                        break;
                    }
                    Received::Broken(_) => {
                        broke += 1;
                        closed = true;
                        break;
                    }
                }
            }
            if !closed && at >= *next_heartbeat {
                *next_heartbeat = at + HEARTBEAT;
                now(node
                    .engine
                    .publish_live(&out_subject(link), sender.heartbeat()))
                .expect("publish");
                closed = receiver.tick().is_some();
                broke += u64::from(closed);
            }
            for framed in bytes {
                node.feed(t, conn, &framed);
            }
            if closed || !alive(node, &peer) {
                node.ends.remove(&conn);
                node.held.remove(&conn);
                node.host.handle_eof(t, conn);
            }
        }
        self.stats.links_broken += broke;
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

/// The reason a relayed client's connection ends with when its link broke.
fn broken(owner: &agentwire_cluster::NodeIdentity, why: &str) -> String {
    format!(
        "the link to the node owning this session ({}) broke: {why}; reconnect and resume the session",
        owner.node
    )
}
