//! The OpenAI Responses API (`provider.wireApi: "responses"`): the request body of
//! `POST {baseUrl}/responses`, and a lenient parser for its stream events.
//!
//! The request is stateless (`store: false`, no `previous_response_id`): every call sends the
//! whole conversation as `input` items. The system prompt is `instructions`; a user message is
//! `{role: "user", content}`; an assistant answer is an output `message` item
//! (`output_text` content) followed by one `function_call` item per tool call, its
//! `arguments` the text the conversation holds; a tool result is a `function_call_output`
//! item. Function tools are flat (`{type: "function", name, description, parameters}`) and
//! sent with `strict: false`, since the API otherwise rewrites every schema into strict
//! mode (all fields required).
//!
//! The stream is a sequence of typed events (the data's `type`, else the SSE `event:` name):
//! `response.created`; per output item `response.output_item.added`, its deltas
//! (`response.output_text.delta`, `response.refusal.delta`,
//! `response.reasoning_summary_text.delta`, `response.reasoning_text.delta`,
//! `response.function_call_arguments.delta`), their `.done` events and
//! `response.output_item.done`; then `response.completed` (with `usage`),
//! `response.incomplete` or `response.failed`; or an `error` event. Unknown events and fields
//! are ignored and fields of an unexpected type read as absent. The `.done` events, the item
//! done events and the final response's `output` repeat what the deltas carried: whatever
//! they hold beyond it (a server that sends no deltas, or fewer) is taken from them, so each
//! piece is reported once. A complete non-streamed response body (`object: "response"`) is
//! accepted too.

use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use super::accumulate::{ResponseAccumulator, ToolCallFragment};
use super::conversation::{ChatMessage, UserPart};
use super::error::{ModelError, ModelErrorKind};
use super::event::{ModelEvent, Usage};
use super::lenient::{LArgs, LObj, LSeq, LStr, LU64};
use super::openai::{excerpt, provider_error};
use super::request::{ChatRequest, ToolSpec};

/// The conversation as `input` items (system messages go to `instructions`).
struct Input<'a>(&'a [ChatMessage]);

#[derive(Serialize)]
struct UserItem<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct OutputMessage<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: [OutputText<'a>; 1],
}

#[derive(Serialize)]
struct OutputText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    call_id: &'a str,
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct FunctionCallOutput<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    call_id: &'a str,
    output: &'a str,
}

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for m in self.0 {
            match m {
                ChatMessage::System(_) => {}
                ChatMessage::User(content) => seq.serialize_element(&UserItem {
                    role: "user",
                    content,
                })?,
                // Text and images: `input_text` / `input_image` (a data URL) parts.
                ChatMessage::UserParts(parts) => {
                    let content: Vec<serde_json::Value> = parts
                        .iter()
                        .map(|p| match p {
                            UserPart::Text(text) => {
                                serde_json::json!({"type": "input_text", "text": text})
                            }
                            UserPart::Image { media_type, data } => serde_json::json!({
                                "type": "input_image",
                                "image_url": format!("data:{media_type};base64,{data}")
                            }),
                            UserPart::Document {
                                media_type,
                                data,
                                title,
                            } => serde_json::json!({
                                "type": "input_file",
                                "filename": title,
                                "file_data": format!("data:{media_type};base64,{data}")
                            }),
                        })
                        .collect();
                    seq.serialize_element(&serde_json::json!({"role": "user", "content": content}))?
                }
                ChatMessage::Assistant {
                    content,
                    tool_calls,
                } => {
                    if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                        seq.serialize_element(&OutputMessage {
                            kind: "message",
                            role: "assistant",
                            content: [OutputText {
                                kind: "output_text",
                                text,
                            }],
                        })?;
                    }
                    for call in tool_calls {
                        seq.serialize_element(&FunctionCall {
                            kind: "function_call",
                            call_id: &call.id,
                            name: &call.name,
                            arguments: &call.arguments,
                        })?;
                    }
                }
                ChatMessage::Tool {
                    tool_call_id,
                    content,
                } => seq.serialize_element(&FunctionCallOutput {
                    kind: "function_call_output",
                    call_id: tool_call_id,
                    output: content,
                })?,
            }
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
    strict: bool,
}

#[derive(Serialize)]
struct Reasoning<'a> {
    effort: &'a str,
}

