//! `session.shell.executeUserRequested` / `cancelUserRequested`: a command the user typed
//! (the CLI's `!cmd`). It runs through the runtime like `session.shell.exec` (the same
//! [`Host::start_process`] and the same policy), but its output is collected instead of
//! streamed, and the request is answered when the command ends:
//! `{toolCallId, success, output, exitCode, error?}`. `cancelUserRequested {requestId}`
//! kills it (`{cancelled}`); the execution then answers `success: false`.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::{ConnId, Host, ProcessInfo, ProcessRefused};
use crate::jsonrpc::{ErrorObject, OwnedId};

use super::method_table::{Call, Reply};
use super::surface::{decode, failed, known, Answer};

/// Output kept per command (the rest is dropped and the output says so).
const OUTPUT_LIMIT: usize = 1 << 20;

/// How long a user command may run before the runtime kills it (10 minutes).
const TIMEOUT_MS: u64 = 600_000;

/// A running user-requested command.
#[derive(Debug)]
struct Running {
    request_id: String,
    process_id: String,
    conn: ConnId,
    id: OwnedId,
    /// The method that started it (its failures name it).
    method: &'static str,
    tool_call_id: String,
    output: Vec<u8>,
    truncated: bool,
    cancelled: bool,
    /// A `session.workspaces.diff` (its requested mode), not a user command.
    diff: Option<String>,
}

