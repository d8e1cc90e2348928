//! Background tasks and the pending answers of requests this server never leaves pending.
//!
//! * `session.tasks.*` serve the session agent's background agents
//!   ([`crate::agent::background`]; a model agent runs them, the scripted agent none):
//!   `startAgent {agentType, prompt, name, description?}` starts one (`{agentId}`; an agent
//!   type the session does not offer, an empty prompt or a `model` override is an error:
//!   sub-agents run on the session's model), `list` (`TaskAgentInfo`s), `getProgress`
//!   (`null` for an unknown id), `cancel` / `remove` (whether it was running / was over),
//!   `session.cancelAllBackgroundAgents` (how many were cancelled), `waitForPending`
//!   (answered once nothing runs: at once, or with the session's next `session.idle`).
//!   Sync sub-agents cannot be promoted (`getCurrentPromotable` / `promote…` find nothing),
//!   there are no shell tasks to `refresh`, and `sendMessage` is refused: background agents
//!   are one-shot (no `write_agent`).
//! * `session.ui.handlePendingUserInput` / `handlePendingAutoModeSwitch` /
//!   `handlePendingExitPlanMode` / `handlePendingSessionLimitsExhausted` and
//!   `session.mcp.headers.handlePendingHeadersRefreshRequest`: agentwire asks user input,
//!   plan approval and mode switches with server-to-client requests (`userInput.request`,
//!   …) and has no usage limits or MCP header refreshes, so no such request is ever pending:
//!   `{success: false}` for every `requestId`, as the runtime answers an unknown one.
//! * `session.ui.registerDirectAutoModeSwitchHandler` / `unregister…`: registrations are
//!   kept per session (`{handle}`; unregistering answers whether the handle was registered).
//!   A mode switch is still asked with `autoModeSwitch.request` of the clients that
//!   declared `requestAutoModeSwitch`.

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::host::Host;
use crate::jsonrpc::ErrorObject;

