//! One JSON-RPC peer as a sans-IO state machine, usable on its own by custom runtimes.
//!
//! An [`Endpoint`] is a [`FrameDecoder`] + [`PendingRequests`] (our requests) + [`InFlight`]
//! (the peer's requests) + a bounded outbox of encoded frames. It never reads a clock or
//! touches a socket: the runtime feeds it bytes, EOF and timestamps, and drains what it
//! produced, in the style of `quinn-proto`:
//!
//! * inputs: [`handle_bytes`](Endpoint::handle_bytes), [`handle_eof`](Endpoint::handle_eof),
//!   [`handle_timeout`](Endpoint::handle_timeout), and the application's
//!   [`send_request`](Endpoint::send_request), [`send_notification`](Endpoint::send_notification),
//!   [`respond`](Endpoint::respond) / [`respond_error`](Endpoint::respond_error),
//!   [`cancel`](Endpoint::cancel), [`close`](Endpoint::close);
//! * outputs: [`poll_transmit`](Endpoint::poll_transmit) (whole frames, in emit order),
//!   [`poll_event`](Endpoint::poll_event) ([`EndpointEvent`]s), and
//!   [`poll_timeout`](Endpoint::poll_timeout) (when to call `handle_timeout` next).
//!
//! Guarantees: every request we send ends in exactly one [`EndpointEvent::Outcome`] (result,
//! error, cancelled, timed out or closed); every request the peer sends is answered at most once
//! (a second `respond` is refused with [`SendError::NotInFlight`]); invalid input is answered
//! automatically (`-32700` / `-32600`, batches per [`BatchPolicy`](crate::jsonrpc::BatchPolicy)); peer input never panics; a
//! framing error closes the endpoint with a reason.
//!
//! # The run loop
//!
//! Feed every input, then drain `poll_transmit` and `poll_event`, then sleep until the next
//! input or `poll_timeout()`. Here a client and a server endpoint are wired together in memory:
//!
//! ```
//! use std::time::Duration;
//! use agentwire::correlation::Outcome;
//! use agentwire::endpoint::{Endpoint, EndpointConfig, EndpointEvent, Role};
//! use agentwire::frame::Framing;
//! use agentwire::Timestamp;
//! use serde_json::json;
//!
//! let mut now = Timestamp::from_millis(1_795_983_976_952);
//! let mut client = Endpoint::new(Role::Client, EndpointConfig::new(Framing::ContentLength));
//! let mut server = Endpoint::new(Role::Server, EndpointConfig::new(Framing::ContentLength));
//!
//! let ping = client
//!     .send_request(now, "ping", &json!({"message": "hi"}), Some(Duration::from_secs(5)))
//!     .unwrap();
//! let pending = client.send_request(now, "slow", &(), Some(Duration::from_secs(1))).unwrap();
//!
//! let mut answer = None;
//! while answer.is_none() || client.pending_requests() > 0 {
//!     // Client -> server: write every frame the client produced (here: straight into the server).
//!     while let Some(frame) = client.poll_transmit() {
//!         server.handle_bytes(now, &frame);
//!     }
//!     // The server application handles its events.
//!     while let Some(event) = server.poll_event() {
//!         if let EndpointEvent::Request(request) = event {
//!             if request.method() == "ping" {
//!                 let params: serde_json::Value = request.params().unwrap();
//!                 let reply = json!({"message": format!("pong: {}", params["message"])});
//!                 server.respond(request.id(), &reply).unwrap();
//!             } // "slow" is never answered
//!         }
//!     }
//!     // Server -> client.
//!     while let Some(frame) = server.poll_transmit() {
//!         client.handle_bytes(now, &frame);
//!     }
//!     while let Some(event) = client.poll_event() {
//!         if let EndpointEvent::Outcome { id, outcome } = event {
//!             if id == ping {
//!                 answer = Some(outcome);
//!             } else {
//!                 assert_eq!((id, outcome), (pending.clone(), Outcome::TimedOut));
//!             }
//!         }
//!     }
//!     // Nothing left to do: sleep until the next deadline (a real runtime also wakes on input).
//!     if let Some(deadline) = client.poll_timeout() {
//!         now = now.max(deadline);
//!         client.handle_timeout(now);
//!     }
//! }
//! let Some(Outcome::Result(result)) = answer else { panic!("no answer") };
//! assert_eq!(result.get(), r#"{"message":"pong: \"hi\""}"#);
//! ```

pub(crate) mod child;
mod messages;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::correlation::{parse_cancel, CancelParams, InFlight, Outcome, PendingRequests};
use crate::frame::{encode_frame, encoded_len, FrameDecoder};
use crate::jsonrpc::{self, ErrorObject, Message, OwnedId, Parsed, Rejection};
use crate::time::Timestamp;

