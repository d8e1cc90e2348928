//! Turns: `initialize`, prompts streaming and ending, cancellation, errors, junk input.

use super::*;

#[test]
fn initialize_advertises_what_works_and_gates_other_requests() {
    let mut w = World::new();
    let mut peer = w.connect();
    let early = w.call(
        &mut peer,
        "session/new",
        json!({"cwd": "/w", "mcpServers": []}),
    );
    assert_eq!(early["error"]["code"], -32600, "{early}");
    let init = w.call(
        &mut peer,
        "initialize",
        json!({"protocolVersion": 7, "clientCapabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let r = &init["result"];
    assert_eq!(r["protocolVersion"], 1);
    assert_eq!(r["authMethods"], json!([]));
    assert_eq!(r["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        r["agentCapabilities"]["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}, "delete": {}})
    );
    assert_eq!(r["agentCapabilities"]["promptCapabilities"]["image"], false);
    assert_eq!(
        w.call(&mut peer, "authenticate", json!({"methodId": "x"}))["result"],
        json!({})
    );
    let unknown = w.call(&mut peer, "logout", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    assert_eq!(unknown["error"]["data"], json!({"method": "logout"}));
    let relative = w.call(
        &mut peer,
        "session/new",
        json!({"cwd": "rel", "mcpServers": []}),
    );
    assert_eq!(relative["error"]["code"], -32602);
}

#[test]
fn a_prompt_streams_chunks_then_ends_the_turn() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let new_state = &peer.inbox[1]["result"];
    assert_eq!(new_state["modes"]["currentModeId"], "interactive");
    assert_eq!(new_state["configOptions"][1]["id"], "model");
    let id = w.request(
        &mut peer,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello there"}]}),
    );
    let response = peer.response(id).expect("the scripted turn ends at once");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(peer.agent_text(), "You said: hello there");
    let updates = peer.updates();
    // The client's own prompt is not echoed; every chunk of the message has one messageId.
    assert!(
        updates
            .iter()
            .all(|u| u["sessionUpdate"] == "agent_message_chunk"),
        "{updates:#?}"
    );
    assert!(updates.len() > 1, "streamed as several chunks");
    assert!(updates
        .windows(2)
        .all(|p| p[0]["messageId"] == p[1]["messageId"]));
    let last_update = peer
        .inbox
        .iter()
        .rposition(|m| m["method"] == "session/update")
        .unwrap();
    assert!(
        last_update < peer.position_of_response(id),
        "updates before the response"
    );
    for m in peer
        .inbox
        .iter()
        .filter(|m| m["method"] == "session/update")
    {
        assert_eq!(m["params"]["sessionId"], json!(session));
    }
    // A session of another connection, or an unknown one, is not found.
    let other = w.call(
        &mut peer,
        "session/prompt",
        json!({"sessionId": "nope", "prompt": []}),
    );
    assert_eq!(other["error"]["code"], -32002);
    assert_eq!(other["error"]["data"], json!({"sessionId": "nope"}));
}

#[test]
fn cancel_mid_stream_ends_with_cancelled() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let id = prompt(&mut w, &mut peer, &session, "slow please");
    assert_eq!(peer.agent_text(), "one");
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let response = peer.response(id).expect("answered when the turn stops");
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    let at = peer.position_of_response(id);
    w.advance(&mut peer, Duration::from_secs(5));
    assert_eq!(peer.inbox.len(), at + 1, "nothing after the response");
    assert_eq!(peer.agent_text(), "one");
}

#[test]
fn cancel_request_on_a_prompt_and_a_cancelled_permission_cancel_the_turn() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "slow");
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": id}}),
    );
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "cancelled"
    );

    let id = prompt(&mut w, &mut peer, &session, "read file a.txt");
    let ask = peer.requests("session/request_permission").remove(0);
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "cancelled"}}),
    );
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "cancelled"
    );
    assert!(peer.requests("fs/read_text_file").is_empty());
}

#[test]
fn junk_from_the_client_never_breaks_the_session() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    w.send_raw(&mut peer, b"this is not json\n\r\n\n");
    let parse_error = peer.inbox.last().unwrap().clone();
    assert_eq!(parse_error["error"]["code"], -32700);
    assert_eq!(parse_error["id"], Value::Null);
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
    );
    w.send(&mut peer, json!({"jsonrpc": "2.0", "id": 99, "result": {}}));
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "_vendor/notice", "params": {}}),
    );
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"bogus": 1}}),
    );
    assert_eq!(w.host.acp_ignored_responses(peer.conn), Some(2));
    let unknown = w.call(&mut peer, "session/fork", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    let bad = w.call(&mut peer, "session/prompt", json!({"sessionId": 5}));
    assert_eq!(bad["error"]["code"], -32602);
    let id = prompt(&mut w, &mut peer, &session, "still here?");
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "end_turn"
    );
}

#[test]
fn a_turn_error_is_an_error_response() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let id = prompt(&mut w, &mut peer, &session, "fail now");
    let r = peer.response(id).unwrap();
    assert_eq!(r["error"]["code"], -32603);
    assert_eq!(r["error"]["message"], "the model is down");
}
