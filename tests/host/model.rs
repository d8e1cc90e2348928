//! The model loop driven through the host's sans-IO API: BYOK sessions whose HTTP exchanges
//! are answered with recorded Chat Completions bytes (no sockets).

use std::time::Duration;

use agentwire::host::{Effect, EffectEvent, EffectId, EffectOp, HostConfig, Output};
use agentwire::model::{CallConfig, HttpRequest, ServerDefault, TransportErrorKind};
use serde_json::{json, Value};

use crate::support::*;

const KEY: &str = "sk-very-secret-key-123";

fn provider() -> Value {
    json!({"type": "openai", "baseUrl": "http://127.0.0.1:9/v1", "apiKey": KEY})
}

/// The next HTTP request the host asked for.
pub(crate) fn next_request(w: &mut World) -> (EffectId, HttpRequest) {
    loop {
        match w.host.poll_output() {
            Some(Output::Effect(Effect {
                id: call,
                op: EffectOp::HttpRequest(request),
            })) => return (call, request),
            Some(_) => continue,
            None => panic!("no HttpRequest output"),
        }
    }
}

fn outputs(w: &mut World) -> Vec<Output> {
    std::iter::from_fn(|| w.host.poll_output()).collect()
}

fn sse(chunks: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunks {
        out.extend_from_slice(format!("data: {c}\n\n").as_bytes());
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

pub(crate) fn text_stream(id: &str, parts: &[&str]) -> Vec<u8> {
    let mut chunks: Vec<Value> = parts
        .iter()
        .map(|p| json!({"id": id, "choices": [{"index": 0, "delta": {"content": p}}]}))
        .collect();
    chunks.push(json!({"id": id, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    chunks.push(
        json!({"id": id, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
    );
    sse(&chunks)
}

pub(crate) fn tool_stream(id: &str) -> Vec<u8> {
    sse(&[
        json!({"id": id, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}}]}),
        json!({"id": id, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Paris\"}"}}]}}]}),
        json!({"id": id, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ])
}

/// Answers exchange `call` with a 200 event stream, split into small chunks.
pub(crate) fn answer(w: &mut World, call: EffectId, body: &[u8], peers: &mut [&mut Peer]) {
    w.now = w.now.saturating_add(Duration::from_millis(5));
    let headers = [("content-type".to_owned(), "text/event-stream".to_owned())];
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpHead {
            status: 200,
            headers: headers.to_vec(),
        },
    );
    for piece in body.chunks(7) {
        w.host
            .handle_effect(w.now, call, EffectEvent::HttpBody(piece.to_vec()));
    }
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(peers);
}

/// Answers session `s`'s (latest) permission prompt with `kind`.
pub(crate) fn answer_permission(w: &mut World, p: &mut Peer, kind: &str) {
    let perm = p.event("s", "permission.requested");
    let rid = perm["data"]["requestId"].as_str().unwrap().to_owned();
    w.call(
        p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId": "s", "requestId": rid, "result": {"kind": kind}}),
    );
}

/// Approves (once) session `s`'s most recent permission prompt.
fn approve_latest_permission(w: &mut World, p: &mut Peer) {
    let asked = p
        .events("s")
        .into_iter()
        .rev()
        .find(|e| e["type"] == "permission.requested")
        .expect("a permission prompt");
    w.call(
        p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId": "s", "requestId": asked["data"]["requestId"],
               "result": {"kind": "approve-once"}}),
    );
}

/// Answers session `s`'s (latest) client tool request with `result`; returns the request.
pub(crate) fn answer_external_tool(w: &mut World, p: &mut Peer, result: &str) -> Value {
    let req = p.event("s", "external_tool.requested");
    let tool_rid = req["data"]["requestId"].as_str().unwrap().to_owned();
    w.call(
        p,
        &mut [],
        "session.tools.handlePendingToolCall",
        json!({"sessionId": "s", "requestId": tool_rid, "result": result}),
    );
    req
}

/// A session with a client weather tool whose first prompt ("Weather?") is waiting for its
/// model call: the world, the client, and that call's exchange.
pub(crate) fn weather_turn() -> (World, Peer, EffectId) {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "tools": weather_tool()}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Weather?"}),
    );
    let (call, _) = next_request(&mut w);
    (w, p, call)
}

pub(crate) fn messages(request: &HttpRequest) -> Vec<Value> {
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    body["messages"].as_array().unwrap().clone()
}

#[test]
fn streamed_answer_reaches_the_client() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "streaming": true}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (call, request) = next_request(&mut w);
    assert_eq!(request.url, "http://127.0.0.1:9/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "m1");
    assert_eq!(body["stream"], true);
    let msgs = messages(&request);
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(msgs[1]["role"], "user");
    let user = msgs[1]["content"].as_str().unwrap();
    assert!(
        user.starts_with("<current_datetime>") && user.ends_with("\n\nhi"),
        "{user}"
    );
    answer(
        &mut w,
        call,
        &text_stream("chatcmpl-1", &["Hel", "lo!"]),
        &mut [&mut p],
    );
    let types = p.types("s");
    assert!(
        only_subsequence(
            &types,
            &[
                "user.message",
                "system.message",
                "assistant.turn_start",
                "assistant.streaming_delta",
                "assistant.message_start",
                "assistant.message_delta",
                "assistant.message_delta",
                "assistant.usage",
                "assistant.message",
                "assistant.turn_end",
                "assistant.idle",
                "session.idle",
            ]
        ),
        "{types:?}"
    );
    let msg = p.event("s", "assistant.message");
    assert_eq!(msg["data"]["content"], "Hello!");
    assert_eq!(msg["data"]["apiCallId"], "chatcmpl-1");
    assert_eq!(msg["data"]["turnId"], "0");
    let start = p.event("s", "assistant.message_start");
    assert_eq!(start["data"]["messageId"], msg["data"]["messageId"]);
    let usage = p.event("s", "assistant.usage");
    assert_eq!(usage["data"]["inputTokens"], 10);
    assert_eq!(usage["data"]["initiator"], "user");
    assert_eq!(usage["ephemeral"], true);
    let turn = p.event("s", "assistant.turn_start");
    assert_eq!(turn["data"]["interactionId"], msg["data"]["interactionId"]);
    // Nothing the client saw carries the key.
    assert!(!serde_json::to_string(&p.inbox).unwrap().contains(KEY));
}

/// The only client leaves while its tool call is pending: the call stays pending. A client
/// that resumes with `continuePendingWork` answers it and the turn goes on; one that resumes
/// without it (nobody else had the session: `sessionWasActive: false`) interrupts it: the
/// turn ends without another model call and the next prompt shows the call interrupted.
#[test]
fn pending_tool_calls_outlive_their_client_until_a_resume_continues_or_interrupts_them() {
    for continue_work in [true, false] {
        let mut w = World::new(HostConfig::default());
        let mut p = w.connect();
        create(
            &mut w,
            &mut p,
            "s",
            json!({"provider": provider(), "model": "m1", "tools": weather_tool()}),
        );
        w.call(
            &mut p,
            &mut [],
            "session.send",
            json!({"sessionId": "s", "prompt": "Weather?"}),
        );
        let (call, _) = next_request(&mut w);
        answer(&mut w, call, &tool_stream("c1"), &mut [&mut p]);
        answer_permission(&mut w, &mut p, "approve-once");
        let req = p.event("s", "external_tool.requested");
        let request_id = req["data"]["requestId"].as_str().unwrap().to_owned();
        w.host.handle_eof(w.now, p.conn);
        w.pump(&mut []);
        assert!(
            w.host.poll_output().is_none(),
            "nothing runs while the call waits"
        );

        let mut q = w.connect();
        w.call(
            &mut q,
            &mut [],
            "session.resume",
            json!({"sessionId": "s", "continuePendingWork": continue_work,
                   "provider": provider(), "model": "m1"}),
        );
        let resume = q.event("s", "session.resume");
        assert_eq!(resume["data"]["sessionWasActive"], false);
        let answered = w.call(
            &mut q,
            &mut [],
            "session.tools.handlePendingToolCall",
            json!({"sessionId": "s", "requestId": request_id, "result": "sunny"}),
        );
        assert_eq!(answered["result"]["success"], continue_work, "{answered}");
        if continue_work {
            let (_, request) = next_request(&mut w);
            assert_eq!(messages(&request).last().unwrap()["content"], "sunny");
            continue;
        }
        assert!(q.types("s").iter().any(|t| t == "session.idle"));
        assert!(!q.types("s").iter().any(|t| t == "abort"));
        w.call(
            &mut q,
            &mut [],
            "session.send",
            json!({"sessionId": "s", "prompt": "again"}),
        );
        let (_, request) = next_request(&mut w);
        let msgs = messages(&request);
        let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
        assert!(
            tool["content"]
                .as_str()
                .unwrap()
                .ends_with("Session aborted"),
            "{tool}"
        );
    }
}

/// As the runtime: a prompt joins and leaves the queue (`pending_messages.modified` twice
/// before its `user.message`), and each model call reports its context usage
/// (`session.usage_info` after `assistant.turn_start`: the messages sent, estimated tokens,
/// the window; `isInitial` only on the session's first).
#[test]
fn prompts_report_the_queue_and_each_call_its_context_usage() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1"}),
    );
    for (round, prompt) in ["first", "second"].into_iter().enumerate() {
        w.call(
            &mut p,
            &mut [],
            "session.send",
            json!({"sessionId": "s", "prompt": prompt}),
        );
        let (call, _) = next_request(&mut w);
        answer(&mut w, call, &text_stream("c", &["ok"]), &mut [&mut p]);
        let types = p.types("s");
        let user_at = types.iter().rposition(|t| *t == "user.message").unwrap();
        assert_eq!(
            types[user_at - 2..user_at],
            ["pending_messages.modified", "pending_messages.modified"]
        );
        let info_at = types
            .iter()
            .rposition(|t| *t == "session.usage_info")
            .unwrap();
        assert_eq!(types[info_at - 1], "assistant.turn_start");
        let info = p
            .events("s")
            .into_iter()
            .rfind(|e| e["type"] == "session.usage_info")
            .unwrap();
        assert_eq!(info["ephemeral"], true);
        assert_eq!(info["data"]["isInitial"], round == 0);
        // system + user, then system + user + assistant + user.
        assert_eq!(info["data"]["messagesLength"], 2 + 2 * round);
        assert_eq!(info["data"]["tokenLimit"], 128_000);
        let current = info["data"]["currentTokens"].as_u64().unwrap();
        let system = info["data"]["systemTokens"].as_u64().unwrap();
        assert!(system > 0 && current > system, "{info}");
    }
}

#[test]
fn client_tool_round_trip_sends_the_result_back_in_order() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "tools": weather_tool()}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Weather?"}),
    );
    let (call, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    answer(&mut w, call, &tool_stream("chatcmpl-1"), &mut [&mut p]);
    let msg = p.event("s", "assistant.message");
    assert_eq!(
        msg["data"]["toolRequests"][0]["arguments"],
        json!({"city": "Paris"})
    );
    answer_permission(&mut w, &mut p, "approve-once");
    answer_external_tool(&mut w, &mut p, "sunny");
    let (call2, request2) = next_request(&mut w);
    let msgs = messages(&request2);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(msgs[2]["content"], Value::Null);
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(msgs[3]["tool_call_id"], "call_1");
    assert_eq!(msgs[3]["content"], "sunny");
    answer(
        &mut w,
        call2,
        &text_stream("chatcmpl-2", &["It is sunny."]),
        &mut [&mut p],
    );
    let finals: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "assistant.message")
        .collect();
    assert_eq!(finals.len(), 2);
    assert_eq!(finals[1]["data"]["content"], "It is sunny.");
    assert_eq!(finals[1]["data"]["turnId"], "1");
    let usages: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "assistant.usage")
        .collect();
    assert_eq!(usages[1]["data"]["initiator"], "agent");
    assert_eq!(p.types("s").last().unwrap(), "session.idle");
}

