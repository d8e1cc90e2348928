//! HTTP/1.1 framing for the host's small HTTP servers (the MCP tool server of
//! [`Dialect::ClientTools`](crate::Dialect::ClientTools)).
//!
//! A frame is one whole request: its head (request line and headers, parsed with `httparse`)
//! and a body of exactly `Content-Length` bytes (none when the header is absent). Chunked
//! request bodies are refused, as HTTP/1.1 allows a server to (`411`-style: the MCP clients send
//! a length). Requests on one keep-alive connection are framed one after the other;
//! [`parse_request`] reads a frame's head again where the handler needs it (no copy: the head
//! is a few hundred bytes).
//!
//! What the host writes is a response: a JSON-RPC body framed by [`encode_frame`] becomes
//! `200 OK` with `Content-Type: application/json`; other statuses are written whole with
//! [`write_response`].
//!
//! [`encode_frame`]: super::encode_frame

use bytes::{Buf, Bytes, BytesMut};

use super::{FrameError, FrameLimits};

/// Most headers one request may carry.
const MAX_HEADERS: usize = 32;

/// Appends a `200 OK` response carrying the JSON `body` to `out`.
pub(super) fn encode(body: &[u8], out: &mut BytesMut) {
    write_response(200, "application/json", &[], body, out);
}

/// Appends the head of a `200 OK` JSON response whose body has `len` bytes to `out`.
pub(super) fn encode_header(len: usize, out: &mut BytesMut) {
    write_head(200, "application/json", &[], len, out);
}

/// Length of what [`encode`] appends for a body of `body_len` bytes.
pub(super) fn encoded_len(body_len: usize) -> usize {
    const HEAD: &str =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \r\n\r\n";
    (HEAD.len() + super::content_length::decimal_digits(body_len)).saturating_add(body_len)
}

/// Appends a whole response to `out`: the status line, `Content-Type` (when `content_type` is
/// not empty), `Content-Length`, `extra` headers, a blank line and `body`.
pub(crate) fn write_response(
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    out: &mut BytesMut,
) {
    write_head(status, content_type, extra, body.len(), out);
    out.extend_from_slice(body);
}

/// The head [`write_response`] writes, for a body of `len` bytes.
fn write_head(
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    len: usize,
    out: &mut BytesMut,
) {
    use std::fmt::Write as _;
    let mut head = String::with_capacity(96);
    let _ = write!(head, "HTTP/1.1 {status} {}\r\n", reason(status));
    if !content_type.is_empty() {
        let _ = write!(head, "Content-Type: {content_type}\r\n");
    }
    let _ = write!(head, "Content-Length: {len}\r\n");
    for (name, value) in extra {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    head.push_str("\r\n");
    out.reserve(head.len() + len);
    out.extend_from_slice(head.as_bytes());
}

/// The reason phrase of the statuses the host writes.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        415 => "Unsupported Media Type",
        _ => "Error",
    }
}

/// A request's head and body, read from one frame.
#[derive(Debug)]
pub(crate) struct HttpRequest<'a> {
    /// The method (`POST`, `GET`, …).
    pub method: &'a str,
    /// The request target's path, without a query.
    pub path: &'a str,
    /// The `Authorization` header's value, if any.
    pub authorization: Option<&'a [u8]>,
    /// The `Content-Type` header's value, if any.
    pub content_type: Option<&'a [u8]>,
    /// The body.
    pub body: &'a [u8],
}

/// Reads the head of a frame the decoder returned (`None` only for bytes that are not one).
pub(crate) fn parse_request(frame: &[u8]) -> Option<HttpRequest<'_>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(head_len) = request.parse(frame).ok()? else {
        return None;
    };
    let find = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    };
    let authorization = find("authorization");
    let content_type = find("content-type");
    let target = request.path?;
    Some(HttpRequest {
        method: request.method?,
        path: target.split('?').next().unwrap_or(target),
        authorization,
        content_type,
        body: frame.get(head_len..)?,
    })
}

/// Incremental decoder of HTTP/1.1 requests.
#[derive(Debug)]
pub(super) struct HttpDecoder {
    limits: FrameLimits,
    /// Undecoded input; starts at the current request.
    buf: BytesMut,
    /// The current request's head was read: its length and its body's.
    head: Option<(usize, usize)>,
    /// Bytes examined by the head parser so far.
    scanned: u64,
}

impl HttpDecoder {
    pub(super) fn new(limits: FrameLimits) -> Self {
        HttpDecoder {
            limits,
            buf: BytesMut::new(),
            head: None,
            scanned: 0,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        self.buf.extend_from_slice(bytes);
        if self.head.is_none() && self.buf.len() > self.limits.max_header_bytes {
            // Refused early only when the bytes cannot hold a head within the limit.
            self.read_head()?;
        }
        Ok(())
    }

    pub(super) fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.head.is_none() {
            self.read_head()?;
        }
        let Some((head_len, body_len)) = self.head else {
            return Ok(None);
        };
        let total = head_len + body_len;
        if self.buf.len() < total {
            return Ok(None);
        }
        self.head = None;
        Ok(Some(self.buf.split_to(total).freeze()))
    }

    pub(super) fn buffered_len(&self) -> usize {
        self.buf.len()
    }

    pub(super) fn scanned_bytes(&self) -> u64 {
        self.scanned
    }

    pub(super) fn clear(&mut self) {
        self.buf.clear();
        self.head = None;
    }