/// The session's running user-requested commands.
#[derive(Debug, Default)]
pub(super) struct UserShells {
    running: Vec<Running>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecuteParams {
    session_id: String,
    request_id: String,
    command: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelParams {
    session_id: String,
    request_id: String,
}

/// `session.shell.executeUserRequested`: `None` when the command started (answered when it
/// ends).
pub(super) fn execute(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let (conn, id, method) = (call.conn, call.id, call.method);
    let p: ExecuteParams = match decode(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = known(host, method, &p.session_id) {
        return Some(Err(e));
    }
    if p.command.trim().is_empty() {
        return Some(Err(failed(method, "the command is empty")));
    }
    let in_flight = host
        .session_state_ref::<UserShells>(&p.session_id)
        .is_some_and(|s| {
            (s.running.iter()).any(|r| r.diff.is_none() && r.request_id == p.request_id)
        });
    if in_flight {
        return Some(Err(failed(
            method,
            format!(
                "a command with requestId {} is already running",
                p.request_id
            ),
        )));
    }
    let process_id =
        match host.start_process(conn, &p.session_id, p.command, None, Some(TIMEOUT_MS)) {
            Ok(process_id) => process_id,
            Err(ProcessRefused::UnknownSession) => {
                return Some(Err(failed(
                    method,
                    format!("Session not found for sessionId: {}", p.session_id),
                )))
            }
            Err(ProcessRefused::Disabled) => {
                return Some(Err(failed(method, super::shell::SHELL_REFUSED)))
            }
        };
    let tool_call_id = format!("user-shell-{}", host.new_id());
    if let Some(state) = host.session_state::<UserShells>(&p.session_id) {
        state.running.push(Running {
            request_id: p.request_id,
            process_id,
            conn,
            id: id.clone(),
            method,
            tool_call_id,
            output: Vec::new(),
            truncated: false,
            cancelled: false,
            diff: None,
        });
    }
    None
}

/// Exit code of the diff command outside a git work tree.
const NOT_A_REPOSITORY: i32 = 3;

/// `session.workspaces.diff {mode, ignoreWhitespace?}`: `git diff` in the session's working
/// directory, run through the runtime (the shell policy applies), answered when it ends:
/// `unstaged` is the working tree against the index, `branch` the working tree against the
/// fork point with the branch's upstream (`HEAD` without one).
pub(super) fn diff(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let (conn, id, method) = (call.conn, call.id, call.method);
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct DiffParams {
        session_id: String,
        mode: String,
        #[serde(default)]
        ignore_whitespace: bool,
    }
    let p: DiffParams = match decode(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = known(host, method, &p.session_id) {
        return Some(Err(e));
    }
    let base = match p.mode.as_str() {
        "unstaged" => "",
        "branch" => " \"$(git merge-base HEAD '@{upstream}' 2>/dev/null || echo HEAD)\"",
        other => {
            return Some(Err(ErrorObject::new(
                crate::jsonrpc::code::INVALID_PARAMS,
                format!("invalid params: unknown mode `{other}` (unstaged, branch)"),
            )))
        }
    };
    let ws = if p.ignore_whitespace {
        " --ignore-all-space"
    } else {
        ""
    };
    let command = format!(
        "git rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit {NOT_A_REPOSITORY}; \
         git -c core.quotepath=off diff --no-color --no-ext-diff -M{ws}{base}"
    );
    let process_id = match host.start_process(conn, &p.session_id, command, None, Some(60_000)) {
        Ok(process_id) => process_id,
        Err(ProcessRefused::UnknownSession) => {
            return Some(Err(failed(
                method,
                format!("Session not found for sessionId: {}", p.session_id),
            )))
        }
        Err(ProcessRefused::Disabled) => {
            return Some(Err(failed(
                method,
                format!(
                    "the diff runs git through the runtime: {}",
                    super::shell::SHELL_REFUSED
                ),
            )))
        }
    };
    if let Some(state) = host.session_state::<UserShells>(&p.session_id) {
        state.running.push(Running {
            request_id: String::new(),
            process_id,
            conn,
            id: id.clone(),
            method,
            tool_call_id: String::new(),
            output: Vec::new(),
            truncated: false,
            cancelled: false,
            diff: Some(p.mode),
        });
    }
    None
}

/// The changes of a `git diff` output, one per file.
pub(super) fn parse_diff(text: &str) -> Vec<Value> {
    let mut chunks: Vec<String> = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with("diff --git ") || chunks.is_empty() {
            chunks.push(String::new());
        }
        if let Some(chunk) = chunks.last_mut() {
            chunk.push_str(line);
        }
    }
    chunks
        .into_iter()
        .filter(|c| c.starts_with("diff --git "))
        .map(|chunk| {
            let field = |prefix: &str| {
                chunk
                    .lines()
                    .find_map(|l| l.strip_prefix(prefix))
                    .map(|v| v.trim_end().to_owned())
            };
            let header = chunk.lines().next().unwrap_or_default();
            let header_path = header
                .rsplit_once(" b/")
                .map(|(_, p)| p.to_owned())
                .unwrap_or_default();
            let (change_type, path, old_path) = if field("new file mode").is_some() {
                ("added", field("+++ b/"), None)
            } else if field("deleted file mode").is_some() {
                ("deleted", field("--- a/"), None)
            } else if let Some(to) = field("rename to ") {
                ("renamed", Some(to), field("rename from "))
            } else {
                ("modified", field("+++ b/"), None)
            };
            let mut change = json!({"path": path.unwrap_or(header_path),
                                    "changeType": change_type, "diff": chunk});
            if let Some(old) = old_path {
                change["oldPath"] = json!(old);
            }
            change
        })
        .collect()
}

/// `session.shell.cancelUserRequested`: `{cancelled}` (whether a running command with that
/// `requestId` was found and signalled).
pub(super) fn cancel(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: CancelParams = decode(params)?;
    known(host, call.method, &p.session_id)?;
    let process_id = host
        .session_state::<UserShells>(&p.session_id)
        .and_then(|s| {
            (s.running.iter_mut()).find(|r| r.diff.is_none() && r.request_id == p.request_id)
        })
        .map(|r| {
            r.cancelled = true;
            r.process_id.clone()
        });
    let cancelled = match process_id {
        Some(process_id) => host.kill_process(&process_id, "SIGKILL".to_owned()),
        None => false,
    };
    Ok(json!({"cancelled": cancelled}))
}

/// Output of a process: collected when it is a user-requested command (returns whether).
pub(super) fn output(host: &mut Host, process: &ProcessInfo, data: &[u8]) -> bool {
    let Some(state) = host.session_state::<UserShells>(&process.session) else {
        return false;
    };
    let Some(r) = (state.running.iter_mut()).find(|r| r.process_id == process.process_id) else {
        return false;
    };
    let room = OUTPUT_LIMIT.saturating_sub(r.output.len());
    r.output.extend_from_slice(&data[..data.len().min(room)]);
    r.truncated |= data.len() > room;
    true
}

/// A process ended: a user-requested command's request is answered (returns whether it was
/// one).
pub(super) fn exit(host: &mut Host, process: &ProcessInfo, exit_code: Option<i32>) -> bool {
    let Some(state) = host.session_state::<UserShells>(&process.session) else {
        return false;
    };
    let Some(index) = (state.running.iter()).position(|r| r.process_id == process.process_id)
    else {
        return false;
    };
    let r = state.running.remove(index);
    if let Some(mode) = r.diff {
        let text = String::from_utf8_lossy(&r.output);
        let result = match exit_code {
            Some(0) => {
                let mut changes = parse_diff(&text);
                if r.truncated {
                    if let Some(last) = changes.last_mut() {
                        last["isTruncated"] = json!(true);
                    }
                }
                Ok(
                    json!({"requestedMode": mode, "mode": mode, "changes": changes,
                          "isFallback": false}),
                )
            }
            // Not a git work tree: no changes are tracked.
            Some(NOT_A_REPOSITORY) => {
                Ok(json!({"requestedMode": mode, "mode": mode, "changes": [], "isFallback": false}))
            }
            _ => Err(failed(
                r.method,
                format!("git diff failed: {}", text.trim()),
            )),
        };
        host.respond(r.conn, &r.id, result);
        return true;
    }
    let mut output = String::from_utf8_lossy(&r.output).into_owned();
    if r.truncated {
        output.push_str("\n[output truncated]");
    }
    let success = exit_code == Some(0) && !r.cancelled;
    let mut result = json!({"toolCallId": r.tool_call_id, "success": success,
                            "output": output, "exitCode": exit_code});
    if !success {
        result["error"] = Value::String(match exit_code {
            _ if r.cancelled => "the command was cancelled".to_owned(),
            Some(code) => format!("the command exited with code {code}"),
            None => "the command was killed by a signal".to_owned(),
        });
    }
    host.respond(r.conn, &r.id, Ok(result));
    true
}
