//! A strict, non-allocating JSON scanner for the hot path.
//!
//! It validates JSON text exactly as RFC 8259 (and serde_json) define it and finds where each
//! value ends, without building anything: the envelope's members are located in one pass and
//! `params` / `result` are only checked, then handed out as borrowed raw values. It accepts
//! precisely what `serde_json::from_str::<IgnoredAny>` accepts on UTF-8 input (which, like
//! this scanner, has no nesting limit), as the tests check differentially.
//!
//! Input must already be valid UTF-8 (a `&str`); non-ASCII bytes are only ever inside strings.

use serde::de::value::{BorrowedStrDeserializer, MapDeserializer};
use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::value::RawValue;

/// Scanning failed: the text is not valid JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Invalid {
    /// Byte offset where the problem was found.
    pub(crate) at: usize,
}

type Scan = Result<usize, Invalid>;

#[inline]
pub(crate) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
            break;
        }
        i += 1;
    }
    i
}

const ONES: u64 = u64::MAX / 255;
const HIGH: u64 = ONES << 7;

/// Scans a string starting at its opening quote (`b[i] == b'"'`). Returns the index after the
/// closing quote and whether the string contains escapes.
#[inline]
pub(crate) fn scan_string(b: &[u8], i: usize) -> Result<(usize, bool), Invalid> {
    let mut i = i + 1;
    let mut escaped = false;
    loop {
        // Eight bytes at a time: stop at the first `"`, `\` or control character.
        while let Some(chunk) = b.get(i..i + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let v = u64::from_le_bytes(word);
            let ctrl = v.wrapping_sub(ONES * 0x20) & !v;
            let quote = v ^ (ONES * u64::from(b'"'));
            let quote = quote.wrapping_sub(ONES) & !quote;
            let backslash = v ^ (ONES * u64::from(b'\\'));
            let backslash = backslash.wrapping_sub(ONES) & !backslash;
            let found = (ctrl | quote | backslash) & HIGH;
            if found != 0 {
                i += (found.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        match b.get(i) {
            Some(b'"') => return Ok((i + 1, escaped)),
            Some(b'\\') => {
                escaped = true;
                match b.get(i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(b'u') => match b.get(i + 2..i + 6) {
                        Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => i += 6,
                        _ => return Err(Invalid { at: i }),
                    },
                    _ => return Err(Invalid { at: i }),
                }
            }
            Some(c) if *c >= 0x20 => i += 1,
            _ => return Err(Invalid { at: i }),
        }
    }
}

#[inline]
fn digits(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b'0'..=b'9')) {
        i += 1;
    }
    i
}

#[inline]
fn scan_number(b: &[u8], mut i: usize) -> Scan {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(b, i + 1),
        _ => return Err(Invalid { at: i }),
    }
    if b.get(i) == Some(&b'.') {
        if !matches!(b.get(i + 1), Some(b'0'..=b'9')) {
            return Err(Invalid { at: i + 1 });
        }
        i = digits(b, i + 1);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !matches!(b.get(i), Some(b'0'..=b'9')) {
            return Err(Invalid { at: i });
        }
        i = digits(b, i);
    }
    Ok(i)
}

#[inline]
fn literal(b: &[u8], i: usize, lit: &[u8]) -> Scan {
    if b.get(i..i + lit.len()) == Some(lit) {
        Ok(i + lit.len())
    } else {
        Err(Invalid { at: i })
    }
}

/// Scans `"key"` `:` and the whitespace after it; returns where the member's value starts.
#[inline]
fn key_colon(b: &[u8], i: usize) -> Scan {
    if b.get(i) != Some(&b'"') {
        return Err(Invalid { at: i });
    }
    let (i, _) = scan_string(b, i)?;
    let i = skip_ws(b, i);
    if b.get(i) != Some(&b':') {
        return Err(Invalid { at: i });
    }
    Ok(skip_ws(b, i + 1))
}

/// Kinds of the open containers, one bit each (1 = object): the first 128 levels in a `u128`,
/// deeper ones (rare, but valid JSON has no depth limit) in a vector.
#[derive(Default)]
struct Containers {
    depth: usize,
    low: u128,
    high: Vec<bool>,
}

