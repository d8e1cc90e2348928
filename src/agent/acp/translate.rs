//! An ACP agent's turn as session events: `session/update`s become the events agentwire's own
//! model loop emits, so every dialect's clients see an ACP agent's session as they see any
//! other.
//!
//! | ACP | session events |
//! |---|---|
//! | a prompt is sent | `assistant.turn_start {turnId}` |
//! | `agent_message_chunk` | `assistant.message_start` + `assistant.message_delta` (streaming clients), then one `assistant.message` when the message ends (another message, a thought, a tool call, the turn's end) |
//! | `agent_thought_chunk` | `assistant.reasoning_delta`, then `assistant.reasoning` |
//! | `tool_call` / `tool_call_update` | `tool.execution_start` (`toolName`, `arguments` from `rawInput`; ACP's `title`, `kind`, `locations` kept under `acp`), `tool.execution_partial_result` for content while it runs, `tool.execution_complete` on `completed` / `failed` (content as the result text, `rawOutput` kept) |
//! | `plan` | `session.plan_changed` (the entries as a Markdown checklist) |
//! | `usage_update` | `session.usage_info` (`tokenLimit` = `size`, `currentTokens` = `used`) |
//! | `available_commands_update` | `commands.changed` |
//! | `current_mode_update` | `session.mode_changed` |
//! | `session_info_update` | `session.title_changed` |
//! | `user_message_chunk` (a `session/load` replay) | `user.message` |
//! | stop reason `end_turn` | `assistant.turn_end`, `session.idle` |
//! | `max_tokens`, `max_turn_requests`, `refusal` | `session.warning` (`warningType: "acp_stop_reason"`), then as `end_turn` |
//! | `cancelled` | `abort`, `assistant.turn_end`, `session.idle {aborted: true}` |
//! | the prompt failed (the agent's error, or the agent died) | `session.error`, `assistant.turn_end`, `session.idle` |
//!
//! Tool calls still running when the turn ends complete as failed (`interrupted`). Updates
//! that are not ACP v1 (an unknown `sessionUpdate`, a tool update without `toolCallId`) are
//! refused with the reason and change nothing.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::agent::SessionControl;

use super::client::StopReason;

/// A message or a reasoning being streamed.
#[derive(Debug)]
struct OpenText {
    /// agentwire's id (`messageId` / `reasoningId`).
    id: String,
    /// The agent's `messageId`, when it gave one.
    acp_id: Option<String>,
    text: String,
}

/// A tool call as the agent described it so far.
#[derive(Debug, Default)]
struct ToolCall {
    name: String,
    arguments: Value,
    title: String,
    kind: Option<String>,
    locations: Value,
    content: Value,
    raw_output: Value,
    started: bool,
}

impl ToolCall {
    /// Applies the fields an ACP `tool_call` / `tool_call_update` carries (an update sends
    /// only what changed; a `content` array replaces the previous one).
    fn merge(&mut self, update: &Map<String, Value>) {
        if let Some(title) = update.get("title").and_then(Value::as_str) {
            self.title = title.to_owned();
        }
        if let Some(kind) = update.get("kind").and_then(Value::as_str) {
            self.kind = Some(kind.to_owned());
        }
        if let Some(name) = update.get("name").and_then(Value::as_str) {
            self.name = name.to_owned();
        }
        for (key, slot) in [
            ("rawInput", &mut self.arguments),
            ("locations", &mut self.locations),
            ("content", &mut self.content),
            ("rawOutput", &mut self.raw_output),
        ] {
            if let Some(value) = update.get(key).filter(|v| !v.is_null()) {
                *slot = value.clone();
            }
        }
    }

    /// The name clients see: the agent's `name`, else its `kind`, else `tool`.
    fn tool_name(&self) -> &str {
        if !self.name.is_empty() {
            &self.name
        } else {
            self.kind.as_deref().unwrap_or("tool")
        }
    }

    fn acp(&self) -> Value {
        let mut acp = json!({"title": self.title});
        if let Some(kind) = &self.kind {
            acp["kind"] = json!(kind);
        }
        if !self.locations.is_null() {
            acp["locations"] = self.locations.clone();
        }
        acp
    }
}

