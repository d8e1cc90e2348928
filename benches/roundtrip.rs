//! Request round trips through two in-memory [`Endpoint`]s.
//!
//! A client endpoint sends `ping` requests (`{"message":"hi"}`), every frame it produced is
//! written into the server endpoint as one read, the server application takes each
//! [`EndpointEvent::Request`], decodes its params (borrowed) and answers it with
//! `{"message":"pong","seq":N}`, and every frame the server produced goes back to the client the
//! same way, which takes each [`EndpointEvent::Outcome`]. One benchmark iteration is one batch
//! of `IN_FLIGHT` requests (1 or 64 sent before any is answered); elements = round trips.
//! No timeouts are set (the SDKs set none on ordinary requests).
//!
//! Run: `cargo bench --bench roundtrip -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use agentwire::correlation::Outcome;
use agentwire::endpoint::{Endpoint, EndpointConfig, EndpointEvent, Role};
use agentwire::frame::Framing;
use agentwire::Timestamp;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde::{Deserialize, Serialize};

/// Params of the request.
#[derive(Serialize, Deserialize)]
struct Ping<'a> {
    message: &'a str,
}

/// Result of the request.
#[derive(Serialize)]
struct Pong<'a> {
    message: &'a str,
    seq: u64,
}

/// Both endpoints and a reusable buffer standing for the socket.
struct Pair {
    client: Endpoint,
    server: Endpoint,
    wire: Vec<u8>,
    now: Timestamp,
    served: u64,
}

impl Pair {
    fn new(framing: Framing) -> Pair {
        Pair {
            client: Endpoint::new(Role::Client, EndpointConfig::new(framing)),
            server: Endpoint::new(Role::Server, EndpointConfig::new(framing)),
            wire: Vec::with_capacity(64 * 1024),
            now: Timestamp::from_millis(1_795_983_976_952),
            served: 0,
        }
    }

    /// Sends `n` requests, delivers them, answers them all, delivers the answers; returns the
    /// number of results the client received.
    fn round_trips(&mut self, n: usize) -> usize {
        for _ in 0..n {
            self.client
                .send_request(self.now, "ping", &Ping { message: "hi" }, None)
                .expect("outbox has room");
        }
        // Client -> server: everything written, then read as one chunk.
        self.wire.clear();
        while let Some(frame) = self.client.poll_transmit() {
            self.wire.extend_from_slice(&frame);
        }
        self.server.handle_bytes(self.now, &self.wire);
        while let Some(event) = self.server.poll_event() {
            let EndpointEvent::Request(request) = event else {
                panic!("unexpected server event {event:?}");
            };
            let ping: Ping<'_> = request.params().expect("valid params");
            self.served += 1;
            let pong = Pong {
                message: if ping.message == "hi" { "pong" } else { "?" },
                seq: self.served,
            };
            self.server
                .respond(request.id(), &pong)
                .expect("in flight, room");
        }
        // Server -> client.
        self.wire.clear();
        while let Some(frame) = self.server.poll_transmit() {
            self.wire.extend_from_slice(&frame);
        }
        self.client.handle_bytes(self.now, &self.wire);
        let mut results = 0;
        while let Some(event) = self.client.poll_event() {
            match event {
                EndpointEvent::Outcome {
                    outcome: Outcome::Result(result),
                    ..
                } => {
                    black_box(&result);
                    results += 1;
                }
                other => panic!("unexpected client event {other:?}"),
            }
        }
        assert_eq!(results, n);
        results
    }
}

fn bench_roundtrip(c: &mut Criterion) {
    let mut group = c.benchmark_group("roundtrip");
    for (name, framing) in [
        ("content-length", Framing::ContentLength),
        ("ndjson", Framing::Ndjson),
    ] {
        for in_flight in [1usize, 64] {
            group.throughput(Throughput::Elements(in_flight as u64));
            let mut pair = Pair::new(framing);
            group.bench_function(
                BenchmarkId::new(name, format!("{in_flight}-in-flight")),
                |b| b.iter(|| pair.round_trips(black_box(in_flight))),
            );
            assert_eq!(pair.client.pending_requests(), 0);
            assert_eq!(pair.server.in_flight_requests(), 0);
        }
    }
    group.finish();
}

criterion_group!(benches, bench_roundtrip);
criterion_main!(benches);
