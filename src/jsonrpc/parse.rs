//! Borrowed, validating parse of JSON-RPC 2.0 bodies.

use std::borrow::Cow;
use std::fmt;

use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use super::error::ErrorObject;
use super::id::{Id, OwnedId};
use super::scan::{self, Invalid};

/// One parsed JSON-RPC message, borrowing from the body it was parsed from.
///
/// `params` and `result` stay raw JSON until a handler decodes them. Equality compares raw texts.
#[derive(Clone, Debug)]
pub enum Message<'a> {
    /// A request: the peer expects exactly one response with this id.
    Request {
        /// The request id, echoed byte-exactly in the response.
        id: Id<'a>,
        /// The method name (borrowed unless it contained escapes).
        method: Cow<'a, str>,
        /// The params (an object or an array), if present.
        params: Option<&'a RawValue>,
    },
    /// A notification: no id, no response.
    Notification {
        /// The method name (borrowed unless it contained escapes).
        method: Cow<'a, str>,
        /// The params (an object or an array), if present.
        params: Option<&'a RawValue>,
    },
    /// A response to one of our requests (or, with a `null` id, an error the peer could not
    /// attribute to a request).
    Response {
        /// The id of the request being answered; `null` when the peer could not tell.
        id: Id<'a>,
        /// `Ok(result)` or `Err(error object)`.
        outcome: Result<&'a RawValue, ErrorObject>,
    },
}

impl<'a> Message<'a> {
    /// The id of a request or response; `None` for a notification.
    pub fn id(&self) -> Option<Id<'a>> {
        match self {
            Message::Request { id, .. } | Message::Response { id, .. } => Some(*id),
            Message::Notification { .. } => None,
        }
    }

    /// The method of a request or notification; `None` for a response.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response { .. } => None,
        }
    }

    /// The params of a request or notification, if present.
    pub fn params(&self) -> Option<&'a RawValue> {
        match self {
            Message::Request { params, .. } | Message::Notification { params, .. } => *params,
            Message::Response { .. } => None,
        }
    }
}

impl PartialEq for Message<'_> {
    fn eq(&self, other: &Self) -> bool {
        fn raw(v: Option<&RawValue>) -> Option<&str> {
            v.map(RawValue::get)
        }
        match (self, other) {
            (
                Message::Request { id, method, params },
                Message::Request {
                    id: i2,
                    method: m2,
                    params: p2,
                },
            ) => id == i2 && method == m2 && raw(*params) == raw(*p2),
            (
                Message::Notification { method, params },
                Message::Notification {
                    method: m2,
                    params: p2,
                },
            ) => method == m2 && raw(*params) == raw(*p2),
            (
                Message::Response { id, outcome },
                Message::Response {
                    id: i2,
                    outcome: o2,
                },
            ) => {
                id == i2
                    && match (outcome, o2) {
                        (Ok(a), Ok(b)) => a.get() == b.get(),
                        (Err(a), Err(b)) => a == b,
                        _ => false,
                    }
            }
            _ => false,
        }
    }
}

/// Why a body (or one batch element) was not accepted, and what to answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The id to answer with: the request's id if one could be read, else `None` (`"id":null`).
    pub id: Option<OwnedId>,
    /// The error to answer with: `-32700 Parse error` or `-32600 Invalid Request`.
    pub error: ErrorObject,
    /// A human-readable reason for logs (not sent to the peer).
    pub detail: Cow<'static, str>,
}

impl Rejection {
    /// `-32700 Parse error` with id `null`.
    pub fn parse_error(detail: impl Into<Cow<'static, str>>) -> Rejection {
        Rejection {
            id: None,
            error: ErrorObject::parse_error(),
            detail: detail.into(),
        }
    }

    /// `-32600 Invalid Request` with the given id (`None` = `null`).
    pub fn invalid_request(id: Option<OwnedId>, detail: impl Into<Cow<'static, str>>) -> Rejection {
        Rejection {
            id,
            error: ErrorObject::invalid_request(),
            detail: detail.into(),
        }
    }

    /// Appends the error response body answering this rejection to `out`.
    pub fn write_response(&self, out: &mut Vec<u8>) {
        super::write::write_error(out, self.id.as_ref(), &self.error);
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.error, self.detail)
    }
}

impl std::error::Error for Rejection {}

/// What to do with a batch (a JSON array of messages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BatchPolicy {
    /// Refuse every batch as a whole, answering an array holding one `-32600` error with id `null`
    /// (as the ACP TypeScript SDK does). Neither protocol served here uses batches.
    #[default]
    Reject,
    /// Process batches as JSON-RPC 2.0 specifies.
    Allow,
}