/// The Responses request body.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<String>,
    input: Input<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u64>,
    stream: bool,
    store: bool,
}

/// The JSON body of a Responses request for `model` (streaming unless `req.stream` is off).
///
/// `temperature` and `top_p` are sent as `req.sampling` says, except with a
/// `reasoning_effort`: only reasoning models take one, and they refuse sampling parameters.
/// The API has no frequency or presence penalty.
pub(crate) fn request_body(model: &str, req: &ChatRequest<'_>) -> Vec<u8> {
    let system: Vec<&str> = req
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::System(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    let reasoning = req.reasoning_effort.map(|effort| Reasoning { effort });
    let sampling = reasoning.is_none();
    let body = Body {
        model,
        instructions: (!system.is_empty()).then(|| system.join("\n\n")),
        input: Input(req.messages),
        tools: wire_tools(req.tools),
        temperature: req.sampling.temperature.filter(|_| sampling),
        top_p: req.sampling.top_p.filter(|_| sampling),
        reasoning,
        max_output_tokens: req.max_output_tokens,
        stream: req.stream,
        store: false,
    };
    serde_json::to_vec(&body).expect("serialising plain data cannot fail")
}

fn wire_tools(tools: &[ToolSpec]) -> Vec<WireTool<'_>> {
    tools
        .iter()
        .map(|t| WireTool {
            kind: "function",
            name: &t.name,
            description: &t.description,
            parameters: &t.parameters,
            strict: false,
        })
        .collect()
}

/// One stream event (or, without a `type`, possibly a whole non-streamed response).
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: LStr<'a>,
    #[serde(borrow)]
    delta: LStr<'a>,
    /// The whole text of an `output_text` / reasoning part (`.done` events).
    #[serde(borrow)]
    text: LStr<'a>,
    /// The whole refusal (`response.refusal.done`).
    #[serde(borrow)]
    refusal: LStr<'a>,
    /// The whole arguments (`response.function_call_arguments.done`).
    #[serde(borrow)]
    arguments: LArgs<'a>,
    #[serde(borrow)]
    name: LStr<'a>,
    output_index: LU64,
    content_index: LU64,
    summary_index: LU64,
    #[serde(borrow)]
    item_id: LStr<'a>,
    #[serde(borrow)]
    item: LObj<Box<Item<'a>>>,
    #[serde(borrow)]
    response: LObj<Box<Response<'a>>>,
    /// `error` events: `{type: "error", code, message}`.
    #[serde(borrow)]
    message: LStr<'a>,
    #[serde(borrow)]
    code: LStr<'a>,
    /// `error` events of another shape, or an error body.
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow)]
    object: LStr<'a>,
}

/// A response object (`response.*` events carry one; a non-streamed body is one).
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct Response<'a> {
    #[serde(borrow)]
    id: LStr<'a>,
    #[serde(borrow)]
    model: LStr<'a>,
    #[serde(borrow)]
    status: LStr<'a>,
    #[serde(borrow)]
    output: LSeq<LObj<Item<'a>>>,
    usage: LObj<WireUsage>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow)]
    incomplete_details: LObj<Incomplete<'a>>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct Incomplete<'a> {
    #[serde(borrow)]
    reason: LStr<'a>,
}

/// An output item: a `message`, a `reasoning` item or a `function_call`.
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct Item<'a> {
    #[serde(rename = "type", borrow)]
    kind: LStr<'a>,
    #[serde(borrow)]
    id: LStr<'a>,
    #[serde(borrow)]
    call_id: LStr<'a>,
    #[serde(borrow)]
    name: LStr<'a>,
    #[serde(borrow)]
    arguments: LArgs<'a>,
    #[serde(borrow)]
    content: LSeq<LObj<Part<'a>>>,
    #[serde(borrow)]
    summary: LSeq<LObj<Part<'a>>>,
}

/// A content part: `output_text {text}`, `refusal {refusal}`, `summary_text {text}`,
/// `reasoning_text {text}`.
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct Part<'a> {
    #[serde(rename = "type", borrow)]
    kind: LStr<'a>,
    #[serde(borrow)]
    text: LStr<'a>,
    #[serde(borrow)]
    refusal: LStr<'a>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct WireUsage {
    input_tokens: LU64,
    output_tokens: LU64,
    /// Chat Completions names, which some gateways use here too.
    prompt_tokens: LU64,
    completion_tokens: LU64,
    input_tokens_details: LObj<Details>,
    output_tokens_details: LObj<Details>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct Details {
    cached_tokens: LU64,
    reasoning_tokens: LU64,
}

