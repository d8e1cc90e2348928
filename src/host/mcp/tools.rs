//! MCP tool calls: `tool.execution_start` (with `mcpServerName` / `mcpToolName`) → a
//! permission prompt of kind `mcp` (`{serverName, toolName, toolTitle, readOnly, args}`;
//! tools the server annotates `readOnlyHint: true` run without one, as the real runtime does)
//! → `tools/call` → `tool.execution_complete` with the result mapped (text for the model,
//! `contents` and `structuredContent` for clients; `isError` fails the call).
//!
//! The model sees a server's tools as `SERVER-TOOL` (the runtime's naming), filtered by the
//! configuration's `tools` / `excludeTools`. A call made while its server is still starting
//! waits for it.

use crate::host::pending::{Approval, McpTarget, PermissionAsk};
use serde_json::{json, Value};

use crate::agent::ToolOutcome;
use crate::mcp::tool::map_result;
use crate::model::ToolSpec;

use crate::host::mcp::{McpCall, McpStatus};
use crate::host::{Host, Pending};

/// A tool call waiting for its server to start.
#[derive(Clone, Debug)]
pub(crate) struct QueuedCall {
    tool_call_id: String,
    tool: String,
    arguments: Value,
    turn_id: String,
}

impl Host {
    /// The MCP tools of `session` as the model sees them (`SERVER-TOOL`).
    pub(crate) fn mcp_tool_specs(&self, session: &str) -> Vec<ToolSpec> {
        let mut out = Vec::new();
        for server in self.mcp_servers(session) {
            if server.status != McpStatus::Connected {
                continue;
            }
            for tool in server.client.tools() {
                if !server.config.tools.allows(&tool.name) {
                    continue;
                }
                out.push(ToolSpec {
                    name: format!("{}-{}", server.config.name, tool.name),
                    description: tool.description.clone(),
                    parameters: tool.input_schema.clone(),
                });
            }
        }
        out
    }

    /// The tools of `session`'s server `server` as `session.mcp.listTools` reports them
    /// (`{name, description?, ui?}`), unfiltered.
    pub(crate) fn mcp_tools_json(&self, session: &str, server: &str) -> Vec<Value> {
        self.mcp_servers(session)
            .filter(|s| s.config.name == server)
            .flat_map(|s| s.client.tools())
            .map(|t| {
                let mut entry = json!({"name": t.name});
                if !t.description.is_empty() {
                    entry["description"] = json!(t.description);
                }
                if let Some(ui) = &t.ui {
                    entry["ui"] = ui.clone();
                }
                entry
            })
            .collect()
    }

    /// Resolves a model-facing name `SERVER-TOOL` to its server and tool.
    pub(crate) fn mcp_tool_by_name(&self, session: &str, name: &str) -> Option<(String, String)> {
        self.mcp_servers(session).find_map(|server| {
            let tool = name
                .strip_prefix(server.config.name.as_str())?
                .strip_prefix('-')?;
            server
                .client
                .tools()
                .iter()
                .any(|t| t.name == tool && server.config.tools.allows(tool))
                .then(|| (server.config.name.clone(), tool.to_owned()))
        })
    }