/// The result of parsing one frame body.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed<'a> {
    /// A single message, or why it was rejected (answer the rejection with one error response).
    /// Invalid JSON, an empty array and a non-object top level all land here.
    Single(Result<Message<'a>, Rejection>),
    /// A batch: one entry per element, in order. Answer with one JSON array holding a response for
    /// each `Request` and each `Err`; send nothing if there are none. With
    /// [`BatchPolicy::Reject`] a batch is reported as a single `Err` so it is answered `[error]`.
    Batch(Vec<Result<Message<'a>, Rejection>>),
}

/// Parses a body with the default [`BatchPolicy::Reject`].
pub fn parse(body: &[u8]) -> Parsed<'_> {
    parse_with(body, BatchPolicy::Reject)
}

/// Parses a body (one frame, without framing) as a JSON-RPC 2.0 message or batch.
pub fn parse_with(body: &[u8], policy: BatchPolicy) -> Parsed<'_> {
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(_) => return Parsed::Single(Err(Rejection::parse_error("body is not UTF-8"))),
    };
    match first_byte(text) {
        Some(b'{') => Parsed::Single(parse_object(text)),
        Some(b'[') => parse_batch(text, policy),
        _ => Parsed::Single(Err(not_an_object(text))),
    }
}

/// Parses a body that must hold a single message (an array is rejected as `-32600`).
pub fn parse_single(body: &[u8]) -> Result<Message<'_>, Rejection> {
    let text =
        std::str::from_utf8(body).map_err(|_| Rejection::parse_error("body is not UTF-8"))?;
    match first_byte(text) {
        Some(b'{') => parse_object(text),
        _ => Err(not_an_object(text)),
    }
}

fn first_byte(text: &str) -> Option<u8> {
    text.bytes()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// Rejection for a top level or batch element that is not an object.
fn not_an_object(text: &str) -> Rejection {
    if serde_json::from_str::<IgnoredAny>(text).is_ok() {
        Rejection::invalid_request(None, "a message must be a JSON object")
    } else {
        Rejection::parse_error("invalid JSON")
    }
}

fn parse_batch(text: &str, policy: BatchPolicy) -> Parsed<'_> {
    match policy {
        BatchPolicy::Reject => {
            if serde_json::from_str::<IgnoredAny>(text).is_err() {
                return Parsed::Single(Err(Rejection::parse_error("invalid JSON")));
            }
            Parsed::Batch(vec![Err(Rejection::invalid_request(
                None,
                "batches are not supported",
            ))])
        }
        BatchPolicy::Allow => {
            let elements: Vec<&RawValue> = match serde_json::from_str(text) {
                Ok(elements) => elements,
                Err(_) => return Parsed::Single(Err(Rejection::parse_error("invalid JSON"))),
            };
            if elements.is_empty() {
                return Parsed::Single(Err(Rejection::invalid_request(None, "empty batch")));
            }
            Parsed::Batch(
                elements
                    .into_iter()
                    .map(|element| {
                        let text = element.get();
                        if text.starts_with('{') {
                            parse_object(text)
                        } else {
                            Err(Rejection::invalid_request(
                                None,
                                "a batch element must be a JSON object",
                            ))
                        }
                    })
                    .collect(),
            )
        }
    }
}

/// The members of a message object, each kept as raw (validated) JSON text.
#[derive(Default)]
struct Members<'a> {
    jsonrpc: Option<&'a str>,
    id: Option<&'a str>,
    method: Option<&'a str>,
    params: Option<&'a str>,
    result: Option<&'a str>,
    error: Option<&'a str>,
    duplicate: bool,
}

impl<'a> Members<'a> {
    fn slot(&mut self, key: &str) -> Option<&mut Option<&'a str>> {
        Some(match key {
            "jsonrpc" => &mut self.jsonrpc,
            "id" => &mut self.id,
            "method" => &mut self.method,
            "params" => &mut self.params,
            "result" => &mut self.result,
            "error" => &mut self.error,
            _ => return None,
        })
    }

    /// Scans one JSON object (`text` starts, after whitespace, with `{`), validating all of it and
    /// collecting the members that matter. Unknown members are validated and skipped.
    fn scan(text: &'a str) -> Result<Members<'a>, Invalid> {
        let b = text.as_bytes();
        let mut m = Members::default();
        let mut i = scan::skip_ws(b, 0);
        if b.get(i) != Some(&b'{') {
            return Err(Invalid { at: i });
        }
        i = scan::skip_ws(b, i + 1);
        if b.get(i) == Some(&b'}') {
            i += 1;
        } else {
            loop {
                if b.get(i) != Some(&b'"') {
                    return Err(Invalid { at: i });
                }
                let key_start = i;
                let (key_end, escaped) = scan::scan_string(b, i)?;
                i = scan::skip_ws(b, key_end);
                if b.get(i) != Some(&b':') {
                    return Err(Invalid { at: i });
                }
                let value_start = scan::skip_ws(b, i + 1);
                let value_end = scan::scan_value(b, value_start)?;
                let value = text
                    .get(value_start..value_end)
                    .ok_or(Invalid { at: value_start })?;
                let key = text.get(key_start + 1..key_end - 1).unwrap_or_default();
                let slot = if escaped {
                    let key = text
                        .get(key_start..key_end)
                        .and_then(|k| serde_json::from_str::<String>(k).ok())
                        .unwrap_or_default();
                    m.slot(&key)
                } else {
                    m.slot(key)
                };
                if let Some(slot) = slot {
                    let duplicate = slot.is_some();
                    *slot = Some(value);
                    m.duplicate |= duplicate;
                }
                i = scan::skip_ws(b, value_end);
                match b.get(i) {
                    Some(b',') => i = scan::skip_ws(b, i + 1),
                    Some(b'}') => {
                        i += 1;
                        break;
                    }
                    _ => return Err(Invalid { at: i }),
                }
            }
        }
        if scan::skip_ws(b, i) != b.len() {
            return Err(Invalid { at: i });
        }
        Ok(m)
    }
}

