//! The fuzz target bodies, shared by the cargo-fuzz binaries (`fuzz/fuzz_targets/*.rs`) and the
//! stable corpus replay (`tests/core/fuzz_corpus_replay.rs`). Every target asserts invariants, not just "no panic"; a failed invariant panics
//! with a message saying which.
//!
//! Only `agentwire`, `bytes` and `serde_json` are used, so the file compiles in both places.

use agentwire::frame::{encode_frame, FrameDecoder, FrameError, FrameLimits, Framing};
use agentwire::jsonrpc::{self, BatchPolicy, Id, Message, OwnedId, Parsed};
use bytes::BytesMut;
use serde_json::{json, Value};

pub mod world;

use world::{AskKind, Rng, World, WorldConfig};

// ---------------------------------------------------------------------------------------------
// Input reader
// ---------------------------------------------------------------------------------------------

/// Reads fuzz input; past its end every read returns zeros.
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }

    /// Whether everything has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// The next byte without reading it (0 past the end).
    pub fn peek(&self) -> u8 {
        self.data.get(self.pos).copied().unwrap_or(0)
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | (u16::from(self.u8()) << 8)
    }

    /// Up to `n` bytes (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = self.pos.saturating_add(n).min(self.data.len());
        self.pos = self.pos.saturating_add(n);
        &self.data[start..end]
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        self.pos = self.data.len();
        &self.data[start..]
    }

    /// An index below `n` (`n > 0`).
    pub fn pick(&mut self, n: usize) -> usize {
        usize::from(self.u8()) % n.max(1)
    }

    /// A short string: one of `vocab` or (rarely) fuzzed UTF-8.
    pub fn word(&mut self, vocab: &[&str]) -> String {
        let b = self.u8();
        if b >= 240 {
            let n = usize::from(self.u8() % 24);
            String::from_utf8_lossy(self.bytes(n)).into_owned()
        } else {
            vocab[usize::from(b) % vocab.len()].to_owned()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decoders
// ---------------------------------------------------------------------------------------------

/// Limits the decoder targets choose from (small ones reach every limit error).
fn decoder_limits(selector: u8) -> FrameLimits {
    match selector % 4 {
        0 => FrameLimits::default(),
        1 => FrameLimits {
            max_frame_bytes: 64,
            max_header_bytes: 64,
        },
        2 => FrameLimits {
            max_frame_bytes: 1024,
            max_header_bytes: 40,
        },
        _ => FrameLimits {
            max_frame_bytes: 7,
            max_header_bytes: 23,
        },
    }
}

/// What a decoder made of a stream: the frames, then the error that stopped it, if any.
type Decoded = (Vec<Vec<u8>>, Option<FrameError>);

/// Decodes `stream` pushed in chunks of the given sizes (cycled), draining after each push and
/// checking the decoder's own guarantees along the way.
fn decode_chunked(
    framing: Framing,
    limits: FrameLimits,
    stream: &[u8],
    sizes: &[usize],
) -> Decoded {
    let mut decoder = FrameDecoder::new(framing, limits);
    assert_eq!(decoder.framing(), framing);
    let mut frames = Vec::new();
    let mut pushed = 0usize;
    let mut rest = stream;
    let mut i = 0;
    let bound = match framing {
        Framing::ContentLength => limits.max_header_bytes.max(limits.max_frame_bytes),
        Framing::Ndjson => limits.max_frame_bytes.saturating_add(1),
        Framing::Http => unreachable!("the decoder targets cover the JSON-RPC framings"),
    };
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        i += 1;
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        pushed += chunk.len();
        if let Err(e) = decoder.push(chunk) {
            return finish_poisoned(decoder, frames, e);
        }
        loop {
            match decoder.next_frame() {
                Ok(Some(f)) => {
                    assert!(
                        f.len() <= limits.max_frame_bytes,
                        "a frame of {} bytes passed the limit of {}",
                        f.len(),
                        limits.max_frame_bytes
                    );
                    frames.push(f.to_vec());
                }
                Ok(None) => break,
                Err(e) => return finish_poisoned(decoder, frames, e),
            }
        }
        assert!(
            decoder.buffered_len() <= bound,
            "{framing:?}: {} bytes buffered after draining, over the bound {bound}",
            decoder.buffered_len()
        );
        assert!(
            decoder.scanned_bytes() <= pushed as u64,
            "{framing:?}: scanned {} bytes of {pushed} pushed (a byte scanned twice)",
            decoder.scanned_bytes()
        );
    }
    (frames, None)
}

/// After an error: the buffer is dropped and every later call repeats the error.
fn finish_poisoned(mut decoder: FrameDecoder, frames: Vec<Vec<u8>>, error: FrameError) -> Decoded {
    assert_eq!(decoder.buffered_len(), 0, "buffer kept after {error}");
    assert_eq!(decoder.next_frame(), Err(error.clone()));
    assert_eq!(
        decoder.push(b"Content-Length: 2\r\n\r\n{}\n"),
        Err(error.clone())
    );
    assert_eq!(decoder.next_frame(), Err(error.clone()));
    assert!(!error.to_string().is_empty());
    (frames, Some(error))
}

/// Chunk sizes from a seed byte: mostly small, sometimes large.
fn chunk_sizes(seed: u8) -> Vec<usize> {
    let mut rng = Rng(u64::from(seed));
    (0..16)
        .map(|_| match rng.below(8) {
            0 => 1 + rng.below(4096) as usize,
            _ => 1 + rng.below(17) as usize,
        })
        .collect()
}

/// The NDJSON rules applied to a whole stream at once.
fn ndjson_reference(stream: &[u8], limits: FrameLimits) -> Decoded {
    let too_long = || FrameError::LineTooLong {
        limit: limits.max_frame_bytes,
    };
    let strip_cr = |line: &[u8]| -> usize {
        if line.last() == Some(&b'\r') {
            line.len() - 1
        } else {
            line.len()
        }
    };
    // A line's leading whitespace is never part of a frame nor counted against the limit.
    let trim_start = |line: &[u8]| -> usize {
        line.iter()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\r'))
            .count()
    };
    let mut frames = Vec::new();
    let mut rest = stream;
    loop {
        match rest.iter().position(|b| *b == b'\n') {
            Some(end) => {
                let line = &rest[trim_start(&rest[..end])..end];
                rest = &rest[end + 1..];
                if line.is_empty() {
                    continue;
                }
                let len = strip_cr(line);
                if len > limits.max_frame_bytes {
                    return (frames, Some(too_long()));
                }
                frames.push(line[..len].to_vec());
            }
            None => {
                if strip_cr(&rest[trim_start(rest)..]) > limits.max_frame_bytes {
                    return (frames, Some(too_long()));
                }
                return (frames, None);
            }
        }
    }
}

/// Builds a stream of valid frames from fuzz input; returns it with the bodies and whether
/// each fits the limits.
fn structured_stream(framing: Framing, inp: &mut Input<'_>) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut stream = Vec::new();
    let mut bodies = Vec::new();
    while !inp.is_empty() && bodies.len() < 64 {
        let variant = inp.u8();
        let len = usize::from(inp.u8());
        let mut body = inp.bytes(len).to_vec();
        match framing {
            Framing::ContentLength => {
                let n = body.len();
                let header = match variant % 5 {
                    0 => format!("Content-Length: {n}\r\n\r\n"),
                    1 => format!("content-length:{n}\r\n\r\n"),
                    2 => format!(
                        "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: {n}\r\n\r\n"
                    ),
                    3 => format!("CONTENT-LENGTH: \t {n} \t\r\nX-Other: y\r\n\r\n"),
                    _ => format!("Content-Length: {n}\r\nContent-Type: x\r\n\r\n"),
                };
                stream.extend_from_slice(header.as_bytes());
                stream.extend_from_slice(&body);
            }
            Framing::Ndjson => {
                body.retain(|b| *b != b'\n');
                // A line's leading whitespace is not part of its frame: a body starts with
                // something else.
                let lead = body
                    .iter()
                    .take_while(|b| matches!(b, b' ' | b'\t' | b'\r'))
                    .count();
                body.drain(..lead);
                if body.is_empty() {
                    body.push(b'{');
                }
                if body.last() == Some(&b'\r') {
                    body.push(b'}');
                }
                if variant & 1 != 0 {
                    stream.extend_from_slice(
                        [&b"\n"[..], b" \r\n", b"\t\n"][usize::from(variant >> 1) % 3],
                    );
                }
                stream.extend_from_slice(&body);
                stream.extend_from_slice(if variant & 8 != 0 { b"\r\n" } else { b"\n" });
            }
            Framing::Http => unreachable!("the decoder targets cover the JSON-RPC framings"),
        }
        bodies.push(body);
    }
    (stream, bodies)
}

/// `AGENTWIRE_FUZZ_TOLERATE_KNOWN=1`: tolerate the known, reported bugs (see fuzz/README.md,
/// "Findings") so that a campaign explores past them. Off by default, and never set by the
/// corpus replay, which is strict.
pub fn tolerate_known_bugs() -> bool {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONCE.get_or_init(|| std::env::var_os("AGENTWIRE_FUZZ_TOLERATE_KNOWN").is_some())
}

/// Whether `stream` has a whitespace-only NDJSON line (complete or not) longer than `max`.
fn has_long_blank_line(stream: &[u8], max: usize) -> bool {
    stream
        .split(|b| *b == b'\n')
        .any(|line| line.len() > max && line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')))
}

fn decoder_target(framing: Framing, data: &[u8]) {
    let mut inp = Input::new(data);
    let config = inp.u8();
    let limits = decoder_limits(config);
    let structured = config & 4 != 0;
    let sizes = chunk_sizes(inp.u8());
    let (stream, bodies) = if structured {
        structured_stream(framing, &mut inp)
    } else {
        (inp.rest().to_vec(), Vec::new())
    };
    let whole = decode_chunked(framing, limits, &stream, &[usize::MAX]);
    let bytewise = decode_chunked(framing, limits, &stream, &[1]);
    let fuzzed = decode_chunked(framing, limits, &stream, &sizes);
    if framing == Framing::Ndjson
        && tolerate_known_bugs()
        && has_long_blank_line(&stream, limits.max_frame_bytes)
    {
        // Known: a long blank line errors or not depending on the split.
        return;
    }
    assert_eq!(
        whole, bytewise,
        "{framing:?}: decoding depends on how the bytes are split (whole vs byte by byte)"
    );
    assert_eq!(
        whole, fuzzed,
        "{framing:?}: decoding depends on how the bytes are split (whole vs {sizes:?})"
    );
    if framing == Framing::Ndjson {
        assert_eq!(
            whole,
            ndjson_reference(&stream, limits),
            "NDJSON decoder disagrees with the reference rules"
        );
    }
    if structured {
        // Valid frames decode to their bodies, up to the first one over a limit.
        let (frames, error) = &whole;
        let fits = |b: &Vec<u8>| b.len() <= limits.max_frame_bytes;
        let good = bodies.iter().take_while(|b| fits(b)).count();
        let header_ok = framing == Framing::Ndjson || limits.max_header_bytes >= 96;
        if header_ok {
            assert_eq!(&frames[..], &bodies[..good.min(frames.len())]);
            if good == bodies.len() {
                assert_eq!(frames.len(), bodies.len(), "valid frames lost");
                assert!(error.is_none(), "valid frames rejected: {error:?}");
            } else {
                assert_eq!(frames.len(), good);
                assert!(error.is_some(), "an oversize frame was not rejected");
            }
        } else {
            assert!(frames.len() <= bodies.len());
            assert_eq!(&frames[..], &bodies[..frames.len()]);
        }
    }
    // What was decoded re-encodes and decodes to the same frames.
    let (frames, _) = &whole;
    let mut again = BytesMut::new();
    for f in frames {
        if framing == Framing::Ndjson && f.last() == Some(&b'\r') {
            // A body ending in CR cannot round-trip through NDJSON (the CR would be stripped).
            return;
        }
        encode_frame(framing, f, &mut again);
    }
    let roomy = FrameLimits {
        max_frame_bytes: limits.max_frame_bytes,
        max_header_bytes: 64,
    };
    let (re, err) = decode_chunked(framing, roomy, &again, &sizes);
    assert!(err.is_none(), "re-encoded frames do not decode: {err:?}");
    assert_eq!(&re, frames, "re-encoded frames decode differently");
}

/// Fuzz target: the `Content-Length` decoder.
///
/// Input: a config byte (limits; bit 2: build valid frames from the rest), a chunking seed,
/// then the stream (or the frame recipe). Checks: the same frames and error whatever the
/// chunking; valid frames come out intact; bounded buffering; every byte scanned at most once;
/// errors poison the decoder; decoded frames round-trip through the encoder.
pub fn content_length_decoder(data: &[u8]) {
    decoder_target(Framing::ContentLength, data);
}

/// Fuzz target: the NDJSON decoder. As [`content_length_decoder`], plus agreement with a
/// whole-stream reference implementation of the NDJSON rules.
pub fn ndjson_decoder(data: &[u8]) {
    decoder_target(Framing::Ndjson, data);
}

// ---------------------------------------------------------------------------------------------
// JSON-RPC parse
// ---------------------------------------------------------------------------------------------

/// Whether any object anywhere in the JSON text has a member name twice (a `Value` would merge
/// them; the parser's typed parts, such as error objects, refuse them).
fn has_duplicate_members(text: &str) -> bool {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    struct Scan;
    impl<'de> DeserializeSeed<'de> for Scan {
        type Value = bool;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Scan {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let mut names = std::collections::BTreeSet::new();
            let mut duplicate = false;
            while let Some(k) = map.next_key::<String>()? {
                duplicate |= !names.insert(k);
                duplicate |= map.next_value_seed(Scan)?;
            }
            Ok(duplicate)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
            let mut duplicate = false;
            while let Some(d) = seq.next_element_seed(Scan)? {
                duplicate |= d;
            }
            Ok(duplicate)
        }
        fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_str<E>(self, _: &str) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok(false)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    Scan.deserialize(&mut de).unwrap_or(true)
}

/// Checks one parsed message against the JSON value of the same text.
fn check_message(message: &Message<'_>, value: &Value) {
    assert_eq!(
        value["jsonrpc"], "2.0",
        "accepted without jsonrpc 2.0: {value}"
    );
    let raw_value = |raw: &serde_json::value::RawValue| -> Value {
        serde_json::from_str(raw.get()).expect("raw values are valid JSON")
    };
    let check_id = |id: &Id<'_>| {
        let parsed: Value = serde_json::from_str(id.as_raw()).expect("id raw is JSON");
        assert_eq!(&parsed, &value["id"], "id differs from the JSON's id");
        assert!(
            parsed.is_number() || parsed.is_string() || parsed.is_null(),
            "id kind {parsed}"
        );
        assert_eq!(
            Id::from_raw(id.as_raw()),
            Some(*id),
            "id raw does not validate"
        );
        let owned = id.to_owned();
        assert_eq!(owned.as_raw(), id.as_raw());
        assert_eq!(OwnedId::parse(id.as_raw()), Some(owned.clone()));
        if let Some(s) = id.as_str() {
            assert_eq!(value["id"].as_str(), Some(&*s));
        }
        if let Some(n) = id.as_u64() {
            assert_eq!(value["id"].as_f64(), Some(n as f64));
        }
    };
    match message {
        Message::Request { id, method, params } => {
            check_id(id);
            assert_eq!(value["method"].as_str(), Some(&**method));
            assert!(value.get("result").is_none() && value.get("error").is_none());
            match params {
                Some(p) => {
                    let v = raw_value(p);
                    assert!(v.is_object() || v.is_array());
                    assert_eq!(v, value["params"]);
                }
                None => assert!(value.get("params").is_none()),
            }
        }
        Message::Notification { method, params } => {
            assert!(
                value.get("id").is_none(),
                "a notification with an id: {value}"
            );
            assert_eq!(value["method"].as_str(), Some(&**method));
            if let Some(p) = params {
                assert_eq!(raw_value(p), value["params"]);
            }
        }
        Message::Response { id, outcome } => {
            check_id(id);
            assert!(value.get("method").is_none());
            match outcome {
                Ok(result) => {
                    assert_eq!(raw_value(result), value["result"]);
                    assert!(value.get("error").is_none());
                }
                Err(error) => {
                    assert!(value.get("result").is_none());
                    assert_eq!(value["error"]["code"].as_i64(), Some(error.code));
                    assert_eq!(value["error"]["message"].as_str(), Some(&*error.message));
                }
            }
        }
    }
}

/// `raw` JSON text without whitespace outside strings.
fn compact(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut in_string = false;
    let mut escaped = false;
    for ch in raw.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == '"' {
                in_string = false;
            }
        } else if matches!(ch, ' ' | '\t' | '\n' | '\r') {
            continue;
        } else if ch == '"' {
            in_string = true;
        }
        out.push(ch);
    }
    out
}

