//! The permission bridge: a session's permission prompt becomes `session/request_permission`.
//!
//! When a tool call needs permission, every attached ACP connection asks its client with the
//! tool call's real `toolCallId` and three options:
//!
//! | optionId | kind | decision |
//! |---|---|---|
//! | `allow-once` | `allow_once` | `approve-once` |
//! | `allow-always` | `allow_always` | remembered for the session (below) |
//! | `reject-once` | `reject_once` | `reject` |
//!
//! The first answer wins (the other clients get `$/cancel_request`). A `cancelled` outcome
//! denies the call and cancels the turn (the spec asks agents to end the turn with
//! `stopReason: "cancelled"`); an error answer or no answer in time denies it
//! (`user-not-available`).
//!
//! "Always" approvals are resolved as `approve-for-session` (or `approve-for-location`) with
//! an `approval` recorded in the persisted `permission.completed` event, so they survive a
//! reload; later prompts they cover are approved without asking:
//!
//! | prompt kind | "always" covers |
//! |---|---|
//! | `read`, `write`, `memory`, … | every prompt of that kind |
//! | `shell` | commands whose names (`commandIdentifiers`) were all approved |
//! | `custom-tool` / `mcp` | that tool (of that server) |
//! | `path` | the path's directory and everything below it (`locationKey`) |
//! | `url` | that domain |
//!
//! `hook` prompts (raised by a `preToolUse` hook) are denied without asking the ACP client,
//! unless a Copilot SDK client that answers permission prompts is attached as well. In
//! `autopilot` mode every other prompt is approved without asking.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::agent::builtin::{is_within, url_domain};
use crate::correlation::Outcome;
use crate::host::{always_decision, command_ids, ConnId, Host, PermissionPrompt};
use crate::session::Event;

use super::client::{self, OutCall};
use super::update::tool_kind_and_title;
use super::{cancel_turn, ConnState};

/// How long a client has to answer `session/request_permission` (a person decides).
pub const PERMISSION_TIMEOUT: Duration = Duration::from_secs(300);

/// The options offered with every permission request.
pub(crate) fn options() -> Value {
    json!([
        {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
        {"optionId": "reject-once", "name": "Deny", "kind": "reject_once"},
    ])
}

/// The `toolCall` (a `ToolCallUpdate`) of a permission request.
pub(crate) fn tool_call(
    tool_call_id: &str,
    tool_name: &str,
    arguments: &Value,
    request: &Value,
) -> Value {
    let (kind, title) = tool_kind_and_title(tool_name, arguments);
    let mut call = json!({
        "toolCallId": tool_call_id,
        "title": title,
        "kind": kind,
        "status": "pending",
        "rawInput": arguments,
    });
    let field = |name: &str| request.get(name).and_then(Value::as_str).unwrap_or("");
    let note = match field("kind") {
        "path" => Some(format!(
            "Access {} (outside the allowed directories)",
            field("path")
        )),
        "url" => Some(format!("Fetch {}", field("url"))),
        _ => None,
    };
    if let Some(note) = note {
        call["content"] = json!([{"type": "content", "content": {"type": "text", "text": note}}]);
    }
    call
}

/// What the client's answer to `session/request_permission` means.
#[derive(Debug, PartialEq)]
pub(crate) enum Answer {
    /// Resolve the prompt with this decision.
    Decide(Value),
    /// The client cancelled: deny, and end the turn as cancelled.
    Cancelled,
}

/// Maps a `RequestPermissionResponse` to a decision. Anything unexpected denies.
pub(crate) fn answer(result: &Value, request: &Value) -> Answer {
    let outcome = result.get("outcome");
    let kind = outcome
        .and_then(|o| o.get("outcome"))
        .and_then(Value::as_str);
    let option = outcome
        .and_then(|o| o.get("optionId"))
        .and_then(Value::as_str);
    match (kind, option) {
        (Some("cancelled"), _) => Answer::Cancelled,
        (Some("selected"), Some("allow-once")) => Answer::Decide(json!({"kind": "approve-once"})),
        (Some("selected"), Some("allow-always")) => Answer::Decide(always_decision(request)),
        _ => Answer::Decide(json!({"kind": "reject"})),
    }
}

/// Whether an "always" approval recorded in the session's `permission.completed` events
/// covers `request`.
pub(crate) fn remembered(events: &[Event], request: &Value) -> bool {
    let field = |v: &'_ Value, name: &str| -> String {
        v.get(name).and_then(Value::as_str).unwrap_or("").to_owned()
    };
    let kind = field(request, "kind");
    let wanted_commands: BTreeSet<String> = command_ids(request).into_iter().collect();
    let mut approved_commands: BTreeSet<String> = BTreeSet::new();
    for event in events
        .iter()
        .filter(|e| e.event_type == "permission.completed")
    {
        let Ok(v) = serde_json::from_slice::<Value>(&event.json) else {
            continue;
        };
        let Some(result) = v.pointer("/data/result") else {
            continue;
        };
        let approval = result.get("approval").cloned().unwrap_or(Value::Null);
        let covered = match (field(result, "kind").as_str(), kind.as_str()) {
            ("approved-for-location", "path") => {
                let location = field(result, "locationKey");
                !location.is_empty() && is_within(&field(request, "path"), &location)
            }
            ("approved-for-session", "url") => {
                let domain = field(result, "domain");
                !domain.is_empty() && url_domain(&field(request, "url")).as_deref() == Some(&domain)
            }
            ("approved-for-session", "shell") => {
                if field(&approval, "kind") == "commands" {
                    approved_commands.extend(
                        approval
                            .get("commandIdentifiers")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(str::to_owned),
                    );
                }
                !wanted_commands.is_empty() && wanted_commands.is_subset(&approved_commands)
            }
            ("approved-for-session", "custom-tool") => {
                field(&approval, "kind") == "custom-tool"
                    && field(&approval, "toolName") == field(request, "toolName")
            }
            ("approved-for-session", "mcp") => {
                field(&approval, "kind") == "mcp"
                    && field(&approval, "serverName") == field(request, "serverName")
                    && field(&approval, "toolName") == field(request, "toolName")
            }
            ("approved-for-session", k) => !k.is_empty() && field(&approval, "kind") == k,
            _ => false,
        };
        if covered {
            return true;
        }
    }
    false
}

