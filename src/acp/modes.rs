//! Session modes and config options advertised to ACP clients.
//!
//! Two modes, kept in sync with a `mode` config option (category `mode`):
//!
//! * `interactive` (the default): tool calls ask for permission (`session/request_permission`).
//! * `autopilot`: tool calls are approved without asking (hook prompts are still denied).
//!
//! One `model` config option (category `model`) with the single value `scripted`: the
//! agent is the scripted agent, so nothing else can be selected.
//!
//! The current mode is part of the session's history: `session/set_mode` emits a persisted
//! `session.mode_changed` event (`previousMode`, `newMode`), so a loaded session keeps it.

use serde_json::{json, Value};

use crate::session::Event;

/// One session mode.
pub(crate) struct Mode {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
}

/// The modes, default first.
pub(crate) const MODES: [Mode; 2] = [
    Mode {
        id: "interactive",
        name: "Interactive",
        description: "Ask before running tools",
    },
    Mode {
        id: "autopilot",
        name: "Autopilot",
        description: "Run tools without asking",
    },
];

/// The default mode.
pub(crate) const DEFAULT_MODE: &str = "interactive";

/// The only model.
pub(crate) const MODEL: &str = "scripted";

/// The mode with this id.
pub(crate) fn find(id: &str) -> Option<&'static Mode> {
    MODES.iter().find(|m| m.id == id)
}

/// The session's current mode: the `newMode` of its last `session.mode_changed` event.
pub(crate) fn current(events: &[Event]) -> &'static str {
    events
        .iter()
        .rev()
        .filter(|e| e.event_type == "session.mode_changed")
        .find_map(|e| {
            let v: Value = serde_json::from_slice(&e.json).ok()?;
            find(v.pointer("/data/newMode")?.as_str()?).map(|m| m.id)
        })
        .unwrap_or(DEFAULT_MODE)
}

/// `SessionModeState`: `{currentModeId, availableModes}`.
pub(crate) fn mode_state(current: &str) -> Value {
    json!({
        "currentModeId": current,
        "availableModes": MODES.iter().map(|m| json!({
            "id": m.id, "name": m.name, "description": m.description,
        })).collect::<Vec<_>>(),
    })
}

/// The complete list of config options, with `mode` set to `current`.
pub(crate) fn config_options(current: &str) -> Value {
    json!([
        {
            "id": "mode",
            "name": "Mode",
            "description": "How tool calls are approved",
            "category": "mode",
            "type": "select",
            "currentValue": current,
            "options": MODES.iter().map(|m| json!({
                "value": m.id, "name": m.name, "description": m.description,
            })).collect::<Vec<_>>(),
        },
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": MODEL,
            "options": [{"value": MODEL, "name": "agentwire scripted agent"}],
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    #[test]
    fn the_last_mode_change_wins() {
        let ev = |id: &str, t: &str, data: Value| {
            Event::new(id.into(), t, &data, false, Timestamp::EPOCH, None)
        };
        assert_eq!(current(&[]), "interactive");
        let events = [
            ev("a", "session.mode_changed", json!({"newMode": "autopilot"})),
            ev("b", "user.message", json!({"content": "x"})),
        ];
        assert_eq!(current(&events), "autopilot");
        let events = [
            ev("a", "session.mode_changed", json!({"newMode": "autopilot"})),
            ev(
                "b",
                "session.mode_changed",
                json!({"newMode": "interactive"}),
            ),
            ev("c", "session.mode_changed", json!({"newMode": "bogus"})),
        ];
        assert_eq!(current(&events), "interactive");
        assert_eq!(
            mode_state("autopilot")["availableModes"][1]["id"],
            "autopilot"
        );
        assert_eq!(config_options("autopilot")[0]["currentValue"], "autopilot");
    }
}
