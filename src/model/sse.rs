//! An incremental, push-style decoder for `text/event-stream` (server-sent events).
//!
//! Follows the WHATWG event-stream interpretation rules: lines end with CRLF, LF or CR (a CR
//! at the end of one chunk and an LF at the start of the next are one line ending); a leading
//! UTF-8 BOM is dropped; `data:` lines are joined with `\n`; `event:` sets the event type and
//! `id:` the last event id (ignored when it contains NUL); `retry:` with only digits is kept;
//! lines starting with `:` are comments (keep-alives) and are ignored; a field without a colon
//! is a field with an empty value; one space after the colon is dropped; a blank line
//! dispatches the event, unless no `data` line was seen. Text is decoded as UTF-8 with
//! replacement characters, line by line, so splitting never changes the result.
//!
//! Feed whatever bytes arrived to [`SseDecoder::push`], then drain [`SseDecoder::next_event`]
//! until it returns `Ok(None)`. At the end of the body call [`SseDecoder::finish`]. The result
//! does not depend on how the bytes were split. Memory is bounded by
//! [`SseLimits::max_event_bytes`] plus the last pushed chunk.
//!
//! Exceeding the limit is an [`SseError`]; the decoder then returns the same error forever.

use std::fmt;

/// Limits enforced while decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SseLimits {
    /// Largest accepted event: the bytes of its `data` so far plus the line being read.
    /// Default: [`SseLimits::DEFAULT_MAX_EVENT_BYTES`] (4 MiB).
    pub max_event_bytes: usize,
}

impl SseLimits {
    /// Default for [`SseLimits::max_event_bytes`]: 4 MiB.
    pub const DEFAULT_MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;
}

impl Default for SseLimits {
    fn default() -> Self {
        SseLimits {
            max_event_bytes: Self::DEFAULT_MAX_EVENT_BYTES,
        }
    }
}

/// A decoding failure. The stream cannot continue after one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseError {
    /// An event (its data plus the line being read) grew past [`SseLimits::max_event_bytes`].
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::EventTooLarge { limit } => write!(
                f,
                "a server-sent event is larger than the limit of {limit} bytes"
            ),
        }
    }
}

