//! Request ids, kept as the raw JSON text the peer sent so they are echoed back byte-exactly.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// What kind of JSON value an id is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdKind {
    /// A JSON number, e.g. `1`, `-0`, `1.0` or `12345678901234567890`.
    Number,
    /// A JSON string, e.g. `"abc"` (raw text includes the quotes and any escapes).
    String,
    /// `null`: only meaningful in error responses that could not identify a request.
    Null,
}

/// Kind of an already validated raw JSON text, or `None` if it is not a number, string or null.
fn kind_of_valid(raw: &str) -> Option<IdKind> {
    match raw.as_bytes().first()? {
        b'"' => Some(IdKind::String),
        b'n' => Some(IdKind::Null),
        b'-' | b'0'..=b'9' => Some(IdKind::Number),
        _ => None,
    }
}

/// Validates that `raw` is exactly one JSON number, string or null with no surrounding whitespace.
fn validate(raw: &str) -> Option<IdKind> {
    let kind = kind_of_valid(raw)?;
    let parsed: &RawValue = serde_json::from_str(raw).ok()?;
    (parsed.get().len() == raw.len()).then_some(kind)
}

/// Numeric value of the raw text of a JSON number, if it is a non-negative integer that fits a `u64`
/// (`5`, `5.0`, `5e0` and `-0` all count; `5.5` and `-1` do not).
fn number_as_u64(raw: &str) -> Option<u64> {
    let bytes = raw.as_bytes();
    if !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit) {
        // Plain integer (JSON forbids leading zeros, so this is canonical unless "0").
        return raw.parse().ok();
    }
    if !bytes.iter().any(|b| matches!(b, b'.' | b'e' | b'E' | b'-')) {
        return None;
    }
    let f: f64 = raw.parse().ok()?;
    // Only integral values that an f64 represents exactly (below 2^53) are accepted.
    if f.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(&f) {
        Some(f as u64)
    } else {
        None
    }
}

/// A borrowed request id: the raw JSON text of a number, string or `null`, exactly as received.
///
/// Two ids are equal when their raw texts are equal, so `1` and `1.0` (or `"A"` and `"\u0041"`) are
/// different ids. [`Id::as_u64`] gives the numeric value when that is what matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id<'a> {
    raw: &'a str,
}

impl<'a> Id<'a> {
    /// The `null` id.
    pub const NULL: Id<'static> = Id { raw: "null" };

    /// Validates `raw` as the text of a JSON number, string or `null` (no surrounding whitespace).
    pub fn from_raw(raw: &'a str) -> Option<Id<'a>> {
        validate(raw).map(|_| Id { raw })
    }

    /// Builds an id from the raw text of an already validated JSON value, if it has an id's kind.
    pub(crate) fn from_valid_raw(raw: &'a str) -> Option<Id<'a>> {
        kind_of_valid(raw).map(|_| Id { raw })
    }

    /// The raw JSON text, e.g. `1`, `"abc"` or `null`.
    pub fn as_raw(&self) -> &'a str {
        self.raw
    }

    /// Which kind of JSON value this id is.
    pub fn kind(&self) -> IdKind {
        kind_of_valid(self.raw).unwrap_or(IdKind::Null)
    }

    /// True for the `null` id.
    pub fn is_null(&self) -> bool {
        self.kind() == IdKind::Null
    }

    /// The numeric value, if this is a JSON number equal to an integer in `0..=u64::MAX`
    /// (fractions and exponents are accepted when exact below 2^53). Strings are never numbers.
    pub fn as_u64(&self) -> Option<u64> {
        match self.kind() {
            IdKind::Number => number_as_u64(self.raw),
            _ => None,
        }
    }

    /// The decoded string value, if this is a JSON string id.
    pub fn as_str(&self) -> Option<Cow<'a, str>> {
        if self.kind() != IdKind::String {
            return None;
        }
        let inner = self.raw.get(1..self.raw.len().saturating_sub(1))?;
        if inner.contains('\\') {
            serde_json::from_str::<String>(self.raw)
                .ok()
                .map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(inner))
        }
    }

    /// An owned copy of this id.
    #[allow(clippy::should_implement_trait)]
    pub fn to_owned(&self) -> OwnedId {
        OwnedId::from_valid_raw(self.raw)
    }
}

