//! Session metadata and the small per-session services the runtime offers beside the
//! conversation: the working directory and its git context
//! (`session.metadata.setWorkingDirectory` / `recordContextChange`), the context window
//! (`session.metadata.contextInfo`, `recomputeContextTokens`, `getContextAttribution`,
//! `getContextHeaviestMessages`), the tools offered to the model
//! (`session.tools.getCurrentMetadata`, `initializeAndValidate`, `updateSubagentSettings`),
//! and the services agentwire does not run, answered as the runtime answers a session that
//! has none (`session.visibility.*`, `session.completions.*`, `session.plan.readSqlTodos`,
//! `session.lsp.initialize`, `session.telemetry.*`) or refused
//! (`session.extensions.sendAttachmentsToMessage`).
//!
//! Where the state lives:
//! * The working directory is the session's (`Session::cwd`); a change is a persisted
//!   `session.context_changed` event, so a restart restores it.
//! * The context-window figures are those of the session's last model call: the
//!   `session.usage_info` event the model agent emits before each call (estimates, a token
//!   per four bytes) is kept with the session ([`ContextRecord`], in memory). Before the first
//!   call `contextInfo` / `getContextAttribution` answer `null`, as the runtime does before its
//!   system prompt is built. The heaviest messages are read from the persisted log (since the
//!   last compaction).
//! * Sub-agent settings and telemetry feature overrides are kept with the session (in
//!   memory); agentwire's agents start no sub-agents and agentwire sends no telemetry, so
//!   nothing else reads them.

use serde_json::{json, Value};

use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};
use crate::session::Event;

use super::method_table::Call;
use super::session_state::required_str;
use super::surface::{failed, Answer};

/// What this module keeps per session.
#[derive(Debug, Default)]
pub(super) struct ContextRecord {
    /// The last `session.usage_info` data (the last model call's context).
    usage: Option<Value>,
    /// `session.tools.updateSubagentSettings`' last `subagents` (`None`: cleared).
    subagents: Option<Value>,
    /// `session.telemetry.setFeatureOverrides`' last `features`.
    feature_overrides: Option<Value>,
}

/// Keeps the last model call's context figures.
pub(super) fn event_emitted(host: &mut Host, session: &str, event: &Event, data: &Value) {
    if event.event_type == "session.usage_info" {
        if let Some(record) = host.session_state::<ContextRecord>(session) {
            record.usage = Some(data.clone());
        }
    }
}

fn invalid(message: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {message}"))
}

fn number(p: &Value, field: &str) -> Result<u64, ErrorObject> {
    p.get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid(format!("missing non-negative integer field `{field}`")))
}

pub(super) fn set_working_directory(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    let cwd = required_str(p, "workingDirectory")?.to_owned();
    if cwd.trim().is_empty() {
        return Err(invalid("`workingDirectory` must not be empty"));
    }
    set_cwd(host, session, &cwd);
    Ok(json!({"workingDirectory": cwd}))
}

pub(super) fn record_context_change(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    record_context(host, session, p)
}

pub(super) fn context_info(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    context_info_of(host, session, p)
}

pub(super) fn recompute_context_tokens(
    host: &mut Host,
    call: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    required_str(p, "modelId")?;
    let Some(usage) = usage(host, session) else {
        return Err(failed(
            call.method,
            "the session has made no model call yet: its context is not built",
        ));
    };
    let (system, messages) = (
        field(&usage, "systemTokens"),
        field(&usage, "conversationTokens"),
    );
    Ok(
        json!({"totalTokens": system + messages, "messagesTokenCount": messages,
              "systemTokenCount": system}),
    )
}

pub(super) fn context_attribution(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    _: &Value,
) -> Answer {
    Ok(attribution(host, session))
}

pub(super) fn heaviest_messages(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    heaviest(host, session, p)
}

pub(super) fn tools_metadata(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    let tools: Vec<Value> = host
        .model_builtin_tools(session)
        .into_iter()
        .chain(host.model_tools(session))
        .map(|t| {
            json!({"name": t.name, "description": t.description,
                        "parameters": t.parameters})
        })
        .collect();
    Ok(json!({"tools": tools}))
}

