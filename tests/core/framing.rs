//! Framing tests: golden frames from the recorded Copilot SDK traces, split-anywhere property
//! tests for both framings, robustness against arbitrary input, and linear-time decoding.

use std::path::PathBuf;

use agentwire::frame::{encode_frame, encoded_len, FrameDecoder, FrameError, FrameLimits, Framing};
use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use proptest::sample::Index;
use serde::Deserialize;
use serde_json::value::RawValue;

// ---------------------------------------------------------------------------------------------
// Helpers

/// Pushes `chunks` one by one, draining complete frames after each push.
fn decode_chunks<'a>(
    framing: Framing,
    limits: FrameLimits,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<Bytes>, FrameError> {
    let mut decoder = FrameDecoder::new(framing, limits);
    let mut frames = Vec::new();
    for chunk in chunks {
        decoder.push(chunk)?;
        while let Some(frame) = decoder.next_frame()? {
            frames.push(frame);
        }
    }
    assert_eq!(
        decoder.buffered_len(),
        0,
        "bytes left over after the last frame"
    );
    Ok(frames)
}

/// Cuts `stream` at the given positions (taken modulo its length, in any order).
fn split_at_points(stream: &[u8], points: &[Index]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = points
        .iter()
        .map(|point| point.index(stream.len() + 1))
        .collect();
    cuts.push(0);
    cuts.push(stream.len());
    cuts.sort_unstable();
    cuts.dedup();
    cuts.windows(2)
        .map(|pair| stream[pair[0]..pair[1]].to_vec())
        .collect()
}

fn as_slices(chunks: &[Vec<u8>]) -> impl Iterator<Item = &[u8]> {
    chunks.iter().map(Vec::as_slice)
}

// ---------------------------------------------------------------------------------------------
// Golden frames from the real traces

const TRACE_FILES: [&str; 5] = [
    "wire.jsonl",
    "wire2.jsonl",
    "wire-py.jsonl",
    "wire-mcpapps.jsonl",
    "stdio-tee.jsonl",
];

/// One line of a trace file. `stdio-tee.jsonl` line 1 (`{"argv":..,"envKeys":..}`) has neither
/// field.
#[derive(Deserialize)]
struct TraceRecord {
    header: Option<String>,
    msg: Option<Box<RawValue>>,
}

/// A frame as recorded: its header line as sent and the compact body.
struct TraceFrame {
    /// e.g. `Content-Length: 102`.
    header: String,
    /// The recorded length of the original body.
    original_len: usize,
    /// `msg`, serialised compactly.
    body: Vec<u8>,
}

fn traces_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces")
}

fn trace_frames(file: &str) -> Vec<TraceFrame> {
    let path = traces_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let mut frames = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let record: TraceRecord =
            serde_json::from_str(line).unwrap_or_else(|error| panic!("{file}:{line_no}: {error}"));
        let (Some(header), Some(msg)) = (record.header, record.msg) else {
            assert!(
                file == "stdio-tee.jsonl" && line_no == 1,
                "{file}:{line_no}: record without header/msg"
            );
            continue;
        };
        let original_len: usize = header
            .strip_prefix("Content-Length: ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{file}:{line_no}: unexpected header {header:?}"));
        // `msg` as stored (compact, keys in their original order).
        let body = serde_json::to_vec(&msg).unwrap();
        assert!(
            original_len >= body.len() && original_len - body.len() <= 16,
            "{file}:{line_no}: Content-Length {original_len} vs compact body {}",
            body.len()
        );
        frames.push(TraceFrame {
            header,
            original_len,
            body,
        });
    }
    assert!(!frames.is_empty(), "{file} has no frames");
    frames
}

