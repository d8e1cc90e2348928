//! The host's configuration: everything that varies between runs comes in here or through
//! inputs.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::agent::{scripted_factory, AgentFactory, Scenario};
use crate::frame::FrameLimits;
use crate::model::{BaseUrlPolicy, CallConfig, ServerDefault};

/// Default per-connection outbox budget: 8 MiB.
pub const DEFAULT_OUTBOX_BUDGET: usize = 8 * 1024 * 1024;

/// Host configuration. Everything that varies between runs comes in here or through inputs.
///
/// Start from [`HostConfig::default`] (or [`HostConfig::with_scenario`]) and change what
/// differs with the `with_*` setters; the fields can be read and assigned too. The struct is
/// `#[non_exhaustive]`, so new settings (with their defaults) are not a breaking change:
///
/// ```
/// use agentwire::{HostConfig, Scenario};
///
/// let config = HostConfig::with_scenario(Scenario::default())
///     .with_seed(7)
///     .with_shell_enabled(true);
/// assert_eq!(config.seed, 7);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct HostConfig {
    /// Seed for event and request ids (a whole run replays from its inputs and this seed).
    pub seed: u64,
    /// When set, clients must `connect` with this token first (`COPILOT_CONNECTION_TOKEN`).
    pub connection_token: Option<String>,
    /// Makes each session's agent. Default: the scripted agent with the built-in scenario.
    pub agent: AgentFactory,
    /// The ACP agent process (program and arguments) that sessions run by an ACP agent share;
    /// set it with [`HostConfig::with_acp_agent`]. One process serves every such session; it is started
    /// for the first one and again after it ends.
    pub acp_agent: Option<Vec<String>>,
    /// Where the runtime serves sessions' client tools to the ACP agent (a loopback HTTP
    /// listener whose connections the client-tools server answers);
    /// `None`: the agent is not offered them. See [`crate::tool_server`].
    pub tool_server: Option<ToolServerConfig>,
    /// Version reported by `connect` and `status.get`.
    pub version: String,
    /// Framing limits for every connection.
    pub frame_limits: FrameLimits,
    /// Byte budget of each connection's outbox (see [`Outbox`](super::Outbox) for the overflow policy).
    pub outbox_budget_bytes: usize,
    /// Directory reported as `<root>/session-state/<id>` in `workspacePath` (none: omitted).
    pub workspace_root: Option<String>,
    /// The server process's working directory: the working directory of a session created
    /// without one (as the real runtime uses its own), shown in `session.start`'s
    /// `context.cwd`; the built-in tools resolve relative paths and run `bash` there. The
    /// core reads no environment: the runtime sets it (the driver fills in the process's
    /// current directory when it is unset). `None`: such a session has no working directory.
    pub server_cwd: Option<String>,
    /// Emit [`StoreOutput::Persist`](super::StoreOutput::Persist) for every persisted event and
    /// [`StoreOutput::SessionDeleted`](super::StoreOutput::SessionDeleted) for
    /// deletions, so a runtime can keep a durable session store. Off by default.
    pub report_persisted_events: bool,
    /// Let every client run shell commands (`session.shell.exec`,
    /// `session.shell.executeUserRequested`) through the runtime. Off by default: only
    /// connections that passed the connection token may, and the methods fail with a reason
    /// for the others.
    pub shell_enabled: bool,
    /// Offer model agents the built-in tools (`view`, `create`, `edit`, `grep`, `glob`,
    /// `bash`; each behind its permission prompt). On by default.
    pub builtin_tools: bool,
    /// Honour `requestMcpApps` (the runtime's `COPILOT_MCP_APPS=true` gate). Off by default:
    /// a request is then answered without `ui.mcpApps` and a `session.warning` says why.
    pub mcp_apps_enabled: bool,
    /// Approve every permission prompt of every session without asking (`--yolo`): no
    /// `permission.*` events, the tool call runs at once. Off by default.
    pub approve_all_permissions: bool,
    /// The GitHub API that says whose a token is (`GET {url}/copilot_internal/user`): a
    /// session created with its own `gitHubToken` is created only when it answers for the
    /// token (see `github_identity.rs`). `None`: tokens are kept unverified.
    pub github_api_url: Option<String>,
    /// The model for sessions that name no provider (operator flags, or the runtime's own
    /// `COPILOT_API_URL` route). When set, every session gets a
    /// [`ModelAgent`](crate::agent::ModelAgent); without it, only sessions with their own
    /// `provider` do, and the others keep [`HostConfig::agent`].
    pub model_default: Option<ServerDefault>,
    /// Deadlines (first byte, idle, total), retries and limits of every model call.
    pub model_call: CallConfig,
    /// The node this host runs as, in a cluster: mixed into the id generator's seed so two
    /// nodes started with the same [`HostConfig::seed`] never generate the same ids.
    pub node_id: Option<String>,
    /// A request naming a session that is not loaded waits for the runtime to look it up
    /// ([`ClusterOutput::LoadSession`](super::ClusterOutput::LoadSession)) instead of failing at
    /// once (a cluster node whose sessions live in a shared log). Off by default.
    pub lookup_unknown_sessions: bool,
    /// Which hosts a client-chosen provider `baseUrl` may reach. Default: all.
    pub model_base_urls: BaseUrlPolicy,
    /// Which connections may configure stdio MCP servers (commands the runtime starts as its
    /// own user). Default: [`McpSpawnPolicy::TokenHolders`].
    pub mcp_spawn: McpSpawnPolicy,
    /// A terminal UI shows the foreground session (`agentwire --ui-server`): clients may
    /// choose it with `session.setForeground`. Off by default (a headless server, where that
    /// method fails with the runtime's "Not running in TUI+server mode").
    pub foreground_ui: bool,
    /// The data directory (the CLI's `--data-dir`: `$COPILOT_HOME`, else `~/.agentwire`)
    /// where installed plugins and registered plugin marketplaces live
    /// (`installed-plugins/…` and `plugins.json`; see `plugins.rs`). The host reads and
    /// writes it only through file effects. `None`: the `plugins.*` methods fail, saying the
    /// server has no data directory.
    pub data_dir: Option<String>,
    /// Extensions (the runtime's `EXTENSIONS` feature flag, which the runtime reads from
    /// `COPILOT_CLI_ENABLED_FEATURE_FLAGS`): a session created with `requestExtensions`
    /// starts the extensions it finds (`.github/extensions/<name>/extension.mjs` in its
    /// working directory, then [`ExtensionsConfig::user_dirs`]) as Node processes that join
    /// it over their stdio. `None` (the default): no extension is started.
    pub extensions: Option<ExtensionsConfig>,
    /// OpenTelemetry spans of every session's agent invocations, appended to a file as
    /// JSON lines (the runtime's `COPILOT_OTEL_*` variables; see [`crate::telemetry`]). The
    /// host writes them only through file effects ([`FileRequest::Append`]). `None` (the
    /// default): nothing is exported.
    ///
    /// [`FileRequest::Append`]: crate::host::FileRequest::Append
    pub telemetry: Option<crate::telemetry::TelemetryConfig>,
    /// Responses calls on the runtime's route go over a WebSocket when the model offers it
    /// (`ws:/responses`) and a client performs the session's model requests (the runtime's
    /// `COPILOT_EXP_COPILOT_CLI_WEBSOCKET_RESPONSES` experiment; the `agentwire` binary turns
    /// it on unless that variable is `false`). Off by default.
    pub websocket_responses: bool,
}

