//! A narrow, allocation-free JSON reader for the stream parsers' fast path.
//!
//! The stream parsers deserialise every chunk into their lenient structs (`Chunk`, `Event`)
//! with serde_json. That is the reference behaviour. This reader fills the *same* structs
//! from the same text, with the same lenient leaves ([`LStr`], [`LU64`], [`LObj`], [`LSeq`],
//! [`LArgs`]), but it only accepts input it is certain serde_json would accept and read the
//! same way: anything unusual — an escape in a key, a duplicated known field, a fraction or
//! exponent, a negative or overlong number where a count is read, a `\u` surrogate it does
//! not pair, nesting deeper than [`MAX_DEPTH`], an `error` member that is not `null`, a
//! top-level value that is not an object, trailing text — makes it give up with [`Bail`],
//! and the caller parses the text with serde_json instead. So the fast path never changes a
//! result; it only skips serde's per-field dispatch for the chunks servers actually send.
//! (`src/model/fast_equiv_tests.rs` checks both agree on generated chunks.)

use std::borrow::Cow;

use super::lenient::{LArgs, LObj, LSeq, LStr, LU64};

/// The fast reader declined the input; parse it with serde_json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bail;

/// What the fast readers return.
pub(crate) type Fast<T> = Result<T, Bail>;

/// Deepest nesting the reader follows (serde_json's own limit is 128).
pub(crate) const MAX_DEPTH: u32 = 32;

/// A cursor over one JSON text.
pub(crate) struct Reader<'a> {
    text: &'a str,
    pos: usize,
    depth: u32,
}

/// A set of the known fields seen in one object (duplicates make serde fail, so they bail).
#[derive(Default)]
pub(crate) struct Seen(u32);

impl Seen {
    /// Marks field `bit` seen; [`Bail`] when it was already.
    pub(crate) fn once(&mut self, bit: u32) -> Fast<()> {
        let mask = 1 << bit;
        if self.0 & mask != 0 {
            return Err(Bail);
        }
        self.0 |= mask;
        Ok(())
    }
}

/// An integer as the lenient count reader needs it.
enum Int {
    /// A non-negative integer that fits comfortably in a `u64`.
    Unsigned(u64),
    /// A negative integer (a count reads it as absent).
    Negative,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `text`.
    pub(crate) fn new(text: &'a str) -> Self {
        Reader {
            text,
            pos: 0,
            depth: 0,
        }
    }

    /// A reader at byte `pos` of `text`.
    pub(crate) fn at(text: &'a str, pos: usize) -> Self {
        Reader {
            text,
            pos,
            depth: 0,
        }
    }

    /// The current byte offset.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn ws(&mut self) {
        let b = self.bytes();
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next significant byte (after whitespace), not consumed.
    pub(crate) fn peek(&mut self) -> Fast<u8> {
        self.ws();
        self.bytes().get(self.pos).copied().ok_or(Bail)
    }

