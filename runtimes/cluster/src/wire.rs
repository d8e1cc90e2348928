//! What the link and group tasks share to carry frames over NATS and over in-memory pipes:
//! the live subjects a machine subscribed ([`Subscriptions`]), frame bodies read from a host
//! connection, the size of a message, and the liveness check of a node's lease.

use std::collections::HashMap;
use std::sync::Arc;

use agentwire::frame::{encode_frame, FrameDecoder, FrameLimits};

use agentwire::Framing;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::AbortHandle;
use tracing::warn;

use crate::machines::live::LiveIo;
use crate::record::NodeIdentity;
use crate::shared::Node;

/// Capacity of the in-memory pipe of a relayed connection, each way.
pub(crate) const PIPE_BYTES: usize = 256 * 1024;

/// The largest frame a link carries (a reassembled frame over this ends the link): the host's
/// own default frame limit.
pub(crate) const MAX_LINK_FRAME: usize = FrameLimits::DEFAULT_MAX_FRAME_BYTES;

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

/// Whether `who`'s lease key still holds its incarnation ([`crate::drive::is_alive`]).
pub(crate) async fn alive(node: &Node, who: &NodeIdentity) -> bool {
    crate::drive::is_alive(&node.engine, &node.layout, who).await
}

/// A channel whose bodies are framed with `framing` and written to `writer` (a host
/// connection's pipe), in order; once every sender is dropped, or a write fails, the writer is
/// shut down (EOF to the host).
pub(crate) fn write_bodies<W>(mut writer: W, framing: Framing) -> UnboundedSender<Bytes>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut bodies) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(async move {
        while let Some(body) = bodies.recv().await {
            let mut framed = BytesMut::new();
            encode_frame(framing, &body, &mut framed);
            if writer.write_all(&framed).await.is_err() {
                return;
            }
        }
        let _ = writer.shutdown().await;
    });
    tx
}

/// Decodes the host's frames on `reader` into bodies for `tx`, until EOF.
pub(crate) async fn read_bodies<T: From<Bytes>>(
    reader: impl AsyncRead + Unpin,
    framing: Framing,
    tx: UnboundedSender<T>,
) {
    read_bodies_into(reader, framing, |body| tx.send(T::from(body)).is_ok()).await
}

/// Decodes the host's frames on `reader` into bodies for `deliver`, until EOF or until
/// `deliver` answers `false`.
pub(crate) async fn read_bodies_into(
    mut reader: impl AsyncRead + Unpin,
    framing: Framing,
    mut deliver: impl FnMut(Bytes) -> bool,
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
            if !deliver(body) {
                return;
            }
        }
    }
}

/// The live subjects a machine subscribed, each forwarded to its task by a small task of its
/// own as `wrap(subject, Some(payload))`, and `wrap(subject, None)` when the server ended the
/// subscription.
pub(crate) struct Subscriptions<I> {
    client: async_nats::Client,
    forwarders: HashMap<String, AbortHandle>,
    tx: UnboundedSender<I>,
    wrap: fn(Arc<str>, Option<Bytes>) -> I,
}

impl<I: Send + 'static> Subscriptions<I> {
    /// Subscriptions whose messages go to `tx`, wrapped by `wrap`.
    pub(crate) fn new(
        client: async_nats::Client,
        tx: UnboundedSender<I>,
        wrap: fn(Arc<str>, Option<Bytes>) -> I,
    ) -> Self {
        Subscriptions {
            client,
            forwarders: HashMap::new(),
            tx,
            wrap,
        }
    }

    /// Subscribes `subject`; `false` when the server refused (what travels on it is lost:
    /// a link or group it carries goes silent and breaks).
    pub(crate) async fn subscribe(&mut self, subject: String) -> bool {
        let mut messages = match self.client.subscribe(subject.clone()).await {
            Ok(sub) => sub,
            Err(e) => {
                warn!(error = %e, %subject, "cannot subscribe a link subject");
                return false;
            }
        };
        // The name is shared by every message: one count, not a copy, per message.
        let (tx, wrap, name) = (
            self.tx.clone(),
            self.wrap,
            Arc::<str>::from(subject.as_str()),
        );
        let forwarder = tokio::spawn(async move {
            while let Some(message) = messages.next().await {
                if tx.send(wrap(name.clone(), Some(message.payload))).is_err() {
                    return;
                }
            }
            let _ = tx.send(wrap(name, None));
        });
        self.forwarders.insert(subject, forwarder.abort_handle());
        true
    }

    /// Performs `io`; `true` when it subscribed a subject.
    pub(crate) async fn perform(&mut self, io: LiveIo) -> bool {
        match io {
            LiveIo::Subscribe(subject) => return self.subscribe(subject).await,
            LiveIo::Unsubscribe(subject) => self.unsubscribe(&subject),
            LiveIo::Publish { subject, message } => self.publish(subject, message).await,
            LiveIo::AskAgain { subject, message } => {
                warn!(%subject, "link messages were lost; asking for them again");
                self.publish(subject, message).await
            }
        }
        false
    }

    /// Unsubscribes `subject`.
    pub(crate) fn unsubscribe(&mut self, subject: &str) {
        if let Some(forwarder) = self.forwarders.remove(subject) {
            forwarder.abort();
        }
    }

    /// Publishes `message` on `subject` (a failure is logged: the receiver asks again or the
    /// link breaks).
    pub(crate) async fn publish(&self, subject: String, message: Bytes) {
        if let Err(e) = self.client.publish(subject.clone(), message).await {
            warn!(error = %e, %subject, "cannot publish a link message");
        }
    }

    /// Waits until the server has every subscription made so far.
    pub(crate) async fn flush(&self) {
        let _ = self.client.flush().await;
    }
}
