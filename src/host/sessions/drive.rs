//! Driving agents: the host side of the agent seam, attach/detach and capability transitions.

use serde_json::{json, Value};

use crate::agent::{AgentInput, SessionControl};
use crate::session::Attachment;
use crate::Timestamp;

use crate::host::{ConnId, Host, Live};

/// The host as an agent sees it: a [`SessionControl`] bound to one session.
struct Control<'a> {
    host: &'a mut Host,
    session: &'a str,
}

impl SessionControl for Control<'_> {
    fn now(&self) -> Timestamp {
        self.host.now
    }

    fn new_id(&mut self) -> String {
        self.host.ids.next_uuid()
    }

    fn acp_call(&mut self, call: crate::agent::AcpCall) -> Option<u64> {
        self.host.acp_call(self.session, call)
    }

    fn streaming(&self) -> bool {
        self.host
            .sessions
            .get(self.session)
            .is_some_and(|l| l.session.any_streaming())
    }

    fn has_hooks(&self) -> bool {
        self.host.has_hooks(self.session)
    }

    fn context_filled(&mut self, conversation_tokens: u64, token_limit: u64) {
        self.host
            .consider_compaction(self.session, conversation_tokens, token_limit);
    }

    fn answers_auto_mode_switch(&self) -> bool {
        self.host.sessions.get(self.session).is_some_and(|l| {
            l.session
                .attached
                .values()
                .any(|a| a.request_auto_mode_switch)
        })
    }

    fn switch_model(&mut self, model: &str, cause: &str) {
        let previous = self
            .host
            .session_mut(self.session)
            .and_then(|s| s.model.replace(model.to_owned()));
        self.host.select_model(self.session, model);
        self.emit(
            "session.model_change",
            serde_json::json!({"previousModel": previous, "newModel": model, "cause": cause}),
            false,
        );
    }

    fn emit(&mut self, event_type: &str, data: Value, ephemeral: bool) -> String {
        self.emit_ref(event_type, &data, ephemeral)
    }

    fn emit_ref(&mut self, event_type: &str, data: &Value, ephemeral: bool) -> String {
        if let Some(live) = self.host.sessions.get_mut(self.session) {
            live.ran_turn = true;
        }
        self.host
            .emit(self.session, event_type, data, ephemeral)
            .unwrap_or_default()
    }

    fn emit_as(
        &mut self,
        agent_id: Option<&str>,
        event_type: &str,
        data: Value,
        ephemeral: bool,
    ) -> String {
        self.host.event_agent = agent_id.map(str::to_owned);
        let id = self.emit(event_type, data, ephemeral);
        self.host.event_agent = None;
        id
    }

    fn call_tool(&mut self, tool_call_id: &str, name: &str, arguments: &Value, turn_id: &str) {
        self.host
            .start_tool_call(self.session, tool_call_id, name, arguments, turn_id);
    }

    fn call_builtin(
        &mut self,
        tool_call_id: &str,
        call: &crate::agent::BuiltinCall,
        turn_id: &str,
    ) {
        self.host
            .start_builtin(self.session, tool_call_id, call, turn_id);
    }

    fn call_mcp_tool(
        &mut self,
        tool_call_id: &str,
        server: &str,
        tool: &str,
        arguments: &Value,
        turn_id: &str,
    ) {
        self.host
            .start_mcp_tool_call(self.session, tool_call_id, server, tool, arguments, turn_id);
    }

    fn call_skill(&mut self, tool_call_id: &str, arguments: &Value, turn_id: &str) {
        self.host
            .start_skill_tool(self.session, tool_call_id, arguments, turn_id);
    }

    fn call_sql(&mut self, tool_call_id: &str, arguments: &Value, turn_id: &str) {
        self.host
            .start_sql_tool(self.session, tool_call_id, arguments, turn_id);
    }

    fn cancel_tool_calls(&mut self) {
        self.host.cancel_tool_calls(self.session);
    }

    fn ask_client(&mut self, request: crate::agent::ClientRequest) -> u64 {
        self.host.ask_client(self.session, request)
    }

    fn http_request(&mut self, request: crate::model::HttpRequest) -> u64 {
        self.host.start_http(self.session, request, None)
    }

    fn http_request_as(&mut self, agent_id: &str, request: crate::model::HttpRequest) -> u64 {
        self.host.start_http(self.session, request, Some(agent_id))
    }

    fn cancel_http(&mut self, call: u64) {
        self.host.cancel_http(call);
    }

    fn model_setup(&self) -> Result<crate::agent::ModelSetup, String> {
        self.host.model_setup(self.session)
    }

    fn transcript_path(&self) -> Option<String> {
        let root = self.host.config().workspace_root.as_ref()?;
        Some(format!(
            "{root}/session-state/{}/events.jsonl",
            self.session
        ))
    }

    fn history(&self) -> Vec<crate::model::ChatMessage> {
        self.host.model_history(self.session)
    }

    fn agent_history(&self, agent_id: &str) -> Vec<crate::model::ChatMessage> {
        self.host.agent_model_history(self.session, Some(agent_id))
    }

    fn tag_tool_call(&mut self, tool_call_id: &str, agent_id: &str) {
        self.host
            .tag_tool_call(self.session, tool_call_id, agent_id);
    }

    fn client_tools(&self) -> Vec<crate::model::ToolSpec> {
        self.host.model_tools(self.session)
    }

    fn builtin_tools(&self) -> Vec<crate::model::ToolSpec> {
        self.host.model_builtin_tools(self.session)
    }

    fn set_timer(&mut self, at: Timestamp) {
        let seq = self.host.timer_seq;
        self.host.timer_seq += 1;
        let Some(live) = self.host.sessions.get_mut(self.session) else {
            return;
        };
        if let Some(old) = live.timer.take() {
            self.host.timers.remove(&old);
        }
        live.timer = Some((at, seq));
        self.host.timers.insert(
            (at, seq),
            crate::host::TimerTarget::Agent(self.session.to_owned()),
        );
    }
}

