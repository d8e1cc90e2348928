//! Relay groups over NATS: one ordered stream from a session's owner A to each gateway node B
//! for all the clients B relays to A, so that an event for many of B's clients crosses NATS
//! once.
//!
//! A serves every relayed client as an ordinary connection made a *member* of B's group
//! connection ([`agentwire::host::ClusterApi::join_relay_group`]): the members queue nothing of
//! their own, and the group connection's frames ([`RelayFrame`]) carry each member's
//! responses, requests and events, an event for several members once, naming them. A
//! publishes the group connection's frames on the group subject as numbered link messages
//! with heartbeats ([`crate::link_messages`]); B reads them and hands each body to the
//! members' gateways. The client → owner direction stays one link per client.
//!
//! A group is named by B (its node, incarnation, the owner and a counter) in each link's
//! opening. A starts a group on the first opening that names it; it ends when B's lease is
//! gone, after a lease TTL without members, or when the host closes it. An opening naming an
//! ended group is refused (`{"error":"group"}`) and B starts a new group. When B's receiver
//! sees a skipped number, silence or junk, the group is **broken**: every member's link is
//! broken with the reason, and each gateway re-attaches its client as after any broken link.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agentwire::host::{ConnId, Dialect, RelayFrame};
use agentwire::Framing;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tracing::{info, warn};

use crate::group_state::{
    dialect_name, GroupIn, GroupsIn, MemberIn, OwnerFrame, PendingOpen, RECENT_LIMIT,
};
use crate::link_messages::{LinkReceiver, Received, HEARTBEAT};
use crate::record::NodeIdentity;
use crate::shared::Node;
use crate::sync::lock;
use crate::wire::{
    alive, ask_again, read_bodies, resend_subject, send_link, MAX_LINK_FRAME, PIPE_BYTES,
};

/// The subject a group's frames travel on.
pub(crate) fn group_subject(node: &Node, group: &str) -> String {
    format!("{}.grp.{group}", node.layout.live_prefix)
}

impl GroupIn {
    /// Registers member `member` (A's id of the relayed connection): its frames go to `tx`.
    /// `false` when the group already ended.
    pub(crate) fn add_member(
        &self,
        member: u64,
        tx: UnboundedSender<OwnerFrame>,
        broken: Arc<Mutex<Option<String>>>,
    ) -> bool {
        let mut members = lock(&self.members);
        if self.dead.load(Ordering::SeqCst) {
            return false;
        }
        // The broadcasts since the opening was sent (some may predate the owner's join: a
        // lifecycle notification more is harmless, one less is not).
        for frame in &lock(&self.recent).frames {
            let _ = tx.send(frame.clone());
        }
        members.insert(member, MemberIn { tx, broken });
        true
    }

    /// An opening naming this group is about to be sent (see [`PendingOpen`]).
    pub(crate) fn begin_open(self: &Arc<Self>) -> PendingOpen {
        lock(&self.recent).pending += 1;
        PendingOpen(self.clone())
    }

    /// Ends the group: every member's channel ends, with `broken` as its link's reason.
    fn end(&self, broken: Option<&str>) {
        let mut members = lock(&self.members);
        self.dead.store(true, Ordering::SeqCst);
        for (_, member) in members.drain() {
            if let Some(why) = broken {
                *lock(&member.broken) = Some(why.to_owned());
            }
        }
    }

    /// Whether the group ended.
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Marks the group ended because the owner refused it (it ended there).
    pub(crate) fn refused(&self) {
        self.end(Some("the owner node ended this node's relay group"));
    }