#[test]
fn golden_trace_frames_content_length() {
    let mut byte_exact = 0;
    let mut total = 0;
    for file in TRACE_FILES {
        let frames = trace_frames(file);
        let mut stream = BytesMut::new();
        for frame in &frames {
            let mut encoded = BytesMut::new();
            encode_frame(Framing::ContentLength, &frame.body, &mut encoded);
            assert_eq!(
                encoded.len(),
                encoded_len(Framing::ContentLength, frame.body.len())
            );
            let expected = [
                format!("Content-Length: {}\r\n\r\n", frame.body.len()).as_bytes(),
                &frame.body,
            ]
            .concat();
            assert_eq!(&encoded[..], &expected[..]);
            if frame.original_len == frame.body.len() {
                // The recorded frame, byte for byte.
                let recorded = [frame.header.as_bytes(), b"\r\n\r\n", &frame.body].concat();
                assert_eq!(&encoded[..], &recorded[..], "{file}: {}", frame.header);
                byte_exact += 1;
            }
            stream.extend_from_slice(&encoded);
        }
        total += frames.len();
        for chunk_size in [stream.len(), 4096, 7, 1] {
            let decoded = decode_chunks(
                Framing::ContentLength,
                FrameLimits::default(),
                stream.chunks(chunk_size),
            )
            .unwrap();
            assert_eq!(
                decoded.len(),
                frames.len(),
                "{file}, chunks of {chunk_size}"
            );
            for (frame, body) in frames.iter().zip(&decoded) {
                assert_eq!(&frame.body[..], &body[..], "{file}: {}", frame.header);
            }
        }
    }
    assert_eq!(total, 123 + 188 + 78 + 20 + 123);
    assert!(byte_exact > 0);
    assert!(
        byte_exact < total,
        "some recorded bodies are longer than compact msg"
    );
}

/// Frames with the recorded headers as sent: the compact body is padded with JSON whitespace to
/// the recorded length, so each frame has its original size.
#[test]
fn golden_trace_headers_as_sent_decode() {
    for file in TRACE_FILES {
        let frames = trace_frames(file);
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for frame in &frames {
            let mut body = frame.body.clone();
            body.resize(frame.original_len, b' ');
            stream.extend_from_slice(frame.header.as_bytes());
            stream.extend_from_slice(b"\r\n\r\n");
            stream.extend_from_slice(&body);
            expected.push(body);
        }
        for chunk_size in [stream.len(), 1000, 3] {
            let decoded = decode_chunks(
                Framing::ContentLength,
                FrameLimits::default(),
                stream.chunks(chunk_size),
            )
            .unwrap();
            assert_eq!(decoded, expected, "{file}, chunks of {chunk_size}");
        }
    }
}

#[test]
fn golden_trace_frames_ndjson() {
    for file in TRACE_FILES {
        let frames = trace_frames(file);
        let mut lf = BytesMut::new();
        let mut crlf_with_blanks = Vec::new();
        for frame in &frames {
            let mut encoded = BytesMut::new();
            encode_frame(Framing::Ndjson, &frame.body, &mut encoded);
            assert_eq!(&encoded[..], &[&frame.body[..], b"\n"].concat()[..]);
            assert_eq!(
                encoded.len(),
                encoded_len(Framing::Ndjson, frame.body.len())
            );
            lf.extend_from_slice(&encoded);
            crlf_with_blanks.extend_from_slice(b"\r\n  \n");
            crlf_with_blanks.extend_from_slice(&frame.body);
            crlf_with_blanks.extend_from_slice(b"\r\n");
        }
        for stream in [&lf[..], &crlf_with_blanks[..]] {
            for chunk_size in [stream.len(), 4096, 7, 1] {
                let decoded = decode_chunks(
                    Framing::Ndjson,
                    FrameLimits::default(),
                    stream.chunks(chunk_size),
                )
                .unwrap();
                assert_eq!(
                    decoded.len(),
                    frames.len(),
                    "{file}, chunks of {chunk_size}"
                );
                for (frame, body) in frames.iter().zip(&decoded) {
                    assert_eq!(&frame.body[..], &body[..], "{file}: {}", frame.header);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Property tests: any split of valid frames

/// A JSON-RPC body whose text mixes ASCII, escapes and multi-byte UTF-8.
fn json_body() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just("é".to_string()),
        Just("日本".to_string()),
        Just("🎉".to_string()),
        Just("\r\n\"\\".to_string()),
        "[a-zA-Z0-9 ]{0,12}",
        "\\PC{0,6}",
    ];
    (prop::collection::vec(piece, 0..8), any::<u32>()).prop_map(|(pieces, id)| {
        serde_json::to_vec(&serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "session.send",
            "params": { "prompt": pieces.concat() },
        }))
        .unwrap()
    })
}

/// A Content-Length body: JSON text, or arbitrary bytes (bodies are opaque to the framing).
fn content_length_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => json_body(),
        1 => prop::collection::vec(any::<u8>(), 0..48),
    ]
}

