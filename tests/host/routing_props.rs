//! Property test of the routing rules over random joins, leaves, re-declarations and events:
//! no connection receives an event its filter excludes, `capabilities.changed` happens exactly
//! at transitions (with the full `ui` object, to every attached connection), and each
//! connection receives what it may see in emit order.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::*;
use agentwire::agent::{Agent, AgentInput, SessionControl};
use agentwire::host::HostConfig;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Emits the events named in the prompt (`delta,msg,...`), in order.
struct Emitter;

impl Agent for Emitter {
    fn handle(&mut self, input: AgentInput, s: &mut dyn SessionControl) {
        let AgentInput::Prompt { prompt, .. } = input else {
            return;
        };
        for kind in prompt.split(',') {
            let delta = json!({"messageId": "m", "deltaContent": "x"});
            match kind {
                "delta" => s.emit("assistant.message_delta", delta, true),
                "subdelta" => s.emit_as(Some("sub-1"), "assistant.message_delta", delta, true),
                "mcp" => s.emit(
                    "mcp_app.tool_call_complete",
                    json!({"serverName": "s", "toolName": "t", "success": true, "durationMs": 1}),
                    true,
                ),
                "msg" => s.emit(
                    "assistant.message",
                    json!({"messageId": "m", "content": "c"}),
                    false,
                ),
                "title" => s.emit("session.title_changed", json!({"title": "t"}), true),
                other => panic!("unknown kind {other}"),
            };
        }
    }

    fn is_busy(&self) -> bool {
        false
    }
}

/// What a client declared when it (re)joined.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Decl {
    streaming: bool,
    sub_agents: bool,
    elicitation: bool,
    canvases: bool,
    mcp_apps: bool,
    extension: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Join(usize, Decl),
    /// Leave by `session.detach` (false) or by disconnecting (true).
    Leave(usize, bool),
    Emit(Vec<&'static str>),
}

const CLIENTS: usize = 4;
const KINDS: [&str; 5] = ["delta", "subdelta", "mcp", "msg", "title"];

fn decl() -> impl Strategy<Value = Decl> {
    any::<[bool; 6]>().prop_map(|b| Decl {
        streaming: b[0],
        sub_agents: b[1],
        elicitation: b[2],
        canvases: b[3],
        mcp_apps: b[4],
        extension: b[5],
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..CLIENTS, decl()).prop_map(|(c, d)| Op::Join(c, d)),
        2 => (0..CLIENTS, any::<bool>()).prop_map(|(c, eof)| Op::Leave(c, eof)),
        3 => prop::collection::vec(prop::sample::select(KINDS.to_vec()), 1..6).prop_map(Op::Emit),
    ]
}

/// Whether a client that declared `d` may receive an event of `kind`.
fn admits(d: &Decl, kind: &str) -> bool {
    match kind {
        "delta" => d.streaming,
        "subdelta" => d.streaming && d.sub_agents,
        "mcp" => d.mcp_apps,
        _ => true,
    }
}

/// The event kind of a received event, if it is one the emitter produces.
fn kind_of(event: &Value) -> Option<&'static str> {
    Some(match event["type"].as_str()? {
        "assistant.message_delta" if event.get("agentId").is_some() => "subdelta",
        "assistant.message_delta" => "delta",
        "mcp_app.tool_call_complete" => "mcp",
        "assistant.message" => "msg",
        "session.title_changed" => "title",
        _ => return None,
    })
}

fn ui(attached: &BTreeMap<usize, Decl>) -> Value {
    json!({
        "elicitation": attached.values().any(|d| d.elicitation),
        "mcpApps": attached.values().any(|d| d.mcp_apps),
        "canvases": attached.values().any(|d| d.canvases),
    })
}

