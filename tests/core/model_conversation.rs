//! Replays the recorded BYOK conversations: the session events the real runtime persisted
//! (`wire.jsonl`, `wire-py.jsonl`, `wire2.jsonl`) must rebuild, through `agentwire::model`,
//! the message sequences the runtime sent to the model (`model-requests.jsonl`): roles,
//! contents, tool calls, tool-call ids and results, ignoring only the system prompt and the
//! tools list. The request built from the session's `provider` must also have the recorded
//! URL and body parameters.

use std::path::PathBuf;

use agentwire::model::{
    build_chat_request, messages_from_events, openai_messages_json, user_message_content,
    ChatMessage, ChatRequest, ProviderConfig, ToolSpec,
};
use serde_json::Value;

fn traces_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces")
}

fn read_jsonl(file: &str) -> Vec<Value> {
    let path = traces_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The session events a trace's client received, in order, each once (`wire2.jsonl` carries
/// every event twice, once per connection).
fn session_events(file: &str) -> Vec<(String, Value)> {
    let mut seen = std::collections::HashSet::new();
    read_jsonl(file)
        .into_iter()
        .filter(|r| r["dir"] == "server->client" && r["msg"]["method"] == "session.event")
        .map(|r| r["msg"]["params"]["event"].clone())
        .filter(|e| seen.insert(e["id"].as_str().unwrap_or_default().to_owned()))
        .map(|e| (e["type"].as_str().unwrap().to_owned(), e["data"].clone()))
        .collect()
}

/// The `session.create` params a trace's client sent.
fn create_params(file: &str) -> Value {
    read_jsonl(file)
        .into_iter()
        .find(|r| r["msg"]["method"] == "session.create")
        .expect("a session.create")["msg"]["params"]
        .clone()
}

/// The persisted history in front of model call `n` (0-based): every event before the
/// `n+1`-th `assistant.turn_start`.
fn history_before_call(events: &[(String, Value)], n: usize) -> Vec<(String, Value)> {
    let mut starts = 0;
    let mut out = Vec::new();
    for (kind, data) in events {
        if kind == "assistant.turn_start" {
            if starts == n {
                return out;
            }
            starts += 1;
        }
        out.push((kind.clone(), data.clone()));
    }
    panic!("the trace has only {starts} model calls");
}

fn datetime_of(user_content: &str) -> &str {
    let rest = user_content
        .strip_prefix("<current_datetime>")
        .expect("a datetime prefix");
    &rest[..rest.find("</current_datetime>").expect("its end")]
}

/// Rebuilds model call `n` of `wire_file` and compares it with the recorded request `recorded`.
fn replay(wire_file: &str, n: usize, recorded: &Value) {
    let events = history_before_call(&session_events(wire_file), n);
    // The datetime is an input: the model requests were recorded in a later run of the same
    // scenario, so the user message is re-made at the recorded request's time, the way the
    // runtime wrote it into `transformedContent` (checked against the trace's own just below).
    let recorded_messages = recorded["body"]["messages"].as_array().unwrap();
    let datetime = datetime_of(recorded_messages[1]["content"].as_str().unwrap()).to_owned();
    let events: Vec<(String, Value)> = events
        .into_iter()
        .map(|(kind, mut data)| {
            if kind == "user.message" {
                let prompt = data["content"].as_str().unwrap().to_owned();
                let own = data["transformedContent"].as_str().unwrap();
                assert_eq!(
                    own,
                    user_message_content(datetime_of(own), &prompt),
                    "{wire_file}"
                );
                data["transformedContent"] =
                    Value::String(user_message_content(&datetime, &prompt));
            }
            (kind, data)
        })
        .collect();
    let messages = messages_from_events(events.iter().map(|(k, d)| (k.as_str(), d)), None);
    assert!(
        matches!(&messages[0], ChatMessage::System(s) if s.starts_with("You are GitHub Copilot")),
        "the persisted system.message comes first"
    );
    let ours = openai_messages_json(&messages);
    assert_eq!(recorded_messages[0]["role"], "system");
    assert_eq!(
        &ours.as_array().unwrap()[1..],
        &recorded_messages[1..],
        "{wire_file}, model call {n}: the message sequence differs from the recorded request {}",
        recorded["n"]
    );

    // The whole request, from the session's own provider, model and tools.
    let params = create_params(wire_file);
    let provider = ProviderConfig::from_json(&params["provider"]).unwrap();
    let tools: Vec<ToolSpec> = params["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| ToolSpec {
            name: t["name"].as_str().unwrap().into(),
            description: t["description"].as_str().unwrap().into(),
            parameters: t["parameters"].clone(),
        })
        .collect();
    let request = build_chat_request(
        &provider,
        &ChatRequest::new(params["model"].as_str(), &messages, &tools),
        None,
    )
    .unwrap();
    assert_eq!(request.method.as_str(), recorded["method"]);
    assert!(
        request.url.ends_with(recorded["url"].as_str().unwrap()),
        "{}",
        request.url
    );
    assert_eq!(request.header("authorization"), Some("Bearer sk-fake"));
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    for key in [
        "model",
        "temperature",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
        "stream",
        "stream_options",
    ] {
        let (a, b) = (&body[key], &recorded["body"][key]);
        let same = a == b || (a.as_f64().is_some() && a.as_f64() == b.as_f64());
        assert!(same, "{key}: ours {a}, recorded {b}");
    }
    let mut keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    let mut recorded_keys: Vec<&String> = recorded["body"].as_object().unwrap().keys().collect();
    keys.sort();
    recorded_keys.sort();
    assert_eq!(keys, recorded_keys, "the same body members, no more");
    // The client's tool is offered (the runtime's built-ins are not ours to copy).
    let last_tool = body["tools"].as_array().unwrap().last().unwrap();
    let recorded_last = recorded["body"]["tools"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(
        last_tool["function"]["name"],
        recorded_last["function"]["name"]
    );
    assert_eq!(
        last_tool["function"]["parameters"],
        recorded_last["function"]["parameters"]
    );
}

#[test]
fn recorded_conversations_replay_to_the_recorded_message_sequences() {
    let requests = read_jsonl("model-requests.jsonl");
    assert_eq!(requests.len(), 4);
    // Lines 1-2: the Node SDK run (wire.jsonl); lines 3-4: the Python SDK run (wire-py.jsonl).
    for (i, recorded) in requests.iter().enumerate() {
        let wire = if i < 2 { "wire.jsonl" } else { "wire-py.jsonl" };
        replay(wire, i % 2, recorded);
    }
}

#[test]
fn a_failed_client_tool_reaches_the_model_in_the_runtime_wording() {
    // wire2.jsonl: the tool handler failed; the runtime's debug event (line 124) shows the
    // text it gave the model.
    let events = session_events("wire2.jsonl");
    let expected = events
        .iter()
        .find(|(k, _)| k == "model.tool_execution")
        .map(|(_, d)| {
            d["toolResult"]["textResultForLlm"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .unwrap();
    assert_eq!(
        expected,
        "Failed to execute `get_weather` tool with arguments: {\"city\":\"Paris\"} due to error: Error: Tool execution failed"
    );
    let history = history_before_call(&events, 1);
    let messages = messages_from_events(history.iter().map(|(k, d)| (k.as_str(), d)), None);
    assert_eq!(
        messages.last(),
        Some(&ChatMessage::Tool {
            tool_call_id: "call_1".into(),
            content: expected
        })
    );
}
