//! Links: how a gateway relays a client of node B to the node A owning its session. The
//! client's direction is sent by B's [`crate::machines::gateway_links::GatewayLinks`]
//! ([`crate::group`]'s task); A serves it with its
//! [`crate::machines::owner_links::OwnerLinks`] ([`crate::owner`]).
//!
//! B's host hands the client's connection over (`ClusterOutput::Forward`) once a lookup finds the
//! session owned by A. B opens a *link* with a NATS request to A's link subject; A attaches an
//! in-memory pipe to its driver as an ordinary connection, so A's host serves the client:
//! it decides who is asked, tool and command ownership and first answers, and holds frames
//! until their events are acknowledged by JetStream, as for its own clients. Frames travel one
//! per core NATS message, in order (one publisher per direction): B → A on the link's `in`
//! subject; A → B in B's relay group ([`crate::group`]), which carries the frames of all the
//! clients B relays to A, an event for several of them once. The opening names the client's
//! dialect and its handshake (ACP's `initialize`), which A replays on its side. Messages are
//! numbered per direction and each side sends a heartbeat every second naming the last number
//! it sent ([`crate::link_messages`]); a frame larger than the server's `max_payload` travels
//! as several messages.
//!
//! Core NATS delivers at most once, so a message can be lost: a skipped number or a heartbeat
//! naming a number never received makes the receiver ask for it again, and the sender, which
//! keeps its latest messages, publishes it again (asked on
//! [`crate::layout::Layout::resend_subject`]). A loss that is not
//! repaired in time (or that the sender no longer keeps), or five seconds without any message,
//! **breaks** the link (or the group, and so the links of all its clients). A sees a broken
//! link as if B died:
//! the relayed connection ends, and A says so in the group. B re-attaches the client to A over
//! a new link (as after a takeover, [`crate::gateway`]) when A still answers, and treats A as
//! dead otherwise.
//!
//! Each side watches the other's lease: when A dies, B's gateway re-attaches the client to the
//! session's new owner (see [`crate::gateway`]), over a new link, or over an in-memory pipe to
//! B's own host ([`open_local`]) when B took the session over; when B dies, A ends the relayed
//! connection (its tool calls fail, its prompts are denied).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire::host::ConnId;
use bytes::Bytes;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tracing::info;

use crate::group::PendingOpen;
use crate::machines::group_in::OwnerFrame;
use crate::machines::owner_links::Opening;
use crate::record::NodeIdentity;
use crate::shared::{LinkCommand, Node};
use crate::wire::{read_bodies, write_bodies, PIPE_BYTES};

/// How long B waits for A to accept a link.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

fn open_subject(node: &Node, owner: &str) -> String {
    node.layout.link_open_subject(owner)
}

/// Whether `owner` answers on its link subject (a killed node's subscription is gone at once:
/// NATS answers "no responders").
pub(crate) async fn answers(node: &Node, owner: &str) -> bool {
    let client = node.engine.client();
    let probe = Bytes::from_static(br#"{"probe":true}"#);
    let request = client.request(open_subject(node, owner), probe);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), request).await,
        Ok(Ok(_))
    )
}

/// The gateway's ends of a link to a session's owner: client frame bodies go in, the
/// owner's frame bodies come out; `from_owner` ends when the owner closed the link or the link
/// broke ([`LinkEnds::broken`] says why). Dropping `to_owner` closes it.
pub(crate) struct LinkEnds {
    /// The client's frame bodies, in order.
    pub(crate) to_owner: UnboundedSender<Bytes>,
    /// The owner's frame bodies for the client, in order.
    pub(crate) from_owner: UnboundedReceiver<OwnerFrame>,
    /// Set (before `from_owner` ends) when the link lost a message or went silent.
    broken: Arc<Mutex<Option<String>>>,
    /// The relayed connection the owner serves the link as (its number, as the owner
    /// answered the opening); `None` for a link to this node's own host.
    pub(crate) member: Option<u64>,
}

impl LinkEnds {
    /// Why the link broke (a message lost, or silence), once `from_owner` ended; `None` when
    /// the owner closed it.
    pub(crate) fn broken(&self) -> Option<String> {
        self.broken.lock().ok().and_then(|b| b.clone())
    }
}

