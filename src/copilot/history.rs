//! Reading and compacting a session's history: `session.eventLog.read` / `tail` and
//! `session.history.compact`, in the runtime's shapes (`api.schema.json`).
//!
//! * The event log is the session's persisted events (agentwire keeps no ring of ephemeral
//!   events, so `includeEphemeral` adds nothing to a read of history). A forward read at the
//!   tail with `waitMs` waits (`event_log_wait`): the first event the filter admits that
//!   arrives in time, persisted or ephemeral, answers it. Cursors are `after:<eventId>` (forward) and `before:<eventId>`
//!   (backward); `start` is the beginning. A cursor whose event is gone (truncated history)
//!   is `cursorStatus:"expired"` and the read falls back to the boundary, as the runtime.
//! * Compaction does not ask the model: the summary is the earlier user and assistant
//!   messages, each cut to [`SUMMARY_CHARS`] characters (after the previous summary, if any),
//!   and from then on the model sees that summary instead of those messages. `session.compaction_start` then
//!   `session.compaction_complete` are persisted events (a restart keeps the compaction).

use serde_json::{json, Value};

use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};
use crate::session::Event;

use super::method_table::Call;
use super::session_state::required_str;
use super::state_files;
use super::surface::{failed, Answer};

/// Each earlier message is cut to this many characters in a compaction summary.
pub(crate) const SUMMARY_CHARS: usize = 300;

/// The cursor of the beginning of the log.
const START: &str = "start";

fn invalid(message: String) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {message}"))
}

fn events(host: &Host, session: &str) -> Vec<Event> {
    host.session(session)
        .map(|s| s.events().to_vec())
        .unwrap_or_default()
}

pub(super) fn tail(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    let cursor = match events(host, session).last() {
        Some(e) => format!("after:{}", e.id),
        None => START.to_owned(),
    };
    Ok(json!({"cursor": cursor}))
}

/// Which events a read returns.
pub(super) struct Filter {
    types: Option<Vec<String>>,
    primary_only: bool,
    agent_ids: Option<Vec<String>>,
}

impl Filter {
    pub(super) fn of(p: &Value) -> Result<Filter, ErrorObject> {
        let types = match p.get("types") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s == "*" => None,
            Some(Value::Array(list)) if !list.is_empty() => Some(
                list.iter()
                    .map(|t| t.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| invalid("`types` must be \"*\" or a list of strings".into()))?,
            ),
            Some(_) => return Err(invalid("`types` must be \"*\" or a non-empty list".into())),
        };
        let primary_only = match p.get("agentScope").and_then(Value::as_str) {
            None | Some("all") => false,
            Some("primary") => true,
            Some(other) => return Err(invalid(format!("unknown agentScope `{other}`"))),
        };
        let agent_ids = p.get("agentIds").and_then(Value::as_array).map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        });
        Ok(Filter {
            types,
            primary_only,
            agent_ids,
        })
    }

    pub(super) fn admits(&self, event: &Value) -> bool {
        let kind = event["type"].as_str().unwrap_or_default();
        if let Some(types) = &self.types {
            if !types.iter().any(|t| t == kind) {
                return false;
            }
        }
        let agent = event["agentId"]
            .as_str()
            .or_else(|| event["data"]["agentId"].as_str());
        if let Some(ids) = &self.agent_ids {
            return agent.is_some_and(|a| ids.iter().any(|i| i == a));
        }
        !self.primary_only || agent.is_none() || kind.starts_with("subagent.")
    }
}

