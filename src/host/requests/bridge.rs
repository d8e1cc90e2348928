//! Pending-request bridges: client tools behind a permission prompt.
//!
//! A tool call runs: `tool.execution_start` → `permission.requested` (unless the tool skips
//! permission) → the client's decision → `permission.completed` → `external_tool.requested`
//! → the owning client's result → `external_tool.completed` → `tool.execution_complete`.
//! Every pending request ends exactly once; a duplicate or late answer gets
//! `{success:false}` and changes nothing.

use serde_json::{json, Value};

use crate::agent::builtin::{parent_dir, url_domain};
use crate::agent::{AgentInput, ToolOutcome};

use crate::jsonrpc::OwnedId;

use crate::host::requests::permission_rules::Gate;
use crate::host::{ConnId, Host};

/// A request waiting for a client's answer.
#[derive(Clone, Debug)]
pub(crate) enum Pending {
    /// A permission prompt for a tool call.
    Permission {
        tool_call_id: String,
        tool_name: String,
        arguments: Value,
        request: Value,
        /// Set for a built-in tool call (`read_file`, `write_file`, `shell` steps): approval
        /// runs it (`Host::run_builtin`) instead of asking a client tool.
        builtin: Option<Box<crate::agent::BuiltinCall>>,
        /// Set for an MCP tool call: approval calls the server's tool.
        mcp: Option<Box<crate::host::mcp::mcp_tools::McpTarget>>,
        /// Set for an `extension-permission-access` prompt: approval lets this extension's
        /// connections see the session's permission prompts. There is no tool call.
        grants_extension: Option<String>,
    },
    /// A client tool call waiting for its owner's result.
    ExternalTool { tool_call_id: String, owner: ConnId },
    /// An MCP tool call waiting for its server's `tools/call` result (`token` names it on
    /// the server's client).
    McpTool {
        tool_call_id: String,
        server: String,
        tool: String,
        token: u64,
    },
    /// A form or URL elicitation (`session.ui.elicitation`) waiting for a provider's answer;
    /// the caller's request is answered with the result.
    Elicitation {
        answer_to: AnswerTo,
        /// The `elicitation.requested` data, offered again to a provider that attaches later.
        announced: Box<Value>,
    },
    /// A command (`session.commands.execute` or an agent's `command` step) waiting for its
    /// owner to run it.
    Command { owner: ConnId, answer_to: AnswerTo },
    /// A sampling request (an agent's, or an MCP server's `sampling/createMessage`) waiting
    /// for a client with `requestSampling` or an interest in `sampling.requested`.
    Sampling {
        answer_to: AnswerTo,
        /// The `sampling.requested` data, offered again to a sampler that attaches later.
        announced: Box<Value>,
    },
    /// A queued slash command (`command.queued`) waiting for a client to say whether it ran it.
    QueuedCommand,
}

/// Who gets the answer of a pending request.
#[derive(Clone, Debug)]
pub(crate) enum AnswerTo {
    /// A client's request (`session.ui.elicitation`, `session.commands.execute`) is answered.
    Caller(ConnId, OwnedId),
    /// The agent gets [`AgentInput::ClientAnswer`] with this token.
    Agent(u64),
    /// An MCP server's request (`elicitation/create`, `sampling/createMessage`) is answered.
    Mcp {
        /// The session's server.
        server: String,
        /// The server's request id.
        id: OwnedId,
    },
}

/// A pending permission prompt as a dialect sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PermissionPrompt<'a> {
    /// The tool call asking (empty for an extension-access prompt).
    pub tool_call_id: &'a str,
    /// The tool's name.
    pub tool_name: &'a str,
    /// The call's arguments.
    pub arguments: &'a Value,
    /// The `permissionRequest` (its `kind` says what is asked).
    pub request: &'a Value,
}

/// The decision that approves `request` and everything like it for the rest of the session
/// (an "always" answer): `approve-for-location` for a path's directory, otherwise
/// `approve-for-session` with the `approval` (and `domain`) the request implies.
pub(crate) fn always_decision(request: &Value) -> Value {
    let field = |name: &str| request.get(name).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "path" => json!({
            "kind": "approve-for-location",
            "approval": {"kind": "path"},
            "locationKey": parent_dir(field("path")),
        }),
        "url" => json!({
            "kind": "approve-for-session",
            "approval": {"kind": "url"},
            "domain": url_domain(field("url")).unwrap_or_default(),
        }),
        "shell" => json!({
            "kind": "approve-for-session",
            "approval": {"kind": "commands", "commandIdentifiers": command_ids(request)},
        }),
        "custom-tool" => json!({
            "kind": "approve-for-session",
            "approval": {"kind": "custom-tool", "toolName": field("toolName")},
        }),
        "mcp" => json!({
            "kind": "approve-for-session",
            "approval": {"kind": "mcp", "serverName": field("serverName"),
                         "toolName": field("toolName")},
        }),
        kind => json!({"kind": "approve-for-session", "approval": {"kind": kind}}),
    }
}

