//! JSON-RPC error objects and the standard error codes.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Standard JSON-RPC 2.0 error codes, plus the LSP/ACP request-cancelled code.
pub mod code {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid Request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist / is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameter(s).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal JSON-RPC error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The request was cancelled (LSP `RequestCancelled`, also used by ACP).
    pub const REQUEST_CANCELLED: i64 = -32800;
}

/// A JSON-RPC error object: `{"code":..,"message":..,"data":..}` (`data` omitted when `None`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code (see [`code`]).
    pub code: i64,
    /// A short description of the error.
    pub message: String,
    /// Optional additional information, kept as raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

impl ErrorObject {
    /// An error with the given code and message and no data.
    pub fn new(code: i64, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Replaces the data member.
    pub fn with_data(mut self, data: Box<RawValue>) -> ErrorObject {
        self.data = Some(data);
        self
    }

    /// Replaces the data member with `data` serialised as JSON.
    pub fn with_data_value<T: Serialize + ?Sized>(
        self,
        data: &T,
    ) -> Result<ErrorObject, serde_json::Error> {
        Ok(self.with_data(serde_json::value::to_raw_value(data)?))
    }

    /// `-32700 Parse error`.
    pub fn parse_error() -> ErrorObject {
        ErrorObject::new(code::PARSE_ERROR, "Parse error")
    }

    /// `-32600 Invalid Request`.
    pub fn invalid_request() -> ErrorObject {
        ErrorObject::new(code::INVALID_REQUEST, "Invalid Request")
    }

    /// `-32601`, message `Method not found: <method>`.
    pub fn method_not_found(method: &str) -> ErrorObject {
        ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }

    /// `-32602` with the given message.
    pub fn invalid_params(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(code::INVALID_PARAMS, message)
    }

    /// `-32603` with the given message.
    pub fn internal(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(code::INTERNAL_ERROR, message)
    }

    /// `-32800 Request cancelled`.
    pub fn request_cancelled() -> ErrorObject {
        ErrorObject::new(code::REQUEST_CANCELLED, "Request cancelled")
    }
}

impl PartialEq for ErrorObject {
    fn eq(&self, other: &ErrorObject) -> bool {
        self.code == other.code
            && self.message == other.message
            && self.data.as_ref().map(|d| d.get()) == other.data.as_ref().map(|d| d.get())
    }
}

impl Eq for ErrorObject {}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorObject {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_compactly_without_null_data() {
        let e = ErrorObject::new(code::INTERNAL_ERROR, "boom");
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"code":-32603,"message":"boom"}"#
        );
        let e = e.with_data_value(&[1, 2]).unwrap();
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"code":-32603,"message":"boom","data":[1,2]}"#
        );
    }

    #[test]
    fn deserialisation_requires_integer_code_and_string_message() {
        assert!(serde_json::from_str::<ErrorObject>(r#"{"code":1,"message":"m"}"#).is_ok());
        assert!(serde_json::from_str::<ErrorObject>(r#"{"code":1.5,"message":"m"}"#).is_err());
        assert!(serde_json::from_str::<ErrorObject>(r#"{"code":"x","message":"m"}"#).is_err());
        assert!(serde_json::from_str::<ErrorObject>(r#"{"code":1,"message":2}"#).is_err());
        assert!(serde_json::from_str::<ErrorObject>(r#"{"message":"m"}"#).is_err());
    }
}