pub(super) fn read(host: &mut Host, session: &str, p: &Value) -> Answer {
    let max = match p.get("max") {
        None | Some(Value::Null) => 200,
        Some(v) => match v.as_u64() {
            Some(n @ 1..=1000) => n as usize,
            _ => return Err(invalid("`max` must be between 1 and 1000".into())),
        },
    };
    let backward = match p.get("direction").and_then(Value::as_str) {
        None | Some("forward") => false,
        Some("backward") => true,
        Some(other) => return Err(invalid(format!("unknown direction `{other}`"))),
    };
    let filter = Filter::of(p)?;
    let log = events(host, session);
    let position = |id: &str| log.iter().position(|e| e.id == id);
    let cursor = p.get("cursor").and_then(Value::as_str).unwrap_or(START);
    // Where the read starts (forward: the first index to read; backward: one past the last).
    let (from, status) = match (cursor, backward) {
        (START, false) | ("", false) => (0, "ok"),
        (START, true) | ("", true) => (log.len(), "ok"),
        (c, _) => {
            // A backward cursor read forward (or the reverse) still names a position.
            let found = if let Some(id) = c.strip_prefix("after:") {
                position(id).map(|i| i + 1)
            } else if let Some(id) = c.strip_prefix("before:") {
                position(id)
            } else {
                None
            };
            match found {
                Some(i) => (i, "ok"),
                None if backward => (log.len(), "expired"),
                None => (0, "expired"),
            }
        }
    };
    let parsed = |e: &Event| {
        let mut v = serde_json::from_slice::<Value>(&e.json).ok()?;
        super::stored_state::strip(&mut v);
        Some(v)
    };
    let mut out = Vec::new();
    let (cursor, has_more) = if backward {
        let mut i = from;
        while i > 0 && out.len() < max {
            i -= 1;
            if let Some(v) = parsed(&log[i]).filter(|v| filter.admits(v)) {
                out.push(v);
            }
        }
        out.reverse();
        let cursor = match log.get(i) {
            Some(e) if i < from => format!("before:{}", e.id),
            _ => cursor.to_owned(),
        };
        (cursor, i > 0)
    } else {
        let mut i = from;
        while i < log.len() && out.len() < max {
            if let Some(v) = parsed(&log[i]).filter(|v| filter.admits(v)) {
                out.push(v);
            }
            i += 1;
        }
        let cursor = match i.checked_sub(1).and_then(|last| log.get(last)) {
            Some(e) => format!("after:{}", e.id),
            None => START.to_owned(),
        };
        (cursor, i < log.len())
    };
    Ok(json!({"events": out, "cursor": cursor, "hasMore": has_more, "cursorStatus": status}))
}

/// One conversation message of the log, for a compaction summary.
fn message_of(event: &Value) -> Option<(&'static str, String)> {
    let role = match event["type"].as_str()? {
        "user.message" => "user",
        "assistant.message" => "assistant",
        _ => return None,
    };
    let text = event["data"]["content"].as_str().unwrap_or_default().trim();
    if text.is_empty() {
        return None;
    }
    let cut: String = text.chars().take(SUMMARY_CHARS).collect();
    let ellipsis = if cut.len() < text.len() { "…" } else { "" };
    Some((role, format!("{cut}{ellipsis}")))
}

/// A rough token count (4 characters a token), as the runtime's estimates are.
fn tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

