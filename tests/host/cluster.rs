//! The host's cluster seams, sans-IO: a request naming a session the host has not loaded
//! waits for the runtime's lookup (in order with the connection's other frames), a session
//! restored from a dead node's log has its open turn closed, and nodes with the same seed
//! generate different ids.

use agentwire::host::{ClusterOutput, HostConfig, Output, StoreOutput};
use bytes::Bytes;
use serde_json::{json, Value};

use crate::support::*;

fn node_config(node: &str) -> HostConfig {
    HostConfig::default()
        .with_seed(7)
        .with_node_id(Some(node.into()))
        .with_report_persisted_events(true)
        .with_lookup_unknown_sessions(true)
}

/// A node that owns its sessions (no lookups), approving every permission prompt.
fn owner_config(node: &str) -> HostConfig {
    HostConfig::default()
        .with_seed(7)
        .with_node_id(Some(node.into()))
        .with_report_persisted_events(true)
        .with_approve_all_permissions(true)
}

/// Takes every output, keeping the persisted events and the lookups.
fn drain(w: &mut World) -> (Vec<Bytes>, Vec<String>) {
    let (mut persisted, mut lookups) = (Vec::new(), Vec::new());
    while let Some(output) = w.host.poll_output() {
        match output {
            Output::Store(StoreOutput::Persist { event, .. }) => persisted.push(event),
            Output::Cluster(ClusterOutput::LoadSession { session }) => lookups.push(session),
            _ => {}
        }
    }
    (persisted, lookups)
}

/// Node A's log of session `s` after a finished plain turn.
fn finished_log() -> Vec<Bytes> {
    let mut a = World::new(owner_config("a"));
    let mut p = a.connect();
    create(&mut a, &mut p, "s", json!({}));
    send_request(
        &mut a,
        &mut p,
        "session.send",
        json!({"sessionId":"s","prompt":"hi"}),
    );
    a.run_timers(&mut [&mut p]);
    let (persisted, _) = drain(&mut a);
    assert!(persisted.len() > 3);
    persisted
}

