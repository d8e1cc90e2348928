//! The fast chunk readers against serde_json: whatever the fast reader accepts, serde_json
//! accepts too and reads into the same struct (field by field, through `Debug`), on
//! generated chunks shaped like the dialects' — known fields with values of every type,
//! unknown fields, escapes, duplicates, odd numbers, nesting — and on mutations of them.
//! Whatever the fast reader declines goes to serde_json, so this is all it must guarantee.
//! The common chunks servers send must take the fast path (else it is pointless).

use proptest::prelude::*;

use super::anthropic::{fast_event, serde_event};
use super::openai_chunk::{fast_chunk, serde_chunk};

type S = BoxedStrategy<String>;

fn ws() -> impl Strategy<Value = &'static str> {
    prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\n\t")]
}

/// String literals: plain, escaped, with surrogates (paired and lone), control characters,
/// invalid escapes, digits.
fn string() -> S {
    let fragment = prop_oneof![
        Just("a"),
        Just(" sunny"),
        Just("é"),
        Just("\\n"),
        Just("\\\""),
        Just("\\\\"),
        Just("\\/"),
        Just("\\u00e9"),
        Just("\\u0041"),
        Just("\\ud83d\\ude00"),
        Just("\\ud800"),
        Just("\\udc00x"),
        Just("\\u12"),
        Just("\\x"),
        Just("\u{1}"),
        Just("{\\\"k\\\":1}"),
        Just("12"),
        Just(" 7 "),
        Just("+3"),
        Just("stop"),
        Just("text_delta"),
    ];
    prop::collection::vec(fragment, 0..4)
        .prop_map(|parts| format!("\"{}\"", parts.concat()))
        .boxed()
}

fn number() -> S {
    prop_oneof![
        Just("0"),
        Just("7"),
        Just("1764612300"),
        Just("-3"),
        Just("-0"),
        Just("1.5"),
        Just("2e3"),
        Just("1e400"),
        Just("007"),
        Just("123456789012345678"),
        Just("12345678901234567890"),
        Just("-"),
    ]
    .prop_map(str::to_owned)
    .boxed()
}

