//! The ACP agent methods: the method table over the host.
//!
//! | method | what it does |
//! |---|---|
//! | `initialize` | answers `protocolVersion: 1`, the capabilities below and `authMethods: []`; records the client's `fs` / `terminal` capabilities |
//! | `authenticate` | `{}` (no authentication is required) |
//! | `session/new` | a new session in `cwd` (the client's, not the process's); `mcpServers` are accepted and not connected |
//! | `session/load` | replays the whole persisted history as `session/update`s, then answers `{modes, configOptions}`; an unknown id is `-32002` with `data.sessionId` |
//! | `session/resume` | attaches without replay |
//! | `session/list` | sessions with a working directory, newest first (`cwd` filter; no paging) |
//! | `session/prompt` | runs a turn; answered with a `stopReason` once the turn ends, after all its updates |
//! | `session/set_mode`, `session/set_config_option` | the modes and options of [`modes`](super::modes) |
//! | `session/close` | cancels this connection's turn (answered `cancelled`) and detaches it; the session stays loaded |
//! | `session/delete` | cancels the session's work and removes it |
//!
//! Notifications: `session/cancel` (the turn ends with `stopReason: "cancelled"`, never an
//! error) and `$/cancel_request` (a running `session/prompt` is cancelled the same way; every
//! other request is answered at once, so there is nothing else to cancel). Other
//! notifications are ignored; other requests get `-32601` with `data.method`. Every request
//! except `initialize` gets `-32600` until `initialize` succeeded (as the TS SDK's agents do).

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::builtin::is_absolute;
use crate::agent::AgentInput;
use crate::host::{AfterResponse, ConnId, Host, Output};
use crate::jsonrpc::{code, ErrorObject, OwnedId};
use crate::session::{Attachment, Session};

use super::params::*;
use super::{modes, update, PromptWait, PROTOCOL_VERSION};

/// Every request method this dialect answers.
pub const METHODS: &[&str] = &[
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/prompt",
    "session/set_mode",
    "session/set_config_option",
    "session/close",
    "session/delete",
];

type Reply = Option<Result<Value, ErrorObject>>;

fn decode<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    let raw = params.map(RawValue::get).unwrap_or("{}");
    serde_json::from_str(raw)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("Invalid params: {e}")))
}

/// `-32002 Resource not found` with `data.sessionId` (the SDKs' `sessionNotFound`).
pub(crate) fn session_not_found(session: &str) -> ErrorObject {
    let error = ErrorObject::new(-32002, "Resource not found");
    error
        .clone()
        .with_data_value(&json!({"sessionId": session}))
        .unwrap_or(error)
}

/// What an ACP connection declares when it attaches: it streams and answers permission
/// prompts (every ACP client implements `session/request_permission`).
fn attachment() -> Attachment {
    Attachment {
        streaming: true,
        include_sub_agent_streaming: true,
        request_permission: true,
        ..Attachment::default()
    }
}

impl Host {
    /// Answers one ACP request. `None` means the answer comes later (`session/prompt`).
    pub(crate) fn acp_dispatch(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        method: &str,
        params: Option<&RawValue>,
    ) -> Reply {
        let initialized = self.conns.get(&conn).is_some_and(|c| c.acp.initialized);
        if !initialized && method != "initialize" {
            return Some(Err(ErrorObject::new(
                code::INVALID_REQUEST,
                format!("Invalid request: ACP connection must be initialized before '{method}'"),
            )));
        }
        let result = match method {
            "initialize" => self.acp_initialize(conn, params),
            "authenticate" => Ok(json!({})),
            "session/new" => self.acp_new_session(conn, params),
            "session/load" => self.acp_load_session(conn, params, true),
            "session/resume" => self.acp_load_session(conn, params, false),
            "session/list" => self.acp_list(params),
            "session/prompt" => return self.acp_prompt(conn, id, params),
            "session/set_mode" => self.acp_set_mode(conn, params),
            "session/set_config_option" => self.acp_set_config_option(conn, params),
            "session/close" => self.acp_close(conn, params),
            "session/delete" => self.acp_delete(params),
            other => {
                let error = ErrorObject::new(
                    code::METHOD_NOT_FOUND,
                    format!("\"Method not found\": {other}"),
                );
                Err(error
                    .clone()
                    .with_data_value(&json!({"method": other}))
                    .unwrap_or(error))
            }
        };
        Some(result)
    }

