//! Session events: the envelope and its one-time encoding.

use bytes::Bytes;
use serde_json::value::RawValue;

use crate::Timestamp;

/// One session event, encoded once.
///
/// The envelope is `{type, data, ephemeral?, id, timestamp, parentId, agentId?}` in the field
/// order the real runtime uses (`wire.jsonl:11`); `ephemeral` appears only when true. The
/// encoded JSON is kept in a shared buffer so a persisted event can be stored, replayed by
/// `session.getMessages` and fanned out without being encoded again.
#[derive(Clone, Debug)]
pub struct Event {
    /// The event's id (a UUID).
    pub id: String,
    /// The event type, e.g. `assistant.message`.
    pub event_type: String,
    /// Whether the event is ephemeral (never persisted or replayed).
    pub ephemeral: bool,
    /// The whole event object as compact JSON.
    pub json: Bytes,
}

impl Event {
    /// Builds and encodes an event. `data` must be a JSON object (anything else is wrapped
    /// as `{"value": data}` so `data` is always an object, as clients require).
    pub fn new(
        id: String,
        event_type: &str,
        data: &serde_json::Value,
        ephemeral: bool,
        timestamp: Timestamp,
        parent_id: Option<&str>,
    ) -> Event {
        Event::new_from(id, event_type, data, ephemeral, timestamp, parent_id, None)
    }

    /// Like [`Event::new`], for an event a sub-agent emitted: `agentId` ends the envelope.
    pub fn new_from(
        id: String,
        event_type: &str,
        data: &serde_json::Value,
        ephemeral: bool,
        timestamp: Timestamp,
        parent_id: Option<&str>,
        agent_id: Option<&str>,
    ) -> Event {
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(b"{\"type\":");
        push_json_str(&mut out, event_type);
        out.extend_from_slice(b",\"data\":");
        if data.is_object() {
            serde_json::to_writer(&mut out, data).expect("a Value always serialises");
        } else {
            out.extend_from_slice(b"{\"value\":");
            serde_json::to_writer(&mut out, data).expect("a Value always serialises");
            out.push(b'}');
        }
        if ephemeral {
            out.extend_from_slice(b",\"ephemeral\":true");
        }
        out.extend_from_slice(b",\"id\":");
        push_json_str(&mut out, &id);
        out.extend_from_slice(b",\"timestamp\":");
        push_json_str(&mut out, &timestamp.to_rfc3339());
        out.extend_from_slice(b",\"parentId\":");
        match parent_id {
            Some(p) => push_json_str(&mut out, p),
            None => out.extend_from_slice(b"null"),
        }
        if let Some(agent) = agent_id {
            out.extend_from_slice(b",\"agentId\":");
            push_json_str(&mut out, agent);
        }
        out.push(b'}');
        Event {
            id,
            event_type: event_type.to_owned(),
            ephemeral,
            json: Bytes::from(out),
        }
    }

    /// The event as a raw JSON value.
    pub fn raw(&self) -> &RawValue {
        // The bytes were produced by serde_json above, so they are valid JSON and UTF-8.
        let text = std::str::from_utf8(&self.json).expect("event JSON is UTF-8");
        serde_json::from_str::<&RawValue>(text).expect("event JSON is valid")
    }

    /// Whether this is a streaming (delta) event, which only streaming clients receive.
    pub fn is_streaming_delta(&self) -> bool {
        is_streaming_delta_type(&self.event_type)
    }
}

/// Whether events of this type are streaming deltas (sent only to connections that attached
/// with `streaming: true`).
pub fn is_streaming_delta_type(event_type: &str) -> bool {
    matches!(
        event_type,
        "assistant.message_delta"
            | "assistant.message_start"
            | "assistant.reasoning_delta"
            | "assistant.streaming_delta"
            | "assistant.tool_call_delta"
    )
}

/// Appends `s` as a JSON string literal.
pub(crate) fn push_json_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("a str always serialises");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelope_has_the_runtime_shape() {
        let e = Event::new(
            "25d84307-dab4-41a0-8e8a-879114456e6e".into(),
            "session.idle",
            &json!({"mode": "interactive"}),
            true,
            Timestamp::from_millis(1_795_983_977_562),
            Some("dd18b1de-62c7-4e29-bfe7-db672738b489"),
        );
        let v: serde_json::Value = serde_json::from_slice(&e.json).unwrap();
        assert_eq!(
            v,
            json!({"type":"session.idle","data":{"mode":"interactive"},"ephemeral":true,
                   "id":"25d84307-dab4-41a0-8e8a-879114456e6e","timestamp":"2026-11-29T20:26:17.562Z",
                   "parentId":"dd18b1de-62c7-4e29-bfe7-db672738b489"})
        );
        let first = Event::new(
            "a".into(),
            "session.start",
            &json!(null),
            false,
            Timestamp::EPOCH,
            None,
        );
        let v: serde_json::Value = serde_json::from_slice(&first.json).unwrap();
        assert_eq!(v["parentId"], json!(null));
        assert_eq!(v["data"], json!({"value": null}));
        assert!(v.get("ephemeral").is_none());
        assert_eq!(first.raw().get(), std::str::from_utf8(&first.json).unwrap());
    }
}
