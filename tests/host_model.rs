//! The model loop driven through the host's sans-IO API: BYOK sessions whose HTTP exchanges
//! are answered with recorded Chat Completions bytes (no sockets).

use std::time::Duration;

use agentwire::host::{HostConfig, Output};
use agentwire::model::{CallConfig, HttpRequest, ServerDefault, TransportErrorKind};
use serde_json::{json, Value};

#[path = "support/host_world.rs"]
mod host_world;
use host_world::*;

const KEY: &str = "sk-very-secret-key-123";

fn provider() -> Value {
    json!({"type": "openai", "baseUrl": "http://127.0.0.1:9/v1", "apiKey": KEY})
}

/// The next HTTP request the host asked for.
fn next_request(w: &mut World) -> (u64, HttpRequest) {
    loop {
        match w.host.poll_output() {
            Some(Output::HttpRequest { call, request, .. }) => return (call, request),
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

fn text_stream(id: &str, parts: &[&str]) -> Vec<u8> {
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

fn tool_stream(id: &str) -> Vec<u8> {
    sse(&[
        json!({"id": id, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}}]}),
        json!({"id": id, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Paris\"}"}}]}}]}),
        json!({"id": id, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ])
}

/// Answers exchange `call` with a 200 event stream, split into small chunks.
fn answer(w: &mut World, call: u64, body: &[u8], peers: &mut [&mut Peer]) {
    w.now = w.now.saturating_add(Duration::from_millis(5));
    let headers = vec![("content-type".to_owned(), "text/event-stream".to_owned())];
    w.host.handle_http_response(w.now, call, 200, &headers);
    for piece in body.chunks(7) {
        w.host.handle_http_body(w.now, call, piece);
    }
    w.host.handle_http_end(w.now, call);
    w.pump(peers);
}

fn messages(request: &HttpRequest) -> Vec<Value> {
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
    let headers = vec![("content-type".to_owned(), "text/event-stream".to_owned())];
    w.host.handle_http_response(w.now, call, 200, &headers);
    w.host.handle_http_body(
        w.now,
        call,
        b"data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n",
    );
    w.call(&mut p, &mut [], "session.abort", json!({"sessionId": "s"}));
    assert!(outputs(&mut w).contains(&Output::HttpCancel { call }));
    let idle = p.event("s", "session.idle");
    assert_eq!(idle["data"]["aborted"], true);
    // Late bytes for the cancelled call change nothing.
    let before = p.inbox.len();
    w.host.handle_http_body(
        w.now,
        call,
        b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
    );
    w.host.handle_http_end(w.now, call);
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

fn error_then_next_prompt_works(fault: impl FnOnce(&mut World, u64)) -> (World, Peer) {
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
        w.host.handle_http_response(w.now, call, 500, &[]);
        w.host
            .handle_http_body(w.now, call, b"{\"error\":{\"message\":\"boom\"}}");
        w.host.handle_http_end(w.now, call);
    });
    assert_eq!(p.event("s", "session.error")["data"]["statusCode"], 500);
}

#[test]
fn connection_refused_is_a_session_error() {
    error_then_next_prompt_works(|w, call| {
        w.host.handle_http_error(
            w.now,
            call,
            TransportErrorKind::Connect,
            &format!("connection refused (Bearer {KEY})"),
        );
    });
}

