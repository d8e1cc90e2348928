//! The conversation sent to the model, rebuilt from the session's persisted events.
//!
//! The history is the session's own event log, so a session resumed after a restart continues
//! the same conversation. Events are taken as `(type, data)` pairs in log order:
//!
//! * `system.message` → the system prompt (the last one wins, unless the caller overrides it);
//! * `user.message` → a `user` message with `transformedContent` (the runtime's
//!   `<current_datetime>…</current_datetime>\n\n` + prompt), else `content`; with image
//!   blobs among its `attachments`, text and image parts (each image after its name);
//! * `assistant.message` → an `assistant` message; with `toolRequests` it carries the calls
//!   (`content` null when the text is empty), their arguments re-serialised compactly;
//! * `tool.execution_start` with other arguments than the model wrote (a `preToolUse` hook's
//!   `modifiedArgs`) → the call is shown with those;
//! * a `view` of an image (`tool.execution_complete` with `result.image`) → after the results of
//!   its assistant message, a `user` message `Image file at path P` with the image;
//! * `skill.invoked` (the `skill` tool loaded a skill) → after those results, a `user` message
//!   `<skill-context name="N">` with the skill's directory and instructions;
//! * `hook.end` of a `sessionStart` hook with `additionalContext` → a `user` message of its
//!   own; of a `postToolUse` hook with `modifiedResult` → that result for its call (paired
//!   with its `hook.start` by `hookInvocationId`);
//! * `tool.execution_complete` → a `tool` message with the result text, or on failure the
//!   runtime's wording ([`tool_failure_text`]). Results go right after their assistant message,
//!   in the order of its calls, whatever order they completed in; a call that never completed
//!   (the turn was aborted), or was cancelled, fails with [`INTERRUPTED_TOOL_RESULT`] (the
//!   runtime's `Session aborted`), since the APIs require an answer
//!   for every call.
//!
//! Other events are ignored.

use serde_json::Value;

use super::event::ToolCall;
use crate::Timestamp;

/// One message of the conversation, provider-neutral.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatMessage {
    /// The system prompt.
    System(String),
    /// A user prompt, as sent (datetime prefix included).
    User(String),
    /// A user prompt with images (a blob attachment): text and image parts in order.
    UserParts(Vec<UserPart>),
    /// An assistant answer and the tool calls it made.
    Assistant {
        /// The text, `None` when the answer was only tool calls.
        content: Option<String>,
        /// The tool calls, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The call it answers.
        tool_call_id: String,
        /// The text the model sees.
        content: String,
    },
}

impl ChatMessage {
    /// The bytes of text (and of attached data, base64) the message carries: what token
    /// estimates count (a token per four bytes).
    pub fn text_len(&self) -> usize {
        match self {
            ChatMessage::System(text) | ChatMessage::User(text) => text.len(),
            ChatMessage::UserParts(parts) => parts
                .iter()
                .map(|p| match p {
                    UserPart::Text(text) => text.len(),
                    UserPart::Image { data, .. } | UserPart::Document { data, .. } => data.len(),
                })
                .sum(),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                content.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.len())
                        .sum::<usize>()
            }
            ChatMessage::Tool { content, .. } => content.len(),
        }
    }
}

/// One part of a [`ChatMessage::UserParts`] message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserPart {
    /// Text.
    Text(String),
    /// An image, as base64 data with its media type (e.g. `image/png`).
    Image {
        /// The media type.
        media_type: String,
        /// The base64 data.
        data: String,
    },
    /// A document (a PDF), as base64 data with its media type and title (the attachment's
    /// name).
    Document {
        /// The media type (`application/pdf`).
        media_type: String,
        /// The base64 data.
        data: String,
        /// The title (the attachment's `displayName`).
        title: String,
    },
}

/// Whether a blob of `mime` goes to the model as a [`UserPart::Document`].
fn is_document(mime: &str) -> bool {
    mime == "application/pdf"
}

/// The error a tool call that was cancelled, or never completed (the turn ended first), shows
/// the model, in the runtime's wording (inside [`tool_failure_text`]).
pub const INTERRUPTED_TOOL_RESULT: &str = "Session aborted";

