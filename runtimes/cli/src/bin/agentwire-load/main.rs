//! `agentwire-load`: an end-to-end load generator for the `agentwire` server.
//!
//! For each runtime and each client count K it starts the real `agentwire` binary (found
//! next to this executable) on TCP as a separate process, attaches K raw JSON-RPC clients to
//! one session (the first `session.create`s it, the others `session.resume` it, all with
//! `streaming: true`), has client 0 send a prompt that the scripted agent answers with a
//! `stream` step of M deltas, each stamped with the host's input time in nanoseconds, and
//! prints one markdown table row per run: events delivered per second, p50/p99 latency from
//! emit to client receipt (streaming deltas), the server's peak RSS (`VmHWM`), durable events
//! lost (each client's received durable events against `session.getMessages`) and streaming
//! deltas dropped (by design, for clients that read too slowly).
//!
//! Exits 1 if a run failed or a client lost a durable event.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::sync::{watch, Barrier};

/// End-to-end load test: K clients on one session of a real `agentwire` server while the
/// scripted agent streams M deltas.
#[derive(Parser, Debug)]
#[command(name = "agentwire-load")]
struct Args {
    /// Runtimes to test (comma-separated): tokio, smol, async-std.
    #[arg(long, value_delimiter = ',', default_value = "tokio,smol,async-std")]
    runtimes: Vec<String>,

    /// Client counts K to test (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
    clients: Vec<usize>,

    /// Message deltas M the agent streams per run: one value for every K, or one per
    /// `--clients` value (e.g. `200000,50000,10000` for `1,10,100`).
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    deltas: Vec<u64>,

    /// Deltas emitted per batch; the agent yields to the host (a zero-length timer) between
    /// batches, so each batch carries a fresh emit time.
    #[arg(long, default_value_t = 10)]
    batch: u64,

    /// The `agentwire` binary; default: the one next to this executable.
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,

    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,

    /// Worker threads for the clients (1: all clients on one thread, leaving the other
    /// cores to the server).
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
}

/// What one run measured.
struct RunResult {
    runtime: String,
    clients: usize,
    deltas: u64,
    /// `session.event` notifications received by all clients during the turn.
    events: u64,
    /// From sending the prompt to the last client's `session.idle`.
    elapsed: Duration,
    /// Emit-to-receipt latencies of every received delta, in nanoseconds (sorted).
    latencies: Vec<u64>,
    /// Peak resident set of the server process, in KiB (`VmHWM`).
    peak_rss_kib: Option<u64>,
    /// Durable events of the turn (per `session.getMessages`) that some client did not get.
    durable_lost: u64,
    /// Clients that got every durable event of the turn, but not in the log's order.
    durable_mismatch: usize,
    /// Deltas not received, summed over clients.
    deltas_dropped: u64,
    /// `droppedCount` of the `events_dropped` warnings, summed over clients.
    drops_reported: u64,
}

