//! Sessions across connections and processes: `session/load` replay, list, close, delete, restore.

use super::*;

#[test]
fn load_replays_the_history_before_answering() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "read file hello.txt");
    allow(&mut w, &mut peer, "allow-once");
    let read = peer.requests("fs/read_text_file").remove(0);
    w.respond(&mut peer, &read["id"], json!({"content": "hi there"}));
    assert!(peer.response(id).is_some());

    let mut other = w.connect();
    w.call(&mut other, "initialize", json!({"protocolVersion": 1}));
    let missing = w.call(
        &mut other,
        "session/load",
        json!({"sessionId": "nope", "cwd": "/w", "mcpServers": []}),
    );
    assert_eq!(missing["error"]["code"], -32002);
    assert_eq!(missing["error"]["data"]["sessionId"], "nope");
    let load_id = w.request(
        &mut other,
        "session/load",
        json!({"sessionId": session, "cwd": "/work/project", "mcpServers": []}),
    );
    let at = other.position_of_response(load_id);
    let response = &other.inbox[at];
    assert_eq!(response["result"]["modes"]["currentModeId"], "interactive");
    let kinds = other.update_kinds();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "agent_message_chunk"
        ]
    );
    assert!(
        other
            .inbox
            .iter()
            .rposition(|m| m["method"] == "session/update")
            .unwrap()
            < at
    );
    let updates = other.updates();
    assert_eq!(updates[0]["content"]["text"], "read file hello.txt");
    assert_eq!(updates[1]["toolCallId"], updates[3]["toolCallId"]);
    assert_eq!(updates[4]["content"]["text"], "hi there");
    // The loaded session takes prompts; the first client sees the new user message.
    let next = prompt(&mut w, &mut other, &session, "and now?");
    assert_eq!(
        other.response(next).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    assert!(other.agent_text().ends_with("You said: and now?"));
    w.pump(&mut peer);
    let seen = peer.updates().into_iter().last_where("user_message_chunk");
    assert_eq!(seen["content"]["text"], "and now?");
    // Resume does not replay.
    let mut third = w.connect();
    w.call(&mut third, "initialize", json!({"protocolVersion": 1}));
    let resumed = w.call(
        &mut third,
        "session/resume",
        json!({"sessionId": session, "cwd": "/work/project"}),
    );
    assert!(resumed["result"]["configOptions"].is_array());
    assert!(third.updates().is_empty());
}

#[test]
fn list_close_and_delete() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    prompt(&mut w, &mut peer, &session, "hello");
    let list = w.call(&mut peer, "session/list", json!({}));
    let sessions = list["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["sessionId"], json!(session));
    assert_eq!(sessions[0]["cwd"], "/work/project");
    assert_eq!(sessions[0]["title"], "hello");
    let filtered = w.call(&mut peer, "session/list", json!({"cwd": "/elsewhere"}));
    assert_eq!(filtered["result"]["sessions"], json!([]));

    let slow = prompt(&mut w, &mut peer, &session, "slow");
    let closed = w.call(&mut peer, "session/close", json!({"sessionId": session}));
    assert_eq!(closed["result"], json!({}));
    assert_eq!(
        peer.response(slow).unwrap()["result"]["stopReason"],
        "cancelled"
    );
    assert!(peer.position_of_response(slow) < peer.inbox.len() - 1);
    let again = prompt(&mut w, &mut peer, &session, "hi");
    assert_eq!(
        peer.response(again).unwrap()["error"]["code"],
        -32002,
        "detached"
    );
    assert_eq!(w.host.session_count(), 1, "close keeps the session");

    let deleted = w.call(&mut peer, "session/delete", json!({"sessionId": session}));
    assert_eq!(deleted["result"], json!({}));
    assert_eq!(w.host.session_count(), 0);
    let gone = w.call(&mut peer, "session/delete", json!({"sessionId": session}));
    assert_eq!(gone["error"]["code"], -32002);
}

