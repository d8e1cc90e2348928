//! A session run by an ACP agent whose agent floods updates: the host plays its part sans-IO
//! (the agent process is an effect; the test writes the agent's lines as the process's
//! output). A client that stops reading holds at most its outbox budget; the streaming
//! deltas it could not take are dropped and reported, and the turn's whole message and its
//! end still reach it.

use agentwire::host::{Effect, EffectEvent, EffectId, EffectOp, HostConfig, Output};
use serde_json::{json, Value};

use crate::support::*;

/// The outbox budget: room for the whole message (about 120 KB), not for the deltas (about
/// 300 bytes each with their envelope).
const BUDGET: usize = 256 * 1024;

/// Takes the host's outputs: the agent process's id (once spawned) and the lines written to it.
fn agent_io(w: &mut World, agent: &mut Option<EffectId>) -> Vec<Value> {
    let mut lines = Vec::new();
    while let Some(output) = w.host.poll_output() {
        match output {
            Output::Effect(Effect {
                id,
                op: EffectOp::ProcessSpawn(_),
            }) => *agent = Some(id),
            Output::Effect(Effect {
                op: EffectOp::ProcessWrite(bytes),
                ..
            }) => {
                for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    lines.push(serde_json::from_slice(line).unwrap());
                }
            }
            _ => {}
        }
    }
    lines
}

fn agent_says(w: &mut World, agent: EffectId, message: &Value) {
    let mut line = serde_json::to_vec(message).unwrap();
    line.push(b'\n');
    w.host
        .handle_effect(w.now, agent, EffectEvent::Stdout(line));
}

/// The agent's request `method` among `lines`.
fn request<'a>(lines: &'a [Value], method: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["method"] == method)
        .unwrap_or_else(|| panic!("no {method} in {lines:?}"))
}

#[test]
fn a_flooding_agent_costs_a_stalled_client_no_more_than_its_budget() {
    let config = HostConfig::default()
        .with_acp_agent(vec!["an-acp-agent".into()])
        .with_outbox_budget_bytes(BUDGET);
    let mut w = World::new(config);
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"streaming": true}));
    send_request(
        &mut w,
        &mut p,
        "session.send",
        json!({"sessionId": "s", "prompt": "flood"}),
    );

    let mut agent = None;
    let lines = agent_io(&mut w, &mut agent);
    let agent = agent.expect("the agent process was started");
    let init = request(&lines, "initialize");
    agent_says(
        &mut w,
        agent,
        &json!({"jsonrpc": "2.0", "id": init["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}}),
    );
    let lines = agent_io(&mut w, &mut None);
    let new = request(&lines, "session/new");
    agent_says(
        &mut w,
        agent,
        &json!({"jsonrpc": "2.0", "id": new["id"], "result": {"sessionId": "a1"}}),
    );
    let lines = agent_io(&mut w, &mut None);
    let prompt = request(&lines, "session/prompt").clone();
    w.pump(&mut [&mut p]);

    // The client stops reading; the agent streams 20,000 chunks.
    w.stalled.insert(p.conn);
    let mut whole = String::new();
    let mut most = 0;
    for i in 0..20_000 {
        let chunk = format!("c{i} ");
        whole.push_str(&chunk);
        agent_says(
            &mut w,
            agent,
            &json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "a1",
                    "update": {"sessionUpdate": "agent_message_chunk",
                               "content": {"type": "text", "text": chunk}}}}),
        );
        if i % 500 == 0 {
            w.pump(&mut [&mut p]);
            most = most.max(w.host.queued_bytes(p.conn).unwrap_or(0));
        }
    }
    agent_says(
        &mut w,
        agent,
        &json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}}),
    );
    w.pump(&mut [&mut p]);
    most = most.max(w.host.queued_bytes(p.conn).unwrap_or(0));
    assert!(
        most <= BUDGET,
        "a stalled client holds at most its budget: {most} bytes queued"
    );

    // The client reads again: what it lost is reported, the message and the turn's end came.
    w.resume_reading(p.conn);
    w.pump(&mut [&mut p]);
    let events = p.events("s");
    let deltas = events
        .iter()
        .filter(|e| e["type"] == "assistant.message_delta")
        .count();
    assert!(deltas < 20_000, "deltas were dropped: {deltas} delivered");
    let warning = events
        .iter()
        .find(|e| e["type"] == "session.warning" && e["data"]["warningType"] == "events_dropped")
        .unwrap_or_else(|| {
            panic!(
                "the loss is reported: {:?}",
                events
                    .iter()
                    .map(|e| e["type"].as_str().unwrap_or_default())
                    .filter(|t| !t.ends_with("_delta"))
                    .collect::<Vec<_>>()
            )
        });
    assert!(warning["data"]["droppedCount"].as_u64().unwrap() > 0);
    let message = events
        .iter()
        .find(|e| e["type"] == "assistant.message")
        .expect("the whole message");
    assert_eq!(message["data"]["content"], whole);
    assert_eq!(events.last().unwrap()["type"], "session.idle");
    // The log holds the message and not the deltas.
    let log = w.host.session_events("s").unwrap();
    assert!(log
        .iter()
        .all(|e| e.event_type != "assistant.message_delta"));
}
