//! Pending-request bridges driven by the scripted agent: every request the agent makes of
//! the session's clients ends exactly once, with the reference's events around it.

use std::time::Duration;

use crate::support::*;
use agentwire::agent::Scenario;
use agentwire::host::HostConfig;
use proptest::prelude::*;
use serde_json::{json, Value};

fn world(scenario: &str) -> World {
    World::new(HostConfig::with_scenario(
        Scenario::from_json(scenario).unwrap(),
    ))
}

fn last_say(p: &Peer, sid: &str) -> String {
    p.events(sid)
        .into_iter()
        .rev()
        .find(|e| e["type"] == "assistant.message")
        .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
        .unwrap()
}

/// Answers the last server-to-client request `p` received with `result`.
fn answer_request(w: &mut World, p: &mut Peer, method: &str, result: Value) -> Value {
    let req = p
        .inbox
        .iter()
        .rev()
        .find(|m| m["method"] == method && m.get("id").is_some())
        .unwrap_or_else(|| panic!("no {method} request"))
        .clone();
    w.send_frame(p, &json!({"jsonrpc":"2.0","id":req["id"],"result":result}));
    w.pump(&mut [p]);
    req
}

#[test]
fn user_input_goes_to_a_capable_client_and_its_answer_reaches_the_agent() {
    let mut w = world(
        r#"{"default":[{"user_input":"Your name?","choices":["Ada","Bob"]},{"say":"Hello {answer}"}]}"#,
    );
    let mut a = w.connect();
    let mut b = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","requestUserInput":true}),
    );
    w.call(
        &mut a,
        &mut [&mut b],
        "session.send",
        json!({"sessionId":"s","prompt":"hi"}),
    );
    assert!(
        a.inbox.iter().all(|m| m["method"] != "userInput.request"),
        "only the capable client is asked"
    );
    let req = answer_request(
        &mut w,
        &mut b,
        "userInput.request",
        json!({"answer":"Ada","wasFreeform":false}),
    );
    assert!(
        req["id"].is_u64(),
        "server-to-client ids are integers (the Rust SDK requires it)"
    );
    assert_eq!(req["params"]["sessionId"], "s");
    assert_eq!(req["params"]["question"], "Your name?");
    assert_eq!(req["params"]["choices"], json!(["Ada", "Bob"]));
    w.pump(&mut [&mut a, &mut b]);
    assert_eq!(last_say(&a, "s"), "Hello Ada");
    let requested = a.event("s", "user_input.requested");
    let completed = a.event("s", "user_input.completed");
    assert_eq!(
        requested["data"]["requestId"],
        completed["data"]["requestId"]
    );
    assert_eq!(completed["data"]["answer"], "Ada");
    assert_eq!(requested["ephemeral"], true);
    // A late duplicate response is counted and dropped.
    let before = w.host.unknown_responses();
    w.send_frame(
        &b,
        &json!({"jsonrpc":"2.0","id":req["id"],"result":{"answer":"Zed"}}),
    );
    w.pump(&mut [&mut a, &mut b]);
    assert_eq!(w.host.unknown_responses(), before + 1);
    assert_eq!(last_say(&a, "s"), "Hello Ada");
}

#[test]
fn a_request_nobody_can_answer_fails_at_once_and_the_turn_goes_on() {
    let mut w = world(
        r#"{"default":[{"user_input":"?"},{"say":"got {answer}"},{"sample":{"messages":[]}},{"say":"then {answer}"}]}"#,
    );
    let mut a = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    w.call(
        &mut a,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"x"}),
    );
    let says: Vec<String> = a
        .events("s")
        .iter()
        .filter(|e| e["type"] == "assistant.message")
        .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(says, [
        "got error: no attached client handles userInput.request",
        "then error: sampling is not available: no attached client answers sampling requests (requestSampling)",
    ]);
    assert_eq!(a.types("s").last().unwrap(), "session.idle");
}