#[test]
fn a_request_for_an_unknown_session_waits_for_the_lookup_in_order() {
    let log = finished_log();
    let mut b = World::new(node_config("b"));
    let mut p = b.connect();
    let resume = send_request(&mut b, &mut p, "session.resume", json!({"sessionId":"s"}));
    let ping = send_request(&mut b, &mut p, "ping", json!({"message":"after"}));
    let again = send_request(
        &mut b,
        &mut p,
        "session.getMessages",
        json!({"sessionId":"s"}),
    );
    assert!(
        response(&p, resume).is_none(),
        "the resume waits for the lookup"
    );
    assert!(response(&p, ping).is_none(), "later frames wait behind it");
    let (_, lookups) = drain(&mut b);
    assert_eq!(lookups, ["s"], "one lookup per session");

    b.host.restore_session(b.now, "s", log.clone()).unwrap();
    b.host.cluster().finish_session_lookup(b.now, "s");
    b.pump(&mut [&mut p]);
    let resumed = response(&p, resume).expect("resumed").clone();
    assert_eq!(resumed["result"]["sessionId"], "s", "{resumed}");
    let positions: Vec<usize> = [resume, ping, again]
        .iter()
        .map(|id| {
            p.inbox
                .iter()
                .position(|m| m["id"] == json!(id) && m.get("method").is_none())
                .unwrap()
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    let messages = response(&p, again).unwrap()["result"]["events"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(messages, log.len() + 1, "the log plus session.resume");
    let (_, lookups) = drain(&mut b);
    assert!(
        lookups.is_empty(),
        "a loaded session is not looked up again"
    );
}

#[test]
fn a_lookup_that_finds_nothing_answers_not_found() {
    let mut b = World::new(node_config("b"));
    let mut p = b.connect();
    let send_id = send_request(
        &mut b,
        &mut p,
        "session.send",
        json!({"sessionId":"nope","prompt":"x"}),
    );
    assert!(response(&p, send_id).is_none());
    assert_eq!(drain(&mut b).1, ["nope"]);
    b.host.cluster().finish_session_lookup(b.now, "nope");
    b.pump(&mut [&mut p]);
    let r = response(&p, send_id).expect("answered");
    assert_eq!(
        r["error"]["message"],
        "Request session.send failed with message: Session not found for sessionId: nope"
    );
}

#[test]
fn a_failed_lookup_refuses_the_requests_naming_its_session_and_creates_nothing() {
    let mut b = World::new(node_config("b"));
    let mut p = b.connect();
    let create_id = send_request(&mut b, &mut p, "session.create", json!({"sessionId":"s"}));
    let ping = send_request(&mut b, &mut p, "ping", json!({"message":"after"}));
    let other = send_request(&mut b, &mut p, "session.resume", json!({"sessionId":"t"}));
    let behind = send_request(
        &mut b,
        &mut p,
        "session.getMessages",
        json!({"sessionId":"s"}),
    );
    assert_eq!(drain(&mut b).1, ["s"]);
    let reason = "the cluster log cannot be read: partitioned";
    b.host.cluster().fail_session_lookup(b.now, "s", reason);
    b.pump(&mut [&mut p]);
    let refused = response(&p, create_id).expect("answered");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("session s cannot be served now") && message.contains(reason),
        "{refused}"
    );
    assert!(
        b.host.session_events("s").is_none(),
        "a session the log may hold is not created"
    );
    assert!(response(&p, ping).is_some(), "later frames go on");
    assert!(
        response(&p, other).is_none(),
        "and wait for their own lookup"
    );
    assert!(
        response(&p, behind).is_none(),
        "a request for the session behind it waits too, in order"
    );
    assert_eq!(drain(&mut b).1, ["t"]);
    b.host.cluster().finish_session_lookup(b.now, "t");
    b.pump(&mut [&mut p]);
    assert!(response(&p, other).is_some());
    // Then it looks the session up again.
    assert!(response(&p, behind).is_none());
    assert_eq!(drain(&mut b).1, ["s"]);
}

#[test]
fn a_new_session_is_looked_up_then_created() {
    let mut b = World::new(node_config("b"));
    let mut p = b.connect();
    let id = send_request(
        &mut b,
        &mut p,
        "session.create",
        json!({"sessionId":"fresh"}),
    );
    assert!(response(&p, id).is_none());
    assert_eq!(drain(&mut b).1, ["fresh"]);
    b.host.cluster().finish_session_lookup(b.now, "fresh");
    b.pump(&mut [&mut p]);
    assert_eq!(response(&p, id).unwrap()["result"]["sessionId"], "fresh");
}

#[test]
fn a_taken_over_turn_with_an_open_tool_call_is_closed_with_a_reason() {
    let mut a = World::new(owner_config("a"));
    let mut p = a.connect();
    create(&mut a, &mut p, "s", json!({"tools": weather_tool()}));
    send_request(
        &mut a,
        &mut p,
        "session.send",
        json!({"sessionId":"s","prompt":"What is the weather in Paris?"}),
    );
    a.run_timers(&mut [&mut p]);
    let requested = p
        .events("s")
        .into_iter()
        .find(|e| e["type"] == "external_tool.requested")
        .expect("the client is asked to run its tool");
    // Node A dies here: the tool call is open in its log.
    let (log, _) = drain(&mut a);

    let mut b = World::new(node_config("b"));
    b.host.restore_session(b.now, "s", log.clone()).unwrap();
    let reason = "the node running this turn stopped";
    assert!(b.host.interrupt_open_turn(b.now, "s", reason));
    let (appended, _) = drain(&mut b);
    let appended: Vec<Value> = appended
        .iter()
        .map(|e| serde_json::from_slice(e).unwrap())
        .collect();
    let types: Vec<&str> = appended
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "external_tool.completed",
            "tool.execution_complete",
            "session.error"
        ]
    );
    assert_eq!(
        appended[0]["data"]["requestId"],
        requested["data"]["requestId"]
    );
    assert_eq!(appended[1]["data"]["success"], false);
    assert_eq!(appended[2]["data"]["errorType"], "interrupted");
    assert_eq!(appended[2]["data"]["message"], reason);
    let last_a: Value = serde_json::from_slice(log.last().unwrap()).unwrap();
    assert_eq!(
        appended[0]["parentId"], last_a["id"],
        "the parentId chain goes on"
    );
    assert!(
        !b.host.interrupt_open_turn(b.now, "s", reason),
        "nothing is left open"
    );

    // The session carries on: the next turn runs on node B.
    let mut q = b.connect();
    b.call(&mut q, &mut [], "session.resume", json!({"sessionId":"s"}));
    b.call(
        &mut q,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"hi"}),
    );
    b.run_timers(&mut [&mut q]);
    assert!(q.events("s").iter().any(|e| e["type"] == "session.idle"));
}

