//! Client capabilities: our requests to the ACP client and their answers.
//!
//! The client's `initialize` capabilities decide what we may call: `fs/read_text_file` and
//! `fs/write_text_file` only with `fs.readTextFile` / `fs.writeTextFile`, `terminal/*` only
//! with `terminal: true`. Built-in tool calls use them (see
//! [`builtin`](crate::agent::builtin)):
//!
//! * `read_file` → `fs/read_text_file {sessionId, path, line?, limit?}`; the result is the
//!   file's `content`.
//! * `write_file` → `fs/write_text_file {sessionId, path, content}`.
//! * `shell` → `terminal/create {command: "sh", args: ["-c", COMMAND], cwd}`, a
//!   `tool_call_update` embedding the terminal, `terminal/wait_for_exit`, `terminal/output`,
//!   `terminal/release`; the result is the output (a non-zero exit fails the call).
//!
//! Our request ids are numbers counting from 0 on each connection, a space separate from the
//! client's ids. Each request ends exactly once: the answer, an error, its deadline (then we
//! send `$/cancel_request`), our withdrawal (the tool call was cancelled: `$/cancel_request`,
//! and a terminal is released), or the connection closing.

use std::time::Duration;

use serde_json::{json, Value};

use crate::agent::{BuiltinCall, BuiltinOp};
use crate::correlation::Outcome;
use crate::host::{ConnId, Host};
use crate::jsonrpc::{self, OwnedId};
use crate::Timestamp;

use super::elicitation::elicitation_answered;
use super::permission::permission_answered;
use super::ConnState;

/// How long a client has to answer an `fs/*` request or a short `terminal/*` request.
pub const FS_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a shell command may run (`terminal/wait_for_exit`) before the call fails.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// The most terminal output we ask the client to keep (`outputByteLimit`).
pub const OUTPUT_BYTE_LIMIT: u64 = 1024 * 1024;

/// What the client advertised in `initialize`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientCaps {
    /// `fs.readTextFile`.
    pub read_text_file: bool,
    /// `fs.writeTextFile`.
    pub write_text_file: bool,
    /// `terminal`.
    pub terminal: bool,
    /// `elicitation.form` (an object).
    pub elicitation_form: bool,
    /// `elicitation.url` (an object).
    pub elicitation_url: bool,
}

impl ClientCaps {
    /// Reads `clientCapabilities` (anything missing or malformed counts as unsupported).
    pub(crate) fn from_value(caps: &Value) -> ClientCaps {
        let flag = |ptr: &str| caps.pointer(ptr).and_then(Value::as_bool).unwrap_or(false);
        ClientCaps {
            read_text_file: flag("/fs/readTextFile"),
            write_text_file: flag("/fs/writeTextFile"),
            terminal: flag("/terminal"),
            elicitation_form: caps
                .pointer("/elicitation/form")
                .is_some_and(Value::is_object),
            elicitation_url: caps
                .pointer("/elicitation/url")
                .is_some_and(Value::is_object),
        }
    }

    fn covers(&self, op: &BuiltinOp) -> bool {
        match op {
            BuiltinOp::ReadFile { .. } => self.read_text_file,
            BuiltinOp::WriteFile { .. } => self.write_text_file,
            BuiltinOp::Shell { .. } => self.terminal,
            // An edit is a read, the replacement, then a write.
            BuiltinOp::Edit { .. } => self.read_text_file && self.write_text_file,
            // Searches run where the runtime is: ACP has no directory listing.
            BuiltinOp::Grep(_) | BuiltinOp::Glob { .. } => false,
        }
    }
}

/// One of our requests in flight, with its timer key.
#[derive(Debug)]
pub(crate) struct Out {
    pub call: OutCall,
    pub timer: Option<(Timestamp, u64)>,
}

/// Which request it is.
#[derive(Clone, Debug)]
pub(crate) enum OutCall {
    /// `session/request_permission` for the host's pending prompt `request_id`.
    Permission { session: String, request_id: String },
    /// A step of the client operation running tool call `tool_call_id`.
    Op { tool_call_id: String, stage: Stage },
    /// `terminal/release` (its answer only ends the request).
    Release,
    /// `elicitation/create` for the session's pending elicitation `request_id`.
    Elicitation { session: String, request_id: String },
}

