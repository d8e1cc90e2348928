//! The plan and the workspace files survive a restart: their content is stored in the
//! session's own log, in the persisted `session.plan_changed` / `session.workspace_file_changed`
//! events, under a field clients never see ([`STORED_CONTENT`]: removed from every event a
//! client receives — `session.event`, `session.getMessages`, `session.eventLog.read`), and a
//! session loaded from the store rebuilds them from those events when its state is first
//! used.
//!
//! So the store keeps one extra field in those two event types; everything else a client
//! sees is byte for byte what the store holds.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::session::Event;

/// The data field that carries a plan's or a workspace file's content in the store.
pub(super) const STORED_CONTENT: &str = "agentwireContent";

/// Whether events of `event_type` may carry [`STORED_CONTENT`].
fn carries_content(event_type: &str) -> bool {
    matches!(
        event_type,
        "session.plan_changed" | "session.workspace_file_changed"
    )
}

/// The event as clients receive it (without [`STORED_CONTENT`]).
pub(super) fn wire_json(event: &Event) -> Cow<'_, [u8]> {
    if !carries_content(&event.event_type) {
        return Cow::Borrowed(&event.json);
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(&event.json) else {
        return Cow::Borrowed(&event.json);
    };
    strip(&mut value);
    match serde_json::to_vec(&value) {
        Ok(bytes) => Cow::Owned(bytes),
        Err(_) => Cow::Borrowed(&event.json),
    }
}

/// Removes [`STORED_CONTENT`] from a parsed event.
pub(super) fn strip(event: &mut Value) {
    if let Some(data) = event.get_mut("data").and_then(Value::as_object_mut) {
        data.remove(STORED_CONTENT);
    }
}

/// The plan and the workspace files as the log left them.
#[derive(Debug, Default)]
pub(super) struct Restored {
    /// The plan's content, if one exists.
    pub(super) plan: Option<String>,
    /// Workspace files by relative path.
    pub(super) files: BTreeMap<String, String>,
}

/// Replays the persisted plan and workspace file changes of `events`.
pub(super) fn restore(events: &[Event]) -> Restored {
    let mut out = Restored::default();
    for event in events.iter().filter(|e| carries_content(&e.event_type)) {
        let Ok(value) = serde_json::from_slice::<Value>(&event.json) else {
            continue;
        };
        let data = &value["data"];
        let content = data[STORED_CONTENT].as_str().map(str::to_owned);
        match (event.event_type.as_str(), data["operation"].as_str()) {
            ("session.plan_changed", Some("delete")) => out.plan = None,
            ("session.plan_changed", _) => {
                if let Some(content) = content {
                    out.plan = Some(content);
                }
            }
            (_, _) => {
                if let (Some(path), Some(content)) = (data["path"].as_str(), content) {
                    out.files.insert(path.to_owned(), content);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;
    use serde_json::json;

    fn event(kind: &str, data: Value) -> Event {
        Event::new("e".into(), kind, &data, false, Timestamp::EPOCH, None)
    }

    #[test]
    fn content_is_restored_and_never_on_the_wire() {
        let events = [
            event(
                "session.plan_changed",
                json!({"operation": "create", STORED_CONTENT: "v1"}),
            ),
            event(
                "session.workspace_file_changed",
                json!({"path": "a.md", "operation": "create", STORED_CONTENT: "A"}),
            ),
            event(
                "session.plan_changed",
                json!({"operation": "update", STORED_CONTENT: "v2"}),
            ),
        ];
        let restored = restore(&events);
        assert_eq!(restored.plan.as_deref(), Some("v2"));
        assert_eq!(restored.files["a.md"], "A");
        for e in &events {
            let wire: Value = serde_json::from_slice(&wire_json(e)).unwrap();
            assert!(wire["data"].get(STORED_CONTENT).is_none(), "{wire}");
            assert!(wire["data"].get("operation").is_some());
        }
        let deleted = restore(&[
            events[0].clone(),
            event("session.plan_changed", json!({"operation": "delete"})),
        ]);
        assert_eq!(deleted.plan, None);
    }
}
