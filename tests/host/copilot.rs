//! The session host driven through its sans-IO API with Content-Length frames, checking the
//! Copilot SDK dialect's behaviour that clients depend on (reference `copilot-sdk.md` §2-§7).

use std::time::Duration;

use agentwire::agent::Scenario;
use agentwire::host::{
    ConnectionOutput, Effect, EffectEvent, EffectOp, HostConfig, Output, ProcessSpec, StoreOutput,
};
use serde_json::{json, Value};

use crate::support::*;

#[test]
fn handshake_and_bookkeeping_methods() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let r = w.call(
        &mut p,
        &mut [],
        "connect",
        json!({"supportedTaskKinds":["agent","client","shell"]}),
    );
    assert_eq!(r["result"]["protocolVersion"], 3);
    assert_eq!(r["result"]["ok"], true);
    assert_eq!(
        r["result"]["taskKinds"],
        json!(["agent", "shell", "client"])
    );
    let r = w.call(&mut p, &mut [], "ping", json!({"message":"interop"}));
    assert_eq!(r["result"]["message"], "pong: interop");
    assert_eq!(r["result"]["protocolVersion"], 3);
    assert!(r["result"]["timestamp"].as_str().unwrap().ends_with('Z'));
    let r = w.call(&mut p, &mut [], "status.get", json!({}));
    assert_eq!(r["result"]["protocolVersion"], 3);
    let r = w.call(&mut p, &mut [], "models.list", json!({}));
    assert!(r["result"]["models"].is_array());
    let r = w.call(&mut p, &mut [], "no.such.method", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    assert_eq!(r["error"]["message"], "Unhandled method no.such.method");
    let r = w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId":"does-not-exist","prompt":"x"}),
    );
    assert_eq!(r["error"]["code"], -32603);
    assert_eq!(
        r["error"]["message"],
        "Request session.send failed with message: Session not found for sessionId: does-not-exist"
    );
    let r = w.call(
        &mut p,
        &mut [],
        "session.getMetadata",
        json!({"sessionId":"does-not-exist"}),
    );
    assert_eq!(r["result"], json!({}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.resume",
        json!({"sessionId":"does-not-exist"}),
    );
    assert_eq!(r["error"]["code"], -32603);
}

#[test]
fn connection_token_is_enforced() {
    let config = HostConfig::default().with_connection_token(Some("secret".into()));
    let mut w = World::new(config);
    let mut p = w.connect();
    let r = w.call(&mut p, &mut [], "ping", json!({"message":"hi"}));
    assert_eq!(
        r["error"],
        json!({"code":-32001,"message":"AUTHENTICATION_REQUIRED"})
    );
    let r = w.call(&mut p, &mut [], "connect", json!({"token":"nope"}));
    assert_eq!(
        r["error"],
        json!({"code":-32002,"message":"AUTHENTICATION_FAILED"})
    );
    let r = w.call(&mut p, &mut [], "connect", json!({}));
    assert_eq!(r["error"]["code"], -32002);
    let r = w.call(&mut p, &mut [], "connect", json!({"token":"secret"}));
    assert_eq!(r["result"]["taskKinds"], json!(["agent", "shell"]));
    let r = w.call(&mut p, &mut [], "ping", json!({}));
    assert_eq!(r["result"]["message"], "pong");
}

