//! Telemetry forwarding (`gitHubTelemetry.event`): a connection that opts in
//! (`enableGitHubTelemetryForwarding: true` on `connect`, or on `session.create` /
//! `session.resume`) gets, as notifications, the telemetry events of every session from then
//! on. agentwire sends telemetry nowhere itself: these events are what it would report, for a
//! host to record where it likes. Each is `{sessionId, restricted: false, event: {kind,
//! created_at, session_id, properties, metrics}}`:
//!
//! * `session_start` when a session starts (`properties.selected_model` when one is chosen);
//! * `get_completion_with_tools_turn` for each model call (`assistant.usage`: `properties`
//!   `model`, `api_call_id`; `metrics` `input_tokens`, `output_tokens`, `duration_ms` as
//!   reported);
//! * `tool_call_executed` for each finished tool call (`properties` `tool_call_id`,
//!   `success`);
//! * `session_error` for each `session.error` (`properties.error_type`).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use crate::host::{ConnId, Host};
use crate::session::Event;

/// The connections that opted in.
#[derive(Debug, Default)]
struct Forwarding {
    conns: BTreeSet<ConnId>,
}

/// `conn` asked for telemetry forwarding (or not: `false` leaves it as it is).
pub(super) fn opt_in(host: &mut Host, conn: ConnId, on: bool) {
    if !on {
        return;
    }
    if let Some(forwarding) = host.dialect_state::<Forwarding>() {
        forwarding.conns.insert(conn);
    }
}

/// The `enableGitHubTelemetryForwarding` of params.
pub(super) fn asked(params: &Value) -> bool {
    params.get("enableGitHubTelemetryForwarding") == Some(&Value::Bool(true))
}

/// The telemetry event a session event makes, if any: its kind, properties and metrics.
fn telemetry_of(event_type: &str, data: &Value) -> Option<(&'static str, Value, Value)> {
    let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut properties = Map::new();
    let mut metrics = Map::new();
    let kind = match event_type {
        "session.start" => {
            if let Some(model) = text("selectedModel") {
                properties.insert("selected_model".into(), json!(model));
            }
            "session_start"
        }
        "assistant.usage" => {
            for (from, to) in [("model", "model"), ("apiCallId", "api_call_id")] {
                if let Some(value) = text(from) {
                    properties.insert(to.into(), json!(value));
                }
            }
            for (from, to) in [
                ("inputTokens", "input_tokens"),
                ("outputTokens", "output_tokens"),
                ("duration", "duration_ms"),
            ] {
                if let Some(value) = data.get(from).and_then(Value::as_f64) {
                    metrics.insert(to.into(), json!(value));
                }
            }
            "get_completion_with_tools_turn"
        }
        "tool.execution_complete" => {
            if let Some(id) = text("toolCallId") {
                properties.insert("tool_call_id".into(), json!(id));
            }
            let success = data
                .get("success")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            properties.insert("success".into(), json!(success.to_string()));
            "tool_call_executed"
        }
        "session.error" => {
            if let Some(kind) = text("errorType") {
                properties.insert("error_type".into(), json!(kind));
            }
            "session_error"
        }
        _ => return None,
    };
    Some((kind, Value::Object(properties), Value::Object(metrics)))
}

/// A session event was emitted: its telemetry goes to the connections that opted in.
pub(super) fn event_emitted(host: &mut Host, session: &str, event: &Event, data: &Value) {
    let Some((kind, properties, metrics)) = telemetry_of(&event.event_type, data) else {
        return;
    };
    let conns: Vec<ConnId> = match host.dialect_state::<Forwarding>() {
        Some(forwarding) if !forwarding.conns.is_empty() => {
            forwarding.conns.iter().copied().collect()
        }
        _ => return,
    };
    let params = json!({
        "sessionId": session,
        "restricted": false,
        "event": {"kind": kind, "created_at": host.now().to_rfc3339(), "session_id": session,
                  "properties": properties, "metrics": metrics},
    });
    let mut gone = Vec::new();
    for conn in conns {
        if host.conn_is_open(conn) {
            host.notify(conn, "gitHubTelemetry.event", &params);
        } else {
            gone.push(conn);
        }
    }
    if let Some(forwarding) = host.dialect_state::<Forwarding>() {
        for conn in gone {
            forwarding.conns.remove(&conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_events_make_telemetry_events() {
        let (kind, properties, metrics) = telemetry_of(
            "assistant.usage",
            &json!({"model": "m", "apiCallId": "c1", "inputTokens": 10, "outputTokens": 5}),
        )
        .unwrap();
        assert_eq!(kind, "get_completion_with_tools_turn");
        assert_eq!(properties, json!({"model": "m", "api_call_id": "c1"}));
        assert_eq!(metrics, json!({"input_tokens": 10.0, "output_tokens": 5.0}));
        let (kind, properties, _) = telemetry_of(
            "tool.execution_complete",
            &json!({"toolCallId": "t", "success": true}),
        )
        .unwrap();
        assert_eq!(kind, "tool_call_executed");
        assert_eq!(properties, json!({"tool_call_id": "t", "success": "true"}));
        assert!(telemetry_of("assistant.message_delta", &json!({})).is_none());
    }
}
