//! Commands the runtime runs for clients: the host never spawns.
//!
//! A dialect asks for a command with [`Host::start_process`], which hands the runtime an
//! [`EffectOp::ProcessSpawn`] (`sh -c COMMAND` with a timeout); the runtime's reports about
//! it ([`Host::handle_effect`]: output, then the exit) reach the requesting connection
//! through its dialect (the Copilot SDK dialect's `session.shell.exec`, `shell.output` and
//! `shell.exit`). [`Host::kill_process`] hands the runtime an [`EffectOp::ProcessKill`].
//! Clients name a command by its process id (`proc-…`), the runtime by its [`EffectId`].
//! Running commands for any client is powerful: [`Host::may_run_shell`] lets connections that
//! passed the connection token run them, and every connection only when
//! [`HostConfig::shell_enabled`](crate::host::HostConfig) is set (the `agentwire` binary sets
//! it in `--stdio` mode, whose one client owns the process, and with `--allow-shell`).

use crate::host::{ConnId, EffectId, EffectOp, Host, ProcessSpec};

/// Which output stream a chunk came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShellStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A command the host asked the runtime to run.
#[derive(Clone, Debug)]
pub(crate) struct ProcessInfo {
    /// The process id clients use.
    pub process_id: String,
    /// The connection that started it.
    pub conn: ConnId,
    /// The session it runs for.
    pub session: String,
}

/// The argv of a command line: `sh -c LINE`.
pub(crate) fn shell_argv(command: String) -> Vec<String> {
    vec!["sh".to_owned(), "-c".to_owned(), command]
}

/// Why a process was not started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcessRefused {
    /// No session with that id is loaded.
    UnknownSession,
    /// The connection may not run commands ([`Host::may_run_shell`]).
    Disabled,
}

/// Default command timeout, as the SDK documents it (30 s).
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 30_000;

impl Host {
    /// Whether `conn` may run shell commands: every connection when
    /// [`HostConfig::shell_enabled`](crate::host::HostConfig::shell_enabled) is set, else only
    /// connections that passed the connection token (none when no token is set), as for
    /// stdio MCP servers ([`Host::may_spawn_mcp`]).
    pub(crate) fn may_run_shell(&self, conn: ConnId) -> bool {
        self.config.shell_enabled
            || (self.config.connection_token.is_some() && self.is_authenticated(conn))
    }

    /// Asks the runtime to run `command` for `conn` in `session` (in `cwd`, or the session's
    /// working directory) and returns the new process id.
    pub(crate) fn start_process(
        &mut self,
        conn: ConnId,
        session: &str,
        command: String,
        cwd: Option<String>,
        timeout_ms: Option<u64>,
    ) -> Result<String, ProcessRefused> {
        let Some(live) = self.sessions.get(session) else {
            return Err(ProcessRefused::UnknownSession);
        };
        if !self.may_run_shell(conn) {
            return Err(ProcessRefused::Disabled);
        }
        let cwd = cwd.or_else(|| live.session.cwd.clone());
        let process_id = format!("proc-{}", self.ids.next_uuid());
        let id = self.next_effect_id();
        self.processes.insert(
            id,
            ProcessInfo {
                process_id: process_id.clone(),
                conn,
                session: session.to_owned(),
            },
        );
        let spec = ProcessSpec {
            argv: shell_argv(command),
            env: Vec::new(),
            env_from_host: Vec::new(),
            cwd,
            stdin: false,
            timeout_ms: Some(timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
        };
        self.push_effect(id, EffectOp::ProcessSpawn(spec));
        Ok(process_id)
    }

    /// Asks the runtime to send `signal` to a running command (the runtime may always kill
    /// it). Returns whether the process is known.
    pub(crate) fn kill_process(&mut self, process_id: &str, signal: String) -> bool {
        let Some(id) = self.process_effect(process_id) else {
            return false;
        };
        self.push_effect(id, EffectOp::ProcessKill { signal });
        true
    }

    /// The effect running the command clients call `process_id`.
    fn process_effect(&self, process_id: &str) -> Option<EffectId> {
        (self.processes.iter())
            .find(|(_, p)| p.process_id == process_id)
            .map(|(id, _)| *id)
    }

    /// Whether process `id` runs a command (a client's, or a `bash` tool call's).
    pub(crate) fn is_shell(&self, id: EffectId) -> bool {
        self.processes.contains_key(&id) || self.is_tool_shell(id)
    }

    /// Output of a client's command: sent to the requesting connection by its dialect (the
    /// Copilot SDK's `shell.output`; invalid UTF-8 is replaced). Returns whether `id` is one.
    pub(crate) fn shell_output(&mut self, id: EffectId, stream: ShellStream, data: &[u8]) -> bool {
        let Some(p) = self.processes.get(&id).cloned() else {
            return false;
        };
        let Some(dialect) = self.conns.get(&p.conn).map(|c| c.dialect) else {
            return true;
        };
        let handler = self.dialects[dialect.index()];
        handler.process_output(self, p.conn, &p, stream, data);
        true
    }

    /// A client's command ended (`exit_code` is `None` when a signal killed it): the
    /// requesting connection is told by its dialect (the Copilot SDK's `shell.exit`), and the
    /// process id is forgotten.
    pub(crate) fn shell_exit(&mut self, id: EffectId, exit_code: Option<i32>) {
        let Some(p) = self.processes.remove(&id) else {
            return;
        };
        let Some(dialect) = self.conns.get(&p.conn).map(|c| c.dialect) else {
            return;
        };
        let handler = self.dialects[dialect.index()];
        handler.process_exit(self, p.conn, &p, exit_code);
    }

    /// Commands a departed connection started are killed (their exit is then ignored).
    pub(crate) fn kill_processes_of(&mut self, conn: ConnId) {
        let owned: Vec<EffectId> = (self.processes.iter())
            .filter(|(_, p)| p.conn == conn)
            .map(|(id, _)| *id)
            .collect();
        for id in owned {
            let signal = "SIGKILL".to_owned();
            self.push_effect(id, EffectOp::ProcessKill { signal });
        }
    }
}
