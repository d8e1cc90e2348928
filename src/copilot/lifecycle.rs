//! Session lifecycle beyond create/resume/detach/delete: `session.destroy` (the repository
//! Node SDK's disconnect; the same as `session.detach`), `session.shutdown`,
//! `session.suspend`, `sessions.save`, `sessions.fork`, `session.history.truncate`, and
//! the small reads and writes every app makes: `session.log`,
//! `session.eventLog.registerInterest` / `releaseInterest`, `session.metadata.isProcessing`,
//! `session.usage.getMetrics` (`session.tasks.*` are in `tasks`).

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::{ConnId, HistoryError, Host};
use crate::jsonrpc::{code, ErrorObject};

use super::session_state::{name, required_str, session_id};
use super::surface::{decode, failed, known, Answer};

/// Answers `method` if it is one of this module's.
pub(super) fn dispatch(
    host: &mut Host,
    conn: ConnId,
    method: &str,
    params: Option<&RawValue>,
) -> Option<Answer> {
    let answer = match method {
        "sessions.fork" => decode::<Value>(params).and_then(|p| fork(host, &p)),
        "session.destroy"
        | "session.shutdown"
        | "session.suspend"
        | "sessions.save"
        | "session.log"
        | "session.eventLog.registerInterest"
        | "session.eventLog.releaseInterest"
        | "session.metadata.isProcessing"
        | "session.usage.getMetrics"
        | "session.history.truncate" => decode::<Value>(params).and_then(|p| {
            let session = session_id(&p)?;
            known(host, method, &session)?;
            session_method(host, conn, method, &session, &p)
        }),
        _ => return None,
    };
    Some(answer)
}

fn session_method(host: &mut Host, conn: ConnId, method: &str, session: &str, p: &Value) -> Answer {
    match method {
        // As `session.detach`: the same result and the same events.
        "session.destroy" => {
            host.session_end_hook(session, conn);
            host.detach_conn(session, conn);
            super::ConnState::release(host, conn, session);
            Ok(json!({"success": true}))
        }
        "session.shutdown" => {
            let shutdown_type = match p.get("type").and_then(Value::as_str) {
                Some("error") => "error",
                _ => "routine",
            };
            let reason = p.get("reason").and_then(Value::as_str);
            host.emit_shutdown(session, shutdown_type, reason);
            Ok(Value::Null)
        }
        // The session's state is in memory and its events are handed to the store as they
        // are written: nothing to flush or unload.
        "session.suspend" => Ok(Value::Null),
        "sessions.save" => Ok(json!({})),
        "session.log" => log(host, session, p),
        "session.eventLog.registerInterest" => {
            let event_type = required_str(p, "eventType")?;
            let handle = host.register_interest(session, event_type);
            Ok(json!({"handle": handle}))
        }
        "session.eventLog.releaseInterest" => {
            let handle = required_str(p, "handle")?;
            host.release_interest(session, handle);
            Ok(json!({"success": true}))
        }
        "session.metadata.isProcessing" => Ok(json!({"processing": host.session_busy(session)})),
        "session.usage.getMetrics" => Ok(usage(host, session)),
        _ => truncate(host, session, p),
    }
}

/// `session.log`: a `session.info` / `session.warning` / `session.error` event (ephemeral
/// when asked), answered with its id.
fn log(host: &mut Host, session: &str, p: &Value) -> Answer {
    let message = required_str(p, "message")?;
    let (event_type, type_field) = match p.get("level").and_then(Value::as_str) {
        None | Some("info") => ("session.info", "infoType"),
        Some("warning") => ("session.warning", "warningType"),
        Some("error") => ("session.error", "errorType"),
        Some(other) => {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                format!("invalid params: unknown level `{other}` (info, warning, error)"),
            ))
        }
    };
    let kind = p
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("notification");
    let mut data = json!({type_field: kind, "message": message});
    for field in ["url", "tip"] {
        if let Some(v) = p.get(field).and_then(Value::as_str) {
            data[field] = json!(v);
        }
    }
    let ephemeral = p.get("ephemeral").and_then(Value::as_bool) == Some(true);
    let id = host.emit(session, event_type, &data, ephemeral);
    Ok(json!({"eventId": id}))
}

/// The session's usage totals (agentwire's scripted agent makes no model calls: zeros).
fn usage(host: &Host, session: &str) -> Value {
    let Some(s) = host.session(session) else {
        return Value::Null;
    };
    let mut metrics = json!({
        "totalPremiumRequestCost": 0.0,
        "totalUserRequests": s.events().iter().filter(|e| e.event_type == "user.message").count(),
        "totalNanoAiu": 0.0,
        "totalApiDurationMs": 0,
        "sessionStartTime": s.start_time.to_rfc3339(),
        "codeChanges": {"linesAdded": 0, "linesRemoved": 0, "filesModifiedCount": 0,
                        "filesModified": []},
        "modelMetrics": {},
        "agentMetrics": {},
        "lastCallInputTokens": 0,
        "lastCallOutputTokens": 0,
    });
    if let Some(model) = &s.model {
        metrics["currentModel"] = json!(model);
    }
    metrics
}

/// `session.history.truncate`: the named event and everything after it are removed; a
/// `session.snapshot_rewind` (ephemeral) says so.
fn truncate(host: &mut Host, session: &str, p: &Value) -> Answer {
    let event_id = required_str(p, "eventId")?;
    let removed = match host.truncate_history(session, event_id) {
        Ok(n) => n,
        Err(_) => {
            return Err(failed(
                "session.history.truncate",
                format!("Event {event_id} not found in session"),
            ))
        }
    };
    host.emit(
        session,
        "session.snapshot_rewind",
        &json!({"upToEventId": event_id, "eventsRemoved": removed}),
        true,
    );
    Ok(json!({"eventsRemoved": removed, "checkpointCleanupFailed": false}))
}

/// `sessions.fork`: a new session (loaded, not attached: resume it) with the source's
/// persisted history up to `toEventId` (excluded); the source gets a `session.info`
/// (`infoType: "fork"`).
fn fork(host: &mut Host, p: &Value) -> Answer {
    const METHOD: &str = "sessions.fork";
    let source = session_id(p)?;
    known(host, METHOD, &source)?;
    let to_event = p.get("toEventId").and_then(Value::as_str);
    let new_id = host.new_id();
    let fork_name = match p.get("name").and_then(Value::as_str) {
        Some(n) if !n.trim().is_empty() => n.trim().to_owned(),
        _ => {
            let base = name(host, &source)
                .or_else(|| host.session(&source).and_then(|s| s.summary.clone()))
                .unwrap_or_else(|| {
                    format!("Session {}", source.chars().take(8).collect::<String>())
                });
            format!("{base} (fork)")
        }
    };
    match host.fork_session(&source, &new_id, to_event) {
        Ok(()) => {}
        Err(HistoryError::NoEvent) => {
            return Err(failed(
                METHOD,
                format!(
                    "Event {} not found in session {source}",
                    to_event.unwrap_or_default()
                ),
            ))
        }
        Err(e) => return Err(failed(METHOD, format!("{e:?}"))),
    }
    super::session_state::set_name(host, &new_id, &fork_name);
    host.emit(
        &source,
        "session.info",
        &json!({"infoType": "fork",
                "message": format!("Forked this session into \"{fork_name}\" ({new_id}).")}),
        false,
    );
    Ok(json!({"sessionId": new_id, "name": fork_name}))
}