/// How the host starts extensions ([`HostConfig::extensions`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtensionsConfig {
    /// The Node program extensions run with (`node` from `PATH` by default).
    pub node: String,
    /// Directories holding user extensions (`<dir>/<name>/extension.mjs`), after the
    /// project's `.github/extensions`; a name the project has is not started twice.
    pub user_dirs: Vec<String>,
}

impl Default for ExtensionsConfig {
    fn default() -> Self {
        ExtensionsConfig {
            node: "node".to_owned(),
            user_dirs: Vec::new(),
        }
    }
}

impl ExtensionsConfig {
    /// Extensions run with the `node` from `PATH` and no user extension directories.
    pub fn new() -> Self {
        ExtensionsConfig::default()
    }

    /// Sets [`ExtensionsConfig::node`].
    pub fn with_node(mut self, node: impl Into<String>) -> Self {
        self.node = node.into();
        self
    }

    /// Sets [`ExtensionsConfig::user_dirs`].
    pub fn with_user_dirs(mut self, dirs: Vec<String>) -> Self {
        self.user_dirs = dirs;
        self
    }
}

/// Which connections may make the runtime start stdio MCP servers (`mcpServers` entries with
/// a `command`): such a server runs as the runtime's user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum McpSpawnPolicy {
    /// Only connections that passed the connection token (none when no token is set). The
    /// default.
    #[default]
    TokenHolders,
    /// Every connection (the runtime serves one trusted client, e.g. over stdio, or the
    /// operator opted in).
    Anyone,
}