    fn eat(&mut self, byte: u8) -> Fast<()> {
        if self.peek()? == byte {
            self.pos += 1;
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// Nothing but whitespace is left.
    pub(crate) fn end(&mut self) -> Fast<()> {
        self.ws();
        if self.pos == self.text.len() {
            Ok(())
        } else {
            Err(Bail)
        }
    }

    fn enter(&mut self) -> Fast<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Bail);
        }
        Ok(())
    }

    /// Reads an object, calling `member(reader, key)` for each member; `member` must read
    /// (or skip) exactly the value. Keys with escapes bail.
    pub(crate) fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a str) -> Fast<()>,
    ) -> Fast<()> {
        self.eat(b'{')?;
        self.enter()?;
        if self.peek()? == b'}' {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            if self.peek()? != b'"' {
                return Err(Bail);
            }
            let key = self.plain_key()?;
            self.eat(b':')?;
            member(self, key)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(Bail),
            }
        }
    }

    /// Reads an array, calling `element(reader)` for each element.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Fast<()>) -> Fast<()> {
        self.eat(b'[')?;
        self.enter()?;
        if self.peek()? == b']' {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            element(self)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(Bail),
            }
        }
    }

    /// A key at `"`, without escapes (those bail).
    fn plain_key(&mut self) -> Fast<&'a str> {
        let start = self.pos + 1;
        let end = start + plain_run(&self.bytes()[start..]);
        if self.bytes().get(end) != Some(&b'"') {
            return Err(Bail);
        }
        self.pos = end + 1;
        Ok(&self.text[start..end])
    }

    /// A string at `"`: borrowed when it has no escapes, else decoded.
    pub(crate) fn string(&mut self) -> Fast<Cow<'a, str>> {
        let start = self.pos + 1;
        let bytes = self.bytes();
        let mut i = start + plain_run(&bytes[start..]);
        match bytes.get(i) {
            Some(b'"') => {
                self.pos = i + 1;
                return Ok(Cow::Borrowed(&self.text[start..i]));
            }
            Some(b'\\') => {}
            _ => return Err(Bail),
        }
        let mut out = String::with_capacity(i - start + 16);
        out.push_str(&self.text[start..i]);
        loop {
            match bytes.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    let (c, len) = escape(&bytes[i..])?;
                    out.push(c);
                    i += len;
                }
                _ => return Err(Bail),
            }
            let run = plain_run(&bytes[i..]);
            out.push_str(&self.text[i..i + run]);
            i += run;
        }
    }

    /// Skips a string at `"`, checking it as serde_json would (escapes valid, no control
    /// characters; surrogate escapes bail).
    fn skip_string(&mut self) -> Fast<()> {
        let bytes = self.bytes();
        let mut i = self.pos + 1;
        loop {
            i += plain_run(&bytes[i..]);
            match bytes.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(());
                }
                Some(b'\\') => i += escape(&bytes[i..])?.1,
                _ => return Err(Bail),
            }
        }
    }

    /// An integer; fractions, exponents, leading zeros and more than 18 digits bail.
    fn integer(&mut self) -> Fast<Int> {
        let bytes = self.bytes();
        let negative = bytes.get(self.pos) == Some(&b'-');
        let start = self.pos + usize::from(negative);
        let digits = bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = start + digits;
        if digits == 0
            || digits > 18
            || (digits > 1 && bytes[start] == b'0')
            || matches!(bytes.get(end), Some(b'.' | b'e' | b'E'))
        {
            return Err(Bail);
        }
        self.pos = end;
        if negative {
            if bytes[start..end].iter().all(|&b| b == b'0') {
                return Err(Bail); // `-0` is a float to serde_json
            }
            return Ok(Int::Negative);
        }
        let value = bytes[start..end]
            .iter()
            .fold(0u64, |v, &b| v * 10 + u64::from(b - b'0'));
        Ok(Int::Unsigned(value))
    }

    fn literal(&mut self, word: &[u8]) -> Fast<()> {
        if self.bytes()[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// Skips any value, checking it.
    pub(crate) fn skip(&mut self) -> Fast<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' => self.object(|r, _| r.skip()),
            b'[' => self.array(Self::skip),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.integer().map(drop),
            _ => Err(Bail),
        }
    }

    /// [`LStr`]: a string, anything else absent.
    pub(crate) fn lstr(&mut self) -> Fast<LStr<'a>> {
        if self.peek()? == b'"' {
            Ok(LStr(Some(self.string()?)))
        } else {
            self.skip().map(|()| LStr(None))
        }
    }

    /// [`LU64`]: a non-negative integer or a digit string; anything else absent.
    pub(crate) fn lu64(&mut self) -> Fast<LU64> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => Ok(LU64(match self.integer()? {
                Int::Unsigned(v) => Some(v),
                Int::Negative => None,
            })),
            b'"' => Ok(LU64(self.string()?.trim().parse().ok())),
            _ => self.skip().map(|()| LU64(None)),
        }
    }

    /// [`LObj`]: an object read by `read` (which calls [`Reader::object`]); anything else
    /// absent.
    pub(crate) fn lobj<T>(&mut self, read: impl FnOnce(&mut Self) -> Fast<T>) -> Fast<LObj<T>> {
        if self.peek()? == b'{' {
            Ok(LObj(Some(read(self)?)))
        } else {
            self.skip().map(|()| LObj(None))
        }
    }

    /// [`LSeq`]: an array of elements read by `read`; anything else empty.
    pub(crate) fn lseq<T>(&mut self, mut read: impl FnMut(&mut Self) -> Fast<T>) -> Fast<LSeq<T>> {
        if self.peek()? != b'[' {
            return self.skip().map(|()| LSeq::default());
        }
        let mut items = smallvec::SmallVec::new();
        self.array(|r| {
            items.push(read(r)?);
            Ok(())
        })?;
        Ok(LSeq(items))
    }

    /// [`LArgs`]: a string's text, `null` absent, any other value its raw text.
    pub(crate) fn largs(&mut self) -> Fast<LArgs<'a>> {
        match self.peek()? {
            b'"' => Ok(LArgs(Some(self.string()?))),
            b'n' => self.literal(b"null").map(|()| LArgs(None)),
            _ => {
                let start = self.pos;
                self.skip()?;
                Ok(LArgs(Some(Cow::Borrowed(&self.text[start..self.pos]))))
            }
        }
    }

    /// An `Option<&RawValue>` member that is `null` (absent); any other value bails.
    pub(crate) fn null_only<T>(&mut self) -> Fast<Option<T>> {
        if self.peek()? == b'n' {
            self.literal(b"null").map(|()| None)
        } else {
            Err(Bail)
        }
    }
}

