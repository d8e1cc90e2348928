//! The core methods of the table (`method_table`): the requests every Copilot SDK client
//! makes, over the host's calls.
//!
//! Method names, params and results follow the reference (`copilot-sdk.md` §2, §5, §7) and
//! the real runtime's traces. Errors use the runtime's wording, e.g.
//! `-32603 "Request session.send failed with message: Session not found for sessionId: X"`.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::AgentInput;
use crate::host::{AfterResponse, AnswerTo, CanvasReply, ConnId, Host, SessionChange};
use crate::jsonrpc::{code, ErrorObject, OwnedId};
use crate::session::Session;

use super::method_table::{Call, Reply};
use super::params::*;
use super::surface::Answer;
use super::{shell, turns, SessionState, PROTOCOL_VERSION};

fn decode<T: DeserializeOwned + Default>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    match params {
        None => Ok(T::default()),
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}"))),
    }
}

fn decode_required<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    let raw = params.map(RawValue::get).unwrap_or("{}");
    serde_json::from_str(raw)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}")))
}

fn failed(method: &str, message: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(
        code::INTERNAL_ERROR,
        format!("Request {method} failed with message: {message}"),
    )
}

fn ok_success() -> Answer {
    Ok(json!({"success": true}))
}

pub(super) fn status(host: &mut Host, _: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Ok(json!({"version": host.config().version, "protocolVersion": PROTOCOL_VERSION}))
}

pub(super) fn auth_status(host: &mut Host, _: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Ok(super::github_auth::server_status(host))
}

pub(super) fn models_list(host: &mut Host, call: &Call<'_>, _: Option<&RawValue>) -> Reply {
    host.list_models(call.conn, call.id, models_result).map(Ok)
}

pub(super) fn send_message(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    send(host, call.conn, call.method, params).map(|m| json!({"messageId": m}))
}

pub(super) fn last_id(host: &mut Host, _: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Ok(match host.last_session() {
        Some(s) => json!({"sessionId": s}),
        None => json!({}),
    })
}

pub(super) fn foreground(host: &mut Host, _: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Ok(match host.foreground() {
        Some(s) => json!({"sessionId": s}),
        None => json!({}),
    })
}

pub(super) fn enqueue_command(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode_required::<EnqueueParams>(params).and_then(|p| {
        host.enqueue_command(&p.session_id, &p.command)
            .map_err(|e| failed(call.method, e))
    })
}

pub(super) fn answer_queued_command(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode_required::<QueuedAnswer>(params).and_then(|p| {
        known_session(host, call.method, &p.session_id)?;
        let ok = host.resolve_queued_command(&p.session_id, &p.request_id, &p.result);
        Ok(json!({"success": ok}))
    })
}

pub(super) fn canvas_list(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    decode_required::<SessionParams>(params).and_then(|p| {
        known_session(host, call.method, &p.session_id)?;
        Ok(host.canvas_list(&p.session_id))
    })
}

pub(super) fn canvas_list_open(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode_required::<SessionParams>(params).and_then(|p| {
        known_session(host, call.method, &p.session_id)?;
        Ok(json!({"openCanvases": host.open_canvases_json(&p.session_id)}))
    })
}

pub(super) fn shell_exec(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    decode_required(params).and_then(|p| shell::exec(host, call.conn, p))
}

pub(super) fn shell_kill(host: &mut Host, _: &Call<'_>, params: Option<&RawValue>) -> Answer {
    decode_required(params).and_then(|p| shell::kill(host, p))
}

/// `sessionFs.setProvider {initialCwd, sessionStatePath, conventions, capabilities?}`: the
/// connection provides the files (and keeps the state, under `sessionStatePath`) of the
/// sessions it attaches to. As the runtime, it is refused once sessions exist, unless it is a
/// relaying node making again a registration the client made before (the relay's set-up).
pub(super) fn set_file_provider(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    #[derive(serde::Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        session_state_path: Option<String>,
        capabilities: Option<Value>,
    }
    let p: Params = decode(params)?;
    let relayed = *call.id == OwnedId::from_string(crate::host::RELAY_HANDSHAKE_ID);
    let loaded = host.sessions().count();
    if loaded > 0 && !relayed && !host.is_file_provider(call.conn) {
        return Err(ErrorObject::new(
            code::INVALID_REQUEST,
            format!(
                "a session filesystem provider must be set before any session exists \
                 ({loaded} already exist)"
            ),
        ));
    }
    let state_path = p.session_state_path.filter(|p| !p.is_empty());
    host.set_file_provider(call.conn, state_path);
    if p.capabilities
        .as_ref()
        .and_then(|c| c.get("sqlite"))
        .and_then(Value::as_bool)
        == Some(true)
    {
        host.set_file_provider_sqlite(call.conn);
    }
    ok_success()
}

