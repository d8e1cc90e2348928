//! Per-connection state inside the host.

use std::any::Any;

use crate::correlation::InFlight;
use crate::frame::{FrameDecoder, FrameLimits, Framing};

use crate::host::dialect::DialectId;
use crate::host::io::outbox::Outbox;

/// One connected peer.
///
/// What every fan-out touches (flags, framing, the outbox) is stored inline; the larger
/// state used only by requests (decoder, correlation tables, the dialect's state) is boxed,
/// so the connection table stays small enough to stay in cache when an event reaches
/// thousands of connections.
pub(in crate::host) struct Conn {
    /// The dialect the connection speaks (its entry in the host's dialect table).
    pub dialect: DialectId,
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
    /// The session whose streaming events this reader lost, to report with its next durable
    /// event (or when it is caught up, whichever comes first).
    pub drop_session: Option<String>,
    /// Requests the host sent to this peer, awaiting its response.
    pub calls: Box<crate::correlation::PendingRequests<crate::host::pending::ClientCall>>,
    /// The dialect's own state for this connection (only the dialect reads it).
    pub state: Box<dyn Any + Send>,
    /// The peer performs the model HTTP requests of the sessions it is attached to
    /// (see `effects/provided_http.rs`).
    pub http_provider: bool,
    /// The session the runtime is looking up for this connection, and the frames that wait
    /// for it (the first names it), in order.
    pub parked: Option<(String, std::collections::VecDeque<bytes::Bytes>)>,
}

impl Conn {
    pub(in crate::host) fn new(
        dialect: DialectId,
        state: Box<dyn Any + Send>,
        framing: Framing,
        limits: FrameLimits,
        budget: usize,
        authenticated: bool,
    ) -> Self {
        Conn {
            dialect,
            state,
            calls: Box::new(crate::correlation::PendingRequests::starting_at(1)),
            drop_session: None,
            framing,
            decoder: Box::new(FrameDecoder::new(framing, limits)),
            authenticated,
            in_flight: Box::new(InFlight::new()),
            outbox: Outbox::new(budget),
            in_ready: false,
            http_provider: false,
            sessions: Vec::new(),
            closing: false,
            parked: None,
        }
    }
}
