//! `agentwire-load`: an end-to-end load generator for the `agentwire` server.
//!
//! For each runtime and each client count K it starts the real `agentwire` binary (found
//! next to this executable) on TCP as a separate process, attaches K raw JSON-RPC clients to
//! each of S sessions (`--sessions`, default 1; per session the first client
//! `session.create`s it, the others `session.resume` it, all with `streaming: true`), has the
//! first client of every session send a prompt that the scripted agent answers with a
//! `stream` step of M deltas, each stamped with the host's input time in nanoseconds, and
//! prints one markdown table row per run: events delivered per second, p50/p99/p99.9 latency
//! from emit to client receipt (streaming deltas), the server's CPU time per delivered event,
//! its peak RSS (`VmHWM`), durable events lost (each client's received durable events against
//! `session.getMessages`) and streaming deltas dropped (by design, for clients that read too
//! slowly).
//!
//! Saturated by default (the agent emits as fast as the host lets it); with `--rate R` every
//! session's stream is paced at R deltas per second by a timer of the core (a model's pace).
//! With `--model-deltas M` every K also gets a second run whose deltas come from a model: the
//! server is pointed (`--model-base-url`) at a fake OpenAI-compatible endpoint of this process
//! that streams M `chat.completion.chunk` deltas per response, each stamped with the time the
//! endpoint wrote it, so the latency covers the whole model path (HTTP, SSE decoding, chunk
//! parsing, the model agent) as well as the fan-out.
//! With `--idle N` it measures memory instead: the server's RSS with N idle attached
//! connections minus its RSS with none.
//! With `--floor K` there is no agentwire at all: a child process writes one 100-byte frame
//! per round to K loopback sockets from one thread with plain non-blocking writes, and the
//! clients stamp receipt, which gives the kernel path's own latency for that fan-out.
//!
//! Exits 1 if a run failed, a client lost a durable event, or the streaming events the clients
//! did not receive differ from the `droppedCount`s of the `events_dropped` warnings they got
//! (a silent drop).

mod ahp_client;
mod client;
mod cluster;
mod fake_model;
#[path = "../../fd_limit.rs"]
mod fd_limit;
mod floor;
mod idle;
mod procfs;
mod progress;
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
use tokio::sync::{watch, Barrier, Semaphore};

use client::{client, ClientCtx, RunCtx, SessionCtx};
use report::row;

/// End-to-end load test: K clients on each of S sessions of a real `agentwire` server while
/// the scripted agent streams M deltas per session, saturated or paced (`--rate`).
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

    /// Deltas emitted per batch; the agent yields to the host (a zero-length timer, or the
    /// next paced slot with `--rate`) between batches, so each batch carries a fresh emit
    /// time [default: 10, or 1 with --rate].
    #[arg(long)]
    batch: Option<u64>,

    /// Paced mode: every session streams R deltas per second (batches due at fixed intervals
    /// on the core's timer); default: as fast as the host lets the agent emit.
    #[arg(long, value_name = "R")]
    rate: Option<f64>,

    /// Also stream from a fake model endpoint: after each scripted run, a run whose M deltas
    /// (one value for every K, or one per `--clients` value) are a model's streamed
    /// `chat.completion.chunk`s (saturated; `--batch` chunks per write of the endpoint).
    #[arg(long, value_delimiter = ',', value_name = "M")]
    model_deltas: Vec<u64>,

    /// Sessions S, each with K clients (`--clients`) and its own stream of M deltas.
    #[arg(long, default_value_t = 1, value_name = "S")]
    sessions: usize,

    /// Memory mode: measure the server's RSS with N idle attached connections (one session)
    /// minus its RSS with none, per connection, instead of streaming.
    #[arg(long, value_name = "N")]
    idle: Option<usize>,

    /// Floor mode: no agentwire; a child process writes one 100-byte frame to K loopback
    /// sockets per round from one thread with plain non-blocking writes (M rounds at
    /// `--rate`, default 10/s), and the clients stamp receipt: the kernel path's latency.
    #[arg(long, value_name = "K")]
    floor: Option<usize>,

    /// The floor mode's writer (internal: started by `--floor`).
    #[arg(long, value_name = "K", hide = true)]
    floor_serve: Option<usize>,

    /// Clients connecting and attaching at once during setup.
    #[arg(long, default_value_t = 256)]
    setup_concurrency: usize,

    /// The `agentwire` binary; default: the one next to this executable.
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,

    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,

    /// Also run every K across N `agentwire --cluster` nodes on a nats-server of this run
    /// (`$AGENTWIRE_NATS_SERVER` or `target/nats/nats-server`, which `scripts/install-test-servers`
    /// installs): each session owned by one
    /// node, its clients spread over all of them (the others relayed by their gateway node);
    /// a row beside the single-node tokio row (scripted agent only).
    #[arg(long, value_name = "N")]
    cluster_nodes: Option<usize>,

    /// With `--cluster-nodes`: the run's NATS is a JetStream cluster of this many servers
    /// (routes on loopback), the log stream and the lease bucket replicated on all of them
    /// (`--cluster-replicas N`), each agentwire node connected to its own server first. 1
    /// (the default): one server, R1.
    #[arg(long, value_name = "N", default_value_t = 1)]
    nats_servers: usize,

    /// Also run every K (scripted agent) with AHP clients: the server's `--ahp-port`
    /// listener, the K clients of each session on WebSocket, subscribed to its chat (the first
    /// creates it and starts the turn); a row beside the Copilot SDK protocol's.
    #[arg(long)]
    ahp: bool,

    /// Worker threads for the clients (1: all clients on one thread, leaving the other
    /// cores to the server).
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
}