#[test]
fn a_plain_turn_has_the_runtime_event_order_and_envelope() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let sid = "c766e7de-b35d-4fc8-8596-fc5fb367963b";
    let r = create(
        &mut w,
        &mut p,
        sid,
        json!({"workingDirectory":"/home/user/project"}),
    );
    assert_eq!(r["result"]["sessionId"], sid);
    assert_eq!(r["result"]["capabilities"]["ui"]["elicitation"], false);
    // The response precedes session.start, which precedes session.created.
    let pos = |pred: &dyn Fn(&Value) -> bool| p.inbox.iter().position(pred).unwrap();
    let resp = pos(&|m| m["id"] == 0);
    let start = pos(&|m| m["params"]["event"]["type"] == "session.start");
    let created = pos(&|m| m["params"]["type"] == "session.created");
    assert!(resp < start && start < created);

    let r = w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": sid, "prompt": "hello"}),
    );
    let message_id = r["result"]["messageId"].as_str().unwrap().to_owned();
    let types = p.types(sid);
    assert_eq!(
        types,
        [
            "session.start",
            "user.message",
            "assistant.turn_start",
            "assistant.message",
            "assistant.turn_end",
            "session.idle"
        ]
    );
    let events = p.events(sid);
    assert_eq!(
        p.event(sid, "user.message")["data"]["messageId"],
        message_id.as_str()
    );
    let reply = p.event(sid, "assistant.message");
    assert_eq!(reply["data"]["content"], "You said: hello");
    assert_eq!(reply["data"]["originatingMessageId"], message_id.as_str());
    // Envelope: UUID ids, RFC 3339 timestamps, parentId chain over persisted events.
    let mut last_persisted: Option<String> = None;
    for e in &events {
        let id = e["id"].as_str().unwrap();
        assert_eq!(id.len(), 36, "uuid {id}");
        assert!(e["timestamp"].as_str().unwrap().ends_with('Z'));
        assert!(e["data"].is_object());
        match &last_persisted {
            None => assert_eq!(e["parentId"], Value::Null),
            Some(pid) => assert_eq!(e["parentId"], pid.as_str()),
        }
        let ephemeral = e.get("ephemeral").is_some();
        if ephemeral {
            assert_eq!(e["ephemeral"], true);
        } else {
            last_persisted = Some(id.to_owned());
        }
    }
    assert_eq!(p.event(sid, "session.idle")["ephemeral"], true);
    // getMessages holds the persisted events only, in order.
    let r = w.call(
        &mut p,
        &mut [],
        "session.getMessages",
        json!({"sessionId": sid}),
    );
    let stored: Vec<Value> = r["result"]["events"].as_array().unwrap().clone();
    let persisted: Vec<Value> = events
        .into_iter()
        .filter(|e| e.get("ephemeral").is_none())
        .collect();
    assert_eq!(stored, persisted);
    // Persisted events trigger session.updated; ephemeral ones do not. An update still
    // queued when the next persisted event comes stands for both (coalesced, carrying the
    // latest metadata), so the reader, which reads after each request, gets one per request
    // that persisted something, each after a persisted event it had not been told about.
    let mut unannounced = 0;
    let mut updates = Vec::new();
    for m in &p.inbox {
        if m["method"] == "session.event" && m["params"]["event"].get("ephemeral").is_none() {
            unannounced += 1;
        } else if m["params"]["type"] == "session.updated" {
            assert!(
                unannounced > 0,
                "an update with no persisted event before it"
            );
            unannounced = 0;
            updates.push(m["params"]["metadata"].clone());
        }
    }
    // One for session.create's session.start, one for session.send's turn.
    assert_eq!(updates.len(), 2);
    // The last one carries the metadata after the turn (the summary is the prompt).
    assert_eq!(updates[1]["summary"], "hello");
    // list / metadata / last id.
    let r = w.call(&mut p, &mut [], "session.list", json!({}));
    assert_eq!(r["result"]["sessions"][0]["sessionId"], sid);
    assert_eq!(r["result"]["sessions"][0]["summary"], "hello");
    assert_eq!(
        r["result"]["sessions"][0]["context"]["cwd"],
        "/home/user/project"
    );
    let r = w.call(
        &mut p,
        &mut [],
        "session.getMetadata",
        json!({"sessionId": sid}),
    );
    assert_eq!(r["result"]["session"]["sessionId"], sid);
    let r = w.call(&mut p, &mut [], "session.getLastId", json!({}));
    assert_eq!(r["result"]["sessionId"], sid);
}