/// Opens a link over NATS to `owner` for the client connection `conn` (each link of a
/// connection, one per relayed session and re-attachment, is named apart).
pub(crate) async fn open_remote(
    node: &Arc<Node>,
    conn: ConnId,
    owner: &NodeIdentity,
) -> Result<LinkEnds, String> {
    let client = node.engine.client().clone();
    let number = node.next_link();
    let link = node.me.link_name(conn.as_u64(), number);
    // The owner counts the relayed connection as authenticated when this node authenticated
    // its client (a cluster peer is trusted: it holds the cluster's NATS credentials).
    let authenticated = authenticated(node, conn);
    // The owner serves the client in its own dialect, set up as the client set up its
    // connection here (ACP's `initialize`, Copilot SDK registrations).
    let (dialect, handshake) = node
        .host
        .get()
        .and_then(|host| {
            host.with_host(|h, _| {
                let dialect = h.connection_dialect(conn)?;
                let handshake: Vec<String> = h
                    .cluster()
                    .relay_handshake(conn)
                    .iter()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect();
                Some((dialect, handshake))
            })
        })
        .flatten()
        .ok_or("this node is shutting down")?;
    let unanswered = || {
        format!(
            "the session is owned by node {}, which does not answer; reconnect and resume \
             the session",
            owner.node
        )
    };
    // A group the owner ended meanwhile is refused: the next one is new. An owner that
    // refuses a new group too (it is stopping) does not answer.
    let mut tries = 0;
    let (opening, member) = loop {
        tries += 1;
        let opening = PendingOpen::begin(&node.links, owner, dialect)
            .await
            .ok_or("this node is shutting down")?;
        let open = Opening {
            link: link.clone(),
            peer: node.me.clone(),
            group: opening.group.clone(),
            dialect,
            authenticated,
        };
        let open = open.request(&handshake).to_string();
        let request = client.request(open_subject(node, &owner.node), open.into());
        let answer = match tokio::time::timeout(OPEN_TIMEOUT, request).await {
            Ok(Ok(answer)) => answer,
            _ => return Err(unanswered()),
        };
        let answer: serde_json::Value =
            serde_json::from_slice(&answer.payload).map_err(|_| unanswered())?;
        match answer["member"].as_u64() {
            Some(member) => break (opening, member),
            None if answer["error"] == "group" && tries < 3 => opening.refused(),
            None => return Err(unanswered()),
        }
    };
    info!(owner = %owner.node, %link, group = %opening.group, "client relayed to the owner node");
    let (owner_tx, from_owner) = unbounded_channel();
    let broken = Arc::new(Mutex::new(None));
    opening
        .attach(member, number, link, owner_tx, broken.clone())
        .await;
    // The client's frames go out through B's task; the link closes when the gateway drops
    // its end.
    let (to_owner, mut bodies) = unbounded_channel::<Bytes>();
    let links = node.links.clone();
    tokio::spawn(async move {
        while let Some(body) = bodies.recv().await {
            let _ = links.send(LinkCommand::Send { link: number, body });
        }
        let _ = links.send(LinkCommand::Close { link: number });
    });
    Ok(LinkEnds {
        to_owner,
        from_owner,
        broken,
        member: Some(member),
    })
}

/// Whether this node's host authenticated the client connection `conn`.
fn authenticated(node: &Node, conn: ConnId) -> bool {
    node.host
        .get()
        .and_then(|host| host.with_host(|h, _| h.cluster().is_connection_authenticated(conn)))
        .unwrap_or(false)
}

/// Counts the relayed connection `conn` of `host` as authenticated.
fn authenticate(host: &agentwire_driver::HostHandle, conn: ConnId) {
    host.with_host(|h, _| h.cluster().authenticate_connection(conn));
}

/// Opens a link to this node's own host (the gateway's node became the session's owner) for
/// the client connection `conn`: an in-memory pipe served as an ordinary connection,
/// authenticated when `conn` is, set up with `conn`'s handshake (whose answer is not the
/// client's).
pub(crate) fn open_local(node: &Node, conn: ConnId) -> Option<LinkEnds> {
    let host = node.host.get()?.clone();
    let framing = host.framing()?;
    let authenticated = authenticated(node, conn);
    // Set up as the client set its connection up (ACP's `initialize`), as on a remote owner.
    let handshake = host
        .with_host(|h, _| h.cluster().relay_handshake(conn))
        .unwrap_or_default();
    let (host_side, link_side) = tokio::io::duplex(PIPE_BYTES);
    let (host_read, host_write) = tokio::io::split(host_side);
    let relayed = host.attach(host_read.compat(), host_write.compat_write())?;
    if authenticated {
        authenticate(&host, relayed);
    }
    let (from_host, to_host) = tokio::io::split(link_side);
    let to_owner = write_bodies(to_host, framing);
    for request in handshake {
        let _ = to_owner.send(Bytes::from(request));
    }
    let (owner_tx, from_owner) = unbounded_channel();
    tokio::spawn(read_bodies(from_host, framing, owner_tx));
    Some(LinkEnds {
        to_owner,
        from_owner,
        broken: Arc::default(),
        member: None,
    })
}
