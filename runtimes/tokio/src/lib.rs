//! tokio runtime for agentwire (being written).
