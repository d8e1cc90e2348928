//! `Content-Length` framing (LSP / vscode-jsonrpc / Copilot SDK protocol).
//!
//! A frame is a header block followed by the body:
//!
//! ```text
//! Content-Length: 52\r\n
//! Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n
//! \r\n
//! {"jsonrpc":"2.0","id":1,"method":"ping","params":{}}
//! ```
//!
//! Header lines are `name: value` ending in `\r\n`; names are HTTP tokens matched
//! case-insensitively; optional spaces or tabs surround the value; the block ends with an empty
//! line. Exactly one `Content-Length` (a decimal byte count of the body) is required; other
//! headers are ignored. The header block is validated byte by byte as it arrives, so a bad
//! byte is reported at once and no byte is scanned twice.

use bytes::{Buf, Bytes, BytesMut};

use super::{FrameError, FrameLimits};

/// What [`encode`] writes before the decimal body length.
const HEADER_PREFIX: &str = "Content-Length: ";
/// What [`encode`] writes after the decimal body length.
const HEADER_SUFFIX: &str = "\r\n\r\n";

/// Appends `Content-Length: N\r\n\r\n` and `body` to `out`.
pub(super) fn encode(body: &[u8], out: &mut BytesMut) {
    encode_header(body.len(), out);
    out.extend_from_slice(body);
}

/// Appends `Content-Length: N\r\n\r\n` for a body of `len` bytes to `out`.
pub(super) fn encode_header(len: usize, out: &mut BytesMut) {
    // The decimal length, written by hand (no formatting machinery on the hot path).
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut n = len;
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(HEADER_PREFIX.as_bytes());
    out.extend_from_slice(&digits[start..]);
    out.extend_from_slice(HEADER_SUFFIX.as_bytes());
}

/// Length of what [`encode`] appends for a body of `body_len` bytes.
pub(super) fn encoded_len(body_len: usize) -> usize {
    (HEADER_PREFIX.len() + decimal_digits(body_len) + HEADER_SUFFIX.len()).saturating_add(body_len)
}

/// Number of decimal digits of `n`.
pub(super) fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// Incremental decoder for `Content-Length` framed input.
#[derive(Debug)]
pub(super) struct ContentLengthDecoder {
    limits: FrameLimits,
    /// Undecoded input; starts at the current frame's header, or at its body once the header
    /// block has been consumed.
    buf: BytesMut,
    state: State,
    /// Bytes examined by the header scanner so far.
    scanned: u64,
}

/// Where the decoder is within the current frame.
#[derive(Debug)]
enum State {
    /// Reading the header block, which starts at `buf[0]`.
    Header(HeaderScan),
    /// The header block has been consumed; the body is the first `len` bytes of `buf`.
    Body { len: usize },
}

/// Progress through a header block; everything before `pos` has been validated.
#[derive(Debug)]
struct HeaderScan {
    /// Index in the buffer of the next byte to examine (= bytes of the block scanned so far).
    pos: usize,
    /// Index in the buffer where the current header line starts.
    line_start: usize,
    /// What the next byte may be.
    expect: Expect,
    /// The value of the `Content-Length` header, once its line has ended.
    content_length: Option<usize>,
}

impl HeaderScan {
    fn new() -> Self {
        HeaderScan {
            pos: 0,
            line_start: 0,
            expect: Expect::LineStart,
            content_length: None,
        }
    }
}

/// The position of the header scanner within a line.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Start of a line: a header name, or the `\r` of the terminating empty line.
    LineStart,
    /// Inside a header name, before its `:`.
    Name,
    /// Inside the value of a header other than `Content-Length`.
    OtherValue,
    /// Inside the value of `Content-Length`.
    LengthValue(LengthValue),
    /// A header line's `\r`; `\n` must follow.
    LineLf,
    /// The `\r` of the empty line; `\n` must follow and ends the block.
    BlockLf,
}

/// Progress through a `Content-Length` value: optional whitespace, digits, optional whitespace.
#[derive(Clone, Copy, Debug)]
enum LengthValue {
    BeforeDigits,
    Digits(u64),
    AfterDigits(u64),
}

