//! Relay groups (`Host::join_relay_group`): the connections a gateway node relays get every
//! frame through one group connection, each event once per group, and see exactly what
//! ordinary connections would.

use crate::support::*;
use agentwire::frame::{FrameDecoder, FrameLimits, Framing};
use agentwire::host::{ConnId, ConnectionOutput, HostConfig, Output, RelayFrame};
use serde_json::{json, Value};

/// A member's frame body as the gateway hands it to its client: an attach answer without the
/// owner's count of the session's deltas (the gateway's own, see `RELAY_DELTAS_EMITTED`).
fn as_delivered(body: &[u8]) -> Value {
    let mut v: Value = serde_json::from_slice(body).unwrap();
    if let Some(result) = v.get_mut("result").and_then(Value::as_object_mut) {
        result.remove(agentwire::host::RELAY_DELTAS_EMITTED);
        result.remove(agentwire::host::RELAY_LAST_EVENT);
    }
    v
}

/// The gateway's side of a group in miniature: decodes the group connection's frames and
/// hands each body to the members it names.
struct Gateway {
    group: ConnId,
    decoder: FrameDecoder,
    /// Group frame bodies seen, in order.
    frames: Vec<Vec<u8>>,
    /// Members that ended: (member, reason, link broke).
    ended: Vec<(ConnId, String, bool)>,
}

impl Gateway {
    fn new(w: &mut World) -> Self {
        let group = w.host.open(w.now, Framing::ContentLength);
        Gateway {
            group,
            decoder: FrameDecoder::new(Framing::ContentLength, FrameLimits::default()),
            frames: Vec::new(),
            ended: Vec::new(),
        }
    }

    /// Drains the host, then delivers the group's frames to `members`.
    fn pump(&mut self, w: &mut World, members: &mut [&mut Peer], others: &mut [&mut Peer]) {
        w.pump(others);
        for frame in w.stash.remove(&self.group).unwrap_or_default() {
            self.decoder.push(&frame).unwrap();
        }
        // Direct writes to members would be lost on a real gateway: there are none while
        // the group lives.
        let bypassed = members
            .iter()
            .filter(|m| w.stash.remove(&m.conn).is_some())
            .count();
        while let Some(body) = self.decoder.next_frame().unwrap() {
            self.frames.push(body.to_vec());
            match RelayFrame::parse(&body).unwrap() {
                RelayFrame::All(body) => {
                    for m in members.iter_mut() {
                        m.inbox.push(as_delivered(body));
                    }
                }
                RelayFrame::To { members: to, body } => {
                    for id in to {
                        let m = members
                            .iter_mut()
                            .find(|m| m.conn.as_u64() == id)
                            .expect("addressed to a member");
                        m.inbox.push(as_delivered(body));
                    }
                }
                RelayFrame::GroupEnded { reason } => {
                    self.ended.push((
                        self.group,
                        String::from_utf8(reason.to_vec()).unwrap(),
                        true,
                    ));
                }
                RelayFrame::Ended {
                    member,
                    reason,
                    link_broke,
                } => {
                    let m = members.iter().find(|m| m.conn.as_u64() == member).unwrap();
                    self.ended.push((
                        m.conn,
                        String::from_utf8(reason.to_vec()).unwrap(),
                        link_broke,
                    ));
                }
            }
        }
        let group_ended = self.ended.iter().any(|(who, _, _)| *who == self.group);
        assert!(
            bypassed == 0 || group_ended,
            "a member's frame bypassed its group"
        );
    }
}

fn request(id: &mut u64, method: &str, params: Value) -> Value {
    *id += 1;
    json!({"jsonrpc":"2.0","id":*id,"method":method,"params":params})
}

