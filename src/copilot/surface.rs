//! The rest of the runtime's JSON-RPC surface the official SDKs call (issue 17, parts A and
//! C): session lifecycle and state (`session_state`, `lifecycle`), the server-level account
//! and settings methods (`account`) and the hosted-product features this server does not
//! offer (`unsupported`); the shared helpers of their handlers are here, the routes are in
//! `method_table`.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

/// A method's answer.
pub(super) type Answer = Result<Value, ErrorObject>;

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