impl HostConfig {
    /// The default configuration with the scripted agent playing `scenario`.
    pub fn with_scenario(scenario: Scenario) -> Self {
        HostConfig {
            agent: scripted_factory(scenario),
            ..HostConfig::default()
        }
    }
    /// Sets [`HostConfig::seed`].
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`HostConfig::extensions`].
    pub fn with_extensions(mut self, extensions: Option<ExtensionsConfig>) -> Self {
        self.extensions = extensions;
        self
    }

    /// Sets [`HostConfig::websocket_responses`].
    #[must_use]
    pub fn with_websocket_responses(mut self, on: bool) -> Self {
        self.websocket_responses = on;
        self
    }

    /// Sets [`HostConfig::telemetry`].
    #[must_use]
    pub fn with_telemetry(mut self, telemetry: Option<crate::telemetry::TelemetryConfig>) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// Sets [`HostConfig::foreground_ui`].
    pub fn with_foreground_ui(mut self, on: bool) -> Self {
        self.foreground_ui = on;
        self
    }

    /// Sets [`HostConfig::connection_token`].
    pub fn with_connection_token(mut self, token: Option<String>) -> Self {
        self.connection_token = token;
        self
    }

    /// Sets [`HostConfig::agent`].
    pub fn with_agent(mut self, agent: AgentFactory) -> Self {
        self.agent = agent;
        self
    }

    /// Sets [`HostConfig::version`].
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Sets [`HostConfig::frame_limits`].
    pub fn with_frame_limits(mut self, limits: FrameLimits) -> Self {
        self.frame_limits = limits;
        self
    }

    /// Sets [`HostConfig::outbox_budget_bytes`].
    pub fn with_outbox_budget_bytes(mut self, bytes: usize) -> Self {
        self.outbox_budget_bytes = bytes;
        self
    }

    /// Sets [`HostConfig::data_dir`].
    pub fn with_data_dir(mut self, dir: Option<String>) -> Self {
        self.data_dir = dir;
        self
    }

    /// Sets [`HostConfig::workspace_root`].
    pub fn with_workspace_root(mut self, root: Option<String>) -> Self {
        self.workspace_root = root;
        self
    }

    /// Sets [`HostConfig::report_persisted_events`].
    pub fn with_report_persisted_events(mut self, on: bool) -> Self {
        self.report_persisted_events = on;
        self
    }

    /// Sets [`HostConfig::builtin_tools`].
    pub fn with_builtin_tools(mut self, on: bool) -> Self {
        self.builtin_tools = on;
        self
    }

    /// Sets [`HostConfig::shell_enabled`].
    pub fn with_shell_enabled(mut self, on: bool) -> Self {
        self.shell_enabled = on;
        self
    }

    /// Sets [`HostConfig::mcp_spawn`].
    pub fn with_mcp_spawn(mut self, policy: McpSpawnPolicy) -> Self {
        self.mcp_spawn = policy;
        self
    }

    /// Sets [`HostConfig::mcp_apps_enabled`].
    pub fn with_mcp_apps_enabled(mut self, on: bool) -> Self {
        self.mcp_apps_enabled = on;
        self
    }

    /// Sets [`HostConfig::github_api_url`].
    pub fn with_github_api_url(mut self, url: Option<String>) -> Self {
        self.github_api_url = url;
        self
    }

    /// Sets [`HostConfig::approve_all_permissions`] (`--yolo`).
    pub fn with_approve_all_permissions(mut self, on: bool) -> Self {
        self.approve_all_permissions = on;
        self
    }

    /// Sets [`HostConfig::model_default`] (the model for sessions that name no provider).
    pub fn with_model_default(mut self, default: Option<ServerDefault>) -> Self {
        self.model_default = default;
        self
    }

    /// Sets [`HostConfig::model_call`] (deadlines, retries and limits of model calls).
    pub fn with_model_call(mut self, call: CallConfig) -> Self {
        self.model_call = call;
        self
    }

    /// Sets [`HostConfig::node_id`].
    pub fn with_node_id(mut self, node_id: Option<String>) -> Self {
        self.node_id = node_id;
        self
    }

    /// Sets [`HostConfig::lookup_unknown_sessions`].
    pub fn with_lookup_unknown_sessions(mut self, on: bool) -> Self {
        self.lookup_unknown_sessions = on;
        self
    }

    /// Sets [`HostConfig::server_cwd`] (the working directory of sessions created without one).
    pub fn with_server_cwd(mut self, cwd: Option<String>) -> Self {
        self.server_cwd = cwd;
        self
    }

    /// Sets [`HostConfig::model_base_urls`] (which hosts client-chosen `baseUrl`s may reach).
    pub fn with_model_base_urls(mut self, policy: BaseUrlPolicy) -> Self {
        self.model_base_urls = policy;
        self
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            seed: 0,
            connection_token: None,
            agent: scripted_factory(Scenario::default()),
            acp_agent: None,
            tool_server: None,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            frame_limits: FrameLimits::default(),
            outbox_budget_bytes: DEFAULT_OUTBOX_BUDGET,
            workspace_root: None,
            server_cwd: None,
            report_persisted_events: false,
            mcp_apps_enabled: false,
            mcp_spawn: McpSpawnPolicy::TokenHolders,
            shell_enabled: false,
            builtin_tools: true,
            approve_all_permissions: false,
            github_api_url: None,
            model_default: None,
            model_call: CallConfig::default(),
            model_base_urls: BaseUrlPolicy::AllowAll,
            node_id: None,
            lookup_unknown_sessions: false,
            foreground_ui: false,
            extensions: None,
            telemetry: None,
            websocket_responses: false,
            data_dir: None,
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
            .field("server_cwd", &self.server_cwd)
            .field("report_persisted_events", &self.report_persisted_events)
            .field("mcp_apps_enabled", &self.mcp_apps_enabled)
            .field("mcp_spawn", &self.mcp_spawn)
            .field("shell_enabled", &self.shell_enabled)
            .field("builtin_tools", &self.builtin_tools)
            .field("approve_all_permissions", &self.approve_all_permissions)
            .field("github_api_url", &self.github_api_url)
            .field(
                "model_default",
                &self
                    .model_default
                    .as_ref()
                    .map(|d| d.provider.host().to_owned()),
            )
            .field("model_call", &self.model_call)
            .field("model_base_urls", &self.model_base_urls)
            .field("node_id", &self.node_id)
            .field("lookup_unknown_sessions", &self.lookup_unknown_sessions)
            .field("foreground_ui", &self.foreground_ui)
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl HostConfig {
    /// Runs sessions on the ACP agent `argv` (program and arguments): every session whose
    /// client names no BYOK provider gets an
    /// [`AcpSessionAgent`](crate::agent::acp::AcpSessionAgent) ([`HostConfig::agent`]), and
    /// [`HostConfig::acp_agent`] is the process they share.
    pub fn with_acp_agent(mut self, argv: Vec<String>) -> Self {
        self.acp_agent = Some(argv);
        self.agent = std::sync::Arc::new(|_session_id: &str| {
            Box::new(crate::agent::acp::AcpSessionAgent::new(None)) as Box<dyn crate::agent::Agent>
        });
        self
    }
}

// ----- the client-tools server an ACP agent reaches (served by `crate::tool_server`) -----

/// The name the client-tools server has in the agent's `session/new` (the agent names its
/// tools after it, e.g. `client-tools-get_weather` in the Copilot CLI).
pub const CLIENT_TOOLS_SERVER: &str = "client-tools";

/// Where the runtime serves the client-tools MCP server, and the key of its secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct ToolServerConfig {
    /// The server's base URL, e.g. `http://127.0.0.1:40123` (a loopback listener the runtime
    /// bound; sessions are served under `/mcp/{session}`).
    pub url: String,
    /// The key per-session secrets derive from: random, from the runtime (the core takes no
    /// OS randomness). Never sent anywhere.
    pub key: String,
}

