//! The fake model endpoint (`testkit/src/fake_model.rs`) in every mode, driven by a plain
//! `TcpStream` client that sends the requests `agentwire::model` builds and feeds the answers
//! back into a `ModelCall`, the way a runtime will.

use crate::support::fake_model;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use agentwire::model::{
    build_chat_request, build_models_request, parse_models_response, CallConfig, CallOutput,
    ChatMessage, ChatRequest, HttpRequest, ModelCall, ModelErrorKind, ModelEvent, ModelResponse,
    ProviderConfig, StreamDialect, ToolCall,
};
use agentwire::Timestamp;
use fake_model::{FakeMode, FakeModel};
use serde_json::json;

/// A raw HTTP answer.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    /// The body, de-chunked as far as it was complete.
    body: Vec<u8>,
    /// The chunked body ended with its terminating chunk.
    complete: bool,
    /// Reading stopped on the read timeout (the server went silent).
    stalled: bool,
}

/// Sends `request` over a fresh connection and reads until EOF or 400 ms of silence.
fn exchange(fake: &FakeModel, request: &HttpRequest) -> Answer {
    let mut stream = TcpStream::connect(fake.addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(400)))
        .unwrap();
    let path = &request.url[request.url.find("/v1").unwrap()..];
    let mut head = format!(
        "{} {path} HTTP/1.1\r\nHost: {}\r\n",
        request.method,
        fake.addr()
    );
    for h in &request.headers {
        head.push_str(&format!("{}: {}\r\n", h.name, h.value));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", request.body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&request.body).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let stalled = loop {
        match stream.read(&mut buf) {
            Ok(0) => break false,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break true
            }
            Err(e) => panic!("read: {e}"),
        }
    };
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head")
        + 4;
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &raw[split..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v == "chunked");
    if !chunked {
        return Answer {
            status,
            headers,
            body: rest.to_vec(),
            complete: true,
            stalled,
        };
    }
    let (mut body, mut pos, mut complete) = (Vec::new(), 0, false);
    while let Some(eol) = rest[pos..].windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[pos..pos + eol]).unwrap(), 16).unwrap();
        let start = pos + eol + 2;
        if size == 0 {
            complete = true;
            break;
        }
        if rest.len() < start + size + 2 {
            break;
        }
        body.extend_from_slice(&rest[start..start + size]);
        pos = start + size + 2;
    }
    Answer {
        status,
        headers,
        body,
        complete,
        stalled,
    }
}

fn provider(fake: &FakeModel) -> ProviderConfig {
    ProviderConfig::from_json(
        &json!({"type": "openai", "baseUrl": fake.base_url(), "apiKey": "sk-fake"}),
    )
    .unwrap()
}

fn user(prompt: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::System("Be brief.".into()),
        ChatMessage::User(prompt.into()),
    ]
}

/// Runs one `ModelCall` against the fake, performing every `Send` (retries included) and
/// firing deadlines when the fake goes silent. Returns the outputs after the first `Send`.
fn call(fake: &FakeModel, messages: &[ChatMessage]) -> Vec<CallOutput> {
    let request = build_chat_request(
        &provider(fake),
        &ChatRequest::new(Some("fake-model"), messages, &[]),
        None,
    )
    .unwrap();
    let config = CallConfig {
        idle_timeout: Duration::from_millis(300),
        ..CallConfig::default()
    };
    let mut now = Timestamp::from_millis(1_000);
    let mut call = ModelCall::new(
        now,
        request,
        StreamDialect::OpenAiChat,
        "fake-model",
        config,
    );
    let mut outputs = Vec::new();
    while !call.is_finished() {
        match call.poll() {
            Some(CallOutput::Send(request)) => {
                let answer = exchange(fake, &request);
                call.handle_response(now, answer.status, &answer.headers);
                call.handle_body(now, &answer.body);
                if answer.stalled {
                    now = call.next_deadline().unwrap();
                    call.handle_timeout(now);
                } else if answer.complete {
                    call.handle_end(now);
                } else {
                    call.handle_transport_error(
                        now,
                        agentwire::model::TransportErrorKind::Io,
                        "unexpected end of chunked body",
                    );
                }
            }
            Some(other) => outputs.push(other),
            None => {
                now = call.next_deadline().expect("an active call has a deadline");
                call.handle_timeout(now);
            }
        }
    }
    outputs.extend(std::iter::from_fn(|| call.poll()));
    outputs
}

fn done(outputs: &[CallOutput]) -> &ModelResponse {
    match outputs.last() {
        Some(CallOutput::Event(ModelEvent::Done(r))) => r,
        other => panic!("not done: {other:?} in {outputs:?}"),
    }
}