/// A message with every raw part compacted, for comparing what a writer wrote back.
fn normal_form(message: &Message<'_>) -> String {
    let raw = |v: Option<&serde_json::value::RawValue>| v.map(|r| compact(r.get()));
    match message {
        Message::Request { id, method, params } => {
            format!("request {} {method:?} {:?}", id.as_raw(), raw(*params))
        }
        Message::Notification { method, params } => {
            format!("notification {method:?} {:?}", raw(*params))
        }
        Message::Response { id, outcome } => match outcome {
            Ok(result) => format!("result {} {:?}", id.as_raw(), compact(result.get())),
            Err(e) => format!("error {} {} {:?}", id.as_raw(), e.code, e.message),
        },
    }
}

/// Writes `message` back with the crate's writers: one line, and it parses to the same message
/// (raw parts compared without insignificant whitespace, which the writers remove).
fn round_trip(message: &Message<'_>) {
    let mut out = Vec::new();
    match message {
        Message::Request { id, method, params } => {
            jsonrpc::write_request_raw(&mut out, &id.to_owned(), method, *params)
        }
        Message::Notification { method, params } => {
            jsonrpc::write_notification_raw(&mut out, method, *params)
        }
        Message::Response { id, outcome } => match outcome {
            Ok(result) => jsonrpc::write_result(&mut out, &id.to_owned(), result),
            Err(error) => jsonrpc::write_error(&mut out, Some(&id.to_owned()), error),
        },
    }
    let written = String::from_utf8_lossy(&out).into_owned();
    assert!(
        !out.contains(&b'\n'),
        "a writer produced a line break (NDJSON needs one line): {written}"
    );
    match jsonrpc::parse(&out) {
        Parsed::Single(Ok(again)) => {
            assert_eq!(
                normal_form(&again),
                normal_form(message),
                "written {written}"
            );
        }
        other => panic!("written message does not parse: {other:?}: {written}"),
    }
}

