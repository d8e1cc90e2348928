//! What MCP servers ask of the host, answered through the session's clients:
//!
//! * `elicitation/create` (form mode with `requestedSchema`, or url mode) →
//!   `elicitation.requested {requestId, elicitationSource: SERVER, message, mode,
//!   requestedSchema | url}` → a client's `accept` / `decline` / `cancel` (+ `content`) is the
//!   server's `ElicitResult` (cancelled when the last provider leaves, as every elicitation).
//! * `sampling/createMessage` → `sampling.requested {requestId, serverName, mcpRequestId,
//!   request}` (to clients with `requestSampling` or an interest in `sampling.requested`) →
//!   `session.ui.handlePendingSampling {response}` is the server's `CreateMessageResult`; no
//!   `response`, or nobody to ask, is a JSON-RPC error with the reason.
//!
//! With no client to ask, the server gets an error saying so at once.

use serde_json::{json, Value};

use crate::jsonrpc::{code, OwnedId};

use crate::host::pending::AnswerTo;
use crate::host::requests::client_calls::SamplingOrigin;
use crate::host::Host;

impl Host {
    /// A server's request that only the session's clients can answer.
    pub(crate) fn mcp_server_request(
        &mut self,
        session: &str,
        server: &str,
        id: OwnedId,
        method: &str,
        params: Value,
    ) {
        let answer_to = AnswerTo::Mcp {
            server: server.to_owned(),
            id: id.clone(),
        };
        let started = match method {
            "elicitation/create" => {
                let mut request = json!({
                    "message": params.get("message").and_then(Value::as_str).unwrap_or_default(),
                    "elicitationSource": server,
                });
                let url = params.get("url").and_then(Value::as_str);
                let mode = params
                    .get("mode")
                    .and_then(Value::as_str)
                    .unwrap_or(if url.is_some() { "url" } else { "form" });
                request["mode"] = json!(mode);
                if let Some(schema) = params.get("requestedSchema") {
                    request["requestedSchema"] = schema.clone();
                }
                if let Some(url) = url {
                    request["url"] = json!(url);
                }
                self.start_elicitation(session, answer_to, &request)
            }
            "sampling/createMessage" => {
                let request_id = self.ids.next_uuid();
                let mcp_request_id: Value =
                    serde_json::from_str(id.as_raw()).unwrap_or(Value::Null);
                let origin = SamplingOrigin {
                    server_name: server,
                    mcp_request_id,
                    answer_to,
                };
                self.announce_sampling(session, request_id, params, origin)
            }
            other => Err(format!("{other} is not supported")),
        };
        if let Err(reason) = started {
            self.answer_mcp(session, server, &id, Err(reason));
        }
    }

    /// Answers server `server`'s request `id` (an error carries the reason).
    pub(crate) fn answer_mcp(
        &mut self,
        session: &str,
        server: &str,
        id: &OwnedId,
        result: Result<Value, String>,
    ) {
        let Some(state) = self.mcp_server(session, server) else {
            return;
        };
        match result {
            Ok(value) => state.client.respond(id, &value),
            Err(reason) => state
                .client
                .respond_error(id, code::INTERNAL_ERROR, &reason),
        }
        self.flush_mcp(session, server);
    }
}
