//! Remote control (`sessions.*RemoteControl*`), the agent registry (`agentRegistry.spawn`)
//! and `sessions.open`, as a server without the hosted product answers them.
//!
//! * Remote control (steering a local session from GitHub's Mission Control) needs the hosted
//!   product: it is never started here, so it is always `off`. The reads and the no-op
//!   writes answer what the runtime answers when it is off (`getRemoteControlStatus`,
//!   `setRemoteControlSteering`, `stopRemoteControl` → `stopped: false`,
//!   `transferRemoteControl` → `transferred: false`); `startRemoteControl` fails (the named
//!   session must exist first; then "remote control is not available on this server").
//! * `agentRegistry.spawn` asks the runtime's agent-registry delegate (a TUI feature) to
//!   start a new agent process: this server has no delegate, so the spawn gate is closed.
//! * `session.remote.notifySteerableChanged {remoteSteerable}`: a client that steers the
//!   session says whether it can be steered remotely; the flag is kept as a persisted
//!   `session.remote_steerable_changed` event.
//! * `sessions.open` resolves "which session to open" requests: `resumeLast` finds the most
//!   recent loaded session for the given context (`not_found` when none matches); `resume`
//!   finds the named one; `create`, `attach`, `remote`, `cloud` and `handoff` are answered
//!   with an error pointing at `session.create` / `session.resume` or saying the hosted
//!   feature is not available.

use serde_json::{json, Value};

use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

use super::method_table::Call;
use super::session_state::{required_bool, required_str};
use super::surface::{failed, Answer};

/// Remote control is never on here.
fn off() -> Value {
    json!({"state": "off"})
}

pub(super) fn set_steering(_: &mut Host, _: &Call<'_>, p: &Value) -> Answer {
    required_bool(p, "enabled")?;
    Ok(json!({"status": off()}))
}

pub(super) fn transfer(_: &mut Host, _: &Call<'_>, p: &Value) -> Answer {
    required_str(p, "toSessionId")?;
    Ok(json!({"transferred": false, "status": off()}))
}

pub(super) fn start(host: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    let session = required_str(p, "sessionId")?;
    if host.session(session).is_none() {
        return Err(failed(
            call.method,
            format!("Session not found for sessionId: {session}"),
        ));
    }
    Err(failed(
        call.method,
        "remote control is not available on this server (agentwire does not host the Copilot product's Mission Control)",
    ))
}

pub(super) fn spawn(_: &mut Host, call: &Call<'_>, _: &Value) -> Answer {
    Err(failed(
        call.method,
        "agentRegistry.spawn is not enabled: this server has no agent registry delegate (no TUI spawns agents)",
    ))
}

pub(super) fn steerable_changed(host: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    let session = required_str(p, "sessionId")?.to_owned();
    let steerable = required_bool(p, "remoteSteerable")?;
    if host.session(&session).is_none() {
        return Err(failed(
            call.method,
            format!("Session not found for sessionId: {session}"),
        ));
    }
    host.emit(
        &session,
        "session.remote_steerable_changed",
        &json!({"remoteSteerable": steerable}),
        false,
    );
    Ok(json!({}))
}

/// `sessions.open`.
pub(super) fn open(host: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    let method = call.method;
    let kind = required_str(p, "kind")?;
    match kind {
        "resumeLast" => {
            let cwd = p
                .get("context")
                .and_then(|c| c.get("cwd"))
                .and_then(Value::as_str);
            let last = host
                .sessions()
                .filter(|s| cwd.is_none() || s.cwd.as_deref() == cwd)
                .max_by_key(|s| s.modified_time);
            Ok(match last {
                Some(s) => json!({"status": "resumed", "sessionId": s.id}),
                None => json!({"status": "not_found"}),
            })
        }
        "resume" => {
            let session = required_str(p, "sessionId")?;
            Ok(match host.session(session) {
                Some(s) => json!({"status": "resumed", "sessionId": s.id}),
                None => json!({"status": "not_found"}),
            })
        }
        "create" | "attach" => Err(failed(
            method,
            format!("sessions.open kind `{kind}` is not available on this server: use session.create / session.resume"),
        )),
        "remote" | "cloud" | "handoff" => Err(failed(
            method,
            format!("remote and cloud sessions (sessions.open kind `{kind}`) are not available on this server"),
        )),
        other => Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("invalid params: unknown kind `{other}`"),
        )),
    }
}
