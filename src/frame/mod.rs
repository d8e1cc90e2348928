//! Message framing: cutting a byte stream into JSON-RPC message bodies and back.
//!
//! Two framings are supported:
//!
//! * [`Framing::ContentLength`]: LSP / vscode-jsonrpc style, used by the Copilot SDK protocol.
//!   Each body is preceded by a header block of `Name: value\r\n` lines ending with an empty
//!   line; the `Content-Length` header (name matched case-insensitively) gives the body length
//!   in bytes. Other headers such as `Content-Type` are accepted and ignored.
//! * [`Framing::Ndjson`]: newline-delimited JSON, used by the Agent Client Protocol. Each body
//!   is one line ending in `\n` (a `\r` before it is stripped); blank and whitespace-only lines
//!   are skipped.
//! * [`Framing::Http`]: HTTP/1.1 requests in, responses out, for the host's own small HTTP
//!   servers (the MCP tool server an ACP agent calls): a frame is a whole request, head and
//!   `Content-Length` body; a body written to the connection becomes a `200 OK` JSON response.
//!
//! Decoding is incremental and sans-IO: feed whatever bytes arrived to
//! [`FrameDecoder::push`], then drain [`FrameDecoder::next_frame`] until it returns `Ok(None)`.
//! Bytes may be split anywhere. Each byte is scanned at most once, bodies are handed out as
//! zero-copy [`Bytes`], and memory stays bounded by the [`FrameLimits`] plus the last pushed
//! chunk (provided the caller drains frames after each push). Bodies are not validated as UTF-8
//! or JSON here.
//!
//! Any [`FrameError`] is connection-level: the stream can no longer be resynchronised, and the
//! decoder returns the same error from then on.

use std::fmt;

use bytes::{Bytes, BytesMut};

mod content_length;
pub(crate) mod http;
mod ndjson;

use content_length::ContentLengthDecoder;
use http::HttpDecoder;
use ndjson::NdjsonDecoder;

/// How messages are delimited on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Framing {
    /// `Content-Length: N\r\n\r\n` header block before each body (LSP / Copilot SDK).
    ContentLength,
    /// One JSON text per line, terminated by `\n` (Agent Client Protocol).
    Ndjson,
    /// HTTP/1.1: whole requests in, `200 OK` JSON responses out (the MCP tool server).
    Http,
}

impl Framing {
    /// Every framing, in [`Framing::index`] order.
    pub(crate) const ALL: [Framing; 3] = [Framing::ContentLength, Framing::Ndjson, Framing::Http];

    /// A dense index (`0..ALL.len()`) for per-framing tables (the fan-out's encoded frames).
    #[inline]
    pub(crate) fn index(self) -> usize {
        match self {
            Framing::ContentLength => 0,
            Framing::Ndjson => 1,
            Framing::Http => 2,
        }
    }
}

/// Size limits enforced while decoding; exceeding one is a [`FrameError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameLimits {
    /// Largest accepted body in bytes: the `Content-Length` value, or an NDJSON line without its
    /// line ending. Default: [`FrameLimits::DEFAULT_MAX_FRAME_BYTES`] (32 MiB).
    pub max_frame_bytes: usize,
    /// Largest accepted `Content-Length` header block in bytes, including every line ending and
    /// the terminating empty line. Unused by NDJSON. Default:
    /// [`FrameLimits::DEFAULT_MAX_HEADER_BYTES`] (8 KiB).
    pub max_header_bytes: usize,
}

impl FrameLimits {
    /// Default for [`FrameLimits::max_frame_bytes`]: 32 MiB.
    pub const DEFAULT_MAX_FRAME_BYTES: usize = 32 * 1024 * 1024;
    /// Default for [`FrameLimits::max_header_bytes`]: 8 KiB.
    pub const DEFAULT_MAX_HEADER_BYTES: usize = 8 * 1024;
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits {
            max_frame_bytes: Self::DEFAULT_MAX_FRAME_BYTES,
            max_header_bytes: Self::DEFAULT_MAX_HEADER_BYTES,
        }
    }
}