/// The text of ACP content: a `ContentBlock`, or a tool call's `ToolCallContent` list
/// (`content` blocks' text, diffs as `path` + new text, terminals by id).
fn content_text(content: &Value) -> String {
    match content {
        Value::Array(items) => items
            .iter()
            .map(content_text)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(block) => match block.get("type").and_then(Value::as_str) {
            Some("text") => block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Some("content") => block.get("content").map(content_text).unwrap_or_default(),
            Some("diff") => {
                let path = block.get("path").and_then(Value::as_str).unwrap_or("");
                let new = block.get("newText").and_then(Value::as_str).unwrap_or("");
                format!("{path}\n{new}")
            }
            Some("terminal") => {
                let id = block
                    .get("terminalId")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("[terminal {id}]")
            }
            Some("resource_link") => block
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Some("resource") => block
                .get("resource")
                .and_then(|r| r.get("text"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// One session's translation of its agent's updates (see the [module docs](self)).
#[derive(Debug, Default)]
pub struct TurnTranslator {
    turn: Option<String>,
    /// The running turn's prompt (`user.message.messageId`) and interaction.
    origin: Option<(String, String)>,
    turns: u64,
    message: Option<OpenText>,
    reasoning: Option<OpenText>,
    tools: BTreeMap<String, ToolCall>,
    mode: Option<String>,
}

impl TurnTranslator {
    /// A translator for a session with no turn yet.
    pub fn new() -> Self {
        TurnTranslator::default()
    }

    /// The agent's current mode (`current_mode_update`, or the session's opening `modes`).
    pub fn mode(&self) -> Option<&str> {
        self.mode.as_deref()
    }

    /// Sets the mode the session opened with (no event).
    pub fn set_initial_mode(&mut self, mode: Option<&str>) {
        self.mode = mode.map(str::to_owned);
    }

    /// Whether a turn is running.
    pub fn in_turn(&self) -> bool {
        self.turn.is_some()
    }

    /// A prompt was sent: `assistant.turn_start`. The turn's messages carry
    /// `originatingMessageId` (the prompt's `user.message.messageId`) and `interactionId`.
    pub fn begin_turn(
        &mut self,
        s: &mut dyn SessionControl,
        message_id: &str,
        interaction_id: &str,
    ) {
        self.origin = Some((message_id.to_owned(), interaction_id.to_owned()));
        let turn = self.turns.to_string();
        self.turns += 1;
        s.emit(
            "assistant.turn_start",
            json!({"turnId": turn, "interactionId": interaction_id}),
            false,
        );
        self.turn = Some(turn);
    }

    /// One `session/update` (its `update` object).
    pub fn apply(&mut self, s: &mut dyn SessionControl, update: &Value) -> Result<(), String> {
        let Some(fields) = update.as_object() else {
            return Err("the update is not an object".to_owned());
        };
        let variant = fields
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match variant {
            "agent_message_chunk" => {
                self.close_reasoning(s);
                let text = content_text(fields.get("content").unwrap_or(&Value::Null));
                self.stream_message(s, fields, &text);
            }
            "agent_thought_chunk" => {
                self.close_message(s);
                let text = content_text(fields.get("content").unwrap_or(&Value::Null));
                self.stream_reasoning(s, fields, &text);
            }
            "user_message_chunk" => {
                self.close_texts(s);
                let text = content_text(fields.get("content").unwrap_or(&Value::Null));
                s.emit("user.message", json!({"content": text}), false);
            }
            "tool_call" | "tool_call_update" => {
                let id = fields
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty())
                    .ok_or_else(|| format!("{variant} without a toolCallId"))?
                    .to_owned();
                if variant == "tool_call" && fields.get("title").and_then(Value::as_str).is_none() {
                    return Err("tool_call without a title".to_owned());
                }
                self.close_texts(s);
                self.tool_update(s, &id, fields);
            }
            "plan" => {
                let entries = fields
                    .get("entries")
                    .and_then(Value::as_array)
                    .ok_or("plan without entries")?;
                let content: String = entries
                    .iter()
                    .map(|e| {
                        let mark = match e.get("status").and_then(Value::as_str) {
                            Some("completed") => "x",
                            Some("in_progress") => "~",
                            _ => " ",
                        };
                        let text = e.get("content").and_then(Value::as_str).unwrap_or("");
                        format!("- [{mark}] {text}\n")
                    })
                    .collect();
                s.emit(
                    "session.plan_changed",
                    json!({"operation": "update", "content": content}),
                    false,
                );
            }
            "usage_update" => {
                let used = fields.get("used").and_then(Value::as_u64);
                let size = fields.get("size").and_then(Value::as_u64);
                let (Some(used), Some(size)) = (used, size) else {
                    return Err("usage_update without used and size".to_owned());
                };
                let mut data = json!({"tokenLimit": size, "currentTokens": used});
                if let Some(cost) = fields.get("cost").filter(|c| c.is_object()) {
                    data["cost"] = cost.clone();
                }
                s.emit("session.usage_info", data, true);
            }
            "available_commands_update" => {
                let commands: Vec<Value> = fields
                    .get("availableCommands")
                    .and_then(Value::as_array)
                    .ok_or("available_commands_update without availableCommands")?
                    .iter()
                    .filter_map(|c| {
                        let name = c.get("name")?.as_str()?;
                        let description = c.get("description").and_then(Value::as_str);
                        Some(json!({"name": name, "description": description.unwrap_or("")}))
                    })
                    .collect();
                s.emit("commands.changed", json!({"commands": commands}), true);
            }
            "current_mode_update" => {
                let mode = fields
                    .get("currentModeId")
                    .and_then(Value::as_str)
                    .ok_or("current_mode_update without currentModeId")?
                    .to_owned();
                let previous = self.mode.replace(mode.clone());
                if previous.as_deref() != Some(mode.as_str()) {
                    s.emit(
                        "session.mode_changed",
                        json!({"previousMode": previous, "newMode": mode}),
                        false,
                    );
                }
            }
            "session_info_update" => {
                if let Some(title) = fields.get("title").and_then(Value::as_str) {
                    s.emit("session.title_changed", json!({"title": title}), false);
                }
            }
            // The complete option list; nothing a session event carries.
            "config_option_update" => {}
            other => return Err(format!("unknown sessionUpdate `{other}`")),
        }
        Ok(())
    }

    /// The prompt ended: its stop reason, or why it failed (the agent's error, the agent
    /// died). Open messages are completed, running tool calls fail as interrupted, and the
    /// session goes idle.
    pub fn end_turn(&mut self, s: &mut dyn SessionControl, outcome: Result<StopReason, String>) {
        self.finish(s, outcome, true);
    }

    /// The turn was cancelled because its pending work was orphaned (the clients that would
    /// answer it left): it ends as a cancelled turn does, without an `abort` event, since
    /// nobody asked for one.
    pub fn end_interrupted_turn(&mut self, s: &mut dyn SessionControl) {
        self.finish(s, Ok(StopReason::Cancelled), false);
    }

    fn finish(
        &mut self,
        s: &mut dyn SessionControl,
        outcome: Result<StopReason, String>,
        abort_event: bool,
    ) {
        self.close_texts(s);
        let interrupted: Vec<String> = self
            .tools
            .iter()
            .filter(|(_, t)| t.started)
            .map(|(id, _)| id.clone())
            .collect();
        for id in interrupted {
            s.emit(
                "tool.execution_complete",
                json!({"toolCallId": id, "success": false,
                       "error": {"message": "The tool call was interrupted: the turn ended",
                                 "code": "interrupted"}}),
                false,
            );
        }
        self.tools.clear();
        let turn = self.turn.take().unwrap_or_else(|| self.turns.to_string());
        self.origin = None;
        let mut aborted = false;
        match outcome {
            Ok(StopReason::EndTurn) => {}
            Ok(StopReason::Cancelled) => {
                aborted = true;
                if abort_event {
                    s.emit("abort", json!({"reason": "user_initiated"}), false);
                }
            }
            Ok(reason) => {
                s.emit(
                    "session.warning",
                    json!({"warningType": "acp_stop_reason",
                           "message": format!("The agent ended the turn: {}", reason.as_str())}),
                    false,
                );
            }
            Err(message) => {
                s.emit(
                    "session.error",
                    json!({"errorType": "agent", "message": message}),
                    false,
                );
            }
        }
        s.emit("assistant.turn_end", json!({"turnId": turn}), false);
        s.emit("assistant.idle", json!({}), true);
        let idle = if aborted {
            json!({"aborted": true, "mode": "interactive"})
        } else {
            json!({"mode": "interactive"})
        };
        s.emit("session.idle", idle, true);
    }

    // ----- internals -----

    fn stream_message(
        &mut self,
        s: &mut dyn SessionControl,
        fields: &Map<String, Value>,
        text: &str,
    ) {
        let acp_id = fields.get("messageId").and_then(Value::as_str);
        if self
            .message
            .as_ref()
            .is_some_and(|m| acp_id.is_some() && m.acp_id.as_deref() != acp_id)
        {
            self.close_message(s);
        }
        let streaming = s.streaming();
        let message = self.message.get_or_insert_with(|| {
            let id = s.new_id();
            if streaming {
                s.emit("assistant.message_start", json!({"messageId": id}), true);
            }
            OpenText {
                id,
                acp_id: acp_id.map(str::to_owned),
                text: String::new(),
            }
        });
        if text.is_empty() {
            return;
        }
        message.text.push_str(text);
        if streaming {
            s.emit(
                "assistant.message_delta",
                json!({"messageId": message.id, "deltaContent": text}),
                true,
            );
        }
    }

    fn stream_reasoning(
        &mut self,
        s: &mut dyn SessionControl,
        fields: &Map<String, Value>,
        text: &str,
    ) {
        let acp_id = fields.get("messageId").and_then(Value::as_str);
        if self
            .reasoning
            .as_ref()
            .is_some_and(|r| acp_id.is_some() && r.acp_id.as_deref() != acp_id)
        {
            self.close_reasoning(s);
        }
        let reasoning = self.reasoning.get_or_insert_with(|| OpenText {
            id: s.new_id(),
            acp_id: acp_id.map(str::to_owned),
            text: String::new(),
        });
        if text.is_empty() {
            return;
        }
        reasoning.text.push_str(text);
        if s.streaming() {
            s.emit(
                "assistant.reasoning_delta",
                json!({"reasoningId": reasoning.id, "deltaContent": text}),
                true,
            );
        }
    }

    fn close_message(&mut self, s: &mut dyn SessionControl) {
        if let Some(message) = self.message.take() {
            let mut data = json!({"messageId": message.id, "content": message.text,
                                  "toolRequests": []});
            if let Some(turn) = &self.turn {
                data["turnId"] = json!(turn);
            }
            if let Some((message_id, interaction_id)) = &self.origin {
                data["originatingMessageId"] = json!(message_id);
                data["interactionId"] = json!(interaction_id);
            }
            s.emit("assistant.message", data, false);
        }
    }

    fn close_reasoning(&mut self, s: &mut dyn SessionControl) {
        if let Some(reasoning) = self.reasoning.take() {
            s.emit(
                "assistant.reasoning",
                json!({"reasoningId": reasoning.id, "content": reasoning.text}),
                false,
            );
        }
    }

    fn close_texts(&mut self, s: &mut dyn SessionControl) {
        self.close_reasoning(s);
        self.close_message(s);
    }

    fn tool_update(&mut self, s: &mut dyn SessionControl, id: &str, fields: &Map<String, Value>) {
        let call = self.tools.entry(id.to_owned()).or_default();
        call.merge(fields);
        if !call.started {
            call.started = true;
            let mut data = json!({"toolCallId": id, "toolName": call.tool_name(),
                                  "arguments": if call.arguments.is_null() { json!({}) }
                                               else { call.arguments.clone() },
                                  "acp": call.acp()});
            if let Some(turn) = &self.turn {
                data["turnId"] = json!(turn);
            }
            s.emit("tool.execution_start", data, false);
        }
        let status = fields.get("status").and_then(Value::as_str);
        match status {
            Some("completed") | Some("failed") => {
                let Some(call) = self.tools.remove(id) else {
                    return;
                };
                let text = content_text(&call.content);
                let data = if status == Some("completed") {
                    let mut result = json!({"content": text, "detailedContent": text});
                    if !call.raw_output.is_null() {
                        result["rawOutput"] = call.raw_output.clone();
                    }
                    json!({"toolCallId": id, "success": true, "result": result,
                           "acp": call.acp()})
                } else {
                    let message = if text.is_empty() {
                        "The tool call failed".to_owned()
                    } else {
                        text
                    };
                    json!({"toolCallId": id, "success": false,
                           "error": {"message": message, "code": "failure"},
                           "acp": call.acp()})
                };
                s.emit("tool.execution_complete", data, false);
            }
            _ => {
                // An update that carries `content` replaces it: report the new text.
                if fields.get("content").is_some_and(|c| !c.is_null()) {
                    let text = content_text(&call.content);
                    if !text.is_empty() {
                        s.emit(
                            "tool.execution_partial_result",
                            json!({"toolCallId": id, "partialOutput": text}),
                            true,
                        );
                    }
                }
            }
        }
    }
}
