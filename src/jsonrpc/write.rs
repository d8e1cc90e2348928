//! Writers appending compact JSON-RPC bodies to a `Vec<u8>` (no framing).
//!
//! Bodies are assembled by hand around the raw pieces (id text, raw results, serialised params):
//! no intermediate `serde_json::Value`. Every body written here is a single line (it never
//! contains a raw `\n` or `\r`), so it can go straight into an NDJSON frame: raw pieces are copied
//! verbatim unless they contain a line break, in which case their insignificant whitespace is
//! removed.

use serde::Serialize;
use serde_json::value::RawValue;

use super::error::ErrorObject;
use super::id::OwnedId;

/// Appends `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
pub fn write_result(out: &mut Vec<u8>, id: &OwnedId, result: &RawValue) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.raw_bytes());
    out.extend_from_slice(b",\"result\":");
    push_raw(out, result.get());
    out.push(b'}');
}

/// Appends `{"jsonrpc":"2.0","id":<id>,"result":<result serialised>}`.
///
/// On a serialisation error nothing is appended.
pub fn write_result_value<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    id: &OwnedId,
    result: &T,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.raw_bytes());
    out.extend_from_slice(b",\"result\":");
    let value_start = out.len();
    if let Err(e) = serde_json::to_writer(&mut *out, result) {
        out.truncate(start);
        return Err(e);
    }
    make_single_line(out, value_start);
    out.push(b'}');
    Ok(())
}

/// Appends `{"jsonrpc":"2.0","id":<id or null>,"error":<error>}`.
pub fn write_error(out: &mut Vec<u8>, id: Option<&OwnedId>, error: &ErrorObject) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.map_or(&b"null"[..], |id| id.raw_bytes()));
    out.extend_from_slice(b",\"error\":{\"code\":");
    out.extend_from_slice(itoa(error.code, &mut [0u8; 20]));
    out.extend_from_slice(b",\"message\":");
    push_string(out, &error.message);
    if let Some(data) = &error.data {
        out.extend_from_slice(b",\"data\":");
        push_raw(out, data.get());
    }
    out.extend_from_slice(b"}}");
}

/// Appends `{"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<params>}`.
///
/// `params` serialising to `null` (e.g. `&()` or `None`) omits the member, as JSON-RPC requires
/// params to be an object or an array when present. On a serialisation error nothing is appended.
pub fn write_request<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    id: &OwnedId,
    method: &str,
    params: &T,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.raw_bytes());
    out.extend_from_slice(b",\"method\":");
    push_string(out, method);
    push_params(out, start, params)
}

/// Appends `{"jsonrpc":"2.0","method":<method>,"params":<params>}`.
///
/// `params` serialising to `null` omits the member. On a serialisation error nothing is appended.
pub fn write_notification<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    method: &str,
    params: &T,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    push_string(out, method);
    push_params(out, start, params)
}

/// Appends a request whose params are already raw JSON (an object or an array).
pub fn write_request_raw(out: &mut Vec<u8>, id: &OwnedId, method: &str, params: Option<&RawValue>) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.raw_bytes());
    out.extend_from_slice(b",\"method\":");
    push_string(out, method);
    push_raw_params(out, params);
}

/// Appends a notification whose params are already raw JSON (an object or an array).
pub fn write_notification_raw(out: &mut Vec<u8>, method: &str, params: Option<&RawValue>) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    push_string(out, method);
    push_raw_params(out, params);
}

/// Appends a JSON array joining already written bodies: `[b1,b2,...]`.
///
/// Nothing is appended when `bodies` is empty (JSON-RPC sends no response to a batch that needs
/// none); returns whether anything was appended.
pub fn write_batch<'b, I>(out: &mut Vec<u8>, bodies: I) -> bool
where
    I: IntoIterator<Item = &'b [u8]>,
{
    let mut any = false;
    for body in bodies {
        out.push(if any { b',' } else { b'[' });
        out.extend_from_slice(body);
        any = true;
    }
    if any {
        out.push(b']');
    }
    any
}

fn push_raw_params(out: &mut Vec<u8>, params: Option<&RawValue>) {
    if let Some(params) = params {
        out.extend_from_slice(b",\"params\":");
        push_raw(out, params.get());
    }
    out.push(b'}');
}

fn push_params<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    start: usize,
    params: &T,
) -> Result<(), serde_json::Error> {
    let member_start = out.len();
    out.extend_from_slice(b",\"params\":");
    let value_start = out.len();
    if let Err(e) = serde_json::to_writer(&mut *out, params) {
        out.truncate(start);
        return Err(e);
    }
    if &out[value_start..] == b"null" {
        out.truncate(member_start);
    } else {
        make_single_line(out, value_start);
    }
    out.push(b'}');
    Ok(())
}

