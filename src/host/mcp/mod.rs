//! A session's MCP servers: started with the session, stopped with it.
//!
//! A dialect hands the host the session's server configurations
//! ([`Host::start_mcp_servers`]). Each stdio server is a child process the runtime starts
//! ([`EffectOp::ProcessSpawn`] with stdin) with an [`McpClient`] speaking to it through
//! [`EffectOp::ProcessWrite`] and the runtime's reports about the process
//! ([`Host::handle_effect`]: stdout, stderr, the exit or a failed spawn). The client's
//! deadlines are host timers.
//!
//! Once every server is connected or has failed, the session gets
//! `session.mcp_servers_loaded {servers: [{name, status, transport, error?}]}` (ephemeral);
//! every status change is also a `session.mcp_server_status_changed` (ephemeral). A server
//! that exits, hangs or breaks the protocol fails its pending calls with the reason; the
//! session carries on. `session.delete`, an unload and the server's shutdown stop the
//! servers: the process group is killed ([`EffectOp::ProcessKill`]).

pub(in crate::host) mod apps;
pub(in crate::host) mod discovered;
pub(in crate::host) mod oauth;
pub(in crate::host) mod requests;
pub(in crate::host) mod sampling;
pub(in crate::host) mod tools;

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::mcp::{ClientEvent, McpClient, McpServerConfig, McpTransport};
use crate::Timestamp;

use super::{
    ConnId, EffectId, EffectOp, Host, McpSpawnPolicy, ProcessSpec, ShellStream, TimerTarget,
};

/// Where a server is, as the runtime names it (`McpServerStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum McpStatus {
    Pending,
    Connected,
    Failed,
    /// A remote server whose authorization the session declined before it connected.
    NeedsAuth,
    Stopped,
}

impl McpStatus {
    fn as_str(self) -> &'static str {
        match self {
            McpStatus::Pending => "pending",
            McpStatus::Connected => "connected",
            McpStatus::Failed => "failed",
            McpStatus::NeedsAuth => "needs-auth",
            McpStatus::Stopped => "stopped",
        }
    }
}

/// What one of a server's in-flight requests is for.
#[derive(Clone, Debug)]
pub(crate) enum McpCall {
    /// A tool call of the session's agent: the pending request `request_id` ends it.
    Tool { request_id: String },
    /// The `ui://` resource of a finished tool call (MCP Apps): the call completes with it.
    UiResource {
        tool_call_id: String,
        text: String,
        extra: serde_json::Map<String, Value>,
    },
    /// A client's request (`session.mcp.apps.readResource` / `callTool`) is answered with
    /// the result; an app's tool call also emits `mcp_app.tool_call_complete`.
    Caller {
        conn: ConnId,
        id: crate::jsonrpc::OwnedId,
        method: &'static str,
        app_tool: Option<Box<super::mcp::apps::AppToolCall>>,
    },
}

/// One configured server of a session.
pub(crate) struct McpServer {
    pub(crate) config: McpServerConfig,
    pub(crate) client: McpClient,
    pub(crate) process: Option<u64>,
    pub(crate) status: McpStatus,
    pub(crate) error: Option<String>,
    timer: Option<(Timestamp, u64)>,
    /// In-flight requests by token.
    pub(crate) calls: BTreeMap<u64, McpCall>,
    /// Tool calls made while the server was starting: run once it is up (or failed).
    pub(crate) queued: Vec<super::mcp::tools::QueuedCall>,
    /// The Streamable HTTP transport (for an `http` server).
    pub(crate) http: Option<super::mcp_http::HttpTransport>,
}

/// A session's servers.
#[derive(Default)]
pub(crate) struct McpServers {
    pub(crate) servers: indexmap::IndexMap<String, McpServer>,
    /// `session.mcp_servers_loaded` was emitted for the current set.
    announced: bool,
    /// Stdio servers' `env` values name the runtime's own variables (the `indirect` env
    /// value mode) rather than being the values (`direct`, the default).
    indirect_env: bool,
    /// Servers the session finds (plugin directories, the built-in GitHub server), loaded
    /// lazily (`discovered.rs`).
    pub(crate) discovery: discovered::Discovery,
}

