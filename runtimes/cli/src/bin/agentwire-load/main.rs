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
//! Exits 1 if a run failed, a client lost a durable event, or the streaming events the clients
//! did not receive differ from the `droppedCount`s of the `events_dropped` warnings they got
//! (a silent drop).

mod client;
mod report;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{watch, Barrier};

use client::{client, ClientCtx};
use report::row;

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
    /// Streaming events not received (deltas and the message's `assistant.message_start`),
    /// summed over clients: what the `events_dropped` warnings must add up to.
    streaming_dropped: u64,
    /// `droppedCount` of the `events_dropped` warnings, summed over clients.
    drops_reported: u64,
}

/// What one client saw.
#[derive(Default)]
struct ClientStats {
    events: u64,
    deltas: u64,
    /// `assistant.message_start` events received (streaming, so droppable like the deltas).
    starts: u64,
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
                    if r.streaming_dropped != r.drops_reported {
                        // A silent drop: some client lost streaming events it was not told of.
                        ok = false;
                        eprintln!(
                            "{rt} K={k} M={m}: {} streaming events dropped but {} reported",
                            r.streaming_dropped, r.drops_reported
                        );
                    }
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
        streaming_dropped: stats
            .iter()
            .map(|s| (m + 1).saturating_sub(s.deltas + s.starts))
            .sum(),
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
