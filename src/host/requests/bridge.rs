//! Pending-request bridges: the session's pending requests, and client tools behind a
//! permission prompt (the prompt itself takes the one path of `permission.rs`).
//!
//! A tool call runs: `tool.execution_start` → `permission.requested` (unless the tool skips
//! permission) → the client's decision → `permission.completed` → `external_tool.requested`
//! → the owning client's result → `external_tool.completed` → `tool.execution_complete`.
//! Every pending request ends exactly once; a duplicate or late answer gets
//! `{success:false}` and changes nothing.

use serde_json::{json, Map, Value};

use crate::agent::{AgentInput, ToolOutcome};

use crate::host::pending::{Approval, Pending, PermissionAsk, ToolCaller};
use crate::host::{ConnId, Host};

impl Host {
    /// Starts a client tool call for the session's agent.
    pub(crate) fn start_tool_call(
        &mut self,
        session: &str,
        tool_call_id: &str,
        name: &str,
        arguments: &Value,
        turn_id: &str,
    ) {
        let client_tool = self
            .sessions
            .get(session)
            .is_some_and(|l| l.session.tool_provider(name).is_some());
        if !client_tool {
            if let Some((server, tool)) = self.mcp_tool_by_name(session, name) {
                // An MCP tool as the model names it (`SERVER-TOOL`).
                self.start_mcp_tool_call(session, tool_call_id, &server, &tool, arguments, turn_id);
                return;
            }
        }
        self.emit_tool_start(session, tool_call_id, name, arguments, turn_id);
        if crate::host::CANVAS_TOOLS.contains(&name)
            && self.canvas_renderer_attached(session)
            && self
                .sessions
                .get(session)
                .is_some_and(|l| l.session.tool_provider(name).is_none())
        {
            // The runtime's own canvas tools, offered while a renderer is attached.
            self.run_canvas_tool(session, tool_call_id, name, arguments);
            return;
        }
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let Some((_, decl)) = live.session.tool_provider(name) else {
            self.complete_tool(
                session,
                tool_call_id,
                ToolOutcome::Failure {
                    message: format!(
                        "Tool '{name}' is not available: no attached client provides it"
                    ),
                    code: "failure".into(),
                },
            );
            return;
        };
        if decl.skip_permission {
            self.request_external_tool(session, tool_call_id, name, arguments);
            return;
        }
        let request = json!({
            "kind": "custom-tool",
            "toolCallId": tool_call_id,
            "toolName": name,
            "toolDescription": decl.description,
            "args": arguments,
        });
        self.ask_permission(
            session,
            PermissionAsk {
                tool_call_id: tool_call_id.to_owned(),
                tool_name: name.to_owned(),
                arguments: arguments.clone(),
                request,
                approval: Approval::ClientTool,
            },
        );
    }

