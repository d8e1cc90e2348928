//! One load client: a JSON-RPC connection through the crate's own peer
//! ([`Endpoint`](agentwire::endpoint::Endpoint)) over TCP, attached to the shared session,
//! counting what it receives.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use agentwire::correlation::Outcome;
use agentwire::endpoint::{
    CloseReason, Endpoint, EndpointConfig, EndpointEvent, IncomingNotification, Role,
};
use agentwire::frame::Framing;
use agentwire::jsonrpc::{ErrorObject, OwnedId};
use agentwire::Timestamp;
use memchr::memmem;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{watch, Barrier, Semaphore};

use crate::progress::Phase;
use crate::{lock, now_ns, ClientStats};

/// The client's requests have no deadline, so the endpoint's clock is never consulted.
const NO_DEADLINES: Timestamp = Timestamp::EPOCH;

/// Bytes read from the socket at once, at most: a connection's buffer starts at
/// [`READ_START`] and doubles whenever a read fills it (10,000 paced clients need little,
/// a saturated one reads big chunks).
const READ_BUFFER: usize = 256 * 1024;

/// The read buffer's first size.
const READ_START: usize = 4 * 1024;

/// What the clients of one session share.
pub(crate) struct SessionCtx {
    pub(crate) session_id: String,
    /// The prompt client 0 sends (unique per session: the durable check looks for it).
    pub(crate) prompt: String,
    /// Set once client 0 created the session, so the others can resume it.
    pub(crate) created_tx: watch::Sender<bool>,
    /// When client 0 sent the prompt.
    pub(crate) sent_at: std::sync::Mutex<Option<Instant>>,
    /// The node (index in [`RunCtx::ports`]) client 0 attaches to; client `i` attaches to
    /// node `home + i` (modulo the node count).
    pub(crate) home: usize,
}

/// What every client of a run shares.
pub(crate) struct RunCtx {
    /// The nodes' ports (one for a single server).
    pub(crate) ports: Vec<u16>,
    pub(crate) deltas: u64,
    /// Every client, and the run's driver, meet here once attached.
    pub(crate) attached: Barrier,
    /// The driver's go (after it read the server's CPU time): the prompts go out.
    pub(crate) go: watch::Sender<bool>,
    /// Every client, and the driver, meet here after `session.idle`.
    pub(crate) idled: Barrier,
    /// Bounds the clients connecting and attaching at once (the listen backlog).
    pub(crate) setup: Semaphore,
}

pub(crate) struct ClientCtx {
    /// Index of the client in its session (0 creates the session and sends the prompt).
    pub(crate) idx: usize,
    pub(crate) session: Arc<SessionCtx>,
    pub(crate) run: Arc<RunCtx>,
    /// Where the client is, for the report of a run that times out.
    pub(crate) progress: Arc<crate::progress::Progress>,
}

/// A Content-Length framed JSON-RPC connection to the server.
pub(crate) struct Conn {
    reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
    endpoint: Endpoint,
    buf: Vec<u8>,
    /// When the last read returned (`now_ns`): the receipt time of what it carried.
    read_at: u64,
    /// `droppedCount` of the `events_dropped` warnings seen so far.
    drops_reported: u64,
}

impl Conn {
    pub(crate) async fn open(port: u16) -> Result<Conn, String> {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (reader, writer) = stream.into_split();
        Ok(Conn {
            reader,
            writer,
            endpoint: Endpoint::new(Role::Client, EndpointConfig::new(Framing::ContentLength)),
            buf: vec![0; READ_START],
            read_at: 0,
            drops_reported: 0,
        })
    }

    /// Sends a request, returns its id.
    async fn send(&mut self, method: &str, params: Value) -> Result<OwnedId, String> {
        let id = self
            .endpoint
            .send_request(NO_DEADLINES, method, &params, None)
            .map_err(|e| format!("send {method}: {e}"))?;
        self.write_out().await?;
        Ok(id)
    }

    /// Writes every frame the endpoint has queued.
    async fn write_out(&mut self) -> Result<(), String> {
        while let Some(frame) = self.endpoint.poll_transmit() {
            self.writer
                .write_all(&frame)
                .await
                .map_err(|e| format!("write: {e}"))?;
        }
        Ok(())
    }

