//! OpenAI Chat Completions: the request body, and a lenient parser for its streamed chunks.
//!
//! The parser accepts what OpenAI-compatible servers actually send (Ollama, llama.cpp, vLLM,
//! LiteLLM): unknown fields ignored and fields of an unexpected type read as absent; any
//! `finish_reason` string; `reasoning_content` and `reasoning`; tool calls with or without
//! `index` and `id`, whole or in fragments; usage in any chunk, the last one, or none;
//! `[DONE]`, or the end of the body after a finish reason; a complete non-streamed
//! `chat.completion` (`message` instead of `delta`); `{"error": …}` chunks.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::accumulate::{ResponseAccumulator, ToolCallFragment};
use super::conversation::{ChatMessage, UserPart};
use super::error::{ModelError, ModelErrorKind};
use super::event::{ModelEvent, Usage};
use super::openai_chunk::{parse_chunk, WireUsage};
use super::request::{ChatRequest, ToolSpec};
use super::text_frame::TextFrames;

/// Serialises `messages` in the Chat Completions form, as the runtime sends them: an assistant
/// message with tool calls has `content: null` (when it has no text), `refusal: null` and
/// `tool_calls[{id, type: "function", function: {name, arguments}}]`.
pub(crate) struct OpenAiMessages<'a>(pub &'a [ChatMessage]);

impl Serialize for OpenAiMessages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for m in self.0 {
            seq.serialize_element(&OpenAiMessage(m))?;
        }
        seq.end()
    }
}

struct OpenAiMessage<'a>(&'a ChatMessage);

impl Serialize for OpenAiMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self.0 {
            ChatMessage::System(content) => {
                map.serialize_entry("role", "system")?;
                map.serialize_entry("content", content)?;
            }
            ChatMessage::User(content) => {
                map.serialize_entry("role", "user")?;
                map.serialize_entry("content", content)?;
            }
            ChatMessage::UserParts(parts) => {
                map.serialize_entry("role", "user")?;
                let parts: Vec<serde_json::Value> = parts
                    .iter()
                    .map(|p| match p {
                        UserPart::Text(text) => serde_json::json!({"type": "text", "text": text}),
                        UserPart::Image { media_type, data } => serde_json::json!({
                            "type": "image_url",
                            "image_url": {"url": format!("data:{media_type};base64,{data}")}
                        }),
                        UserPart::Document {
                            media_type,
                            data,
                            title,
                        } => serde_json::json!({
                            "type": "file",
                            "file": {"filename": title,
                                     "file_data": format!("data:{media_type};base64,{data}")}
                        }),
                    })
                    .collect();
                map.serialize_entry("content", &parts)?;
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                map.serialize_entry("role", "assistant")?;
                map.serialize_entry("content", content)?;
                if !tool_calls.is_empty() {
                    map.serialize_entry("refusal", &())?;
                    let calls: Vec<WireToolCall<'_>> = tool_calls
                        .iter()
                        .map(|c| WireToolCall {
                            id: &c.id,
                            kind: "function",
                            function: WireFunction {
                                name: &c.name,
                                arguments: &c.arguments,
                            },
                        })
                        .collect();
                    map.serialize_entry("tool_calls", &calls)?;
                }
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", tool_call_id)?;
                map.serialize_entry("content", content)?;
            }
        }
        map.end()
    }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

fn wire_tools(tools: &[ToolSpec]) -> Vec<WireTool<'_>> {
    tools
        .iter()
        .map(|t| WireTool {
            kind: "function",
            function: WireToolFunction {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
            },
        })
        .collect()
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// The Chat Completions request body, keys in the runtime's order.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: OpenAiMessages<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
}

/// The JSON body of a Chat Completions request for `model` (streaming unless `req.stream` is
/// off).
pub(crate) fn request_body(model: &str, req: &ChatRequest<'_>) -> Vec<u8> {
    let body = Body {
        model,
        messages: OpenAiMessages(req.messages),
        temperature: req.sampling.temperature,
        top_p: req.sampling.top_p,
        frequency_penalty: req.sampling.frequency_penalty,
        presence_penalty: req.sampling.presence_penalty,
        tools: wire_tools(req.tools),
        stream: req.stream,
        stream_options: req.stream.then_some(StreamOptions {
            include_usage: true,
        }),
        reasoning_effort: req.reasoning_effort,
        max_tokens: req.max_output_tokens,
    };
    serde_json::to_vec(&body).expect("serialising plain data cannot fail")
}