#[test]
fn abort_mid_stream_cancels_the_call_and_ends_the_turn() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "streaming": true}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (call, _) = next_request(&mut w);
    let headers = [("content-type".to_owned(), "text/event-stream".to_owned())];
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpHead {
            status: 200,
            headers: headers.to_vec(),
        },
    );
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpBody(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n".to_vec(),
        ),
    );
    w.call(&mut p, &mut [], "session.abort", json!({"sessionId": "s"}));
    assert!(outputs(&mut w).contains(&Output::Effect(Effect {
        id: call,
        op: EffectOp::HttpCancel
    })));
    let idle = p.event("s", "session.idle");
    assert_eq!(idle["data"]["aborted"], true);
    // Late bytes for the cancelled call change nothing.
    let before = p.inbox.len();
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpBody(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n".to_vec(),
        ),
    );
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(&mut [&mut p]);
    assert_eq!(p.inbox.len(), before);
    // The session stays usable.
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "again"}),
    );
    let (call2, _) = next_request(&mut w);
    answer(&mut w, call2, &text_stream("c2", &["ok"]), &mut [&mut p]);
    assert_eq!(p.types("s").last().unwrap(), "session.idle");
}

fn error_then_next_prompt_works(fault: impl FnOnce(&mut World, EffectId)) -> (World, Peer) {
    let mut w = World::new(HostConfig::default().with_model_call(CallConfig {
        max_retries: 0,
        ..CallConfig::default()
    }));
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (call, _) = next_request(&mut w);
    fault(&mut w, call);
    w.pump(&mut [&mut p]);
    let types = p.types("s");
    assert!(
        only_subsequence(
            &types,
            &["session.error", "assistant.turn_end", "session.idle"]
        ),
        "{types:?}"
    );
    let err = p.event("s", "session.error");
    assert!(!err.to_string().contains(KEY), "{err}");
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "again"}),
    );
    let (call2, request2) = next_request(&mut w);
    // The failed turn's prompt stays in the conversation.
    let roles: Vec<String> = messages(&request2)
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(roles, ["system", "user", "user"]);
    answer(&mut w, call2, &text_stream("c2", &["fine"]), &mut [&mut p]);
    assert_eq!(p.event("s", "assistant.message")["data"]["content"], "fine");
    (w, p)
}

#[test]
fn server_error_is_a_session_error() {
    let (_, p) = error_then_next_prompt_works(|w, call| {
        w.host.handle_effect(
            w.now,
            call,
            EffectEvent::HttpHead {
                status: 500,
                headers: Vec::new(),
            },
        );
        w.host.handle_effect(
            w.now,
            call,
            EffectEvent::HttpBody(b"{\"error\":{\"message\":\"boom\"}}".to_vec()),
        );
        w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    });
    assert_eq!(p.event("s", "session.error")["data"]["statusCode"], 500);
}

#[test]
fn connection_refused_is_a_session_error() {
    error_then_next_prompt_works(|w, call| {
        w.host.handle_effect(
            w.now,
            call,
            EffectEvent::HttpError {
                kind: TransportErrorKind::Connect,
                message: format!("connection refused (Bearer {KEY})").to_string(),
            },
        );
    });
}

#[test]
fn cut_and_malformed_streams_are_session_errors() {
    error_then_next_prompt_works(|w, call| {
        let headers = [("content-type".to_owned(), "text/event-stream".to_owned())];
        w.host.handle_effect(
            w.now,
            call,
            EffectEvent::HttpHead {
                status: 200,
                headers: headers.to_vec(),
            },
        );
        w.host.handle_effect(
            w.now,
            call,
            EffectEvent::HttpBody(
                b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n".to_vec(),
            ),
        );
        w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    });
    error_then_next_prompt_works(|w, call| {
        let headers = [("content-type".to_owned(), "text/event-stream".to_owned())];
        w.host.handle_effect(
            w.now,
            call,
            EffectEvent::HttpHead {
                status: 200,
                headers: headers.to_vec(),
            },
        );
        w.host.handle_effect(
            w.now,
            call,
            EffectEvent::HttpBody(b"data: {not json\n\n".to_vec()),
        );
        w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    });
}

#[test]
fn rate_limit_is_retried_after_a_host_timer() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (call, _) = next_request(&mut w);
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpHead {
            status: 429,
            headers: [("retry-after".to_owned(), "1".to_owned())].to_vec(),
        },
    );
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(&mut [&mut p]);
    assert!(p.types("s").contains(&"session.warning".to_owned()));
    let early = outputs(&mut w);
    assert!(
        early.iter().all(|o| !matches!(
            o,
            Output::Effect(Effect {
                op: EffectOp::HttpRequest(_),
                ..
            })
        )),
        "the retry waits for its timer: {early:?}"
    );
    let at = w.host.poll_timeout().expect("a backoff timer");
    w.now = at;
    w.host.handle_timeout(at);
    let (call2, _) = next_request(&mut w);
    assert_ne!(call, call2);
    answer(&mut w, call2, &text_stream("c", &["ok"]), &mut [&mut p]);
    assert_eq!(p.event("s", "assistant.message")["data"]["content"], "ok");
    assert!(!p.types("s").contains(&"session.error".to_owned()));
}

#[test]
fn stalled_stream_hits_the_idle_deadline() {
    let mut w = World::new(HostConfig::default().with_model_call(CallConfig {
        idle_timeout: Duration::from_secs(2),
        ..CallConfig::default()
    }));
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (call, _) = next_request(&mut w);
    let headers = [("content-type".to_owned(), "text/event-stream".to_owned())];
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpHead {
            status: 200,
            headers: headers.to_vec(),
        },
    );
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpBody(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n".to_vec(),
        ),
    );
    let at = w.host.poll_timeout().expect("an idle deadline");
    w.now = at;
    w.host.handle_timeout(at);
    w.pump(&mut [&mut p]);
    assert!(outputs(&mut w).contains(&Output::Effect(Effect {
        id: call,
        op: EffectOp::HttpCancel
    })));
    assert_eq!(
        p.event("s", "session.error")["data"]["errorType"],
        "timeout"
    );
    assert_eq!(p.types("s").last().unwrap(), "session.idle");
}

#[test]
fn sessions_without_a_provider_keep_the_scripted_agent() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    assert!(outputs(&mut w).iter().all(|o| !matches!(
        o,
        Output::Effect(Effect {
            op: EffectOp::HttpRequest(_),
            ..
        })
    )));
    assert!(p.types("s").contains(&"assistant.message".to_owned()));
}

#[test]
fn a_server_default_serves_sessions_without_a_provider() {
    let default =
        ServerDefault::from_flags("http://127.0.0.1:9/v1", Some("local".into()), None).unwrap();
    let mut w = World::new(HostConfig::default().with_model_default(Some(default)));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (call, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "local");
    answer(
        &mut w,
        call,
        &text_stream("c", &["from default"]),
        &mut [&mut p],
    );
    assert_eq!(
        p.event("s", "assistant.message")["data"]["content"],
        "from default"
    );
}

#[test]
fn an_invalid_provider_fails_create_without_the_key() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let r = create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": {"type": "openai", "apiKey": KEY}}),
    );
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("baseUrl"), "{message}");
    assert!(!message.contains(KEY));
}