/// The step of a client operation.
#[derive(Clone, Debug)]
pub(crate) enum Stage {
    /// A read; for a model's `view`, the lines are numbered from `number_from` (the first
    /// line asked for), as when the runtime reads the file.
    Read {
        number_from: Option<u32>,
    },
    /// The read of an `edit`: the replacement is applied, then written back.
    EditRead {
        path: String,
        old_str: String,
        new_str: String,
    },
    Write {
        result: String,
    },
    Create,
    Wait,
    Output {
        exit_code: Option<i64>,
        signal: Option<String>,
    },
}

impl Stage {
    fn method(&self) -> &'static str {
        match self {
            Stage::Read { .. } | Stage::EditRead { .. } => "fs/read_text_file",
            Stage::Write { .. } => "fs/write_text_file",
            Stage::Create => "terminal/create",
            Stage::Wait => "terminal/wait_for_exit",
            Stage::Output { .. } => "terminal/output",
        }
    }
}

/// A client operation running a built-in tool call.
#[derive(Debug)]
pub(crate) struct Op {
    pub session: String,
    /// The host's pending request (an `ExternalTool` owned by this connection).
    pub request_id: String,
    /// Our request in flight for it.
    pub out: Option<OwnedId>,
    /// The terminal, once created.
    pub terminal: Option<String>,
}

/// Sends a request to an ACP client, with an optional deadline. `None` if the connection
/// is gone or closing.
pub(crate) fn request(
    host: &mut Host,
    conn: ConnId,
    method: &str,
    params: &Value,
    call: OutCall,
    timeout: Option<Duration>,
) -> Option<OwnedId> {
    let timer = timeout.map(|t| host.timer_key(t));
    // Gone or closing: nothing more is sent to it.
    if !host.conn_is_open(conn) {
        return None;
    }
    let c = host.conn_state::<ConnState>(conn)?;
    let id = c.out.start(None, Out { call, timer });
    let mut body = Vec::with_capacity(160);
    if jsonrpc::write_request(&mut body, &id, method, params).is_err() {
        c.out.cancel(&id);
        return None;
    }
    if let Some(key) = timer {
        host.arm_dialect_timer(key, super::ID, conn, id.clone());
    }
    host.send_body(conn, &body);
    Some(id)
}

/// Withdraws our request `id`: it leaves the table and the client gets
/// `$/cancel_request`. Returns what it was.
pub(crate) fn withdraw(host: &mut Host, conn: ConnId, id: &OwnedId) -> Option<OutCall> {
    let out = host.conn_state::<ConnState>(conn)?.out.cancel(id)?;
    if let Some(key) = out.timer {
        host.cancel_timer(&key);
    }
    host.notify(conn, "$/cancel_request", &json!({"requestId": id}));
    Some(out.call)
}

/// A response from the client: ends our request it answers. `id: null` errors (the
/// client could not parse something) and unknown ids are counted and ignored.
pub(crate) fn response(
    host: &mut Host,
    conn: ConnId,
    id: &jsonrpc::Id<'_>,
    outcome: Result<&serde_json::value::RawValue, jsonrpc::ErrorObject>,
) {
    let Some(c) = host.conn_state::<ConnState>(conn) else {
        return;
    };
    if id.is_null() {
        c.ignored_responses += 1;
        return;
    }
    let Some((out, outcome)) = c.out.resolve(id, Outcome::from_response(outcome)) else {
        c.ignored_responses += 1;
        return;
    };
    if let Some(key) = out.timer {
        host.cancel_timer(&key);
    }
    finish_call(host, conn, out.call, outcome);
}

/// Our request `id` on `conn` reached its deadline.
pub(crate) fn timed_out(host: &mut Host, conn: ConnId, id: &OwnedId) {
    let Some(c) = host.conn_state::<ConnState>(conn) else {
        return;
    };
    let Some(out) = c.out.cancel(id) else {
        return;
    };
    host.notify(conn, "$/cancel_request", &json!({"requestId": id}));
    finish_call(host, conn, out.call, Outcome::TimedOut);
}

