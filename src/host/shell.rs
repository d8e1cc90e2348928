//! Processes the runtime runs for clients: the host never spawns.
//!
//! A dialect asks for a process with [`Host::start_process`], which hands the runtime an
//! [`Output::ShellExec`]; the runtime runs the command and feeds its output and exit back with
//! [`Host::handle_shell_output`] and [`Host::handle_shell_exit`], which reach the requesting
//! connection through its dialect (the Copilot SDK dialect's `session.shell.exec`, `shell.output`
//! and `shell.exit`). [`Host::kill_process`] hands the runtime an [`Output::ShellKill`].
//! Running commands for any client is powerful: [`Host::may_run_shell`] lets connections that
//! passed the connection token run them, and every connection only when
//! [`HostConfig::shell_enabled`](super::HostConfig) is set (the `agentwire` binary sets it in
//! `--stdio` mode, whose one client owns the process, and with `--allow-shell`).

use crate::Timestamp;

use super::{ConnId, Host, Output};

/// Which output stream a chunk came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShellStream {
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
    /// [`HostConfig::shell_enabled`](super::HostConfig::shell_enabled) is set, else only
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
        let process_id = format!("proc-{}", self.ids.next_uuid());
        let cwd = cwd.or_else(|| live.session.cwd.clone());
        self.processes.insert(
            process_id.clone(),
            ProcessInfo {
                process_id: process_id.clone(),
                conn,
                session: session.to_owned(),
            },
        );
        self.outputs.push_back(Output::ShellExec {
            process_id: process_id.clone(),
            command,
            cwd,
            timeout_ms: timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
        });
        Ok(process_id)
    }

    /// Asks the runtime to send `signal` to a running process. Returns whether the process
    /// is known.
    pub(crate) fn kill_process(&mut self, process_id: &str, signal: String) -> bool {
        if !self.processes.contains_key(process_id) {
            return false;
        }
        self.outputs.push_back(Output::ShellKill {
            process_id: process_id.to_owned(),
            signal,
        });
        true
    }

    /// Output of a command started by [`Output::ShellExec`]: sent to the requesting
    /// connection by its dialect (the Copilot SDK's `shell.output`; invalid UTF-8 is
    /// replaced). Unknown ids are ignored.
    pub fn handle_shell_output(
        &mut self,
        now: Timestamp,
        process_id: &str,
        stream: ShellStream,
        data: &[u8],
    ) {
        self.advance_time(now);
        if self.tool_shell_output(process_id, data) {
            return;
        }
        let Some(p) = self.processes.get(process_id).cloned() else {
            return;
        };
        let Some(dialect) = self.conns.get(&p.conn).map(|c| c.dialect) else {
            return;
        };
        let handler = self.dialects[dialect.index()];
        handler.process_output(self, p.conn, &p, stream, data);
    }

    /// A command started by [`Output::ShellExec`] ended (`exit_code` is `None` when a signal
    /// killed it): the requesting connection is told by its dialect (the Copilot SDK's
    /// `shell.exit`), and the process id is forgotten.
    pub fn handle_shell_exit(&mut self, now: Timestamp, process_id: &str, exit_code: Option<i32>) {
        self.advance_time(now);
        if self.tool_shell_exit(process_id, exit_code) {
            return;
        }
        let Some(p) = self.processes.remove(process_id) else {
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
        let owned: Vec<String> = self
            .processes
            .iter()
            .filter(|(_, p)| p.conn == conn)
            .map(|(id, _)| id.clone())
            .collect();
        for process_id in owned {
            self.outputs.push_back(Output::ShellKill {
                process_id,
                signal: "SIGKILL".to_owned(),
            });
        }
    }
}
