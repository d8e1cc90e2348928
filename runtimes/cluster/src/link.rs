//! Links: how a gateway relays a client of node B to the node A owning its session.
//!
//! B's host hands the client's connection over (`Output::Forward`) once a lookup finds the
//! session owned by A. B opens a *link* with a NATS request to A's link subject; A attaches an
//! in-memory pipe to its driver as an ordinary connection, so A's host serves the client:
//! it decides who is asked, tool and command ownership and first answers, and holds frames
//! until their events are acknowledged by JetStream, as for its own clients. Frames travel one
//! per core NATS message, in order (one publisher per direction): B → A on the link's `in`
//! subject, A → B on its `out` subject; a message is `F` + a frame body, or `C` (closed). A
//! frame larger than the server's `max_payload` travels as several messages: `P` + a part for
//! each but the last, then `F` + the last part; the other side joins them in order.
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

/// The largest frame a link carries (a reassembled frame over this ends the link): the host's
/// own default frame limit.
const MAX_LINK_FRAME: usize = FrameLimits::DEFAULT_MAX_FRAME_BYTES;

/// The link messages carrying `body` when a message may hold `max_payload` bytes: `F` + body
/// when it fits, otherwise `P` + part for each part but the last and `F` + the last part.
fn frame_messages(body: &[u8], max_payload: usize) -> Vec<Bytes> {
    let part_len = max_payload.saturating_sub(1).max(1);
    let parts: Vec<&[u8]> = if body.is_empty() {
        vec![body]
    } else {
        body.chunks(part_len).collect()
    };
    let last = parts.len() - 1;
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let mut message = BytesMut::with_capacity(part.len() + 1);
            message.extend_from_slice(if i == last { b"F" } else { b"P" });
            message.extend_from_slice(part);
            message.freeze()
        })
        .collect()
}

/// Publishes `body` on `subject` as one or more link messages, in order, sized for the server
/// the client is connected to.
async fn publish_frame(
    client: &async_nats::Client,
    subject: &str,
    body: &[u8],
) -> Result<(), async_nats::PublishError> {
    // Reading the server info clones it: only for frames that might not fit.
    const SURELY_FITS: usize = 64 * 1024;
    let max_payload = if body.len() < SURELY_FITS {
        usize::MAX
    } else {
        client.server_info().max_payload
    };
    for message in frame_messages(body, max_payload) {
        client.publish(subject.to_owned(), message).await?;
    }
    Ok(())
}

/// What one link message meant to its receiver.
#[derive(Debug, PartialEq)]
enum Received {
    /// A whole frame body.
    Frame(Bytes),
    /// A part of a larger frame: more follow.
    Part,
    /// `C`, or a message that is not part of the link protocol (the link ends).
    End,
}

/// Joins the parts of frames larger than one message, in the order they arrive.
#[derive(Default)]
struct Reassembly {
    parts: BytesMut,
}

impl Reassembly {
    /// Takes the next link message on the subject.
    fn push(&mut self, payload: &Bytes) -> Received {
        let (tag, rest) = match payload.first() {
            Some(tag) => (*tag, payload.slice(1..)),
            None => return Received::End,
        };
        if tag != b'F' && tag != b'P' {
            return Received::End;
        }
        if self.parts.len() + rest.len() > MAX_LINK_FRAME {
            return Received::End;
        }
        match tag {
            b'P' => {
                self.parts.extend_from_slice(&rest);
                Received::Part
            }
            _ if self.parts.is_empty() => Received::Frame(rest),
            _ => {
                self.parts.extend_from_slice(&rest);
                Received::Frame(std::mem::take(&mut self.parts).freeze())
            }
        }
    }
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
    // The owner counts the relayed connection as authenticated when this node authenticated
    // its client (a cluster peer is trusted: it holds the cluster's NATS credentials).
    let authenticated = authenticated(node, conn);
    let open = json!({"link": link, "node": node.me.node, "incarnation": node.me.incarnation,
                      "authenticated": authenticated});
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
            if let Err(e) = publish_frame(&client, &inbound, &body).await {
                warn!(error = %e, "cannot relay a client frame; the link ends");
                return;
            }
        }
        let _ = client.publish(inbound, Bytes::from_static(b"C")).await;
    });
    tokio::spawn(async move {
        let mut parts = Reassembly::default();
        while let Some(m) = out.next().await {
            match parts.push(&m.payload) {
                Received::Frame(body) => {
                    if owner_tx.send(body).is_err() {
                        return;
                    }
                }
                Received::Part => {}
                Received::End => return,
            }
        }
    });
    Ok(LinkEnds {
        to_owner,
        from_owner,
    })
}

/// Whether this node's host authenticated the client connection `conn`.
fn authenticated(node: &Node, conn: ConnId) -> bool {
    node.host
        .get()
        .and_then(|host| host.with_host(|h, _| h.is_connection_authenticated(conn)))
        .unwrap_or(false)
}