/// A response asking for one built-in `bash` call with these arguments.
fn bash_stream(id: &str, arguments: Value) -> Vec<u8> {
    sse(&[
        json!({"id": id, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_bash", "type": "function", "function": {"name": "bash", "arguments": arguments.to_string()}}]}}]}),
        json!({"id": id, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ])
}

/// Starts a BYOK session (no working directory given, the server's is `/srv/agentwire`) whose
/// model calls `bash` with `arguments`; approves the call and returns the command's
/// `ProcessSpawn` effect: its id, cwd and timeout.
fn start_bash(w: &mut World, p: &mut Peer, arguments: Value) -> (EffectId, Option<String>, u64) {
    create(w, p, "s", json!({"provider": provider(), "model": "m1"}));
    w.call(
        p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Run it"}),
    );
    let (call, _) = next_request(w);
    answer(
        w,
        call,
        &bash_stream("chatcmpl-1", arguments),
        &mut [&mut *p],
    );
    let perm = p.event("s", "permission.requested");
    let rid = perm["data"]["requestId"].as_str().unwrap().to_owned();
    w.call(
        p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId": "s", "requestId": rid, "result": {"kind": "approve-once"}}),
    );
    outputs(w)
        .into_iter()
        .find_map(|o| match o {
            Output::Effect(Effect {
                id,
                op: EffectOp::ProcessSpawn(spec),
            }) => {
                assert_eq!(spec.argv[..2], ["sh", "-c"], "a command line");
                Some((
                    id,
                    spec.cwd,
                    spec.timeout_ms.expect("a command has a timeout"),
                ))
            }
            _ => None,
        })
        .expect("a ProcessSpawn effect for the bash call")
}

/// The text of the `bash` call's result in the next model request.
fn bash_result(w: &mut World) -> String {
    let (_, request) = next_request(w);
    let msgs = messages(&request);
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_bash");
    last["content"].as_str().unwrap().to_owned()
}

fn bash_config() -> HostConfig {
    HostConfig::default().with_server_cwd(Some("/srv/agentwire".into()))
}

#[test]
fn a_bash_command_past_its_timeout_is_killed_and_reported_as_timed_out() {
    let mut w = World::new(bash_config());
    let mut p = w.connect();
    let (process, cwd, timeout_ms) = start_bash(
        &mut w,
        &mut p,
        json!({"command": "echo started; sleep 100", "initial_wait": 2}),
    );
    assert_eq!(timeout_ms, 2_000);
    // No `workingDirectory`: the session works in the server's directory, and says so.
    assert_eq!(cwd.as_deref(), Some("/srv/agentwire"));
    let start = p.event("s", "session.start");
    assert_eq!(start["data"]["context"]["cwd"], "/srv/agentwire");
    w.host
        .handle_effect(w.now, process, EffectEvent::Stdout(b"started\n".to_vec()));
    // Before the deadline nothing is killed.
    w.now = w.now.saturating_add(Duration::from_millis(1_000));
    w.host.handle_timeout(w.now);
    assert!(!outputs(&mut w).iter().any(|o| matches!(
        o,
        Output::Effect(Effect {
            op: EffectOp::ProcessKill { .. },
            ..
        })
    )));
    // At the deadline the host kills the command; its exit reports the timeout.
    w.now = w.now.saturating_add(Duration::from_millis(1_000));
    w.host.handle_timeout(w.now);
    let killed = outputs(&mut w).into_iter().any(|o| {
        matches!(&o, Output::Effect(Effect { id, op: EffectOp::ProcessKill { signal } }) if *id == process && signal == "SIGKILL")
    });
    assert!(killed, "the host kills the command at its deadline");
    w.host
        .handle_effect(w.now, process, EffectEvent::Exit(None));
    assert_eq!(
        bash_result(&mut w),
        "started\n<command timed out after 2 seconds and was stopped>"
    );
}

#[test]
fn a_bash_command_the_runtime_killed_at_its_timeout_is_reported_as_timed_out() {
    let mut w = World::new(bash_config());
    let mut p = w.connect();
    let (process, _, _) = start_bash(&mut w, &mut p, json!({"command": "sleep 100"}));
    // The runtime's own deadline (120 s by default) killed it before the host's timer ran.
    w.now = w.now.saturating_add(Duration::from_secs(120));
    w.host
        .handle_effect(w.now, process, EffectEvent::Exit(None));
    assert_eq!(
        bash_result(&mut w),
        "<command timed out after 120 seconds and was stopped>"
    );
}

#[test]
fn a_bash_command_killed_before_its_timeout_is_killed_by_a_signal() {
    let mut w = World::new(bash_config());
    let mut p = w.connect();
    let (process, _, _) = start_bash(&mut w, &mut p, json!({"command": "kill -9 $$"}));
    w.now = w.now.saturating_add(Duration::from_millis(10));
    w.host
        .handle_effect(w.now, process, EffectEvent::Exit(None));
    assert_eq!(bash_result(&mut w), "<killed by a signal>");
    // The deadline no longer fires for it.
    w.now = w.now.saturating_add(Duration::from_secs(200));
    w.host.handle_timeout(w.now);
    assert!(!outputs(&mut w).iter().any(|o| matches!(
        o,
        Output::Effect(Effect {
            op: EffectOp::ProcessKill { .. },
            ..
        })
    )));
}

/// Sends `session.model.list` for `session` without waiting; returns the request id.
fn ask_model_list(w: &mut World, p: &mut Peer, session: &str) -> u64 {
    let id = p.next_id;
    p.next_id += 1;
    w.send_frame(
        p,
        &json!({"jsonrpc": "2.0", "id": id, "method": "session.model.list",
                "params": {"sessionId": session}}),
    );
    w.pump(&mut [&mut *p]);
    id
}

/// The ids of the `session.model.list` response `id`, once it arrived.
fn listed(p: &Peer, id: u64) -> Option<Vec<String>> {
    let response = p
        .inbox
        .iter()
        .find(|m| m["id"] == json!(id) && m.get("method").is_none())?;
    let list = response["result"]["list"].as_array().expect("a list");
    Some(
        list.iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect(),
    )
}

#[test]
fn a_session_model_list_the_provider_does_not_answer_falls_back_after_its_deadline() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1"}),
    );
    let id = ask_model_list(&mut w, &mut p, "s");
    let (call, request) = next_request(&mut w);
    assert_eq!(request.url, "http://127.0.0.1:9/v1/models");
    assert!(format!("{request:?}").contains("<redacted>"));
    assert!(!format!("{request:?}").contains(KEY));
    assert_eq!(listed(&p, id), None, "the answer waits for the provider");
    // A second asker joins the request in flight.
    let id2 = ask_model_list(&mut w, &mut p, "s");
    assert!(!outputs(&mut w).iter().any(|o| matches!(
        o,
        Output::Effect(Effect {
            op: EffectOp::HttpRequest(_),
            ..
        })
    )));
    w.now = w.now.saturating_add(Duration::from_secs(10));
    w.host.handle_timeout(w.now);
    let cancelled = outputs(&mut w).iter().any(
        |o| matches!(o, Output::Effect(Effect { id: c, op: EffectOp::HttpCancel }) if *c == call),
    );
    assert!(cancelled);
    w.pump(&mut [&mut p]);
    assert_eq!(listed(&p, id), Some(vec!["m1".to_owned()]));
    assert_eq!(listed(&p, id2), Some(vec!["m1".to_owned()]));
    // A late answer changes nothing; the next request asks again (failures are not cached).
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpHead {
            status: 200,
            headers: Vec::new(),
        },
    );
    let id3 = ask_model_list(&mut w, &mut p, "s");
    let (call3, _) = next_request(&mut w);
    w.host.handle_effect(
        w.now,
        call3,
        EffectEvent::HttpHead {
            status: 200,
            headers: Vec::new(),
        },
    );
    w.host.handle_effect(
        w.now,
        call3,
        EffectEvent::HttpBody(br#"{"data":[{"id":"x"},{"id":"y"}]}"#.to_vec()),
    );
    w.host.handle_effect(w.now, call3, EffectEvent::HttpEnd);
    w.pump(&mut [&mut p]);
    assert_eq!(listed(&p, id3), Some(vec!["x".to_owned(), "y".to_owned()]));
    let all = serde_json::to_string(&p.inbox).unwrap();
    assert!(!all.contains(KEY), "the key reached the client");
}

#[test]
fn session_model_lists_are_cached_per_provider_and_key() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let other_key =
        json!({"type": "openai", "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "sk-other"});
    create(
        &mut w,
        &mut p,
        "a",
        json!({"provider": provider(), "model": "m1"}),
    );
    create(
        &mut w,
        &mut p,
        "b",
        json!({"provider": provider(), "model": "m1"}),
    );
    create(
        &mut w,
        &mut p,
        "c",
        json!({"provider": other_key, "model": "m1"}),
    );
    let answer_list = |w: &mut World, call: EffectId, body: &[u8]| {
        w.host.handle_effect(
            w.now,
            call,
            EffectEvent::HttpHead {
                status: 200,
                headers: Vec::new(),
            },
        );
        w.host
            .handle_effect(w.now, call, EffectEvent::HttpBody(body.to_vec()));
        w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    };
    let id_a = ask_model_list(&mut w, &mut p, "a");
    let (call, _) = next_request(&mut w);
    answer_list(&mut w, call, br#"{"data":[{"id":"for-key-1"}]}"#);
    w.pump(&mut [&mut p]);
    assert_eq!(listed(&p, id_a), Some(vec!["for-key-1".to_owned()]));
    // Same URL and key: from the cache.
    let id_b = ask_model_list(&mut w, &mut p, "b");
    assert_eq!(listed(&p, id_b), Some(vec!["for-key-1".to_owned()]));
    assert!(!outputs(&mut w).iter().any(|o| matches!(
        o,
        Output::Effect(Effect {
            op: EffectOp::HttpRequest(_),
            ..
        })
    )));
    // Same URL, another key: asked with that key.
    let id_c = ask_model_list(&mut w, &mut p, "c");
    let (call, request) = next_request(&mut w);
    let auth = request
        .headers
        .iter()
        .find(|h| h.name == "authorization")
        .unwrap();
    assert_eq!(auth.value, "Bearer sk-other");
    answer_list(&mut w, call, br#"{"data":[{"id":"for-key-2"}]}"#);
    w.pump(&mut [&mut p]);
    assert_eq!(listed(&p, id_c), Some(vec!["for-key-2".to_owned()]));
}

#[test]
fn a_session_with_declared_models_lists_them_without_a_request() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({
            "providers": [{"name": "local", "baseUrl": "http://127.0.0.1:9/v1", "apiKey": KEY}],
            "models": [{"id": "qwen", "provider": "local"}, {"id": "llama", "provider": "local", "name": "Llama"}],
        }),
    );
    let id = ask_model_list(&mut w, &mut p, "s");
    assert_eq!(
        listed(&p, id),
        Some(vec!["local/qwen".to_owned(), "local/llama".to_owned()])
    );
    assert!(!outputs(&mut w).iter().any(|o| matches!(
        o,
        Output::Effect(Effect {
            op: EffectOp::HttpRequest(_),
            ..
        })
    )));
    let unknown = w.call(
        &mut p,
        &mut [],
        "session.model.list",
        json!({"sessionId": "nope"}),
    );
    assert!(unknown["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Session not found"));
}

/// Answers model-list exchange `call` with `body` (JSON).
fn answer_json(w: &mut World, call: EffectId, status: u16, body: &Value, peers: &mut [&mut Peer]) {
    let headers = [("content-type".to_owned(), "application/json".to_owned())];
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpHead {
            status,
            headers: headers.to_vec(),
        },
    );
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpBody(body.to_string().as_bytes().to_vec()),
    );
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(peers);
}

#[test]
fn a_server_default_without_a_model_calls_the_first_model_its_provider_lists() {
    let default = ServerDefault::from_flags("http://127.0.0.1:9/v1", None, None).unwrap();
    let mut w = World::new(HostConfig::default().with_model_default(Some(default)));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    // The prompt waits for the provider's list before its first call.
    let (list_call, list) = next_request(&mut w);
    assert_eq!(list.url, "http://127.0.0.1:9/v1/models");
    assert!(p.types("s").iter().all(|t| t != "user.message"));
    answer_json(
        &mut w,
        list_call,
        200,
        &json!({"data": [{"id": "listed-first"}, {"id": "listed-second"}]}),
        &mut [&mut p],
    );
    let (call, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "listed-first");
    answer(&mut w, call, &text_stream("c", &["one"]), &mut [&mut p]);
    assert_eq!(p.event("s", "assistant.message")["data"]["content"], "one");

    // The choice is kept: a second session's prompt calls the model at once.
    create(&mut w, &mut p, "t", json!({}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "t", "prompt": "again"}),
    );
    let (_, request) = next_request(&mut w);
    assert!(
        request.url.ends_with("/chat/completions"),
        "{}",
        request.url
    );
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "listed-first");
}

#[test]
fn a_provider_that_lists_no_model_fails_the_prompt_and_the_next_prompt_asks_again() {
    let default = ServerDefault::from_flags("http://127.0.0.1:9/v1", None, None).unwrap();
    let mut w = World::new(HostConfig::default().with_model_default(Some(default)));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "first"}),
    );
    let (list_call, _) = next_request(&mut w);
    answer_json(
        &mut w,
        list_call,
        500,
        &json!({"error": "down"}),
        &mut [&mut p],
    );
    let error = p.event("s", "session.error");
    assert!(
        error["data"]["message"]
            .as_str()
            .unwrap()
            .contains("no model to call"),
        "{error}"
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "second"}),
    );
    let (_, list) = next_request(&mut w);
    assert_eq!(list.url, "http://127.0.0.1:9/v1/models");
}

/// The runtime's own route (`COPILOT_API_URL`) with no streaming client asks for one JSON
/// completion; its choices (a tool call each) are one assistant message, and a call of a tool
/// that was never offered gets the runtime's answer, as the model sees it.
#[test]
fn the_runtime_route_joins_a_completion_s_choices_and_refuses_unknown_tools() {
    let default = ServerDefault::copilot_api(
        "http://127.0.0.1:9/api",
        agentwire::model::Secret::new("gh-token"),
    )
    .unwrap();
    let mut w = World::new(HostConfig::default().with_model_default(Some(default)));
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"model": "m1", "tools": weather_tool()}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Weather?"}),
    );
    let (call, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["stream"], false);
    let completion = json!({"id": "c1", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
         "tool_calls": [{"id": "toolcall_0", "type": "function",
                         "function": {"name": "report_intent", "arguments": "{\"intent\":\"Checking\"}"}}]}},
        {"index": 1, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
         "tool_calls": [{"id": "toolcall_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}}
    ]});
    answer_json(&mut w, call, 200, &completion, &mut [&mut p]);
    let msg = p.event("s", "assistant.message");
    let ids: Vec<&str> = msg["data"]["toolRequests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["toolcall_0", "toolcall_1"]);
    answer_permission(&mut w, &mut p, "approve-once");
    answer_external_tool(&mut w, &mut p, "sunny");
    let (_, request2) = next_request(&mut w);
    let msgs = messages(&request2);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
    assert_eq!(msgs[2]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(msgs[3]["tool_call_id"], "toolcall_0");
    let offered: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        msgs[3]["content"],
        format!(
            "Tool 'report_intent' does not exist. Available tools that can be called are {}.",
            offered.join(", ")
        )
    );
    assert_eq!(msgs[4]["content"], "sunny");
}

#[test]
fn attachments_are_counted_and_rendered_into_the_prompt_the_model_sees() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "workingDirectory": "/w"}),
    );
    let attachments = json!([
        {"type": "file", "path": "/w/notes.txt", "displayName": "notes.txt"},
        {"type": "directory", "path": "/w/src", "displayName": "src"},
        {"type": "selection", "filePath": "/w/f.cs", "displayName": "f.cs", "text": "x = 1;",
         "selection": {"start": {"line": 4, "character": 0}, "end": {"line": 5, "character": 2}}},
    ]);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Look", "attachments": attachments}),
    );
    let (op1, req1) = w.next_file_op();
    let (op2, req2) = w.next_file_op();
    assert_eq!(
        [req1, req2],
        [
            agentwire::host::FileRequest::Read {
                path: "/w/notes.txt".into()
            },
            agentwire::host::FileRequest::Read {
                path: "/w/src".into()
            }
        ]
    );
    // No model call (and no user.message) before both are answered.
    w.host.handle_effect(
        w.now,
        op2,
        EffectEvent::FileDone(Ok(agentwire::host::FileReply::Entries(vec![
            "a.rs".into(),
            "b/".into(),
        ]))),
    );
    assert!(w.host.poll_output().is_none());
    w.host.handle_effect(
        w.now,
        op1,
        EffectEvent::FileDone(Ok(agentwire::host::FileReply::Text(
            "one\ntwo\nthree\n".into(),
        ))),
    );
    let (_, request) = next_request(&mut w);
    let user = messages(&request)[1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, rest) = user.split_once("</current_datetime>\n\n").unwrap();
    assert_eq!(
        rest,
        "<ide_selection>\nThe user has the following text selected in their IDE. This may or may \
         not be related to their request.\nFile: f.cs (lines 5-6)\n```\nx = 1;\n```\n\
         </ide_selection>\n\n\n\nLook\n\n\n\n<tagged_files>\n* /w/notes.txt (3 lines)\n\
         * /w/src (2 items)\n</tagged_files>"
    );
    w.pump(&mut [&mut p]);
    let message = p.event("s", "user.message");
    assert_eq!(message["data"]["content"], "Look");
    assert_eq!(message["data"]["attachments"], attachments);
}