#[test]
fn tool_turn_with_permission_runs_on_the_declaring_client() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let sid = "s1";
    create(&mut w, &mut p, sid, json!({"tools": weather_tool()}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": sid, "prompt": "What is the weather in Paris?"}),
    );
    let perm = p.event(sid, "permission.requested");
    assert_eq!(perm["data"]["permissionRequest"]["kind"], "custom-tool");
    assert_eq!(perm["data"]["permissionRequest"]["toolName"], "get_weather");
    assert_eq!(
        perm["data"]["permissionRequest"]["args"],
        json!({"city":"Paris"})
    );
    let rid = perm["data"]["requestId"].as_str().unwrap().to_owned();
    let r = w.call(
        &mut p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId": sid, "requestId": rid, "result": {"kind":"approve-once"}}),
    );
    assert_eq!(r["result"], json!({"success": true}));
    let req = p.event(sid, "external_tool.requested");
    assert_eq!(req["data"]["arguments"], json!({"city":"Paris"}));
    assert_eq!(req["data"]["sessionId"], sid);
    let tool_rid = req["data"]["requestId"].as_str().unwrap().to_owned();
    let r = w.call(
        &mut p,
        &mut [],
        "session.tools.handlePendingToolCall",
        json!({"sessionId": sid, "requestId": tool_rid, "result": "sunny"}),
    );
    assert_eq!(r["result"], json!({"success": true}));
    // A duplicate answer gets success:false and changes nothing.
    let before = p.events(sid).len();
    let r = w.call(
        &mut p,
        &mut [],
        "session.tools.handlePendingToolCall",
        json!({"sessionId": sid, "requestId": tool_rid, "result": "rainy"}),
    );
    assert_eq!(r["result"], json!({"success": false}));
    assert_eq!(p.events(sid).len(), before);
    let types = p.types(sid);
    assert!(
        only_subsequence(
            &types,
            &[
                "user.message",
                "assistant.turn_start",
                "assistant.message",
                "tool.execution_start",
                "permission.requested",
                "permission.completed",
                "external_tool.requested",
                "external_tool.completed",
                "tool.execution_complete",
                "assistant.turn_end",
                "assistant.turn_start",
                "assistant.message",
                "assistant.turn_end",
                "session.idle"
            ]
        ),
        "{types:?}"
    );
    let done = p.event(sid, "tool.execution_complete");
    assert_eq!(done["data"]["success"], true);
    assert_eq!(done["data"]["result"]["content"], "sunny");
    let first = p.event(sid, "assistant.message");
    assert_eq!(first["data"]["toolRequests"][0]["name"], "get_weather");
    assert_eq!(
        first["data"]["toolRequests"][0]["toolCallId"],
        done["data"]["toolCallId"]
    );
    let last = p
        .events(sid)
        .into_iter()
        .rev()
        .find(|e| e["type"] == "assistant.message")
        .unwrap();
    assert_eq!(last["data"]["content"], "It is sunny in Paris.");
    assert_eq!(
        p.event(sid, "permission.completed")["data"]["result"],
        json!({"kind":"approved"})
    );
}

#[test]
fn rejected_permission_denies_the_tool() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"tools": weather_tool()}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "weather?"}),
    );
    let rid = p.event("s", "permission.requested")["data"]["requestId"].clone();
    w.call(&mut p, &mut [], "session.permissions.handlePendingPermissionRequest",
           json!({"sessionId": "s", "requestId": rid, "result": {"kind":"reject","feedback":"not now"}}));
    assert_eq!(
        p.event("s", "permission.completed")["data"]["result"],
        json!({"kind":"denied-interactively-by-user","feedback":"not now"})
    );
    assert!(!p.types("s").contains(&"external_tool.requested".to_owned()));
    let done = p.event("s", "tool.execution_complete");
    assert_eq!(done["data"]["success"], false);
    assert_eq!(
        done["data"]["error"],
        json!({"message":"The user rejected this tool call. User feedback: not now","code":"denied"})
    );
    assert_eq!(p.types("s").last().unwrap(), "session.idle");
}

#[test]
fn two_clients_answer_one_permission_and_exactly_one_wins() {
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    let mut b = w.connect();
    create(&mut w, &mut a, "s", json!({"tools": weather_tool()}));
    let r = w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","requestPermission":true,"disableResume":true}),
    );
    assert_eq!(r["result"]["sessionId"], "s");
    w.call(
        &mut a,
        &mut [&mut b],
        "session.send",
        json!({"sessionId":"s","prompt":"weather"}),
    );
    // Both see the same prompt.
    let rid = a.event("s", "permission.requested")["data"]["requestId"].clone();
    assert_eq!(
        b.event("s", "permission.requested")["data"]["requestId"],
        rid
    );
    let ra = w.call(
        &mut a,
        &mut [&mut b],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":rid,"result":{"kind":"approve-once"}}),
    );
    let rb = w.call(
        &mut b,
        &mut [&mut a],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":rid,"result":{"kind":"reject"}}),
    );
    assert_eq!(ra["result"]["success"], true);
    assert_eq!(rb["result"]["success"], false);
    let completions = b
        .types("s")
        .iter()
        .filter(|t| *t == "permission.completed")
        .count();
    assert_eq!(completions, 1);
    // B joined after session.start (no history replay); from the join on, both see the same stream.
    assert_eq!(
        a.types("s")[1..],
        b.types("s")[..],
        "both connections see the same event stream"
    );
}

