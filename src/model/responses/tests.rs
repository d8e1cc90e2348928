use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::model::event::{ModelResponse, ToolCall};
use crate::model::request::StreamDialect;
use crate::model::sse::SseLimits;
use crate::model::stream::ResponseDecoder;

/// Runs `(event name, data)` pairs through a parser, then the end of the body.
fn run(events: &[(&str, &str)]) -> (Vec<ModelEvent>, Result<(), ModelError>) {
    let mut s = ResponsesStream::new("call_");
    let mut out = Vec::new();
    for (name, data) in events {
        if let Err(e) = s.on_event(Some(*name).filter(|n| !n.is_empty()), data, &mut out) {
            return (out, Err(e));
        }
    }
    let r = s.on_end(&mut out);
    (out, r)
}

/// Events whose data carries its own `type` (the SSE event name is the same).
fn typed(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| (e["type"].as_str().unwrap_or("").to_owned(), e.to_string()))
        .collect()
}

fn run_values(events: &[Value]) -> (Vec<ModelEvent>, Result<(), ModelError>) {
    let owned = typed(events);
    let pairs: Vec<(&str, &str)> = owned
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_str()))
        .collect();
    run(&pairs)
}

fn done(events: &[ModelEvent]) -> &ModelResponse {
    match events.last() {
        Some(ModelEvent::Done(r)) => r,
        other => panic!("no Done: {other:?}"),
    }
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn body(req: &ChatRequest<'_>) -> Value {
    serde_json::from_slice(&request_body("gpt-5", req)).unwrap()
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "get_weather".into(),
        description: "Get weather for a city".into(),
        parameters: json!({"type":"object","properties":{"city":{"type":"string"}}}),
    }]
}

