//! The UI's side of the wire: Content-Length framed JSON-RPC, with `agentwire::frame` and
//! `agentwire::jsonrpc` doing the framing and parsing. No IO: bytes in, bodies out.

use std::collections::HashMap;

use agentwire_tokio::agentwire::frame::Framing;
use agentwire_tokio::agentwire::frame::{encode_frame, FrameDecoder, FrameError, FrameLimits};
use agentwire_tokio::agentwire::jsonrpc::{self, code, ErrorObject, Message, OwnedId};
use bytes::{Bytes, BytesMut};
use serde_json::Value;

/// A message from the host, owned and decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Inbound {
    /// The answer to one of our requests (`id` is `None` when the host could not tell which).
    Response {
        /// The id we sent, if it was one of ours.
        id: Option<u64>,
        /// The result, or the error's message.
        outcome: Result<Value, String>,
    },
    /// A notification (`session.event`, `session.lifecycle`, ...).
    Notification {
        /// The method name.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// A request from the host to this client.
    Request {
        /// Its id, to answer with.
        id: OwnedId,
        /// The method name.
        method: String,
    },
}

/// Decodes the host's byte stream into messages.
#[derive(Debug)]
pub struct Decoder {
    frames: FrameDecoder,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            frames: FrameDecoder::new(Framing::ContentLength, FrameLimits::default()),
        }
    }
}

impl Decoder {
    /// Feeds bytes read from the host and returns the messages they completed. Bodies that
    /// are not valid JSON-RPC are skipped; a framing error ends the stream.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Inbound>, FrameError> {
        self.frames.push(bytes)?;
        let mut messages = Vec::new();
        while let Some(body) = self.frames.next_frame()? {
            if let Some(message) = decode(&body) {
                messages.push(message);
            }
        }
        Ok(messages)
    }
}

/// Decodes one body; `None` if it is not a single valid JSON-RPC message.
pub fn decode(body: &[u8]) -> Option<Inbound> {
    let message = jsonrpc::parse_single(body).ok()?;
    let raw_value = |raw: Option<&serde_json::value::RawValue>| {
        raw.and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or(Value::Null)
    };
    Some(match message {
        Message::Request { id, method, .. } => Inbound::Request {
            id: id.to_owned(),
            method: method.into_owned(),
        },
        Message::Notification { method, params } => Inbound::Notification {
            method: method.into_owned(),
            params: raw_value(params),
        },
        Message::Response { id, outcome } => Inbound::Response {
            id: id.as_u64(),
            outcome: match outcome {
                Ok(result) => Ok(raw_value(Some(result))),
                Err(error) => Err(error.message.to_string()),
            },
        },
    })
}

/// Outgoing requests: ids, the purpose of each request in flight (`T`), and the framed
/// bytes to write.
#[derive(Debug)]
pub struct Requests<T> {
    next_id: u64,
    in_flight: HashMap<u64, T>,
    out: BytesMut,
}

impl<T> Default for Requests<T> {
    fn default() -> Self {
        Requests {
            next_id: 1,
            in_flight: HashMap::new(),
            out: BytesMut::new(),
        }
    }
}

impl<T> Requests<T> {
    /// Queues a request; its response is matched back to `purpose` by [`Requests::finish`].
    pub fn call(&mut self, method: &str, params: Value, purpose: T) {
        let id = self.next_id;
        self.next_id += 1;
        let mut body = Vec::with_capacity(128);
        if jsonrpc::write_request(&mut body, &OwnedId::from_u64(id), method, &params).is_ok() {
            encode_frame(Framing::ContentLength, &body, &mut self.out);
            self.in_flight.insert(id, purpose);
        }
    }

    /// Queues the answer "not handled here" to a request from the host.
    pub fn reject(&mut self, id: &OwnedId, method: &str) {
        let mut body = Vec::with_capacity(96);
        let error = ErrorObject::new(code::METHOD_NOT_FOUND, format!("Unhandled method {method}"));
        jsonrpc::write_error(&mut body, Some(id), &error);
        encode_frame(Framing::ContentLength, &body, &mut self.out);
    }

    /// The purpose of the request answered by a response with `id` (once).
    pub fn finish(&mut self, id: Option<u64>) -> Option<T> {
        self.in_flight.remove(&id?)
    }

    /// The framed bytes queued since the last call.
    pub fn take_output(&mut self) -> Bytes {
        self.out.split().freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_round_trip_through_the_decoder() {
        let mut requests = Requests::default();
        requests.call("ping", json!({"message": "hi"}), "first");
        requests.call("connect", json!({}), "second");
        let bytes = requests.take_output();
        assert!(requests.take_output().is_empty());
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.starts_with("Content-Length: "));
        assert!(text.contains(r#""id":1,"method":"ping","params":{"message":"hi"}"#));

        // A response to id 2, split anywhere, then a notification.
        let mut wire = BytesMut::new();
        let response = br#"{"jsonrpc":"2.0","id":2,"result":{"ok":true}}"#;
        let note = br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s"}}"#;
        encode_frame(Framing::ContentLength, response, &mut wire);
        encode_frame(Framing::ContentLength, note, &mut wire);
        let mut decoder = Decoder::default();
        let (a, b) = wire.split_at(10);
        assert!(decoder.push(a).unwrap().is_empty());
        let messages = decoder.push(b).unwrap();
        assert_eq!(
            messages,
            vec![
                Inbound::Response {
                    id: Some(2),
                    outcome: Ok(json!({"ok": true}))
                },
                Inbound::Notification {
                    method: "session.event".into(),
                    params: json!({"sessionId": "s"})
                },
            ]
        );
        assert_eq!(requests.finish(Some(2)), Some("second"));
        assert_eq!(requests.finish(Some(2)), None);
        assert_eq!(requests.finish(None), None);
    }

    #[test]
    fn errors_and_host_requests_decode() {
        assert_eq!(
            decode(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"nope"}}"#),
            Some(Inbound::Response {
                id: Some(3),
                outcome: Err("nope".into())
            })
        );
        let Some(Inbound::Request { id, method }) =
            decode(br#"{"jsonrpc":"2.0","id":"x","method":"hooks.invoke","params":{}}"#)
        else {
            panic!("expected a request");
        };
        assert_eq!(method, "hooks.invoke");
        let mut requests: Requests<()> = Requests::default();
        requests.reject(&id, &method);
        let out = requests.take_output();
        assert!(std::str::from_utf8(&out)
            .unwrap()
            .contains(r#""id":"x","error":{"code":-32601"#));
        assert_eq!(decode(b"not json"), None);
    }
}