#[test]
fn tool_owner_disconnecting_mid_call_still_ends_the_turn() {
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    let mut b = w.connect();
    create(&mut w, &mut a, "s", json!({"requestPermission": false}));
    // B provides the tool, A drives the session.
    w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","tools": [{"name":"get_weather","skipPermission":true}]}),
    );
    w.call(
        &mut a,
        &mut [&mut b],
        "session.send",
        json!({"sessionId":"s","prompt":"weather"}),
    );
    assert!(a.types("s").contains(&"external_tool.requested".to_owned()));
    assert!(
        !a.types("s").contains(&"permission.requested".to_owned()),
        "skipPermission"
    );
    w.now = w.now.saturating_add(Duration::from_millis(5));
    w.host.handle_eof(w.now, b.conn);
    w.pump(&mut [&mut a]);
    let done = a.event("s", "tool.execution_complete");
    assert_eq!(done["data"]["success"], false);
    assert_eq!(done["data"]["error"]["code"], "failure");
    assert_eq!(a.types("s").last().unwrap(), "session.idle");
    assert!(a.types("s").contains(&"external_tool.completed".to_owned()));
}

#[test]
fn without_a_permission_handler_the_prompt_is_denied_not_left_waiting() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"requestPermission": false, "tools": weather_tool()}),
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"weather"}),
    );
    assert_eq!(
        p.event("s", "permission.completed")["data"]["result"]["kind"],
        "denied-no-approval-rule-and-could-not-request-from-user"
    );
    assert_eq!(
        p.event("s", "tool.execution_complete")["data"]["error"]["message"],
        "Permission denied and could not request permission from user"
    );
    assert_eq!(p.types("s").last().unwrap(), "session.idle");
}

#[test]
fn streaming_deltas_reach_only_streaming_clients() {
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    let mut b = w.connect();
    create(&mut w, &mut a, "s", json!({"streaming": true}));
    w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","streaming":false}),
    );
    w.call(
        &mut a,
        &mut [&mut b],
        "session.send",
        json!({"sessionId":"s","prompt":"hi there"}),
    );
    let deltas: String = a
        .events("s")
        .iter()
        .filter(|e| e["type"] == "assistant.message_delta")
        .map(|e| e["data"]["deltaContent"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deltas, "You said: hi there");
    assert!(!b
        .types("s")
        .iter()
        .any(|t| t.starts_with("assistant.message_")));
    assert!(b.types("s").contains(&"assistant.message".to_owned()));
    for e in a
        .events("s")
        .iter()
        .filter(|e| e["type"] == "assistant.message_delta")
    {
        assert_eq!(e["ephemeral"], true);
    }
}

#[test]
fn scenario_sleep_error_and_raw_events_follow_the_timers() {
    let scenario = Scenario::from_json(r#"{"default":[{"sleep_ms":250},{"event":"session.title_changed","data":{"title":"T"},"ephemeral":true},{"error":"boom"}]}"#).unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let start = w.now;
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"x"}),
    );
    assert!(
        !p.types("s").contains(&"session.title_changed".to_owned()),
        "not before the sleep"
    );
    let deadline = w.host.poll_timeout().expect("a timer is armed");
    assert!(deadline.saturating_duration_since(start) >= Duration::from_millis(250));
    w.run_timers(&mut [&mut p]);
    let types = p.types("s");
    assert!(
        only_subsequence(
            &types,
            &[
                "session.title_changed",
                "session.error",
                "assistant.turn_end",
                "session.idle"
            ]
        ),
        "{types:?}"
    );
    assert_eq!(p.event("s", "session.error")["data"]["message"], "boom");
    assert!(w.host.poll_timeout().is_none());
}

#[test]
fn send_and_wait_answers_when_the_turn_ends() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.sendAndWait",
        json!({"sessionId":"s","prompt":"yo"}),
    );
    assert_eq!(r["result"]["aborted"], false);
    let message_id = r["result"]["messageId"].as_str().unwrap();
    assert_eq!(
        p.event("s", "user.message")["data"]["messageId"],
        message_id
    );
    assert_eq!(r["result"]["response"]["type"], "assistant.message");
    assert_eq!(r["result"]["response"]["data"]["content"], "You said: yo");
}

