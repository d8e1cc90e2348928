//! Typed params of the Copilot SDK methods (only the fields the host acts on; the rest of
//! what a client sends is accepted and ignored).

use serde::Deserialize;
use serde_json::Value;

use crate::session::{Attachment, CommandDecl, ToolDecl};

/// `session.create` / `session.resume` params.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct AttachParams {
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub tools: Vec<ToolDecl>,
    pub commands: Vec<CommandDecl>,
    pub request_permission: bool,
    pub request_elicitation: bool,
    pub request_user_input: bool,
    pub request_exit_plan_mode: bool,
    pub request_auto_mode_switch: bool,
    pub hooks: bool,
    pub request_sampling: bool,
    pub request_mcp_apps: bool,
    pub canvases: Vec<Value>,
    pub request_canvas_renderer: bool,
    /// `requestExtensions`: start the session's extensions (on `session.create`).
    pub request_extensions: bool,
    /// `extensionSdkPath`: the SDK folder the extensions import.
    pub extension_sdk_path: Option<String>,
    /// `factories`: the factories this connection provides (an extension joining).
    pub factories: Vec<Value>,
    pub extension_info: Option<Value>,
    pub canvas_provider: Option<Value>,
    pub streaming: bool,
    pub include_sub_agent_streaming_events: Option<bool>,
    pub working_directory: Option<String>,
    pub disable_resume: bool,
    pub continue_pending_work: bool,
    /// `agentwireRelayReattach`: a cluster gateway re-attaching a client it relays (after
    /// its link broke or its owner died); the answer says whether the session is in a turn
    /// ([`crate::host::RELAY_SESSION_BUSY`]), so that the gateway can end a turn whose
    /// `session.idle` its client missed. Not a Copilot SDK field.
    #[serde(rename = "agentwireRelayReattach")]
    pub relay_reattach: bool,
    /// [`crate::host::RELAY_FORMER_MEMBER`]: with `agentwireRelayReattach`, the relayed
    /// connection this one replaces (its link broke, this host is still the owner).
    #[serde(rename = "agentwireFormerMember")]
    pub relay_former_member: Option<u64>,
    /// [`crate::host::RELAY_AWAITING`]: the ids of that connection's `session.sendAndWait`s
    /// the gateway's client still waits for, to be answered on this one.
    #[serde(rename = "agentwireAwaiting")]
    pub relay_awaiting: Vec<Value>,
    /// `customAgents` (`session.agent.*`).
    pub custom_agents: Vec<Value>,
    /// The BYOK `provider` (`session.provider.getEndpoint`).
    pub provider: Option<Value>,
    /// `reasoningEffort` (`session.model.getCurrent`).
    pub reasoning_effort: Option<String>,
}

impl AttachParams {
    /// What the connection declared; `mcp_apps_enabled` is the host's MCP Apps gate.
    pub(super) fn attachment(&self, mcp_apps_enabled: bool) -> Attachment {
        Attachment {
            streaming: self.streaming,
            include_sub_agent_streaming: self.include_sub_agent_streaming_events.unwrap_or(true),
            request_permission: self.request_permission,
            request_elicitation: self.request_elicitation,
            request_user_input: self.request_user_input,
            request_exit_plan_mode: self.request_exit_plan_mode,
            request_auto_mode_switch: self.request_auto_mode_switch,
            hooks: self.hooks,
            request_sampling: self.request_sampling,
            mcp_apps: self.request_mcp_apps && mcp_apps_enabled,
            canvases: self.canvases.clone(),
            factories: self.factories.clone(),
            canvas_renderer: self.request_canvas_renderer,
            canvas_provider_id: self
                .canvas_provider
                .as_ref()
                .and_then(|p| p.get("id"))
                .and_then(Value::as_str)
                .filter(|id| !id.starts_with("connection:") && !id.is_empty())
                .map(str::to_owned),
            extension_name: self
                .canvas_provider
                .as_ref()
                .and_then(|p| p.get("name"))
                .or_else(|| self.extension_info.as_ref().and_then(|i| i.get("name")))
                .and_then(Value::as_str)
                .map(str::to_owned),
            extension: self.extension_info.as_ref().map(|info| {
                info.get("id")
                    .or_else(|| info.get("extensionId"))
                    .or_else(|| info.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("extension")
                    .to_owned()
            }),
            tools: self.tools.clone(),
            commands: self.commands.clone(),
        }
    }
}

/// Params naming one session.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionParams {
    pub session_id: String,
}

/// `connect` params.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ConnectParams {
    pub token: Option<String>,
    pub supported_task_kinds: Option<Vec<String>>,
    #[serde(rename = "enableGitHubTelemetryForwarding")]
    pub telemetry_forwarding: bool,
}

/// `ping` params.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PingParams {
    pub message: Option<String>,
}

/// `session.send` / `session.sendAndWait` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SendParams {
    pub session_id: String,
    pub prompt: String,
    /// The prompt's attachments as sent (`user.message.attachments`).
    #[serde(default)]
    pub attachments: Vec<Value>,
    /// `agentMode`, carried on `user.message`.
    #[serde(default)]
    pub agent_mode: Option<String>,
    /// `requestHeaders`: extra headers for this turn's model calls.
    #[serde(default)]
    pub request_headers: Option<serde_json::Map<String, Value>>,
    /// `mode`: `enqueue` (the default: wait for the running turn) or `immediate` (steer
    /// the running turn).
    #[serde(default)]
    pub mode: Option<String>,
}

/// `session.permissions.handlePendingPermissionRequest` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PermissionAnswer {
    pub session_id: String,
    pub request_id: String,
    pub result: Value,
}

/// `session.tools.handlePendingToolCall` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolAnswer {
    pub session_id: String,
    pub request_id: String,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<Value>,
}

/// `session.list` params.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ListParams {
    pub filter: Option<ListFilter>,
}

/// `session.list` filter.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ListFilter {
    pub cwd: Option<String>,
}

/// `session.ui.handlePendingElicitation` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ElicitationAnswer {
    pub session_id: String,
    pub request_id: String,
    pub result: Value,
}

/// `session.commands.execute` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExecuteCommand {
    pub session_id: String,
    pub command_name: String,
    #[serde(default)]
    pub args: String,
}

/// `session.commands.handlePendingCommand` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CommandAnswer {
    pub session_id: String,
    pub request_id: String,
    #[serde(default)]
    pub error: Option<String>,
}

/// `session.ui.handlePendingSampling` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SamplingAnswer {
    pub session_id: String,
    pub request_id: String,
    #[serde(default)]
    pub response: Option<Value>,
}

/// `session.commands.enqueue` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EnqueueParams {
    pub session_id: String,
    pub command: String,
}

/// `session.commands.respondToQueuedCommand` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QueuedAnswer {
    pub session_id: String,
    pub request_id: String,
    pub result: Value,
}
