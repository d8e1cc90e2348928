//! The rest of the runtime's JSON-RPC surface the official SDKs call (issue 17, parts A and
//! C): session lifecycle and state (`session_state`, `lifecycle`), the server-level account
//! and settings methods (`account`) and the hosted-product features this server does not
//! offer (`unsupported`). [`dispatch`] answers them before the core method table.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::host::{ConnId, Host};
use crate::jsonrpc::{code, ErrorObject};

use super::{
    account, discovery, history, lifecycle, llm_inference, queue, remote_control, schedule,
    session_metadata, session_state, session_store, tasks, unsupported, user_shell, workspaces,
};

/// A method's answer.
pub(super) type Answer = Result<Value, ErrorObject>;

/// Answers `method` if it is one of this module's; `None` otherwise.
pub(super) fn dispatch(
    host: &mut Host,
    conn: ConnId,
    method: &str,
    params: Option<&RawValue>,
) -> Option<Answer> {
    if let Some(answer) = lifecycle::dispatch(host, conn, method, params) {
        return Some(answer);
    }
    if let Some(answer) = session_state::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = super::permissions::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = account::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = super::mcp::dispatch(host, conn, method, params) {
        return Some(answer);
    }
    if let Some(answer) = llm_inference::dispatch(host, conn, method, params) {
        return Some(answer);
    }
    if let Some(answer) = history::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = discovery::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = remote_control::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = session_store::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = session_metadata::dispatch(host, conn, method, params) {
        return Some(answer);
    }
    if let Some(answer) = queue::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = schedule::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = tasks::dispatch(host, method, params) {
        return Some(answer);
    }
    if let Some(answer) = workspaces::dispatch(host, method, params) {
        return Some(answer);
    }
    if method == "session.shell.cancelUserRequested" {
        return Some(user_shell::cancel(host, params));
    }
    unsupported::answer(method)
}

/// Decodes params (absent params decode from `{}`).
pub(super) fn decode<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    let raw = params.map(RawValue::get).unwrap_or("{}");
    serde_json::from_str(raw)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}")))
}

/// The runtime's failure wording: `-32603 "Request <method> failed with message: <m>"`.
pub(super) fn failed(method: &str, message: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(
        code::INTERNAL_ERROR,
        format!("Request {method} failed with message: {message}"),
    )
}

/// `Ok` when `session` is loaded, else the runtime's "Session not found" failure.
pub(super) fn known(host: &Host, method: &str, session: &str) -> Result<(), ErrorObject> {
    if host.session(session).is_some() {
        Ok(())
    } else {
        Err(failed(
            method,
            format!("Session not found for sessionId: {session}"),
        ))
    }
}