#[test]
fn detach_writes_shutdown_and_delete_notifies_everyone_first() {
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    let mut b = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    w.call(
        &mut a,
        &mut [&mut b],
        "session.send",
        json!({"sessionId":"s","prompt":"x"}),
    );
    let r = w.call(
        &mut a,
        &mut [&mut b],
        "session.detach",
        json!({"sessionId":"s"}),
    );
    assert_eq!(r["result"], json!({"success": true}));
    let stored = w.host.session_events("s").unwrap();
    assert_eq!(stored.last().unwrap().event_type, "session.shutdown");
    let shutdown_id = stored.last().unwrap().id.clone();
    // Resume continues the parentId chain from session.shutdown.
    w.call(
        &mut a,
        &mut [&mut b],
        "session.resume",
        json!({"sessionId":"s"}),
    );
    let resume = a.event("s", "session.resume");
    assert_eq!(resume["parentId"], shutdown_id.as_str());
    let r = w.call(
        &mut a,
        &mut [&mut b],
        "session.delete",
        json!({"sessionId":"s"}),
    );
    assert_eq!(r["result"], json!({"success": true}));
    let deleted_at = a
        .inbox
        .iter()
        .position(|m| m["params"]["type"] == "session.deleted")
        .unwrap();
    let resp_at = a.inbox.iter().position(|m| m["id"] == r["id"]).unwrap();
    assert!(
        deleted_at < resp_at,
        "session.deleted precedes the delete response"
    );
    assert!(b
        .lifecycle()
        .contains(&("session.deleted".into(), "s".into())));
    assert_eq!(w.host.session_count(), 0);
}

#[test]
fn malformed_input_gets_json_rpc_errors_and_framing_errors_close_with_a_reason() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    w.send_raw(&p, b"Content-Length: 5\r\n\r\n{oops");
    w.send_raw(&p, b"Content-Length: 2\r\n\r\n[]");
    w.pump(&mut [&mut p]);
    assert_eq!(p.inbox[0]["error"]["code"], -32700);
    assert_eq!(p.inbox[0]["id"], Value::Null);
    assert_eq!(p.inbox[1]["error"]["code"], -32600);
    // The connection still works.
    let r = w.call(&mut p, &mut [], "ping", json!({}));
    assert_eq!(r["result"]["message"], "pong");
    // A bad header is a connection-level error: a reason, then a close. A request accepted
    // just before it, in the same read, still gets its response first.
    let ping = br#"{"jsonrpc":"2.0","id":"before","method":"ping","params":{}}"#;
    let mut chunk = format!("Content-Length: {}\r\n\r\n", ping.len()).into_bytes();
    chunk.extend_from_slice(ping);
    chunk.extend_from_slice(b"Content-Length: -1\r\n\r\n");
    w.send_raw(&p, &chunk);
    w.pump(&mut [&mut p]);
    let before = &p.inbox[p.inbox.len() - 2];
    assert_eq!(before["id"], "before", "nothing accepted is lost");
    assert_eq!(before["result"]["message"], "pong");
    let last = p.inbox.last().unwrap();
    assert_eq!(last["id"], Value::Null);
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap()
            .contains("framing error"),
        "{last}"
    );
    match w.host.poll_output() {
        Some(Output::Connection(ConnectionOutput::Close { conn, reason })) => {
            assert_eq!(conn, p.conn);
            assert!(reason.contains("Content-Length"), "{reason}");
        }
        other => panic!("expected a close, got {other:?}"),
    }
}

#[test]
fn runtime_shutdown_answers_then_asks_the_runtime_to_stop() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let r = w.call(&mut p, &mut [], "runtime.shutdown", json!({}));
    assert_eq!(r["result"], json!({}));
    assert!(matches!(
        w.host.poll_output(),
        Some(Output::Connection(ConnectionOutput::Shutdown { .. }))
    ));
}

#[test]
fn same_seed_and_inputs_replay_identically() {
    let run = || {
        let mut w = World::new(HostConfig::default().with_seed(42));
        let mut p = w.connect();
        create(&mut w, &mut p, "s", json!({"tools": weather_tool()}));
        w.call(
            &mut p,
            &mut [],
            "session.send",
            json!({"sessionId":"s","prompt":"weather"}),
        );
        p.inbox
    };
    assert_eq!(run(), run());
}

