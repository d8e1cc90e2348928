//! One model call as a state machine: request out; status, headers, body chunks, end or a
//! transport error in; [`ModelEvent`]s, retries and a terminal outcome out.
//!
//! The call never sleeps or reads a clock. After every input the host drains
//! [`ModelCall::poll`] and (re-)arms one timer at [`ModelCall::next_deadline`]; when it fires
//! it calls [`ModelCall::handle_timeout`]. Deadlines: the first body byte (from each send),
//! the idle gap between body chunks, the whole call (from creation), and the backoff before a
//! retry.
//!
//! Faults become clear [`ModelError`]s that name the URL and never a credential:
//! * 429, 408 and 5xx answered **before any body byte** are retried (at most
//!   [`CallConfig::max_retries`] times) after `Retry-After` / `retry-after-ms` or an
//!   exponential backoff; a `Retry-After` longer than [`CallConfig::max_backoff`] is not
//!   waited for. Nothing is ever re-sent once a success body started streaming.
//! * 401/403 (credentials), 404 / unknown model, other statuses: the server's own message,
//!   scrubbed of the request's credentials.
//! * connect / TLS / transport failures, a cut or malformed stream, an oversized event, a
//!   stalled stream, the first-byte and total deadlines.

use std::collections::VecDeque;
use std::time::Duration;

mod faults;

use faults::{header, reason_suffix, retry_after};

use super::error::{human_duration, ModelError, ModelErrorKind};
use super::event::ModelEvent;
use super::http::HttpRequest;
use super::request::StreamDialect;
use super::sse::SseLimits;
use super::stream::ResponseDecoder;
use crate::Timestamp;

/// Limits and deadlines of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallConfig {
    /// From sending the request to the first body byte. Default 300 s (a local model may
    /// load and read a long prompt first).
    pub first_byte_timeout: Duration,
    /// Longest silence between body chunks (SSE keep-alive comments count). Default 120 s.
    pub idle_timeout: Duration,
    /// The whole call, retries included. Default 30 min.
    pub total_timeout: Duration,
    /// Retries after a 429 / 408 / 5xx answered before any body byte. Default 3.
    pub max_retries: u32,
    /// Backoff before the first retry (doubling each time). Default 1 s.
    pub initial_backoff: Duration,
    /// Cap on the backoff, and the longest `Retry-After` honoured. Default 30 s.
    pub max_backoff: Duration,
    /// SSE limits.
    pub limits: SseLimits,
    /// Bytes of an error response kept for its message. Default 16 KiB.
    pub max_error_body_bytes: usize,
    /// Prefix of synthesised tool-call ids (servers that send none). Default `call_`.
    pub tool_call_id_prefix: String,
}

impl Default for CallConfig {
    fn default() -> Self {
        CallConfig {
            first_byte_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(120),
            total_timeout: Duration::from_secs(30 * 60),
            max_retries: 3,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            limits: SseLimits::default(),
            max_error_body_bytes: 16 * 1024,
            tool_call_id_prefix: "call_".to_owned(),
        }
    }
}

/// A transport failure the runtime reports instead of (or in the middle of) a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportErrorKind {
    /// Connection refused, DNS failure, unreachable.
    Connect,
    /// TLS handshake or certificate failure.
    Tls,
    /// The runtime's own connect or total backstop fired.
    Timeout,
    /// Anything else (reset, broken pipe, HTTP protocol error).
    Io,
}

/// What the call asks of the host, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum CallOutput {
    /// Perform this request (the first attempt, or a retry); its response feeds the call.
    Send(HttpRequest),
    /// Abandon the exchange in flight (the runtime drops the connection; further input for
    /// it is ignored anyway).
    Cancel,
    /// A retry is scheduled (for a `session.warning`); a [`CallOutput::Send`] follows after
    /// `delay`, from [`ModelCall::handle_timeout`].
    Retrying {
        /// The attempt about to be made (2 for the first retry).
        attempt: u32,
        /// The wait before it.
        delay: Duration,
        /// A sentence for the user.
        message: String,
    },
    /// A step of the response.
    Event(ModelEvent),
    /// The call failed; terminal.
    Failed(ModelError),
}

