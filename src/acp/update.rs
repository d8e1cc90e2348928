//! Session events → ACP `session/update` notifications (a pure mapping).
//!
//! | session event | `sessionUpdate` |
//! |---|---|
//! | `user.message` | `user_message_chunk` (not echoed to the connection that sent the prompt) |
//! | `assistant.message_delta` | `agent_message_chunk` (same `messageId` for every chunk of a message) |
//! | `assistant.message` | `agent_message_chunk` with the whole text, unless the connection got its deltas |
//! | `assistant.reasoning_delta` / `assistant.reasoning` | `agent_thought_chunk` (same rule) |
//! | `tool.execution_start` | `tool_call` (`title`, `kind`, `status: pending`, `rawInput`, `locations`) |
//! | `permission.completed` (approved) | `tool_call_update` `status: in_progress` |
//! | `tool.execution_complete` | `tool_call_update` `completed` / `failed` with the result as content |
//! | `commands.changed` | `available_commands_update` |
//! | `session.mode_changed` | `current_mode_update` and `config_option_update` |
//! | `session.title_changed` | `session_info_update` |
//!
//! Every other event maps to nothing. A history replay (`session/load`) uses the same mapping
//! over the persisted events, where no deltas exist and user messages are always sent.

use serde_json::{json, Value};

use crate::agent::builtin::is_absolute;

/// Which connections get a mapped update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Audience {
    /// Every attached ACP connection.
    All,
    /// Every connection; the connection then counts the message (or reasoning) with this id
    /// as streamed, so its final full-text event is not sent again.
    Delta(String),
    /// Connections that did not get deltas for this message or reasoning id (the id is
    /// forgotten either way: the message is complete).
    UnlessStreamed(String),
    /// Connections that did not send the prompt with this message id themselves.
    UnlessPromptedBy(String),
}

/// One `session/update` payload (the `update` object) and who gets it. `update` is `None`
/// when nothing is sent but the audience bookkeeping still applies (an empty message).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Mapped {
    pub update: Option<Value>,
    pub audience: Audience,
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn str_field<'a>(data: &'a Value, name: &str) -> &'a str {
    data.get(name).and_then(Value::as_str).unwrap_or("")
}

/// Whether an event type can map to an update or matters to the ACP bookkeeping (a cheap
/// filter before the event's JSON is parsed).
pub(crate) fn is_relevant(event_type: &str) -> bool {
    matches!(
        event_type,
        "user.message"
            | "assistant.message_delta"
            | "assistant.message"
            | "assistant.reasoning_delta"
            | "assistant.reasoning"
            | "tool.execution_start"
            | "permission.completed"
            | "tool.execution_complete"
            | "commands.changed"
            | "session.mode_changed"
            | "session.title_changed"
            | "session.idle"
            | "session.error"
            | "elicitation.requested"
            | "elicitation.completed"
    )
}