#[test]
fn elicitation_round_trip_answers_the_caller_with_the_first_answer() {
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    let mut b = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    // Without a provider the call fails at once instead of waiting.
    let r = w.call(
        &mut a,
        &mut [],
        "session.ui.elicitation",
        json!({"sessionId":"s","message":"Proceed?"}),
    );
    assert_eq!(r["error"]["code"], -32603);
    let r = w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","requestElicitation":true,"disableResume":true}),
    );
    assert_eq!(r["result"]["capabilities"]["ui"]["elicitation"], true);
    // capabilities.changed carries the full ui object.
    assert_eq!(
        a.event("s", "capabilities.changed")["data"],
        json!({"ui":{"elicitation":true,"mcpApps":false,"canvases":false}})
    );
    let schema = json!({"type":"object","properties":{"confirmed":{"type":"boolean"}}});
    w.send_frame(&a, &json!({"jsonrpc":"2.0","id":77,"method":"session.ui.elicitation",
                              "params":{"sessionId":"s","message":"Proceed?","requestedSchema":schema}}));
    w.pump(&mut [&mut a, &mut b]);
    assert!(
        a.inbox.iter().all(|m| m["id"] != 77),
        "the caller waits for an answer"
    );
    let req = b.event("s", "elicitation.requested");
    assert_eq!(req["ephemeral"], true);
    assert_eq!(req["data"]["message"], "Proceed?");
    let rid = req["data"]["requestId"].clone();
    let r = w.call(&mut b, &mut [&mut a], "session.ui.handlePendingElicitation",
                   json!({"sessionId":"s","requestId":rid,"result":{"action":"accept","content":{"confirmed":true}}}));
    assert_eq!(r["result"], json!({"success": true}));
    let r = w.call(
        &mut b,
        &mut [&mut a],
        "session.ui.handlePendingElicitation",
        json!({"sessionId":"s","requestId":rid,"result":{"action":"decline"}}),
    );
    assert_eq!(r["result"], json!({"success": false}));
    let answer = a.inbox.iter().find(|m| m["id"] == 77).unwrap();
    assert_eq!(
        answer["result"],
        json!({"action":"accept","content":{"confirmed":true}})
    );
    assert_eq!(
        a.event("s", "elicitation.completed")["data"]["action"],
        "accept"
    );
}

#[test]
fn elicitation_is_cancelled_when_the_last_provider_leaves() {
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    let mut b = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","requestElicitation":true}),
    );
    w.send_frame(
        &a,
        &json!({"jsonrpc":"2.0","id":5,"method":"session.ui.elicitation",
                              "params":{"sessionId":"s","message":"?"}}),
    );
    w.pump(&mut [&mut a, &mut b]);
    w.host.handle_eof(w.now, b.conn);
    w.pump(&mut [&mut a]);
    let answer = a
        .inbox
        .iter()
        .find(|m| m["id"] == 5)
        .expect("caller answered");
    assert_eq!(answer["result"], json!({"action":"cancel"}));
    assert_eq!(
        a.event("s", "elicitation.completed")["data"]["action"],
        "cancel"
    );
    let changes: Vec<Value> = a
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "capabilities.changed")
        .collect();
    assert_eq!(
        changes.len(),
        2,
        "one on the first provider, one on the last leaving"
    );
    assert_eq!(changes[1]["data"]["ui"]["elicitation"], false);
}

#[test]
fn a_command_reaches_only_its_owner() {
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    let mut b = w.connect();
    let mut c = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    w.call(
        &mut b,
        &mut [&mut a, &mut c],
        "session.resume",
        json!({"sessionId":"s","commands":[{"name":"deploy","description":"ship it"}]}),
    );
    w.call(
        &mut c,
        &mut [&mut a, &mut b],
        "session.resume",
        json!({"sessionId":"s"}),
    );
    assert_eq!(
        a.event("s", "commands.changed")["data"]["commands"],
        json!([{"name":"deploy","description":"ship it"}])
    );
    w.send_frame(
        &a,
        &json!({"jsonrpc":"2.0","id":9,"method":"session.commands.execute",
                              "params":{"sessionId":"s","commandName":"deploy","args":"prod"}}),
    );
    w.pump(&mut [&mut a, &mut b, &mut c]);
    let exec = b.event("s", "command.execute");
    assert_eq!(exec["data"]["command"], "/deploy prod");
    assert_eq!(exec["data"]["args"], "prod");
    assert!(!a.types("s").contains(&"command.execute".to_owned()));
    assert!(!c.types("s").contains(&"command.execute".to_owned()));
    let rid = exec["data"]["requestId"].clone();
    let r = w.call(
        &mut b,
        &mut [&mut a, &mut c],
        "session.commands.handlePendingCommand",
        json!({"sessionId":"s","requestId":rid}),
    );
    assert_eq!(r["result"], json!({"success": true}));
    assert_eq!(
        a.inbox.iter().find(|m| m["id"] == 9).unwrap()["result"],
        json!({})
    );
    assert!(c.types("s").contains(&"command.completed".to_owned()));
    let r = w.call(
        &mut a,
        &mut [&mut b, &mut c],
        "session.commands.execute",
        json!({"sessionId":"s","commandName":"nope"}),
    );
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Unknown command: nope"));
}