/// `ask_user` is offered while a client answers user input; the answer goes back to the model
/// in the runtime's words.
#[test]
fn ask_user_reaches_the_client_and_its_answer_the_model() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "requestUserInput": true}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Ask me"}),
    );
    let (call, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert!(
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "ask_user"),
        "{body}"
    );
    let args = json!({"question": "Colour?", "choices": ["Red", "Blue"], "allow_freeform": false});
    let stream = sse(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t0", "type": "function", "function": {"name": "ask_user", "arguments": args.to_string()}}]}}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    answer(&mut w, call, &stream, &mut [&mut p]);
    let ask = p
        .inbox
        .iter()
        .find(|m| m["method"] == "userInput.request")
        .cloned()
        .expect("userInput.request");
    assert_eq!(ask["params"]["question"], "Colour?");
    assert_eq!(ask["params"]["choices"], json!(["Red", "Blue"]));
    assert_eq!(ask["params"]["allowFreeform"], false);
    let reply = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"answer": "Red", "wasFreeform": false}});
    w.send_frame(&p, &reply);
    w.pump(&mut [&mut p]);
    let (_, request2) = next_request(&mut w);
    let msgs = messages(&request2);
    assert_eq!(msgs.last().unwrap()["content"], "User selected: Red");
}

/// Answers the oldest unanswered `hooks.invoke` of `p` with `output`; returns the request.
fn answer_hook(w: &mut World, p: &mut Peer, output: Value) -> Value {
    w.pump(&mut [&mut *p]);
    let at = p
        .inbox
        .iter()
        .position(|m| m["method"] == "hooks.invoke")
        .expect("hooks.invoke");
    let request = p.inbox.remove(at);
    let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"output": output}});
    w.send_frame(p, &reply);
    w.pump(&mut [&mut *p]);
    request
}

/// A prompt passes the session's hooks before the model sees it: `sessionStart` once, then
/// `userPromptSubmitted` (its `modifiedPrompt` replaces the prompt) and
/// `userPromptTransformed` (its `modifiedTransformedPrompt` is what the model gets).
#[test]
fn prompt_hooks_shape_what_the_model_sees() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "hooks": true, "workingDirectory": "/w"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "original"}),
    );
    let start = answer_hook(
        &mut w,
        &mut p,
        json!({"additionalContext": "START CONTEXT"}),
    );
    assert_eq!(start["params"]["hookType"], "sessionStart");
    assert_eq!(start["params"]["input"]["source"], "new");
    assert_eq!(start["params"]["input"]["cwd"], "/w");
    assert!(start["params"]["input"]["timestamp"].is_u64());
    let submitted = answer_hook(&mut w, &mut p, json!({"modifiedPrompt": "modified"}));
    assert_eq!(submitted["params"]["hookType"], "userPromptSubmitted");
    assert_eq!(submitted["params"]["input"]["prompt"], "original");
    let transformed = answer_hook(
        &mut w,
        &mut p,
        json!({"modifiedTransformedPrompt": "what the model gets"}),
    );
    assert_eq!(transformed["params"]["hookType"], "userPromptTransformed");
    assert_eq!(transformed["params"]["input"]["prompt"], "modified");
    let text = transformed["params"]["input"]["transformedPrompt"]
        .as_str()
        .unwrap();
    assert!(
        text.starts_with("<current_datetime>") && text.ends_with("\n\nmodified"),
        "{text}"
    );
    let (call, request) = next_request(&mut w);
    // The sessionStart context is a user message of its own, before the prompt.
    assert_eq!(messages(&request)[1]["content"], "START CONTEXT");
    assert_eq!(messages(&request)[2]["content"], "what the model gets");
    w.pump(&mut [&mut p]);
    let ends: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "hook.end")
        .collect();
    assert_eq!(ends.len(), 3);
    assert_eq!(ends[0]["data"]["hookType"], "sessionStart");
    assert_eq!(ends[0]["data"]["success"], true);
    answer(&mut w, call, &text_stream("c", &["ok"]), &mut [&mut p]);
    let stop = answer_hook(&mut w, &mut p, json!({}));
    assert_eq!(stop["params"]["hookType"], "agentStop");

    // sessionStart runs once: the next prompt passes the prompt hooks only.
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "again"}),
    );
    let submitted = answer_hook(&mut w, &mut p, json!({}));
    assert_eq!(submitted["params"]["hookType"], "userPromptSubmitted");
    answer_hook(&mut w, &mut p, json!({}));
    let (_, request) = next_request(&mut w);
    let user = messages(&request).last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(user.ends_with("\n\nagain"), "{user}");
}

/// With hooks, each tool call passes `preToolUse` (a deny ends it with the runtime's words,
/// `modifiedArgs` replace its arguments) and its result `postToolUse` before the model sees it.
#[test]
fn tool_hooks_deny_modify_and_see_results() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "hooks": true,
               "tools": weather_tool(), "workingDirectory": "/w"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Weather?"}),
    );
    answer_hook(&mut w, &mut p, json!({})); // sessionStart
    answer_hook(&mut w, &mut p, json!({})); // userPromptSubmitted
    answer_hook(&mut w, &mut p, json!({})); // userPromptTransformed
    let (call, _) = next_request(&mut w);
    let stream = sse(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"index": 1, "id": "b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]}}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    answer(&mut w, call, &stream, &mut [&mut p]);
    let pre_a = answer_hook(&mut w, &mut p, json!({"permissionDecision": "deny"}));
    assert_eq!(pre_a["params"]["hookType"], "preToolUse");
    assert_eq!(pre_a["params"]["input"]["toolName"], "get_weather");
    assert_eq!(
        pre_a["params"]["input"]["toolArgs"],
        json!({"city": "Paris"})
    );
    let pre_b = answer_hook(
        &mut w,
        &mut p,
        json!({"permissionDecision": "allow", "modifiedArgs": {"city": "Lyon"}}),
    );
    assert_eq!(
        pre_b["params"]["input"]["toolArgs"],
        json!({"city": "Rome"})
    );
    answer_permission(&mut w, &mut p, "approve-once");
    let req = answer_external_tool(&mut w, &mut p, "mild");
    assert_eq!(req["data"]["arguments"], json!({"city": "Lyon"}));
    let post = answer_hook(
        &mut w,
        &mut p,
        json!({"modifiedResult": {"textResultForLlm": "changed by the hook", "resultType": "success"}}),
    );
    assert_eq!(post["params"]["hookType"], "postToolUse");
    assert_eq!(
        post["params"]["input"]["toolResult"],
        json!({"resultType": "success", "textResultForLlm": "mild"})
    );
    let (_, request) = next_request(&mut w);
    let msgs = messages(&request);
    assert_eq!(
        msgs[3]["content"],
        "Denied by preToolUse hook: No reason provided"
    );
    assert_eq!(msgs[4]["content"], "changed by the hook");
    // The model sees the call with the arguments it ran with.
    assert_eq!(
        msgs[2]["tool_calls"][1]["function"]["arguments"],
        "{\"city\":\"Lyon\"}"
    );
    assert_eq!(
        msgs[2]["tool_calls"][0]["function"]["arguments"],
        "{\"city\":\"Paris\"}"
    );
}

/// With hooks, a natural stop passes `agentStop`: `{decision: "block", reason}` sends the
/// reason to the model as the next user message before the session goes idle; the next stop
/// says `stopHookActive` and, unblocked, ends the interaction.
#[test]
fn an_agent_stop_hook_that_blocks_keeps_the_agent_running() {
    let mut w = World::new(HostConfig::default().with_workspace_root(Some("/data".into())));
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "hooks": true, "workingDirectory": "/w"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "first"}),
    );
    answer_hook(&mut w, &mut p, json!({})); // sessionStart
    answer_hook(&mut w, &mut p, json!({})); // userPromptSubmitted
    answer_hook(&mut w, &mut p, json!({})); // userPromptTransformed
    let (call, _) = next_request(&mut w);
    answer(
        &mut w,
        call,
        &text_stream("c1", &["INITIAL"]),
        &mut [&mut p],
    );
    let stop = answer_hook(
        &mut w,
        &mut p,
        json!({"decision": "block", "reason": "Keep going"}),
    );
    assert_eq!(stop["params"]["hookType"], "agentStop");
    assert_eq!(stop["params"]["input"]["stopReason"], "end_turn");
    assert_eq!(stop["params"]["input"]["stopHookActive"], false);
    assert_eq!(
        stop["params"]["input"]["transcriptPath"],
        "/data/session-state/s/events.jsonl"
    );
    assert!(
        !p.inbox
            .iter()
            .any(|m| m["params"]["event"]["type"] == "session.idle"),
        "a blocked stop must not go idle"
    );
    let (call, request) = next_request(&mut w);
    let msgs = messages(&request);
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"].as_str().unwrap().ends_with("Keep going"),
        "{last}"
    );
    assert_eq!(msgs[msgs.len() - 2]["content"], "INITIAL");
    answer(
        &mut w,
        call,
        &text_stream("c2", &["CONTINUED"]),
        &mut [&mut p],
    );
    let stop = answer_hook(&mut w, &mut p, json!({}));
    assert_eq!(stop["params"]["input"]["stopHookActive"], true);
    let idles = p
        .inbox
        .iter()
        .filter(|m| m["params"]["event"]["type"] == "session.idle")
        .count();
    assert_eq!(idles, 1);
}

/// `systemMessage` `customize`: static overrides apply to the default sections, and sections
/// marked `transform` are rewritten by the client before the prompt's model call.
#[test]
fn system_message_sections_are_customized_and_transformed_by_the_client() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "systemMessage": {
            "mode": "customize", "content": "APPENDED",
            "sections": {"tone": {"action": "replace", "content": "WARM TONE"},
                         "code_change_rules": {"action": "remove"},
                         "identity": {"action": "transform"}}}}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    w.pump(&mut [&mut p]);
    let at = p
        .inbox
        .iter()
        .position(|m| m["method"] == "systemMessage.transform")
        .expect("systemMessage.transform");
    let ask = p.inbox.remove(at);
    let identity = ask["params"]["sections"]["identity"]["content"]
        .as_str()
        .unwrap();
    assert!(identity.contains("agentwire"), "{identity}");
    let reply = json!({"jsonrpc": "2.0", "id": ask["id"],
        "result": {"sections": {"identity": {"content": "TRANSFORMED IDENTITY"}}}});
    w.send_frame(&p, &reply);
    w.pump(&mut [&mut p]);
    let (_, request) = next_request(&mut w);
    let system = messages(&request)[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.starts_with("TRANSFORMED IDENTITY\n\nWARM TONE"),
        "{system}"
    );
    assert!(!system.contains("<code_change_instructions>"), "{system}");
    assert!(system.ends_with("\n\nAPPENDED"), "{system}");
}

/// A call the user rejects without feedback ends the turn: the model is not called again.
#[test]
fn a_rejected_call_ends_the_turn() {
    let (mut w, mut p, call) = weather_turn();
    answer(&mut w, call, &tool_stream("c1"), &mut [&mut p]);
    answer_permission(&mut w, &mut p, "reject");
    assert!(
        !outputs(&mut w).iter().any(|o| matches!(
            o,
            Output::Effect(Effect {
                op: EffectOp::HttpRequest(_),
                ..
            })
        )),
        "no further model call"
    );
    assert_eq!(p.types("s").last().unwrap(), "session.idle");
}

/// `defaultAgent.excludedTools` hides tools from the model, `reasoningEffort` is on
/// `session.start`, and a prompt's `agentMode` is on its `user.message`.
#[test]
fn default_agent_exclusions_reasoning_effort_and_agent_mode_are_kept() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "reasoningEffort": "high",
               "tools": weather_tool(), "defaultAgent": {"excludedTools": ["get_weather"]}}),
    );
    assert_eq!(
        p.event("s", "session.start")["data"]["reasoningEffort"],
        "high"
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi", "agentMode": "plan"}),
    );
    let (_, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let names: Vec<&str> = body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert!(!names.contains(&"get_weather"), "{names:?}");
    w.pump(&mut [&mut p]);
    assert_eq!(p.event("s", "user.message")["data"]["agentMode"], "plan");
}