/// Checks a rejection: its code, its id, and that its answer is a valid response.
fn check_rejection(rejection: &jsonrpc::Rejection, valid: bool, value: Option<&Value>) {
    let code = rejection.error.code;
    assert!(
        code == jsonrpc::code::PARSE_ERROR || code == jsonrpc::code::INVALID_REQUEST,
        "rejection code {code}"
    );
    if code == jsonrpc::code::PARSE_ERROR {
        assert!(rejection.id.is_none(), "a parse error with an id");
        assert!(!valid, "valid JSON rejected as a parse error");
    } else {
        assert!(valid, "invalid JSON rejected as an invalid request");
    }
    if let (Some(id), Some(v)) = (&rejection.id, value) {
        let parsed: Value = serde_json::from_str(id.as_raw()).expect("id raw is JSON");
        assert_eq!(&parsed, &v["id"], "rejection id differs from the JSON's id");
    }
    let mut out = Vec::new();
    rejection.write_response(&mut out);
    match jsonrpc::parse(&out) {
        Parsed::Single(Ok(Message::Response {
            id,
            outcome: Err(error),
        })) => {
            assert_eq!(error.code, code);
            match &rejection.id {
                Some(rid) => assert_eq!(id.as_raw(), rid.as_raw()),
                None => assert!(id.is_null()),
            }
        }
        other => panic!("rejection answer does not parse as an error response: {other:?}"),
    }
}