/// Where the call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallState {
    /// Waiting for, or reading, a response (or a retry's backoff).
    Active,
    /// [`ModelEvent::Done`] was produced.
    Completed,
    /// [`CallOutput::Failed`] was produced.
    Failed,
    /// [`ModelCall::cancel`] was called.
    Cancelled,
}

/// When things happened, for usage and timing fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CallTiming {
    /// When the call was created.
    pub started: Timestamp,
    /// When the last attempt was sent.
    pub sent: Timestamp,
    /// When the first body byte of the successful response arrived.
    pub first_byte: Option<Timestamp>,
    /// When the call completed or failed.
    pub finished: Option<Timestamp>,
}

#[derive(Debug)]
enum Phase {
    /// Request sent, no response head yet.
    Sending,
    /// A success head arrived; decoding the body.
    Streaming {
        json: Option<Vec<u8>>,
    },
    /// A failure head arrived; collecting its body for the message.
    ErrorBody {
        status: u16,
        body: Vec<u8>,
        /// The `Retry-After` of the failure, in whole seconds.
        retry_after_secs: Option<u64>,
    },
    /// Waiting to retry.
    Backoff {
        until: Timestamp,
    },
    Finished,
}

/// One model call. See the [module documentation](self).
#[derive(Debug)]
pub struct ModelCall {
    config: CallConfig,
    request: HttpRequest,
    dialect: StreamDialect,
    model: String,
    url: String,
    phase: Phase,
    state: CallState,
    attempt: u32,
    timing: CallTiming,
    last_byte: Timestamp,
    body_bytes: u64,
    /// The success response's content type and first bytes, for a non-stream answer's error.
    content_type: String,
    sample: Vec<u8>,
    decoder: ResponseDecoder,
    out: VecDeque<CallOutput>,
    scratch: Vec<ModelEvent>,
}

impl ModelCall {
    /// Starts a call: the first [`ModelCall::poll`] is `Send(request)`. `model` is the model
    /// name, for messages.
    pub fn new(
        now: Timestamp,
        request: HttpRequest,
        dialect: StreamDialect,
        model: impl Into<String>,
        config: CallConfig,
    ) -> Self {
        let decoder = ResponseDecoder::new(dialect, config.limits, &config.tool_call_id_prefix);
        let url = request.display_url();
        let mut call = ModelCall {
            config,
            dialect,
            model: model.into(),
            url,
            phase: Phase::Sending,
            state: CallState::Active,
            attempt: 1,
            timing: CallTiming {
                started: now,
                sent: now,
                first_byte: None,
                finished: None,
            },
            last_byte: now,
            body_bytes: 0,
            content_type: String::new(),
            sample: Vec::new(),
            decoder,
            out: VecDeque::new(),
            scratch: Vec::new(),
            request,
        };
        call.out.push_back(CallOutput::Send(call.request.clone()));
        call
    }

    /// The next output, in order.
    pub fn poll(&mut self) -> Option<CallOutput> {
        self.out.pop_front()
    }

    /// Where the call is.
    pub fn state(&self) -> CallState {
        self.state
    }

    /// Whether the call reached a terminal state.
    pub fn is_finished(&self) -> bool {
        self.state != CallState::Active
    }

    /// The attempt in progress (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Body bytes of the successful response so far.
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// Timing so far.
    pub fn timing(&self) -> CallTiming {
        self.timing
    }

