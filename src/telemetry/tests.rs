use serde_json::{json, Value};

use super::*;

fn at(ms: u64) -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000 + ms)
}

/// One prompt that calls a tool, then answers: the spans it finishes, in order.
fn one_turn(capture: bool) -> Vec<Span> {
    let mut tracker = SpanTracker::new(7, capture);
    let mut out = Vec::new();
    let s = "s1";
    let events = [
        ("user.message", json!({"content": "say hi"})),
        ("assistant.turn_start", json!({"turnId": "0"})),
        (
            "assistant.message",
            json!({"content": "calling", "toolRequests": [
            {"toolCallId": "c1", "name": "echo", "arguments": {"value": "v"}}]}),
        ),
        (
            "assistant.usage",
            json!({"model": "m1", "inputTokens": 10, "outputTokens": 3}),
        ),
        (
            "tool.execution_start",
            json!({"toolCallId": "c1", "toolName": "echo",
                                        "arguments": {"value": "v"}}),
        ),
        (
            "tool.execution_complete",
            json!({"toolCallId": "c1", "success": true,
                                           "result": {"content": "v"}}),
        ),
        ("assistant.turn_end", json!({"turnId": "0"})),
        ("assistant.turn_start", json!({"turnId": "1"})),
        ("assistant.message", json!({"content": "hi"})),
        (
            "assistant.usage",
            json!({"model": "m1", "inputTokens": 12, "outputTokens": 1}),
        ),
        ("assistant.turn_end", json!({"turnId": "1"})),
        ("session.idle", json!({})),
    ];
    for (i, (kind, data)) in events.iter().enumerate() {
        tracker.observe(s, kind, data, at(i as u64 * 10), &mut out);
    }
    out
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
    span.attribute(key)
}

#[test]
fn a_prompt_is_one_trace_rooted_at_invoke_agent() {
    let spans = one_turn(true);
    let names: Vec<&str> = spans.iter().map(Span::name).collect();
    assert_eq!(
        names,
        ["execute_tool echo", "chat m1", "chat m1", "invoke_agent"]
    );
    let root = spans.last().unwrap();
    assert_eq!(root.parent_span_id(), None);
    assert_eq!(attr(root, "gen_ai.conversation.id"), Some(&json!("s1")));
    assert_eq!(attr(root, "github.copilot.turn_count"), Some(&json!(2)));
    assert_eq!(attr(root, "gen_ai.usage.input_tokens"), Some(&json!(22)));
    for span in &spans {
        assert_eq!(span.trace_id(), root.trace_id());
        assert!(!span.is_error());
        if span.name() != "invoke_agent" {
            assert_eq!(span.parent_span_id(), Some(root.span_id()));
        }
    }
}

#[test]
fn captured_content_shows_messages_arguments_and_results() {
    let spans = one_turn(true);
    let tool = &spans[0];
    assert_eq!(attr(tool, "gen_ai.tool.call.id"), Some(&json!("c1")));
    assert_eq!(
        attr(tool, "gen_ai.tool.call.arguments"),
        Some(&json!(r#"{"value":"v"}"#))
    );
    assert_eq!(attr(tool, "gen_ai.tool.call.result"), Some(&json!("v")));
    let first: Value = serde_json::from_str(
        attr(&spans[1], "gen_ai.input.messages")
            .unwrap()
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        first,
        json!([{"role": "user", "parts": [{"type": "text", "content": "say hi"}]}])
    );
    let second = attr(&spans[2], "gen_ai.input.messages")
        .unwrap()
        .as_str()
        .unwrap();
    assert!(second.contains("tool_call_response"), "{second}");
    let output = attr(&spans[2], "gen_ai.output.messages")
        .unwrap()
        .as_str()
        .unwrap();
    assert!(output.contains(r#""content":"hi""#), "{output}");
}

#[test]
fn without_capture_no_content_is_exported() {
    let spans = one_turn(false);
    for span in &spans {
        for key in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
            "github.copilot.user.message",
        ] {
            assert_eq!(attr(span, key), None, "{} has {key}", span.name());
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_ids_and_each_prompt_a_new_trace() {
    let a = one_turn(true);
    let b = one_turn(true);
    assert_eq!(a, b);
    let mut tracker = SpanTracker::new(7, false);
    let mut out = Vec::new();
    for i in 0..2 {
        tracker.observe(
            "s",
            "user.message",
            &json!({"content": "x"}),
            at(i),
            &mut out,
        );
        tracker.observe("s", "session.idle", &json!({}), at(i + 1), &mut out);
    }
    assert_eq!(out.len(), 2);
    assert_ne!(out[0].trace_id(), out[1].trace_id());
}

#[test]
fn a_failed_tool_and_a_session_error_end_in_error_and_close_what_is_open() {
    let mut tracker = SpanTracker::new(1, false);
    let mut out = Vec::new();
    tracker.observe(
        "s",
        "user.message",
        &json!({"content": "x"}),
        at(0),
        &mut out,
    );
    tracker.observe("s", "assistant.turn_start", &json!({}), at(1), &mut out);
    let start = json!({"toolCallId": "a", "toolName": "t"});
    tracker.observe("s", "tool.execution_start", &start, at(2), &mut out);
    let failed = json!({"toolCallId": "a", "success": false, "error": {"message": "no"}});
    tracker.observe("s", "tool.execution_complete", &failed, at(3), &mut out);
    tracker.observe(
        "s",
        "tool.execution_start",
        &json!({"toolCallId": "b", "toolName": "t"}),
        at(4),
        &mut out,
    );
    tracker.observe(
        "s",
        "session.error",
        &json!({"message": "boom"}),
        at(5),
        &mut out,
    );
    let errors: Vec<bool> = out.iter().map(Span::is_error).collect();
    assert_eq!(errors, [true, true, true, true], "{out:?}");
    assert_eq!(out.last().unwrap().name(), "invoke_agent");
    // Events of a session with no invocation under way make no span.
    tracker.observe("s", "tool.execution_complete", &failed, at(6), &mut out);
    assert_eq!(out.len(), 4);
}

#[test]
fn a_json_line_has_the_exporter_fields() {
    let spans = one_turn(true);
    let line = spans[0].to_json_line("scope-x", "1.2.3");
    assert!(line.ends_with('\n'));
    let v: Value = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(v["type"], "span");
    assert_eq!(v["instrumentationScope"]["name"], "scope-x");
    assert_eq!(v["traceId"].as_str().unwrap().len(), 32);
    assert_eq!(v["spanId"].as_str().unwrap().len(), 16);
    assert_eq!(v["parentSpanId"], spans[3].span_id());
    assert_eq!(v["status"]["code"], 0);
    assert_eq!(v["startTime"], json!([1_700_000_000, 40_000_000]));
    assert_eq!(v["attributes"]["gen_ai.operation.name"], "execute_tool");
    let root: Value = serde_json::from_str(spans[3].to_json_line("s", "v").trim_end()).unwrap();
    assert_eq!(root["parentSpanId"], "");
}
