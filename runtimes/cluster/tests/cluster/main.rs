//! The `cluster` tier: the engine conformance checks on the in-memory engine and on real
//! nats-servers, a three-server cluster losing its stream leader, and the seeded simulations
//! (engine calls, and three hosts over the in-memory engine), and the replay of the
//! `cluster_links` fuzz corpus. Shared set-up is in `support/`.
//! One test binary: `cargo test -p agentwire-cluster --test cluster`.

mod fuzz_replay;
mod host_simulation;
mod memory_conformance;
mod nats_cluster;
mod nats_conformance;
mod simulation;
mod support;
