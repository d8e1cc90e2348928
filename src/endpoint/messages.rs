//! What an [`Endpoint`](super::Endpoint) is configured with and what it hands out: its
//! configuration, its events, the requests and notifications it received, and send errors.

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::correlation::Outcome;
use crate::correlation::{CANCEL_METHOD_ACP, CANCEL_METHOD_LSP};
use crate::frame::{FrameError, FrameLimits, Framing};
use crate::jsonrpc::{BatchPolicy, OwnedId};

/// Which side of the connection this endpoint is. JSON-RPC is symmetric (both sides may send
/// requests); the role is kept for diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// We opened the connection.
    Client,
    /// We accepted the connection.
    Server,
}

/// Endpoint settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointConfig {
    /// How messages are delimited.
    pub framing: Framing,
    /// Decoder limits (frame and header sizes).
    pub frame_limits: FrameLimits,
    /// What to do with incoming batches. Default: [`BatchPolicy::Reject`].
    pub batch_policy: BatchPolicy,
    /// Most frames the outbox holds before application sends fail with [`SendError::Full`].
    /// Default 1024.
    pub max_outbox_frames: usize,
    /// Most bytes the outbox holds before application sends fail with [`SendError::Full`].
    /// Default 16 MiB. A single frame larger than this is accepted when the outbox is empty.
    pub max_outbox_bytes: usize,
    /// The notification sent to the peer when one of our requests is cancelled or times out
    /// (params `{"id":..}`), or `None` to send nothing. Default: `$/cancelRequest` for
    /// `Content-Length` framing (LSP, Copilot SDK), `$/cancel_request` for NDJSON (ACP).
    pub cancel_method: Option<&'static str>,
    /// The id of our first request (later ones count up). Default 0.
    pub first_request_id: u64,
}

impl EndpointConfig {
    /// Defaults for the given framing.
    pub fn new(framing: Framing) -> EndpointConfig {
        EndpointConfig {
            framing,
            frame_limits: FrameLimits::default(),
            batch_policy: BatchPolicy::default(),
            max_outbox_frames: 1024,
            max_outbox_bytes: 16 * 1024 * 1024,
            cancel_method: Some(match framing {
                Framing::ContentLength => CANCEL_METHOD_LSP,
                Framing::Ndjson | Framing::Http => CANCEL_METHOD_ACP,
            }),
            first_request_id: 0,
        }
    }
}

/// Why an endpoint closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed the stream between frames.
    PeerClosed,
    /// The peer closed the stream in the middle of a frame.
    PeerClosedMidFrame {
        /// Bytes of the incomplete frame that were discarded.
        buffered: usize,
    },
    /// The byte stream broke the framing rules; it cannot be resynchronised.
    Framing(FrameError),
    /// The application called [`Endpoint::close`](super::Endpoint::close).
    Local(String),
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::PeerClosed => f.write_str("peer closed the connection"),
            CloseReason::PeerClosedMidFrame { buffered } => write!(
                f,
                "peer closed the connection in the middle of a frame ({buffered} bytes discarded)"
            ),
            CloseReason::Framing(e) => write!(f, "framing error: {e}"),
            CloseReason::Local(reason) => write!(f, "closed: {reason}"),
        }
    }
}

/// A method name: a span of the frame, or decoded text when it contained escapes.
#[derive(Clone, Debug)]
pub(super) enum Text {
    Span(Range<usize>),
    Owned(Box<str>),
}

/// Byte range of `part` inside `base`, if `part` borrows from it.
pub(super) fn span_of(base: &[u8], part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(base.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= base.len()).then_some(start..end)
}

/// Method and params of an incoming request or notification, as spans of the frame bytes.
#[derive(Clone, Debug)]
pub(super) struct Call {
    pub(super) body: Bytes,
    pub(super) method: Text,
    pub(super) params: Option<Range<usize>>,
}

