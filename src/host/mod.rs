//! The session host: many connections, many sessions, one deterministic state machine.
//!
//! The host is dialect-neutral: it owns connections (framing, outboxes, correlation),
//! sessions and their event log, the fan-out of events with the audience rules, the pending
//! request bridges (tools, permissions, elicitation, sampling, commands, canvases), the
//! capability table and timers. What a client's messages mean and how an event looks on its
//! wire is decided by the connection's dialect, behind the `dialect` seam (a trait the
//! dialects implement, with per-connection and per-session state kept here); the crate's
//! dialects live outside this module and are registered when the host is built.
//!
//! Inputs are `handle_*` calls, outputs are `poll_*` calls (see the crate docs for the run
//! loop). Connections attach to sessions; session events are encoded once per dialect and
//! fanned out to every attached connection by reference; client answers resolve the
//! session's pending requests exactly once.

mod api;
pub(crate) mod cluster;
mod config;
pub(crate) mod dialect;
pub(crate) mod effects;
pub(crate) mod extensions;
mod github_identity;
pub(crate) mod io;
pub(crate) mod local;
mod mcp;
mod mcp_http;
mod models_list;
pub(crate) mod pending;
pub(crate) mod plugins;
pub(crate) mod requests;
pub(crate) mod sessions;
mod tool_ops;

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use serde_json::Value;

use crate::agent::AgentInput;
use crate::ids::IdGenerator;
use crate::jsonrpc::OwnedId;
use crate::session::Session;
use crate::Timestamp;

pub use crate::session::ConnId;
/// The protocol a connection speaks: defined by the dialect layer
/// ([`agentwire::Dialect`](crate::Dialect)); also named here, where connections are opened.
pub use crate::Dialect;
pub use cluster::catalog::SessionSummary;
pub use cluster::forward::RelayedEventHead;
pub use cluster::relay_group::{
    BadRelayFrame, RelayFrame, RELAYED_CALLER_KEPT_FOR, RELAY_AWAITING, RELAY_DELTAS_EMITTED,
    RELAY_FORMER_MEMBER, RELAY_HANDSHAKE_ID, RELAY_LAST_EVENT, RELAY_SESSION_BUSY,
};
pub use cluster::restore::RestoreError;
pub use cluster::ClusterApi;
pub use config::{
    ExtensionsConfig, HostConfig, McpSpawnPolicy, ToolServerConfig, CLIENT_TOOLS_SERVER,
    DEFAULT_OUTBOX_BUDGET,
};
pub use effects::output::{ClusterOutput, ConnectionOutput, Output, StoreOutput};
pub(crate) use effects::shell::ShellStream;
pub use effects::{Effect, EffectEvent, EffectId, EffectOp, ProcessSpec};
pub use github_identity::GitHubIdentity;
pub use io::outbox::{Drops, Outbox, OutboxOverflow};
pub(crate) use mcp::discovered::GitHubMcpToolConfig;
pub use requests::canvas::CANVAS_TOOLS;
pub use requests::client_calls::CLIENT_CALL_TIMEOUT;
pub use tool_ops::{image_media_type, FileReply, FileRequest};

pub(crate) use dialect::{DialectHandler, DialectId, ServerRequest, SessionChange};
pub(crate) use effects::shell::{shell_argv, ProcessInfo, ProcessRefused};
pub(crate) use github_identity::IdentityLookup;
pub(crate) use mcp::apps::AppRequest;
pub(crate) use pending::{AnswerTo, Pending};
pub(crate) use requests::canvas::{ActionParams, CanvasReply, CloseParams, OpenParams};
pub(crate) use requests::permission::{always_decision, command_ids, PermissionPrompt};
pub(crate) use requests::remote_fs::{FsAnswer, FsPrimitive};
pub(crate) use sessions::policy::HistoryError;
pub(crate) use sessions::skills::SkillInfo;

use io::conn_table::ConnTable;