/// Initial capacity of the spare body buffer (most requests and answers fit).
const SPARE_BODY_CAPACITY: usize = 256;
/// A body buffer that grew past this is dropped rather than kept as the spare.
const MAX_SPARE_BODY_CAPACITY: usize = 64 * 1024;
/// Bytes reserved at a time for encoded frames, which are split off the reservation.
const ENCODE_CHUNK: usize = 8 * 1024;

use messages::*;
pub use messages::{
    CloseReason, EndpointConfig, EndpointEvent, EndpointStats, IncomingNotification,
    IncomingRequest, Role, SendError, Unsent,
};

/// One JSON-RPC peer: see the [module documentation](self).
#[derive(Debug)]
pub struct Endpoint {
    role: Role,
    config: EndpointConfig,
    decoder: FrameDecoder,
    pending: PendingRequests<()>,
    in_flight: InFlight,
    batches: BTreeMap<u64, BatchAnswer>,
    batch_of: BTreeMap<OwnedId, u64>,
    next_batch: u64,
    outbox: VecDeque<Bytes>,
    outbox_bytes: usize,
    encode_buf: BytesMut,
    /// A spare body buffer: sends encode into it and hand it back once the frame is queued, so
    /// a small message allocates nothing for its body.
    body_buf: Vec<u8>,
    events: VecDeque<EndpointEvent>,
    closed: Option<CloseReason>,
    stats: EndpointStats,
}

impl Endpoint {
    /// A fresh endpoint.
    pub fn new(role: Role, config: EndpointConfig) -> Endpoint {
        Endpoint {
            role,
            decoder: FrameDecoder::new(config.framing, config.frame_limits),
            pending: PendingRequests::starting_at(config.first_request_id),
            in_flight: InFlight::new(),
            batches: BTreeMap::new(),
            batch_of: BTreeMap::new(),
            next_batch: 0,
            outbox: VecDeque::new(),
            outbox_bytes: 0,
            encode_buf: BytesMut::new(),
            body_buf: Vec::new(),
            events: VecDeque::new(),
            closed: None,
            stats: EndpointStats::default(),
            config,
        }
    }

    // ----- inputs -------------------------------------------------------------------------

    /// Feeds bytes read from the peer. Requests whose deadline is at or before `now` time out
    /// first, so a response arriving after its deadline is late even if
    /// [`handle_timeout`](Self::handle_timeout) was not called yet. Ignored once closed.
    pub fn handle_bytes(&mut self, now: Timestamp, bytes: &[u8]) {
        if self.closed.is_some() {
            return;
        }
        self.handle_timeout(now);
        if let Err(e) = self.decoder.push(bytes) {
            self.close_with(CloseReason::Framing(e));
            return;
        }
        loop {
            match self.decoder.next_frame() {
                Ok(Some(frame)) => self.handle_frame(frame),
                Ok(None) => break,
                Err(e) => {
                    self.close_with(CloseReason::Framing(e));
                    break;
                }
            }
        }
    }

    /// The peer closed its side: every pending request ends [`Outcome::Closed`], in-flight
    /// requests are forgotten, and [`EndpointEvent::Closed`] is emitted.
    pub fn handle_eof(&mut self) {
        let buffered = self.decoder.buffered_len();
        self.close_with(if buffered == 0 {
            CloseReason::PeerClosed
        } else {
            CloseReason::PeerClosedMidFrame { buffered }
        });
    }

