//! Recorded-style response streams of the servers users point agentwire at (Ollama,
//! llama.cpp, vLLM, Gemini's OpenAI endpoint, Anthropic), fed through a whole
//! `ModelCall` in several splits: each must give the same events and the expected response.
//! The fixtures are in `tests/fixtures/model/` (written for these tests, in each server's
//! documented shape and with its quirks).

use std::path::PathBuf;

use agentwire::model::{
    CallConfig, CallOutput, CallState, HttpMethod, HttpRequest, ModelCall, ModelEvent,
    ModelResponse, StreamDialect, ToolCall, Usage,
};
use agentwire::Timestamp;
use bytes::Bytes;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/model")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs a whole call over `body`, delivered in chunks of `split` bytes.
fn run(dialect: StreamDialect, body: &[u8], split: usize) -> Vec<CallOutput> {
    let request = HttpRequest {
        method: HttpMethod::Post,
        url: "http://127.0.0.1:11434/v1/chat/completions".into(),
        headers: vec![],
        body: Bytes::new(),
    };
    let now = Timestamp::from_millis(1);
    let mut call = ModelCall::new(now, request, dialect, "m", CallConfig::default());
    let mut out: Vec<CallOutput> = std::iter::from_fn(|| call.poll()).collect();
    call.handle_response(
        now,
        200,
        &[("content-type".into(), "text/event-stream".into())],
    );
    for chunk in body.chunks(split.max(1)) {
        call.handle_body(now, chunk);
    }
    call.handle_end(now);
    out.extend(std::iter::from_fn(|| call.poll()));
    assert_eq!(call.state(), CallState::Completed, "{out:?}");
    out
}

/// The response, after checking that every split gives the same outputs.
fn response(dialect: StreamDialect, name: &str) -> (ModelResponse, Vec<ModelEvent>) {
    let body = fixture(name);
    let whole = run(dialect, &body, body.len());
    for split in [1, 2, 3, 7, 64] {
        assert_eq!(
            run(dialect, &body, split),
            whole,
            "{name} split every {split} bytes"
        );
    }
    let events: Vec<ModelEvent> = whole
        .into_iter()
        .filter_map(|o| match o {
            CallOutput::Event(e) => Some(e),
            _ => None,
        })
        .collect();
    match events.last() {
        Some(ModelEvent::Done(r)) => (r.clone(), events),
        other => panic!("{name}: ends with {other:?}"),
    }
}

fn call(id: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "get_weather".into(),
        arguments: args.into(),
    }
}

#[test]
fn ollama_whole_tool_call_in_one_delta_with_finish_reason_stop() {
    let (r, events) = response(StreamDialect::OpenAiChat, "ollama_tool_call.sse");
    assert_eq!(r.tool_calls, [call("call_7dk2m1ra", r#"{"city":"Paris"}"#)]);
    assert!(
        r.has_tool_calls(),
        "decided from the calls, not from finish_reason stop"
    );
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(r.reasoning, "The user wants the weather.");
    assert_eq!(r.text, "");
    assert_eq!(r.response_id.as_deref(), Some("chatcmpl-812"));
    assert_eq!(r.model.as_deref(), Some("qwen3:8b"));
    assert_eq!(
        r.usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((212, 31))
    );
    assert!(
        !events.iter().any(|e| matches!(e, ModelEvent::TextDelta(_))),
        "empty contents are no deltas"
    );
}

#[test]
fn ollama_text_without_usage() {
    let (r, events) = response(StreamDialect::OpenAiChat, "ollama_text_no_usage.sse");
    assert_eq!(r.text, "It is sunny in Paris.");
    assert_eq!(r.usage, None);
    assert!(!r.has_tool_calls());
    let deltas: Vec<&ModelEvent> = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::TextDelta(_)))
        .collect();
    assert_eq!(deltas.len(), 2);
}

#[test]
fn llama_cpp_reasoning_content_spread_arguments_crlf_and_keep_alives() {
    let (r, events) = response(
        StreamDialect::OpenAiChat,
        "llamacpp_reasoning_tool_crlf.sse",
    );
    assert_eq!(r.reasoning, "Need the weather tool.");
    assert_eq!(r.tool_calls, [call("fJ2mQ8sPz", r#"{"city":"Paris"}"#)]);
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.usage.map(|u| u.input_tokens), Some(180));
    let fragments: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCallDelta {
                arguments_delta,
                id,
                ..
            } => {
                assert_eq!(id, "fJ2mQ8sPz", "continuations carry the call's id");
                Some(arguments_delta.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(fragments, ["{\"", "city\":\"", "Paris\"}"]);
}

#[test]
fn vllm_two_calls_both_at_index_zero_reasoning_field_and_null_usage() {
    let (r, _) = response(StreamDialect::OpenAiChat, "vllm_two_calls_index0.sse");
    assert_eq!(
        r.tool_calls,
        [
            call("chatcmpl-tool-aa11", r#"{"city": "Paris"}"#),
            call("chatcmpl-tool-bb22", r#"{"city": "Lyon"}"#)
        ]
    );
    assert_eq!(r.reasoning, "Two cities, two calls.");
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 301,
            output_tokens: 54,
            cache_read_tokens: 256,
            ..Usage::default()
        })
    );
}

#[test]
fn calls_without_index_or_id_are_told_apart_by_position() {
    let (r, _) = response(StreamDialect::OpenAiChat, "gemini_no_index.sse");
    assert_eq!(
        r.tool_calls,
        [
            call("call_1", r#"{"city":"Paris"}"#),
            call("call_2", r#"{"city":"Rome"}"#)
        ]
    );
}

#[test]
fn anthropic_text_then_tool_use() {
    let (r, _) = response(StreamDialect::AnthropicMessages, "anthropic_tool_use.sse");
    assert_eq!(r.text, "Checking the weather.");
    assert_eq!(
        r.tool_calls,
        [call(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            r#"{"city": "Paris"}"#
        )]
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        r.usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((472, 89))
    );
}
