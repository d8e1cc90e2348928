//! Permission prompts: the one path every prompt takes, whatever asks.
//!
//! A client tool call, a built-in tool call, an MCP tool call and an extension asking to see
//! the session's prompts all become a [`PermissionAsk`] with the [`Approval`] that says what
//! approving it does. [`Host::ask_permission`] emits `permission.requested`, keeps the prompt
//! pending and lets every dialect ask its clients; the first decision
//! ([`Host::resolve_permission`]) emits `permission.completed` and runs the approval or fails
//! the tool call. A prompt nobody can answer is resolved at once as `user-not-available`.
//! Approve-all and the session's permission rules decide before anyone is asked.

use serde_json::{json, Value};

use crate::agent::builtin::{parent_dir, url_domain};
use crate::agent::ToolOutcome;

use crate::host::pending::{AcpChoice, Approval, Pending, PermissionAsk};
use crate::host::requests::permission_rules::Gate;
use crate::host::{ConnId, Host};

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

impl Host {
    /// The one way to a permission decision. Approve-all and the session's permission rules
    /// decide a tool call first: an approved call runs its [`Approval`] at once, a denied one
    /// has failed. Otherwise the session's clients are asked: `permission.requested`, the
    /// prompt kept pending, every dialect told ([`Host::permission_requested`]; not for
    /// extension access, which only the session's own clients answer). With nobody to answer,
    /// it is resolved at once as `user-not-available`.
    pub(crate) fn ask_permission(&mut self, session: &str, ask: PermissionAsk) {
        let extension_access = matches!(ask.approval, Approval::ExtensionAccess(_));
        if let Approval::AcpAgent(acp) = &ask.approval {
            // The agent runs its own tool: approve-all and the rules answer it directly.
            match self.standing_permission(session, &ask.request) {
                Ok(Gate::Ask) => {}
                Ok(Gate::Run) => return self.answer_acp_permission(acp, AcpChoice::Allow),
                Ok(Gate::Denied) | Err(_) => {
                    return self.answer_acp_permission(acp, AcpChoice::Reject)
                }
            }
        } else if !extension_access {
            match self.permission_gate(session, &ask.tool_call_id, &ask.request) {
                Gate::Run => {
                    let PermissionAsk {
                        tool_call_id,
                        tool_name,
                        arguments,
                        approval,
                        ..
                    } = ask;
                    return self.run_approved(
                        session,
                        &tool_call_id,
                        &tool_name,
                        &arguments,
                        approval,
                    );
                }
                Gate::Denied => return,
                Gate::Ask => {}
            }
        }
        let answerable = if extension_access {
            self.non_extension_permission_handler(session)
        } else {
            self.sessions
                .get(session)
                .is_some_and(|l| l.session.any_permission_handler())
        };
        let request_id = self.ids.next_uuid();
        self.emit(
            session,
            "permission.requested",
            &json!({"requestId": request_id, "permissionRequest": ask.request}),
            false,
        );
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        live.pending
            .insert(request_id.clone(), Pending::Permission(Box::new(ask)));
        if !extension_access {
            self.permission_requested(session, &request_id);
        }
        if !answerable {
            // Nobody can answer: resolve at once instead of waiting forever.
            self.resolve_permission(session, &request_id, &json!({"kind": "user-not-available"}));
        }
    }

    /// Runs what an approved prompt (or a rule) allowed.
    fn run_approved(
        &mut self,
        session: &str,
        tool_call_id: &str,
        tool_name: &str,
        arguments: &Value,
        approval: Approval,
    ) {
        match approval {
            Approval::ClientTool => {
                self.request_external_tool(session, tool_call_id, tool_name, arguments)
            }
            Approval::Builtin(call) => self.run_builtin(session, tool_call_id, *call),
            Approval::Mcp(target) => self.run_mcp_tool(
                session,
                tool_call_id,
                &target.server,
                &target.tool,
                arguments,
            ),
            Approval::AcpAgent(acp) => self.answer_acp_permission(&acp, AcpChoice::Allow),
            Approval::ExtensionAccess(_) => {}
        }
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
        let Some(Pending::Permission(asked)) = live.pending.get(request_id) else {
            return false;
        };
        let decision = with_session_approval(decision, &asked.request);
        let Some(mapped) = map_decision(&decision) else {
            return false;
        };
        let Some(Pending::Permission(asked)) = live.pending.shift_remove(request_id) else {
            return false;
        };
        live.resolved.insert(request_id.to_owned());
        let PermissionAsk {
            tool_call_id,
            tool_name,
            arguments,
            approval,
            ..
        } = *asked;
        let result = match &mapped {
            Decision::Approved(r) => r.clone(),
            Decision::Denied { result, .. } => result.clone(),
        };
        if let Approval::AcpAgent(acp) = &approval {
            self.emit(
                session,
                "permission.completed",
                &json!({"requestId": request_id, "toolCallId": tool_call_id, "result": result}),
                false,
            );
            let choice = match &mapped {
                Decision::Approved(r) if r["kind"] != "approved" => AcpChoice::AllowAlways,
                Decision::Approved(_) => AcpChoice::Allow,
                Decision::Denied { .. } => AcpChoice::Reject,
            };
            self.answer_acp_permission(acp, choice);
            return true;
        }
        if let Approval::ExtensionAccess(extension) = approval {
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
            Decision::Approved(_) => {
                self.run_approved(session, &tool_call_id, &tool_name, &arguments, approval)
            }
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

    /// An extension connection attached: unless its extension is already approved (or being
    /// asked about), non-extension clients get an `extension-permission-access` prompt;
    /// approving it lets the extension's connections see the session's permission prompts.
    /// With no non-extension client to ask, it is denied at once.
    pub(crate) fn request_extension_access(&mut self, session: &str, extension: &str) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let asked = live.pending.values().any(|p| {
            matches!(p, Pending::Permission(asked)
                if matches!(&asked.approval, Approval::ExtensionAccess(e) if e == extension))
        });
        if asked || live.approved_extensions.contains(extension) {
            return;
        }
        let request = json!({
            "kind": "extension-permission-access",
            "extensionName": extension,
            "capabilities": ["permissions"],
        });
        self.ask_permission(
            session,
            PermissionAsk {
                tool_call_id: String::new(),
                tool_name: String::new(),
                arguments: Value::Null,
                request,
                approval: Approval::ExtensionAccess(extension.to_owned()),
            },
        );
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
            Pending::Permission(asked) => Some(PermissionPrompt {
                tool_call_id: &asked.tool_call_id,
                tool_name: &asked.tool_name,
                arguments: &asked.arguments,
                request: &asked.request,
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
            Some(Pending::Permission(asked))
                if matches!(asked.approval, Approval::ExtensionAccess(_)) =>
            {
                live.session
                    .attached
                    .get(&conn)
                    .is_some_and(|a| a.extension.is_none())
            }
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
                Pending::Permission(asked) => Some((id.clone(), asked.request.clone())),
                _ => None,
            })
            .collect()
    }

    /// Re-emits `permission.requested` for prompts still pending (`continuePendingWork`).
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
