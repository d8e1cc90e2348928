//! Fuzz targets for agentwire. The bodies live in the `agentwire-fuzz-targets` crate
//! (`fuzz/targets/`), which the workspace's corpus replay test runs on stable too.

pub use agentwire_fuzz_targets::{model_targets, targets};
