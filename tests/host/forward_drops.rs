//! A gateway's forwarded connections follow the host's no-silent-drop policy, sans-IO: the
//! owner's streaming deltas relayed to a slow client are dropped rather than closing it, and
//! the loss is reported with an `events_dropped` `session.warning` (made on the gateway)
//! before the next durable event of the session, so before its `session.idle`. Other relayed
//! frames are never dropped; a client closed for a durable frame gets the count in the
//! reason.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use agentwire::host::{ClusterOutput, ConnectionOutput, HostConfig, Output, RelayedEventHead};
use agentwire::Timestamp;
use serde_json::{json, Value};

use crate::support::*;

/// Counts this thread's allocations (the tests run on several threads).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

const SESSION: &str = "remote";

/// Gateway node `b` with a small outbox budget, and its client forwarded to the owner of
/// session [`SESSION`] (the owner already answered its `session.resume`).
fn forwarded_client(budget: usize) -> (World, Peer) {
    let mut b = World::new(
        HostConfig::default()
            .with_seed(7)
            .with_node_id(Some("b".into()))
            .with_lookup_unknown_sessions(true)
            .with_outbox_budget_bytes(budget),
    );
    let mut p = b.connect();
    let resume = p.next_id;
    p.next_id += 1;
    b.send_frame(
        &p,
        &json!({"jsonrpc":"2.0","id":resume,"method":"session.resume",
                "params":{"sessionId":SESSION,"streaming":true}}),
    );
    b.pump(&mut [&mut p]);
    let mut looked_up = false;
    while let Some(output) = b.host.poll_output() {
        looked_up |= matches!(output, Output::Cluster(ClusterOutput::LoadSession { ref session }) if session == SESSION);
    }
    assert!(looked_up, "the unknown session is looked up");
    b.host.cluster().forward_session_lookup(b.now, SESSION);
    assert!(b.host.cluster().is_forwarded(p.conn));
    while b.host.poll_output().is_some() {}
    relay(
        &mut b,
        &p,
        &json!({"jsonrpc":"2.0","id":resume,"result":{"sessionId":SESSION}}),
    );
    b.pump(&mut [&mut p]);
    assert_eq!(p.inbox.len(), 1, "the owner's answer reached the client");
    (b, p)
}

/// The owner's frame `body` for `p` reaches the gateway.
fn relay(b: &mut World, p: &Peer, body: &Value) {
    b.host
        .cluster()
        .deliver_forwarded(b.now, p.conn, SESSION, &serde_json::to_vec(body).unwrap());
}

/// A `session.event` notification as the owner writes it.
fn event(event_type: &str, id: &str, ephemeral: bool, data: Value) -> Value {
    let mut event = json!({"type": event_type, "data": data, "id": id,
                           "timestamp": "2026-11-29T20:26:16.952Z", "parentId": null});
    if ephemeral {
        event["ephemeral"] = json!(true);
    }
    json!({"jsonrpc":"2.0","method":"session.event",
           "params":{"sessionId":SESSION,"event":event}})
}

fn delta(n: usize) -> Value {
    event(
        "assistant.message_delta",
        &format!("delta-{n}"),
        true,
        json!({"messageId":"m1","deltaContent": format!("{n:04} {}", "x".repeat(200))}),
    )
}

fn durable(id: &str) -> Value {
    event(
        "assistant.message",
        id,
        false,
        json!({"messageId":id,"content":"the answer"}),
    )
}

fn idle(id: &str) -> Value {
    event("session.idle", id, true, json!({}))
}

/// The client's `events_dropped` warnings.
fn warnings(p: &Peer) -> Vec<Value> {
    p.events(SESSION)
        .into_iter()
        .filter(|e| e["type"] == "session.warning" && e["data"]["warningType"] == "events_dropped")
        .collect()
}

fn received_deltas(p: &Peer) -> usize {
    p.events(SESSION)
        .iter()
        .filter(|e| e["id"].as_str().is_some_and(|id| id.starts_with("delta-")))
        .count()
}

/// Takes the outputs, returning the connections closed.
fn closed(b: &mut World) -> Vec<agentwire::host::ConnId> {
    std::iter::from_fn(|| b.host.poll_output())
        .filter_map(|o| match o {
            Output::Connection(ConnectionOutput::Close { conn, .. }) => Some(conn),
            _ => None,
        })
        .collect()
}

