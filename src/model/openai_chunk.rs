//! The shape of a streamed Chat Completions chunk, and its two readers: serde_json (the
//! reference) and the fast reader ([`super::fast_json`]), which fills the same structs and
//! declines whatever it is not certain to read the same way.
//!
//! Every leaf is lenient ([`super::lenient`]): unknown fields are ignored and a field of an
//! unexpected type reads as absent.

use std::borrow::Cow;

use serde::Deserialize;

use super::error::{ModelError, ModelErrorKind};
use super::fast_json::{Fast, Reader, Seen};
use super::lenient::{LArgs, LObj, LSeq, LStr, LU64};
use super::openai::excerpt;

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct Chunk<'a> {
    #[serde(borrow)]
    pub(super) id: LStr<'a>,
    #[serde(borrow)]
    pub(super) model: LStr<'a>,
    #[serde(borrow)]
    pub(super) object: LStr<'a>,
    #[serde(borrow)]
    pub(super) message: LStr<'a>,
    #[serde(borrow)]
    pub(super) choices: LSeq<LObj<Choice<'a>>>,
    /// Boxed, as the rare members are: the struct moves through the readers by value.
    pub(super) usage: LObj<Box<WireUsage>>,
    #[serde(borrow)]
    pub(super) error: Option<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct Choice<'a> {
    pub(super) index: LU64,
    #[serde(borrow)]
    pub(super) delta: LObj<Delta<'a>>,
    #[serde(borrow)]
    pub(super) message: LObj<Box<Delta<'a>>>,
    #[serde(borrow)]
    pub(super) finish_reason: LStr<'a>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct Delta<'a> {
    #[serde(borrow)]
    pub(super) content: LStr<'a>,
    #[serde(borrow)]
    pub(super) reasoning_content: LStr<'a>,
    #[serde(borrow)]
    pub(super) reasoning: LStr<'a>,
    #[serde(borrow)]
    pub(super) tool_calls: LSeq<LObj<Box<WireToolCallDelta<'a>>>>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct WireToolCallDelta<'a> {
    pub(super) index: LU64,
    #[serde(borrow)]
    pub(super) id: LStr<'a>,
    #[serde(borrow)]
    pub(super) function: LObj<WireFunctionDelta<'a>>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct WireFunctionDelta<'a> {
    #[serde(borrow)]
    pub(super) name: LStr<'a>,
    #[serde(borrow)]
    pub(super) arguments: LArgs<'a>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct WireUsage {
    pub(super) prompt_tokens: LU64,
    pub(super) completion_tokens: LU64,
    pub(super) input_tokens: LU64,
    pub(super) output_tokens: LU64,
    pub(super) prompt_tokens_details: LObj<PromptDetails>,
    pub(super) completion_tokens_details: LObj<CompletionDetails>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct PromptDetails {
    pub(super) cached_tokens: LU64,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct CompletionDetails {
    pub(super) reasoning_tokens: LU64,
}

impl<'a> Chunk<'a> {
    /// The text, when the chunk is a plain text chunk whose only effect is that text (one
    /// choice at index 0 with a `delta` holding `content` without escapes and nothing else
    /// that counts: no reasoning, tool calls, finish reason, usage or error).
    pub(super) fn plain_text(&self) -> Option<&'a str> {
        if self.error.is_some() || self.usage.0.is_some() || self.object.get() == Some("error") {
            return None;
        }
        let [LObj(Some(choice))] = self.choices.0.as_slice() else {
            return None;
        };
        let delta = choice.delta.0.as_ref()?;
        if choice.index.0.unwrap_or(0) != 0
            || choice.finish_reason.0.is_some()
            || delta.reasoning_content.0.is_some()
            || delta.reasoning.0.is_some()
            || !delta.tool_calls.0.is_empty()
        {
            return None;
        }
        match delta.content.0 {
            Some(Cow::Borrowed(text)) => Some(text),
            _ => None,
        }
    }
}

/// One chunk's JSON: the fast reader when it is certain, else serde_json (the reference).
pub(super) fn parse_chunk(text: &str) -> Result<(Chunk<'_>, Option<Span>), ModelError> {
    if let Ok(read) = fast_chunk_spans(text) {
        return Ok(read);
    }
    serde_chunk(text).map(|chunk| (chunk, None))
}

/// One chunk's JSON through serde_json alone.
pub(super) fn serde_chunk(text: &str) -> Result<Chunk<'_>, ModelError> {
    serde_json::from_str(text).map_err(|e| {
        ModelError::new(
            ModelErrorKind::MalformedStream,
            format!("a stream chunk is not valid JSON ({e}): {}", excerpt(text)),
        )
    })
}

/// One chunk's JSON through the fast reader ([`super::fast_json`]): the same `Chunk` serde
/// would give, or [`Bail`].
#[cfg(test)]
pub(super) fn fast_chunk(text: &str) -> Fast<Chunk<'_>> {
    fast_chunk_spans(text).map(|(chunk, _)| chunk)
}

/// A byte range of the chunk text.
pub(super) type Span = (usize, usize);

/// [`fast_chunk`], and the span of the last top-level member of an unknown name whose value
/// is a string (the value's token, quotes included): a per-chunk nonce such as OpenAI's
/// `obfuscation`, which [`super::text_frame`] treats as a second hole in a frame.
fn fast_chunk_spans(text: &str) -> Fast<(Chunk<'_>, Option<Span>)> {
    let mut r = Reader::new(text);
    let mut chunk = Chunk::default();
    let mut seen = Seen::default();
    let mut ignored_string = None;
    r.object(|r, key| {
        match key {
            "id" => {
                seen.once(0)?;
                chunk.id = r.lstr()?;
            }
            "model" => {
                seen.once(1)?;
                chunk.model = r.lstr()?;
            }
            "object" => {
                seen.once(2)?;
                chunk.object = r.lstr()?;
            }
            "message" => {
                seen.once(3)?;
                chunk.message = r.lstr()?;
            }
            "choices" => {
                seen.once(4)?;
                chunk.choices = r.lseq(|r| r.lobj(fast_choice))?;
            }
            "usage" => {
                seen.once(5)?;
                chunk.usage = r.lobj(|r| fast_usage(r).map(Box::new))?;
            }
            "error" => {
                seen.once(6)?;
                chunk.error = r.null_only()?;
            }
            _ if r.peek()? == b'"' => {
                let start = r.position();
                r.skip()?;
                ignored_string = Some((start, r.position()));
            }
            _ => r.skip()?,
        }
        Ok(())
    })?;
    r.end()?;
    Ok((chunk, ignored_string))
}

fn fast_choice<'a>(r: &mut Reader<'a>) -> Fast<Choice<'a>> {
    let mut choice = Choice::default();
    let mut seen = Seen::default();
    r.object(|r, key| {
        match key {
            "index" => {
                seen.once(0)?;
                choice.index = r.lu64()?;
            }
            "delta" => {
                seen.once(1)?;
                choice.delta = r.lobj(fast_delta)?;
            }
            "message" => {
                seen.once(2)?;
                choice.message = r.lobj(|r| fast_delta(r).map(Box::new))?;
            }
            "finish_reason" => {
                seen.once(3)?;
                choice.finish_reason = r.lstr()?;
            }
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(choice)
}

fn fast_delta<'a>(r: &mut Reader<'a>) -> Fast<Delta<'a>> {
    let mut delta = Delta::default();
    let mut seen = Seen::default();
    r.object(|r, key| {
        match key {
            "content" => {
                seen.once(0)?;
                delta.content = r.lstr()?;
            }
            "reasoning_content" => {
                seen.once(1)?;
                delta.reasoning_content = r.lstr()?;
            }
            "reasoning" => {
                seen.once(2)?;
                delta.reasoning = r.lstr()?;
            }
            "tool_calls" => {
                seen.once(3)?;
                delta.tool_calls = r.lseq(|r| r.lobj(|r| fast_tool_call(r).map(Box::new)))?;
            }
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(delta)
}

fn fast_tool_call<'a>(r: &mut Reader<'a>) -> Fast<WireToolCallDelta<'a>> {
    let mut call = WireToolCallDelta::default();
    let mut seen = Seen::default();
    r.object(|r, key| {
        match key {
            "index" => {
                seen.once(0)?;
                call.index = r.lu64()?;
            }
            "id" => {
                seen.once(1)?;
                call.id = r.lstr()?;
            }
            "function" => {
                seen.once(2)?;
                call.function = r.lobj(|r| {
                    let mut f = WireFunctionDelta::default();
                    let mut seen = Seen::default();
                    r.object(|r, key| {
                        match key {
                            "name" => {
                                seen.once(0)?;
                                f.name = r.lstr()?;
                            }
                            "arguments" => {
                                seen.once(1)?;
                                f.arguments = r.largs()?;
                            }
                            _ => r.skip()?,
                        }
                        Ok(())
                    })?;
                    Ok(f)
                })?;
            }
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(call)
}

fn fast_usage(r: &mut Reader<'_>) -> Fast<WireUsage> {
    let mut u = WireUsage::default();
    let mut seen = Seen::default();
    r.object(|r, key| {
        match key {
            "prompt_tokens" => {
                seen.once(0)?;
                u.prompt_tokens = r.lu64()?;
            }
            "completion_tokens" => {
                seen.once(1)?;
                u.completion_tokens = r.lu64()?;
            }
            "input_tokens" => {
                seen.once(2)?;
                u.input_tokens = r.lu64()?;
            }
            "output_tokens" => {
                seen.once(3)?;
                u.output_tokens = r.lu64()?;
            }
            "prompt_tokens_details" => {
                seen.once(4)?;
                u.prompt_tokens_details = r.lobj(|r| {
                    let mut d = PromptDetails::default();
                    let mut seen = Seen::default();
                    r.object(|r, key| {
                        match key {
                            "cached_tokens" => {
                                seen.once(0)?;
                                d.cached_tokens = r.lu64()?;
                            }
                            _ => r.skip()?,
                        }
                        Ok(())
                    })?;
                    Ok(d)
                })?;
            }
            "completion_tokens_details" => {
                seen.once(5)?;
                u.completion_tokens_details = r.lobj(|r| {
                    let mut d = CompletionDetails::default();
                    let mut seen = Seen::default();
                    r.object(|r, key| {
                        match key {
                            "reasoning_tokens" => {
                                seen.once(0)?;
                                d.reasoning_tokens = r.lu64()?;
                            }
                            _ => r.skip()?,
                        }
                        Ok(())
                    })?;
                    Ok(d)
                })?;
            }
            _ => r.skip()?,
        }
        Ok(())
    })?;
    Ok(u)
}
