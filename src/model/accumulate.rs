//! Accumulating a streamed response: text, reasoning, and tool calls from their deltas.
//!
//! Tool-call deltas are matched to calls leniently, because servers differ:
//! * a delta with an `id` continues the call with that id, or opens a new call (so calls
//!   that all carry `index: 0` but different ids stay apart);
//! * a delta without an `id` continues the call last opened at its `index` (or, without an
//!   `index`, at its position in the chunk's `tool_calls` array);
//! * a call without any `id` gets a synthesised one, `<prefix><n>`;
//! * a whole call in one delta and a call spread over many give the same result;
//! * a delta carrying nothing (no id, name or arguments) opens nothing.

use super::event::{ModelEvent, ModelResponse, ToolCall, Usage};

/// One raw tool-call delta as a dialect parser read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolCallFragment<'a> {
    /// The call's `index` in the provider's numbering, if sent.
    pub index: Option<u64>,
    /// The call id, if sent (empty counts as absent).
    pub id: Option<&'a str>,
    /// The tool name, if sent.
    pub name: Option<&'a str>,
    /// An arguments fragment, if sent.
    pub arguments: Option<&'a str>,
}

/// Matches tool-call fragments to calls and concatenates their arguments.
#[derive(Clone, Debug, Default)]
pub struct ToolCallAccumulator {
    id_prefix: String,
    calls: Vec<ToolCall>,
    /// Provider key (index or position) → the call last opened under it.
    by_key: Vec<(u64, usize)>,
}

impl ToolCallAccumulator {
    /// An empty accumulator; calls without an id are named `<id_prefix><n>` (n from 1).
    pub fn new(id_prefix: impl Into<String>) -> Self {
        ToolCallAccumulator {
            id_prefix: id_prefix.into(),
            calls: Vec::new(),
            by_key: Vec::new(),
        }
    }

    /// Feeds one fragment found at `position` in its chunk; appends the resulting events.
    pub fn push(
        &mut self,
        position: usize,
        fragment: ToolCallFragment<'_>,
        out: &mut Vec<ModelEvent>,
    ) {
        let key = fragment.index.unwrap_or(position as u64);
        let id = fragment.id.filter(|s| !s.is_empty());
        let name = fragment.name.filter(|s| !s.is_empty());
        let arguments = fragment.arguments.filter(|s| !s.is_empty());
        let slot = match id {
            Some(id) => match self.calls.iter().rposition(|c| c.id == id) {
                Some(slot) => slot,
                None => self.open(key, id.to_owned()),
            },
            None => match self.by_key.iter().find(|(k, _)| *k == key) {
                Some(&(_, slot)) => slot,
                None if name.is_none() && arguments.is_none() => return,
                None => {
                    let id = format!("{}{}", self.id_prefix, self.calls.len() + 1);
                    self.open(key, id)
                }
            },
        };
        let call = &mut self.calls[slot];
        if let Some(name) = name {
            if call.name.is_empty() {
                call.name.push_str(name);
                out.push(ModelEvent::ToolCallStart {
                    index: slot,
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
            }
        }
        if let Some(arguments) = arguments {
            call.arguments.push_str(arguments);
            out.push(ModelEvent::ToolCallDelta {
                index: slot,
                id: call.id.clone(),
                name: call.name.clone(),
                arguments_delta: arguments.to_owned(),
            });
        }
    }

    fn open(&mut self, key: u64, id: String) -> usize {
        let slot = self.calls.len();
        self.calls.push(ToolCall {
            id,
            ..ToolCall::default()
        });
        match self.by_key.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = slot,
            None => self.by_key.push((key, slot)),
        }
        slot
    }

    /// The calls so far.
    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    /// The complete calls, in the order they were opened.
    pub fn finish(self) -> Vec<ToolCall> {
        self.calls
    }
}

/// Everything a dialect parser accumulates towards the final [`ModelResponse`].
#[derive(Clone, Debug, Default)]
pub struct ResponseAccumulator {
    /// The tool calls.
    pub tools: ToolCallAccumulator,
    response: ModelResponse,
}

impl ResponseAccumulator {
    /// An empty response; see [`ToolCallAccumulator::new`] for `id_prefix`.
    pub fn new(id_prefix: impl Into<String>) -> Self {
        ResponseAccumulator {
            tools: ToolCallAccumulator::new(id_prefix),
            response: ModelResponse::default(),
        }
    }

    /// Records the response id and model the first time they are seen.
    pub fn identify(&mut self, id: Option<&str>, model: Option<&str>) {
        if self.response.response_id.is_none() {
            self.response.response_id = id.filter(|s| !s.is_empty()).map(str::to_owned);
        }
        if self.response.model.is_none() {
            self.response.model = model.filter(|s| !s.is_empty()).map(str::to_owned);
        }
    }