impl WireUsage {
    /// The usage, or `None` when it counts nothing (`usage: {}` or `null` members).
    fn usage(&self) -> Option<Usage> {
        let input = self.input_tokens.0.or(self.prompt_tokens.0);
        let output = self.output_tokens.0.or(self.completion_tokens.0);
        if input.is_none() && output.is_none() {
            return None;
        }
        let detail = |d: &LObj<Details>, f: fn(&Details) -> LU64| {
            d.0.as_ref().and_then(|d| f(d).0).unwrap_or(0)
        };
        Some(Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            cache_read_tokens: detail(&self.input_tokens_details, |d| d.cached_tokens),
            cache_write_tokens: 0,
            reasoning_tokens: detail(&self.output_tokens_details, |d| d.reasoning_tokens),
        })
    }
}

/// Output items a stream may open; past this, new items are read as the last one (only a
/// hostile stream has that many).
const MAX_ITEMS: usize = 256;

/// Content parts remembered per item; past this, a part's `.done` event is read as new.
const MAX_PARTS: usize = 64;

/// Which kind of content part streamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PartKind {
    /// `output_text` or `refusal`.
    Text,
    /// A reasoning summary part.
    Summary,
    /// Raw reasoning text.
    Reasoning,
}

/// What the stream reported of one output item so far.
#[derive(Debug, Default)]
struct ItemState {
    /// Its `output_index`.
    index: Option<u64>,
    /// Its `id` (`msg_…`, `rs_…`, `fc_…`).
    item_id: Option<String>,
    /// The text (output text and refusal) reported.
    text: String,
    /// The content parts that reported something.
    parts: Vec<(PartKind, u64)>,
    /// Whether a tool call was opened for it.
    call: bool,
    /// The call's arguments reported.
    arguments: String,
}

/// The output items seen, so that `.done` events and the final `output` add only what the
/// deltas did not carry.
#[derive(Debug, Default)]
struct Streamed {
    items: Vec<ItemState>,
    /// The reasoning part reported last (item slot, kind, index): another part is set apart
    /// from it by a blank line.
    reasoning_part: Option<(usize, PartKind, u64)>,
}

impl Streamed {
    /// The slot of the item an event names (by `item_id`, else `output_index`), opened if new.
    fn slot(&mut self, index: Option<u64>, item_id: Option<&str>) -> usize {
        let item_id = item_id.filter(|s| !s.is_empty());
        if let Some(id) = item_id {
            if let Some(slot) = self
                .items
                .iter()
                .position(|s| s.item_id.as_deref() == Some(id))
            {
                return slot;
            }
        }
        let found = match (index, item_id) {
            (Some(i), _) => self
                .items
                .iter()
                .position(|s| s.index == Some(i) && (s.item_id.is_none() || item_id.is_none())),
            (None, None) => self.items.len().checked_sub(1),
            (None, Some(_)) => None,
        };
        match found {
            Some(slot) => {
                let state = &mut self.items[slot];
                if state.item_id.is_none() {
                    state.item_id = item_id.map(str::to_owned);
                }
                slot
            }
            None if self.items.len() >= MAX_ITEMS => self.items.len() - 1,
            None => {
                self.items.push(ItemState {
                    index,
                    item_id: item_id.map(str::to_owned),
                    ..ItemState::default()
                });
                self.items.len() - 1
            }
        }
    }

    fn mark(&mut self, slot: usize, kind: PartKind, part: u64) {
        let parts = &mut self.items[slot].parts;
        if parts.len() < MAX_PARTS && !parts.contains(&(kind, part)) {
            parts.push((kind, part));
        }
    }

    fn has_part(&self, slot: usize, kind: PartKind, part: u64) -> bool {
        self.items[slot].parts.contains(&(kind, part))
    }

