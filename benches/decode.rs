//! Decode + validate throughput for streams of realistic `session.event` notifications.
//!
//! Bodies are shaped after `wire.jsonl` (Copilot CLI runtime 1.0.85): an
//! `assistant.message_delta` event (~400 B) and a `tool.execution_complete` event whose tool
//! output is a ~1.8 KiB text (~4 KiB body). Each benchmark decodes a stream of `MESSAGES`
//! messages: framing (`Content-Length` or NDJSON) + JSON-RPC parse and validation, with params
//! kept raw; compared with `serde_json::from_slice::<Value>` on the same (unframed) bodies.
//!
//! Run: `cargo bench --bench decode -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use agentwire::frame::{encode_frame, FrameDecoder, FrameLimits, Framing};
use agentwire::jsonrpc::{self, Message};
use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// Messages per stream (per benchmark iteration).
const MESSAGES: usize = 1000;
/// Bytes handed to the decoder per `push`, like one socket read.
const READ_CHUNK: usize = 64 * 1024;

/// wire.jsonl:74 (`assistant.message_delta`), 390 bytes.
const MESSAGE_DELTA: &str = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"c766e7de-b35d-4fc8-8596-fc5fb367963b","event":{"type":"assistant.message_delta","data":{"messageId":"3b4e5015-f982-4b18-98f9-750e4a79496e","deltaContent":"sunny in Paris."},"ephemeral":true,"id":"ca468b3a-5a33-462b-ba50-cf11bad7589e","timestamp":"2026-11-29T20:26:17.558Z","parentId":"0b92716b-e8b3-4fac-9785-36373d826335"}}}"#;

/// wire.jsonl:56 (`tool.execution_complete`) with `{RESULT}` standing for the tool output.
const TOOL_COMPLETE: &str = r#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"c766e7de-b35d-4fc8-8596-fc5fb367963b","event":{"type":"tool.execution_complete","data":{"toolCallId":"call_1","model":"fake-model","interactionId":"d062ce0f-c2ca-4829-84bb-568d8aac5f59","turnId":"0","rte":false,"success":true,"result":{"content":"{RESULT}","detailedContent":"{RESULT}"},"toolTelemetry":{}},"id":"e15f3fd4-e0b0-4bfa-a056-055cf4dfea28","timestamp":"2026-11-29T20:26:17.550Z","parentId":"d64830f2-b8e1-49c2-83df-c4cadaebea2a"}}}"#;

/// A JSON-escaped tool output line (a forecast row), repeated to make the ~4 KiB body.
const RESULT_LINE: &str = r#"{\"city\":\"Paris\",\"sky\":\"sunny\",\"temperatureC\":21,\"windKph\":12,\"note\":\"light breeze from the west\"}\n"#;

fn large_body() -> String {
    let result = RESULT_LINE.repeat(17);
    TOOL_COMPLETE.replace("{RESULT}", &result)
}

fn stream(framing: Framing, body: &str) -> Vec<u8> {
    let mut out = BytesMut::new();
    for _ in 0..MESSAGES {
        encode_frame(framing, body.as_bytes(), &mut out);
    }
    out.to_vec()
}

/// Decodes and validates a whole stream; returns the total params length (to keep it live).
fn decode_stream(framing: Framing, wire: &[u8]) -> usize {
    let mut decoder = FrameDecoder::new(framing, FrameLimits::default());
    let mut n = 0;
    let mut params_len = 0;
    for chunk in wire.chunks(READ_CHUNK) {
        decoder.push(chunk).expect("valid framing");
        while let Some(frame) = decoder.next_frame().expect("valid framing") {
            match jsonrpc::parse_single(&frame) {
                Ok(Message::Notification { method, params }) if method == "session.event" => {
                    params_len += params.map_or(0, |p| p.get().len());
                    n += 1;
                }
                other => panic!("unexpected message {other:?}"),
            }
        }
    }
    assert_eq!(n, MESSAGES);
    params_len
}

fn bench_decode(c: &mut Criterion) {
    let bodies = [("400B", MESSAGE_DELTA.to_string()), ("4KiB", large_body())];
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Elements(MESSAGES as u64));
    for (size, body) in &bodies {
        let label = format!("{size}/{}B", body.len());
        for (name, framing) in [
            ("content-length", Framing::ContentLength),
            ("ndjson", Framing::Ndjson),
        ] {
            let wire = stream(framing, body);
            group.bench_with_input(
                BenchmarkId::new(format!("agentwire/{name}"), &label),
                &wire,
                |b, wire| b.iter(|| decode_stream(framing, black_box(wire))),
            );
        }
        let unframed: Vec<Vec<u8>> = (0..MESSAGES).map(|_| body.as_bytes().to_vec()).collect();
        group.bench_with_input(
            BenchmarkId::new("agentwire/parse-only", &label),
            &unframed,
            |b, bodies| {
                b.iter(|| {
                    for body in bodies {
                        black_box(jsonrpc::parse_single(black_box(body)).is_ok());
                    }
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("serde_json::Value", &label),
            &unframed,
            |b, bodies| {
                b.iter(|| {
                    for body in bodies {
                        black_box(
                            serde_json::from_slice::<serde_json::Value>(black_box(body)).unwrap(),
                        );
                    }
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench_decode);
criterion_main!(benches);
