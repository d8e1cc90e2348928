//! The `e2e` tier: the real `agentwire` and `agentwire-load` binaries as child processes —
//! flags and framing, the runtimes' conformance suite, the durable store, the terminal UI, the
//! official Copilot and ACP Rust SDKs over TCP and stdio, the official AHP client over WebSocket, MCP servers, cluster nodes on real
//! nats-servers, and the load generator. Shared set-up is in `support/`. One test binary:
//! `cargo test -p agentwire-cli --test e2e`.

mod cli;
mod cluster;
mod cluster_acp;
mod cluster_ahp;
mod cluster_auth;
mod cluster_links;
mod conformance;
mod interop_acp;
mod interop_acp_agent;
mod interop_acp_elicitation;
mod interop_acp_mcp;
mod interop_acp_model;
mod interop_ahp;
mod interop_copilot_agent;
mod interop_sdk_process;
mod load;
mod store;
mod support;
mod tui;
