//! The bodies of agentwire's fuzz targets, in a crate of their own so that both the cargo-fuzz
//! binaries (`fuzz/`, which need cargo-fuzz and a nightly toolchain) and the stable corpus
//! replay of the workspace's tests (`tests/core/fuzz_corpus_replay.rs`) run the same code.
//! Every target asserts invariants, not just "no panic".

pub mod model_targets;
pub mod targets;