pub(super) fn shutdown(host: &mut Host, call: &Call<'_>, _: Option<&RawValue>) -> Answer {
    host.after_response(AfterResponse::Shutdown {
        reason: format!("{} requested by a client", call.method),
    });
    Ok(json!({}))
}

/// `models.list`'s result for a provider's list (the scripted entry when it is empty).
fn models_result(models: &[crate::model::ModelInfo]) -> Value {
    json!({"models": model_entries(models)})
}

/// A model list as the SDKs read it (`ModelInfo` / `Model`: `id`, `name`, `capabilities`);
/// the scripted entry when it is empty.
pub(super) fn model_entries(models: &[crate::model::ModelInfo]) -> Value {
    if models.is_empty() {
        return model_list();
    }
    models
        .iter()
        .map(|m| {
            json!({"id": m.id, "name": m.name.clone().unwrap_or_else(|| m.id.clone()),
                   "capabilities": {"supports": {}, "limits": {
                       "max_context_window_tokens": m.context_window.unwrap_or(128_000)}}})
        })
        .collect()
}

/// The scripted agent's entry (the list when no model is known).
fn model_list() -> Value {
    json!([{
        "id": "scripted", "name": "agentwire scripted agent",
        "capabilities": {"supports": {}, "limits": {"max_context_window_tokens": 128000}}}])
}

pub(super) fn connect(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let conn = call.conn;
    let p: ConnectParams = decode(params)?;
    if let Some(expected) = &host.config().connection_token {
        if p.token.as_deref() != Some(expected.as_str()) {
            return Err(ErrorObject::new(-32002, "AUTHENTICATION_FAILED"));
        }
        host.set_authenticated(conn);
    }
    super::telemetry::opt_in(host, conn, p.telemetry_forwarding);
    let client_tasks = p
        .supported_task_kinds
        .is_some_and(|k| k.iter().any(|k| k == "client"));
    if let Some(state) = host.conn_state::<super::ConnState>(conn) {
        state.decodes_client_tasks = client_tasks;
    }
    let task_kinds = if client_tasks {
        json!(["agent", "shell", "client"])
    } else {
        json!(["agent", "shell"])
    };
    Ok(json!({"ok": true, "protocolVersion": PROTOCOL_VERSION,
              "version": host.config().version, "taskKinds": task_kinds}))
}

pub(super) fn ping(host: &mut Host, _: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: PingParams = decode(params)?;
    let message = match p.message {
        Some(m) => format!("pong: {m}"),
        None => "pong".to_owned(),
    };
    Ok(
        json!({"message": message, "timestamp": host.now().to_rfc3339(),
              "protocolVersion": PROTOCOL_VERSION}),
    )
}

fn attach_result(host: &Host, session: &str) -> Value {
    let Some(live) = host.session(session) else {
        return Value::Null;
    };
    let mut result = json!({
        "sessionId": session,
        "nativeSessionId": session,
        "startTime": live.start_time.to_rfc3339(),
        "isRemote": false,
        "mode": "interactive",
        "capabilities": host.capabilities(session),
    });
    if let Some(root) = &host.config().workspace_root {
        result["workspacePath"] = json!(format!("{root}/session-state/{session}"));
    }
    if let Some(model) = &live.model {
        result["modelState"] = json!({"modelId": model});
    }
    result
}

