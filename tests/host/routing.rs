//! Capabilities, audience filtering and slow consumers (the routing rules of the host).

use crate::support::*;
use agentwire::agent::Scenario;
use agentwire::host::{ConnectionOutput, HostConfig, Output};
use serde_json::{json, Value};

#[test]
fn mcp_apps_need_the_host_gate_and_their_events_reach_only_mcp_apps_clients() {
    let scenario = r#"{"default":[{"event":"mcp_app.tool_call_complete","data":{"serverName":"s","toolName":"t","success":true,"durationMs":3},"ephemeral":true},{"say":"done"}]}"#;
    // Gate off: answered without ui.mcpApps, and the client is told why.
    let mut w = World::new(HostConfig::with_scenario(
        Scenario::from_json(scenario).unwrap(),
    ));
    let mut a = w.connect();
    let r = create(&mut w, &mut a, "s", json!({"requestMcpApps": true}));
    assert_eq!(r["result"]["capabilities"]["ui"]["mcpApps"], false);
    let warning = a.event("s", "session.warning");
    assert_eq!(warning["data"]["warningType"], "mcp_apps_disabled");
    assert_eq!(warning["ephemeral"], true);

    // Gate on: the capability is reported and mcp_app.* events reach only MCP Apps clients.
    let config = HostConfig::with_scenario(Scenario::from_json(scenario).unwrap())
        .with_mcp_apps_enabled(true);
    let mut w = World::new(config);
    let mut a = w.connect();
    let mut b = w.connect();
    let r = create(&mut w, &mut a, "s", json!({"requestMcpApps": true}));
    assert_eq!(r["result"]["capabilities"]["ui"]["mcpApps"], true);
    w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s"}),
    );
    w.call(
        &mut a,
        &mut [&mut b],
        "session.send",
        json!({"sessionId":"s","prompt":"x"}),
    );
    assert!(a
        .types("s")
        .contains(&"mcp_app.tool_call_complete".to_owned()));
    assert!(!b
        .types("s")
        .contains(&"mcp_app.tool_call_complete".to_owned()));
    assert!(b.types("s").contains(&"assistant.message".to_owned()));
}

#[test]
fn capability_events_happen_exactly_at_transitions_with_the_full_ui_object() {
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    let mut b = w.connect();
    let mut c = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    w.call(&mut b, &mut [&mut a, &mut c], "session.resume",
           json!({"sessionId":"s","requestElicitation":true,"canvases":[{"id":"board","displayName":"Board","description":""}]}));
    w.call(
        &mut c,
        &mut [&mut a, &mut b],
        "session.resume",
        json!({"sessionId":"s","requestElicitation":true}),
    );
    // Re-declaring the same capability changes nothing.
    w.call(
        &mut c,
        &mut [&mut a, &mut b],
        "session.resume",
        json!({"sessionId":"s","requestElicitation":true}),
    );
    let changes = |p: &Peer| -> Vec<Value> {
        p.events("s")
            .into_iter()
            .filter(|e| e["type"] == "capabilities.changed")
            .map(|e| e["data"].clone())
            .collect()
    };
    assert_eq!(
        changes(&a),
        [json!({"ui":{"elicitation":true,"mcpApps":false,"canvases":true}})]
    );
    // B leaves: canvases go (C still provides elicitation).
    w.host.handle_eof(w.now, b.conn);
    w.pump(&mut [&mut a, &mut c]);
    assert_eq!(
        changes(&a).last().unwrap(),
        &json!({"ui":{"elicitation":true,"mcpApps":false,"canvases":false}})
    );
    // C leaves: elicitation goes.
    w.call(
        &mut c,
        &mut [&mut a],
        "session.detach",
        json!({"sessionId":"s"}),
    );
    assert_eq!(changes(&a).len(), 3);
    assert_eq!(
        changes(&a).last().unwrap(),
        &json!({"ui":{"elicitation":false,"mcpApps":false,"canvases":false}})
    );
    // A shallow merge of every change, as the Node SDK does, keeps every flag.
    let mut merged = serde_json::Map::new();
    for change in changes(&a) {
        for (k, v) in change.as_object().unwrap() {
            merged.insert(k.clone(), v.clone());
        }
    }
    assert_eq!(merged["ui"].as_object().unwrap().len(), 3);
}