/// The same script for two clients `a` and `b` (and a bystander `c` that is never relayed):
/// `a` creates a streaming session with a client tool, `b` joins without streaming, a turn
/// runs with the tool call answered by `a`, a second session is created by `c`.
/// `relayed` makes `a` and `b` members of one group. Returns the inboxes of a, b, c and the
/// gateway (when relayed).
fn run(relayed: bool) -> (Vec<Value>, Vec<Value>, Vec<Value>, Option<Gateway>) {
    let mut w = World::new(HostConfig::default());
    let mut gateway = relayed.then(|| Gateway::new(&mut w));
    let mut a = w.connect();
    let mut b = w.connect();
    let mut c = w.connect();
    if let Some(g) = &gateway {
        assert!(w.host.cluster().join_relay_group(a.conn, g.group));
        assert!(w.host.cluster().join_relay_group(b.conn, g.group));
    }
    let mut step = |w: &mut World, who: usize, body: Value, gateway: &mut Option<Gateway>| {
        let peer = [&a, &b, &c][who];
        w.send_frame(peer, &body);
        let _ = w.host.poll_timeout();
        match gateway {
            Some(g) => g.pump(w, &mut [&mut a, &mut b], &mut [&mut c]),
            None => w.pump(&mut [&mut a, &mut b, &mut c]),
        }
        while let Some(t) = w.host.poll_timeout() {
            w.now = t;
            w.host.handle_timeout(t);
            match gateway {
                Some(g) => g.pump(w, &mut [&mut a, &mut b], &mut [&mut c]),
                None => w.pump(&mut [&mut a, &mut b, &mut c]),
            }
        }
    };
    let mut pa = 0;
    let create = request(
        &mut pa,
        "session.create",
        json!({"sessionId": "s1", "streaming": true, "tools": weather_tool(),
               "requestPermission": false}),
    );
    step(&mut w, 0, create, &mut gateway);
    let resume = request(
        &mut pa,
        "session.resume",
        json!({"sessionId": "s1", "streaming": false}),
    );
    step(&mut w, 1, resume, &mut gateway);
    let send = request(
        &mut pa,
        "session.send",
        json!({"sessionId": "s1", "prompt": "What is the weather in Paris?"}),
    );
    step(&mut w, 1, send, &mut gateway);
    let create2 = request(&mut pa, "session.create", json!({"sessionId": "s2"}));
    step(&mut w, 2, create2, &mut gateway);
    (a.inbox, b.inbox, c.inbox, gateway)
}