    fn acp_initialize(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
    ) -> Result<Value, ErrorObject> {
        let p: InitializeParams = decode(params)?;
        if p.protocol_version.is_none() {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                "Invalid params: missing field `protocolVersion`",
            ));
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.acp.initialized = true;
            c.acp.caps = super::ClientCaps::from_value(&p.client_capabilities);
        }
        // A v1-only agent answers 1 whatever was asked (the client disconnects if it
        // cannot speak it).
        Ok(json!({
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": false, "sse": false},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
            },
            "agentInfo": {"name": "agentwire", "title": "agentwire", "version": self.config.version},
            "authMethods": [],
        }))
    }

    /// The `{modes, configOptions}` part of new/load/resume results.
    fn acp_session_state(&self, session: &str) -> Value {
        let mode = self
            .sessions
            .get(session)
            .map_or(modes::DEFAULT_MODE, |l| modes::current(l.session.events()));
        json!({"modes": modes::mode_state(mode), "configOptions": modes::config_options(mode)})
    }

    fn acp_new_session(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
    ) -> Result<Value, ErrorObject> {
        let p: NewSessionParams = decode(params)?;
        if !is_absolute(&p.cwd) {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                format!(
                    "Invalid params: cwd must be an absolute path, got {:?}",
                    p.cwd
                ),
            ));
        }
        let session_id = self.ids.next_uuid();
        let mut session = Session::new(session_id.clone(), self.now);
        session.cwd = Some(p.cwd.clone());
        let live = self.new_live(session);
        self.sessions.insert(session_id.clone(), live);
        self.last_session = Some(session_id.clone());
        // Attach silently: announcements follow `session.start`, as for the Copilot dialect.
        if let Some(live) = self.sessions.get_mut(&session_id) {
            live.session.attached.insert(conn, attachment());
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.sessions.push(session_id.clone());
        }
        self.after_response.push(AfterResponse::Emit {
            session: session_id.clone(),
            event_type: "session.start",
            data: json!({
                "sessionId": session_id,
                "version": 1,
                "producer": "agentwire",
                "copilotVersion": self.config.version,
                "startTime": self.now.to_rfc3339(),
                "context": {"cwd": p.cwd},
            }),
            ephemeral: false,
        });
        self.after_response.push(AfterResponse::Lifecycle {
            kind: "session.created",
            session: session_id.clone(),
        });
        let mut result = self.acp_session_state(&session_id);
        result["sessionId"] = json!(session_id);
        Ok(result)
    }

    /// `session/load` (`replay`) and `session/resume`.
    fn acp_load_session(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
        replay: bool,
    ) -> Result<Value, ErrorObject> {
        let p: LoadSessionParams = decode(params)?;
        let Some(live) = self.sessions.get_mut(&p.session_id) else {
            return Err(session_not_found(&p.session_id));
        };
        if live.session.cwd.is_none() {
            live.session.cwd = p.cwd.filter(|c| is_absolute(c));
        }
        if replay {
            self.acp_replay(conn, &p.session_id);
        }
        self.attach(&p.session_id, conn, attachment());
        self.last_session = Some(p.session_id.clone());
        // Slash commands offered by other clients (not history: the current state).
        let commands = self.sessions.get(&p.session_id).map(|l| {
            l.session
                .commands()
                .into_iter()
                .map(|c| json!({"name": c.name, "description": c.description}))
                .collect::<Vec<_>>()
        });
        if let Some(commands) = commands.filter(|c| !c.is_empty()) {
            self.acp_notify(
                conn,
                "session/update",
                &json!({"sessionId": p.session_id, "update": {
                    "sessionUpdate": "available_commands_update", "availableCommands": commands}}),
            );
        }
        Ok(self.acp_session_state(&p.session_id))
    }

    /// Sends the session's persisted history to `conn` as `session/update`s.
    fn acp_replay(&mut self, conn: ConnId, session: &str) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let mut bodies: Vec<Vec<u8>> = Vec::new();
        for event in live.session.events() {
            if !update::is_relevant(&event.event_type) {
                continue;
            }
            let Ok(envelope) = serde_json::from_slice::<Value>(&event.json) else {
                continue;
            };
            let data = envelope.get("data").unwrap_or(&Value::Null);
            for mapped in update::map_event(&event.event_type, data, true) {
                if let Some(u) = mapped.update {
                    bodies.push(super::update_body(session, &u));
                }
            }
        }
        for body in bodies {
            self.send_body(conn, &body);
        }
    }

    fn acp_list(&self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: ListParams = decode(params)?;
        let mut sessions: Vec<&crate::session::Session> = self
            .sessions
            .values()
            .map(|l| &l.session)
            .filter(|s| s.cwd.is_some())
            .filter(|s| p.cwd.is_none() || s.cwd == p.cwd)
            .collect();
        sessions.sort_by(|a, b| b.modified_time.cmp(&a.modified_time).then(a.id.cmp(&b.id)));
        let sessions: Vec<Value> = sessions
            .into_iter()
            .map(|s| {
                let mut info = json!({
                    "sessionId": s.id,
                    "cwd": s.cwd,
                    "updatedAt": s.modified_time.to_rfc3339(),
                });
                if let Some(summary) = &s.summary {
                    info["title"] = json!(summary);
                }
                info
            })
            .collect();
        Ok(json!({"sessions": sessions}))
    }

    /// The session, if `conn` is attached to it.
    fn acp_attached(&self, conn: ConnId, session: &str) -> Result<(), ErrorObject> {
        match self.sessions.get(session) {
            Some(live) if live.session.attached.contains_key(&conn) => Ok(()),
            _ => Err(session_not_found(session)),
        }
    }

    fn acp_prompt(&mut self, conn: ConnId, id: &OwnedId, params: Option<&RawValue>) -> Reply {
        let p: PromptParams = match decode(params) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = self.acp_attached(conn, &p.session_id) {
            return Some(Err(e));
        }
        let text = update::prompt_text(&p.prompt);
        let message_id = self.ids.next_uuid();
        if let Some(live) = self.sessions.get_mut(&p.session_id) {
            if live.session.summary.is_none() {
                live.session.summary = Some(text.chars().take(200).collect());
            }
        }
        self.last_session = Some(p.session_id.clone());
        if let Some(c) = self.conns.get_mut(&conn) {
            c.acp.prompts.push(PromptWait {
                session: p.session_id.clone(),
                id: id.clone(),
                message_id: message_id.clone(),
                started: false,
                cancelled: false,
                error: None,
            });
        }
        self.queue_agent_input(
            &p.session_id,
            AgentInput::Prompt {
                message_id,
                prompt: text,
            },
        );
        None
    }

    fn acp_set_mode(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
    ) -> Result<Value, ErrorObject> {
        let p: SetModeParams = decode(params)?;
        self.acp_attached(conn, &p.session_id)?;
        self.acp_change_mode(&p.session_id, &p.mode_id)?;
        Ok(json!({}))
    }

    fn acp_set_config_option(
        &mut self,
        conn: ConnId,
        params: Option<&RawValue>,
    ) -> Result<Value, ErrorObject> {
        let p: SetConfigParams = decode(params)?;
        self.acp_attached(conn, &p.session_id)?;
        let value = p.value.as_str().unwrap_or_default();
        match p.config_id.as_str() {
            "mode" => self.acp_change_mode(&p.session_id, value)?,
            "model" if value == modes::MODEL => {}
            "model" => {
                return Err(ErrorObject::new(
                    code::INVALID_PARAMS,
                    format!(
                        "Invalid params: unknown model {value:?} (the only one is {:?})",
                        modes::MODEL
                    ),
                ))
            }
            other => {
                return Err(ErrorObject::new(
                    code::INVALID_PARAMS,
                    format!("Invalid params: unknown config option {other:?}"),
                ))
            }
        }
        let state = self.acp_session_state(&p.session_id);
        Ok(json!({"configOptions": state["configOptions"]}))
    }

    /// Switches the session's mode: a persisted `session.mode_changed` event, which attached
    /// ACP clients see as `current_mode_update` + `config_option_update`.
    fn acp_change_mode(&mut self, session: &str, mode: &str) -> Result<(), ErrorObject> {
        let Some(mode) = modes::find(mode) else {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                format!("Invalid params: unknown mode {mode:?}"),
            ));
        };
        let current = self
            .sessions
            .get(session)
            .map_or(modes::DEFAULT_MODE, |l| modes::current(l.session.events()));
        if current != mode.id {
            self.emit(
                session,
                "session.mode_changed",
                &json!({"previousMode": current, "newMode": mode.id}),
                false,
            );
        }
        Ok(())
    }

    fn acp_close(&mut self, conn: ConnId, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode(params)?;
        self.acp_attached(conn, &p.session_id)?;
        // The turn is cancelled as `session/cancel` would; this connection hears nothing
        // more of the session, so its prompts are answered now.
        let had_prompts = self.acp_answer_prompts_cancelled(conn, &p.session_id);
        if had_prompts {
            self.queue_agent_input(&p.session_id, AgentInput::Abort);
        }
        self.detach_conn(&p.session_id, conn);
        Ok(json!({}))
    }

    fn acp_delete(&mut self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let p: SessionParams = decode(params)?;
        let session = p.session_id;
        if !self.sessions.contains_key(&session) {
            return Err(session_not_found(&session));
        }
        // Nothing waits forever on a deleted session: end its pending work and prompts.
        self.cancel_tool_calls(&session);
        let attached: Vec<ConnId> = self.sessions[&session]
            .session
            .attached
            .keys()
            .copied()
            .collect();
        for conn in &attached {
            self.acp_answer_prompts_cancelled(*conn, &session);
        }
        if let Some(live) = self.sessions.remove(&session) {
            if let Some(key) = live.timer {
                self.timers.remove(&key);
            }
            for (conn, id, _) in live.waiters {
                self.respond(
                    conn,
                    &id,
                    Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        "Request session.sendAndWait failed with message: the session was deleted",
                    )),
                );
            }
        }
        for conn in attached {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.sessions.retain(|s| s != &session);
            }
        }
        if self.last_session.as_deref() == Some(session.as_str()) {
            self.last_session = None;
        }
        if self.foreground.as_deref() == Some(session.as_str()) {
            self.foreground = None;
        }
        if self.config.report_persisted_events {
            self.outputs.push_back(Output::SessionDeleted {
                session: session.clone(),
            });
        }
        self.lifecycle("session.deleted", &session);
        Ok(json!({}))
    }
}