    /// The next message from the server; `None` at a clean end of stream.
    async fn next_event(&mut self) -> Result<Option<EndpointEvent>, String> {
        loop {
            match self.endpoint.poll_event() {
                Some(EndpointEvent::Closed(CloseReason::PeerClosed)) => return Ok(None),
                Some(EndpointEvent::Closed(reason)) => return Err(reason.to_string()),
                Some(event) => return Ok(Some(event)),
                None => {}
            }
            let n = self
                .reader
                .read(&mut self.buf)
                .await
                .map_err(|e| format!("read: {e}"))?;
            self.read_at = now_ns();
            if n == 0 {
                self.endpoint.handle_eof();
                continue;
            }
            self.endpoint.handle_bytes(NO_DEADLINES, &self.buf[..n]);
            if n == self.buf.len() && n < READ_BUFFER {
                self.buf.resize((n * 2).min(READ_BUFFER), 0);
            }
            // Answers the endpoint wrote by itself (rejections of invalid input).
            self.write_out().await?;
        }
    }

    /// Sends a request and waits for its result, counting drop warnings meanwhile.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.send(method, params).await?;
        loop {
            match self.next_event().await? {
                None => return Err(format!("connection closed awaiting {method}")),
                Some(EndpointEvent::Outcome {
                    id: answered,
                    outcome,
                }) if answered == id => {
                    return match outcome {
                        Outcome::Result(raw) => {
                            serde_json::from_str(raw.get()).map_err(|e| format!("bad JSON: {e}"))
                        }
                        Outcome::Error(error) => {
                            Err(format!("{method} failed: {}", error_json(&error)))
                        }
                        Outcome::Closed => Err(format!("connection closed awaiting {method}")),
                        other => Err(format!("{method}: {other:?}")),
                    };
                }
                Some(EndpointEvent::Notification(notification)) => {
                    self.count_drop_warning_in(&notification)
                }
                Some(_) => {}
            }
        }
    }

    fn count_drop_warning_in(&mut self, notification: &IncomingNotification) {
        if notification.method() == "session.event" {
            if let Ok(params) = notification.params::<Value>() {
                self.count_drop_warning(&params);
            }
        }
    }

    /// Adds the `droppedCount` of an `events_dropped` warning (which may also come after
    /// `session.idle`, once the client has caught up); `params` are a `session.event`'s.
    fn count_drop_warning(&mut self, params: &Value) {
        let event = &params["event"];
        if event["type"] == "session.warning" && event["data"]["warningType"] == "events_dropped" {
            self.drops_reported += event["data"]["droppedCount"].as_u64().unwrap_or(0);
        }
    }
}

/// An error object as the JSON the server sent.
fn error_json(error: &ErrorObject) -> String {
    serde_json::to_string(error).unwrap_or_else(|_| error.message.clone())
}

/// A SIMD substring searcher for `needle`, built once (the load generator's own cost per
/// event must stay small next to the server's).
macro_rules! finder {
    ($needle:expr) => {{
        static FINDER: LazyLock<memmem::Finder<'static>> =
            LazyLock::new(|| memmem::Finder::new($needle));
        &*FINDER
    }};
}

/// Whether `body` is an `assistant.message_delta` event.
fn is_delta(body: &[u8]) -> bool {
    finder!(b"\"type\":\"assistant.message_delta\"")
        .find(body)
        .is_some()
}

/// Whether `body` is an `assistant.streaming_delta` event (the model agent's size report).
fn is_size_delta(body: &[u8]) -> bool {
    finder!(b"\"type\":\"assistant.streaming_delta\"")
        .find(body)
        .is_some()
}

/// Whether `body` is an `assistant.message_start` event.
fn is_message_start(body: &[u8]) -> bool {
    finder!(b"\"type\":\"assistant.message_start\"")
        .find(body)
        .is_some()
}

/// The emit time stamped in a delta's content (`"deltaContent":"<nanos> "`), without parsing
/// the whole frame.
fn delta_stamp(body: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"deltaContent\":\"";
    let at = finder!(KEY).find(body)? + KEY.len();
    let digits = &body[at..];
    let end = digits.iter().position(|b| !b.is_ascii_digit())?;
    if end == 0 || end > 19 {
        return None;
    }
    Some(
        digits[..end]
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')),
    )
}