#[test]
fn members_see_exactly_what_ordinary_connections_see() {
    let (a0, b0, c0, _) = run(false);
    let (a1, b1, c1, gateway) = run(true);
    // The script did what it should: a turn with deltas for the streaming client only.
    let types = |inbox: &[Value]| -> Vec<String> {
        inbox
            .iter()
            .filter(|m| m["method"] == "session.event")
            .map(|m| m["params"]["event"]["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(types(&a0).iter().any(|t| t == "assistant.message_delta"));
    assert!(!types(&b0).iter().any(|t| t == "assistant.message_delta"));
    assert!(types(&b0).iter().any(|t| t == "session.idle"));
    assert!(c0.iter().any(|m| m["method"] == "session.lifecycle"));
    assert_eq!(a1, a0, "the streaming member");
    assert_eq!(b1, b0, "the other member");
    assert_eq!(c1, c0, "the ordinary connection");

    // Each event both members receive was queued on the group once, naming both.
    let gateway = gateway.unwrap();
    let ids = |inbox: &[Value]| -> Vec<String> {
        inbox
            .iter()
            .filter(|m| m["method"] == "session.event")
            .map(|m| m["params"]["event"]["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let shared: Vec<String> = ids(&b1)
        .into_iter()
        .filter(|id| ids(&a1).contains(id))
        .collect();
    assert!(shared.len() >= 5, "{shared:?}");
    for id in &shared {
        let carrying: Vec<&Vec<u8>> = gateway
            .frames
            .iter()
            .filter(|f| String::from_utf8_lossy(f).contains(&format!("\"id\":\"{id}\"")))
            .collect();
        assert_eq!(carrying.len(), 1, "event {id} queued once");
        let RelayFrame::To { members, .. } = RelayFrame::parse(carrying[0]).unwrap() else {
            panic!("addressed");
        };
        assert_eq!(members.len(), 2);
    }
}

#[test]
fn a_failed_member_gets_its_reason_then_its_end_and_the_group_carries_on() {
    let mut w = World::new(HostConfig::default());
    let mut g = Gateway::new(&mut w);
    let mut a = w.connect();
    let mut b = w.connect();
    assert!(w.host.cluster().join_relay_group(a.conn, g.group));
    assert!(w.host.cluster().join_relay_group(b.conn, g.group));
    // Refusals: twice, a group as a member, a member as a group, itself.
    assert!(!w.host.cluster().join_relay_group(a.conn, g.group));
    assert!(!w.host.cluster().join_relay_group(g.group, b.conn));
    assert!(!w.host.cluster().join_relay_group(b.conn, b.conn));
    let loner = w.connect();
    assert!(!w.host.cluster().join_relay_group(loner.conn, a.conn));

    w.send_raw(&a, b"Content-Length: x\r\n\r\n");
    g.pump(&mut w, &mut [&mut a, &mut b], &mut []);
    let error = a.inbox.last().expect("the reason").clone();
    assert_eq!(error["error"]["code"], -32700);
    assert_eq!(g.ended.len(), 1);
    assert_eq!(g.ended[0].0, a.conn);
    assert!(!g.ended[0].2, "not a broken link");
    let mut closed = Vec::new();
    while let Some(out) = w.host.poll_output() {
        if let Output::Connection(ConnectionOutput::Close { conn, .. }) = out {
            closed.push(conn);
        }
    }
    assert_eq!(closed, vec![a.conn]);

    // The other member still works through the group.
    w.send_frame(
        &b,
        &json!({"jsonrpc":"2.0","id":1,"method":"ping","params":{}}),
    );
    g.pump(&mut w, &mut [&mut a, &mut b], &mut []);
    assert_eq!(b.inbox.last().unwrap()["id"], 1);

    // Its link from the gateway breaks: the group says so, once.
    w.host
        .cluster()
        .relay_member_link_broke(w.now, b.conn, "message 7 lost");
    w.host.handle_eof(w.now, b.conn);
    g.pump(&mut w, &mut [&mut a, &mut b], &mut []);
    assert_eq!(g.ended.len(), 2);
    assert_eq!(g.ended[1], (b.conn, "message 7 lost".to_owned(), true));
}

#[test]
fn members_end_with_their_group() {
    let mut w = World::new(HostConfig::default());
    let g = Gateway::new(&mut w);
    let a = w.connect();
    assert!(w.host.cluster().join_relay_group(a.conn, g.group));
    w.send_frame(
        &a,
        &json!({"jsonrpc":"2.0","id":1,"method":"session.create","params":{"sessionId":"s1"}}),
    );
    assert!(w.host.session_events("s1").is_some());
    while w.host.poll_output().is_some() {}
    w.host.handle_eof(w.now, g.group);
    let mut closed = Vec::new();
    while let Some(out) = w.host.poll_output() {
        if let Output::Connection(ConnectionOutput::Close { conn, .. }) = out {
            closed.push(conn);
        }
    }
    assert_eq!(closed, vec![a.conn], "the member is closed with its group");
}

#[test]
fn a_group_that_falls_a_budget_behind_ends_with_its_reason_and_its_members() {
    let mut w = World::new(HostConfig::default().with_outbox_budget_bytes(64 * 1024));
    let mut g = Gateway::new(&mut w);
    let mut a = w.connect();
    let mut direct = w.connect();
    assert!(w.host.cluster().join_relay_group(a.conn, g.group));
    create(&mut w, &mut direct, "s1", json!({}));
    w.send_frame(
        &a,
        &json!({"jsonrpc":"2.0","id":1,"method":"session.resume","params":{"sessionId":"s1"}}),
    );
    g.pump(&mut w, &mut [&mut a], &mut [&mut direct]);
    assert!(
        a.inbox
            .iter()
            .any(|m| m["id"] == 1 && m.get("result").is_some()),
        "resumed through the group: {:?}",
        a.inbox
    );
    // The gateway stops reading; the session goes on.
    w.stalled.insert(g.group);
    let big = "x".repeat(4096);
    for _ in 0..32 {
        w.host
            .emit_event(w.now, "s1", "session.info", &json!({"message": big}), false)
            .unwrap();
        // The direct client keeps reading.
        w.pump(&mut [&mut direct]);
    }
    let mut closed = Vec::new();
    while let Some(out) = w.host.poll_output() {
        if let Output::Connection(ConnectionOutput::Close { conn, .. }) = out {
            closed.push(conn);
        }
    }
    assert!(
        closed.contains(&g.group) && closed.contains(&a.conn),
        "{closed:?}"
    );
    w.resume_reading(g.group);
    g.pump(&mut w, &mut [&mut a], &mut [&mut direct]);
    let (who, reason, reattach) = g.ended.last().expect("the group's last frame").clone();
    assert_eq!(who, g.group);
    assert!(reason.contains("not reading fast enough"), "{reason}");
    assert!(reattach);
    // The direct client is unaffected.
    w.host
        .emit_event(
            w.now,
            "s1",
            "session.info",
            &json!({"message": "still"}),
            true,
        )
        .unwrap();
    w.pump(&mut [&mut direct]);
    assert!(direct
        .inbox
        .iter()
        .any(|m| m["params"]["event"]["data"]["message"] == "still"));
}

/// A gateway re-attaching a client it relays (`agentwireRelayReattach`) learns whether the
/// session is in a turn (so that it can end a turn whose `session.idle` its client missed);
/// a client's own resume is answered as before.
#[test]
fn a_gateways_reattachment_learns_whether_the_session_is_in_a_turn() {
    use agentwire::host::RELAY_SESSION_BUSY;
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    create(&mut w, &mut a, "busy", json!({"tools": weather_tool()}));
    create(&mut w, &mut a, "quiet", json!({}));
    // The turn waits for `a` to answer its permission prompt.
    w.send_frame(
        &a,
        &json!({"jsonrpc": "2.0", "id": 900, "method": "session.send",
                "params": {"sessionId": "busy", "prompt": "What is the weather in Paris?"}}),
    );
    w.pump(&mut [&mut a]);
    let mut g = w.connect();
    let mut resume = |w: &mut World, session: &str, relay: bool| -> Value {
        let mut params = json!({"sessionId": session, "disableResume": true});
        if relay {
            params["agentwireRelayReattach"] = json!(true);
        }
        let answer = w.call(&mut g, &mut [], "session.resume", params);
        answer["result"].clone()
    };
    assert_eq!(resume(&mut w, "busy", true)[RELAY_SESSION_BUSY], true);
    assert_eq!(resume(&mut w, "quiet", true)[RELAY_SESSION_BUSY], false);
    assert!(resume(&mut w, "busy", false)
        .get(RELAY_SESSION_BUSY)
        .is_none());
}

/// A relay group member's attach answer carries the session's count of streaming deltas
/// (`RELAY_DELTAS_EMITTED`), from which its gateway counts what the client loses with a
/// broken link; an ordinary connection's answer does not.
#[test]
fn a_members_resume_answer_counts_the_sessions_deltas() {
    use agentwire::host::RELAY_DELTAS_EMITTED;
    let mut w = World::new(HostConfig::default());
    let mut a = w.connect();
    create(
        &mut w,
        &mut a,
        "s",
        json!({"streaming": true, "requestPermission": false}),
    );
    w.send_frame(
        &a,
        &json!({"jsonrpc": "2.0", "id": 900, "method": "session.send",
                "params": {"sessionId": "s", "prompt": "hello"}}),
    );
    w.pump(&mut [&mut a]);
    w.run_timers(&mut [&mut a]);
    let deltas = a
        .inbox
        .iter()
        .filter(|m| {
            m["params"]["event"]["type"]
                .as_str()
                .is_some_and(agentwire::is_streaming_delta_type)
        })
        .count() as u64;
    assert!(deltas > 0, "the turn streamed");
    let group = w.host.open(w.now, Framing::ContentLength);
    let mut member = w.connect();
    assert!(w.host.cluster().join_relay_group(member.conn, group));
    w.send_frame(
        &member,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "session.resume",
                "params": {"sessionId": "s", "streaming": true}}),
    );
    w.pump(&mut [&mut member]);
    let mut decoder = FrameDecoder::new(Framing::ContentLength, FrameLimits::default());
    for frame in w.stash.remove(&group).unwrap_or_default() {
        decoder.push(&frame).unwrap();
    }
    let mut answer = None;
    while let Some(body) = decoder.next_frame().unwrap() {
        if let Ok(RelayFrame::To { body, .. }) = RelayFrame::parse(&body) {
            let v: Value = serde_json::from_slice(body).unwrap();
            if v["id"] == 1 {
                answer = Some(v);
            }
        }
    }
    let answer = answer.expect("the member's resume answered in its group");
    assert_eq!(answer["result"][RELAY_DELTAS_EMITTED], json!([deltas, 0]));
    // Where it attached: the last persisted event before its own `session.resume`.
    w.pump(&mut [&mut a]);
    let persisted: Vec<Value> = a
        .events("s")
        .into_iter()
        .filter(|e| e["ephemeral"] != true)
        .collect();
    let resumed_at = persisted
        .iter()
        .rposition(|e| e["type"] == "session.resume")
        .expect("the member's session.resume");
    assert_eq!(
        answer["result"][agentwire::host::RELAY_LAST_EVENT],
        persisted[resumed_at - 1]["id"]
    );
    let plain = w.call(
        &mut a,
        &mut [],
        "session.resume",
        json!({"sessionId": "s", "streaming": true}),
    );
    assert!(plain["result"].get(RELAY_DELTAS_EMITTED).is_none());
    assert!(plain["result"]
        .get(agentwire::host::RELAY_LAST_EVENT)
        .is_none());
}

/// A relaying node replays how its client set up its connection: the Copilot SDK's
/// connection-level registrations, each under `RELAY_HANDSHAKE_ID`, and nothing for a client
/// that made none.
#[test]
fn a_clients_registrations_are_its_connections_set_up_for_the_owner() {
    let mut w = World::new(HostConfig::default().with_seed(1));
    let mut plain = w.connect();
    let mut provider = w.connect();
    assert!(w.host.cluster().relay_handshake(plain.conn).is_empty());
    let fs = w.call(
        &mut provider,
        &mut [],
        "sessionFs.setProvider",
        json!({"initialCwd": "/w"}),
    );
    assert_eq!(fs["result"]["success"], true, "{fs}");
    let http = w.call(
        &mut provider,
        &mut [],
        "llmInference.setProvider",
        json!({}),
    );
    assert_eq!(http["result"]["success"], true, "{http}");
    let setup: Vec<Value> = w
        .host
        .cluster()
        .relay_handshake(provider.conn)
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect();
    let methods: Vec<&str> = setup
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        ["sessionFs.setProvider", "llmInference.setProvider"]
    );
    assert!(setup
        .iter()
        .all(|r| r["id"] == agentwire::host::RELAY_HANDSHAKE_ID));
    // Replayed on another host, they make the connection a provider there too.
    let mut owner = World::new(HostConfig::default().with_seed(2));
    let mut relayed = owner.connect();
    for request in &setup {
        owner.send_frame(&relayed, request);
    }
    owner.pump(&mut [&mut relayed]);
    assert!(relayed
        .inbox
        .iter()
        .all(|m| m["id"] == agentwire::host::RELAY_HANDSHAKE_ID && m["result"].is_object()));
    assert_eq!(owner.host.cluster().relay_handshake(relayed.conn).len(), 2);
    let _ = w.call(&mut plain, &mut [], "ping", json!({}));
    assert!(w.host.cluster().relay_handshake(plain.conn).is_empty());
}

/// A relayed client's `session.sendAndWait` outlives its broken link: the gateway takes the
/// client back on a new member connection with a re-attaching `session.resume` naming the
/// former member and the ids its client waits for, and each is answered there once — with
/// the outcome kept when the turn ended before the re-attachment, at the turn's end when it
/// ended after, and with an error for an id the owner never kept. Whether or not the owner
/// ended the former member first (a link may break on the gateway's side only: the owner's
/// answer to the former member is then lost with it).
#[test]
fn a_relayed_send_and_wait_is_answered_on_the_member_that_replaces_its_broken_link() {
    for (owner_saw_the_break, turn_ends_first) in
        [(true, true), (true, false), (false, true), (false, false)]
    {
        let (mut w, mut g, mut direct, mut a) = relayed_caller_waiting_for_a_tool(&[]);
        // The turn waits for the direct client's tool.
        let asked = direct.event("s1", "external_tool.requested");
        assert!(!a.inbox.iter().any(|m| m["id"] == 2), "still waiting");

        if owner_saw_the_break {
            // The member's link breaks; its connection ends.
            w.host
                .cluster()
                .relay_member_link_broke(w.now, a.conn, "message 9 lost");
            w.host.handle_eof(w.now, a.conn);
            g.pump(&mut w, &mut [&mut a], &mut [&mut direct]);
            assert!(
                !a.inbox.iter().any(|m| m["id"] == 2),
                "not answered 'detached'"
            );
        }

        let answer_tool = |w: &mut World, direct: &mut Peer| {
            w.call(
                direct,
                &mut [],
                "session.tools.handlePendingToolCall",
                json!({"sessionId": "s1", "requestId": asked["data"]["requestId"],
                       "result": "sunny"}),
            );
            w.run_timers(&mut [direct]);
        };
        if turn_ends_first {
            answer_tool(&mut w, &mut direct);
            g.pump(&mut w, &mut [&mut a], &mut [&mut direct]);
        }
        // The gateway's new link: a new member of the group.
        let mut a2 = w.connect();
        assert!(w.host.cluster().join_relay_group(a2.conn, g.group));
        w.send_frame(
            &a2,
            &json!({"jsonrpc":"2.0","id":"agentwire-gateway-reattach-0","method":"session.resume",
                    "params":{"sessionId":"s1","disableResume":true,"agentwireRelayReattach":true,
                              "agentwireFormerMember": a.conn.as_u64(),
                              "agentwireAwaiting": [2, "never-sent"]}}),
        );
        g.pump(&mut w, &mut [&mut a, &mut a2], &mut [&mut direct]);
        if !turn_ends_first {
            assert!(!a2.inbox.iter().any(|m| m["id"] == 2), "its turn runs on");
            answer_tool(&mut w, &mut direct);
            g.pump(&mut w, &mut [&mut a, &mut a2], &mut [&mut direct]);
        }
        if !owner_saw_the_break {
            // The owner ends the former member only now.
            w.host.handle_eof(w.now, a.conn);
            g.pump(&mut w, &mut [&mut a, &mut a2], &mut [&mut direct]);
        }
        let answers: Vec<&Value> = a2.inbox.iter().filter(|m| m["id"] == 2).collect();
        assert_eq!(
            answers.len(),
            1,
            "answered once ({owner_saw_the_break}, {turn_ends_first}): {:?}",
            a2.inbox
        );
        let result = &answers[0]["result"];
        assert_eq!(result["aborted"], false, "{result}");
        assert_eq!(result["response"]["type"], "assistant.message", "{result}");
        assert_eq!(
            result["messageId"],
            direct.event("s1", "user.message")["data"]["messageId"]
        );
        let unknown: Vec<&Value> = a2
            .inbox
            .iter()
            .filter(|m| m["id"] == "never-sent")
            .collect();
        assert_eq!(unknown.len(), 1);
        assert!(unknown[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer knows"));
        // The re-attachment itself was answered.
        assert!(a2
            .inbox
            .iter()
            .any(|m| m["id"] == "agentwire-gateway-reattach-0" && m.get("result").is_some()));
    }
}

/// A relayed connection that detaches from the session itself (`session.detach`) gets the
/// usual answer: its caller left, nothing is kept for it.
#[test]
fn a_relayed_caller_that_detaches_itself_is_answered_at_once() {
    let detach =
        json!({"jsonrpc":"2.0","id":3,"method":"session.detach","params":{"sessionId":"s1"}});
    let (_w, _g, _direct, a) = relayed_caller_waiting_for_a_tool(&[detach]);
    let answer = a.inbox.iter().find(|m| m["id"] == 2).expect("answered");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("detached"));
}

/// A session `s1` whose client `direct` declared the weather tool, and a relay group member
/// `a` that resumed it (request 1) and asked `session.sendAndWait` (request 2) for a turn
/// that now waits for `direct`'s tool; then `a` sent `then`.
fn relayed_caller_waiting_for_a_tool(then: &[Value]) -> (World, Gateway, Peer, Peer) {
    let mut w = World::new(HostConfig::default());
    let mut g = Gateway::new(&mut w);
    let mut direct = w.connect();
    let mut a = w.connect();
    assert!(w.host.cluster().join_relay_group(a.conn, g.group));
    create(
        &mut w,
        &mut direct,
        "s1",
        json!({"tools": unguarded_weather_tool(), "requestPermission": false}),
    );
    let asked = [
        json!({"jsonrpc":"2.0","id":1,"method":"session.resume","params":{"sessionId":"s1"}}),
        json!({"jsonrpc":"2.0","id":2,"method":"session.sendAndWait",
               "params":{"sessionId":"s1","prompt":"What is the weather in Paris?"}}),
    ];
    for body in asked.iter().chain(then) {
        w.send_frame(&a, body);
    }
    w.run_timers(&mut [&mut direct]);
    g.pump(&mut w, &mut [&mut a], &mut [&mut direct]);
    (w, g, direct, a)
}

/// The weather tool, run without a permission prompt.
fn unguarded_weather_tool() -> Value {
    let mut tools = weather_tool();
    tools[0]["skipPermission"] = json!(true);
    tools
}
