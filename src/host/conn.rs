//! Per-connection state inside the host.

use std::collections::BTreeSet;

use crate::frame::{FrameDecoder, FrameLimits, Framing};
use crate::jsonrpc::OwnedId;

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
            in_flight: InFlight::default(),
            outbox: Outbox::new(budget),
            in_ready: false,
            sessions: Vec::new(),
            closing: false,
        }
    }
}

/// Incoming requests awaiting their one response.
#[derive(Default)]
pub(crate) struct InFlight {
    ids: BTreeSet<OwnedId>,
}

impl InFlight {
    /// Starts tracking `id`; false if a request with this id is already in flight.
    pub fn begin(&mut self, id: OwnedId) -> bool {
        self.ids.insert(id)
    }

    /// Ends tracking; true exactly once per begun id (the one response may be sent).
    pub fn finish(&mut self, id: &OwnedId) -> bool {
        self.ids.remove(id)
    }

    /// A cancellation arrived for `id`: the request still gets its one response.
    pub fn mark_cancelled(&mut self, id: &OwnedId) -> bool {
        self.ids.contains(id)
    }
}