fn finish_call(host: &mut Host, conn: ConnId, call: OutCall, outcome: Outcome) {
    match call {
        OutCall::Permission {
            session,
            request_id,
        } => permission_answered(host, conn, &session, &request_id, outcome),
        OutCall::Op {
            tool_call_id,
            stage,
        } => op_step(host, conn, &tool_call_id, stage, outcome),
        OutCall::Release => {}
        OutCall::Elicitation {
            session,
            request_id,
        } => elicitation_answered(host, conn, &session, &request_id, outcome),
    }
}

/// The attached ACP connection that runs a built-in operation: one whose client offers
/// it, preferring the one whose prompt is running in the session.
pub(crate) fn executor(host: &Host, session: &str, op: &BuiltinOp) -> Option<ConnId> {
    let live = host.session(session)?;
    let mut first = None;
    for conn in live.attached.keys() {
        if !host.conn_is_open(*conn) {
            continue;
        }
        let Some(c) = host.conn_state_ref::<ConnState>(*conn) else {
            continue;
        };
        if !c.initialized || !c.caps.covers(op) {
            continue;
        }
        if c.prompts.iter().any(|p| p.session == session && p.started) {
            return Some(*conn);
        }
        first.get_or_insert(*conn);
    }
    first
}

/// Starts the client operation of an approved built-in tool call on `conn`. The host's
/// pending request `request_id` ends when it does.
pub(crate) fn start_builtin(
    host: &mut Host,
    conn: ConnId,
    session: &str,
    request_id: &str,
    tool_call_id: &str,
    call: BuiltinCall,
) {
    let model_call = call.model_arguments.is_some();
    let (method, params, stage, timeout) = match call.op {
        BuiltinOp::ReadFile { path, line, limit } => {
            let mut params = json!({"sessionId": session, "path": path});
            if let Some(line) = line {
                params["line"] = json!(line);
            }
            if let Some(limit) = limit {
                params["limit"] = json!(limit);
            }
            let number_from = model_call.then(|| line.unwrap_or(1));
            let stage = Stage::Read { number_from };
            ("fs/read_text_file", params, stage, FS_TIMEOUT)
        }
        BuiltinOp::WriteFile { path, content } => (
            "fs/write_text_file",
            json!({"sessionId": session, "path": path, "content": content}),
            Stage::Write {
                result: call.result,
            },
            FS_TIMEOUT,
        ),
        BuiltinOp::Shell { command } => {
            let mut params = json!({"sessionId": session, "command": "sh",
                                    "args": ["-c", command],
                                    "outputByteLimit": OUTPUT_BYTE_LIMIT});
            if let Some(cwd) = host.session(session).and_then(|s| s.cwd.clone()) {
                params["cwd"] = json!(cwd);
            }
            ("terminal/create", params, Stage::Create, FS_TIMEOUT)
        }
        BuiltinOp::Edit {
            path,
            old_str,
            new_str,
        } => (
            "fs/read_text_file",
            json!({"sessionId": session, "path": path}),
            Stage::EditRead {
                path,
                old_str,
                new_str,
            },
            FS_TIMEOUT,
        ),
        BuiltinOp::Grep(_) | BuiltinOp::Glob { .. } => {
            // Never chosen (`covers` is false); fail cleanly rather than hang.
            track_op(host, conn, session, request_id, tool_call_id);
            let message = "the client cannot search files".to_owned();
            return op_done(host, conn, tool_call_id, Err(message));
        }
    };
    track_op(host, conn, session, request_id, tool_call_id);
    op_request(
        host,
        conn,
        tool_call_id,
        method,
        &params,
        stage,
        Some(timeout),
    );
}

/// Records the client operation of `tool_call_id` on `conn`.
fn track_op(host: &mut Host, conn: ConnId, session: &str, request_id: &str, tool_call_id: &str) {
    if let Some(c) = host.conn_state::<ConnState>(conn) {
        c.ops.insert(
            tool_call_id.to_owned(),
            Op {
                session: session.to_owned(),
                request_id: request_id.to_owned(),
                out: None,
                terminal: None,
            },
        );
    }
}

