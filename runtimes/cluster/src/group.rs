//! Relay groups over NATS: one ordered stream from a session's owner A to each gateway node B
//! for all the clients B relays to A, so that an event for many of B's clients crosses NATS
//! once.
//!
//! A serves every relayed client as an ordinary connection made a *member* of B's group
//! connection ([`agentwire::host::ClusterApi::join_relay_group`]): the members queue nothing of
//! their own, and the group connection's frames ([`agentwire::host::RelayFrame`]) carry each member's
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
//!
//! Both sides are sans-IO machines ([`crate::machines::group_out::GroupOut`] on A, with the
//! names of its groups in [`crate::machines::group_out::GroupNames`];
//! [`crate::machines::group_in::GroupIn`] on B); the tasks here run them.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentwire::host::{ConnId, Dialect};
use agentwire::Framing;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tracing::{info, warn};

use crate::group_state::{
    dialect_name, GroupIn, GroupInState, GroupsIn, MemberIn, OwnerFrame, PendingOpen,
};
use crate::machines::group_members::MembersEvent;
use crate::machines::group_out::{Admission, GroupNames, GroupOutEvent};
use crate::record::NodeIdentity;
use crate::shared::Node;
use crate::sync::lock;
use crate::wire::{
    alive, ask_again, max_payload, next_request, publish_all, read_bodies, resend_subject,
    MAX_LINK_FRAME, PIPE_BYTES,
};

/// The subject a group's frames travel on.
pub(crate) fn group_subject(node: &Node, group: &str) -> String {
    node.layout.group_subject(group)
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
        let mut state = lock(&self.state);
        if !state.add_member(member, MemberIn { tx, broken }) {
            return false;
        }
        // The broadcasts since the opening was sent (some may predate the owner's join: a
        // lifecycle notification more is harmless, one less is not).
        hand_out(&mut state);
        true
    }

    /// An opening naming this group is about to be sent (see [`PendingOpen`]).
    pub(crate) fn begin_open(self: &Arc<Self>) -> PendingOpen {
        lock(&self.state).machine.begin_open();
        PendingOpen(self.clone())
    }

    /// Whether the group ended.
    pub(crate) fn is_dead(&self) -> bool {
        lock(&self.state).machine.is_ended()
    }

    /// Marks the group ended because the owner refused it (it ended there).
    pub(crate) fn refused(&self) {
        let mut state = lock(&self.state);
        state.machine.refused();
        hand_out(&mut state);
    }
}

/// Hands what a group produced to its members' channels; when the group ended, why
/// (`Some(None)`: closed by the owner).
fn hand_out(state: &mut GroupInState) -> Option<Option<String>> {
    let mut ended = None;
    while let Some(event) = state.poll_event() {
        match event {
            MembersEvent::Frame { to, frame } => {
                for member in to {
                    let _ = member.tx.send(frame.clone());
                }
            }
            MembersEvent::MemberEnded { member, link_broke } => {
                if let Some(why) = link_broke {
                    *lock(&member.broken) = Some(why);
                }
            }
            MembersEvent::Ended { members, broken } => {
                // Every member's channel ends, with `broken` as its link's reason.
                for member in members {
                    if let Some(why) = &broken {
                        *lock(&member.broken) = Some(why.clone());
                    }
                }
                ended = Some(broken);
            }
        }
    }
    ended
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
            state: Mutex::new(GroupInState::new(crate::machines::group_in::GroupIn::new(
                MAX_LINK_FRAME,
                Instant::now(),
            ))),
        });
        groups.insert(key, group.clone());
        let resend = resend_subject(node, &group_subject(node, &group.id));
        tokio::spawn(receive(group.clone(), client, resend, subscription));
        Ok(group)
    }
}

/// B's receiver of one group: runs its machine until the group is closed or breaks; lost
/// messages are asked for again on `resend`.
async fn receive(
    group: Arc<GroupIn>,
    client: async_nats::Client,
    resend: String,
    mut subscription: async_nats::Subscriber,
) {
    let ended = loop {
        let wake = lock(&group.state)
            .machine
            .poll_timeout()
            .unwrap_or_else(Instant::now);
        let message = tokio::select! {
            m = subscription.next() => Some(m),
            _ = tokio::time::sleep_until(wake.into()) => None,
        };
        let (requests, ended) = {
            let mut state = lock(&group.state);
            match message {
                Some(Some(m)) => state.machine.handle_message(&m.payload),
                Some(None) => state.machine.handle_unsubscribed(),
                None => state.machine.handle_timeout(Instant::now()),
            }
            let requests: Vec<_> =
                std::iter::from_fn(|| state.machine.poll_resend_request()).collect();
            (requests, hand_out(&mut state))
        };
        for request in requests {
            ask_again(&client, &resend, request).await;
        }
        if let Some(ended) = ended {
            break ended;
        }
    };
    match &ended {
        Some(why) => {
            warn!(group = %group.id, reason = %why, "the relay group from the owner node broke")
        }
        None => info!(group = %group.id, "the owner node closed the relay group"),
    }
}

