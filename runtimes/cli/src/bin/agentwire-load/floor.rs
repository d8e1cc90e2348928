//! `--floor K`: what the kernel's loopback TCP path costs at all, with no agentwire in it.
//!
//! A child process (this executable again, with the hidden `--floor-serve K`) listens on
//! loopback, accepts K connections and, M times (`--deltas`, paced at `--rate`, default 10
//! per second), takes the time once and writes one 100-byte frame carrying it to all K
//! sockets, one after the other, from one thread, with plain non-blocking `write` calls (as
//! a fan-out of one delta to K clients must do at least). This process connects the K
//! clients, reads them on `--client-threads` tokio threads as the load clients do, and
//! stamps each frame when its `read` returns. The p50 / p99 / p99.9 of receipt minus write
//! time is the floor under agentwire's emit-to-receipt figure for the same K and pace.

use std::io::{BufRead, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use crate::{lock, now_ns, procfs, report, Args};

/// The frame's size on the wire.
const FRAME: usize = 100;

/// The pace when `--rate` is not given.
const DEFAULT_RATE: f64 = 10.0;

/// The frame of round `round` written at `t_ns`: both as decimal digits, padded to
/// [`FRAME`] bytes with a newline at the end.
fn frame(t_ns: u64) -> [u8; FRAME] {
    let mut out = [b' '; FRAME];
    let text = format!("{t_ns:020}");
    out[..20].copy_from_slice(text.as_bytes());
    out[FRAME - 1] = b'\n';
    out
}

/// The child: accept K connections, then write M rounds; print the CPU it used writing.
pub(crate) fn serve(k: usize, rounds: u64, rate: f64) -> ExitCode {
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => {
            eprintln!("floor: bind: {e}");
            return ExitCode::from(2);
        }
    };
    let Ok(addr) = listener.local_addr() else {
        return ExitCode::from(2);
    };
    println!("PORT {}", addr.port());
    let _ = std::io::stdout().flush();
    let mut socks = Vec::with_capacity(k);
    while socks.len() < k {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nodelay(true);
                if s.set_nonblocking(true).is_err() {
                    return ExitCode::from(2);
                }
                socks.push(s);
            }
            Err(e) => {
                eprintln!("floor: accept: {e}");
                return ExitCode::from(2);
            }
        }
    }
    // Let the readers settle on their sockets.
    std::thread::sleep(Duration::from_millis(500));
    let cpu_before = procfs::cpu_seconds(std::process::id());
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now();
    let mut would_block = 0u64;
    for round in 0..rounds {
        let due = start + interval * round as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let bytes = frame(now_ns());
        for s in &mut socks {
            let mut off = 0;
            while off < FRAME {
                match s.write(&bytes[off..]) {
                    Ok(n) => off += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        would_block += 1;
                        std::thread::yield_now();
                    }
                    Err(e) => {
                        eprintln!("floor: write: {e}");
                        return ExitCode::from(1);
                    }
                }
            }
        }
    }
    let cpu = match (cpu_before, procfs::cpu_seconds(std::process::id())) {
        (Some(a), Some(b)) => b - a,
        _ => f64::NAN,
    };
    println!("CPU {cpu} WOULDBLOCK {would_block}");
    let _ = std::io::stdout().flush();
    // Wait for the parent to read everything (it closes our stdin when done).
    let mut sink = [0u8; 1];
    let _ = std::io::stdin().read(&mut sink);
    ExitCode::SUCCESS
}

/// The parent: start the writer, connect and read, report.
pub(crate) async fn run(args: &Args, k: usize) -> ExitCode {
    let rounds = args.deltas[0];
    let rate = args.rate.unwrap_or(DEFAULT_RATE);
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("error: cannot locate this executable: {e}");
            return ExitCode::from(2);
        }
    };
    match run_inner(&exe, k, rounds, rate, args.timeout_secs).await {
        Ok(line) => {
            println!("| K | M | rate | p50 | p99 | p99.9 | writer CPU per write | writes that would block |");
            println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("floor K={k}: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run_inner(
    exe: &Path,
    k: usize,
    rounds: u64,
    rate: f64,
    timeout_secs: u64,
) -> Result<String, String> {
    let mut child = std::process::Command::new(exe)
        .args([
            "--floor-serve",
            &k.to_string(),
            "--deltas",
            &rounds.to_string(),
            "--rate",
            &rate.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = std::io::BufReader::new(stdout).lines();
    let port: u16 = lines
        .next()
        .and_then(Result::ok)
        .and_then(|l| l.strip_prefix("PORT ").and_then(|p| p.parse().ok()))
        .ok_or("the writer printed no port")?;
    let latencies = Arc::new(std::sync::Mutex::new(Vec::with_capacity(
        k * rounds as usize,
    )));
    let mut tasks = Vec::with_capacity(k);
    for _ in 0..k {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let latencies = latencies.clone();
        tasks.push(tokio::spawn(async move {
            let mut stream = stream;
            let mut buf = vec![0u8; 4096];
            let mut have = 0usize;
            let mut got = 0u64;
            let mut mine = Vec::with_capacity(rounds as usize);
            while got < rounds {
                let n = match stream.read(&mut buf[have..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let at = now_ns();
                have += n;
                let mut start = 0;
                while have - start >= FRAME {
                    let sent: u64 = std::str::from_utf8(&buf[start..start + 20])
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(at);
                    mine.push(at.saturating_sub(sent));
                    got += 1;
                    start += FRAME;
                }
                buf.copy_within(start..have, 0);
                have -= start;
            }
            lock(&latencies).extend(mine);
            got
        }));
    }
    let read_all = async {
        let mut total = 0u64;
        for t in tasks {
            total += t.await.unwrap_or(0);
        }
        total
    };
    let total = tokio::time::timeout(Duration::from_secs(timeout_secs), read_all)
        .await
        .map_err(|_| "timed out".to_owned())?;
    let stats = lines.next().and_then(Result::ok).unwrap_or_default();
    drop(child.stdin.take());
    let _ = child.wait();
    if total != k as u64 * rounds {
        return Err(format!("received {total} of {} frames", k as u64 * rounds));
    }
    let mut words = stats.split_whitespace();
    let cpu: f64 = words
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(f64::NAN);
    let would_block = words.nth(1).unwrap_or("?").to_owned();
    let mut sorted = std::mem::take(&mut *lock(&latencies));
    sorted.sort_unstable();
    Ok(format!(
        "| {k} | {rounds} | {rate}/s | {} | {} | {} | {:.2} µs ({cpu:.2} s) | {would_block} |",
        report::percentile(&sorted, 50.0),
        report::percentile(&sorted, 99.0),
        report::percentile(&sorted, 99.9),
        cpu * 1e6 / total.max(1) as f64,
    ))
}