#[test]
fn an_unanswered_request_times_out_and_a_departed_client_resolves_its_calls() {
    let mut w = world(r#"{"default":[{"user_input":"?"},{"say":"{answer}"}]}"#);
    let mut a = w.connect();
    create(&mut w, &mut a, "s", json!({"requestUserInput": true}));
    w.call(
        &mut a,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"x"}),
    );
    let deadline = w.host.poll_timeout().expect("the call has a deadline");
    assert!(deadline.saturating_duration_since(w.now) >= Duration::from_secs(60));
    w.run_timers(&mut [&mut a]);
    let cancel = a
        .inbox
        .iter()
        .find(|m| m["method"] == "$/cancelRequest")
        .expect("the client is told");
    let req = a
        .inbox
        .iter()
        .find(|m| m["method"] == "userInput.request")
        .unwrap();
    assert_eq!(cancel["params"]["id"], req["id"]);
    assert_eq!(
        last_say(&a, "s"),
        "error: the client did not answer userInput.request in time"
    );

    // Second turn: the client disconnects mid-call; the call ends as closed for the agent.
    let mut b = w.connect();
    w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s"}),
    );
    w.call(
        &mut b,
        &mut [&mut a],
        "session.send",
        json!({"sessionId":"s","prompt":"y"}),
    );
    w.host.handle_eof(w.now, a.conn);
    w.pump(&mut [&mut b]);
    assert_eq!(last_say(&b, "s"), "error: the client's connection closed");
    assert_eq!(b.types("s").last().unwrap(), "session.idle");
}

#[test]
fn sampling_elicitation_commands_and_hooks_from_the_agent() {
    let mut w = world(
        r#"{"default":[
        {"sample":{"messages":[{"role":"user","content":"hi"}]}},{"say":"sampled {answer}"},
        {"ask":"Proceed?","schema":{"type":"object"}},{"say":"form {answer}"},
        {"command":"/deploy prod"},{"say":"command {answer}"},
        {"hook":"preToolUse","input":{"toolName":"x"}},{"say":"hook {answer}"},
        {"exit_plan_mode":"Plan","actions":["autopilot"]},{"say":"plan {answer}"}]}"#,
    );
    let mut a = w.connect();
    create(
        &mut w,
        &mut a,
        "s",
        json!({
        "requestSampling": true, "requestElicitation": true, "hooks": true, "requestExitPlanMode": true,
        "commands": [{"name":"deploy","description":""}]}),
    );
    w.call(
        &mut a,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"go"}),
    );
    let sreq = a.event("s", "sampling.requested");
    assert_eq!(sreq["data"]["request"]["messages"][0]["content"], "hi");
    let r = w.call(
        &mut a,
        &mut [],
        "session.ui.handlePendingSampling",
        json!({"sessionId":"s","requestId":sreq["data"]["requestId"],"response":{"text":"ok"}}),
    );
    assert_eq!(r["result"]["success"], true);
    assert!(a.types("s").contains(&"sampling.completed".to_owned()));
    let ereq = a.event("s", "elicitation.requested");
    w.call(&mut a, &mut [], "session.ui.handlePendingElicitation",
           json!({"sessionId":"s","requestId":ereq["data"]["requestId"],"result":{"action":"decline"}}));
    let creq = a.event("s", "command.execute");
    assert_eq!(creq["data"]["command"], "/deploy prod");
    w.call(
        &mut a,
        &mut [],
        "session.commands.handlePendingCommand",
        json!({"sessionId":"s","requestId":creq["data"]["requestId"]}),
    );
    let hook = answer_request(
        &mut w,
        &mut a,
        "hooks.invoke",
        json!({"output":{"decision":"allow"}}),
    );
    assert_eq!(hook["params"]["hookType"], "preToolUse");
    answer_request(
        &mut w,
        &mut a,
        "exitPlanMode.request",
        json!({"approved":true,"selectedAction":"autopilot"}),
    );
    let says: Vec<String> = a
        .events("s")
        .iter()
        .filter(|e| e["type"] == "assistant.message")
        .map(|e| e["data"]["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        says,
        [
            r#"sampled {"text":"ok"}"#,
            r#"form {"action":"decline"}"#,
            "command {}",
            r#"hook {"output":{"decision":"allow"}}"#,
            r#"plan {"approved":true,"selectedAction":"autopilot"}"#,
        ]
    );
    assert_eq!(
        a.event("s", "exit_plan_mode.completed")["data"]["approved"],
        true
    );
}

/// One step of a random interleaving of client behaviour during a tool turn.
#[derive(Clone, Debug)]
enum Move {
    AnswerPermission { by: usize, approve: bool },
    AnswerTool { by: usize, fail: bool },
    Disconnect(usize),
    Tick,
}