    /// Times out every request whose deadline is at or before `now` ([`Outcome::TimedOut`]),
    /// telling the peer with the configured cancel notification.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        for (id, ()) in self.pending.handle_timeout(now) {
            self.send_cancel_notification(&id);
            self.events.push_back(EndpointEvent::Outcome {
                id,
                outcome: Outcome::TimedOut,
            });
        }
    }

    /// Closes the endpoint locally, like [`handle_eof`](Self::handle_eof) but with `reason`.
    /// Frames already queued stay available to [`poll_transmit`](Self::poll_transmit).
    pub fn close(&mut self, reason: impl Into<String>) {
        self.close_with(CloseReason::Local(reason.into()));
    }

    // ----- application sends ----------------------------------------------------------------

    /// Sends a request; its single outcome arrives later as [`EndpointEvent::Outcome`] with the
    /// returned id. `params` serialising to `null` (e.g. `&()`) omits the member. With a
    /// `timeout`, the request ends [`Outcome::TimedOut`] at `now + timeout`.
    pub fn send_request<P: Serialize + ?Sized>(
        &mut self,
        now: Timestamp,
        method: &str,
        params: &P,
        timeout: Option<Duration>,
    ) -> Result<OwnedId, SendError> {
        if self.closed.is_some() {
            return Err(SendError::Closed);
        }
        let mut body = self.take_body_buf();
        let id = self.pending.reserve();
        jsonrpc::write_request(&mut body, &id, method, params)?;
        self.submit_request(now, body, id.clone(), timeout)?;
        Ok(id)
    }

    /// Sends a notification. `params` serialising to `null` omits the member.
    pub fn send_notification<P: Serialize + ?Sized>(
        &mut self,
        method: &str,
        params: &P,
    ) -> Result<(), SendError> {
        if self.closed.is_some() {
            return Err(SendError::Closed);
        }
        let mut body = self.take_body_buf();
        jsonrpc::write_notification(&mut body, method, params)?;
        self.submit_other(body, UnsentKind::Notification)
    }

    /// Answers the peer's request `id` with `result`. Refused with [`SendError::NotInFlight`] if
    /// it was already answered (or never received): each request is answered exactly once.
    pub fn respond<T: Serialize + ?Sized>(
        &mut self,
        id: &OwnedId,
        result: &T,
    ) -> Result<(), SendError> {
        self.check_in_flight(id)?;
        let mut body = self.take_body_buf();
        jsonrpc::write_result_value(&mut body, id, result)?;
        self.submit_other(body, UnsentKind::Response { id: id.clone() })
    }

    /// Answers the peer's request `id` with an already encoded result.
    pub fn respond_raw(&mut self, id: &OwnedId, result: &RawValue) -> Result<(), SendError> {
        self.check_in_flight(id)?;
        let mut body = self.take_body_buf();
        jsonrpc::write_result(&mut body, id, result);
        self.submit_other(body, UnsentKind::Response { id: id.clone() })
    }

    /// Answers the peer's request `id` with an error.
    pub fn respond_error(&mut self, id: &OwnedId, error: &ErrorObject) -> Result<(), SendError> {
        self.check_in_flight(id)?;
        let mut body = self.take_body_buf();
        jsonrpc::write_error(&mut body, Some(id), error);
        self.submit_other(body, UnsentKind::Response { id: id.clone() })
    }

    /// Sends a message that was refused with [`SendError::Full`]. A request's timeout starts
    /// counting at `now`.
    pub fn retry(&mut self, now: Timestamp, unsent: Unsent) -> Result<(), SendError> {
        if self.closed.is_some() {
            return Err(SendError::Closed);
        }
        match unsent.kind {
            UnsentKind::Request { id, timeout } => {
                self.submit_request(now, unsent.body, id, timeout)
            }
            UnsentKind::Response { ref id } => {
                self.check_in_flight(id)?;
                self.submit_other(unsent.body, unsent.kind)
            }
            UnsentKind::Notification => self.submit_other(unsent.body, unsent.kind),
        }
    }

    /// Cancels one of our pending requests: it ends [`Outcome::Cancelled`] (reported through
    /// [`poll_event`](Self::poll_event)) and the peer is told with the configured cancel
    /// notification. False if `id` is not pending.
    pub fn cancel(&mut self, id: &OwnedId) -> bool {
        if self.pending.cancel(id).is_none() {
            return false;
        }
        self.send_cancel_notification(id);
        self.events.push_back(EndpointEvent::Outcome {
            id: id.clone(),
            outcome: Outcome::Cancelled,
        });
        true
    }

    // ----- outputs ----------------------------------------------------------------------------

    /// The next frame to write to the peer, in emit order.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        let frame = self.outbox.pop_front()?;
        self.outbox_bytes -= frame.len();
        self.stats.frames_sent += 1;
        Some(frame)
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should be called next.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.pending.poll_timeout()
    }

    // ----- state ------------------------------------------------------------------------------

    /// This endpoint's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// This endpoint's configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    /// Why the endpoint closed, if it did.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.closed.as_ref()
    }

    /// True once closed (EOF, framing error or [`close`](Self::close)).
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// Our requests awaiting an outcome.
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// The peer's requests awaiting our answer.
    pub fn in_flight_requests(&self) -> usize {
        self.in_flight.len()
    }

    /// True if the peer asked to cancel its in-flight request `id`.
    pub fn is_cancel_requested(&self, id: &OwnedId) -> bool {
        self.in_flight.is_cancelled(id)
    }

    /// Frames waiting in the outbox.
    pub fn outbox_frames(&self) -> usize {
        self.outbox.len()
    }

    /// Bytes waiting in the outbox.
    pub fn outbox_bytes(&self) -> usize {
        self.outbox_bytes
    }

    /// True when the outbox is at a limit: application sends fail with [`SendError::Full`].
    /// Runtimes should stop reading from the peer meanwhile, since automatic answers to invalid
    /// input are queued regardless of the limits.
    pub fn is_outbox_full(&self) -> bool {
        !self.has_room(1)
    }

    /// Diagnostic counters.
    pub fn stats(&self) -> EndpointStats {
        EndpointStats {
            unknown_responses: self.pending.unknown_responses(),
            ..self.stats
        }
    }

    // ----- internals --------------------------------------------------------------------------

    fn handle_frame(&mut self, frame: Bytes) {
        self.stats.frames_received += 1;
        match jsonrpc::parse_with(&frame, self.config.batch_policy) {
            Parsed::Single(item) => self.handle_item(&frame, item, None),
            Parsed::Batch(items) => {
                let batch = self.next_batch;
                self.next_batch += 1;
                self.batches.insert(batch, BatchAnswer::default());
                for item in items {
                    self.handle_item(&frame, item, Some(batch));
                }
                self.maybe_finish_batch(batch);
            }
        }
    }

    fn handle_item(
        &mut self,
        frame: &Bytes,
        item: Result<Message<'_>, Rejection>,
        batch: Option<u64>,
    ) {
        match item {
            Err(rejection) => {
                self.stats.rejected += 1;
                let mut body = Vec::with_capacity(80);
                rejection.write_response(&mut body);
                self.auto_answer(batch, body);
            }
            Ok(Message::Request { id, method, params }) => {
                self.stats.requests_received += 1;
                let id = id.to_owned();
                if !self.in_flight.begin(id.clone()) {
                    self.stats.duplicate_requests += 1;
                    let error = ErrorObject::new(
                        jsonrpc::code::INVALID_REQUEST,
                        "Invalid Request: id already in use by a request in flight",
                    );
                    let mut body = Vec::with_capacity(96);
                    jsonrpc::write_error(&mut body, Some(&id), &error);
                    self.auto_answer(batch, body);
                    return;
                }
                if let Some(batch) = batch {
                    if let Some(state) = self.batches.get_mut(&batch) {
                        state.open_requests += 1;
                        self.batch_of.insert(id.clone(), batch);
                    }
                }
                let call = Call::new(frame, &method, params);
                self.events
                    .push_back(EndpointEvent::Request(IncomingRequest { id, call }));
            }
            Ok(Message::Notification { method, params }) => {
                self.stats.notifications_received += 1;
                if let Some(id) = parse_cancel(&method, params) {
                    if self.in_flight.mark_cancelled(&id) {
                        self.events.push_back(EndpointEvent::CancelRequested { id });
                    } else {
                        self.stats.unknown_cancels += 1;
                    }
                    return;
                }
                let call = Call::new(frame, &method, params);
                self.events
                    .push_back(EndpointEvent::Notification(IncomingNotification { call }));
            }
            Ok(Message::Response { id, outcome }) => {
                self.stats.responses_received += 1;
                let n = id.as_u64();
                if let (Some(n), Some(((), outcome))) = (
                    n,
                    self.pending.resolve(&id, Outcome::from_response(outcome)),
                ) {
                    self.events.push_back(EndpointEvent::Outcome {
                        id: OwnedId::from_u64(n),
                        outcome,
                    });
                }
            }
        }
    }

    /// Queues an automatic answer (not subject to the outbox limits).
    fn auto_answer(&mut self, batch: Option<u64>, body: Vec<u8>) {
        match batch.and_then(|b| self.batches.get_mut(&b)) {
            Some(state) => {
                state.parts_len += body.len() + 1;
                state.parts.push(body);
            }
            None => self.enqueue(&body),
        }
    }

    /// Sends a batch's answer once nothing in it is still open.
    fn maybe_finish_batch(&mut self, batch: u64) {
        if self
            .batches
            .get(&batch)
            .is_some_and(|s| s.open_requests == 0)
        {
            if let Some(state) = self.batches.remove(&batch) {
                let mut body = Vec::with_capacity(state.parts_len + 2);
                if jsonrpc::write_batch(&mut body, state.parts.iter().map(Vec::as_slice)) {
                    self.enqueue(&body);
                }
            }
        }
    }

    fn check_in_flight(&self, id: &OwnedId) -> Result<(), SendError> {
        if self.closed.is_some() {
            Err(SendError::Closed)
        } else if !self.in_flight.contains(id) {
            Err(SendError::NotInFlight(id.clone()))
        } else {
            Ok(())
        }
    }

    fn has_room(&self, frame_len: usize) -> bool {
        self.outbox.is_empty()
            || (self.outbox.len() < self.config.max_outbox_frames
                && self.outbox_bytes.saturating_add(frame_len) <= self.config.max_outbox_bytes)
    }

    fn submit_request(
        &mut self,
        now: Timestamp,
        body: Vec<u8>,
        id: OwnedId,
        timeout: Option<Duration>,
    ) -> Result<(), SendError> {
        if !self.has_room(encoded_len(self.config.framing, body.len())) {
            return Err(SendError::Full(Unsent {
                body,
                kind: UnsentKind::Request { id, timeout },
            }));
        }
        let deadline = timeout.map(|t| now.saturating_add(t));
        if !self.pending.start_reserved(&id, deadline, ()) {
            // Retried twice, or the id did not come from this endpoint: nothing to send.
            return Err(SendError::NotInFlight(id));
        }
        self.enqueue(&body);
        self.recycle_body_buf(body);
        Ok(())
    }

    /// Sends a notification or a response (the caller checked the response is in flight).
    fn submit_other(&mut self, body: Vec<u8>, kind: UnsentKind) -> Result<(), SendError> {
        let UnsentKind::Response { id } = &kind else {
            if !self.has_room(encoded_len(self.config.framing, body.len())) {
                return Err(SendError::Full(Unsent { body, kind }));
            }
            self.enqueue(&body);
            self.recycle_body_buf(body);
            return Ok(());
        };
        let batch = self.batch_of.get(id).copied();
        let Some(state) = batch.and_then(|b| self.batches.get(&b)) else {
            if !self.has_room(encoded_len(self.config.framing, body.len())) {
                return Err(SendError::Full(Unsent { body, kind }));
            }
            self.in_flight.finish(id);
            self.enqueue(&body);
            self.recycle_body_buf(body);
            return Ok(());
        };
        // A batch member: the answer is sent with the last one, as one array.
        if state.open_requests == 1 {
            let total = state.parts_len + body.len() + 2;
            if !self.has_room(encoded_len(self.config.framing, total)) {
                return Err(SendError::Full(Unsent { body, kind }));
            }
        }
        self.in_flight.finish(id);
        self.batch_of.remove(id);
        if let Some((b, state)) = batch.and_then(|b| Some((b, self.batches.get_mut(&b)?))) {
            state.open_requests -= 1;
            state.parts_len += body.len() + 1;
            state.parts.push(body);
            self.maybe_finish_batch(b);
        }
        Ok(())
    }

    fn send_cancel_notification(&mut self, id: &OwnedId) {
        if self.closed.is_some() {
            return;
        }
        if let Some(method) = self.config.cancel_method {
            let mut body = self.take_body_buf();
            let params = CancelParams { id: id.clone() };
            if jsonrpc::write_notification(&mut body, method, &params).is_ok() {
                self.enqueue(&body);
            }
            self.recycle_body_buf(body);
        }
    }

    /// The spare body buffer, emptied (or a new one).
    fn take_body_buf(&mut self) -> Vec<u8> {
        let mut body = std::mem::take(&mut self.body_buf);
        body.clear();
        if body.capacity() == 0 {
            body.reserve(SPARE_BODY_CAPACITY);
        }
        body
    }

    /// Keeps `body` as the spare body buffer once its frame is queued, unless it grew large.
    fn recycle_body_buf(&mut self, body: Vec<u8>) {
        if body.capacity() <= MAX_SPARE_BODY_CAPACITY {
            self.body_buf = body;
        }
    }

    fn enqueue(&mut self, body: &[u8]) {
        let len = encoded_len(self.config.framing, body.len());
        if self.encode_buf.capacity() < len {
            // Frames are split off shared chunks: one allocation serves many small frames.
            self.encode_buf.reserve(len.max(ENCODE_CHUNK));
        }
        encode_frame(self.config.framing, body, &mut self.encode_buf);
        let frame = self.encode_buf.split().freeze();
        self.outbox_bytes += frame.len();
        self.outbox.push_back(frame);
    }

    fn close_with(&mut self, reason: CloseReason) {
        if self.closed.is_some() {
            return;
        }
        self.closed = Some(reason.clone());
        for (id, ()) in self.pending.close_all() {
            self.events.push_back(EndpointEvent::Outcome {
                id,
                outcome: Outcome::Closed,
            });
        }
        self.in_flight.clear();
        self.batches.clear();
        self.batch_of.clear();
        self.events.push_back(EndpointEvent::Closed(reason));
    }
}
