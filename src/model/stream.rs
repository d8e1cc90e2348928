//! From response body bytes to [`ModelEvent`]s: the SSE decoder plus the dialect's parser.

use super::anthropic::AnthropicStream;
use super::error::{ModelError, ModelErrorKind};
use super::event::ModelEvent;
use super::openai::OpenAiStream;
use super::request::StreamDialect;
use super::responses::ResponsesStream;
use super::sse::{SseDecoder, SseEvent, SseLimits};

/// A dialect's event parser.
#[derive(Debug)]
pub enum StreamParser {
    /// Chat Completions chunks.
    OpenAi(OpenAiStream),
    /// Anthropic Messages events.
    Anthropic(AnthropicStream),
    /// OpenAI Responses API events.
    Responses(ResponsesStream),
}

impl StreamParser {
    /// A parser for `dialect`; tool calls without an id are named `<id_prefix><n>`.
    pub fn new(dialect: StreamDialect, id_prefix: &str) -> Self {
        match dialect {
            StreamDialect::OpenAiChat => StreamParser::OpenAi(OpenAiStream::new(id_prefix)),
            StreamDialect::AnthropicMessages => {
                StreamParser::Anthropic(AnthropicStream::new(id_prefix))
            }
            StreamDialect::OpenAiResponses => {
                StreamParser::Responses(ResponsesStream::new(id_prefix))
            }
        }
    }

    /// One decoded server-sent event.
    pub fn on_sse(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        self.on_parts(event.event.as_deref(), &event.data, out)
    }

    /// One decoded server-sent event, as its type and data.
    fn on_parts(
        &mut self,
        event: Option<&str>,
        data: &str,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        match self {
            StreamParser::OpenAi(p) => p.on_data(data, out),
            StreamParser::Anthropic(p) => p.on_event(event, data, out),
            StreamParser::Responses(p) => p.on_event(event, data, out),
        }
    }

    /// The end of the body.
    pub fn on_end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        match self {
            StreamParser::OpenAi(p) => p.on_end(out),
            StreamParser::Anthropic(p) => p.on_end(out),
            StreamParser::Responses(p) => p.on_end(out),
        }
    }

    /// Whether [`ModelEvent::Done`] has been produced.
    pub fn is_done(&self) -> bool {
        match self {
            StreamParser::OpenAi(p) => p.is_done(),
            StreamParser::Anthropic(p) => p.is_done(),
            StreamParser::Responses(p) => p.is_done(),
        }
    }
}

/// An SSE decoder and a dialect parser together: body bytes in, [`ModelEvent`]s out. The
/// result does not depend on how the body is split.
#[derive(Debug)]
pub struct ResponseDecoder {
    sse: SseDecoder,
    parser: StreamParser,
    failed: Option<ModelError>,
    events_seen: u64,
}

impl ResponseDecoder {
    /// A decoder for one response.
    pub fn new(dialect: StreamDialect, limits: SseLimits, id_prefix: &str) -> Self {
        ResponseDecoder {
            sse: SseDecoder::new(limits),
            parser: StreamParser::new(dialect, id_prefix),
            failed: None,
            events_seen: 0,
        }
    }

    /// Body bytes that arrived; appends the events they complete. After an error (and after
    /// [`ModelEvent::Done`]) further bytes are ignored and the same error is returned.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.parser.is_done() {
            return Ok(());
        }
        self.sse.push(bytes);
        loop {
            // The event is borrowed from the decoder (its data read in place).
            let parsed = match self.sse.next_event_ref() {
                Ok(Some(event)) => self.parser.on_parts(event.event, event.data, out),
                Ok(None) => return Ok(()),
                Err(e) => {
                    return Err(self.fail(ModelError::new(
                        ModelErrorKind::EventTooLarge,
                        e.to_string(),
                    )))
                }
            };
            self.events_seen += 1;
            if let Err(e) = parsed {
                return Err(self.fail(e));
            }
            if self.parser.is_done() {
                return Ok(());
            }
        }
    }

    /// The end of the body: the final [`ModelEvent::Done`], or why the response is incomplete.
    pub fn finish(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.parser.is_done() {
            return Ok(());
        }
        match self.sse.finish() {
            Ok(Some(event)) => {
                self.events_seen += 1;
                // A last event without its blank line: accepted if it parses, otherwise the
                // stream was cut in the middle of it.
                let mut tail = Vec::new();
                if self.parser.on_sse(&event, &mut tail).is_ok() {
                    out.extend(tail);
                } else {
                    return Err(self.fail(ModelError::new(
                        ModelErrorKind::StreamCut,
                        "the response stream ended in the middle of an event",
                    )));
                }
            }
            Ok(None) => {}
            Err(e) => {
                return Err(self.fail(ModelError::new(
                    ModelErrorKind::EventTooLarge,
                    e.to_string(),
                )))
            }
        }
        let result = self.parser.on_end(out);
        result.map_err(|e| self.fail(e))
    }

    /// Server-sent events decoded so far (comments and empty events excluded).
    pub fn events_seen(&self) -> u64 {
        self.events_seen
    }

    /// Whether the response is complete.
    pub fn is_done(&self) -> bool {
        self.parser.is_done()
    }

    fn fail(&mut self, e: ModelError) -> ModelError {
        self.failed = Some(e.clone());
        e
    }
}