impl fmt::Display for Id<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw)
    }
}

impl PartialEq<OwnedId> for Id<'_> {
    fn eq(&self, other: &OwnedId) -> bool {
        self.raw.as_bytes() == other.raw_bytes()
    }
}

/// Bytes stored inline by [`OwnedId`] before it falls back to the heap.
const INLINE_CAP: usize = 22;

#[derive(Clone)]
enum Repr {
    /// Short ids (every numeric id, most string ids) live inline: no allocation.
    Inline {
        len: u8,
        buf: [u8; INLINE_CAP],
    },
    Heap(Box<str>),
}

/// An owned request id: the raw JSON text of a number, string or `null`.
///
/// Equality, ordering and hashing are those of the raw text. Ids up to 22 bytes of raw text
/// (all `u64` ids and most string ids) are stored without allocating.
#[derive(Clone)]
pub struct OwnedId(Repr);

impl OwnedId {
    /// The `null` id.
    pub fn null() -> OwnedId {
        OwnedId::from_valid_raw("null")
    }

    /// A numeric id, e.g. `OwnedId::from_u64(5)` has raw text `5`.
    pub fn from_u64(n: u64) -> OwnedId {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        let mut n = n;
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut buf = [0u8; INLINE_CAP];
        let len = digits.len() - i;
        buf[..len].copy_from_slice(&digits[i..]);
        OwnedId(Repr::Inline {
            len: len as u8,
            buf,
        })
    }

    /// A string id holding `s` (JSON-escaped as needed).
    pub fn from_string(s: &str) -> OwnedId {
        let raw = serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""));
        OwnedId::from_valid_raw(&raw)
    }

    /// Validates `raw` as the text of a JSON number, string or `null` (no surrounding whitespace).
    pub fn parse(raw: &str) -> Option<OwnedId> {
        Id::from_raw(raw).map(|id| id.to_owned())
    }

    fn from_valid_raw(raw: &str) -> OwnedId {
        if raw.len() <= INLINE_CAP {
            let mut buf = [0u8; INLINE_CAP];
            buf[..raw.len()].copy_from_slice(raw.as_bytes());
            OwnedId(Repr::Inline {
                len: raw.len() as u8,
                buf,
            })
        } else {
            OwnedId(Repr::Heap(raw.into()))
        }
    }

    /// The raw JSON text, e.g. `1`, `"abc"` or `null`.
    pub fn as_raw(&self) -> &str {
        match &self.0 {
            // Inline bytes are always copied from a `&str` at a char boundary, so this never fails.
            Repr::Inline { len, buf } => {
                std::str::from_utf8(&buf[..usize::from(*len)]).unwrap_or("null")
            }
            Repr::Heap(s) => s,
        }
    }

    /// The raw JSON text as bytes, for comparisons: unlike [`as_raw`](Self::as_raw) it does not
    /// re-check the inline bytes as UTF-8, which dominated id-keyed map lookups.
    pub(crate) fn raw_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, buf } => buf.get(..usize::from(*len)).unwrap_or_default(),
            Repr::Heap(s) => s.as_bytes(),
        }
    }

    /// A borrowed view of this id.
    pub fn as_id(&self) -> Id<'_> {
        Id { raw: self.as_raw() }
    }

    /// Which kind of JSON value this id is.
    pub fn kind(&self) -> IdKind {
        self.as_id().kind()
    }

    /// True for the `null` id.
    pub fn is_null(&self) -> bool {
        self.as_id().is_null()
    }

    /// The numeric value; see [`Id::as_u64`].
    pub fn as_u64(&self) -> Option<u64> {
        self.as_id().as_u64()
    }
}

impl From<Id<'_>> for OwnedId {
    fn from(id: Id<'_>) -> OwnedId {
        id.to_owned()
    }
}

impl From<u64> for OwnedId {
    fn from(n: u64) -> OwnedId {
        OwnedId::from_u64(n)
    }
}

