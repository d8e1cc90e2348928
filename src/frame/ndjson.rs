//! Newline-delimited JSON framing (Agent Client Protocol).
//!
//! Each frame is one line: the body followed by `\n`. A `\r` just before the `\n` is stripped
//! (CRLF line endings), a line's leading JSON whitespace (space, tab, `\r`) is dropped and not
//! counted against the limit (so lines holding only whitespace are skipped, whatever their
//! length and however the input is split), and a line whose body would exceed
//! [`FrameLimits::max_frame_bytes`] is an error as soon as enough of it has been buffered,
//! without waiting for its `\n`.

use bytes::{Buf, Bytes, BytesMut};

use super::{FrameError, FrameLimits};

/// Appends `body` and `\n` to `out`. `body` must not contain `\n`.
pub(super) fn encode(body: &[u8], out: &mut BytesMut) {
    out.extend_from_slice(body);
    out.extend_from_slice(b"\n");
}

/// Length of what [`encode`] appends for a body of `body_len` bytes.
pub(super) fn encoded_len(body_len: usize) -> usize {
    body_len.saturating_add(1)
}

/// Incremental decoder for NDJSON input.
#[derive(Debug)]
pub(super) struct NdjsonDecoder {
    limits: FrameLimits,
    /// Undecoded input; starts at the current line.
    buf: BytesMut,
    /// Bytes of the current line scanned so far (none of them is `\n`).
    pos: usize,
    /// Whether the current line's leading whitespace has been dropped and its first content
    /// byte found (at `buf[0]`); from then on only the line's `\n` is searched for.
    has_content: bool,
    /// The current line is complete: its `\n` is at this index.
    line_end: Option<usize>,
    /// Bytes examined by the scanner so far.
    scanned: u64,
}

impl NdjsonDecoder {
    pub(super) fn new(limits: FrameLimits) -> Self {
        NdjsonDecoder {
            limits,
            buf: BytesMut::new(),
            pos: 0,
            has_content: false,
            line_end: None,
            scanned: 0,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        self.buf.extend_from_slice(bytes);
        self.find_line().map(|_| ())
    }

    pub(super) fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        let Some(line_end) = self.find_line()? else {
            return Ok(None);
        };
        let body_len = body_len(&self.buf, line_end);
        let mut line = self.buf.split_to(line_end + 1);
        line.truncate(body_len);
        self.start_line();
        Ok(Some(line.freeze()))
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
        self.start_line();
    }

    fn start_line(&mut self) {
        self.pos = 0;
        self.has_content = false;
        self.line_end = None;
    }

    /// Scans new input for the end of the current line, dropping whitespace-only lines.
    /// Returns the index of the `\n` ending the first non-blank line, if it has arrived.
    fn find_line(&mut self) -> Result<Option<usize>, FrameError> {
        if self.line_end.is_some() {
            return Ok(self.line_end);
        }
        loop {
            if !self.has_content {
                // A line's leading whitespace is never part of a frame and never counts
                // against the limit, so a blank line is skipped whatever its length and
                // however the input is split, and memory stays bounded while it streams in.
                let skip = self
                    .buf
                    .iter()
                    .take_while(|b| matches!(b, b' ' | b'\t' | b'\r'))
                    .count();
                self.scanned += skip as u64;
                self.buf.advance(skip);
                self.pos = 0;
                match self.buf.first() {
                    None => return Ok(None),
                    Some(b'\n') => {
                        self.scanned += 1;
                        self.buf.advance(1);
                        continue;
                    }
                    Some(_) => self.has_content = true,
                }
            }
            // The line has content (its first non-whitespace byte is behind `pos`), so only
            // its end matters now: a vectorised search for `\n`, no per-byte work.
            let unscanned = self.buf.get(self.pos..).unwrap_or_default();
            let newline = memchr::memchr(b'\n', unscanned).map(|offset| self.pos + offset);
            let Some(line_end) = newline else {
                self.scanned += unscanned.len() as u64;
                self.pos = self.buf.len();
                // Even if `\n` came next, the body would be too long.
                return if body_len(&self.buf, self.pos) > self.limits.max_frame_bytes {
                    Err(self.line_too_long())
                } else {
                    Ok(None)
                };
            };
            self.scanned += (line_end + 1 - self.pos) as u64;
            if body_len(&self.buf, line_end) > self.limits.max_frame_bytes {
                return Err(self.line_too_long());
            }
            self.pos = line_end;
            self.line_end = Some(line_end);
            return Ok(self.line_end);
        }
    }

    fn line_too_long(&self) -> FrameError {
        FrameError::LineTooLong {
            limit: self.limits.max_frame_bytes,
        }
    }
}