    /// Parses the head if the buffer holds it (sets `self.head`).
    fn read_head(&mut self) -> Result<(), FrameError> {
        // Leading empty lines before a request line are allowed (RFC 9112 §2.2).
        while self.buf.starts_with(b"\r\n") {
            self.buf.advance(2);
        }
        let limit = self.limits.max_header_bytes;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        let window = &self.buf[..self.buf.len().min(limit)];
        self.scanned += window.len() as u64;
        let head_len = match request.parse(window) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if self.buf.len() >= limit => {
                return Err(FrameError::HeaderTooLarge { limit })
            }
            Ok(httparse::Status::Partial) => return Ok(()),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(FrameError::MalformedHeader {
                    reason: "too many request headers",
                })
            }
            Err(_) => {
                return Err(FrameError::MalformedHeader {
                    reason: "not an HTTP/1.1 request",
                })
            }
        };
        let mut length: Option<usize> = None;
        for header in request.headers.iter() {
            if header.name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(FrameError::MalformedHeader {
                    reason: "chunked request bodies are not supported; send Content-Length",
                });
            }
            if header.name.eq_ignore_ascii_case("content-length") {
                if length.is_some() {
                    return Err(FrameError::DuplicateContentLength);
                }
                let text = std::str::from_utf8(header.value)
                    .map_err(|_| FrameError::InvalidContentLength {
                        reason: "not ASCII",
                    })?
                    .trim();
                if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(FrameError::InvalidContentLength {
                        reason: "not a decimal number",
                    });
                }
                let value: usize = text.parse().map_err(|_| FrameError::InvalidContentLength {
                    reason: "too large",
                })?;
                length = Some(value);
            }
        }
        let body_len = length.unwrap_or(0);
        if body_len > self.limits.max_frame_bytes {
            return Err(FrameError::ContentLengthTooLarge {
                limit: self.limits.max_frame_bytes,
            });
        }
        self.head = Some((head_len, body_len));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder() -> HttpDecoder {
        HttpDecoder::new(FrameLimits {
            max_frame_bytes: 64,
            max_header_bytes: 256,
        })
    }

    const POST: &[u8] = b"POST /mcp/s1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";

    #[test]
    fn a_request_split_anywhere_is_one_frame_and_its_head_reads_back() {
        for split in 0..POST.len() {
            let mut d = decoder();
            d.push(&POST[..split]).unwrap();
            let early = d.next_frame().unwrap();
            d.push(&POST[split..]).unwrap();
            let frame = early.or_else(|| d.next_frame().unwrap()).unwrap();
            assert_eq!(&frame[..], POST, "split at {split}");
            let request = parse_request(&frame).unwrap();
            assert_eq!(request.method, "POST");
            assert_eq!(request.path, "/mcp/s1");
            assert_eq!(request.authorization, Some(&b"Bearer k"[..]));
            assert_eq!(request.body, b"{}");
            assert_eq!(d.buffered_len(), 0);
        }
    }

    #[test]
    fn keep_alive_requests_follow_each_other_and_a_get_has_no_body() {
        let mut d = decoder();
        let mut bytes = POST.to_vec();
        bytes.extend_from_slice(b"GET /mcp/s1?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
        bytes.extend_from_slice(POST);
        d.push(&bytes).unwrap();
        assert_eq!(&d.next_frame().unwrap().unwrap()[..], POST);
        let get = d.next_frame().unwrap().unwrap();
        let request = parse_request(&get).unwrap();
        assert_eq!((request.method, request.path), ("GET", "/mcp/s1"));
        assert!(request.body.is_empty());
        assert_eq!(&d.next_frame().unwrap().unwrap()[..], POST);
        assert_eq!(d.next_frame().unwrap(), None);
    }

    #[test]
    fn bad_requests_are_refused_with_the_reason() {
        let cases: [(&[u8], FrameError); 5] = [
            (
                b"\x16\x03\x01junk\r\n\r\n",
                FrameError::MalformedHeader {
                    reason: "not an HTTP/1.1 request",
                },
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                FrameError::MalformedHeader {
                    reason: "chunked request bodies are not supported; send Content-Length",
                },
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
                FrameError::DuplicateContentLength,
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                FrameError::InvalidContentLength {
                    reason: "not a decimal number",
                },
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n",
                FrameError::ContentLengthTooLarge { limit: 64 },
            ),
        ];
        for (bytes, error) in cases {
            let mut d = decoder();
            d.push(bytes).unwrap();
            assert_eq!(
                d.next_frame(),
                Err(error),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn a_head_past_the_limit_is_refused_without_waiting_for_its_end() {
        let mut d = decoder();
        let mut bytes = b"POST / HTTP/1.1\r\nX: ".to_vec();
        bytes.extend(std::iter::repeat_n(b'a', 300));
        assert_eq!(
            d.push(&bytes),
            Err(FrameError::HeaderTooLarge { limit: 256 })
        );
    }

    #[test]
    fn responses_carry_their_length_and_headers() {
        let mut out = BytesMut::new();
        encode(b"{\"a\":1}", &mut out);
        assert_eq!(
            &out[..],
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
        );
        assert_eq!(out.len(), encoded_len(7));
        let mut out = BytesMut::new();
        write_response(401, "", &[("WWW-Authenticate", "Bearer")], b"", &mut out);
        assert_eq!(
            &out[..],
            b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nWWW-Authenticate: Bearer\r\n\r\n"
        );
    }
}