/// A live session: its data, its agent and its pending requests.
struct Live {
    session: Session,
    agent: Option<Box<dyn crate::agent::Agent>>,
    /// Requests waiting for a client answer, by request id.
    pending: indexmap::IndexMap<String, Pending>,
    /// Request ids already answered (a later answer gets `{success:false}`).
    resolved: BTreeSet<String>,
    /// The agent's timer key, if armed.
    timer: Option<(Timestamp, u64)>,
    /// A turn has run since the session was loaded (decides `session.shutdown` on detach).
    ran_turn: bool,
    /// Extensions a non-extension client approved (`extension-permission-access`); their
    /// connections see `permission.requested`.
    approved_extensions: BTreeSet<String>,
    /// Slash commands enqueued with `session.commands.enqueue`, not yet offered to clients.
    command_queue: VecDeque<(String, String)>,
    /// A client answered `stopProcessingQueue`: the queue waits for the next request.
    command_queue_stopped: bool,
    /// Open canvas instances by `instanceId` (see `canvas.rs`).
    canvases: indexmap::IndexMap<String, requests::canvas::OpenCanvas>,
    /// The dialects' own state for this session, one value per type
    /// ([`Host::session_state`]).
    states: Vec<Box<dyn Any + Send>>,
    /// What the session's clients asked of the model (secrets in memory only).
    model: crate::agent::ModelSettings,
    /// The agent is a [`crate::agent::ModelAgent`].
    model_agent: bool,
    /// The session's model requests are performed by a client (an HTTP provider
    /// connection), never by the runtime: with no provider attached they fail.
    client_transport: bool,
    /// The session's MCP servers.
    mcp: mcp::McpServers,
    /// The session's SQLite database has its starting tables (`sessions/sql.rs`).
    sql_ready: bool,
    /// Tool calls of sub-agents, by call id: the agent id their events carry
    /// (`sessions/emit.rs`).
    tool_call_agents: BTreeMap<String, String>,
    /// The runtime's route's catalog as the client serving the session sees it
    /// (`models_list.rs`).
    route_catalog: models_list::RouteCatalog,
    /// Streaming deltas emitted since the session was loaded: the main agent's and the
    /// sub-agents' (a gateway counts what its relayed clients lost with a broken link).
    deltas_emitted: [u64; 2],
    /// Agent inputs waiting for what a prompt's first model call needs (`turn_gate.rs`).
    held: VecDeque<AgentInput>,
    /// How many of the session's next queued inputs were released from `held`.
    released: usize,
    /// The first held prompt's attachments being read (`prompt_attachments.rs`).
    preparing: Option<sessions::prompt_attachments::Preparing>,
    /// The hooks its prompts pass (`prompt_hooks.rs`).
    hooks: sessions::prompt_hooks::HookState,
    /// The system prompt sections its client rewrote (`systemMessage.transform`), by id.
    system_transformed: BTreeMap<String, String>,
    /// Its instruction files' text (`instructionDirectories`).
    instructions: sessions::instructions::Instructions,
    /// Files the built-in tools changed, by turn (`enableFileChangeTracking`, `rewind.rs`).
    file_changes: sessions::rewind::FileChanges,
    /// Where and from what size client tool results are saved (`large_output.rs`).
    large_output: requests::large_output::LargeOutput,
}

