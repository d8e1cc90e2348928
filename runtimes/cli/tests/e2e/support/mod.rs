//! The `e2e` tier's set-up: the `agentwire` binary as a child process ([`Agentwire`]), the ACP
//! SDK's stdio transport, the cluster tests' nodes, and the helpers the tier shares with other
//! crates' tiers (from `agentwire-testkit`: the SDK scenarios, the fake model endpoint, the MCP
//! reference servers, nats-server processes and the raw Content-Length client).

pub mod acp_stdio;
pub mod agentwire;
pub mod cluster_node;

pub use agentwire::*;
pub use agentwire_testkit::{copilot_cli, fake_model, mcp_servers, nats, sdk_scenarios, wire};

/// Tests whose agent process is heavy (the Copilot CLI) and tests that measure timing (a
/// shutdown's flush, a relay group broken mid-turn) take this lock, so that no two of them
/// run at once on the tier's two test threads: a heavy process starting beside a timing test
/// starves it of the CPU its timing assumes.
pub async fn exclusive() -> tokio::sync::MutexGuard<'static, ()> {
    static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    EXCLUSIVE.lock().await
}
