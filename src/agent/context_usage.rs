//! How full a model call's context window is: the runtime's `session.usage_info` event,
//! emitted after each `assistant.turn_start` with the messages and tools about to be sent.
//!
//! Token counts are estimates (a token per four bytes of text, rounded up), as no tokenizer
//! runs in the core; `tokenLimit` is the provider's stated prompt limit or context window,
//! else [`DEFAULT_TOKEN_LIMIT`].

use serde_json::{json, Value};

use crate::model::{ChatMessage, ToolSpec};

/// The window assumed when the provider states none (the runtime's default).
pub(super) const DEFAULT_TOKEN_LIMIT: u64 = 128_000;

/// Estimated tokens of `bytes` bytes of text.
fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The length of `value` serialized, counted without building the text.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

fn message_bytes(message: &ChatMessage) -> usize {
    message.text_len()
}

/// The `session.usage_info` payload for a call that sends `messages` and offers `tools` to
/// a model whose window is `token_limit` tokens (if known); `initial` marks the session's
/// first.
pub(super) fn usage_info(
    token_limit: Option<u64>,
    messages: &[ChatMessage],
    tools: &[ToolSpec],
    initial: bool,
) -> Value {
    let (mut system, mut conversation) = (0, 0);
    for m in messages {
        match m {
            ChatMessage::System(_) => system += message_bytes(m),
            _ => conversation += message_bytes(m),
        }
    }
    let tool_bytes: usize = tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + json_len(&t.parameters))
        .sum();
    let (system, conversation, tool_tokens) =
        (tokens(system), tokens(conversation), tokens(tool_bytes));
    let limit = token_limit
        .filter(|l| *l > 0)
        .unwrap_or(DEFAULT_TOKEN_LIMIT);
    json!({
        "tokenLimit": limit,
        "currentTokens": system + conversation + tool_tokens,
        "messagesLength": messages.len(),
        "systemTokens": system,
        "conversationTokens": conversation,
        "toolDefinitionsTokens": tool_tokens,
        "isInitial": initial,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_parts_and_takes_the_provider_limit() {
        let messages = [
            ChatMessage::System("x".repeat(400)),
            ChatMessage::User("y".repeat(41)),
        ];
        let tools = [ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({}),
        }];
        assert_eq!(
            super::json_len(&json!({"a": [1, "x"]})),
            r#"{"a":[1,"x"]}"#.len()
        );
        let info = usage_info(None, &messages, &tools, true);
        assert_eq!(info["systemTokens"], 100);
        assert_eq!(info["conversationTokens"], 11);
        assert_eq!(info["toolDefinitionsTokens"], 1);
        assert_eq!(info["currentTokens"], 112);
        assert_eq!(info["messagesLength"], 2);
        assert_eq!(info["tokenLimit"], DEFAULT_TOKEN_LIMIT);
        assert_eq!(info["isInitial"], true);
        assert_eq!(
            usage_info(Some(90_000), &messages, &[], false)["tokenLimit"],
            90_000
        );
    }
}
