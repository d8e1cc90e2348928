//! OpenTelemetry traces of sessions, as the Copilot runtime exports them
//! (`COPILOT_OTEL_ENABLED`, `COPILOT_OTEL_FILE_EXPORTER_PATH`, …): every prompt a session
//! serves becomes one trace, projected from the session's own events.
//!
//! Events of sub-agents make no spans (the host feeds only the session's own).
//!
//! * `invoke_agent` (the root span): from the `user.message` that starts an agent invocation
//!   to the `session.idle` that ends it (`gen_ai.conversation.id` is the session id);
//! * `chat`: one per model call (`assistant.turn_start` … `assistant.turn_end`), a child of
//!   the invocation, with the model, token usage and, when content is captured, the
//!   invocation's messages before the call (`gen_ai.input.messages`) and the call's answer
//!   (`gen_ai.output.messages`) in the GenAI semantic conventions' JSON shape;
//! * `execute_tool`: one per tool call (`tool.execution_start` … `tool.execution_complete`), a
//!   child of the invocation, with the tool's name and call id and, when content is
//!   captured, its arguments and result. A failed call has status error.
//!
//! The projection is a pure function of the events ([`SpanTracker`]): trace and span ids
//! come from a generator seeded by the host's seed, times are the events' timestamps, so a
//! run replays to the same spans. The host writes each finished span as one JSON line to
//! the [`SpanExporter::File`] (a file effect, see [`HostConfig::telemetry`]), or posts the
//! spans that finished together to an OTLP/HTTP collector ([`SpanExporter::OtlpHttp`], an
//! HTTP effect; the body is [`otlp_body`]'s, OTLP's JSON encoding); the lines have
//! the OpenTelemetry JS SDK's span fields (`traceId`, `spanId`, `parentSpanId`, `name`,
//! `kind`, `startTime` / `endTime` as `[seconds, nanoseconds]`, `attributes`, `status`,
//! `instrumentationScope`, `resource`) and `type: "span"`.
//!
//! [`HostConfig::telemetry`]: crate::host::HostConfig::telemetry

mod otlp;
mod span;

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::ids::IdGenerator;
use crate::time::Timestamp;

pub use otlp::otlp_body;
pub use span::Span;