fn index_of(events: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    events
        .iter()
        .position(pred)
        .expect("the event reached the client")
}

/// A stalled forwarded reader loses deltas, not its connection: each loss is reported before
/// the next durable event of the session (the second before `session.idle`), with the exact
/// count, made on the gateway with a fresh id, `now` and the last persisted event relayed as
/// its parent.
#[test]
fn a_stalled_forwarded_reader_gets_every_drop_reported_before_the_next_durable_event() {
    let (mut b, mut p) = forwarded_client(8 * 1024);
    relay(&mut b, &p, &durable("e1"));
    b.pump(&mut [&mut p]);

    // Streams the deltas `range` to a stalled reader, then `last`; the reader then reads.
    // Returns the events it got and the report among them.
    let phase = |b: &mut World, p: &mut Peer, range: std::ops::Range<usize>, last: &Value| {
        let seen = p.events(SESSION).len();
        b.stalled.insert(p.conn);
        for n in range.clone() {
            relay(b, p, &delta(n));
        }
        let at = b.now;
        relay(b, p, last);
        assert!(closed(b).is_empty(), "the slow reader is not closed");
        b.resume_reading(p.conn);
        b.pump(&mut [p]);
        let events = p.events(SESSION)[seen..].to_vec();
        let w: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "session.warning")
            .collect();
        assert_eq!(w.len(), 1, "one report: {events:?}");
        let report = w[0].clone();
        let count = report["data"]["droppedCount"].as_u64().unwrap() as usize;
        let got = events
            .iter()
            .filter(|e| e["id"].as_str().unwrap().starts_with("delta-"))
            .count();
        assert!(count > 0);
        assert_eq!(count, range.len() - got, "the exact count");
        // The report, then the deltas still queued (nothing dropped after the report: a run
        // ending with the last one sent), then the durable event, last.
        let at_report = index_of(&events, |e| e["id"] == report["id"]);
        assert_eq!(events.last().unwrap()["id"], last["params"]["event"]["id"]);
        let after: Vec<String> = events[at_report + 1..events.len() - 1]
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        let expected: Vec<String> = (range.end - after.len()..range.end)
            .map(|n| format!("delta-{n}"))
            .collect();
        assert_eq!(after, expected);
        assert_eq!(report["timestamp"], at.to_rfc3339());
        (report, count, got)
    };
    let (w1, dropped_1, got_1) = phase(&mut b, &mut p, 0..100, &durable("e2"));
    let (w2, dropped_2, got_2) = phase(&mut b, &mut p, 100..160, &idle("i1"));
    assert_eq!(
        dropped_1 + got_1 + dropped_2 + got_2,
        160,
        "nothing lost silently"
    );
    assert_eq!(received_deltas(&p), got_1 + got_2);
    // The report as the owner would make it.
    for (report, count, parent) in [(&w1, dropped_1, "e1"), (&w2, dropped_2, "e2")] {
        assert_eq!(report["ephemeral"], true);
        assert_eq!(report["parentId"], parent);
        assert_eq!(
            report["data"]["message"],
            format!("{count} streaming events were dropped because this client was not reading fast enough; durable events are complete (session.getMessages)")
        );
        assert_eq!(report["id"].as_str().unwrap().len(), 36, "a fresh UUID");
    }
    assert_ne!(w1["id"], w2["id"]);
    let envelope = p
        .inbox
        .iter()
        .find(|m| m["params"]["event"]["id"] == w1["id"])
        .unwrap();
    assert_eq!(envelope["method"], "session.event");
    assert_eq!(envelope["params"]["sessionId"], SESSION);

    // Still relayed.
    relay(&mut b, &p, &durable("e3"));
    b.pump(&mut [&mut p]);
    assert_eq!(p.events(SESSION).last().unwrap()["id"], "e3");
    assert!(closed(&mut b).is_empty());
}

/// A report before any persisted event was relayed has no parent.
#[test]
fn a_report_before_any_persisted_event_has_a_null_parent() {
    let (mut b, mut p) = forwarded_client(4 * 1024);
    b.stalled.insert(p.conn);
    for n in 0..40 {
        relay(&mut b, &p, &delta(n));
    }
    relay(&mut b, &p, &idle("i1"));
    b.resume_reading(p.conn);
    b.pump(&mut [&mut p]);
    let w = warnings(&p);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0]["parentId"], Value::Null);
    assert_eq!(
        w[0]["data"]["droppedCount"].as_u64().unwrap() as usize,
        40 - received_deltas(&p)
    );
    assert_eq!(p.events(SESSION).last().unwrap()["id"], "i1");
}