/// What a durable store does between processes: the first host reports its persisted events,
/// a second host restores them; `session/load` there replays the same history, keeps the
/// mode and the "always" approvals, and the session takes prompts.
#[test]
fn a_restored_session_loads_like_a_live_one() {
    let scenario = Scenario::from_json(SCENARIO).unwrap();
    let mut config = HostConfig::with_scenario(scenario);
    config.report_persisted_events = true;
    let mut w = World::new();
    w.host = Host::new(config.clone());
    let (mut peer, session) = w.ready(read_caps());
    w.call(
        &mut peer,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "autopilot"}),
    );
    w.call(
        &mut peer,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "interactive"}),
    );
    let id = prompt(&mut w, &mut peer, &session, "read file hello.txt");
    allow(&mut w, &mut peer, "allow-always");
    let read = peer.requests("fs/read_text_file").remove(0);
    w.respond(&mut peer, &read["id"], json!({"content": "stored"}));
    assert!(peer.response(id).is_some());
    let mut stored = Vec::new();
    while let Some(output) = w.host.poll_output() {
        if let crate::host::Output::Store(crate::host::StoreOutput::Persist { session: s, event }) =
            output
        {
            assert_eq!(s, session);
            stored.push(event);
        }
    }

    // "The next process".
    let mut w2 = World::new();
    w2.host = Host::new(config);
    w2.host
        .restore_session(w2.now, &session, stored)
        .expect("restores");
    let mut other = w2.connect();
    w2.call(
        &mut other,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": read_caps()}),
    );
    let list = w2.call(&mut other, "session/list", json!({}));
    assert_eq!(list["result"]["sessions"][0]["cwd"], "/work/project");
    let load_id = w2.request(
        &mut other,
        "session/load",
        json!({"sessionId": session, "cwd": "/work/project", "mcpServers": []}),
    );
    let at = other.position_of_response(load_id);
    assert_eq!(
        other.inbox[at]["result"]["modes"]["currentModeId"],
        "interactive"
    );
    let replayed: Vec<Value> = other.inbox[..at]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .collect();
    assert!(replayed
        .iter()
        .any(|u| u["sessionUpdate"] == "user_message_chunk"
            && u["content"]["text"] == "read file hello.txt"));
    let text: String = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "stored");
    // The "always" from the earlier process still holds; the session takes prompts.
    let next = prompt(&mut w2, &mut other, &session, "read file again.txt");
    assert!(other.requests("session/request_permission").is_empty());
    let read = other.requests("fs/read_text_file").remove(0);
    w2.respond(&mut other, &read["id"], json!({"content": "again"}));
    assert_eq!(
        other.response(next).unwrap()["result"]["stopReason"],
        "end_turn"
    );
}

#[test]
fn list_shows_sessions_of_other_cluster_nodes_with_a_working_directory() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    prompt(&mut w, &mut peer, &session, "hello");
    let mut far = crate::host::SessionSummary::new("far");
    far.add_event(
        br#"{"id":"x","type":"session.start","timestamp":"2026-01-01T00:00:00.000Z","data":{"context":{"cwd":"/elsewhere"}}}"#,
    );
    far.add_event(
        br#"{"id":"y","type":"user.message","timestamp":"2026-01-01T00:00:02.000Z","data":{"content":"far away"}}"#,
    );
    let mut no_cwd = crate::host::SessionSummary::new("no-cwd");
    no_cwd.add_event(br#"{"id":"z","type":"session.start","data":{}}"#);
    w.host.cluster().set_cluster_sessions([far, no_cwd]);
    let list = w.call(&mut peer, "session/list", json!({}));
    let sessions = list["result"]["sessions"].as_array().unwrap();
    let ids: Vec<&str> = sessions
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{sessions:?}");
    assert!(ids.contains(&session.as_str()) && ids.contains(&"far"));
    let far = sessions.iter().find(|s| s["sessionId"] == "far").unwrap();
    assert_eq!(far["cwd"], "/elsewhere");
    assert_eq!(far["title"], "far away");
    assert_eq!(far["updatedAt"], "2026-01-01T00:00:02.000Z");
    let filtered = w.call(&mut peer, "session/list", json!({"cwd": "/elsewhere"}));
    assert_eq!(filtered["result"]["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(filtered["result"]["sessions"][0]["sessionId"], "far");
}