    /// A text delta of part `part`.
    fn text(
        &mut self,
        acc: &mut ResponseAccumulator,
        slot: usize,
        part: u64,
        delta: &str,
        out: &mut Vec<ModelEvent>,
    ) {
        if delta.is_empty() {
            return;
        }
        self.mark(slot, PartKind::Text, part);
        self.items[slot].text.push_str(delta);
        acc.text(delta, out);
    }

    /// The item's whole text: what the deltas did not carry of it.
    fn whole_text(
        &mut self,
        acc: &mut ResponseAccumulator,
        slot: usize,
        whole: &str,
        out: &mut Vec<ModelEvent>,
    ) {
        let state = &mut self.items[slot];
        if let Some(rest) = whole.strip_prefix(state.text.as_str()) {
            if !rest.is_empty() {
                state.text.push_str(rest);
                acc.text(rest, out);
            }
        }
    }

    /// A reasoning delta of part `(kind, part)`.
    fn reasoning(
        &mut self,
        acc: &mut ResponseAccumulator,
        slot: usize,
        kind: PartKind,
        part: u64,
        delta: &str,
        out: &mut Vec<ModelEvent>,
    ) {
        if delta.is_empty() {
            return;
        }
        let key = (slot, kind, part);
        if self.reasoning_part != Some(key) {
            if self.reasoning_part.is_some() {
                acc.reasoning("\n\n", out);
            }
            self.reasoning_part = Some(key);
        }
        self.mark(slot, kind, part);
        acc.reasoning(delta, out);
    }

    /// A function call's id and name (opening it the first time), and its whole arguments
    /// when known: what the deltas did not carry of them.
    fn call(
        &mut self,
        acc: &mut ResponseAccumulator,
        slot: usize,
        id: Option<&str>,
        name: Option<&str>,
        whole_arguments: Option<&str>,
        out: &mut Vec<ModelEvent>,
    ) {
        let state = &mut self.items[slot];
        let key = Some(slot as u64);
        // Once open, the call is found by its slot (an id would open another).
        let id = id.filter(|s| !s.is_empty() && !state.call);
        let name = name.filter(|s| !s.is_empty());
        if id.is_some() || name.is_some() {
            state.call = true;
            acc.tools.push(
                0,
                ToolCallFragment {
                    index: key,
                    id,
                    name,
                    arguments: None,
                },
                out,
            );
        }
        if let Some(rest) = whole_arguments.and_then(|a| a.strip_prefix(state.arguments.as_str())) {
            if !rest.is_empty() {
                state.call = true;
                state.arguments.push_str(rest);
                acc.tools.push(
                    0,
                    ToolCallFragment {
                        index: key,
                        arguments: Some(rest),
                        ..ToolCallFragment::default()
                    },
                    out,
                );
            }
        }
    }

    /// A fragment of a function call's arguments.
    fn arguments(
        &mut self,
        acc: &mut ResponseAccumulator,
        slot: usize,
        delta: &str,
        out: &mut Vec<ModelEvent>,
    ) {
        if delta.is_empty() {
            return;
        }
        let state = &mut self.items[slot];
        state.call = true;
        state.arguments.push_str(delta);
        acc.tools.push(
            0,
            ToolCallFragment {
                index: Some(slot as u64),
                arguments: Some(delta),
                ..ToolCallFragment::default()
            },
            out,
        );
    }