/// Counts the relayed connection `conn` of `host` as authenticated.
fn authenticate(host: &agentwire_driver::HostHandle, conn: ConnId) {
    host.with_host(|h, _| h.authenticate_connection(conn));
}

/// Opens a link to this node's own host (the gateway's node became the session's owner) for
/// the client connection `conn`: an in-memory pipe served as an ordinary connection,
/// authenticated when `conn` is.
pub(crate) fn open_local(node: &Node, conn: ConnId) -> Option<LinkEnds> {
    let host = node.host.get()?.clone();
    let framing = host.framing()?;
    let authenticated = authenticated(node, conn);
    let (host_side, link_side) = tokio::io::duplex(PIPE_BYTES);
    let (host_read, host_write) = tokio::io::split(host_side);
    let relayed = host.attach(host_read.compat(), host_write.compat_write())?;
    if authenticated {
        authenticate(&host, relayed);
    }
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
        let authenticated = open["authenticated"] == true;
        tokio::spawn(owner_link(
            node.clone(),
            link.to_owned(),
            peer,
            authenticated,
            reply,
        ));
    }
}

async fn owner_link(
    node: Arc<Node>,
    link: String,
    peer: NodeIdentity,
    authenticated: bool,
    reply: async_nats::Subject,
) {
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
    let Some(relayed) = host.attach(host_read.compat(), host_write.compat_write()) else {
        return;
    };
    if authenticated {
        // Before the open is answered: the peer sends no frame until then.
        authenticate(&host, relayed);
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
            if let Err(e) = publish_frame(&publisher, &outbound, &body).await {
                warn!(error = %e, "cannot relay a frame to the client's node; the link ends");
                return;
            }
        }
        let _ = publisher.publish(outbound, Bytes::from_static(b"C")).await;
    });

    // The client's frames, framed again for the host; EOF when the client or its node is gone.
    let mut check = tokio::time::interval(node.lease_ttl / 2);
    let mut parts = Reassembly::default();
    loop {
        tokio::select! {
            message = inbound.next() => match message.map(|m| parts.push(&m.payload)) {
                Some(Received::Frame(body)) => {
                    let mut framed = BytesMut::new();
                    encode_frame(framing, &body, &mut framed);
                    if to_host.write_all(&framed).await.is_err() {
                        break;
                    }
                }
                Some(Received::Part) => {}
                Some(Received::End) | None => break,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn join(messages: &[Bytes]) -> Vec<Received> {
        let mut parts = Reassembly::default();
        messages.iter().map(|m| parts.push(m)).collect()
    }

    #[test]
    fn a_frame_that_fits_is_one_message() {
        let messages = frame_messages(b"{}", 10);
        assert_eq!(messages, [Bytes::from_static(b"F{}")]);
        assert_eq!(
            join(&messages),
            [Received::Frame(Bytes::from_static(b"{}"))]
        );
        assert_eq!(frame_messages(b"", 10), [Bytes::from_static(b"F")]);
    }

    #[test]
    fn a_larger_frame_is_split_to_fit_and_joined_in_order() {
        let body: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        for max_payload in [2, 7, 1000, 9_999, 10_000, 10_001] {
            let messages = frame_messages(&body, max_payload);
            assert!(
                messages.iter().all(|m| m.len() <= max_payload),
                "{max_payload}"
            );
            let mut received = join(&messages);
            assert_eq!(received.pop(), Some(Received::Frame(body.clone().into())));
            assert!(
                received.iter().all(|r| *r == Received::Part),
                "{max_payload}"
            );
        }
        // Two split frames in a row come out as two frames.
        let mut messages = frame_messages(&body, 3000);
        messages.extend(frame_messages(b"next", 3000));
        let frames: Vec<Received> = join(&messages)
            .into_iter()
            .filter(|r| *r != Received::Part)
            .collect();
        assert_eq!(
            frames,
            [
                Received::Frame(body.into()),
                Received::Frame(Bytes::from_static(b"next"))
            ]
        );
    }

    #[test]
    fn close_garbage_and_oversized_frames_end_the_link() {
        assert_eq!(join(&[Bytes::from_static(b"C")]), [Received::End]);
        assert_eq!(join(&[Bytes::new()]), [Received::End]);
        assert_eq!(join(&[Bytes::from_static(b"Xjunk")]), [Received::End]);
        let mut parts = Reassembly::default();
        let part = Bytes::from(vec![b'P'; 1024 * 1024 + 1]);
        let mut last = Received::Part;
        for _ in 0..=MAX_LINK_FRAME / (1024 * 1024) {
            last = parts.push(&part);
            if last != Received::Part {
                break;
            }
        }
        assert_eq!(
            last,
            Received::End,
            "a peer cannot grow a frame without bound"
        );
    }
}