    /// Emits `external_tool.requested` for the tool's provider and waits for its result,
    /// for the session's agent.
    pub(in crate::host) fn request_external_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        name: &str,
        arguments: &Value,
    ) {
        self.request_external_tool_for(session, tool_call_id, name, arguments, ToolCaller::Agent);
    }

    /// Emits `external_tool.requested` for the tool's provider and waits for its result,
    /// which goes to `caller`.
    pub(in crate::host) fn request_external_tool_for(
        &mut self,
        session: &str,
        tool_call_id: &str,
        name: &str,
        arguments: &Value,
        caller: ToolCaller,
    ) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let Some((owner, _)) = live.session.tool_provider(name) else {
            let outcome = ToolOutcome::Failure {
                message: format!("Tool '{name}' is not available: its client left"),
                code: "failure".into(),
            };
            self.finish_tool_call(session, tool_call_id, caller, outcome);
            return;
        };
        let cwd = live.session.cwd.clone();
        let request_id = self.ids.next_uuid();
        if let Some(live) = self.sessions.get_mut(session) {
            live.pending.insert(
                request_id.clone(),
                Pending::ExternalTool {
                    tool_call_id: tool_call_id.to_owned(),
                    owner,
                    caller,
                },
            );
        }
        let mut data = json!({
            "requestId": request_id,
            "sessionId": session,
            "toolCallId": tool_call_id,
            "toolName": name,
            "arguments": arguments,
        });
        if let Some(cwd) = cwd {
            data["workingDirectory"] = Value::String(cwd);
        }
        // A tool declared by an extension connection is routed to that connection only;
        // the other clients see its completion.
        let only = self
            .sessions
            .get(session)
            .and_then(|l| l.session.attached.get(&owner))
            .is_some_and(|a| a.extension.is_some())
            .then_some(owner);
        self.emit_to(session, "external_tool.requested", &data, false, only);
    }

    /// Applies a client's tool result (`result` or `error`). Returns whether it was accepted.
    pub(crate) fn resolve_tool_call(
        &mut self,
        session: &str,
        request_id: &str,
        result: Option<&Value>,
        error: Option<&Value>,
    ) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        let Some(Pending::ExternalTool { .. }) = live.pending.get(request_id) else {
            return false;
        };
        let Some(Pending::ExternalTool {
            tool_call_id,
            caller,
            ..
        }) = live.pending.shift_remove(request_id)
        else {
            return false;
        };
        live.resolved.insert(request_id.to_owned());
        self.emit(
            session,
            "external_tool.completed",
            &json!({"requestId": request_id}),
            false,
        );
        let outcome = match (error, result) {
            (Some(_), _) => ToolOutcome::Failure {
                message: "Tool execution failed".into(),
                code: "failure".into(),
            },
            (None, Some(result)) => tool_result_outcome(result),
            (None, None) => ToolOutcome::Success(String::new()),
        };
        if let ToolCaller::Served { conn, id } = caller {
            self.answer_served_tool_call(conn, &id, &outcome);
            return true;
        }
        if let ToolOutcome::Failure { message, .. } = &outcome {
            if result.is_some() && error.is_none() {
                // The tool's own text for the model (`textResultForLlm` of a failed result):
                // the model sees it as is, not wrapped as an error.
                let content = message.clone();
                let data = json!({"toolCallId": tool_call_id, "success": false,
                    "error": {"message": message,
                              "code": match &outcome { ToolOutcome::Failure { code, .. } => code.as_str(), _ => "failure" }},
                    "result": {"content": content}});
                self.emit(session, "tool.execution_complete", &data, false);
                self.queue_agent_input(
                    session,
                    AgentInput::ToolDone {
                        tool_call_id,
                        outcome,
                    },
                );
                return true;
            }
        }
        self.complete_client_tool(session, &tool_call_id, outcome);
        true
    }

    /// Gives `caller` the outcome of a tool call (see [`ToolCaller`]).
    pub(in crate::host) fn finish_tool_call(
        &mut self,
        session: &str,
        tool_call_id: &str,
        caller: ToolCaller,
        outcome: ToolOutcome,
    ) {
        match caller {
            ToolCaller::Agent => self.complete_tool(session, tool_call_id, outcome),
            ToolCaller::Served { conn, id } => self.answer_served_tool_call(conn, &id, &outcome),
        }
    }

    /// Emits `tool.execution_complete` and hands the outcome to the agent.
    pub(crate) fn complete_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        outcome: ToolOutcome,
    ) {
        self.complete_tool_with(session, tool_call_id, outcome, serde_json::Map::new());
    }

    /// [`Host::complete_tool`] with `extra` members in a successful call's `result` (an MCP
    /// tool's `contents` and `structuredContent`).
    pub(crate) fn complete_tool_with(
        &mut self,
        session: &str,
        tool_call_id: &str,
        outcome: ToolOutcome,
        extra: serde_json::Map<String, Value>,
    ) {
        let mut data = match &outcome {
            ToolOutcome::Success(text) => json!({
                "toolCallId": tool_call_id,
                "success": true,
                "result": {"content": text, "detailedContent": text},
            }),
            ToolOutcome::Failure { message, code } => json!({
                "toolCallId": tool_call_id,
                "success": false,
                "error": {"message": message, "code": code},
            }),
        };
        merge_result(&mut data, extra);
        self.emit(session, "tool.execution_complete", &data, false);
        self.queue_agent_input(
            session,
            AgentInput::ToolDone {
                tool_call_id: tool_call_id.to_owned(),
                outcome,
            },
        );
    }

    /// Resolves every pending request of the session as cancelled (abort).
    pub(crate) fn cancel_tool_calls(&mut self, session: &str) {
        self.cancel_runtime_tools(session);
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let tool_related: Vec<String> = live
            .pending
            .iter()
            .filter(|(_, p)| {
                matches!(
                    p,
                    Pending::Permission(asked)
                        if !matches!(asked.approval, Approval::ExtensionAccess(_))
                ) || matches!(p, Pending::ExternalTool { .. } | Pending::McpTool { .. })
            })
            .map(|(id, _)| id.clone())
            .collect();
        let pending: Vec<(String, Pending)> = tool_related
            .into_iter()
            .filter_map(|id| live.pending.shift_remove(&id).map(|p| (id, p)))
            .collect();
        for (request_id, p) in pending {
            if let Some(live) = self.sessions.get_mut(session) {
                live.resolved.insert(request_id.clone());
            }
            let tool_call_id = match p {
                Pending::Permission(asked) => {
                    let tool_call_id = asked.tool_call_id;
                    self.emit(
                        session,
                        "permission.completed",
                        &json!({"requestId": request_id, "toolCallId": tool_call_id,
                                "result": {"kind": "cancelled", "reason": "aborted"}}),
                        false,
                    );
                    tool_call_id
                }
                Pending::ExternalTool {
                    tool_call_id,
                    caller,
                    ..
                } => {
                    self.emit(
                        session,
                        "external_tool.completed",
                        &json!({"requestId": request_id}),
                        false,
                    );
                    if let ToolCaller::Served { conn, id } = caller {
                        // The agent that called reports its own tool call's end.
                        let outcome = ToolOutcome::Failure {
                            message: "The tool call was cancelled".into(),
                            code: "cancelled".into(),
                        };
                        self.answer_served_tool_call(conn, &id, &outcome);
                        continue;
                    }
                    tool_call_id
                }
                Pending::McpTool {
                    tool_call_id,
                    server,
                    token,
                    ..
                } => {
                    self.cancel_mcp_call(session, &server, token);
                    tool_call_id
                }
                Pending::Elicitation { .. }
                | Pending::Command { .. }
                | Pending::Sampling { .. }
                | Pending::QueuedCommand => continue,
            };
            self.emit(
                session,
                "tool.execution_complete",
                &json!({"toolCallId": tool_call_id, "success": false,
                        "error": {"message": "The tool call was cancelled", "code": "cancelled"}}),
                false,
            );
        }
    }

    /// Resolves what a departing connection leaves behind: calls to tools it owned fail;
    /// permission prompts that no remaining connection can answer are resolved as
    /// `user-not-available`.
    pub(crate) fn resolve_for_departed(&mut self, session: &str, conn: ConnId) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        if live.session.attached.is_empty() {
            // The last client left: its tool calls and permission prompts stay pending, for
            // a client that resumes the session to answer (`continuePendingWork`) or to
            // interrupt ([`Host::interrupt_orphaned_work`]).
            return self.resolve_client_requests_for_departed(session, conn);
        }
        let can_answer = live.session.any_permission_handler();
        let can_grant = self.non_extension_permission_handler(session);
        let mut tools = Vec::new();
        let mut prompts = Vec::new();
        for (id, p) in &live.pending {
            match p {
                Pending::ExternalTool { owner, .. } if *owner == conn => tools.push(id.clone()),
                Pending::Permission(asked)
                    if matches!(asked.approval, Approval::ExtensionAccess(_)) && !can_grant =>
                {
                    prompts.push(id.clone())
                }
                Pending::Permission(_) if !can_answer => prompts.push(id.clone()),
                _ => {}
            }
        }
        for id in tools {
            self.resolve_tool_call(
                session,
                &id,
                None,
                Some(&json!("the client that provides this tool disconnected")),
            );
        }
        for id in prompts {
            self.resolve_permission(session, &id, &json!({"kind": "user-not-available"}));
        }
        self.resolve_client_requests_for_departed(session, conn);
    }

    /// Whether the session has tool calls or permission prompts waiting for a client.
    pub(crate) fn has_pending_tool_work(&self, session: &str) -> bool {
        self.sessions.get(session).is_some_and(|live| {
            live.pending.values().any(|p| {
                matches!(
                    p,
                    Pending::Permission(asked)
                        if !matches!(asked.approval, Approval::ExtensionAccess(_))
                ) || matches!(p, Pending::ExternalTool { .. })
            })
        })
    }

    /// A client resumed a session whose previous clients all left with work pending, and
    /// did not ask to continue it: the running turn ends, its tool calls interrupted
    /// ([`AgentInput::Interrupt`]), so the session is ready for new prompts.
    pub(crate) fn interrupt_orphaned_work(&mut self, session: &str) {
        if self.has_pending_tool_work(session) {
            self.queue_agent_input(session, crate::agent::AgentInput::Interrupt);
        }
    }
}

/// Maps a client's tool `result` (a string or `{textResultForLlm, resultType, …}`) to an outcome.
fn tool_result_outcome(result: &Value) -> ToolOutcome {
    match result {
        Value::String(s) => ToolOutcome::Success(s.clone()),
        Value::Object(o) if o.get("textResultForLlm").is_some_and(Value::is_string) => {
            let text = o["textResultForLlm"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match o.get("resultType").and_then(Value::as_str) {
                None | Some("success") => ToolOutcome::Success(text),
                Some(kind) => ToolOutcome::Failure {
                    message: if text.is_empty() {
                        format!("Tool returned {kind}")
                    } else {
                        text
                    },
                    // The client's own word (`failure`, `denied`, `rejected`, …).
                    code: kind.to_owned(),
                },
            }
        }
        Value::Null => ToolOutcome::Success(String::new()),
        other => ToolOutcome::Success(other.to_string()),
    }
}

/// Adds `extra` to a `tool.execution_complete` result object.
fn merge_result(data: &mut Value, extra: Map<String, Value>) {
    if let Some(result) = data.get_mut("result").and_then(Value::as_object_mut) {
        result.extend(extra);
    }
}