/// The previous compaction's summary (trimmed; empty when none), the messages since it
/// (role, text cut to [`SUMMARY_CHARS`]), the parsed log and where those messages start.
fn conversation_since_compaction(
    host: &Host,
    session: &str,
) -> (String, Vec<(&'static str, String)>, Vec<Value>, usize) {
    let log = events(host, session);
    let parsed: Vec<Value> = log
        .iter()
        .filter_map(|e| serde_json::from_slice(&e.json).ok())
        .collect();
    let last = parsed
        .iter()
        .rposition(|v| v["type"] == "session.compaction_complete" && v["data"]["success"] == true);
    let since = last.map_or(0, |i| i + 1);
    // The model sees only the last summary: a new one carries the previous one.
    let previous = last
        .and_then(|i| parsed[i]["data"]["summaryContent"].as_str())
        .unwrap_or_default()
        .trim()
        .to_owned();
    let messages: Vec<(&str, String)> = parsed[since..].iter().filter_map(message_of).collect();
    (previous, messages, parsed, since)
}

/// The extractive summary of a conversation: each message cut to its first characters,
/// after the previous summary; empty for an empty conversation.
fn summary_text(previous: &str, messages: &[(&str, String)]) -> String {
    let mut summary = String::new();
    if !messages.is_empty() || !previous.is_empty() {
        summary.push_str(
            "Summary of the earlier conversation (each message cut to its first characters):\n",
        );
        if !previous.is_empty() {
            summary.push_str(&format!("- before that: {previous}\n"));
        }
        for (role, text) in messages {
            summary.push_str(&format!("- {role}: {text}\n"));
        }
    }
    summary
}

/// `session.history.summarizeForHandoff`: `{summary}` of the conversation so far (the same
/// extractive summary a compaction writes, without compacting); `""` when nothing was said.
pub(super) fn summarize_for_handoff(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    _: &Value,
) -> Answer {
    let (previous, messages, _, _) = conversation_since_compaction(host, session);
    Ok(json!({"summary": summary_text(&previous, &messages)}))
}

pub(super) fn compact(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    compact_as(host, call.method, session, p)
}

/// `session.history.compact` (also the `/compact` slash command, which fails in its name).
pub(super) fn compact_as(host: &mut Host, method: &str, session: &str, p: &Value) -> Answer {
    if host.session_busy(session) {
        return Err(failed(
            method,
            "Cannot compact while the session is processing a message",
        ));
    }
    let trigger = match p.get("trigger").and_then(Value::as_str) {
        None => "manual",
        Some(t @ ("manual" | "model_switch")) => t,
        Some(other) => return Err(invalid(format!("unknown trigger `{other}`"))),
    };
    let instructions = match p.get("customInstructions") {
        None | Some(Value::Null) => None,
        Some(_) => Some(required_str(p, "customInstructions")?.to_owned()),
    };
    let (previous, messages, parsed, since) = conversation_since_compaction(host, session);
    let pre_chars: usize = parsed[since..]
        .iter()
        .filter(|v| {
            matches!(
                v["type"].as_str(),
                Some("user.message" | "assistant.message")
            )
        })
        .map(|v| v["data"]["content"].as_str().map_or(0, str::len))
        .sum();
    let mut start = json!({"trigger": trigger, "conversationTokens": tokens(pre_chars)});
    if let Some(limit) = p.get("tokenLimit").and_then(Value::as_u64) {
        start["tokenLimit"] = json!(limit);
    }
    host.emit(session, "session.compaction_start", &start, false);
    let summary = summary_text(&previous, &messages);
    let post = tokens(summary.len());
    let removed_tokens = tokens(pre_chars).saturating_sub(post);
    let mut complete = json!({
        "success": true,
        "preCompactionTokens": tokens(pre_chars),
        "postCompactionTokens": post,
        "preCompactionMessagesLength": messages.len(),
        "messagesRemoved": messages.len(),
        "tokensRemoved": removed_tokens,
        "summaryContent": summary,
    });
    if let Some(text) = &instructions {
        complete["customInstructions"] = json!(text);
    }
    complete["trigger"] = json!(trigger);
    if let Some(limit) = start.get("tokenLimit") {
        complete["tokenLimit"] = limit.clone();
    }
    // Each compaction is a checkpoint of the conversation (its summary), numbered from 1.
    let number = host
        .session(session)
        .map_or(0, |s| state_files::checkpoints(s.events()).len() as u64)
        + 1;
    complete["checkpointNumber"] = json!(number);
    let filename =
        state_files::checkpoint_filename(number, &state_files::checkpoint_title(&summary));
    // The checkpoint's file exists where a file provider keeps the session's state.
    if let Some(dir) = host.provided_state_dir(session) {
        let dir = dir.trim_end_matches('/');
        complete["checkpointPath"] = json!(format!("{dir}/checkpoints/{filename}"));
    }
    host.emit(session, "session.compaction_complete", &complete, false);
    Ok(json!({
        "success": true,
        "tokensRemoved": removed_tokens,
        "messagesRemoved": messages.len(),
        "summaryContent": summary,
    }))
}