#[test]
fn a_finished_turn_is_not_interrupted() {
    let log = finished_log();
    let mut b = World::new(node_config("b"));
    b.host.restore_session(b.now, "s", log).unwrap();
    assert!(!b.host.interrupt_open_turn(b.now, "s", "x"));
    assert!(drain(&mut b).0.is_empty());
}

#[test]
fn nodes_with_the_same_seed_generate_different_ids() {
    let ids = |node: &str| {
        let mut w = World::new(owner_config(node));
        let mut p = w.connect();
        create(&mut w, &mut p, "s", json!({}));
        let (persisted, _) = drain(&mut w);
        let first: Value = serde_json::from_slice(&persisted[0]).unwrap();
        first["id"].as_str().unwrap().to_owned()
    };
    assert_ne!(ids("a"), ids("b"));
    assert_eq!(ids("a"), ids("a"), "each node is still deterministic");
}

/// Takes every output, keeping the relayed frames (session and parsed body, in order).
fn forwarded(w: &mut World) -> Vec<(String, Value)> {
    let mut relayed = Vec::new();
    while let Some(output) = w.host.poll_output() {
        if let Output::Cluster(ClusterOutput::Forward {
            session, frames, ..
        }) = output
        {
            for frame in frames {
                relayed.push((session.clone(), serde_json::from_slice(&frame).unwrap()));
            }
        }
    }
    relayed
}

/// Node `b`'s client `p` resumes `session`, which the lookup finds owned by another node:
/// the resume is relayed there.
fn forward(b: &mut World, p: &mut Peer, session: &str) {
    let resume = send_request(b, p, "session.resume", json!({"sessionId": session}));
    assert_eq!(drain(b).1, [session]);
    b.host.cluster().forward_session_lookup(b.now, session);
    let relayed = forwarded(b);
    assert_eq!(relayed.len(), 1, "{relayed:?}");
    assert_eq!(relayed[0].0, session);
    assert_eq!(relayed[0].1["id"], json!(resume));
}

