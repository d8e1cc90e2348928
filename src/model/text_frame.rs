//! Repeated chunk frames: servers stream their text chunks in one frame — Ollama, llama.cpp
//! and vLLM send the same `id`, `object`, `created`, `model`, `system_fingerprint` and choice
//! wrapper around every piece of text, Anthropic the same `content_block_delta` wrapper — so
//! once a plain text chunk has been read, the next chunk that repeats it byte for byte
//! outside its text string is the same chunk with other text: only that string needs
//! reading.
//!
//! A chunk may also carry a nonce that differs in every chunk (OpenAI's `obfuscation`): a
//! string value of a top-level member the parser ignores. When the learned chunk has one
//! after its text, it is a second hole: the frame is then three literal pieces around two
//! string tokens.
//!
//! This is exact, not a guess: the chunk is the learned one with one or two string tokens
//! replaced by others (each new token must be a valid JSON string that ends exactly where
//! the next literal piece begins), so it parses to the learned chunk with other content
//! (and another ignored value), whose only effect is that text (the learned chunk's `id` and
//! `model` were recorded already). Any other chunk takes the full path. A stream whose
//! frames never repeat stops being learned from after a few tries.

use std::borrow::Cow;

use super::fast_json::Reader;

/// Learned frames whose next use never came before learning stops.
const MAX_FRUITLESS: u8 = 3;

/// The last plain text chunk's frame. See the [module documentation](self).
#[derive(Debug, Default)]
pub(super) struct TextFrames {
    /// The learned chunk's text.
    frame: String,
    /// Bytes up to and including the text string's opening quote.
    open: usize,
    /// Where the text string's closing quote is in the frame.
    close: usize,
    /// The ignored string token (quotes included) after the text, if any.
    nonce: Option<(usize, usize)>,
    learned: bool,
    /// Whether the learned frame was used.
    used: bool,
    /// Learned frames in a row that were never used.
    fruitless: u8,
}

impl TextFrames {
    /// The text of `chunk` when it repeats the learned frame outside its holes.
    pub(super) fn text<'a>(&mut self, chunk: &'a str) -> Option<Cow<'a, str>> {
        if !self.learned || !chunk.starts_with(&self.frame[..self.open]) {
            return None;
        }
        let mut r = Reader::at(chunk, self.open - 1);
        let text = r.string().ok()?;
        // `at` is the new token's closing quote, where the frame's next piece begins.
        let at = r.position() - 1;
        let end = match self.nonce {
            None => &self.frame[self.close..],
            Some((from, to)) => {
                let middle = &self.frame[self.close..=from];
                if !chunk[at..].starts_with(middle) {
                    return None;
                }
                let mut r = Reader::at(chunk, at + middle.len() - 1);
                r.string().ok()?;
                if chunk.len() - (r.position() - 1) != self.frame.len() - (to - 1) {
                    return None;
                }
                &self.frame[to - 1..]
            }
        };
        if !chunk.ends_with(end) || chunk.len() - at < end.len() {
            return None;
        }
        if self.nonce.is_none() && chunk.len() - at != end.len() {
            return None;
        }
        self.used = true;
        Some(text)
    }

    /// Learns the frame of `chunk`, a plain text chunk whose text string is `content`
    /// (borrowed from `chunk`: the string has no escapes); `nonce` is the token of an
    /// ignored top-level string member, if the chunk has one.
    pub(super) fn learn(&mut self, chunk: &str, content: &str, nonce: Option<(usize, usize)>) {
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
        // Only a nonce after the text, whose token is a string, makes a second hole.
        let nonce = nonce.filter(|&(from, to)| {
            from > close && to > from + 1 && bytes[from] == b'"' && bytes[to - 1] == b'"'
        });
        self.frame.clear();
        self.frame.push_str(chunk);
        self.open = open;
        self.close = close;
        self.nonce = nonce;
        self.learned = true;
        self.used = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(chunk: &str, content: &str, nonce: Option<&str>) -> TextFrames {
        let mut f = TextFrames::default();
        let at = chunk.find(&format!("\"{content}\"")).unwrap() + 1;
        let nonce = nonce.map(|n| {
            let from = chunk.rfind(&format!("\"{n}\"")).unwrap();
            (from, from + n.len() + 2)
        });
        f.learn(chunk, &chunk[at..at + content.len()], nonce);
        f
    }

    #[test]
    fn a_repeated_frame_yields_the_new_text_and_anything_else_does_not() {
        let a = r#"{"id":"x","choices":[{"delta":{"content":"Hel"}}]}"#;
        let mut f = learned(a, "Hel", None);
        let hit = |f: &mut TextFrames, c: &str| f.text(c).map(|t| t.into_owned());
        assert_eq!(
            hit(
                &mut f,
                r#"{"id":"x","choices":[{"delta":{"content":"lo!"}}]}"#
            )
            .as_deref(),
            Some("lo!")
        );
        assert_eq!(
            hit(
                &mut f,
                r#"{"id":"x","choices":[{"delta":{"content":"a\nb"}}]}"#
            )
            .as_deref(),
            Some("a\nb")
        );
        assert_eq!(
            hit(&mut f, r#"{"id":"x","choices":[{"delta":{"content":""}}]}"#).as_deref(),
            Some("")
        );
        for miss in [
            r#"{"id":"y","choices":[{"delta":{"content":"lo"}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"content":"lo"}}],"z":1}"#,
            r#"{"id":"x","choices":[{"delta":{"content":"a","reasoning":"b"}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"content":"\ud800"}}]}"#,
        ] {
            assert_eq!(hit(&mut f, miss), None, "{miss}");
        }
        let b = r#"{"choices":[{"delta":{"content":"Hel"}}],"obfuscation":"q1"}"#;
        let mut f = learned(b, "Hel", Some("q1"));
        assert_eq!(
            hit(
                &mut f,
                r#"{"choices":[{"delta":{"content":"lo"}}],"obfuscation":"zz9"}"#
            )
            .as_deref(),
            Some("lo")
        );
        assert_eq!(
            hit(
                &mut f,
                r#"{"choices":[{"delta":{"content":"lo"}}],"obfuscation":"z","k":"v"}"#
            ),
            None
        );
    }
}