impl Host {
    /// Hands queued inputs to their agents until none are left.
    pub(crate) fn run_agents(&mut self) {
        while let Some((session, input)) = self.agent_inputs.pop_front() {
            let Some(input) = self.gate_agent_input(&session, input) else {
                continue;
            };
            let Some(mut agent) = self.sessions.get_mut(&session).and_then(|l| l.agent.take())
            else {
                continue;
            };
            {
                let mut control = Control {
                    host: self,
                    session: &session,
                };
                agent.handle(input, &mut control);
            }
            if let Some(live) = self.sessions.get_mut(&session) {
                live.agent = Some(agent);
            }
            for handler in self.dialects {
                handler.agent_input_handled(self, &session);
            }
        }
    }

    /// The session's agent, to read (`None` without one, or while it handles an input).
    pub(crate) fn session_agent(&self, session: &str) -> Option<&dyn crate::agent::Agent> {
        self.sessions.get(session)?.agent.as_deref()
    }

    /// Calls `f` with the session's agent and the session as that agent sees it (for what
    /// the agent serves outside its inputs: `session.tasks.*`), then hands the agents the
    /// inputs that produced. `None` when the session has no agent.
    pub(crate) fn with_agent<R>(
        &mut self,
        session: &str,
        f: impl FnOnce(&mut dyn crate::agent::Agent, &mut dyn SessionControl) -> R,
    ) -> Option<R> {
        let mut agent = self.sessions.get_mut(session)?.agent.take()?;
        let result = {
            let mut control = Control {
                host: self,
                session,
            };
            f(agent.as_mut(), &mut control)
        };
        if let Some(live) = self.sessions.get_mut(session) {
            live.agent = Some(agent);
        }
        for handler in self.dialects {
            handler.agent_input_handled(self, session);
        }
        self.run_agents();
        Some(result)
    }

    /// Whether the session's agent is in a turn.
    pub(crate) fn session_busy(&self, session: &str) -> bool {
        self.sessions
            .get(session)
            .and_then(|l| l.agent.as_ref())
            .is_some_and(|a| a.is_busy())
    }