/// The session's model settings from create/resume params (an invalid provider fails the
/// method with a message naming the field, never a secret).
fn model_settings(
    host: &Host,
    conn: ConnId,
    method: &str,
    params: Option<&RawValue>,
) -> Result<crate::agent::ModelSettings, ErrorObject> {
    let raw: Value = decode(params)?;
    let session = raw
        .get("sessionId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    host.model_settings_of(&raw, host.served_by_client(session, conn))
        .map_err(|e| failed(method, e))
}

pub(super) fn create(
    host: &mut Host,
    conn: ConnId,
    method: &str,
    params: Option<&RawValue>,
) -> Result<Value, ErrorObject> {
    let p: AttachParams = decode(params)?;
    let settings = model_settings(host, conn, method, params)?;
    let reasoning_effort = settings.reasoning_effort.clone();
    let mcp = super::mcp::session_configs(host, conn, method, params)?;
    let session_id = match p.session_id.clone() {
        Some(s) if !s.is_empty() => s,
        _ => host.new_id(),
    };
    if host.session(&session_id).is_some() {
        return Err(failed(
            method,
            format!("Session already exists: {session_id}"),
        ));
    }
    let mut session = Session::new(session_id.clone(), host.now());
    // No `workingDirectory`: the server's own directory, as the real runtime does.
    session.cwd = p
        .working_directory
        .clone()
        .or_else(|| host.config().server_cwd.clone());
    session.model = p.model.clone();
    host.insert_session(session);
    host.set_model_settings(&session_id, settings);
    if host.is_http_provider(conn) {
        host.mark_client_transport(&session_id);
    }
    // Attach silently: capability/command announcements follow session.start.
    let attachment = p.attachment(host.config().mcp_apps_enabled);
    host.attach_silently(&session_id, conn, attachment);
    super::session_state::declared(host, &session_id, &p);
    let result = attach_result(host, &session_id);
    let mut data = json!({
        "sessionId": session_id,
        "version": 1,
        "producer": "agentwire",
        "copilotVersion": host.config().version,
        "startTime": host.now().to_rfc3339(),
    });
    if let Some(model) = &p.model {
        data["selectedModel"] = json!(model);
    }
    if let Some(effort) = &reasoning_effort {
        data["reasoningEffort"] = json!(effort);
    }
    if let Some(cwd) = host.session(&session_id).and_then(|s| s.cwd.clone()) {
        data["context"] = json!({"cwd": cwd});
    }
    host.after_response(AfterResponse::Emit {
        session: session_id.clone(),
        event_type: "session.start",
        data,
        ephemeral: false,
    });
    host.after_response(AfterResponse::SessionChanged {
        change: SessionChange::Created,
        session: session_id.clone(),
    });
    super::mcp::apply_env_value_mode(host, &session_id, params);
    super::mcp::apply_discovery(host, conn, &session_id, params);
    apply_local_options(host, conn, &session_id, params);
    if !mcp.is_empty() {
        host.after_response(AfterResponse::StartMcp {
            session: session_id.clone(),
            configs: mcp,
        });
    }
    if p.request_extensions {
        host.after_response(AfterResponse::StartExtensions {
            session: session_id.clone(),
            owner: conn,
            sdk_path: p.extension_sdk_path.clone(),
        });
    }
    if let Some(extension) = p.attachment(false).extension {
        host.after_response(AfterResponse::ExtensionAccess {
            session: session_id.clone(),
            extension,
        });
    }
    warn_if_mcp_apps_refused(host, &session_id, conn, &p);
    super::skills::configure(host, &session_id, params);
    host.apply_plugins_to_session(&session_id);
    super::ConnState::reacquire(host, conn, &session_id);
    Ok(result)
}

pub(super) fn resume(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let (conn, method) = (call.conn, call.method);
    let p: AttachParams = decode(params)?;
    let Some(session_id) = p.session_id.clone() else {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            "invalid params: missing field `sessionId`",
        ));
    };
    let Some(live) = host.session(&session_id) else {
        return Err(failed(
            method,
            format!("Failed to load session events: Session not found: {session_id}"),
        ));
    };
    let event_count = live.events().len();
    let model = live.model.clone();
    let cwd = live.cwd.clone();
    let settings = model_settings(host, conn, method, params)?;
    let served_by_client = host.served_by_client(&session_id, conn);
    let mcp = super::mcp::session_configs(host, conn, method, params)?;
    host.set_model_settings(&session_id, settings);
    if served_by_client {
        host.mark_client_transport(&session_id);
    }
    let was_active = host.session_busy(&session_id);
    // Whether another client still had the session (the runtime's `sessionWasActive`).
    let was_attached = host
        .session(&session_id)
        .is_some_and(|s| !s.attached.is_empty());
    host.attach(
        &session_id,
        conn,
        p.attachment(host.config().mcp_apps_enabled),
    );
    warn_if_mcp_apps_refused(host, &session_id, conn, &p);
    super::skills::configure(host, &session_id, params);
    host.apply_plugins_to_session(&session_id);
    super::session_state::declared(host, &session_id, &p);
    host.set_last_session(&session_id);
    if p.request_extensions {
        host.after_response(AfterResponse::StartExtensions {
            session: session_id.clone(),
            owner: conn,
            sdk_path: p.extension_sdk_path.clone(),
        });
    }
    let mut result = attach_result(host, &session_id);
    result["openCanvases"] = host.open_canvases_json(&session_id);
    if p.relay_reattach {
        result[crate::host::RELAY_SESSION_BUSY] = json!(was_active);
        if let (Some(former), true) = (p.relay_former_member, host.is_relay_member(conn)) {
            let awaiting: Vec<OwnedId> = p
                .relay_awaiting
                .iter()
                .filter_map(|id| OwnedId::parse(&id.to_string()))
                .collect();
            super::relayed_turns::rebind(host, &session_id, conn, ConnId(former), &awaiting);
        }
    }
    if host.is_relay_member(conn) {
        result[crate::host::RELAY_DELTAS_EMITTED] = json!(host.deltas_emitted(&session_id));
        let last = host
            .session(&session_id)
            .and_then(|s| s.events().last())
            .map(|e| e.id.clone());
        result[crate::host::RELAY_LAST_EVENT] = json!(last);
    }
    if !p.disable_resume {
        let mut data = json!({
            "resumeTime": host.now().to_rfc3339(),
            "eventCount": event_count,
            "sessionWasActive": was_attached,
            "continuePendingWork": p.continue_pending_work,
        });
        if let Some(model) = model {
            data["selectedModel"] = json!(model);
        }
        if let Some(cwd) = cwd {
            data["context"] = json!({"cwd": cwd});
        }
        host.after_response(AfterResponse::Emit {
            session: session_id.clone(),
            event_type: "session.resume",
            data,
            ephemeral: false,
        });
    }
    if p.continue_pending_work {
        host.reemit_pending_permissions(&session_id);
    } else if !was_attached && !p.relay_reattach {
        host.interrupt_orphaned_work(&session_id);
    }
    super::mcp::apply_env_value_mode(host, &session_id, params);
    super::mcp::apply_discovery(host, conn, &session_id, params);
    apply_local_options(host, conn, &session_id, params);
    if !mcp.is_empty() {
        host.after_response(AfterResponse::StartMcp {
            session: session_id.clone(),
            configs: mcp,
        });
    }
    super::ConnState::reacquire(host, conn, &session_id);
    Ok(result)
}

