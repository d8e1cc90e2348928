//! The server-level session store methods (`sessions.*`) over agentwire's store: the
//! sessions the host has loaded (the runtime driver loads every stored session at start and
//! hears of every persisted event and deletion, `StoreOutput::Persist` / `SessionDeleted`).
//!
//! * `sessions.list` is `session.list` (the `filter.cwd` filter; `metadataLimit` is accepted).
//! * `sessions.close` detaches every client from the session (each as `session.detach`, and
//!   each connection's calls on it then fail with "Session not found" until it resumes it);
//!   the session stays in the store.
//! * `sessions.releaseLock` answers `{}`: agentwire's store takes no per-session lock file
//!   (one process owns the data directory), so there is none to release.
//! * `sessions.getSizes`: a session's size is the bytes of its persisted events (the
//!   store's JSON lines). `sessions.bulkDelete` deletes loaded sessions and reports those
//!   bytes (0 for an unknown id); `sessions.pruneOld` finds sessions not modified for
//!   `olderThanDays` days (named ones only with `includeNamed`; sessions with attached
//!   clients are `skipped`) and deletes them unless `dryRun`.
//! * `sessions.findByTaskId`: the id names a GitHub task (the hosted coding agent's), and
//!   no agentwire session is started from one (`{}`). `sessions.getLastForContext`: the most recently modified session whose working
//!   directory is `context.cwd`.
//! * `sessions.enrichMetadata` fills each given metadata entry from the loaded session
//!   (working directory context, summary and name), keeping what the caller sent otherwise.
//! * Plugins: agentwire loads no plugins and no repository hooks (hooks come from clients,
//!   `hooks.invoke`). `sessions.setAdditionalPlugins` accepts the empty list (nothing to
//!   add) and fails for any plugin; `sessions.reloadPluginHooks` answers `{}` for a known
//!   session and `sessions.loadDeferredRepoHooks` `{startupPrompts: [], hookCount: 0}`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

use super::method_table::Call;
use super::session_state::session_id;
use super::surface::{failed, known, Answer};

pub(super) fn release_lock(_: &mut Host, _: &Call<'_>, p: &Value) -> Answer {
    session_id(p).map(|_| json!({}))
}

pub(super) fn sizes(host: &mut Host, _: &Call<'_>, _: &Value) -> Answer {
    let sizes: BTreeMap<&str, u64> = host
        .sessions()
        .map(|s| (s.id.as_str(), size_of(host, &s.id)))
        .collect();
    Ok(json!({"sizes": sizes}))
}

pub(super) fn find_by_task_id(_: &mut Host, _: &Call<'_>, p: &Value) -> Answer {
    string(p, "taskId").map(|_| json!({}))
}

pub(super) fn last_for_context(host: &mut Host, _: &Call<'_>, p: &Value) -> Answer {
    let cwd = p
        .get("context")
        .and_then(|c| c.get("cwd"))
        .and_then(Value::as_str);
    let last = host
        .sessions()
        .filter(|s| cwd.is_none() || s.cwd.as_deref() == cwd)
        .max_by_key(|s| s.modified_time);
    Ok(match last {
        Some(s) => json!({"sessionId": s.id}),
        None => json!({}),
    })
}

pub(super) fn set_additional_plugins(_: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    match p.get("plugins").and_then(Value::as_array) {
        Some(list) if list.is_empty() => Ok(json!({})),
        Some(_) => Err(failed(
            call.method,
            "plugins are not available on this server (agentwire does not host the Copilot product's plugins)",
        )),
        None => Err(invalid("missing array field `plugins`")),
    }
}

fn invalid(message: &str) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {message}"))
}

fn string<'a>(p: &'a Value, field: &str) -> Result<&'a str, ErrorObject> {
    p.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(&format!("missing field `{field}`")))
}