fn moves() -> impl Strategy<Value = Vec<Move>> {
    prop::collection::vec(
        prop_oneof![
            (0..3usize, any::<bool>())
                .prop_map(|(by, approve)| Move::AnswerPermission { by, approve }),
            (0..3usize, any::<bool>()).prop_map(|(by, fail)| Move::AnswerTool { by, fail }),
            (0..3usize).prop_map(Move::Disconnect),
            Just(Move::Tick),
        ],
        0..12,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the clients do — answer in any order, answer twice, leave — every pending
    /// request ends exactly once, every `*.requested` gets its `*.completed`, and the turn
    /// reaches `session.idle`.
    #[test]
    fn every_pending_request_ends_exactly_once(script in moves()) {
        let mut w = World::new(HostConfig::default());
        let mut peers: Vec<Peer> = (0..3).map(|_| w.connect()).collect();
        let mut alive = [true; 3];
        let (first, rest) = peers.split_at_mut(1);
        let tools = json!([{"name":"get_weather","description":"d"}]);
        create(&mut w, &mut first[0], "s", json!({"tools": tools}));
        for p in rest.iter_mut() {
            w.call(p, &mut [], "session.resume", json!({"sessionId":"s","requestPermission":true,"tools":tools}));
        }
        // The observer: a connection that never answers and never leaves.
        let mut obs = w.connect();
        w.call(&mut obs, &mut [], "session.resume", json!({"sessionId":"s","disableResume":true}));
        w.send_frame(&peers[0], &json!({"jsonrpc":"2.0","id":999,"method":"session.send","params":{"sessionId":"s","prompt":"weather"}}));
        let mut all: Vec<&mut Peer> = peers.iter_mut().collect();
        all.push(&mut obs);
        w.pump(&mut all);
        drop(all);
        for m in script {
            match m {
                Move::AnswerPermission { by, approve } if alive[by] => {
                    if let Some(e) = obs.events("s").into_iter().rev().find(|e| e["type"] == "permission.requested") {
                        let kind = if approve { "approve-once" } else { "reject" };
                        w.send_frame(&peers[by], &json!({"jsonrpc":"2.0","id":1000,"method":"session.permissions.handlePendingPermissionRequest",
                            "params":{"sessionId":"s","requestId":e["data"]["requestId"],"result":{"kind":kind}}}));
                    }
                }
                Move::AnswerTool { by, fail } if alive[by] => {
                    if let Some(e) = obs.events("s").into_iter().rev().find(|e| e["type"] == "external_tool.requested") {
                        let params = if fail {
                            json!({"sessionId":"s","requestId":e["data"]["requestId"],"error":"boom"})
                        } else {
                            json!({"sessionId":"s","requestId":e["data"]["requestId"],"result":"sunny"})
                        };
                        w.send_frame(&peers[by], &json!({"jsonrpc":"2.0","id":1001,"method":"session.tools.handlePendingToolCall","params":params}));
                    }
                }
                Move::Disconnect(i) if alive[i] => {
                    alive[i] = false;
                    w.host.handle_eof(w.now, peers[i].conn);
                }
                _ => {}
            }
            let mut all: Vec<&mut Peer> = peers.iter_mut().collect();
            all.push(&mut obs);
            w.pump(&mut all);
        }
        // Whoever is still here answers whatever is still pending (or everyone left).
        for _ in 0..3 {
            let Some(by) = (0..3).find(|i| alive[*i]) else { break };
            let types = obs.types("s");
            let open = |req: &str, done: &str| types.iter().filter(|t| *t == req).count() > types.iter().filter(|t| *t == done).count();
            if open("permission.requested", "permission.completed") {
                let e = obs.events("s").into_iter().rev().find(|e| e["type"] == "permission.requested").unwrap();
                w.send_frame(&peers[by], &json!({"jsonrpc":"2.0","id":2000,"method":"session.permissions.handlePendingPermissionRequest",
                    "params":{"sessionId":"s","requestId":e["data"]["requestId"],"result":{"kind":"approve-once"}}}));
            } else if open("external_tool.requested", "external_tool.completed") {
                let e = obs.events("s").into_iter().rev().find(|e| e["type"] == "external_tool.requested").unwrap();
                w.send_frame(&peers[by], &json!({"jsonrpc":"2.0","id":2001,"method":"session.tools.handlePendingToolCall",
                    "params":{"sessionId":"s","requestId":e["data"]["requestId"],"result":"ok"}}));
            }
            let mut all: Vec<&mut Peer> = peers.iter_mut().collect();
            all.push(&mut obs);
            w.pump(&mut all);
        }
        let types = obs.types("s");
        let count = |t: &str| types.iter().filter(|x| *x == t).count();
        prop_assert_eq!(count("permission.requested"), 1);
        prop_assert_eq!(count("permission.completed"), 1, "{:?}", types);
        prop_assert_eq!(count("external_tool.requested"), count("external_tool.completed"), "{:?}", types);
        prop_assert!(count("external_tool.requested") <= 1);
        prop_assert_eq!(count("tool.execution_start"), 1);
        prop_assert_eq!(count("tool.execution_complete"), 1, "{:?}", types);
        prop_assert_eq!(types.last().map(String::as_str), Some("session.idle"), "{:?}", types);
        // Every request each live client sent got exactly one response.
        for (i, p) in peers.iter().enumerate().filter(|(i, _)| alive[*i]) {
            let mut ids: Vec<String> = p.inbox.iter().filter(|m| m.get("method").is_none()).map(|m| m["id"].to_string()).collect();
            let n = ids.len();
            ids.sort();
            ids.dedup_by(|a, b| a == b && a != "1000" && a != "1001" && a != "2000" && a != "2001");
            prop_assert_eq!(ids.len(), n, "peer {} got a duplicate response", i);
        }
    }
}

/// An abort drops the prompts queued behind the running turn: every `sendAndWait` caller is
/// answered (`aborted: true`), none waits forever (found by the simulation, seed 23).
#[test]
fn abort_answers_every_send_and_wait_including_queued_ones() {
    let mut w = world(r#"{"default":[{"sleep_ms":1000},{"say":"late"}]}"#);
    let mut a = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    for (id, prompt) in [(50, "first"), (51, "second")] {
        w.send_frame(
            &a,
            &json!({"jsonrpc":"2.0","id":id,"method":"session.sendAndWait",
                                  "params":{"sessionId":"s","prompt":prompt}}),
        );
    }
    w.pump(&mut [&mut a]);
    assert!(
        a.inbox.iter().all(|m| m["id"] != 50 && m["id"] != 51),
        "both still waiting"
    );
    w.call(&mut a, &mut [], "session.abort", json!({"sessionId":"s"}));
    for id in [50, 51] {
        let reply = a
            .inbox
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("{id} never answered"));
        assert_eq!(reply["result"]["aborted"], true, "{reply}");
        assert!(
            reply["result"].get("response").is_none(),
            "no reply was produced: {reply}"
        );
    }
    w.run_timers(&mut [&mut a]);
    assert!(
        !a.types("s").iter().any(|t| t == "assistant.message"),
        "the aborted turns never speak"
    );
}

/// The manual's per-bridge example scenario (docs/scenarios.md) is a valid scenario.
#[test]
fn the_manual_example_scenario_loads() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/scenarios.md")).unwrap();
    let at = readme
        .find("## One example scenario per bridge")
        .expect("the section");
    let start = readme[at..].find("```json").unwrap() + at + "```json".len();
    let end = readme[start..].find("```").unwrap() + start;
    let scenario = Scenario::from_json(&readme[start..end]).expect("the README example is valid");
    assert_eq!(scenario.rules.len(), 8);
}