use super::method_table::Call;
use super::surface::{decode, known, Answer};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionOnly {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskParams {
    session_id: String,
    id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PendingAnswer {
    session_id: String,
    #[allow(dead_code)]
    request_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HandleParams {
    session_id: String,
    handle: String,
}

/// The session's direct auto-mode-switch handler registrations.
#[derive(Debug, Default)]
struct DirectHandlers {
    handles: Vec<String>,
    next: u64,
}

/// The params' loaded session (`SessionOnly` params).
fn session_only(
    host: &Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Result<String, ErrorObject> {
    let p = decode::<SessionOnly>(params)?;
    known(host, call.method, &p.session_id)?;
    Ok(p.session_id)
}

pub(super) fn list(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let session = session_only(host, call, params)?;
    let mut tasks = host
        .session_agent(&session)
        .map(|agent| agent.tasks())
        .unwrap_or_default();
    let decodes_client_tasks = host
        .conn_state_ref::<super::ConnState>(call.conn)
        .is_some_and(|c| c.decodes_client_tasks);
    if decodes_client_tasks {
        tasks.extend(super::client_tasks::infos(host, &session));
    }
    Ok(json!({"tasks": tasks}))
}

/// Nothing to refresh (no shell tasks); no sync task can be promoted.
pub(super) fn nothing_to_do(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    session_only(host, call, params).map(|_| json!({}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartAgentParams {
    session_id: String,
    agent_type: String,
    prompt: String,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    model: Option<String>,
}

/// `session.tasks.startAgent`.
pub(super) fn start_agent(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p = decode::<StartAgentParams>(params)?;
    known(host, call.method, &p.session_id)?;
    let refuse = |message: String| {
        Err(ErrorObject::new(
            crate::jsonrpc::code::INVALID_PARAMS,
            format!("Request {} failed with message: {message}", call.method),
        ))
    };
    if let Some(model) = p.model.filter(|m| !m.is_empty()) {
        return refuse(format!(
            "model \"{model}\" cannot be chosen for a background agent: sub-agents run on the \
             session's model"
        ));
    }
    let request = crate::agent::BackgroundAgentRequest {
        agent_type: p.agent_type,
        prompt: p.prompt,
        description: p.description.unwrap_or_else(|| p.name.clone()),
        name: p.name,
    };
    match host.with_agent(&p.session_id, |agent, s| {
        agent.start_background_agent(request, s)
    }) {
        Some(Ok(id)) => Ok(json!({"agentId": id})),
        Some(Err(message)) => refuse(message),
        None => refuse("the session has no agent".to_owned()),
    }
}

/// `session.cancelAllBackgroundAgents`: how many running agents were cancelled.
pub(super) fn cancel_all(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let session = session_only(host, call, params)?;
    let n = host.with_agent(&session, |agent, s| agent.cancel_all_tasks(s));
    Ok(json!(n.unwrap_or(0)))
}

/// The `session.tasks.waitForPending` callers of a session, answered once nothing runs.
#[derive(Debug, Default)]
struct PendingWaits(Vec<(crate::host::ConnId, crate::jsonrpc::OwnedId)>);

/// `session.tasks.waitForPending`: `{}` once no turn and no background agent runs.
pub(super) fn wait_for_pending(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> super::method_table::Reply {
    let session = match session_only(host, call, params) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    if !busy(host, &session) {
        return Some(Ok(json!({})));
    }
    if let Some(waits) = host.session_state::<PendingWaits>(&session) {
        waits.0.push((call.conn, call.id.clone()));
    }
    None
}

/// Whether the session runs a turn or background work.
fn busy(host: &mut Host, session: &str) -> bool {
    host.session_agent(session)
        .is_some_and(|agent| agent.is_busy() || agent.has_background_work())
}

/// The session went idle: `waitForPending` callers are answered when nothing runs.
pub(super) fn session_idle(host: &mut Host, session: &str) {
    let owed = host
        .session_state_ref::<PendingWaits>(session)
        .is_some_and(|w| !w.0.is_empty());
    if !owed || busy(host, session) {
        return;
    }
    let waits = host
        .session_state::<PendingWaits>(session)
        .map(|w| std::mem::take(&mut w.0))
        .unwrap_or_default();
    for (conn, id) in waits {
        host.respond(conn, &id, Ok(json!({})));
    }
}

pub(super) fn register_direct_handler(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    let session = session_only(host, call, params)?;
    let Some(state) = host.session_state::<DirectHandlers>(&session) else {
        return known(host, call.method, &session).map(|()| json!({}));
    };
    state.next += 1;
    let handle = format!("direct-auto-mode-switch-{}", state.next);
    state.handles.push(handle.clone());
    Ok(json!({"handle": handle}))
}

/// The params of a method on one task (`TaskParams`) of a loaded session.
fn task_params(
    host: &Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Result<TaskParams, ErrorObject> {
    let p = decode::<TaskParams>(params)?;
    known(host, call.method, &p.session_id)?;
    Ok(p)
}

pub(super) fn progress(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p = task_params(host, call, params)?;
    if let Some(progress) = super::client_tasks::progress(host, &p.session_id, &p.id) {
        return Ok(json!({"progress": progress}));
    }
    let progress = host
        .session_agent(&p.session_id)
        .and_then(|agent| agent.task_progress(&p.id));
    Ok(json!({"progress": progress}))
}

/// Background agents already run in the background; sync ones cannot be promoted.
pub(super) fn promote(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    task_params(host, call, params).map(|_| json!({"promoted": false}))
}

/// `session.tasks.cancel`: a background agent stops at once; a client-owned task's owner
/// is asked (answered when it answers).
pub(super) fn cancel(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> super::method_table::Reply {
    let p = match task_params(host, call, params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    if let Some(reply) = super::client_tasks::cancel(host, call, &p.session_id, &p.id) {
        return reply;
    }
    let cancelled = host.with_agent(&p.session_id, |agent, s| agent.cancel_task(&p.id, s));
    Some(Ok(json!({"cancelled": cancelled.unwrap_or(false)})))
}

pub(super) fn remove(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p = task_params(host, call, params)?;
    if let Some(removed) = super::client_tasks::remove(host, &p.session_id, &p.id) {
        return Ok(json!({"removed": removed}));
    }
    let removed = host.with_agent(&p.session_id, |agent, _| agent.remove_task(&p.id));
    Ok(json!({"removed": removed.unwrap_or(false)}))
}

/// Background agents are one-shot: they take no follow-up messages.
pub(super) fn send_message(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let refusal = |id: &str| {
        json!({"sent": false,
               "error": format!("Agent {id} takes no follow-up messages: background agents \
                                 here are one-shot (start a new one with the whole task)")})
    };
    let p = task_params(host, call, params)?;
    let known_task = host
        .session_agent(&p.session_id)
        .is_some_and(|agent| agent.tasks().iter().any(|t| t["id"] == p.id.as_str()));
    if known_task {
        return Ok(refusal(&p.id));
    }
    Ok(json!({"sent": false,
              "error": format!("No agent found with agent_id: {}", p.id)}))
}

/// The answer to a request this server never leaves pending: nothing to answer.
pub(super) fn nothing_pending(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode::<PendingAnswer>(params).and_then(|p| {
        known(host, call.method, &p.session_id)?;
        Ok(json!({"success": false}))
    })
}

pub(super) fn unregister_direct_handler(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode::<HandleParams>(params).and_then(|p| {
        known(host, call.method, &p.session_id)?;
        let state = host.session_state::<DirectHandlers>(&p.session_id);
        let unregistered = state.is_some_and(|s| {
            let before = s.handles.len();
            s.handles.retain(|h| *h != p.handle);
            s.handles.len() < before
        });
        Ok(json!({"unregistered": unregistered}))
    })
}
