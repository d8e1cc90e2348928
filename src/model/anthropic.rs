//! The Anthropic Messages API: the request body, and a parser for its stream events
//! (`message_start`, `content_block_start` / `_delta` / `_stop` with text, `tool_use` +
//! `input_json_delta` and thinking, `message_delta` with the stop reason and usage,
//! `message_stop`, `ping`, `error`). Unknown events and fields are ignored.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::accumulate::{ResponseAccumulator, ToolCallFragment};
use super::conversation::{ChatMessage, UserPart};
use super::error::{ModelError, ModelErrorKind};
use super::event::{ModelEvent, Usage};
use super::fast_json::{Fast, Reader, Seen};
use super::lenient::{LArgs, LObj, LStr, LU64};
use super::openai::{excerpt, provider_error};
use super::request::ChatRequest;
use super::text_frame::TextFrames;

/// The default `max_tokens` (the API requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// The JSON body of a streaming Messages request.
pub(crate) fn request_body(model: &str, req: &ChatRequest<'_>, max_tokens: Option<u64>) -> Vec<u8> {
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    // Appends content blocks to the last message if it has `role`, else opens a new one.
    fn append(messages: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
        if let Some(last) = messages.last_mut() {
            if last["role"] == role {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                    return;
                }
            }
        }
        messages.push(json!({"role": role, "content": blocks}));
    }
    for m in req.messages {
        match m {
            ChatMessage::System(s) => system.push(s.as_str()),
            ChatMessage::User(text) => append(
                &mut messages,
                "user",
                vec![json!({"type": "text", "text": text})],
            ),
            ChatMessage::UserParts(parts) => append(
                &mut messages,
                "user",
                parts
                    .iter()
                    .map(|p| match p {
                        UserPart::Text(text) => json!({"type": "text", "text": text}),
                        UserPart::Image { media_type, data } => json!({"type": "image",
                            "source": {"type": "base64", "media_type": media_type, "data": data}}),
                        UserPart::Document {
                            media_type,
                            data,
                            title,
                        } => {
                            let mut block = json!({"type": "document",
                                "source": {"type": "base64", "media_type": media_type, "data": data}});
                            if !title.is_empty() {
                                block["title"] = json!(title);
                            }
                            if req.enable_citations {
                                block["citations"] = json!({"enabled": true});
                            }
                            block
                        }
                    })
                    .collect(),
            ),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    let input = call
                        .parsed_arguments()
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| Value::Object(Map::new()));
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                if !blocks.is_empty() {
                    append(&mut messages, "assistant", blocks);
                }
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => append(
                &mut messages,
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content}),
                ],
            ),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    // Recent models reject temperature and top_p together: send only the temperature.
    if let Some(t) = req.sampling.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("stream".into(), json!(true));
    serde_json::to_vec(&Value::Object(body)).expect("serialising plain data cannot fail")
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: LStr<'a>,
    #[serde(borrow)]
    message: LObj<Box<Message<'a>>>,
    index: LU64,
    #[serde(borrow)]
    content_block: LObj<Box<Block<'a>>>,
    #[serde(borrow)]
    delta: LObj<Delta<'a>>,
    usage: LObj<Box<WireUsage>>,
    #[serde(borrow)]
    error: Option<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct Message<'a> {
    #[serde(borrow)]
    id: LStr<'a>,
    #[serde(borrow)]
    model: LStr<'a>,
    usage: LObj<WireUsage>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: LStr<'a>,
    #[serde(borrow)]
    text: LStr<'a>,
    #[serde(borrow)]
    thinking: LStr<'a>,
    #[serde(borrow)]
    id: LStr<'a>,
    #[serde(borrow)]
    name: LStr<'a>,
    #[serde(borrow)]
    input: LArgs<'a>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct Delta<'a> {
    #[serde(rename = "type", borrow)]
    kind: LStr<'a>,
    #[serde(borrow)]
    text: LStr<'a>,
    #[serde(borrow)]
    thinking: LStr<'a>,
    #[serde(borrow)]
    partial_json: LStr<'a>,
    #[serde(borrow)]
    stop_reason: LStr<'a>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct WireUsage {
    input_tokens: LU64,
    output_tokens: LU64,
    cache_read_input_tokens: LU64,
    cache_creation_input_tokens: LU64,
}