/// Appends a JSON string literal.
fn push_string(out: &mut Vec<u8>, s: &str) {
    let plain = s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\');
    if plain {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Serialising a `str` to a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// Appends raw JSON text, removing insignificant whitespace if it contains a line break.
fn push_raw(out: &mut Vec<u8>, raw: &str) {
    let start = out.len();
    out.extend_from_slice(raw.as_bytes());
    make_single_line(out, start);
}

/// If `out[start..]` (valid JSON) contains a line break, removes all whitespace outside strings.
fn make_single_line(out: &mut Vec<u8>, start: usize) {
    if memchr::memchr2(b'\n', b'\r', &out[start..]).is_none() {
        return;
    }
    let mut write = start;
    let mut in_string = false;
    let mut escaped = false;
    for read in start..out.len() {
        let b = out[read];
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            continue;
        } else if b == b'"' {
            in_string = true;
        }
        out[write] = b;
        write += 1;
    }
    out.truncate(write);
}

/// Formats an `i64` in decimal into `buf`, returning the written digits.
fn itoa(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::code;

    fn raw(s: &str) -> &RawValue {
        serde_json::from_str(s).unwrap()
    }

    fn text(out: &[u8]) -> &str {
        std::str::from_utf8(out).unwrap()
    }

    #[test]
    fn result_and_error_bodies() {
        let mut out = Vec::new();
        write_result(&mut out, &OwnedId::from_u64(3), raw(r#"{"ok":true}"#));
        assert_eq!(
            text(&out),
            r#"{"jsonrpc":"2.0","id":3,"result":{"ok":true}}"#
        );
        out.clear();
        write_error(&mut out, None, &ErrorObject::parse_error());
        assert_eq!(
            text(&out),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
        );
        out.clear();
        let e = ErrorObject::new(i64::MIN, "q\"\n").with_data(raw("[1,\n 2]").to_owned());
        write_error(&mut out, Some(&OwnedId::from_string("x")), &e);
        assert_eq!(
            text(&out),
            r#"{"jsonrpc":"2.0","id":"x","error":{"code":-9223372036854775808,"message":"q\"\n","data":[1,2]}}"#
        );
        let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(back["error"]["code"], i64::MIN);
        assert_eq!(ErrorObject::new(code::INTERNAL_ERROR, "").code, -32603);
    }

    #[test]
    fn requests_and_notifications_omit_null_params() {
        let mut out = Vec::new();
        write_request(&mut out, &OwnedId::from_u64(0), "connect", &()).unwrap();
        assert_eq!(text(&out), r#"{"jsonrpc":"2.0","id":0,"method":"connect"}"#);
        out.clear();
        write_notification(&mut out, "session.event", &serde_json::json!({"a": "b\nc"})).unwrap();
        assert_eq!(
            text(&out),
            r#"{"jsonrpc":"2.0","method":"session.event","params":{"a":"b\nc"}}"#
        );
        out.clear();
        write_notification_raw(&mut out, "m", Some(raw("{ \"a\" :\r\n [ 1 , \"x y\" ] }")));
        assert_eq!(
            text(&out),
            r#"{"jsonrpc":"2.0","method":"m","params":{"a":[1,"x y"]}}"#
        );
        out.clear();
        write_request_raw(&mut out, &OwnedId::from_u64(1), "m", None);
        assert_eq!(text(&out), r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#);
    }

    #[test]
    fn serialisation_errors_append_nothing() {
        use std::collections::HashMap;
        let mut bad = HashMap::new();
        bad.insert(vec![1u8], 1); // non-string map keys cannot be serialised to JSON
        let mut out = b"keep".to_vec();
        assert!(write_request(&mut out, &OwnedId::from_u64(1), "m", &bad).is_err());
        assert!(write_notification(&mut out, "m", &bad).is_err());
        assert!(write_result_value(&mut out, &OwnedId::from_u64(1), &bad).is_err());
        assert_eq!(out, b"keep");
    }

    #[test]
    fn batch_joins_bodies() {
        let mut out = Vec::new();
        assert!(!write_batch(&mut out, std::iter::empty()));
        assert!(out.is_empty());
        assert!(write_batch(&mut out, [&b"{}"[..], &b"{\"a\":1}"[..]]));
        assert_eq!(text(&out), r#"[{},{"a":1}]"#);
    }

    #[test]
    fn raw_value_with_newlines_becomes_single_line() {
        let mut out = Vec::new();
        write_result(
            &mut out,
            &OwnedId::from_u64(1),
            raw("{\n  \"s\": \"a \\\" b\\\\\",\n  \"t\": [ ]\n}"),
        );
        assert_eq!(
            text(&out),
            r#"{"jsonrpc":"2.0","id":1,"result":{"s":"a \" b\\","t":[]}}"#
        );
    }
}