/// A framing violation. The byte stream cannot be resynchronised after one, so the connection
/// should be closed; [`Display`](fmt::Display) gives a human-readable reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The `Content-Length` header block grew past [`FrameLimits::max_header_bytes`] without
    /// its terminating empty line.
    HeaderTooLarge {
        /// The limit that was exceeded, in bytes.
        limit: usize,
    },
    /// A header line is not of the form `name: value\r\n` (bad character in the name, line
    /// without `:`, control character in the value, bare `\n` or `\r`).
    MalformedHeader {
        /// What exactly was wrong.
        reason: &'static str,
    },
    /// The header block ended without a `Content-Length` header.
    MissingContentLength,
    /// The header block has more than one `Content-Length` header.
    DuplicateContentLength,
    /// The `Content-Length` value is not a non-negative decimal integer (empty, signed,
    /// non-numeric, or too many digits for a 64-bit integer).
    InvalidContentLength {
        /// What exactly was wrong.
        reason: &'static str,
    },
    /// The `Content-Length` value exceeds [`FrameLimits::max_frame_bytes`].
    ContentLengthTooLarge {
        /// The limit that was exceeded, in bytes.
        limit: usize,
    },
    /// An NDJSON line (without its line ending) exceeds [`FrameLimits::max_frame_bytes`].
    LineTooLong {
        /// The limit that was exceeded, in bytes.
        limit: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::HeaderTooLarge { limit } => {
                write!(f, "header block exceeds the limit of {limit} bytes")
            }
            FrameError::MalformedHeader { reason } => write!(f, "malformed header: {reason}"),
            FrameError::MissingContentLength => {
                f.write_str("header block has no Content-Length header")
            }
            FrameError::DuplicateContentLength => {
                f.write_str("header block has more than one Content-Length header")
            }
            FrameError::InvalidContentLength { reason } => {
                write!(f, "invalid Content-Length: {reason}")
            }
            FrameError::ContentLengthTooLarge { limit } => {
                write!(f, "Content-Length exceeds the frame limit of {limit} bytes")
            }
            FrameError::LineTooLong { limit } => {
                write!(f, "line exceeds the frame limit of {limit} bytes")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Incremental decoder for one connection's incoming byte stream.
#[derive(Debug)]
pub struct FrameDecoder {
    inner: Inner,
    /// Set by the first error; returned by every later call.
    poisoned: Option<FrameError>,
}

/// The framing-specific decoder behind [`FrameDecoder`].
#[derive(Debug)]
enum Inner {
    ContentLength(ContentLengthDecoder),
    Ndjson(NdjsonDecoder),
    Http(HttpDecoder),
}

impl FrameDecoder {
    /// A decoder for `framing` enforcing `limits`.
    pub fn new(framing: Framing, limits: FrameLimits) -> Self {
        let inner = match framing {
            Framing::ContentLength => Inner::ContentLength(ContentLengthDecoder::new(limits)),
            Framing::Ndjson => Inner::Ndjson(NdjsonDecoder::new(limits)),
            Framing::Http => Inner::Http(HttpDecoder::new(limits)),
        };
        FrameDecoder {
            inner,
            poisoned: None,
        }
    }

    /// The framing this decoder was created with.
    pub fn framing(&self) -> Framing {
        match self.inner {
            Inner::ContentLength(_) => Framing::ContentLength,
            Inner::Ndjson(_) => Framing::Ndjson,
            Inner::Http(_) => Framing::Http,
        }
    }

    /// Buffers `bytes` and scans them as far as the frame in progress.
    ///
    /// Errors (and poisons the decoder, dropping its buffer) only if the buffered, undecoded
    /// bytes can no longer be part of a valid frame, so memory is bounded by the limits plus
    /// one pushed chunk as long as frames are drained with [`next_frame`](Self::next_frame)
    /// after each push. Scanning stops at the first complete frame: bytes after it are checked
    /// once the frames before them have been taken, so an error never hides a complete frame.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        if let Some(error) = &self.poisoned {
            return Err(error.clone());
        }
        let result = match &mut self.inner {
            Inner::ContentLength(decoder) => decoder.push(bytes),
            Inner::Ndjson(decoder) => decoder.push(bytes),
            Inner::Http(decoder) => decoder.push(bytes),
        };
        self.poison_on_error(result)
    }

    /// Next complete frame body, split off the internal buffer without copying.
    /// `Ok(None)` means more bytes are needed. After an error every later call returns the
    /// same error.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if let Some(error) = &self.poisoned {
            return Err(error.clone());
        }
        let result = match &mut self.inner {
            Inner::ContentLength(decoder) => decoder.next_frame(),
            Inner::Ndjson(decoder) => decoder.next_frame(),
            Inner::Http(decoder) => decoder.next_frame(),
        };
        self.poison_on_error(result)
    }

    /// Number of bytes buffered and not yet returned as a frame (0 after an error).
    pub fn buffered_len(&self) -> usize {
        match &self.inner {
            Inner::ContentLength(decoder) => decoder.buffered_len(),
            Inner::Ndjson(decoder) => decoder.buffered_len(),
            Inner::Http(decoder) => decoder.buffered_len(),
        }
    }

    /// Total number of bytes examined by the scanner so far (each input byte at most once;
    /// Content-Length bodies are not scanned at all). For tests of linear-time decoding.
    #[doc(hidden)]
    pub fn scanned_bytes(&self) -> u64 {
        match &self.inner {
            Inner::ContentLength(decoder) => decoder.scanned_bytes(),
            Inner::Ndjson(decoder) => decoder.scanned_bytes(),
            Inner::Http(decoder) => decoder.scanned_bytes(),
        }
    }

    fn poison_on_error<T>(&mut self, result: Result<T, FrameError>) -> Result<T, FrameError> {
        if let Err(error) = &result {
            self.poisoned = Some(error.clone());
            match &mut self.inner {
                Inner::ContentLength(decoder) => decoder.clear(),
                Inner::Ndjson(decoder) => decoder.clear(),
                Inner::Http(decoder) => decoder.clear(),
            }
        }
        result
    }
}

