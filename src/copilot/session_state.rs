//! Session state a client reads and changes: the friendly name, the agent mode, the model,
//! the plan, the workspace files, the custom agents, the provider endpoint, the permission
//! mode and the option patch (`session.name.*`, `session.mode.*`, `session.model.*`,
//! `session.plan.*`, `session.workspaces.*`, `session.agent.*`, `session.provider.*`,
//! `session.permissions.setApproveAll` / `setMode` / `getMode`, `session.options.update`).
//!
//! Results and events follow the real runtime (1.0.85): e.g. `session.mode.get` answers a
//! bare string, `session.name.set` emits `session.title_changed` (ephemeral),
//! `session.model.switchTo` emits `session.model_change`. The state is kept in memory with
//! the session (the dialect's session state); the changes that the runtime persists as
//! events are persisted events here too, and the plan and workspace files survive a restart
//! through them (`stored_state`).

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::{AgentInput, SessionSetting};
use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

use super::method_table::{Call, Reply};
use super::params::AttachParams;
use super::stored_state::{self, STORED_CONTENT};
use super::surface::{decode, failed, known, Answer};

/// What the Copilot dialect keeps per session for these methods.
#[derive(Debug, Default)]
pub(super) struct SurfaceState {
    /// The friendly name (`session.name.set`).
    name: Option<String>,
    /// An auto-generated name (`session.name.setAuto`), used while no name was set.
    auto_name: Option<String>,
    /// `interactive` (default), `plan` or `autopilot`.
    mode: Option<String>,
    /// The plan file's content, when one exists.
    plan: Option<String>,
    /// Workspace files by relative path.
    files: BTreeMap<String, String>,
    /// `customAgents` from `session.create` / `resume`.
    custom_agents: Vec<Value>,
    /// The selected custom agent's name.
    selected_agent: Option<String>,
    /// The BYOK provider config.
    provider: Option<Value>,
    /// The reasoning effort, when set.
    reasoning_effort: Option<String>,
    /// `manual` (default), `assisted` or `allow-all`.
    permission_mode: Option<String>,
    /// `session.permissions.setApproveAll` (separate from the mode, as in the runtime).
    approve_all: bool,
}

impl SurfaceState {
    fn mode(&self) -> &str {
        self.mode.as_deref().unwrap_or("interactive")
    }

    fn permission_mode(&self) -> &str {
        self.permission_mode.as_deref().unwrap_or("manual")
    }
}

/// Records what `session.create` / `session.resume` declared for these methods.
pub(super) fn declared(host: &mut Host, session: &str, p: &AttachParams) {
    let Some(state) = surface(host, session) else {
        return;
    };
    if !p.custom_agents.is_empty() {
        state.custom_agents = p.custom_agents.clone();
    }
    if p.provider.is_some() {
        state.provider = p.provider.clone();
    }
    if p.reasoning_effort.is_some() {
        state.reasoning_effort = p.reasoning_effort.clone();
    }
}

pub(super) fn mode_get(host: &mut Host, session: &str, _: &Value) -> Answer {
    Ok(json!(state(host, session).mode()))
}

pub(super) fn files_list(host: &mut Host, session: &str, _: &Value) -> Answer {
    Ok(json!({"files": state(host, session).files.keys().collect::<Vec<_>>()}))
}

pub(super) fn permission_mode_get(host: &mut Host, session: &str, _: &Value) -> Answer {
    Ok(json!({"mode": state(host, session).permission_mode()}))
}

/// `session.model.list`: the session's provider's models (`GET /models`, cached per
/// provider; `skipCache: true` asks again), its declared `models`, else the server default's,
/// falling back to the configured model. `None`: the answer follows when the provider did.
pub(super) fn model_list(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let answer = decode::<Value>(params).and_then(|p| {
        let session = session_id(&p)?;
        known(host, call.method, &session)?;
        Ok((session, p.get("skipCache") == Some(&Value::Bool(true))))
    });
    let (session, refresh) = match answer {
        Ok(found) => found,
        Err(e) => return Some(Err(e)),
    };
    fn reply(models: &[crate::model::ModelInfo]) -> Value {
        json!({"list": super::methods::model_entries(models), "modelPriceCategories": [],
               "quotaSnapshots": {}})
    }
    host.list_session_models(call.conn, call.id, &session, refresh, reply)
        .map(Ok)
}