#[test]
fn a_session_owned_elsewhere_is_relayed_in_order_and_the_rest_served_here() {
    let mut b = World::new(node_config("b"));
    let mut p = b.connect();
    let ping = send_request(&mut b, &mut p, "ping", json!({"message":"local"}));
    assert!(
        response(&p, ping).is_some(),
        "answered here before any lookup"
    );
    let resume = send_request(
        &mut b,
        &mut p,
        "session.resume",
        json!({"sessionId":"remote"}),
    );
    let later = send_request(&mut b, &mut p, "ping", json!({"message":"later"}));
    assert!(response(&p, later).is_none(), "it waits behind the lookup");
    assert_eq!(drain(&mut b).1, ["remote"]);
    b.host.cluster().forward_session_lookup(b.now, "remote");
    let relayed = forwarded(&mut b);
    let ids: Vec<(&str, &Value)> = relayed
        .iter()
        .map(|(s, m)| (s.as_str(), &m["id"]))
        .collect();
    assert_eq!(ids, [("remote", &json!(resume))], "the frame naming it");
    b.pump(&mut [&mut p]);
    assert!(
        response(&p, later).is_some(),
        "the frame naming no session is served here once the lookup ended"
    );
    assert!(b.host.cluster().is_forwarded(p.conn));
    assert_eq!(
        b.host
            .cluster()
            .forwarded_sessions(p.conn)
            .collect::<Vec<_>>(),
        ["remote"]
    );

    // Later frames naming it are relayed as they come, the others served here; the owner's
    // answers reach the client.
    let next = send_request(
        &mut b,
        &mut p,
        "session.getMessages",
        json!({"sessionId":"remote"}),
    );
    let relayed = forwarded(&mut b);
    assert_eq!(relayed.len(), 1);
    assert_eq!(relayed[0].0, "remote");
    assert_eq!(relayed[0].1["id"], json!(next));
    let here = send_request(&mut b, &mut p, "ping", json!({"message":"here"}));
    assert!(forwarded(&mut b).is_empty());
    assert!(response(&p, here).is_some());
    let answer = json!({"jsonrpc":"2.0","id":resume,"result":{"sessionId":"remote"}});
    b.host.cluster().deliver_forwarded(
        b.now,
        p.conn,
        "remote",
        &serde_json::to_vec(&answer).unwrap(),
    );
    b.pump(&mut [&mut p]);
    assert_eq!(
        response(&p, resume).unwrap()["result"]["sessionId"],
        "remote"
    );

    // The client leaves: the owner is told.
    b.host.handle_eof(b.now, p.conn);
    assert_eq!(
        b.host.poll_output(),
        Some(Output::Cluster(ClusterOutput::ForwardClosed {
            conn: p.conn
        }))
    );
}

/// One connection uses a session of its own node and sessions of two other owners: each
/// frame goes where its session is served.
#[test]
fn one_connection_uses_sessions_of_this_node_and_of_two_owners() {
    let mut b = World::new(node_config("b"));
    let mut p = b.connect();
    let created = send_request(
        &mut b,
        &mut p,
        "session.create",
        json!({"sessionId":"mine"}),
    );
    assert_eq!(drain(&mut b).1, ["mine"]);
    b.host.cluster().finish_session_lookup(b.now, "mine");
    b.pump(&mut [&mut p]);
    assert!(response(&p, created).is_some_and(|r| r.get("result").is_some()));
    drain(&mut b);
    forward(&mut b, &mut p, "of-a");
    forward(&mut b, &mut p, "of-c");
    assert_eq!(
        b.host
            .cluster()
            .forwarded_sessions(p.conn)
            .collect::<Vec<_>>(),
        ["of-a", "of-c"]
    );
    let to_c = send_request(
        &mut b,
        &mut p,
        "session.send",
        json!({"sessionId":"of-c","prompt":"c"}),
    );
    let to_a = send_request(
        &mut b,
        &mut p,
        "session.send",
        json!({"sessionId":"of-a","prompt":"a"}),
    );
    let relayed = forwarded(&mut b);
    let routes: Vec<(&str, &Value)> = relayed
        .iter()
        .map(|(s, m)| (s.as_str(), &m["id"]))
        .collect();
    assert_eq!(routes, [("of-c", &json!(to_c)), ("of-a", &json!(to_a))]);
    // The session of this node is served here: its turn runs, nothing is relayed.
    let mine = send_request(
        &mut b,
        &mut p,
        "session.send",
        json!({"sessionId":"mine","prompt":"m"}),
    );
    assert!(response(&p, mine).is_some_and(|r| r.get("result").is_some()));
    let (persisted, lookups) = drain(&mut b);
    assert!(lookups.is_empty());
    assert!(!persisted.is_empty(), "the local turn is stored here");
}