/// Length of the run of bytes that need no attention inside a string (not `"`, `\` or a
/// control character), eight at a time.
fn plain_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while let Some(word) = bytes.get(i..i + 8) {
        let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let quote = x ^ (ONES * u64::from(b'"'));
        let slash = x ^ (ONES * u64::from(b'\\'));
        // A byte is zero in `quote` / `slash`, or below 0x20 in `x`: its high bit is set in
        // `special` (bytes >= 0x80 are masked out by `!x`).
        let special =
            (quote.wrapping_sub(ONES) | slash.wrapping_sub(ONES) | x.wrapping_sub(ONES * 0x20))
                & !x
                & HIGHS;
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

/// The escape at the start of `bytes` (`\…`): its character and length. Surrogate escapes
/// are decoded only as a valid high + low pair; anything else bails.
fn escape(bytes: &[u8]) -> Fast<(char, usize)> {
    let c = match bytes.get(1) {
        Some(b'"') => '"',
        Some(b'\\') => '\\',
        Some(b'/') => '/',
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'n') => '\n',
        Some(b'r') => '\r',
        Some(b't') => '\t',
        Some(b'u') => {
            let high = hex4(bytes.get(2..6))?;
            if !(0xD800..0xE000).contains(&high) {
                return Ok((char::from_u32(high).ok_or(Bail)?, 6));
            }
            if high >= 0xDC00 || bytes.get(6..8) != Some(b"\\u") {
                return Err(Bail);
            }
            let low = hex4(bytes.get(8..12))?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(Bail);
            }
            let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
            return Ok((char::from_u32(c).ok_or(Bail)?, 12));
        }
        _ => return Err(Bail),
    };
    Ok((c, 2))
}

fn hex4(digits: Option<&[u8]>) -> Fast<u32> {
    let digits = digits.ok_or(Bail)?;
    digits.iter().try_fold(0u32, |v, &d| {
        let n = char::from(d).to_digit(16).ok_or(Bail)?;
        Ok(v * 16 + n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_run_stops_at_quotes_backslashes_and_control_characters() {
        for (text, run) in [
            ("", 0),
            ("abc", 3),
            ("abcdefghij\"", 10),
            ("abcdefgh\\", 8),
            ("ab\u{1}", 2),
            ("ééééé\"", 10),
            ("abcdefg\u{7f}x\"", 9),
        ] {
            assert_eq!(plain_run(text.as_bytes()), run, "{text:?}");
        }
    }

    #[test]
    fn strings_borrow_or_decode() {
        let mut r = Reader::new(r#""plain""#);
        assert!(matches!(r.string(), Ok(Cow::Borrowed("plain"))));
        let mut r = Reader::new(r#""a\nb\u00e9\ud83d\ude00\"""#);
        assert_eq!(r.string().unwrap(), "a\nbé😀\"");
        for bad in [r#""\ud800""#, r#""\q""#, "\"\u{1}\"", r#""\u12""#, "\"open"] {
            assert_eq!(Reader::new(bad).string(), Err(Bail), "{bad}");
        }
    }

    #[test]
    fn leaves_read_like_the_lenient_types() {
        let mut r = Reader::new(r#"[7, -3, "12", 1.5, null, {"a":[true]}]"#);
        let v = r.lseq(Reader::lu64);
        assert_eq!(v, Err(Bail), "a fraction bails");
        let mut r = Reader::new(r#"[7, -3, " 12 ", null, {"a":[true]}, false]"#);
        let v = r.lseq(Reader::lu64).unwrap();
        let v: Vec<_> = v.0.iter().map(|n| n.0).collect();
        assert_eq!(v, [Some(7), None, Some(12), None, None, None]);
        let mut r = Reader::new(r#"{"k": 1}"#);
        assert_eq!(r.largs().unwrap().0.as_deref(), Some(r#"{"k": 1}"#));
    }
}