#[test]
fn the_request_carries_a_tool_round_trip_as_input_items() {
    let msgs = vec![
        ChatMessage::System("Be brief.".into()),
        ChatMessage::User("Weather in Paris and Rome?".into()),
        ChatMessage::Assistant {
            content: Some("Let me check.".into()),
            tool_calls: vec![
                call("call_a", "get_weather", "{\"city\": \"Paris\"}"),
                call("call_b", "get_weather", "{\"city\":\"Rome\"}"),
            ],
        },
        ChatMessage::Tool {
            tool_call_id: "call_a".into(),
            content: "sunny".into(),
        },
        ChatMessage::Tool {
            tool_call_id: "call_b".into(),
            content: "rain".into(),
        },
        ChatMessage::Assistant {
            content: Some("Paris is sunny, Rome rainy.".into()),
            tool_calls: vec![],
        },
        ChatMessage::Assistant {
            content: Some(String::new()),
            tool_calls: vec![],
        },
        ChatMessage::User("Thanks".into()),
    ];
    let t = tools();
    let mut req = ChatRequest::new(Some("s"), &msgs, &t);
    req.max_output_tokens = Some(1000);
    let b = body(&req);
    assert_eq!(
        b,
        json!({
            "model": "gpt-5",
            "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Let me check."}]},
                {"type": "function_call", "call_id": "call_a", "name": "get_weather",
                 "arguments": "{\"city\": \"Paris\"}"},
                {"type": "function_call", "call_id": "call_b", "name": "get_weather",
                 "arguments": "{\"city\":\"Rome\"}"},
                {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
                {"type": "function_call_output", "call_id": "call_b", "output": "rain"},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Paris is sunny, Rome rainy."}]},
                {"role": "user", "content": "Thanks"}
            ],
            "tools": [{"type": "function", "name": "get_weather",
                       "description": "Get weather for a city",
                       "parameters": {"type":"object","properties":{"city":{"type":"string"}}},
                       "strict": false}],
            "temperature": 0.0,
            "top_p": 0.95,
            "max_output_tokens": 1000,
            "stream": true,
            "store": false
        })
    );
    // The arguments go back as the model wrote them (spaces included), keys in this order.
    let text = String::from_utf8(request_body("gpt-5", &req)).unwrap();
    assert!(
        text.contains(r#""arguments":"{\"city\": \"Paris\"}""#),
        "{text}"
    );
    assert!(
        text.starts_with(r#"{"model":"gpt-5","instructions":"Be brief.","input":["#),
        "{text}"
    );
}

#[test]
fn reasoning_effort_replaces_sampling_and_options_are_left_out() {
    let msgs = [ChatMessage::User("u".into())];
    let mut req = ChatRequest::new(None, &msgs, &[]);
    req.reasoning_effort = Some("high");
    req.stream = false;
    let b = body(&req);
    assert_eq!(b["reasoning"], json!({"effort": "high"}));
    assert_eq!(b["stream"], false);
    assert_eq!(b["store"], false);
    for absent in [
        "instructions",
        "tools",
        "temperature",
        "top_p",
        "max_output_tokens",
        "frequency_penalty",
        "presence_penalty",
        "stream_options",
    ] {
        assert!(b.get(absent).is_none(), "{absent}: {b}");
    }
}

/// A stream shaped like OpenAI's: reasoning summary (two parts), text, two function calls
/// with fragmented arguments, the final response repeating the whole output, and usage.
fn recorded() -> Vec<Value> {
    let fc = |id: &str, call_id: &str, args: &str| {
        json!({"type": "function_call", "id": id, "call_id": call_id, "name": "get_weather",
               "arguments": args, "status": "completed"})
    };
    let final_output = json!([
        {"type": "reasoning", "id": "rs_1", "summary": [
            {"type": "summary_text", "text": "**Plan** check"},
            {"type": "summary_text", "text": "both"}]},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking both.", "annotations": []}]},
        fc("fc_1", "call_P", "{\"city\":\"Paris\"}"),
        fc("fc_2", "call_R", "{\"city\": \"Rome\"}"),
    ]);
    let resp = |status: &str, output: Value, usage: Value| {
        json!({"id": "resp_1", "object": "response", "created_at": 1, "status": status,
               "model": "gpt-5-2025-08-07", "output": output, "usage": usage})
    };
    vec![
        json!({"type": "response.created", "sequence_number": 0,
               "response": resp("in_progress", json!([]), Value::Null)}),
        json!({"type": "response.in_progress", "sequence_number": 1,
               "response": resp("in_progress", json!([]), Value::Null)}),
        json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
               "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        json!({"type": "response.reasoning_summary_part.added", "sequence_number": 3,
               "item_id": "rs_1", "output_index": 0, "summary_index": 0,
               "part": {"type": "summary_text", "text": ""}}),
        json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 4,
               "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "**Plan**"}),
        json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 5,
               "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": " check"}),
        json!({"type": "response.reasoning_summary_text.done", "sequence_number": 6,
               "item_id": "rs_1", "output_index": 0, "summary_index": 0,
               "text": "**Plan** check"}),
        json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 7,
               "item_id": "rs_1", "output_index": 0, "summary_index": 1, "delta": "both"}),
        json!({"type": "response.output_item.done", "sequence_number": 8, "output_index": 0,
               "item": final_output[0]}),
        json!({"type": "response.output_item.added", "sequence_number": 9, "output_index": 1,
               "item": {"type": "message", "id": "msg_1", "role": "assistant",
                        "status": "in_progress", "content": []}}),
        json!({"type": "response.content_part.added", "sequence_number": 10,
               "item_id": "msg_1", "output_index": 1, "content_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": []}}),
        json!({"type": "response.output_text.delta", "sequence_number": 11, "item_id": "msg_1",
               "output_index": 1, "content_index": 0, "delta": "Checking", "logprobs": [],
               "obfuscation": "Xy"}),
        json!({"type": "response.output_text.delta", "sequence_number": 12, "item_id": "msg_1",
               "output_index": 1, "content_index": 0, "delta": " both.", "logprobs": [],
               "obfuscation": "Q"}),
        json!({"type": "response.output_text.done", "sequence_number": 13, "item_id": "msg_1",
               "output_index": 1, "content_index": 0, "text": "Checking both."}),
        json!({"type": "response.content_part.done", "sequence_number": 14,
               "item_id": "msg_1", "output_index": 1, "content_index": 0,
               "part": {"type": "output_text", "text": "Checking both.", "annotations": []}}),
        json!({"type": "response.output_item.done", "sequence_number": 15, "output_index": 1,
               "item": final_output[1]}),
        json!({"type": "response.output_item.added", "sequence_number": 16, "output_index": 2,
               "item": fc("fc_1", "call_P", "")}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 17,
               "item_id": "fc_1", "output_index": 2, "delta": "{\"ci"}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 18,
               "item_id": "fc_1", "output_index": 2, "delta": "ty\":\"Par"}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 19,
               "item_id": "fc_1", "output_index": 2, "delta": "is\"}"}),
        json!({"type": "response.function_call_arguments.done", "sequence_number": 20,
               "item_id": "fc_1", "output_index": 2, "arguments": "{\"city\":\"Paris\"}"}),
        json!({"type": "response.output_item.done", "sequence_number": 21, "output_index": 2,
               "item": final_output[2]}),
        json!({"type": "response.output_item.added", "sequence_number": 22, "output_index": 3,
               "item": fc("fc_2", "call_R", "")}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 23,
               "item_id": "fc_2", "output_index": 3, "delta": "{\"city\": "}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 24,
               "item_id": "fc_2", "output_index": 3, "delta": "\"Rome\"}"}),
        json!({"type": "response.function_call_arguments.done", "sequence_number": 25,
               "item_id": "fc_2", "output_index": 3, "arguments": "{\"city\": \"Rome\"}"}),
        json!({"type": "response.output_item.done", "sequence_number": 26, "output_index": 3,
               "item": final_output[3]}),
        json!({"type": "response.completed", "sequence_number": 27,
               "response": resp("completed", final_output.clone(), json!({
                   "input_tokens": 120, "input_tokens_details": {"cached_tokens": 64},
                   "output_tokens": 90, "output_tokens_details": {"reasoning_tokens": 40},
                   "total_tokens": 210}))}),
    ]
}