/// Maps one Chat Completions stream onto [`ModelEvent`]s.
#[derive(Debug)]
pub struct OpenAiStream {
    acc: Option<ResponseAccumulator>,
    /// The last plain text chunk's frame ([`super::text_frame`]), `None` when disabled.
    frames: Option<TextFrames>,
}

impl OpenAiStream {
    /// A parser for one response; tool calls without an id get `<id_prefix><n>`.
    pub fn new(id_prefix: &str) -> Self {
        OpenAiStream {
            acc: Some(ResponseAccumulator::new(id_prefix)),
            frames: Some(TextFrames::default()),
        }
    }

    /// A parser that reads every chunk in full (no repeated frames), for comparisons.
    #[cfg(test)]
    pub(super) fn without_frames(id_prefix: &str) -> Self {
        OpenAiStream {
            frames: None,
            ..OpenAiStream::new(id_prefix)
        }
    }

    /// Whether the response is complete (`[DONE]` seen).
    pub fn is_done(&self) -> bool {
        self.acc.is_none()
    }

    /// One SSE event's data. Appends events; [`ModelEvent::Done`] after `[DONE]`.
    pub fn on_data(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let Some(acc) = self.acc.as_mut() else {
            return Ok(()); // anything after [DONE] is ignored
        };
        let trimmed = data.trim();
        if trimmed == "[DONE]" {
            let acc = self.acc.take().expect("checked above");
            out.push(ModelEvent::Done(acc.finish()));
            return Ok(());
        }
        if trimmed.is_empty() {
            return Ok(());
        }
        if let Some(text) = self.frames.as_mut().and_then(|f| f.text(trimmed)) {
            acc.text(&text, out);
            return Ok(());
        }
        let (chunk, nonce) = parse_chunk(trimmed)?;
        if let (Some(frames), Some(content)) = (self.frames.as_mut(), chunk.plain_text()) {
            frames.learn(trimmed, content, nonce);
        }
        if let Some(error) = chunk.error.filter(|e| e.get() != "null") {
            return Err(provider_error(error.get()));
        }
        if chunk.object.get() == Some("error") {
            return Err(ModelError::new(
                ModelErrorKind::ProviderError,
                format!(
                    "the model endpoint reported an error: {}",
                    chunk.message.get().unwrap_or("(no message)")
                ),
            ));
        }
        acc.identify(chunk.id.get(), chunk.model.get());
        for choice in chunk.choices.0.iter().filter_map(|c| c.0.as_ref()) {
            // Only one choice is asked for, but the runtime's own route answers with several
            // choices that are one answer (a tool call in each): their text and tool calls
            // are joined in choice order, the calls of choice `c` keyed apart from the others.
            let choice_key = choice.index.0.unwrap_or(0) << 32;
            let delta = choice.delta.0.as_ref().or(choice.message.0.as_deref());
            if let Some(delta) = delta {
                let reasoning = delta
                    .reasoning_content
                    .get()
                    .filter(|s| !s.is_empty())
                    .or(delta.reasoning.get());
                if let Some(r) = reasoning {
                    acc.reasoning(r, out);
                }
                if let Some(text) = delta.content.get() {
                    acc.text(text, out);
                }
                for (position, call) in delta.tool_calls.0.iter().enumerate() {
                    let Some(call) = call.0.as_ref() else {
                        continue;
                    };
                    let function = call.function.0.as_ref();
                    acc.tools.push(
                        position,
                        ToolCallFragment {
                            index: match (call.index.0, choice_key) {
                                (index, 0) => index,
                                (index, key) => Some(key | index.unwrap_or(position as u64)),
                            },
                            id: call.id.get(),
                            name: function.and_then(|f| f.name.get()),
                            arguments: function.and_then(|f| f.arguments.0.as_deref()),
                        },
                        out,
                    );
                }
            }
            if let Some(reason) = choice.finish_reason.get() {
                acc.finish_reason(reason);
            }
        }
        if let Some(u) = chunk.usage.0.as_ref() {
            let usage = Usage {
                input_tokens: u.prompt_tokens.0.or(u.input_tokens.0).unwrap_or(0),
                output_tokens: u.completion_tokens.0.or(u.output_tokens.0).unwrap_or(0),
                cache_read_tokens: u
                    .prompt_tokens_details
                    .0
                    .as_ref()
                    .and_then(|d| d.cached_tokens.0)
                    .unwrap_or(0),
                cache_write_tokens: 0,
                reasoning_tokens: u
                    .completion_tokens_details
                    .0
                    .as_ref()
                    .and_then(|d| d.reasoning_tokens.0)
                    .unwrap_or(0),
            };
            // `usage: {}` (some servers) carries nothing.
            if !is_empty_usage(u) {
                acc.usage(usage, out);
            }
        }
        Ok(())
    }

