//! Fuzz target for the model client's stream decoding: the SSE decoder, the OpenAI / Anthropic
//! chunk parsers and the tool-call accumulator, driven through a whole `ModelCall`. Shared with
//! the stable corpus replay (`tests/core/fuzz_corpus_replay.rs`).
//!
//! Input: a config byte (bit 0: Anthropic dialect; bits 1-2: event-size limit; bit 3: a JSON
//! body instead of an event stream; bit 4: end with a transport error instead of the end),
//! a chunking seed byte, then the response body.
//!
//! Asserted beyond "no panic":
//! * the same outputs whether the body arrives whole, byte by byte, or in seeded chunks, and
//!   the same events from the bare SSE decoder however it is split;
//! * exactly one terminal output (`Done` or `Failed`), nothing after it, and the call's state,
//!   deadline and outputs agree;
//! * `Done`'s text, reasoning and tool-call arguments are the concatenation of their deltas;
//! * no error message contains the request's credential, even when the body echoes it.
#![allow(dead_code)]

use agentwire::model::{
    CallConfig, CallOutput, CallState, HttpHeader, HttpMethod, HttpRequest, ModelCall, ModelEvent,
    SseDecoder, SseLimits, StreamDialect, TransportErrorKind,
};
use agentwire::Timestamp;
use bytes::Bytes;

/// The credential in the fuzzed request's headers.
pub const SECRET: &str = "sk-fuzz-secret-credential";

fn limits(selector: u8) -> SseLimits {
    SseLimits {
        max_event_bytes: match selector % 4 {
            0 => SseLimits::DEFAULT_MAX_EVENT_BYTES,
            1 => 16,
            2 => 200,
            _ => 4096,
        },
    }
}

/// Runs one call over `body` cut into chunks of the given sizes (cycled).
fn run_call(config_byte: u8, body: &[u8], sizes: &[usize]) -> Vec<CallOutput> {
    let dialect = if config_byte & 1 == 1 {
        StreamDialect::AnthropicMessages
    } else {
        StreamDialect::OpenAiChat
    };
    let config = CallConfig {
        limits: limits(config_byte >> 1),
        ..CallConfig::default()
    };
    let request = HttpRequest {
        method: HttpMethod::Post,
        url: "http://127.0.0.1:9/v1/chat/completions".into(),
        headers: vec![HttpHeader::secret(
            "authorization",
            format!("Bearer {SECRET}"),
        )],
        body: Bytes::new(),
    };
    let now = Timestamp::from_millis(1_000);
    let mut call = ModelCall::new(now, request, dialect, "m", config);
    let mut out: Vec<CallOutput> = std::iter::from_fn(|| call.poll()).collect();
    assert!(
        matches!(out.as_slice(), [CallOutput::Send(_)]),
        "a call starts with its request"
    );
    out.clear();
    let content_type = if config_byte & 8 != 0 {
        "application/json"
    } else {
        "text/event-stream"
    };
    call.handle_response(now, 200, &[("content-type".into(), content_type.into())]);
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        i += 1;
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        call.handle_body(now, chunk);
        out.extend(std::iter::from_fn(|| call.poll()));
    }
    if config_byte & 16 != 0 {
        call.handle_transport_error(now, TransportErrorKind::Io, "reset");
    } else {
        call.handle_end(now);
    }
    out.extend(std::iter::from_fn(|| call.poll()));
    check(&call, &out);
    out
}

fn check(call: &ModelCall, out: &[CallOutput]) {
    let terminal: Vec<usize> = out
        .iter()
        .enumerate()
        .filter(|(_, o)| {
            matches!(
                o,
                CallOutput::Event(ModelEvent::Done(_)) | CallOutput::Failed(_)
            )
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(terminal.len(), 1, "exactly one terminal output: {out:?}");
    let last = out.len() - 1;
    assert!(
        terminal[0] == last,
        "nothing after the terminal output: {out:?}"
    );
    match &out[last] {
        CallOutput::Event(ModelEvent::Done(r)) => {
            assert_eq!(call.state(), CallState::Completed);
            let (mut text, mut reasoning) = (String::new(), String::new());
            let mut args: Vec<String> = Vec::new();
            for o in out {
                match o {
                    CallOutput::Event(ModelEvent::TextDelta(t)) => text.push_str(t),
                    CallOutput::Event(ModelEvent::ReasoningDelta(t)) => reasoning.push_str(t),
                    CallOutput::Event(ModelEvent::ToolCallDelta {
                        index,
                        arguments_delta,
                        ..
                    }) => {
                        if args.len() <= *index {
                            args.resize(index + 1, String::new());
                        }
                        args[*index].push_str(arguments_delta);
                    }
                    _ => {}
                }
            }
            assert_eq!(r.text, text, "text = its deltas");
            assert_eq!(r.reasoning, reasoning, "reasoning = its deltas");
            // Calls that never got a name or arguments are dropped from the response, so
            // compare the non-empty ones in order.
            let from_deltas: Vec<&String> = args.iter().filter(|a| !a.is_empty()).collect();
            let from_response: Vec<&String> = r
                .tool_calls
                .iter()
                .map(|c| &c.arguments)
                .filter(|a| !a.is_empty())
                .collect();
            assert_eq!(
                from_response, from_deltas,
                "tool-call arguments = their deltas"
            );
            assert!(
                r.tool_calls.iter().all(|c| !c.id.is_empty()),
                "every call has an id"
            );
        }
        CallOutput::Failed(e) => {
            assert_eq!(call.state(), CallState::Failed);
            assert!(
                !e.message.contains(SECRET),
                "the credential leaked: {}",
                e.message
            );
            assert!(!e.message.is_empty());
        }
        _ => unreachable!(),
    }
    assert_eq!(call.next_deadline(), None, "a finished call arms no timer");
}

/// The bare SSE decoder over `stream` in chunks of `sizes`.
fn sse_events(
    stream: &[u8],
    limit: SseLimits,
    sizes: &[usize],
) -> (Vec<agentwire::model::SseEvent>, bool) {
    let mut d = SseDecoder::new(limit);
    let mut out = Vec::new();
    let mut rest = stream;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        i += 1;
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        d.push(chunk);
        loop {
            match d.next_event() {
                Ok(Some(e)) => out.push(e),
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
        assert!(
            d.buffered() <= chunk.len() + limit.max_event_bytes,
            "memory stays bounded"
        );
    }
    match d.finish() {
        Ok(Some(e)) => out.push(e),
        Ok(None) => {}
        Err(_) => return (out, true),
    }
    (out, false)
}

/// The `model_stream` target.
pub fn model_stream(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let (config_byte, seed, body) = (data[0], data[1], &data[2..]);
    let seeded: Vec<usize> = (0..8u8)
        .map(|k| usize::from(seed.rotate_left(u32::from(k)) % 23) + 1)
        .collect();
    let whole = run_call(config_byte, body, &[usize::MAX]);
    assert_eq!(run_call(config_byte, body, &[1]), whole, "byte by byte");
    assert_eq!(run_call(config_byte, body, &seeded), whole, "seeded chunks");
    let limit = limits(config_byte >> 1);
    let sse_whole = sse_events(body, limit, &[usize::MAX]);
    assert_eq!(sse_events(body, limit, &[1]), sse_whole, "SSE byte by byte");
    assert_eq!(
        sse_events(body, limit, &seeded),
        sse_whole,
        "SSE seeded chunks"
    );
}
