//! The transcript view model: session events in, readable lines and pending prompts out.
//!
//! Pure (no IO, no terminal), so it is unit-tested on its own. Events are the envelopes the
//! Copilot protocol carries in `session.event` notifications and `session.getMessages`
//! results (`{type, data, id, ...}`). Any event is accepted: unknown types, missing fields
//! and odd shapes render as a generic line, never a panic.

use std::collections::HashSet;

use serde_json::{Map, Value};

/// The longest tool result or argument text shown on one line (in characters).
const MAX_DETAIL_CHARS: usize = 200;

/// What a line is, which decides how it is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// The user's prompt.
    User,
    /// An assistant message.
    Assistant,
    /// A tool call starting.
    Tool,
    /// A tool call's result.
    ToolResult,
    /// A tool call that failed.
    ToolError,
    /// A request waiting for the user (permission, form).
    Prompt,
    /// How a request was answered.
    Answer,
    /// Session bookkeeping (started, resumed, followed).
    Info,
    /// A session error.
    Error,
    /// Any other event, shown by its type.
    Other,
}

/// One logical line of the transcript (wrapped to the screen width when drawn).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// What the line is.
    pub kind: LineKind,
    /// Its text, without a speaker prefix.
    pub text: String,
}

/// A request from the session that waits for the user's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// `permission.requested`: approve (`y`) or deny (`n`).
    Permission {
        /// The request id to answer with `handlePendingPermissionRequest`.
        request_id: String,
        /// What is asked, in one line.
        summary: String,
    },
    /// `elicitation.requested`: a form to fill in (no fields: just accept or decline).
    Form {
        /// The request id to answer with `handlePendingElicitation`.
        request_id: String,
        /// The question.
        message: String,
        /// The fields to fill in, in schema order.
        fields: Vec<Field>,
    },
}

impl Prompt {
    /// The request id the answer refers to.
    pub fn request_id(&self) -> &str {
        match self {
            Prompt::Permission { request_id, .. } | Prompt::Form { request_id, .. } => request_id,
        }
    }
}

/// One field of a form elicitation (a property of its `requestedSchema`).
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// The property name (the key in the answer's `content`).
    pub name: String,
    /// What to show: the schema's `title` or `description`, else the name.
    pub label: String,
    /// What kind of value it takes.
    pub kind: FieldKind,
    /// Whether the schema lists it as required.
    pub required: bool,
}

/// The value type of a form field.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldKind {
    /// Free text.
    Text,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// Yes or no.
    Boolean,
    /// One of these strings.
    Choice(Vec<String>),
}

impl Field {
    /// A short hint of what the field accepts, e.g. `yes/no` or `red|green`.
    pub fn hint(&self) -> String {
        let kind = match &self.kind {
            FieldKind::Text => "text".to_owned(),
            FieldKind::Integer => "integer".to_owned(),
            FieldKind::Number => "number".to_owned(),
            FieldKind::Boolean => "yes/no".to_owned(),
            FieldKind::Choice(options) => options.join("|"),
        };
        if self.required {
            kind
        } else {
            format!("{kind}, optional")
        }
    }

    /// Converts what the user typed into the field's JSON value. `Ok(None)` means "left
    /// empty" (allowed for optional fields only).
    pub fn parse(&self, input: &str) -> Result<Option<Value>, String> {
        let input = input.trim();
        if input.is_empty() {
            return if self.required {
                Err(format!("{} is required", self.label))
            } else {
                Ok(None)
            };
        }
        let value = match &self.kind {
            FieldKind::Text => Value::String(input.to_owned()),
            FieldKind::Integer => input
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("{} must be a whole number", self.label))?,
            FieldKind::Number => input
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("{} must be a number", self.label))?,
            FieldKind::Boolean => match input.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" => Value::Bool(true),
                "n" | "no" | "false" => Value::Bool(false),
                _ => return Err(format!("{} takes yes or no", self.label)),
            },
            FieldKind::Choice(options) => match options.iter().find(|o| o.as_str() == input) {
                Some(o) => Value::String(o.clone()),
                None => return Err(format!("{} is one of {}", self.label, options.join(", "))),
            },
        };
        Ok(Some(value))
    }
}

