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

/// One dispatched event, borrowed from the decoder: its data is read in place from the
/// input when it is a single `data:` line that arrived in one [`SseDecoder::push`] (the
/// common case), so handing it out copies nothing. See [`SseDecoder::next_event_ref`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SseEventRef<'a> {
    /// The `event:` type, or `None` for the default type (`message`).
    pub(crate) event: Option<&'a str>,
    /// The `data:` lines joined with `\n`.
    pub(crate) data: &'a str,
    /// The last event id at dispatch.
    pub(crate) id: Option<&'a str>,
}

impl SseEventRef<'_> {
    /// The owned event.
    pub(crate) fn to_owned_event(self) -> SseEvent {
        SseEvent {
            event: self.event.map(str::to_owned),
            data: self.data.to_owned(),
            id: self.id.map(str::to_owned),
        }
    }
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
    /// The data buffer (each `data` value followed by `\n`), UTF-8 decoded with
    /// replacement characters.
    data: String,
    /// The event's first `data` value while it is its only one and still in the input
    /// buffer: its byte range there (it stands for the value plus `\n` in `data`). Moved
    /// into `data` when a second `data` line comes or more input is needed first.
    in_place: Option<(usize, usize)>,
    /// Whether a `data` field was seen for the event being assembled.
    has_data: bool,
    /// The bytes the event's data values took on the wire, each plus one for its `\n`: what
    /// the size limit counts (not `data`'s length, which grows by a replacement character
    /// per invalid byte, and only once a value is moved out of the input buffer, so it
    /// would make the limit depend on where the input was split).
    data_bytes: usize,
    event_type: String,
    last_id: String,
    retry_ms: Option<u64>,
    /// An event was handed out (borrowed); the event fields are reset before the next line.
    dispatched: bool,
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
        Ok(self.next_event_ref()?.map(SseEventRef::to_owned_event))
    }

    /// Like [`SseDecoder::next_event`], the event borrowed (valid until the next call).
    pub(crate) fn next_event_ref(&mut self) -> Result<Option<SseEventRef<'_>>, SseError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.fields.reset_if_dispatched();
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
                    if self
                        .fields
                        .process_line(&self.buf, line_start, line_start + line_len)
                    {
                        return Ok(Some(self.dispatched_event()));
                    }
                }
                None => {
                    self.scanned += rest.len();
                    self.check_size(self.scanned)?;
                    // The event continues in input still to come: its data moves out of
                    // the buffer, which the next push may compact.
                    self.fields.own_data(&self.buf);
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
        self.fields.reset_if_dispatched();
        self.strip_bom(true);
        if self.skip_lf && self.start < self.buf.len() && self.buf[self.start] == b'\n' {
            self.start += 1;
        }
        self.skip_lf = false;
        let mut dispatched = false;
        if self.start < self.buf.len() {
            self.check_size(self.buf.len() - self.start)?;
            dispatched = self
                .fields
                .process_line(&self.buf, self.start, self.buf.len());
        }
        if !dispatched {
            dispatched = self.fields.dispatch();
        }
        let event = dispatched.then(|| self.dispatched_event().to_owned_event());
        self.fields.reset_if_dispatched();
        self.buf.clear();
        self.start = 0;
        self.scanned = 0;
        Ok(event)
    }

    /// The last `retry:` value (milliseconds) the stream sent, if any.
    pub fn retry_ms(&self) -> Option<u64> {
        self.fields.retry_ms
    }

    /// Bytes buffered and not yet decoded (the current partial line).
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The event just dispatched, borrowed from the input buffer or the data buffer.
    fn dispatched_event(&mut self) -> SseEventRef<'_> {
        let SseDecoder { buf, fields, .. } = self;
        let in_place = fields
            .in_place
            .map(|(from, to)| std::str::from_utf8(&buf[from..to]));
        let data = match in_place {
            Some(Ok(text)) => text,
            Some(Err(_)) => {
                fields.own_data(buf);
                &fields.data[..fields.data.len() - 1]
            }
            None => &fields.data[..fields.data.len() - 1],
        };
        SseEventRef {
            event: (!fields.event_type.is_empty()).then_some(fields.event_type.as_str()),
            data,
            id: (!fields.last_id.is_empty()).then_some(fields.last_id.as_str()),
        }
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
        if self.fields.data_len().saturating_add(line_len) > self.limits.max_event_bytes {
            let e = SseError::EventTooLarge {
                limit: self.limits.max_event_bytes,
            };
            self.error = Some(e.clone());
            self.buf = Vec::new();
            self.start = 0;
            self.fields.data = String::new();
            self.fields.data_bytes = 0;
            self.fields.in_place = None;
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
    /// Processes the line `buf[from..to]`; true when it dispatches an event. Fields are
    /// split on bytes: the names and separators are ASCII, and decoding with replacement
    /// characters never merges an ASCII byte into a replaced sequence, so decoding the
    /// value alone gives what decoding the line and splitting it would.
    fn process_line(&mut self, buf: &[u8], from: usize, to: usize) -> bool {
        let line = &buf[from..to];
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return false;
        }
        let (field, value_from) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = colon + 1;
                (
                    &line[..colon],
                    value + usize::from(line.get(value) == Some(&b' ')),
                )
            }
            None => (line, line.len()),
        };
        let value = &line[value_from..];
        match field {
            b"data" => {
                self.data_bytes += value.len() + 1;
                if !self.has_data {
                    self.has_data = true;
                    self.in_place = Some((from + value_from, to));
                } else {
                    self.own_data(buf);
                    self.data.push_str(&utf8_lossy(value));
                    self.data.push('\n');
                }
            }
            b"event" => {
                self.event_type.clear();
                self.event_type.push_str(&utf8_lossy(value));
            }
            b"id" if !value.contains(&0) => {
                self.last_id.clear();
                self.last_id.push_str(&utf8_lossy(value));
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry_ms = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            _ => {}
        }
        false
    }

    /// The bytes the event's data counts towards the limit (each value plus `\n`).
    fn data_len(&self) -> usize {
        self.data_bytes
    }

    /// Moves an in-place data value into the data buffer.
    fn own_data(&mut self, buf: &[u8]) {
        if let Some((from, to)) = self.in_place.take() {
            self.data.push_str(&utf8_lossy(&buf[from..to]));
            self.data.push('\n');
        }
    }

    /// A blank line: true when an event is dispatched (a `data` field was seen).
    fn dispatch(&mut self) -> bool {
        if !self.has_data {
            self.event_type.clear();
            return false;
        }
        self.dispatched = true;
        true
    }

    /// After an event was handed out: clears its data and type for the next one.
    fn reset_if_dispatched(&mut self) {
        if self.dispatched {
            self.dispatched = false;
            self.has_data = false;
            self.in_place = None;
            self.data.clear();
            self.data_bytes = 0;
            self.event_type.clear();
        }
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

    /// The size limit counts the data's bytes as they came: a value with invalid UTF-8 (each
    /// byte a 3-byte replacement character once decoded) counts the same whether the input
    /// was split after it or not (found by `tests/core/model_props.rs`).
    #[test]
    fn the_size_limit_does_not_depend_on_the_split_with_invalid_utf8() {
        let stream: &[u8] = b"data: \xff\xff\xff\xff\nevent: x\n\n";
        let limits = SseLimits {
            max_event_bytes: 14,
        };
        let whole = decode_chunks(&[stream], limits);
        assert_eq!(whole.1, None);
        assert_eq!(data(&whole.0), ["\u{fffd}\u{fffd}\u{fffd}\u{fffd}"]);
        let split = decode_chunks(&[&stream[..13], &stream[13..]], limits);
        assert_eq!(split, whole);
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