/// Queued slash commands: offered one at a time between turns as `command.queued`, answered
/// with `respondToQueuedCommand` (first answer wins), `stopProcessingQueue` pauses the queue
/// until the next request.
#[test]
fn queued_commands_run_between_turns_in_order() {
    let mut w = world(r#"{"default":[{"sleep_ms":100},{"say":"done"}]}"#);
    let mut a = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    let queued = |p: &Peer| -> Vec<Value> {
        p.events("s")
            .into_iter()
            .filter(|e| e["type"] == "command.queued")
            .collect()
    };
    // Idle: offered at once.
    let r = w.call(
        &mut a,
        &mut [],
        "session.commands.enqueue",
        json!({"sessionId":"s","command":"/compact"}),
    );
    assert_eq!(r["result"]["queued"], true);
    assert!(r["result"]["queueId"].is_string());
    assert_eq!(queued(&a).len(), 1);
    assert_eq!(queued(&a)[0]["data"]["command"], "/compact");
    // During a turn, and while one is being answered: they wait.
    w.call(
        &mut a,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"x"}),
    );
    w.call(
        &mut a,
        &mut [],
        "session.commands.enqueue",
        json!({"sessionId":"s","command":"/model gpt"}),
    );
    w.call(
        &mut a,
        &mut [],
        "session.commands.enqueue",
        json!({"sessionId":"s","command":"/clear"}),
    );
    assert_eq!(queued(&a).len(), 1);
    let first = queued(&a)[0]["data"]["requestId"].clone();
    let r = w.call(
        &mut a,
        &mut [],
        "session.commands.respondToQueuedCommand",
        json!({"sessionId":"s","requestId":first,"result":{"handled":true}}),
    );
    assert_eq!(r["result"], json!({"success": true}));
    let r = w.call(
        &mut a,
        &mut [],
        "session.commands.respondToQueuedCommand",
        json!({"sessionId":"s","requestId":first,"result":{"handled":true}}),
    );
    assert_eq!(r["result"], json!({"success": false}), "first answer wins");
    assert_eq!(queued(&a).len(), 1, "the turn is still running");
    w.run_timers(&mut [&mut a]);
    assert_eq!(queued(&a).len(), 2, "offered when the turn ended");
    assert_eq!(queued(&a)[1]["data"]["command"], "/model gpt");
    // stopProcessingQueue: /clear waits for the next request.
    let second = queued(&a)[1]["data"]["requestId"].clone();
    w.call(&mut a, &mut [], "session.commands.respondToQueuedCommand",
           json!({"sessionId":"s","requestId":second,"result":{"handled":true,"stopProcessingQueue":true}}));
    assert_eq!(queued(&a).len(), 2);
    w.call(
        &mut a,
        &mut [],
        "session.commands.enqueue",
        json!({"sessionId":"s","command":"/help"}),
    );
    let commands: Vec<Value> = queued(&a)
        .iter()
        .map(|e| e["data"]["command"].clone())
        .collect();
    assert_eq!(
        commands,
        [json!("/compact"), json!("/model gpt"), json!("/clear")]
    );
    assert!(
        a.types("s")
            .iter()
            .filter(|t| *t == "command.completed")
            .count()
            >= 2
    );
}

