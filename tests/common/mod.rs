//! Compatibility path for the runtimes' tests that include the SDK scenario suite with
//! `#[path = "../../../tests/common/mod.rs"]`: the suite lives in `tests/sdk_scenarios/`.
//! Point those includes at `tests/sdk_scenarios/mod.rs` and delete this file.

#[path = "../sdk_scenarios/mod.rs"]
mod sdk_scenarios;

pub use sdk_scenarios::*;