/// An image blob attachment reaches the model as an image part after its name.
#[test]
fn an_image_blob_goes_to_the_model_as_an_image_part() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Describe this image", "attachments": [
            {"type": "blob", "data": "iVBORw0KGgo=", "mimeType": "image/png",
             "displayName": "pixel.png"}]}),
    );
    let (_, request) = next_request(&mut w);
    let user = &messages(&request)[1];
    let parts = user["content"].as_array().expect("content parts");
    assert_eq!(parts.len(), 3, "{user}");
    assert!(parts[0]["text"]
        .as_str()
        .unwrap()
        .ends_with("\n\nDescribe this image"));
    assert_eq!(parts[1], json!({"type": "text", "text": "pixel.png"}));
    assert_eq!(
        parts[2],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
    );
}

/// A prompt's `requestHeaders` go with every model call of its turn, and only its turn.
#[test]
fn request_headers_of_a_prompt_go_with_its_model_calls() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi", "requestHeaders": {"x-test": "one"}}),
    );
    let (call, request) = next_request(&mut w);
    assert_eq!(request.header("x-test"), Some("one"));
    answer(&mut w, call, &text_stream("c", &["ok"]), &mut [&mut p]);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "again"}),
    );
    let (_, request) = next_request(&mut w);
    assert_eq!(request.header("x-test"), None);
}

/// A session on the test provider (in `/w`, with `extra` create params) whose prompt made
/// the model view `/w/pixel.png` ([`view_pixel_image`]).
fn image_viewed(extra: Value) -> (World, Peer) {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let mut params = json!({"provider": provider(), "model": "m1", "workingDirectory": "/w"});
    if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
        params.extend(extra);
    }
    create(&mut w, &mut p, "s", params);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "look"}),
    );
    view_pixel_image(&mut w, &mut p);
    (w, p)
}

/// The model answers the pending call with a `view` of `/w/pixel.png`; it is approved and the
/// file read (a PNG's first bytes).
fn view_pixel_image(w: &mut World, p: &mut Peer) {
    let (call, _) = next_request(w);
    let stream = sse(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "v1", "type": "function", "function": {"name": "view", "arguments": "{\"path\":\"/w/pixel.png\"}"}}]}}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    answer(w, call, &stream, &mut [&mut *p]);
    answer_permission(w, p, "approve-once");
    let (op, request) = w.next_file_op();
    assert_eq!(
        request,
        agentwire::host::FileRequest::Read {
            path: "/w/pixel.png".into()
        }
    );
    w.host.handle_effect(
        w.now,
        op,
        EffectEvent::FileDone(Ok(agentwire::host::FileReply::Bytes(vec![
            0x89, b'P', b'N', b'G',
        ]))),
    );
}

/// `view` of an image: the model is told it was viewed and gets the image after the call's
/// results, as a user message naming its path.
#[test]
fn viewing_an_image_shows_it_to_the_model() {
    let (mut w, _p) = image_viewed(json!({}));
    let (_, request) = next_request(&mut w);
    let msgs = messages(&request);
    assert_eq!(msgs[3]["content"], "Viewed image file successfully.");
    assert_eq!(
        msgs[4],
        json!({"role": "user", "content": [
            {"type": "text", "text": "Image file at path /w/pixel.png"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}]})
    );
}

/// `sessionLimits.maxAiCredits`: the runtime's limits status follows every prompt.
#[test]
fn session_limits_status_follows_the_prompt() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "sessionLimits": {"maxAiCredits": 30}}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (_, request) = next_request(&mut w);
    let msgs = messages(&request);
    assert_eq!(msgs.len(), 3);
    assert_eq!(
        msgs[2],
        json!({"role": "user", "content": "<session_limits_status>\nRemaining session limits: 30 AI credits. Later session_limits_status messages supersede earlier ones. Be frugal; avoid optional exploration and unnecessary tool calls.\n</session_limits_status>"})
    );
}

/// `instructionDirectories`: the `.github/instructions/*.instructions.md` files of each
/// directory are read before the first call and become the system prompt's custom
/// instructions.
#[test]
fn instruction_files_join_the_system_prompt() {
    use agentwire::host::{FileReply, FileRequest};
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "instructionDirectories": ["/extra"]}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (op, request) = w.next_file_op();
    assert_eq!(
        request,
        FileRequest::Walk {
            root: "/extra/.github/instructions".into(),
            limit: 4096
        }
    );
    w.host.handle_effect(
        w.now,
        op,
        EffectEvent::FileDone(Ok(FileReply::Entries(vec![
            "notes.txt".into(),
            "team.instructions.md".into(),
        ]))),
    );
    let (op, request) = w.next_file_op();
    let FileRequest::ReadMany { root, paths, .. } = request else {
        panic!("{request:?}")
    };
    assert_eq!(root, "/extra/.github/instructions");
    assert_eq!(paths, ["team.instructions.md"]);
    w.host.handle_effect(
        w.now,
        op,
        EffectEvent::FileDone(Ok(FileReply::Texts(vec![(
            "team.instructions.md".into(),
            "Always say SENTINEL.\n".into(),
        )]))),
    );
    let (_, request) = next_request(&mut w);
    let system = messages(&request)[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("\n\nAlways say SENTINEL."), "{system}");
}

/// `session.destroy` (the SDKs' disconnect) of a client with hooks sends `sessionEnd` before
/// its answer, so the client's hook still runs.
#[test]
fn disconnecting_a_hooks_client_sends_session_end_first() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "hooks": true, "workingDirectory": "/w"}),
    );
    p.inbox.clear();
    w.send_frame(
        &p,
        &json!({"jsonrpc": "2.0", "id": 99, "method": "session.destroy",
                "params": {"sessionId": "s"}}),
    );
    w.pump(&mut [&mut p]);
    let hook = p
        .inbox
        .iter()
        .position(|m| m["method"] == "hooks.invoke")
        .expect("hooks.invoke");
    let answer = p
        .inbox
        .iter()
        .position(|m| m["id"] == 99)
        .expect("the destroy answer");
    assert!(hook < answer, "{:?}", p.inbox);
    assert_eq!(p.inbox[hook]["params"]["hookType"], "sessionEnd");
    assert_eq!(p.inbox[hook]["params"]["input"]["reason"], "user_exit");
}

/// A Responses API event stream: each event's `type` is also its SSE `event:` name.
fn responses_sse(events: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        let name = e["type"].as_str().unwrap();
        out.extend_from_slice(format!("event: {name}\ndata: {e}\n\n").as_bytes());
    }
    out
}

/// A BYOK session on the Responses API (`wireApi: "responses"`): a function call to a
/// client tool, then text; the second request carries the call and its output as input items.
#[test]
fn a_responses_api_provider_runs_a_client_tool_round_trip() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let provider = json!({"type": "openai", "wireApi": "responses",
                          "baseUrl": "http://127.0.0.1:9/v1", "apiKey": KEY});
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider, "model": "gpt-5", "tools": weather_tool(), "streaming": true}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Weather?"}),
    );
    let (call, request) = next_request(&mut w);
    assert!(request.url.ends_with("/responses"), "{}", request.url);
    assert_eq!(request.url, "http://127.0.0.1:9/v1/responses");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "gpt-5");
    assert_eq!(
        (&body["stream"], &body["store"]),
        (&json!(true), &json!(false))
    );
    assert!(body["instructions"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(body["input"].as_array().unwrap().len(), 1);
    assert_eq!(body["input"][0]["role"], "user");
    let tool = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "get_weather")
        .expect("the client tool is offered");
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["strict"], false);

    let call_item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_W",
                           "name": "get_weather", "arguments": "{\"city\": \"Paris\"}",
                           "status": "completed"});
    let first = responses_sse(&[
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress",
               "model": "gpt-5", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "function_call", "id": "fc_1", "call_id": "call_W",
                        "name": "get_weather", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
               "output_index": 0, "delta": "{\"city\": "}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
               "output_index": 0, "delta": "\"Paris\"}"}),
        json!({"type": "response.function_call_arguments.done", "item_id": "fc_1",
               "output_index": 0, "arguments": "{\"city\": \"Paris\"}"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": call_item}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
               "model": "gpt-5", "output": [call_item],
               "usage": {"input_tokens": 30, "output_tokens": 7,
                         "input_tokens_details": {"cached_tokens": 0},
                         "output_tokens_details": {"reasoning_tokens": 0}}}}),
    ]);
    answer(&mut w, call, &first, &mut [&mut p]);
    let msg = p.event("s", "assistant.message");
    assert_eq!(msg["data"]["apiCallId"], "resp_1");
    assert_eq!(msg["data"]["toolRequests"][0]["toolCallId"], "call_W");
    assert_eq!(
        msg["data"]["toolRequests"][0]["arguments"],
        json!({"city": "Paris"})
    );
    let usage = p.event("s", "assistant.usage");
    assert_eq!(usage["data"]["inputTokens"], 30);
    assert_eq!(usage["data"]["finishReason"], "completed");
    let perm = p.event("s", "permission.requested");
    let rid = perm["data"]["requestId"].as_str().unwrap().to_owned();
    w.call(
        &mut p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId": "s", "requestId": rid, "result": {"kind": "approve-once"}}),
    );
    let req = p.event("s", "external_tool.requested");
    let tool_rid = req["data"]["requestId"].as_str().unwrap().to_owned();
    w.call(
        &mut p,
        &mut [],
        "session.tools.handlePendingToolCall",
        json!({"sessionId": "s", "requestId": tool_rid, "result": "sunny"}),
    );

    let (call2, request2) = next_request(&mut w);
    assert_eq!(request2.url, "http://127.0.0.1:9/v1/responses");
    let body2: Value = serde_json::from_slice(&request2.body).unwrap();
    let input = body2["input"].as_array().unwrap();
    assert_eq!(input.len(), 3, "{input:?}");
    assert_eq!(input[0]["role"], "user");
    // The history keeps the parsed arguments; they go back as one JSON text.
    assert_eq!(
        input[1],
        json!({"type": "function_call", "call_id": "call_W", "name": "get_weather",
               "arguments": "{\"city\":\"Paris\"}"})
    );
    assert_eq!(
        input[2],
        json!({"type": "function_call_output", "call_id": "call_W", "output": "sunny"})
    );
    let second = responses_sse(&[
        json!({"type": "response.created", "response": {"id": "resp_2", "model": "gpt-5"}}),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "message", "id": "msg_2", "role": "assistant", "content": []}}),
        json!({"type": "response.output_text.delta", "item_id": "msg_2", "output_index": 0,
               "content_index": 0, "delta": "It is "}),
        json!({"type": "response.output_text.delta", "item_id": "msg_2", "output_index": 0,
               "content_index": 0, "delta": "sunny."}),
        json!({"type": "response.output_text.done", "item_id": "msg_2", "output_index": 0,
               "content_index": 0, "text": "It is sunny."}),
        json!({"type": "response.completed", "response": {"id": "resp_2", "status": "completed",
               "usage": {"input_tokens": 50, "output_tokens": 4}}}),
    ]);
    answer(&mut w, call2, &second, &mut [&mut p]);
    let finals: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "assistant.message")
        .collect();
    assert_eq!(finals.len(), 2);
    assert_eq!(finals[0]["data"]["content"], "");
    assert_eq!(finals[1]["data"]["content"], "It is sunny.");
    assert_eq!(finals[1]["data"]["apiCallId"], "resp_2");
    assert_eq!(finals[1]["data"]["turnId"], "1");
    let deltas: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "assistant.message_delta")
        .map(|e| e["data"]["deltaContent"].clone())
        .collect();
    assert_eq!(deltas, [json!("It is "), json!("sunny.")]);
    assert_eq!(p.types("s").last().unwrap(), "session.idle");
    assert!(!serde_json::to_string(&p.inbox).unwrap().contains(KEY));
}