/// `Ok` when the session is loaded and `conn` has not let go of it (`session.destroy`), else
/// the runtime's "Session not found".
fn attached_session(
    host: &Host,
    conn: ConnId,
    method: &str,
    session_id: &str,
) -> Result<(), ErrorObject> {
    if super::ConnState::is_released(host, conn, session_id) {
        return Err(failed(
            method,
            format!("Session not found for sessionId: {session_id}"),
        ));
    }
    known_session(host, method, session_id)
}

fn known_session(host: &Host, method: &str, session_id: &str) -> Result<(), ErrorObject> {
    if host.session(session_id).is_some() {
        Ok(())
    } else {
        Err(failed(
            method,
            format!("Session not found for sessionId: {session_id}"),
        ))
    }
}

/// Queues the prompt of `session.send` / `session.sendAndWait` (failing as `method`).
fn send(
    host: &mut Host,
    conn: ConnId,
    method: &str,
    params: Option<&RawValue>,
) -> Result<String, ErrorObject> {
    let p: SendParams = decode_required(params)?;
    attached_session(host, conn, method, &p.session_id)?;
    let message_id = host.new_id();
    let summary: String = host.mask_text(&p.prompt).chars().take(200).collect();
    if let Some(session) = host.session_mut(&p.session_id) {
        if session.summary.is_none() {
            session.summary = Some(summary);
        }
    }
    host.set_last_session(&p.session_id);
    host.queue_agent_input(
        &p.session_id,
        AgentInput::Prompt {
            message_id: message_id.clone(),
            prompt: p.prompt,
            attachments: crate::agent::PromptContext {
                agent_mode: p.agent_mode,
                steering: p.mode.as_deref() == Some("immediate"),
                request_headers: p
                    .request_headers
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(k, v)| Some((k, v.as_str()?.to_owned())))
                    .collect(),
                ..crate::agent::PromptContext::sent(p.attachments)
            },
        },
    );
    Ok(message_id)
}