    /// Hands one group frame to its members; `Err` for junk.
    fn dispatch(&self, body: &Bytes) -> Result<(), String> {
        let frame =
            RelayFrame::parse(body).map_err(|_| "the owner sent a malformed frame".to_owned())?;
        let mut members = lock(&self.members);
        match frame {
            RelayFrame::All(part) => {
                let mut recent = lock(&self.recent);
                if members.is_empty() && recent.pending == 0 {
                    return Ok(());
                }
                let frame = OwnerFrame::read(body.slice_ref(part));
                for member in members.values() {
                    let _ = member.tx.send(frame.clone());
                }
                if recent.pending > 0 {
                    if recent.frames.len() == RECENT_LIMIT {
                        recent.frames.pop_front();
                    }
                    recent.frames.push_back(frame);
                }
            }
            RelayFrame::To {
                members: to,
                body: part,
            } => {
                let frame = OwnerFrame::read(body.slice_ref(part));
                for id in to {
                    if let Some(member) = members.get(&id) {
                        let _ = member.tx.send(frame.clone());
                    }
                }
            }
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
                if let Some(m) = members.remove(&member) {
                    if link_broke {
                        *lock(&m.broken) = Some(String::from_utf8_lossy(reason).into_owned());
                    }
                }
            }
        }
        Ok(())
    }
}

impl GroupsIn {
    /// The live group to `owner` for clients speaking `dialect`, started (subscribed, and
    /// its receiver running) if there is none.
    pub(crate) async fn to(
        &self,
        node: &Arc<Node>,
        owner: &NodeIdentity,
        dialect: Dialect,
    ) -> Result<Arc<GroupIn>, String> {
        let mut groups = self.groups.lock().await;
        let key = (owner.clone(), dialect);
        if let Some(group) = groups.get(&key).filter(|g| !g.is_dead()) {
            return Ok(group.clone());
        }
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let id = format!(
            "{}x{}x{}x{}x{}{n}",
            crate::escape::escape_id(&node.me.node),
            node.me.incarnation,
            crate::escape::escape_id(&owner.node),
            owner.incarnation,
            dialect_name(dialect),
        );
        let client = node.engine.client().clone();
        let subscription = client
            .subscribe(group_subject(node, &id))
            .await
            .map_err(|e| format!("cannot relay to node {}: {e}", owner.node))?;
        // The server has the subscription before the owner publishes on it.
        let _ = client.flush().await;
        let group = Arc::new(GroupIn {
            id,
            members: Mutex::new(HashMap::new()),
            dead: AtomicBool::new(false),
            recent: Mutex::default(),
        });
        groups.insert(key, group.clone());
        let resend = resend_subject(node, &group_subject(node, &group.id));
        tokio::spawn(receive(group.clone(), client, resend, subscription));
        Ok(group)
    }
}

/// B's receiver of one group: dispatches its frames until it is closed or breaks; lost
/// messages are asked for again on `resend`.
async fn receive(
    group: Arc<GroupIn>,
    client: async_nats::Client,
    resend: String,
    mut subscription: async_nats::Subscriber,
) {
    let mut receiver = LinkReceiver::new(MAX_LINK_FRAME);
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    let broken = 'group: loop {
        let received = tokio::select! {
            m = subscription.next() => match m {
                Some(m) => receiver.push(&m.payload),
                None => Received::Closed,
            },
            _ = heartbeat.tick() => receiver.tick(),
        };
        let mut next = Some(received);
        while let Some(received) = next {
            match received {
                Received::Frame(body) => {
                    if let Err(why) = group.dispatch(&body) {
                        break 'group Some(format!("relay group ended ({why})"));
                    }
                }
                Received::Nothing => {}
                Received::Resend(request) => ask_again(&client, &resend, request).await,
                Received::Closed => break 'group None,
                Received::Broken(why) => break 'group Some(why),
            }
            next = receiver.next_held();
        }
    };
    match &broken {
        Some(why) => {
            warn!(group = %group.id, reason = %why, "the relay group from the owner node broke")
        }
        None => info!(group = %group.id, "the owner node closed the relay group"),
    }
    group.end(broken.as_deref());
}

/// A's state of one group.
struct GroupState {
    /// Members attached or being attached.
    members: usize,
    /// The group ended: no member may join.
    ended: bool,
}

/// A's side of one group: its connection in the host and who is in it.
#[derive(Clone)]
pub(crate) struct GroupOut {
    /// The group connection.
    pub(crate) conn: ConnId,
    /// The dialect of its members.
    pub(crate) dialect: Dialect,
    state: Arc<Mutex<GroupState>>,
}

