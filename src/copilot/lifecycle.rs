//! Session lifecycle beyond create/resume/detach/delete: `session.destroy` (the repository
//! Node SDK's disconnect; the same as `session.detach`), `session.shutdown`,
//! `session.suspend`, `sessions.save`, `sessions.fork`, `session.history.truncate`, and
//! the small reads and writes every app makes: `session.log`,
//! `session.eventLog.registerInterest` / `releaseInterest`, `session.metadata.isProcessing`,
//! `session.usage.getMetrics` (`session.tasks.*` are in `tasks`).

use serde_json::{json, Value};

use crate::host::{HistoryError, Host};
use crate::jsonrpc::{code, ErrorObject};

use serde_json::value::RawValue;

use super::method_table::{Call, Reply};
use super::session_state::{name, required_str};
use super::surface::{failed, Answer};

/// `session.destroy`: as `session.detach`, the same result and the same events.
pub(super) fn destroy(host: &mut Host, call: &Call<'_>, session: &str, _: &Value) -> Answer {
    let conn = call.conn;
    host.session_end_hook(session, conn);
    host.stop_extensions(session, Some(conn));
    host.detach_conn(session, conn);
    super::ConnState::release(host, conn, session);
    Ok(json!({"success": true}))
}

pub(super) fn shutdown(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let shutdown_type = match p.get("type").and_then(Value::as_str) {
        Some("error") => "error",
        _ => "routine",
    };
    let reason = p.get("reason").and_then(Value::as_str);
    host.emit_shutdown(session, shutdown_type, reason);
    Ok(Value::Null)
}

pub(super) fn register_interest(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let event_type = required_str(p, "eventType")?;
    let handle = host.register_interest(session, event_type);
    Ok(json!({"handle": handle}))
}

pub(super) fn release_interest(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let handle = required_str(p, "handle")?;
    host.release_interest(session, handle);
    Ok(json!({"success": true}))
}

pub(super) fn is_processing(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    Ok(json!({"processing": host.session_busy(session)}))
}

pub(super) fn usage_metrics(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    Ok(usage(host, session))
}

/// `session.log`: a `session.info` / `session.warning` / `session.error` event (ephemeral
/// when asked), answered with its id.
pub(super) fn log(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
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
pub(super) fn truncate(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    let event_id = required_str(p, "eventId")?;
    let removed = match host.truncate_history(session, event_id) {
        Ok(n) => n,
        Err(_) => {
            return Err(failed(
                call.method,
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

/// `session.history.listRewindPoints`: the session's turns and the files a rewind to each
/// would restore (`host/sessions/rewind.rs`).
pub(super) fn rewind_points(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    Ok(host.rewind_points(session))
}

/// `session.history.previewRewind {eventId}`.
pub(super) fn preview_rewind(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    let event_id = required_str(p, "eventId")?;
    host.rewind_preview(session, event_id).ok_or_else(|| {
        failed(
            call.method,
            format!("Event {event_id} is not a turn of this session"),
        )
    })
}

/// `session.history.rewind {eventId, mode}`: answered once the files are restored.
pub(super) fn rewind(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let started = super::surface::decode::<Value>(params).and_then(|p| {
        let session = super::session_state::session_id(&p)?;
        super::surface::known(host, call.method, &session)?;
        let event_id = required_str(&p, "eventId")?;
        let files =
            match p.get("mode").and_then(Value::as_str) {
                Some("conversation") => false,
                Some("conversation-and-files") => true,
                _ => return Err(crate::jsonrpc::ErrorObject::new(
                    crate::jsonrpc::code::INVALID_PARAMS,
                    "invalid params: mode must be \"conversation\" or \"conversation-and-files\"",
                )),
            };
        host.start_rewind(&session, call.conn, call.id, event_id, files)
            .map_err(|e| failed(call.method, e))
    });
    match started {
        Ok(answer) => answer.map(Ok),
        Err(e) => Some(Err(e)),
    }
}

/// `sessions.fork`: a new session (loaded, not attached: resume it) with the source's
/// persisted history up to `toEventId` (excluded); the source gets a `session.info`
/// (`infoType: "fork"`).
pub(super) fn fork(host: &mut Host, call: &Call<'_>, source: &str, p: &Value) -> Answer {
    let method = call.method;
    let source = source.to_owned();
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
                method,
                format!(
                    "Event {} not found in session {source}",
                    to_event.unwrap_or_default()
                ),
            ))
        }
        Err(e) => return Err(failed(method, format!("{e:?}"))),
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
