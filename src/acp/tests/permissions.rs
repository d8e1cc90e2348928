//! Permission prompts as `session/request_permission`: allow, deny, "always", hooks, autopilot.

use super::*;

/// The brief's end-to-end flow, sans-IO: tool call, permission (allow once), fs read,
/// completion, answer with the content.
#[test]
fn reading_a_file_asks_permission_then_reads_through_the_client() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let prompt = w.request(
        &mut peer,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "Please read file hello.txt"}]}),
    );
    let tool_call = peer.updates()[0].clone();
    assert_eq!(tool_call["sessionUpdate"], "tool_call");
    assert_eq!(tool_call["kind"], "read");
    assert_eq!(tool_call["title"], "Read /work/project/hello.txt");
    assert_eq!(
        tool_call["locations"],
        json!([{"path": "/work/project/hello.txt"}])
    );
    let call_id = tool_call["toolCallId"].clone();
    let asks = peer.requests("session/request_permission");
    assert_eq!(asks.len(), 1);
    let ask = &asks[0];
    assert_eq!(ask["params"]["toolCall"]["toolCallId"], call_id);
    assert_eq!(ask["params"]["sessionId"], json!(session));
    // Our ids are a space of their own: 0 while the client's prompt is id 2.
    assert_eq!(ask["id"], 0);
    assert!(
        peer.requests("fs/read_text_file").is_empty(),
        "nothing read before approval"
    );
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
    );
    let reads = peer.requests("fs/read_text_file");
    assert_eq!(reads.len(), 1);
    assert_eq!(
        reads[0]["params"],
        json!({"sessionId": session, "path": "/work/project/hello.txt"})
    );
    assert!(peer.response(prompt).is_none());
    w.respond(
        &mut peer,
        &reads[0]["id"],
        json!({"content": "Hello, world!\n"}),
    );
    let response = peer.response(prompt).expect("turn ended");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let tool_updates: Vec<Value> = peer
        .updates()
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .collect();
    assert_eq!(tool_updates[0]["status"], "in_progress");
    let done = tool_updates.last().unwrap();
    assert_eq!(done["toolCallId"], call_id);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["content"][0]["content"]["text"], "Hello, world!\n");
    assert_eq!(peer.agent_text(), "Hello, world!\n");
    let events = w.host.session_events(&session).unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert!(kinds.contains(&"permission.requested") && kinds.contains(&"tool.execution_complete"));
}

#[test]
fn without_the_fs_capability_the_scripted_result_is_used() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let prompt = w.request(
        &mut peer,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "read file a.txt"}]}),
    );
    let ask = peer.requests("session/request_permission").remove(0);
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
    );
    assert!(
        peer.requests("fs/read_text_file").is_empty(),
        "not advertised, never called"
    );
    assert_eq!(
        peer.response(prompt).unwrap()["result"]["stopReason"],
        "end_turn"
    );
}

#[test]
fn deny_fails_the_tool_call_and_the_turn_goes_on() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let prompt = w.request(
        &mut peer,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "read file secret.txt"}]}),
    );
    let ask = peer.requests("session/request_permission").remove(0);
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}}),
    );
    assert!(peer.requests("fs/read_text_file").is_empty());
    let failed = peer.updates().into_iter().last_where("tool_call_update");
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        peer.response(prompt).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    assert!(
        peer.agent_text().contains("rejected"),
        "{}",
        peer.agent_text()
    );
}

#[test]
fn always_is_remembered_for_the_session() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let first = prompt(&mut w, &mut peer, &session, "read file a.txt");
    allow(&mut w, &mut peer, "allow-always");
    let read = peer.requests("fs/read_text_file").remove(0);
    w.respond(&mut peer, &read["id"], json!({"content": "A"}));
    assert!(peer.response(first).is_some());
    let second = prompt(&mut w, &mut peer, &session, "read file b.txt");
    assert_eq!(
        peer.requests("session/request_permission").len(),
        1,
        "not asked again"
    );
    let read = peer.requests("fs/read_text_file").remove(1);
    assert_eq!(read["params"]["path"], "/work/project/b.txt");
    w.respond(&mut peer, &read["id"], json!({"content": "B"}));
    assert_eq!(
        peer.response(second).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    // Another kind of prompt is still asked.
    prompt(&mut w, &mut peer, &session, "run it");
    assert_eq!(peer.requests("session/request_permission").len(), 2);
}

#[test]
fn url_and_path_always_cover_the_domain_and_the_location() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let first = prompt(&mut w, &mut peer, &session, "fetch it");
    let ask = peer.requests("session/request_permission").remove(0);
    assert_eq!(ask["params"]["toolCall"]["kind"], "execute");
    allow(&mut w, &mut peer, "allow-always");
    assert!(peer.response(first).is_some());
    prompt(&mut w, &mut peer, &session, "fetch again");
    assert_eq!(
        peer.requests("session/request_permission").len(),
        1,
        "same domain"
    );
    let outside = prompt(&mut w, &mut peer, &session, "outside");
    assert_eq!(peer.requests("session/request_permission").len(), 2);
    allow(&mut w, &mut peer, "allow-always");
    assert!(peer.response(outside).is_some());
    prompt(&mut w, &mut peer, &session, "outside again");
    assert_eq!(
        peer.requests("session/request_permission").len(),
        2,
        "same location"
    );
    let completed: Vec<Value> = w
        .host
        .session_events(&session)
        .unwrap()
        .iter()
        .filter(|e| e.event_type == "permission.completed")
        .map(|e| serde_json::from_slice::<Value>(&e.json).unwrap()["data"]["result"].clone())
        .collect();
    assert_eq!(completed[0]["domain"], "example.com");
    assert_eq!(completed[2]["kind"], "approved-for-location");
    assert_eq!(completed[2]["locationKey"], "/etc");
}

