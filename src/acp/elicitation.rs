//! The elicitation bridge: a session's elicitation becomes `elicitation/create` (ACP v1,
//! stable since schema 1.7.0).
//!
//! An elicitation of the session (an MCP server's `elicitation/create`, or a Copilot client's
//! `session.ui.elicitation`) is announced as `elicitation.requested`. Every attached ACP
//! connection whose client advertised the mode in `initialize`
//! (`clientCapabilities.elicitation.form` / `.url`) is asked:
//!
//! * form: `elicitation/create {sessionId, toolCallId?, mode: "form", message,
//!   requestedSchema}`;
//! * url: `elicitation/create {sessionId, toolCallId?, mode: "url", elicitationId, url,
//!   message}` (the `elicitationId` is the host's request id).
//!
//! The client's `{action: "accept", content?}` / `{action: "decline"}` / `{action: "cancel"}`
//! resolves the elicitation (the first answer of any client wins; the other ACP clients get
//! `$/cancel_request`), so an MCP server gets it as its `ElicitResult`. An error answer, a
//! malformed one or no answer in time resolves it as `cancel`. A client that advertised no
//! elicitation is never asked (and does not count as an elicitation provider); one that did
//! not advertise the elicitation's mode is not asked it, and when no other client can answer
//! it, the elicitation is resolved as `cancel` at once.

use serde_json::{json, Value};

use crate::correlation::Outcome;
use crate::host::{ConnId, Host};

use super::client::{self, OutCall};
use super::permission::PERMISSION_TIMEOUT;
use super::ConnState;

/// The `elicitation/create` params for `data` (an `elicitation.requested` event's data), or
/// `None` when the client does not support its mode.
fn params(session: &str, data: &Value, form: bool, url: bool) -> Option<Value> {
    let field = |name: &str| data.get(name).and_then(Value::as_str);
    let mut params = json!({
        "sessionId": session,
        "message": field("message").unwrap_or_default(),
    });
    if let Some(tool_call_id) = field("toolCallId") {
        params["toolCallId"] = json!(tool_call_id);
    }
    match field("mode").unwrap_or("form") {
        "url" if url => {
            params["mode"] = json!("url");
            params["elicitationId"] = json!(field("requestId")?);
            params["url"] = json!(field("url")?);
        }
        "form" if form => {
            params["mode"] = json!("form");
            params["requestedSchema"] = data
                .get("requestedSchema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        }
        _ => return None,
    }
    Some(params)
}

/// `elicitation.requested` reached `conn`: asks its client if it handles the mode.
pub(crate) fn ask(host: &mut Host, conn: ConnId, session: &str, data: &Value) {
    let Some(request_id) = data.get("requestId").and_then(Value::as_str) else {
        return;
    };
    let Some(c) = host.conn_state::<ConnState>(conn) else {
        return;
    };
    if c.elicitations.contains_key(request_id) {
        return;
    }
    let (form, url) = (c.caps.elicitation_form, c.caps.elicitation_url);
    let Some(params) = params(session, data, form, url) else {
        // This client cannot take it; if nobody else can either, it must not wait forever.
        let mode = data.get("mode").and_then(Value::as_str).unwrap_or("form");
        if !answerable(host, session, mode, conn) {
            host.resolve_elicitation(session, request_id, &json!({"action": "cancel"}));
        }
        return;
    };
    let call = OutCall::Elicitation {
        session: session.to_owned(),
        request_id: request_id.to_owned(),
    };
    let Some(id) = client::request(
        host,
        conn,
        "elicitation/create",
        &params,
        call,
        Some(PERMISSION_TIMEOUT),
    ) else {
        return;
    };
    if let Some(c) = host.conn_state::<ConnState>(conn) {
        c.elicitations.insert(request_id.to_owned(), id);
    }
}

/// Whether a client of `session` other than `except` could answer an elicitation of `mode`:
/// an interest in `elicitation.requested`, or an attached elicitation provider that is not
/// an ACP client lacking the mode.
fn answerable(host: &Host, session: &str, mode: &str, except: ConnId) -> bool {
    if host.has_interest(session, "elicitation.requested") {
        return true;
    }
    let Some(live) = host.session(session) else {
        return false;
    };
    live.attached
        .iter()
        .filter(|(c, a)| **c != except && a.request_elicitation)
        .any(|(c, _)| match host.conn_state_ref::<ConnState>(*c) {
            Some(acp) => match mode {
                "url" => acp.caps.elicitation_url,
                _ => acp.caps.elicitation_form,
            },
            None => true,
        })
}

/// `elicitation.completed`: withdraws our request for it, if still open.
pub(crate) fn decided(host: &mut Host, conn: ConnId, request_id: &str) {
    let Some(id) = host
        .conn_state::<ConnState>(conn)
        .and_then(|c| c.elicitations.remove(request_id))
    else {
        return;
    };
    client::withdraw(host, conn, &id);
}

/// The client answered (or failed to answer) `elicitation/create` for `request_id`.
pub(crate) fn elicitation_answered(
    host: &mut Host,
    conn: ConnId,
    session: &str,
    request_id: &str,
    outcome: Outcome,
) {
    if let Some(c) = host.conn_state::<ConnState>(conn) {
        c.elicitations.remove(request_id);
    }
    let cancel = json!({"action": "cancel"});
    let result = match outcome {
        Outcome::Result(raw) => serde_json::from_str::<Value>(raw.get()).unwrap_or(cancel),
        Outcome::Error(_) | Outcome::TimedOut => cancel,
        // We withdrew it (answered elsewhere), or the client left (its departure resolves
        // elicitations nobody can answer any more).
        Outcome::Cancelled | Outcome::Closed => return,
    };
    // An unknown action or a non-object `content` is no answer: cancel.
    let valid = matches!(
        result.get("action").and_then(Value::as_str),
        Some("accept" | "decline" | "cancel")
    ) && result.get("content").is_none_or(Value::is_object);
    let result = if valid {
        result
    } else {
        json!({"action": "cancel"})
    };
    host.resolve_elicitation(session, request_id, &result);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_and_url_params_follow_the_acp_schema() {
        let data = json!({"requestId": "r1", "message": "Name?", "mode": "form",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
            "elicitationSource": "everything"});
        let p = params("s1", &data, true, false).unwrap();
        assert_eq!(
            p,
            json!({"sessionId": "s1", "message": "Name?", "mode": "form",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}})
        );
        assert_eq!(params("s1", &data, false, true), None);
        let data = json!({"requestId": "r2", "message": "Sign in", "mode": "url",
            "url": "https://example.com/a", "toolCallId": "t1"});
        let p = params("s1", &data, false, true).unwrap();
        assert_eq!(
            p,
            json!({"sessionId": "s1", "message": "Sign in", "mode": "url", "toolCallId": "t1",
                "elicitationId": "r2", "url": "https://example.com/a"})
        );
        assert_eq!(params("s1", &data, true, false), None);
    }
}
