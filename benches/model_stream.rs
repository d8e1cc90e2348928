//! The model path's cost per streamed chunk, next to fanning its delta out to one client.
//!
//! What one text chunk costs, split where the agent hands events to the host:
//!
//! * `decode_map_chunk` (Ollama), `decode_map_chunk_openai` and `decode_map_chunk_anthropic`:
//!   the model path. One SSE event's bytes handed to a running [`ModelAgent`] as
//!   [`AgentInput::Http`] `Body` — the bytes copied into the `Vec` the host passes, the SSE
//!   decoder, the lenient chunk parser, the accumulator, the [`ModelCall`], and the agent
//!   mapping the `TextDelta` to the events it emits (`assistant.streaming_delta` and
//!   `assistant.message_delta`, as the agent does for a streaming session) — up to the
//!   `SessionControl` calls, which here only take the payloads (the host's side is below).
//!   The chunks cycle through 64 texts (8 words, one with a JSON escape). Servers repeat
//!   one frame around the text — Ollama, llama.cpp and vLLM the same members, OpenAI the
//!   same members and a per-chunk nonce (`obfuscation`), Anthropic the same
//!   `content_block_delta` wrapper — which the parser reads once
//!   (`src/model/text_frame.rs`), then only the text string (and the nonce) of each chunk.
//! * `decode_map_chunk_unframed`: the worst case, Ollama chunks whose `created` differs in
//!   every chunk, so no frame ever repeats and every chunk is read in full by the fast JSON
//!   reader (`src/model/fast_json.rs`). Real servers change `created` at most once a second.
//! * `fanout_delta_1_client`: what the host then does with the delta: emit one ephemeral
//!   `assistant.message_delta` to a session with one attached streaming client and drain its
//!   frame (as `benches/fanout.rs` `emit+drain/1`, with the delta event).
//! * `fanout_chunk_1_client`: the host's side of the whole chunk: both events the agent
//!   emits for it (`assistant.streaming_delta` and `assistant.message_delta`), emitted and
//!   drained.
//! * `host_chunk_1_client`: everything, end to end through a real [`Host`]: a BYOK session
//!   with one streaming client, the chunk fed with `Host::handle_effect` (`HttpBody`), its two frames
//!   drained. It should come out near `decode_map_chunk` + `fanout_chunk_1_client` (the
//!   rest is the host's routing and the call's idle-deadline timer), which checks that the
//!   split above hides nothing.
//!
//! Before the criterion runs it prints the median and 10th percentile per operation over many
//! short samples (16 operations each), which, unlike criterion's means, are robust to the
//! benchmark thread being descheduled on a busy machine (as `benches/fanout.rs` does), and
//! the allocator calls per operation (a counting global allocator).
//!
//! Run: `cargo bench -p agentwire --bench model_stream -- --warm-up-time 1 --measurement-time 2`

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentwire::agent::{
    Agent, AgentInput, BuiltinCall, ClientRequest, HttpEvent, ModelAgent, ModelSetup,
    SessionControl,
};
use agentwire::frame::Framing;
use agentwire::host::{Effect, EffectEvent, EffectId, EffectOp, Host, HostConfig, Output};
use agentwire::model::{CallConfig, HttpRequest, ProviderConfig};
use agentwire::Timestamp;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::{json, Value};

/// The words of the streamed answer, one per chunk, cycled.
const WORDS: [&str; 8] = [
    " sunny",
    " and",
    " warm",
    " in",
    " Paris",
    " today",
    ",",
    " 24\\u00b0C",
];

/// A Chat Completions text chunk as Ollama sends it (the same frame around every piece of
/// text).
fn ollama_chunk(word: &str) -> Vec<u8> {
    format!("data: {{\"id\":\"chatcmpl-b1f0\",\"object\":\"chat.completion.chunk\",\"created\":1764612300,\"model\":\"qwen3:8b\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"{word}\"}},\"finish_reason\":null}}]}}\n\n").into_bytes()
}

/// A text chunk as OpenAI sends it, with a nonce (`obfuscation`) that differs in every chunk.
fn openai_chunk(word: &str, n: usize) -> Vec<u8> {
    format!("data: {{\"id\":\"chatcmpl-CZ0x\",\"object\":\"chat.completion.chunk\",\"created\":1764612300,\"model\":\"gpt-4.1-mini\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_6d7c\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{word}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null,\"obfuscation\":\"q{n:04}\"}}\n\n").into_bytes()
}