/// Outcome of scanning the header bytes buffered so far.
enum HeaderProgress {
    /// The block is not complete yet.
    Incomplete,
    /// The block is complete: it is `header_len` bytes long and announces `body_len` bytes.
    Complete { header_len: usize, body_len: usize },
}

impl ContentLengthDecoder {
    pub(super) fn new(limits: FrameLimits) -> Self {
        ContentLengthDecoder {
            limits,
            buf: BytesMut::new(),
            state: State::Header(HeaderScan::new()),
            scanned: 0,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        self.buf.extend_from_slice(bytes);
        self.read_header()
    }

    pub(super) fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        self.read_header()?;
        match self.state {
            State::Body { len } if self.buf.len() >= len => {
                let body = self.buf.split_to(len).freeze();
                self.state = State::Header(HeaderScan::new());
                Ok(Some(body))
            }
            _ => Ok(None),
        }
    }

    pub(super) fn buffered_len(&self) -> usize {
        self.buf.len()
    }

    pub(super) fn scanned_bytes(&self) -> u64 {
        self.scanned
    }

    /// Drops all buffered input (after an error).
    pub(super) fn clear(&mut self) {
        self.buf = BytesMut::new();
        self.state = State::Header(HeaderScan::new());
    }

    /// Scans newly buffered header bytes; when the block is complete, consumes it and
    /// switches to reading the body.
    fn read_header(&mut self) -> Result<(), FrameError> {
        let State::Header(scan) = &mut self.state else {
            return Ok(());
        };
        if scan.pos == 0 {
            if let Some((header_len, body_len)) = canonical_header(&self.buf, &self.limits) {
                self.scanned += header_len as u64;
                self.start_body(header_len, body_len);
                return Ok(());
            }
        }
        let before = scan.pos;
        let progress = scan_header(scan, &self.buf, &self.limits);
        self.scanned += (scan.pos - before) as u64;
        if let HeaderProgress::Complete {
            header_len,
            body_len,
        } = progress?
        {
            self.start_body(header_len, body_len);
        }
        Ok(())
    }

    /// Consumes a complete `header_len`-byte header block and switches to reading the body.
    fn start_body(&mut self, header_len: usize, body_len: usize) {
        self.buf.advance(header_len);
        // body_len has been checked against the frame limit.
        self.buf.reserve(body_len.saturating_sub(self.buf.len()));
        self.state = State::Body { len: body_len };
    }
}

/// Recognises, at the start of `buf`, a complete header block of exactly the form [`encode`]
/// writes (and the official SDKs send): `Content-Length: N\r\n\r\n` with 1 to 19 digits,
/// within the limits. Returns `(header_len, body_len)`, which is what [`scan_header`] would
/// find for the same bytes; `None` (anything else: other headers, other spelling or spacing,
/// an incomplete block, a limit exceeded) leaves the block to [`scan_header`], which reports
/// errors. Each byte is looked at once, without the general scanner's per-byte state machine.
fn canonical_header(buf: &[u8], limits: &FrameLimits) -> Option<(usize, usize)> {
    let rest = buf.strip_prefix(HEADER_PREFIX.as_bytes())?;
    // 19 decimal digits always fit in a u64; longer values take the general path.
    let digits = rest.iter().take(20).position(|b| !b.is_ascii_digit())?;
    if !(1..=19).contains(&digits) || rest.get(digits..digits + 4)? != HEADER_SUFFIX.as_bytes() {
        return None;
    }
    let value = rest
        .get(..digits)?
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    let body_len = usize::try_from(value).ok()?;
    let header_len = HEADER_PREFIX.len() + digits + HEADER_SUFFIX.len();
    // Every prefix of the digits is at most `value`, so the general scanner would not have
    // rejected the value early either.
    (body_len <= limits.max_frame_bytes && header_len <= limits.max_header_bytes)
        .then_some((header_len, body_len))
}

