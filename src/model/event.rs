//! The neutral stream of a model response, whatever the provider's dialect.

use serde_json::Value;

/// Token counts of one model call, as reported by the provider (zero when not reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Usage {
    /// Prompt tokens (`prompt_tokens` / `input_tokens`).
    pub input_tokens: u64,
    /// Completion tokens (`completion_tokens` / `output_tokens`).
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic).
    pub cache_write_tokens: u64,
    /// Completion tokens spent on reasoning.
    pub reasoning_tokens: u64,
}

/// One tool call the model asked for, complete.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ToolCall {
    /// The call id (the provider's, or a synthesised `<prefix><n>` when it sent none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the raw JSON text the model produced (fragments concatenated).
    pub arguments: String,
}

impl ToolCall {
    /// The arguments parsed as JSON (`{}` when the model sent none), or the parse error.
    /// `toolRequests[].arguments` carries the parsed value.
    pub fn parsed_arguments(&self) -> Result<Value, serde_json::Error> {
        if self.arguments.trim().is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        serde_json::from_str(&self.arguments)
    }

    /// The call as an `assistant.message` `toolRequests[]` entry: `{toolCallId, name,
    /// arguments, type: "function"}`, `arguments` parsed (the raw text as a string when it is
    /// not valid JSON).
    pub fn tool_request_json(&self) -> Value {
        let arguments = self
            .parsed_arguments()
            .unwrap_or_else(|_| Value::String(self.arguments.clone()));
        serde_json::json!({
            "toolCallId": self.id,
            "name": self.name,
            "arguments": arguments,
            "type": "function",
        })
    }
}

/// The whole response, accumulated from the stream.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ModelResponse {
    /// The provider's response id (the chunk `id`, e.g. `chatcmpl-1`; the `apiCallId`).
    pub response_id: Option<String>,
    /// The model that answered, as the provider named it.
    pub model: Option<String>,
    /// The answer's text.
    pub text: String,
    /// Reasoning text (`reasoning_content` / `reasoning` / thinking blocks).
    pub reasoning: String,
    /// Every tool call, in the order the model opened them. Whether the response asks for
    /// tools is decided from this list, never from `finish_reason`.
    pub tool_calls: Vec<ToolCall>,
    /// The provider's finish / stop reason, as sent (any string).
    pub finish_reason: Option<String>,
    /// The last usage the stream reported.
    pub usage: Option<Usage>,
}

impl ModelResponse {
    /// Whether the model asked for at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        !self.tool_calls.is_empty()
    }

    /// `toolRequests` for the `assistant.message` event ([`ToolCall::tool_request_json`]).
    pub fn tool_requests_json(&self) -> Value {
        Value::Array(
            self.tool_calls
                .iter()
                .map(ToolCall::tool_request_json)
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_requests_carry_parsed_arguments() {
        let r = ModelResponse {
            tool_calls: vec![
                ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments: "{\"city\":\"Paris\"}".into(),
                },
                ToolCall {
                    id: "c2".into(),
                    name: "x".into(),
                    arguments: "{oops".into(),
                },
            ],
            ..ModelResponse::default()
        };
        // wire.jsonl:40
        assert_eq!(
            r.tool_requests_json()[0],
            serde_json::json!({"toolCallId":"call_1","name":"get_weather","arguments":{"city":"Paris"},"type":"function"})
        );
        assert_eq!(r.tool_requests_json()[1]["arguments"], "{oops");
    }
}

/// One step of a model response, in stream order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelEvent {
    /// A non-empty piece of the answer's text.
    TextDelta(String),
    /// A non-empty piece of reasoning text.
    ReasoningDelta(String),
    /// A tool call was opened and named (`index` is its position in
    /// [`ModelResponse::tool_calls`]).
    ToolCallStart {
        /// Position of the call in the response.
        index: usize,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A non-empty fragment of a tool call's arguments.
    ToolCallDelta {
        /// Position of the call in the response.
        index: usize,
        /// The call id.
        id: String,
        /// The tool's name (empty if not known yet).
        name: String,
        /// The fragment.
        arguments_delta: String,
    },
    /// The provider reported token usage (possibly more than once; the last one counts).
    Usage(Usage),
    /// The response is complete.
    Done(ModelResponse),
}
