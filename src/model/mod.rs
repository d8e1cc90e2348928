//! The model client, sans-IO: provider configuration, request building, the conversation,
//! response stream decoding, and one call's state machine.
//!
//! Nothing here performs I/O or reads a clock. A model call is:
//!
//! 1. [`ProviderConfig::from_json`] (the session's `provider`) or a [`ServerDefault`];
//! 2. [`messages_from_events`] (the session's persisted events) plus the tools →
//!    [`ChatRequest`] → [`build_chat_request`] → a plain [`HttpRequest`];
//! 3. [`ModelCall::new`]: the host performs each [`CallOutput::Send`], feeds the response
//!    back ([`ModelCall::handle_response`], [`ModelCall::handle_body`],
//!    [`ModelCall::handle_end`], [`ModelCall::handle_transport_error`]), arms a timer at
//!    [`ModelCall::next_deadline`] and calls [`ModelCall::handle_timeout`]; it drains
//!    [`ModelCall::poll`]: [`ModelEvent`]s (text, reasoning, tool-call deltas, usage, and
//!    [`ModelEvent::Done`] with the accumulated [`ModelResponse`]), retries, or a
//!    [`ModelError`].
//!
//! ```
//! use agentwire::model::*;
//! use agentwire::Timestamp;
//! use serde_json::json;
//!
//! let provider = ProviderConfig::from_json(&json!({
//!     "type": "openai", "baseUrl": "http://localhost:11434/v1"
//! })).unwrap();
//! let events = [("user.message", json!({"content": "hi"}))];
//! let messages = messages_from_events(events.iter().map(|(t, d)| (*t, d)), Some("Be brief."));
//! let request = build_chat_request(&provider, &ChatRequest::new(Some("qwen3"), &messages, &[]), None).unwrap();
//! assert_eq!(request.url, "http://localhost:11434/v1/chat/completions");
//!
//! let now = Timestamp::from_millis(1_000);
//! let mut call = ModelCall::new(now, request, StreamDialect::of(&provider), "qwen3", CallConfig::default());
//! assert!(matches!(call.poll(), Some(CallOutput::Send(_))));
//! call.handle_response(now, 200, &[("content-type".into(), "text/event-stream".into())]);
//! call.handle_body(now, b"data: {\"choices\":[{\"delta\":{\"content\":\"Hello\"}}]}\n\ndata: [DONE]\n\n");
//! assert_eq!(call.poll(), Some(CallOutput::Event(ModelEvent::TextDelta("Hello".into()))));
//! let Some(CallOutput::Event(ModelEvent::Done(response))) = call.poll() else { panic!() };
//! assert_eq!(response.text, "Hello");
//! assert_eq!(call.state(), CallState::Completed);
//! ```

pub mod accumulate;
pub mod anthropic;
pub mod call;
pub mod catalog;
pub mod conversation;
pub mod error;
pub mod event;
#[cfg(test)]
mod fast_equiv_tests;
mod fast_json;
pub mod http;
mod lenient;
pub mod openai;
mod openai_chunk;
pub mod provider;
pub mod request;
pub mod responses;
pub mod sse;
pub mod stream;
mod text_frame;

pub use accumulate::{ResponseAccumulator, ToolCallAccumulator, ToolCallFragment};
pub use anthropic::AnthropicStream;
pub use call::{CallConfig, CallOutput, CallState, CallTiming, ModelCall, TransportErrorKind};
pub use catalog::{CatalogModel, ProviderCatalog};
pub use conversation::{
    current_datetime, messages_from_events, tool_failure_text, user_message_content, ChatMessage,
    HistoryBuilder, UserPart, INTERRUPTED_TOOL_RESULT,
};
pub use error::{ModelError, ModelErrorKind};
pub use event::{ModelEvent, ModelResponse, ToolCall, Usage};
pub use http::{HttpHeader, HttpMethod, HttpRequest};
pub use openai::OpenAiStream;
pub use provider::{
    copilot_api_headers, BaseUrlPolicy, ProviderConfig, ProviderError, ProviderKind, Secret,
    ServerDefault, ServerDefaultSource, WireApi,
};
pub use request::{
    build_chat_request, build_models_request, is_websocket, parse_models_response,
    websocket_event_as_sse, ChatRequest, ModelInfo, SamplingParams, StreamDialect, ToolSpec,
    WEBSOCKETS,
};
pub use responses::ResponsesStream;
pub use sse::{SseDecoder, SseError, SseEvent, SseLimits};
pub use stream::{ResponseDecoder, StreamParser};

/// Serialises `messages` as a Chat Completions `messages` array (what the request body
/// holds), e.g. for a `model.messages_snapshot` or a comparison with a recorded request.
pub fn openai_messages_json(messages: &[ChatMessage]) -> serde_json::Value {
    serde_json::to_value(openai::OpenAiMessages(messages)).expect("plain data serialises")
}