/// Validates `buf[scan.pos..]` as the continuation of a header block, stopping after the
/// block's final `\n`.
fn scan_header(
    scan: &mut HeaderScan,
    buf: &[u8],
    limits: &FrameLimits,
) -> Result<HeaderProgress, FrameError> {
    let unscanned = buf.get(scan.pos..).unwrap_or_default();
    for &byte in unscanned {
        if scan.pos >= limits.max_header_bytes {
            return Err(FrameError::HeaderTooLarge {
                limit: limits.max_header_bytes,
            });
        }
        let index = scan.pos;
        scan.pos += 1;
        scan.expect = match scan.expect {
            Expect::LineStart => match byte {
                b'\r' => Expect::BlockLf,
                _ if is_token_byte(byte) => Expect::Name,
                b':' => return Err(malformed("empty header name")),
                b' ' | b'\t' => {
                    return Err(malformed(
                        "header line starts with whitespace (line folding is not supported)",
                    ))
                }
                _ => {
                    return Err(unexpected_line_byte(
                        byte,
                        "invalid character in header name",
                    ))
                }
            },
            Expect::Name => match byte {
                _ if is_token_byte(byte) => Expect::Name,
                b':' => {
                    let name = buf.get(scan.line_start..index).unwrap_or_default();
                    if !name.eq_ignore_ascii_case(b"content-length") {
                        Expect::OtherValue
                    } else if scan.content_length.is_some() {
                        return Err(FrameError::DuplicateContentLength);
                    } else {
                        Expect::LengthValue(LengthValue::BeforeDigits)
                    }
                }
                b'\r' => return Err(malformed("header line without ':'")),
                _ => {
                    return Err(unexpected_line_byte(
                        byte,
                        "invalid character in header name",
                    ))
                }
            },
            Expect::OtherValue => match byte {
                b'\r' => Expect::LineLf,
                b'\t' | b' '..=b'~' | 0x80..=0xff => Expect::OtherValue,
                _ => {
                    return Err(unexpected_line_byte(
                        byte,
                        "control character in header value",
                    ))
                }
            },
            Expect::LengthValue(value) => {
                match scan_length_value(value, byte, limits.max_frame_bytes)? {
                    LengthStep::More(value) => Expect::LengthValue(value),
                    LengthStep::End(length) => {
                        scan.content_length = Some(length);
                        Expect::LineLf
                    }
                }
            }
            Expect::LineLf => match byte {
                b'\n' => {
                    scan.line_start = scan.pos;
                    Expect::LineStart
                }
                _ => return Err(malformed("CR not followed by LF")),
            },
            Expect::BlockLf => match byte {
                b'\n' => {
                    let body_len = scan
                        .content_length
                        .ok_or(FrameError::MissingContentLength)?;
                    return Ok(HeaderProgress::Complete {
                        header_len: scan.pos,
                        body_len,
                    });
                }
                _ => return Err(malformed("CR not followed by LF")),
            },
        };
    }
    Ok(HeaderProgress::Incomplete)
}

/// Outcome of one byte of a `Content-Length` value.
enum LengthStep {
    /// The value goes on.
    More(LengthValue),
    /// The value ended (at `\r`) with this length.
    End(usize),
}

/// Advances the `Content-Length` value parser by one byte, rejecting the value as soon as it
/// cannot be valid (in particular as soon as it exceeds `max_frame_bytes`).
fn scan_length_value(
    value: LengthValue,
    byte: u8,
    max_frame_bytes: usize,
) -> Result<LengthStep, FrameError> {
    let next = match (value, byte) {
        (LengthValue::BeforeDigits, b' ' | b'\t') => LengthValue::BeforeDigits,
        (LengthValue::BeforeDigits, b'\r') => return Err(invalid_length("empty value")),
        (LengthValue::BeforeDigits, b'-') => return Err(invalid_length("negative value")),
        (LengthValue::BeforeDigits, b'0'..=b'9') => {
            LengthValue::Digits(check_length(u64::from(byte - b'0'), max_frame_bytes)?)
        }
        (LengthValue::Digits(n), b'0'..=b'9') => {
            let n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(byte - b'0')))
                .ok_or_else(|| invalid_length("value does not fit in 64 bits"))?;
            LengthValue::Digits(check_length(n, max_frame_bytes)?)
        }
        (LengthValue::Digits(n) | LengthValue::AfterDigits(n), b' ' | b'\t') => {
            LengthValue::AfterDigits(n)
        }
        (LengthValue::Digits(n) | LengthValue::AfterDigits(n), b'\r') => {
            let length = usize::try_from(n).map_err(|_| FrameError::ContentLengthTooLarge {
                limit: max_frame_bytes,
            })?;
            return Ok(LengthStep::End(length));
        }
        (_, b'\n') => return Err(malformed("bare LF line ending (expected CRLF)")),
        _ => return Err(invalid_length("not a decimal number")),
    };
    Ok(LengthStep::More(next))
}

