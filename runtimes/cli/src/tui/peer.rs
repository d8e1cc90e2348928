//! The UI's side of the wire: the crate's own JSON-RPC peer ([`Endpoint`]) on Content-Length
//! framing, plus what each request in flight was for. No IO: bytes in, messages out.

use std::collections::HashMap;

use agentwire::correlation::Outcome;
use agentwire::endpoint::{Endpoint, EndpointConfig, EndpointEvent, Role};
use agentwire::frame::Framing;
use agentwire::jsonrpc::{code, ErrorObject, OwnedId};
use agentwire::Timestamp;
use bytes::{Bytes, BytesMut};
use serde_json::Value;

/// The UI's requests have no deadline, so the endpoint's clock is never consulted: every call
/// passes this constant instead of reading a clock.
const NO_DEADLINES: Timestamp = Timestamp::EPOCH;

/// A message from the host that the UI acts on.
#[derive(Clone, Debug, PartialEq)]
pub enum Inbound<T> {
    /// The answer to one of our requests.
    Response {
        /// What the request was for (given to [`Peer::call`]).
        purpose: T,
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
}

/// One JSON-RPC client connection to the host: requests out, messages in.
#[derive(Debug)]
pub struct Peer<T> {
    endpoint: Endpoint,
    purposes: HashMap<OwnedId, T>,
}

impl<T> Default for Peer<T> {
    fn default() -> Self {
        let config = EndpointConfig {
            first_request_id: 1,
            ..EndpointConfig::new(Framing::ContentLength)
        };
        Peer {
            endpoint: Endpoint::new(Role::Client, config),
            purposes: HashMap::new(),
        }
    }
}

impl<T> Peer<T> {
    /// Sends a request; its response comes back from [`Peer::push`] with `purpose`.
    pub fn call(&mut self, method: &str, params: Value, purpose: T) {
        if let Ok(id) = self
            .endpoint
            .send_request(NO_DEADLINES, method, &params, None)
        {
            self.purposes.insert(id, purpose);
        }
    }

    /// The framed messages to write to the host since the last call.
    pub fn take_output(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        while let Some(frame) = self.endpoint.poll_transmit() {
            out.extend_from_slice(&frame);
        }
        out.freeze()
    }

    /// Feeds bytes read from the host and returns the messages they completed. A request
    /// from the host is answered "not handled here" (`-32601`): the UI attaches with no
    /// capability that makes the host call it.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Inbound<T>> {
        self.endpoint.handle_bytes(NO_DEADLINES, bytes);
        let mut messages = Vec::new();
        while let Some(event) = self.endpoint.poll_event() {
            match event {
                EndpointEvent::Outcome { id, outcome } => {
                    if let Some(purpose) = self.purposes.remove(&id) {
                        messages.push(Inbound::Response {
                            purpose,
                            outcome: decode_outcome(outcome),
                        });
                    }
                }
                EndpointEvent::Notification(notification) => messages.push(Inbound::Notification {
                    method: notification.method().to_owned(),
                    params: notification.params().unwrap_or(Value::Null),
                }),
                EndpointEvent::Request(request) => {
                    let error = ErrorObject::new(
                        code::METHOD_NOT_FOUND,
                        format!("Unhandled method {}", request.method()),
                    );
                    let _ = self.endpoint.respond_error(request.id(), &error);
                }
                EndpointEvent::CancelRequested { .. } | EndpointEvent::Closed(_) => {}
            }
        }
        messages
    }

    /// Whether the connection can no longer be used (the host's bytes broke the framing).
    pub fn is_closed(&self) -> bool {
        self.endpoint.is_closed()
    }
}

fn decode_outcome(outcome: Outcome) -> Result<Value, String> {
    match outcome {
        Outcome::Result(raw) => Ok(serde_json::from_str(raw.get()).unwrap_or(Value::Null)),
        Outcome::Error(error) => Err(error.message),
        Outcome::Cancelled => Err("cancelled".to_owned()),
        Outcome::TimedOut => Err("timed out".to_owned()),
        Outcome::Closed => Err("the connection closed".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire::frame::encode_frame;
    use serde_json::json;

    fn framed(body: &[u8]) -> BytesMut {
        let mut wire = BytesMut::new();
        encode_frame(Framing::ContentLength, body, &mut wire);
        wire
    }

    #[test]
    fn requests_and_answers_round_trip_by_purpose() {
        let mut peer = Peer::default();
        peer.call("ping", json!({"message": "hi"}), "first");
        peer.call("connect", json!({}), "second");
        let bytes = peer.take_output();
        assert!(peer.take_output().is_empty());
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.starts_with("Content-Length: "));
        assert!(text.contains(r#""id":1,"method":"ping","params":{"message":"hi"}"#));

        // A response to id 2, split anywhere, then a notification.
        let mut wire = framed(br#"{"jsonrpc":"2.0","id":2,"result":{"ok":true}}"#);
        wire.extend_from_slice(&framed(
            br#"{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s"}}"#,
        ));
        let (a, b) = wire.split_at(10);
        assert!(peer.push(a).is_empty());
        assert_eq!(
            peer.push(b),
            vec![
                Inbound::Response {
                    purpose: "second",
                    outcome: Ok(json!({"ok": true}))
                },
                Inbound::Notification {
                    method: "session.event".into(),
                    params: json!({"sessionId": "s"})
                },
            ]
        );
        // A second answer to the same id is not reported again.
        assert!(peer
            .push(&framed(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#))
            .is_empty());
    }

    #[test]
    fn errors_and_host_requests_are_handled() {
        let mut peer = Peer::default();
        peer.call("session.send", json!({}), ());
        peer.take_output();
        assert_eq!(
            peer.push(&framed(
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"nope"}}"#
            )),
            vec![Inbound::Response {
                purpose: (),
                outcome: Err("nope".into())
            }]
        );
        let request = br#"{"jsonrpc":"2.0","id":"x","method":"hooks.invoke","params":{}}"#;
        assert!(peer.push(&framed(request)).is_empty());
        let out = peer.take_output();
        assert!(std::str::from_utf8(&out)
            .unwrap()
            .contains(r#""id":"x","error":{"code":-32601"#));
        assert!(!peer.is_closed());
        peer.push(b"Content-Length: nope\r\n\r\n");
        assert!(peer.is_closed(), "a framing error ends the connection");
    }
}