/// Why a connection may not configure stdio MCP servers.
pub(crate) const SPAWN_REFUSED: &str = "stdio MCP servers run commands as the server's user: \
this connection may not configure them (connect over stdio, pass the connection token, or \
start agentwire with --allow-mcp-spawn)";

impl Host {
    /// Whether `conn` may configure servers that start processes
    /// ([`HostConfig::mcp_spawn`](super::HostConfig::mcp_spawn)).
    pub(crate) fn may_spawn_mcp(&self, conn: ConnId) -> bool {
        match self.config.mcp_spawn {
            McpSpawnPolicy::Anyone => true,
            McpSpawnPolicy::TokenHolders => {
                self.config.connection_token.is_some() && self.is_authenticated(conn)
            }
        }
    }

    /// Checks that `conn` may configure `configs` (stdio servers need
    /// [`Host::may_spawn_mcp`]).
    pub(crate) fn check_mcp_configs(
        &self,
        conn: ConnId,
        configs: &[McpServerConfig],
    ) -> Result<(), &'static str> {
        if configs.iter().any(McpServerConfig::spawns_process) && !self.may_spawn_mcp(conn) {
            return Err(SPAWN_REFUSED);
        }
        Ok(())
    }

    /// How the `env` values of `session`'s stdio servers started from now on are read:
    /// `indirect`, as names of the runtime's own variables; else as the values.
    pub(crate) fn set_mcp_env_indirect(&mut self, session: &str, indirect: bool) {
        if let Some(live) = self.sessions.get_mut(session) {
            live.mcp.indirect_env = indirect;
        }
    }

    /// Starts the servers of `session` that are not running yet (a server of the same name
    /// that is running keeps running).
    pub(crate) fn start_mcp_servers(&mut self, session: &str, configs: Vec<McpServerConfig>) {
        let now = self.now;
        let version = self.config.version.clone();
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let cwd = live.session.cwd.clone();
        let mut started = Vec::new();
        for config in configs {
            if let Some(old) = live.mcp.servers.get(&config.name) {
                if matches!(old.status, McpStatus::Pending | McpStatus::Connected) {
                    continue;
                }
            }
            let roots = cwd.iter().cloned().collect();
            let client = McpClient::new(&config.name, config.timeout, roots, &version);
            live.mcp.announced = false;
            started.push(config.name.clone());
            live.mcp.servers.insert(
                config.name.clone(),
                McpServer {
                    config,
                    client,
                    process: None,
                    status: McpStatus::Pending,
                    error: None,
                    timer: None,
                    calls: BTreeMap::new(),
                    queued: Vec::new(),
                    http: None,
                },
            );
        }
        for name in started {
            self.launch_mcp(session, &name, cwd.clone(), now);
        }
        self.announce_mcp_loaded(session);
    }

    fn launch_mcp(&mut self, session: &str, name: &str, cwd: Option<String>, now: Timestamp) {
        let process = self.next_effect;
        let server_indirect = self
            .sessions
            .get(session)
            .is_some_and(|l| l.mcp.indirect_env);
        let Some(server) = self.mcp_server(session, name) else {
            return;
        };
        match server.config.transport.clone() {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd: own_cwd,
            } => {
                server.process = Some(process);
                server.client.start(now);
                let id = self.next_effect_id();
                self.mcp_processes
                    .insert(process, (session.to_owned(), name.to_owned()));
                let mut argv = vec![command];
                argv.extend(args);
                let (env, env_from_host) = if server_indirect {
                    (Vec::new(), env)
                } else {
                    (env, Vec::new())
                };
                let spec = ProcessSpec {
                    argv,
                    env,
                    env_from_host,
                    cwd: own_cwd.or(cwd),
                    stdin: true,
                    timeout_ms: None,
                };
                self.push_effect(id, EffectOp::ProcessSpawn(spec));
                self.flush_mcp(session, name);
            }
            McpTransport::Http {
                legacy_sse: true, ..
            } => {
                server
                    .client
                    .stop(now, "the legacy SSE transport is not supported");
                self.flush_mcp(session, name);
            }
            McpTransport::Http { url, headers, .. } => {
                let client = server.config.oauth_client.clone();
                server.http = Some(super::mcp_http::HttpTransport::new(url, headers, client));
                server.client.start(now);
                self.flush_mcp(session, name);
            }
        }
    }

    /// The MCP servers every new session starts with (`mcp.config.*`): name → the
    /// configuration as a client sent it.
    pub(crate) fn mcp_user_configs(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.mcp_user_config
            .iter()
            .map(|(name, (raw, _))| (name.as_str(), raw))
    }

    /// The parsed user configurations a new session starts (the enabled ones).
    pub(crate) fn mcp_user_servers(&self) -> Vec<McpServerConfig> {
        self.mcp_user_config
            .iter()
            .filter(|(name, _)| !self.mcp_user_disabled.contains(*name))
            .map(|(_, (_, config))| config.clone())
            .collect()
    }

    /// Turns user configuration `name` on or off for the sessions created from now on;
    /// `false` when no such configuration exists.
    pub(crate) fn set_mcp_user_enabled(&mut self, name: &str, enabled: bool) -> bool {
        if !self.mcp_user_config.contains_key(name) {
            return false;
        }
        if enabled {
            self.mcp_user_disabled.remove(name);
        } else {
            self.mcp_user_disabled.insert(name.to_owned());
        }
        true
    }

    /// Adds, replaces (`Some`) or removes (`None`) a user configuration; returns whether the
    /// name was configured before.
    pub(crate) fn set_mcp_user_config(
        &mut self,
        name: &str,
        config: Option<(Value, McpServerConfig)>,
    ) -> bool {
        match config {
            Some(config) => self
                .mcp_user_config
                .insert(name.to_owned(), config)
                .is_some(),
            None => {
                self.mcp_user_disabled.remove(name);
                self.mcp_user_config.shift_remove(name).is_some()
            }
        }
    }

    /// The configuration of `session`'s server `name`, running or not.
    pub(crate) fn mcp_server_config(&self, session: &str, name: &str) -> Option<McpServerConfig> {
        self.mcp_servers(session)
            .find(|s| s.config.name == name)
            .map(|s| s.config.clone())
            .or_else(|| self.mcp_user_config.get(name).map(|(_, c)| c.clone()))
    }

    /// Whether `session`'s server `name` is up.
    pub(crate) fn mcp_server_running(&self, session: &str, name: &str) -> bool {
        self.mcp_servers(session)
            .any(|s| s.config.name == name && s.status == McpStatus::Connected)
    }

    /// Stops every server of `session` (process groups killed); their pending calls fail.
    pub(crate) fn stop_mcp_servers(&mut self, session: &str, reason: &str) {
        let names: Vec<String> = self
            .sessions
            .get(session)
            .map(|l| l.mcp.servers.keys().cloned().collect())
            .unwrap_or_default();
        for name in names {
            self.stop_mcp_server(session, &name, reason);
        }
    }

    /// Stops one server and forgets it.
    pub(crate) fn stop_mcp_server(&mut self, session: &str, name: &str, reason: &str) {
        let now = self.now;
        if let Some(server) = self.mcp_server(session, name) {
            server.status = McpStatus::Stopped;
            server.client.stop(now, reason);
        }
        self.flush_mcp(session, name);
        let Some(server) = self
            .sessions
            .get_mut(session)
            .and_then(|l| l.mcp.servers.shift_remove(name))
        else {
            return;
        };
        if let Some(key) = server.timer {
            self.timers.remove(&key);
        }
        if let Some(process) = server.process {
            self.kill_mcp_process(process);
        }
        if let Some(http) = &server.http {
            self.cancel_mcp_http(Host::mcp_http_exchanges(http));
        }
        self.release_held(session);
    }

    /// Stops the servers of every session (the server is shutting down).
    pub(crate) fn stop_all_mcp_servers(&mut self, reason: &str) {
        let sessions: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, l)| !l.mcp.servers.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        for session in sessions {
            self.stop_mcp_servers(&session, reason);
        }
    }

    fn kill_mcp_process(&mut self, process: u64) {
        if self.mcp_processes.remove(&process).is_some() {
            let signal = "SIGKILL".to_owned();
            self.push_effect(EffectId::new(process), EffectOp::ProcessKill { signal });
        }
    }

    pub(crate) fn mcp_server(&mut self, session: &str, name: &str) -> Option<&mut McpServer> {
        self.sessions.get_mut(session)?.mcp.servers.get_mut(name)
    }

    /// The servers of `session` (read-only).
    pub(crate) fn mcp_servers(&self, session: &str) -> impl Iterator<Item = &McpServer> {
        self.sessions
            .get(session)
            .into_iter()
            .flat_map(|l| l.mcp.servers.values())
    }

    /// After anything touched a server's client: its bytes go to the process, its deadline
    /// to the timers, its events to the session.
    pub(crate) fn flush_mcp(&mut self, session: &str, name: &str) {
        loop {
            let Some(server) = self.mcp_server(session, name) else {
                return;
            };
            let mut writes = Vec::new();
            while let Some(frame) = server.client.poll_transmit() {
                writes.push(frame);
            }
            let event = server.client.poll_event();
            let process = server.process;
            let http = server.http.is_some() && server.client.failure().is_none();
            if let Some(process) = process.filter(|p| self.mcp_processes.contains_key(p)) {
                for bytes in writes {
                    self.push_effect(EffectId::new(process), EffectOp::ProcessWrite(bytes));
                }
            } else if http {
                for frame in writes {
                    self.post_mcp(session, name, frame);
                }
            }
            let Some(event) = event else { break };
            self.mcp_event(session, name, event);
        }
        self.rearm_mcp_timer(session, name);
    }

    fn rearm_mcp_timer(&mut self, session: &str, name: &str) {
        let seq = self.timer_seq;
        let Some(server) = self
            .sessions
            .get_mut(session)
            .and_then(|l| l.mcp.servers.get_mut(name))
        else {
            return;
        };
        let due = server.client.poll_timeout();
        if server.timer.map(|(t, _)| t) == due {
            return;
        }
        if let Some(old) = server.timer.take() {
            self.timers.remove(&old);
        }
        if let Some(at) = due {
            server.timer = Some((at, seq));
            self.timer_seq += 1;
            self.timers.insert(
                (at, seq),
                TimerTarget::Mcp(session.to_owned(), name.to_owned()),
            );
        }
    }

    /// A server's deadline is due.
    pub(crate) fn mcp_timer_fired(&mut self, session: &str, name: &str, key: (Timestamp, u64)) {
        let now = self.now;
        let Some(server) = self.mcp_server(session, name) else {
            return;
        };
        if server.timer != Some(key) {
            return;
        }
        server.timer = None;
        server.client.handle_timeout(now);
        self.flush_mcp(session, name);
    }

    fn mcp_event(&mut self, session: &str, name: &str, event: ClientEvent) {
        match event {
            ClientEvent::Ready => {
                self.set_mcp_status(session, name, McpStatus::Connected, None);
                self.run_queued_mcp_calls(session, name);
            }
            ClientEvent::Failed(reason) => {
                let process = self.mcp_server(session, name).and_then(|s| s.process);
                if let Some(process) = process {
                    self.kill_mcp_process(process);
                }
                let exchanges = self
                    .mcp_server(session, name)
                    .and_then(|s| s.http.as_ref().map(Host::mcp_http_exchanges))
                    .unwrap_or_default();
                self.cancel_mcp_http(exchanges);
                let stopped = self
                    .mcp_server(session, name)
                    .is_some_and(|s| s.status == McpStatus::Stopped);
                let declined = self
                    .mcp_server(session, name)
                    .and_then(|s| s.http.as_ref())
                    .is_some_and(|h| h.auth.declined_initial());
                let status = if declined {
                    McpStatus::NeedsAuth
                } else {
                    McpStatus::Failed
                };
                if !stopped {
                    self.set_mcp_status(session, name, status, Some(reason));
                }
                self.run_queued_mcp_calls(session, name);
            }
            ClientEvent::ToolsChanged => {
                self.emit(
                    session,
                    "mcp.tools.list_changed",
                    &json!({"serverName": name}),
                    true,
                );
            }
            ClientEvent::CallDone { token, outcome } => {
                let call = self
                    .mcp_server(session, name)
                    .and_then(|s| s.calls.remove(&token));
                match call {
                    Some(McpCall::Tool { request_id }) => {
                        self.finish_mcp_tool_call(session, &request_id, outcome)
                    }
                    Some(McpCall::UiResource {
                        tool_call_id,
                        text,
                        extra,
                    }) => {
                        self.finish_with_ui_resource(session, &tool_call_id, text, extra, outcome)
                    }
                    Some(McpCall::Caller {
                        conn,
                        id,
                        method,
                        app_tool,
                    }) => {
                        self.answer_app_request(session, name, conn, &id, method, app_tool, outcome)
                    }
                    None => {}
                }
            }
            ClientEvent::ServerRequest { id, method, params } => {
                self.mcp_server_request(session, name, id, &method, params);
            }
        }
    }

    fn set_mcp_status(
        &mut self,
        session: &str,
        name: &str,
        status: McpStatus,
        error: Option<String>,
    ) {
        let Some(server) = self.mcp_server(session, name) else {
            return;
        };
        if server.status == status {
            return;
        }
        server.status = status;
        server.error = error.clone();
        let mut data = json!({"serverName": name, "status": status.as_str()});
        if let Some(error) = error {
            data["error"] = json!(error);
        }
        self.emit(session, "session.mcp_server_status_changed", &data, true);
        self.announce_mcp_loaded(session);
        self.release_held(session);
    }

    /// `session.mcp_servers_loaded`, once every server is up or has failed.
    fn announce_mcp_loaded(&mut self, session: &str) {
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        if live.mcp.announced
            || live.mcp.servers.is_empty()
            || live
                .mcp
                .servers
                .values()
                .any(|s| s.status == McpStatus::Pending)
        {
            return;
        }
        live.mcp.announced = true;
        let servers = self.mcp_servers_json(session);
        self.emit(
            session,
            "session.mcp_servers_loaded",
            &json!({"servers": servers}),
            true,
        );
    }

    /// The session's servers as `McpServersLoadedServer` / `McpServer` entries.
    pub(crate) fn mcp_servers_json(&self, session: &str) -> Vec<Value> {
        self.mcp_servers(session)
            .map(|s| {
                let mut entry = json!({
                    "name": s.config.name,
                    "status": s.status.as_str(),
                    "source": "user",
                    "transport": s.config.transport_name(),
                });
                if let Some(error) = &s.error {
                    entry["error"] = json!(error);
                }
                entry
            })
            .chain(self.sessions.get(session).into_iter().flat_map(|live| {
                live.mcp.discovery.unstarted.iter().map(|u| {
                    let mut entry = json!({"name": u.name, "status": u.status,
                                           "source": u.source, "transport": u.transport});
                    if let Some(error) = &u.error {
                        entry["error"] = json!(error);
                    }
                    entry
                })
            }))
            .collect()
    }

    // ----- process inputs -----

    fn mcp_process(&self, process: u64) -> Option<(String, String)> {
        self.mcp_processes.get(&process).cloned()
    }

    /// Bytes an MCP server's process (its [`EffectId`] number) wrote: stdout is the
    /// protocol, stderr is kept (the tail only, for error messages). Unknown (or killed)
    /// processes are ignored.
    pub(crate) fn mcp_process_output(&mut self, process: u64, stream: ShellStream, bytes: &[u8]) {
        let Some((session, name)) = self.mcp_process(process) else {
            return;
        };
        let now = self.now;
        let Some(server) = self.mcp_server(&session, &name) else {
            if stream == ShellStream::Stdout {
                self.flush_mcp(&session, &name);
                self.run_agents();
            }
            return;
        };
        if stream == ShellStream::Stderr {
            server.client.handle_stderr(bytes);
            return;
        }
        server.client.handle_stdout(now, bytes);
        self.flush_mcp(&session, &name);
        self.run_agents();
    }

    /// An MCP server's process ended (`exit_code` is `None` when a signal killed it), after
    /// all of its output, or could not be started (`message` says why).
    pub(crate) fn mcp_process_ended(
        &mut self,
        process: u64,
        exit_code: Option<i32>,
        message: Option<&str>,
    ) {
        let now = self.now;
        let Some((session, name)) = self.mcp_processes.remove(&process) else {
            return;
        };
        if let Some(server) = self.mcp_server(&session, &name) {
            server.client.handle_exit(now, exit_code, message);
        }
        self.flush_mcp(&session, &name);
        self.run_agents();
    }
}