/// What one client saw.
#[derive(Default)]
struct ClientStats {
    events: u64,
    deltas: u64,
    latencies: Vec<u64>,
    drops_reported: u64,
    durable_lost: u64,
    durable_mismatch: bool,
    idle_at: Option<Instant>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let server = match &args.server {
        Some(path) => path.clone(),
        None => match std::env::current_exe() {
            Ok(exe) => exe.with_file_name(format!("agentwire{}", std::env::consts::EXE_SUFFIX)),
            Err(e) => {
                eprintln!("error: cannot locate this executable: {e}");
                return ExitCode::from(2);
            }
        },
    };
    if !server.exists() {
        eprintln!(
            "error: server binary {} not found (build it with `cargo build --release -p agentwire-cli`, or pass --server)",
            server.display()
        );
        return ExitCode::from(2);
    }
    if args.deltas.contains(&0) || args.batch == 0 || args.clients.contains(&0) {
        eprintln!("error: --deltas, --batch and every --clients value must be positive");
        return ExitCode::from(2);
    }
    if args.deltas.len() != 1 && args.deltas.len() != args.clients.len() {
        eprintln!("error: give one --deltas value, or one per --clients value");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(run_all(&args, &server))
}

async fn run_all(args: &Args, server: &Path) -> ExitCode {
    println!(
        "| runtime | K | M | events delivered/s | p50 | p99 | peak RSS | durable lost | streaming dropped |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let _ = std::io::stdout().flush();
    let mut ok = true;
    for rt in &args.runtimes {
        for (i, &k) in args.clients.iter().enumerate() {
            let m = args.deltas.get(i).copied().unwrap_or(args.deltas[0]);
            match run_one(args, server, rt, k, m).await {
                Ok(r) => {
                    ok &= r.durable_lost == 0 && r.durable_mismatch == 0;
                    println!("{}", row(&r));
                }
                Err(e) => {
                    ok = false;
                    println!("| {rt} | {k} | {m} | failed: {e} | | | | | |");
                }
            }
            let _ = std::io::stdout().flush();
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn row(r: &RunResult) -> String {
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let rate = r.events as f64 / secs;
    let rss = match r.peak_rss_kib {
        Some(kib) => format!("{:.1} MiB", kib as f64 / 1024.0),
        None => "n/a".to_owned(),
    };
    let lost = if r.durable_mismatch > 0 {
        format!(
            "{} ({} clients out of order)",
            r.durable_lost, r.durable_mismatch
        )
    } else {
        r.durable_lost.to_string()
    };
    let total = r.deltas * r.clients as u64;
    let dropped = format!(
        "{} of {} ({:.1} %, {} reported)",
        r.deltas_dropped,
        total,
        100.0 * r.deltas_dropped as f64 / total.max(1) as f64,
        r.drops_reported
    );
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        r.runtime,
        r.clients,
        r.deltas,
        human_rate(rate),
        percentile(&r.latencies, 50.0),
        percentile(&r.latencies, 99.0),
        rss,
        lost,
        dropped
    )
}

fn human_rate(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2} M", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.0} k", rate / 1e3)
    } else {
        format!("{rate:.0}")
    }
}

/// The `p`th percentile of sorted nanosecond samples, formatted.
fn percentile(sorted: &[u64], p: f64) -> String {
    if sorted.is_empty() {
        return "n/a".to_owned();
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let ns = sorted[rank.clamp(1, sorted.len()) - 1];
    if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.0} µs", ns as f64 / 1e3)
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Starts the server, returns it with its port.
async fn start_server(
    server: &Path,
    runtime: &str,
    scenario: &Path,
) -> Result<(Child, u16), String> {
    let mut cmd = Command::new(server);
    cmd.args([
        "--runtime",
        runtime,
        "--no-store",
        "--port",
        "0",
        "--scenario",
    ])
    .arg(scenario)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit())
    .kill_on_drop(true);
    if std::env::var_os("RUST_LOG").is_none() {
        cmd.env("RUST_LOG", "error");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", server.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await;
    match read {
        Ok(Ok(_)) => {}
        _ => return Err("the server did not report its port".to_owned()),
    }
    let port = line
        .trim()
        .strip_prefix("listening on port ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("unexpected server output {line:?}"))?;
    Ok((child, port))
}

/// `VmHWM` of a process, in KiB (Linux).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

async fn run_one(
    args: &Args,
    server: &Path,
    runtime: &str,
    k: usize,
    m: u64,
) -> Result<RunResult, String> {
    let dir = std::env::temp_dir().join(format!(
        "agentwire-load-{}-{}",
        std::process::id(),
        now_ns()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("temp dir: {e}"))?;
    let scenario = dir.join("scenario.json");
    let text = json!({"default": [{"stream": m, "text": "{now_ns} ", "batch": args.batch}]});
    std::fs::write(&scenario, text.to_string()).map_err(|e| format!("scenario: {e}"))?;
    let started = start_server(server, runtime, &scenario).await;
    let _ = std::fs::remove_dir_all(&dir);
    let (mut child, port) = started?;
    let pid = child.id();
    let outcome =
        tokio::time::timeout(Duration::from_secs(args.timeout_secs), drive(port, k, m)).await;
    let peak = pid.and_then(peak_rss_kib);
    let _ = child.kill().await;
    let (stats, sent_at) = match outcome {
        Ok(result) => result?,
        Err(_) => return Err(format!("timed out after {} s", args.timeout_secs)),
    };
    let last_idle = stats
        .iter()
        .filter_map(|s| s.idle_at)
        .max()
        .unwrap_or(sent_at);
    let mut latencies: Vec<u64> = Vec::with_capacity(stats.iter().map(|s| s.latencies.len()).sum());
    for s in &stats {
        latencies.extend_from_slice(&s.latencies);
    }
    latencies.sort_unstable();
    Ok(RunResult {
        runtime: runtime.to_owned(),
        clients: k,
        deltas: m,
        events: stats.iter().map(|s| s.events).sum(),
        elapsed: last_idle.duration_since(sent_at),
        latencies,
        peak_rss_kib: peak,
        durable_lost: stats.iter().map(|s| s.durable_lost).sum(),
        durable_mismatch: stats.iter().filter(|s| s.durable_mismatch).count(),
        deltas_dropped: stats.iter().map(|s| m.saturating_sub(s.deltas)).sum(),
        drops_reported: stats.iter().map(|s| s.drops_reported).sum(),
    })
}

/// Runs K clients against the server on `port`; returns their stats and when the prompt went
/// out.
async fn drive(port: u16, k: usize, deltas: u64) -> Result<(Vec<ClientStats>, Instant), String> {
    let nanos = now_ns();
    let session_id = format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (nanos >> 32) as u32,
        (nanos >> 16) as u16,
        (nanos >> 4) as u16 & 0xfff,
        std::process::id() & 0xfff,
        nanos & 0xffff_ffff_ffff
    );
    let prompt = format!("load {session_id}");
    let (created_tx, created_rx) = watch::channel(false);
    let created_tx = Arc::new(created_tx);
    let attached = Arc::new(Barrier::new(k));
    let (sent_tx, mut sent_rx) = watch::channel(None::<Instant>);
    let sent_tx = Arc::new(sent_tx);
    let mut tasks = Vec::with_capacity(k);
    for idx in 0..k {
        let ctx = ClientCtx {
            idx,
            port,
            session_id: session_id.clone(),
            prompt: prompt.clone(),
            deltas,
            created_tx: created_tx.clone(),
            created_rx: created_rx.clone(),
            attached: attached.clone(),
            sent_tx: sent_tx.clone(),
        };
        tasks.push(tokio::spawn(async move {
            client(ctx).await.map_err(|e| format!("client {idx}: {e}"))
        }));
    }
    let mut stats = Vec::with_capacity(k);
    let mut first_error = None;
    for task in tasks {
        match task.await {
            Ok(Ok(s)) => stats.push(s),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(format!("client task: {e}"));
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let sent_at = (*sent_rx.borrow_and_update()).ok_or("the prompt was never sent")?;
    Ok((stats, sent_at))
}

struct ClientCtx {
    idx: usize,
    port: u16,
    session_id: String,
    prompt: String,
    deltas: u64,
    created_tx: Arc<watch::Sender<bool>>,
    created_rx: watch::Receiver<bool>,
    attached: Arc<Barrier>,
    sent_tx: Arc<watch::Sender<Option<Instant>>>,
}

/// A minimal Content-Length framed JSON-RPC connection.
struct Conn {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next_id: u64,
    /// `droppedCount` of the `events_dropped` warnings seen so far.
    drops_reported: u64,
    header: Vec<u8>,
    body: Vec<u8>,
}

impl Conn {
    async fn open(port: u16) -> Result<Conn, String> {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (r, w) = stream.into_split();
        Ok(Conn {
            reader: BufReader::with_capacity(256 * 1024, r),
            writer: w,
            next_id: 0,
            drops_reported: 0,
            header: Vec::new(),
            body: Vec::new(),
        })
    }

    /// Sends a request, returns its id.
    async fn send(&mut self, method: &str, params: Value) -> Result<u64, String> {
        let id = self.next_id;
        self.next_id += 1;
        let body =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let frame = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        self.writer
            .write_all(frame.as_bytes())
            .await
            .map_err(|e| format!("write {method}: {e}"))?;
        Ok(id)
    }

    /// Reads the next frame's body into `self.body`; `false` at end of stream.
    async fn read_frame(&mut self) -> Result<bool, String> {
        let mut length = None;
        loop {
            self.header.clear();
            let n = self
                .reader
                .read_until(b'\n', &mut self.header)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Ok(false);
            }
            let line = std::str::from_utf8(&self.header)
                .map_err(|_| "non-UTF-8 header")?
                .trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse::<usize>().ok();
                }
            }
        }
        let length = length.ok_or("frame without Content-Length")?;
        self.body.resize(length, 0);
        self.reader
            .read_exact(&mut self.body)
            .await
            .map_err(|e| format!("read body: {e}"))?;
        Ok(true)
    }

    /// Sends a request and waits for its result, ignoring notifications meanwhile.
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.send(method, params).await?;
        loop {
            if !self.read_frame().await? {
                return Err(format!("connection closed awaiting {method}"));
            }
            let msg: Value =
                serde_json::from_slice(&self.body).map_err(|e| format!("bad JSON: {e}"))?;
            if msg.get("id").and_then(Value::as_u64) == Some(id) && msg.get("method").is_none() {
                if let Some(error) = msg.get("error") {
                    return Err(format!("{method} failed: {error}"));
                }
                return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
            }
            self.count_drop_warning(&msg);
        }
    }

    /// Adds the `droppedCount` of an `events_dropped` warning (which may also come after
    /// `session.idle`, once the client has caught up).
    fn count_drop_warning(&mut self, msg: &Value) {
        let event = &msg["params"]["event"];
        if msg["method"] == "session.event"
            && event["type"] == "session.warning"
            && event["data"]["warningType"] == "events_dropped"
        {
            self.drops_reported += event["data"]["droppedCount"].as_u64().unwrap_or(0);
        }
    }
}

/// Finds `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The emit time stamped in a delta's content (`"deltaContent":"<nanos> "`), without parsing
/// the whole frame.
fn delta_stamp(body: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"deltaContent\":\"";
    let at = find(body, KEY)? + KEY.len();
    let digits = &body[at..];
    let end = digits.iter().position(|b| !b.is_ascii_digit())?;
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

async fn client(ctx: ClientCtx) -> Result<ClientStats, String> {
    let mut conn = Conn::open(ctx.port).await?;
    conn.call(
        "connect",
        json!({"supportedTaskKinds": ["agent", "client", "shell"]}),
    )
    .await?;
    if ctx.idx == 0 {
        conn.call(
            "session.create",
            json!({"sessionId": ctx.session_id, "streaming": true, "requestPermission": false}),
        )
        .await?;
        ctx.created_tx.send_replace(true);
    } else {
        let mut created = ctx.created_rx.clone();
        created
            .wait_for(|c| *c)
            .await
            .map_err(|_| "the session was never created")?;
        conn.call(
            "session.resume",
            json!({"sessionId": ctx.session_id, "streaming": true, "requestPermission": false,
                   "disableResume": true}),
        )
        .await?;
    }
    ctx.attached.wait().await;

    let mut stats = ClientStats {
        latencies: Vec::with_capacity(ctx.deltas as usize),
        ..ClientStats::default()
    };
    // Durable event ids received since every client attached, in order.
    let mut durable: Vec<String> = Vec::new();
    let mut send_id = None;
    if ctx.idx == 0 {
        ctx.sent_tx.send_replace(Some(Instant::now()));
        send_id = Some(
            conn.send(
                "session.send",
                json!({"sessionId": ctx.session_id, "prompt": ctx.prompt}),
            )
            .await?,
        );
    }
    loop {
        if !conn.read_frame().await? {
            return Err(format!(
                "the server closed the connection before session.idle ({} deltas received)",
                stats.deltas
            ));
        }
        let received = now_ns();
        if find(&conn.body, b"\"type\":\"assistant.message_delta\"").is_some() {
            stats.events += 1;
            stats.deltas += 1;
            if let Some(emitted) = delta_stamp(&conn.body) {
                stats.latencies.push(received.saturating_sub(emitted));
            }
            continue;
        }
        let msg: Value =
            serde_json::from_slice(&conn.body).map_err(|e| format!("bad JSON: {e}"))?;
        if let (Some(id), Some(want)) = (msg.get("id").and_then(Value::as_u64), send_id) {
            if id == want && msg.get("error").is_some() {
                return Err(format!("session.send failed: {}", msg["error"]));
            }
        }
        if msg.get("method").and_then(Value::as_str) != Some("session.event") {
            continue;
        }
        let event = &msg["params"]["event"];
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
        conn.count_drop_warning(&msg);
    }

    // Every durable event of the turn, as the log has it, must have reached this client.
    let result = conn
        .call("session.getMessages", json!({"sessionId": ctx.session_id}))
        .await?;
    let log = result["events"]
        .as_array()
        .ok_or("getMessages: no events")?;
    let (lost, out_of_order) = check_durable(&durable, log, &ctx.prompt)?;
    stats.durable_lost = lost;
    stats.drops_reported = conn.drops_reported;
    stats.durable_mismatch = out_of_order;
    Ok(stats)
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

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<u64> = (1..=100).map(|i| i * 1_000).collect();
        assert_eq!(percentile(&samples, 50.0), "50 µs");
        assert_eq!(percentile(&samples, 99.0), "99 µs");
        assert_eq!(percentile(&[2_500_000], 99.0), "2.5 ms");
        assert_eq!(percentile(&[], 50.0), "n/a");
    }
}