/// Runs one weather turn on a fresh world, answers its permission prompt with the raw
/// `decision`, answers the tool call if one is asked for, and returns the client's events.
fn weather_turn_with_decision(decision: Value) -> (Peer, Value) {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"tools": weather_tool()}));
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"What is the weather in Paris?"}),
    );
    let rid = p.event("s", "permission.requested")["data"]["requestId"].clone();
    let r = w.call(
        &mut p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":rid,"result":decision}),
    );
    assert_eq!(
        r["result"],
        json!({"success": true}),
        "the first answer wins"
    );
    // A second answer (of any kind) is refused and changes nothing.
    let before = p.events("s").len();
    let again = w.call(
        &mut p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":rid,"result":{"kind":"reject"}}),
    );
    assert_eq!(again["result"], json!({"success": false}));
    assert_eq!(p.events("s").len(), before);
    if let Some(req) = p
        .events("s")
        .into_iter()
        .find(|e| e["type"] == "external_tool.requested")
    {
        let r = w.call(
            &mut p,
            &mut [],
            "session.tools.handlePendingToolCall",
            json!({"sessionId":"s","requestId":req["data"]["requestId"],"result":"sunny"}),
        );
        assert_eq!(r["result"], json!({"success": true}));
    }
    let completed: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "permission.completed")
        .collect();
    assert_eq!(completed.len(), 1, "{:?}", p.types("s"));
    assert_eq!(completed[0]["data"]["requestId"], rid);
    let result = completed[0]["data"]["result"].clone();
    (p, result)
}

