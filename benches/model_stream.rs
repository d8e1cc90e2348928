//! The model path's cost per streamed chunk, next to fanning its delta out to one client.
//!
//! * `model_stream/decode_map_chunk`: one Chat Completions text chunk (the bytes of one SSE
//!   event, as Ollama / vLLM send it) pushed into a [`ResponseDecoder`] (SSE decoder + lenient
//!   chunk parser + accumulator), yielding one `TextDelta`.
//! * `model_stream/model_call_chunk`: the same through a whole [`ModelCall`]
//!   (`handle_body` + `poll`), the path the host drives.
//! * `model_stream/fanout_delta_1_client`: what the host then does with the delta: emit one
//!   ephemeral `assistant.message_delta` to a session with one attached streaming client and
//!   drain its frame (as `benches/fanout.rs` `emit+drain/1`, with the delta event).
//!
//! Before the criterion runs it prints the median and 10th percentile per operation over many
//! short samples (16 operations each), which, unlike criterion's means, are robust to the
//! benchmark thread being descheduled on a busy machine (as `benches/fanout.rs` does).
//!
//! Run: `cargo bench --bench model_stream -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::Instant;

use agentwire::frame::Framing;
use agentwire::host::{Host, HostConfig};
use agentwire::model::{
    CallConfig, CallOutput, HttpMethod, HttpRequest, ModelCall, ModelEvent, ResponseDecoder,
    SseLimits, StreamDialect,
};
use agentwire::Timestamp;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;

const CHUNK: &[u8] = b"data: {\"id\":\"chatcmpl-b1f0\",\"object\":\"chat.completion.chunk\",\"created\":1764612300,\"model\":\"qwen3:8b\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\" sunny\"},\"finish_reason\":null}]}\n\n";

/// Fresh decoders after this many chunks, so the accumulated text stays small.
const RENEW_AFTER: u32 = 50_000;

fn decoder() -> ResponseDecoder {
    ResponseDecoder::new(StreamDialect::OpenAiChat, SseLimits::default(), "call_")
}

fn model_call() -> ModelCall {
    let request = HttpRequest {
        method: HttpMethod::Post,
        url: "http://127.0.0.1:11434/v1/chat/completions".into(),
        headers: Vec::new(),
        body: Bytes::new(),
    };
    let now = Timestamp::from_millis(1);
    let mut call = ModelCall::new(
        now,
        request,
        StreamDialect::OpenAiChat,
        "qwen3:8b",
        CallConfig::default(),
    );
    while call.poll().is_some() {}
    call.handle_response(
        now,
        200,
        &[("content-type".into(), "text/event-stream".into())],
    );
    call
}

fn framed(body: &serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(body).unwrap();
    let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    wire.extend_from_slice(&body);
    wire
}

/// The three operations under test, with their state.
struct Fixture {
    decoder: ResponseDecoder,
    decoded: u32,
    out: Vec<ModelEvent>,
    call: ModelCall,
    called: u32,
    host: Host,
    now: Timestamp,
    delta: serde_json::Value,
}

fn drain(host: &mut Host) -> usize {
    let mut frames = 0;
    while let Some(ready) = host.poll_ready() {
        while let Some(frame) = host.poll_transmit(ready) {
            black_box(&frame);
            frames += 1;
        }
    }
    frames
}

impl Fixture {
    fn new() -> Self {
        let mut host = Host::new(HostConfig::default());
        let now = Timestamp::from_millis(1_795_983_976_952);
        let conn = host.open(now, Framing::ContentLength);
        host.handle_bytes(
            now,
            conn,
            &framed(&json!({"jsonrpc":"2.0","id":1,"method":"session.create",
                            "params":{"sessionId":"s","streaming":true}})),
        );
        drain(&mut host);
        let delta =
            json!({"messageId": "3b4e5015-f982-4b18-98f9-750e4a79496e", "deltaContent": " sunny"});
        host.emit_event(now, "s", "assistant.message_delta", &delta, true);
        assert_eq!(
            drain(&mut host),
            1,
            "the streaming client receives the delta"
        );
        Fixture {
            decoder: decoder(),
            decoded: 0,
            out: Vec::with_capacity(4),
            call: model_call(),
            called: 0,
            host,
            now,
            delta,
        }
    }

    fn decode_map(&mut self) {
        self.decoded += 1;
        if self.decoded == RENEW_AFTER {
            self.decoder = decoder();
            self.decoded = 0;
        }
        self.decoder.push(black_box(CHUNK), &mut self.out).unwrap();
        debug_assert!(matches!(self.out.as_slice(), [ModelEvent::TextDelta(_)]));
        black_box(&self.out);
        self.out.clear();
    }

    fn call_chunk(&mut self) {
        self.called += 1;
        if self.called == RENEW_AFTER {
            self.call = model_call();
            self.called = 0;
        }
        self.call.handle_body(self.now, black_box(CHUNK));
        while let Some(o) = self.call.poll() {
            debug_assert!(matches!(o, CallOutput::Event(ModelEvent::TextDelta(_))));
            black_box(o);
        }
    }

    fn fanout(&mut self) {
        self.now = self.now.saturating_add(std::time::Duration::from_micros(1));
        black_box(self.host.emit_event(
            self.now,
            "s",
            "assistant.message_delta",
            &self.delta,
            true,
        ));
        black_box(drain(&mut self.host));
    }
}

/// Median and 10th percentile per operation, in nanoseconds.
fn per_op(f: &mut Fixture, op: fn(&mut Fixture)) -> (f64, f64) {
    const BATCH: u32 = 16;
    for _ in 0..2_000 {
        op(f);
    }
    let mut times: Vec<f64> = (0..4_000)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..BATCH {
                op(f);
            }
            start.elapsed().as_nanos() as f64 / f64::from(BATCH)
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[times.len() / 10])
}

fn report_medians() {
    let mut f = Fixture::new();
    type Op = (&'static str, fn(&mut Fixture));
    let ops: [Op; 3] = [
        ("decode_map_chunk", Fixture::decode_map),
        ("model_call_chunk", Fixture::call_chunk),
        ("fanout_delta_1_client", Fixture::fanout),
    ];
    eprintln!("per operation (16-op samples): median / p10");
    for (name, op) in ops {
        let (median, p10) = per_op(&mut f, op);
        eprintln!("{name:>24} {median:>9.0} ns {p10:>9.0} ns");
    }
}

fn bench(c: &mut Criterion) {
    report_medians();
    let mut f = Fixture::new();
    let mut g = c.benchmark_group("model_stream");
    g.throughput(Throughput::Elements(1));
    g.bench_function("decode_map_chunk", |b| b.iter(|| f.decode_map()));
    g.bench_function("model_call_chunk", |b| b.iter(|| f.call_chunk()));
    g.bench_function("fanout_delta_1_client", |b| b.iter(|| f.fanout()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