/// The user message content for `prompt` sent at `datetime` (ISO 8601, e.g.
/// `2026-12-01T18:48:15.382+00:00`), as the runtime writes `transformedContent`.
pub fn user_message_content(datetime: &str, prompt: &str) -> String {
    format!("<current_datetime>{datetime}</current_datetime>\n\n{prompt}")
}

/// `now` in the form the runtime puts between `<current_datetime>` tags:
/// `2026-12-01T18:48:15.382+00:00` (UTC, milliseconds).
pub fn current_datetime(now: Timestamp) -> String {
    let text = now.to_rfc3339();
    match text.strip_suffix('Z') {
        Some(base) => format!("{base}+00:00"),
        None => text,
    }
}

/// What the model sees when a tool failed (`code: "failure"`), in the runtime's wording:
/// ``Failed to execute `NAME` tool with arguments: ARGS due to error: Error: MESSAGE``.
pub fn tool_failure_text(name: &str, arguments_json: &str, message: &str) -> String {
    format!("Failed to execute `{name}` tool with arguments: {arguments_json} due to error: Error: {message}")
}

/// Builds the conversation from session events. `system_prompt` overrides the persisted
/// `system.message` (and is used when there is none); without either, no system message is
/// sent.
pub fn messages_from_events<'a, I>(events: I, system_prompt: Option<&str>) -> Vec<ChatMessage>
where
    I: IntoIterator<Item = (&'a str, &'a Value)>,
{
    let mut builder = HistoryBuilder::default();
    for (kind, data) in events {
        builder.push(kind, data);
    }
    builder.finish(system_prompt)
}

/// Incremental form of [`messages_from_events`].
#[derive(Clone, Debug, Default)]
pub struct HistoryBuilder {
    system: Option<String>,
    messages: Vec<ChatMessage>,
    /// The calls of the last assistant message whose results are still being collected.
    open_calls: Vec<ToolCall>,
    /// `postToolUse` hook invocations of open calls: (invocation id, tool call id).
    post_hooks: Vec<(String, String)>,
    /// Images the open calls returned (`view` of an image): path and image part, by slot.
    images: Vec<Option<(String, UserPart)>>,
    /// Skills the open calls loaded (`skill.invoked`): their `<skill-context>` messages.
    skill_contexts: Vec<String>,
    /// A user message sent after every prompt (the session's limits status).
    after_prompt: Option<String>,
    /// The model does not see images (`modelCapabilities.supports.vision: false`): viewed
    /// images and a prompt's image attachments are left out.
    no_images: bool,
    results: Vec<Option<String>>,
}

impl HistoryBuilder {
    /// A builder that sends `text` as a user message of its own after every prompt (the
    /// runtime's `<session_limits_status>`).
    pub fn with_after_prompt(text: Option<String>) -> Self {
        HistoryBuilder {
            after_prompt: text,
            ..Default::default()
        }
    }

    /// Leaves images out of the conversation (a model without vision): a `view` of an image
    /// keeps its text result, a prompt keeps its text.
    pub fn without_images(mut self) -> Self {
        self.no_images = true;
        self
    }