impl PartialEq for OwnedId {
    fn eq(&self, other: &OwnedId) -> bool {
        self.raw_bytes() == other.raw_bytes()
    }
}

impl Eq for OwnedId {}

impl PartialEq<Id<'_>> for OwnedId {
    fn eq(&self, other: &Id<'_>) -> bool {
        self.raw_bytes() == other.as_raw().as_bytes()
    }
}

impl PartialOrd for OwnedId {
    fn partial_cmp(&self, other: &OwnedId) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OwnedId {
    fn cmp(&self, other: &OwnedId) -> Ordering {
        // Byte-wise, which is exactly the order of the raw texts as `str`s.
        self.raw_bytes().cmp(other.raw_bytes())
    }
}

impl Hash for OwnedId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_raw().hash(state)
    }
}

impl fmt::Debug for OwnedId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnedId({})", self.as_raw())
    }
}

impl fmt::Display for OwnedId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_raw())
    }
}

impl Serialize for OwnedId {
    /// Serialises the raw text verbatim (with serde_json; other formats see a raw-value token).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw: &RawValue = serde_json::from_str(self.as_raw()).map_err(S::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for OwnedId {
    /// Accepts a JSON number, string or null (serde_json deserializers only).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Id::from_valid_raw(raw.get())
            .map(|id| id.to_owned())
            .ok_or_else(|| D::Error::custom("an id must be a number, a string or null"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_u64_formats_decimal() {
        assert_eq!(OwnedId::from_u64(0).as_raw(), "0");
        assert_eq!(OwnedId::from_u64(42).as_raw(), "42");
        assert_eq!(OwnedId::from_u64(u64::MAX).as_raw(), "18446744073709551615");
        assert_eq!(OwnedId::from_u64(7).as_u64(), Some(7));
    }

    #[test]
    fn raw_validation() {
        for ok in [
            "0",
            "-0",
            "1.0",
            "1e3",
            "\"a\"",
            "\"a\\u0041\"",
            "null",
            "12345678901234567890",
        ] {
            assert!(Id::from_raw(ok).is_some(), "{ok}");
        }
        for bad in [
            "", " 1", "1 ", "true", "{}", "[]", "01", "\"a", "nul", "1,2",
        ] {
            assert!(Id::from_raw(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn numeric_matching() {
        let v = |raw: &str| Id::from_raw(raw).unwrap().as_u64();
        assert_eq!(v("5"), Some(5));
        assert_eq!(v("5.0"), Some(5));
        assert_eq!(v("5e0"), Some(5));
        assert_eq!(v("-0"), Some(0));
        assert_eq!(v("5.5"), None);
        assert_eq!(v("-1"), None);
        assert_eq!(v("\"5\""), None);
        assert_eq!(v("null"), None);
        assert_eq!(v("18446744073709551615"), Some(u64::MAX));
        assert_eq!(v("18446744073709551616"), None);
        assert_eq!(v("1e300"), None);
    }

    #[test]
    fn inline_and_heap_compare_by_raw_text() {
        let short = OwnedId::from_string("abc");
        let long = OwnedId::from_string("a fairly long string id that does not fit inline");
        assert_eq!(short.as_raw(), "\"abc\"");
        assert_eq!(short.kind(), IdKind::String);
        assert_eq!(long.clone(), long);
        assert_ne!(short, long);
        assert_eq!(short.as_id().as_str().as_deref(), Some("abc"));
        let escaped = Id::from_raw("\"a\\u0041\"").unwrap();
        assert_eq!(escaped.as_str().as_deref(), Some("aA"));
        assert_ne!(escaped.to_owned(), OwnedId::from_string("aA"));
    }

    #[test]
    fn serde_round_trip() {
        let id: OwnedId = serde_json::from_str("12345678901234567890").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "12345678901234567890");
        let id: OwnedId = serde_json::from_str(" \"x\" ").unwrap();
        assert_eq!(id.as_raw(), "\"x\"");
        assert!(serde_json::from_str::<OwnedId>("[1]").is_err());
    }
}