impl Containers {
    #[inline]
    fn push(&mut self, object: bool) {
        if self.depth < 128 {
            let bit = 1u128 << self.depth;
            if object {
                self.low |= bit;
            } else {
                self.low &= !bit;
            }
        } else {
            self.high.push(object);
        }
        self.depth += 1;
    }

    /// Whether the innermost open container is an object; `None` at the top level.
    #[inline]
    fn top(&self) -> Option<bool> {
        match self.depth {
            0 => None,
            d if d <= 128 => Some(self.low & (1u128 << (d - 1)) != 0),
            _ => self.high.last().copied(),
        }
    }

    #[inline]
    fn pop(&mut self) {
        if self.depth > 128 {
            self.high.pop();
        }
        self.depth = self.depth.saturating_sub(1);
    }
}

/// Scans one JSON value starting exactly at `i` (no leading whitespace). Returns the index just
/// after the value. Like serde_json's `ignore_value`, there is no nesting limit; the state is
/// one bit per level and no recursion is involved.
pub(crate) fn scan_value(b: &[u8], mut i: usize) -> Scan {
    let mut open = Containers::default();
    'value: loop {
        match b.get(i) {
            Some(b'"') => i = scan_string(b, i)?.0,
            Some(b'{') => {
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b'}') {
                    i += 1;
                } else {
                    open.push(true);
                    i = key_colon(b, i)?;
                    continue 'value;
                }
            }
            Some(b'[') => {
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b']') {
                    i += 1;
                } else {
                    open.push(false);
                    continue 'value;
                }
            }
            Some(b't') => i = literal(b, i, b"true")?,
            Some(b'f') => i = literal(b, i, b"false")?,
            Some(b'n') => i = literal(b, i, b"null")?,
            Some(b'-' | b'0'..=b'9') => i = scan_number(b, i)?,
            _ => return Err(Invalid { at: i }),
        }
        // A value is complete: close containers until one continues with `,`.
        while let Some(in_object) = open.top() {
            i = skip_ws(b, i);
            match b.get(i) {
                Some(b',') => {
                    i = skip_ws(b, i + 1);
                    if in_object {
                        i = key_colon(b, i)?;
                    }
                    continue 'value;
                }
                Some(b'}') if in_object => {
                    i += 1;
                    open.pop();
                }
                Some(b']') if !in_object => {
                    i += 1;
                    open.pop();
                }
                _ => return Err(Invalid { at: i }),
            }
        }
        return Ok(i);
    }
}

/// True if `text` is exactly one JSON value surrounded by optional whitespace.
#[cfg(test)]
pub(crate) fn is_valid(text: &str) -> bool {
    let b = text.as_bytes();
    let start = skip_ws(b, 0);
    matches!(scan_value(b, start), Ok(end) if skip_ws(b, end) == b.len())
}

/// serde_json's private name for its raw-value protocol.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// A deserializer that presents already-validated JSON text through serde_json's raw-value
/// protocol, so a `&RawValue` can borrow it without validating it a second time.
struct Prevalidated<'a>(&'a str);