/// Any JSON-ish value, a few levels deep.
fn any_value() -> S {
    let leaf = prop_oneof![
        string(),
        number(),
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("nul".to_owned()),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key(), inner), 0..4).prop_map(|m| {
                let members: Vec<String> = m.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
    .boxed()
}

fn key() -> S {
    prop_oneof![
        Just("\"x\""),
        Just("\"\""),
        Just("\"con\\u0074ent\""),
        Just("\"role\""),
        Just("\"created\""),
        Just("\"logprobs\""),
    ]
    .prop_map(str::to_owned)
    .boxed()
}

/// A member `"name": value`, the value of the expected shape or any value.
fn member(name: &'static str, value: S) -> S {
    (ws(), prop_oneof![3 => value, 1 => any_value()], ws())
        .prop_map(move |(a, v, b)| format!("{a}\"{name}\"{b}:{a}{v}{b}"))
        .boxed()
}

/// An object of members drawn (with repeats) from `members`, plus unknown ones.
fn object(members: Vec<S>) -> S {
    let mut choices: Vec<S> = members;
    choices.push(
        (key(), any_value())
            .prop_map(|(k, v)| format!("{k}:{v}"))
            .boxed(),
    );
    let one = proptest::strategy::Union::new(choices);
    (prop::collection::vec(one, 0..7), ws())
        .prop_map(|(members, w)| format!("{w}{{{}}}{w}", members.join(",")))
        .boxed()
}

fn array(element: S) -> S {
    prop::collection::vec(element, 0..3)
        .prop_map(|v| format!("[{}]", v.join(",")))
        .boxed()
}

fn count() -> S {
    prop_oneof![3 => number(), 1 => string()].boxed()
}

fn text() -> S {
    prop_oneof![3 => string(), 1 => Just("null".to_owned())].boxed()
}

fn openai_chunk() -> S {
    let function = object(vec![
        member("name", text()),
        member("arguments", prop_oneof![text(), any_value()].boxed()),
    ]);
    let tool_call = object(vec![
        member("index", count()),
        member("id", text()),
        member("function", function),
    ]);
    let delta = object(vec![
        member("content", text()),
        member("reasoning_content", text()),
        member("reasoning", text()),
        member("tool_calls", array(tool_call)),
    ]);
    let choice = object(vec![
        member("index", count()),
        member("delta", delta.clone()),
        member("message", delta),
        member("finish_reason", text()),
    ]);
    let details = |field: &'static str| object(vec![member(field, count())]);
    let usage = object(vec![
        member("prompt_tokens", count()),
        member("completion_tokens", count()),
        member("input_tokens", count()),
        member("output_tokens", count()),
        member("prompt_tokens_details", details("cached_tokens")),
        member("completion_tokens_details", details("reasoning_tokens")),
    ]);
    object(vec![
        member("id", text()),
        member("model", text()),
        member("object", text()),
        member("message", text()),
        member("choices", array(choice)),
        member("usage", usage),
        member("error", Just("null".to_owned()).boxed()),
    ])
}

fn anthropic_event() -> S {
    let usage = object(vec![
        member("input_tokens", count()),
        member("output_tokens", count()),
        member("cache_read_input_tokens", count()),
        member("cache_creation_input_tokens", count()),
    ]);
    let message = object(vec![
        member("id", text()),
        member("model", text()),
        member("usage", usage.clone()),
    ]);
    let block = object(vec![
        member("type", text()),
        member("text", text()),
        member("thinking", text()),
        member("id", text()),
        member("name", text()),
        member("input", any_value()),
    ]);
    let delta = object(vec![
        member("type", text()),
        member("text", text()),
        member("thinking", text()),
        member("partial_json", text()),
        member("stop_reason", text()),
    ]);
    object(vec![
        member("type", text()),
        member("message", message),
        member("index", count()),
        member("content_block", block),
        member("delta", delta),
        member("usage", usage),
        member("error", Just("null".to_owned()).boxed()),
    ])
}

/// `text`, sometimes cut short or with a byte inserted (at a character boundary).
fn mutated(text: S) -> impl Strategy<Value = String> {
    (
        text,
        0u8..8,
        any::<usize>(),
        prop::sample::select(vec![",", "}", "]", "\"", "\\", "1", "{", ":"]),
    )
        .prop_map(|(mut t, how, at, insert)| {
            let boundaries: Vec<usize> = (0..=t.len()).filter(|&i| t.is_char_boundary(i)).collect();
            let at = boundaries[at % boundaries.len()];
            match how {
                0 => t.truncate(at),
                1 => t.insert_str(at, insert),
                _ => {}
            }
            t
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn the_fast_chunk_reader_agrees_with_serde(text in mutated(openai_chunk())) {
        if let Ok(fast) = fast_chunk(&text) {
            let slow = serde_chunk(&text);
            prop_assert!(slow.is_ok(), "serde rejects what the fast reader took: {text}\n{slow:?}");
            prop_assert_eq!(format!("{fast:?}"), format!("{:?}", slow.unwrap()), "{}", text);
        }
    }

    #[test]
    fn the_fast_event_reader_agrees_with_serde(text in mutated(anthropic_event())) {
        if let Ok(fast) = fast_event(&text) {
            let slow = serde_event(&text);
            prop_assert!(slow.is_ok(), "serde rejects what the fast reader took: {text}\n{slow:?}");
            prop_assert_eq!(format!("{fast:?}"), format!("{:?}", slow.unwrap()), "{}", text);
        }
    }
}

#[test]
fn the_chunks_servers_send_take_the_fast_path() {
    let openai = [
        // Ollama
        r#"{"id":"chatcmpl-b1f0","object":"chat.completion.chunk","created":1764612300,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":" sunny"},"finish_reason":null}]}"#,
        // vLLM, with usage requested
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi \"there\"\n","reasoning_content":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        // llama.cpp
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"é😀 \u00e9"}}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","system_fingerprint":"b1-x","object":"chat.completion.chunk"}"#,
        // tool calls, reasoning, the usage-only last chunk
        r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning":"hmm"},"finish_reason":null}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"id":"c","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0}}}"#,
    ];
    for chunk in openai {
        assert!(fast_chunk(chunk).is_ok(), "{chunk}");
        assert_eq!(
            format!("{:?}", fast_chunk(chunk).unwrap()),
            format!("{:?}", serde_chunk(chunk).unwrap())
        );
    }
    let anthropic = [
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" sunny"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        r#"{"type":"message_stop"}"#,
        r#"{"type": "ping"}"#,
    ];
    for event in anthropic {
        assert!(fast_event(event).is_ok(), "{event}");
        assert_eq!(
            format!("{:?}", fast_event(event).unwrap()),
            format!("{:?}", serde_event(event).unwrap())
        );
    }
}

#[test]
fn what_the_fast_reader_declines() {
    for text in [
        r#"{"id":"a","id":"b"}"#,
        r#"{"con\u0074ent":1}"#,
        r#"{"choices":[{"index":1.0}]}"#,
        r#"{"error":{"message":"x"}}"#,
        r#"[]"#,
        r#"{} x"#,
        r#"{"a":1e400}"#,
        r#"{"a":"\ud800"}"#,
    ] {
        assert!(fast_chunk(text).is_err(), "{text}");
    }
}

#[test]
fn the_generated_chunks_often_take_the_fast_path() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    for (name, strategy, accepts) in [
        (
            "openai",
            mutated(openai_chunk()).boxed(),
            (|t: &str| fast_chunk(t).is_ok()) as fn(&str) -> bool,
        ),
        (
            "anthropic",
            mutated(anthropic_event()).boxed(),
            |t: &str| fast_event(t).is_ok(),
        ),
    ] {
        let total = 2000;
        let fast = (0..total)
            .filter(|_| accepts(&strategy.new_tree(&mut runner).unwrap().current()))
            .count();
        // Otherwise the property tests above would compare almost nothing.
        assert!(
            fast * 10 >= total,
            "{name}: {fast} of {total} took the fast path"
        );
        eprintln!("{name}: {fast} of {total} generated chunks took the fast path");
    }
}