/// Opens a connection and attaches it to `session_id` with streaming on: `session.create`
/// when `create`, else `session.resume` once `created` says the session exists.
pub(crate) async fn attach(
    port: u16,
    session_id: &str,
    create: bool,
    created: &watch::Sender<bool>,
) -> Result<Conn, String> {
    let mut conn = Conn::open(port).await?;
    conn.call(
        "connect",
        json!({"supportedTaskKinds": ["agent", "client", "shell"]}),
    )
    .await?;
    if create {
        conn.call(
            "session.create",
            json!({"sessionId": session_id, "streaming": true, "requestPermission": false}),
        )
        .await?;
        created.send_replace(true);
    } else {
        created
            .subscribe()
            .wait_for(|c| *c)
            .await
            .map_err(|_| "the session was never created")?;
        conn.call(
            "session.resume",
            json!({"sessionId": session_id, "streaming": true, "requestPermission": false,
                   "disableResume": true}),
        )
        .await?;
    }
    Ok(conn)
}

pub(crate) async fn client(ctx: ClientCtx) -> Result<ClientStats, String> {
    let session = &ctx.session;
    let run = &ctx.run;
    if ctx.idx != 0 {
        // Not holding a setup slot meanwhile: the creators need them.
        session
            .created_tx
            .subscribe()
            .wait_for(|c| *c)
            .await
            .map_err(|_| "the session was never created")?;
    }
    let mut conn = {
        let _permit = run
            .setup
            .acquire()
            .await
            .map_err(|_| "setup semaphore closed")?;
        let port = run.ports[(session.home + ctx.idx) % run.ports.len()];
        ctx.progress.at_port(port);
        attach(port, &session.session_id, ctx.idx == 0, &session.created_tx).await?
    };
    ctx.progress.set(Phase::Attached);
    // The prompt's first event may arrive before this client saw the barrier open.
    let mut pending = wait_reading(&mut conn, &run.attached, true).await?;

    let mut stats = ClientStats {
        latencies: Vec::with_capacity(run.deltas as usize),
        ..ClientStats::default()
    };
    // Durable event ids received since every client attached, in order.
    let mut durable: Vec<String> = Vec::new();
    let mut send_id = None;
    if ctx.idx == 0 {
        run.go
            .subscribe()
            .wait_for(|go| *go)
            .await
            .map_err(|_| "the run was never started")?;
        ctx.progress.set(Phase::Streaming);
        *lock(&session.sent_at) = Some(Instant::now());
        send_id = Some(
            conn.send(
                "session.send",
                json!({"sessionId": session.session_id, "prompt": session.prompt}),
            )
            .await?,
        );
    }
    ctx.progress.set(Phase::Streaming);
    loop {
        let (message, received) = match pending.take() {
            Some(first) => first,
            None => match conn.next_event().await? {
                Some(message) => (message, conn.read_at),
                None => {
                    return Err(format!(
                        "the server closed the connection before session.idle ({} deltas received)",
                        stats.deltas
                    ))
                }
            },
        };
        let notification = match message {
            EndpointEvent::Notification(notification) => notification,
            EndpointEvent::Outcome { id, outcome } if Some(&id) == send_id.as_ref() => {
                if let Outcome::Error(error) = outcome {
                    return Err(format!("session.send failed: {}", error_json(&error)));
                }
                continue;
            }
            _ => continue,
        };
        let body = notification.frame();
        if is_delta(body) {
            stats.events += 1;
            stats.deltas += 1;
            ctx.progress.deltas(stats.deltas);
            if let Some(emitted) = delta_stamp(body) {
                stats.latencies.push(received.saturating_sub(emitted));
            }
            continue;
        }
        if is_size_delta(body) {
            stats.events += 1;
            stats.size_deltas += 1;
            continue;
        }
        if is_message_start(body) {
            // Streaming too (droppable, counted in `droppedCount`): one per streamed message.
            stats.starts += 1;
        }
        if notification.method() != "session.event" {
            if notification.method() == "session.lifecycle" {
                stats.lifecycle += 1;
            }
            continue;
        }
        let params: Value = notification
            .params()
            .map_err(|e| format!("bad session.event params: {e}"))?;
        let event = &params["event"];
        stats.events += 1;
        let ty = event["type"].as_str().unwrap_or_default();
        if event["ephemeral"].as_bool() != Some(true) {
            if let Some(id) = event["id"].as_str() {
                durable.push(id.to_owned());
            }
        }
        if ty == "session.idle" {
            stats.idle_at = Some(Instant::now());
            break;
        }
        conn.count_drop_warning(&params);
    }
    ctx.progress.set(Phase::Idle);
    // The driver reads the server's CPU time once every client is idle, before the checks.
    wait_reading(&mut conn, &run.idled, false).await?;
    ctx.progress.set(Phase::Checking);

    // Every durable event of the turn, as the log has it, must have reached this client.
    let result = conn
        .call(
            "session.getMessages",
            json!({"sessionId": session.session_id}),
        )
        .await?;
    let log = result["events"]
        .as_array()
        .ok_or("getMessages: no events")?;
    let (lost, out_of_order) = check_durable(&durable, log, &session.prompt)?;
    stats.durable_lost = lost;
    stats.drops_reported = conn.drops_reported;
    stats.durable_mismatch = out_of_order;
    ctx.progress.set(Phase::Done);
    Ok(stats)
}

