//! Session ids as directory names.
//!
//! Session ids are chosen by clients, so they are not trusted as path components. An id is
//! stored under a name made of its bytes, where every byte other than an ASCII letter, digit,
//! `-`, `_` or a `.` that is not the first byte is written as `%XX` (upper-case hex). UUIDs,
//! the ids the SDKs and the real runtime use, are thus stored under their own name, as
//! `<COPILOT_HOME>/session-state/<sessionId>/` does; `..`, `/` or `\` can never escape the
//! directory.

use std::fmt::Write;

/// The directory name that stores session `id`; `None` for the empty id.
pub fn encode(id: &str) -> Option<String> {
    if id.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(id.len());
    for (i, b) in id.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if plain {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    Some(out)
}

/// The session id stored under directory `name`, if `name` is what [`encode`] makes of it.
pub fn decode(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = name.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let id = String::from_utf8(out).ok()?;
    // Only the canonical spelling: one directory per id.
    (encode(&id).as_deref() == Some(name)).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    #[test]
    fn uuids_are_stored_under_their_own_name() {
        let id = "0c9c5bd2-6b1e-4b8e-9a55-3f1d8f9b2a10";
        assert_eq!(encode(id).as_deref(), Some(id));
        assert_eq!(decode(id).as_deref(), Some(id));
    }

    #[test]
    fn unsafe_ids_cannot_escape_and_round_trip() {
        for id in [
            "..", ".", "../etc", "a/b", "a\\b", "é", "x y", "%41", ".hidden", "a.b",
        ] {
            let name = encode(id).unwrap();
            assert!(!name.contains('/') && !name.contains('\\'), "{name}");
            assert!(!name.starts_with('.'), "{name}");
            assert_eq!(decode(&name).as_deref(), Some(id), "{id} -> {name}");
        }
        assert_eq!(encode(""), None);
    }

    #[test]
    fn non_canonical_names_are_refused() {
        for name in ["%2", "%zz", "%61", "%2e", ".x", "a%2Fb%"] {
            assert_eq!(decode(name), None, "{name}");
        }
        assert_eq!(decode("a%2Fb").as_deref(), Some("a/b"));
    }
}