/// Length of the body of a line whose `\n` is (or would be) at `line_end`: without a final `\r`.
fn body_len(buf: &[u8], line_end: usize) -> usize {
    match line_end.checked_sub(1).and_then(|last| buf.get(last)) {
        Some(b'\r') => line_end - 1,
        _ => line_end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_frame_bytes: usize) -> FrameLimits {
        FrameLimits {
            max_frame_bytes,
            ..FrameLimits::default()
        }
    }

    fn decode_with(limits: FrameLimits, input: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut decoder = NdjsonDecoder::new(limits);
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

    #[test]
    fn decodes_lf_and_crlf_lines() {
        assert_eq!(
            decode(b"{\"a\":1}\n[2]\r\n3\n").unwrap(),
            vec![b"{\"a\":1}".to_vec(), b"[2]".to_vec(), b"3".to_vec()]
        );
    }

    #[test]
    fn skips_blank_and_whitespace_only_lines() {
        assert_eq!(
            decode(b"\n\r\n  \t \r\n{}\n \n\n[]\r\n").unwrap(),
            vec![b"{}".to_vec(), b"[]".to_vec()]
        );
        let mut decoder = NdjsonDecoder::new(FrameLimits::default());
        decoder.push(b"\n \r\n\t\n").unwrap();
        assert_eq!(decoder.buffered_len(), 0);
    }

    #[test]
    fn drops_leading_whitespace_keeps_inner_whitespace_and_only_strips_final_cr() {
        assert_eq!(decode(b" {} \r\r\n").unwrap(), vec![b"{} \r".to_vec()]);
        assert_eq!(decode(b"{\t1 }\n").unwrap(), vec![b"{\t1 }".to_vec()]);
    }

    #[test]
    fn partial_line_waits_for_newline() {
        let mut decoder = NdjsonDecoder::new(FrameLimits::default());
        decoder.push("{\"t\":\"日".as_bytes()).unwrap();
        assert_eq!(decoder.next_frame().unwrap(), None);
        decoder.push("本\"}\r".as_bytes()).unwrap();
        assert_eq!(decoder.next_frame().unwrap(), None);
        decoder.push(b"\n").unwrap();
        assert_eq!(
            decoder.next_frame().unwrap().as_deref(),
            Some("{\"t\":\"日本\"}".as_bytes())
        );
        assert_eq!(decoder.buffered_len(), 0);
    }

    #[test]
    fn line_too_long_is_detected_without_newline() {
        let mut decoder = NdjsonDecoder::new(limits(4));
        decoder.push(b"1234").unwrap();
        assert_eq!(
            decoder.push(b"5"),
            Err(FrameError::LineTooLong { limit: 4 })
        );
    }

    #[test]
    fn line_at_limit_is_accepted_even_with_crlf() {
        assert_eq!(
            decode_with(limits(4), b"1234\n").unwrap(),
            vec![b"1234".to_vec()]
        );
        let mut decoder = NdjsonDecoder::new(limits(4));
        // A trailing `\r` may still be the start of a CRLF line ending.
        decoder.push(b"1234\r").unwrap();
        decoder.push(b"\n").unwrap();
        assert_eq!(decoder.next_frame().unwrap().as_deref(), Some(&b"1234"[..]));
    }

    #[test]
    fn line_over_limit_with_newline_in_same_chunk() {
        assert_eq!(
            decode_with(limits(4), b"12345\n"),
            Err(FrameError::LineTooLong { limit: 4 })
        );
        assert_eq!(
            decode_with(limits(4), b"1234\r\r\n"),
            Err(FrameError::LineTooLong { limit: 4 })
        );
    }

    #[test]
    fn long_whitespace_line_is_skipped_and_leading_whitespace_is_not_counted() {
        assert_eq!(decode_with(limits(4), b"      "), Ok(vec![]));
        assert_eq!(
            decode_with(limits(4), b"          \n{}\n"),
            Ok(vec![b"{}".to_vec()])
        );
        assert_eq!(
            decode_with(limits(4), b"        [1]\n"),
            Ok(vec![b"[1]".to_vec()])
        );
        assert_eq!(
            decode_with(limits(4), b"  [1,2]\n"),
            Err(FrameError::LineTooLong { limit: 4 })
        );
    }

    #[test]
    fn each_byte_is_scanned_once() {
        let mut decoder = NdjsonDecoder::new(FrameLimits::default());
        let input = b"{\"a\":1}\n\n[2]\r\n";
        for byte in input {
            decoder.push(&[*byte]).unwrap();
            while decoder.next_frame().unwrap().is_some() {}
        }
        assert_eq!(decoder.scanned_bytes(), input.len() as u64);
    }

    #[test]
    fn encodes_body_and_newline() {
        let mut out = BytesMut::new();
        encode(b"{}", &mut out);
        assert_eq!(&out[..], b"{}\n");
        assert_eq!(encoded_len(2), 3);
    }
}