impl<'de> Deserializer<'de> for Prevalidated<'de> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        if name != RAW_VALUE_TOKEN {
            return Err(de::Error::custom("not a raw value"));
        }
        let entry = (
            RAW_VALUE_TOKEN,
            BorrowedStrDeserializer::<Self::Error>::new(self.0),
        );
        visitor.visit_map(MapDeserializer::new(std::iter::once(entry)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// Borrows JSON text that [`scan_value`] accepted as a `&RawValue`.
///
/// Uses serde_json's raw-value protocol directly (no second validation pass). Should a future
/// serde_json change that private protocol, this falls back to validating with serde_json, so it
/// stays correct, only slower (a unit test notices).
pub(crate) fn raw_value(valid: &str) -> Option<&RawValue> {
    fast_raw_value(valid).or_else(|| serde_json::from_str(valid).ok())
}

fn fast_raw_value(valid: &str) -> Option<&RawValue> {
    <&RawValue>::deserialize(Prevalidated(valid)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::de::IgnoredAny;

    fn serde_accepts(text: &str) -> bool {
        serde_json::from_str::<IgnoredAny>(text).is_ok()
    }

    #[test]
    fn raw_value_fast_path_works() {
        let raw =
            fast_raw_value(r#"{"a":[1,"x"]}"#).expect("serde_json raw-value protocol changed");
        assert_eq!(raw.get(), r#"{"a":[1,"x"]}"#);
        assert_eq!(raw_value("[ 1 ]").unwrap().get(), "[ 1 ]");
    }

    #[test]
    fn accepts_and_rejects_like_serde_json() {
        let cases = [
            "0",
            "-0",
            "1.5",
            "1e5",
            "1E+5",
            "-1.5e-5",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "1e+",
            "+1",
            "--1",
            "true",
            "false",
            "null",
            "nul",
            "tru",
            "nullx",
            "\"\"",
            "\"a\\u00e9\\n\"",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\u12g4\"",
            "\"\u{1}\"",
            "\"\t\"",
            "\"\u{7f}\"",
            "\"é\"",
            "[]",
            "[ ]",
            "[1,]",
            "[,1]",
            "[1 2]",
            "{}",
            "{ }",
            "{\"a\":1}",
            "{\"a\" : 1 , \"b\":[]}",
            "{\"a\"}",
            "{\"a\":}",
            "{a:1}",
            "{\"a\":1,}",
            "{,}",
            "[{\"a\":[{}]}]",
            "[1]]",
            "[[1]",
            " 1 ",
            "\n[\r\t]\n",
            "",
            " ",
            "1 2",
            "\"abcdefghijklmnopqrstuvwxyz0123456789\"",
            "\"abcdefgh\\\"ijklmnop\"",
            "\"unterminated",
            "\"abcdefghijk",
            "{\"a\":1}}",
        ];
        for case in cases {
            assert_eq!(is_valid(case), serde_accepts(case), "{case:?}");
        }
    }

    #[test]
    fn deep_nesting_like_serde_json() {
        for depth in [1usize, 127, 128, 129, 200, 5000] {
            for (open, close) in [("[", "]"), ("{\"k\":", "}")] {
                let text = format!("{}1{}", open.repeat(depth), close.repeat(depth));
                assert!(is_valid(&text), "depth {depth} {open}");
                assert_eq!(
                    is_valid(&text),
                    serde_accepts(&text),
                    "depth {depth} {open}"
                );
                let unbalanced = format!("{}1{}", open.repeat(depth), close.repeat(depth - 1));
                assert!(!is_valid(&unbalanced));
                let mixed = format!("{}1{}]", "[{\"k\":".repeat(depth), "}]".repeat(depth));
                assert_eq!(
                    is_valid(&mixed),
                    serde_accepts(&mixed),
                    "mixed depth {depth}"
                );
            }
        }
    }

    #[test]
    fn string_escape_detection() {
        let b = br#""plain string that is long" "with \"escape\"""#;
        assert_eq!(scan_string(b, 0), Ok((27, false)));
        assert_eq!(scan_string(b, 28), Ok((b.len(), true)));
        assert!(scan_string(b"\"abc", 0).is_err());
    }

    fn json_fragment() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("1".to_string()),
            Just("-0.5e+3".to_string()),
            Just("null".to_string()),
            Just("true".to_string()),
            "\"[a-z\\\\\"é ]{0,12}\"",
            "[0-9.eE+-]{1,6}",
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec(("[a-z]{0,3}", inner), 0..5).prop_map(|v| {
                    let members: Vec<String> =
                        v.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn differential_on_generated_json(text in json_fragment()) {
            prop_assert_eq!(is_valid(&text), serde_accepts(&text), "{}", text);
        }

        #[test]
        fn differential_on_mutated_json(text in json_fragment(), at in any::<usize>(), byte in "[\\[\\]{}\",:0-9a-z \\\\\n\u{1}]") {
            let mut text = text;
            let at = at % (text.len() + 1);
            if text.is_char_boundary(at) {
                text.insert_str(at, &byte);
            }
            prop_assert_eq!(is_valid(&text), serde_accepts(&text), "{:?}", text);
        }

        #[test]
        fn differential_on_arbitrary_text(text in "[\\[\\]{}\",:.0-9eE+a-z \\\\\t\n\u{0}-\u{1f}é-]{0,24}") {
            prop_assert_eq!(is_valid(&text), serde_accepts(&text), "{:?}", text);
        }
    }
}
