//! Faults of a model call, classified into clear, user-facing errors.
//!
//! Messages name the endpoint's URL (without user info) and never a credential: the request's
//! sensitive header values are scrubbed from anything the server echoed back.

use std::fmt;
use std::time::Duration;

/// What went wrong, coarsely: enough for the host to pick `session.error`'s `errorType` and to
/// decide whether a retry makes sense.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The provider configuration is unusable (no model name, bad URL, …).
    Config,
    /// A feature the provider asks for is not implemented.
    Unsupported,
    /// The connection could not be made (refused, DNS failure, unreachable).
    Connect,
    /// The TLS handshake or certificate check failed.
    Tls,
    /// The runtime's own transport timeout fired (connect or total backstop).
    TransportTimeout,
    /// Another transport failure (reset, broken pipe, protocol error).
    Io,
    /// HTTP 401: the credentials were rejected.
    Unauthorized,
    /// HTTP 403: the credentials do not allow this.
    Forbidden,
    /// HTTP 404, or a server saying the model does not exist.
    NotFound,
    /// HTTP 429 after the retries (or with a `Retry-After` too long to wait for).
    RateLimited,
    /// HTTP 5xx after the retries.
    ServerError,
    /// Any other non-success status (400, 413, 422, …).
    HttpStatus,
    /// The response stream ended (or the connection broke) before the response was complete.
    StreamCut,
    /// The stream carried something that is not a valid chunk.
    MalformedStream,
    /// One server-sent event was larger than the configured limit.
    EventTooLarge,
    /// The server reported an error inside the stream (an `error` chunk or event).
    ProviderError,
    /// No byte of the response arrived before the first-byte deadline.
    FirstByteTimeout,
    /// The stream went silent for longer than the idle deadline.
    Stalled,
    /// The whole call took longer than its total deadline.
    TotalTimeout,
    /// The call was cancelled (session abort).
    Cancelled,
}

/// A failed model call: what happened, a message for the user, and details for the event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError {
    /// The classification.
    pub kind: ModelErrorKind,
    /// A complete sentence for `session.error.message`; names the URL, never a credential.
    pub message: String,
    /// The HTTP status, when the server answered with one.
    pub status: Option<u16>,
    /// The endpoint URL (without user info), when a request was involved.
    pub url: Option<String>,
    /// The provider's own error code (`error.code`, else `error.type`, of the body), e.g.
    /// `user_weekly_rate_limited`.
    pub code: Option<String>,
    /// How long the endpoint asked to wait (`Retry-After`) before the last failure, in whole
    /// seconds (rounded up).
    pub retry_after_secs: Option<u64>,
}

impl ModelError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            message: message.into(),
            status: None,
            url: None,
            code: None,
            retry_after_secs: None,
        }
    }

    /// The same error with the HTTP status recorded.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// The same error with the endpoint URL recorded.
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// A value for `session.error.errorType`.
    pub fn error_type(&self) -> &'static str {
        match self.kind {
            ModelErrorKind::Config => "configuration",
            ModelErrorKind::Unsupported => "unsupported",
            ModelErrorKind::Connect
            | ModelErrorKind::Tls
            | ModelErrorKind::TransportTimeout
            | ModelErrorKind::Io => "network",
            ModelErrorKind::Unauthorized | ModelErrorKind::Forbidden => "authentication",
            ModelErrorKind::NotFound => "model_not_found",
            ModelErrorKind::RateLimited => "rate_limit",
            ModelErrorKind::ServerError | ModelErrorKind::HttpStatus => "model_http",
            ModelErrorKind::StreamCut
            | ModelErrorKind::MalformedStream
            | ModelErrorKind::EventTooLarge
            | ModelErrorKind::ProviderError => "model_stream",
            ModelErrorKind::FirstByteTimeout
            | ModelErrorKind::Stalled
            | ModelErrorKind::TotalTimeout => "timeout",
            ModelErrorKind::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ModelError {}

/// Formats a duration for messages: `"1.5 s"`, `"250 ms"`.
pub(crate) fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(human_duration(Duration::from_secs(3)), "3 s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5 s");
    }
}