/// Where a run's deltas come from (and, for AHP, who receives them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// The scripted agent's `stream` step.
    Scripted,
    /// The scripted agent's `stream` step, to AHP clients over WebSocket (`--ahp`).
    Ahp,
    /// A fake model endpoint, through the model agent.
    Model,
}

/// What one run measured.
struct RunResult {
    runtime: String,
    source: Source,
    sessions: usize,
    clients: usize,
    deltas: u64,
    /// Deltas per second per session (paced mode).
    rate: Option<f64>,
    /// `session.event` notifications received by all clients during the turn.
    events: u64,
    /// From sending the prompt to the last client's `session.idle`.
    elapsed: Duration,
    /// Emit-to-receipt latencies of every received delta, in nanoseconds (sorted).
    latencies: Vec<u64>,
    /// Peak resident set of the server process, in KiB (`VmHWM`).
    peak_rss_kib: Option<u64>,
    /// CPU time (user + system) the server used from the prompts to the last `session.idle`.
    server_cpu_secs: Option<f64>,
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
    /// `session.lifecycle` notifications the clients received during the turn.
    lifecycle: u64,
}

/// What one client saw.
#[derive(Default)]
struct ClientStats {
    events: u64,
    deltas: u64,
    /// `assistant.message_start` events received (streaming, so droppable like the deltas).
    starts: u64,
    /// `assistant.streaming_delta` events received (the model agent's size report, one per
    /// delta; streaming too).
    size_deltas: u64,
    /// `session.lifecycle` notifications received during the turn (not counted in `events`).
    lifecycle: u64,
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
    if args.deltas.contains(&0)
        || args.model_deltas.contains(&0)
        || args.batch == Some(0)
        || args.clients.contains(&0)
        || args.sessions == 0
        || args.idle == Some(0)
        || args.floor == Some(0)
        || args.setup_concurrency == 0
    {
        eprintln!(
            "error: --deltas, --batch, --sessions, --idle, --setup-concurrency and every --clients value must be positive"
        );
        return ExitCode::from(2);
    }
    if !matches!(args.nats_servers, 1 | 3 | 5) {
        eprintln!("error: --nats-servers must be 1, 3 or 5 (a JetStream cluster needs a quorum)");
        return ExitCode::from(2);
    }
    if args.cluster_nodes.is_some_and(|n| n < 2)
        || (args.cluster_nodes.is_some() && !args.runtimes.iter().any(|r| r == "tokio"))
    {
        eprintln!("error: --cluster-nodes needs at least 2 nodes and tokio in --runtimes");
        return ExitCode::from(2);
    }
    if args.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        eprintln!("error: --rate must be a positive number of deltas per second");
        return ExitCode::from(2);
    }
    // Thousands of connections need as many file descriptors (the server raises its own).
    if let Some(Err(e)) = fd_limit::raise_to_hard_limit() {
        eprintln!("warning: cannot raise the open-file limit: {e}");
    }
    if args.deltas.len() != 1 && args.deltas.len() != args.clients.len() {
        eprintln!("error: give one --deltas value, or one per --clients value");
        return ExitCode::from(2);
    }
    if args.model_deltas.len() > 1 && args.model_deltas.len() != args.clients.len() {
        eprintln!("error: give one --model-deltas value, or one per --clients value");
        return ExitCode::from(2);
    }
    if !args.model_deltas.is_empty() && args.rate.is_some() {
        eprintln!("error: --model-deltas runs are saturated (not with --rate)");
        return ExitCode::from(2);
    }
    if let Some(k) = args.floor_serve {
        return floor::serve(k, args.deltas[0], args.rate.unwrap_or(10.0));
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
    match (args.idle, args.floor) {
        (_, Some(k)) => runtime.block_on(floor::run(&args, k)),
        (Some(n), None) => runtime.block_on(idle::run_all(&args, &server, n)),
        (None, None) => runtime.block_on(run_all(&args, &server)),
    }
}

