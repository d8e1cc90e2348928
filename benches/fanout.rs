//! Fan-out of session events to 1 / 100 / 1,000 / 10,000 attached connections.
//!
//! One session, `N` Content-Length connections: the first `session.create`s it, the others
//! `session.resume` it (`disableResume: true`). Benchmarks (throughput in criterion elements):
//!
//! * `fanout/emit+drain/N`: [`Host::emit_event`] of one small persisted event, then drain every
//!   connection (`poll_ready` + `poll_transmit`, frames dropped). Elements = `N` deliveries of
//!   the event. Each persisted event also sends a `session.lifecycle` `session.updated`
//!   notification to every connection, so `2N` frames are written per event (asserted).
//! * `fanout/emit+drain_batch/N`: the same, draining with [`Host::poll_transmit_batch`] into
//!   one reused `Vec` (what the runtimes' writer tasks do: every queued frame of a connection
//!   in one call, written with one vectored write).
//! * `fanout/emit/N`: the same, timing only the `emit_event` call (the drain runs untimed).
//! * `fanout/turn/N`: one `session.send` on the first connection runs a scripted turn
//!   (`user.message`, `assistant.turn_start`, `bench.tick`, `assistant.turn_end`, ephemeral
//!   `session.idle`, each persisted one followed by `session.updated` to all, coalesced per
//!   connection while one is still queued, so one per connection); everything is drained.
//!   Elements = frames written per turn (`6N + 1`, counted at setup).
//!
//! Before the timed runs, a counting global allocator measures allocator calls (`alloc`,
//! `alloc_zeroed`, `realloc`) and bytes requested per event and per turn at every `N`; they
//! are printed to stderr. The design intent is a constant number of allocations per event
//! whatever `N`: the event is encoded once into a shared `Bytes` and each outbox gets a
//! reference-count clone.
//!
//! Then it times single events (emit alone, and emit + batched drain) and prints their median
//! and 10th percentile: on a shared machine these are robust to the scheduler descheduling
//! the bench, which inflates criterion's means (see `per_event`).
//!
//! Run: `cargo bench --bench fanout -- --warm-up-time 1 --measurement-time 3`

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use agentwire::agent::Scenario;
use agentwire::frame::Framing;
use agentwire::host::{ConnId, Host, HostConfig};
use agentwire::Timestamp;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};

// ----- counting allocator -----

/// `System`, counting allocator calls and requested bytes.
struct Counting;

static ALLOC_CALLS: AtomicU64 = AtomicU64::new(0);
static ALLOC_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOC_CALLS.fetch_add(1, Relaxed);
        ALLOC_BYTES.fetch_add(layout.size() as u64, Relaxed);
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOC_CALLS.fetch_add(1, Relaxed);
        ALLOC_BYTES.fetch_add(layout.size() as u64, Relaxed);
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOC_CALLS.fetch_add(1, Relaxed);
        ALLOC_BYTES.fetch_add(new_size.saturating_sub(layout.size()) as u64, Relaxed);
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn alloc_snapshot() -> (u64, u64) {
    (ALLOC_CALLS.load(Relaxed), ALLOC_BYTES.load(Relaxed))
}

// ----- fixture -----

const CONNECTIONS: [usize; 4] = [1, 100, 1_000, 10_000];
const SESSION: &str = "bench-session";
const T0: u64 = 1_795_983_976_952;
/// Rebuild the host (untimed) after this many persisted events so the session log, which
/// grows with every persisted event, stays small during long runs.
const REBUILD_AFTER: u64 = 100_000;

fn framed(body: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(body).unwrap();
    let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    wire.extend_from_slice(&body);
    wire
}

/// One session with `n` attached connections.
struct Fanout {
    host: Host,
    now: Timestamp,
    conns: Vec<ConnId>,
    /// Persisted events since the host was built.
    events: u64,
    /// A framed `session.send` for the first connection (the id is reused: each request is
    /// answered before the next one arrives).
    send: Vec<u8>,
    /// The event `emit` publishes.
    data: Value,
}