fn strings(p: &Value, field: &str) -> Result<Vec<String>, ErrorObject> {
    match p.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| invalid(&format!("`{field}` must be a list of strings"))),
        Some(_) => Err(invalid(&format!("`{field}` must be a list of strings"))),
    }
}

/// The bytes of the session's persisted events (as the store writes them, a line each).
fn size_of(host: &Host, session: &str) -> u64 {
    host.session(session).map_or(0, |s| {
        s.events().iter().map(|e| e.json.len() as u64 + 1).sum()
    })
}

/// `sessions.close`: every client is detached; the session stays in the store.
pub(super) fn close(host: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    let session = session_id(p)?;
    known(host, call.method, &session)?;
    let conns: Vec<_> = host
        .session(&session)
        .map(|s| s.attached.keys().copied().collect())
        .unwrap_or_default();
    for conn in conns {
        host.detach_conn(&session, conn);
        super::ConnState::release(host, conn, &session);
    }
    Ok(json!({}))
}

pub(super) fn bulk_delete(host: &mut Host, _: &Call<'_>, p: &Value) -> Answer {
    let ids = strings(p, "sessionIds")?;
    let mut freed = BTreeMap::new();
    for id in ids {
        let size = size_of(host, &id);
        let deleted = host.delete_session(&id);
        freed.insert(id, if deleted { size } else { 0 });
    }
    Ok(json!({"freedBytes": freed}))
}

pub(super) fn prune(host: &mut Host, _: &Call<'_>, p: &Value) -> Answer {
    let days = p
        .get("olderThanDays")
        .and_then(Value::as_f64)
        .filter(|d| *d >= 0.0)
        .ok_or_else(|| invalid("`olderThanDays` must be a number of days, 0 or more"))?;
    let dry_run = p.get("dryRun").and_then(Value::as_bool).unwrap_or(false);
    let include_named = p
        .get("includeNamed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let exclude = strings(p, "excludeSessionIds")?;
    let age = Duration::from_secs_f64((days * 86_400.0).min(1e12));
    let now = host.now();
    let (mut candidates, mut skipped) = (Vec::new(), Vec::new());
    for s in host.sessions() {
        if exclude.contains(&s.id) || now.saturating_duration_since(s.modified_time) < age {
            continue;
        }
        let named = super::session_state::name(host, &s.id).is_some();
        if named && !include_named {
            continue;
        }
        if s.attached.is_empty() {
            candidates.push(s.id.clone());
        } else {
            skipped.push(s.id.clone());
        }
    }
    let freed: u64 = candidates.iter().map(|id| size_of(host, id)).sum();
    let mut deleted = Vec::new();
    if !dry_run {
        for id in &candidates {
            if host.delete_session(id) {
                deleted.push(id.clone());
            }
        }
    }
    Ok(
        json!({"deleted": deleted, "candidates": candidates, "skipped": skipped,
              "freedBytes": freed, "dryRun": dry_run}),
    )
}

/// `sessions.enrichMetadata`: each entry completed from the loaded session.
pub(super) fn enrich(host: &mut Host, _: &Call<'_>, p: &Value) -> Answer {
    let Some(list) = p.get("sessions").and_then(Value::as_array) else {
        return Err(invalid("missing array field `sessions`"));
    };
    let mut out = Vec::with_capacity(list.len());
    for entry in list {
        let Some(id) = entry.get("sessionId").and_then(Value::as_str) else {
            return Err(invalid("every entry of `sessions` needs a `sessionId`"));
        };
        let mut enriched = entry.clone();
        if let Some(known) = super::methods::metadata(host, id) {
            for field in ["context", "summary", "name"] {
                if let Some(v) = known.get(field) {
                    enriched[field] = v.clone();
                }
            }
            if let Some(name) = super::session_state::name(host, id) {
                enriched["name"] = json!(name);
            }
        }
        enriched["isRemote"] = entry.get("isRemote").cloned().unwrap_or(json!(false));
        out.push(enriched);
    }
    Ok(json!({"sessions": out}))
}