    /// A whole output item (`output_item.added` / `.done`, a final `output` entry): what the
    /// stream did not report of it yet.
    fn item(
        &mut self,
        acc: &mut ResponseAccumulator,
        slot: usize,
        item: &Item<'_>,
        out: &mut Vec<ModelEvent>,
    ) {
        let parts = || item.content.0.iter().filter_map(|p| p.0.as_ref());
        match item.kind.get() {
            Some("function_call") => {
                let id = item.call_id.get().or(item.id.get());
                let arguments = item.arguments.0.as_deref();
                self.call(acc, slot, id, item.name.get(), arguments, out);
            }
            Some("message") => {
                let whole: String = parts()
                    .filter_map(|p| match p.kind.get() {
                        Some("refusal") => p.refusal.get(),
                        _ => p.text.get(),
                    })
                    .collect();
                self.whole_text(acc, slot, &whole, out);
            }
            Some("reasoning") => {
                // The parts of the kind that streamed (else the summary, else the text) that
                // no delta carried.
                let summary = part_texts(&item.summary);
                let content = part_texts(&item.content);
                let streamed = |kind| self.items[slot].parts.iter().any(|(k, _)| *k == kind);
                let kind = if streamed(PartKind::Summary) {
                    PartKind::Summary
                } else if streamed(PartKind::Reasoning) || summary.is_empty() {
                    PartKind::Reasoning
                } else {
                    PartKind::Summary
                };
                let texts = if kind == PartKind::Summary {
                    summary
                } else {
                    content
                };
                for (part, text) in texts {
                    if !self.has_part(slot, kind, part) {
                        self.reasoning(acc, slot, kind, part, text, out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The non-empty texts of `parts`, with their positions.
fn part_texts<'p>(parts: &'p LSeq<LObj<Part<'_>>>) -> Vec<(u64, &'p str)> {
    parts
        .0
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i as u64, p.0.as_ref()?.text.get()?)))
        .filter(|(_, text)| !text.is_empty())
        .collect()
}

/// Maps one Responses stream onto [`ModelEvent`]s.
#[derive(Debug)]
pub struct ResponsesStream {
    acc: Option<ResponseAccumulator>,
    streamed: Streamed,
}

impl ResponsesStream {
    /// A parser for one response; see [`super::openai::OpenAiStream::new`].
    pub fn new(id_prefix: &str) -> Self {
        ResponsesStream {
            acc: Some(ResponseAccumulator::new(id_prefix)),
            streamed: Streamed::default(),
        }
    }

    /// Whether the response is complete (`response.completed` or `response.incomplete`
    /// seen).
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
        if trimmed == "[DONE]" {
            // Some gateways end the stream so; it is complete only after `response.completed`.
            return self.on_end(out);
        }
        let mut ev: Event<'_> = serde_json::from_str(trimmed).map_err(|e| {
            ModelError::new(
                ModelErrorKind::MalformedStream,
                format!(
                    "a stream event is not valid JSON ({e}): {}",
                    excerpt(trimmed)
                ),
            )
        })?;
        let streamed = &mut self.streamed;
        let kind = ev.kind.get().or(event_name).unwrap_or("");
        let index = ev.output_index.0;
        let item_id = ev.item_id.get();
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                if let Some(r) = ev.response.0.as_deref() {
                    acc.identify(r.id.get(), r.model.get());
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                if let Some(item) = ev.item.0.as_deref() {
                    let slot = streamed.slot(index, item.id.get());
                    streamed.item(acc, slot, item, out);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let slot = streamed.slot(index, item_id);
                let part = ev.content_index.0.unwrap_or(0);
                streamed.text(acc, slot, part, ev.delta.get().unwrap_or(""), out);
            }
            "response.output_text.done" | "response.refusal.done" => {
                let slot = streamed.slot(index, item_id);
                let part = ev.content_index.0.unwrap_or(0);
                if !streamed.has_part(slot, PartKind::Text, part) {
                    let text = ev.text.get().or(ev.refusal.get()).unwrap_or("");
                    streamed.text(acc, slot, part, text, out);
                }
            }
            "response.reasoning_summary_text.delta"
            | "response.reasoning_text.delta"
            | "response.reasoning_summary_text.done"
            | "response.reasoning_text.done" => {
                let slot = streamed.slot(index, item_id);
                let (part_kind, part) = if kind.starts_with("response.reasoning_summary") {
                    (PartKind::Summary, ev.summary_index.0.unwrap_or(0))
                } else {
                    (PartKind::Reasoning, ev.content_index.0.unwrap_or(0))
                };
                let text = if kind.ends_with(".delta") {
                    ev.delta.get()
                } else if streamed.has_part(slot, part_kind, part) {
                    None
                } else {
                    ev.text.get()
                };
                if let Some(text) = text {
                    streamed.reasoning(acc, slot, part_kind, part, text, out);
                }
            }
            "response.function_call_arguments.delta" => {
                let slot = streamed.slot(index, item_id);
                streamed.arguments(acc, slot, ev.delta.get().unwrap_or(""), out);
            }
            "response.function_call_arguments.done" => {
                let slot = streamed.slot(index, item_id);
                let arguments = ev.arguments.0.as_deref();
                streamed.call(acc, slot, None, ev.name.get(), arguments, out);
            }
            "response.completed"
            | "response.incomplete"
            | "response.failed"
            | "response.cancelled" => {
                let response = ev
                    .response
                    .0
                    .take()
                    .or_else(|| whole_response(trimmed, &ev));
                return self.finish(kind, response.as_deref(), out);
            }
            "error" => return Err(error_event(&ev)),
            _ if ev.kind.get().is_none() => {
                // No type: an error body, or a whole non-streamed response.
                if let Some(error) = ev.error {
                    return Err(provider_error(error.get()));
                }
                if let Some(response) = whole_response(trimmed, &ev) {
                    return self.finish("", Some(&response), out);
                }
            }
            _ => {} // content_part, annotation, keep-alive and future events
        }
        Ok(())
    }

