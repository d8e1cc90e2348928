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

/// Answers `method` if it is one of this module's.
pub(super) fn dispatch(host: &mut Host, method: &str, params: Option<&RawValue>) -> Option<Answer> {
    let answer = match method {
        "session.tasks.list"
        | "session.tasks.refresh"
        | "session.tasks.waitForPending"
        | "session.tasks.getCurrentPromotable"
        | "session.tasks.promoteCurrentToBackground"
        | "session.ui.registerDirectAutoModeSwitchHandler" => {
            decode::<SessionOnly>(params).and_then(|p| {
                known(host, method, &p.session_id)?;
                Ok(match method {
                    "session.tasks.list" => json!({"tasks": []}),
                    "session.ui.registerDirectAutoModeSwitchHandler" => {
                        let Some(state) = host.session_state::<DirectHandlers>(&p.session_id)
                        else {
                            return known(host, method, &p.session_id).map(|()| json!({}));
                        };
                        state.next += 1;
                        let handle = format!("direct-auto-mode-switch-{}", state.next);
                        state.handles.push(handle.clone());
                        json!({"handle": handle})
                    }
                    // Nothing to refresh or wait for; no task is running to promote.
                    _ => json!({}),
                })
            })
        }
        "session.tasks.getProgress"
        | "session.tasks.promoteToBackground"
        | "session.tasks.cancel"
        | "session.tasks.remove"
        | "session.tasks.sendMessage" => decode::<TaskParams>(params).and_then(|p| {
            known(host, method, &p.session_id)?;
            Ok(match method {
                "session.tasks.getProgress" => json!({"progress": null}),
                "session.tasks.promoteToBackground" => json!({"promoted": false}),
                "session.tasks.cancel" => json!({"cancelled": false}),
                "session.tasks.remove" => json!({"removed": false}),
                _ => json!({"sent": false,
                            "error": format!("No background task with id {} (this session runs none)", p.id)}),
            })
        }),
        "session.ui.handlePendingUserInput"
        | "session.ui.handlePendingAutoModeSwitch"
        | "session.ui.handlePendingExitPlanMode"
        | "session.ui.handlePendingSessionLimitsExhausted"
        | "session.mcp.headers.handlePendingHeadersRefreshRequest" => {
            decode::<PendingAnswer>(params).and_then(|p| {
                known(host, method, &p.session_id)?;
                Ok(json!({"success": false}))
            })
        }
        "session.ui.unregisterDirectAutoModeSwitchHandler" => {
            decode::<HandleParams>(params).and_then(|p| {
                known(host, method, &p.session_id)?;
                let state = host.session_state::<DirectHandlers>(&p.session_id);
                let unregistered = state.is_some_and(|s| {
                    let before = s.handles.len();
                    s.handles.retain(|h| *h != p.handle);
                    s.handles.len() < before
                });
                Ok(json!({"unregistered": unregistered}))
            })
        }
        _ => return None,
    };
    Some(answer)
}
