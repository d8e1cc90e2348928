//! The `interop` tier: the official Copilot Rust SDK (`github-copilot-sdk`, unmodified)
//! connected in process to an `agentwire_tokio::Server` (`support.rs`), running the shared SDK
//! scenarios, model sessions against the fake model endpoint (and that endpoint's own tests),
//! providers, MCP servers, built-in tools, canvases and routing. One test binary:
//! `cargo test --test interop`.

mod bridges;
mod builtin_tools;
mod canvas;
mod copilot;
mod fake_model;
mod llm_inference;
mod mcp;
mod model;
mod providers;
mod routing;
mod sdk_history;
mod sdk_surface;
mod support;