#[test]
fn extension_connections_do_not_see_permission_prompts_and_get_their_own_tool_calls() {
    let mut w = World::new(HostConfig::default());
    let mut app = w.connect();
    let mut ext = w.connect();
    let mut other = w.connect();
    create(&mut w, &mut app, "s", json!({}));
    w.call(
        &mut ext,
        &mut [&mut app, &mut other],
        "session.resume",
        json!({
        "sessionId":"s","extensionInfo":{"id":"weather-ext","name":"Weather"},
        "requestPermission": true,
        "tools":[{"name":"get_weather","description":"d"}]}),
    );
    w.call(
        &mut other,
        &mut [&mut app, &mut ext],
        "session.resume",
        json!({"sessionId":"s"}),
    );
    w.call(
        &mut app,
        &mut [&mut ext, &mut other],
        "session.send",
        json!({"sessionId":"s","prompt":"weather"}),
    );
    assert!(app.types("s").contains(&"permission.requested".to_owned()));
    assert!(
        !ext.types("s").contains(&"permission.requested".to_owned()),
        "extensions do not see prompts"
    );
    // The extension's access prompt is still unanswered, so it is not approved.
    let rid = app
        .events("s")
        .into_iter()
        .find(|e| {
            e["type"] == "permission.requested"
                && e["data"]["permissionRequest"]["kind"] == "custom-tool"
        })
        .unwrap()["data"]["requestId"]
        .clone();
    w.call(
        &mut app,
        &mut [&mut ext, &mut other],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":rid,"result":{"kind":"approve-once"}}),
    );
    assert!(ext
        .types("s")
        .contains(&"external_tool.requested".to_owned()));
    assert!(
        !other
            .types("s")
            .contains(&"external_tool.requested".to_owned()),
        "routed to the extension only"
    );
    assert!(!app
        .types("s")
        .contains(&"external_tool.requested".to_owned()));
    let req = ext.event("s", "external_tool.requested");
    w.call(
        &mut ext,
        &mut [&mut app, &mut other],
        "session.tools.handlePendingToolCall",
        json!({"sessionId":"s","requestId":req["data"]["requestId"],"result":"sunny"}),
    );
    assert!(
        other
            .types("s")
            .contains(&"external_tool.completed".to_owned()),
        "others see the completion"
    );
    assert_eq!(other.types("s").last().unwrap(), "session.idle");
}

