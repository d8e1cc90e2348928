//! The Copilot SDK dialect (protocol v3): the method table over the host.
//!
//! Method names, params and results follow the reference (`copilot-sdk.md` §2, §5, §7) and
//! the real runtime's traces. Errors use the runtime's wording, e.g.
//! `-32603 "Request session.send failed with message: Session not found for sessionId: X"`.

mod params;

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::AgentInput;
use crate::host::{AfterResponse, AnswerTo, CanvasReply, ConnId, Host, Output, PROTOCOL_VERSION};
use crate::jsonrpc::{code, ErrorObject, OwnedId};
use crate::session::Session;

use params::*;

/// Every method this dialect answers (anything else gets -32601 `Unhandled method <m>`).
pub const METHODS: &[&str] = &[
    "connect",
    "ping",
    "status.get",
    "auth.getStatus",
    "models.list",
    "session.create",
    "session.resume",
    "session.send",
    "session.sendAndWait",
    "session.abort",
    "session.detach",
    "session.delete",
    "session.list",
    "session.getMetadata",
    "session.getLastId",
    "session.getMessages",
    "session.getForeground",
    "session.setForeground",
    "session.permissions.handlePendingPermissionRequest",
    "session.tools.handlePendingToolCall",
    "session.ui.elicitation",
    "session.ui.handlePendingElicitation",
    "session.ui.handlePendingSampling",
    "session.commands.execute",
    "session.commands.handlePendingCommand",
    "session.commands.enqueue",
    "session.commands.respondToQueuedCommand",
    "session.canvas.list",
    "session.canvas.listOpen",
    "session.canvas.open",
    "session.canvas.close",
    "session.canvas.action.invoke",
    "session.mcp.apps.setHostContext",
    "session.mcp.apps.getHostContext",
    "session.mcp.apps.diagnose",
    "session.shell.exec",
    "session.shell.kill",
    "session.skills.reload",
    "runtime.shutdown",
];

type Reply = Option<Result<Value, ErrorObject>>;

fn decode<T: DeserializeOwned + Default>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    match params {
        None => Ok(T::default()),
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}"))),
    }
}

fn decode_required<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    let raw = params.map(RawValue::get).unwrap_or("{}");
    serde_json::from_str(raw)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}")))
}

fn failed(method: &str, message: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(
        code::INTERNAL_ERROR,
        format!("Request {method} failed with message: {message}"),
    )
}