impl<'a> Event<'a> {
    /// The text, when the event is a `content_block_delta` whose only effect is that text
    /// (a `text_delta` without escapes; nothing else of such an event counts).
    fn plain_text(&self) -> Option<&'a str> {
        let delta = self.delta.0.as_ref()?;
        if self.kind.get() != Some("content_block_delta") || delta.kind.get() != Some("text_delta")
        {
            return None;
        }
        match delta.text.0 {
            Some(std::borrow::Cow::Borrowed(text)) => Some(text),
            _ => None,
        }
    }
}

/// One event's JSON: the fast reader when it is certain, else serde_json (the reference).
pub(super) fn parse_event(text: &str) -> Result<Event<'_>, ModelError> {
    if let Ok(event) = fast_event(text) {
        return Ok(event);
    }
    serde_event(text)
}

/// One event's JSON through serde_json alone.
pub(super) fn serde_event(text: &str) -> Result<Event<'_>, ModelError> {
    serde_json::from_str(text).map_err(|e| {
        ModelError::new(
            ModelErrorKind::MalformedStream,
            format!("a stream event is not valid JSON ({e}): {}", excerpt(text)),
        )
    })
}

/// One event's JSON through the fast reader ([`super::fast_json`]): the same `Event` serde
/// would give, or [`Bail`](super::fast_json::Bail).
pub(super) fn fast_event(text: &str) -> Fast<Event<'_>> {
    let mut r = Reader::new(text);
    let mut ev = Event::default();
    let mut seen = Seen::default();
    r.object(|r, key| {
        match key {
            "type" => {
                seen.once(0)?;
                ev.kind = r.lstr()?;
            }
            "message" => {
                seen.once(1)?;
                ev.message = r.lobj(|r| {
                    let mut m = Message::default();
                    let mut seen = Seen::default();
                    r.object(|r, key| {
                        match key {
                            "id" => {
                                seen.once(0)?;
                                m.id = r.lstr()?;
                            }
                            "model" => {
                                seen.once(1)?;
                                m.model = r.lstr()?;
                            }
                            "usage" => {
                                seen.once(2)?;
                                m.usage = r.lobj(fast_usage)?;
                            }
                            _ => r.skip()?,
                        }
                        Ok(())
                    })?;
                    Ok(Box::new(m))
                })?;
            }
            "index" => {
                seen.once(2)?;
                ev.index = r.lu64()?;
            }
            "content_block" => {
                seen.once(3)?;
                ev.content_block = r.lobj(|r| fast_block(r).map(Box::new))?;
            }
            "delta" => {
                seen.once(4)?;
                ev.delta = r.lobj(fast_delta)?;
            }
            "usage" => {
                seen.once(5)?;
                ev.usage = r.lobj(|r| fast_usage(r).map(Box::new))?;
            }
            "error" => {
                seen.once(6)?;
                ev.error = r.null_only()?;
            }
            _ => r.skip()?,
        }
        Ok(())
    })?;
    r.end()?;
    Ok(ev)
}

fn fast_block<'a>(r: &mut Reader<'a>) -> Fast<Block<'a>> {
    let mut b = Block::default();
    let mut seen = Seen::default();
    r.object(|r, key| {
        let (bit, field) = match key {
            "type" => (0, &mut b.kind),
            "text" => (1, &mut b.text),
            "thinking" => (2, &mut b.thinking),
            "id" => (3, &mut b.id),
            "name" => (4, &mut b.name),
            "input" => {
                seen.once(5)?;
                b.input = r.largs()?;
                return Ok(());
            }
            _ => return r.skip(),
        };
        seen.once(bit)?;
        *field = r.lstr()?;
        Ok(())
    })?;
    Ok(b)
}