async fn run_all(args: &Args, server: &Path) -> ExitCode {
    println!("{}", report::HEADER);
    println!("{}", report::SEPARATOR);
    let _ = std::io::stdout().flush();
    let mut ok = true;
    for rt in &args.runtimes {
        for (i, &k) in args.clients.iter().enumerate() {
            let scripted = args.deltas.get(i).copied().unwrap_or(args.deltas[0]);
            let mut runs = vec![(Source::Scripted, scripted, None)];
            if args.ahp {
                runs.push((Source::Ahp, scripted, None));
            }
            if let Some(nodes) = args.cluster_nodes.filter(|_| rt == "tokio") {
                runs.push((Source::Scripted, scripted, Some(nodes)));
            }
            if let Some(&first) = args.model_deltas.first() {
                runs.push((
                    Source::Model,
                    args.model_deltas.get(i).copied().unwrap_or(first),
                    None,
                ));
            }
            for (source, m, nodes) in runs {
                let outcome = match nodes {
                    None => run_one(args, server, rt, k, m, source).await,
                    Some(n) => cluster::run_cluster(args, server, n, k, m).await,
                };
                let rt = match nodes {
                    None => rt.clone(),
                    Some(n) if args.nats_servers > 1 => {
                        format!("{rt}, {n} nodes, R{}", args.nats_servers)
                    }
                    Some(n) => format!("{rt}, {n} nodes"),
                };
                match outcome {
                    Ok(r) => {
                        ok &= r.durable_lost == 0 && r.durable_mismatch == 0;
                        if r.streaming_dropped != r.drops_reported {
                            // A silent drop: some client lost streaming events it was not told of.
                            ok = false;
                            eprintln!(
                            "{rt} S={} K={k} M={m}: {} streaming events dropped but {} reported",
                            args.sessions, r.streaming_dropped, r.drops_reported
                        );
                        }
                        println!("{}", row(&r));
                        if r.lifecycle > 0 {
                            eprintln!(
                            "{rt} S={} K={k} M={m}: the clients also received {} session.lifecycle notifications during the turn",
                            args.sessions, r.lifecycle
                        );
                        }
                    }
                    Err(e) => {
                        ok = false;
                        println!("{}", report::failed_row(&rt, args, k, m, source, &e));
                    }
                }
                let _ = std::io::stdout().flush();
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

pub(crate) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Locks a mutex, ignoring poisoning (a panicked client task fails its run anyway).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The ports a started server announced.
pub(crate) struct Ports {
    /// The main (Copilot SDK protocol) listener.
    pub(crate) main: u16,
    /// The AHP listener, when `--ahp-port` was among the arguments.
    pub(crate) ahp: Option<u16>,
}

/// Starts the server (with `extra` arguments), returns it with the ports it announced.
pub(crate) async fn start_listening(
    server: &Path,
    runtime: &str,
    scenario: &Path,
    extra: &[String],
) -> Result<(Child, Ports), String> {
    let mut cmd = Command::new(server);
    cmd.args(["--runtime", runtime, "--port", "0", "--scenario"])
        .arg(scenario);
    // A cluster node keeps its sessions in JetStream; a single server keeps none.
    if !extra.iter().any(|a| a == "--cluster") {
        cmd.arg("--no-store");
    }
    cmd.args(extra)
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
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    // A cluster node reports its port once its NATS is ready (a JetStream cluster that just
    // started elects its leaders first; the node waits up to 30 s for them).
    let read = tokio::time::timeout(Duration::from_secs(40), stdout.read_line(&mut line)).await;
    match read {
        Ok(Ok(_)) => {}
        _ => return Err("the server did not report its port".to_owned()),
    }
    let port = line
        .trim()
        .strip_prefix("listening on port ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("unexpected server output {line:?}"))?;
    let mut ahp = None;
    if extra.iter().any(|a| a == "--ahp-port") {
        let mut line = String::new();
        let read = tokio::time::timeout(Duration::from_secs(10), stdout.read_line(&mut line)).await;
        if !matches!(read, Ok(Ok(_))) {
            return Err("the server did not report its AHP port".to_owned());
        }
        ahp = Some(
            line.trim()
                .strip_prefix("ahp: listening on port ")
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("unexpected server output {line:?}"))?,
        );
    }
    Ok((child, Ports { main: port, ahp }))
}

/// Starts the server with a scenario file holding `scenario` (and `extra` arguments).
pub(crate) async fn start_with_scenario(
    server: &Path,
    runtime: &str,
    scenario: &serde_json::Value,
    extra: &[String],
) -> Result<(Child, u16), String> {
    let (child, ports) = start_with_scenario_listening(server, runtime, scenario, extra).await?;
    Ok((child, ports.main))
}

/// [`start_with_scenario`], returning every port the server announced.
pub(crate) async fn start_with_scenario_listening(
    server: &Path,
    runtime: &str,
    scenario: &serde_json::Value,
    extra: &[String],
) -> Result<(Child, Ports), String> {
    let dir = std::env::temp_dir().join(format!(
        "agentwire-load-{}-{}",
        std::process::id(),
        now_ns()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("temp dir: {e}"))?;
    let path = dir.join("scenario.json");
    std::fs::write(&path, scenario.to_string()).map_err(|e| format!("scenario: {e}"))?;
    let started = start_listening(server, runtime, &path, extra).await;
    let _ = std::fs::remove_dir_all(&dir);
    started
}

/// The scenario of a run: one `stream` step of `m` deltas stamped with the emit time, in
/// batches, paced with `--rate`.
pub(crate) fn stream_scenario(args: &Args, m: u64) -> serde_json::Value {
    let batch = args
        .batch
        .unwrap_or(if args.rate.is_some() { 1 } else { 10 });
    let mut step = json!({"stream": m, "text": "{now_ns} ", "batch": batch});
    if let Some(rate) = args.rate {
        // `batch` deltas every `batch / rate` seconds.
        let interval_us = ((batch as f64 * 1e6 / rate).round() as u64).max(1);
        step["interval_us"] = json!(interval_us);
    }
    json!({"default": [step]})
}

/// A session id unique to this process and moment (UUID-shaped, as the SDKs make them).
pub(crate) fn new_session_id(n: usize) -> String {
    let nanos = now_ns();
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (nanos >> 32) as u32,
        (nanos >> 16) as u16,
        n & 0xfff,
        std::process::id() & 0xfff,
        (nanos & 0xffff_ffff) << 16 | (n as u64 >> 12 & 0xffff)
    )
}

async fn run_one(
    args: &Args,
    server: &Path,
    runtime: &str,
    k: usize,
    m: u64,
    source: Source,
) -> Result<RunResult, String> {
    let mut extra = Vec::new();
    if source == Source::Model {
        let model = fake_model::FakeModel::start(m, args.batch.unwrap_or(10))?;
        extra = [
            "--model-base-url",
            &model.base_url,
            "--model",
            "fake-model",
            "--no-builtin-tools",
        ]
        .map(str::to_owned)
        .to_vec();
    }
    if source == Source::Ahp {
        extra = ["--ahp-port", "0"].map(str::to_owned).to_vec();
    }
    let (mut child, ports) =
        start_with_scenario_listening(server, runtime, &stream_scenario(args, m), &extra).await?;
    let port = match source {
        Source::Ahp => ports.ahp.ok_or("the server has no AHP listener")?,
        _ => ports.main,
    };
    let pid = child.id();
    let tracker = progress::Tracker::default();
    let outcome = tokio::time::timeout(
        Duration::from_secs(args.timeout_secs),
        drive(
            args,
            vec![port],
            vec![pid],
            k,
            m,
            &tracker,
            source == Source::Ahp,
        ),
    )
    .await;
    let peak = pid.and_then(procfs::peak_rss_kib);
    let _ = child.kill().await;
    let driven = match outcome {
        Ok(result) => result?,
        Err(_) => {
            return Err(format!(
                "timed out after {} s ({})",
                args.timeout_secs,
                tracker.summary()
            ))
        }
    };
    Ok(result(
        runtime.to_owned(),
        source,
        args,
        k,
        m,
        &driven,
        peak,
    ))
}

/// The measurements of a driven run (`peak`: the server's peak RSS).
pub(crate) fn result(
    runtime: String,
    source: Source,
    args: &Args,
    k: usize,
    m: u64,
    driven: &Driven,
    peak: Option<u64>,
) -> RunResult {
    let stats = &driven.stats;
    let last_idle = stats
        .iter()
        .filter_map(|s| s.idle_at)
        .max()
        .unwrap_or(driven.sent_at);
    let mut latencies: Vec<u64> = Vec::with_capacity(stats.iter().map(|s| s.latencies.len()).sum());
    for s in stats {
        latencies.extend_from_slice(&s.latencies);
    }
    latencies.sort_unstable();
    // Streaming events per client: the message's `assistant.message_start`, each delta, and
    // with a model one `assistant.streaming_delta` per delta.
    let streaming_per_client = m + 1 + if source == Source::Model { m } else { 0 };
    RunResult {
        runtime,
        source,
        sessions: args.sessions,
        clients: k,
        deltas: m,
        rate: args.rate,
        events: stats.iter().map(|s| s.events).sum(),
        elapsed: last_idle.duration_since(driven.sent_at),
        latencies,
        peak_rss_kib: peak,
        server_cpu_secs: driven.server_cpu_secs,
        durable_lost: stats.iter().map(|s| s.durable_lost).sum(),
        durable_mismatch: stats.iter().filter(|s| s.durable_mismatch).count(),
        deltas_dropped: stats.iter().map(|s| m.saturating_sub(s.deltas)).sum(),
        streaming_dropped: stats
            .iter()
            .map(|s| streaming_per_client.saturating_sub(s.deltas + s.starts + s.size_deltas))
            .sum(),
        drops_reported: stats.iter().map(|s| s.drops_reported).sum(),
        lifecycle: stats.iter().map(|s| s.lifecycle).sum(),
    }
}

/// What [`drive`] measured.
pub(crate) struct Driven {
    stats: Vec<ClientStats>,
    /// When the first prompt went out.
    sent_at: Instant,
    server_cpu_secs: Option<f64>,
}

/// Runs S sessions of K clients (AHP clients with `ahp`) against the server on `port`
/// (process `pid`): returns their
/// stats, when the first prompt went out and the server's CPU time from then to the last
/// client's `session.idle`.
pub(crate) async fn drive(
    args: &Args,
    ports: Vec<u16>,
    pids: Vec<Option<u32>>,
    k: usize,
    deltas: u64,
    tracker: &progress::Tracker,
    ahp: bool,
) -> Result<Driven, String> {
    let total = args.sessions * k;
    let run = Arc::new(RunCtx {
        ports,
        deltas,
        attached: Barrier::new(total + 1),
        go: watch::channel(false).0,
        idled: Barrier::new(total + 1),
        setup: Semaphore::new(args.setup_concurrency),
    });
    let sessions: Vec<Arc<SessionCtx>> = (0..args.sessions)
        .map(|n| {
            let session_id = new_session_id(n);
            Arc::new(SessionCtx {
                home: n,
                prompt: format!("load {session_id}"),
                session_id,
                created_tx: watch::channel(false).0,
                sent_at: std::sync::Mutex::new(None),
            })
        })
        .collect();
    let mut tasks = Vec::with_capacity(total);
    // Every session's creator first, so the others find their session when they attach.
    for idx in 0..k {
        for session in &sessions {
            let ctx = ClientCtx {
                idx,
                session: session.clone(),
                run: run.clone(),
                progress: tracker.client(),
            };
            let ahp_port = ahp.then(|| run.ports[0]);
            tasks.push(tokio::spawn(async move {
                let stats = match ahp_port {
                    Some(port) => ahp_client::ahp_client(ctx, port).await,
                    None => client(ctx).await,
                };
                stats.map_err(|e| format!("client {idx}: {e}"))
            }));
        }
    }
    let driver = {
        let run = run.clone();
        async move {
            // The CPU time of every server process (all nodes of a cluster run).
            let cpu = || -> Option<f64> {
                pids.iter()
                    .map(|pid| pid.and_then(procfs::cpu_seconds))
                    .sum()
            };
            run.attached.wait().await;
            let cpu_before = cpu();
            run.go.send_replace(true);
            run.idled.wait().await;
            let cpu_after = cpu();
            cpu_before.zip(cpu_after).map(|(a, b)| b - a)
        }
    };
    let driver = tokio::spawn(driver);
    let mut stats = Vec::with_capacity(total);
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
        driver.abort();
        return Err(e);
    }
    let server_cpu_secs = driver.await.map_err(|e| format!("driver task: {e}"))?;
    let sent_at = sessions
        .iter()
        .filter_map(|s| *lock(&s.sent_at))
        .min()
        .ok_or("the prompt was never sent")?;
    Ok(Driven {
        stats,
        sent_at,
        server_cpu_secs,
    })
}