    /// The response head: status and headers (names in any case).
    pub fn handle_response(&mut self, now: Timestamp, status: u16, headers: &[(String, String)]) {
        if !matches!(self.phase, Phase::Sending) {
            return;
        }
        self.last_byte = now;
        if (200..300).contains(&status) {
            self.content_type = header(headers, "content-type")
                .unwrap_or("")
                .trim()
                .to_owned();
            let json = self
                .content_type
                .to_ascii_lowercase()
                .starts_with("application/json");
            self.phase = Phase::Streaming {
                json: json.then(Vec::new),
            };
            return;
        }
        let retryable = status == 429 || status == 408 || (500..600).contains(&status);
        if retryable && self.attempt <= self.config.max_retries {
            let delay = retry_after(headers, now).unwrap_or_else(|| self.backoff());
            if delay <= self.config.max_backoff {
                self.out.push_back(CallOutput::Cancel);
                let next = self.attempt + 1;
                self.out.push_back(CallOutput::Retrying {
                    attempt: next,
                    delay,
                    message: format!(
                        "The model endpoint {} answered HTTP {status}{}; retrying in {} (attempt {next} of {}).",
                        self.url,
                        reason_suffix(status),
                        human_duration(delay),
                        self.config.max_retries + 1
                    ),
                });
                self.phase = Phase::Backoff {
                    until: now.saturating_add(delay),
                };
                return;
            }
        }
        self.phase = Phase::ErrorBody {
            status,
            body: Vec::new(),
            retry_after_secs: retry_after(headers, now)
                .map(|d| d.as_millis().div_ceil(1000) as u64),
        };
    }