fn fast_delta<'a>(r: &mut Reader<'a>) -> Fast<Delta<'a>> {
    let mut d = Delta::default();
    let mut seen = Seen::default();
    r.object(|r, key| {
        let (bit, field) = match key {
            "type" => (0, &mut d.kind),
            "text" => (1, &mut d.text),
            "thinking" => (2, &mut d.thinking),
            "partial_json" => (3, &mut d.partial_json),
            "stop_reason" => (4, &mut d.stop_reason),
            _ => return r.skip(),
        };
        seen.once(bit)?;
        *field = r.lstr()?;
        Ok(())
    })?;
    Ok(d)
}

fn fast_usage(r: &mut Reader<'_>) -> Fast<WireUsage> {
    let mut u = WireUsage::default();
    let mut seen = Seen::default();
    r.object(|r, key| {
        let (bit, field) = match key {
            "input_tokens" => (0, &mut u.input_tokens),
            "output_tokens" => (1, &mut u.output_tokens),
            "cache_read_input_tokens" => (2, &mut u.cache_read_input_tokens),
            "cache_creation_input_tokens" => (3, &mut u.cache_creation_input_tokens),
            _ => return r.skip(),
        };
        seen.once(bit)?;
        *field = r.lu64()?;
        Ok(())
    })?;
    Ok(u)
}

/// Maps one Messages stream onto [`ModelEvent`]s.
#[derive(Debug)]
pub struct AnthropicStream {
    acc: Option<ResponseAccumulator>,
    usage: Usage,
    /// Tool blocks: (index, whether an `input_json_delta` arrived, the start's `input`).
    tool_blocks: Vec<(u64, bool, Option<String>)>,
    /// The last text delta's frame ([`super::text_frame`]), `None` when disabled.
    frames: Option<TextFrames>,
}

impl AnthropicStream {
    /// A parser for one response; see [`super::openai::OpenAiStream::new`].
    pub fn new(id_prefix: &str) -> Self {
        AnthropicStream {
            acc: Some(ResponseAccumulator::new(id_prefix)),
            usage: Usage::default(),
            tool_blocks: Vec::new(),
            frames: Some(TextFrames::default()),
        }
    }

    /// A parser that reads every event in full (no repeated frames), for comparisons.
    #[cfg(test)]
    pub(super) fn without_frames(id_prefix: &str) -> Self {
        AnthropicStream {
            frames: None,
            ..AnthropicStream::new(id_prefix)
        }
    }

    /// Whether the response is complete (`message_stop` seen).
    pub fn is_done(&self) -> bool {
        self.acc.is_none()
    }