impl GroupOut {
    /// Counts a member in (before it is attached); `false` when the group ended.
    pub(crate) fn enter(&self) -> bool {
        let mut state = lock(&self.state);
        if state.ended {
            return false;
        }
        state.members += 1;
        true
    }

    /// Marks the group ended (its connection is gone from the host).
    pub(crate) fn end(&self) {
        lock(&self.state).ended = true;
    }

    /// Counts a member out.
    pub(crate) fn leave(&self) {
        let mut state = lock(&self.state);
        state.members = state.members.saturating_sub(1);
    }
}

/// A's groups, by name; names of ended groups are remembered so that they are refused.
#[derive(Default)]
pub(crate) struct GroupsOut {
    groups: HashMap<String, GroupOut>,
    ended: HashSet<String>,
}

impl GroupsOut {
    /// The group `id` of `peer` for clients speaking `dialect`, started if it is new; `None`
    /// when it ended (the opening is refused), speaks another dialect, or the host is gone.
    pub(crate) fn get(
        &mut self,
        node: &Arc<Node>,
        id: &str,
        peer: &NodeIdentity,
        dialect: Dialect,
    ) -> Option<GroupOut> {
        if let Some(group) = self.groups.get(id) {
            if !lock(&group.state).ended {
                return (group.dialect == dialect).then(|| group.clone());
            }
            self.groups.remove(id);
            self.ended.insert(id.to_owned());
            return None;
        }
        if self.ended.contains(id) {
            return None;
        }
        // Forget ended groups' names now and then (a name is never reused by its node).
        let ended: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, g)| lock(&g.state).ended)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ended {
            self.groups.remove(&id);
            self.ended.insert(id);
        }
        if self.ended.len() > 4096 {
            self.ended.clear();
        }
        let group = start_group(node, id, peer, dialect)?;
        self.groups.insert(id.to_owned(), group.clone());
        Some(group)
    }
}