/// Decodes the raw text of a JSON string value, borrowing when it has no escapes.
fn decode_str(raw: &str) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

fn is_structured(raw: &str) -> bool {
    matches!(raw.as_bytes().first(), Some(b'{' | b'['))
}

/// A member value the scanner validated, as a borrowed `RawValue`.
fn raw(valid: &str) -> Result<&RawValue, Rejection> {
    scan::raw_value(valid).ok_or_else(|| Rejection::parse_error("invalid JSON"))
}

/// Parses one JSON object (`text` starts, after whitespace, with `{`).
fn parse_object(text: &str) -> Result<Message<'_>, Rejection> {
    let m = Members::scan(text)
        .map_err(|e| Rejection::parse_error(format!("invalid JSON at byte {}", e.at)))?;
    let id = m.id.map(Id::from_valid_raw);
    let reject = |detail: &'static str| {
        let answer_id = id.flatten().map(|id| id.to_owned());
        Err(Rejection::invalid_request(answer_id, detail))
    };
    if m.duplicate {
        return reject("duplicate member");
    }
    match m.jsonrpc {
        None => return reject("missing \"jsonrpc\":\"2.0\""),
        Some(v) if v != "\"2.0\"" && decode_str(v).as_deref() != Some("2.0") => {
            return reject("\"jsonrpc\" must be \"2.0\"")
        }
        Some(_) => {}
    }
    if let Some(method) = m.method {
        if m.result.is_some() || m.error.is_some() {
            return reject("a message has both a method and a result or error");
        }
        let Some(method) = decode_str(method) else {
            return reject("\"method\" must be a string");
        };
        if m.params.is_some_and(|p| !is_structured(p)) {
            return reject("\"params\" must be an object or an array");
        }
        let params = m.params.map(raw).transpose()?;
        return match id {
            None => Ok(Message::Notification { method, params }),
            Some(Some(id)) => Ok(Message::Request { id, method, params }),
            Some(None) => reject("\"id\" must be a number, a string or null"),
        };
    }
    let id = match id {
        Some(Some(id)) => id,
        Some(None) => return reject("\"id\" must be a number, a string or null"),
        None if m.result.is_some() || m.error.is_some() => {
            return reject("a response must have an \"id\"")
        }
        None => return reject("neither a request nor a response"),
    };
    let outcome = match (m.result, m.error) {
        (Some(result), None) => Ok(raw(result)?),
        (None, Some(error)) => match serde_json::from_str::<ErrorObject>(error) {
            Ok(error) => Err(error),
            Err(_) => {
                return reject(
                    "\"error\" must be an object with integer \"code\" and string \"message\"",
                )
            }
        },
        (Some(_), Some(_)) => return reject("a response has both \"result\" and \"error\""),
        (None, None) => return reject("neither a request nor a response"),
    };
    Ok(Message::Response { id, outcome })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::code;

    fn single(body: &str) -> Result<Message<'_>, Rejection> {
        match parse(body.as_bytes()) {
            Parsed::Single(r) => r,
            Parsed::Batch(_) => panic!("unexpected batch"),
        }
    }

    fn rejected(body: &str) -> Rejection {
        match single(body) {
            Err(r) => r,
            Ok(m) => panic!("accepted {body}: {m:?}"),
        }
    }

    #[test]
    fn request_borrows_method_and_params() {
        let m =
            single(r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":[1, 2]}}"#).unwrap();
        let Message::Request { id, method, params } = m else {
            panic!()
        };
        assert_eq!(id.as_raw(), "7");
        assert!(matches!(method, Cow::Borrowed("ping")));
        assert_eq!(params.unwrap().get(), r#"{"a":[1, 2]}"#);
    }

    #[test]
    fn escaped_method_is_decoded() {
        let m = single(r#"{"jsonrpc":"2.0","method":"a\u002eb"}"#).unwrap();
        assert_eq!(m.method(), Some("a.b"));
        assert!(m.id().is_none());
    }

    #[test]
    fn null_id_is_not_a_notification() {
        let m = single(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).unwrap();
        assert!(matches!(m, Message::Request { id, .. } if id.is_null()));
        let m = single(r#"{"jsonrpc":"2.0","method":"x"}"#).unwrap();
        assert!(matches!(m, Message::Notification { .. }));
    }

    #[test]
    fn null_id_error_response_is_a_response() {
        let m = single(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}"#)
            .unwrap();
        let Message::Response { id, outcome } = m else {
            panic!()
        };
        assert!(id.is_null());
        assert_eq!(outcome.unwrap_err().code, code::INVALID_REQUEST);
    }

    #[test]
    fn response_with_result() {
        let m = single(r#"{"jsonrpc":"2.0","id":"a","result":null}"#).unwrap();
        let Message::Response { id, outcome } = m else {
            panic!()
        };
        assert_eq!(id.as_raw(), "\"a\"");
        assert_eq!(outcome.unwrap().get(), "null");
    }

    #[test]
    fn invalid_json_is_parse_error_with_null_id() {
        for body in [
            "",
            "   ",
            "{",
            r#"{"jsonrpc":"2.0","id":1,"method":"x"} x"#,
            "\u{1}",
            "[1,",
        ] {
            let r = rejected(body);
            assert_eq!(r.error.code, code::PARSE_ERROR, "{body}");
            assert_eq!(r.id, None);
        }
        let r = match parse(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}") {
            Parsed::Single(Err(r)) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(r.error.code, code::PARSE_ERROR);
    }

    #[test]
    fn invalid_requests_keep_the_id_when_readable() {
        let cases = [
            (r#"{"id":1,"method":"x"}"#, Some("1")),
            (r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#, Some("1")),
            (r#"{"jsonrpc":2.0,"id":"q","method":"x"}"#, Some("\"q\"")),
            (r#"{"jsonrpc":"2.0","id":1,"method":5}"#, Some("1")),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"x","params":"s"}"#,
                Some("1"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"x","params":null}"#,
                Some("1"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"x","result":1}"#,
                Some("1"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
                Some("1"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}"#,
                Some("1"),
            ),
            (r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#, Some("1")),
            (r#"{"jsonrpc":"2.0","id":1,"error":"e"}"#, Some("1")),
            (r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#, Some("2")),
            (r#"{"jsonrpc":"2.0","id":1}"#, Some("1")),
            (r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#, None),
            (r#"{"jsonrpc":"2.0","id":true,"result":1}"#, None),
            (r#"{"jsonrpc":"2.0","result":1}"#, None),
            (r#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#, None),
            (r#"{"foo":"boo"}"#, None),
            ("{}", None),
            ("1", None),
            ("\"s\"", None),
            ("null", None),
        ];
        for (body, id) in cases {
            let r = rejected(body);
            assert_eq!(r.error.code, code::INVALID_REQUEST, "{body}: {r}");
            assert_eq!(r.id.as_ref().map(|i| i.as_raw()), id, "{body}");
        }
    }

    #[test]
    fn tolerates_unknown_members_and_escaped_version() {
        let m = single(r#"{"jsonrpc":"2\u002e0","x":{"y":[1]},"method":"m","id":1}"#).unwrap();
        assert_eq!(m.method(), Some("m"));
    }

    #[test]
    fn batch_policies() {
        let body = br#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"},5]"#;
        match parse(body) {
            Parsed::Batch(items) => {
                assert_eq!(items.len(), 1);
                assert_eq!(
                    items[0].as_ref().unwrap_err().error.code,
                    code::INVALID_REQUEST
                );
            }
            other => panic!("{other:?}"),
        }
        match parse_with(body, BatchPolicy::Allow) {
            Parsed::Batch(items) => {
                assert_eq!(items.len(), 3);
                assert!(matches!(items[0], Ok(Message::Notification { .. })));
                assert!(matches!(items[1], Ok(Message::Request { .. })));
                assert!(items[2].is_err());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_with(b" [] ", BatchPolicy::Allow),
            Parsed::Single(Err(Rejection { ref error, .. })) if error.code == code::INVALID_REQUEST
        ));
        assert!(matches!(
            parse_with(b"[1,", BatchPolicy::Reject),
            Parsed::Single(Err(Rejection { ref error, .. })) if error.code == code::PARSE_ERROR
        ));
        assert!(
            matches!(parse_single(b"[]"), Err(Rejection { ref error, .. }) if error.code == code::INVALID_REQUEST)
        );
    }
}