pub(super) fn update_subagent_settings(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    let subagents = match p.get("subagents") {
        None => return Err(invalid("missing field `subagents` (an object or null)")),
        Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(_) => return Err(invalid("`subagents` must be an object or null")),
    };
    if let Some(record) = host.session_state::<ContextRecord>(session) {
        record.subagents = subagents;
    }
    Ok(json!({}))
}

pub(super) fn visibility_set(_: &mut Host, _: &Call<'_>, _: &str, p: &Value) -> Answer {
    match required_str(p, "status")? {
        "repo" | "unshared" => Ok(json!({"synced": false})),
        other => Err(invalid(format!(
            "unknown status `{other}` (repo, unshared)"
        ))),
    }
}

pub(super) fn completions_request(_: &mut Host, _: &Call<'_>, _: &str, p: &Value) -> Answer {
    required_str(p, "text")?;
    number(p, "offset")?;
    Ok(json!({"items": []}))
}

pub(super) fn set_feature_overrides(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    let Some(features) = p.get("features").filter(|f| f.is_object()) else {
        return Err(invalid("missing object field `features`"));
    };
    let features = features.clone();
    if let Some(record) = host.session_state::<ContextRecord>(session) {
        record.feature_overrides = Some(features);
    }
    Ok(Value::Null)
}

/// `session.extensions.sendAttachmentsToMessage`: not available (and only for an extension).
pub(super) fn send_attachments(
    host: &mut Host,
    call: &Call<'_>,
    session: &str,
    _: &Value,
) -> Answer {
    let is_extension = host
        .session(session)
        .and_then(|s| s.attached.get(&call.conn))
        .is_some_and(|a| a.extension.is_some());
    let reason = if is_extension {
        "attachments sent by extensions are not available on this server"
    } else {
        "only an extension connection may send attachments (this connection did not join the session as an extension)"
    };
    Err(failed(call.method, reason))
}

/// The session's working directory becomes `cwd` (a persisted `session.context_changed`).
fn set_cwd(host: &mut Host, session: &str, cwd: &str) {
    if let Some(s) = host.session_mut(session) {
        s.cwd = Some(cwd.to_owned());
    }
    host.emit(
        session,
        "session.context_changed",
        &json!({"cwd": cwd}),
        false,
    );
}

/// `session.metadata.recordContextChange`: the session's working directory is authoritative
/// (a context naming another one is ignored, no event); otherwise the context (git root,
/// branch, repository, commits) is recorded as a persisted `session.context_changed`.
fn record_context(host: &mut Host, session: &str, p: &Value) -> Answer {
    let Some(context) = p.get("context").filter(|c| c.is_object()) else {
        return Err(invalid("missing object field `context`"));
    };
    let cwd = required_str(context, "cwd")?;
    let current = host.session(session).and_then(|s| s.cwd.clone());
    if current.as_deref().is_some_and(|c| c != cwd) {
        return Ok(json!({}));
    }
    let mut data = serde_json::Map::new();
    for field in [
        "cwd",
        "gitRoot",
        "repository",
        "hostType",
        "repositoryHost",
        "branch",
        "headCommit",
        "baseCommit",
    ] {
        if let Some(v) = context.get(field).filter(|v| v.is_string()) {
            data.insert(field.to_owned(), v.clone());
        }
    }
    if current.is_none() {
        if let Some(s) = host.session_mut(session) {
            s.cwd = Some(cwd.to_owned());
        }
    }
    host.emit(
        session,
        "session.context_changed",
        &Value::Object(data),
        false,
    );
    Ok(json!({}))
}

fn usage(host: &Host, session: &str) -> Option<Value> {
    host.session_state_ref::<ContextRecord>(session)?
        .usage
        .clone()
}

fn field(v: &Value, name: &str) -> u64 {
    v.get(name).and_then(Value::as_u64).unwrap_or(0)
}