/// An Ollama chunk whose frame never repeats (`created` differs in every chunk): the worst
/// case, every chunk read in full.
fn unframed_chunk(word: &str, n: usize) -> Vec<u8> {
    String::from_utf8(ollama_chunk(word))
        .unwrap()
        .replace("1764612300", &(1_764_612_300 + n).to_string())
        .into_bytes()
}

/// An Anthropic Messages text delta.
fn anthropic_chunk(word: &str) -> Vec<u8> {
    format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{word}\"}}}}\n\n").into_bytes()
}

/// Which server's chunks a [`Streaming`] is fed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Server {
    Ollama,
    OpenAi,
    Anthropic,
    Unframed,
}

impl Server {
    fn chunks(self) -> Vec<Vec<u8>> {
        (0..64)
            .map(|n| {
                let word = WORDS[n % WORDS.len()];
                match self {
                    Server::Ollama => ollama_chunk(word),
                    Server::OpenAi => openai_chunk(word, n),
                    Server::Anthropic => anthropic_chunk(word),
                    Server::Unframed => unframed_chunk(word, n),
                }
            })
            .collect()
    }
}

const ANTHROPIC_START: &[u8] = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";

/// Fresh agents and sessions after this many chunks, so the accumulated text stays small.
const RENEW_AFTER: u32 = 20_000;

// ----- counting allocator -----

/// `System`, counting allocator calls (`alloc`, `alloc_zeroed`, `realloc`).
struct Counting;

static CALLS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CALLS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        CALLS.fetch_add(1, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        CALLS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// ----- the agent side: a session control that only takes what the agent emits -----

/// The agent's view of its session, doing nothing with the events but keeping them alive
/// (the host's side is measured separately).
struct Sink {
    setup: ModelSetup,
    emitted: u64,
}

impl SessionControl for Sink {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(1_795_983_976_952)
    }
    fn new_id(&mut self) -> String {
        "3b4e5015-f982-4b18-98f9-750e4a79496e".to_owned()
    }
    fn streaming(&self) -> bool {
        true
    }
    fn emit(&mut self, event_type: &str, data: Value, ephemeral: bool) -> String {
        black_box((event_type, &data, ephemeral));
        self.emitted += 1;
        String::new()
    }
    fn emit_ref(&mut self, event_type: &str, data: &Value, ephemeral: bool) -> String {
        black_box((event_type, data, ephemeral));
        self.emitted += 1;
        String::new()
    }
    fn call_tool(&mut self, _: &str, _: &str, _: &Value, _: &str) {}
    fn call_builtin(&mut self, _: &str, _: &BuiltinCall, _: &str) {}
    fn cancel_tool_calls(&mut self) {}
    fn set_timer(&mut self, at: Timestamp) {
        black_box(at);
    }
    fn ask_client(&mut self, _: ClientRequest) -> u64 {
        0
    }
    fn http_request(&mut self, request: HttpRequest) -> u64 {
        black_box(request);
        1
    }
    fn model_setup(&self) -> Result<ModelSetup, String> {
        Ok(self.setup.clone())
    }
}

/// A model agent in the middle of streaming a response (headers in, first delta seen).
struct Streaming {
    agent: ModelAgent,
    sink: Sink,
    chunks: Vec<Vec<u8>>,
    fed: u32,
    server: Server,
}

