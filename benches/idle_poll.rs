//! Cost of one idle round of the host's `poll_*` calls with 10 and with 10,000 connections.
//!
//! Every connection is opened and attached to one session (the first `session.create`s it,
//! the others `session.resume` it with `disableResume: true`), and everything is drained, so
//! nothing is pending: no frame, no output, no deadline. One round is what a runtime does
//! when it wakes with nothing to do: `poll_ready` + `poll_output` + `poll_timeout`, plus one
//! `poll_transmit` on a connection with nothing queued:
//!
//! * `idle_poll/round/N`: always the same connection (a writer task woken with nothing to
//!   write), so the host's own per-round work is measured;
//! * `idle_poll/round_rotating/N`: the connection changes every round, cycling through all
//!   of them, so with 10,000 connections each `poll_transmit` reads a connection that is
//!   not in cache (what the memory hierarchy adds, not the host's algorithm).
//!
//! The target: the 10,000-connection round costs less than 1.5 times the
//! 10-connection round. After the criterion runs, the bench measures both variants again,
//! interleaved (best of 1,000 runs of 10^4 rounds each: a run is short next to a scheduler
//! time slice, so on a shared machine the best run is one that was not descheduled), and
//! prints the times and ratios to stderr.
//!
//! Run: `cargo bench --bench idle_poll -- --warm-up-time 1 --measurement-time 2`

use std::hint::black_box;
use std::time::Instant;

use agentwire::frame::Framing;
use agentwire::host::{ConnId, Host, HostConfig};
use agentwire::Timestamp;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::{json, Value};

const CONNECTIONS: [usize; 2] = [10, 10_000];
const SESSION: &str = "idle-session";
const T0: u64 = 1_795_983_976_952;

fn framed(body: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(body).unwrap();
    let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    wire.extend_from_slice(&body);
    wire
}

/// A host with `n` connections attached to one session, fully drained.
struct Idle {
    host: Host,
    conns: Vec<ConnId>,
    next: usize,
    /// Cycle through every connection for `poll_transmit` (else always the first).
    rotate: bool,
}

impl Idle {
    fn new(n: usize, rotate: bool) -> Self {
        let mut host = Host::new(HostConfig::default());
        let now = Timestamp::from_millis(T0);
        let conns: Vec<ConnId> = (0..n)
            .map(|_| host.open(now, Framing::ContentLength))
            .collect();
        host.handle_bytes(
            now,
            conns[0],
            &framed(&json!({"jsonrpc":"2.0","id":1,"method":"session.create",
                            "params":{"sessionId":SESSION}})),
        );
        let resume = framed(&json!({"jsonrpc":"2.0","id":1,"method":"session.resume",
                                    "params":{"sessionId":SESSION,"disableResume":true}}));
        for &conn in &conns[1..] {
            host.handle_bytes(now, conn, &resume);
        }
        while let Some(conn) = host.poll_ready() {
            while host.poll_transmit(conn).is_some() {}
        }
        while host.poll_output().is_some() {}
        assert_eq!(host.connection_count(), n);
        assert_eq!(host.session_count(), 1);
        Idle {
            host,
            conns,
            next: 0,
            rotate,
        }
    }

    /// One idle round; asserts (cheaply) that nothing was pending.
    #[inline(always)]
    fn round(&mut self) {
        let conn = self.conns[self.next];
        if self.rotate {
            self.next += 1;
            if self.next == self.conns.len() {
                self.next = 0;
            }
        }
        let ready = self.host.poll_ready();
        let output = self.host.poll_output();
        let timeout = self.host.poll_timeout();
        let frame = self.host.poll_transmit(conn);
        debug_assert!(ready.is_none() && output.is_none() && timeout.is_none());
        debug_assert!(frame.is_none());
        black_box((ready, output, timeout, frame));
    }
}

/// Nanoseconds per round, best of `repeats` runs of `rounds` rounds.
fn ns_per_round(idle: &mut Idle, rounds: u32, repeats: u32) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let start = Instant::now();
        for _ in 0..rounds {
            idle.round();
        }
        let ns = start.elapsed().as_nanos() as f64 / f64::from(rounds);
        best = best.min(ns);
    }
    best
}

fn bench_idle_poll(c: &mut Criterion) {
    let mut group = c.benchmark_group("idle_poll");
    let mut idles: Vec<(&str, usize, Idle)> = Vec::new();
    for (name, rotate) in [("round", false), ("round_rotating", true)] {
        for n in CONNECTIONS {
            idles.push((name, n, Idle::new(n, rotate)));
        }
    }
    for (name, n, idle) in &mut idles {
        // Nothing pending at all.
        assert!(idle.host.poll_ready().is_none());
        assert!(idle.host.poll_output().is_none());
        assert!(idle.host.poll_timeout().is_none());
        group.bench_function(BenchmarkId::new(*name, *n), |b| b.iter(|| idle.round()));
    }
    group.finish();
    // The ratios, measured back to back (interleaved to share the machine's noise).
    let mut best = vec![f64::INFINITY; idles.len()];
    for _ in 0..5 {
        for (i, (_, _, idle)) in idles.iter_mut().enumerate() {
            best[i] = best[i].min(ns_per_round(idle, 10_000, 200));
        }
    }
    for ((name, n, _), ns) in idles.iter().zip(&best) {
        eprintln!("idle poll {name:>14}, {n:>6} connections: {ns:.2} ns per round (best of 1,000 runs of 10^4 rounds)");
    }
    for pair in 0..idles.len() / 2 {
        let (small, large) = (2 * pair, 2 * pair + 1);
        eprintln!(
            "idle poll {:>14}: ratio {} / {} connections = {:.3} (target < 1.5)",
            idles[small].0,
            idles[large].1,
            idles[small].1,
            best[large] / best[small]
        );
    }
}

criterion_group!(benches, bench_idle_poll);
criterion_main!(benches);