/// After an approving decision the tool ran and the turn answered with its result.
fn assert_tool_ran(p: &Peer) {
    let types = p.types("s");
    assert!(
        only_subsequence(
            &types,
            &[
                "permission.requested",
                "permission.completed",
                "external_tool.requested",
                "external_tool.completed",
                "tool.execution_complete",
                "session.idle"
            ]
        ),
        "{types:?}"
    );
    let done = p.event("s", "tool.execution_complete");
    assert_eq!(done["data"]["success"], true, "{done}");
    assert_eq!(done["data"]["result"]["content"], "sunny");
    assert_eq!(last_say(p, "s"), "It is sunny in Paris.");
}

/// `approve-for-location{approval, locationKey}` → `approved-for-location{approval,
/// locationKey}` (copilot-sdk.md §5 decision list, §3 result union), the tool runs; the legacy
/// result-style `approved-for-location` maps the same way.
#[test]
fn approve_for_location_completes_as_approved_for_location_and_the_tool_runs() {
    let approval = json!({"kind":"custom-tool","toolName":"get_weather"});
    for kind in ["approve-for-location", "approved-for-location"] {
        let (p, result) = weather_turn_with_decision(
            json!({"kind": kind, "approval": approval, "locationKey": "/home/u/project"}),
        );
        assert_eq!(
            result,
            json!({"kind":"approved-for-location","approval":approval,"locationKey":"/home/u/project"}),
            "{kind}"
        );
        assert_tool_ran(&p);
    }
}

/// `approve-permanently{domain}`: the reference's result union has no permanent kind, and
/// `approved-for-session` requires an `approval` a domain is not, so the call completes as
/// `approved` and the tool runs.
#[test]
fn approve_permanently_completes_as_approved_and_the_tool_runs() {
    let (p, result) =
        weather_turn_with_decision(json!({"kind":"approve-permanently","domain":"example.com"}));
    assert_eq!(result, json!({"kind":"approved"}));
    assert_tool_ran(&p);
}

/// Found by `host_sequence` fuzzing: a sampling request announced while A was the only
/// sampler, then B joins as a sampler and A leaves. B must hear of the request (its event is
/// ephemeral), or nobody answers and the turn never ends. The same for elicitation.
#[test]
fn a_provider_that_joins_later_is_offered_the_pending_requests() {
    let mut w = world(
        r#"{"default":[{"sample":{"messages":[{"content":"hi"}]}},{"ask":"Name?"},{"say":"done: {answer}"}]}"#,
    );
    let mut a = w.connect();
    let mut b = w.connect();
    create(
        &mut w,
        &mut a,
        "s",
        json!({"requestSampling": true, "requestElicitation": true}),
    );
    w.call(
        &mut a,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"go"}),
    );
    let sreq = a.event("s", "sampling.requested");
    w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","requestSampling": true, "requestElicitation": true}),
    );
    let offered = b.event("s", "sampling.requested");
    assert_eq!(
        offered["data"], sreq["data"],
        "the same request, offered to B"
    );
    assert_eq!(offered["ephemeral"], true);
    // A (the only one that saw it announced) leaves; B answers; the turn goes on.
    let now = w.now;
    w.host.handle_eof(now, a.conn);
    w.pump(&mut [&mut b]);
    let r = w.call(
        &mut b,
        &mut [],
        "session.ui.handlePendingSampling",
        json!({"sessionId":"s","requestId":sreq["data"]["requestId"],"response":{"text":"ok"}}),
    );
    assert_eq!(r["result"]["success"], true);
    // The elicitation that follows is announced to B (attached now); a provider joining
    // after it is offered it too.
    let ereq = b.event("s", "elicitation.requested");
    let mut c = w.connect();
    w.call(
        &mut c,
        &mut [&mut b],
        "session.resume",
        json!({"sessionId":"s","requestElicitation": true}),
    );
    assert_eq!(c.event("s", "elicitation.requested")["data"], ereq["data"]);
    assert!(
        !c.types("s").contains(&"sampling.requested".to_owned()),
        "an answered request is not offered again"
    );
    w.call(
        &mut c,
        &mut [&mut b],
        "session.ui.handlePendingElicitation",
        json!({"sessionId":"s","requestId":ereq["data"]["requestId"],
                  "result":{"action":"accept","content":{"name":"Ada"}}}),
    );
    assert_eq!(b.types("s").last().unwrap(), "session.idle");
}
