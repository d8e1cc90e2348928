//! Correlation churn: [`PendingRequests`] in a steady state of `N` pending requests.
//!
//! Each churn step completes the oldest pending request and registers a new one, so `N` stay
//! pending. Two workloads:
//!
//! * **resolve**: no deadlines; the oldest request is answered (`resolve` with the response's
//!   borrowed id) and a new one is `start`ed.
//! * **resolve+timeout**: every request gets a deadline `N` steps ahead; the clock advances one
//!   microsecond per step; one request in 16 is never answered and ends through
//!   `poll_timeout` + `handle_timeout` (checked every step, as a runtime does after handling
//!   input); the others are answered at their deadline's instant, before timeouts are handled.
//!
//! Elements = churn steps (one completion + one registration). `N` = 1,000, 10,000 and 100,000:
//! the cost per step should grow no more than logarithmically with `N`.
//!
//! Run: `cargo bench --bench correlation -- --warm-up-time 1 --measurement-time 3`

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Duration;

use agentwire::correlation::{Outcome, PendingRequests};
use agentwire::jsonrpc::OwnedId;
use agentwire::Timestamp;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// Churn steps per benchmark iteration.
const STEPS: usize = 1000;

/// One request in `LOST` is never answered and times out.
const LOST: u64 = 16;

/// A table with `n` pending requests (caller data: the numeric id).
struct Churn {
    table: PendingRequests<u64>,
    /// Pending ids, oldest first, with their numeric values.
    order: VecDeque<(u64, OwnedId)>,
    now: Timestamp,
    /// Deadline distance; `None` for the workload without deadlines.
    timeout: Option<Duration>,
    timed_out: u64,
}

impl Churn {
    fn new(n: usize, timeout: Option<Duration>) -> Churn {
        let mut churn = Churn {
            table: PendingRequests::new(),
            order: VecDeque::with_capacity(n + 1),
            now: Timestamp::from_millis(1_795_983_976_952),
            timeout,
            timed_out: 0,
        };
        for _ in 0..n {
            churn.tick();
            churn.register();
        }
        churn
    }

    fn tick(&mut self) {
        self.now = self.now.saturating_add(Duration::from_micros(1));
    }

    fn register(&mut self) {
        let deadline = self.timeout.map(|t| self.now.saturating_add(t));
        let n = self.table.next_id();
        let id = self.table.start(deadline, n);
        self.order.push_back((n, id));
    }

    /// Completes the oldest request (answer or timeout) and registers a new one.
    fn step(&mut self) {
        self.tick();
        let (n, oldest) = self.order.pop_front().expect("n > 0");
        if self.timeout.is_some() && n % LOST == 0 {
            // Never answered: its deadline is now (it was registered N steps ago).
            if self.table.poll_timeout().is_some_and(|d| d <= self.now) {
                for (id, user) in self.table.handle_timeout(self.now) {
                    black_box((id, user));
                    self.timed_out += 1;
                }
            }
        } else {
            let (user, outcome) = self
                .table
                .resolve(&oldest.as_id(), Outcome::Cancelled)
                .expect("pending");
            black_box((user, outcome));
            if self.timeout.is_some() {
                // What a runtime does after handling input: check for due deadlines.
                if self.table.poll_timeout().is_some_and(|d| d <= self.now) {
                    self.timed_out += self.table.handle_timeout(self.now).len() as u64;
                }
            }
        }
        self.register();
    }
}

fn bench_correlation(c: &mut Criterion) {
    let mut group = c.benchmark_group("correlation");
    group.throughput(Throughput::Elements(STEPS as u64));
    for n in [1_000usize, 10_000, 100_000] {
        for (name, timeout) in [
            ("resolve", None),
            // Each request's deadline falls exactly when it is the oldest.
            ("resolve+timeout", Some(Duration::from_micros(n as u64))),
        ] {
            let mut churn = Churn::new(n, timeout);
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter(|| {
                    for _ in 0..STEPS {
                        churn.step();
                    }
                })
            });
            assert_eq!(churn.table.len(), n, "steady state");
            assert_eq!(churn.table.unknown_responses(), 0);
            // (Nothing ran if a command-line filter skipped this benchmark.)
            let ran = churn.table.next_id() > n as u64;
            if ran && timeout.is_some() {
                assert!(churn.timed_out > 0, "some requests timed out");
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench_correlation);
criterion_main!(benches);
