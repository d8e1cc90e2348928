//! `llmInference.*`: a client performs the model HTTP requests of its sessions (the SDKs'
//! `requestHandler` / `CopilotRequestHandler`), in the runtime's shapes
//! (`api.schema.json`, `server.llmInference` and `clientGlobal.llmInference`).
//!
//! * client → server: `llmInference.setProvider` (`{success}`: the connection becomes an
//!   HTTP provider of the host), `llmInference.httpResponseStart {requestId, status,
//!   statusText?, headers}` and `llmInference.httpResponseChunk {requestId, data, binary?,
//!   end?, error?}` (`{accepted}`: whether the frame matched a request in flight).
//! * server → client: `llmInference.httpRequestStart {requestId, sessionId, agentId, method,
//!   url, headers, transport:"http", interactionType}` (`agentId`: the session's main agent,
//!   stable across turns; a sub-agent's request names the sub-agent, with `parentAgentId`
//!   the main agent and `interactionType: "conversation-subagent"`) then one `llmInference.httpRequestChunk
//!   {requestId, data, binary?, end:true}` with the whole body; `llmInference.httpRequestChunk
//!   {requestId, data:"", cancel:true, cancelReason}` abandons a request. Both are requests
//!   the client acknowledges with `{}`.
//!
//! A Responses call over a WebSocket (a `ws://` / `wss://` request, the `websockets`
//! transport) is an exchange with `transport:"websocket"`: its body chunk is the first
//! message (`response.create`) and is not the end; the client's `101` head opens it and
//! each response chunk is one message (one Responses event), handed to the model call as a
//! server-sent event. The event that ends the response (`response.completed`, …) ends the
//! call, and agentwire then ends its side (`httpRequestChunk {end:true}`), which closes the
//! socket.
//!
//! Headers travel as `{name: [values]}`; bodies as UTF-8 text, or base64 with
//! `binary:true`. Which sessions a provider serves, and what happens when it leaves, is the
//! host's (`host/effects/provided_http.rs`).

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::HttpEvent;
use crate::host::{ConnId, Host};
use crate::jsonrpc::{code, ErrorObject};
use crate::model::{HttpRequest, TransportErrorKind};

use super::method_table::Call;
use super::surface::{decode, Answer};

const REQUEST_ID_PREFIX: &str = "agentwire-http-";

/// The `requestId` of exchange `call`.
fn request_id(call: u64) -> String {
    format!("{REQUEST_ID_PREFIX}{call}")
}

/// The exchange a client's `requestId` names, if it is one of ours.
fn call_of(request_id: &str) -> Option<u64> {
    request_id.strip_prefix(REQUEST_ID_PREFIX)?.parse().ok()
}

pub(super) fn set_provider(host: &mut Host, call: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Ok(json!({"success": host.register_http_provider(call.conn)}))
}

pub(super) fn http_response_start(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode(params).and_then(|p| response_start(host, call.conn, p))
}