#[test]
fn cut_and_malformed_streams_are_session_errors() {
    error_then_next_prompt_works(|w, call| {
        let headers = vec![("content-type".to_owned(), "text/event-stream".to_owned())];
        w.host.handle_http_response(w.now, call, 200, &headers);
        w.host.handle_http_body(
            w.now,
            call,
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        );
        w.host.handle_http_end(w.now, call);
    });
    error_then_next_prompt_works(|w, call| {
        let headers = vec![("content-type".to_owned(), "text/event-stream".to_owned())];
        w.host.handle_http_response(w.now, call, 200, &headers);
        w.host.handle_http_body(w.now, call, b"data: {not json\n\n");
        w.host.handle_http_end(w.now, call);
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
    w.host.handle_http_response(
        w.now,
        call,
        429,
        &[("retry-after".to_owned(), "1".to_owned())],
    );
    w.host.handle_http_end(w.now, call);
    w.pump(&mut [&mut p]);
    assert!(p.types("s").contains(&"session.warning".to_owned()));
    let early = outputs(&mut w);
    assert!(
        early
            .iter()
            .all(|o| !matches!(o, Output::HttpRequest { .. })),
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
    let headers = vec![("content-type".to_owned(), "text/event-stream".to_owned())];
    w.host.handle_http_response(w.now, call, 200, &headers);
    w.host.handle_http_body(
        w.now,
        call,
        b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
    );
    let at = w.host.poll_timeout().expect("an idle deadline");
    w.now = at;
    w.host.handle_timeout(at);
    w.pump(&mut [&mut p]);
    assert!(outputs(&mut w).contains(&Output::HttpCancel { call }));
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
    assert!(outputs(&mut w)
        .iter()
        .all(|o| !matches!(o, Output::HttpRequest { .. })));
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
/// model calls `bash` with `arguments`; approves the call and returns the `ShellExec`
/// output's process id, cwd and timeout.
fn start_bash(w: &mut World, p: &mut Peer, arguments: Value) -> (String, Option<String>, u64) {
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
            Output::ShellExec {
                process_id,
                cwd,
                timeout_ms,
                ..
            } => Some((process_id, cwd, timeout_ms)),
            _ => None,
        })
        .expect("a ShellExec output for the bash call")
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
    w.host.handle_shell_output(
        w.now,
        &process,
        agentwire::host::ShellStream::Stdout,
        b"started\n",
    );
    // Before the deadline nothing is killed.
    w.now = w.now.saturating_add(Duration::from_millis(1_000));
    w.host.handle_timeout(w.now);
    assert!(!outputs(&mut w)
        .iter()
        .any(|o| matches!(o, Output::ShellKill { .. })));
    // At the deadline the host kills the command; its exit reports the timeout.
    w.now = w.now.saturating_add(Duration::from_millis(1_000));
    w.host.handle_timeout(w.now);
    let killed = outputs(&mut w).into_iter().any(|o| {
        matches!(&o, Output::ShellKill { process_id, signal } if *process_id == process && signal == "SIGKILL")
    });
    assert!(killed, "the host kills the command at its deadline");
    w.host.handle_shell_exit(w.now, &process, None);
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
    w.host.handle_shell_exit(w.now, &process, None);
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
    w.host.handle_shell_exit(w.now, &process, None);
    assert_eq!(bash_result(&mut w), "<killed by a signal>");
    // The deadline no longer fires for it.
    w.now = w.now.saturating_add(Duration::from_secs(200));
    w.host.handle_timeout(w.now);
    assert!(!outputs(&mut w)
        .iter()
        .any(|o| matches!(o, Output::ShellKill { .. })));
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
    assert!(!outputs(&mut w)
        .iter()
        .any(|o| matches!(o, Output::HttpRequest { .. })));
    w.now = w.now.saturating_add(Duration::from_secs(10));
    w.host.handle_timeout(w.now);
    let cancelled = outputs(&mut w)
        .iter()
        .any(|o| matches!(o, Output::HttpCancel { call: c } if *c == call));
    assert!(cancelled);
    w.pump(&mut [&mut p]);
    assert_eq!(listed(&p, id), Some(vec!["m1".to_owned()]));
    assert_eq!(listed(&p, id2), Some(vec!["m1".to_owned()]));
    // A late answer changes nothing; the next request asks again (failures are not cached).
    w.host.handle_http_response(w.now, call, 200, &[]);
    let id3 = ask_model_list(&mut w, &mut p, "s");
    let (call3, _) = next_request(&mut w);
    w.host.handle_http_response(w.now, call3, 200, &[]);
    w.host
        .handle_http_body(w.now, call3, br#"{"data":[{"id":"x"},{"id":"y"}]}"#);
    w.host.handle_http_end(w.now, call3);
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
    let answer_list = |w: &mut World, call: u64, body: &[u8]| {
        w.host.handle_http_response(w.now, call, 200, &[]);
        w.host.handle_http_body(w.now, call, body);
        w.host.handle_http_end(w.now, call);
    };
    let id_a = ask_model_list(&mut w, &mut p, "a");
    let (call, _) = next_request(&mut w);
    answer_list(&mut w, call, br#"{"data":[{"id":"for-key-1"}]}"#);
    w.pump(&mut [&mut p]);
    assert_eq!(listed(&p, id_a), Some(vec!["for-key-1".to_owned()]));
    // Same URL and key: from the cache.
    let id_b = ask_model_list(&mut w, &mut p, "b");
    assert_eq!(listed(&p, id_b), Some(vec!["for-key-1".to_owned()]));
    assert!(!outputs(&mut w)
        .iter()
        .any(|o| matches!(o, Output::HttpRequest { .. })));
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
    assert!(!outputs(&mut w)
        .iter()
        .any(|o| matches!(o, Output::HttpRequest { .. })));
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
fn answer_json(w: &mut World, call: u64, status: u16, body: &Value, peers: &mut [&mut Peer]) {
    let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    w.host.handle_http_response(w.now, call, status, &headers);
    w.host
        .handle_http_body(w.now, call, body.to_string().as_bytes());
    w.host.handle_http_end(w.now, call);
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