    /// Body bytes as they arrive.
    pub fn handle_body(&mut self, now: Timestamp, bytes: &[u8]) {
        match &mut self.phase {
            Phase::Streaming { json } => {
                if bytes.is_empty() {
                    return;
                }
                self.last_byte = now;
                if self.timing.first_byte.is_none() {
                    self.timing.first_byte = Some(now);
                }
                self.body_bytes += bytes.len() as u64;
                if self.sample.len() < 200 {
                    let room = 200 - self.sample.len();
                    self.sample
                        .extend_from_slice(&bytes[..bytes.len().min(room)]);
                }
                if let Some(buf) = json {
                    if buf.len() + bytes.len() > self.config.limits.max_event_bytes {
                        let e = ModelError::new(
                            ModelErrorKind::EventTooLarge,
                            format!(
                                "the response body is larger than the limit of {} bytes",
                                self.config.limits.max_event_bytes
                            ),
                        );
                        self.fail(now, e, true);
                    } else {
                        buf.extend_from_slice(bytes);
                    }
                    return;
                }
                let mut events = std::mem::take(&mut self.scratch);
                let result = self.decoder.push(bytes, &mut events);
                self.emit(now, &mut events);
                self.scratch = events;
                if let Err(e) = result {
                    self.fail(now, e, true);
                }
            }
            Phase::ErrorBody { body, .. } => {
                self.last_byte = now;
                let room = self.config.max_error_body_bytes.saturating_sub(body.len());
                body.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            _ => {}
        }
    }

    /// The end of the response body.
    pub fn handle_end(&mut self, now: Timestamp) {
        match std::mem::replace(&mut self.phase, Phase::Sending) {
            Phase::Streaming { json } => {
                self.phase = Phase::Streaming { json: None };
                let mut events = std::mem::take(&mut self.scratch);
                let mut result = Ok(());
                if let Some(body) = json {
                    result = self.decoder.push(b"data: ", &mut events);
                    if result.is_ok() {
                        // One line: a JSON body has no raw newlines outside strings that matter
                        // here; newlines are whitespace in JSON, so join them.
                        let flat: Vec<u8> = body
                            .iter()
                            .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
                            .collect();
                        result = self.decoder.push(&flat, &mut events);
                    }
                }
                if result.is_ok() {
                    if self.body_bytes == 0 {
                        result = Err(ModelError::new(
                            ModelErrorKind::StreamCut,
                            "the response had an empty body",
                        ));
                    } else {
                        result = self.decoder.finish(&mut events);
                        if result.is_err() && self.decoder.events_seen() == 0 {
                            result = Err(ModelError::new(
                                ModelErrorKind::MalformedStream,
                                format!(
                                    "the response is not an event stream (content-type {:?}): {}",
                                    self.content_type,
                                    super::openai::excerpt(&String::from_utf8_lossy(&self.sample))
                                ),
                            ));
                        }
                    }
                }
                self.emit(now, &mut events);
                self.scratch = events;
                if let Err(e) = result {
                    self.fail(now, e, false);
                }
            }
            Phase::ErrorBody {
                status,
                body,
                retry_after_secs,
            } => {
                self.phase = Phase::Finished;
                let mut e = faults::http_error(status, &body, &self.url, &self.model, self.attempt);
                e.retry_after_secs = retry_after_secs;
                self.fail(now, e, false);
            }
            Phase::Sending => {
                let e = ModelError::new(
                    ModelErrorKind::Io,
                    "the connection ended before a response arrived",
                );
                self.fail(now, e, false);
            }
            other => self.phase = other,
        }
    }

    /// A transport failure (before or during the response).
    pub fn handle_transport_error(
        &mut self,
        now: Timestamp,
        kind: TransportErrorKind,
        message: &str,
    ) {
        let message = self.request.scrub(message);
        match std::mem::replace(&mut self.phase, Phase::Sending) {
            Phase::Sending => {
                let (kind, what) = match kind {
                    TransportErrorKind::Connect => {
                        (ModelErrorKind::Connect, "could not connect to")
                    }
                    TransportErrorKind::Tls => {
                        (ModelErrorKind::Tls, "could not establish TLS with")
                    }
                    TransportErrorKind::Timeout => {
                        (ModelErrorKind::TransportTimeout, "timed out reaching")
                    }
                    TransportErrorKind::Io => (ModelErrorKind::Io, "failed to reach"),
                };
                let e = ModelError::new(
                    kind,
                    format!("The model call {what} {}: {message}", self.url),
                );
                self.fail(now, e, false);
            }
            Phase::Streaming { .. } => {
                self.phase = Phase::Streaming { json: None };
                let e = ModelError::new(
                    ModelErrorKind::StreamCut,
                    format!(
                        "the connection broke after {} bytes: {message}",
                        self.body_bytes
                    ),
                );
                self.fail(now, e, false);
            }
            Phase::ErrorBody {
                status,
                body,
                retry_after_secs,
            } => {
                self.phase = Phase::Finished;
                let mut e = faults::http_error(status, &body, &self.url, &self.model, self.attempt);
                e.retry_after_secs = retry_after_secs;
                self.fail(now, e, false);
            }
            other => self.phase = other,
        }
    }

    /// The earliest deadline the host must arm a timer for, if any.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        if self.is_finished() {
            return None;
        }
        let total = self
            .timing
            .started
            .saturating_add(self.config.total_timeout);
        let phase = match &self.phase {
            Phase::Sending => self
                .timing
                .sent
                .saturating_add(self.config.first_byte_timeout),
            Phase::Streaming { .. } if self.timing.first_byte.is_none() => self
                .timing
                .sent
                .saturating_add(self.config.first_byte_timeout),
            Phase::Streaming { .. } | Phase::ErrorBody { .. } => {
                self.last_byte.saturating_add(self.config.idle_timeout)
            }
            Phase::Backoff { until } => *until,
            Phase::Finished => return None,
        };
        Some(total.min(phase))
    }

    /// Time passed: fires whatever deadline is due (a no-op before it).
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if self.is_finished() {
            return;
        }
        let total = self
            .timing
            .started
            .saturating_add(self.config.total_timeout);
        if now >= total {
            let open = !matches!(self.phase, Phase::Backoff { .. });
            let e = ModelError::new(
                ModelErrorKind::TotalTimeout,
                format!(
                    "The model call to {} did not finish within {}.",
                    self.url,
                    human_duration(self.config.total_timeout)
                ),
            );
            self.fail(now, e, open);
            return;
        }
        let Some(deadline) = self.next_deadline() else {
            return;
        };
        if now < deadline {
            return;
        }
        match std::mem::replace(&mut self.phase, Phase::Sending) {
            Phase::Backoff { .. } => {
                self.attempt += 1;
                self.timing.sent = now;
                self.last_byte = now;
                self.body_bytes = 0;
                self.timing.first_byte = None;
                self.decoder = ResponseDecoder::new(
                    self.dialect,
                    self.config.limits,
                    &self.config.tool_call_id_prefix,
                );
                self.out.push_back(CallOutput::Send(self.request.clone()));
            }
            Phase::Sending => {
                let e = ModelError::new(
                    ModelErrorKind::FirstByteTimeout,
                    format!(
                        "The model endpoint {} did not answer within {}.",
                        self.url,
                        human_duration(self.config.first_byte_timeout)
                    ),
                );
                self.fail(now, e, true);
            }
            Phase::Streaming { json } => {
                let stalled = self.timing.first_byte.is_some();
                self.phase = Phase::Streaming { json };
                let e = if stalled {
                    ModelError::new(
                        ModelErrorKind::Stalled,
                        format!(
                            "The model's response stream from {} stalled: nothing arrived for {} (after {} bytes).",
                            self.url,
                            human_duration(self.config.idle_timeout),
                            self.body_bytes
                        ),
                    )
                } else {
                    ModelError::new(
                        ModelErrorKind::FirstByteTimeout,
                        format!(
                            "The model endpoint {} sent no response body within {}.",
                            self.url,
                            human_duration(self.config.first_byte_timeout)
                        ),
                    )
                };
                self.fail(now, e, true);
            }
            Phase::ErrorBody {
                status,
                body,
                retry_after_secs,
            } => {
                self.phase = Phase::Finished;
                let mut e = faults::http_error(status, &body, &self.url, &self.model, self.attempt);
                e.retry_after_secs = retry_after_secs;
                self.fail(now, e, true);
            }
            Phase::Finished => self.phase = Phase::Finished,
        }
    }

    /// Abandons the call (session abort): a [`CallOutput::Cancel`] if an exchange is open;
    /// no `Failed` output (the caller knows why).
    pub fn cancel(&mut self, now: Timestamp) {
        if self.is_finished() {
            return;
        }
        if !matches!(self.phase, Phase::Backoff { .. }) {
            self.out.push_back(CallOutput::Cancel);
        }
        self.phase = Phase::Finished;
        self.state = CallState::Cancelled;
        self.timing.finished = Some(now);
    }

    fn backoff(&self) -> Duration {
        let factor = 1u32
            .checked_shl(self.attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.config
            .initial_backoff
            .checked_mul(factor)
            .unwrap_or(self.config.max_backoff)
            .min(self.config.max_backoff)
    }

    fn emit(&mut self, now: Timestamp, events: &mut Vec<ModelEvent>) {
        for event in events.drain(..) {
            let done = matches!(event, ModelEvent::Done(_));
            self.out.push_back(CallOutput::Event(event));
            if done {
                self.phase = Phase::Finished;
                self.state = CallState::Completed;
                self.timing.finished = Some(now);
            }
        }
    }

    fn fail(&mut self, now: Timestamp, mut e: ModelError, exchange_open: bool) {
        if self.is_finished() {
            return;
        }
        if exchange_open {
            self.out.push_back(CallOutput::Cancel);
        }
        if !e.message.contains(&self.url) && e.status.is_none() {
            e.message = format!("The model call to {} failed: {}", self.url, e.message);
        }
        e.message = self.request.scrub(&e.message);
        if e.url.is_none() {
            e.url = Some(self.url.clone());
        }
        self.out.push_back(CallOutput::Failed(e));
        self.phase = Phase::Finished;
        self.state = CallState::Failed;
        self.timing.finished = Some(now);
    }
}

#[cfg(test)]
mod tests;
