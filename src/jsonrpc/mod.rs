//! JSON-RPC 2.0 messages: a borrowed, validating parser and hand-written compact writers.
//!
//! This is the hot path of every connection, so it avoids allocation: [`parse`] borrows the
//! method name and keeps `params` / `result` as [`&RawValue`](serde_json::value::RawValue) until a
//! handler decodes them, and ids stay raw JSON text ([`Id`], [`OwnedId`]) so they are echoed back
//! byte-exactly (`1.0` stays `1.0`, `12345678901234567890` is never rounded).
//!
//! ```
//! use agentwire::jsonrpc::{self, Message, Parsed};
//!
//! let body = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}"#;
//! let Parsed::Single(Ok(Message::Request { id, method, .. })) = jsonrpc::parse(body) else {
//!     unreachable!()
//! };
//! assert_eq!(method, "ping");
//! let mut out = Vec::new();
//! jsonrpc::write_result_value(&mut out, &id.to_owned(), &"pong").unwrap();
//! assert_eq!(out, br#"{"jsonrpc":"2.0","id":1,"result":"pong"}"#);
//! ```
//!
//! Invalid input is never a panic: it comes back as a [`Rejection`] saying what to answer
//! (`-32700` with id `null` for invalid JSON, `-32600` with the id if one could be read).

mod error;
mod id;
mod parse;
mod scan;
mod write;

pub use error::{code, ErrorObject};

/// The strings of a JSON array (its other items, and anything not an array, left out):
/// the shape of every list-of-names parameter.
pub(crate) fn string_array(value: Option<&serde_json::Value>) -> Vec<String> {
    value
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .map(str::to_owned)
        .collect()
}
pub use id::{Id, IdKind, OwnedId};
pub use parse::{parse, parse_single, parse_with, BatchPolicy, Message, Parsed, Rejection};
pub use write::{
    write_batch, write_error, write_notification, write_notification_raw, write_request,
    write_request_raw, write_result, write_result_value,
};
