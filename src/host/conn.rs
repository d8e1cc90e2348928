//! Per-connection state inside the host.

use crate::correlation::InFlight;
use crate::frame::{FrameDecoder, FrameLimits, Framing};

use super::outbox::Outbox;

/// Identifies one connection of a [`Host`](super::Host). An id is never reused for a later
/// connection of the same host (slot index plus generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub(crate) u64);

impl ConnId {
    /// The raw number (stable for the host's lifetime; useful in logs).
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "conn#{}.{}", self.0 & 0xFFFF_FFFF, self.0 >> 32)
    }
}

/// The protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// The Copilot SDK protocol v3 (`session.event` notifications, `session.*` methods).
    CopilotSdk,
    /// The Agent Client Protocol v1 (`session/update` notifications, `session/*` methods).
    Acp,
}

impl Dialect {
    /// The framing the dialect's clients use: Content-Length for the Copilot SDKs, NDJSON
    /// for ACP.
    pub fn default_framing(self) -> Framing {
        match self {
            Dialect::CopilotSdk => Framing::ContentLength,
            Dialect::Acp => Framing::Ndjson,
        }
    }
}

/// One connected peer.
///
/// What every fan-out touches (flags, framing, the outbox) is stored inline; the larger
/// state used only by requests (decoder, correlation tables, ACP state) is boxed, so the
/// connection table stays small enough to stay in cache when an event reaches thousands of
/// connections.
pub(crate) struct Conn {
    pub dialect: Dialect,
    pub framing: Framing,
    pub decoder: Box<FrameDecoder>,
    /// A good `connect` was seen, or no connection token is configured.
    pub authenticated: bool,
    pub in_flight: Box<InFlight>,
    pub outbox: Outbox,
    /// Already in the host's ready-set.
    pub in_ready: bool,
    /// Sessions this connection is attached to.
    pub sessions: Vec<String>,
    /// The host decided to close it; no more frames are queued.
    pub closing: bool,
    /// The session whose streaming events this reader lost, to report once it catches up.
    pub drop_session: Option<String>,
    /// Requests the host sent to this peer, awaiting its response.
    pub calls: Box<crate::correlation::PendingRequests<super::client_calls::ClientCall>>,
    /// State of the ACP dialect (unused by Copilot SDK connections).
    pub acp: Box<crate::acp::ConnState>,
}

impl Conn {
    pub fn new(
        dialect: Dialect,
        framing: Framing,
        limits: FrameLimits,
        budget: usize,
        authenticated: bool,
    ) -> Self {
        Conn {
            dialect,
            acp: Box::default(),
            calls: Box::new(crate::correlation::PendingRequests::starting_at(1)),
            drop_session: None,
            framing,
            decoder: Box::new(FrameDecoder::new(framing, limits)),
            authenticated,
            in_flight: Box::new(InFlight::new()),
            outbox: Outbox::new(budget),
            in_ready: false,
            sessions: Vec::new(),
            closing: false,
        }
    }
}