/// Two owners ask the client with the same request id: the client sees two ids of its
/// connection's own, distinct from each other, and each answer goes back to the owner that
/// asked, under that owner's id.
#[test]
fn owner_requests_get_ids_of_the_connection_and_answers_go_back_to_their_owner() {
    let mut b = World::new(node_config("b"));
    let mut p = b.connect();
    forward(&mut b, &mut p, "of-a");
    forward(&mut b, &mut p, "of-c");
    let ask = |session: &str| {
        serde_json::to_vec(&json!({"jsonrpc":"2.0","id":1,"method":"userInput.request",
                                    "params":{"sessionId":session,"question":session}}))
        .unwrap()
    };
    b.host
        .cluster()
        .deliver_forwarded(b.now, p.conn, "of-a", &ask("of-a"));
    b.host
        .cluster()
        .deliver_forwarded(b.now, p.conn, "of-c", &ask("of-c"));
    b.pump(&mut [&mut p]);
    let asked: Vec<Value> = p
        .inbox
        .iter()
        .filter(|m| m["method"] == "userInput.request")
        .cloned()
        .collect();
    assert_eq!(asked.len(), 2);
    let (id_a, id_c) = (asked[0]["id"].clone(), asked[1]["id"].clone());
    assert_ne!(id_a, id_c, "the client can tell them apart");
    assert_eq!(
        asked[1]["params"]["question"], "of-c",
        "the rest is the owner's"
    );
    // Answered in the other order.
    for (id, answer) in [(&id_c, "for c"), (&id_a, "for a")] {
        let frame = json!({"jsonrpc":"2.0","id":id,"result":{"answer":answer}});
        b.send_frame(&p, &frame);
        b.pump(&mut [&mut p]);
    }
    let relayed = forwarded(&mut b);
    let answers: Vec<(&str, &Value, &Value)> = relayed
        .iter()
        .map(|(s, m)| (s.as_str(), &m["id"], &m["result"]["answer"]))
        .collect();
    assert_eq!(
        answers,
        [
            ("of-c", &json!(1), &json!("for c")),
            ("of-a", &json!(1), &json!("for a"))
        ]
    );
    // An answer given twice, or to an id no owner used, is not relayed.
    let frame = json!({"jsonrpc":"2.0","id":id_a,"result":{"answer":"again"}});
    b.send_frame(&p, &frame);
    b.pump(&mut [&mut p]);
    assert!(forwarded(&mut b).is_empty());
}

/// `session.list` shows the loaded sessions, then the sessions the runtime found in its shared
/// log (`Host::set_cluster_sessions`) with the metadata a loaded session gets; the `cwd`
/// filter applies to them; once such a session is loaded here, it is listed once, from the
/// host's own state.
#[test]
fn session_list_shows_the_sessions_the_runtime_found_in_the_log() {
    use agentwire::host::SessionSummary;
    let log = finished_log();
    let mut from_log = SessionSummary::new("s");
    for event in &log {
        assert!(from_log.add_event(event));
    }
    let mut elsewhere = SessionSummary::new("elsewhere");
    elsewhere.add_event(
        br#"{"id":"x","type":"session.start","timestamp":"2026-01-01T00:00:00.000Z","data":{"context":{"cwd":"/w"}}}"#,
    );
    elsewhere.add_event(
        br#"{"id":"y","type":"user.message","timestamp":"2026-01-01T00:00:02.000Z","data":{"content":"far away"}}"#,
    );
    let mut b = World::new(owner_config("b"));
    let mut p = b.connect();
    create(&mut b, &mut p, "local", json!({}));
    b.host.cluster().set_cluster_sessions([from_log, elsewhere]);

    let list = |b: &mut World, p: &mut Peer, params: Value| -> Vec<Value> {
        let id = send_request(b, p, "session.list", params);
        response(p, id).expect("session.list answered")["result"]["sessions"]
            .as_array()
            .expect("sessions")
            .clone()
    };
    let sessions = list(&mut b, &mut p, json!({}));
    let ids: Vec<&str> = sessions
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["local", "elsewhere", "s"]);
    let far = &sessions[1];
    assert_eq!(far["summary"], "far away");
    assert_eq!(far["startTime"], "2026-01-01T00:00:00.000Z");
    assert_eq!(far["modifiedTime"], "2026-01-01T00:00:02.000Z");
    assert_eq!(far["context"]["cwd"], "/w");
    assert_eq!(far["isDetached"], true);
    let first: Value = serde_json::from_slice(&log[0]).unwrap();
    let last: Value = serde_json::from_slice(log.last().unwrap()).unwrap();
    assert_eq!(sessions[2]["summary"], "hi");
    assert_eq!(sessions[2]["startTime"], first["timestamp"]);
    assert_eq!(sessions[2]["modifiedTime"], last["timestamp"]);

    let filtered = list(&mut b, &mut p, json!({"filter": {"cwd": "/w"}}));
    assert_eq!(filtered.len(), 1);
    assert_eq!(filtered[0]["sessionId"], "elsewhere");

    // Loaded here (a takeover): listed once, from the host's state.
    b.host.restore_session(b.now, "s", log).unwrap();
    let sessions = list(&mut b, &mut p, json!({}));
    let listed_s: Vec<&Value> = sessions.iter().filter(|s| s["sessionId"] == "s").collect();
    assert_eq!(listed_s.len(), 1);
    assert_eq!(listed_s[0]["summary"], "hi");
}