/// When a client whose tools the last prompt offered leaves, the next prompt tells the model
/// (the runtime's `<tools_changed_notice>`).
#[test]
fn tools_of_a_client_that_left_are_announced_gone() {
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    let mut b = w.connect();
    create(
        &mut w,
        &mut a,
        "s",
        json!({"provider": provider(), "model": "m1", "tools": weather_tool()}),
    );
    w.call(
        &mut b,
        &mut [],
        "session.resume",
        json!({"sessionId": "s", "provider": provider(), "model": "m1"}),
    );
    w.call(
        &mut b,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "one"}),
    );
    let (call, _) = next_request(&mut w);
    answer(&mut w, call, &text_stream("c", &["ok"]), &mut [&mut b]);
    w.host.handle_eof(w.now, a.conn);
    w.pump(&mut [&mut b]);
    w.call(
        &mut b,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "two"}),
    );
    let (_, request) = next_request(&mut w);
    let user = messages(&request).last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, rest) = user.split_once("</current_datetime>\n\n").unwrap();
    assert_eq!(
        rest,
        "<tools_changed_notice>\nTools no longer available: get_weather\n\nImportant: Do not \
         attempt to call tools that are no longer available unless you've been notified that \
         they're available again.\n</tools_changed_notice>\n\ntwo"
    );
}

/// A session's skills are read before its first model call; the model is offered the `skill`
/// tool, and a skill it loads reaches it as a `<skill-context>` user message after the call's
/// result (`Skill "N" loaded successfully…`), announced by `skill.invoked`.
#[test]
fn the_model_loads_a_skill_with_the_skill_tool() {
    use agentwire::host::{FileReply, FileRequest};
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "skillDirectories": ["/sk"]}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Use the skill."}),
    );
    let (op, request) = w.next_file_op();
    assert!(matches!(request, FileRequest::Walk { ref root, .. } if root == "/sk"));
    w.host.handle_effect(
        w.now,
        op,
        EffectEvent::FileDone(Ok(FileReply::Entries(vec!["pine/SKILL.md".into()]))),
    );
    let (op, _) = w.next_file_op();
    let text = "---\nname: pine\ndescription: Adds a marker.\n---\n\n# Pine\n\nSay PINE.\n";
    w.host.handle_effect(
        w.now,
        op,
        EffectEvent::FileDone(Ok(FileReply::Texts(vec![(
            "pine/SKILL.md".into(),
            text.into(),
        )]))),
    );
    w.pump(&mut [&mut p]);
    let (call, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let skill_tool = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "skill")
        .expect("the skill tool is offered");
    assert!(skill_tool["function"]["description"]
        .as_str()
        .unwrap()
        .contains("pine: Adds a marker."));
    let stream = sse(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "k", "type": "function", "function": {"name": "skill", "arguments": "{\"skill\":\"pine\"}"}}]}}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    answer(&mut w, call, &stream, &mut [&mut p]);
    let invoked = p.event("s", "skill.invoked");
    assert_eq!(invoked["data"]["name"], "pine");
    assert_eq!(invoked["data"]["path"], "/sk/pine/SKILL.md");
    let (_, request) = next_request(&mut w);
    let msgs = messages(&request);
    let n = msgs.len();
    assert_eq!(
        msgs[n - 2]["content"],
        "Skill \"pine\" loaded successfully. Follow the instructions in the skill context."
    );
    assert_eq!(
        msgs[n - 1]["content"],
        "<skill-context name=\"pine\">\nBase directory for this skill: /sk/pine\n\n# Pine\n\nSay PINE.\n\n</skill-context>"
    );
    // The session reports what it loaded, and in which user turn.
    let reply = w.call(
        &mut p,
        &mut [],
        "session.skills.getInvoked",
        json!({"sessionId": "s"}),
    );
    let invoked = &reply["result"]["skills"];
    assert_eq!(invoked.as_array().unwrap().len(), 1, "{reply}");
    assert_eq!(invoked[0]["name"], "pine");
    assert_eq!(invoked[0]["path"], "/sk/pine/SKILL.md");
    assert_eq!(invoked[0]["invokedAtTurn"], 1);
    assert!(invoked[0]["content"]
        .as_str()
        .unwrap()
        .contains("Say PINE."));
}

/// `session.ui.ephemeralQuery {question}` asks the session's model the question after the
/// conversation so far (its system prompt, no tools), streams its progress as ephemeral
/// `ui.ephemeral_query` events (`started`, a `chunk` per delta, `completed` with the answer),
/// answers `{answer}`, and leaves the conversation as it was: the next prompt's request does
/// not contain the question.
#[test]
fn an_ephemeral_query_is_answered_from_the_conversation_without_joining_it() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1"}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "My favourite colour is blue."}),
    );
    let (call, _) = next_request(&mut w);
    answer(&mut w, call, &text_stream("c1", &["Noted."]), &mut [&mut p]);
    let logged = p
        .types("s")
        .iter()
        .filter(|t| !t.starts_with("ui."))
        .count();

    let question = "In one word, what is my favourite colour?";
    let asked = send_request(
        &mut w,
        &mut p,
        "session.ui.ephemeralQuery",
        json!({"sessionId": "s", "question": question}),
    );
    let (call, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert!(body.get("tools").is_none(), "no tools: {body}");
    let msgs = messages(&request);
    assert_eq!(msgs[0]["role"], "system");
    let first = msgs[1]["content"].as_str().unwrap();
    assert!(first.ends_with("My favourite colour is blue."), "{msgs:?}");
    assert_eq!(msgs[2]["content"], "Noted.");
    assert_eq!(msgs.last().unwrap()["content"], question);
    answer(
        &mut w,
        call,
        &text_stream("c2", &["Bl", "ue."]),
        &mut [&mut p],
    );
    let answered = response(&p, asked).expect("answered").clone();
    assert_eq!(answered["result"], json!({"answer": "Blue."}), "{answered}");
    let phases: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "ui.ephemeral_query")
        .map(|e| {
            assert_eq!(e["ephemeral"], true);
            e["data"].clone()
        })
        .collect();
    let kinds: Vec<&str> = phases
        .iter()
        .map(|d| d["phase"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["started", "chunk", "chunk", "completed"]);
    assert!(phases
        .iter()
        .all(|d| d["requestId"] == phases[0]["requestId"]));
    assert_eq!(phases[3]["answer"], "Blue.");

    // The conversation did not change: nothing persisted, and the next prompt's request
    // holds no trace of the question.
    let after = p
        .types("s")
        .iter()
        .filter(|t| !t.starts_with("ui."))
        .count();
    assert_eq!(after, logged);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Thanks."}),
    );
    let (_, request) = next_request(&mut w);
    assert!(messages(&request).iter().all(|m| m["content"] != question));

    // An empty question is refused.
    let empty = w.call(
        &mut p,
        &mut [],
        "session.ui.ephemeralQuery",
        json!({"sessionId": "s", "question": " "}),
    );
    assert!(
        empty["error"]["message"]
            .as_str()
            .unwrap()
            .contains("empty"),
        "{empty}"
    );
}

/// `session.provider.add` adds named BYOK providers and their models to a running session
/// (here one on the scripted agent): the `provider/id` models are listed, `switchTo` one of
/// them and the next prompt is a call on that provider, with its wire model and headers.
/// A duplicate, or a model of an unknown provider, adds nothing and is an error.
#[test]
fn providers_added_at_runtime_are_listed_and_called_once_chosen() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let provider = json!({"name": "rt", "type": "openai", "wireApi": "completions",
                          "baseUrl": "http://127.0.0.1:9/v1", "apiKey": KEY,
                          "headers": {"X-SDK-Provider": "runtime"}});
    let model = json!({"provider": "rt", "id": "m", "name": "Runtime Model",
                       "wireModel": "wire-m",
                       "capabilities": {"limits": {"maxContextWindowTokens": 4096}}});
    let added = w.call(
        &mut p,
        &mut [],
        "session.provider.add",
        json!({"sessionId": "s", "providers": [provider.clone()], "models": [model.clone()]}),
    );
    let models = added["result"]["models"]
        .as_array()
        .expect("models")
        .clone();
    assert_eq!(models.len(), 1, "{added}");
    assert_eq!(models[0]["id"], "rt/m");
    assert_eq!(models[0]["name"], "Runtime Model");
    for (params, field) in [
        (json!({"providers": [provider]}), "already registered"),
        (json!({"models": [model]}), "already registered"),
        (
            json!({"models": [{"provider": "nobody", "id": "x"}]}),
            "nobody",
        ),
    ] {
        let mut params = params;
        params["sessionId"] = json!("s");
        let refused = w.call(&mut p, &mut [], "session.provider.add", params);
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{refused}");
    }
    let listed = w.call(
        &mut p,
        &mut [],
        "session.model.list",
        json!({"sessionId": "s"}),
    );
    let ids: Vec<&str> = listed["result"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(ids.contains(&"rt/m"), "{listed}");
    let switched = w.call(
        &mut p,
        &mut [],
        "session.model.switchTo",
        json!({"sessionId": "s", "modelId": "rt/m"}),
    );
    assert_eq!(switched["result"]["modelId"], "rt/m", "{switched}");
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (_, request) = next_request(&mut w);
    assert_eq!(request.url, "http://127.0.0.1:9/v1/chat/completions");
    assert_eq!(request.header("x-sdk-provider"), Some("runtime"));
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "wire-m");
}

/// An ephemeral query on a session of a server default that names no model waits, as a
/// prompt does, for the provider's list, and asks its first model.
#[test]
fn an_ephemeral_query_waits_for_the_default_model_choice() {
    let default = ServerDefault::from_flags("http://127.0.0.1:9/v1", None, None).unwrap();
    let mut w = World::new(HostConfig::default().with_model_default(Some(default)));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let asked = send_request(
        &mut w,
        &mut p,
        "session.ui.ephemeralQuery",
        json!({"sessionId": "s", "question": "What colour is the sky?"}),
    );
    let (list_call, list) = next_request(&mut w);
    assert_eq!(list.url, "http://127.0.0.1:9/v1/models");
    assert!(response(&p, asked).is_none());
    answer_json(
        &mut w,
        list_call,
        200,
        &json!({"data": [{"id": "listed-first"}]}),
        &mut [&mut p],
    );
    let (call, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "listed-first");
    assert_eq!(
        messages(&request).len(),
        2,
        "the system prompt and the question"
    );
    answer(&mut w, call, &text_stream("c", &["Blue."]), &mut [&mut p]);
    let answered = response(&p, asked).expect("answered").clone();
    assert_eq!(answered["result"], json!({"answer": "Blue."}), "{answered}");
}