/// Where and how sessions' spans are exported ([`HostConfig::telemetry`]).
///
/// [`HostConfig::telemetry`]: crate::host::HostConfig::telemetry
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TelemetryConfig {
    /// Where finished spans go.
    pub exporter: SpanExporter,
    /// The instrumentation scope's name (`COPILOT_OTEL_SOURCE_NAME`; the runtime's default
    /// is `github.copilot`).
    pub source_name: String,
    /// Spans carry message content: prompts, answers, tool arguments and results
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`). Off by default.
    pub capture_content: bool,
}

/// Where finished spans go ([`TelemetryConfig::exporter`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpanExporter {
    /// Appended to this file, one JSON object per line (`COPILOT_OTEL_FILE_EXPORTER_PATH`;
    /// relative to the server's working directory).
    File(String),
    /// Posted to an OpenTelemetry collector over OTLP/HTTP with JSON bodies
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT`, …): one `POST` of an `ExportTraceServiceRequest` per
    /// batch of spans that finished together.
    OtlpHttp {
        /// The traces URL (`…/v1/traces`).
        url: String,
        /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`).
        headers: Vec<(String, String)>,
    },
}

impl TelemetryConfig {
    /// Spans appended to `file`, scope `github.copilot`, without message content.
    pub fn new(file: impl Into<String>) -> Self {
        TelemetryConfig::to(SpanExporter::File(file.into()))
    }

    /// Spans posted to the OTLP/HTTP traces endpoint `url` with `headers`, scope
    /// `github.copilot`, without message content.
    pub fn otlp(url: impl Into<String>, headers: Vec<(String, String)>) -> Self {
        TelemetryConfig::to(SpanExporter::OtlpHttp {
            url: url.into(),
            headers,
        })
    }

    fn to(exporter: SpanExporter) -> Self {
        TelemetryConfig {
            exporter,
            source_name: "github.copilot".to_owned(),
            capture_content: false,
        }
    }

    /// Sets [`TelemetryConfig::source_name`].
    #[must_use]
    pub fn with_source_name(mut self, name: impl Into<String>) -> Self {
        self.source_name = name.into();
        self
    }

    /// Sets [`TelemetryConfig::capture_content`].
    #[must_use]
    pub fn with_capture_content(mut self, on: bool) -> Self {
        self.capture_content = on;
        self
    }
}

/// Projects session events onto spans (see the module docs). One tracker serves every
/// session of a host.
#[derive(Debug)]
pub struct SpanTracker {
    capture_content: bool,
    ids: IdGenerator,
    sessions: BTreeMap<String, Invocation>,
}

/// The open spans of one session's agent invocation.
#[derive(Debug)]
struct Invocation {
    root: Span,
    /// The model call under way.
    chat: Option<Span>,
    /// Tool calls under way, by call id.
    tools: BTreeMap<String, Span>,
    /// The invocation's messages so far (only when content is captured).
    messages: Vec<Value>,
    /// The answer of the model call under way (only when content is captured).
    answer: Vec<Value>,
    /// Model calls made.
    model_calls: u64,
    input_tokens: u64,
    output_tokens: u64,
}

impl SpanTracker {
    /// A tracker whose ids follow from `seed`.
    pub fn new(seed: u64, capture_content: bool) -> Self {
        SpanTracker {
            capture_content,
            // Its own generator, so exporting spans leaves the host's event ids unchanged.
            ids: IdGenerator::new(seed ^ 0x07E1_0000_5BA9_0000),
            sessions: BTreeMap::new(),
        }
    }

    /// Takes one event of `session` (its type and data, stamped `at`) and appends the spans
    /// it finishes to `finished`.
    pub fn observe(
        &mut self,
        session: &str,
        event_type: &str,
        data: &Value,
        at: Timestamp,
        finished: &mut Vec<Span>,
    ) {
        match event_type {
            "user.message" => self.user_message(session, data, at),
            "session.idle" => {
                if let Some(invocation) = self.sessions.remove(session) {
                    invocation.finish(at, None, finished);
                }
            }
            "session.error" => {
                let message = text(data, "message").unwrap_or("session error");
                if let Some(invocation) = self.sessions.remove(session) {
                    invocation.finish(at, Some(message), finished);
                }
            }
            "session.shutdown" => {
                if let Some(invocation) = self.sessions.remove(session) {
                    invocation.finish(at, Some("the session ended during the turn"), finished);
                }
            }
            _ => {
                let capture = self.capture_content;
                let Some(invocation) = self.sessions.get_mut(session) else {
                    return;
                };
                match event_type {
                    "assistant.turn_start" => invocation.chat_started(&mut self.ids, at, finished),
                    "assistant.message" => invocation.answered(data, capture),
                    "assistant.usage" => invocation.usage(data),
                    "assistant.turn_end" => invocation.chat_ended(at, None, finished),
                    "tool.execution_start" => {
                        invocation.tool_started(&mut self.ids, data, at, capture);
                    }
                    "tool.execution_complete" => {
                        invocation.tool_completed(data, at, capture, finished);
                    }
                    _ => {}
                }
            }
        }
    }

    /// A prompt: the start of an invocation, unless one is under way (a steering message
    /// joins it).
    fn user_message(&mut self, session: &str, data: &Value, at: Timestamp) {
        let capture = self.capture_content;
        let content = text(data, "content").unwrap_or_default();
        if let Some(invocation) = self.sessions.get_mut(session) {
            if capture {
                invocation.messages.push(text_message("user", content));
            }
            return;
        }
        let trace_id = (u128::from(self.ids.next_u64()) << 64) | u128::from(self.ids.next_u64());
        let mut root = Span::new(
            trace_id,
            self.ids.next_u64(),
            None,
            "invoke_agent",
            span::KIND_INTERNAL,
            at,
        );
        root.set("gen_ai.operation.name", json!("invoke_agent"));
        root.set("gen_ai.provider.name", json!("github"));
        root.set("gen_ai.conversation.id", json!(session));
        root.set("gen_ai.agent.name", json!("GitHub Copilot"));
        let mut messages = Vec::new();
        if capture {
            root.set("github.copilot.user.message", json!(content));
            messages.push(text_message("user", content));
        }
        self.sessions.insert(
            session.to_owned(),
            Invocation {
                root,
                chat: None,
                tools: BTreeMap::new(),
                messages,
                answer: Vec::new(),
                model_calls: 0,
                input_tokens: 0,
                output_tokens: 0,
            },
        );
    }
}

impl Invocation {
    fn child(&self, ids: &mut IdGenerator, name: &str, kind: u8, at: Timestamp) -> Span {
        let mut span = Span::new(
            self.root.trace_id,
            ids.next_u64(),
            Some(self.root.span_id),
            name,
            kind,
            at,
        );
        if let Some(id) = self.root.attributes.get("gen_ai.conversation.id") {
            span.set("gen_ai.conversation.id", id.clone());
        }
        span
    }

    fn chat_started(&mut self, ids: &mut IdGenerator, at: Timestamp, finished: &mut Vec<Span>) {
        // A model call that never reported its end is finished by the next one.
        self.chat_ended(at, None, finished);
        let mut chat = self.child(ids, "chat", span::KIND_CLIENT, at);
        chat.set("gen_ai.operation.name", json!("chat"));
        chat.set("gen_ai.provider.name", json!("github"));
        if !self.messages.is_empty() {
            chat.set(
                "gen_ai.input.messages",
                json!(Value::Array(self.messages.clone()).to_string()),
            );
        }
        self.model_calls += 1;
        self.chat = Some(chat);
    }

    fn answered(&mut self, data: &Value, capture: bool) {
        if !capture {
            return;
        }
        let mut parts = Vec::new();
        if let Some(content) = text(data, "content").filter(|c| !c.is_empty()) {
            parts.push(json!({"type": "text", "content": content}));
        }
        for request in data
            .get("toolRequests")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            parts.push(json!({
                "type": "tool_call",
                "id": request.get("toolCallId").cloned().unwrap_or(Value::Null),
                "name": request.get("name").cloned().unwrap_or(Value::Null),
                "arguments": request.get("arguments").cloned().unwrap_or(Value::Null),
            }));
        }
        if parts.is_empty() {
            return;
        }
        let message = json!({"role": "assistant", "parts": parts});
        self.messages.push(message.clone());
        self.answer.push(message);
    }

    fn usage(&mut self, data: &Value) {
        let input = data.get("inputTokens").and_then(Value::as_u64).unwrap_or(0);
        let output = data
            .get("outputTokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        self.input_tokens += input;
        self.output_tokens += output;
        let model = text(data, "model");
        if let Some(model) = model {
            self.root.set("gen_ai.request.model", json!(model));
        }
        let Some(chat) = self.chat.as_mut() else {
            return;
        };
        if let Some(model) = model {
            chat.name = format!("chat {model}");
            chat.set("gen_ai.request.model", json!(model));
            chat.set("gen_ai.response.model", json!(model));
        }
        chat.set("gen_ai.usage.input_tokens", json!(input));
        chat.set("gen_ai.usage.output_tokens", json!(output));
    }

    fn chat_ended(&mut self, at: Timestamp, error: Option<&str>, finished: &mut Vec<Span>) {
        let Some(mut chat) = self.chat.take() else {
            return;
        };
        let answer = std::mem::take(&mut self.answer);
        if !answer.is_empty() {
            chat.set(
                "gen_ai.output.messages",
                json!(Value::Array(answer).to_string()),
            );
        }
        chat.finish(at, error);
        finished.push(chat);
    }

    fn tool_started(&mut self, ids: &mut IdGenerator, data: &Value, at: Timestamp, capture: bool) {
        let Some(call_id) = text(data, "toolCallId") else {
            return;
        };
        let name = text(data, "toolName").unwrap_or("unknown");
        let mut tool = self.child(
            ids,
            &format!("execute_tool {name}"),
            span::KIND_INTERNAL,
            at,
        );
        tool.set("gen_ai.operation.name", json!("execute_tool"));
        tool.set("gen_ai.tool.name", json!(name));
        tool.set("gen_ai.tool.call.id", json!(call_id));
        tool.set("gen_ai.tool.type", json!("function"));
        if capture {
            if let Some(arguments) = data.get("arguments") {
                let arguments = match arguments {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                tool.set("gen_ai.tool.call.arguments", json!(arguments));
            }
        }
        self.tools.insert(call_id.to_owned(), tool);
    }

    fn tool_completed(
        &mut self,
        data: &Value,
        at: Timestamp,
        capture: bool,
        finished: &mut Vec<Span>,
    ) {
        let Some(call_id) = text(data, "toolCallId") else {
            return;
        };
        let Some(mut tool) = self.tools.remove(call_id) else {
            return;
        };
        let success = data.get("success").and_then(Value::as_bool) != Some(false);
        let result = data
            .pointer("/result/content")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let error = data
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("the tool call failed")
            .to_owned();
        if capture {
            if let Some(result) = &result {
                tool.set("gen_ai.tool.call.result", json!(result));
                self.messages.push(json!({"role": "tool", "parts": [{
                    "type": "tool_call_response", "id": call_id, "response": result}]}));
            }
        }
        if success {
            tool.finish(at, None);
        } else {
            tool.set("error.type", json!("tool_error"));
            tool.finish(at, Some(&error));
        }
        finished.push(tool);
    }

    /// Ends the invocation (and whatever is still open in it) at `at`.
    fn finish(mut self, at: Timestamp, error: Option<&str>, finished: &mut Vec<Span>) {
        self.chat_ended(at, error, finished);
        for (_, mut tool) in std::mem::take(&mut self.tools) {
            tool.finish(
                at,
                Some(error.unwrap_or("the turn ended before the tool call")),
            );
            finished.push(tool);
        }
        self.root
            .set("github.copilot.turn_count", json!(self.model_calls));
        self.root
            .set("gen_ai.usage.input_tokens", json!(self.input_tokens));
        self.root
            .set("gen_ai.usage.output_tokens", json!(self.output_tokens));
        self.root.finish(at, error);
        finished.push(self.root);
    }
}

fn text<'a>(data: &'a Value, key: &str) -> Option<&'a str> {
    data.get(key).and_then(Value::as_str)
}

fn text_message(role: &str, content: &str) -> Value {
    json!({"role": role, "parts": [{"type": "text", "content": content}]})
}

#[cfg(test)]
mod tests;
