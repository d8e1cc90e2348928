//! Repeated chunk frames: servers stream their text chunks in one frame — Ollama, llama.cpp
//! and vLLM send the same `id`, `object`, `created`, `model`, `system_fingerprint` and choice
//! wrapper around every piece of text, Anthropic the same `content_block_delta` wrapper — so
//! once a plain text chunk has been read, the next chunk that repeats it byte for byte
//! outside its text string is the same chunk with other text: only that string needs
//! reading.
//!
//! This is exact, not a guess: the chunk is the learned one with one string token replaced
//! by another (the new token must be a valid JSON string that ends exactly where the
//! learned suffix begins), so it parses to the learned chunk with other content, whose only
//! effect is that text (the learned chunk's `id` and `model` were recorded already). Any
//! other chunk takes the full path. A stream whose frames never repeat (a per-chunk nonce,
//! such as OpenAI's `obfuscation`) stops being learned from after a few tries.

use std::borrow::Cow;

use super::fast_json::Reader;

/// Learned frames whose next use never came before learning stops.
const MAX_FRUITLESS: u8 = 3;

/// The last plain text chunk's frame. See the [module documentation](self).
#[derive(Debug, Default)]
pub(super) struct TextFrames {
    /// The learned chunk's text.
    frame: String,
    /// Bytes up to and including the content string's opening quote.
    open: usize,
    /// Bytes from the content string's closing quote to the end.
    tail: usize,
    learned: bool,
    /// Whether the learned frame was used.
    used: bool,
    /// Learned frames in a row that were never used.
    fruitless: u8,
}

impl TextFrames {
    /// The content of `chunk` when it repeats the learned frame outside its content string.
    pub(super) fn text<'a>(&mut self, chunk: &'a str) -> Option<Cow<'a, str>> {
        if !self.learned
            || chunk.len() < self.open + self.tail
            || !chunk.starts_with(&self.frame[..self.open])
            || !chunk.ends_with(&self.frame[self.frame.len() - self.tail..])
        {
            return None;
        }
        let mut r = Reader::at(chunk, self.open - 1);
        let text = r.string().ok()?;
        if r.position() != chunk.len() - self.tail + 1 {
            return None;
        }
        self.used = true;
        Some(text)
    }

    /// Learns the frame of `chunk`, a plain text chunk whose `content` string is `content`
    /// (borrowed from `chunk`: the string has no escapes).
    pub(super) fn learn(&mut self, chunk: &str, content: &str) {
        if self.learned && !self.used {
            self.fruitless = self.fruitless.saturating_add(1);
        } else if self.used {
            self.fruitless = 0;
        }
        if self.fruitless >= MAX_FRUITLESS {
            self.learned = false;
            return;
        }
        let open = (content.as_ptr() as usize).wrapping_sub(chunk.as_ptr() as usize);
        let close = open.wrapping_add(content.len());
        let bytes = chunk.as_bytes();
        if open == 0 || close >= bytes.len() || bytes[open - 1] != b'"' || bytes[close] != b'"' {
            self.learned = false;
            return;
        }
        self.frame.clear();
        self.frame.push_str(chunk);
        self.open = open;
        self.tail = chunk.len() - close;
        self.learned = true;
        self.used = false;
    }
}