#[test]
fn events_after_a_takeover_never_step_back_in_time_when_the_new_owners_clock_is_behind() {
    // Node A's clock is an hour ahead of node B's.
    let mut a = World::new(owner_config("a"));
    a.now = a.now.saturating_add(std::time::Duration::from_secs(3600));
    let mut p = a.connect();
    create(&mut a, &mut p, "s", json!({"tools": weather_tool()}));
    send_request(
        &mut a,
        &mut p,
        "session.send",
        json!({"sessionId":"s","prompt":"What is the weather in Paris?"}),
    );
    a.run_timers(&mut [&mut p]);
    let (log, _) = drain(&mut a);
    let stamp = |e: &Value| e["timestamp"].as_str().unwrap().to_owned();
    let last_a = stamp(&serde_json::from_slice(log.last().unwrap()).unwrap());

    let mut b = World::new(node_config("b"));
    b.host.restore_session(b.now, "s", log.clone()).unwrap();
    assert!(b.host.interrupt_open_turn(b.now, "s", "taken over"));
    let mut q = b.connect();
    b.call(&mut q, &mut [], "session.resume", json!({"sessionId":"s"}));
    b.call(
        &mut q,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"hi"}),
    );
    b.run_timers(&mut [&mut q]);
    let (appended, _) = drain(&mut b);
    assert!(
        appended.len() > 4,
        "the interrupted turn's end and a new turn"
    );
    // RFC 3339 with fixed millisecond precision: string order is time order.
    let mut previous = last_a.clone();
    for event in &appended {
        let event: Value = serde_json::from_slice(event).unwrap();
        assert!(
            stamp(&event) >= previous,
            "{} at {} is earlier than the event before it ({previous}); A's last: {last_a}",
            event["type"],
            stamp(&event)
        );
        previous = stamp(&event);
    }
    for event in q.events("s") {
        assert!(
            stamp(&event) >= last_a,
            "the client got {} at {}, before A's last event ({last_a})",
            event["type"],
            stamp(&event)
        );
    }
}

/// A provider registration the client makes after one of its sessions was relayed is made on
/// that session's owner too (with the link set-up's id, whose answer is not the client's),
/// once: the client's own answer comes from its node.
#[test]
fn a_registration_made_after_a_session_was_relayed_reaches_its_owner() {
    let mut b = World::new(node_config("b"));
    let mut p = b.connect();
    forward(&mut b, &mut p, "of-a");
    let params = json!({"initialCwd":"/w","sessionStatePath":"/w/.state","conventions":"posix"});
    let registered = send_request(&mut b, &mut p, "sessionFs.setProvider", params.clone());
    assert!(response(&p, registered).is_some_and(|r| r.get("result").is_some()));
    let relayed = forwarded(&mut b);
    assert_eq!(relayed.len(), 1, "{relayed:?}");
    assert_eq!(relayed[0].0, "of-a");
    assert_eq!(relayed[0].1["method"], "sessionFs.setProvider");
    assert_eq!(relayed[0].1["id"], agentwire::host::RELAY_HANDSHAKE_ID);
    // Made already: nothing new reaches the owner.
    send_request(&mut b, &mut p, "sessionFs.setProvider", params);
    send_request(&mut b, &mut p, "ping", json!({}));
    assert!(forwarded(&mut b).is_empty());
}