/// Appends one frame to `out`. Content-Length: exactly `Content-Length: N\r\n\r\n` then the
/// body (one header, as the official Python SDK reads exactly one header line). NDJSON: the
/// body then `\n`; the body must not contain `\n` (compact `serde_json` output never does).
pub fn encode_frame(framing: Framing, body: &[u8], out: &mut BytesMut) {
    out.reserve(encoded_len(framing, body.len()));
    match framing {
        Framing::ContentLength => content_length::encode(body, out),
        Framing::Ndjson => ndjson::encode(body, out),
        Framing::Http => http::encode(body, out),
    }
}

/// Appends one frame whose body is `head` followed by `body` to `out` (as [`encode_frame`] of
/// their concatenation, without building it).
pub(crate) fn encode_frame_parts(framing: Framing, head: &[u8], body: &[u8], out: &mut BytesMut) {
    let len = head.len() + body.len();
    out.reserve(encoded_len(framing, len));
    match framing {
        Framing::ContentLength => content_length::encode_header(len, out),
        Framing::Ndjson => {}
        Framing::Http => http::encode_header(len, out),
    }
    out.extend_from_slice(head);
    out.extend_from_slice(body);
    if framing == Framing::Ndjson {
        out.extend_from_slice(b"\n");
    }
}

/// Number of bytes [`encode_frame`] appends for a body of `body_len` bytes.
pub fn encoded_len(framing: Framing, body_len: usize) -> usize {
    match framing {
        Framing::ContentLength => content_length::encoded_len(body_len),
        Framing::Ndjson => ndjson::encoded_len(body_len),
        Framing::Http => http::encoded_len(body_len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_limits_are_documented_values() {
        let limits = FrameLimits::default();
        assert_eq!(limits.max_frame_bytes, 32 * 1024 * 1024);
        assert_eq!(limits.max_header_bytes, 8 * 1024);
    }

    #[test]
    fn framing_is_reported() {
        for framing in [Framing::ContentLength, Framing::Ndjson] {
            assert_eq!(
                FrameDecoder::new(framing, FrameLimits::default()).framing(),
                framing
            );
        }
    }

    #[test]
    fn encoded_len_matches_encode_frame() {
        for framing in [Framing::ContentLength, Framing::Ndjson] {
            for len in [0usize, 1, 9, 10, 99, 100, 12345] {
                let body = vec![b'x'; len];
                let mut out = BytesMut::new();
                encode_frame(framing, &body, &mut out);
                assert_eq!(out.len(), encoded_len(framing, len), "{framing:?} {len}");
            }
        }
    }

    #[test]
    fn encode_then_decode_round_trips() {
        for framing in [Framing::ContentLength, Framing::Ndjson] {
            let bodies: [&[u8]; 3] = [b"{}", "{\"a\":\"é日本🎉\"}".as_bytes(), b"[1,2,3]"];
            let mut out = BytesMut::new();
            for body in bodies {
                encode_frame(framing, body, &mut out);
            }
            let mut decoder = FrameDecoder::new(framing, FrameLimits::default());
            decoder.push(&out).unwrap();
            for body in bodies {
                assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(body));
            }
            assert_eq!(decoder.next_frame().unwrap(), None);
            assert_eq!(decoder.buffered_len(), 0);
        }
    }

    #[test]
    fn error_poisons_decoder_and_drops_buffer() {
        let mut decoder = FrameDecoder::new(Framing::ContentLength, FrameLimits::default());
        let error = decoder.push(b"Content-Length: x").unwrap_err();
        assert!(matches!(error, FrameError::InvalidContentLength { .. }));
        assert_eq!(decoder.buffered_len(), 0);
        assert_eq!(
            decoder.push(b"Content-Length: 2\r\n\r\n{}"),
            Err(error.clone())
        );
        assert_eq!(decoder.next_frame(), Err(error.clone()));
        assert_eq!(decoder.next_frame(), Err(error));
        assert_eq!(decoder.buffered_len(), 0);
    }

    #[test]
    fn error_found_by_next_frame_poisons_too() {
        let limits = FrameLimits {
            max_frame_bytes: 4,
            ..FrameLimits::default()
        };
        let mut decoder = FrameDecoder::new(Framing::Ndjson, limits);
        // The second line is only scanned after the first frame is taken.
        decoder.push(b"{}\n123456").unwrap();
        assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(&b"{}"[..]));
        let error = decoder.next_frame().unwrap_err();
        assert_eq!(error, FrameError::LineTooLong { limit: 4 });
        assert_eq!(decoder.push(b"\n"), Err(error.clone()));
        assert_eq!(decoder.next_frame(), Err(error));
    }

    #[test]
    fn every_error_has_a_distinct_readable_reason() {
        let errors = [
            FrameError::HeaderTooLarge { limit: 8 },
            FrameError::MalformedHeader { reason: "bare LF" },
            FrameError::MissingContentLength,
            FrameError::DuplicateContentLength,
            FrameError::InvalidContentLength { reason: "empty" },
            FrameError::ContentLengthTooLarge { limit: 8 },
            FrameError::LineTooLong { limit: 8 },
        ];
        let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
        for (i, text) in texts.iter().enumerate() {
            assert!(text.len() > 10, "{text}");
            assert!(!texts[..i].contains(text), "{text}");
        }
    }
}