    /// Attaches `conn` to a loaded session (or updates what it declared) and emits the
    /// `commands.changed` / `capabilities.changed` events the change implies.
    pub(crate) fn attach(&mut self, session: &str, conn: ConnId, attachment: Attachment) {
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let scope = Scope::of(live.session.attached.get(&conn)).and(&attachment);
        let before = Announced::of(live, scope);
        // Requests announced before this connection could answer them (their events are
        // ephemeral): offered to it now, or it would never hear of them.
        let old = live.session.attached.get(&conn);
        let newly_samples = attachment.request_sampling && !old.is_some_and(|a| a.request_sampling);
        let newly_elicits =
            attachment.request_elicitation && !old.is_some_and(|a| a.request_elicitation);
        let missed: Vec<(&'static str, Value)> = live
            .pending
            .values()
            .filter_map(|p| match p {
                crate::host::Pending::Sampling { announced, .. } if newly_samples => {
                    Some(("sampling.requested", (**announced).clone()))
                }
                crate::host::Pending::Elicitation { announced, .. } if newly_elicits => {
                    Some(("elicitation.requested", (**announced).clone()))
                }
                _ => None,
            })
            .collect();
        live.session.attached.insert(conn, attachment);
        let after = Announced::of(live, scope);
        if let Some(c) = self.conns.get_mut(&conn) {
            if !c.sessions.iter().any(|s| s == session) {
                c.sessions.push(session.to_owned());
                // Updates about this session waiting behind its frames must not be overtaken
                // by the session's own frames from now on.
                c.outbox.promote_background();
            }
        }
        self.announce_changes(session, before, after);
        for (event_type, data) in missed {
            self.emit_to(session, event_type, &data, true, Some(conn));
        }
        self.rehydrate_canvases(session, conn);
        let extension = self
            .sessions
            .get(session)
            .and_then(|l| l.session.attached.get(&conn))
            .and_then(|a| a.extension.clone());
        if let Some(extension) = extension {
            self.request_extension_access(session, &extension);
        }
    }

    /// Detaches `conn` from a session: its tools' pending calls fail, prompts nobody else can
    /// answer are resolved, and when the last connection leaves a session that ran a turn,
    /// a `session.shutdown` event is written (as the real runtime does).
    pub(crate) fn detach_conn(&mut self, session: &str, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.sessions.retain(|s| s != session);
        }
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        if live.session.attached.get(&conn).is_none() {
            return;
        }
        let scope = Scope::of(live.session.attached.get(&conn));
        let before = Announced::of(live, scope);
        live.session.attached.shift_remove(&conn);
        let after = Announced::of(live, scope);
        let now_empty = live.session.attached.is_empty();
        let ran_turn = live.ran_turn;
        // Every request gets its one response, even when its caller leaves the session.
        for handler in self.dialects {
            handler.conn_detached(self, session, conn);
        }
        self.resolve_for_departed(session, conn);
        self.canvases_provider_left(session, conn);
        self.announce_changes(session, before, after);
        if now_empty && ran_turn {
            let start = self
                .sessions
                .get(session)
                .map(|l| l.session.start_time.as_millis())
                .unwrap_or(0);
            self.emit(
                session,
                "session.shutdown",
                &json!({
                    "shutdownType": "routine",
                    "totalPremiumRequests": 0,
                    "totalApiDurationMs": 0,
                    "sessionStartTime": start,
                    "codeChanges": {"linesAdded": 0, "linesRemoved": 0, "filesModified": []},
                    "modelMetrics": {},
                }),
                false,
            );
            if let Some(live) = self.sessions.get_mut(session) {
                live.ran_turn = false;
            }
        }
    }

    fn announce_changes(&mut self, session: &str, before: Announced, after: Announced) {
        if before.commands != after.commands {
            self.emit(
                session,
                "commands.changed",
                &json!({"commands": after.commands}),
                true,
            );
        }
        if before.ui != after.ui {
            // The full `ui` object, not one flag per event: the Node SDK merges shallowly.
            self.emit(
                session,
                "capabilities.changed",
                &json!({"ui": after.ui}),
                true,
            );
        }
        if before.canvases != after.canvases {
            self.emit(
                session,
                "session.canvas.registry_changed",
                &json!({"canvases": after.canvases}),
                true,
            );
        }
    }

    /// The session's capabilities as reported in create/resume results.
    pub(crate) fn capabilities(&self, session: &str) -> Value {
        let ui = self
            .sessions
            .get(session)
            .map(capabilities_of)
            .unwrap_or_else(|| json!({"elicitation": false, "mcpApps": false, "canvases": false}));
        json!({"ui": ui, "extensions": false})
    }

    /// Queues a prompt for the session's agent.
    pub(crate) fn queue_agent_input(&mut self, session: &str, input: AgentInput) {
        self.agent_inputs.push_back((session.to_owned(), input));
    }
}

/// What attach/detach announce when it changes: commands, capabilities, canvas registry.
struct Announced {
    commands: Value,
    ui: Value,
    canvases: Value,
}

/// Which lists an attach/detach can change: only a connection that declares (or declared)
/// commands or canvases can change those, so the others are not rebuilt (attaching N
/// connections stays linear).
#[derive(Clone, Copy)]
struct Scope {
    commands: bool,
    canvases: bool,
}

impl Scope {
    fn of(attachment: Option<&Attachment>) -> Self {
        Scope {
            commands: attachment.is_some_and(|a| !a.commands.is_empty()),
            canvases: attachment.is_some_and(|a| !a.canvases.is_empty()),
        }
    }

    fn and(self, attachment: &Attachment) -> Self {
        Scope {
            commands: self.commands || !attachment.commands.is_empty(),
            canvases: self.canvases || !attachment.canvases.is_empty(),
        }
    }
}

impl Announced {
    fn of(live: &Live, scope: Scope) -> Self {
        Announced {
            commands: if scope.commands {
                commands_of(live)
            } else {
                Value::Null
            },
            ui: capabilities_of(live),
            canvases: if scope.canvases {
                crate::host::requests::canvas::registry_json(live)
            } else {
                Value::Null
            },
        }
    }
}

fn capabilities_of(live: &Live) -> Value {
    json!({
        "elicitation": live.session.any_elicitation_handler(),
        "mcpApps": live.session.attached.values().any(|a| a.mcp_apps),
        "canvases": live.session.attached.values().any(|a| !a.canvases.is_empty()),
    })
}

fn commands_of(live: &Live) -> Value {
    Value::Array(
        live.session
            .commands()
            .into_iter()
            .map(|c| json!({"name": c.name, "description": c.description}))
            .collect(),
    )
}