/// A permission prompt of `session` is pending (called once its pending entry exists):
/// the ACP connections attached to the session ask their clients, unless the prompt is
/// decided without asking (a hook prompt, a remembered "always", autopilot mode).
pub(crate) fn permission_requested(host: &mut Host, session: &str, request_id: &str) {
    let Some(live) = host.session(session) else {
        return;
    };
    let Some(PermissionPrompt {
        tool_call_id,
        tool_name,
        arguments,
        request,
    }) = host.pending_permission(session, request_id)
    else {
        return;
    };
    let mut acp_conns: Vec<ConnId> = Vec::new();
    let mut other_handlers = false;
    for (conn, attachment) in &live.attached {
        let speaks_acp = host.conn_state_ref::<ConnState>(*conn).is_some();
        let open = host.conn_is_open(*conn);
        if speaks_acp && open {
            acp_conns.push(*conn);
        } else if !speaks_acp && host.conn_dialect(*conn).is_some() && attachment.request_permission
        {
            other_handlers = true;
        }
    }
    if acp_conns.is_empty() {
        return;
    }
    let kind = request.get("kind").and_then(Value::as_str).unwrap_or("");
    let standing = if kind == "hook" {
        // Hook prompts are not shown to ACP clients.
        (!other_handlers).then(|| {
            json!({"kind": "denied-by-permission-request-hook",
                   "message": "Prompts raised by hooks are denied in ACP mode"})
        })
    } else if super::modes::current(live.events()) == "autopilot"
        || remembered(live.events(), request)
    {
        Some(json!({"kind": "approve-once"}))
    } else {
        None
    };
    if kind == "hook" || standing.is_some() {
        if let Some(decision) = standing {
            host.resolve_permission(session, request_id, &decision);
        }
        return;
    }
    let params = json!({
        "sessionId": session,
        "toolCall": tool_call(tool_call_id, tool_name, arguments, request),
        "options": options(),
    });
    for conn in acp_conns {
        let call = OutCall::Permission {
            session: session.to_owned(),
            request_id: request_id.to_owned(),
        };
        if let Some(id) = client::request(
            host,
            conn,
            "session/request_permission",
            &params,
            call,
            Some(PERMISSION_TIMEOUT),
        ) {
            if let Some(c) = host.conn_state::<ConnState>(conn) {
                c.asks.insert(request_id.to_owned(), id);
            }
        }
    }
}