impl Host {
    /// Answers one request. `None` means the answer comes later (`session.sendAndWait`).
    pub(crate) fn dispatch(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        method: &str,
        params: Option<&RawValue>,
    ) -> Reply {
        let authenticated = self.conns.get(&conn).is_some_and(|c| c.authenticated);
        if !authenticated && method != "connect" {
            return Some(Err(ErrorObject::new(-32001, "AUTHENTICATION_REQUIRED")));
        }
        let result = match method {
            "connect" => self.connect(conn, params),
            "ping" => self.ping(params),
            "status.get" => {
                Ok(json!({"version": self.config.version, "protocolVersion": PROTOCOL_VERSION}))
            }
            "auth.getStatus" => {
                Ok(json!({"isAuthenticated": true, "authType": "token", "login": "agentwire"}))
            }
            "models.list" => Ok(json!({"models": [{
                "id": "scripted", "name": "agentwire scripted agent",
                "capabilities": {"supports": {}, "limits": {"max_context_window_tokens": 128000}}}]})),
            "session.create" => self.create(conn, params),
            "session.resume" => self.resume(conn, params),
            "session.send" => self.send(params).map(|m| json!({"messageId": m})),
            "session.sendAndWait" => return self.send_and_wait(conn, id, params),
            "session.abort" => self.abort(params),
            "session.detach" => self.detach(conn, params),
            "session.delete" => self.delete(params),
            "session.list" => self.list(params),
            "session.getMetadata" => self.get_metadata(params),
            "session.getLastId" => Ok(match &self.last_session {
                Some(s) => json!({"sessionId": s}),
                None => json!({}),
            }),
            "session.getMessages" => self.get_messages(params),
            "session.getForeground" => Ok(match &self.foreground {
                Some(s) => json!({"sessionId": s}),
                None => json!({}),
            }),
            "session.setForeground" => self.set_foreground(params),
            "session.permissions.handlePendingPermissionRequest" => {
                self.answer_permission(conn, params)
            }
            "session.tools.handlePendingToolCall" => self.answer_tool(params),
            "session.ui.elicitation" => return self.elicitation(conn, id, params),
            "session.ui.handlePendingElicitation" => self.answer_elicitation(params),
            "session.ui.handlePendingSampling" => self.answer_sampling(params),
            "session.commands.execute" => return self.execute_command(conn, id, params),
            "session.commands.handlePendingCommand" => self.answer_command(params),
            "session.commands.enqueue" => decode_required::<EnqueueParams>(params)
                .and_then(|p| self.enqueue_command(&p.session_id, &p.command)),
            "session.commands.respondToQueuedCommand" => decode_required::<QueuedAnswer>(params)
                .and_then(|p| {
                    self.known_session("session.commands.respondToQueuedCommand", &p.session_id)?;
                    let ok = self.resolve_queued_command(&p.session_id, &p.request_id, &p.result);
                    Ok(json!({"success": ok}))
                }),
            "session.canvas.list" => decode_required::<SessionParams>(params).and_then(|p| {
                self.known_session("session.canvas.list", &p.session_id)?;
                Ok(self.canvas_list(&p.session_id))
            }),
            "session.canvas.listOpen" => decode_required::<SessionParams>(params).and_then(|p| {
                self.known_session("session.canvas.listOpen", &p.session_id)?;
                Ok(json!({"openCanvases": self.open_canvases_json(&p.session_id)}))
            }),
            "session.canvas.open" | "session.canvas.close" | "session.canvas.action.invoke" => {
                return self.canvas_request(conn, id, method, params)
            }
            "session.mcp.apps.setHostContext" => self.mcp_set_host_context(params),
            "session.mcp.apps.getHostContext" => self.mcp_get_host_context(params),
            "session.mcp.apps.diagnose" => self.mcp_diagnose(params),
            "session.shell.exec" => decode_required(params).and_then(|p| self.shell_exec(conn, p)),
            "session.shell.kill" => decode_required(params).and_then(|p| self.shell_kill(p)),
            // Called by the Rust SDK after every resume; the scripted agent has no skills.
            "session.skills.reload" => {
                let p: SessionParams = match decode_required(params) {
                    Ok(p) => p,
                    Err(e) => return Some(Err(e)),
                };
                self.known_session("session.skills.reload", &p.session_id)
                    .map(|()| json!({}))
            }
            "runtime.shutdown" => {
                self.after_response.push(AfterResponse::Shutdown);
                Ok(json!({}))
            }
            other => Err(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("Unhandled method {other}"),
            )),
        };
        Some(result)
    }

    fn connect(&mut self, conn: ConnId, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: ConnectParams = decode(params)?;
        if let Some(expected) = &self.config.connection_token {
            if p.token.as_deref() != Some(expected.as_str()) {
                return Err(ErrorObject::new(-32002, "AUTHENTICATION_FAILED"));
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                c.authenticated = true;
            }
        }
        let task_kinds = match p.supported_task_kinds {
            Some(k) if k.iter().any(|k| k == "client") => json!(["agent", "shell", "client"]),
            _ => json!(["agent", "shell"]),
        };
        Ok(json!({"ok": true, "protocolVersion": PROTOCOL_VERSION,
                  "version": self.config.version, "taskKinds": task_kinds}))
    }

    fn ping(&self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: PingParams = decode(params)?;
        let message = match p.message {
            Some(m) => format!("pong: {m}"),
            None => "pong".to_owned(),
        };
        Ok(
            json!({"message": message, "timestamp": self.now.to_rfc3339(),
                  "protocolVersion": PROTOCOL_VERSION}),
        )
    }

    fn attach_result(&self, session: &str) -> Value {
        let live = &self.sessions[session];
        let mut result = json!({
            "sessionId": session,
            "nativeSessionId": session,
            "startTime": live.session.start_time.to_rfc3339(),
            "isRemote": false,
            "mode": "interactive",
            "capabilities": self.capabilities(session),
        });
        if let Some(root) = &self.config.workspace_root {
            result["workspacePath"] = json!(format!("{root}/session-state/{session}"));
        }
        if let Some(model) = &live.session.model {
            result["modelState"] = json!({"modelId": model});
        }
        result
    }

    fn create(&mut self, conn: ConnId, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: AttachParams = decode(params)?;
        let session_id = match p.session_id.clone() {
            Some(s) if !s.is_empty() => s,
            _ => self.ids.next_uuid(),
        };
        if self.sessions.contains_key(&session_id) {
            return Err(failed(
                "session.create",
                format!("Session already exists: {session_id}"),
            ));
        }
        let mut session = Session::new(session_id.clone(), self.now);
        session.cwd = p.working_directory.clone();
        session.model = p.model.clone();
        let live = self.new_live(session);
        self.sessions.insert(session_id.clone(), live);
        self.last_session = Some(session_id.clone());
        // Attach silently: capability/command announcements follow session.start.
        if let Some(live) = self.sessions.get_mut(&session_id) {
            live.session
                .attached
                .insert(conn, p.attachment(self.config.mcp_apps_enabled));
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.sessions.push(session_id.clone());
        }
        let result = self.attach_result(&session_id);
        let mut data = json!({
            "sessionId": session_id,
            "version": 1,
            "producer": "agentwire",
            "copilotVersion": self.config.version,
            "startTime": self.now.to_rfc3339(),
        });
        if let Some(model) = &p.model {
            data["selectedModel"] = json!(model);
        }
        if let Some(cwd) = &p.working_directory {
            data["context"] = json!({"cwd": cwd});
        }
        self.after_response.push(AfterResponse::Emit {
            session: session_id.clone(),
            event_type: "session.start",
            data,
            ephemeral: false,
        });
        self.after_response.push(AfterResponse::Lifecycle {
            kind: "session.created",
            session: session_id.clone(),
        });
        if let Some(extension) = p.attachment(false).extension {
            self.after_response.push(AfterResponse::ExtensionAccess {
                session: session_id.clone(),
                extension,
            });
        }
        self.warn_if_mcp_apps_refused(&session_id, conn, &p);
        Ok(result)
    }

    fn resume(&mut self, conn: ConnId, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: AttachParams = decode(params)?;
        let Some(session_id) = p.session_id.clone() else {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                "invalid params: missing field `sessionId`",
            ));
        };
        let Some(live) = self.sessions.get(&session_id) else {
            return Err(failed(
                "session.resume",
                format!("Failed to load session events: Session not found: {session_id}"),
            ));
        };
        let event_count = live.session.events().len();
        let was_active = self.session_busy(&session_id);
        let model = live.session.model.clone();
        let cwd = live.session.cwd.clone();
        self.attach(
            &session_id,
            conn,
            p.attachment(self.config.mcp_apps_enabled),
        );
        self.warn_if_mcp_apps_refused(&session_id, conn, &p);
        self.last_session = Some(session_id.clone());
        let mut result = self.attach_result(&session_id);
        result["openCanvases"] = self.open_canvases_json(&session_id);
        if !p.disable_resume {
            let mut data = json!({
                "resumeTime": self.now.to_rfc3339(),
                "eventCount": event_count,
                "sessionWasActive": was_active,
                "continuePendingWork": p.continue_pending_work,
            });
            if let Some(model) = model {
                data["selectedModel"] = json!(model);
            }
            if let Some(cwd) = cwd {
                data["context"] = json!({"cwd": cwd});
            }
            self.after_response.push(AfterResponse::Emit {
                session: session_id.clone(),
                event_type: "session.resume",
                data,
                ephemeral: false,
            });
        }
        if p.continue_pending_work {
            self.reemit_pending_permissions(&session_id);
        }
        Ok(result)
    }

    fn known_session(&self, method: &str, session_id: &str) -> Result<(), ErrorObject> {
        if self.sessions.contains_key(session_id) {
            Ok(())
        } else {
            Err(failed(
                method,
                format!("Session not found for sessionId: {session_id}"),
            ))
        }
    }

    fn send(&mut self, params: Option<&RawValue>) -> Result<String, ErrorObject> {
        let p: SendParams = decode_required(params)?;
        self.known_session("session.send", &p.session_id)?;
        let message_id = self.ids.next_uuid();
        if let Some(live) = self.sessions.get_mut(&p.session_id) {
            if live.session.summary.is_none() {
                live.session.summary = Some(p.prompt.chars().take(200).collect());
            }
        }
        self.last_session = Some(p.session_id.clone());
        self.queue_agent_input(
            &p.session_id,
            AgentInput::Prompt {
                message_id: message_id.clone(),
                prompt: p.prompt,
            },
        );
        Ok(message_id)
    }

    fn send_and_wait(&mut self, conn: ConnId, id: &OwnedId, params: Option<&RawValue>) -> Reply {
        let session_id = match decode_required::<SendParams>(params) {
            Ok(p) => p.session_id,
            Err(e) => return Some(Err(e)),
        };
        let message_id = match self.send(params) {
            Ok(m) => m,
            Err(e) => return Some(Err(e)),
        };
        if let Some(live) = self.sessions.get_mut(&session_id) {
            live.waiters.push((conn, id.clone(), message_id));
        }
        None
    }

    fn abort(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode_required(params)?;
        self.known_session("session.abort", &p.session_id)?;
        self.queue_agent_input(&p.session_id, AgentInput::Abort);
        Ok(json!({"success": true}))
    }

    fn detach(&mut self, conn: ConnId, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode_required(params)?;
        self.known_session("session.detach", &p.session_id)?;
        self.detach_conn(&p.session_id, conn);
        Ok(json!({"success": true}))
    }

    fn delete(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode_required(params)?;
        self.known_session("session.delete", &p.session_id)?;
        // Nothing waits forever on a deleted session: cancel its pending work first.
        self.cancel_tool_calls(&p.session_id);
        if let Some(live) = self.sessions.remove(&p.session_id) {
            if let Some(key) = live.timer {
                self.timers.remove(&key);
            }
            // Clients waiting on the session's elicitations and commands get their answer.
            for pending in live.pending.values() {
                if let crate::host::Pending::Elicitation {
                    answer_to: AnswerTo::Caller(conn, id),
                    ..
                }
                | crate::host::Pending::Command {
                    answer_to: AnswerTo::Caller(conn, id),
                    ..
                } = pending
                {
                    self.respond(
                        *conn,
                        id,
                        Err(failed("session.delete", "the session was deleted")),
                    );
                }
            }
            for conn in live.session.attached.keys() {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.sessions.retain(|s| s != &p.session_id);
                }
            }
            for (conn, id, _) in live.waiters {
                self.respond(
                    conn,
                    &id,
                    Err(failed("session.sendAndWait", "the session was deleted")),
                );
            }
        }
        if self.last_session.as_deref() == Some(p.session_id.as_str()) {
            self.last_session = None;
        }
        if self.foreground.as_deref() == Some(p.session_id.as_str()) {
            self.foreground = None;
        }
        if self.config.report_persisted_events {
            self.outputs.push_back(Output::SessionDeleted {
                session: p.session_id.clone(),
            });
        }
        self.lifecycle("session.deleted", &p.session_id);
        Ok(json!({"success": true}))
    }

    fn metadata(&self, session_id: &str) -> Option<Value> {
        let live = self.sessions.get(session_id)?;
        let s = &live.session;
        let mut m = json!({
            "sessionId": s.id,
            "startTime": s.start_time.to_rfc3339(),
            "modifiedTime": s.modified_time.to_rfc3339(),
            "isRemote": false,
            "isDetached": s.attached.is_empty(),
        });
        if let Some(summary) = &s.summary {
            m["summary"] = json!(summary);
            m["name"] = json!(summary);
        }
        if let Some(cwd) = &s.cwd {
            m["context"] = json!({"cwd": cwd});
        }
        Some(m)
    }

    fn list(&self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: ListParams = decode(params)?;
        let cwd = p.filter.and_then(|f| f.cwd);
        let sessions: Vec<Value> = self
            .sessions
            .values()
            .filter(|l| cwd.is_none() || l.session.cwd == cwd)
            .filter_map(|l| self.metadata(&l.session.id))
            .collect();
        Ok(json!({"sessions": sessions}))
    }

    fn get_metadata(&self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode_required(params)?;
        Ok(match self.metadata(&p.session_id) {
            Some(m) => json!({"session": m}),
            None => json!({}),
        })
    }

    fn get_messages(&self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode_required(params)?;
        self.known_session("session.getMessages", &p.session_id)?;
        let events = self.sessions[&p.session_id].session.events();
        let mut text =
            String::with_capacity(events.iter().map(|e| e.json.len() + 1).sum::<usize>() + 16);
        text.push_str("{\"events\":[");
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(e.raw().get());
        }
        text.push_str("]}");
        serde_json::from_str(&text).map_err(|e| failed("session.getMessages", e))
    }

    fn set_foreground(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode_required(params)?;
        if !self.sessions.contains_key(&p.session_id) {
            return Ok(json!({"success": false,
                             "error": format!("Session not found: {}", p.session_id)}));
        }
        if self.foreground.as_deref() != Some(p.session_id.as_str()) {
            if let Some(old) = self.foreground.replace(p.session_id.clone()) {
                self.lifecycle("session.background", &old);
            }
            self.lifecycle("session.foreground", &p.session_id);
        }
        Ok(json!({"success": true}))
    }

    fn answer_permission(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
    ) -> Result<Value, ErrorObject> {
        let p: PermissionAnswer = decode_required(params)?;
        self.known_session(
            "session.permissions.handlePendingPermissionRequest",
            &p.session_id,
        )?;
        let ok = self.may_answer_permission(&p.session_id, &p.request_id, conn)
            && self.resolve_permission(&p.session_id, &p.request_id, &p.result);
        Ok(json!({"success": ok}))
    }

    fn answer_tool(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: ToolAnswer = decode_required(params)?;
        self.known_session("session.tools.handlePendingToolCall", &p.session_id)?;
        let ok = self.resolve_tool_call(
            &p.session_id,
            &p.request_id,
            p.result.as_ref(),
            p.error.as_ref(),
        );
        Ok(json!({"success": ok}))
    }

    fn elicitation(&mut self, conn: ConnId, id: &OwnedId, params: Option<&RawValue>) -> Reply {
        let request: Value = match decode_required(params) {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        let Some(session) = request
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Some(Err(ErrorObject::new(
                code::INVALID_PARAMS,
                "invalid params: missing field `sessionId`",
            )));
        };
        let answer_to = AnswerTo::Caller(conn, id.clone());
        match self.start_elicitation(&session, answer_to, &request) {
            Ok(()) => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn answer_elicitation(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: ElicitationAnswer = decode_required(params)?;
        self.known_session("session.ui.handlePendingElicitation", &p.session_id)?;
        let ok = self.resolve_elicitation(&p.session_id, &p.request_id, &p.result);
        Ok(json!({"success": ok}))
    }

    fn execute_command(&mut self, conn: ConnId, id: &OwnedId, params: Option<&RawValue>) -> Reply {
        let p: ExecuteCommand = match decode_required(params) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        let answer_to = AnswerTo::Caller(conn, id.clone());
        match self.start_command(&p.session_id, answer_to, &p.command_name, &p.args) {
            Ok(()) => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn answer_command(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: CommandAnswer = decode_required(params)?;
        self.known_session("session.commands.handlePendingCommand", &p.session_id)?;
        let ok = self.resolve_command(&p.session_id, &p.request_id, p.error.as_deref());
        Ok(json!({"success": ok}))
    }

    /// `session.canvas.open` / `close` / `action.invoke`: answered when the canvas's provider
    /// answers its `canvas.*` request.
    fn canvas_request(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        method: &str,
        params: Option<&RawValue>,
    ) -> Reply {
        use crate::host::{ActionParams, CloseParams, OpenParams};
        let method: &'static str = match method {
            "session.canvas.open" => "session.canvas.open",
            "session.canvas.close" => "session.canvas.close",
            _ => "session.canvas.action.invoke",
        };
        let reply = CanvasReply::Caller(conn, id.clone(), method);
        match method {
            "session.canvas.open" => {
                let p: OpenParams = match decode_required(params) {
                    Ok(p) => p,
                    Err(e) => return Some(Err(e)),
                };
                if let Err(e) = self.known_session(method, &p.session_id) {
                    return Some(Err(e));
                }
                self.open_canvas(
                    &p.session_id,
                    p.extension_id.as_deref(),
                    &p.canvas_id,
                    &p.instance_id,
                    p.input,
                    reply,
                );
            }
            "session.canvas.close" => {
                let p: CloseParams = match decode_required(params) {
                    Ok(p) => p,
                    Err(e) => return Some(Err(e)),
                };
                if let Err(e) = self.known_session(method, &p.session_id) {
                    return Some(Err(e));
                }
                self.close_canvas(&p.session_id, &p.instance_id, reply);
            }
            _ => {
                let p: ActionParams = match decode_required(params) {
                    Ok(p) => p,
                    Err(e) => return Some(Err(e)),
                };
                if let Err(e) = self.known_session(method, &p.session_id) {
                    return Some(Err(e));
                }
                self.invoke_canvas_action(
                    &p.session_id,
                    &p.instance_id,
                    &p.action_name,
                    p.input,
                    reply,
                );
            }
        }
        None
    }

    fn answer_sampling(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SamplingAnswer = decode_required(params)?;
        self.known_session("session.ui.handlePendingSampling", &p.session_id)?;
        let ok = self.resolve_sampling(&p.session_id, &p.request_id, p.response);
        Ok(json!({"success": ok}))
    }

    /// `requestMcpApps` without the host's MCP Apps gate: the request is answered without
    /// `ui.mcpApps` and this connection gets a `session.warning` saying why.
    fn warn_if_mcp_apps_refused(&mut self, session: &str, conn: ConnId, p: &AttachParams) {
        if p.request_mcp_apps && !self.config.mcp_apps_enabled {
            self.after_response.push(AfterResponse::EmitTo {
                session: session.to_owned(),
                event_type: "session.warning",
                data: json!({
                    "warningType": "mcp_apps_disabled",
                    "message": "MCP Apps were requested (requestMcpApps) but are not enabled on this server; start it with COPILOT_MCP_APPS=true or --mcp-apps",
                }),
                only: conn,
            });
        }
    }

    fn mcp_set_host_context(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: Value = decode_required(params)?;
        let session = session_id_of(&p)?;
        self.known_session("session.mcp.apps.setHostContext", &session)?;
        if let Some(live) = self.sessions.get_mut(&session) {
            live.mcp_host_context = Some(p.get("context").cloned().unwrap_or(json!({})));
        }
        Ok(Value::Null)
    }

    fn mcp_get_host_context(&self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode_required(params)?;
        self.known_session("session.mcp.apps.getHostContext", &p.session_id)?;
        let context = self.sessions[&p.session_id]
            .mcp_host_context
            .clone()
            .unwrap_or(json!({}));
        Ok(json!({"context": context}))
    }

    /// Why MCP Apps do or do not work in this session. The scripted agent has no MCP servers,
    /// so every server reports as not connected.
    fn mcp_diagnose(&self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode_required(params)?;
        self.known_session("session.mcp.apps.diagnose", &p.session_id)?;
        let live = &self.sessions[&p.session_id];
        let has = live.session.attached.values().any(|a| a.mcp_apps);
        Ok(json!({
            "capability": {"sessionHasMcpApps": has,
                           "featureFlagEnabled": self.config.mcp_apps_enabled,
                           "advertised": has},
            "server": {"connected": false, "toolCount": 0, "toolsWithUiMeta": 0,
                       "sampleToolNames": []},
        }))
    }
}

fn session_id_of(p: &Value) -> Result<String, ErrorObject> {
    p.get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            ErrorObject::new(
                code::INVALID_PARAMS,
                "invalid params: missing field `sessionId`",
            )
        })
}