fn op_request(
    host: &mut Host,
    conn: ConnId,
    tool_call_id: &str,
    method: &str,
    params: &Value,
    stage: Stage,
    timeout: Option<Duration>,
) {
    let call = OutCall::Op {
        tool_call_id: tool_call_id.to_owned(),
        stage,
    };
    match request(host, conn, method, params, call, timeout) {
        Some(id) => {
            if let Some(op) = host
                .conn_state::<ConnState>(conn)
                .and_then(|c| c.ops.get_mut(tool_call_id))
            {
                op.out = Some(id);
            }
        }
        None => op_done(
            host,
            conn,
            tool_call_id,
            Err(format!("{method} could not be sent: the client is gone")),
        ),
    }
}

/// One step of a client operation ended.
fn op_step(host: &mut Host, conn: ConnId, tool_call_id: &str, stage: Stage, outcome: Outcome) {
    let Some(op) = host
        .conn_state::<ConnState>(conn)
        .and_then(|c| c.ops.get_mut(tool_call_id))
    else {
        return;
    };
    op.out = None;
    let session = op.session.clone();
    let result = match outcome {
        Outcome::Result(raw) => serde_json::from_str::<Value>(raw.get()).unwrap_or(Value::Null),
        Outcome::Error(e) => {
            let message = format!("{} failed: {}", stage.method(), e.message);
            return op_done(host, conn, tool_call_id, Err(message));
        }
        Outcome::TimedOut => {
            let message = format!("the client did not answer {} in time", stage.method());
            return op_done(host, conn, tool_call_id, Err(message));
        }
        Outcome::Cancelled | Outcome::Closed => {
            let message = format!("{} was cancelled", stage.method());
            return op_done(host, conn, tool_call_id, Err(message));
        }
    };
    let text = |v: &Value, field: &str| v.get(field).and_then(Value::as_str).map(str::to_owned);
    match stage {
        Stage::Read { number_from } => {
            let outcome = text(&result, "content")
                .map(|c| match number_from {
                    Some(first) => crate::agent::tool_text::number_lines(&c, first),
                    None => c,
                })
                .ok_or_else(|| "fs/read_text_file answered without content".to_owned());
            op_done(host, conn, tool_call_id, outcome);
        }
        Stage::EditRead {
            path,
            old_str,
            new_str,
        } => {
            let Some(content) = text(&result, "content") else {
                let message = "fs/read_text_file answered without content".to_owned();
                return op_done(host, conn, tool_call_id, Err(message));
            };
            match crate::agent::tool_text::apply_edit(&content, &path, &old_str, &new_str) {
                Ok((edited, summary)) => {
                    let params = json!({"sessionId": session, "path": path, "content": edited});
                    op_request(
                        host,
                        conn,
                        tool_call_id,
                        "fs/write_text_file",
                        &params,
                        Stage::Write { result: summary },
                        Some(FS_TIMEOUT),
                    );
                }
                Err(message) => op_done(host, conn, tool_call_id, Err(message)),
            }
        }
        Stage::Write { result } => op_done(host, conn, tool_call_id, Ok(result)),
        Stage::Create => {
            let Some(terminal) = text(&result, "terminalId") else {
                let message = "terminal/create answered without terminalId".to_owned();
                return op_done(host, conn, tool_call_id, Err(message));
            };
            if let Some(op) = host
                .conn_state::<ConnState>(conn)
                .and_then(|c| c.ops.get_mut(tool_call_id))
            {
                op.terminal = Some(terminal.clone());
            }
            // Show the live output in the client's tool call.
            host.notify(
                conn,
                "session/update",
                &json!({"sessionId": session, "update": {
                    "sessionUpdate": "tool_call_update", "toolCallId": tool_call_id,
                    "status": "in_progress",
                    "content": [{"type": "terminal", "terminalId": terminal}]}}),
            );
            let params = json!({"sessionId": session, "terminalId": terminal});
            op_request(
                host,
                conn,
                tool_call_id,
                "terminal/wait_for_exit",
                &params,
                Stage::Wait,
                Some(COMMAND_TIMEOUT),
            );
        }
        Stage::Wait => {
            let terminal = host
                .conn_state_ref::<ConnState>(conn)
                .and_then(|c| c.ops.get(tool_call_id))
                .and_then(|op| op.terminal.clone())
                .unwrap_or_default();
            let params = json!({"sessionId": session, "terminalId": terminal});
            let stage = Stage::Output {
                exit_code: result.get("exitCode").and_then(Value::as_i64),
                signal: text(&result, "signal"),
            };
            op_request(
                host,
                conn,
                tool_call_id,
                "terminal/output",
                &params,
                stage,
                Some(FS_TIMEOUT),
            );
        }
        Stage::Output { exit_code, signal } => {
            let output = text(&result, "output").unwrap_or_default();
            let exit_code = exit_code.or_else(|| {
                result
                    .pointer("/exitStatus/exitCode")
                    .and_then(Value::as_i64)
            });
            let outcome = match (exit_code, signal) {
                (_, Some(signal)) => Err(format!("{output}\n(killed by signal {signal})")),
                (Some(code), None) if code != 0 => Err(format!("{output}\n(exit code {code})")),
                _ => Ok(output),
            };
            op_done(host, conn, tool_call_id, outcome);
        }
    }
}