/// Waits at `barrier` while reading what the server sends meanwhile, so that nothing piles
/// up unread in the server while the other clients are still attaching or streaming.
/// `session.lifecycle` notifications (other sessions') are skipped and drop reports counted;
/// with `keep_first`, the first other message ends the reading (the barrier is then waited
/// for without it) and is returned with its receipt time, for the caller to handle.
async fn wait_reading(
    conn: &mut Conn,
    barrier: &Barrier,
    keep_first: bool,
) -> Result<Option<(EndpointEvent, u64)>, String> {
    let wait = barrier.wait();
    tokio::pin!(wait);
    loop {
        let event = tokio::select! {
            biased;
            _ = &mut wait => return Ok(None),
            event = conn.next_event() => event?,
        };
        match event {
            None => return Err("the server closed the connection".to_owned()),
            Some(EndpointEvent::Notification(n)) if n.method() == "session.lifecycle" => {}
            Some(event) if keep_first => {
                let received = conn.read_at;
                wait.await;
                return Ok(Some((event, received)));
            }
            Some(EndpointEvent::Notification(n)) => conn.count_drop_warning_in(&n),
            Some(_) => {}
        }
    }
}

/// Compares the durable event ids a client received (in order) with the session's log
/// (`session.getMessages`): every durable event from the prompt's `user.message` on must have
/// arrived. Returns how many are missing and whether, all present, they came out of order.
/// Earlier durable events (such as `session.start` after `session.create`'s answer) are not
/// the turn's and are ignored.
fn check_durable(received: &[String], log: &[Value], prompt: &str) -> Result<(u64, bool), String> {
    let start = log
        .iter()
        .position(|e| e["type"] == "user.message" && e["data"]["content"] == prompt)
        .ok_or("getMessages: the prompt's user.message is missing")?;
    let expected: Vec<&str> = log[start..]
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    let got: HashSet<&str> = received.iter().map(String::as_str).collect();
    let lost = expected.iter().filter(|id| !got.contains(*id)).count() as u64;
    let wanted: HashSet<&str> = expected.iter().copied().collect();
    let out_of_order = lost == 0
        && received
            .iter()
            .map(String::as_str)
            .filter(|id| wanted.contains(id))
            .ne(expected.iter().copied());
    Ok((lost, out_of_order))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> Vec<Value> {
        serde_json::from_str(
            r#"[{"id":"s","type":"session.start","data":{}},
                {"id":"u","type":"user.message","data":{"content":"go"}},
                {"id":"t","type":"assistant.turn_start","data":{}},
                {"id":"m","type":"assistant.message","data":{}},
                {"id":"e","type":"assistant.turn_end","data":{}}]"#,
        )
        .unwrap()
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn durable_check_counts_missing_events_of_the_turn_only() {
        let log = log();
        assert_eq!(
            check_durable(&ids(&["u", "t", "m", "e"]), &log, "go"),
            Ok((0, false))
        );
        // `session.start` before the turn, received late, is not the turn's.
        assert_eq!(
            check_durable(&ids(&["s", "u", "t", "m", "e"]), &log, "go"),
            Ok((0, false))
        );
        assert_eq!(
            check_durable(&ids(&["u", "t", "e"]), &log, "go"),
            Ok((1, false))
        );
        assert_eq!(check_durable(&ids(&[]), &log, "go"), Ok((4, false)));
        assert_eq!(
            check_durable(&ids(&["u", "m", "t", "e"]), &log, "go"),
            Ok((0, true))
        );
        assert!(check_durable(&ids(&["u"]), &log, "other prompt").is_err());
    }

    #[test]
    fn delta_stamp_reads_the_leading_nanoseconds() {
        let body = br#"{"type":"assistant.message_delta","data":{"messageId":"x","deltaContent":"1795983977139000123 "}}"#;
        assert_eq!(delta_stamp(body), Some(1_795_983_977_139_000_123));
        assert_eq!(delta_stamp(br#"{"deltaContent":"hello "}"#), None);
    }
}