/// A forwarded reader that keeps up gets every delta and no warning.
#[test]
fn a_forwarded_reader_that_keeps_up_gets_no_warning() {
    let (mut b, mut p) = forwarded_client(8 * 1024);
    for n in 0..200 {
        relay(&mut b, &p, &delta(n));
        if n % 10 == 9 {
            // Behind the deltas not yet read.
            relay(&mut b, &p, &durable(&format!("e{n}")));
            b.pump(&mut [&mut p]);
        }
    }
    relay(&mut b, &p, &idle("i1"));
    b.pump(&mut [&mut p]);
    assert_eq!(received_deltas(&p), 200);
    assert!(warnings(&p).is_empty());
    assert!(closed(&mut b).is_empty());
}

/// Responses, requests, other notifications, ephemeral events that are not deltas and
/// persisted events of a delta type are never dropped: room for them is made by dropping
/// deltas.
#[test]
fn non_streaming_forwarded_frames_are_never_dropped() {
    let (mut b, mut p) = forwarded_client(16 * 1024);
    b.stalled.insert(p.conn);
    let kinds = [
        json!({"jsonrpc":"2.0","id":7,"result":{"ok":true}}),
        json!({"jsonrpc":"2.0","method":"session.lifecycle",
               "params":{"type":"session.updated","sessionId":SESSION}}),
        json!({"jsonrpc":"2.0","id":1,"method":"tool.call",
               "params":{"sessionId":SESSION,"toolName":"x","arguments":{}}}),
        event("session.info", "info", true, json!({"message":"hi"})),
        event(
            "assistant.message_delta",
            "persisted-delta",
            false,
            json!({"deltaContent":"kept"}),
        ),
    ];
    let mut durable_sent = Vec::new();
    let mut deltas = 0;
    for round in 0..6 {
        for _ in 0..15 {
            relay(&mut b, &p, &delta(deltas));
            deltas += 1;
        }
        for (k, body) in kinds.iter().enumerate() {
            let mut body = body.clone();
            // Tell the frames apart.
            body["tag"] = json!(format!("{round}-{k}"));
            relay(&mut b, &p, &body);
            durable_sent.push(body);
        }
    }
    assert!(closed(&mut b).is_empty());
    b.resume_reading(p.conn);
    b.pump(&mut [&mut p]);
    let got: Vec<&Value> = p.inbox.iter().filter(|m| m.get("tag").is_some()).collect();
    assert_eq!(got.len(), durable_sent.len(), "every non-streaming frame");
    let mut given = Vec::new();
    for (got, sent) in got.iter().zip(&durable_sent) {
        if sent["method"] == "tool.call" {
            // The owner's request is the client's under an id of the connection's own.
            let mut owners = (*got).clone();
            given.push(owners["id"].clone());
            owners["id"] = sent["id"].clone();
            assert_eq!(&owners, sent, "in order, unchanged but for the id");
        } else {
            assert_eq!(*got, sent, "in order, unchanged");
        }
    }
    let distinct: std::collections::HashSet<String> = given.iter().map(Value::to_string).collect();
    assert_eq!(
        distinct.len(),
        given.len(),
        "each request has an id of its own"
    );
    let dropped: u64 = warnings(&p)
        .iter()
        .map(|w| w["data"]["droppedCount"].as_u64().unwrap())
        .sum();
    assert!(dropped > 0, "deltas made the room");
    assert_eq!(dropped as usize, deltas - received_deltas(&p));
}