#[test]
fn persisted_events_are_reported_and_a_new_host_restores_the_session() {
    let config = || HostConfig::default().with_report_persisted_events(true);
    let mut w = World::new(config());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/w"}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"first"}),
    );
    let mut stored = Vec::new();
    while let Some(out) = w.host.poll_output() {
        match out {
            Output::Store(StoreOutput::Persist { session, event }) => {
                assert_eq!(session, "s");
                stored.push(event);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let persisted: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e.get("ephemeral").is_none())
        .collect();
    let stored_values: Vec<Value> = stored
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect();
    assert_eq!(
        stored_values, persisted,
        "every persisted event, nothing ephemeral, in order"
    );

    // A new process: restore from the log, then a client resumes and continues the chain.
    let mut w2 = World::new(config());
    w2.host
        .restore_session(w2.now, "s", stored.clone())
        .unwrap();
    assert_eq!(
        w2.host.restore_session(w2.now, "s", stored.clone()),
        Err(agentwire::host::RestoreError::AlreadyLoaded("s".into()))
    );
    let mut q = w2.connect();
    let r = w2.call(&mut q, &mut [], "session.list", json!({}));
    assert_eq!(r["result"]["sessions"][0]["summary"], "first");
    assert_eq!(r["result"]["sessions"][0]["context"]["cwd"], "/w");
    let r = w2.call(
        &mut q,
        &mut [],
        "session.getMessages",
        json!({"sessionId":"s"}),
    );
    assert_eq!(r["result"]["events"].as_array().unwrap(), &persisted);
    w2.call(&mut q, &mut [], "session.resume", json!({"sessionId":"s"}));
    let resume = q.event("s", "session.resume");
    assert_eq!(resume["parentId"], persisted.last().unwrap()["id"]);
    assert_eq!(resume["data"]["eventCount"], persisted.len());
    // Deleting reports it so the runtime can remove the stored state.
    while w2.host.poll_output().is_some() {}
    w2.call(&mut q, &mut [], "session.delete", json!({"sessionId":"s"}));
    let outs: Vec<Output> = std::iter::from_fn(|| w2.host.poll_output()).collect();
    assert!(
        outs.contains(&Output::Store(StoreOutput::SessionDeleted {
            session: "s".into()
        })),
        "{outs:?}"
    );
    // A corrupt log is refused with the position of the bad event.
    let mut w3 = World::new(config());
    let mut bad = stored.clone();
    bad.insert(1, bytes::Bytes::from_static(b"{not json"));
    match w3.host.restore_session(w3.now, "s", bad) {
        Err(agentwire::host::RestoreError::BadEvent { index: 1, .. }) => {}
        other => panic!("expected BadEvent at 1, got {other:?}"),
    }
}

#[test]
fn a_command_the_runtime_cannot_start_reads_as_exit_127_with_the_reason_on_stderr() {
    let mut w = World::new(HostConfig::default().with_shell_enabled(true));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/w"}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.shell.exec",
        json!({"sessionId":"s","command":"echo hi"}),
    );
    let process_id = r["result"]["processId"].as_str().unwrap().to_owned();
    let Some(Output::Effect(Effect { id, .. })) = w.host.poll_output() else {
        panic!("expected the command's ProcessSpawn")
    };
    let reason = EffectEvent::SpawnFailed("no such file".into());
    w.host.handle_effect(w.now, id, reason);
    w.pump(&mut [&mut p]);
    let out = p
        .inbox
        .iter()
        .find(|m| m["method"] == "shell.output")
        .unwrap();
    assert_eq!(
        out["params"],
        json!({"sessionId":"s","processId":process_id,"stream":"stderr",
               "data":"cannot start the command: no such file\n"})
    );
    let exit = p
        .inbox
        .iter()
        .find(|m| m["method"] == "shell.exit")
        .unwrap();
    assert_eq!(exit["params"]["exitCode"], 127);
}

