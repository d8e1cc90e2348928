//! MCP Apps (when enabled, [`HostConfig::mcp_apps_enabled`](crate::host::HostConfig)): a tool whose
//! `_meta.ui.resourceUri` names a `ui://` resource completes with `result.uiResource` (the
//! first content of `resources/read`); a client's `session.mcp.apps.readResource` and
//! `callTool` reach the server and are answered with its result, and an app's tool call
//! emits `mcp_app.tool_call_complete {serverName, toolName, success, durationMs, arguments,
//! result | error}` (to connections that render MCP Apps).

use serde_json::{json, Map, Value};

use crate::agent::ToolOutcome;
use crate::jsonrpc::OwnedId;
use crate::Timestamp;

use crate::host::mcp::McpCall;
use crate::host::{ConnId, Host};

/// An app-originated tool call (`session.mcp.apps.callTool`).
#[derive(Clone, Debug)]
pub(crate) struct AppToolCall {
    tool: String,
    arguments: Value,
    started: Timestamp,
}

/// What a client asks of an MCP App's server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AppRequest {
    /// Call one of the server's tools (`tools/call`).
    CallTool,
    /// Read one of the server's resources (`resources/read`).
    ReadResource,
}

impl Host {
    /// When `tool` of `server` has a `ui://` resource and MCP Apps are on, reads it and
    /// returns `true` (the call completes when it arrives); else `false`.
    pub(crate) fn read_ui_resource(
        &mut self,
        session: &str,
        server: &str,
        tool: &str,
        tool_call_id: &str,
        text: &str,
        extra: &Map<String, Value>,
    ) -> bool {
        if !self.config.mcp_apps_enabled {
            return false;
        }
        let token = self.next_mcp_token;
        let now = self.now;
        let Some(state) = self.mcp_server(session, server) else {
            return false;
        };
        let uri = state
            .client
            .tools()
            .iter()
            .find(|t| t.name == tool)
            .and_then(|t| t.ui.as_ref())
            .and_then(|ui| ui.get("resourceUri"))
            .and_then(Value::as_str)
            .filter(|uri| uri.starts_with("ui://"))
            .map(str::to_owned);
        let Some(uri) = uri else {
            return false;
        };
        state.calls.insert(
            token,
            McpCall::UiResource {
                tool_call_id: tool_call_id.to_owned(),
                text: text.to_owned(),
                extra: extra.clone(),
            },
        );
        state
            .client
            .call(now, token, "resources/read", &json!({"uri": uri}));
        self.next_mcp_token += 1;
        self.flush_mcp(session, server);
        true
    }

    /// Completes a tool call with its `uiResource` (without it when the read failed).
    pub(crate) fn finish_with_ui_resource(
        &mut self,
        session: &str,
        tool_call_id: &str,
        text: String,
        mut extra: Map<String, Value>,
        outcome: Result<Value, String>,
    ) {
        if let Some(content) = outcome
            .ok()
            .and_then(|r| r.get("contents").and_then(|c| c.get(0)).cloned())
        {
            extra.insert("uiResource".into(), content);
        }
        self.complete_tool_with(session, tool_call_id, ToolOutcome::Success(text), extra);
    }

    /// The tools of `server` that have `_meta.ui` (`session.mcp.apps.listTools`).
    pub(crate) fn mcp_app_tools(&self, session: &str, server: &str) -> Vec<Value> {
        self.mcp_tools_json(session, server)
            .into_iter()
            .filter(|t| t.get("ui").is_some())
            .map(|mut t| {
                if let Some(ui) = t.as_object_mut().and_then(|o| o.remove("ui")) {
                    t["_meta"] = json!({"ui": ui});
                }
                t
            })
            .collect()
    }

    /// Sends `request` to `session`'s server for `conn`'s request `id` (the dialect's
    /// `method`, for error wording), answered when the server answers; an error when the
    /// server is not connected.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mcp_request_for_client(
        &mut self,
        session: &str,
        server: &str,
        conn: ConnId,
        id: &OwnedId,
        method: &'static str,
        request: AppRequest,
        params: &Value,
    ) -> Result<(), String> {
        if !self.mcp_server_running(session, server) {
            return Err(format!("MCP server '{server}' is not connected"));
        }
        let token = self.next_mcp_token;
        self.next_mcp_token += 1;
        let now = self.now;
        let (mcp_method, app_tool) = match request {
            AppRequest::CallTool => (
                "tools/call",
                Some(Box::new(AppToolCall {
                    tool: params
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: params.get("arguments").cloned().unwrap_or(json!({})),
                    started: now,
                })),
            ),
            AppRequest::ReadResource => ("resources/read", None),
        };
        if let Some(state) = self.mcp_server(session, server) {
            state.calls.insert(
                token,
                McpCall::Caller {
                    conn,
                    id: id.clone(),
                    method,
                    app_tool,
                },
            );
            state.client.call(now, token, mcp_method, params);
        }
        self.flush_mcp(session, server);
        Ok(())
    }

    /// Answers a client's app request; an app's tool call is announced.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn answer_app_request(
        &mut self,
        session: &str,
        server: &str,
        conn: ConnId,
        id: &OwnedId,
        method: &'static str,
        app_tool: Option<Box<AppToolCall>>,
        outcome: Result<Value, String>,
    ) {
        if let Some(call) = app_tool {
            let duration = self.now.saturating_duration_since(call.started).as_millis() as u64;
            let mut data = json!({"serverName": server, "toolName": call.tool,
                                  "durationMs": duration, "arguments": call.arguments});
            match &outcome {
                Ok(result) => {
                    data["success"] = json!(result.get("isError") != Some(&json!(true)));
                    data["result"] = result.clone();
                }
                Err(e) => {
                    data["success"] = json!(false);
                    data["error"] = json!({"message": e});
                }
            }
            self.emit(session, "mcp_app.tool_call_complete", &data, true);
        }
        let result = outcome.map_err(|e| self.caller_error(conn, Some(method), &e));
        self.respond(conn, id, result);
    }
}