    /// Takes one event into account.
    pub fn push(&mut self, kind: &str, data: &Value) {
        match kind {
            "system.message" => {
                if let Some(content) = data.get("content").and_then(Value::as_str) {
                    self.system = Some(content.to_owned());
                }
            }
            "user.message" => {
                self.close_calls();
                let content = data
                    .get("transformedContent")
                    .and_then(Value::as_str)
                    .or_else(|| data.get("content").and_then(Value::as_str))
                    .unwrap_or_default();
                // Image blobs go with the prompt as image parts, each after its name; PDF
                // blobs as document parts titled with it.
                let images: Vec<&Value> = data
                    .get("attachments")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|a| {
                        a.get("type").and_then(Value::as_str) == Some("blob")
                            && a.get("mimeType").and_then(Value::as_str).is_some_and(|m| {
                                (m.starts_with("image/") && !self.no_images) || is_document(m)
                            })
                            && a.get("data").is_some_and(Value::is_string)
                    })
                    .collect();
                if images.is_empty() {
                    self.messages.push(ChatMessage::User(content.to_owned()));
                } else {
                    let mut parts = vec![UserPart::Text(content.to_owned())];
                    for image in images {
                        let text = |k: &str| string_field(image, k);
                        if is_document(&text("mimeType")) {
                            parts.push(UserPart::Document {
                                media_type: text("mimeType"),
                                data: text("data"),
                                title: text("displayName"),
                            });
                            continue;
                        }
                        if !text("displayName").is_empty() {
                            parts.push(UserPart::Text(text("displayName")));
                        }
                        parts.push(UserPart::Image {
                            media_type: text("mimeType"),
                            data: text("data"),
                        });
                    }
                    self.messages.push(ChatMessage::UserParts(parts));
                }
                if let Some(text) = &self.after_prompt {
                    self.messages.push(ChatMessage::User(text.clone()));
                }
            }
            "assistant.message" => {
                self.close_calls();
                let text = data
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let tool_calls: Vec<ToolCall> = data
                    .get("toolRequests")
                    .and_then(Value::as_array)
                    .map(|reqs| reqs.iter().filter_map(tool_request).collect())
                    .unwrap_or_default();
                let content = if tool_calls.is_empty() || !text.is_empty() {
                    Some(text.to_owned())
                } else {
                    None
                };
                self.results = vec![None; tool_calls.len()];
                self.open_calls = tool_calls.clone();
                self.messages.push(ChatMessage::Assistant {
                    content,
                    tool_calls,
                });
            }
            "tool.execution_start" => {
                // A call that ran with other arguments than the model wrote (a preToolUse
                // hook's `modifiedArgs`) is shown to the model with the ones it ran with.
                let (Some(id), Some(arguments)) = (
                    data.get("toolCallId").and_then(Value::as_str),
                    data.get("arguments").filter(|a| a.is_object()),
                ) else {
                    return;
                };
                let Some(slot) = self.open_calls.iter().position(|c| c.id == id) else {
                    return;
                };
                if self.open_calls[slot].parsed_arguments().ok().as_ref() == Some(arguments) {
                    return;
                }
                let text = arguments.to_string();
                self.open_calls[slot].arguments = text.clone();
                if let Some(ChatMessage::Assistant { tool_calls, .. }) = self.messages.last_mut() {
                    if let Some(call) = tool_calls.iter_mut().find(|c| c.id == id) {
                        call.arguments = text;
                    }
                }
            }
            "hook.start" => {
                let id = data.get("hookInvocationId").and_then(Value::as_str);
                let call = data.pointer("/input/toolCallId").and_then(Value::as_str);
                let post = data.get("hookType").and_then(Value::as_str) == Some("postToolUse");
                if let (true, Some(id), Some(call)) = (post, id, call) {
                    self.post_hooks.push((id.to_owned(), call.to_owned()));
                }
            }
            "hook.end" => {
                let output = data.get("output");
                match data.get("hookType").and_then(Value::as_str) {
                    // A `sessionStart` hook's context is a user message of its own.
                    Some("sessionStart") => {
                        if let Some(context) = output
                            .and_then(|o| o.get("additionalContext"))
                            .and_then(Value::as_str)
                            .filter(|c| !c.is_empty())
                        {
                            self.close_calls();
                            self.messages.push(ChatMessage::User(context.to_owned()));
                        }
                    }
                    // A `postToolUse` hook's `modifiedResult` is what the model sees.
                    Some("postToolUse") => {
                        let id = data.get("hookInvocationId").and_then(Value::as_str);
                        let Some(at) = self
                            .post_hooks
                            .iter()
                            .position(|(h, _)| Some(h.as_str()) == id)
                        else {
                            return;
                        };
                        let (_, call) = self.post_hooks.remove(at);
                        let text = match output.and_then(|o| o.get("modifiedResult")) {
                            Some(Value::String(s)) => Some(s.clone()),
                            Some(r) => r
                                .get("textResultForLlm")
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                            None => None,
                        };
                        let slot = self.open_calls.iter().position(|c| c.id == call);
                        if let (Some(text), Some(slot)) = (text, slot) {
                            self.results[slot] = Some(text);
                        }
                    }
                    _ => {}
                }
            }
            // A skill the model loaded: its instructions follow the call's results.
            "skill.invoked" => {
                let text = |k: &str| string_field(data, k);
                let path = text("path");
                let dir = path
                    .strip_suffix("/SKILL.md")
                    .unwrap_or(path.as_str())
                    .to_owned();
                let context = format!(
                    "<skill-context name=\"{}\">\nBase directory for this skill: {dir}\n\n{}\n</skill-context>",
                    text("name"),
                    text("content")
                );
                if self.open_calls.is_empty() {
                    self.messages.push(ChatMessage::User(context));
                } else {
                    self.skill_contexts.push(context);
                }
            }
            "tool.execution_complete" => {
                let Some(id) = data.get("toolCallId").and_then(Value::as_str) else {
                    return;
                };
                let Some(slot) = self.open_calls.iter().position(|c| c.id == id) else {
                    return;
                };
                if self.results[slot].is_none() {
                    self.results[slot] = Some(result_text(&self.open_calls[slot], data));
                    if let Some(image) = data.pointer("/result/image").filter(|_| !self.no_images) {
                        let text = |k: &str| string_field(image, k);
                        if self.images.len() <= slot {
                            self.images.resize(slot + 1, None);
                        }
                        self.images[slot] = Some((
                            text("path"),
                            UserPart::Image {
                                media_type: text("mimeType"),
                                data: text("data"),
                            },
                        ));
                    }
                }
            }
            _ => {}
        }
    }

    /// The messages, system prompt first.
    pub fn finish(mut self, system_prompt: Option<&str>) -> Vec<ChatMessage> {
        self.close_calls();
        let system = system_prompt.map(str::to_owned).or(self.system);
        let mut out = Vec::with_capacity(self.messages.len() + 1);
        if let Some(system) = system {
            out.push(ChatMessage::System(system));
        }
        out.extend(self.messages);
        out
    }

    fn close_calls(&mut self) {
        self.post_hooks.clear();
        let images = std::mem::take(&mut self.images);
        let calls = std::mem::take(&mut self.open_calls);
        let results = std::mem::take(&mut self.results);
        for (call, result) in calls.into_iter().zip(results) {
            self.messages.push(ChatMessage::Tool {
                tool_call_id: call.id,
                content: result.unwrap_or_else(|| {
                    tool_failure_text(&call.name, &call.arguments, INTERRUPTED_TOOL_RESULT)
                }),
            });
        }
        // Images the calls viewed follow their results, one user message each.
        for (path, image) in images.into_iter().flatten() {
            self.messages.push(ChatMessage::UserParts(vec![
                UserPart::Text(format!("Image file at path {path}")),
                image,
            ]));
        }
        // Then the skills they loaded.
        for context in std::mem::take(&mut self.skill_contexts) {
            self.messages.push(ChatMessage::User(context));
        }
    }
}