/// The params' `sessionId`.
pub(super) fn session_id(p: &Value) -> Result<String, ErrorObject> {
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

/// A string field of the params, required.
pub(super) fn required_str<'a>(p: &'a Value, field: &str) -> Result<&'a str, ErrorObject> {
    p.get(field).and_then(Value::as_str).ok_or_else(|| {
        ErrorObject::new(
            code::INVALID_PARAMS,
            format!("invalid params: missing field `{field}`"),
        )
    })
}

/// Boolean `field` of `p`, or the invalid-params error naming it.
pub(super) fn required_bool(p: &Value, field: &str) -> Result<bool, ErrorObject> {
    p.get(field).and_then(Value::as_bool).ok_or_else(|| {
        ErrorObject::new(
            code::INVALID_PARAMS,
            format!("invalid params: missing boolean field `{field}`"),
        )
    })
}

/// Handlers fail with a bare message (`INTERNAL_ERROR`); the method name is added here.
pub(super) fn with_method(e: ErrorObject, method: &str) -> ErrorObject {
    if e.code == code::INTERNAL_ERROR && !e.message.starts_with("Request ") {
        failed(method, e.message)
    } else {
        e
    }
}

fn fail(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(code::INTERNAL_ERROR, message.into())
}

/// The session's state; the first use of a session loaded from the store rebuilds its plan
/// and workspace files from its log (`stored_state`).
fn surface<'a>(host: &'a mut Host, session: &str) -> Option<&'a mut SurfaceState> {
    if host.session_state_ref::<SurfaceState>(session).is_none() {
        let restored = stored_state::restore(host.session(session)?.events());
        let state = host.session_state::<SurfaceState>(session)?;
        state.plan = restored.plan;
        state.files = restored.files;
        return Some(state);
    }
    host.session_state::<SurfaceState>(session)
}

fn state<'a>(host: &'a mut Host, session: &str) -> &'a mut SurfaceState {
    // `known` ran first: the session is loaded, so its state exists.
    surface(host, session).expect("the session is loaded")
}

pub(super) fn name_get(host: &mut Host, session: &str, _: &Value) -> Answer {
    let state = state(host, session);
    Ok(json!({"name": state.name.as_ref().or(state.auto_name.as_ref())}))
}

/// `session.name.setAuto`: the summary becomes the name unless a user set one (`{applied}`).
pub(super) fn name_set_auto(host: &mut Host, session: &str, p: &Value) -> Answer {
    let summary = required_str(p, "summary")?.trim().to_owned();
    let state = state(host, session);
    if summary.is_empty() || state.name.is_some() {
        return Ok(json!({"applied": false}));
    }
    state.auto_name = Some(summary.clone());
    host.emit(
        session,
        "session.title_changed",
        &json!({"title": summary}),
        true,
    );
    Ok(json!({"applied": true}))
}

/// `session.metadata.snapshot`: identity, mode, model and workspace of the session.
pub(super) fn snapshot(host: &mut Host, session: &str, p: &Value) -> Answer {
    let workspace = workspace(host, session, p)?;
    let mode = state(host, session).mode().to_owned();
    let Some(s) = host.session(session) else {
        return Err(fail(format!("Session not found for sessionId: {session}")));
    };
    let mut out = json!({
        "sessionId": session,
        "startTime": s.start_time.to_rfc3339(),
        "modifiedTime": s.modified_time.to_rfc3339(),
        "isRemote": false,
        "alreadyInUse": false,
        "workspacePath": workspace.get("path").cloned().unwrap_or(Value::Null),
        "workingDirectory": s.cwd.clone().unwrap_or_default(),
        "currentMode": mode,
        "sessionLimits": null,
        "workspace": workspace["workspace"],
        "clientName": "agentwire",
    });
    if let Some(summary) = &s.summary {
        out["summary"] = json!(summary);
    }
    if let Some(model) = &s.model {
        out["selectedModel"] = json!(model);
    }
    Ok(out)
}

pub(super) fn name_set(host: &mut Host, session: &str, p: &Value) -> Answer {
    let name = required_str(p, "name")?.trim();
    if name.is_empty() {
        return Err(fail("Session name cannot be empty"));
    }
    state(host, session).name = Some(name.to_owned());
    host.emit(
        session,
        "session.title_changed",
        &json!({"title": name}),
        true,
    );
    Ok(Value::Null)
}