    /// One SSE event (`event_name` is its `event:` field; the data's `type` wins).
    pub fn on_event(
        &mut self,
        event_name: Option<&str>,
        data: &str,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        let Some(acc) = self.acc.as_mut() else {
            return Ok(());
        };
        let trimmed = data.trim();
        if trimmed.is_empty() {
            return Ok(());
        }
        if let Some(text) = self.frames.as_mut().and_then(|f| f.text(trimmed)) {
            acc.text(&text, out);
            return Ok(());
        }
        let ev = parse_event(trimmed)?;
        if let (Some(frames), Some(text)) = (self.frames.as_mut(), ev.plain_text()) {
            frames.learn(trimmed, text, None);
        }
        let kind = ev.kind.get().or(event_name).unwrap_or("");
        let index = ev.index.0.unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(m) = ev.message.0.as_ref() {
                    acc.identify(m.id.get(), m.model.get());
                    if let Some(u) = m.usage.0.as_ref() {
                        merge_usage(&mut self.usage, u);
                    }
                }
            }
            "content_block_start" => {
                let Some(block) = ev.content_block.0.as_ref() else {
                    return Ok(());
                };
                match block.kind.get() {
                    Some("text") => acc.text(block.text.get().unwrap_or(""), out),
                    Some("thinking") => acc.reasoning(block.thinking.get().unwrap_or(""), out),
                    Some("tool_use") | Some("server_tool_use") => {
                        let input = block
                            .input
                            .0
                            .as_deref()
                            .filter(|i| !i.trim().is_empty() && i.trim() != "{}")
                            .map(str::to_owned);
                        self.tool_blocks.push((index, false, input));
                        acc.tools.push(
                            0,
                            ToolCallFragment {
                                index: Some(index),
                                id: block.id.get(),
                                name: block.name.get(),
                                arguments: None,
                            },
                            out,
                        );
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let Some(delta) = ev.delta.0.as_ref() else {
                    return Ok(());
                };
                match delta.kind.get() {
                    Some("text_delta") => acc.text(delta.text.get().unwrap_or(""), out),
                    Some("thinking_delta") => {
                        acc.reasoning(delta.thinking.get().unwrap_or(""), out)
                    }
                    Some("input_json_delta") => {
                        if let Some(b) = self.tool_blocks.iter_mut().find(|b| b.0 == index) {
                            b.1 = true;
                        }
                        acc.tools.push(
                            0,
                            ToolCallFragment {
                                index: Some(index),
                                id: None,
                                name: None,
                                arguments: delta.partial_json.get(),
                            },
                            out,
                        );
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(b) = self.tool_blocks.iter_mut().find(|b| b.0 == index) {
                    if let (false, Some(input)) = (b.1, b.2.take()) {
                        acc.tools.push(
                            0,
                            ToolCallFragment {
                                index: Some(index),
                                id: None,
                                name: None,
                                arguments: Some(&input),
                            },
                            out,
                        );
                    }
                }
            }
            "message_delta" => {
                if let Some(reason) = ev.delta.0.as_ref().and_then(|d| d.stop_reason.get()) {
                    acc.finish_reason(reason);
                }
                if let Some(u) = ev.usage.0.as_ref() {
                    merge_usage(&mut self.usage, u);
                    acc.usage(self.usage, out);
                }
            }
            "message_stop" => {
                let acc = self.acc.take().expect("checked above");
                out.push(ModelEvent::Done(acc.finish()));
            }
            "error" => {
                let raw = ev.error.map(|e| e.get()).unwrap_or("\"unknown error\"");
                return Err(provider_error(raw));
            }
            _ => {} // ping and future event types
        }
        Ok(())
    }

    /// The end of the body: complete after `message_stop`, or (leniently) after a stop reason.
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

fn merge_usage(usage: &mut Usage, u: &WireUsage) {
    if let Some(n) = u.input_tokens.0 {
        usage.input_tokens = n;
    }
    if let Some(n) = u.output_tokens.0 {
        usage.output_tokens = n;
    }
    if let Some(n) = u.cache_read_input_tokens.0 {
        usage.cache_read_tokens = n;
    }
    if let Some(n) = u.cache_creation_input_tokens.0 {
        usage.cache_write_tokens = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::{ModelResponse, ToolCall};
    use crate::model::request::ToolSpec;

    fn run(events: &[(&str, &str)]) -> (Vec<ModelEvent>, Result<(), ModelError>) {
        let mut s = AnthropicStream::new("toolu_");
        let mut out = Vec::new();
        for (name, data) in events {
            if let Err(e) = s.on_event(Some(name), data, &mut out) {
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
    fn a_text_thinking_and_tool_use_stream() {
        let (events, r) = run(&[
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":12,"output_tokens":1,"cache_read_input_tokens":3}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me check."}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"is\"}"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":2}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        r.unwrap();
        let resp = done(&events);
        assert_eq!(resp.response_id.as_deref(), Some("msg_1"));
        assert_eq!(resp.reasoning, "hmm");
        assert_eq!(resp.text, "Let me check.");
        assert_eq!(
            resp.tool_calls,
            [ToolCall {
                id: "toolu_01".into(),
                name: "get_weather".into(),
                arguments: "{\"city\": \"Paris\"}".into()
            }]
        );
        assert_eq!(resp.finish_reason.as_deref(), Some("tool_use"));
        let u = resp.usage.unwrap();
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_tokens),
            (12, 40, 3)
        );
    }

    #[test]
    fn a_tool_use_with_its_whole_input_at_start() {
        let (events, r) = run(&[
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"x","input":{"a":1}}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#,
            ),
        ]);
        r.unwrap();
        assert_eq!(done(&events).tool_calls[0].arguments, r#"{"a":1}"#);
    }

    #[test]
    fn errors_and_cuts() {
        let (_, r) = run(&[(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )]);
        let e = r.unwrap_err();
        assert_eq!(e.kind, ModelErrorKind::ProviderError);
        assert!(e.message.contains("Overloaded"));
        let (_, r) = run(&[(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}"#,
        )]);
        assert_eq!(r.unwrap_err().kind, ModelErrorKind::StreamCut);
        let (_, r) = run(&[("x", "{")]);
        assert_eq!(r.unwrap_err().kind, ModelErrorKind::MalformedStream);
    }

    #[test]
    fn conversation_becomes_alternating_messages() {
        let msgs = vec![
            ChatMessage::System("sys".into()),
            ChatMessage::User("u".into()),
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![
                    ToolCall {
                        id: "a".into(),
                        name: "x".into(),
                        arguments: "{\"k\":1}".into(),
                    },
                    ToolCall {
                        id: "b".into(),
                        name: "y".into(),
                        arguments: "oops".into(),
                    },
                ],
            },
            ChatMessage::Tool {
                tool_call_id: "a".into(),
                content: "A".into(),
            },
            ChatMessage::Tool {
                tool_call_id: "b".into(),
                content: "B".into(),
            },
        ];
        let tools = [ToolSpec {
            name: "x".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
        }];
        let body: Value = serde_json::from_slice(&request_body(
            "m",
            &ChatRequest::new(None, &msgs, &tools),
            None,
        ))
        .unwrap();
        assert_eq!(body["system"], "sys");
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[1]["content"][0]["input"], json!({"k":1}));
        assert_eq!(m[1]["content"][1]["input"], json!({}));
        assert_eq!(m[2]["role"], "user");
        assert_eq!(
            m[2]["content"][1],
            json!({"type":"tool_result","tool_use_id":"b","content":"B"})
        );
        assert!(body.get("top_p").is_none());
    }

    /// A PDF attachment is a document block titled with its name, with citations when the
    /// session enabled them (`enableCitations`); images stay image blocks.
    #[test]
    fn documents_are_document_blocks_with_citations_when_enabled() {
        use crate::model::conversation::HistoryBuilder;
        let mut history = HistoryBuilder::default();
        history.push(
            "user.message",
            &json!({"content": "Summarize it.", "attachments": [
                {"type": "blob", "mimeType": "application/pdf", "data": "JVBERi0=",
                 "displayName": "source.pdf"},
                {"type": "blob", "mimeType": "text/csv", "data": "YSxi", "displayName": "t.csv"}]}),
        );
        let msgs = history.finish(None);
        let mut req = ChatRequest::new(None, &msgs, &[]);
        let block = |req: &ChatRequest<'_>| {
            let body: Value = serde_json::from_slice(&request_body("m", req, None)).unwrap();
            let content = body["messages"][0]["content"].as_array().unwrap().clone();
            assert_eq!(content.len(), 2, "the prompt and the PDF only: {content:?}");
            content[1].clone()
        };
        assert_eq!(
            block(&req),
            json!({"type": "document", "title": "source.pdf",
                   "source": {"type": "base64", "media_type": "application/pdf",
                              "data": "JVBERi0="}})
        );
        req.enable_citations = true;
        assert_eq!(block(&req)["citations"], json!({"enabled": true}));
    }
}