impl Streaming {
    fn new(server: Server) -> Self {
        let anthropic = server == Server::Anthropic;
        let provider = ProviderConfig::from_json(&json!({
            "type": if anthropic { "anthropic" } else { "openai" },
            "baseUrl": "http://127.0.0.1:11434/v1",
            "apiKey": "sk-bench",
        }))
        .unwrap();
        let mut sink = Sink {
            setup: ModelSetup {
                provider,
                model: Some("qwen3:8b".into()),
                reasoning_effort: None,
                system_prompt: "You are a bench.".into(),
                call: CallConfig::default(),
                client_name: None,
                enable_citations: false,
            },
            emitted: 0,
        };
        let mut agent = ModelAgent::new();
        agent.handle(
            AgentInput::Prompt {
                message_id: "m".into(),
                prompt: "weather?".into(),
                attachments: Default::default(),
            },
            &mut sink,
        );
        let http = |event| AgentInput::Http { call: 1, event };
        agent.handle(
            http(HttpEvent::Response {
                status: 200,
                headers: vec![("content-type".into(), "text/event-stream".into())],
            }),
            &mut sink,
        );
        if anthropic {
            agent.handle(http(HttpEvent::Body(ANTHROPIC_START.to_vec())), &mut sink);
        }
        let chunks = server.chunks();
        agent.handle(http(HttpEvent::Body(chunks[0].clone())), &mut sink);
        let mut s = Streaming {
            agent,
            sink,
            chunks,
            fed: 0,
            server,
        };
        let before = s.sink.emitted;
        s.chunk();
        assert_eq!(
            s.sink.emitted - before,
            2,
            "a chunk is one streaming_delta and one message_delta"
        );
        s
    }

    fn chunk(&mut self) {
        self.fed += 1;
        if self.fed == RENEW_AFTER {
            *self = Streaming::new(self.server);
        }
        let chunk = &self.chunks[self.fed as usize % self.chunks.len()];
        let body = HttpEvent::Body(black_box(chunk.as_slice()).to_vec());
        self.agent.handle(
            AgentInput::Http {
                call: 1,
                event: body,
            },
            &mut self.sink,
        );
    }
}

// ----- the host side -----

