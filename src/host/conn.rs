//! Per-connection state inside the host.

use crate::correlation::InFlight;
use crate::frame::{FrameDecoder, FrameLimits, Framing};

use super::outbox::Outbox;

/// Identifies one connection of a [`Host`](super::Host). Never reused within a host.
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
        write!(f, "conn#{}", self.0)
    }
}

/// One connected peer.
pub(crate) struct Conn {
    pub framing: Framing,
    pub decoder: FrameDecoder,
    /// A good `connect` was seen, or no connection token is configured.
    pub authenticated: bool,
    pub in_flight: InFlight,
    pub outbox: Outbox,
    /// Already in the host's ready-set.
    pub in_ready: bool,
    /// Sessions this connection is attached to.
    pub sessions: Vec<String>,
    /// The host decided to close it; no more frames are queued.
    pub closing: bool,
}

impl Conn {
    pub fn new(framing: Framing, limits: FrameLimits, budget: usize, authenticated: bool) -> Self {
        Conn {
            framing,
            decoder: FrameDecoder::new(framing, limits),
            authenticated,
            in_flight: InFlight::new(),
            outbox: Outbox::new(budget),
            in_ready: false,
            sessions: Vec::new(),
            closing: false,
        }
    }
}
