//! `session.shell.exec` / `session.shell.kill` and the `shell.output` / `shell.exit`
//! notifications: the host hands the runtime the process ([`Host::start_process`]); its
//! output comes back to the requesting connection here.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::host::{ConnId, Host, ProcessInfo, ProcessRefused, ShellStream};
use crate::jsonrpc::{code, ErrorObject};

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

/// Why a connection may not run shell commands.
pub(super) const SHELL_REFUSED: &str = "shell execution is disabled on this server for this \
connection (connect over stdio, pass the connection token, or start agentwire with --allow-shell)";

/// `session.shell.exec`: answers `{processId}`.
pub(super) fn exec(host: &mut Host, conn: ConnId, params: Value) -> Result<Value, ErrorObject> {
    let p: ExecParams = serde_json::from_value(params)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}")))?;
    match host.start_process(conn, &p.session_id, p.command, p.cwd, p.timeout) {
        Ok(process_id) => Ok(json!({"processId": process_id})),
        Err(ProcessRefused::UnknownSession) => Err(ErrorObject::new(
            code::INTERNAL_ERROR,
            format!(
                "Request session.shell.exec failed with message: Session not found for sessionId: {}",
                p.session_id
            ),
        )),
        Err(ProcessRefused::Disabled) => Err(ErrorObject::new(
            code::INTERNAL_ERROR,
            format!("Request session.shell.exec failed with message: {SHELL_REFUSED}"),
        )),
    }
}

/// `session.shell.kill`: answers `{killed}`.
pub(super) fn kill(host: &mut Host, params: Value) -> Result<Value, ErrorObject> {
    let p: KillParams = serde_json::from_value(params)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}")))?;
    let signal = p.signal.unwrap_or_else(|| "SIGTERM".to_owned());
    let killed = host.kill_process(&p.process_id, signal);
    Ok(json!({"killed": killed}))
}

/// `shell.output {sessionId, processId, stream, data}` (invalid UTF-8 is replaced).
pub(super) fn output(
    host: &mut Host,
    conn: ConnId,
    process: &ProcessInfo,
    stream: ShellStream,
    data: &[u8],
) {
    let stream = match stream {
        ShellStream::Stdout => "stdout",
        ShellStream::Stderr => "stderr",
    };
    let params = json!({"sessionId": process.session, "processId": process.process_id,
                        "stream": stream, "data": String::from_utf8_lossy(data)});
    host.notify(conn, "shell.output", &params);
}

/// `shell.exit {sessionId, processId, exitCode}`.
pub(super) fn exit(host: &mut Host, conn: ConnId, process: &ProcessInfo, exit_code: Option<i32>) {
    let params = json!({"sessionId": process.session, "processId": process.process_id,
                        "exitCode": exit_code});
    host.notify(conn, "shell.exit", &params);
}