/// Starts group `id` for `peer` on A: a connection of the host whose frames are published on
/// the group subject, ended when the peer's lease is gone or it has had no member for a TTL.
fn start_group(
    node: &Arc<Node>,
    id: &str,
    peer: &NodeIdentity,
    dialect: Dialect,
) -> Option<GroupOut> {
    let host = node.host.get()?.clone();
    // Content-Length whatever the dialect: a group frame's head ends with a newline.
    let framing = Framing::ContentLength;
    let (host_side, link_side) = tokio::io::duplex(PIPE_BYTES);
    let (host_read, host_write) = tokio::io::split(host_side);
    let conn = host.attach_with(
        dialect,
        framing,
        host_read.compat(),
        host_write.compat_write(),
    )?;
    // It never sends a request; it must not be refused for want of the connection token.
    host.with_host(|h, _| h.cluster().authenticate_connection(conn));
    let (from_host, mut to_host) = tokio::io::split(link_side);
    let (bodies_tx, bodies) = unbounded_channel();
    tokio::spawn(read_bodies(from_host, framing, bodies_tx));
    let client = node.engine.client().clone();
    let subject = group_subject(node, id);
    let resend = resend_subject(node, &subject);
    tokio::spawn(send_link(client, subject, resend, bodies));
    let state = Arc::new(Mutex::new(GroupState {
        members: 0,
        ended: false,
    }));
    let group = GroupOut {
        conn,
        dialect,
        state,
    };
    info!(group = %id, peer = %peer.node, "relay group started");
    let watched = group.clone();
    let (node, peer, id) = (node.clone(), peer.clone(), id.to_owned());
    tokio::spawn(async move {
        let mut check = tokio::time::interval(node.lease_ttl / 2);
        let mut idle_checks = 0;
        loop {
            check.tick().await;
            let peer_alive = alive(&node, &peer).await;
            let mut state = lock(&watched.state);
            idle_checks = if state.members == 0 {
                idle_checks + 1
            } else {
                0
            };
            // Two idle checks in a row: a TTL or more without a member.
            if !peer_alive || idle_checks > 2 {
                state.ended = true;
                break;
            }
        }
        info!(group = %id, peer = %peer.node, "relay group ended");
        // EOF to the host: it ends the group connection and any member left.
        let _ = to_host.shutdown().await;
    });
    Some(group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire::host::RelayedEventHead;

    fn group() -> Arc<GroupIn> {
        Arc::new(GroupIn {
            id: "g".to_owned(),
            members: Mutex::new(HashMap::new()),
            dead: AtomicBool::new(false),
            recent: Mutex::default(),
        })
    }

    fn member(g: &GroupIn, id: u64) -> tokio::sync::mpsc::UnboundedReceiver<OwnerFrame> {
        let (tx, rx) = unbounded_channel();
        assert!(g.add_member(id, tx, Arc::default()));
        rx
    }

    fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<OwnerFrame>) -> Vec<Bytes> {
        std::iter::from_fn(|| rx.try_recv().ok().map(|f| f.body)).collect()
    }

    #[test]
    fn frames_reach_the_members_they_name() {
        let g = group();
        let (mut a, mut b) = (member(&g, 1), member(&g, 2));
        g.dispatch(&Bytes::from_static(b"@2\n{\"to\":2}")).unwrap();
        g.dispatch(&Bytes::from_static(b"{\"all\":1}")).unwrap();
        assert_eq!(drain(&mut a), [Bytes::from_static(b"{\"all\":1}")]);
        assert_eq!(
            drain(&mut b),
            [
                Bytes::from_static(b"{\"to\":2}"),
                Bytes::from_static(b"{\"all\":1}")
            ]
        );
        // A member the owner ended gets nothing more; junk is refused.
        g.dispatch(&Bytes::from_static(b"@!2\nbye")).unwrap();
        g.dispatch(&Bytes::from_static(b"{\"all\":2}")).unwrap();
        assert!(drain(&mut b).is_empty());
        assert!(g.dispatch(&Bytes::from_static(b"@x\n")).is_err());
    }

    #[test]
    fn an_event_for_several_members_is_read_once_for_all_of_them() {
        let g = group();
        let (mut a, mut b) = (member(&g, 1), member(&g, 2));
        let event = format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"sessionId":"s","event":{{"id":"e1","type":"assistant.message_delta","ephemeral":true,"data":{{}}}}}}}}"#,
            RelayedEventHead::EVENT_METHOD
        );
        let event = event.as_bytes();
        g.dispatch(&Bytes::copy_from_slice(event)).unwrap();
        let answer = b"@1,2\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
        g.dispatch(&Bytes::from_static(answer)).unwrap();
        let (fa, fb) = (a.try_recv().unwrap(), b.try_recv().unwrap());
        let (ha, hb) = (fa.head.unwrap(), fb.head.unwrap());
        assert!(Arc::ptr_eq(&ha, &hb), "one head for both");
        assert_eq!((ha.session.as_str(), ha.id.as_str()), ("s", "e1"));
        assert!(ha.ephemeral);
        assert_eq!(&fa.body[..], event);
        // A frame that is not an event has no head: it is read as before.
        assert!(a.try_recv().unwrap().head.is_none());
        assert!(b.try_recv().unwrap().head.is_none());
    }

    #[test]
    fn a_client_being_relayed_gets_the_broadcasts_queued_before_it_was_registered() {
        let g = group();
        let opening = g.begin_open();
        // The owner joined the client and broadcast before the gateway registered it.
        g.dispatch(&Bytes::from_static(b"{\"lifecycle\":1}"))
            .unwrap();
        let mut a = member(&g, 1);
        drop(opening);
        assert_eq!(drain(&mut a), [Bytes::from_static(b"{\"lifecycle\":1}")]);
        // Without an opening in flight nothing is kept.
        g.dispatch(&Bytes::from_static(b"{\"lifecycle\":2}"))
            .unwrap();
        let mut b = member(&g, 2);
        assert!(drain(&mut b).is_empty());
        assert_eq!(drain(&mut a), [Bytes::from_static(b"{\"lifecycle\":2}")]);
    }
}
