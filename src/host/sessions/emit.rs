//! Emitting session events: record, persist, fan out, and tell the dialects.

use serde_json::Value;

use crate::host::{ConnId, Host, Output, SessionChange, StoreOutput};

/// Emitting.
impl Host {
    /// Emits a session event to every attached connection (encoded once per dialect) and
    /// returns its id. Persisted events are logged and announced as
    /// [`SessionChange::Updated`].
    pub(crate) fn emit(
        &mut self,
        session_id: &str,
        event_type: &str,
        data: &Value,
        ephemeral: bool,
    ) -> Option<String> {
        self.emit_to(session_id, event_type, data, ephemeral, None)
    }

    /// Like [`Host::emit`], but when `only` is set the event goes to that attached connection
    /// alone (ownership routing, e.g. `command.execute` to the command's owner).
    pub(crate) fn emit_to(
        &mut self,
        session_id: &str,
        event_type: &str,
        data: &Value,
        ephemeral: bool,
        only: Option<ConnId>,
    ) -> Option<String> {
        if event_type == "session.idle" && self.hold_idle_for_state(session_id, data) {
            // Sent once the session's state copy holds everything before it.
            return None;
        }
        let masked = self.mask_secrets(data);
        let data = masked.as_ref().unwrap_or(data);
        if !(ephemeral && crate::session::is_streaming_delta_type(event_type)) {
            // Every loss is reported before the next durable event a lagging reader gets
            // (so before its next `session.idle`), not only once it has caught up.
            self.report_lagging_readers(session_id, data);
        }
        let id = self.ids.next_uuid();
        let now = self.now;
        let live = self.sessions.get_mut(session_id)?;
        // Only this event comes from the sub-agent, not what emitting it triggers; the
        // events of a sub-agent's tool calls are its own too.
        let agent_id = self
            .event_agent
            .take()
            .or_else(|| tool_call_agent(&mut live.tool_call_agents, event_type, data));
        let event =
            live.session
                .record_from(id, event_type, data, ephemeral, now, agent_id.as_deref());
        if !ephemeral && self.config.report_persisted_events {
            self.outputs.push_back(Output::Store(StoreOutput::Persist {
                session: session_id.to_owned(),
                event: event.json.clone(),
            }));
        }
        let droppable = ephemeral && event.is_streaming_delta();
        if droppable {
            live.deltas_emitted[usize::from(agent_id.is_some())] += 1;
        }
        self.deliver_event(session_id, &event, droppable, only, agent_id.is_some())?;
        if !ephemeral {
            self.mirror_persisted_event(session_id, &event);
            self.session_changed(SessionChange::Updated, session_id);
        }
        for handler in self.dialects {
            handler.event_emitted(self, session_id, &event, data);
        }
        if agent_id.is_none() {
            self.trace_event(session_id, event_type, data);
        }
        if event_type == "session.idle" {
            // Queued slash commands run between turns.
            self.offer_queued_command(session_id);
        }
        Some(event.id)
    }

    /// `tool.execution_start` of a tool call the host performs.
    pub(crate) fn emit_tool_start(
        &mut self,
        session: &str,
        tool_call_id: &str,
        tool_name: &str,
        arguments: &Value,
        turn_id: &str,
    ) {
        let data = serde_json::json!({"toolCallId": tool_call_id, "toolName": tool_name,
                                      "arguments": arguments, "turnId": turn_id});
        self.emit(session, "tool.execution_start", &data, false);
    }

    /// Tool call `tool_call_id` of `session` is sub-agent `agent_id`'s: its events carry
    /// that `agentId` until it completes.
    pub(crate) fn tag_tool_call(&mut self, session: &str, tool_call_id: &str, agent_id: &str) {
        if let Some(live) = self.sessions.get_mut(session) {
            live.tool_call_agents
                .insert(tool_call_id.to_owned(), agent_id.to_owned());
        }
    }

    /// Tells every dialect that `session` was created, updated or deleted.
    pub(crate) fn session_changed(&mut self, change: SessionChange, session: &str) {
        for handler in self.dialects {
            handler.session_changed(self, change, session);
        }
    }
}

/// The sub-agent whose tool call an event is about (`data.toolCallId`) among a session's
/// `tags`, if any; the call's completion ends the tag.
fn tool_call_agent(
    tags: &mut std::collections::BTreeMap<String, String>,
    event_type: &str,
    data: &Value,
) -> Option<String> {
    if tags.is_empty() {
        return None;
    }
    let call = data.get("toolCallId").and_then(Value::as_str)?;
    if event_type == "tool.execution_complete" {
        tags.remove(call)
    } else {
        tags.get(call).cloned()
    }
}
