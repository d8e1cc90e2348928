//! The load generator (`agentwire-load`) end to end with tiny numbers: it starts the real
//! `agentwire` binary, attaches clients, streams deltas (saturated, paced, over several
//! sessions) and reports one table row with every delta delivered and no durable event lost;
//! in memory mode it reports the RSS per idle attached connection; in floor mode, the bare
//! kernel path's latency without agentwire.

use std::process::{Command, Output};

fn load(args: &[&str]) -> (Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentwire-load"))
        .args(["--runtimes", "tokio", "--timeout-secs", "60"])
        .args(["--server", env!("CARGO_BIN_EXE_agentwire")])
        .args(args)
        .output()
        .expect("agentwire-load runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "agentwire-load failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    (out, stdout)
}

/// The single result row of a streaming run whose runtime column is `runtime`, as cells.
fn only_row(stdout: &str, runtime: &str) -> Vec<String> {
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .filter(|l| l.starts_with(&format!("| {runtime} |")))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 1, "one result row expected:\n{stdout}");
    rows.into_iter().next().unwrap()
}

/// Checks a streaming run's row: `[runtime, S, K, M, rate]` as given, every column a
/// measurement, nothing lost or dropped (fast clients, small numbers).
fn check_streaming_row(stdout: &str, head: [&str; 5], total_deltas: u64) {
    let row = only_row(stdout, head[0]);
    assert_eq!(&row[..5], head, "{stdout}");
    for (i, cell) in row.iter().enumerate() {
        assert!(
            !cell.is_empty() && !cell.contains("n/a") && !cell.contains("failed"),
            "column {i} of {stdout}"
        );
    }
    for (i, name) in [(6, "p50"), (7, "p99"), (8, "p99.9")] {
        assert!(
            row[i].ends_with("µs") || row[i].ends_with("ms"),
            "{name}: {stdout}"
        );
    }
    assert!(
        row[9].contains(" µs (") && row[9].ends_with(" s)"),
        "CPU per event: {stdout}"
    );
    assert!(row[10].ends_with("MiB"), "peak RSS: {stdout}");
    assert_eq!(row[11], "0", "durable events lost: {stdout}");
    assert_eq!(
        row[12],
        format!("0 of {total_deltas} (0.0 %, 0 reported)"),
        "deltas dropped: {stdout}"
    );
}

#[test]
fn load_generator_runs_end_to_end_with_tiny_numbers() {
    let (_, stdout) = load(&["--clients", "2", "--deltas", "50", "--batch", "10"]);
    check_streaming_row(&stdout, ["tokio", "1", "2", "50", "max"], 100);
}

#[test]
fn paced_mode_streams_every_delta_at_the_rate() {
    // 20 deltas at 200 per second: a tenth of a second of pacing by the core's timer.
    let (_, stdout) = load(&["--clients", "3", "--deltas", "20", "--rate", "200"]);
    check_streaming_row(&stdout, ["tokio", "1", "3", "20", "200/s"], 60);
}

#[test]
fn many_sessions_mode_streams_to_every_client_of_every_session() {
    let (_, stdout) = load(&[
        "--sessions",
        "3",
        "--clients",
        "2",
        "--deltas",
        "10",
        "--rate",
        "500",
    ]);
    check_streaming_row(&stdout, ["tokio", "3", "2", "10", "500/s"], 60);
}

/// `--cluster-nodes 3`: beside the single-node row, the same run across three agentwire
/// nodes on a nats-server (`$AGENTWIRE_NATS_SERVER` or `target/nats/nats-server`), two
/// sessions owned by different nodes, each with a client on every node: every delta reaches
/// every client, and no durable event is lost.
#[test]
fn cluster_mode_streams_across_three_nodes_beside_one_node() {
    let (_, stdout) = load(&[
        "--sessions",
        "2",
        "--clients",
        "3",
        "--deltas",
        "30",
        "--cluster-nodes",
        "3",
    ]);
    check_streaming_row(&stdout, ["tokio", "2", "3", "30", "max"], 180);
    check_streaming_row(&stdout, ["tokio, 3 nodes", "2", "3", "30", "max"], 180);
}

#[test]
fn idle_mode_reports_the_memory_per_idle_attached_connection() {
    let (_, stdout) = load(&["--idle", "20"]);
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("| tokio |"))
        .unwrap_or_else(|| panic!("no row:\n{stdout}"))
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(row[1], "20", "{stdout}");
    for cell in &row[2..5] {
        assert!(cell.ends_with("MiB"), "{stdout}");
    }
    assert!(row[5].ends_with("KiB"), "{stdout}");
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

#[test]
fn model_mode_streams_a_fake_endpoints_deltas_beside_the_scripted_stream() {
    let (_, stdout) = load(&[
        "--clients",
        "2",
        "--deltas",
        "30",
        "--model-deltas",
        "40",
        "--batch",
        "5",
    ]);
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .filter(|l| l.starts_with("| tokio |"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 2, "a scripted and a model row:\n{stdout}");
    let (scripted, model) = (&rows[0], &rows[1]);
    assert_eq!(&scripted[..4], ["tokio", "1", "2", "30"], "{stdout}");
    assert_eq!(scripted[13], "scripted agent", "{stdout}");
    assert_eq!(&model[..4], ["tokio", "1", "2", "40"], "{stdout}");
    assert_eq!(model[13], "model (fake endpoint)", "{stdout}");
    for (i, name) in [(6, "p50"), (7, "p99")] {
        // Every model delta carried the endpoint's stamp to both clients.
        assert!(
            model[i].ends_with("µs") || model[i].ends_with("ms"),
            "{name}: {stdout}"
        );
    }
    assert_eq!(model[11], "0", "durable events lost: {stdout}");
    assert_eq!(
        model[12], "0 of 80 (0.0 %, 0 reported)",
        "model deltas dropped: {stdout}"
    );
}

#[test]
fn floor_mode_writes_every_frame_to_every_socket_and_reports_the_kernel_paths_latency() {
    // Exits 1 unless every client received every frame.
    let (_, stdout) = load(&["--floor", "20", "--deltas", "5", "--rate", "100"]);
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("| 20 |"))
        .unwrap_or_else(|| panic!("no row:\n{stdout}"))
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(&row[..3], ["20", "5", "100/s"], "{stdout}");
    for cell in &row[3..6] {
        assert!(cell.ends_with('s'), "a latency: {stdout}");
    }
    assert!(row[6].contains("µs"), "{stdout}");
}