/// Maps one session event to the updates it produces. `replay` is set for a history replay.
pub(crate) fn map_event(event_type: &str, data: &Value, replay: bool) -> Vec<Mapped> {
    let one = |update: Value, audience: Audience| {
        vec![Mapped {
            update: Some(update),
            audience,
        }]
    };
    match event_type {
        "user.message" => {
            let content = str_field(data, "content");
            let message_id = str_field(data, "messageId");
            let mut update = json!({"sessionUpdate": "user_message_chunk",
                                    "content": text_block(content)});
            if !message_id.is_empty() {
                update["messageId"] = json!(message_id);
            }
            let audience = if replay || message_id.is_empty() {
                Audience::All
            } else {
                Audience::UnlessPromptedBy(message_id.to_owned())
            };
            one(update, audience)
        }
        "assistant.message_delta" | "assistant.reasoning_delta" => {
            let (kind, id) = if event_type == "assistant.message_delta" {
                ("agent_message_chunk", str_field(data, "messageId"))
            } else {
                ("agent_thought_chunk", str_field(data, "reasoningId"))
            };
            let delta = str_field(data, "deltaContent");
            if delta.is_empty() {
                return Vec::new();
            }
            one(
                json!({"sessionUpdate": kind, "content": text_block(delta), "messageId": id}),
                Audience::Delta(id.to_owned()),
            )
        }
        "assistant.message" | "assistant.reasoning" => {
            let (kind, id) = if event_type == "assistant.message" {
                ("agent_message_chunk", str_field(data, "messageId"))
            } else {
                ("agent_thought_chunk", str_field(data, "reasoningId"))
            };
            let content = str_field(data, "content");
            let update = (!content.is_empty()).then(
                || json!({"sessionUpdate": kind, "content": text_block(content), "messageId": id}),
            );
            let audience = if replay {
                Audience::All
            } else {
                Audience::UnlessStreamed(id.to_owned())
            };
            if update.is_none() && replay {
                return Vec::new();
            }
            vec![Mapped { update, audience }]
        }
        "tool.execution_start" => {
            let id = str_field(data, "toolCallId");
            if id.is_empty() {
                return Vec::new();
            }
            let arguments = data.get("arguments").cloned().unwrap_or(Value::Null);
            one(
                tool_call(id, str_field(data, "toolName"), &arguments),
                Audience::All,
            )
        }
        "permission.completed" => {
            let id = str_field(data, "toolCallId");
            let kind = data.pointer("/result/kind").and_then(Value::as_str);
            match kind {
                Some(k) if k.starts_with("approved") && !id.is_empty() => one(
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": id,
                           "status": "in_progress"}),
                    Audience::All,
                ),
                _ => Vec::new(),
            }
        }
        "tool.execution_complete" => {
            let id = str_field(data, "toolCallId");
            if id.is_empty() {
                return Vec::new();
            }
            let success = data
                .get("success")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let (text, raw) = if success {
                let result = data.get("result").cloned().unwrap_or(Value::Null);
                let text = result
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                (text, result)
            } else {
                let error = data.get("error").cloned().unwrap_or(Value::Null);
                let text = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("The tool call failed")
                    .to_owned();
                (text, error)
            };
            let mut update = json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": id,
                "status": if success { "completed" } else { "failed" },
            });
            if !text.is_empty() {
                update["content"] = json!([{"type": "content", "content": text_block(&text)}]);
            }
            if !raw.is_null() {
                update["rawOutput"] = raw;
            }
            one(update, Audience::All)
        }
        "commands.changed" => {
            let commands: Vec<Value> = data
                .get("commands")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    let name = c.get("name")?.as_str()?;
                    Some(json!({"name": name, "description": str_field(c, "description")}))
                })
                .collect();
            one(
                json!({"sessionUpdate": "available_commands_update",
                       "availableCommands": commands}),
                Audience::All,
            )
        }
        "session.mode_changed" => {
            let mode = str_field(data, "newMode");
            if super::modes::find(mode).is_none() {
                return Vec::new();
            }
            vec![
                Mapped {
                    update: Some(
                        json!({"sessionUpdate": "current_mode_update", "currentModeId": mode}),
                    ),
                    audience: Audience::All,
                },
                Mapped {
                    update: Some(json!({"sessionUpdate": "config_option_update",
                                        "configOptions": super::modes::config_options(mode)})),
                    audience: Audience::All,
                },
            ]
        }
        "session.title_changed" => {
            let title = str_field(data, "title");
            one(
                json!({"sessionUpdate": "session_info_update", "title": title}),
                Audience::All,
            )
        }
        _ => Vec::new(),
    }
}

/// The ACP `ToolKind` and a human title for a tool call.
pub(crate) fn tool_kind_and_title(name: &str, arguments: &Value) -> (&'static str, String) {
    let arg = |field: &str| arguments.get(field).and_then(Value::as_str);
    match name {
        "view" | "read" | "read_file" => ("read", format!("Read {}", arg("path").unwrap_or(name))),
        "create" | "edit" | "write" | "write_file" | "str_replace_editor" => {
            ("edit", format!("Write {}", arg("path").unwrap_or(name)))
        }
        "bash" | "shell" | "powershell" => (
            "execute",
            match arg("command") {
                Some(c) => format!("Run `{c}`"),
                None => "Run a command".to_owned(),
            },
        ),
        "web_fetch" | "fetch" => ("fetch", format!("Fetch {}", arg("url").unwrap_or(name))),
        "grep" | "glob" | "search" => ("search", name.to_owned()),
        "" => ("other", "Tool call".to_owned()),
        _ => ("other", name.to_owned()),
    }
}