impl std::fmt::Debug for ToolServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServerConfig")
            .field("url", &self.url)
            .field("key", &"<redacted>")
            .finish()
    }
}

impl HostConfig {
    /// Sets [`HostConfig::tool_server`].
    pub fn with_tool_server(mut self, server: Option<ToolServerConfig>) -> Self {
        self.tool_server = server;
        self
    }
}

impl ToolServerConfig {
    /// The bearer secret of `session`'s server: hex of `SHA-256(key, 0, session)`.
    pub fn session_secret(&self, session: &str) -> String {
        let mut hash = Sha256::new();
        hash.update(self.key.as_bytes());
        hash.update([0u8]);
        hash.update(session.as_bytes());
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The ACP `McpServer` entry (`type: "http"`) that offers `session`'s client tools.
    pub fn acp_server_entry(&self, session: &str) -> serde_json::Value {
        serde_json::json!({
            "type": "http",
            "name": CLIENT_TOOLS_SERVER,
            "url": format!("{}/mcp/{}", self.url.trim_end_matches('/'), percent_encode(session)),
            "headers": [{"name": "Authorization",
                         "value": format!("Bearer {}", self.session_secret(session))}],
        })
    }
}

/// `text` with every byte outside RFC 3986's unreserved set percent-encoded (a path segment).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