#[test]
fn shell_exec_is_a_runtime_action_whose_output_reaches_the_caller() {
    // Off by default: a clear error, no action.
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/w"}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.shell.exec",
        json!({"sessionId":"s","command":"echo hi"}),
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--allow-shell"),
        "{r}"
    );
    assert!(w.host.poll_output().is_none());

    let mut w = World::new(HostConfig::default().with_shell_enabled(true));
    let mut p = w.connect();
    let mut other = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/w"}));
    w.call(
        &mut other,
        &mut [&mut p],
        "session.resume",
        json!({"sessionId":"s"}),
    );
    let r = w.call(
        &mut p,
        &mut [&mut other],
        "session.shell.exec",
        json!({"sessionId":"s","command":"echo hi"}),
    );
    let process_id = r["result"]["processId"].as_str().unwrap().to_owned();
    let effect;
    match w.host.poll_output() {
        Some(Output::Effect(Effect {
            id,
            op:
                EffectOp::ProcessSpawn(ProcessSpec {
                    argv,
                    env,
                    env_from_host,
                    cwd,
                    stdin,
                    timeout_ms,
                }),
        })) => {
            effect = id;
            assert_eq!(argv, ["sh", "-c", "echo hi"]);
            assert!(env.is_empty());
            assert!(env_from_host.is_empty());
            assert!(!stdin, "a command's stdin is empty");
            assert_eq!(
                cwd.as_deref(),
                Some("/w"),
                "the session's working directory"
            );
            assert_eq!(timeout_ms, Some(30_000));
        }
        other => panic!("expected ProcessSpawn, got {other:?}"),
    }
    w.host
        .handle_effect(w.now, effect, EffectEvent::Stdout(b"hi\n".to_vec()));
    // The runtime's reports about the effect reach the caller under the client's process id.
    w.host
        .handle_effect(w.now, effect, EffectEvent::Exit(Some(0)));
    w.pump(&mut [&mut p, &mut other]);
    let out = p
        .inbox
        .iter()
        .find(|m| m["method"] == "shell.output")
        .unwrap();
    assert_eq!(
        out["params"],
        json!({"sessionId":"s","processId":process_id,"stream":"stdout","data":"hi\n"})
    );
    let exit = p
        .inbox
        .iter()
        .find(|m| m["method"] == "shell.exit")
        .unwrap();
    assert_eq!(exit["params"]["exitCode"], 0);
    assert!(
        other.inbox.iter().all(|m| m["method"] != "shell.output"),
        "only the caller"
    );
    // Killing a finished process reports false; a running one asks the runtime to kill it.
    let r = w.call(
        &mut p,
        &mut [],
        "session.shell.kill",
        json!({"sessionId":"s","processId":process_id}),
    );
    assert_eq!(r["result"], json!({"killed": false}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.shell.exec",
        json!({"sessionId":"s","command":"sleep 9"}),
    );
    let second = r["result"]["processId"].as_str().unwrap().to_owned();
    let Some(Output::Effect(Effect {
        id: second_effect, ..
    })) = w.host.poll_output()
    else {
        panic!("expected the second command's ProcessSpawn")
    };
    let r = w.call(
        &mut p,
        &mut [],
        "session.shell.kill",
        json!({"sessionId":"s","processId":second}),
    );
    assert_eq!(r["result"], json!({"killed": true}));
    assert_eq!(
        w.host.poll_output(),
        Some(Output::Effect(Effect {
            id: second_effect,
            op: EffectOp::ProcessKill {
                signal: "SIGTERM".into()
            }
        }))
    );
    // A caller that leaves gets its commands killed.
    w.host.handle_eof(w.now, p.conn);
    assert_eq!(
        w.host.poll_output(),
        Some(Output::Effect(Effect {
            id: second_effect,
            op: EffectOp::ProcessKill {
                signal: "SIGKILL".into()
            }
        }))
    );
}