/// A's side of one group: its connection in the host and its machine.
#[derive(Clone)]
pub(crate) struct GroupOut {
    /// The group connection.
    pub(crate) conn: ConnId,
    /// The dialect of its members.
    pub(crate) dialect: Dialect,
    machine: Arc<Mutex<crate::machines::group_out::GroupOut>>,
}

impl GroupOut {
    /// Counts a member in (before it is attached); `false` when the group ended.
    pub(crate) fn enter(&self) -> bool {
        lock(&self.machine).enter()
    }

    /// Marks the group ended (its connection is gone from the host).
    pub(crate) fn end(&self) {
        lock(&self.machine).end();
    }

    /// Counts a member out.
    pub(crate) fn leave(&self) {
        lock(&self.machine).leave();
    }

    fn is_ended(&self) -> bool {
        lock(&self.machine).is_ended()
    }
}

/// A's groups, by name; names of ended groups are remembered so that they are refused.
#[derive(Default)]
pub(crate) struct GroupsOut {
    names: GroupNames<GroupOut>,
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
        match self.names.admit(id, GroupOut::is_ended) {
            Admission::Live(group) => (group.dialect == dialect).then(|| group.clone()),
            Admission::Refused => None,
            Admission::New => {
                let group = start_group(node, id, peer, dialect)?;
                self.names.insert(id, group.clone(), GroupOut::is_ended);
                Some(group)
            }
        }
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
    let (from_host, to_host) = tokio::io::split(link_side);
    let (bodies_tx, bodies) = unbounded_channel();
    tokio::spawn(read_bodies(from_host, framing, bodies_tx));
    let machine =
        crate::machines::group_out::GroupOut::new(peer.clone(), node.lease_ttl / 2, Instant::now());
    let group = GroupOut {
        conn,
        dialect,
        machine: Arc::new(Mutex::new(machine)),
    };
    info!(group = %id, peer = %peer.node, "relay group started");
    tokio::spawn(run_group(
        node.clone(),
        id.to_owned(),
        group.machine.clone(),
        bodies,
        to_host,
    ));
    Some(group)
}

/// Runs A's machine of group `id`: the host's frames on the group connection (`bodies`)
/// published on the group subject, resend requests answered, the peer's lease checked; when
/// the machine ends the group, EOF to the host (`to_host`), which ends the group connection
/// and any member left; once the host's frames end, the close.
async fn run_group(
    node: Arc<Node>,
    id: String,
    machine: Arc<Mutex<crate::machines::group_out::GroupOut>>,
    mut bodies: tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>,
    mut to_host: tokio::io::WriteHalf<tokio::io::DuplexStream>,
) {
    let client = node.engine.client().clone();
    let subject = group_subject(&node, &id);
    // Subscribed before the first message is published, so no request can come before it.
    let mut requests = client
        .subscribe(resend_subject(&node, &subject))
        .await
        .map_err(|e| warn!(error = %e, "cannot serve resend requests of a relay group"))
        .ok();
    let mut closed = false;
    while !closed {
        let wake = lock(&machine).poll_timeout().unwrap_or_else(Instant::now);
        tokio::select! {
            body = bodies.recv() => match body {
                Some(body) => lock(&machine).send(&body, max_payload(&client, body.len())),
                None => {
                    lock(&machine).close();
                    closed = true;
                }
            },
            request = next_request(&mut requests) => match request {
                Some(request) => lock(&machine).handle_resend_request(&request.payload),
                None => requests = None,
            },
            _ = tokio::time::sleep_until(wake.into()) => lock(&machine).handle_timeout(Instant::now()),
        }
        let messages: Vec<_> = {
            let mut machine = lock(&machine);
            std::iter::from_fn(|| machine.poll_transmit()).collect()
        };
        let mut messages = messages.into_iter();
        if !publish_all(&client, &subject, || messages.next()).await {
            return;
        }
        loop {
            let event = lock(&machine).poll_event();
            match event {
                Some(GroupOutEvent::CheckLease(peer)) => {
                    let alive = alive(&node, &peer).await;
                    lock(&machine).handle_lease(Instant::now(), alive);
                }
                Some(GroupOutEvent::Ended(why)) => {
                    info!(group = %id, ?why, "relay group ended");
                    // EOF to the host: it ends the group connection and any member left.
                    let _ = to_host.shutdown().await;
                }
                None => break,
            }
        }
    }
}
