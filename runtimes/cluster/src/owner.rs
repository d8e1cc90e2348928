//! A's side of relaying over NATS: one task per node accepts link openings on the node's link
//! subject and runs its [`OwnerLinks`] machine, which serves every relayed client as a member
//! of its gateway node's relay group ([`crate::link`], [`crate::group`]).
//!
//! The task is glue: it turns NATS messages, the host's frames on group connections, lease
//! answers and the time into the machine's inputs, and performs what the machine hands out
//! (publish, subscribe, check a lease, write a frame to a member's connection, end a
//! connection). Each host connection is an in-memory pipe attached to the driver; what the
//! host writes to a member is drained (its frames travel in the group).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use agentwire::host::{ConnId, Dialect};
use agentwire::Framing;
use agentwire_driver::HostHandle;
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, WriteHalf};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tracing::{info, warn};

use crate::machines::member::MemberEnd;
use crate::machines::owner_links::{Opening, OwnerEvent, OwnerLinks, Refused, RelayHost};
use crate::record::NodeIdentity;
use crate::shared::Node;
use crate::wire::{
    alive, max_payload, read_bodies_into, write_bodies, Subscriptions, MAX_LINK_FRAME, PIPE_BYTES,
};

/// What the task's helpers report.
enum Input {
    /// A message on a subject the machine subscribed (`None`: the subscription ended).
    Message(Arc<str>, Option<Bytes>),
    /// The host wrote a frame on a group connection.
    GroupFrame(ConnId, Bytes),
    /// The host's frames on a group connection ended.
    GroupClosed(ConnId),
    /// The host ended a member's connection.
    MemberClosed(ConnId),
    /// A lease check's answer.
    Lease(NodeIdentity, bool),
}

/// Serves the links of relayed clients on A for as long as the node runs.
pub(crate) async fn serve_links(node: Arc<Node>) {
    let Some(host) = node.host.get().cloned() else {
        return;
    };
    let client = node.engine.client().clone();
    let open_subject = node.layout.link_open_subject(&node.me.node);
    let mut openings = match client.subscribe(open_subject).await {
        Ok(sub) => sub,
        Err(e) => {
            warn!(error = %e, "cannot accept relayed clients");
            return;
        }
    };
    let (tx, mut rx) = unbounded_channel();
    let mut owner = OwnerSide {
        links: OwnerLinks::new(node.layout.clone(), node.lease_ttl / 2, MAX_LINK_FRAME),
        pipes: Pipes {
            host,
            members: HashMap::new(),
            groups: HashMap::new(),
            tx: tx.clone(),
        },
        subscriptions: Subscriptions::new(client.clone(), tx.clone(), Input::Message),
        node,
        client,
        tx,
    };
    loop {
        owner.perform().await;
        let wake = owner.links.poll_timeout();
        tokio::select! {
            request = openings.next() => match request {
                Some(request) => owner.opening(request).await,
                None => return,
            },
            Some(input) = rx.recv() => owner.input(input),
            _ = sleep_until(wake) => owner.links.handle_timeout(Instant::now()),
        }
    }
}

/// Sleeps until `at`; for ever when `None`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// The task's state: the machine and what performs its events.
struct OwnerSide {
    node: Arc<Node>,
    client: async_nats::Client,
    links: OwnerLinks<ConnId>,
    pipes: Pipes,
    /// The subjects the machine subscribed.
    subscriptions: Subscriptions<Input>,
    tx: UnboundedSender<Input>,
}

impl OwnerSide {
    fn input(&mut self, input: Input) {
        let now = Instant::now();
        match input {
            Input::Message(subject, Some(payload)) => {
                self.links.handle_message(now, &subject, &payload)
            }
            Input::Message(_, None) => {}
            Input::GroupFrame(conn, body) => {
                let max = max_payload(&self.client, body.len());
                self.links.handle_group_frame(now, conn, &body, max);
            }
            Input::GroupClosed(conn) => {
                self.pipes.groups.remove(&conn);
                self.links.handle_group_closed(now, conn);
            }
            Input::MemberClosed(conn) => {
                self.pipes.members.remove(&conn);
                self.links.handle_member_closed(conn);
            }
            Input::Lease(peer, alive) => self.links.handle_lease(now, &peer, alive),
        }
    }

    /// Performs what the machine handed out, until it hands out nothing.
    async fn perform(&mut self) {
        let mut subscribed = false;
        while let Some(event) = self.links.poll_event() {
            match event {
                OwnerEvent::Live(io) => subscribed |= self.subscriptions.perform(io).await,
                OwnerEvent::CheckLease(peer) => {
                    let (node, tx) = (self.node.clone(), self.tx.clone());
                    tokio::spawn(async move {
                        let alive = alive(&node, &peer).await;
                        let _ = tx.send(Input::Lease(peer, alive));
                    });
                }
                OwnerEvent::Deliver { member, body } => {
                    if let Some(pipe) = self.pipes.members.get(&member) {
                        let _ = pipe.send(body);
                    }
                }
                OwnerEvent::MemberEnded { member, link, end } => {
                    match &end {
                        MemberEnd::Broken(why) => {
                            warn!(%link, reason = %why, "the link from the relaying node broke");
                            // As when the relaying node dies, the relayed connection ends;
                            // the group tells the peer why, so that it attaches its client
                            // again.
                            self.pipes.host.with_host(|h, now| {
                                h.cluster().relay_member_link_broke(now, member, why)
                            });
                        }
                        MemberEnd::PeerGone => info!(%link, "the relaying node stopped"),
                        MemberEnd::Closed => {}
                    }
                    // Dropping its writer ends the connection (EOF).
                    self.pipes.members.remove(&member);
                }
                OwnerEvent::GroupEnded { conn, group, end } => {
                    info!(%group, ?end, "relay group ended");
                    // EOF to the host: it ends the group connection and any member left.
                    if let Some(mut to_host) = self.pipes.groups.remove(&conn) {
                        tokio::spawn(async move { to_host.shutdown().await });
                    }
                }
            }
        }
        if subscribed {
            // The server has the subscriptions before the opening is answered.
            self.subscriptions.flush().await;
        }
    }