pub(super) fn send_and_wait(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let (conn, id) = (call.conn, call.id);
    let session_id = match decode_required::<SendParams>(params) {
        Ok(p) => p.session_id,
        Err(e) => return Some(Err(e)),
    };
    // Its failures are `session.send`'s, as before: a send, then a wait.
    let message_id = match send(host, conn, "session.send", params) {
        Ok(m) => m,
        Err(e) => return Some(Err(e)),
    };
    turns::wait_for_turn(host, &session_id, conn, id, message_id);
    None
}

pub(super) fn abort(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: SessionParams = decode_required(params)?;
    known_session(host, call.method, &p.session_id)?;
    host.queue_agent_input(&p.session_id, AgentInput::Abort);
    Ok(json!({"success": true}))
}

pub(super) fn detach(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: SessionParams = decode_required(params)?;
    known_session(host, call.method, &p.session_id)?;
    host.detach_conn(&p.session_id, call.conn);
    Ok(json!({"success": true}))
}

/// `session.delete`: an unknown session is `{success: false, error}` (the SDKs turn it into
/// "Failed to delete session <id>: <error>"), as the runtime answers.
pub(super) fn delete(host: &mut Host, _: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: SessionParams = decode_required(params)?;
    if !host.delete_session(&p.session_id) {
        return Ok(json!({"success": false,
                         "error": format!("Session not found: {}", p.session_id)}));
    }
    Ok(json!({"success": true}))
}

pub(super) fn metadata(host: &Host, session_id: &str) -> Option<Value> {
    let s = host.session(session_id)?;
    let mut m = json!({
        "sessionId": s.id,
        "startTime": s.start_time.to_rfc3339(),
        "modifiedTime": s.modified_time.to_rfc3339(),
        "isRemote": false,
        "isDetached": s.attached.is_empty(),
    });
    if let Some(summary) = &s.summary {
        m["summary"] = json!(summary);
        m["name"] = json!(summary);
    }
    if let Some(cwd) = &s.cwd {
        m["context"] = json!({"cwd": cwd});
    }
    Some(m)
}

/// The metadata of a session of another cluster node (or of none), read from the shared log:
/// whether clients are attached to it is not known here (reported detached).
fn cluster_metadata(s: &crate::host::SessionSummary) -> Value {
    let mut m = json!({
        "sessionId": s.id,
        "startTime": s.start_time.to_rfc3339(),
        "modifiedTime": s.modified_time.to_rfc3339(),
        "isRemote": false,
        "isDetached": true,
    });
    if let Some(summary) = &s.summary {
        m["summary"] = json!(summary);
        m["name"] = json!(summary);
    }
    if let Some(cwd) = &s.cwd {
        m["context"] = json!({"cwd": cwd});
    }
    m
}

pub(super) fn list(host: &mut Host, _: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: ListParams = decode(params)?;
    let cwd = p.filter.and_then(|f| f.cwd);
    let sessions: Vec<Value> = host
        .sessions()
        .filter(|s| cwd.is_none() || s.cwd == cwd)
        .filter_map(|s| metadata(host, &s.id))
        .chain(
            host.cluster_sessions()
                .filter(|s| cwd.is_none() || s.cwd == cwd)
                .map(cluster_metadata),
        )
        .collect();
    Ok(json!({"sessions": sessions}))
}