impl std::error::Error for SseError {}

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` type, or `None` for the default type (`message`).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last event id at dispatch (`id:`), if one was ever set to a non-empty value.
    pub id: Option<String>,
}

/// Incremental server-sent-events decoder. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct SseDecoder {
    limits: SseLimits,
    /// Undecoded input; `buf[start..]` begins at the current line.
    buf: Vec<u8>,
    start: usize,
    /// Bytes of the current line already scanned (none of them a line end).
    scanned: usize,
    /// The previous line ended with CR: an LF right after it is part of that line ending.
    skip_lf: bool,
    /// Whether the start of the stream has been checked for a BOM.
    bom_checked: bool,
    fields: Fields,
    error: Option<SseError>,
}

/// The event being assembled, and the stream's last id and retry.
#[derive(Debug, Clone, Default)]
struct Fields {
    /// The data buffer (each `data` value followed by `\n`).
    data: String,
    /// Whether a `data` field was seen for the event being assembled.
    has_data: bool,
    event_type: String,
    last_id: String,
    retry_ms: Option<u64>,
}

impl SseDecoder {
    /// A decoder with the given limits.
    pub fn new(limits: SseLimits) -> Self {
        SseDecoder {
            limits,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            skip_lf: false,
            bom_checked: false,
            fields: Fields::default(),
            error: None,
        }
    }

    /// Appends bytes that arrived. Decoding happens in [`SseDecoder::next_event`].
    pub fn push(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete event, `Ok(None)` when more bytes are needed.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        loop {
            if !self.strip_bom(false) {
                return Ok(None);
            }
            if self.skip_lf && self.start < self.buf.len() {
                if self.buf[self.start] == b'\n' {
                    self.start += 1;
                }
                self.skip_lf = false;
            }
            let rest = &self.buf[self.start + self.scanned..];
            match memchr::memchr2(b'\n', b'\r', rest) {
                Some(i) => {
                    let line_len = self.scanned + i;
                    let terminator = rest[i];
                    self.check_size(line_len)?;
                    let line_start = self.start;
                    self.start += line_len + 1;
                    self.scanned = 0;
                    self.skip_lf = terminator == b'\r';
                    let line = utf8_lossy(&self.buf[line_start..line_start + line_len]);
                    if let Some(event) = self.fields.process_line(&line) {
                        return Ok(Some(event));
                    }
                }
                None => {
                    self.scanned += rest.len();
                    self.check_size(self.scanned)?;
                    if self.start == self.buf.len() {
                        self.buf.clear();
                        self.start = 0;
                    }
                    return Ok(None);
                }
            }
        }
    }

    /// The end of the stream: processes a last line without a line ending and dispatches an
    /// event still being assembled (lenient: the standard discards it; servers that close
    /// right after their last `data:` line are common enough to accept). Returns that event,
    /// if any. Call [`SseDecoder::next_event`] until `Ok(None)` first.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, SseError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.strip_bom(true);
        if self.skip_lf && self.start < self.buf.len() && self.buf[self.start] == b'\n' {
            self.start += 1;
        }
        self.skip_lf = false;
        let mut dispatched = None;
        if self.start < self.buf.len() {
            self.check_size(self.buf.len() - self.start)?;
            let line = utf8_lossy(&self.buf[self.start..]);
            dispatched = self.fields.process_line(&line);
            self.buf.clear();
            self.start = 0;
            self.scanned = 0;
        }
        if dispatched.is_none() {
            dispatched = self.fields.dispatch();
        }
        Ok(dispatched)
    }

    /// The last `retry:` value (milliseconds) the stream sent, if any.
    pub fn retry_ms(&self) -> Option<u64> {
        self.fields.retry_ms
    }

    /// Bytes buffered and not yet decoded (the current partial line).
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Drops a leading BOM once. Returns false when the stream start is still a BOM prefix
    /// (more bytes are needed to decide), unless `at_end`.
    fn strip_bom(&mut self, at_end: bool) -> bool {
        if self.bom_checked {
            return true;
        }
        const BOM: &[u8] = b"\xEF\xBB\xBF";
        let head = &self.buf[self.start..];
        if head.len() < BOM.len() && BOM.starts_with(head) && !at_end {
            return false;
        }
        if head.starts_with(BOM) {
            self.start += BOM.len();
        }
        self.bom_checked = true;
        true
    }

    fn check_size(&mut self, line_len: usize) -> Result<(), SseError> {
        if self.fields.data.len().saturating_add(line_len) > self.limits.max_event_bytes {
            let e = SseError::EventTooLarge {
                limit: self.limits.max_event_bytes,
            };
            self.error = Some(e.clone());
            self.buf = Vec::new();
            self.start = 0;
            self.fields.data = String::new();
            return Err(e);
        }
        Ok(())
    }
}

/// `bytes` as text: borrowed when valid UTF-8 (the fast, common case), else with replacement
/// characters.
fn utf8_lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

impl Fields {
    fn process_line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.find(':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (line, ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => {
                self.event_type.clear();
                self.event_type.push_str(value);
            }
            "id" if !value.contains('\0') => {
                self.last_id.clear();
                self.last_id.push_str(value);
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok();
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        if !self.has_data {
            self.event_type.clear();
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the trailing `\n`
        self.has_data = false;
        let event = std::mem::take(&mut self.event_type);
        Some(SseEvent {
            event: (!event.is_empty()).then_some(event),
            data,
            id: (!self.last_id.is_empty()).then(|| self.last_id.clone()),
        })
    }
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::new(SseLimits::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_chunks(chunks: &[&[u8]], limits: SseLimits) -> (Vec<SseEvent>, Option<SseError>) {
        let mut d = SseDecoder::new(limits);
        let mut out = Vec::new();
        for c in chunks {
            d.push(c);
            loop {
                match d.next_event() {
                    Ok(Some(e)) => out.push(e),
                    Ok(None) => break,
                    Err(e) => return (out, Some(e)),
                }
            }
        }
        match d.finish() {
            Ok(Some(e)) => out.push(e),
            Ok(None) => {}
            Err(e) => return (out, Some(e)),
        }
        (out, None)
    }

    fn decode(stream: &[u8]) -> Vec<SseEvent> {
        let (events, err) = decode_chunks(&[stream], SseLimits::default());
        assert_eq!(err, None);
        events
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn data_lines_join_with_newline_and_blank_line_dispatches() {
        let events = decode(b"data: a\ndata: b\n\ndata:c\n\n");
        assert_eq!(data(&events), ["a\nb", "c"]);
    }

    #[test]
    fn every_line_ending_is_accepted() {
        for stream in [
            &b"data: x\r\n\r\ndata: y\r\n\r\n"[..],
            b"data: x\r\rdata: y\r\r",
            b"data: x\n\ndata: y\n\n",
            b"data: x\r\n\rdata: y\n\r\n",
        ] {
            assert_eq!(data(&decode(stream)), ["x", "y"], "{stream:?}");
        }
    }

    #[test]
    fn cr_at_a_chunk_end_and_lf_in_the_next_are_one_line_ending() {
        let (events, _) = decode_chunks(
            &[b"data: x\r", b"\n\r", b"\ndata: y\n\n"],
            SseLimits::default(),
        );
        assert_eq!(data(&events), ["x", "y"]);
    }

    #[test]
    fn comments_event_id_and_retry() {
        let events = decode(b": keep-alive\nevent: message_start\nid: 7\nretry: 300\ndata: {}\n\n");
        assert_eq!(
            events,
            [SseEvent {
                event: Some("message_start".into()),
                data: "{}".into(),
                id: Some("7".into())
            }]
        );
        let mut d = SseDecoder::default();
        d.push(b"retry: 250\n\n");
        assert_eq!(d.next_event(), Ok(None));
        assert_eq!(d.retry_ms(), Some(250));
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing_and_reset_the_type() {
        let events = decode(b"\n\nevent: x\n\ndata: y\n\n");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event, None);
        assert_eq!(decode(b"data\n\n")[0].data, "");
    }

    #[test]
    fn a_leading_bom_is_dropped_even_when_split() {
        let (events, _) = decode_chunks(
            &[b"\xEF", b"\xBB", b"\xBFdata: z\n\n"],
            SseLimits::default(),
        );
        assert_eq!(data(&events), ["z"]);
    }

    #[test]
    fn a_last_event_without_blank_line_is_dispatched_at_the_end() {
        assert_eq!(data(&decode(b"data: [DONE]")), ["[DONE]"]);
        assert_eq!(data(&decode(b"data: [DONE]\n")), ["[DONE]"]);
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(decode(b"data: \xFF\n\n")[0].data, "\u{FFFD}");
    }

    #[test]
    fn an_oversized_event_is_a_clear_sticky_error_however_it_is_split() {
        let limits = SseLimits {
            max_event_bytes: 16,
        };
        let stream = b"data: 0123456789\ndata: 0123456789\n\n";
        let (whole, err_whole) = decode_chunks(&[stream], limits);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        let (split, err_split) = decode_chunks(&bytes, limits);
        assert_eq!(whole, split);
        assert_eq!(err_whole, Some(SseError::EventTooLarge { limit: 16 }));
        assert_eq!(err_whole, err_split);
        assert!(err_whole.unwrap().to_string().contains("16 bytes"));
        // A line with no end yet also counts.
        let mut d = SseDecoder::new(limits);
        d.push(&[b'x'; 40]);
        assert!(d.next_event().is_err());
        d.push(b"\n\n");
        assert!(d.next_event().is_err(), "the error is sticky");
    }

    #[test]
    fn memory_stays_bounded_by_the_partial_line() {
        let mut d = SseDecoder::default();
        for _ in 0..1000 {
            d.push(b"data: {\"x\":1}\n\n");
            while d.next_event().unwrap().is_some() {}
        }
        assert_eq!(d.buffered(), 0);
        assert!(d.buf.capacity() < 4096, "{}", d.buf.capacity());
    }
}