/// `value[key]` as a string (empty when absent or not a string).
fn string_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn tool_request(req: &Value) -> Option<ToolCall> {
    let id = req.get("toolCallId")?.as_str()?;
    let name = req.get("name").and_then(Value::as_str).unwrap_or_default();
    let arguments = match req.get("arguments") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    Some(ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments,
    })
}

fn result_text(call: &ToolCall, data: &Value) -> String {
    if data.get("success").and_then(Value::as_bool) == Some(true) {
        return match data.get("result") {
            Some(Value::Object(r)) => r
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
    }
    // A failed tool's own text for the model (`textResultForLlm`) is shown as is.
    if let Some(text) = data.pointer("/result/content").and_then(Value::as_str) {
        return text.to_owned();
    }
    let error = data.get("error");
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .or_else(|| error.and_then(Value::as_str))
        .unwrap_or("Tool execution failed");
    let code = error.and_then(|e| e.get("code")).and_then(Value::as_str);
    match code {
        Some("cancelled") => {
            tool_failure_text(&call.name, &call.arguments, INTERRUPTED_TOOL_RESULT)
        }
        // Denials and other refusals reach the model as their own message.
        Some(code) if code != "failure" => message.to_owned(),
        _ => tool_failure_text(&call.name, &call.arguments, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn build(events: &[(&str, Value)], system: Option<&str>) -> Vec<ChatMessage> {
        messages_from_events(events.iter().map(|(k, v)| (*k, v)), system)
    }

    fn assistant_with(calls: &[(&str, &str)]) -> Value {
        json!({"content": "", "toolRequests": calls.iter().map(|(id, name)| json!({
            "toolCallId": id, "name": name, "arguments": {"n": id}, "type": "function"
        })).collect::<Vec<_>>()})
    }

    #[test]
    fn results_follow_their_calls_in_call_order() {
        let events = [
            ("system.message", json!({"content": "sys"})),
            ("user.message", json!({"content": "hi"})),
            (
                "assistant.message",
                assistant_with(&[("a", "x"), ("b", "y")]),
            ),
            (
                "tool.execution_complete",
                json!({"toolCallId": "b", "success": true, "result": {"content": "B"}}),
            ),
            (
                "tool.execution_complete",
                json!({"toolCallId": "a", "success": true, "result": {"content": "A"}}),
            ),
            (
                "assistant.message",
                json!({"content": "done", "toolRequests": []}),
            ),
        ];
        let msgs = build(&events, None);
        assert_eq!(msgs[0], ChatMessage::System("sys".into()));
        assert_eq!(msgs[1], ChatMessage::User("hi".into()));
        let ChatMessage::Assistant {
            content,
            tool_calls,
        } = &msgs[2]
        else {
            panic!()
        };
        assert_eq!(content, &None);
        assert_eq!(tool_calls[0].arguments, r#"{"n":"a"}"#);
        assert_eq!(
            msgs[3],
            ChatMessage::Tool {
                tool_call_id: "a".into(),
                content: "A".into()
            }
        );
        assert_eq!(
            msgs[4],
            ChatMessage::Tool {
                tool_call_id: "b".into(),
                content: "B".into()
            }
        );
        assert_eq!(
            msgs[5],
            ChatMessage::Assistant {
                content: Some("done".into()),
                tool_calls: vec![]
            }
        );
        assert_eq!(
            build(&events, Some("mine"))[0],
            ChatMessage::System("mine".into())
        );
    }

    #[test]
    fn failures_use_the_runtime_wording_and_denials_their_message() {
        let events = [
            ("user.message", json!({"content": "hi"})),
            (
                "assistant.message",
                assistant_with(&[("a", "get_weather"), ("b", "rm")]),
            ),
            (
                "tool.execution_complete",
                json!({"toolCallId": "a", "success": false,
                "error": {"message": "Tool execution failed", "code": "failure"}}),
            ),
            (
                "tool.execution_complete",
                json!({"toolCallId": "b", "success": false,
                "error": {"message": "The user rejected this tool call. User feedback: not now", "code": "denied"}}),
            ),
        ];
        let msgs = build(&events, None);
        assert_eq!(
            msgs[2],
            ChatMessage::Tool {
                tool_call_id: "a".into(),
                content: "Failed to execute `get_weather` tool with arguments: {\"n\":\"a\"} due to error: Error: Tool execution failed".into()
            }
        );
        assert_eq!(
            msgs[3],
            ChatMessage::Tool {
                tool_call_id: "b".into(),
                content: "The user rejected this tool call. User feedback: not now".into()
            }
        );
    }

    #[test]
    fn an_interrupted_call_still_gets_an_answer() {
        let events = [
            ("user.message", json!({"content": "one"})),
            ("assistant.message", assistant_with(&[("a", "x")])),
            ("abort", json!({"reason": "user_initiated"})),
            (
                "user.message",
                json!({"content": "two", "transformedContent": "T two"}),
            ),
        ];
        let msgs = build(&events, None);
        assert_eq!(
            msgs[2],
            ChatMessage::Tool {
                tool_call_id: "a".into(),
                content: "Failed to execute `x` tool with arguments: {\"n\":\"a\"} due to error: \
                          Error: Session aborted"
                    .into()
            }
        );
        assert_eq!(msgs[3], ChatMessage::User("T two".into()));
    }

    #[test]
    fn datetime_like_the_runtime() {
        // model-requests.jsonl:1
        assert_eq!(
            current_datetime(Timestamp::from_millis(1_796_150_895_382)),
            "2026-12-01T18:48:15.382+00:00"
        );
    }

    #[test]
    fn user_content_format() {
        assert_eq!(
            user_message_content("2026-12-01T18:48:15.382+00:00", "What?"),
            "<current_datetime>2026-12-01T18:48:15.382+00:00</current_datetime>\n\nWhat?"
        );
    }
}