fn failure(outputs: &[CallOutput]) -> ModelErrorKind {
    match outputs.last() {
        Some(CallOutput::Failed(e)) => e.kind,
        other => panic!("not failed: {other:?} in {outputs:?}"),
    }
}

#[test]
fn text_mode_streams_the_answer_and_records_the_request() {
    let fake = FakeModel::start(FakeMode::Text);
    let out = call(&fake, &user("What is the weather in Paris?"));
    let r = done(&out);
    assert_eq!(r.text, "It is sunny in Paris.");
    assert_eq!(r.usage.map(|u| u.output_tokens), Some(5));
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-fake"));
    let body = &fake.completion_bodies()[0];
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "What is the weather in Paris?"})
    );
}

#[test]
fn tool_modes_ask_for_calls_then_answer_after_the_results() {
    for (mode, cities) in [
        (FakeMode::ToolCall, vec!["Paris"]),
        (FakeMode::TwoToolCalls, vec!["Paris", "Lyon"]),
    ] {
        let fake = FakeModel::start(mode);
        let mut messages = user("weather?");
        let r = done(&call(&fake, &messages)).clone();
        let expected: Vec<ToolCall> = cities
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: format!("call_{}", i + 1),
                name: "get_weather".into(),
                arguments: json!({"city": c}).to_string(),
            })
            .collect();
        assert_eq!(r.tool_calls, expected, "{mode:?}");
        messages.push(ChatMessage::Assistant {
            content: None,
            tool_calls: r.tool_calls.clone(),
        });
        for c in &r.tool_calls {
            messages.push(ChatMessage::Tool {
                tool_call_id: c.id.clone(),
                content: "sunny".into(),
            });
        }
        assert_eq!(done(&call(&fake, &messages)).text, "It is sunny in Paris.");
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 2);
        assert_eq!(bodies[1]["messages"][2]["tool_calls"][0]["id"], "call_1");
        assert_eq!(
            bodies[1]["messages"].as_array().unwrap().last().unwrap()["role"],
            "tool"
        );
    }
}

#[test]
fn reasoning_and_no_usage_modes() {
    let fake = FakeModel::start(FakeMode::Reasoning);
    let r = done(&call(&fake, &user("hi"))).clone();
    assert_eq!(r.reasoning, "The user asks about Paris.");
    assert_eq!(r.text, "It is sunny in Paris.");
    fake.set_mode(FakeMode::NoUsage);
    let r = done(&call(&fake, &user("hi"))).clone();
    assert_eq!((r.text.as_str(), r.usage), ("It is sunny in Paris.", None));
}

#[test]
fn a_429_is_retried_and_then_succeeds() {
    let fake = FakeModel::start(FakeMode::RateLimitedOnce);
    let out = call(&fake, &user("hi"));
    assert!(
        out.iter()
            .any(|o| matches!(o, CallOutput::Retrying { attempt: 2, .. })),
        "{out:?}"
    );
    assert_eq!(done(&out).text, "It is sunny in Paris.");
    assert_eq!(
        fake.completion_bodies().len(),
        2,
        "the request was sent twice"
    );
}

#[test]
fn faults_become_clear_errors() {
    let fake = FakeModel::start(FakeMode::ServerError);
    let out = call(&fake, &user("hi"));
    assert_eq!(failure(&out), ModelErrorKind::ServerError);
    assert_eq!(fake.completion_bodies().len(), 4, "1 attempt + 3 retries");
    for (mode, kind) in [
        (FakeMode::CutMidStream, ModelErrorKind::StreamCut),
        (FakeMode::Stall, ModelErrorKind::Stalled),
        (FakeMode::MalformedChunk, ModelErrorKind::MalformedStream),
    ] {
        let fake = FakeModel::start(mode);
        let out = call(&fake, &user("hi"));
        assert!(
            matches!(&out[0], CallOutput::Event(ModelEvent::TextDelta(t)) if t == "It is "),
            "{mode:?}: what arrived before the fault is kept: {out:?}"
        );
        assert_eq!(failure(&out), kind, "{mode:?}");
    }
}

#[test]
fn models_and_unknown_paths() {
    let fake = FakeModel::start(FakeMode::Text);
    let answer = exchange(
        &fake,
        &build_models_request(&provider(&fake), None).unwrap(),
    );
    assert_eq!(answer.status, 200);
    assert_eq!(
        parse_models_response(&answer.body).unwrap()[0].id,
        "fake-model"
    );
    let mut wrong = build_models_request(&provider(&fake), None).unwrap();
    wrong.url = format!("{}/nope", fake.base_url());
    assert_eq!(exchange(&fake, &wrong).status, 404);
    assert_eq!(fake.requests().len(), 2);
}