/// A forwarded client that cannot take a durable frame is closed as a slow consumer, and the
/// reason counts the deltas it lost (dropped, and queued unread).
#[test]
fn a_forwarded_slow_consumer_closed_for_a_durable_frame_gets_the_count() {
    let (mut b, mut p) = forwarded_client(4 * 1024);
    b.stalled.insert(p.conn);
    for n in 0..10 {
        relay(&mut b, &p, &durable(&format!("e{n}")));
    }
    let sent = 30;
    for n in 0..sent {
        relay(&mut b, &p, &delta(n));
    }
    assert!(closed(&mut b).is_empty());
    // Larger than what dropping every delta frees.
    relay(
        &mut b,
        &p,
        &event(
            "assistant.message",
            "big",
            false,
            json!({"content": "y".repeat(3000)}),
        ),
    );
    assert_eq!(closed(&mut b), [p.conn]);
    b.resume_reading(p.conn);
    b.pump(&mut [&mut p]);
    assert_eq!(p.inbox.len(), 2, "the resume answer, then only the reason");
    let reason = p.inbox.last().unwrap();
    assert_eq!(reason["id"], Value::Null);
    assert_eq!(reason["error"]["code"], -32000);
    assert_eq!(reason["error"]["data"]["warningType"], "events_dropped");
    assert_eq!(reason["error"]["data"]["droppedCount"], sent);
}

/// What relaying costs the gateway: one allocation per delta (its frame), kept or dropped,
/// and one per durable event without a loss to report.
#[test]
fn a_relayed_delta_costs_one_allocation() {
    let (mut b, mut p) = forwarded_client(128 * 1024);
    let delta_bodies: Vec<Vec<u8>> = (0..1000)
        .map(|n| serde_json::to_vec(&delta(n)).unwrap())
        .collect();
    let persisted: Vec<Vec<u8>> = (0..250)
        .map(|n| serde_json::to_vec(&durable(&format!("e{n:03}"))).unwrap())
        .collect();
    let now: Timestamp = b.now;
    let relay_all = |b: &mut World, bodies: &[Vec<u8>]| {
        let before = allocations();
        for body in bodies {
            b.host
                .cluster()
                .deliver_forwarded(now, p.conn, SESSION, body);
        }
        allocations() - before
    };
    // Warm up: the queue grows to its size, the session's parent is known.
    relay_all(&mut b, &delta_bodies[..250]);
    b.pump(&mut []);
    relay_all(&mut b, &persisted);
    b.pump(&mut []);
    assert!(closed(&mut b).is_empty());
    b.stash.clear();

    assert_eq!(relay_all(&mut b, &delta_bodies[..200]), 200, "kept deltas");
    b.pump(&mut []);
    b.stash.clear();
    assert_eq!(
        relay_all(&mut b, &persisted[..200]),
        200,
        "durable events, nothing to report"
    );
    b.pump(&mut []);
    b.stash.clear();

    // A stalled reader: once its queue is full, each delta is framed and dropped (or drops
    // an older one).
    b.stalled.insert(p.conn);
    relay_all(&mut b, &delta_bodies[..500]);
    assert!(b.host.poll_ready().is_some());
    assert_eq!(
        relay_all(&mut b, &delta_bodies[500..]),
        500,
        "deltas, dropped"
    );
    assert!(closed(&mut b).is_empty());
    b.resume_reading(p.conn);
    b.pump(&mut [&mut p]);
    assert!(
        warnings(&p).is_empty(),
        "not reported before a durable event"
    );
    relay(&mut b, &p, &idle("i1"));
    b.pump(&mut [&mut p]);
    let dropped = warnings(&p)[0]["data"]["droppedCount"].as_u64().unwrap() as usize;
    assert_eq!(dropped + received_deltas(&p), 1000);
}

/// Deltas the gateway lost with a link that broke for good (`Host::forwarded_deltas_lost`)
/// are reported with those the client dropped itself, in one warning before the next durable
/// event; a reader that kept up otherwise gets exactly the lost count.
#[test]
fn deltas_lost_with_a_broken_link_are_reported_before_the_next_durable_event() {
    let (mut b, mut p) = forwarded_client(64 * 1024);
    relay(&mut b, &p, &durable("e1"));
    relay(&mut b, &p, &delta(0));
    b.pump(&mut [&mut p]);
    b.host
        .cluster()
        .forwarded_deltas_lost(b.now, p.conn, SESSION, 7);
    // Nothing is said until the next durable event of the session.
    b.pump(&mut [&mut p]);
    assert!(warnings(&p).is_empty());
    relay(&mut b, &p, &durable("e2"));
    relay(&mut b, &p, &idle("i1"));
    b.pump(&mut [&mut p]);
    let events = p.events(SESSION);
    let warned = warnings(&p);
    assert_eq!(warned.len(), 1, "{events:?}");
    assert_eq!(warned[0]["data"]["droppedCount"], 7);
    // The warning names the cause: the link, not a slow reader.
    assert_eq!(
        warned[0]["data"]["message"],
        "7 streaming events were dropped with the broken link to the node owning the session; \
         durable events are complete (session.getMessages)"
    );
    assert_eq!(warned[0]["parentId"], "e1");
    let warning = index_of(&events, |e| e["type"] == "session.warning");
    assert!(warning < index_of(&events, |e| e["id"] == "e2"));
    assert!(closed(&mut b).is_empty());
    // Nothing lost: nothing reported.
    b.host
        .cluster()
        .forwarded_deltas_lost(b.now, p.conn, SESSION, 0);
    relay(&mut b, &p, &durable("e3"));
    b.pump(&mut [&mut p]);
    assert_eq!(warnings(&p).len(), 1);
}