/// `session.metadata.contextInfo`: the last model call's figures against the caller's
/// limits (`limit` is the whole window: prompt plus output; agentwire compacts only when
/// asked, so the compaction threshold is the prompt limit).
fn context_info_of(host: &Host, session: &str, p: &Value) -> Answer {
    let prompt_limit = number(p, "promptTokenLimit")?;
    let output_limit = number(p, "outputTokenLimit")?;
    let Some(usage) = usage(host, session) else {
        return Ok(json!({"contextInfo": null}));
    };
    let model = p
        .get("selectedModel")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| host.session(session).and_then(|s| s.model.clone()))
        .unwrap_or_default();
    let (system, conversation, tools) = (
        field(&usage, "systemTokens"),
        field(&usage, "conversationTokens"),
        field(&usage, "toolDefinitionsTokens"),
    );
    Ok(json!({"contextInfo": {
        "modelName": model,
        "systemTokens": system,
        "conversationTokens": conversation,
        "toolDefinitionsTokens": tools,
        "mcpToolsTokens": 0,
        "totalTokens": system + conversation + tools,
        "promptTokenLimit": prompt_limit,
        "compactionThreshold": prompt_limit,
        "limit": prompt_limit.saturating_add(output_limit),
        "bufferTokens": output_limit,
    }}))
}

/// `session.metadata.getContextAttribution`: the last model call's context by source.
fn attribution(host: &Host, session: &str) -> Value {
    let Some(usage) = usage(host, session) else {
        return json!({"contextAttribution": null});
    };
    let (system, conversation, tools) = (
        field(&usage, "systemTokens"),
        field(&usage, "conversationTokens"),
        field(&usage, "toolDefinitionsTokens"),
    );
    let total = system + conversation + tools;
    let limit = field(&usage, "tokenLimit");
    let compactions = host.session(session).map_or(0, |s| {
        s.events()
            .iter()
            .filter(|e| e.event_type == "session.compaction_complete")
            .count()
    });
    let model = host
        .session(session)
        .and_then(|s| s.model.clone())
        .unwrap_or_default();
    json!({"contextAttribution": {
        "totalTokens": total,
        "modelId": model,
        "modelSource": "session",
        "promptTokenLimit": limit,
        "limit": limit,
        "bufferTokens": 0,
        "compactionThreshold": limit,
        "categories": {
            "systemPrompt": system,
            "customInstructions": 0,
            "systemTools": tools,
            "mcpTools": 0,
            "messages": conversation,
            "freeSpace": limit.saturating_sub(total),
            "buffer": 0,
        },
        "entries": [
            {"kind": "system", "id": "system-prompt", "label": "System prompt", "tokens": system},
            {"kind": "tools", "id": "tool-definitions", "label": "Tool definitions", "tokens": tools},
            {"kind": "messages", "id": "messages", "label": "Conversation messages",
             "tokens": conversation},
        ],
        "compactions": {"count": compactions},
    }})
}

/// `session.metadata.getContextHeaviestMessages`: the persisted conversation messages since
/// the last compaction, largest first (a token per four bytes of content).
fn heaviest(host: &Host, session: &str, p: &Value) -> Answer {
    let limit = match p.get("limit") {
        None | Some(Value::Null) => 10,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| invalid("`limit` must be a non-negative integer"))?
            as usize,
    };
    let events = host.session(session).map_or(&[][..], |s| s.events());
    let since = events
        .iter()
        .rposition(|e| e.event_type == "session.compaction_complete")
        .map_or(0, |i| i + 1);
    let mut messages: Vec<(u64, Value)> = Vec::new();
    for e in &events[since..] {
        let role = match e.event_type.as_str() {
            "user.message" => "user",
            "assistant.message" => "assistant",
            "tool.execution_complete" => "tool",
            _ => continue,
        };
        let Ok(v) = serde_json::from_slice::<Value>(&e.json) else {
            continue;
        };
        let text = match role {
            "tool" => v["data"]["result"]["content"].as_str().unwrap_or_default(),
            _ => v["data"]["content"].as_str().unwrap_or_default(),
        };
        let tokens = (text.len() as u64).div_ceil(4);
        let label: String = text.chars().take(80).collect();
        messages.push((
            tokens,
            json!({"id": e.id, "label": label, "role": role, "tokens": tokens}),
        ));
    }
    let conversation: u64 = messages.iter().map(|(t, _)| t).sum();
    let total = usage(host, session).map_or(conversation, |u| {
        field(&u, "systemTokens")
            + field(&u, "conversationTokens")
            + field(&u, "toolDefinitionsTokens")
    });
    messages.sort_by_key(|m| std::cmp::Reverse(m.0));
    let list: Vec<Value> = messages.into_iter().take(limit).map(|(_, m)| m).collect();
    Ok(json!({"totalTokens": total, "messages": list}))
}