pub(super) fn http_response_chunk(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode(params).and_then(|p| response_chunk(host, call.conn, p))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponseStart {
    request_id: String,
    status: i64,
    #[serde(default)]
    headers: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponseChunk {
    request_id: String,
    #[serde(default)]
    data: String,
    #[serde(default)]
    binary: bool,
    #[serde(default)]
    end: bool,
    #[serde(default)]
    error: Option<ChunkError>,
}

#[derive(Deserialize)]
struct ChunkError {
    message: String,
    #[serde(default)]
    code: Option<String>,
}

fn invalid(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, message.into())
}

/// The exchanges in flight over a WebSocket.
#[derive(Debug, Default)]
struct WebSockets(std::collections::BTreeSet<u64>);

fn is_socket(host: &mut Host, call: u64) -> bool {
    host.dialect_state::<WebSockets>()
        .is_some_and(|w| w.0.contains(&call))
}

fn forget_socket(host: &mut Host, call: u64) {
    if let Some(w) = host.dialect_state::<WebSockets>() {
        w.0.remove(&call);
    }
}

fn response_start(host: &mut Host, conn: ConnId, p: ResponseStart) -> Answer {
    let status = u16::try_from(p.status)
        .ok()
        .filter(|s| (100..=599).contains(s))
        .ok_or_else(|| {
            invalid(format!(
                "invalid params: status {} is not an HTTP status",
                p.status
            ))
        })?;
    let mut headers = Vec::new();
    for (name, values) in p.headers {
        match values {
            Value::String(v) => headers.push((name, v)),
            Value::Array(vs) => {
                for v in vs {
                    let Value::String(v) = v else {
                        return Err(invalid(format!(
                            "invalid params: header {name} has a non-string value"
                        )));
                    };
                    headers.push((name.clone(), v));
                }
            }
            Value::Null => {}
            _ => {
                return Err(invalid(format!(
                    "invalid params: header {name} is not a list of strings"
                )))
            }
        }
    }
    let accepted = call_of(&p.request_id).is_some_and(|call| {
        let (status, headers) = if is_socket(host, call) && status == 101 {
            // The socket is open: its messages are the response's events.
            let sse = vec![("content-type".to_owned(), "text/event-stream".to_owned())];
            (200, sse)
        } else {
            (status, headers)
        };
        host.provided_http_event(conn, call, HttpEvent::Response { status, headers })
    });
    Ok(json!({"accepted": accepted}))
}

fn response_chunk(host: &mut Host, conn: ConnId, p: ResponseChunk) -> Answer {
    let Some(call) = call_of(&p.request_id) else {
        return Ok(json!({"accepted": false}));
    };
    if let Some(error) = p.error {
        let code = error.code.map(|c| format!(" ({c})")).unwrap_or_default();
        let event = HttpEvent::Error {
            kind: TransportErrorKind::Io,
            message: format!(
                "the client's model transport failed: {}{code}",
                error.message
            ),
        };
        return Ok(json!({"accepted": host.provided_http_event(conn, call, event)}));
    }
    let bytes = if p.binary {
        base64::engine::general_purpose::STANDARD
            .decode(p.data.as_bytes())
            .map_err(|e| invalid(format!("invalid params: data is not base64: {e}")))?
    } else {
        p.data.into_bytes()
    };
    let mut accepted = host.provides_http(conn, call);
    if is_socket(host, call) {
        return Ok(
            json!({"accepted": accepted && socket_message(host, conn, call, &bytes, p.end)}),
        );
    }
    if accepted && !bytes.is_empty() {
        accepted = host.provided_http_event(conn, call, HttpEvent::Body(bytes));
    }
    if accepted && p.end {
        accepted = host.provided_http_event(conn, call, HttpEvent::End);
    }
    Ok(json!({"accepted": accepted}))
}

/// One message of WebSocket exchange `call` (and whether the client closed it): handed to
/// the call as an event; the response's last event ends the call and closes our side.
fn socket_message(host: &mut Host, conn: ConnId, call: u64, message: &[u8], closed: bool) -> bool {
    let mut accepted = true;
    let mut last = false;
    if !message.is_empty() {
        let (event, ends) = crate::model::websocket_event_as_sse(message);
        accepted = host.provided_http_event(conn, call, HttpEvent::Body(event));
        last = ends;
    }
    if accepted && (last || closed) {
        forget_socket(host, call);
        accepted = host.provided_http_event(conn, call, HttpEvent::End);
        if last && !closed {
            let end = json!({"requestId": request_id(call), "data": "", "end": true});
            // The call is over either way: a client that cannot be told keeps its socket.
            let _ = host.send_http_frame(conn, call, "llmInference.httpRequestChunk", &end);
        }
    }
    accepted
}

/// The stable identity of a session's main agent trajectory (`agentId` of its model
/// requests): generated at its first request, the same for every turn and retry after.
#[derive(Debug, Default)]
struct MainAgentId(Option<String>);

fn main_agent_id(host: &mut Host, session: &str) -> Option<String> {
    if let Some(MainAgentId(Some(id))) = host.session_state_ref::<MainAgentId>(session) {
        return Some(id.clone());
    }
    let id = host.new_id();
    let state = host.session_state::<MainAgentId>(session)?;
    state.0 = Some(id.clone());
    Some(id)
}

/// Sends exchange `call` to the client of `conn`: the head, then the whole body.
pub(super) fn start(
    host: &mut Host,
    conn: ConnId,
    call: u64,
    session: &str,
    request: &HttpRequest,
) -> Result<(), String> {
    let id = request_id(call);
    let mut headers = serde_json::Map::new();
    for h in &request.headers {
        let entry = headers
            .entry(h.name.to_ascii_lowercase())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(values) = entry {
            values.push(Value::String(h.value.clone()));
        }
    }
    let socket = crate::model::is_websocket(request);
    let mut head = json!({
        "requestId": id,
        "sessionId": session,
        "method": request.method.as_str(),
        "url": request.url,
        "headers": headers,
        "transport": if socket { "websocket" } else { "http" },
        "interactionType": "conversation-agent",
    });
    let sub_agent = host.http_call_agent(call).map(str::to_owned);
    if socket {
        if let Some(w) = host.dialect_state::<WebSockets>() {
            w.0.insert(call);
        }
    }
    if let Some(agent) = main_agent_id(host, session) {
        match sub_agent {
            // A sub-agent's request names it, under the session's main agent.
            Some(sub_agent) => {
                head["agentId"] = json!(sub_agent);
                head["parentAgentId"] = json!(agent);
                head["interactionType"] = json!("conversation-subagent");
            }
            None => head["agentId"] = json!(agent),
        }
    }
    host.send_http_frame(conn, call, "llmInference.httpRequestStart", &head)?;
    // Over a WebSocket the body is the first message, and the socket stays open.
    let end = !socket;
    let body = match std::str::from_utf8(&request.body) {
        Ok(text) => json!({"requestId": id, "data": text, "end": end}),
        Err(_) => json!({
            "requestId": id,
            "data": base64::engine::general_purpose::STANDARD.encode(&request.body),
            "binary": true,
            "end": end,
        }),
    };
    host.send_http_frame(conn, call, "llmInference.httpRequestChunk", &body)
}

/// Tells the client of `conn` to abandon exchange `call`.
pub(super) fn cancel(host: &mut Host, conn: ConnId, call: u64) {
    forget_socket(host, call);
    let params = json!({
        "requestId": request_id(call),
        "data": "",
        "cancel": true,
        "end": true,
        "cancelReason": "the model call was abandoned (aborted, retried or past its deadline)",
    });
    // The exchange is already forgotten: a failure to send changes nothing.
    let _ = host.send_http_frame(conn, call, "llmInference.httpRequestChunk", &params);
}
