//! Background tasks and the pending answers of requests this server never leaves pending.
//!
//! * `session.tasks.list` / `refresh` / `waitForPending` / `getProgress` /
//!   `getCurrentPromotable` / `promoteToBackground` / `promoteCurrentToBackground` / `cancel` /
//!   `remove` / `sendMessage`: the scripted and model agents run no background tasks and
//!   none can be started here (`session.tasks.startAgent` is not available), so every
//!   session has none: an empty list, and every task id is unknown (`progress: null`,
//!   `promoted` / `cancelled` / `removed` false, `sent: false` with the reason).
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
    session_only(host, call, params).map(|_| json!({"tasks": []}))
}

/// Nothing to refresh or wait for; no task is running to promote.
pub(super) fn nothing_to_do(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    session_only(host, call, params).map(|_| json!({}))
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

/// A method on one background task (`TaskParams`): this session runs none.
fn task(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
    answer: impl FnOnce(&TaskParams) -> serde_json::Value,
) -> Answer {
    decode::<TaskParams>(params).and_then(|p| {
        known(host, call.method, &p.session_id)?;
        Ok(answer(&p))
    })
}

pub(super) fn progress(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    task(host, call, params, |_| json!({"progress": null}))
}

pub(super) fn promote(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    task(host, call, params, |_| json!({"promoted": false}))
}

pub(super) fn cancel(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    task(host, call, params, |_| json!({"cancelled": false}))
}

pub(super) fn remove(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    task(host, call, params, |_| json!({"removed": false}))
}

pub(super) fn send_message(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    task(host, call, params, |p| {
        json!({"sent": false,
               "error": format!("No background task with id {} (this session runs none)", p.id)})
    })
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