#[test]
fn hook_prompts_are_denied_without_asking() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "hook please");
    assert!(peer.requests("session/request_permission").is_empty());
    assert!(peer.requests("fs/read_text_file").is_empty());
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    let failed = peer.updates().into_iter().last_where("tool_call_update");
    assert_eq!(failed["status"], "failed");
}

#[test]
fn autopilot_approves_without_asking_and_modes_are_announced() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let r = w.call(
        &mut peer,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "autopilot"}),
    );
    assert_eq!(r["result"], json!({}));
    let kinds = peer.update_kinds();
    assert_eq!(kinds, ["current_mode_update", "config_option_update"]);
    assert_eq!(peer.updates()[0]["currentModeId"], "autopilot");
    let bad = w.call(
        &mut peer,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "yolo"}),
    );
    assert_eq!(bad["error"]["code"], -32602);
    prompt(&mut w, &mut peer, &session, "read file a.txt");
    assert!(peer.requests("session/request_permission").is_empty());
    assert_eq!(peer.requests("fs/read_text_file").len(), 1);
    let r = w.call(
        &mut peer,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "mode", "value": "interactive"}),
    );
    assert_eq!(
        r["result"]["configOptions"][0]["currentValue"],
        "interactive"
    );
    let bad = w.call(
        &mut peer,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "gpt"}),
    );
    assert_eq!(bad["error"]["code"], -32602);
}

#[test]
fn cancel_while_the_permission_is_pending_withdraws_the_request() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "read file a.txt");
    let ask = peer.requests("session/request_permission").remove(0);
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "cancelled"
    );
    let withdrawn = peer
        .inbox
        .iter()
        .find(|m| m["method"] == "$/cancel_request")
        .expect("our request is withdrawn");
    assert_eq!(withdrawn["params"]["requestId"], ask["id"]);
    // The client's late `cancelled` answer is ignored.
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "cancelled"}}),
    );
    assert_eq!(w.host.acp_ignored_responses(peer.conn), Some(1));
}

#[test]
fn copilot_clients_see_builtin_tools_with_their_permission_kinds() {
    let mut w = World::new();
    let conn = w.host.open(w.now, Framing::ContentLength);
    let mut decoder = FrameDecoder::new(Framing::ContentLength, FrameLimits::default());
    let mut inbox: Vec<Value> = Vec::new();
    let mut send = |w: &mut World, inbox: &mut Vec<Value>, body: Value| {
        let body = serde_json::to_vec(&body).unwrap();
        let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        wire.extend_from_slice(&body);
        w.host.handle_bytes(w.now, conn, &wire);
        while let Some(frame) = w.host.poll_transmit(conn) {
            decoder.push(&frame).unwrap();
            while let Some(b) = decoder.next_frame().unwrap() {
                inbox.push(serde_json::from_slice(&b).unwrap());
            }
        }
    };
    send(
        &mut w,
        &mut inbox,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session.create",
               "params": {"sessionId": "s1", "requestPermission": true, "workingDirectory": "/w"}}),
    );
    send(
        &mut w,
        &mut inbox,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session.send",
               "params": {"sessionId": "s1", "prompt": "run the tests"}}),
    );
    let events: Vec<Value> = inbox
        .iter()
        .filter(|m| m["method"] == "session.event")
        .map(|m| m["params"]["event"].clone())
        .collect();
    let start = events
        .iter()
        .find(|e| e["type"] == "tool.execution_start")
        .unwrap();
    assert_eq!(start["data"]["toolName"], "bash");
    let asked = events
        .iter()
        .find(|e| e["type"] == "permission.requested")
        .unwrap();
    let request = &asked["data"]["permissionRequest"];
    assert_eq!(request["kind"], "shell");
    assert_eq!(request["fullCommandText"], "ls -l");
    assert_eq!(request["toolCallId"], start["data"]["toolCallId"]);
    let request_id = asked["data"]["requestId"].clone();
    send(
        &mut w,
        &mut inbox,
        json!({"jsonrpc": "2.0", "id": 3, "method": "session.permissions.handlePendingPermissionRequest",
               "params": {"sessionId": "s1", "requestId": request_id, "result": {"kind": "approve-once"}}}),
    );
    let events: Vec<Value> = inbox
        .iter()
        .filter(|m| m["method"] == "session.event")
        .map(|m| m["params"]["event"].clone())
        .collect();
    let done = events
        .iter()
        .find(|e| e["type"] == "tool.execution_complete")
        .expect("the scripted result completes the call");
    assert_eq!(done["data"]["success"], true);
    assert!(events.iter().any(|e| e["type"] == "session.idle"));
}