/// Fuzz target: the JSON-RPC parser.
///
/// Checks, against `serde_json`: invalid JSON is `-32700` with id null and valid JSON never is;
/// an accepted message has `jsonrpc: "2.0"` and the id, method, params, result or error of the
/// JSON text; ids validate and round-trip; accepted messages written back with the crate's
/// writers parse to the same message; rejections answer with a response that parses; with
/// unique member names, the canonical re-serialisation is classified the same way; batches
/// under both policies agree with single-element parses.
pub fn jsonrpc_parse(data: &[u8]) {
    let parsed = jsonrpc::parse(data);
    let text = std::str::from_utf8(data).ok();
    // Valid JSON by the grammar (a number may still be out of f64 range, which a `Value`
    // refuses: then the content checks are skipped).
    let valid = text.is_some_and(|t| serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok());
    let value: Option<Value> = text.and_then(|t| serde_json::from_str(t).ok());
    assert!(valid || value.is_none());
    match &parsed {
        Parsed::Single(Ok(message)) => {
            assert!(valid, "accepted text that is not JSON");
            if let Some(v) = &value {
                assert!(v.is_object());
                check_message(message, v);
            }
            round_trip(message);
            assert_eq!(jsonrpc::parse_single(data).as_ref(), Ok(message));
        }
        Parsed::Single(Err(rejection)) => check_rejection(rejection, valid, value.as_ref()),
        Parsed::Batch(items) => {
            assert!(valid, "a batch that is not valid JSON");
            assert!(value.as_ref().is_none_or(Value::is_array));
            assert_eq!(items.len(), 1, "a rejected batch is one error");
            assert!(items[0].is_err());
            assert!(jsonrpc::parse_single(data).is_err());
        }
    }
    // Under the Allow policy, each element parses as it would alone.
    if let Parsed::Batch(items) = jsonrpc::parse_with(data, BatchPolicy::Allow) {
        let elements: Vec<&serde_json::value::RawValue> =
            serde_json::from_slice(data).expect("a batch under Allow is a valid JSON array");
        assert_eq!(items.len(), elements.len());
        for (item, element) in items.iter().zip(elements) {
            let alone = jsonrpc::parse_single(element.get().as_bytes());
            match (item, &alone) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(b)) => assert_eq!(a.error.code, b.error.code),
                _ => panic!("batch element {} parses differently alone", element.get()),
            }
        }
    }
    // Canonical re-serialisation (only meaningful without duplicate members, which a JSON
    // value would merge).
    if let (Some(v), Some(t)) = (&value, text) {
        let unique = !has_duplicate_members(t);
        if unique {
            let canonical = serde_json::to_vec(v).expect("a value serialises");
            let again = jsonrpc::parse(&canonical);
            let class = |p: &Parsed<'_>| match p {
                Parsed::Single(Ok(Message::Request { .. })) => "request".to_owned(),
                Parsed::Single(Ok(Message::Notification { .. })) => "notification".to_owned(),
                Parsed::Single(Ok(Message::Response { outcome, .. })) => {
                    format!("response ok={}", outcome.is_ok())
                }
                Parsed::Single(Err(r)) => format!("rejected {}", r.error.code),
                Parsed::Batch(_) => "batch".to_owned(),
            };
            assert_eq!(
                class(&parsed),
                class(&again),
                "the canonical form of the same JSON is classified differently: {}",
                String::from_utf8_lossy(&canonical)
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Host sequence
// ---------------------------------------------------------------------------------------------

/// Session ids the fuzzed requests use.
const SESSIONS: &[&str] = &["s0", "s1", "s2", "nope"];
/// Prompts (each matches a rule of the world's scenario).
const PROMPTS: &[&str] = &[
    "hello",
    "weather?",
    "both please",
    "slow down",
    "fail now",
    "title",
    "lookup",
    "ghost",
    "question",
    "plan",
    "mode",
    "hook",
    "ask",
    "sample",
    "cmd",
];
/// Permission decisions, valid and not.
const DECISIONS: &[&str] = &[
    "approve-once",
    "reject",
    "approve-for-session",
    "user-not-available",
    "cancelled",
    "denied-by-rules",
    "nonsense",
    "approved",
    "approve-permanently",
    "approve-for-location",
];
/// Framed bodies the `host_sequence` input format knows (opcodes).
pub mod op {
    /// Open a connection: `[client|framing]`.
    pub const OPEN: u8 = 0;
    /// The peer of a connection goes away: `[conn]`.
    pub const EOF: u8 = 1;
    /// A request from the vocabulary: `[conn, method, fields…]`.
    pub const REQUEST: u8 = 2;
    /// A `$/cancelRequest` notification: `[conn, which]`.
    pub const CANCEL: u8 = 3;
    /// A correctly framed body: `[conn, len lo, len hi, body…]`.
    pub const BODY: u8 = 4;
    /// Raw bytes: `[conn, len, bytes…]`.
    pub const RAW: u8 = 5;
    /// Deliver some bytes: `[conn, n]`.
    pub const DELIVER: u8 = 6;
    /// Deliver everything: `[conn]`.
    pub const DELIVER_ALL: u8 = 7;
    /// The peer reads what is queued: `[conn]`.
    pub const DRAIN: u8 = 8;
    /// The runtime loop: poll_ready / poll_transmit.
    pub const DRAIN_READY: u8 = 9;
    /// Time jumps: `[ms lo, ms hi]`.
    pub const ADVANCE: u8 = 10;
    /// Fire the next deadline.
    pub const TIMER: u8 = 11;
    /// handle_timeout with a time in the past: `[ms]`.
    pub const STALE: u8 = 12;
    /// Answer an announced request: `[conn, which, variant, wrong-kind]`.
    pub const ANSWER: u8 = 13;
    /// Answer a made-up request id: `[conn, kind, variant]`.
    pub const ANSWER_FAKE: u8 = 14;
    /// A request reusing the connection's last id: `[conn, method, fields…]`.
    pub const DUP_REQUEST: u8 = 15;
    /// Every reader catches up.
    pub const DRAIN_ALL: u8 = 16;
    /// Deliver everything, then read: `[conn]`.
    pub const ROUND_TRIP: u8 = 17;
    /// Answer a server-to-client request: `[which, variant, how]` (how: on its connection,
    /// twice, on another connection, or with a made-up id).
    pub const ANSWER_CALL: u8 = 18;
    /// Number of opcodes.
    pub const COUNT: u8 = 19;
}

/// Builds a vocabulary request's method and params from fuzz input.
fn vocab_request(inp: &mut Input<'_>, task_ids: &[String]) -> (String, Value) {
    let session = inp.word(SESSIONS);
    let flags = inp.u8();
    let more = inp.u8();
    let tools = {
        let mut t = Vec::new();
        if flags & 1 != 0 {
            t.push(json!({"name": "get_weather", "description": "Get weather",
                          "parameters": {"type": "object"}}));
        }
        if flags & 2 != 0 {
            t.push(json!({"name": "lookup", "skipPermission": true}));
        }
        t
    };
    let commands = if flags & 4 != 0 {
        json!([{"name": "deploy", "description": "ship it"}])
    } else {
        json!([])
    };
    let attach = |disable: bool, cont: bool| {
        let mut p = json!({"sessionId": session, "tools": tools, "commands": commands,
               "requestPermission": flags & 8 != 0, "requestElicitation": flags & 16 != 0,
               "streaming": flags & 32 != 0, "disableResume": disable,
               "continuePendingWork": cont, "workingDirectory": "/w",
               "requestUserInput": more & 1 != 0, "requestExitPlanMode": more & 2 != 0,
               "requestAutoModeSwitch": more & 4 != 0, "hooks": more & 8 != 0,
               "requestSampling": more & 16 != 0});
        // Canvas providers and renderers, stable provider ids. (Extensions are not in the
        // vocabulary: the checker cannot tell which persisted events an extension may miss
        // once their session is deleted.)
        if more & 32 != 0 {
            p["canvases"] = json!([{"id": "board", "displayName": "Board", "description": "",
                                    "actions": [{"name": "refresh"}]}]);
            p["requestCanvasRenderer"] = json!(more & 128 != 0);
            if flags & 64 != 0 {
                p["canvasProvider"] = json!({"id": "app:1", "name": "App"});
            }
        }
        p
    };
    let method = inp.u8();
    let (m, p) = match method % 28 {
        0 => (
            "connect",
            if flags & 64 != 0 {
                json!({"token": world::TOKEN})
            } else {
                json!({"token": "wrong"})
            },
        ),
        1 => ("ping", json!({"message": inp.word(&["hi", ""])})),
        2 => ("status.get", json!({})),
        3 => ("models.list", json!({})),
        4 | 5 => ("session.create", attach(false, false)),
        6 | 7 => ("session.resume", attach(flags & 64 != 0, flags & 128 != 0)),
        8..=10 => (
            "session.send",
            json!({"sessionId": session, "prompt": inp.word(PROMPTS)}),
        ),
        11 | 12 => (
            "session.sendAndWait",
            json!({"sessionId": session, "prompt": inp.word(PROMPTS)}),
        ),
        13 => ("session.abort", json!({"sessionId": session})),
        14 => ("session.detach", json!({"sessionId": session})),
        15 => ("session.delete", json!({"sessionId": session})),
        16 => ("session.list", json!({"filter": {"cwd": "/w"}})),
        17 => ("session.getMetadata", json!({"sessionId": session})),
        18 => ("session.getMessages", json!({"sessionId": session})),
        19 => ("session.getLastId", json!({})),
        20 => ("session.setForeground", json!({"sessionId": session})),
        21 => ("session.getForeground", json!({})),
        22 => (
            "session.ui.elicitation",
            json!({"sessionId": session, "message": "Proceed?",
                   "requestedSchema": {"type": "object"}}),
        ),
        23 => (
            "session.commands.execute",
            json!({"sessionId": session, "commandName": inp.word(&["deploy", "nope"]),
                   "args": "prod"}),
        ),
        24 => ("session.skills.reload", json!({"sessionId": session})),
        25 => (
            if flags & 128 != 0 {
                "runtime.shutdown"
            } else {
                "auth.getStatus"
            },
            json!({}),
        ),
        // Canvases (`more` picks the method; instance ids collide on purpose).
        _ if more & 0xc0 != 0 => {
            let instance = inp.word(&["i1", "i2"]);
            match more % 5 {
                0 => ("session.canvas.list", json!({"sessionId": session})),
                1 => ("session.canvas.listOpen", json!({"sessionId": session})),
                2 => (
                    "session.canvas.open",
                    json!({"sessionId": session, "canvasId": inp.word(&["board", "nope"]),
                           "instanceId": instance, "input": {"title": "T"}}),
                ),
                3 => (
                    "session.canvas.close",
                    json!({"sessionId": session, "instanceId": instance}),
                ),
                _ => (
                    "session.canvas.action.invoke",
                    json!({"sessionId": session, "instanceId": instance,
                           "actionName": "refresh", "input": {}}),
                ),
            }
        }
        // Client-owned tasks: registered, updated in (or out of) sequence, cancelled (the
        // owner is asked), listed and removed.
        26 => {
            let id = if task_ids.is_empty() || flags & 1 != 0 {
                "nope".to_owned()
            } else {
                task_ids[usize::from(flags >> 1) % task_ids.len()].clone()
            };
            match more % 5 {
                0 => {
                    let mut p = json!({"sessionId": session,
                        "type": inp.word(&["client", "client", "agent"]),
                        "clientTaskId": inp.word(&["k1", "k2"]), "description": "work",
                        "cancellable": flags & 2 != 0});
                    if flags & 4 != 0 {
                        p["expectedSequence"] = json!(inp.u8() % 4);
                    }
                    ("session.tasks.register", p)
                }
                1 => {
                    let update = match inp.u8() % 6 {
                        0 => json!({"kind": "progress", "message": "step", "percentage": 50,
                                    "phase": "scan"}),
                        1 => {
                            json!({"kind": "progress", "status": inp.word(&["idle", "running", "bad"]),
                                    "percentage": null})
                        }
                        2 => json!({"kind": "completed", "result": {"n": 1}}),
                        3 => json!({"kind": "failed", "error": "boom", "code": "E"}),
                        4 => json!({"kind": "cancelled", "reason": "user"}),
                        _ => json!({"kind": 7}),
                    };
                    (
                        "session.tasks.update",
                        json!({"sessionId": session, "id": id, "sequence": inp.u8() % 5,
                               "update": update}),
                    )
                }
                2 => (
                    "session.tasks.cancel",
                    json!({"sessionId": session, "id": id}),
                ),
                3 => (
                    "session.tasks.remove",
                    json!({"sessionId": session, "id": id}),
                ),
                _ => ("session.tasks.list", json!({"sessionId": session})),
            }
        }
        _ => ("no.such.method", json!({"x": 1})),
    };
    (m.to_owned(), p)
}

/// AHP channels the fuzzed AHP requests name (sessions of [`SESSIONS`], and junk).
fn ahp_channel(inp: &mut Input<'_>) -> String {
    let session = inp.word(SESSIONS);
    match inp.u8() % 8 {
        0 => "ahp-root://".to_owned(),
        1..=3 => world::chat_of(&session),
        4 | 5 => world::session_of(&session),
        6 => format!("ahp-terminal:/{session}"),
        _ => inp.word(&["", "ahp-chat:", "ahp-session:/", "file:///x", "ahp-root:/"]),
    }
}

/// What an AHP connection sends from the vocabulary: a request (method, params) or, with
/// `None` as the method, a notification (`dispatchAction`, `unsubscribe`).
fn ahp_vocab_request(inp: &mut Input<'_>, world: &World, c: usize) -> (Option<String>, Value) {
    let pick = inp.u8();
    let last_seen = world.conns[c].ahp.as_ref().map_or(0, |v| v.last_seen);
    let client = inp.word(&["ahp-a", "ahp-b", "ahp-c"]);
    let channels: Vec<String> = (0..inp.u8() % 4).map(|_| ahp_channel(inp)).collect();
    let versions = [
        json!(["1.0.0"]),
        json!(["0.9.0"]),
        json!(["2.0.0"]),
        json!(["1.0.0", "0.9.0"]),
    ][usize::from(pick >> 5) % 4]
        .clone();
    let m = match pick % 16 {
        0 | 1 => (
            "initialize",
            json!({"channel": if pick & 0x80 != 0 { "ahp-chat:/s0" } else { "ahp-root://" },
                   "protocolVersions": versions,
                   "clientId": client, "initialSubscriptions": channels}),
        ),
        2 => (
            "reconnect",
            json!({"channel": "ahp-root://", "clientId": client, "subscriptions": channels,
                   "lastSeenServerSeq": if pick & 0x80 != 0 { u64::from(inp.u8()) } else { last_seen }}),
        ),
        3 => ("ping", json!({"channel": "ahp-root://"})),
        4 => ("subscribe", json!({"channel": ahp_channel(inp)})),
        5 => {
            let mut p = json!({"channel": ahp_channel(inp),
                               "workingDirectories": ["file:///proj"]});
            if pick & 0x80 != 0 {
                p["provider"] = json!(inp.word(&["agentwire", "copilot"]));
            }
            ("createSession", p)
        }
        6 => ("disposeSession", json!({"channel": ahp_channel(inp)})),
        7 => {
            let mut p = json!({"channel": "ahp-root://", "limit": inp.u8() % 4});
            if pick & 0x80 != 0 {
                p["cursor"] = json!("c1");
            }
            ("listSessions", p)
        }
        8 if pick & 0x80 != 0 => ("disposeChat", json!({"channel": ahp_channel(inp)})),
        8 => (
            "createChat",
            json!({"channel": ahp_channel(inp), "chat": ahp_channel(inp)}),
        ),
        9 => ("fetchTurns", json!({"channel": ahp_channel(inp)})),
        10 => {
            let method = inp.word(&["resourceRead", "authenticate", "session.send"]);
            return (Some(method), json!({}));
        }
        11 => {
            return (
                None,
                json!({"method": "unsubscribe", "params": {"channel": ahp_channel(inp)}}),
            )
        }
        _ => {
            // dispatchAction: every action the host maps, some it does not, and junk.
            let channel = ahp_channel(inp);
            let turn = inp.word(&["t1", "t2", "t3"]);
            let prompt = inp.word(PROMPTS);
            let action = match inp.u8() % 12 {
                0..=2 => world::turn_started(&turn, &prompt),
                3 => json!({"type": "chat/turnCancelled", "turnId": turn, "duration": 0}),
                4 => json!({"type": "chat/toolCallConfirmed", "turnId": turn,
                            "toolCallId": inp.word(&["call_1", "nope"]), "approved": true}),
                5 => json!({"type": "session/activeClientSet", "activeClient": {
                            "clientId": client, "tools": [{"name": "get_weather",
                            "description": "Get weather",
                            "inputSchema": {"type": "object"}}]}}),
                6 => json!({"type": "session/activeClientRemoved", "clientId": client}),
                7 => json!({"type": "session/configChanged", "config": {
                            inp.word(&["mode", "model", "color"]):
                            inp.word(&["interactive", "autopilot", "plan"])}}),
                8 => json!({"type": "session/titleChanged", "title": "T"}),
                9 => json!({"type": inp.word(&["chat/draftChanged", "chat/nope", "root/x"])}),
                10 => json!({"type": "chat/turnStarted"}),
                // Steering set (or queued, which is refused) and withdrawn.
                11 if pick & 0x40 != 0 => json!({"type": "chat/pendingMessageSet",
                    "kind": inp.word(&["steering", "queued"]), "id": turn,
                    "message": {"text": prompt, "origin": {"kind": "user"}}}),
                11 if pick & 0x20 != 0 => json!({"type": "chat/pendingMessageRemoved",
                    "kind": inp.word(&["steering", "queued"]), "id": turn}),
                _ => Value::Null,
            };
            let mut params = json!({"channel": channel, "clientSeq": inp.u8(),
                                    "action": action});
            if action_is_junk(&params["action"]) && pick & 0x80 != 0 {
                params = json!([1, 2]);
            }
            return (None, json!({"method": "dispatchAction", "params": params}));
        }
    };
    (Some(m.0.to_owned()), m.1)
}

fn action_is_junk(action: &Value) -> bool {
    action.is_null()
}

/// The method and params answering a pending request of `kind`.
fn answer_params(
    kind: AskKind,
    session: &str,
    request_id: &str,
    variant: u8,
) -> (&'static str, Value) {
    match kind {
        AskKind::Permission => {
            let kind = DECISIONS[usize::from(variant) % DECISIONS.len()];
            let mut result = json!({"kind": kind});
            if variant & 0x80 != 0 {
                result["feedback"] = json!("not now");
            }
            (
                "session.permissions.handlePendingPermissionRequest",
                json!({"sessionId": session, "requestId": request_id, "result": result}),
            )
        }
        AskKind::Tool => {
            let mut p = json!({"sessionId": session, "requestId": request_id});
            match variant % 7 {
                0 => p["result"] = json!("sunny"),
                1 => p["result"] = json!({"textResultForLlm": "ok", "resultType": "success"}),
                2 => p["result"] = json!({"textResultForLlm": "", "resultType": "failure"}),
                3 => p["error"] = json!("boom"),
                4 => {}
                5 => p["result"] = json!(42),
                _ => p["result"] = json!(null),
            }
            ("session.tools.handlePendingToolCall", p)
        }
        AskKind::Elicitation => {
            let result = match variant % 4 {
                0 => json!({"action": "accept", "content": {"confirmed": true}}),
                1 => json!({"action": "decline"}),
                2 => json!({"action": "cancel"}),
                _ => json!({"action": "maybe"}),
            };
            (
                "session.ui.handlePendingElicitation",
                json!({"sessionId": session, "requestId": request_id, "result": result}),
            )
        }
        AskKind::Command => {
            let mut p = json!({"sessionId": session, "requestId": request_id});
            if variant & 1 != 0 {
                p["error"] = json!("it broke");
            }
            ("session.commands.handlePendingCommand", p)
        }
        AskKind::Sampling => {
            let mut p = json!({"sessionId": session, "requestId": request_id});
            if variant & 1 != 0 {
                p["response"] = json!({"content": {"type": "text", "text": "hi"}});
            }
            ("session.ui.handlePendingSampling", p)
        }
    }
}

const KINDS: [AskKind; 5] = [
    AskKind::Permission,
    AskKind::Tool,
    AskKind::Elicitation,
    AskKind::Command,
    AskKind::Sampling,
];

/// Runs one `host_sequence` input and returns the world (for tests); panics on a violation.
pub fn run_host_sequence(data: &[u8]) -> World {
    let mut inp = Input::new(data);
    let config = inp.u8();
    let mut world = World::new(WorldConfig {
        seed: u64::from(inp.u8()),
        budget: [
            1_500,
            4_096,
            16_384,
            65_536,
            agentwire::host::DEFAULT_OUTBOX_BUDGET,
        ][usize::from(config % 5)],
        token: config & 0x08 != 0,
        limits: if config & 0x10 != 0 {
            FrameLimits {
                max_frame_bytes: 700,
                max_header_bytes: 64,
            }
        } else {
            FrameLimits::default()
        },
        persist: config & 0x40 != 0,
        model: false,
    });
    if std::env::var_os("HOST_SEQUENCE_TRACE").is_some() {
        world.trace = Some(String::new());
    }
    let tolerate = tolerate_known_bugs();
    world.lenient_send_and_wait = tolerate;
    world.lenient_reentrant_emit = tolerate;
    world.lenient_orphan_sampling = tolerate;
    let ndjson_allowed = config & 0x20 != 0;
    let ahp_allowed = config & 0x80 != 0;
    let mut steps = 0;
    while !inp.is_empty() && steps < 400 {
        steps += 1;
        let opcode = inp.u8() % op::COUNT;
        if world.conns.is_empty() && opcode != op::OPEN {
            world.open(agentwire::frame::Framing::ContentLength, 0);
        }
        let pick_conn = |inp: &mut Input<'_>, world: &World| inp.pick(world.conns.len());
        let result = match opcode {
            op::OPEN => {
                let b = inp.u8();
                let framing = if ndjson_allowed && b & 0x80 != 0 {
                    Framing::Ndjson
                } else {
                    Framing::ContentLength
                };
                if world.conns.iter().filter(|c| c.open).count() < 6 {
                    if ahp_allowed && b & 0x40 != 0 {
                        world.open_ahp(usize::from(b % 4));
                    } else {
                        world.open(framing, usize::from(b % 4));
                    }
                }
                Ok(())
            }
            op::EOF => {
                let c = pick_conn(&mut inp, &world);
                world.eof(c)
            }
            op::REQUEST | op::DUP_REQUEST
                if world.is_ahp(usize::from(inp.peek()) % world.conns.len().max(1)) =>
            {
                let c = pick_conn(&mut inp, &world);
                let (method, params) = ahp_vocab_request(&mut inp, &world, c);
                match method {
                    Some(method) => {
                        let id = match opcode {
                            op::DUP_REQUEST => world.conns[c].last_id.clone(),
                            _ => None,
                        };
                        let id = id.unwrap_or_else(|| world.fresh_id(c, inp.u8() & 1 != 0));
                        world.request_raw_id(c, Some(&id), &method, &params);
                    }
                    None => {
                        let method = params["method"].as_str().unwrap_or("").to_owned();
                        world.request_raw_id(c, None, &method, &params["params"]);
                    }
                }
                Ok(())
            }
            op::REQUEST | op::DUP_REQUEST => {
                let c = pick_conn(&mut inp, &world);
                let (mut method, params) = vocab_request(&mut inp, &world.task_ids);
                if tolerate
                    && (method == "session.detach" || method == "session.delete")
                    && world.conns.iter().any(|c| c.owes_deferred())
                {
                    // Known: these leave deferred requests unanswered.
                    method = "session.getMetadata".to_owned();
                }
                let id_kind = inp.u8();
                let id = if opcode == op::DUP_REQUEST {
                    world.conns[c].last_id.clone()
                } else {
                    None
                };
                let id = id.unwrap_or_else(|| match id_kind % 10 {
                    0..=5 => world.fresh_id(c, false),
                    6 | 7 => world.fresh_id(c, true),
                    8 => [
                        "1.0",
                        "-0",
                        "1e2",
                        "null",
                        "\"\\u0041\"",
                        "12345678901234567890",
                    ][usize::from(id_kind >> 4) % 6]
                        .to_owned(),
                    _ => world.fresh_id(c, false),
                });
                world.request_raw_id(c, Some(&id), &method, &params);
                Ok(())
            }
            op::CANCEL => {
                let c = pick_conn(&mut inp, &world);
                let id = world.conns[c].last_id.clone().unwrap_or_else(|| "0".into());
                let _ = inp.u8();
                world.request_raw_id(
                    c,
                    None,
                    "$/cancelRequest",
                    &json!({"id": serde_json::from_str::<Value>(&id).unwrap_or(Value::Null)}),
                );
                Ok(())
            }
            op::BODY => {
                let c = pick_conn(&mut inp, &world);
                let len = usize::from(inp.u16() % 4096);
                let mut body = inp.bytes(len).to_vec();
                if tolerate && world.conns.iter().any(|c| c.owes_deferred()) {
                    if let Parsed::Single(Ok(Message::Request { method, .. })) =
                        jsonrpc::parse(&body)
                    {
                        if method == "session.detach" || method == "session.delete" {
                            // Known: these leave deferred requests unanswered.
                            body = br#"{"jsonrpc":"2.0","method":"ignored"}"#.to_vec();
                        }
                    }
                }
                world.queue_body(c, &body);
                Ok(())
            }
            op::RAW => {
                let c = pick_conn(&mut inp, &world);
                let len = usize::from(inp.u8());
                let raw = inp.bytes(len).to_vec();
                world.queue_raw(c, &raw);
                Ok(())
            }
            op::DELIVER => {
                let c = pick_conn(&mut inp, &world);
                let n = usize::from(inp.u8()) + 1;
                world.deliver(c, n)
            }
            op::DELIVER_ALL => {
                let c = pick_conn(&mut inp, &world);
                world.deliver_all(c)
            }
            op::DRAIN => {
                let c = pick_conn(&mut inp, &world);
                world.drain(c)
            }
            op::DRAIN_READY => world.drain_ready(),
            op::ADVANCE => {
                let ms = u64::from(inp.u16());
                world.advance(ms)
            }
            op::TIMER => world.fire_next_timer().map(|_| ()),
            op::STALE => {
                let ms = u64::from(inp.u8()) * 10;
                world.stale_timeout(ms)
            }
            op::ANSWER => {
                let c = pick_conn(&mut inp, &world);
                let which = inp.u8();
                let variant = inp.u8();
                let wrong = inp.u8();
                if world.asks.is_empty() {
                    Ok(())
                } else {
                    let ask = world.asks[usize::from(which) % world.asks.len()].clone();
                    if world.is_ahp(c) {
                        // An AHP client answers by dispatching an action (any client's
                        // request: another's is rejected).
                        if let Some((channel, action)) = World::ahp_answer(&ask, variant) {
                            world.ahp_dispatch(c, &channel, action);
                        }
                    } else {
                        let kind = if wrong % 8 == 7 {
                            KINDS[usize::from(wrong >> 3) % KINDS.len()]
                        } else {
                            ask.kind
                        };
                        let (method, params) =
                            answer_params(kind, &ask.session, &ask.request_id, variant);
                        world.request(c, method, params);
                    }
                    Ok(())
                }
            }
            op::ANSWER_FAKE => {
                let c = pick_conn(&mut inp, &world);
                let kind = KINDS[inp.pick(KINDS.len())];
                let variant = inp.u8();
                let session = inp.word(SESSIONS);
                let rid = inp.word(&["00000000-0000-4000-8000-000000000000", "", "call_1"]);
                let (method, params) = answer_params(kind, &session, &rid, variant);
                world.request(c, method, params);
                Ok(())
            }
            op::DRAIN_ALL => world.drain_all(),
            op::ANSWER_CALL => {
                let which = inp.u8();
                let variant = inp.u8();
                let how = inp.u8();
                if world.calls.is_empty() {
                    Ok(())
                } else {
                    let call = world.calls[usize::from(which) % world.calls.len()].clone();
                    let (c, id) = match how % 4 {
                        2 => (usize::from(how >> 2) % world.conns.len(), call.id.clone()),
                        3 => (call.conn, format!("\"made-up-{}\"", how >> 2)),
                        _ => (call.conn, call.id.clone()),
                    };
                    let body = world::call_response(&id, &call.method, variant);
                    world.queue_body(c, body.as_bytes());
                    if how % 4 == 1 {
                        world.queue_body(c, body.as_bytes());
                    }
                    Ok(())
                }
            }
            _ => {
                let c = pick_conn(&mut inp, &world);
                world.deliver_all(c).and_then(|()| world.drain(c))
            }
        };
        if let Err(e) = result.and_then(|()| world.check_budgets()) {
            fail(&world, &format!("invariant violated at step {steps}: {e}"));
        }
    }
    if let Err(e) = world.settle(2_000).and_then(|()| world.final_checks()) {
        fail(&world, &format!("invariant violated after settling: {e}"));
    }
    world
}

/// Panics with `message`, printing the world's trace first when it keeps one
/// (`HOST_SEQUENCE_TRACE=1`).
fn fail(world: &World, message: &str) -> ! {
    if let Some(trace) = &world.trace {
        eprintln!("{trace}");
    }
    panic!("host_sequence: {message}");
}

/// Fuzz target: an arbitrary sequence of operations through the host's public API (see
/// [`op`] for the input format and `world.rs` for the invariants).
pub fn host_sequence(data: &[u8]) {
    run_host_sequence(data);
}

/// Encodes `host_sequence` inputs (for seed corpora and tests).
#[derive(Default)]
pub struct SequenceBuilder {
    /// The encoded input.
    pub bytes: Vec<u8>,
}

impl SequenceBuilder {
    /// Starts an input with a config byte and a seed byte.
    pub fn new(config: u8, seed: u8) -> Self {
        SequenceBuilder {
            bytes: vec![config, seed],
        }
    }

    /// Appends raw input bytes.
    pub fn push(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// A correctly framed body on connection `conn`.
    pub fn body(&mut self, conn: u8, body: &[u8]) -> &mut Self {
        let len = body.len().min(4095) as u16;
        self.bytes.push(op::BODY);
        self.bytes.push(conn);
        self.bytes.extend_from_slice(&len.to_le_bytes());
        self.bytes.extend_from_slice(&body[..usize::from(len)]);
        self
    }

    /// Deliver everything, then read, on `conn`.
    pub fn round_trip(&mut self, conn: u8) -> &mut Self {
        self.bytes.extend_from_slice(&[op::ROUND_TRIP, conn]);
        self
    }

    /// Answer the `which`-th announced request.
    pub fn answer(&mut self, conn: u8, which: u8, variant: u8) -> &mut Self {
        self.bytes
            .extend_from_slice(&[op::ANSWER, conn, which, variant, 0]);
        self
    }

    /// Fire the next deadline.
    pub fn timer(&mut self) -> &mut Self {
        self.bytes.push(op::TIMER);
        self
    }
}