fn check_recorded(events: &[ModelEvent]) {
    let r = done(events);
    assert_eq!(r.response_id.as_deref(), Some("resp_1"));
    assert_eq!(r.model.as_deref(), Some("gpt-5-2025-08-07"));
    assert_eq!(r.reasoning, "**Plan** check\n\nboth");
    assert_eq!(r.text, "Checking both.");
    assert_eq!(
        r.tool_calls,
        [
            call("call_P", "get_weather", "{\"city\":\"Paris\"}"),
            call("call_R", "get_weather", "{\"city\": \"Rome\"}"),
        ]
    );
    assert_eq!(r.finish_reason.as_deref(), Some("completed"));
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 120,
            output_tokens: 90,
            cache_read_tokens: 64,
            cache_write_tokens: 0,
            reasoning_tokens: 40,
        })
    );
}

#[test]
fn a_recorded_stream_with_reasoning_text_and_two_calls() {
    let (events, r) = run_values(&recorded());
    r.unwrap();
    check_recorded(&events);
    // Each piece is reported once, in stream order: the done events and the final output
    // repeat what the deltas carried.
    let steps: Vec<String> = events
        .iter()
        .map(|e| match e {
            ModelEvent::TextDelta(t) => format!("text {t}"),
            ModelEvent::ReasoningDelta(t) => format!("reasoning {t}"),
            ModelEvent::ToolCallStart { index, id, name } => format!("start {index} {id} {name}"),
            ModelEvent::ToolCallDelta {
                index,
                arguments_delta,
                ..
            } => format!("args {index} {arguments_delta}"),
            ModelEvent::Usage(u) => format!("usage {}", u.input_tokens),
            ModelEvent::Done(_) => "done".into(),
        })
        .collect();
    assert_eq!(
        steps,
        [
            "reasoning **Plan**",
            "reasoning  check",
            "reasoning \n\n",
            "reasoning both",
            "text Checking",
            "text  both.",
            "start 0 call_P get_weather",
            "args 0 {\"ci",
            "args 0 ty\":\"Par",
            "args 0 is\"}",
            "start 1 call_R get_weather",
            "args 1 {\"city\": ",
            "args 1 \"Rome\"}",
            "usage 120",
            "done",
        ]
    );
}

