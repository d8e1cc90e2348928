//! `--idle N`: the server's resident memory per idle attached connection.
//!
//! Per runtime: start the server, attach one client that creates a session and read the
//! server's `VmRSS`; attach N more clients to that session (`session.resume`) and leave them
//! idle; after a second, read `VmRSS` again. The difference over N is what one idle attached
//! connection costs the server process (kernel socket buffers are not in it).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{watch, Semaphore};

use crate::client::attach;
use crate::{new_session_id, procfs, start_with_scenario, Args};

/// What one idle run measured, in KiB.
struct IdleResult {
    /// `VmRSS` with no connection.
    empty: Option<u64>,
    /// `VmRSS` with the session and its creator attached.
    before: Option<u64>,
    /// `VmRSS` with N more idle attached connections.
    after: Option<u64>,
}

pub(crate) async fn run_all(args: &Args, server: &Path, n: usize) -> ExitCode {
    println!(
        "| runtime | N idle attached | server RSS, no connection | with the session | with N more | per idle attached connection |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let mut ok = true;
    for rt in &args.runtimes {
        let run = tokio::time::timeout(
            Duration::from_secs(args.timeout_secs),
            run_one(args, server, rt, n),
        )
        .await
        .unwrap_or_else(|_| Err(format!("timed out after {} s", args.timeout_secs)));
        match run {
            Ok(r) => {
                let kib = |v: Option<u64>| match v {
                    Some(v) => format!("{:.1} MiB", v as f64 / 1024.0),
                    None => "n/a".to_owned(),
                };
                let per = match (r.before, r.after) {
                    (Some(b), Some(a)) => {
                        format!("{:.1} KiB", a.saturating_sub(b) as f64 / n as f64)
                    }
                    _ => "n/a".to_owned(),
                };
                println!(
                    "| {rt} | {n} | {} | {} | {} | {per} |",
                    kib(r.empty),
                    kib(r.before),
                    kib(r.after)
                );
            }
            Err(e) => {
                ok = false;
                println!("| {rt} | {n} | failed: {e} | | | |");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn run_one(
    args: &Args,
    server: &Path,
    runtime: &str,
    n: usize,
) -> Result<IdleResult, String> {
    let scenario = json!({"default": [{"say": "idle"}]});
    let (mut child, port) = start_with_scenario(server, runtime, &scenario, &[]).await?;
    let pid = child.id().ok_or("the server has no pid")?;
    let settle = Duration::from_millis(500);
    tokio::time::sleep(settle).await;
    let empty = procfs::rss_kib(pid);
    let session_id = new_session_id(0);
    let created = Arc::new(watch::channel(false).0);
    let creator = attach(port, &session_id, true, &created).await?;
    tokio::time::sleep(settle).await;
    let before = procfs::rss_kib(pid);
    let setup = Arc::new(Semaphore::new(args.setup_concurrency));
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let (setup, created, session_id) = (setup.clone(), created.clone(), session_id.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = setup.acquire().await.map_err(|_| "setup closed")?;
            attach(port, &session_id, false, &created).await
        }));
    }
    let mut idle = Vec::with_capacity(n);
    for task in tasks {
        idle.push(task.await.map_err(|e| format!("client task: {e}"))??);
    }
    tokio::time::sleep(2 * settle).await;
    let after = procfs::rss_kib(pid);
    drop(idle);
    drop(creator);
    let _ = child.kill().await;
    Ok(IdleResult {
        empty,
        before,
        after,
    })
}