    /// A request on the node's link subject: a probe, or a link opening.
    async fn opening(&mut self, request: async_nats::Message) {
        let Some(reply) = request.reply.clone() else {
            return;
        };
        let Ok(open) = serde_json::from_slice::<Value>(&request.payload) else {
            return;
        };
        if open["probe"] == true {
            let _ = self.client.publish(reply, Bytes::from_static(b"ok")).await;
            return;
        }
        let Some((opening, handshake)) = Opening::read(&open) else {
            return;
        };
        let member = match self.links.accept(Instant::now(), &opening, &mut self.pipes) {
            Ok(member) => member,
            Err(refused) => {
                // A refused group: the gateway node starts a new one; anything else, the
                // opening fails.
                let answer: &'static [u8] = match refused {
                    Refused::Group => br#"{"error":"group"}"#,
                    Refused::HostGone => br#"{"error":"stopping"}"#,
                    Refused::LinkInUse => br#"{"error":"link in use"}"#,
                };
                warn!(link = %opening.link, peer = %opening.peer.node, ?refused, "link opening refused");
                let _ = self.client.publish(reply, Bytes::from_static(answer)).await;
                return;
            }
        };
        // The link's subject is subscribed before the opening is answered: the peer sends no
        // frame until then.
        self.perform().await;
        if let Some(pipe) = self.pipes.members.get(&member) {
            for request in handshake {
                // Its answer goes to the peer in the group, which keeps it from the client.
                let _ = pipe.send(request);
            }
        }
        let answer = json!({"member": member.as_u64()}).to_string();
        let _ = self.client.publish(reply, answer.into()).await;
        info!(link = %opening.link, peer = %opening.peer.node, "relayed client attached");
    }
}

/// The host's connections of the owner side: in-memory pipes attached to the driver.
struct Pipes {
    host: HostHandle,
    /// Each member's frames from its client, to write to its connection.
    members: HashMap<ConnId, UnboundedSender<Bytes>>,
    /// Each group connection's writing end (only ever shut down: the group sends nothing).
    groups: HashMap<ConnId, WriteHalf<DuplexStream>>,
    tx: UnboundedSender<Input>,
}

impl Pipes {
    /// Attaches an in-memory pipe to the host as a connection speaking `dialect`.
    fn attach(
        &self,
        dialect: Dialect,
        framing: Framing,
    ) -> Option<(
        ConnId,
        tokio::io::ReadHalf<DuplexStream>,
        WriteHalf<DuplexStream>,
    )> {
        let (host_side, link_side) = tokio::io::duplex(PIPE_BYTES);
        let (host_read, host_write) = tokio::io::split(host_side);
        let conn = self.host.attach_with(
            dialect,
            framing,
            host_read.compat(),
            host_write.compat_write(),
        )?;
        let (from_host, to_host) = tokio::io::split(link_side);
        Some((conn, from_host, to_host))
    }
}

impl RelayHost<ConnId> for Pipes {
    fn open_group(&mut self, group: &str, dialect: Dialect) -> Option<ConnId> {
        // Content-Length whatever the dialect: a group frame's head ends with a newline.
        let framing = Framing::ContentLength;
        let (conn, from_host, to_host) = self.attach(dialect, framing)?;
        // It never sends a request; it must not be refused for want of the connection token.
        self.host
            .with_host(|h, _| h.cluster().authenticate_connection(conn));
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let frame = |body| tx.send(Input::GroupFrame(conn, body)).is_ok();
            read_bodies_into(from_host, framing, frame).await;
            let _ = tx.send(Input::GroupClosed(conn));
        });
        self.groups.insert(conn, to_host);
        info!(%group, "relay group started");
        Some(conn)
    }

    fn open_member(
        &mut self,
        dialect: Dialect,
        authenticated: bool,
        group: ConnId,
    ) -> Option<ConnId> {
        let framing = dialect.default_framing();
        let (member, mut from_host, mut to_host) = self.attach(dialect, framing)?;
        let joined = self
            .host
            .with_host(|h, _| {
                if authenticated {
                    h.cluster().authenticate_connection(member);
                }
                h.cluster().join_relay_group(member, group)
            })
            .unwrap_or(false);
        if !joined {
            tokio::spawn(async move { to_host.shutdown().await });
            return None;
        }
        // Everything for the client travels in the group; what the driver writes to the
        // member itself (its shutdown notice) is drained. Its end is the member's end here.
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut sink = vec![0u8; 16 * 1024];
            while matches!(from_host.read(&mut sink).await, Ok(n) if n > 0) {}
            let _ = tx.send(Input::MemberClosed(member));
        });
        // The client's frames, framed again for the host; EOF once the member ends.
        self.members.insert(member, write_bodies(to_host, framing));
        Some(member)
    }
}
