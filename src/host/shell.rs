//! Client shell commands (`session.shell.exec` / `session.shell.kill`): the host never spawns.
//!
//! `session.shell.exec` answers `{processId}` and hands the runtime an
//! [`Output::ShellExec`]; the runtime runs the command and feeds its output and exit back with
//! [`Host::handle_shell_output`] and [`Host::handle_shell_exit`], which reach the requesting
//! connection as `shell.output {sessionId, processId, stream, data}` and
//! `shell.exit {sessionId, processId, exitCode}` notifications. `session.shell.kill` answers
//! `{killed}` and hands the runtime an [`Output::ShellKill`]. Running commands for any client
//! is powerful, so it is off unless [`HostConfig::shell_enabled`](super::HostConfig) is set.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::jsonrpc::{self, code, ErrorObject};
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
pub(crate) struct ShellProcess {
    pub conn: ConnId,
    pub session: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecParams {
    session_id: String,
    command: String,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    timeout: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KillParams {
    process_id: String,
    #[serde(default)]
    signal: Option<String>,
}

/// Default command timeout, as the SDK documents it (30 s).
const DEFAULT_TIMEOUT_MS: u64 = 30_000;

impl Host {
    /// `session.shell.exec`.
    pub(crate) fn shell_exec(&mut self, conn: ConnId, params: Value) -> Result<Value, ErrorObject> {
        let p: ExecParams = serde_json::from_value(params)
            .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}")))?;
        let Some(live) = self.sessions.get(&p.session_id) else {
            return Err(ErrorObject::new(
                code::INTERNAL_ERROR,
                format!(
                    "Request session.shell.exec failed with message: Session not found for sessionId: {}",
                    p.session_id
                ),
            ));
        };
        if !self.config.shell_enabled {
            return Err(ErrorObject::new(
                code::INTERNAL_ERROR,
                "Request session.shell.exec failed with message: shell execution is disabled on this server (start it with --allow-shell)",
            ));
        }
        let process_id = format!("proc-{}", self.ids.next_uuid());
        let cwd = p.cwd.or_else(|| live.session.cwd.clone());
        self.processes.insert(
            process_id.clone(),
            ShellProcess {
                conn,
                session: p.session_id,
            },
        );
        self.outputs.push_back(Output::ShellExec {
            process_id: process_id.clone(),
            command: p.command,
            cwd,
            timeout_ms: p.timeout.unwrap_or(DEFAULT_TIMEOUT_MS),
        });
        Ok(json!({"processId": process_id}))
    }

    /// `session.shell.kill`.
    pub(crate) fn shell_kill(&mut self, params: Value) -> Result<Value, ErrorObject> {
        let p: KillParams = serde_json::from_value(params)
            .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}")))?;
        if !self.processes.contains_key(&p.process_id) {
            return Ok(json!({"killed": false}));
        }
        self.outputs.push_back(Output::ShellKill {
            process_id: p.process_id,
            signal: p.signal.unwrap_or_else(|| "SIGTERM".to_owned()),
        });
        Ok(json!({"killed": true}))
    }

    /// Output of a command started by [`Output::ShellExec`]: sent to the requesting
    /// connection as `shell.output` (invalid UTF-8 is replaced). Unknown ids are ignored.
    pub fn handle_shell_output(
        &mut self,
        now: Timestamp,
        process_id: &str,
        stream: ShellStream,
        data: &[u8],
    ) {
        self.advance_time(now);
        let Some(p) = self.processes.get(process_id) else {
            return;
        };
        let (conn, session) = (p.conn, p.session.clone());
        let stream = match stream {
            ShellStream::Stdout => "stdout",
            ShellStream::Stderr => "stderr",
        };
        let params = json!({"sessionId": session, "processId": process_id, "stream": stream,
                            "data": String::from_utf8_lossy(data)});
        self.notify(conn, "shell.output", &params);
    }

    /// A command started by [`Output::ShellExec`] ended (`exit_code` is `None` when a signal
    /// killed it): `shell.exit` to the requesting connection, and the process id is forgotten.
    pub fn handle_shell_exit(&mut self, now: Timestamp, process_id: &str, exit_code: Option<i32>) {
        self.advance_time(now);
        let Some(p) = self.processes.remove(process_id) else {
            return;
        };
        let params =
            json!({"sessionId": p.session, "processId": process_id, "exitCode": exit_code});
        self.notify(p.conn, "shell.exit", &params);
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

    fn notify(&mut self, conn: ConnId, method: &str, params: &Value) {
        let mut body = Vec::with_capacity(128);
        if jsonrpc::write_notification(&mut body, method, params).is_ok() {
            self.send_body(conn, &body);
        }
    }
}