fn join_params(client: usize, d: &Decl) -> Value {
    let mut p = json!({
        "sessionId": "s",
        "disableResume": true,
        "streaming": d.streaming,
        "includeSubAgentStreamingEvents": d.sub_agents,
        "requestElicitation": d.elicitation,
        "requestMcpApps": d.mcp_apps,
    });
    if d.canvases {
        p["canvases"] =
            json!([{"id": format!("c{client}"), "displayName": "C", "description": ""}]);
    }
    if d.extension {
        p["extensionInfo"] = json!({"id": format!("ext-{client}")});
    }
    p
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let config = HostConfig::default()
        .with_agent(Arc::new(|_: &str| Box::new(Emitter) as Box<dyn Agent>))
        .with_mcp_apps_enabled(true);
    let mut w = World::new(config);
    // The driver creates the session and sends prompts; it stays attached, declaring nothing.
    let mut driver = w.connect();
    let r = w.call(
        &mut driver,
        &mut [],
        "session.create",
        json!({"sessionId": "s"}),
    );
    prop_assert!(r.get("error").is_none(), "{}", r);
    let driver_decl = Decl {
        streaming: false,
        sub_agents: true,
        elicitation: false,
        canvases: false,
        mcp_apps: false,
        extension: false,
    };
    let mut peers: Vec<Peer> = (0..CLIENTS).map(|_| w.connect()).collect();
    let mut attached: BTreeMap<usize, Decl> = BTreeMap::new();
    for op in ops {
        let seen_before: Vec<usize> = peers.iter().map(|p| p.inbox.len()).collect();
        let driver_before = driver.inbox.len();
        let ui_before = ui(&attached);
        let mut expected_kinds: Vec<&'static str> = Vec::new();
        match &op {
            Op::Join(c, d) => {
                let (left, rest) = peers.split_at_mut(*c);
                let (me, right) = rest.split_first_mut().unwrap();
                let mut others: Vec<&mut Peer> = left.iter_mut().chain(right.iter_mut()).collect();
                others.push(&mut driver);
                let r = w.call(me, &mut others, "session.resume", join_params(*c, d));
                prop_assert!(r.get("error").is_none(), "{}", r);
                attached.insert(*c, *d);
                // The join result reports the capabilities across every attached client.
                prop_assert_eq!(&r["result"]["capabilities"]["ui"], &ui(&attached));
            }
            Op::Leave(c, eof) => {
                if *eof {
                    let now = w.now;
                    w.host.handle_eof(now, peers[*c].conn);
                    peers[*c] = w.connect();
                } else if attached.contains_key(c) {
                    let (left, rest) = peers.split_at_mut(*c);
                    let (me, right) = rest.split_first_mut().unwrap();
                    let mut others: Vec<&mut Peer> =
                        left.iter_mut().chain(right.iter_mut()).collect();
                    others.push(&mut driver);
                    w.call(me, &mut others, "session.detach", json!({"sessionId": "s"}));
                }
                attached.remove(c);
            }
            Op::Emit(kinds) => {
                let prompt = kinds.join(",");
                let mut all: Vec<&mut Peer> = peers.iter_mut().collect();
                w.call(
                    &mut driver,
                    &mut all,
                    "session.send",
                    json!({"sessionId": "s", "prompt": prompt}),
                );
                expected_kinds = kinds.clone();
            }
        }
        let mut all: Vec<&mut Peer> = peers.iter_mut().collect();
        all.push(&mut driver);
        w.pump(&mut all);
        let ui_after = ui(&attached);
        let transition = ui_before != ui_after;
        // Who gets what during this op.
        let mut audience: Vec<(String, Decl, &[Value])> = Vec::new();
        for (c, p) in peers.iter().enumerate() {
            let new = if seen_before[c] <= p.inbox.len() {
                &p.inbox[seen_before[c]..]
            } else {
                // The peer was replaced (disconnect): everything it has is new.
                &p.inbox[..]
            };
            match attached.get(&c) {
                Some(d) => audience.push((format!("client {c}"), *d, new)),
                None => {
                    let events = new
                        .iter()
                        .filter(|m| m["method"] == "session.event")
                        .count();
                    prop_assert_eq!(events, 0, "client {} is not attached: {:?}", c, new);
                }
            }
        }
        audience.push(("driver".into(), driver_decl, &driver.inbox[driver_before..]));
        for (who, d, new) in audience {
            let events: Vec<&Value> = new
                .iter()
                .filter(|m| m["method"] == "session.event")
                .map(|m| &m["params"]["event"])
                .collect();
            // Filters and emit order: exactly the admitted kinds, in emit order.
            let got: Vec<&str> = events.iter().filter_map(|e| kind_of(e)).collect();
            let want: Vec<&str> = expected_kinds
                .iter()
                .copied()
                .filter(|k| admits(&d, k))
                .collect();
            prop_assert_eq!(&got, &want, "{} ({:?}) during {:?}", who, d, op);
            for e in &events {
                if e["type"] == "permission.requested" {
                    prop_assert!(!d.extension, "{} is an unapproved extension: {}", who, e);
                }
            }
            // Capability events exactly at transitions, carrying the full ui object.
            let changes: Vec<&&Value> = events
                .iter()
                .filter(|e| e["type"] == "capabilities.changed")
                .collect();
            if transition {
                prop_assert_eq!(changes.len(), 1, "{} during {:?}", who, op);
                prop_assert_eq!(&changes[0]["data"]["ui"], &ui_after);
            } else {
                prop_assert_eq!(changes.len(), 0, "{} during {:?}", who, op);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn filters_capability_transitions_and_order_hold_over_random_joins_and_leaves(
        ops in prop::collection::vec(op(), 1..30)
    ) {
        run(ops)?;
    }
}
