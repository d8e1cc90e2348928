//! A TCP client that stops reading while another keeps up (issue: slow consumers and bounded
//! memory): the reader that keeps up gets the whole turn, the stalled connection's queue never
//! exceeds the outbox budget, the stalled client is dropped with a reason it receives before
//! the close, and after reconnecting it recovers every durable event through
//! `session.resume` + `session.getMessages`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentwire_testkit::wire::{frame, FrameReader, PROMPT};
use agentwire_tokio::agentwire::agent::Scenario;
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

const BUDGET: usize = 256 * 1024;
const NOTE: usize = 4096;

/// The kernel's largest TCP send buffer: what the server can push past a stalled reader
/// before its own outbox has to hold the rest.
fn tcp_wmem_max() -> usize {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().last().and_then(|m| m.parse().ok()))
        .unwrap_or(4 * 1024 * 1024)
}

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PROMPT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {PROMPT:?}"))
}

/// Accepts one connection on `listener` and hands it to `server`; returns its host id.
async fn accept_into(
    server: &Server,
    listener: &TcpListener,
) -> agentwire_tokio::agentwire::host::ConnId {
    let (stream, _) = within("accept", listener.accept()).await.unwrap();
    let (r, w) = stream.into_split();
    server.attach(r, w).id()
}

async fn request(w: &mut tokio::net::tcp::OwnedWriteHalf, id: u64, method: &str, params: Value) {
    let body = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
    w.write_all(&frame(&body)).await.unwrap();
}

#[tokio::test]
async fn a_stalled_tcp_reader_is_dropped_with_a_reason_and_recovers_every_durable_event() {
    // Enough durable events to overflow the kernel's buffers and the outbox budget several
    // times over.
    let total = 2 * tcp_wmem_max() + 8 * BUDGET;
    let notes = total / NOTE + 1;
    let text = "n".repeat(NOTE);
    // In bursts of 64 KiB with a pause between them, so a reader that keeps up never holds
    // more than a fraction of the budget.
    let mut steps: Vec<Value> = Vec::new();
    for i in 0..notes {
        steps.push(json!({"event": "custom.note", "data": {"i": i, "text": text}}));
        if i % 16 == 15 {
            steps.push(json!({"sleep_ms": 10}));
        }
    }
    steps.push(json!({"say": "done"}));
    let scenario = Scenario::from_json(&json!({ "default": steps }).to_string()).unwrap();
    let server = Server::new(HostConfig::with_scenario(scenario).with_outbox_budget_bytes(BUDGET));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();

    // The fast client creates the session.
    let fast = TcpStream::connect(addr).await.unwrap();
    accept_into(&server, &listener).await;
    let (fast_r, mut fast_w) = fast.into_split();
    let mut fast_r = FrameReader::new(fast_r);
    request(&mut fast_w, 1, "session.create", json!({"sessionId": "s"})).await;
    let created = within("create", fast_r.response(1)).await;
    assert!(created.get("error").is_none(), "{created}");

    // The slow client joins with a tiny receive buffer, then stops reading.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let slow = socket.connect(addr).await.unwrap();
    let slow_id = accept_into(&server, &listener).await;
    let (slow_r, mut slow_w) = slow.into_split();
    let mut slow_r = FrameReader::new(slow_r);
    request(&mut slow_w, 1, "session.resume", json!({"sessionId": "s"})).await;
    let joined = within("resume", slow_r.response(1)).await;
    assert!(joined.get("error").is_none(), "{joined}");

    // The turn: the fast client reads everything while the slow one reads nothing.
    let started = Instant::now();
    request(
        &mut fast_w,
        2,
        "session.send",
        json!({"sessionId": "s", "prompt": "go"}),
    )
    .await;
    let mut durable_seen: Vec<String> = Vec::new();
    let mut max_queued = 0usize;
    loop {
        let message = within("the fast client's events", fast_r.expect()).await;
        if let Some(queued) = server.with_host(|h, _| h.queued_bytes(slow_id)) {
            max_queued = max_queued.max(queued);
        }
        if message["method"] != "session.event" {
            continue;
        }
        let event = &message["params"]["event"];
        if event.get("ephemeral").is_none() {
            durable_seen.push(event["id"].as_str().unwrap().to_owned());
        }
        if event["type"] == "session.idle" {
            break;
        }
    }
    let elapsed = started.elapsed();
    assert!(
        durable_seen.len() > notes,
        "the fast client got the whole turn"
    );
    assert!(
        elapsed < Duration::from_secs(20),
        "the fast client was held up by the stalled one: {elapsed:?}"
    );
    // The stalled connection's queue never held more than the budget (plus the final reason).
    assert!(
        max_queued <= BUDGET + 1024,
        "queued {max_queued} bytes for the stalled reader, budget {BUDGET}"
    );

    // The slow client reads again: what was queued, then the reason, then the close.
    let mut last = None;
    let mut slow_durable = 0usize;
    while let Ok(Some(message)) = within("the slow client's backlog", slow_r.next()).await {
        if message["method"] == "session.event"
            && message["params"]["event"].get("ephemeral").is_none()
        {
            slow_durable += 1;
        }
        last = Some(message);
    }
    let last = last.expect("the slow client got something before the close");
    assert_eq!(last["id"], Value::Null, "{last}");
    let reason = last["error"]["message"].as_str().unwrap_or_default();
    assert!(
        reason.contains("not reading fast enough"),
        "the close comes with its reason: {last}"
    );
    assert!(
        slow_durable < durable_seen.len(),
        "the stalled client really lost events ({slow_durable} of {})",
        durable_seen.len()
    );

    // Reconnect, resume, catch up: every durable event the fast client saw is there.
    let again = TcpStream::connect(addr).await.unwrap();
    accept_into(&server, &listener).await;
    let (again_r, mut again_w) = again.into_split();
    let mut again_r = FrameReader::new(again_r);
    request(&mut again_w, 1, "session.resume", json!({"sessionId": "s"})).await;
    let resumed = within("resume again", again_r.response(1)).await;
    assert!(resumed.get("error").is_none(), "{resumed}");
    request(
        &mut again_w,
        2,
        "session.getMessages",
        json!({"sessionId": "s"}),
    )
    .await;
    let history = within("getMessages", again_r.response(2)).await;
    let ids: BTreeSet<&str> = history["result"]["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    let missing: Vec<&String> = durable_seen
        .iter()
        .filter(|id| !ids.contains(id.as_str()))
        .collect();
    assert!(missing.is_empty(), "durable events lost: {missing:?}");
}