/// The `tool_call` update announcing a tool call.
pub(crate) fn tool_call(id: &str, name: &str, arguments: &Value) -> Value {
    let (kind, title) = tool_kind_and_title(name, arguments);
    let mut update = json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": title,
        "kind": kind,
        "status": "pending",
    });
    if !arguments.is_null() {
        update["rawInput"] = arguments.clone();
    }
    if let Some(path) = arguments.get("path").and_then(Value::as_str) {
        if is_absolute(path) {
            update["locations"] = json!([{"path": path}]);
            if kind == "edit" {
                if let Some(text) = arguments.get("file_text").and_then(Value::as_str) {
                    update["content"] = json!([{"type": "diff", "path": path, "newText": text}]);
                }
            }
        }
    }
    update
}

/// The prompt's text: text blocks as they are, resource links by URI, embedded resources by
/// their text (or URI), joined by newlines. Images and audio are not advertised and are
/// skipped.
pub(crate) fn prompt_text(blocks: &[Value]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for block in blocks {
        let part = match str_field(block, "type") {
            "text" => block.get("text").and_then(Value::as_str),
            "resource_link" => block.get("uri").and_then(Value::as_str),
            "resource" => block
                .pointer("/resource/text")
                .or_else(|| block.pointer("/resource/uri"))
                .and_then(Value::as_str),
            _ => None,
        };
        if let Some(p) = part {
            parts.push(p);
        }
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn updates(event_type: &str, data: Value, replay: bool) -> Vec<Mapped> {
        map_event(event_type, &data, replay)
    }

    #[test]
    fn messages_map_to_chunks_with_one_message_id() {
        let d = updates(
            "assistant.message_delta",
            json!({"messageId": "m1", "deltaContent": "Hel"}),
            false,
        );
        assert_eq!(
            d,
            vec![Mapped {
                update: Some(json!({"sessionUpdate": "agent_message_chunk",
                                    "content": {"type": "text", "text": "Hel"},
                                    "messageId": "m1"})),
                audience: Audience::Delta("m1".into()),
            }]
        );
        let full = updates(
            "assistant.message",
            json!({"messageId": "m1", "content": "Hello", "toolRequests": []}),
            false,
        );
        assert_eq!(full[0].audience, Audience::UnlessStreamed("m1".into()));
        assert_eq!(full[0].update.as_ref().unwrap()["content"]["text"], "Hello");
        // A tool-request message has no text: nothing to send, but the id is still settled.
        let empty = updates(
            "assistant.message",
            json!({"messageId": "m2", "content": ""}),
            false,
        );
        assert_eq!(empty[0].update, None);
        assert!(updates(
            "assistant.message",
            json!({"messageId": "m2", "content": ""}),
            true
        )
        .is_empty());
        let thought = updates(
            "assistant.reasoning",
            json!({"reasoningId": "r", "content": "hmm"}),
            true,
        );
        assert_eq!(
            thought[0].update.as_ref().unwrap()["sessionUpdate"],
            "agent_thought_chunk"
        );
        assert_eq!(thought[0].audience, Audience::All);
    }

    #[test]
    fn user_messages_are_not_echoed_live_to_their_sender() {
        let live = updates(
            "user.message",
            json!({"content": "hi", "messageId": "u1"}),
            false,
        );
        assert_eq!(live[0].audience, Audience::UnlessPromptedBy("u1".into()));
        let replay = updates(
            "user.message",
            json!({"content": "hi", "messageId": "u1"}),
            true,
        );
        assert_eq!(replay[0].audience, Audience::All);
        assert_eq!(
            replay[0].update,
            Some(json!({"sessionUpdate": "user_message_chunk",
                        "content": {"type": "text", "text": "hi"}, "messageId": "u1"}))
        );
    }

    #[test]
    fn tool_events_keep_the_real_tool_call_id() {
        let start = updates(
            "tool.execution_start",
            json!({"toolCallId": "call_1", "toolName": "view",
                   "arguments": {"path": "/w/hello.txt"}, "turnId": "0"}),
            false,
        );
        assert_eq!(
            start[0].update,
            Some(json!({"sessionUpdate": "tool_call", "toolCallId": "call_1",
                        "title": "Read /w/hello.txt", "kind": "read", "status": "pending",
                        "rawInput": {"path": "/w/hello.txt"},
                        "locations": [{"path": "/w/hello.txt"}]}))
        );
        let approved = updates(
            "permission.completed",
            json!({"requestId": "r", "toolCallId": "call_1", "result": {"kind": "approved"}}),
            false,
        );
        assert_eq!(
            approved[0].update.as_ref().unwrap()["status"],
            "in_progress"
        );
        assert!(updates(
            "permission.completed",
            json!({"toolCallId": "call_1", "result": {"kind": "denied-interactively-by-user"}}),
            false
        )
        .is_empty());
        let done = updates(
            "tool.execution_complete",
            json!({"toolCallId": "call_1", "success": true,
                   "result": {"content": "hello", "detailedContent": "hello"}}),
            false,
        );
        let u = done[0].update.as_ref().unwrap();
        assert_eq!(u["toolCallId"], "call_1");
        assert_eq!(u["status"], "completed");
        assert_eq!(u["content"][0]["content"]["text"], "hello");
        let failed = updates(
            "tool.execution_complete",
            json!({"toolCallId": "call_1", "success": false,
                   "error": {"message": "denied", "code": "denied"}}),
            false,
        );
        assert_eq!(failed[0].update.as_ref().unwrap()["status"], "failed");
        let edit = tool_call(
            "c",
            "create",
            &json!({"path": "/w/a.txt", "file_text": "x"}),
        );
        assert_eq!(edit["kind"], "edit");
        assert_eq!(edit["content"][0]["type"], "diff");
        let shell = tool_call("c", "bash", &json!({"command": "ls"}));
        assert_eq!(
            (shell["kind"].as_str(), shell["title"].as_str()),
            (Some("execute"), Some("Run `ls`"))
        );
        assert!(shell.get("locations").is_none());
    }

    #[test]
    fn session_level_events() {
        let c = updates(
            "commands.changed",
            json!({"commands": [{"name": "deploy", "description": "Ship it"}, {"name": "x"}]}),
            false,
        );
        assert_eq!(
            c[0].update,
            Some(
                json!({"sessionUpdate": "available_commands_update", "availableCommands": [
                {"name": "deploy", "description": "Ship it"}, {"name": "x", "description": ""}]})
            )
        );
        let m = updates(
            "session.mode_changed",
            json!({"previousMode": "interactive", "newMode": "autopilot"}),
            false,
        );
        assert_eq!(
            m[0].update,
            Some(json!({"sessionUpdate": "current_mode_update", "currentModeId": "autopilot"}))
        );
        assert_eq!(
            m[1].update.as_ref().unwrap()["configOptions"][0]["currentValue"],
            "autopilot"
        );
        assert!(updates("session.mode_changed", json!({"newMode": "nope"}), false).is_empty());
        let t = updates("session.title_changed", json!({"title": "Weather"}), false);
        assert_eq!(t[0].update.as_ref().unwrap()["title"], "Weather");
        for ignored in [
            "session.start",
            "assistant.turn_start",
            "abort",
            "session.idle",
        ] {
            assert!(updates(ignored, json!({}), false).is_empty(), "{ignored}");
        }
    }

    #[test]
    fn prompt_blocks_become_text() {
        let blocks = vec![
            json!({"type": "text", "text": "read file a.txt"}),
            json!({"type": "resource_link", "uri": "file:///w/b.txt", "name": "b.txt"}),
            json!({"type": "resource", "resource": {"uri": "file:///w/c", "text": "C"}}),
            json!({"type": "image", "data": "", "mimeType": "image/png"}),
        ];
        assert_eq!(prompt_text(&blocks), "read file a.txt\nfile:///w/b.txt\nC");
    }
}