/// Chunk texts with holes (`%1`, `%2`) for string contents: plain text frames as servers
/// send them, and frames that are not plain text.
const FRAMES: [&str; 10] = [
    r#"{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"%1"},"finish_reason":null}],"usage":null,"obfuscation":"%2"}"#,
    r#"{"choices":[{"delta":{"content":"%1"}}],"x":{"nonce":"%2"}}"#,
    r#"{"choices":[{"delta":{"content":"%1"}}],"usage":null,"obfuscation":"%2","x":"%2"}"#,
    r#"{"id":"chatcmpl-b1f0","object":"chat.completion.chunk","created":1764612300,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"%1"},"finish_reason":null}]}"#,
    r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"%1"},"logprobs":null,"finish_reason":null}],"obfuscation":"%2"}"#,
    r#"{"choices":[{"delta":{"content":"%1","reasoning":"%2"}}]}"#,
    r#"{"choices":[{"delta":{"content":"%1"},"finish_reason":"%2"}]}"#,
    r#"{"id":"%2","choices":[{"delta":{"content":"%1"}}],"usage":null}"#,
    r#"{"choices":[{"index":0,"delta":{"content":"%1"}},{"index":1,"delta":{"content":"%2"}}]}"#,
    r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"%2","function":{"name":"t","arguments":"%1"}}]}}]}"#,
];

/// String contents (raw JSON string text), including ones that close the string early and
/// change the chunk's structure.
fn content() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just(" sunny"),
        Just("x"),
        Just(""),
        Just("\\n"),
        Just("\\\""),
        Just("\\u00e9"),
        Just("\\ud800"),
        Just("\u{1}"),
        Just("é"),
        Just("\","),
        Just("\",\"reasoning\":\"b"),
        Just("\"},\"finish_reason\":\"stop\",\"x\":{\"y\":\""),
        Just("\"}]}"),
    ];
    prop::collection::vec(fragment, 0..3).prop_map(|v| v.concat())
}

fn run_stream(
    mut stream: super::openai::OpenAiStream,
    chunks: &[String],
) -> (
    Vec<super::event::ModelEvent>,
    Result<(), super::error::ModelError>,
) {
    let mut out = Vec::new();
    for chunk in chunks {
        if let Err(e) = stream.on_data(chunk, &mut out) {
            return (out, Err(e));
        }
    }
    let end = stream.on_end(&mut out);
    (out, end)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn repeated_frames_give_what_reading_every_chunk_gives(
        chunks in prop::collection::vec((0..FRAMES.len(), content(), content()), 1..14),
        done in any::<bool>(),
    ) {
        let mut texts: Vec<String> = chunks
            .iter()
            .map(|(frame, a, b)| FRAMES[*frame].replace("%1", a).replace("%2", b))
            .collect();
        if done {
            texts.push("[DONE]".to_owned());
        }
        let framed = run_stream(super::openai::OpenAiStream::new("call_"), &texts);
        let full = run_stream(super::openai::OpenAiStream::without_frames("call_"), &texts);
        prop_assert_eq!(framed, full, "{:?}", texts);
    }
}

/// Anthropic events with holes, and the `event:` names they may come with.
const ANTHROPIC_FRAMES: [&str; 6] = [
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"%1"}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"%1"}}"#,
    r#"{"type":"content_block_delta","index":%2,"delta":{"text":"%1","type":"text_delta"}}"#,
    r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t%2","name":"get","input":{}}}"#,
    r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"%1"}}"#,
    r#"{"type":"message_delta","delta":{"stop_reason":"%1"},"usage":{"output_tokens":3}}"#,
];

fn run_anthropic(
    mut stream: super::anthropic::AnthropicStream,
    events: &[(Option<&str>, String)],
) -> (
    Vec<super::event::ModelEvent>,
    Result<(), super::error::ModelError>,
) {
    let mut out = Vec::new();
    for (name, data) in events {
        if let Err(e) = stream.on_event(*name, data, &mut out) {
            return (out, Err(e));
        }
    }
    let end = stream.on_end(&mut out);
    (out, end)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn repeated_anthropic_frames_give_what_reading_every_event_gives(
        events in prop::collection::vec(
            (0..ANTHROPIC_FRAMES.len(), content(), prop_oneof![Just("0"), Just("1"), Just("x")],
             prop::sample::select(vec![None, Some("content_block_delta"), Some("ping")])),
            1..14,
        ),
        stop in any::<bool>(),
    ) {
        let mut texts: Vec<(Option<&str>, String)> = events
            .iter()
            .map(|(frame, a, b, name)| (*name, ANTHROPIC_FRAMES[*frame].replace("%1", a).replace("%2", b)))
            .collect();
        if stop {
            texts.push((Some("message_stop"), r#"{"type":"message_stop"}"#.to_owned()));
        }
        let framed = run_anthropic(super::anthropic::AnthropicStream::new("call_"), &texts);
        let full = run_anthropic(super::anthropic::AnthropicStream::without_frames("call_"), &texts);
        prop_assert_eq!(framed, full, "{:?}", texts);
    }
}
