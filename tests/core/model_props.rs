//! Property tests of the model stream decoding: the SSE decoder, the chunk parser and the
//! tool-call accumulator give the same result for every split of the byte stream, and the
//! accumulated response is the one the stream describes, whichever way the server spreads
//! its tool calls (whole, in fragments, all at `index: 0`, without `index` or `id`).

use agentwire::model::{
    ModelEvent, ModelResponse, ResponseDecoder, SseDecoder, SseError, SseEvent, SseLimits,
    StreamDialect, ToolCall,
};
use proptest::prelude::*;
use serde_json::json;

/// Decodes `stream` cut at `cuts` (sorted offsets), with `limit`.
fn sse_split(stream: &[u8], cuts: &[usize], limit: usize) -> (Vec<SseEvent>, Option<SseError>) {
    let mut d = SseDecoder::new(SseLimits {
        max_event_bytes: limit,
    });
    let mut out = Vec::new();
    let mut start = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(stream.len());
    for end in bounds {
        d.push(&stream[start..end]);
        start = end;
        loop {
            match d.next_event() {
                Ok(Some(e)) => out.push(e),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    match d.finish() {
        Ok(Some(e)) => out.push(e),
        Ok(None) => {}
        Err(e) => return (out, Some(e)),
    }
    (out, None)
}

/// SSE-ish bytes: field lines, comments, blank lines, odd bytes, all line endings.
fn sse_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"event: x".to_vec()),
        Just(b"id: 1".to_vec()),
        Just(b"retry: 10".to_vec()),
        Just(b": c".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        prop::collection::vec(any::<u8>(), 0..6),
        "[a-z{}\":, ]{0,12}".prop_map(String::into_bytes),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn sse_decoding_does_not_depend_on_the_split(
        stream in sse_bytes(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        limit in prop_oneof![Just(usize::MAX), 1usize..64],
    ) {
        let whole = sse_split(&stream, &[], limit);
        prop_assert_eq!(&sse_split(&stream, &cuts, limit), &whole);
        let bytewise: Vec<usize> = (0..stream.len()).collect();
        prop_assert_eq!(&sse_split(&stream, &bytewise, limit), &whole);
    }
}

/// How a server spreads its tool calls over chunks.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// id + name first (empty arguments), then argument fragments, each at its own index.
    Spread,
    /// every call whole in one delta.
    Whole,
    /// like Spread, but every call at `index: 0` (told apart by id).
    IndexZero,
    /// like Spread, but no `id` anywhere (ids are synthesised).
    NoIds,
    /// all calls whole in one chunk, without `index` or `id` (told apart by position).
    Positional,
}

#[derive(Clone, Debug)]
struct Scenario {
    reasoning: Vec<String>,
    text: Vec<String>,
    calls: Vec<(String, Vec<String>)>,
    style: Style,
    ending: &'static str,
    keep_alives: bool,
    done_marker: bool,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let frag = "[a-zA-Z0-9 \"\\\\é{}:,\n]{0,6}";
    (
        prop::collection::vec(frag, 0..3),
        prop::collection::vec(frag, 0..4),
        prop::collection::vec(("[a-z_]{1,8}", prop::collection::vec(frag, 1..4)), 0..4),
        prop_oneof![
            Just(Style::Spread),
            Just(Style::Whole),
            Just(Style::IndexZero),
            Just(Style::NoIds),
            Just(Style::Positional)
        ],
        prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(reasoning, text, calls, style, ending, keep_alives, done_marker)| Scenario {
                reasoning,
                text,
                calls,
                style,
                ending,
                keep_alives,
                done_marker,
            },
        )
}

impl Scenario {
    fn chunk(&self, delta: serde_json::Value, finish: Option<&str>) -> String {
        let c = json!({"id": "chatcmpl-p", "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        let e = self.ending;
        let ka = if self.keep_alives {
            format!(": ping{e}{e}")
        } else {
            String::new()
        };
        format!("{ka}data: {c}{e}{e}")
    }

    fn render(&self) -> Vec<u8> {
        let mut out = String::new();
        out.push_str(&self.chunk(json!({"role": "assistant", "content": ""}), None));
        for r in &self.reasoning {
            out.push_str(&self.chunk(json!({"reasoning_content": r}), None));
        }
        for t in &self.text {
            out.push_str(&self.chunk(json!({"content": t}), None));
        }
        match self.style {
            Style::Positional => {
                let calls: Vec<_> = self
                    .calls
                    .iter()
                    .map(|(name, args)| json!({"type": "function", "function": {"name": name, "arguments": args.concat()}}))
                    .collect();
                if !calls.is_empty() {
                    out.push_str(&self.chunk(json!({"tool_calls": calls}), None));
                }
            }
            Style::Whole => {
                for (i, (name, args)) in self.calls.iter().enumerate() {
                    out.push_str(&self.chunk(
                        json!({"tool_calls": [{"index": i, "id": format!("id{i}"), "type": "function",
                                               "function": {"name": name, "arguments": args.concat()}}]}),
                        None,
                    ));
                }
            }
            Style::Spread | Style::IndexZero | Style::NoIds => {
                for (i, (name, args)) in self.calls.iter().enumerate() {
                    let index = if matches!(self.style, Style::IndexZero) {
                        0
                    } else {
                        i
                    };
                    let mut first = json!({"index": index, "type": "function",
                                           "function": {"name": name, "arguments": ""}});
                    if !matches!(self.style, Style::NoIds) {
                        first["id"] = json!(format!("id{i}"));
                    }
                    out.push_str(&self.chunk(json!({"tool_calls": [first]}), None));
                    for a in args {
                        out.push_str(&self.chunk(
                            json!({"tool_calls": [{"index": index, "function": {"arguments": a}}]}),
                            None,
                        ));
                    }
                }
            }
        }
        out.push_str(&self.chunk(json!({}), Some("stop")));
        let e = self.ending;
        out.push_str(&format!(
            "data: {}{e}{e}",
            json!({"id": "chatcmpl-p", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
        ));
        if self.done_marker {
            out.push_str(&format!("data: [DONE]{e}{e}"));
        }
        out.into_bytes()
    }

    fn expected_calls(&self) -> Vec<ToolCall> {
        self.calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| ToolCall {
                id: match self.style {
                    Style::NoIds | Style::Positional => format!("call_{}", i + 1),
                    _ => format!("id{i}"),
                },
                name: name.clone(),
                arguments: args.concat(),
            })
            .collect()
    }
}

fn decode(stream: &[u8], cuts: &[usize]) -> (Vec<ModelEvent>, Result<(), String>) {
    let mut d = ResponseDecoder::new(StreamDialect::OpenAiChat, SseLimits::default(), "call_");
    let mut out = Vec::new();
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(stream.len());
    let mut start = 0;
    for end in bounds {
        if let Err(e) = d.push(&stream[start..end], &mut out) {
            return (out, Err(e.message));
        }
        start = end;
    }
    let r = d.finish(&mut out).map_err(|e| e.message);
    (out, r)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_response_does_not_depend_on_the_split_and_matches_the_stream(
        s in scenario(),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let stream = s.render();
        let whole = decode(&stream, &[]);
        prop_assert_eq!(&whole.1, &Ok(()));
        prop_assert_eq!(&decode(&stream, &cuts), &whole);
        let bytewise: Vec<usize> = (0..stream.len()).collect();
        prop_assert_eq!(&decode(&stream, &bytewise), &whole);
        let Some(ModelEvent::Done(response)) = whole.0.last() else {
            return Err(TestCaseError::fail(format!("no Done: {:?}", whole.0)));
        };
        let expected = ModelResponse {
            response_id: Some("chatcmpl-p".into()),
            model: None,
            text: s.text.concat(),
            reasoning: s.reasoning.concat(),
            tool_calls: s.expected_calls(),
            finish_reason: Some("stop".into()),
            usage: response.usage,
        };
        prop_assert_eq!(response, &expected);
        prop_assert_eq!(response.usage.map(|u| (u.input_tokens, u.output_tokens)), Some((3, 4)));
        // The deltas add up to the response.
        let mut text = String::new();
        let mut args = vec![String::new(); expected.tool_calls.len()];
        for e in &whole.0 {
            match e {
                ModelEvent::TextDelta(t) => text.push_str(t),
                ModelEvent::ToolCallDelta { index, arguments_delta, .. } => args[*index].push_str(arguments_delta),
                _ => {}
            }
        }
        prop_assert_eq!(text, expected.text.clone());
        let joined: Vec<String> = expected.tool_calls.iter().map(|c| c.arguments.clone()).collect();
        prop_assert_eq!(args, joined);
    }
}
