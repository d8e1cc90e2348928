//! The client-tools server's connections: one HTTP request at a time, each read (path,
//! secret, method, JSON-RPC body) and answered, a `tools/call` once the client that provides
//! the tool answered it.

use std::any::Any;
use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use serde_json::Value;

use super::protocol::{initialize_result, tools_list, CallParams};
use super::{percent_decode, ToolServerConfig};
use crate::frame::http::{parse_request, write_response, HttpRequest};
use crate::host::{ConnId, DialectHandler, Host};
use crate::jsonrpc::{self, code, ErrorObject, Message, OwnedId, Parsed};

/// The [`DialectHandler`] of the client-tools server's connections
/// ([`Dialect::ClientTools`](crate::Dialect::ClientTools)).
pub(crate) struct ClientTools;

/// One client-tools connection's state.
#[derive(Debug, Default)]
pub(crate) struct ToolConn {
    /// A `tools/call` of this connection waits for its client; requests behind it wait.
    waiting: bool,
    /// Requests that arrived while one was answered later (HTTP answers in order).
    queued: VecDeque<Bytes>,
}

impl DialectHandler for ClientTools {
    fn new_conn_state(&self) -> Box<dyn Any + Send> {
        Box::<ToolConn>::default()
    }

    fn handle_message(&self, host: &mut Host, conn: ConnId, _message: Message<'_>) {
        // Every frame of this dialect is an HTTP request (`handle_http_request`).
        host.fail_connection(conn, -32600, "the client-tools server speaks HTTP".into());
    }

    fn handle_http_request(&self, host: &mut Host, conn: ConnId, request: &[u8]) {
        let Some(state) = host.conn_state::<ToolConn>(conn) else {
            return;
        };
        if state.waiting {
            state.queued.push_back(Bytes::copy_from_slice(request));
            return;
        }
        serve(host, conn, request);
    }

    /// The `tools/call` this connection waited for was answered: serve what queued behind it.
    fn deferred_ready(&self, host: &mut Host, conn: ConnId) {
        if let Some(state) = host.conn_state::<ToolConn>(conn) {
            state.waiting = false;
        }
        loop {
            let Some(state) = host.conn_state::<ToolConn>(conn) else {
                return;
            };
            if state.waiting {
                return;
            }
            let Some(next) = state.queued.pop_front() else {
                return;
            };
            serve(host, conn, &next);
        }
    }
}

/// Answers one request.
fn serve(host: &mut Host, conn: ConnId, frame: &[u8]) {
    let Some(request) = parse_request(frame) else {
        return status(host, conn, 400, &[], "not an HTTP request");
    };
    if host.config().tool_server.is_none() {
        return status(host, conn, 404, &[], "this server offers no client tools");
    }
    let Some(session) = request
        .path
        .strip_prefix("/mcp/")
        .and_then(percent_decode)
        .filter(|s| !s.is_empty())
    else {
        return status(
            host,
            conn,
            404,
            &[],
            "not found: the client tools are at /mcp/{session}",
        );
    };
    let tool_server = host.config().tool_server.as_ref();
    if !tool_server.is_some_and(|config| authorized(config, &session, &request)) {
        return status(
            host,
            conn,
            401,
            &[("WWW-Authenticate", "Bearer")],
            "a valid bearer secret for this session is required",
        );
    }
    if request.method != "POST" {
        return status(host, conn, 405, &[("Allow", "POST")], "only POST is served");
    }
    if !request
        .content_type
        .is_some_and(|t| t.starts_with(b"application/json"))
    {
        return status(host, conn, 415, &[], "the body must be application/json");
    }
    if host.served_tools(&session).is_none() {
        return status(
            host,
            conn,
            404,
            &[],
            "the session is not loaded on this server",
        );
    }
    match jsonrpc::parse(request.body) {
        Parsed::Single(Ok(Message::Request { id, method, params })) => {
            let id = id.to_owned();
            let params: Value = params
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or(Value::Null);
            call(host, conn, &session, id, &method, &params);
        }
        // The client's notifications (`notifications/initialized`, cancellations) and
        // responses need no answer.
        Parsed::Single(Ok(_)) => status(host, conn, 202, &[], ""),
        Parsed::Single(Err(rejection)) => {
            let mut body = Vec::new();
            jsonrpc::write_error(&mut body, rejection.id.as_ref(), &rejection.error);
            respond_status(host, conn, 400, "application/json", &[], &body);
        }
        Parsed::Batch(_) => {
            let error = ErrorObject::new(code::INVALID_REQUEST, "batches are not supported");
            let mut body = Vec::new();
            jsonrpc::write_error(&mut body, None, &error);
            respond_status(host, conn, 400, "application/json", &[], &body);
        }
    }
}

/// One JSON-RPC request of `session`'s server.
fn call(host: &mut Host, conn: ConnId, session: &str, id: OwnedId, method: &str, params: &Value) {
    let result = match method {
        "initialize" => initialize_result(params, &host.config().version),
        "ping" => Value::Object(Default::default()),
        "tools/list" => tools_list(host.served_tools(session).unwrap_or_default().into_iter()),
        "tools/call" => {
            let call: CallParams = match serde_json::from_value(params.clone()) {
                Ok(call) => call,
                Err(e) => {
                    let error =
                        ErrorObject::new(code::INVALID_PARAMS, format!("Invalid params: {e}"));
                    return answer(host, conn, &id, Err(error));
                }
            };
            let arguments = call
                .arguments
                .unwrap_or_else(|| Value::Object(Default::default()));
            if let Some(state) = host.conn_state::<ToolConn>(conn) {
                // Set before the call: a tool that is not there is answered at once, and
                // that answer ends the wait.
                state.waiting = true;
            }
            host.serve_tool_call(session, conn, id, &call.name, &arguments);
            return;
        }
        _ => {
            let error = ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            );
            return answer(host, conn, &id, Err(error));
        }
    };
    answer(host, conn, &id, Ok(result));
}

/// A JSON-RPC answer as a `200 OK` JSON response.
fn answer(host: &mut Host, conn: ConnId, id: &OwnedId, outcome: Result<Value, ErrorObject>) {
    let mut body = Vec::new();
    match outcome {
        Ok(result) => {
            // A `Value` always serializes.
            let _ = jsonrpc::write_result_value(&mut body, id, &result);
        }
        Err(error) => jsonrpc::write_error(&mut body, Some(id), &error),
    }
    host.send_body(conn, &body);
}

/// Whether the request carries `Authorization: Bearer {the session's secret}` (compared in
/// constant time).
fn authorized(config: &ToolServerConfig, session: &str, request: &HttpRequest<'_>) -> bool {
    let expected = format!("Bearer {}", config.session_secret(session));
    let Some(given) = request.authorization else {
        return false;
    };
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected.as_bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// A plain-text response with `status`.
fn status(host: &mut Host, conn: ConnId, status: u16, extra: &[(&str, &str)], text: &str) {
    let content_type = if text.is_empty() {
        ""
    } else {
        "text/plain; charset=utf-8"
    };
    respond_status(host, conn, status, content_type, extra, text.as_bytes());
}

fn respond_status(
    host: &mut Host,
    conn: ConnId,
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) {
    let mut out = BytesMut::new();
    write_response(status, content_type, extra, body, &mut out);
    host.deliver(conn, out.freeze(), false);
}