/// The protocol host. See the crate docs for the run loop.
///
/// # Methods
///
/// * **Connections**: `open`, `open_dialect`, `open_with` (one connection per peer).
/// * **Inputs**: [`Host::handle_bytes`], [`Host::handle_eof`], [`Host::handle_timeout`],
///   [`Host::handle_effect`] (the runtime's reports about an [`Output::Effect`]), and the
///   runtime's own [`Host::emit_event`] and [`Host::restore_session`].
/// * **Outputs** (drain after every input): [`Host::poll_ready`] with
///   [`Host::poll_transmit`] or [`Host::poll_transmit_batch`], [`Host::poll_output`], and
///   [`Host::poll_timeout`] for the next deadline.
/// * **Queries**: [`Host::config`], [`Host::connection_count`], [`Host::session_count`],
///   [`Host::queued_bytes`], [`Host::unknown_responses`], [`Host::session_events`],
///   and the queries the dialects add (e.g. `acp_ignored_responses`).
pub struct Host {
    config: HostConfig,
    /// The dialects connections can speak, by [`DialectId`].
    dialects: &'static [&'static dyn DialectHandler],
    ids: IdGenerator,
    now: Timestamp,
    conns: ConnTable,
    sessions: BTreeMap<String, Live>,
    ready: VecDeque<ConnId>,
    outputs: VecDeque<Output>,
    timers: BTreeMap<(Timestamp, u64), TimerTarget>,
    /// Tokens handed to agents by `ask_client`.
    next_token: u64,
    timer_seq: u64,
    agent_inputs: VecDeque<(String, AgentInput)>,
    /// Frames to emit after the response currently being built (e.g. `session.start`).
    after_response: Vec<AfterResponse>,
    foreground: Option<String>,
    /// Commands the runtime is running for clients, by effect id.
    processes: BTreeMap<EffectId, ProcessInfo>,
    last_session: Option<String>,
    /// The sub-agent the next emitted event comes from (set by `SessionControl::emit_as`).
    event_agent: Option<String>,
    unknown_responses: u64,
    /// The dialects' host-wide state, one value per type ([`Host::dialect_state`]).
    dialect_states: Vec<Box<dyn std::any::Any + Send>>,
    /// Values masked in every emitted event (`secrets.addFilterValues`).
    secret_filters: Vec<String>,
    /// HTTP exchanges in flight, by call id: the session they are for and who performs them.
    http_calls: BTreeMap<u64, effects::provided_http::HttpCall>,
    /// The next [`EffectId`]'s number (one allocator for every kind of effect).
    next_effect: u64,
    /// Sessions the runtime is looking up
    /// ([`ClusterOutput::LoadSession`](effects::output::ClusterOutput::LoadSession)).
    lookups: BTreeSet<String>,
    /// Connections' relay state: forwarded connections and relay group roles (`cluster/`).
    relays: cluster::relays::Relays,
    /// The runtime said it is stopping ([`Host::runtime_stopping`]).
    runtime_stopping: bool,
    /// Sessions the runtime found in its shared log ([`ClusterApi::set_cluster_sessions`]), by id.
    cluster_sessions: BTreeMap<String, SessionSummary>,
    /// Built-in tool calls the runtime performs (file operations, `bash` commands).
    runtime_tools: tool_ops::RuntimeTools,
    /// The server's model list: the provider's cached answer and the request in flight.
    models_lists: models_list::ModelsLists,
    /// GitHub token lookups (`github_identity.rs`).
    github_identities: github_identity::GitHubIdentities,
    /// `skills.discover` reads in flight (`skills.rs`).
    skill_discoveries: sessions::skills::Discoveries,
    /// Installed plugins, marketplaces and the plugins requests (`plugins.rs`).
    plugins: plugins::Plugins,
    /// User settings and signed-in accounts (`local/`).
    local: local::LocalState,
    /// Sessions' spans, when they are exported ([`HostConfig::telemetry`],
    /// `sessions/telemetry.rs`).
    spans: Option<sessions::telemetry::SpanExport>,
    /// Connections that provide the file storage of the sessions they attach to, with the
    /// state directory they asked for (where each session's state is kept too).
    file_providers: BTreeMap<ConnId, Option<String>>,
    /// File providers that keep a SQLite database per session (`remote_fs.rs`).
    sqlite_providers: BTreeSet<ConnId>,
    /// Sessions' state kept in their file providers' storage (`state_files.rs`).
    state_mirrors: requests::state_files::StateMirrors,
    /// Child processes of MCP servers, by process id: their session and server name.
    mcp_processes: BTreeMap<u64, (String, String)>,
    /// The ACP agent process sessions run on ([`HostConfig::acp_agent`]).
    acp: sessions::acp_agents::AcpAgents,
    /// Tokens naming requests on the MCP clients.
    next_mcp_token: u64,
    /// MCP servers every new session starts with (`mcp.config.*`, in memory), by name: the
    /// configuration as the client sent it and as parsed.
    mcp_user_config: indexmap::IndexMap<String, (Value, crate::mcp::McpServerConfig)>,
    /// User MCP servers turned off (`mcp.config.disable`): new sessions do not start them.
    mcp_user_disabled: std::collections::BTreeSet<String>,
    /// Sessions whose agent inputs are held (`turn_gate.rs`).
    gated: BTreeSet<String>,
    /// HTTP exchanges of MCP servers (Streamable HTTP), by call id: session and server.
    mcp_http_calls: BTreeMap<u64, (String, String)>,
    /// `session.mcp.executeSampling` runs in flight, by `requestId`.
    sampling_execs: BTreeMap<String, mcp::sampling::SamplingExec>,
    /// Rewinds restoring their files (`sessions/rewind.rs`), by key.
    rewinds: BTreeMap<u64, sessions::rewind::PendingRewind>,
    /// The next rewind's key.
    next_rewind: u64,
    /// Ephemeral queries waiting for the server default's model to be chosen.
    waiting_queries: Vec<mcp::sampling::WaitingQuery>,
    /// Their HTTP exchanges, by call id.
    sampling_http: BTreeMap<u64, String>,
    /// The latest frame of each key broadcast with `broadcast_latest` (coalesced per
    /// connection).
    latest: io::latest::LatestFrames,
    /// Location approvals and trusted folders (`permission_rules`).
    permission_store: requests::permission_rules::HostPermissions,
    /// Extension processes and factory runs (`extensions.rs`).
    extensions: extensions::Extensions,
}

