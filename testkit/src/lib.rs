//! Test helpers shared by the test tiers of several crates of the workspace (each tier's
//! `support` module re-exports the ones it uses):
//!
//! * [`sdk_scenarios`]: the scenario suite that drives agentwire with the official Copilot Rust
//!   SDK (the root crate's `interop` tier in process, `agentwire-cli`'s over TCP and stdio);
//! * [`fake_model`]: a fake OpenAI-compatible model endpoint on loopback;
//! * [`mcp_servers`]: the MCP reference servers `scripts/install-test-servers` installs;
//! * [`copilot_cli`]: the official Copilot CLI as an ACP agent (installed the same way);
//! * [`nats`]: real nats-server processes (the cluster tests);
//! * [`wire`]: a tiny Content-Length client, independent of the core (the runtime tests).

pub mod copilot_cli;
pub mod fake_model;
pub mod mcp_servers;
pub mod nats;
pub mod sdk_scenarios;
pub mod wire;
