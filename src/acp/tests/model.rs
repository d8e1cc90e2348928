//! An ACP session served by the model agent through a server default provider: the model's
//! answer streams as `agent_message_chunk`s, the prompt ends with `end_turn`, and
//! `session/cancel` cancels the HTTP call.

use super::*;
use crate::host::{Effect, EffectEvent, EffectId, EffectOp, Output};
use crate::model::ServerDefault;

fn model_world() -> World {
    let default = ServerDefault::from_flags("http://127.0.0.1:9/v1", Some("local".into()), None)
        .expect("a valid default");
    World {
        host: Host::new(HostConfig {
            model_default: Some(default),
            ..HostConfig::default()
        }),
        now: Timestamp::from_millis(T0),
    }
}

fn next_call(w: &mut World) -> (EffectId, crate::model::HttpRequest) {
    while let Some(out) = w.host.poll_output() {
        if let Output::Effect(Effect {
            id: call,
            op: EffectOp::HttpRequest(request),
        }) = out
        {
            return (call, request);
        }
    }
    panic!("no HttpRequest")
}

#[test]
fn a_server_default_model_answers_an_acp_prompt() {
    let mut w = model_world();
    let (mut peer, session) = w.ready(json!({}));
    let id = prompt(&mut w, &mut peer, &session, "hello model");
    let (call, request) = next_call(&mut w);
    assert_eq!(request.url, "http://127.0.0.1:9/v1/chat/completions");
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "local");
    assert!(body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .ends_with("hello model"));
    let stream = concat!(
        "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hi \"}}]}\n\n",
        "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"there.\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n"
    );
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
        EffectEvent::HttpBody(stream.as_bytes().to_vec()),
    );
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(&mut peer);
    let response = peer.response(id).expect("the prompt ends");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(peer.agent_text(), "Hi there.");
}

#[test]
fn session_cancel_cancels_the_model_call() {
    let mut w = model_world();
    let (mut peer, session) = w.ready(json!({}));
    let id = prompt(&mut w, &mut peer, &session, "hello");
    let (call, _) = next_call(&mut w);
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let outputs: Vec<Output> = std::iter::from_fn(|| w.host.poll_output()).collect();
    assert!(
        outputs.contains(&Output::Effect(Effect {
            id: call,
            op: EffectOp::HttpCancel
        })),
        "{outputs:?}"
    );
    let response = peer.response(id).expect("answered when the turn stops");
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
}

#[test]
fn a_failed_model_call_is_a_turn_error_and_the_session_stays_usable() {
    let mut w = model_world();
    let (mut peer, session) = w.ready(json!({}));
    let id = prompt(&mut w, &mut peer, &session, "hello");
    let (call, _) = next_call(&mut w);
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpError {
            kind: crate::model::TransportErrorKind::Connect,
            message: "connection refused".to_string(),
        },
    );
    w.pump(&mut peer);
    let response = peer.response(id).expect("the prompt ends");
    // A session.error ends the prompt with an error response naming the URL.
    let message = response["error"]["message"]
        .as_str()
        .expect("an error response");
    assert!(message.contains("127.0.0.1:9"), "{message}");
    let again = prompt(&mut w, &mut peer, &session, "again");
    let (call, _) = next_call(&mut w);
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
            b"data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n".to_vec(),
        ),
    );
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(&mut peer);
    let response = peer.response(again).expect("the second prompt ends");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
}

/// Feeds a complete 200 SSE answer for `call`.
fn answer(w: &mut World, peer: &mut Peer, call: EffectId, stream: &str) {
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
        EffectEvent::HttpBody(stream.as_bytes().to_vec()),
    );
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(peer);
}

#[test]
fn the_models_edit_is_performed_by_a_client_that_offers_fs() {
    let mut w = model_world();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "fix the greeting");
    let (call, request) = next_call(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"edit") && names.contains(&"view"),
        "{names:?}"
    );
    let args = json!({"path": "hello.txt", "old_str": "world", "new_str": "ACP"}).to_string();
    let tool_call = json!({"id": "c1", "choices": [{"delta": {"tool_calls": [{"index": 0,
        "id": "call_e", "type": "function", "function": {"name": "edit", "arguments": args}}]},
        "finish_reason": "tool_calls"}]});
    answer(
        &mut w,
        &mut peer,
        call,
        &format!("data: {tool_call}\n\ndata: [DONE]\n\n"),
    );
    allow(&mut w, &mut peer, "allow-once");
    // The client reads the file, agentwire applies the edit, the client writes it back.
    let read = peer.requests("fs/read_text_file").remove(0);
    assert_eq!(read["params"]["path"], "/work/project/hello.txt");
    w.respond(&mut peer, &read["id"], json!({"content": "hello world\n"}));
    let write = peer.requests("fs/write_text_file").remove(0);
    assert_eq!(write["params"]["path"], "/work/project/hello.txt");
    assert_eq!(write["params"]["content"], "hello ACP\n");
    w.respond(&mut peer, &write["id"], json!(null));
    // The next model call carries the result.
    let (call, request) = next_call(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_e");
    assert!(
        last["content"].as_str().unwrap().contains("updated"),
        "{last}"
    );
    let done = "data: {\"id\":\"c2\",\"choices\":[{\"delta\":{\"content\":\"Fixed.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    answer(&mut w, &mut peer, call, done);
    assert_eq!(
        peer.response(id).expect("the prompt ends")["result"]["stopReason"],
        "end_turn"
    );
}

#[test]
fn the_models_view_is_read_by_the_client_and_numbered() {
    let mut w = model_world();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "show me");
    let (call, _) = next_call(&mut w);
    let args = json!({"path": "a.txt", "view_range": [2, 3]}).to_string();
    let tool_call = json!({"id": "c1", "choices": [{"delta": {"tool_calls": [{"index": 0,
        "id": "call_v", "type": "function", "function": {"name": "view", "arguments": args}}]},
        "finish_reason": "tool_calls"}]});
    answer(
        &mut w,
        &mut peer,
        call,
        &format!("data: {tool_call}\n\ndata: [DONE]\n\n"),
    );
    allow(&mut w, &mut peer, "allow-once");
    let read = peer.requests("fs/read_text_file").remove(0);
    assert_eq!(read["params"]["line"], 2);
    assert_eq!(read["params"]["limit"], 2);
    w.respond(&mut peer, &read["id"], json!({"content": "two\nthree\n"}));
    let (call, request) = next_call(&mut w);
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], "2. two\n3. three\n");
    let done = "data: {\"id\":\"c2\",\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    answer(&mut w, &mut peer, call, done);
    assert!(peer.response(id).is_some());
}
