//! agentwire: a sans-IO protocol host for AI-agent sessions.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod correlation;
pub mod endpoint;
pub mod frame;
pub mod ids;
pub mod jsonrpc;
pub mod time;

pub use time::Timestamp;
