//! Links: how a gateway relays a client of node B to the node A owning its session.
//!
//! B's host hands the client's connection over (`Output::Forward`) once a lookup finds the
//! session owned by A. B opens a *link* with a NATS request to A's link subject; A attaches an
//! in-memory pipe to its driver as an ordinary connection, so A's host serves the client:
//! it decides who is asked, tool and command ownership and first answers, and holds frames
//! until their events are acknowledged by JetStream, as for its own clients. Frames travel one
//! per core NATS message, in order (one publisher per direction): B → A on the link's `in`
//! subject, A → B on its `out` subject; a message is `F` + a frame body, or `C` (closed).
//!
//! Each side watches the other's lease: when A dies, B's gateway re-attaches the client to the
//! session's new owner (see [`crate::gateway`]), over a new link, or over an in-memory pipe to
//! B's own host ([`open_local`]) when B took the session over; when B dies, A ends the relayed
//! connection (its tool calls fail, its prompts are denied).

use std::sync::Arc;
use std::time::Duration;

use agentwire::frame::{encode_frame, FrameDecoder, FrameLimits};
use agentwire::host::ConnId;
use agentwire::Framing;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tracing::{info, warn};

use crate::engine::Engine;
use crate::escape::escape_id;
use crate::node::Node;
use crate::record::NodeIdentity;

/// Capacity of the in-memory pipe of a relayed connection, each way.
const PIPE_BYTES: usize = 256 * 1024;

/// How long B waits for A to accept a link.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

fn open_subject(node: &Node, owner: &str) -> String {
    format!("{}.link.{}", node.layout.live_prefix, escape_id(owner))
}

fn in_subject(node: &Node, link: &str) -> String {
    format!("{}.in.{link}", node.layout.live_prefix)
}

fn out_subject(node: &Node, link: &str) -> String {
    format!("{}.out.{link}", node.layout.live_prefix)
}

fn frame_message(body: &[u8]) -> Bytes {
    let mut message = BytesMut::with_capacity(body.len() + 1);
    message.extend_from_slice(b"F");
    message.extend_from_slice(body);
    message.freeze()
}

/// Whether `who`'s lease key still holds its incarnation (errors count as alive: a NATS hiccup
/// must not cut every relayed client).
pub(crate) async fn alive(node: &Node, who: &NodeIdentity) -> bool {
    match node.engine.kv_get(&node.layout.lease_key(&who.node)).await {
        Ok(Some(entry)) => entry.value == who.incarnation.to_string().as_bytes(),
        Ok(None) => false,
        Err(_) => true,
    }
}

/// Whether `owner` answers on its link subject (a killed node's subscription is gone at once:
/// NATS answers "no responders").
pub(crate) async fn answers(node: &Node, owner: &str) -> bool {
    let client = node.engine.client();
    let ping = Bytes::from_static(br#"{"ping":true}"#);
    let request = client.request(open_subject(node, owner), ping);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), request).await,
        Ok(Ok(_))
    )
}

/// The gateway's ends of a link to a session's owner: client frame bodies go in, the
/// owner's frame bodies come out; `from_owner` ends when the owner closed the link. Dropping
/// `to_owner` closes it.
pub(crate) struct LinkEnds {
    /// The client's frame bodies, in order.
    pub(crate) to_owner: UnboundedSender<Bytes>,
    /// The owner's frame bodies for the client, in order.
    pub(crate) from_owner: UnboundedReceiver<Bytes>,
}

/// Opens a link over NATS to `owner` for the client connection `conn` (`attempt` makes each
/// link of the connection distinct).
pub(crate) async fn open_remote(
    node: &Arc<Node>,
    conn: ConnId,
    owner: &NodeIdentity,
    attempt: u64,
) -> Result<LinkEnds, String> {
    let client = node.engine.client().clone();
    let link = format!(
        "{}x{}x{}x{attempt}",
        escape_id(&node.me.node),
        node.me.incarnation,
        conn.as_u64()
    );
    let mut out = client
        .subscribe(out_subject(node, &link))
        .await
        .map_err(|e| format!("cannot relay to node {}: {e}", owner.node))?;
    // The server has the subscription before the owner can answer on it.
    let _ = client.flush().await;
    let open = json!({"link": link, "node": node.me.node, "incarnation": node.me.incarnation});
    let request = client.request(open_subject(node, &owner.node), open.to_string().into());
    match tokio::time::timeout(OPEN_TIMEOUT, request).await {
        Ok(Ok(_)) => {}
        _ => {
            return Err(format!(
                "the session is owned by node {}, which does not answer; reconnect and resume \
                 the session",
                owner.node
            ))
        }
    }
    info!(owner = %owner.node, %link, "client relayed to the owner node");
    let (to_owner, mut bodies) = unbounded_channel::<Bytes>();
    let (owner_tx, from_owner) = unbounded_channel();
    let inbound = in_subject(node, &link);
    tokio::spawn(async move {
        while let Some(body) = bodies.recv().await {
            if client
                .publish(inbound.clone(), frame_message(&body))
                .await
                .is_err()
            {
                return;
            }
        }
        let _ = client.publish(inbound, Bytes::from_static(b"C")).await;
    });
    tokio::spawn(async move {
        while let Some(m) = out.next().await {
            if m.payload.first() != Some(&b'F') || owner_tx.send(m.payload.slice(1..)).is_err() {
                return;
            }
        }
    });
    Ok(LinkEnds {
        to_owner,
        from_owner,
    })
}