#[test]
fn the_recorded_stream_through_the_decoder_whatever_the_split() {
    let mut bytes = Vec::new();
    for (name, data) in typed(&recorded()) {
        bytes.extend_from_slice(format!("event: {name}\ndata: {data}\n\n").as_bytes());
    }
    for split in [1, 7, 64, bytes.len()] {
        let mut d = ResponseDecoder::new(
            StreamDialect::OpenAiResponses,
            SseLimits::default(),
            "call_",
        );
        let mut events = Vec::new();
        for piece in bytes.chunks(split) {
            d.push(piece, &mut events).unwrap();
        }
        d.finish(&mut events).unwrap();
        check_recorded(&events);
    }
}

#[test]
fn done_events_and_the_final_output_fill_in_what_no_delta_carried() {
    // No deltas at all: each item only in its done event.
    let (events, r) = run_values(&[
        json!({"type": "response.output_item.done", "output_index": 0,
               "item": {"type": "reasoning", "id": "rs", "summary": [],
                        "content": [{"type": "reasoning_text", "text": "think"}]}}),
        json!({"type": "response.output_text.done", "item_id": "m", "output_index": 1,
               "content_index": 0, "text": "Hel"}),
        json!({"type": "response.output_item.done", "output_index": 1,
               "item": {"type": "message", "id": "m",
                        "content": [{"type": "output_text", "text": "Hello"}]}}),
        json!({"type": "response.output_item.done", "output_index": 2,
               "item": {"type": "function_call", "id": "fc", "call_id": "c1", "name": "f",
                        "arguments": "{}"}}),
        json!({"type": "response.completed", "response": {"id": "r", "status": "completed",
               "output": [{"type": "function_call", "id": "fc", "call_id": "c1", "name": "f",
                           "arguments": "{}"},
                          {"type": "function_call", "id": "fc2", "call_id": "c2", "name": "g",
                           "arguments": {"k": 1}}]}}),
    ]);
    r.unwrap();
    let resp = done(&events);
    assert_eq!(resp.reasoning, "think");
    assert_eq!(resp.text, "Hello");
    assert_eq!(
        resp.tool_calls,
        [call("c1", "f", "{}"), call("c2", "g", "{\"k\":1}")]
    );
    assert_eq!(resp.usage, None);
    // A bare `response.completed` (no item events) carries the whole answer.
    let (events, r) = run_values(&[json!({"type": "response.completed", "response": {
        "output": [{"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}],
        "usage": {"input_tokens": 3, "output_tokens": 1}}})]);
    r.unwrap();
    assert_eq!(done(&events).text, "No.");
    assert_eq!(done(&events).usage.unwrap().output_tokens, 1);
}

#[test]
fn events_named_only_by_the_sse_field_and_arguments_before_their_item() {
    let (events, r) = run(&[
        (
            "response.function_call_arguments.delta",
            r#"{"output_index":0,"delta":"{\"a\""}"#,
        ),
        (
            "response.function_call_arguments.delta",
            r#"{"output_index":0,"delta":":1}"}"#,
        ),
        (
            "response.output_item.done",
            r#"{"output_index":0,"item":{"type":"function_call","call_id":"late","name":"t","arguments":"{\"a\":1}"}}"#,
        ),
        ("response.output_text.delta", r#"{"delta":"hi"}"#),
        (
            "response.completed",
            r#"{"response":{"status":"completed"}}"#,
        ),
    ]);
    r.unwrap();
    let resp = done(&events);
    // The id came too late to name the call: it keeps its own (sent back consistently).
    assert_eq!(resp.tool_calls, [call("call_1", "t", "{\"a\":1}")]);
    assert_eq!(resp.text, "hi");
}

#[test]
fn a_non_streamed_response_body() {
    let body = json!({
        "id": "resp_9", "object": "response", "status": "completed", "model": "gpt-4.1",
        "output": [
            {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "s"}]},
            {"type": "message", "id": "m", "role": "assistant",
             "content": [{"type": "output_text", "text": "One"},
                         {"type": "output_text", "text": " two"}]},
            {"type": "function_call", "id": "fc", "call_id": "call_x", "name": "f",
             "arguments": "{\"q\":1}"}
        ],
        "usage": {"input_tokens": 5, "output_tokens": 6,
                  "output_tokens_details": {"reasoning_tokens": 2}}
    });
    let (events, r) = run(&[("", &body.to_string())]);
    r.unwrap();
    let resp = done(&events);
    assert_eq!(resp.response_id.as_deref(), Some("resp_9"));
    assert_eq!(resp.reasoning, "s");
    assert_eq!(resp.text, "One two");
    assert_eq!(resp.tool_calls, [call("call_x", "f", "{\"q\":1}")]);
    assert_eq!(resp.usage.unwrap().reasoning_tokens, 2);
    // Through a whole call answered with a JSON body.
    use crate::model::call::{CallConfig, CallOutput, ModelCall};
    use crate::model::http::{HttpMethod, HttpRequest};
    use crate::Timestamp;
    let now = Timestamp::from_millis(1);
    let request = HttpRequest {
        method: HttpMethod::Post,
        url: "http://h/v1/responses".into(),
        headers: vec![],
        body: bytes::Bytes::new(),
    };
    let mut c = ModelCall::new(
        now,
        request,
        StreamDialect::OpenAiResponses,
        "m",
        CallConfig::default(),
    );
    assert!(matches!(c.poll(), Some(CallOutput::Send(_))));
    c.handle_response(
        now,
        200,
        &[("Content-Type".into(), "application/json".into())],
    );
    let pretty = serde_json::to_vec_pretty(&body).unwrap();
    c.handle_body(now, &pretty);
    c.handle_end(now);
    let outputs: Vec<CallOutput> = std::iter::from_fn(|| c.poll()).collect();
    let Some(CallOutput::Event(ModelEvent::Done(r))) = outputs.last() else {
        panic!("{outputs:?}")
    };
    assert_eq!(r.text, "One two");
}

#[test]
fn failures_reported_by_the_endpoint() {
    let cases: &[(&[Value], &str)] = &[
        (
            &[json!({"type": "error", "code": "rate_limit_exceeded",
                     "message": "Slow down", "param": null})],
            "Slow down (rate_limit_exceeded)",
        ),
        (
            &[json!({"type": "error", "error": {"type": "server_error", "message": "Boom"}})],
            "Boom",
        ),
        (
            &[
                json!({"type": "response.output_text.delta", "output_index": 0, "delta": "x"}),
                json!({"type": "response.failed", "response": {"status": "failed",
                       "error": {"code": "server_error", "message": "The model crashed"}}}),
            ],
            "The model crashed",
        ),
        (
            &[json!({"type": "response.failed", "response": {"error": null}})],
            "response failed",
        ),
        (
            &[
                json!({"type": "response.incomplete", "response": {"status": "incomplete",
                     "incomplete_details": {"reason": "max_output_tokens"}, "output": [
                         {"type": "reasoning", "summary": []}]}}),
            ],
            "incomplete: max_output_tokens",
        ),
        (&[json!({"type": "response.cancelled"})], "cancelled"),
        (
            &[json!({"error": {"message": "Invalid schema for function", "code": null}})],
            "Invalid schema for function",
        ),
    ];
    for (events, expected) in cases {
        let (_, r) = run_values(events);
        let e = r.unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::ProviderError, "{e}");
        assert!(e.message.contains(expected), "{e} lacks {expected}");
    }
    let (_, r) = run(&[("response.output_text.delta", "{\"delta\":")]);
    let e = r.unwrap_err();
    assert_eq!(e.kind, ModelErrorKind::MalformedStream);
    assert!(e.message.contains("not valid JSON"), "{e}");
}