/// Runs one turn of session `s` in which the model creates `path` with `text` (approved; the
/// runtime writes it) and then answers.
fn turn_creating(w: &mut World, p: &mut Peer, prompt: &str, path: &str, text: &str) {
    w.call(
        p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": prompt}),
    );
    let (call, _) = next_request(w);
    let args = json!({"path": path, "file_text": text}).to_string();
    let stream = sse(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t1", "type": "function", "function": {"name": "create", "arguments": args}}]}}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    answer(w, call, &stream, &mut [&mut *p]);
    approve_latest_permission(w, p);
    let (op, request) = w.next_file_op();
    assert!(matches!(
        request,
        agentwire::host::FileRequest::Write { .. }
    ));
    w.host.handle_effect(
        w.now,
        op,
        EffectEvent::FileDone(Ok(agentwire::host::FileReply::Written)),
    );
    let (call, _) = next_request(w);
    answer(w, call, &text_stream("d", &["Done."]), &mut [&mut *p]);
}

/// With `enableFileChangeTracking`, each turn is a rewind point knowing the files its tools
/// changed; a `conversation-and-files` rewind truncates the history at the turn and restores
/// the files it changed (one it created is removed) unless they changed since (skipped as
/// `user-modified`). Without tracking, a files rewind is refused and a conversation one is not.
#[test]
fn a_rewind_restores_the_files_the_discarded_turns_changed() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "workingDirectory": "/w",
               "enableFileChangeTracking": true}),
    );
    turn_creating(&mut w, &mut p, "make a", "/w/a.txt", "A");
    turn_creating(&mut w, &mut p, "make b", "/w/b.txt", "B");
    let points = w.call(
        &mut p,
        &mut [],
        "session.history.listRewindPoints",
        json!({"sessionId": "s"}),
    );
    let list = &points["result"];
    assert_eq!(list["fileChangeTrackingEnabled"], true, "{points}");
    assert!(list.get("unavailableReason").is_none());
    let points = list["points"].as_array().unwrap().clone();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0]["userMessage"], "make a");
    assert_eq!(
        points[0]["fileCount"], 2,
        "this turn's file and the later one's"
    );
    assert_eq!(points[1]["fileCount"], 1);
    assert_eq!(points[1]["turnChangedFiles"], true);
    assert_eq!(points[1]["linesAdded"], 1);
    let first = points[0]["eventId"].as_str().unwrap().to_owned();
    let preview = w.call(
        &mut p,
        &mut [],
        "session.history.previewRewind",
        json!({"sessionId": "s", "eventId": first}),
    );
    assert_eq!(
        preview["result"]["files"],
        json!([{"path": "/w/a.txt", "changeType": "created", "linesAdded": 1, "linesRemoved": 0},
               {"path": "/w/b.txt", "changeType": "created", "linesAdded": 1, "linesRemoved": 0}])
    );

    let asked = send_request(
        &mut w,
        &mut p,
        "session.history.rewind",
        json!({"sessionId": "s", "eventId": first, "mode": "conversation-and-files"}),
    );
    // a.txt is as the tools left it: removed; b.txt was changed since: left alone.
    for (path, now) in [("/w/a.txt", "A"), ("/w/b.txt", "B, edited by the user")] {
        let (op, request) = w.next_file_op();
        assert_eq!(
            request,
            agentwire::host::FileRequest::Read { path: path.into() }
        );
        let reply = agentwire::host::FileReply::Text(now.into());
        w.host
            .handle_effect(w.now, op, EffectEvent::FileDone(Ok(reply)));
        if path == "/w/a.txt" {
            let (op, request) = w.next_file_op();
            assert_eq!(
                request,
                agentwire::host::FileRequest::Remove { path: path.into() }
            );
            assert!(response(&p, asked).is_none(), "answered before the files");
            let done = agentwire::host::FileReply::Written;
            w.host
                .handle_effect(w.now, op, EffectEvent::FileDone(Ok(done)));
        }
    }
    w.pump(&mut [&mut p]);
    let rewound = response(&p, asked).expect("answered").clone();
    let result = &rewound["result"];
    assert_eq!(result["outcome"], "success", "{rewound}");
    assert_eq!(result["restoredFiles"], json!(["/w/a.txt"]));
    assert_eq!(
        result["skippedFiles"],
        json!([{"path": "/w/b.txt", "reason": "user-modified"}])
    );
    assert!(result["eventsRemoved"].as_u64().unwrap() > 0);
    let messages = w.call(
        &mut p,
        &mut [],
        "session.getMessages",
        json!({"sessionId": "s"}),
    );
    let events = messages["result"]["events"].as_array().unwrap();
    assert!(events.iter().all(|e| e["id"] != first.as_str()));
    let after = w.call(
        &mut p,
        &mut [],
        "session.history.listRewindPoints",
        json!({"sessionId": "s"}),
    );
    assert_eq!(after["result"]["points"], json!([]));

    // Without tracking: files cannot be rewound, the conversation can.
    create(
        &mut w,
        &mut p,
        "u",
        json!({"provider": provider(), "model": "m1", "workingDirectory": "/w"}),
    );
    let listed = w.call(
        &mut p,
        &mut [],
        "session.history.listRewindPoints",
        json!({"sessionId": "u"}),
    );
    assert_eq!(
        listed["result"]["unavailableReason"],
        "file-change-tracking-disabled"
    );
}

/// A client tool's result longer than the session's `largeOutput.maxSizeBytes` is saved in
/// the session's state directory (`temp/<ms>-copilot-tool-output-<id>.txt`, through the
/// runtime's file effects) and the model gets where, its size and its first 500 characters;
/// one within the limit reaches the model whole, and a failed save gives it the whole result.
#[test]
fn a_large_client_tool_result_is_saved_and_referenced() {
    let config = HostConfig::default().with_workspace_root(Some("/data".into()));
    let mut w = World::new(config);
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "tools": weather_tool(),
               "largeOutput": {"maxSizeBytes": 1000}}),
    );
    let big = "x".repeat(1500);
    let run = |w: &mut World, p: &mut Peer, result: &str, save: Option<Result<(), &str>>| {
        w.call(
            p,
            &mut [],
            "session.send",
            json!({"sessionId": "s", "prompt": "Weather?"}),
        );
        let (call, _) = next_request(w);
        answer(w, call, &tool_stream("c"), &mut [&mut *p]);
        approve_latest_permission(w, p);
        let req = p
            .events("s")
            .into_iter()
            .rev()
            .find(|e| e["type"] == "external_tool.requested")
            .unwrap();
        w.call(
            p,
            &mut [],
            "session.tools.handlePendingToolCall",
            json!({"sessionId": "s", "requestId": req["data"]["requestId"], "result": result}),
        );
        let mut saved = None;
        if let Some(outcome) = save {
            let (op, request) = w.next_file_op();
            let agentwire::host::FileRequest::Write { path, content, .. } = request else {
                panic!("not a write: {request:?}");
            };
            assert_eq!(content, result);
            let reply = match outcome {
                Ok(()) => Ok(agentwire::host::FileReply::Written),
                Err(e) => Err(e.to_owned()),
            };
            w.host
                .handle_effect(w.now, op, EffectEvent::FileDone(reply));
            saved = Some(path);
        }
        let (call, request) = next_request(w);
        let tool = messages(&request).last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned();
        answer(w, call, &text_stream("d", &["ok"]), &mut [&mut *p]);
        (saved, tool)
    };
    let (path, told) = run(&mut w, &mut p, &big, Some(Ok(())));
    let path = path.unwrap();
    assert!(path.starts_with("/data/session-state/s/temp/"), "{path}");
    assert!(
        path.contains("-copilot-tool-output-") && path.ends_with(".txt"),
        "{path}"
    );
    assert!(
        told.starts_with(&format!(
            "Output too large to read at once (1.5 KB). Saved to: {path}\n"
        )),
        "{told}"
    );
    assert!(told.ends_with(&format!("(first 500 chars):\n{}", "x".repeat(500))));
    let done = p
        .events("s")
        .into_iter()
        .rev()
        .find(|e| e["type"] == "tool.execution_complete")
        .unwrap();
    assert_eq!(done["data"]["result"]["content"], told.as_str());

    let (saved, told) = run(&mut w, &mut p, "sunny", None);
    assert!(saved.is_none());
    assert_eq!(told, "sunny");
    let (_, told) = run(&mut w, &mut p, &big, Some(Err("disk full")));
    assert_eq!(told, big);
}

/// A session on the runtime's own route reports it as its provider endpoint (the route's URL,
/// its token, the headers its calls carry), and its calls carry exactly those headers.
#[test]
fn the_runtime_route_is_the_endpoint_of_a_session_without_a_provider() {
    let default = ServerDefault::copilot_api(
        "http://127.0.0.1:9/api",
        agentwire::model::Secret::new("gh-token"),
    )
    .unwrap();
    let mut w = World::new(HostConfig::default().with_model_default(Some(default)));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"model": "m1"}));
    let reply = w.call(
        &mut p,
        &mut [],
        "session.provider.getEndpoint",
        json!({"sessionId": "s"}),
    );
    let endpoint = &reply["result"];
    assert_eq!(endpoint["type"], "openai");
    assert_eq!(endpoint["wireApi"], "completions");
    assert_eq!(endpoint["baseUrl"], "http://127.0.0.1:9/api");
    assert_eq!(endpoint["apiKey"], "gh-token");
    let headers = endpoint["headers"].as_object().unwrap();
    assert_eq!(headers["Authorization"], "Bearer gh-token");
    assert_eq!(headers["Copilot-Integration-Id"], "copilot-developer-cli");
    assert_eq!(headers["X-GitHub-Api-Version"], "2025-05-01");
    assert_eq!(headers["X-Interaction-Id"], "s");
    assert!(headers["User-Agent"].as_str().unwrap().contains("Copilot"));

    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (_, request) = next_request(&mut w);
    for (name, value) in headers {
        let sent: Vec<&str> = request
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
            .collect();
        assert_eq!(sent, [value.as_str().unwrap()], "header {name}");
    }
}

/// Without a BYOK provider or the runtime's route there is no endpoint to report.
#[test]
fn a_session_on_the_scripted_agent_has_no_provider_endpoint() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let reply = w.call(
        &mut p,
        &mut [],
        "session.provider.getEndpoint",
        json!({"sessionId": "s"}),
    );
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no provider endpoint"));
}

/// The tool names of a model request.
fn offered_tools(request: &HttpRequest) -> Vec<String> {
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `exit_plan_mode` is offered for a prompt sent in plan mode while a client answers
/// exit-plan-mode requests; the plan goes to that client, and its decision reaches the model
/// in the runtime's words.
#[test]
fn exit_plan_mode_asks_the_client_and_tells_the_model_what_it_decided() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1", "requestExitPlanMode": true}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Just answer"}),
    );
    let (call, request) = next_request(&mut w);
    assert!(!offered_tools(&request).contains(&"exit_plan_mode".to_owned()));
    answer(&mut w, call, &text_stream("c0", &["ok"]), &mut [&mut p]);

    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Plan it", "agentMode": "plan"}),
    );
    let (call, request) = next_request(&mut w);
    assert!(offered_tools(&request).contains(&"exit_plan_mode".to_owned()));
    let args = json!({"summary": "The plan", "actions": ["autopilot", "interactive", "bogus"],
                      "recommendedAction": "interactive"});
    let stream = sse(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t0", "type": "function", "function": {"name": "exit_plan_mode", "arguments": args.to_string()}}]}}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    answer(&mut w, call, &stream, &mut [&mut p]);
    let ask = p
        .inbox
        .iter()
        .find(|m| m["method"] == "exitPlanMode.request")
        .cloned()
        .expect("exitPlanMode.request");
    assert_eq!(ask["params"]["summary"], "The plan");
    assert_eq!(
        ask["params"]["actions"],
        json!(["autopilot", "interactive"])
    );
    assert_eq!(ask["params"]["recommendedAction"], "interactive");
    assert_eq!(
        p.event("s", "exit_plan_mode.requested")["data"]["summary"],
        "The plan"
    );
    let reply = json!({"jsonrpc": "2.0", "id": ask["id"],
                       "result": {"approved": true, "selectedAction": "interactive", "feedback": "fine"}});
    w.send_frame(&p, &reply);
    w.pump(&mut [&mut p]);
    assert_eq!(
        p.event("s", "exit_plan_mode.completed")["data"]["approved"],
        true
    );
    let (_, request2) = next_request(&mut w);
    let msgs = messages(&request2);
    assert_eq!(
        msgs.last().unwrap()["content"],
        "Plan approved! Exited plan mode.\n\nYou are now in interactive mode. Start implementing \
         the plan now, in this same response. Approving the plan is your go-signal, so do not \
         stop to ask whether to proceed or wait for another message."
    );
}

/// The `skill` tool is offered as the runtime offers it, with or without skills; an allow-list
/// of built-ins (`builtin:NAME`) decides which built-ins are offered at all.
#[test]
fn the_skill_tool_is_offered_without_skills_and_allow_lists_pick_built_ins() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1",
               "availableTools": ["builtin:skill", "builtin:task_complete"]}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    let (_, request) = next_request(&mut w);
    assert_eq!(offered_tools(&request), ["skill"]);
}

/// `modelCapabilities.supports.vision: false` keeps images from the model: a viewed image is
/// only its text result until a model switch turns vision on, and then the conversation
/// shows it (and off again hides every image).
#[test]
fn a_model_without_vision_gets_no_images_until_a_switch_turns_vision_on() {
    let (mut w, mut p) =
        image_viewed(json!({"modelCapabilities": {"supports": {"vision": false}}}));
    let has_image = |request: &HttpRequest| {
        messages(request).iter().any(|m| {
            m["content"]
                .as_array()
                .is_some_and(|parts| parts.iter().any(|part| part["type"] == "image_url"))
        })
    };
    let (call, request) = next_request(&mut w);
    assert_eq!(
        messages(&request)[3]["content"],
        "Viewed image file successfully."
    );
    assert!(!has_image(&request));
    answer(
        &mut w,
        call,
        &text_stream("c1", &["cannot see it"]),
        &mut [&mut p],
    );

    let switch = |w: &mut World, p: &mut Peer, vision: bool| {
        w.call(
            p,
            &mut [],
            "session.model.switchTo",
            json!({"sessionId": "s", "modelId": "m1",
                   "modelCapabilities": {"supports": {"vision": vision}}}),
        )
    };
    switch(&mut w, &mut p, true);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "again"}),
    );
    let (call, request) = next_request(&mut w);
    assert!(
        has_image(&request),
        "the stored image is shown once vision is on"
    );
    answer(
        &mut w,
        call,
        &text_stream("c2", &["a pixel"]),
        &mut [&mut p],
    );

    switch(&mut w, &mut p, false);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "and now"}),
    );
    let (_, request) = next_request(&mut w);
    assert!(!has_image(&request));
}