impl Call {
    pub(super) fn new(body: &Bytes, method: &str, params: Option<&RawValue>) -> Call {
        let method = match span_of(body, method) {
            Some(span) => Text::Span(span),
            None => Text::Owned(method.into()),
        };
        // Params always borrow from the frame; an out-of-range span is impossible, but dropping
        // the params would be the safe reaction.
        let params = params.and_then(|p| span_of(body, p.get()));
        Call {
            body: body.clone(),
            method,
            params,
        }
    }

    pub(super) fn method(&self) -> &str {
        match &self.method {
            // The span was cut from a body that parsed as UTF-8 JSON, so this never fails.
            Text::Span(span) => self
                .body
                .get(span.clone())
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or(""),
            Text::Owned(s) => s,
        }
    }

    pub(super) fn params_bytes(&self) -> Option<&[u8]> {
        self.params.clone().and_then(|span| self.body.get(span))
    }

    pub(super) fn params<'de, T: Deserialize<'de>>(&'de self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(self.params_bytes().unwrap_or(b"null"))
    }
}

/// A request from the peer. Answer it exactly once with [`Endpoint::respond`](super::Endpoint::respond) (or
/// [`respond_error`](super::Endpoint::respond_error) / [`respond_raw`](super::Endpoint::respond_raw)).
///
/// Holds the frame bytes and the spans of method and params found while parsing, so reading
/// them does not parse the frame again.
#[derive(Clone, Debug)]
pub struct IncomingRequest {
    pub(super) id: OwnedId,
    pub(super) call: Call,
}

impl IncomingRequest {
    /// The request id (raw text, echoed byte-exactly in the response).
    pub fn id(&self) -> &OwnedId {
        &self.id
    }

    /// The method name.
    pub fn method(&self) -> &str {
        self.call.method()
    }

    /// The raw JSON text of the params (an object or an array), if present.
    pub fn params_raw(&self) -> Option<&[u8]> {
        self.call.params_bytes()
    }

    /// Decodes the params; absent params decode from `null` (so `Option<T>` accepts them).
    pub fn params<'de, T: Deserialize<'de>>(&'de self) -> Result<T, serde_json::Error> {
        self.call.params()
    }

    /// The whole frame body this request came in (a batch's body if it was in a batch).
    pub fn frame(&self) -> &Bytes {
        &self.call.body
    }
}

/// A notification from the peer (never answered).
#[derive(Clone, Debug)]
pub struct IncomingNotification {
    pub(super) call: Call,
}

impl IncomingNotification {
    /// The method name.
    pub fn method(&self) -> &str {
        self.call.method()
    }

    /// The raw JSON text of the params (an object or an array), if present.
    pub fn params_raw(&self) -> Option<&[u8]> {
        self.call.params_bytes()
    }

    /// Decodes the params; absent params decode from `null` (so `Option<T>` accepts them).
    pub fn params<'de, T: Deserialize<'de>>(&'de self) -> Result<T, serde_json::Error> {
        self.call.params()
    }

    /// The whole frame body this notification came in.
    pub fn frame(&self) -> &Bytes {
        &self.call.body
    }
}

/// Something the application must know about; drained with [`Endpoint::poll_event`](super::Endpoint::poll_event).
#[derive(Clone, Debug)]
pub enum EndpointEvent {
    /// The peer sent a request; answer it exactly once.
    Request(IncomingRequest),
    /// The peer sent a notification (cancellation notifications are reported as
    /// [`CancelRequested`](EndpointEvent::CancelRequested) instead).
    Notification(IncomingNotification),
    /// The single outcome of one of our requests, with the id [`Endpoint::send_request`](super::Endpoint::send_request)
    /// returned.
    Outcome {
        /// Our request's id.
        id: OwnedId,
        /// How it ended.
        outcome: Outcome,
    },
    /// The peer asked to cancel its request `id`, which is still in flight. It must still be
    /// answered once, typically with [`ErrorObject::request_cancelled`](crate::jsonrpc::ErrorObject::request_cancelled).
    CancelRequested {
        /// The peer's request id.
        id: OwnedId,
    },
    /// The endpoint closed: the last event. Frames still in the outbox should be written (if the
    /// stream is still writable) before closing the stream.
    Closed(CloseReason),
}