/// The session's friendly name, if one was set.
pub(super) fn name(host: &Host, session: &str) -> Option<String> {
    host.session_state_ref::<SurfaceState>(session)
        .and_then(|s| s.name.clone())
}

pub(super) fn mode_set(host: &mut Host, session: &str, p: &Value) -> Answer {
    let mode = required_str(p, "mode")?;
    if !matches!(mode, "interactive" | "plan" | "autopilot") {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("invalid params: unknown mode `{mode}` (interactive, plan, autopilot)"),
        ));
    }
    let state = state(host, session);
    let previous = state.mode().to_owned();
    if let Some(expected) = p.get("expectedMode").and_then(Value::as_str) {
        if expected != previous {
            return Err(fail(format!(
                "Expected mode {expected} but the session is in {previous}"
            )));
        }
    }
    state.mode = Some(mode.to_owned());
    if previous != mode {
        host.emit(
            session,
            "session.mode_changed",
            &json!({"previousMode": previous, "newMode": mode}),
            false,
        );
        let setting = SessionSetting::Mode(mode.to_owned());
        host.queue_agent_input(session, AgentInput::SettingChanged(setting));
    }
    Ok(json!({"status": "unchanged", "modelChanged": false, "modeApplied": true}))
}

fn model_state(host: &mut Host, session: &str) -> Value {
    let model = host.session(session).and_then(|s| s.model.clone());
    let mut current = json!({});
    if let Some(model) = model {
        current["modelId"] = json!(model);
    }
    if let Some(effort) = &state(host, session).reasoning_effort {
        current["reasoningEffort"] = json!(effort);
    }
    current
}

pub(super) fn model_current(host: &mut Host, session: &str, _: &Value) -> Answer {
    Ok(model_state(host, session))
}

/// `session.provider.add {providers?, models?}`: named BYOK providers and their models,
/// added to the session at runtime (`provider/id` models become selectable, listed after the
/// session's own, and called on their provider once chosen); `{models}` lists those added.
/// A provider the operator's base-URL policy refuses, a duplicate name or id, or a model of
/// an unknown provider adds nothing and is an error naming the field.
pub(super) fn provider_add(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    let array = |key: &str| -> Result<Vec<Value>, ErrorObject> {
        match p.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items.clone()),
            Some(_) => Err(ErrorObject::new(
                code::INVALID_PARAMS,
                format!("invalid params: `{key}` must be an array"),
            )),
        }
    };
    let (providers, models) = (array("providers")?, array("models")?);
    let served_by_client = host.served_by_client(session, call.conn);
    let added = host
        .add_session_providers(session, &providers, &models, served_by_client)
        .map_err(|e| fail(format!("invalid provider: {e}")))?;
    let entries = if added.is_empty() {
        json!([])
    } else {
        super::methods::model_entries(&added)
    };
    Ok(json!({ "models": entries }))
}

pub(super) fn model_switch(host: &mut Host, session: &str, p: &Value) -> Answer {
    let model = required_str(p, "modelId")?.to_owned();
    let effort = p.get("reasoningEffort").and_then(Value::as_str);
    if let Some(effort) = effort {
        state(host, session).reasoning_effort = Some(effort.to_owned());
    }
    let previous = host
        .session_mut(session)
        .and_then(|s| s.model.replace(model.clone()));
    host.select_model(session, &model);
    host.set_model_vision(session, crate::agent::vision_of(p));
    host.emit(
        session,
        "session.model_change",
        &json!({"source": "sdk", "contextTier": null, "newModel": model,
                "previousModel": previous, "reasoningEffort": effort}),
        false,
    );
    let setting = SessionSetting::Model(model.clone());
    host.queue_agent_input(session, AgentInput::SettingChanged(setting));
    let message = match &previous {
        Some(previous) => format!("Model changed from {previous} to {model}"),
        None => format!("Model changed to {model}"),
    };
    Ok(
        json!({"status": "applied", "deferred": false, "modelId": model,
              "message": message, "deprecationWarnings": [],
              "modelState": model_state(host, session)}),
    )
}

pub(super) fn reasoning_effort(host: &mut Host, session: &str, p: &Value) -> Answer {
    let effort = required_str(p, "reasoningEffort")?.to_owned();
    state(host, session).reasoning_effort = Some(effort.clone());
    Ok(json!({"reasoningEffort": effort}))
}