/// Opens a link to this node's own host (the gateway's node became the session's owner): an
/// in-memory pipe served as an ordinary connection.
pub(crate) fn open_local(node: &Node) -> Option<LinkEnds> {
    let host = node.host.get()?.clone();
    let framing = host.framing()?;
    let (host_side, link_side) = tokio::io::duplex(PIPE_BYTES);
    let (host_read, host_write) = tokio::io::split(host_side);
    host.attach(host_read.compat(), host_write.compat_write())?;
    let (from_host, mut to_host) = tokio::io::split(link_side);
    let (to_owner, mut bodies) = unbounded_channel::<Bytes>();
    let (owner_tx, from_owner) = unbounded_channel();
    tokio::spawn(async move {
        while let Some(body) = bodies.recv().await {
            let mut framed = BytesMut::new();
            encode_frame(framing, &body, &mut framed);
            if to_host.write_all(&framed).await.is_err() {
                return;
            }
        }
        let _ = to_host.shutdown().await;
    });
    tokio::spawn(read_bodies(from_host, framing, owner_tx));
    Some(LinkEnds {
        to_owner,
        from_owner,
    })
}

/// Decodes the host's frames on `reader` into bodies for `tx`, until EOF.
async fn read_bodies(
    mut reader: impl AsyncRead + Unpin,
    framing: Framing,
    tx: UnboundedSender<Bytes>,
) {
    let limits = FrameLimits {
        max_frame_bytes: usize::MAX / 2,
        ..FrameLimits::default()
    };
    let mut decoder = FrameDecoder::new(framing, limits);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if decoder.push(&buf[..n]).is_err() {
            return;
        }
        while let Ok(Some(body)) = decoder.next_frame() {
            if tx.send(body).is_err() {
                return;
            }
        }
    }
}

/// A's side: accepts links and serves each as a connection of its own host.
pub(crate) async fn serve_links(node: Arc<Node>) {
    let client = node.engine.client().clone();
    let mut requests = match client.subscribe(open_subject(&node, &node.me.node)).await {
        Ok(sub) => sub,
        Err(e) => {
            warn!(error = %e, "cannot accept relayed clients");
            return;
        }
    };
    while let Some(request) = requests.next().await {
        let Some(reply) = request.reply.clone() else {
            continue;
        };
        let Ok(open) = serde_json::from_slice::<serde_json::Value>(&request.payload) else {
            continue;
        };
        if open["ping"] == true {
            let _ = client.publish(reply, Bytes::from_static(b"ok")).await;
            continue;
        }
        let (Some(link), Some(peer), Some(incarnation)) = (
            open["link"].as_str(),
            open["node"].as_str(),
            open["incarnation"].as_u64(),
        ) else {
            continue;
        };
        if link.is_empty()
            || !link
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            continue;
        }
        let peer = NodeIdentity {
            node: peer.to_owned(),
            incarnation,
        };
        tokio::spawn(owner_link(node.clone(), link.to_owned(), peer, reply));
    }
}

async fn owner_link(node: Arc<Node>, link: String, peer: NodeIdentity, reply: async_nats::Subject) {
    let Some(host) = node.host.get().cloned() else {
        return;
    };
    let Some(framing) = host.framing() else {
        return;
    };
    let client = node.engine.client().clone();
    let mut inbound = match client.subscribe(in_subject(&node, &link)).await {
        Ok(sub) => sub,
        Err(_) => return,
    };
    let _ = client.flush().await;
    let (host_side, link_side) = tokio::io::duplex(PIPE_BYTES);
    let (host_read, host_write) = tokio::io::split(host_side);
    if host
        .attach(host_read.compat(), host_write.compat_write())
        .is_none()
    {
        return;
    }
    let (from_host, mut to_host) = tokio::io::split(link_side);
    let _ = client.publish(reply, Bytes::from_static(b"ok")).await;
    info!(%link, peer = %peer.node, "relayed client attached");

    // The host's frames for the client: decoded back into bodies, one message each.
    let outbound = out_subject(&node, &link);
    let publisher = client.clone();
    let (bodies_tx, mut bodies) = unbounded_channel();
    tokio::spawn(read_bodies(from_host, framing, bodies_tx));
    let writer = tokio::spawn(async move {
        while let Some(body) = bodies.recv().await {
            if publisher
                .publish(outbound.clone(), frame_message(&body))
                .await
                .is_err()
            {
                return;
            }
        }
        let _ = publisher.publish(outbound, Bytes::from_static(b"C")).await;
    });

    // The client's frames, framed again for the host; EOF when the client or its node is gone.
    let mut check = tokio::time::interval(node.lease_ttl / 2);
    loop {
        tokio::select! {
            message = inbound.next() => match message {
                Some(m) if m.payload.first() == Some(&b'F') => {
                    let mut framed = BytesMut::new();
                    encode_frame(framing, &m.payload[1..], &mut framed);
                    if to_host.write_all(&framed).await.is_err() {
                        break;
                    }
                }
                _ => break,
            },
            _ = check.tick() => {
                if !alive(&node, &peer).await {
                    info!(%link, peer = %peer.node, "the relaying node stopped");
                    break;
                }
            }
        }
    }
    let _ = to_host.shutdown().await;
    drop(to_host);
    let _ = writer.await;
}
