//! Session and node ids as NATS subject tokens and KV keys.
//!
//! Clients choose session ids, so they can hold anything: dots (the subject token separator),
//! `*` and `>` (wildcards), spaces, non-ASCII text, or nothing at all. NATS subject tokens and KV
//! keys accept far less (KV keys: `a-z A-Z 0-9 _ - . = /`; a subject token must be non-empty and
//! free of `.`, `*`, `>` and whitespace). [`escape_id`] maps every string to a token built from
//! `[A-Za-z0-9_-]` only, which is valid in both places, and [`unescape_id`] inverts it:
//!
//! * the token starts with `s` (so it is never empty and never starts with `_`, which KV
//!   reserves for its own keys such as `_kv`);
//! * ASCII letters, digits and `-` stand for themselves;
//! * every other byte of the UTF-8 text, `_` included, becomes `_` and two upper-case hex digits.
//!
//! The mapping is injective (distinct ids give distinct tokens) because decoding is a function:
//! each `_` starts exactly one three-character escape and every other character is itself.
//! [`unescape_id`] accepts only canonical tokens (upper-case hex, no escape of a character that
//! stands for itself), so every accepted token is the escape of exactly one id.

use std::fmt;

/// The first character of every escaped token.
const PREFIX: char = 's';

/// The character that starts a `_XX` escape.
const ESCAPE: u8 = b'_';

/// Whether `byte` stands for itself in an escaped token.
fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-'
}

/// Escapes `id` into a token valid as one NATS subject token and as a KV key.
///
/// The token is at most `1 + 3 * id.len()` bytes long.
pub fn escape_id(id: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut token = String::with_capacity(1 + id.len());
    token.push(PREFIX);
    for &byte in id.as_bytes() {
        if is_plain(byte) {
            token.push(byte as char);
        } else {
            token.push(ESCAPE as char);
            token.push(HEX[usize::from(byte >> 4)] as char);
            token.push(HEX[usize::from(byte & 0x0F)] as char);
        }
    }
    token
}

/// Why a token is not the escape of any id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnescapeError {
    /// The token does not start with the `s` prefix.
    MissingPrefix,
    /// A character at this byte offset is neither plain nor the start of an escape.
    UnexpectedCharacter(usize),
    /// The escape at this byte offset is cut short or its digits are not upper-case hex.
    BadEscape(usize),
    /// The escape at this byte offset encodes a byte that must stand for itself.
    NonCanonicalEscape(usize),
    /// The decoded bytes are not UTF-8 text.
    NotUtf8,
}

impl fmt::Display for UnescapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingPrefix => write!(f, "escaped id does not start with '{PREFIX}'"),
            Self::UnexpectedCharacter(at) => write!(f, "unexpected character at byte {at}"),
            Self::BadEscape(at) => write!(f, "malformed escape at byte {at}"),
            Self::NonCanonicalEscape(at) => write!(f, "non-canonical escape at byte {at}"),
            Self::NotUtf8 => write!(f, "escaped id does not decode to UTF-8"),
        }
    }
}

impl std::error::Error for UnescapeError {}

/// Decodes an upper-case hex digit.
fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// Inverts [`escape_id`]: returns the id whose escape is exactly `token`.
pub fn unescape_id(token: &str) -> Result<String, UnescapeError> {
    let rest = token
        .strip_prefix(PREFIX)
        .ok_or(UnescapeError::MissingPrefix)?;
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        let offset = at + PREFIX.len_utf8();
        if is_plain(byte) {
            out.push(byte);
            at += 1;
        } else if byte == ESCAPE {
            let high = bytes.get(at + 1).copied().and_then(hex_value);
            let low = bytes.get(at + 2).copied().and_then(hex_value);
            let (Some(high), Some(low)) = (high, low) else {
                return Err(UnescapeError::BadEscape(offset));
            };
            let decoded = high << 4 | low;
            if is_plain(decoded) {
                return Err(UnescapeError::NonCanonicalEscape(offset));
            }
            out.push(decoded);
            at += 3;
        } else {
            return Err(UnescapeError::UnexpectedCharacter(offset));
        }
    }
    String::from_utf8(out).map_err(|_| UnescapeError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Whether `token` is usable as a NATS KV key and as a single subject token.
    fn valid_key_and_token(token: &str) -> bool {
        !token.is_empty()
            && !token.starts_with('_')
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    }

    #[test]
    fn examples() {
        assert_eq!(escape_id(""), "s");
        assert_eq!(escape_id("abc-1"), "sabc-1");
        assert_eq!(escape_id("a.b"), "sa_2Eb");
        assert_eq!(escape_id("_"), "s_5F");
        assert_eq!(escape_id("*>"), "s_2A_3E");
        assert_eq!(escape_id("é"), "s_C3_A9");
    }

    #[test]
    fn rejects_tokens_no_id_escapes_to() {
        assert_eq!(unescape_id("abc"), Err(UnescapeError::MissingPrefix));
        assert_eq!(
            unescape_id("sa.b"),
            Err(UnescapeError::UnexpectedCharacter(2))
        );
        assert_eq!(unescape_id("s_2"), Err(UnescapeError::BadEscape(1)));
        assert_eq!(unescape_id("s_2e"), Err(UnescapeError::BadEscape(1)));
        assert_eq!(
            unescape_id("s_41"),
            Err(UnescapeError::NonCanonicalEscape(1))
        );
        assert_eq!(unescape_id("s_C3"), Err(UnescapeError::NotUtf8));
    }

    proptest! {
        #[test]
        fn round_trips(id in any::<String>()) {
            let token = escape_id(&id);
            prop_assert!(valid_key_and_token(&token), "{token:?}");
            prop_assert_eq!(unescape_id(&token), Ok(id));
        }

        #[test]
        fn distinct_ids_give_distinct_tokens(a in any::<String>(), b in any::<String>()) {
            prop_assume!(a != b);
            prop_assert_ne!(escape_id(&a), escape_id(&b));
        }

        #[test]
        fn accepted_tokens_are_canonical(token in "s[A-Za-z0-9_-]{0,12}") {
            if let Ok(id) = unescape_id(&token) {
                prop_assert_eq!(escape_id(&id), token);
            }
        }
    }
}
