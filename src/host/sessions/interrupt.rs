//! Closing a turn that a restored session left open (its process died mid-turn).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::Timestamp;

use crate::host::Host;

/// What a restored log says was still open when it was written.
#[derive(Default)]
struct Open {
    /// `external_tool.requested` without `external_tool.completed`: request id → tool call id.
    tools: BTreeMap<String, Option<String>>,
    /// `permission.requested` without `permission.completed`: request ids.
    permissions: Vec<String>,
    /// A turn started (or a prompt was accepted) and did not end.
    turn: bool,
}

fn scan(events: &[crate::session::Event]) -> Open {
    let mut open = Open::default();
    for event in events {
        let data = serde_json::from_slice::<Value>(&event.json)
            .ok()
            .and_then(|v| v.get("data").cloned())
            .unwrap_or(Value::Null);
        let field = |name: &str| data.get(name).and_then(Value::as_str).map(str::to_owned);
        match event.event_type.as_str() {
            "external_tool.requested" => {
                if let Some(request) = field("requestId") {
                    open.tools.insert(request, field("toolCallId"));
                }
            }
            "external_tool.completed" => {
                if let Some(request) = field("requestId") {
                    open.tools.remove(&request);
                }
            }
            "permission.requested" => open.permissions.extend(field("requestId")),
            "permission.completed" => {
                let request = field("requestId");
                open.permissions.retain(|r| Some(r) != request.as_ref());
            }
            "user.message" | "assistant.turn_start" => open.turn = true,
            "assistant.turn_end" | "session.error" | "abort" => open.turn = false,
            _ => {}
        }
    }
    open.turn |= !open.tools.is_empty() || !open.permissions.is_empty();
    open
}

impl Host {
    /// After [`Host::restore_session`] of a session whose previous host died (a cluster
    /// takeover, or a restart after a crash): if its log shows a turn still open, close it
    /// the way a failed turn ends. Every open client tool call completes as failed, every
    /// open permission prompt is denied, `session.error` (type `interrupted`, with `reason`)
    /// is appended and `session.idle` emitted. Returns whether anything was open.
    pub fn interrupt_open_turn(&mut self, now: Timestamp, session: &str, reason: &str) -> bool {
        self.advance_time(now);
        let Some(live) = self.sessions.get(session) else {
            return false;
        };
        let open = scan(live.session.events());
        if !open.turn {
            return false;
        }
        for (request, tool_call) in &open.tools {
            self.emit(
                session,
                "external_tool.completed",
                &json!({"requestId": request}),
                false,
            );
            if let Some(tool_call) = tool_call {
                let data = json!({
                    "toolCallId": tool_call,
                    "success": false,
                    "error": {"message": reason, "code": "interrupted"},
                });
                self.emit(session, "tool.execution_complete", &data, false);
            }
        }
        for request in &open.permissions {
            let result = json!({"kind": "user-not-available"});
            self.emit(
                session,
                "permission.completed",
                &json!({"requestId": request, "result": result}),
                false,
            );
        }
        let error = json!({"errorType": "interrupted", "message": reason});
        self.emit(session, "session.error", &error, false);
        self.emit(
            session,
            "session.idle",
            &json!({"aborted": true, "mode": "interactive"}),
            true,
        );
        self.run_agents();
        true
    }
}