pub(super) fn get_metadata(host: &mut Host, _: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: SessionParams = decode_required(params)?;
    Ok(match metadata(host, &p.session_id) {
        Some(m) => json!({"session": m}),
        None => json!({}),
    })
}

pub(super) fn get_messages(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: SessionParams = decode_required(params)?;
    attached_session(host, call.conn, call.method, &p.session_id)?;
    let events = host.session(&p.session_id).map_or(&[][..], |s| s.events());
    let mut text =
        String::with_capacity(events.iter().map(|e| e.json.len() + 1).sum::<usize>() + 16);
    text.push_str("{\"events\":[");
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        // The event as clients receive it (the store's own fields removed).
        let json = super::stored_state::wire_json(e);
        text.push_str(std::str::from_utf8(&json).unwrap_or("null"));
    }
    text.push_str("]}");
    serde_json::from_str(&text).map_err(|e| failed(call.method, e))
}

/// `session.setForeground`: only a server with a terminal UI (`--ui-server`) has a
/// foreground session; a headless one answers as the runtime does without its TUI.
pub(super) fn set_foreground(host: &mut Host, _: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: SessionParams = decode_required(params)?;
    if !host.config().foreground_ui {
        return Ok(json!({"success": false, "error": "Not running in TUI+server mode"}));
    }
    if host.session(&p.session_id).is_none() {
        return Ok(json!({"success": false,
                         "error": format!("Session not found: {}", p.session_id)}));
    }
    if host.foreground() != Some(p.session_id.as_str()) {
        if let Some(old) = host.replace_foreground(&p.session_id) {
            turns::lifecycle(host, "session.background", &old);
        }
        turns::lifecycle(host, "session.foreground", &p.session_id);
    }
    Ok(json!({"success": true}))
}

pub(super) fn answer_permission(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    let p: PermissionAnswer = decode_required(params)?;
    known_session(host, call.method, &p.session_id)?;
    let ok = host.may_answer_permission(&p.session_id, &p.request_id, call.conn)
        && host.resolve_permission(&p.session_id, &p.request_id, &p.result);
    Ok(json!({"success": ok}))
}

pub(super) fn answer_tool(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: ToolAnswer = decode_required(params)?;
    known_session(host, call.method, &p.session_id)?;
    let ok = host.resolve_tool_call(
        &p.session_id,
        &p.request_id,
        p.result.as_ref(),
        p.error.as_ref(),
    );
    Ok(json!({"success": ok}))
}

pub(super) fn elicitation(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let request: Value = match decode_required(params) {
        Ok(v) => v,
        Err(e) => return Some(Err(e)),
    };
    let Some(session) = request
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Some(Err(ErrorObject::new(
            code::INVALID_PARAMS,
            "invalid params: missing field `sessionId`",
        )));
    };
    let answer_to = AnswerTo::Caller(call.conn, call.id.clone());
    match host.start_elicitation(&session, answer_to, &request) {
        Ok(()) => None,
        Err(e) => Some(Err(failed(call.method, e))),
    }
}

pub(super) fn answer_elicitation(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    let p: ElicitationAnswer = decode_required(params)?;
    known_session(host, call.method, &p.session_id)?;
    let ok = host.resolve_elicitation(&p.session_id, &p.request_id, &p.result);
    Ok(json!({"success": ok}))
}