/// What a deadline in the host's timer map is for.
enum TimerTarget {
    /// The session's agent asked for a timer.
    Agent(String),
    /// A server-to-client request on a connection is due.
    ClientCall(ConnId, OwnedId),
    /// A dialect's own request on a connection is due.
    Dialect(DialectId, ConnId, OwnedId),
    /// The provider's model list (HTTP call id) is due.
    ModelsList(u64),
    /// A GitHub token lookup (HTTP call id) is due.
    GitHubIdentity(u64),
    /// A built-in `bash` call's command (its process) ran out of time.
    ToolShell(EffectId),
    /// A deadline of a session's MCP server (session, server name).
    Mcp(String, String),
    /// A deadline of a `session.mcp.executeSampling` run (its `requestId`).
    Sampling(String),
    /// A deadline of the ACP agent process's client.
    AcpAgent,
}

/// Work deferred until the current response has been queued.
pub(crate) enum AfterResponse {
    /// Emit a session event.
    Emit {
        session: String,
        event_type: &'static str,
        data: Value,
        ephemeral: bool,
    },
    /// An ephemeral event for one attached connection only.
    EmitTo {
        session: String,
        event_type: &'static str,
        data: Value,
        only: ConnId,
    },
    /// Tell every dialect about a session change.
    SessionChanged {
        change: SessionChange,
        session: String,
    },
    /// An extension created the session: ask for its permission access after `session.start`.
    ExtensionAccess { session: String, extension: String },
    /// Start the session's extensions for the client that created it (after `session.start`).
    StartExtensions {
        session: String,
        owner: ConnId,
        sdk_path: Option<String>,
    },
    /// Start the session's MCP servers (after `session.start`).
    StartMcp {
        session: String,
        configs: Vec<crate::mcp::McpServerConfig>,
    },
    /// Ask the runtime to shut down ([`ConnectionOutput::Shutdown`](effects::output::ConnectionOutput::Shutdown)).
    Shutdown { reason: String },
}

impl Host {
    /// A host with no connections and no sessions whose connections speak one of `dialects`
    /// (a connection's [`DialectId`] is its index in the table).
    pub(crate) fn with_dialects(
        config: HostConfig,
        dialects: &'static [&'static dyn DialectHandler],
    ) -> Self {
        let spans = config
            .telemetry
            .as_ref()
            .map(|t| sessions::telemetry::SpanExport::new(config.seed, t.capture_content));
        Host {
            ids: IdGenerator::for_node(config.seed, config.node_id.as_deref()),
            lookups: BTreeSet::new(),
            relays: Default::default(),
            runtime_stopping: false,
            cluster_sessions: BTreeMap::new(),
            config,
            dialects,
            now: Timestamp::EPOCH,
            conns: ConnTable::default(),
            sessions: BTreeMap::new(),
            ready: VecDeque::new(),
            outputs: VecDeque::new(),
            timers: BTreeMap::new(),
            next_token: 1,
            timer_seq: 0,
            agent_inputs: VecDeque::new(),
            after_response: Vec::new(),
            foreground: None,
            processes: BTreeMap::new(),
            last_session: None,
            event_agent: None,
            unknown_responses: 0,
            dialect_states: Vec::new(),
            secret_filters: Vec::new(),
            http_calls: BTreeMap::new(),
            next_effect: 1,
            runtime_tools: tool_ops::RuntimeTools::default(),
            models_lists: models_list::ModelsLists::default(),
            github_identities: github_identity::GitHubIdentities::default(),
            skill_discoveries: sessions::skills::Discoveries::default(),
            plugins: plugins::Plugins::default(),
            local: local::LocalState::default(),
            spans,
            file_providers: BTreeMap::new(),
            sqlite_providers: BTreeSet::new(),
            state_mirrors: Default::default(),
            mcp_processes: BTreeMap::new(),
            extensions: Default::default(),
            acp: Default::default(),
            next_mcp_token: 1,
            mcp_user_config: indexmap::IndexMap::new(),
            mcp_user_disabled: std::collections::BTreeSet::new(),
            gated: BTreeSet::new(),
            mcp_http_calls: BTreeMap::new(),
            sampling_execs: BTreeMap::new(),
            waiting_queries: Vec::new(),
            rewinds: BTreeMap::new(),
            next_rewind: 0,
            sampling_http: BTreeMap::new(),
            latest: io::latest::LatestFrames::default(),
            permission_store: requests::permission_rules::HostPermissions::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("now", &self.now)
            .field("connections", &self.conns.len())
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}