/// The frames a gateway's client gets from a mixed relayed stream (a stalled stretch of
/// deltas included), each body handed over by `deliver`.
fn relayed_stream(deliver: impl Fn(&mut World, &Peer, &[u8])) -> Vec<Value> {
    let (mut b, mut p) = forwarded_client(8 * 1024);
    let mut bodies = vec![durable("e1")];
    bodies.extend((0..100).map(delta));
    bodies.push(durable("e2"));
    bodies.extend((100..130).map(delta));
    bodies.push(idle("i1"));
    bodies.push(json!({"jsonrpc": "2.0", "id": 9, "result": {"ok": true}}));
    b.stalled.insert(p.conn);
    for body in &bodies {
        deliver(&mut b, &p, &serde_json::to_vec(body).unwrap());
    }
    b.resume_reading(p.conn);
    b.pump(&mut [&mut p]);
    assert!(!warnings(&p).is_empty(), "the stretch dropped deltas");
    p.inbox
}

#[test]
fn an_event_read_once_for_every_client_is_delivered_as_if_each_read_it() {
    let parsed_each_time = relayed_stream(|b, p, body| {
        b.host
            .cluster()
            .deliver_forwarded(b.now, p.conn, SESSION, body)
    });
    let read_once = relayed_stream(|b, p, body| match RelayedEventHead::parse(body) {
        Some(head) => b
            .host
            .cluster()
            .deliver_forwarded_with_head(b.now, p.conn, body, &head),
        None => b
            .host
            .cluster()
            .deliver_forwarded(b.now, p.conn, SESSION, body),
    });
    assert_eq!(read_once, parsed_each_time);
    // The heads say what the host reads.
    let head = RelayedEventHead::parse(&serde_json::to_vec(&delta(3)).unwrap()).unwrap();
    assert_eq!(head.session, SESSION);
    assert_eq!(head.id, "delta-3");
    assert!(head.ephemeral && !head.sub_agent);
    assert_eq!(head.event_type, "assistant.message_delta");
    let mut sub = delta(4);
    sub["params"]["event"]["agentId"] = json!("agent-1");
    assert!(
        RelayedEventHead::parse(&serde_json::to_vec(&sub).unwrap())
            .unwrap()
            .sub_agent
    );
    assert!(RelayedEventHead::parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).is_none());
}

#[test]
fn a_relayed_delta_whose_head_was_read_costs_one_allocation() {
    let (mut b, mut p) = forwarded_client(128 * 1024);
    let bodies: Vec<(Vec<u8>, RelayedEventHead)> = (0..500)
        .map(|n| {
            let body = serde_json::to_vec(&delta(n)).unwrap();
            let head = RelayedEventHead::parse(&body).unwrap();
            (body, head)
        })
        .collect();
    let now: Timestamp = b.now;
    let relay_all = |b: &mut World, bodies: &[(Vec<u8>, RelayedEventHead)]| {
        let before = allocations();
        for (body, head) in bodies {
            b.host
                .cluster()
                .deliver_forwarded_with_head(now, p.conn, body, head);
        }
        allocations() - before
    };
    relay_all(&mut b, &bodies[..250]);
    b.pump(&mut []);
    b.stash.clear();
    assert_eq!(relay_all(&mut b, &bodies[250..450]), 200);
    b.pump(&mut [&mut p]);
    assert!(closed(&mut b).is_empty());
}