    /// Starts a call of MCP tool `tool` on `server` for the session's agent.
    pub(crate) fn start_mcp_tool_call(
        &mut self,
        session: &str,
        tool_call_id: &str,
        server: &str,
        tool: &str,
        arguments: &Value,
        turn_id: &str,
    ) {
        let Some(state) = self.mcp_server(session, server) else {
            self.emit_mcp_start(
                session,
                tool_call_id,
                server,
                tool,
                arguments,
                turn_id,
                None,
            );
            let message = format!("MCP server '{server}' is not configured for this session");
            self.fail_tool(session, tool_call_id, message);
            return;
        };
        match state.status {
            McpStatus::Pending => {
                state.queued.push(QueuedCall {
                    tool_call_id: tool_call_id.to_owned(),
                    tool: tool.to_owned(),
                    arguments: arguments.clone(),
                    turn_id: turn_id.to_owned(),
                });
                return;
            }
            McpStatus::Failed | McpStatus::NeedsAuth | McpStatus::Stopped => {
                let reason = state
                    .error
                    .clone()
                    .unwrap_or_else(|| "it is not running".to_owned());
                self.emit_mcp_start(
                    session,
                    tool_call_id,
                    server,
                    tool,
                    arguments,
                    turn_id,
                    None,
                );
                let message = format!("MCP server '{server}' is not available: {reason}");
                self.fail_tool(session, tool_call_id, message);
                return;
            }
            McpStatus::Connected => {}
        }
        let definition = state
            .client
            .tools()
            .iter()
            .find(|t| t.name == tool)
            .filter(|_| state.config.tools.allows(tool))
            .cloned();
        let ui = definition.as_ref().and_then(|d| d.ui.clone());
        self.emit_mcp_start(session, tool_call_id, server, tool, arguments, turn_id, ui);
        let Some(definition) = definition else {
            let message = format!("Tool '{tool}' is not offered by MCP server '{server}'");
            self.fail_tool(session, tool_call_id, message);
            return;
        };
        if definition.read_only {
            self.run_mcp_tool(session, tool_call_id, server, tool, arguments);
            return;
        }
        let request = json!({
            "kind": "mcp",
            "toolCallId": tool_call_id,
            "serverName": server,
            "toolName": tool,
            "toolTitle": definition.title,
            "readOnly": definition.read_only,
            "args": arguments,
        });
        self.ask_permission(
            session,
            PermissionAsk {
                tool_call_id: tool_call_id.to_owned(),
                tool_name: format!("{server}-{tool}"),
                arguments: arguments.clone(),
                request,
                approval: Approval::Mcp(Box::new(McpTarget {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                })),
            },
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_mcp_start(
        &mut self,
        session: &str,
        tool_call_id: &str,
        server: &str,
        tool: &str,
        arguments: &Value,
        turn_id: &str,
        ui: Option<Value>,
    ) {
        let mut data = json!({
            "toolCallId": tool_call_id,
            "toolName": format!("{server}-{tool}"),
            "arguments": arguments,
            "turnId": turn_id,
            "mcpServerName": server,
            "mcpConfigServerName": server,
            "mcpToolName": tool,
        });
        if let Some(transport) = self
            .mcp_servers(session)
            .find(|s| s.config.name == server)
            .map(|s| s.config.transport_name())
        {
            data["mcpTransport"] = json!(transport);
        }
        if let Some(ui) = ui.filter(|_| self.config.mcp_apps_enabled) {
            data["toolDescription"] = json!({"name": tool, "_meta": {"ui": ui}});
        }
        self.emit(session, "tool.execution_start", &data, false);
    }

    fn fail_tool(&mut self, session: &str, tool_call_id: &str, message: String) {
        self.complete_tool(
            session,
            tool_call_id,
            ToolOutcome::Failure {
                message,
                code: "failure".into(),
            },
        );
    }

    /// Runs an approved (or read-only) MCP tool call: `tools/call` on the server.
    pub(crate) fn run_mcp_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        server: &str,
        tool: &str,
        arguments: &Value,
    ) {
        if self.has_hooks(session) {
            // A `preMcpToolCall` hook decides the request's `_meta` first.
            let call = crate::host::pending::McpHookCall {
                tool_call_id: tool_call_id.to_owned(),
                server: server.to_owned(),
                tool: tool.to_owned(),
                arguments: arguments.clone(),
            };
            if self.invoke_mcp_hook(session, call) {
                return;
            }
        }
        self.send_mcp_tool_call(session, tool_call_id, server, tool, arguments, None);
    }

    /// Sends the `tools/call` of a model's MCP tool call, with `meta` as its `_meta`.
    pub(crate) fn send_mcp_tool_call(
        &mut self,
        session: &str,
        tool_call_id: &str,
        server: &str,
        tool: &str,
        arguments: &Value,
        meta: Option<&Value>,
    ) {
        let token = self.next_mcp_token;
        self.next_mcp_token += 1;
        let request_id = format!("mcp-call-{token}");
        let now = self.now;
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let Some(state) = live.mcp.servers.get_mut(server) else {
            return;
        };
        state.calls.insert(
            token,
            McpCall::Tool {
                request_id: request_id.clone(),
            },
        );
        live.pending.insert(
            request_id,
            Pending::McpTool {
                tool_call_id: tool_call_id.to_owned(),
                server: server.to_owned(),
                tool: tool.to_owned(),
                token,
            },
        );
        let arguments = if arguments.is_object() {
            arguments.clone()
        } else {
            json!({})
        };
        if let Some(state) = self.mcp_server(session, server) {
            state
                .client
                .call_tool_with_meta(now, token, tool, &arguments, meta);
        }
        self.flush_mcp(session, server);
    }

    /// A `tools/call` ended: the pending tool call `request_id` completes (nothing happens
    /// when it was already resolved, e.g. by an abort).
    pub(crate) fn finish_mcp_tool_call(
        &mut self,
        session: &str,
        request_id: &str,
        outcome: Result<Value, String>,
    ) {
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let Some(Pending::McpTool {
            tool_call_id,
            server,
            tool,
            ..
        }) = live.pending.shift_remove(request_id)
        else {
            return;
        };
        live.resolved.insert(request_id.to_owned());
        match outcome {
            Ok(result) => {
                let mapped = map_result(&result);
                if mapped.is_error {
                    let message = if mapped.text.is_empty() {
                        "The MCP tool reported an error".to_owned()
                    } else {
                        mapped.text
                    };
                    self.fail_tool(session, &tool_call_id, message);
                } else if !self.read_ui_resource(
                    session,
                    &server,
                    &tool,
                    &tool_call_id,
                    &mapped.text,
                    &mapped.extra,
                ) {
                    self.complete_tool_with(
                        session,
                        &tool_call_id,
                        ToolOutcome::Success(mapped.text),
                        mapped.extra,
                    );
                }
            }
            Err(reason) => self.fail_tool(session, &tool_call_id, reason),
        }
    }

    /// Cancels the `tools/call` behind an aborted call.
    pub(crate) fn cancel_mcp_call(&mut self, session: &str, server: &str, token: u64) {
        let now = self.now;
        if let Some(state) = self.mcp_server(session, server) {
            state.calls.remove(&token);
            state
                .client
                .cancel_call(now, token, "the tool call was cancelled");
        }
        self.flush_mcp(session, server);
    }

    /// Runs (or fails) the calls made while `server` was starting.
    pub(crate) fn run_queued_mcp_calls(&mut self, session: &str, server: &str) {
        let queued = self
            .mcp_server(session, server)
            .map(|s| std::mem::take(&mut s.queued))
            .unwrap_or_default();
        for call in queued {
            self.start_mcp_tool_call(
                session,
                &call.tool_call_id,
                server,
                &call.tool,
                &call.arguments,
                &call.turn_id,
            );
        }
    }
}
