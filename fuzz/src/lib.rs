//! Fuzz targets for agentwire. The bodies live in `targets.rs` so that
//! `tests/fuzz_corpus_replay.rs` can replay every corpus file through the same code on stable.

pub mod model_targets;
pub mod targets;