pub(super) fn execute_command(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Reply {
    let p: ExecuteCommand = match decode_required(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let answer_to = AnswerTo::Caller(call.conn, call.id.clone());
    match host.start_command(&p.session_id, answer_to, &p.command_name, &p.args) {
        Ok(()) => None,
        Err(e) => Some(Err(failed(call.method, e))),
    }
}

pub(super) fn answer_command(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    let p: CommandAnswer = decode_required(params)?;
    known_session(host, call.method, &p.session_id)?;
    // As the runtime: the answer is acknowledged even when no command waits for it (an
    // unknown or already answered requestId changes nothing).
    host.resolve_command(&p.session_id, &p.request_id, p.error.as_deref());
    Ok(json!({"success": true}))
}

/// `session.canvas.open`: answered when the canvas's provider answers its `canvas.open`.
pub(super) fn canvas_open(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let p: crate::host::OpenParams = match decode_required(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = known_session(host, call.method, &p.session_id) {
        return Some(Err(e));
    }
    let reply = CanvasReply::Caller(call.conn, call.id.clone(), call.method);
    host.open_canvas(
        &p.session_id,
        p.extension_id.as_deref(),
        &p.canvas_id,
        &p.instance_id,
        p.input,
        reply,
    );
    None
}

/// `session.canvas.close`: answered when the canvas's provider answers its `canvas.close`.
pub(super) fn canvas_close(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let p: crate::host::CloseParams = match decode_required(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = known_session(host, call.method, &p.session_id) {
        return Some(Err(e));
    }
    let reply = CanvasReply::Caller(call.conn, call.id.clone(), call.method);
    host.close_canvas(&p.session_id, &p.instance_id, reply);
    None
}

/// `session.canvas.action.invoke`: answered when the canvas's provider answers its
/// `canvas.action.invoke`.
pub(super) fn canvas_action(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let p: crate::host::ActionParams = match decode_required(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = known_session(host, call.method, &p.session_id) {
        return Some(Err(e));
    }
    let reply = CanvasReply::Caller(call.conn, call.id.clone(), call.method);
    host.invoke_canvas_action(
        &p.session_id,
        &p.instance_id,
        &p.action_name,
        p.input,
        reply,
    );
    None
}

pub(super) fn answer_sampling(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    let p: SamplingAnswer = decode_required(params)?;
    known_session(host, call.method, &p.session_id)?;
    let ok = host.resolve_sampling(&p.session_id, &p.request_id, p.response);
    Ok(json!({"success": ok}))
}

/// `requestMcpApps` without the host's MCP Apps gate: the request is answered without
/// `ui.mcpApps` and this connection gets a `session.warning` saying why.
fn warn_if_mcp_apps_refused(host: &mut Host, session: &str, conn: ConnId, p: &AttachParams) {
    if p.request_mcp_apps && !host.config().mcp_apps_enabled {
        host.after_response(AfterResponse::EmitTo {
            session: session.to_owned(),
            event_type: "session.warning",
            data: json!({
                "warningType": "mcp_apps_disabled",
                "message": "MCP Apps were requested (requestMcpApps) but are not enabled on this server; start it with COPILOT_MCP_APPS=true or --mcp-apps",
            }),
            only: conn,
        });
    }
}

pub(super) fn mcp_set_host_context(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    let p: Value = decode_required(params)?;
    let session = session_id_of(&p)?;
    known_session(host, call.method, &session)?;
    if let Some(state) = host.session_state::<SessionState>(&session) {
        state.mcp_host_context = Some(p.get("context").cloned().unwrap_or(json!({})));
    }
    Ok(Value::Null)
}

pub(super) fn mcp_get_host_context(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    let p: SessionParams = decode_required(params)?;
    known_session(host, call.method, &p.session_id)?;
    let context = host
        .session_state_ref::<SessionState>(&p.session_id)
        .and_then(|s| s.mcp_host_context.clone())
        .unwrap_or(json!({}));
    Ok(json!({"context": context}))
}

fn session_id_of(p: &Value) -> Result<String, ErrorObject> {
    p.get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            ErrorObject::new(
                code::INVALID_PARAMS,
                "invalid params: missing field `sessionId`",
            )
        })
}

/// What `session.create` / `session.resume` params ask of the runtime's local handling:
/// `enableFileChangeTracking` (the files the built-in tools change are captured for rewind,
/// `host/sessions/rewind.rs`), `largeOutput` (`host/requests/large_output.rs`) and
/// `enableGitHubTelemetryForwarding` (`telemetry.rs`).
fn apply_local_options(host: &mut Host, conn: ConnId, session: &str, params: Option<&RawValue>) {
    let Some(p) = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok()) else {
        return;
    };
    if let Some(on) = p.get("enableFileChangeTracking").and_then(Value::as_bool) {
        host.set_file_change_tracking(session, on);
    }
    host.set_large_output(session, &p);
    super::telemetry::opt_in(host, conn, super::telemetry::asked(&p));
}