    /// The end of the response: the final output items, usage and [`ModelEvent::Done`], or
    /// the failure it reports. `kind` is the event type (empty for a non-streamed body).
    fn finish(
        &mut self,
        kind: &str,
        response: Option<&Response<'_>>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        let Some(acc) = self.acc.as_mut() else {
            return Ok(());
        };
        let status = match kind {
            "response.completed" => "completed",
            "response.incomplete" => "incomplete",
            "response.failed" => "failed",
            "response.cancelled" => "cancelled",
            _ => response.and_then(|r| r.status.get()).unwrap_or("completed"),
        };
        match status {
            "failed" => {
                return Err(match response.and_then(|r| r.error) {
                    Some(error) => provider_error(error.get()),
                    None => ModelError::new(
                        ModelErrorKind::ProviderError,
                        "the model endpoint reported that the response failed",
                    ),
                })
            }
            "cancelled" => {
                return Err(ModelError::new(
                    ModelErrorKind::ProviderError,
                    "the model endpoint cancelled the response",
                ))
            }
            _ => {}
        }
        let mut reason = status;
        if let Some(r) = response {
            acc.identify(r.id.get(), r.model.get());
            for (position, item) in r.output.0.iter().enumerate() {
                if let Some(item) = item.0.as_ref() {
                    let slot = self.streamed.slot(Some(position as u64), item.id.get());
                    self.streamed.item(acc, slot, item, out);
                }
            }
            if let Some(usage) = r.usage.0.as_ref().and_then(WireUsage::usage) {
                acc.usage(usage, out);
            }
            if status == "incomplete" {
                if let Some(why) = r.incomplete_details.0.as_ref().and_then(|d| d.reason.get()) {
                    reason = why;
                }
            }
        }
        acc.finish_reason(reason);
        let acc = self.acc.take().expect("checked above");
        let response = acc.finish();
        if status == "incomplete" && response.text.is_empty() && !response.has_tool_calls() {
            return Err(ModelError::new(
                ModelErrorKind::ProviderError,
                format!(
                    "the model stopped before answering (the response is incomplete: {reason})"
                ),
            ));
        }
        out.push(ModelEvent::Done(response));
        Ok(())
    }

    /// The end of the body: complete only after `response.completed` (or `.incomplete`).
    pub fn on_end(&mut self, _out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if self.acc.take().is_none() {
            return Ok(());
        }
        Err(ModelError::new(
            ModelErrorKind::StreamCut,
            "the response stream ended before the model finished its answer",
        ))
    }
}

/// The data as a response object, when it is one (`object: "response"`, or a `status` or
/// `output` of its own).
fn whole_response<'a>(text: &'a str, ev: &Event<'_>) -> Option<Box<Response<'a>>> {
    if ev.kind.get().is_some() && ev.object.get() != Some("response") {
        return None;
    }
    let response: Response<'a> = serde_json::from_str(text).ok()?;
    let is_response = ev.object.get() == Some("response")
        || response.status.get().is_some()
        || !response.output.0.is_empty();
    is_response.then(|| Box::new(response))
}

/// The error an `error` event reports: `{code, message}`, or an `error` member.
fn error_event(ev: &Event<'_>) -> ModelError {
    if let Some(error) = ev.error {
        return provider_error(error.get());
    }
    let message = ev.message.get().unwrap_or("(no message)");
    let message = match ev.code.get() {
        Some(code) => format!("{message} ({code})"),
        None => message.to_owned(),
    };
    ModelError::new(
        ModelErrorKind::ProviderError,
        format!("the model endpoint reported an error: {message}"),
    )
}

#[cfg(test)]
mod tests;