#[test]
fn a_stalled_reader_loses_only_streaming_events_then_is_closed_with_a_reason() {
    // Six segments of ten streamed words with a pause between them: a reader that keeps up
    // drains each segment before the next; a stalled one accumulates them.
    let segment = r#"{"say":"w1 w2 w3 w4 w5 w6 w7 w8 w9 w10"},{"sleep_ms":5}"#;
    let steps = [segment; 6].join(",");
    let scenario = Scenario::from_json(&format!(r#"{{"default":[{steps}]}}"#)).unwrap();
    let budget = 16 * 1024;
    let (mut w, mut fast, mut slow) = stalled_turn(scenario, budget, "a");
    // The fast client got the whole turn, deltas included.
    assert_eq!(fast.types("s").last().unwrap(), "session.idle");
    let deltas = |p: &Peer| {
        p.types("s")
            .iter()
            .filter(|t| *t == "assistant.message_delta")
            .count() as u64
    };
    // Streaming events: the deltas and each message's `assistant.message_start`.
    let streaming = |p: &Peer| {
        p.types("s")
            .iter()
            .filter(|t| t.starts_with("assistant.message_"))
            .count() as u64
    };
    assert_eq!(deltas(&fast), 60);
    assert!(
        w.host.queued_bytes(slow.conn).unwrap() <= budget + 2048,
        "bounded memory"
    );
    let early: Vec<Output> = std::iter::from_fn(|| w.host.poll_output()).collect();
    assert!(
        early.is_empty(),
        "nobody was closed: {early:?} fast={:?} slow={:?}",
        fast.conn,
        slow.conn
    );

    // The slow one reads again: it lost streaming deltas and is told how many with the next
    // event it gets; nothing durable is missing.
    w.resume_reading(slow.conn);
    w.pump(&mut [&mut slow]);
    w.call(
        &mut fast,
        &mut [&mut slow],
        "session.send",
        json!({"sessionId":"s","prompt":"b"}),
    );
    w.run_timers(&mut [&mut fast, &mut slow]);
    let dropped: u64 = slow
        .events("s")
        .iter()
        .filter(|e| e["type"] == "session.warning" && e["data"]["warningType"] == "events_dropped")
        .map(|e| e["data"]["droppedCount"].as_u64().unwrap())
        .sum();
    assert!(dropped > 0, "the stalled reader lost some deltas");
    assert_eq!(streaming(&slow) + dropped, streaming(&fast));
    assert!(deltas(&slow) < deltas(&fast));
    let durable = |p: &Peer| -> Vec<Value> {
        p.events("s")
            .into_iter()
            .filter(|e| e.get("ephemeral").is_none())
            .collect()
    };
    assert_eq!(
        durable(&slow)[..],
        durable(&fast)[1..],
        "every durable event since it joined"
    );

    // Stalled for good: durable events no longer fit, so it is closed with a reason, and the
    // other client is unaffected.
    w.stalled.insert(slow.conn);
    for i in 0..10 {
        w.call(
            &mut fast,
            &mut [],
            "session.send",
            json!({"sessionId":"s","prompt": i.to_string()}),
        );
        w.run_timers(&mut [&mut fast]);
    }
    let close = std::iter::from_fn(|| w.host.poll_output()).find_map(|o| match o {
        Output::Connection(ConnectionOutput::Close { conn, reason }) => Some((conn, reason)),
        _ => None,
    });
    let (conn, reason) = close.expect("the stalled client is closed");
    assert_eq!(conn, slow.conn);
    assert!(reason.contains("not reading fast enough"), "{reason}");
    w.resume_reading(slow.conn);
    w.pump(&mut [&mut slow]);
    let last = slow.inbox.last().unwrap();
    assert_eq!(last["id"], Value::Null);
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session.getMessages"),
        "the reason is the last frame it gets"
    );
    let idles = fast
        .types("s")
        .iter()
        .filter(|t| *t == "session.idle")
        .count();
    assert_eq!(idles, 12, "the fast client saw every turn");
}

#[test]
fn mcp_apps_host_context_and_diagnose_follow_the_trace() {
    let config = HostConfig::default().with_mcp_apps_enabled(true);
    let mut w = World::new(config);
    let mut a = w.connect();
    create(&mut w, &mut a, "s", json!({"requestMcpApps": true}));
    let context = json!({"theme":"dark","displayMode":"inline","availableDisplayModes":["inline"],"platform":"desktop"});
    let r = w.call(
        &mut a,
        &mut [],
        "session.mcp.apps.setHostContext",
        json!({"sessionId":"s","context":context}),
    );
    assert_eq!(r["result"], Value::Null);
    let r = w.call(
        &mut a,
        &mut [],
        "session.mcp.apps.getHostContext",
        json!({"sessionId":"s"}),
    );
    assert_eq!(r["result"], json!({"context": context}));
    let r = w.call(
        &mut a,
        &mut [],
        "session.mcp.apps.diagnose",
        json!({"sessionId":"s","serverName":"nope"}),
    );
    assert_eq!(
        r["result"],
        json!({"capability":{"sessionHasMcpApps":true,"featureFlagEnabled":true,"advertised":true},
               "server":{"connected":false,"toolCount":0,"toolsWithUiMeta":0,"sampleToolNames":[]}})
    );
}

fn prompts_of_kind(p: &Peer, kind: &str) -> Vec<Value> {
    p.events("s")
        .into_iter()
        .filter(|e| {
            e["type"] == "permission.requested" && e["data"]["permissionRequest"]["kind"] == kind
        })
        .collect()
}

#[test]
fn an_extension_sees_permission_prompts_once_a_non_extension_client_approves_its_access() {
    let scenario = Scenario::from_json(
        r#"{"default":[{"tool":"get_weather","arguments":{"city":"Paris"}},{"say":"ok"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut app = w.connect();
    let mut ext = w.connect();
    create(&mut w, &mut app, "s", json!({"tools": weather_tool()}));
    w.call(
        &mut ext,
        &mut [&mut app],
        "session.resume",
        json!({"sessionId":"s","extensionInfo":{"id":"weather-ext","name":"Weather"},
               "requestPermission": true}),
    );
    // The app (not an extension) is asked; the extension itself does not see the prompt.
    let asks = prompts_of_kind(&app, "extension-permission-access");
    assert_eq!(asks.len(), 1);
    assert_eq!(
        asks[0]["data"]["permissionRequest"]["extensionName"],
        "weather-ext"
    );
    assert!(prompts_of_kind(&ext, "extension-permission-access").is_empty());
    let rid = asks[0]["data"]["requestId"].clone();
    // An extension cannot grant itself access, even knowing the id.
    let r = w.call(
        &mut ext,
        &mut [&mut app],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":rid,"result":{"kind":"approve-once"}}),
    );
    assert_eq!(r["result"]["success"], false);
    w.call(
        &mut app,
        &mut [&mut ext],
        "session.send",
        json!({"sessionId":"s","prompt":"go"}),
    );
    assert!(
        prompts_of_kind(&ext, "custom-tool").is_empty(),
        "not approved yet"
    );
    let tool_prompt = prompts_of_kind(&app, "custom-tool")[0]["data"]["requestId"].clone();
    w.call(
        &mut app,
        &mut [&mut ext],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":tool_prompt,"result":{"kind":"approve-once"}}),
    );
    let req = app.event("s", "external_tool.requested");
    w.call(
        &mut app,
        &mut [&mut ext],
        "session.tools.handlePendingToolCall",
        json!({"sessionId":"s","requestId":req["data"]["requestId"],"result":"sunny"}),
    );
    // The app approves the extension's access: from now on it sees permission prompts.
    let r = w.call(
        &mut app,
        &mut [&mut ext],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":rid,"result":{"kind":"approve-for-session"}}),
    );
    assert_eq!(r["result"]["success"], true);
    let completed: Vec<Value> = ext
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "permission.completed" && e["data"]["requestId"] == rid)
        .collect();
    assert_eq!(completed.len(), 1);
    assert!(completed[0]["data"].get("toolCallId").is_none());
    w.call(
        &mut app,
        &mut [&mut ext],
        "session.send",
        json!({"sessionId":"s","prompt":"again"}),
    );
    assert_eq!(prompts_of_kind(&ext, "custom-tool").len(), 1, "approved");
    // Re-attaching does not ask again.
    w.call(
        &mut ext,
        &mut [&mut app],
        "session.resume",
        json!({"sessionId":"s","extensionInfo":{"id":"weather-ext"},"requestPermission": true}),
    );
    assert_eq!(
        prompts_of_kind(&app, "extension-permission-access").len(),
        1
    );
}

#[test]
fn extension_access_is_denied_at_once_when_no_client_can_grant_it() {
    let mut w = World::new(HostConfig::default());
    let mut ext = w.connect();
    let r = w.call(
        &mut ext,
        &mut [],
        "session.create",
        json!({"sessionId":"s","extensionInfo":{"id":"lonely"},"requestPermission":true}),
    );
    assert!(r.get("error").is_none(), "{r}");
    let done = ext.event("s", "permission.completed");
    assert_eq!(
        done["data"]["result"]["kind"],
        "denied-no-approval-rule-and-could-not-request-from-user"
    );
}

/// A reader that falls behind and stays behind until after the turn has ended is told how
/// many streaming events it lost *before* the turn's `session.idle`, with the exact count,
/// although its queue was never empty when a durable event arrived (issue 16: drops at the
/// tail of a stream went unreported).
#[test]
fn drops_are_reported_before_session_idle_even_when_the_reader_never_caught_up() {
    // Twenty segments of twenty streamed words with a pause between them: the fast reader
    // drains each segment before the next; the stalled one accumulates all of them.
    let words: Vec<String> = (0..20).map(|i| format!("word{i}")).collect();
    let segment = format!(r#"{{"say":"{}"}},{{"sleep_ms":5}}"#, words.join(" "));
    let steps = vec![segment; 20].join(",");
    let scenario = Scenario::from_json(&format!(r#"{{"default":[{steps}]}}"#)).unwrap();
    // The slow reader reads nothing during the whole turn, only after it has ended.
    let (mut w, fast, mut slow) = stalled_turn(scenario, 64 * 1024, "go");
    assert_eq!(fast.types("s").last().unwrap(), "session.idle");
    w.resume_reading(slow.conn);
    w.pump(&mut [&mut slow]);

    let events = slow.events("s");
    let idle = events
        .iter()
        .position(|e| e["type"] == "session.idle")
        .expect("the slow reader gets the turn's end");
    let reported: u64 = events[..idle]
        .iter()
        .filter(|e| e["type"] == "session.warning" && e["data"]["warningType"] == "events_dropped")
        .map(|e| e["data"]["droppedCount"].as_u64().unwrap())
        .sum();
    let streaming = |p: &Peer| {
        p.types("s")
            .iter()
            .filter(|t| t.starts_with("assistant.message_"))
            .count() as u64
    };
    assert!(
        reported > 0,
        "the stalled reader lost deltas and was told before session.idle"
    );
    assert!(
        !fast.types("s").contains(&"session.warning".to_owned()),
        "the fast reader lost nothing"
    );
    assert_eq!(
        streaming(&slow) + reported,
        streaming(&fast),
        "the report counts exactly what was lost"
    );
    let after: u64 = events[idle..]
        .iter()
        .filter(|e| e["type"] == "session.warning")
        .count() as u64;
    assert_eq!(after, 0, "nothing is left to report after session.idle");
}

/// Two readers of one streamed turn under outbox budget `budget`, neither reading until the
/// turn has ended: for each, the streamed frames it received (`assistant.message_start` and
/// the deltas) plus the drops reported to it before its `session.idle`.
fn deltas_accounted_before_idle(budget: usize, words: usize) -> Vec<u64> {
    let text: Vec<String> = (0..words).map(|i| format!("w{i}")).collect();
    let scenario = Scenario::from_json(&format!(
        r#"{{"default":[{{"say":"{}"}}]}}"#,
        text.join(" ")
    ))
    .unwrap();
    let (mut w, a, mut b) = stalled_turn(scenario, budget, "go");
    w.resume_reading(b.conn);
    w.pump(&mut [&mut b]);
    [&a, &b]
        .iter()
        .map(|p| {
            let events = p.events("s");
            let idle = events
                .iter()
                .position(|e| e["type"] == "session.idle")
                .unwrap_or_else(|| {
                    panic!(
                        "budget {budget}: no session.idle in {:?}; last: {:?}",
                        p.types("s"),
                        p.inbox.iter().rev().take(3).collect::<Vec<_>>()
                    )
                });
            events[..idle]
                .iter()
                .map(|e| match e["type"].as_str() {
                    // The streamed frames: `assistant.message_start` and each delta.
                    Some(t) if t.starts_with("assistant.message_") => 1,
                    Some("session.warning") if e["data"]["warningType"] == "events_dropped" => {
                        e["data"]["droppedCount"].as_u64().unwrap()
                    }
                    _ => 0,
                })
                .sum()
        })
        .collect()
}

#[test]
fn a_drop_made_to_fit_the_turns_last_events_is_reported_before_session_idle() {
    // Budgets around the size of the turn: for some, a reader's queue is full to within a few
    // bytes when the turn's last durable events arrive, so making room for them (session.idle
    // included) drops deltas that must still be reported before session.idle.
    for budget in (9_000..13_000).step_by(17) {
        assert_eq!(
            deltas_accounted_before_idle(budget, 400),
            [401, 401],
            "budget {budget}: each reader's deltas plus its reported drops"
        );
    }
}

/// Two streaming readers of session `s` under outbox budget `budget`; the second stops
/// reading, then `prompt` runs the scenario's whole turn (timers included) while only the
/// first reads. Returns the world and the reading and stalled peers.
fn stalled_turn(scenario: Scenario, budget: usize, prompt: &str) -> (World, Peer, Peer) {
    let config = HostConfig::with_scenario(scenario).with_outbox_budget_bytes(budget);
    let mut w = World::new(config);
    let mut reading = w.connect();
    let mut stalled = w.connect();
    create(&mut w, &mut reading, "s", json!({"streaming": true}));
    w.call(
        &mut stalled,
        &mut [&mut reading],
        "session.resume",
        json!({"sessionId":"s","streaming":true}),
    );
    w.stalled.insert(stalled.conn);
    w.call(
        &mut reading,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":prompt}),
    );
    w.run_timers(&mut [&mut reading]);
    (w, reading, stalled)
}