/// Where `file` of the session's state directory is: on its file provider when one keeps
/// the session's state (`state_files.rs`), else where the runtime would keep it (when the
/// host reports a workspace root).
pub(super) fn state_path(host: &Host, session: &str, file: &str) -> Option<String> {
    if let Some(dir) = host.provided_state_dir(session) {
        return Some(format!("{}/{file}", dir.trim_end_matches('/')));
    }
    let root = host.config().workspace_root.as_ref()?;
    Some(format!("{root}/session-state/{session}/{file}"))
}

/// The session's plan, if it has one.
pub(super) fn plan(host: &mut Host, session: &str) -> Option<String> {
    surface(host, session)?.plan.clone()
}

pub(super) fn plan_read(host: &mut Host, session: &str, _: &Value) -> Answer {
    let path = state_path(host, session, "plan.md");
    let plan = state(host, session).plan.clone();
    Ok(json!({"exists": plan.is_some(), "content": plan, "path": path}))
}

pub(super) fn plan_update(host: &mut Host, session: &str, p: &Value) -> Answer {
    let content = required_str(p, "content")?.to_owned();
    let operation = match state(host, session).plan.replace(content.clone()) {
        Some(_) => "update",
        None => "create",
    };
    host.emit(
        session,
        "session.plan_changed",
        &json!({"operation": operation, STORED_CONTENT: content}),
        false,
    );
    Ok(Value::Null)
}

pub(super) fn plan_delete(host: &mut Host, session: &str, _: &Value) -> Answer {
    if state(host, session).plan.take().is_some() {
        host.emit(
            session,
            "session.plan_changed",
            &json!({"operation": "delete"}),
            false,
        );
    }
    Ok(Value::Null)
}

pub(super) fn workspace(host: &mut Host, session: &str, _: &Value) -> Answer {
    let path = state_path(host, session, "");
    let mut result = json!({"workspace": workspace_fields(host, session)});
    if let Some(path) = path {
        result["path"] = json!(path.trim_end_matches('/'));
    }
    Ok(result)
}

/// The session's workspace metadata (`id`, `cwd`, `name`, times), as `workspace.yaml`
/// holds it.
pub(super) fn workspace_fields(host: &mut Host, session: &str) -> Value {
    let (cwd, start, modified) = match host.session(session) {
        Some(s) => (
            s.cwd.clone(),
            s.start_time.to_rfc3339(),
            s.modified_time.to_rfc3339(),
        ),
        None => (None, String::new(), String::new()),
    };
    let (name, auto_name) = {
        let state = state(host, session);
        (state.name.clone(), state.auto_name.clone())
    };
    let mut workspace = json!({"id": session, "summary_count": 0,
                               "created_at": start, "updated_at": modified});
    if let Some(cwd) = cwd {
        workspace["cwd"] = json!(cwd);
    }
    if let Some(name) = name {
        workspace["name"] = json!(name);
        workspace["user_named"] = json!(true);
    } else if let Some(name) = auto_name {
        workspace["name"] = json!(name);
        workspace["user_named"] = json!(false);
    }
    workspace
}

/// A workspace file path: relative, no `..` segment, no empty name.
fn file_path(p: &Value) -> Result<String, ErrorObject> {
    let path = required_str(p, "path")?;
    let escapes = path.split(['/', '\\']).any(|seg| seg == "..");
    if path.trim().is_empty() || path.starts_with('/') || path.starts_with('\\') || escapes {
        return Err(fail(format!(
            "Invalid workspace file path: {path} (must stay inside the workspace files directory)"
        )));
    }
    Ok(path.to_owned())
}

pub(super) fn file_create(host: &mut Host, session: &str, p: &Value) -> Answer {
    let path = file_path(p)?;
    let content = required_str(p, "content")?.to_owned();
    store_file(host, session, path, content);
    Ok(Value::Null)
}

/// Where a workspace file would live under the workspace root, when one is configured.
pub(super) fn file_location(host: &Host, session: &str, path: &str) -> Option<String> {
    state_path(host, session, &format!("files/{path}"))
}

/// Whether the session has a workspace file at `path`.
pub(super) fn has_file(host: &mut Host, session: &str, path: &str) -> bool {
    surface(host, session).is_some_and(|s| s.files.contains_key(path))
}