#[test]
fn an_incomplete_answer_with_text_is_delivered_with_its_reason() {
    let (events, r) = run_values(&[
        json!({"type": "response.output_text.delta", "item_id": "m", "output_index": 0,
               "delta": "Partial"}),
        json!({"type": "response.incomplete", "response": {"status": "incomplete",
               "incomplete_details": {"reason": "max_output_tokens"},
               "usage": {"input_tokens": 1, "output_tokens": 2}}}),
    ]);
    r.unwrap();
    let resp = done(&events);
    assert_eq!(resp.text, "Partial");
    assert_eq!(resp.finish_reason.as_deref(), Some("max_output_tokens"));
}

#[test]
fn a_cut_stream_is_an_error() {
    let all = typed(&recorded());
    let pairs: Vec<(&str, &str)> = all.iter().map(|(n, d)| (n.as_str(), d.as_str())).collect();
    let (events, r) = run(&pairs[..pairs.len() - 1]);
    assert_eq!(r.unwrap_err().kind, ModelErrorKind::StreamCut);
    assert!(!events.iter().any(|e| matches!(e, ModelEvent::Done(_))));
    // `[DONE]` does not complete a response that never said so.
    let (_, r) = run(&[
        ("", r#"{"type":"response.output_text.delta","delta":"a"}"#),
        ("", "[DONE]"),
    ]);
    assert_eq!(r.unwrap_err().kind, ModelErrorKind::StreamCut);
    // After the response completed, `[DONE]` and anything else are ignored.
    let mut s = ResponsesStream::new("c");
    let mut out = Vec::new();
    s.on_event(
        None,
        r#"{"type":"response.completed","response":{}}"#,
        &mut out,
    )
    .unwrap();
    assert!(s.is_done());
    s.on_event(None, "[DONE]", &mut out).unwrap();
    s.on_event(None, "junk", &mut out).unwrap();
    s.on_end(&mut out).unwrap();
    assert_eq!(out.len(), 1);
}

#[test]
fn odd_types_and_unknown_events_are_ignored() {
    let (events, r) = run(&[
        ("", r#"{"type":"response.created","response":"nope"}"#),
        (
            "",
            r#"{"type":"response.output_text.delta","output_index":"x","delta":7}"#,
        ),
        (
            "",
            r#"{"type":"response.output_text.delta","output_index":-1,"delta":"a"}"#,
        ),
        ("", r#"{"type":"response.output_item.added","item":[1,2]}"#),
        (
            "",
            r#"{"type":"response.output_item.done","item":{"type":"message","content":"x"}}"#,
        ),
        (
            "",
            r#"{"type":"response.web_search_call.searching","output_index":3}"#,
        ),
        (
            "",
            r#"{"type":"response.function_call_arguments.done","arguments":null}"#,
        ),
        ("", r#"{"hello":"world"}"#),
        (
            "",
            r#"{"type":"response.completed","response":{"usage":{"input_tokens":"4"},"output":7}}"#,
        ),
    ]);
    r.unwrap();
    let resp = done(&events);
    assert_eq!(resp.text, "a");
    assert_eq!(resp.usage.unwrap().input_tokens, 4);
}

/// Pieces of events: known types with fields of every kind, in any order.
fn junk_event() -> impl Strategy<Value = String> {
    let kind = prop::sample::select(vec![
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.refusal.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.completed",
        "response.incomplete",
        "error",
        "",
    ]);
    let value = prop::sample::select(vec![
        "null",
        "0",
        "1",
        "-1",
        "1e40",
        "\"\"",
        "\"x\"",
        "\"{\\\"a\\\"\"",
        "[]",
        "{}",
        "[{}]",
        r#"{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}"#,
        r#"{"type":"message","id":"m","content":[{"type":"output_text","text":"t"}]}"#,
        r#"{"type":"reasoning","summary":[{"text":"s"},7]}"#,
        r#"{"status":"completed","output":[{"type":"message","content":[{"text":"z"}]}],"usage":{"input_tokens":1}}"#,
        r#"{"status":"incomplete","incomplete_details":{"reason":7}}"#,
    ]);
    let field = prop::sample::select(vec![
        "delta",
        "text",
        "arguments",
        "name",
        "output_index",
        "content_index",
        "summary_index",
        "item_id",
        "item",
        "response",
        "message",
        "code",
        "error",
        "object",
    ]);
    (kind, prop::collection::vec((field, value), 0..5)).prop_map(|(kind, fields)| {
        let mut text = String::from("{");
        if !kind.is_empty() {
            text.push_str(&format!("\"type\":\"{kind}\""));
        }
        for (i, (f, v)) in fields.iter().enumerate() {
            if i > 0 || !kind.is_empty() {
                text.push(',');
            }
            text.push_str(&format!("\"{f}\":{v}"));
        }
        text.push('}');
        text
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Junk never panics, and a response is done at most once.
    #[test]
    fn junk_never_panics(events in prop::collection::vec(junk_event(), 0..24)) {
        let mut s = ResponsesStream::new("call_");
        let mut out = Vec::new();
        for e in &events {
            if s.on_event(None, e, &mut out).is_err() {
                break;
            }
        }
        let _ = s.on_end(&mut out);
        let dones = out.iter().filter(|e| matches!(e, ModelEvent::Done(_))).count();
        prop_assert!(dones <= 1);
    }

    /// Arbitrary text never panics either.
    #[test]
    fn arbitrary_text_never_panics(data in ".{0,200}", name in prop::option::of("[a-z._]{0,30}")) {
        let mut s = ResponsesStream::new("call_");
        let mut out = Vec::new();
        let _ = s.on_event(name.as_deref(), &data, &mut out);
        let _ = s.on_end(&mut out);
    }
}

#[test]
fn reasoning_parts_no_delta_carried_are_added_from_the_item() {
    let (events, r) = run_values(&[
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs",
               "output_index": 0, "summary_index": 0, "delta": "one"}),
        json!({"type": "response.output_item.done", "output_index": 0,
               "item": {"type": "reasoning", "id": "rs",
                        "summary": [{"type": "summary_text", "text": "one"}, 5,
                                    {"type": "summary_text", "text": "three"}],
                        "content": [{"type": "reasoning_text", "text": "raw"}]}}),
        json!({"type": "response.completed", "response": {}}),
    ]);
    r.unwrap();
    assert_eq!(done(&events).reasoning, "one\n\nthree");
    // Raw reasoning text that streamed is not joined by the summary.
    let (events, r) = run_values(&[
        json!({"type": "response.reasoning_text.delta", "item_id": "rs",
               "output_index": 0, "content_index": 0, "delta": "raw"}),
        json!({"type": "response.output_item.done", "output_index": 0,
               "item": {"type": "reasoning", "id": "rs",
                        "summary": [{"type": "summary_text", "text": "sum"}],
                        "content": [{"type": "reasoning_text", "text": "raw"}]}}),
        json!({"type": "response.completed", "response": {}}),
    ]);
    r.unwrap();
    assert_eq!(done(&events).reasoning, "raw");
}