/// Header blocks of several shapes for a body of `len` bytes.
fn header_block(style: usize, len: usize) -> String {
    match style % 6 {
        0 => format!("Content-Length: {len}\r\n\r\n"),
        1 => format!("content-length:{len}\r\n\r\n"),
        2 => format!("CONTENT-LENGTH: \t{len} \t\r\n\r\n"),
        3 => format!(
            "Content-Length: {len}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
        ),
        4 => format!(
            "content-type: application/vscode-jsonrpc; charset=utf-8\r\nContent-length: {len}\r\n\r\n"
        ),
        _ => format!("X-Trace-Id: caf\u{e9}-\u{65e5}\r\ncOnTeNt-LeNgTh: 000{len}\r\n\r\n"),
    }
}

/// Blank lines allowed before an NDJSON line, and the line endings.
const NDJSON_PREFIXES: [&str; 5] = ["", "\n", "\r\n", "  \t\n", " \r\n\n"];
const NDJSON_ENDINGS: [&str; 2] = ["\n", "\r\n"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn content_length_any_split_yields_same_bodies(
        frames in prop::collection::vec((content_length_body(), any::<usize>()), 0..8),
        points in prop::collection::vec(any::<Index>(), 0..24),
    ) {
        let mut stream = Vec::new();
        for (body, style) in &frames {
            stream.extend_from_slice(header_block(*style, body.len()).as_bytes());
            stream.extend_from_slice(body);
        }
        let chunks = split_at_points(&stream, &points);
        let decoded =
            decode_chunks(Framing::ContentLength, FrameLimits::default(), as_slices(&chunks))
                .unwrap();
        let bodies: Vec<&[u8]> = frames.iter().map(|(body, _)| body.as_slice()).collect();
        let decoded: Vec<&[u8]> = decoded.iter().map(|body| &body[..]).collect();
        prop_assert_eq!(decoded, bodies);
    }

    #[test]
    fn ndjson_any_split_yields_same_bodies(
        frames in prop::collection::vec((json_body(), any::<usize>(), any::<bool>()), 0..8),
        trailing_blank in any::<usize>(),
        points in prop::collection::vec(any::<Index>(), 0..24),
    ) {
        let mut stream = Vec::new();
        for (body, prefix, crlf) in &frames {
            stream.extend_from_slice(NDJSON_PREFIXES[prefix % NDJSON_PREFIXES.len()].as_bytes());
            stream.extend_from_slice(body);
            stream.extend_from_slice(NDJSON_ENDINGS[usize::from(*crlf)].as_bytes());
        }
        stream.extend_from_slice(
            NDJSON_PREFIXES[trailing_blank % NDJSON_PREFIXES.len()].as_bytes(),
        );
        let chunks = split_at_points(&stream, &points);
        let decoded = decode_chunks(Framing::Ndjson, FrameLimits::default(), as_slices(&chunks))
            .unwrap();
        let bodies: Vec<&[u8]> = frames.iter().map(|(body, _, _)| body.as_slice()).collect();
        let decoded: Vec<&[u8]> = decoded.iter().map(|body| &body[..]).collect();
        prop_assert_eq!(decoded, bodies);
    }

    #[test]
    fn encoder_output_decodes_under_any_split(
        bodies in prop::collection::vec(json_body(), 0..6),
        points in prop::collection::vec(any::<Index>(), 0..16),
    ) {
        for framing in [Framing::ContentLength, Framing::Ndjson] {
            let mut stream = BytesMut::new();
            for body in &bodies {
                encode_frame(framing, body, &mut stream);
            }
            let chunks = split_at_points(&stream, &points);
            let decoded = decode_chunks(framing, FrameLimits::default(), as_slices(&chunks))
                .unwrap();
            prop_assert_eq!(decoded.len(), bodies.len());
            for (decoded, body) in decoded.iter().zip(&bodies) {
                prop_assert_eq!(&decoded[..], &body[..]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Property tests: arbitrary input never panics and memory stays bounded

const SMALL_LIMITS: FrameLimits = FrameLimits {
    max_frame_bytes: 64,
    max_header_bytes: 48,
};

/// Bytes that are often close to valid frames, so that deep decoder states are reached.
fn noisy_stream() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        Just(b"Content-Length: ".to_vec()),
        Just(b"content-length:".to_vec()),
        Just(b"Content-Type: x\r\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b" ".to_vec()),
        Just(b"{}".to_vec()),
        Just("é日本🎉".as_bytes().to_vec()),
        "[0-9]{1,3}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..40),
    ];
    prop::collection::vec(fragment, 0..48).prop_map(|fragments| fragments.concat())
}

/// Feeds `chunks`, draining after each push, checking the memory bound and error stickiness.
fn check_bounded(framing: Framing, limits: FrameLimits, chunks: &[Vec<u8>]) {
    let limit = limits.max_frame_bytes + limits.max_header_bytes;
    let mut decoder = FrameDecoder::new(framing, limits);
    let mut error = None;
    'chunks: for chunk in chunks {
        if let Err(e) = decoder.push(chunk) {
            error = Some(e);
            break;
        }
        assert!(decoder.buffered_len() <= limit + chunk.len());
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => assert!(frame.len() <= limits.max_frame_bytes),
                Ok(None) => break,
                Err(e) => {
                    error = Some(e);
                    break 'chunks;
                }
            }
        }
        assert!(decoder.buffered_len() <= limit);
    }
    if let Some(error) = error {
        assert!(!error.to_string().is_empty());
        assert_eq!(decoder.buffered_len(), 0);
        assert_eq!(decoder.next_frame(), Err(error.clone()));
        assert_eq!(decoder.push(b"Content-Length: 2\r\n\r\n{}\n"), Err(error));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic_or_overbuffer(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        points in prop::collection::vec(any::<Index>(), 0..32),
    ) {
        let chunks = split_at_points(&bytes, &points);
        for framing in [Framing::ContentLength, Framing::Ndjson] {
            check_bounded(framing, SMALL_LIMITS, &chunks);
            check_bounded(framing, FrameLimits::default(), &chunks);
            check_bounded(framing, SMALL_LIMITS, std::slice::from_ref(&bytes));
        }
    }

    #[test]
    fn near_valid_bytes_never_panic_or_overbuffer(
        bytes in noisy_stream(),
        points in prop::collection::vec(any::<Index>(), 0..32),
    ) {
        let chunks = split_at_points(&bytes, &points);
        for framing in [Framing::ContentLength, Framing::Ndjson] {
            check_bounded(framing, SMALL_LIMITS, &chunks);
            check_bounded(framing, FrameLimits::default(), &chunks);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Linear-time decoding of a large frame

const LARGE_BODY_BYTES: usize = 16 * 1024 * 1024;

fn large_body() -> Vec<u8> {
    let mut body = b"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":\"".to_vec();
    body.resize(LARGE_BODY_BYTES - 4, b'a');
    body.extend_from_slice("é\"}".as_bytes());
    assert_eq!(body.len(), LARGE_BODY_BYTES);
    body
}

/// Feeds `stream` in 1 KiB chunks, polling after every chunk, and returns the decoder and
/// frames.
fn feed_in_small_chunks(framing: Framing, stream: &[u8]) -> (FrameDecoder, Vec<Bytes>) {
    let mut decoder = FrameDecoder::new(framing, FrameLimits::default());
    let mut frames = Vec::new();
    for chunk in stream.chunks(1024) {
        decoder.push(chunk).unwrap();
        while let Some(frame) = decoder.next_frame().unwrap() {
            frames.push(frame);
        }
    }
    (decoder, frames)
}

#[test]
fn large_content_length_frame_is_never_rescanned() {
    let body = large_body();
    let mut stream = BytesMut::new();
    encode_frame(Framing::ContentLength, &body, &mut stream);
    let header_len = stream.len() - body.len();
    let (decoder, frames) = feed_in_small_chunks(Framing::ContentLength, &stream);
    assert_eq!(frames.len(), 1);
    assert!(frames[0] == body);
    // Only the header is scanned, once; body bytes are just counted.
    assert_eq!(decoder.scanned_bytes(), header_len as u64);
}

#[test]
fn large_ndjson_line_is_never_rescanned() {
    let body = large_body();
    let mut stream = BytesMut::new();
    encode_frame(Framing::Ndjson, &body, &mut stream);
    let (decoder, frames) = feed_in_small_chunks(Framing::Ndjson, &stream);
    assert_eq!(frames.len(), 1);
    assert!(frames[0] == body);
    // Every byte is scanned exactly once, not once per chunk.
    assert_eq!(decoder.scanned_bytes(), stream.len() as u64);
}