/// Creates or replaces a workspace file (`session.workspace_file_changed`, persisted with
/// its content).
pub(super) fn store_file(host: &mut Host, session: &str, path: String, content: String) {
    let Some(state) = surface(host, session) else {
        return;
    };
    let operation = match state.files.insert(path.clone(), content.clone()) {
        Some(_) => "update",
        None => "create",
    };
    host.emit(
        session,
        "session.workspace_file_changed",
        &json!({"path": path, "operation": operation, STORED_CONTENT: content}),
        false,
    );
}

pub(super) fn file_read(host: &mut Host, session: &str, p: &Value) -> Answer {
    let path = file_path(p)?;
    match state(host, session).files.get(&path) {
        Some(content) => Ok(json!({"content": content})),
        None => Err(fail(format!("Workspace file not found: {path}"))),
    }
}

/// A custom agent as `session.agent.*` report it (`AgentInfo`: `id` is the name; its authored
/// `model` preference and `tools` when it declares them).
fn agent_info(agent: &Value, include_prompt: bool) -> Value {
    let field = |name: &str| agent.get(name).and_then(Value::as_str);
    let name = field("name").unwrap_or_default();
    let mut info = json!({
        "name": name,
        "id": name,
        "displayName": field("displayName").unwrap_or(name),
        "description": field("description").unwrap_or_default(),
    });
    if let Some(model) = field("model").filter(|m| !m.is_empty()) {
        info["model"] = json!(model);
    }
    if let Some(tools) = agent.get("tools").filter(|t| t.is_array()) {
        info["tools"] = tools.clone();
    }
    if include_prompt {
        if let Some(prompt) = field("prompt") {
            info["prompt"] = json!(prompt);
        }
    }
    info
}

pub(super) fn agent_list(host: &mut Host, session: &str, p: &Value) -> Answer {
    let include_prompt = p.get("includePrompt").and_then(Value::as_bool) == Some(true);
    let agents: Vec<Value> = state(host, session)
        .custom_agents
        .iter()
        .map(|a| agent_info(a, include_prompt))
        .collect();
    Ok(json!({"agents": agents}))
}

pub(super) fn agent_current(host: &mut Host, session: &str, _: &Value) -> Answer {
    let state = state(host, session);
    let agent = state.selected_agent.as_ref().and_then(|name| {
        state
            .custom_agents
            .iter()
            .find(|a| a.get("name").and_then(Value::as_str) == Some(name))
    });
    Ok(json!({"agent": agent.map(|a| agent_info(a, false))}))
}

pub(super) fn agent_select(host: &mut Host, session: &str, p: &Value) -> Answer {
    let name = required_str(p, "name")?.to_owned();
    let state = state(host, session);
    let Some(agent) = state
        .custom_agents
        .iter()
        .find(|a| a.get("name").and_then(Value::as_str) == Some(name.as_str()))
        .cloned()
    else {
        return Err(fail(format!("Custom agent '{name}' not found")));
    };
    state.selected_agent = Some(name);
    let info = agent_info(&agent, false);
    host.emit(
        session,
        "subagent.selected",
        &json!({"agentName": info["name"], "agentDisplayName": info["displayName"],
                "tools": agent.get("tools").cloned().unwrap_or(Value::Null)}),
        false,
    );
    Ok(json!({"agent": info}))
}

pub(super) fn agent_deselect(host: &mut Host, session: &str, _: &Value) -> Answer {
    if state(host, session).selected_agent.take().is_some() {
        host.emit(session, "subagent.deselected", &json!({}), false);
    }
    Ok(json!({}))
}

pub(super) fn endpoint(host: &mut Host, session: &str, _: &Value) -> Answer {
    let Some(provider) = state(host, session).provider.clone() else {
        return copilot_api_endpoint(host, session);
    };
    let field = |name: &str| provider.get(name).cloned();
    let mut endpoint = json!({
        "type": field("type").unwrap_or(json!("openai")),
        "baseUrl": field("baseUrl").unwrap_or(json!("")),
        "headers": field("headers").unwrap_or(json!({})),
        "transport": field("transport").unwrap_or(json!("http")),
    });
    if endpoint["type"] != "anthropic" {
        endpoint["wireApi"] = field("wireApi").unwrap_or(json!("completions"));
    }
    if let Some(key) = field("apiKey") {
        endpoint["apiKey"] = key;
    }
    Ok(endpoint)
}

