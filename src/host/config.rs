//! The host's configuration: everything that varies between runs comes in here or through
//! inputs.

use std::fmt;

use crate::agent::{scripted_factory, AgentFactory, Scenario};
use crate::frame::FrameLimits;
use crate::model::{BaseUrlPolicy, CallConfig, ServerDefault};

/// Default per-connection outbox budget: 8 MiB.
pub const DEFAULT_OUTBOX_BUDGET: usize = 8 * 1024 * 1024;

/// Host configuration. Everything that varies between runs comes in here or through inputs.
#[derive(Clone)]
pub struct HostConfig {
    /// Seed for event and request ids (a whole run replays from its inputs and this seed).
    pub seed: u64,
    /// When set, clients must `connect` with this token first (`COPILOT_CONNECTION_TOKEN`).
    pub connection_token: Option<String>,
    /// Makes each session's agent. Default: the scripted agent with the built-in scenario.
    pub agent: AgentFactory,
    /// Version reported by `connect` and `status.get`.
    pub version: String,
    /// Framing limits for every connection.
    pub frame_limits: FrameLimits,
    /// Byte budget of each connection's outbox (see [`Outbox`] for the overflow policy).
    pub outbox_budget_bytes: usize,
    /// Directory reported as `<root>/session-state/<id>` in `workspacePath` (none: omitted).
    pub workspace_root: Option<String>,
    /// Emit [`Output::Persist`] for every persisted event and [`Output::SessionDeleted`] for
    /// deletions, so a runtime can keep a durable session store. Off by default.
    pub report_persisted_events: bool,
    /// Let clients run shell commands (`session.shell.exec`) through the runtime. Off by
    /// default: the method then fails with a reason.
    pub shell_enabled: bool,
    /// Honour `requestMcpApps` (the runtime's `COPILOT_MCP_APPS=true` gate). Off by default:
    /// a request is then answered without `ui.mcpApps` and a `session.warning` says why.
    pub mcp_apps_enabled: bool,
    /// The model for sessions that name no provider (operator flags, or the runtime's own
    /// `COPILOT_API_URL` route). When set, every session gets a
    /// [`ModelAgent`](crate::agent::ModelAgent); without it, only sessions with their own
    /// `provider` do, and the others keep [`HostConfig::agent`].
    pub model_default: Option<ServerDefault>,
    /// Deadlines (first byte, idle, total), retries and limits of every model call.
    pub model_call: CallConfig,
    /// Which hosts a client-chosen provider `baseUrl` may reach. Default: all.
    pub model_base_urls: BaseUrlPolicy,
}

impl HostConfig {
    /// The default configuration with the scripted agent playing `scenario`.
    pub fn with_scenario(scenario: Scenario) -> Self {
        HostConfig {
            agent: scripted_factory(scenario),
            ..HostConfig::default()
        }
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            seed: 0,
            connection_token: None,
            agent: scripted_factory(Scenario::default()),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            frame_limits: FrameLimits::default(),
            outbox_budget_bytes: DEFAULT_OUTBOX_BUDGET,
            workspace_root: None,
            report_persisted_events: false,
            mcp_apps_enabled: false,
            shell_enabled: false,
            model_default: None,
            model_call: CallConfig::default(),
            model_base_urls: BaseUrlPolicy::AllowAll,
        }
    }
}

impl fmt::Debug for HostConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostConfig")
            .field("seed", &self.seed)
            .field(
                "connection_token",
                &self.connection_token.as_ref().map(|_| "<set>"),
            )
            .field("version", &self.version)
            .field("frame_limits", &self.frame_limits)
            .field("outbox_budget_bytes", &self.outbox_budget_bytes)
            .field("workspace_root", &self.workspace_root)
            .field("report_persisted_events", &self.report_persisted_events)
            .field("mcp_apps_enabled", &self.mcp_apps_enabled)
            .field("shell_enabled", &self.shell_enabled)
            .field(
                "model_default",
                &self
                    .model_default
                    .as_ref()
                    .map(|d| d.provider.host().to_owned()),
            )
            .field("model_call", &self.model_call)
            .field("model_base_urls", &self.model_base_urls)
            .finish_non_exhaustive()
    }
}