/// The client answered (or did not answer) a `session/request_permission`.
pub(crate) fn permission_answered(
    host: &mut Host,
    conn: ConnId,
    session: &str,
    request_id: &str,
    outcome: Outcome,
) {
    if let Some(c) = host.conn_state::<ConnState>(conn) {
        c.asks.remove(request_id);
    }
    let request = match host.pending_permission(session, request_id) {
        Some(prompt) => prompt.request.clone(),
        // Already decided (another client, an abort): nothing to do.
        _ => return,
    };
    let answer = match outcome {
        Outcome::Result(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(result) => answer(&result, &request),
            Err(_) => Answer::Decide(json!({"kind": "reject"})),
        },
        Outcome::Error(_) | Outcome::TimedOut => {
            Answer::Decide(json!({"kind": "user-not-available"}))
        }
        // We withdrew the request, or the client left (its departure resolves prompts).
        Outcome::Cancelled | Outcome::Closed => return,
    };
    match answer {
        Answer::Decide(decision) => {
            host.resolve_permission(session, request_id, &decision);
        }
        Answer::Cancelled => {
            host.resolve_permission(session, request_id, &json!({"kind": "cancelled"}));
            cancel_turn(host, conn, session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    fn completed(id: &str, result: Value) -> Event {
        Event::new(
            id.into(),
            "permission.completed",
            &json!({"requestId": id, "toolCallId": "c", "result": result}),
            false,
            Timestamp::EPOCH,
            None,
        )
    }

    /// What "always" records, as `resolve_permission` writes it into `permission.completed`.
    fn recorded(decision: Value) -> Value {
        let mut result = decision;
        let kind = match result["kind"].as_str().unwrap() {
            "approve-for-location" => "approved-for-location",
            _ => "approved-for-session",
        };
        result["kind"] = json!(kind);
        result
    }

    #[test]
    fn answers_map_to_decisions() {
        let read = json!({"kind": "read", "path": "/w/a"});
        let sel = |id: &str| json!({"outcome": {"outcome": "selected", "optionId": id}});
        assert_eq!(
            answer(&sel("allow-once"), &read),
            Answer::Decide(json!({"kind": "approve-once"}))
        );
        assert_eq!(
            answer(&sel("reject-once"), &read),
            Answer::Decide(json!({"kind": "reject"}))
        );
        assert_eq!(
            answer(&sel("bogus"), &read),
            Answer::Decide(json!({"kind": "reject"}))
        );
        assert_eq!(
            answer(&json!({}), &read),
            Answer::Decide(json!({"kind": "reject"}))
        );
        assert_eq!(
            answer(&json!({"outcome": {"outcome": "cancelled"}}), &read),
            Answer::Cancelled
        );
        assert_eq!(
            answer(&sel("allow-always"), &read),
            Answer::Decide(json!({"kind": "approve-for-session", "approval": {"kind": "read"}}))
        );
        let options = options();
        let kinds: Vec<&str> = options
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    }

    #[test]
    fn always_approvals_cover_what_they_should() {
        let path = json!({"kind": "path", "path": "/data/x/a.txt"});
        let events = [completed("1", recorded(always_decision(&path)))];
        assert!(remembered(
            &events,
            &json!({"kind": "path", "path": "/data/x/b/c.txt"})
        ));
        assert!(!remembered(
            &events,
            &json!({"kind": "path", "path": "/data/y.txt"})
        ));
        assert!(!remembered(
            &events,
            &json!({"kind": "read", "path": "/data/x/a.txt"})
        ));

        let url = json!({"kind": "url", "url": "https://Example.com/a"});
        let events = [completed("1", recorded(always_decision(&url)))];
        assert!(remembered(
            &events,
            &json!({"kind": "url", "url": "http://example.com:8/b"})
        ));
        assert!(!remembered(
            &events,
            &json!({"kind": "url", "url": "https://other.org/"})
        ));

        let shell = |cmds: &[&str]| {
            json!({"kind": "shell", "commands": cmds.iter()
                .map(|c| json!({"identifier": c})).collect::<Vec<_>>()})
        };
        let events = [
            completed("1", recorded(always_decision(&shell(&["ls"])))),
            completed("2", recorded(always_decision(&shell(&["grep"])))),
        ];
        assert!(remembered(&events, &shell(&["ls", "grep"])));
        assert!(!remembered(&events, &shell(&["ls", "rm"])));

        let read = json!({"kind": "read", "path": "/w/a"});
        let events = [completed("1", recorded(always_decision(&read)))];
        assert!(remembered(
            &events,
            &json!({"kind": "read", "path": "/elsewhere"})
        ));
        assert!(!remembered(
            &events,
            &json!({"kind": "write", "fileName": "/w/a"})
        ));

        let tool = json!({"kind": "custom-tool", "toolName": "get_weather"});
        let events = [completed("1", recorded(always_decision(&tool)))];
        assert!(remembered(&events, &tool));
        assert!(!remembered(
            &events,
            &json!({"kind": "custom-tool", "toolName": "other"})
        ));

        // Approve-once results and denials are not remembered.
        let events = [
            completed("1", json!({"kind": "approved"})),
            completed("2", json!({"kind": "denied-interactively-by-user"})),
        ];
        assert!(!remembered(&events, &read));
    }

    #[test]
    fn permission_tool_calls_carry_the_real_id() {
        let call = tool_call(
            "call_7",
            "view",
            &json!({"path": "/w/a.txt"}),
            &json!({"kind": "path", "path": "/w/a.txt"}),
        );
        assert_eq!(call["toolCallId"], "call_7");
        assert_eq!(call["kind"], "read");
        assert_eq!(call["status"], "pending");
        assert!(call["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("/w/a.txt"));
    }
}
