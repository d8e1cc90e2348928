//! The load generator (`agentwire-load`) end to end with tiny numbers: it starts the real
//! `agentwire` binary, attaches two clients, streams 50 deltas and reports one table row with
//! every delta delivered and no durable event lost.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn load_generator_runs_end_to_end_with_tiny_numbers() {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_agentwire-load"))
        .args(["--runtimes", "tokio", "--clients", "2", "--deltas", "50"])
        .args(["--batch", "10", "--timeout-secs", "30"])
        .args(["--server", env!("CARGO_BIN_EXE_agentwire")])
        .output()
        .expect("agentwire-load runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "agentwire-load failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| tokio |"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 1, "one result row expected:\n{stdout}");
    let row = &rows[0];
    assert_eq!(&row[..3], ["tokio", "2", "50"], "{stdout}");
    // Every column is a measurement, not a failure or "n/a".
    for (i, cell) in row.iter().enumerate() {
        assert!(
            !cell.is_empty() && !cell.contains("n/a") && !cell.contains("failed"),
            "column {i} of {stdout}"
        );
    }
    assert!(
        row[4].ends_with("µs") || row[4].ends_with("ms"),
        "p50: {stdout}"
    );
    assert!(row[6].ends_with("MiB"), "peak RSS: {stdout}");
    assert_eq!(row[7], "0", "durable events lost: {stdout}");
    // Two fast clients, 50 deltas each: nothing is dropped.
    assert_eq!(
        row[8], "0 of 100 (0.0 %, 0 reported)",
        "deltas dropped: {stdout}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn load_generator_reports_a_missing_server_binary() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentwire-load"))
        .args(["--server", "/nonexistent/agentwire", "--clients", "1"])
        .output()
        .expect("agentwire-load runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}