    /// The end of the body. Complete when `[DONE]` or a finish reason was seen; otherwise the
    /// stream was cut.
    pub fn on_end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let Some(acc) = self.acc.take() else {
            return Ok(());
        };
        if acc.has_finish_reason() {
            out.push(ModelEvent::Done(acc.finish()));
            Ok(())
        } else {
            Err(ModelError::new(
                ModelErrorKind::StreamCut,
                "the response stream ended before the model finished its answer",
            ))
        }
    }
}

fn is_empty_usage(u: &WireUsage) -> bool {
    u.prompt_tokens.0.is_none()
        && u.completion_tokens.0.is_none()
        && u.input_tokens.0.is_none()
        && u.output_tokens.0.is_none()
}

/// The user-facing error for an `error` member (object with `message`, or a string).
pub(crate) fn provider_error(raw: &str) -> ModelError {
    let value: serde_json::Value = serde_json::from_str(raw).unwrap_or_default();
    let message = value
        .get("message")
        .and_then(|m| m.as_str())
        .or_else(|| value.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| excerpt(raw));
    ModelError::new(
        ModelErrorKind::ProviderError,
        format!("the model endpoint reported an error: {message}"),
    )
}

/// The first 200 characters of `text`, for messages.
pub(crate) fn excerpt(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::{ModelResponse, ToolCall};

    fn run(chunks: &[&str]) -> (Vec<ModelEvent>, Result<(), ModelError>) {
        let mut s = OpenAiStream::new("call_");
        let mut out = Vec::new();
        for c in chunks {
            if let Err(e) = s.on_data(c, &mut out) {
                return (out, Err(e));
            }
        }
        let r = s.on_end(&mut out);
        (out, r)
    }

    fn done(events: &[ModelEvent]) -> &ModelResponse {
        match events.last() {
            Some(ModelEvent::Done(r)) => r,
            other => panic!("no Done: {other:?}"),
        }
    }

    #[test]
    fn the_recorded_tool_call_stream() {
        // The fake endpoint behind wire.jsonl: id+name with empty args, then the args, then
        // finish_reason, then a usage-only chunk, then [DONE].
        let (events, r) = run(&[
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#,
            "[DONE]",
        ]);
        r.unwrap();
        let resp = done(&events);
        assert_eq!(resp.response_id.as_deref(), Some("chatcmpl-1"));
        assert_eq!(
            resp.tool_calls,
            [ToolCall {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: "{\"city\":\"Paris\"}".into()
            }]
        );
        assert_eq!(resp.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(resp.usage.unwrap().input_tokens, 10);
        assert!(matches!(&events[0], ModelEvent::ToolCallStart { .. }));
        assert!(
            matches!(&events[1], ModelEvent::ToolCallDelta { arguments_delta, .. } if arguments_delta == "{\"city\":\"Paris\"}")
        );
    }

    #[test]
    fn tool_calls_are_decided_from_calls_not_finish_reason() {
        let (events, r) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"c","function":{"name":"t","arguments":"{}"}}]},"finish_reason":"stop"}]}"#,
        ]);
        r.unwrap();
        assert!(done(&events).has_tool_calls());
        let (events, r) = run(&[
            r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        r.unwrap();
        assert!(!done(&events).has_tool_calls());
    }

    #[test]
    fn reasoning_under_either_name_and_priming_deltas() {
        let (events, r) = run(&[
            r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"think "}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"more"}}]}"#,
            r#"{"choices":[{"delta":{"content":"ok"},"finish_reason":""}]}"#,
            "[DONE]",
        ]);
        r.unwrap();
        let resp = done(&events);
        assert_eq!(resp.reasoning, "think more");
        assert_eq!(resp.text, "ok");
        assert_eq!(resp.finish_reason, None);
        assert_eq!(events.len(), 4, "{events:?}");
    }

    #[test]
    fn odd_types_unknown_fields_and_object_arguments() {
        let (events, r) = run(&[
            r#"{"id":7,"choices":[{"index":"0","delta":{"content":5,"tool_calls":[{"function":{"name":"t","arguments":{"a":1}}}],"extra":[1]},"finish_reason":9,"logprobs":{}}],"system_fingerprint":"x","usage":{}}"#,
            r#"{"choices":"nope"}"#,
            "[DONE]",
        ]);
        r.unwrap();
        let resp = done(&events);
        assert_eq!(resp.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(resp.tool_calls[0].id, "call_1");
        assert_eq!(resp.usage, None);
    }

    #[test]
    fn eof_after_a_finish_reason_is_complete_and_without_one_is_cut() {
        let (events, r) =
            run(&[r#"{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}"#]);
        r.unwrap();
        assert_eq!(done(&events).text, "a");
        let (_, r) = run(&[r#"{"choices":[{"delta":{"content":"a"}}]}"#]);
        assert_eq!(r.unwrap_err().kind, ModelErrorKind::StreamCut);
    }

    #[test]
    fn errors_in_the_stream() {
        let (_, r) = run(&[
            r#"{"error":{"message":"context length exceeded","type":"invalid_request_error"}}"#,
        ]);
        let e = r.unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::ProviderError);
        assert!(e.message.contains("context length exceeded"), "{e}");
        let (_, r) = run(&[r#"{"object":"error","message":"bad","code":400}"#]);
        assert!(r.unwrap_err().message.contains("bad"));
        let (_, r) = run(&[r#"{"choices":[{"delta":{"content":"#]);
        let e = r.unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::MalformedStream);
        assert!(e.message.contains("not valid JSON"), "{e}");
    }

    #[test]
    fn a_non_streamed_completion_is_accepted() {
        let (events, r) = run(&[
            r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
        ]);
        r.unwrap();
        assert_eq!(done(&events).text, "whole");
    }

    #[test]
    fn several_choices_of_a_completion_are_one_answer_in_choice_order() {
        // The runtime's own route answers a response with two tool calls as two choices.
        let (events, r) = run(&[
            r#"{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"toolcall_0","type":"function","function":{"name":"report_intent","arguments":"{\"intent\":\"Reading\"}"}}]},"finish_reason":"tool_calls"},{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"toolcall_1","type":"function","function":{"name":"view","arguments":"{\"path\":\"/w/a.txt\"}"}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        r.unwrap();
        let response = done(&events);
        let calls: Vec<(&str, &str, &str)> = response
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("toolcall_0", "report_intent", r#"{"intent":"Reading"}"#),
                ("toolcall_1", "view", r#"{"path":"/w/a.txt"}"#)
            ]
        );
        // Streamed choices with the same tool index stay two calls.
        let (events, r) = run(&[
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"A","tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{}"}}]}},{"index":1,"delta":{"content":"B","tool_calls":[{"index":0,"id":"y","function":{"name":"g","arguments":"{}"}}]}}]}"#,
            r#"{"id":"c","choices":[{"index":1,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        r.unwrap();
        let response = done(&events);
        assert_eq!(response.text, "AB");
        let names: Vec<&str> = response
            .tool_calls
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["f", "g"]);
    }

    #[test]
    fn a_request_that_does_not_stream_asks_for_one_completion() {
        let msgs = [ChatMessage::User("u".into())];
        let mut req = ChatRequest::new(Some("m"), &msgs, &[]);
        req.stream = false;
        let body: serde_json::Value = serde_json::from_slice(&request_body("m", &req)).unwrap();
        assert_eq!(body["stream"], false);
        assert!(body.get("stream_options").is_none(), "{body}");
    }

    #[test]
    fn message_serialisation_matches_the_runtime() {
        let msgs = [
            ChatMessage::User("u".into()),
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments: "{\"city\":\"Paris\"}".into(),
                }],
            },
            ChatMessage::Tool {
                tool_call_id: "call_1".into(),
                content: "r".into(),
            },
            ChatMessage::Assistant {
                content: Some("t".into()),
                tool_calls: vec![],
            },
        ];
        let v = serde_json::to_value(OpenAiMessages(&msgs)).unwrap();
        assert_eq!(
            v,
            serde_json::json!([
                {"role":"user","content":"u"},
                {"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
                {"role":"tool","tool_call_id":"call_1","content":"r"},
                {"role":"assistant","content":"t"}
            ])
        );
    }
}