/// Rejects a (partial) `Content-Length` value above the frame limit: more digits only make it
/// larger.
fn check_length(n: u64, max_frame_bytes: usize) -> Result<u64, FrameError> {
    if n > u64::try_from(max_frame_bytes).unwrap_or(u64::MAX) {
        Err(FrameError::ContentLengthTooLarge {
            limit: max_frame_bytes,
        })
    } else {
        Ok(n)
    }
}

/// Whether `byte` may appear in a header name (an HTTP `token` character).
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// The error for an unexpected byte in a header line: a bare `\n` gets its own reason.
fn unexpected_line_byte(byte: u8, reason: &'static str) -> FrameError {
    if byte == b'\n' {
        malformed("bare LF line ending (expected CRLF)")
    } else {
        malformed(reason)
    }
}

fn malformed(reason: &'static str) -> FrameError {
    FrameError::MalformedHeader { reason }
}

fn invalid_length(reason: &'static str) -> FrameError {
    FrameError::InvalidContentLength { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_frame_bytes: usize, max_header_bytes: usize) -> FrameLimits {
        FrameLimits {
            max_frame_bytes,
            max_header_bytes,
        }
    }

    /// Feeds `input` in one push, then drains; returns the bodies or the first error.
    fn decode_with(limits: FrameLimits, input: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut decoder = ContentLengthDecoder::new(limits);
        decoder.push(input)?;
        let mut bodies = Vec::new();
        while let Some(body) = decoder.next_frame()? {
            bodies.push(body.to_vec());
        }
        Ok(bodies)
    }

    fn decode(input: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
        decode_with(FrameLimits::default(), input)
    }

    /// The error `push` reports for `input` (it must report one).
    fn push_error(input: &[u8]) -> FrameError {
        ContentLengthDecoder::new(FrameLimits::default())
            .push(input)
            .unwrap_err()
    }

    #[test]
    fn decodes_one_frame() {
        assert_eq!(
            decode(b"Content-Length: 2\r\n\r\n{}").unwrap(),
            vec![b"{}".to_vec()]
        );
    }

    #[test]
    fn decodes_back_to_back_frames_and_keeps_partial_rest() {
        let mut decoder = ContentLengthDecoder::new(FrameLimits::default());
        decoder
            .push(b"Content-Length: 2\r\n\r\n{}Content-Length: 3\r\n\r\n[1]Content-Len")
            .unwrap();
        assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(&b"{}"[..]));
        assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(&b"[1]"[..]));
        assert_eq!(decoder.next_frame().unwrap(), None);
        assert_eq!(decoder.buffered_len(), b"Content-Len".len());
        decoder.push(b"gth: 1\r\n\r\n7").unwrap();
        assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(&b"7"[..]));
        assert_eq!(decoder.buffered_len(), 0);
    }

    #[test]
    fn empty_body_is_a_frame() {
        assert_eq!(
            decode(b"Content-Length: 0\r\n\r\n").unwrap(),
            vec![Vec::<u8>::new()]
        );
    }

    #[test]
    fn header_names_are_case_insensitive_and_other_headers_ignored() {
        let input = b"content-type: application/vscode-jsonrpc; charset=utf-8\r\n\
                      CONTENT-length:\t 2 \t\r\nX-Other: caf\xc3\xa9\r\n\r\n{}";
        assert_eq!(decode(input).unwrap(), vec![b"{}".to_vec()]);
    }

    #[test]
    fn leading_zeros_are_accepted() {
        assert_eq!(
            decode(b"Content-Length: 002\r\n\r\n{}").unwrap(),
            vec![b"{}".to_vec()]
        );
    }

    #[test]
    fn body_is_not_validated_as_utf8() {
        assert_eq!(
            decode(b"Content-Length: 2\r\n\r\n\xff\xfe").unwrap(),
            vec![b"\xff\xfe".to_vec()]
        );
    }

    #[test]
    fn missing_content_length() {
        assert_eq!(
            decode(b"Content-Type: x\r\n\r\n{}"),
            Err(FrameError::MissingContentLength)
        );
        assert_eq!(decode(b"\r\n"), Err(FrameError::MissingContentLength));
    }

    #[test]
    fn duplicate_content_length_is_rejected_even_if_equal() {
        assert_eq!(
            push_error(b"Content-Length: 2\r\ncontent-length: 2\r\n\r\n{}"),
            FrameError::DuplicateContentLength
        );
    }

    #[test]
    fn invalid_content_length_values() {
        for (input, reason) in [
            (&b"Content-Length: -1\r\n"[..], "negative value"),
            (b"Content-Length: \r\n", "empty value"),
            (b"Content-Length:\r\n", "empty value"),
            (b"Content-Length: abc", "not a decimal number"),
            (b"Content-Length: +5", "not a decimal number"),
            (b"Content-Length: 5x", "not a decimal number"),
            (b"Content-Length: 1 2", "not a decimal number"),
            (b"Content-Length: 0x10", "not a decimal number"),
            (b"Content-Length: 1.5", "not a decimal number"),
        ] {
            assert_eq!(
                push_error(input),
                FrameError::InvalidContentLength { reason },
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn content_length_overflowing_u64_is_rejected() {
        let mut decoder = ContentLengthDecoder::new(limits(usize::MAX, 8192));
        assert_eq!(
            decoder.push(b"Content-Length: 99999999999999999999999"),
            Err(FrameError::InvalidContentLength {
                reason: "value does not fit in 64 bits"
            })
        );
    }

    #[test]
    fn huge_content_length_is_rejected_before_the_line_ends() {
        // With default limits a value past 32 MiB fails at its 9th digit.
        assert_eq!(
            push_error(b"Content-Length: 99999999999999999999999"),
            FrameError::ContentLengthTooLarge {
                limit: FrameLimits::DEFAULT_MAX_FRAME_BYTES
            }
        );
    }

    #[test]
    fn content_length_over_limit_is_rejected_and_at_limit_accepted() {
        assert_eq!(
            decode_with(limits(4, 8192), b"Content-Length: 5\r\n"),
            Err(FrameError::ContentLengthTooLarge { limit: 4 })
        );
        assert_eq!(
            decode_with(limits(4, 8192), b"Content-Length: 4\r\n\r\nabcd").unwrap(),
            vec![b"abcd".to_vec()]
        );
    }

    #[test]
    fn claimed_length_reserves_no_more_than_the_limit() {
        let mut decoder = ContentLengthDecoder::new(limits(1024, 8192));
        assert!(decoder.push(b"Content-Length: 1025\r\n\r\n").is_err());
        let mut decoder = ContentLengthDecoder::new(limits(1024, 8192));
        decoder.push(b"Content-Length: 1024\r\n\r\n").unwrap();
        assert_eq!(decoder.next_frame().unwrap(), None);
        assert!(decoder.buf.capacity() < 64 * 1024);
    }

    #[test]
    fn header_block_too_large() {
        let small = limits(1024, 32);
        let mut input = b"X-Padding: ".to_vec();
        input.extend(std::iter::repeat_n(b'a', 40));
        assert_eq!(
            decode_with(small, &input),
            Err(FrameError::HeaderTooLarge { limit: 32 })
        );
        // A block exactly at the limit (counting the final CRLFs) is fine; one byte less is not.
        let exact = &b"X-P: 123456\r\nContent-Length: 1\r\n\r\n"[..];
        let mut input = exact.to_vec();
        input.push(b'x');
        assert_eq!(
            decode_with(limits(1024, exact.len()), &input).unwrap(),
            vec![b"x".to_vec()]
        );
        let limits_one_less = limits(1024, exact.len() - 1);
        assert_eq!(
            decode_with(limits_one_less, &input),
            Err(FrameError::HeaderTooLarge {
                limit: exact.len() - 1
            })
        );
    }

    #[test]
    fn malformed_headers() {
        for (input, reason) in [
            (
                &b"Content-Length: 2\n"[..],
                "bare LF line ending (expected CRLF)",
            ),
            (b"X-A: b\n", "bare LF line ending (expected CRLF)"),
            (b"\n", "bare LF line ending (expected CRLF)"),
            (b"X-A\n", "bare LF line ending (expected CRLF)"),
            (b"Content-Length: 2\rx", "CR not followed by LF"),
            (b"Content-Length: 2\r\n\rx", "CR not followed by LF"),
            (b"X-A\r\n", "header line without ':'"),
            (b": 2\r\n", "empty header name"),
            (b"Content Length: 2", "invalid character in header name"),
            (b"{\"jsonrpc\":\"2.0\"}", "invalid character in header name"),
            (
                b"X-A: 1\r\n folded\r\n",
                "header line starts with whitespace (line folding is not supported)",
            ),
            (b"X-A: \x01", "control character in header value"),
            (b"X-A: \x7f", "control character in header value"),
        ] {
            assert_eq!(
                push_error(input),
                FrameError::MalformedHeader { reason },
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn errors_are_found_by_push_without_waiting_for_line_end() {
        let mut decoder = ContentLengthDecoder::new(FrameLimits::default());
        decoder.push(b"Content-Le").unwrap();
        assert!(decoder.push(b"ngth: 1z").is_err());
    }

    #[test]
    fn header_is_scanned_once_and_body_not_at_all() {
        let mut decoder = ContentLengthDecoder::new(FrameLimits::default());
        let input = b"Content-Length: 10\r\n\r\n0123456789";
        for byte in input {
            decoder.push(&[*byte]).unwrap();
            let _ = decoder.next_frame().unwrap();
        }
        assert_eq!(decoder.scanned_bytes(), 22);
    }

    #[test]
    fn canonical_fast_path_agrees_with_the_general_scanner() {
        let general = |input: &[u8], limits: &FrameLimits| {
            let mut scan = HeaderScan::new();
            match scan_header(&mut scan, input, limits) {
                Ok(HeaderProgress::Complete {
                    header_len,
                    body_len,
                }) => Some((header_len, body_len)),
                _ => None,
            }
        };
        let small = limits(100, 24);
        for input in [
            &b"Content-Length: 2\r\n\r\n{}"[..],
            b"Content-Length: 0\r\n\r\n",
            b"Content-Length: 007\r\n\r\n",
            b"Content-Length: 100\r\n\r\n",
            b"Content-Length: 101\r\n\r\n",
            b"Content-Length: 1000\r\n\r\n",
            b"Content-Length: 0000001\r\n\r\n",
            b"Content-Length: 18446744073709551615\r\n\r\n",
            b"Content-Length: 9999999999999999999\r\n\r\n",
            b"Content-Length: 2\r\n\r",
            b"Content-Length: 2\r\nX: y\r\n\r\n",
            b"content-length: 2\r\n\r\n",
            b"Content-Length:  2\r\n\r\n",
            b"Content-Length: 2 \r\n\r\n",
            b"Content-Length: \r\n\r\n",
        ] {
            for limits in [
                FrameLimits::default(),
                small,
                self::limits(usize::MAX, 8192),
            ] {
                let fast = canonical_header(input, &limits);
                if fast.is_some() {
                    assert_eq!(fast, general(input, &limits), "{input:?} {limits:?}");
                }
            }
        }
        assert_eq!(
            canonical_header(b"Content-Length: 2\r\n\r\n{}", &FrameLimits::default()),
            Some((21, 2))
        );
        // Over a limit, incomplete or not canonical: left to the general scanner.
        for input in [
            &b"Content-Length: 101\r\n\r\n"[..],
            b"Content-Length: 10\r\n\r",
            b"Content-Length: 1000000\r\n\r\n",
            b"content-length: 2\r\n\r\n",
        ] {
            assert_eq!(canonical_header(input, &small), None, "{input:?}");
        }
    }

    #[test]
    fn encodes_exactly_one_header() {
        let mut out = BytesMut::new();
        encode(b"{}", &mut out);
        assert_eq!(&out[..], b"Content-Length: 2\r\n\r\n{}");
        assert_eq!(encoded_len(2), out.len());
        assert_eq!(encoded_len(0), "Content-Length: 0\r\n\r\n".len());
        assert_eq!(encoded_len(10), "Content-Length: 10\r\n\r\n".len() + 10);
        assert_eq!(decimal_digits(usize::MAX), usize::MAX.to_string().len());
    }
}