impl Fanout {
    fn new(n: usize) -> Self {
        let scenario =
            Scenario::from_json(r#"{"default":[{"event":"bench.tick","data":{"n":1}}]}"#)
                .expect("valid scenario");
        let mut host = Host::new(HostConfig::with_scenario(scenario));
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
        let mut f = Fanout {
            host,
            now,
            conns,
            events: 0,
            send: framed(&json!({"jsonrpc":"2.0","id":2,"method":"session.send",
                                 "params":{"sessionId":SESSION,"prompt":"tick"}})),
            data: json!({"n": 1}),
        };
        f.drain();
        f
    }

    fn tick(&mut self) {
        self.now = self.now.saturating_add(Duration::from_millis(1));
    }

    /// Emits one small persisted event.
    fn emit(&mut self) {
        self.tick();
        self.events += 1;
        let id = self
            .host
            .emit_event(self.now, SESSION, "bench.tick", &self.data, false);
        debug_assert!(id.is_some());
        black_box(id);
    }

    /// Runs one scripted turn (`session.send` on the first connection).
    fn turn(&mut self) {
        self.tick();
        self.events += 4;
        self.host.handle_bytes(self.now, self.conns[0], &self.send);
    }

    /// Takes every queued frame from every connection; returns how many there were.
    fn drain(&mut self) -> usize {
        let mut frames = 0;
        while let Some(conn) = self.host.poll_ready() {
            while let Some(frame) = self.host.poll_transmit(conn) {
                black_box(&frame);
                frames += 1;
            }
        }
        frames
    }

    /// Like [`Fanout::drain`], taking each connection's frames in one batch call.
    fn drain_batch(&mut self, batch: &mut Vec<bytes::Bytes>) -> usize {
        let mut frames = 0;
        while let Some(conn) = self.host.poll_ready() {
            self.host.poll_transmit_batch(conn, usize::MAX, batch);
            frames += batch.len();
            black_box(&batch);
            batch.clear();
        }
        frames
    }

    /// Rebuilds the host when its session log has grown large.
    fn maybe_rebuild(&mut self) {
        if self.events >= REBUILD_AFTER {
            *self = Fanout::new(self.conns.len());
        }
    }
}

// ----- allocation counts -----

/// Allocator calls and bytes per operation, over `ops` operations after a warm-up.
fn allocs_per(f: &mut Fanout, ops: u64, mut op: impl FnMut(&mut Fanout)) -> (f64, f64) {
    for _ in 0..32 {
        op(f);
        f.drain();
    }
    let (calls0, bytes0) = alloc_snapshot();
    for _ in 0..ops {
        op(f);
        f.drain();
    }
    let (calls1, bytes1) = alloc_snapshot();
    (
        (calls1 - calls0) as f64 / ops as f64,
        (bytes1 - bytes0) as f64 / ops as f64,
    )
}

fn report_allocations() {
    eprintln!("allocations (allocator calls incl. realloc; bytes requested), steady state, drain included:");
    eprintln!(
        "{:>8} {:>14} {:>14} {:>14} {:>14}",
        "N", "allocs/event", "bytes/event", "allocs/turn", "bytes/turn"
    );
    for n in CONNECTIONS {
        let mut f = Fanout::new(n);
        let ops = if n >= 10_000 { 64 } else { 256 };
        let (event_calls, event_bytes) = allocs_per(&mut f, ops, Fanout::emit);
        let (turn_calls, turn_bytes) = allocs_per(&mut f, ops, Fanout::turn);
        eprintln!(
            "{n:>8} {event_calls:>14.2} {event_bytes:>14.1} {turn_calls:>14.2} {turn_bytes:>14.1}"
        );
    }
}

// ----- per-event medians -----

/// Median and 10th percentile, in nanoseconds, of `samples` single-event timings of `op`
/// (the drain always runs; `timed_drain` says whether it is inside the timing).
///
/// On a machine shared with other work, criterion's means include whole scheduler time
/// slices whenever the benchmark thread is descheduled inside a timed section. One event is
/// short (tens of microseconds at 1,000 connections) next to a time slice, so most single
/// timings run undisturbed and their median is the cost of the code itself.
fn per_event(
    f: &mut Fanout,
    samples: usize,
    mut op: impl FnMut(&mut Fanout, &mut Vec<bytes::Bytes>),
    timed_drain: bool,
) -> (f64, f64) {
    let mut batch = Vec::with_capacity(64);
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples + samples / 10 {
        f.maybe_rebuild();
        let start = Instant::now();
        op(f, &mut batch);
        if timed_drain {
            black_box(f.drain_batch(&mut batch));
        }
        let t = start.elapsed();
        if !timed_drain {
            f.drain();
        }
        // The first tenth warms up.
        if i >= samples / 10 {
            times.push(t.as_nanos() as f64);
        }
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[times.len() / 10])
}

fn report_medians() {
    eprintln!("per-event timings (median and 10th percentile of single events; deliveries/s from the median):");
    eprintln!(
        "{:>8} {:>22} {:>12} {:>28} {:>12}",
        "N", "emit ns (p50 / p10)", "deliv/s", "emit+drain_batch ns (p50/p10)", "deliv/s"
    );
    for n in CONNECTIONS {
        let mut f = Fanout::new(n);
        let samples = match n {
            1 | 100 => 20_000,
            1_000 => 4_000,
            _ => 400,
        };
        let (emit, emit_p10) = per_event(&mut f, samples, |f, _| f.emit(), false);
        let (both, both_p10) = per_event(&mut f, samples, |f, _| f.emit(), true);
        let rate = |ns: f64| n as f64 / ns * 1e3;
        eprintln!(
            "{n:>8} {:>22} {:>10.2} M {:>28} {:>10.2} M",
            format!("{emit:.0} / {emit_p10:.0}"),
            rate(emit),
            format!("{both:.0} / {both_p10:.0}"),
            rate(both),
        );
    }
}

// ----- benchmarks -----

fn bench_fanout(c: &mut Criterion) {
    report_allocations();
    report_medians();
    let mut group = c.benchmark_group("fanout");
    for n in CONNECTIONS {
        if n >= 10_000 {
            group.sample_size(10);
        } else {
            group.sample_size(50);
        }
        let mut f = Fanout::new(n);

        // Every persisted event: the event to each attached connection plus `session.updated`
        // to every connection.
        f.emit();
        assert_eq!(f.drain(), 2 * n, "frames per persisted event");
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("emit+drain", n), |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    f.maybe_rebuild();
                    let start = Instant::now();
                    f.emit();
                    black_box(f.drain());
                    elapsed += start.elapsed();
                }
                elapsed
            })
        });
        let mut batch = Vec::with_capacity(64);
        f.emit();
        assert_eq!(
            f.drain_batch(&mut batch),
            2 * n,
            "frames per persisted event"
        );
        group.bench_function(BenchmarkId::new("emit+drain_batch", n), |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    f.maybe_rebuild();
                    let start = Instant::now();
                    f.emit();
                    black_box(f.drain_batch(&mut batch));
                    elapsed += start.elapsed();
                }
                elapsed
            })
        });
        group.bench_function(BenchmarkId::new("emit", n), |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    f.maybe_rebuild();
                    let start = Instant::now();
                    f.emit();
                    elapsed += start.elapsed();
                    f.drain();
                }
                elapsed
            })
        });

        f.turn();
        let per_turn = f.drain();
        assert_eq!(per_turn, 6 * n + 1, "frames per scripted turn");
        group.throughput(Throughput::Elements(per_turn as u64));
        group.bench_function(BenchmarkId::new("turn", n), |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    f.maybe_rebuild();
                    let start = Instant::now();
                    f.turn();
                    black_box(f.drain());
                    elapsed += start.elapsed();
                }
                elapsed
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_fanout);
criterion_main!(benches);