/// A client operation ended: release its terminal, then end the host's pending request
/// (which completes the tool call).
fn op_done(host: &mut Host, conn: ConnId, tool_call_id: &str, outcome: Result<String, String>) {
    let Some(op) = host
        .conn_state::<ConnState>(conn)
        .and_then(|c| c.ops.remove(tool_call_id))
    else {
        return;
    };
    if let Some(terminal) = &op.terminal {
        release(host, conn, &op.session, terminal);
    }
    let result = match outcome {
        Ok(text) => Value::String(text),
        Err(message) => json!({"textResultForLlm": message, "resultType": "failure"}),
    };
    host.resolve_tool_call(&op.session, &op.request_id, Some(&result), None);
}

fn release(host: &mut Host, conn: ConnId, session: &str, terminal: &str) {
    let params = json!({"sessionId": session, "terminalId": terminal});
    request(
        host,
        conn,
        "terminal/release",
        &params,
        OutCall::Release,
        Some(FS_TIMEOUT),
    );
}

/// A tool call completed (`tool.execution_complete`): if it ended while our operation
/// for it was still running (an abort), withdraw our request and release the terminal.
pub(crate) fn tool_completed(host: &mut Host, conn: ConnId, tool_call_id: &str) {
    let Some(op) = host
        .conn_state::<ConnState>(conn)
        .and_then(|c| c.ops.remove(tool_call_id))
    else {
        return;
    };
    if let Some(id) = &op.out {
        withdraw(host, conn, id);
    }
    if let Some(terminal) = &op.terminal {
        release(host, conn, &op.session, terminal);
    }
}

/// A permission prompt was decided: withdraw our own request for it, if still open.
pub(crate) fn prompt_decided(host: &mut Host, conn: ConnId, request_id: &str) {
    let Some(id) = host
        .conn_state::<ConnState>(conn)
        .and_then(|c| c.asks.remove(request_id))
    else {
        return;
    };
    withdraw(host, conn, &id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_default_to_unsupported() {
        assert_eq!(ClientCaps::from_value(&json!(null)), ClientCaps::default());
        let caps = ClientCaps::from_value(
            &json!({"fs": {"readTextFile": true, "writeTextFile": "yes"}, "terminal": true}),
        );
        assert!(caps.read_text_file && !caps.write_text_file && caps.terminal);
        assert!(caps.covers(&BuiltinOp::ReadFile {
            path: "/a".into(),
            line: None,
            limit: None
        }));
        assert!(!caps.covers(&BuiltinOp::WriteFile {
            path: "/a".into(),
            content: String::new()
        }));
    }
}