/// Answers exchange `call` with HTTP `status`, `headers` and a JSON error body.
fn answer_error(
    w: &mut World,
    call: EffectId,
    status: u16,
    headers: &[(&str, &str)],
    body: &Value,
) {
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpHead {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        },
    );
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpBody(body.to_string().into_bytes()),
    );
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
}

/// A rate-limited model call, with a client that answers auto-mode switches: the rate limit
/// is reported as eligible for the switch, the client is asked (with the error code and the
/// wait), and on "yes" the session switches to the `auto` model and the call is made again
/// with it; on "no" the turn ends.
#[test]
fn a_rate_limited_session_switches_to_auto_when_the_client_agrees() {
    let run = |answer: &str| {
        let mut w = World::new(HostConfig::default().with_model_call(CallConfig {
            max_retries: 0,
            ..CallConfig::default()
        }));
        let mut p = w.connect();
        create(
            &mut w,
            &mut p,
            "s",
            json!({"provider": provider(), "model": "m1", "requestAutoModeSwitch": true}),
        );
        w.call(
            &mut p,
            &mut [],
            "session.send",
            json!({"sessionId": "s", "prompt": "hi"}),
        );
        let (call, _) = next_request(&mut w);
        let body = json!({"error": {"message": "Weekly limit.", "type": "user_weekly_rate_limited",
                                    "code": "user_weekly_rate_limited"}});
        answer_error(&mut w, call, 429, &[("retry-after", "1")], &body);
        w.pump(&mut [&mut p]);
        let error = p.event("s", "session.error");
        assert_eq!(error["data"]["errorType"], "rate_limit");
        assert_eq!(error["data"]["errorCode"], "user_weekly_rate_limited");
        assert_eq!(error["data"]["eligibleForAutoSwitch"], true);
        let ask = p
            .inbox
            .iter()
            .find(|m| m["method"] == "autoModeSwitch.request")
            .cloned()
            .expect("autoModeSwitch.request");
        assert_eq!(ask["params"]["errorCode"], "user_weekly_rate_limited");
        assert_eq!(ask["params"]["retryAfterSeconds"], 1);
        let reply = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"response": answer}});
        w.send_frame(&p, &reply);
        w.pump(&mut [&mut p]);
        (w, p)
    };

    let (mut w, mut p) = run("yes");
    let change = p.event("s", "session.model_change");
    assert_eq!(change["data"]["newModel"], "auto");
    assert_eq!(change["data"]["previousModel"], "m1");
    assert_eq!(change["data"]["cause"], "rate_limit_auto_switch");
    let (call, request) = next_request(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "auto");
    answer(
        &mut w,
        call,
        &text_stream("c", &["recovered"]),
        &mut [&mut p],
    );
    assert_eq!(
        p.event("s", "assistant.message")["data"]["content"],
        "recovered"
    );
    assert_eq!(
        p.types("s")
            .iter()
            .filter(|t| *t == "assistant.turn_start")
            .count(),
        1
    );

    let (mut w, mut p) = run("no");
    w.pump(&mut [&mut p]);
    assert!(p.types("s").contains(&"session.idle".to_owned()));
    assert!(!p.types("s").contains(&"session.model_change".to_owned()));
    assert!(outputs(&mut w).iter().all(|o| !matches!(
        o,
        Output::Effect(Effect {
            op: EffectOp::HttpRequest(_),
            ..
        })
    )));
}

/// Infinite sessions: a model call that starts with the conversation past the background
/// threshold (and enough messages) starts a compaction beside it; once the summary is in,
/// the model sees the user's messages and the summary instead of the messages before the
/// compaction point, and what was answered meanwhile stays.
#[test]
fn a_full_context_is_compacted_in_the_background_by_the_model() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1",
               "infiniteSessions": {"enabled": true, "backgroundCompactionThreshold": 0.001}}),
    );
    let long = "A dragon story. ".repeat(40);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Tell a story."}),
    );
    let (call, _) = next_request(&mut w);
    answer(&mut w, call, &text_stream("c1", &[&long]), &mut [&mut p]);
    assert!(
        !p.types("s")
            .contains(&"session.compaction_start".to_owned()),
        "too few messages"
    );

    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Continue."}),
    );
    // The compaction's call and the turn's, in either order.
    let (first, first_request) = next_request(&mut w);
    let (second, second_request) = next_request(&mut w);
    let ((compaction, request), (main, _)) = if messages(&first_request).len() == 5 {
        ((first, first_request), (second, second_request))
    } else {
        ((second, second_request), (first, first_request))
    };
    let asked = messages(&request);
    assert_eq!(
        asked.len(),
        5,
        "system, three messages, the compaction prompt"
    );
    assert!(asked[4]["content"]
        .as_str()
        .unwrap()
        .starts_with("Please create a detailed summary of the conversation so far."));
    let start = p.event("s", "session.compaction_start");
    assert_eq!(start["data"]["trigger"], "threshold");
    assert!(start["data"]["conversationTokens"].as_u64().unwrap() > 0);
    answer(
        &mut w,
        main,
        &text_stream("c2", &["The castle."]),
        &mut [&mut p],
    );
    answer(
        &mut w,
        compaction,
        &text_stream("c3", &["<overview>A story.</overview>"]),
        &mut [&mut p],
    );
    let complete = p.event("s", "session.compaction_complete");
    assert_eq!(complete["data"]["success"], true);
    assert_eq!(
        complete["data"]["summaryContent"],
        "<overview>A story.</overview>"
    );
    assert_eq!(complete["data"]["checkpointNumber"], 1);
    // The stream reported no usage: the call's tokens are estimated.
    let used = &complete["data"]["compactionTokensUsed"];
    assert!(used["inputTokens"].as_u64().unwrap() > 0, "{used}");
    assert!(used["outputTokens"].as_u64().unwrap() > 0, "{used}");

    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "And then?"}),
    );
    let (_, request) = next_request(&mut w);
    let msgs = messages(&request);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(
        msgs[1]["content"],
        "Some of the conversation history has been summarized to free up context.\n\nYou were \
         originally given instructions from a user over one or more turns. Here were the user \
         messages:\n<user_message>\nTell a story.\n</user_message>\n<user_message>\nContinue.\n\
         </user_message>\n\nHere is a summary of the prior context:\n<summary>\n<overview>A \
         story.</overview>\n</summary>"
    );
    assert_eq!(msgs[2]["content"], "The castle.");
    // Too few messages since the compaction point: no second compaction yet.
    assert_eq!(
        p.types("s")
            .iter()
            .filter(|t| *t == "session.compaction_start")
            .count(),
        1
    );
}

/// `infiniteSessions.enabled: false`: no compaction however full the context.
#[test]
fn infinite_sessions_off_never_compacts() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1",
               "infiniteSessions": {"enabled": false, "backgroundCompactionThreshold": 0.001}}),
    );
    for prompt in ["one", "two", "three"] {
        w.call(
            &mut p,
            &mut [],
            "session.send",
            json!({"sessionId": "s", "prompt": prompt}),
        );
        let (call, _) = next_request(&mut w);
        answer(
            &mut w,
            call,
            &text_stream("c", &[&"x".repeat(800)]),
            &mut [&mut p],
        );
    }
    assert!(!p
        .types("s")
        .contains(&"session.compaction_start".to_owned()));
    assert!(outputs(&mut w).iter().all(|o| !matches!(
        o,
        Output::Effect(Effect {
            op: EffectOp::HttpRequest(_),
            ..
        })
    )));
}

/// `session.send` with `mode: "immediate"` while a turn runs steers it: the message is
/// listed as steering, then given to the model at the turn's next call (a `user.message`
/// with `delivery: "steering"` after the tool results), not queued for a turn of its own;
/// sent while no turn runs, it is an ordinary prompt.
#[test]
fn an_immediate_message_steers_the_running_turn_at_its_next_model_call() {
    let (mut w, mut p, call) = weather_turn();
    answer(&mut w, call, &tool_stream("chatcmpl-1"), &mut [&mut p]);
    // The client tool runs: the user steers meanwhile.
    let sent = w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Use Celsius.", "mode": "immediate"}),
    );
    let steer_id = sent["result"]["messageId"].as_str().unwrap().to_owned();
    let queue = w.call(
        &mut p,
        &mut [],
        "session.queue.pendingItems",
        json!({"sessionId": "s"}),
    );
    assert_eq!(queue["result"]["steeringMessages"], json!(["Use Celsius."]));
    assert_eq!(queue["result"]["items"], json!([]));
    answer_permission(&mut w, &mut p, "approve-once");
    answer_external_tool(&mut w, &mut p, "sunny, 68F");
    let (call2, request2) = next_request(&mut w);
    let msgs = messages(&request2);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    assert!(msgs[4]["content"]
        .as_str()
        .unwrap()
        .contains("Use Celsius."));
    let steered = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "user.message")
        .nth(1)
        .expect("the steering message");
    assert_eq!(steered["data"]["delivery"], "steering");
    assert_eq!(steered["data"]["messageId"], steer_id.as_str());
    let first = p.event("s", "user.message");
    assert_eq!(
        steered["data"]["interactionId"], first["data"]["interactionId"],
        "it joins the running interaction"
    );
    answer(
        &mut w,
        call2,
        &text_stream("chatcmpl-2", &["It is 20C."]),
        &mut [&mut p],
    );
    assert_eq!(p.types("s").last().unwrap(), "session.idle");
    assert_eq!(
        p.types("s").iter().filter(|t| *t == "session.idle").count(),
        1,
        "no second turn"
    );

    // With no turn running, an immediate message is an ordinary prompt.
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "Thanks", "mode": "immediate"}),
    );
    let (call3, request3) = next_request(&mut w);
    assert_eq!(messages(&request3).last().unwrap()["role"], "user");
    answer(
        &mut w,
        call3,
        &text_stream("chatcmpl-3", &["Welcome."]),
        &mut [&mut p],
    );
    let last = p
        .events("s")
        .into_iter()
        .rfind(|e| e["type"] == "user.message")
        .unwrap();
    assert!(last["data"].get("delivery").is_none());
}

/// A steering message the running turn never took (its model answered without calling
/// tools, so there was no next call) gets a turn of its own right after, in the
/// runtime's order: before prompts queued behind the turn.
#[test]
fn steering_a_turn_that_ends_first_starts_the_next_turn() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": provider(), "model": "m1"}),
    );
    let send = |w: &mut World, p: &mut Peer, prompt: &str, mode: &str| {
        w.call(
            p,
            &mut [],
            "session.send",
            json!({"sessionId": "s", "prompt": prompt, "mode": mode}),
        );
    };
    send(&mut w, &mut p, "Hello", "enqueue");
    let (call, _) = next_request(&mut w);
    send(&mut w, &mut p, "Later", "enqueue");
    send(&mut w, &mut p, "Be brief", "immediate");
    answer(
        &mut w,
        call,
        &text_stream("chatcmpl-1", &["Hi!"]),
        &mut [&mut p],
    );
    let (call2, request2) = next_request(&mut w);
    let last = messages(&request2).last().unwrap().clone();
    assert!(
        last["content"].as_str().unwrap().contains("Be brief"),
        "{last}"
    );
    answer(
        &mut w,
        call2,
        &text_stream("chatcmpl-2", &["Ok."]),
        &mut [&mut p],
    );
    let (_, request3) = next_request(&mut w);
    let last = messages(&request3).last().unwrap().clone();
    assert!(
        last["content"].as_str().unwrap().contains("Later"),
        "{last}"
    );
}