#[derive(Clone, Debug)]
pub(super) enum UnsentKind {
    Request {
        id: OwnedId,
        timeout: Option<Duration>,
    },
    Notification,
    Response {
        id: OwnedId,
    },
}

/// A message that did not fit in the outbox, handed back by [`SendError::Full`]; pass it to
/// [`Endpoint::retry`](super::Endpoint::retry) once [`poll_transmit`](super::Endpoint::poll_transmit) has made room. Nothing
/// about it was recorded: a request is not pending, a response has not answered its request.
#[derive(Clone, Debug)]
pub struct Unsent {
    pub(super) body: Vec<u8>,
    pub(super) kind: UnsentKind,
}

impl Unsent {
    /// The encoded JSON-RPC body (without framing).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// For a request, the id it will have when sent; for a response, the id it answers.
    pub fn id(&self) -> Option<&OwnedId> {
        match &self.kind {
            UnsentKind::Request { id, .. } | UnsentKind::Response { id } => Some(id),
            UnsentKind::Notification => None,
        }
    }

    /// Gives up on the message, returning its body.
    pub fn into_body(self) -> Vec<u8> {
        self.body
    }
}

/// Why a send or response was refused. No state changed.
#[derive(Debug)]
pub enum SendError {
    /// The outbox is full ([`EndpointConfig::max_outbox_frames`] /
    /// [`max_outbox_bytes`](EndpointConfig::max_outbox_bytes)). The encoded message is handed
    /// back for [`Endpoint::retry`](super::Endpoint::retry).
    Full(Unsent),
    /// The endpoint is closed.
    Closed,
    /// [`Endpoint::respond`](super::Endpoint::respond) for a request that is not in flight: never received, or already
    /// answered. The second answer is not sent.
    NotInFlight(OwnedId),
    /// The params or result could not be serialised.
    Serialize(serde_json::Error),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Full(unsent) => {
                write!(
                    f,
                    "outbox full ({} byte message not sent)",
                    unsent.body.len()
                )
            }
            SendError::Closed => f.write_str("endpoint closed"),
            SendError::NotInFlight(id) => {
                write!(
                    f,
                    "request {id} is not in flight (never received or already answered)"
                )
            }
            SendError::Serialize(e) => write!(f, "serialisation failed: {e}"),
        }
    }
}

impl std::error::Error for SendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendError::Serialize(e) => Some(e),
            _ => None,
        }
    }
}

impl From<serde_json::Error> for SendError {
    fn from(e: serde_json::Error) -> SendError {
        SendError::Serialize(e)
    }
}

/// Counters for diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Frames decoded.
    pub frames_received: u64,
    /// Valid requests received (duplicates included).
    pub requests_received: u64,
    /// Valid notifications received (cancellations included).
    pub notifications_received: u64,
    /// Valid responses received (unknown ones included).
    pub responses_received: u64,
    /// Invalid messages (or rejected batches) answered with `-32700` / `-32600`.
    pub rejected: u64,
    /// Requests refused because their id was already in flight.
    pub duplicate_requests: u64,
    /// Responses that matched none of our pending requests (unknown, late, duplicate or `null`
    /// id), dropped.
    pub unknown_responses: u64,
    /// Cancellation notifications for ids not in flight, ignored.
    pub unknown_cancels: u64,
    /// Frames handed out by [`Endpoint::poll_transmit`](super::Endpoint::poll_transmit).
    pub frames_sent: u64,
}

/// Responses being gathered for one incoming batch.
#[derive(Debug, Default)]
pub(super) struct BatchAnswer {
    pub(super) parts: Vec<Vec<u8>>,
    pub(super) parts_len: usize,
    pub(super) open_requests: usize,
}