/// The command names (`commands[].identifier`) of a `shell` permission request.
pub(crate) fn command_ids(request: &Value) -> Vec<String> {
    request
        .get("commands")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("identifier").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// What `handlePendingPermissionRequest` decided, mapped to the runtime's result.
enum Decision {
    Approved(Value),
    Denied { result: Value, message: String },
}

fn map_decision(decision: &Value) -> Option<Decision> {
    let kind = decision.get("kind")?.as_str()?;
    let field = |name: &str| decision.get(name).cloned();
    let mut result = serde_json::Map::new();
    let denied = |result: Value, message: String| Some(Decision::Denied { result, message });
    match kind {
        "approve-once" | "approved" => Some(Decision::Approved(json!({"kind": "approved"}))),
        "approve-for-session" | "approved-for-session" => {
            result.insert("kind".into(), "approved-for-session".into());
            if let Some(a) = field("approval") {
                result.insert("approval".into(), a);
            }
            if let Some(d) = field("domain") {
                result.insert("domain".into(), d);
            }
            Some(Decision::Approved(Value::Object(result)))
        }
        "approve-for-location" | "approved-for-location" => {
            result.insert("kind".into(), "approved-for-location".into());
            for name in ["approval", "locationKey"] {
                if let Some(v) = field(name) {
                    result.insert(name.into(), v);
                }
            }
            Some(Decision::Approved(Value::Object(result)))
        }
        // A permanent (cross-session) domain approval has no result kind of its own: the
        // reference's result union has none, and `approved-for-session` requires an
        // `approval` (a domain is not one). The call itself is approved.
        "approve-permanently" => Some(Decision::Approved(json!({"kind": "approved"}))),
        "reject" | "denied-interactively-by-user" => {
            result.insert("kind".into(), "denied-interactively-by-user".into());
            let feedback = decision.get("feedback").and_then(Value::as_str);
            if let Some(f) = feedback {
                result.insert("feedback".into(), f.into());
            }
            let message = match feedback {
                Some(f) => format!("{} User feedback: {f}", crate::agent::USER_REJECTED),
                None => crate::agent::USER_REJECTED.to_owned(),
            };
            denied(Value::Object(result), message)
        }
        "user-not-available" | "denied-no-approval-rule-and-could-not-request-from-user" => denied(
            json!({"kind": "denied-no-approval-rule-and-could-not-request-from-user"}),
            "Permission denied and could not request permission from user".to_owned(),
        ),
        "cancelled" => denied(
            decision.clone(),
            "The permission request was cancelled".to_owned(),
        ),
        k if k.starts_with("denied-") => {
            denied(decision.clone(), format!("Permission denied ({k})"))
        }
        _ => None,
    }
}

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
        self.emit(
            session,
            "tool.execution_start",
            &json!({"toolCallId": tool_call_id, "toolName": name,
                    "arguments": arguments, "turnId": turn_id}),
            false,
        );
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
        let has_handler = live.session.any_permission_handler();
        // Approve-all and the session's permission rules decide before a client is asked.
        match self.permission_gate(session, tool_call_id, &request) {
            Gate::Run => return self.request_external_tool(session, tool_call_id, name, arguments),
            Gate::Denied => return,
            Gate::Ask => {}
        }
        let request_id = self.ids.next_uuid();
        self.emit(
            session,
            "permission.requested",
            &json!({"requestId": request_id, "permissionRequest": request}),
            false,
        );
        if let Some(live) = self.sessions.get_mut(session) {
            live.pending.insert(
                request_id.clone(),
                Pending::Permission {
                    tool_call_id: tool_call_id.to_owned(),
                    tool_name: name.to_owned(),
                    arguments: arguments.clone(),
                    request,
                    builtin: None,
                    mcp: None,
                    grants_extension: None,
                },
            );
        }
        // Dialects may ask their clients (or apply a remembered "always" approval).
        self.permission_requested(session, &request_id);
        if !has_handler {
            // Nobody can answer: resolve at once instead of waiting forever.
            self.resolve_permission(session, &request_id, &json!({"kind": "user-not-available"}));
        }
    }

    /// Emits `external_tool.requested` for the tool's provider and waits for its result.
    fn request_external_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        name: &str,
        arguments: &Value,
    ) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let Some((owner, _)) = live.session.tool_provider(name) else {
            self.complete_tool(
                session,
                tool_call_id,
                ToolOutcome::Failure {
                    message: format!("Tool '{name}' is not available: its client left"),
                    code: "failure".into(),
                },
            );
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

    /// Applies a client's permission decision. Returns whether it was accepted (first answer).
    pub(crate) fn resolve_permission(
        &mut self,
        session: &str,
        request_id: &str,
        decision: &Value,
    ) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        let Some(Pending::Permission { request, .. }) = live.pending.get(request_id) else {
            return false;
        };
        let decision = with_session_approval(decision, request);
        let Some(mapped) = map_decision(&decision) else {
            return false;
        };
        let Some(Pending::Permission {
            tool_call_id,
            tool_name,
            arguments,
            builtin,
            mcp,
            grants_extension,
            ..
        }) = live.pending.shift_remove(request_id)
        else {
            return false;
        };
        live.resolved.insert(request_id.to_owned());
        let result = match &mapped {
            Decision::Approved(r) => r.clone(),
            Decision::Denied { result, .. } => result.clone(),
        };
        if let Some(extension) = grants_extension {
            if matches!(mapped, Decision::Approved(_)) {
                live.approved_extensions.insert(extension);
            }
            self.emit(
                session,
                "permission.completed",
                &json!({"requestId": request_id, "result": result}),
                false,
            );
            return true;
        }
        self.emit(
            session,
            "permission.completed",
            &json!({"requestId": request_id, "toolCallId": tool_call_id, "result": result}),
            false,
        );
        match mapped {
            Decision::Approved(_) => match (builtin, mcp) {
                (Some(call), _) => self.run_builtin(session, &tool_call_id, *call),
                (None, Some(target)) => self.run_mcp_tool(
                    session,
                    &tool_call_id,
                    &target.server,
                    &target.tool,
                    &arguments,
                ),
                (None, None) => {
                    self.request_external_tool(session, &tool_call_id, &tool_name, &arguments)
                }
            },
            Decision::Denied { message, .. } => self.complete_tool(
                session,
                &tool_call_id,
                ToolOutcome::Failure {
                    message,
                    code: "denied".into(),
                },
            ),
        }
        true
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
        let Some(Pending::ExternalTool { tool_call_id, .. }) =
            live.pending.shift_remove(request_id)
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
        self.complete_tool(session, &tool_call_id, outcome);
        true
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
        crate::host::mcp::mcp_tools::merge_result(&mut data, extra);
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
                    Pending::Permission {
                        grants_extension: None,
                        ..
                    } | Pending::ExternalTool { .. }
                        | Pending::McpTool { .. }
                )
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
                Pending::Permission { tool_call_id, .. } => {
                    self.emit(
                        session,
                        "permission.completed",
                        &json!({"requestId": request_id, "toolCallId": tool_call_id,
                                "result": {"kind": "cancelled", "reason": "aborted"}}),
                        false,
                    );
                    tool_call_id
                }
                Pending::ExternalTool { tool_call_id, .. } => {
                    self.emit(
                        session,
                        "external_tool.completed",
                        &json!({"requestId": request_id}),
                        false,
                    );
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
                Pending::Permission {
                    grants_extension: Some(_),
                    ..
                } if !can_grant => prompts.push(id.clone()),
                Pending::Permission { .. } if !can_answer => prompts.push(id.clone()),
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

    /// An extension connection attached: unless its extension is already approved (or being
    /// asked about), non-extension clients get an `extension-permission-access` prompt;
    /// approving it lets the extension's connections see the session's permission prompts.
    /// With no non-extension client to ask, it is denied at once.
    pub(crate) fn request_extension_access(&mut self, session: &str, extension: &str) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let asked = live.pending.values().any(|p| {
            matches!(p, Pending::Permission { grants_extension: Some(e), .. } if e == extension)
        });
        if asked || live.approved_extensions.contains(extension) {
            return;
        }
        let can_answer = self.non_extension_permission_handler(session);
        let request = json!({
            "kind": "extension-permission-access",
            "extensionName": extension,
            "capabilities": ["permissions"],
        });
        let request_id = self.ids.next_uuid();
        self.emit(
            session,
            "permission.requested",
            &json!({"requestId": request_id, "permissionRequest": request}),
            false,
        );
        if let Some(live) = self.sessions.get_mut(session) {
            live.pending.insert(
                request_id.clone(),
                Pending::Permission {
                    tool_call_id: String::new(),
                    tool_name: String::new(),
                    arguments: Value::Null,
                    request,
                    builtin: None,
                    mcp: None,
                    grants_extension: Some(extension.to_owned()),
                },
            );
        }
        if !can_answer {
            self.resolve_permission(session, &request_id, &json!({"kind": "user-not-available"}));
        }
    }

    /// Whether a client that is not an extension, of a dialect whose clients may grant
    /// extensions access, answers permission prompts (only such a client may grant an
    /// extension access).
    pub(crate) fn non_extension_permission_handler(&self, session: &str) -> bool {
        self.sessions.get(session).is_some_and(|l| {
            l.session.attached.iter().any(|(c, a)| {
                a.request_permission
                    && a.extension.is_none()
                    && self
                        .conns
                        .get(c)
                        .is_some_and(|c| self.dialects[c.dialect.index()].grants_extension_access())
            })
        })
    }

    /// A permission prompt of `session` is pending: every dialect may ask its clients.
    pub(crate) fn permission_requested(&mut self, session: &str, request_id: &str) {
        for handler in self.dialects {
            handler.permission_requested(self, session, request_id);
        }
    }

    /// The pending permission prompt `request_id` of `session`, if it is still pending.
    pub(crate) fn pending_permission(
        &self,
        session: &str,
        request_id: &str,
    ) -> Option<PermissionPrompt<'_>> {
        match self.sessions.get(session)?.pending.get(request_id)? {
            Pending::Permission {
                tool_call_id,
                tool_name,
                arguments,
                request,
                ..
            } => Some(PermissionPrompt {
                tool_call_id,
                tool_name,
                arguments,
                request,
            }),
            _ => None,
        }
    }

    /// Whether `conn` may answer permission prompt `request_id`: extension access is granted
    /// only by a client that is not itself an extension.
    pub(crate) fn may_answer_permission(
        &self,
        session: &str,
        request_id: &str,
        conn: ConnId,
    ) -> bool {
        let Some(live) = self.sessions.get(session) else {
            return false;
        };
        match live.pending.get(request_id) {
            Some(Pending::Permission {
                grants_extension: Some(_),
                ..
            }) => live
                .session
                .attached
                .get(&conn)
                .is_some_and(|a| a.extension.is_none()),
            _ => true,
        }
    }

    /// The session's permission prompts still waiting for an answer: request id and the
    /// request, in the order they were asked.
    pub(crate) fn pending_permissions(&self, session: &str) -> Vec<(String, Value)> {
        let Some(live) = self.sessions.get(session) else {
            return Vec::new();
        };
        live.pending
            .iter()
            .filter_map(|(id, p)| match p {
                Pending::Permission { request, .. } => Some((id.clone(), request.clone())),
                _ => None,
            })
            .collect()
    }

    /// Re-emits `permission.requested` for prompts still pending (`continuePendingWork`).
    /// Whether the session has tool calls or permission prompts waiting for a client.
    pub(crate) fn has_pending_tool_work(&self, session: &str) -> bool {
        self.sessions.get(session).is_some_and(|live| {
            live.pending.values().any(|p| {
                matches!(
                    p,
                    Pending::ExternalTool { .. }
                        | Pending::Permission {
                            grants_extension: None,
                            ..
                        }
                )
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

    pub(crate) fn reemit_pending_permissions(&mut self, session: &str) {
        for (request_id, request) in self.pending_permissions(session) {
            self.emit(
                session,
                "permission.requested",
                &json!({"requestId": request_id, "permissionRequest": request}),
                false,
            );
        }
    }
}

/// An approve-for-session decision without an `approval` (e.g. the SDKs' default
/// `ApproveForSession`) approves what was asked: the approval is derived from the request
/// (`custom-tool` → `{kind:"custom-tool", toolName}`, `shell` → the command identifiers, …),
/// as the result union requires one.
fn with_session_approval<'a>(decision: &'a Value, request: &Value) -> std::borrow::Cow<'a, Value> {
    let kind = decision.get("kind").and_then(Value::as_str);
    if !matches!(kind, Some("approve-for-session" | "approved-for-session"))
        || decision.get("approval").is_some()
    {
        return std::borrow::Cow::Borrowed(decision);
    }
    let derived = always_decision(request);
    if derived.get("kind").and_then(Value::as_str) != Some("approve-for-session") {
        return std::borrow::Cow::Borrowed(decision);
    }
    let mut decision = decision.clone();
    for key in ["approval", "domain"] {
        if let (Some(value), None) = (derived.get(key), decision.get(key)) {
            decision[key] = value.clone();
        }
    }
    std::borrow::Cow::Owned(decision)
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