/// The transcript of one session: its lines, the prompts waiting for the user, and whether a
/// turn is running.
#[derive(Debug, Default)]
pub struct Transcript {
    lines: Vec<Line>,
    pending: Vec<Prompt>,
    seen: HashSet<String>,
    busy: bool,
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Transcript::default()
    }

    /// Forgets everything (another session is shown now).
    pub fn clear(&mut self) {
        *self = Transcript::default();
    }

    /// The lines so far, oldest first.
    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// The oldest prompt still waiting for the user, if any.
    pub fn pending(&self) -> Option<&Prompt> {
        self.pending.first()
    }

    /// Whether a turn is running (from `user.message` / `assistant.turn_start` until
    /// `session.idle`).
    pub fn is_busy(&self) -> bool {
        self.busy
    }

    /// The user answered `request_id`: stop offering it (the completion event follows).
    pub fn resolve(&mut self, request_id: &str) {
        self.pending.retain(|p| p.request_id() != request_id);
    }

    /// Adds a line that is not a session event (e.g. "following session X").
    pub fn note(&mut self, kind: LineKind, text: impl Into<String>) {
        self.push(kind, text.into());
    }

    /// Applies one event envelope. An event whose `id` was already applied is skipped, so
    /// history and live notifications may overlap.
    pub fn apply(&mut self, event: &Value) {
        if let Some(id) = event.get("id").and_then(Value::as_str) {
            if !self.seen.insert(id.to_owned()) {
                return;
            }
        }
        let event_type = event.get("type").and_then(Value::as_str).unwrap_or("");
        let empty = Map::new();
        let data = event
            .get("data")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let text = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or("");
        match event_type {
            "session.start" => self.push(LineKind::Info, "session started".into()),
            "session.resume" => self.push(LineKind::Info, "session resumed".into()),
            "session.shutdown" => {
                self.busy = false;
                self.push(LineKind::Info, "session ended".into());
            }
            "user.message" => {
                self.busy = true;
                self.push(LineKind::User, text("content").to_owned());
            }
            "assistant.turn_start" => self.busy = true,
            "assistant.message" => {
                // A message that only carries tool requests shows up as its tool calls.
                if !text("content").is_empty() {
                    self.push(LineKind::Assistant, text("content").to_owned());
                }
            }
            // `session.idle` is ephemeral, so history ends a turn with `assistant.turn_end`.
            "session.idle" | "assistant.turn_end" => self.busy = false,
            "tool.execution_start" => {
                let name = match text("toolName") {
                    "" => "tool",
                    name => name,
                };
                let args = data.get("arguments").map(compact).unwrap_or_default();
                self.push(
                    LineKind::Tool,
                    format!("{name} {args}").trim_end().to_owned(),
                );
            }
            "tool.execution_complete" => {
                if data.get("success").and_then(Value::as_bool) == Some(true) {
                    let result = data
                        .get("result")
                        .and_then(|r| r.get("content"))
                        .map(|c| c.as_str().map(str::to_owned).unwrap_or_else(|| compact(c)))
                        .unwrap_or_default();
                    let result = if result.trim().is_empty() {
                        "(no output)".to_owned()
                    } else {
                        shorten(&result)
                    };
                    self.push(LineKind::ToolResult, result);
                } else {
                    let message = data
                        .get("error")
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                        .unwrap_or("the tool call failed");
                    self.push(LineKind::ToolError, shorten(message));
                }
            }
            "permission.requested" => {
                let request_id = text("requestId").to_owned();
                let summary = permission_summary(data.get("permissionRequest"));
                self.push(LineKind::Prompt, format!("permission: {summary}"));
                self.offer(Prompt::Permission {
                    request_id,
                    summary,
                });
            }
            "permission.completed" => {
                self.resolve(text("requestId"));
                let kind = data
                    .get("result")
                    .and_then(|r| r.get("kind"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let verdict = if kind.starts_with("approved") {
                    "approved"
                } else {
                    "denied"
                };
                self.push(LineKind::Answer, format!("permission {verdict}"));
            }
            "elicitation.requested" => {
                let request_id = text("requestId").to_owned();
                let mut message = text("message").to_owned();
                if let Some(url) = data.get("url").and_then(Value::as_str) {
                    message = format!("{message} ({url})").trim_start().to_owned();
                }
                self.push(LineKind::Prompt, format!("question: {message}"));
                let fields = form_fields(data.get("requestedSchema"));
                self.offer(Prompt::Form {
                    request_id,
                    message,
                    fields,
                });
            }
            "elicitation.completed" => {
                self.resolve(text("requestId"));
                let action = match text("action") {
                    "" => "answered",
                    a => a,
                };
                let content = data.get("content").map(compact).unwrap_or_default();
                self.push(
                    LineKind::Answer,
                    format!("form {action} {content}").trim_end().to_owned(),
                );
            }
            "session.error" => {
                self.busy = false;
                let message = match text("message") {
                    "" => "session error",
                    m => m,
                };
                self.push(LineKind::Error, message.to_owned());
            }
            // Bookkeeping and streaming events that add nothing to a readable transcript.
            "assistant.message_start"
            | "assistant.message_delta"
            | "assistant.streaming_delta"
            | "assistant.reasoning_delta"
            | "assistant.usage"
            | "assistant.idle"
            | "session.title_changed"
            | "pending_messages.modified"
            | "commands.changed"
            | "capabilities.changed"
            | "external_tool.requested"
            | "external_tool.completed" => {}
            other => {
                let name = if other.is_empty() { "event" } else { other };
                let line = match data.get("message").and_then(Value::as_str) {
                    Some(m) => format!("{name}: {}", shorten(m)),
                    None => name.to_owned(),
                };
                self.push(LineKind::Other, line);
            }
        }
    }

    fn push(&mut self, kind: LineKind, text: String) {
        self.lines.push(Line { kind, text });
    }

    fn offer(&mut self, prompt: Prompt) {
        // A prompt without a request id cannot be answered.
        if !prompt.request_id().is_empty() {
            self.resolve(prompt.request_id());
            self.pending.push(prompt);
        }
    }
}

/// One line saying what a permission request asks for.
fn permission_summary(request: Option<&Value>) -> String {
    let Some(request) = request.and_then(Value::as_object) else {
        return "a tool wants to run".to_owned();
    };
    let text = |key: &str| request.get(key).and_then(Value::as_str);
    let what = text("intention")
        .map(str::to_owned)
        .or_else(|| text("kind").map(|k| format!("{k} request")))
        .unwrap_or_else(|| "permission request".to_owned());
    let target = ["path", "fileName", "fullCommandText", "url"]
        .iter()
        .find_map(|k| text(k))
        .map(str::to_owned)
        .or_else(|| {
            text("toolName").map(|name| {
                let args = request
                    .get("args")
                    .or_else(|| request.get("toolArgs"))
                    .map(compact)
                    .unwrap_or_default();
                format!("{name} {args}").trim_end().to_owned()
            })
        });
    match target {
        Some(t) => shorten(&format!("{what}: {t}")),
        None => what,
    }
}

/// The fields of a form elicitation's `requestedSchema` (an object schema), in order.
fn form_fields(schema: Option<&Value>) -> Vec<Field> {
    let Some(properties) = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    properties
        .iter()
        .map(|(name, prop)| {
            let label = ["title", "description"]
                .iter()
                .find_map(|k| prop.get(k).and_then(Value::as_str))
                .unwrap_or(name)
                .to_owned();
            let choices: Option<Vec<String>> =
                prop.get("enum").and_then(Value::as_array).map(|e| {
                    e.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                });
            let kind = match (choices, prop.get("type").and_then(Value::as_str)) {
                (Some(c), _) if !c.is_empty() => FieldKind::Choice(c),
                (_, Some("integer")) => FieldKind::Integer,
                (_, Some("number")) => FieldKind::Number,
                (_, Some("boolean")) => FieldKind::Boolean,
                _ => FieldKind::Text,
            };
            Field {
                name: name.clone(),
                label,
                kind,
                required: required.contains(&name.as_str()),
            }
        })
        .collect()
}

/// Compact JSON, shortened for one line.
fn compact(value: &Value) -> String {
    shorten(&value.to_string())
}

/// The text on one line (newlines become spaces), at most [`MAX_DETAIL_CHARS`] characters.
fn shorten(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= MAX_DETAIL_CHARS {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(MAX_DETAIL_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(id: &str, event_type: &str, data: Value) -> Value {
        json!({"type": event_type, "data": data, "id": id, "timestamp": "2026-01-01T00:00:00Z",
               "parentId": null})
    }

    fn texts(t: &Transcript) -> Vec<(LineKind, &str)> {
        t.lines()
            .iter()
            .map(|l| (l.kind, l.text.as_str()))
            .collect()
    }

    #[test]
    fn a_plain_turn_reads_as_a_conversation() {
        let mut t = Transcript::new();
        t.apply(&ev("1", "session.start", json!({"sessionId": "s"})));
        t.apply(&ev("2", "user.message", json!({"content": "hello"})));
        assert!(t.is_busy());
        t.apply(&ev("3", "assistant.turn_start", json!({"turnId": "0"})));
        t.apply(&ev(
            "4",
            "assistant.message",
            json!({"content": "You said: hello"}),
        ));
        t.apply(&ev("5", "assistant.turn_end", json!({})));
        assert!(
            !t.is_busy(),
            "history has no session.idle: turn_end ends the turn"
        );
        t.apply(&ev("6", "session.idle", json!({})));
        assert!(!t.is_busy());
        assert_eq!(
            texts(&t),
            vec![
                (LineKind::Info, "session started"),
                (LineKind::User, "hello"),
                (LineKind::Assistant, "You said: hello"),
            ]
        );
    }

    #[test]
    fn tool_calls_show_arguments_and_results() {
        let mut t = Transcript::new();
        t.apply(&ev(
            "1",
            "assistant.message",
            json!({"content": "", "toolRequests": [{"name": "get_weather"}]}),
        ));
        t.apply(&ev(
            "2",
            "tool.execution_start",
            json!({"toolName": "get_weather", "arguments": {"city": "Paris"}}),
        ));
        t.apply(&ev(
            "3",
            "tool.execution_complete",
            json!({"success": true, "result": {"content": "sunny\n21 C"}}),
        ));
        t.apply(&ev(
            "4",
            "tool.execution_complete",
            json!({"success": false, "error": {"message": "denied", "code": "x"}}),
        ));
        t.apply(&ev(
            "5",
            "tool.execution_complete",
            json!({"success": true, "result": {"content": ""}}),
        ));
        assert_eq!(
            texts(&t),
            vec![
                (LineKind::Tool, r#"get_weather {"city":"Paris"}"#),
                (LineKind::ToolResult, "sunny 21 C"),
                (LineKind::ToolError, "denied"),
                (LineKind::ToolResult, "(no output)"),
            ]
        );
    }

    #[test]
    fn permission_prompts_wait_until_completed() {
        let mut t = Transcript::new();
        t.apply(&ev(
            "1",
            "permission.requested",
            json!({"requestId": "r1", "permissionRequest":
                   {"kind": "read", "intention": "Read file", "path": "/tmp/a"}}),
        ));
        assert_eq!(
            t.pending(),
            Some(&Prompt::Permission {
                request_id: "r1".into(),
                summary: "Read file: /tmp/a".into()
            })
        );
        t.apply(&ev(
            "2",
            "permission.completed",
            json!({"requestId": "r1", "result": {"kind": "approved"}}),
        ));
        assert_eq!(t.pending(), None);
        assert_eq!(
            texts(&t),
            vec![
                (LineKind::Prompt, "permission: Read file: /tmp/a"),
                (LineKind::Answer, "permission approved"),
            ]
        );
    }

    #[test]
    fn custom_tool_permission_names_the_tool() {
        let mut t = Transcript::new();
        t.apply(&ev(
            "1",
            "permission.requested",
            json!({"requestId": "r", "permissionRequest":
                   {"kind": "custom-tool", "toolName": "get_weather", "args": {"city": "P"}}}),
        ));
        assert_eq!(
            t.lines()[0].text,
            r#"permission: custom-tool request: get_weather {"city":"P"}"#
        );
        // Answered locally: no longer offered, even before the completion arrives.
        t.resolve("r");
        assert_eq!(t.pending(), None);
    }

    #[test]
    fn elicitation_forms_have_typed_fields() {
        let mut t = Transcript::new();
        t.apply(&ev(
            "1",
            "elicitation.requested",
            json!({"requestId": "e1", "message": "Who are you?", "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Name"},
                    "age": {"type": "integer"},
                    "colour": {"type": "string", "enum": ["red", "green"]},
                    "ok": {"type": "boolean"}
                },
                "required": ["name"]}}),
        ));
        let Some(Prompt::Form {
            request_id,
            message,
            fields,
        }) = t.pending()
        else {
            panic!("expected a form, got {:?}", t.pending());
        };
        assert_eq!(
            (request_id.as_str(), message.as_str()),
            ("e1", "Who are you?")
        );
        let names: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["name", "age", "colour", "ok"]);
        let (name, age, colour, ok) = (&fields[0], &fields[1], &fields[2], &fields[3]);
        assert_eq!(name.label, "Name");
        assert!(name.required && !age.required);
        assert_eq!(name.parse(" Ada "), Ok(Some(json!("Ada"))));
        assert!(name.parse("").is_err());
        assert_eq!(age.parse(""), Ok(None));
        assert_eq!(age.parse("42"), Ok(Some(json!(42))));
        assert!(age.parse("forty").is_err());
        assert_eq!(colour.parse("red"), Ok(Some(json!("red"))));
        assert!(colour.parse("blue").is_err());
        assert_eq!(colour.hint(), "red|green, optional");
        assert_eq!(ok.parse("yes"), Ok(Some(json!(true))));
        t.apply(&ev(
            "2",
            "elicitation.completed",
            json!({"requestId": "e1", "action": "accept", "content": {"name": "Ada"}}),
        ));
        assert_eq!(t.pending(), None);
        assert_eq!(t.lines()[1].text, r#"form accept {"name":"Ada"}"#);
    }

    #[test]
    fn duplicates_are_skipped_and_odd_events_render_generically() {
        let mut t = Transcript::new();
        let hello = ev("1", "user.message", json!({"content": "hi"}));
        t.apply(&hello);
        t.apply(&hello);
        t.apply(&json!({"type": "brand.new_thing", "data": {"message": "a\nb"}}));
        t.apply(&json!({"type": "other.thing", "data": 7}));
        t.apply(&json!("not even an object"));
        t.apply(&json!({"type": "permission.requested", "data": {}}));
        t.apply(&json!({"type": "tool.execution_complete"}));
        t.apply(&ev("2", "session.error", json!({"message": "boom"})));
        assert_eq!(
            texts(&t),
            vec![
                (LineKind::User, "hi"),
                (LineKind::Other, "brand.new_thing: a b"),
                (LineKind::Other, "other.thing"),
                (LineKind::Other, "event"),
                (LineKind::Prompt, "permission: a tool wants to run"),
                (LineKind::ToolError, "the tool call failed"),
                (LineKind::Error, "boom"),
            ]
        );
        // A prompt without a request id is shown but cannot be answered.
        assert_eq!(t.pending(), None);
    }

    #[test]
    fn long_results_are_shortened() {
        let mut t = Transcript::new();
        let long = "x".repeat(1000);
        t.apply(&ev(
            "1",
            "tool.execution_complete",
            json!({"success": true, "result": {"content": long}}),
        ));
        assert_eq!(t.lines()[0].text.chars().count(), MAX_DETAIL_CHARS);
        assert!(t.lines()[0].text.ends_with('…'));
    }
}
