//! What the link and group tasks share to carry frames over NATS and over in-memory pipes:
//! numbered link messages published with heartbeats and resent on request
//! ([`crate::link_messages`]), frame bodies read from a host connection, and the liveness
//! check of a node's lease.

use agentwire::frame::{FrameDecoder, FrameLimits};
use std::time::Instant;

use agentwire::Framing;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tracing::{info, warn};

use crate::engine::Engine;
use crate::machines::outbound::Outbound;
use crate::record::NodeIdentity;
use crate::shared::Node;

/// Capacity of the in-memory pipe of a relayed connection, each way.
pub(crate) const PIPE_BYTES: usize = 256 * 1024;

/// The largest frame a link carries (a reassembled frame over this ends the link): the host's
/// own default frame limit.
pub(crate) const MAX_LINK_FRAME: usize = FrameLimits::DEFAULT_MAX_FRAME_BYTES;

/// Where the receiver of the link messages published on `subject` asks for lost ones again
/// ([`crate::link_messages`]): `<live prefix>.re.<subject's tail>`, outside the subjects the
/// link's messages travel on.
pub(crate) fn resend_subject(node: &Node, subject: &str) -> String {
    node.layout.resend_subject(subject)
}

/// Publishes the bodies of `bodies` on `subject` as numbered link messages, in order, sized
/// for the server the client is connected to, with a heartbeat every
/// [`crate::link_messages::HEARTBEAT`]; a close message once `bodies` ends. The receiver's
/// resend requests, on `resend`, are answered with the kept messages they ask for, published
/// on `subject` again. Runs an [`Outbound`] machine.
pub(crate) async fn send_link(
    client: async_nats::Client,
    subject: String,
    resend: String,
    mut bodies: UnboundedReceiver<Bytes>,
) {
    let mut outbound = Outbound::new(Instant::now());
    // Subscribed before the first message is published (the server keeps a connection's
    // order), so no request can come before it.
    let mut requests = match client.subscribe(resend).await {
        Ok(requests) => Some(requests),
        Err(e) => {
            warn!(error = %e, "cannot serve resend requests of a link; a lost message breaks it");
            None
        }
    };
    loop {
        let wake = outbound.poll_timeout().unwrap_or_else(Instant::now);
        tokio::select! {
            body = bodies.recv() => match body {
                Some(body) => outbound.send(&body, max_payload(&client, body.len())),
                None => outbound.close(),
            },
            request = next_request(&mut requests) => match request {
                Some(request) => {
                    outbound.handle_resend_request(&request.payload);
                    info!(%subject, "link messages sent again");
                }
                None => requests = None,
            },
            _ = tokio::time::sleep_until(wake.into()) => outbound.handle_timeout(Instant::now()),
        }
        if !publish_all(&client, &subject, || outbound.poll_transmit()).await {
            warn!("cannot relay a frame over a link; the link ends");
            return;
        }
        if outbound.is_closed() {
            return;
        }
    }
}

/// The largest message a body of `len` bytes may travel in: the server's `max_payload` when
/// the body might not fit (reading the server info clones it).
pub(crate) fn max_payload(client: &async_nats::Client, len: usize) -> usize {
    const SURELY_FITS: usize = 64 * 1024;
    if len < SURELY_FITS {
        usize::MAX
    } else {
        client.server_info().max_payload
    }
}

/// Publishes every message `next` hands out on `subject`; `false` when publishing failed.
pub(crate) async fn publish_all(
    client: &async_nats::Client,
    subject: &str,
    mut next: impl FnMut() -> Option<Bytes>,
) -> bool {
    while let Some(message) = next() {
        if let Err(e) = client.publish(subject.to_owned(), message).await {
            warn!(error = %e, %subject, "cannot publish a link message");
            return false;
        }
    }
    true
}

/// The next resend request, or never when there is no subscription.
pub(crate) async fn next_request(
    requests: &mut Option<async_nats::Subscriber>,
) -> Option<async_nats::Message> {
    match requests {
        Some(requests) => requests.next().await,
        None => std::future::pending().await,
    }
}

/// Publishes the resend request `request` of a link receiver on `resend`
/// ([`crate::link_messages::Received::Resend`]).
pub(crate) async fn ask_again(client: &async_nats::Client, resend: &str, request: Bytes) {
    warn!(subject = %resend, "link messages were lost; asking for them again");
    if let Err(e) = client.publish(resend.to_owned(), request).await {
        warn!(error = %e, "cannot ask for lost link messages again");
    }
}

/// Whether `who`'s lease key still holds its incarnation ([`NodeIdentity::holds_lease`]).
pub(crate) async fn alive(node: &Node, who: &NodeIdentity) -> bool {
    let read = node.engine.kv_get(&node.layout.lease_key(&who.node)).await;
    who.holds_lease(&read)
}

/// Decodes the host's frames on `reader` into bodies for `tx`, until EOF.
pub(crate) async fn read_bodies<T: From<Bytes>>(
    mut reader: impl AsyncRead + Unpin,
    framing: Framing,
    tx: UnboundedSender<T>,
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
            if tx.send(T::from(body)).is_err() {
                return;
            }
        }
    }
}