    /// Appends answer text (ignored when empty).
    pub fn text(&mut self, delta: &str, out: &mut Vec<ModelEvent>) {
        if !delta.is_empty() {
            self.response.text.push_str(delta);
            out.push(ModelEvent::TextDelta(delta.to_owned()));
        }
    }

    /// Appends reasoning text (ignored when empty).
    pub fn reasoning(&mut self, delta: &str, out: &mut Vec<ModelEvent>) {
        if !delta.is_empty() {
            self.response.reasoning.push_str(delta);
            out.push(ModelEvent::ReasoningDelta(delta.to_owned()));
        }
    }

    /// Records a finish reason (an empty string is no reason).
    pub fn finish_reason(&mut self, reason: &str) {
        if !reason.is_empty() {
            self.response.finish_reason = Some(reason.to_owned());
        }
    }

    /// Whether a finish reason was seen.
    pub fn has_finish_reason(&self) -> bool {
        self.response.finish_reason.is_some()
    }

    /// Records usage and reports it.
    pub fn usage(&mut self, usage: Usage, out: &mut Vec<ModelEvent>) {
        self.response.usage = Some(usage);
        out.push(ModelEvent::Usage(usage));
    }

    /// The usage recorded so far.
    pub fn current_usage(&self) -> Option<Usage> {
        self.response.usage
    }

    /// The complete response; calls that never got a name or arguments are dropped.
    pub fn finish(self) -> ModelResponse {
        let mut response = self.response;
        response.tool_calls = self
            .tools
            .finish()
            .into_iter()
            .filter(|c| !c.name.is_empty() || !c.arguments.is_empty())
            .collect();
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag<'a>(
        index: Option<u64>,
        id: Option<&'a str>,
        name: Option<&'a str>,
        args: Option<&'a str>,
    ) -> ToolCallFragment<'a> {
        ToolCallFragment {
            index,
            id,
            name,
            arguments: args,
        }
    }

    fn run(fragments: &[(usize, ToolCallFragment<'_>)]) -> (Vec<ToolCall>, Vec<ModelEvent>) {
        let mut acc = ToolCallAccumulator::new("call_");
        let mut out = Vec::new();
        for (pos, f) in fragments {
            acc.push(*pos, *f, &mut out);
        }
        (acc.finish(), out)
    }

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn spread_over_deltas_like_openai() {
        let (calls, events) = run(&[
            (
                0,
                frag(Some(0), Some("call_1"), Some("get_weather"), Some("")),
            ),
            (0, frag(Some(0), None, None, Some("{\"city\""))),
            (0, frag(Some(0), None, None, Some(":\"Paris\"}"))),
        ]);
        assert_eq!(
            calls,
            [call("call_1", "get_weather", "{\"city\":\"Paris\"}")]
        );
        assert_eq!(events.len(), 3);
        assert!(
            matches!(&events[0], ModelEvent::ToolCallStart { name, .. } if name == "get_weather")
        );
    }

    #[test]
    fn all_index_zero_with_different_ids_are_different_calls() {
        let (calls, _) = run(&[
            (0, frag(Some(0), Some("a"), Some("x"), Some("{}"))),
            (0, frag(Some(0), Some("b"), Some("y"), Some("{\"k\""))),
            (0, frag(Some(0), None, None, Some(":1}"))),
        ]);
        assert_eq!(calls, [call("a", "x", "{}"), call("b", "y", "{\"k\":1}")]);
    }

    #[test]
    fn missing_index_uses_the_position_and_missing_id_is_synthesised() {
        let (calls, _) = run(&[
            (0, frag(None, None, Some("x"), Some("{"))),
            (1, frag(None, None, Some("y"), Some("{}"))),
            (0, frag(None, None, None, Some("}"))),
        ]);
        assert_eq!(
            calls,
            [call("call_1", "x", "{}"), call("call_2", "y", "{}")]
        );
    }

    #[test]
    fn repeated_ids_continue_and_empty_fragments_open_nothing() {
        let (calls, events) = run(&[
            (0, frag(Some(0), None, None, Some(""))),
            (0, frag(Some(3), Some("k"), Some("t"), None)),
            (0, frag(Some(3), Some("k"), Some("t"), Some("{}"))),
        ]);
        assert_eq!(calls, [call("k", "t", "{}")]);
        assert_eq!(events.len(), 2, "{events:?}");
    }

    #[test]
    fn parsed_arguments() {
        assert_eq!(
            call("a", "b", "").parsed_arguments().unwrap(),
            serde_json::json!({})
        );
        assert_eq!(
            call("a", "b", "{\"x\":1}").parsed_arguments().unwrap()["x"],
            1
        );
        assert!(call("a", "b", "{").parsed_arguments().is_err());
    }
}