fn framed(body: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(body).unwrap();
    let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    wire.extend_from_slice(&body);
    wire
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

/// A host with one session `s` and one attached streaming client; `params` extend the
/// `session.create` params.
fn host_with_session(now: Timestamp, params: Value) -> Host {
    let mut host = Host::new(HostConfig::default());
    let conn = host.open(now, Framing::ContentLength);
    let mut create = json!({"sessionId": "s", "streaming": true});
    create
        .as_object_mut()
        .unwrap()
        .extend(params.as_object().unwrap().clone());
    host.handle_bytes(
        now,
        conn,
        &framed(&json!({"jsonrpc":"2.0","id":1,"method":"session.create","params": create})),
    );
    drain(&mut host);
    host.handle_bytes(
        now,
        conn,
        &framed(&json!({"jsonrpc":"2.0","id":2,"method":"session.send",
                        "params":{"sessionId":"s","prompt":"weather?"}})),
    );
    drain(&mut host);
    host
}

/// The host's side: emitting the chunk's events to one streaming client.
struct Fanout {
    host: Host,
    now: Timestamp,
    delta: Value,
    size: Value,
}

impl Fanout {
    fn new() -> Self {
        let now = Timestamp::from_millis(1_795_983_976_952);
        let mut host = host_with_session(now, json!({}));
        let delta =
            json!({"messageId": "3b4e5015-f982-4b18-98f9-750e4a79496e", "deltaContent": " sunny"});
        host.emit_event(now, "s", "assistant.message_delta", &delta, true);
        assert_eq!(
            drain(&mut host),
            1,
            "the streaming client receives the delta"
        );
        Fanout {
            host,
            now,
            delta,
            size: json!({"totalResponseSizeBytes": 4242}),
        }
    }

    fn delta(&mut self) {
        self.now = self.now.saturating_add(Duration::from_micros(1));
        black_box(self.host.emit_event(
            self.now,
            "s",
            "assistant.message_delta",
            &self.delta,
            true,
        ));
        black_box(drain(&mut self.host));
    }

    fn chunk(&mut self) {
        self.now = self.now.saturating_add(Duration::from_micros(1));
        black_box(self.host.emit_event(
            self.now,
            "s",
            "assistant.streaming_delta",
            &self.size,
            true,
        ));
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

/// End to end: a BYOK session streaming a response through a real host.
struct HostStream {
    host: Host,
    now: Timestamp,
    call: EffectId,
    chunks: Vec<Vec<u8>>,
    fed: u32,
}

impl HostStream {
    fn new() -> Self {
        let now = Timestamp::from_millis(1_795_983_976_952);
        let provider =
            json!({"type": "openai", "baseUrl": "http://127.0.0.1:11434/v1", "apiKey": "sk-bench"});
        let mut host = host_with_session(now, json!({"provider": provider, "model": "qwen3:8b"}));
        let call = std::iter::from_fn(|| host.poll_output())
            .find_map(|o| match o {
                Output::Effect(Effect {
                    id: call,
                    op: EffectOp::HttpRequest(_),
                }) => Some(call),
                _ => None,
            })
            .expect("the model call");
        let headers = [("content-type".to_owned(), "text/event-stream".to_owned())];
        host.handle_effect(
            now,
            call,
            EffectEvent::HttpHead {
                status: 200,
                headers: headers.to_vec(),
            },
        );
        let chunks = Server::Ollama.chunks();
        host.handle_effect(now, call, EffectEvent::HttpBody(chunks[0].to_vec()));
        drain(&mut host);
        let mut s = HostStream {
            host,
            now,
            call,
            chunks,
            fed: 0,
        };
        assert_eq!(s.chunk_frames(), 2, "a chunk is two frames to the client");
        s
    }

    fn chunk_frames(&mut self) -> usize {
        self.now = self.now.saturating_add(Duration::from_micros(1));
        let chunk = &self.chunks[self.fed as usize % self.chunks.len()];
        self.host.handle_effect(
            self.now,
            self.call,
            EffectEvent::HttpBody(black_box(chunk).to_vec()),
        );
        while let Some(o) = self.host.poll_output() {
            black_box(o);
        }
        drain(&mut self.host)
    }

    fn chunk(&mut self) {
        self.fed += 1;
        if self.fed == RENEW_AFTER {
            *self = HostStream::new();
        }
        black_box(self.chunk_frames());
    }
}

/// The operations under test, with their state.
struct Fixture {
    ollama: Streaming,
    openai: Streaming,
    anthropic: Streaming,
    unframed: Streaming,
    fanout: Fanout,
    host: HostStream,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            ollama: Streaming::new(Server::Ollama),
            openai: Streaming::new(Server::OpenAi),
            anthropic: Streaming::new(Server::Anthropic),
            unframed: Streaming::new(Server::Unframed),
            fanout: Fanout::new(),
            host: HostStream::new(),
        }
    }
}

type Op = (&'static str, fn(&mut Fixture));

const OPS: [Op; 7] = [
    ("decode_map_chunk", |f| f.ollama.chunk()),
    ("decode_map_chunk_openai", |f| f.openai.chunk()),
    ("decode_map_chunk_anthropic", |f| f.anthropic.chunk()),
    ("decode_map_chunk_unframed", |f| f.unframed.chunk()),
    ("fanout_delta_1_client", |f| f.fanout.delta()),
    ("fanout_chunk_1_client", |f| f.fanout.chunk()),
    ("host_chunk_1_client", |f| f.host.chunk()),
];

/// Median and 10th percentile per operation, in nanoseconds, and allocator calls per
/// operation.
fn per_op(f: &mut Fixture, op: fn(&mut Fixture)) -> (f64, f64, f64) {
    const BATCH: u32 = 16;
    for _ in 0..2_000 {
        op(f);
    }
    let calls = CALLS.load(Ordering::Relaxed);
    for _ in 0..1_000 {
        op(f);
    }
    let allocs = (CALLS.load(Ordering::Relaxed) - calls) as f64 / 1_000.0;
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
    (times[times.len() / 2], times[times.len() / 10], allocs)
}

fn report_medians() {
    let mut f = Fixture::new();
    eprintln!("per operation (16-op samples): median / p10, allocator calls");
    let mut medians = Vec::new();
    for (name, op) in OPS {
        let (median, p10, allocs) = per_op(&mut f, op);
        eprintln!("{name:>28} {median:>7.0} ns {p10:>7.0} ns {allocs:>6.2} allocs");
        medians.push(median);
    }
    for (i, name) in ["Ollama", "OpenAI", "Anthropic", "unframed"]
        .iter()
        .enumerate()
    {
        eprintln!(
            "decode+map {name:>9} / fan-out of the delta {:.2}, / fan-out of the chunk's events {:.2}",
            medians[i] / medians[4],
            medians[i] / medians[5],
        );
    }
}

fn bench(c: &mut Criterion) {
    report_medians();
    let mut f = Fixture::new();
    let mut g = c.benchmark_group("model_stream");
    g.throughput(Throughput::Elements(1));
    for (name, op) in OPS {
        g.bench_function(name, |b| b.iter(|| op(&mut f)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