/// The endpoint of a session on the runtime's own route (`COPILOT_API_URL`): the route's base
/// URL, its GitHub token as `apiKey`, and the headers its calls carry (`Authorization`
/// included, as sent). Other sessions without a BYOK provider have no endpoint to report.
fn copilot_api_endpoint(host: &mut Host, session: &str) -> Answer {
    let no_endpoint = || {
        fail(
            "the session has no provider endpoint (no BYOK provider was given at \
             session.create, and the server has no Copilot API route)",
        )
    };
    let setup = host.model_setup(session).map_err(|_| no_endpoint())?;
    let provider = &setup.provider;
    if !provider.copilot_api {
        return Err(no_endpoint());
    }
    let token = provider
        .bearer_token
        .as_ref()
        .map(|t| t.expose().to_owned());
    let mut headers = serde_json::Map::new();
    for (name, value) in &provider.headers {
        headers.insert(name.clone(), json!(value.expose()));
    }
    if let Some(token) = &token {
        headers.insert("Authorization".to_owned(), json!(format!("Bearer {token}")));
    }
    let wire_api = match provider.wire_api {
        crate::model::WireApi::Responses => "responses",
        crate::model::WireApi::Completions => "completions",
    };
    let mut endpoint = json!({
        "type": "openai",
        "wireApi": wire_api,
        "baseUrl": provider.base_url,
        "headers": headers,
        "transport": "http",
    });
    if let Some(token) = token {
        endpoint["apiKey"] = json!(token);
    }
    Ok(endpoint)
}

/// Pushes the effective approve-all (the flag, or the `allow-all` mode) to the host.
fn apply_approval(host: &mut Host, session: &str) {
    let state = state(host, session);
    let on = state.approve_all || state.permission_mode() == "allow-all";
    host.set_approve_all(session, on);
}

pub(super) fn approve_all(host: &mut Host, session: &str, p: &Value) -> Answer {
    let enabled = required_bool(p, "enabled")?;
    set_approve_all(host, session, enabled);
    Ok(json!({"success": true}))
}

/// Sets `setApproveAll`'s flag (also `session.permissions.configure`'s
/// `approveAllToolPermissionRequests`) and pushes the effective approve-all to the host.
pub(super) fn set_approve_all(host: &mut Host, session: &str, enabled: bool) {
    state(host, session).approve_all = enabled;
    apply_approval(host, session);
}

pub(super) fn permission_mode_set(host: &mut Host, session: &str, p: &Value) -> Answer {
    let mode = required_str(p, "mode")?;
    if !matches!(mode, "manual" | "assisted" | "allow-all") {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!(
                "invalid params: unknown permission mode `{mode}` (manual, assisted, allow-all)"
            ),
        ));
    }
    let state = state(host, session);
    let previous = state.permission_mode().to_owned();
    state.permission_mode = Some(mode.to_owned());
    apply_approval(host, session);
    if previous != mode {
        host.emit(
            session,
            "session.permissions_changed",
            &json!({"previousMode": previous, "mode": mode}),
            false,
        );
    }
    Ok(json!({"success": true, "mode": mode}))
}

/// `session.options.update`: lenient like the runtime (unknown keys are accepted); the
/// options agentwire acts on (`model`, `reasoningEffort`, `workingDirectory`, `provider`)
/// take effect, without events.
pub(super) fn options_update(host: &mut Host, session: &str, p: &Value) -> Answer {
    let text = |name: &str| p.get(name).and_then(Value::as_str).map(str::to_owned);
    let (model, cwd) = (text("model"), text("workingDirectory"));
    if let Some(s) = host.session_mut(session) {
        if model.is_some() {
            s.model = model;
        }
        if cwd.is_some() {
            s.cwd = cwd;
        }
    }
    let state = state(host, session);
    if let Some(effort) = text("reasoningEffort") {
        state.reasoning_effort = Some(effort);
    }
    if let Some(provider) = p.get("provider").filter(|v| v.is_object()) {
        state.provider = Some(provider.clone());
    }
    Ok(json!({"success": true, "pluginHookCount": 0}))
}

/// Sets the friendly name without an event (a fork's name).
pub(super) fn set_name(host: &mut Host, session: &str, name: &str) {
    if let Some(state) = surface(host, session) {
        state.name = Some(name.to_owned());
    }
}
