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

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

use super::session_state::{required_bool, required_str};
use super::surface::{decode, failed, Answer};

/// Every method of this module.
pub(super) const METHODS: &[&str] = &[
    "sessions.getRemoteControlStatus",
    "sessions.setRemoteControlSteering",
    "sessions.stopRemoteControl",
    "sessions.transferRemoteControl",
    "sessions.startRemoteControl",
    "agentRegistry.spawn",
    "sessions.open",
    "session.remote.notifySteerableChanged",
];

/// Answers `method` if it is one of this module's.
pub(super) fn dispatch(host: &mut Host, method: &str, params: Option<&RawValue>) -> Option<Answer> {
    let off = json!({"state": "off"});
    let answer = decode::<Value>(params).and_then(|p| match method {
        "sessions.getRemoteControlStatus" => Ok(json!({"status": off})),
        "sessions.setRemoteControlSteering" => {
            required_bool(&p, "enabled")?;
            Ok(json!({"status": off}))
        }
        "sessions.stopRemoteControl" => Ok(json!({"stopped": false, "status": off})),
        "sessions.transferRemoteControl" => {
            required_str(&p, "toSessionId")?;
            Ok(json!({"transferred": false, "status": off}))
        }
        "sessions.startRemoteControl" => {
            let session = required_str(&p, "sessionId")?;
            if host.session(session).is_none() {
                return Err(failed(
                    method,
                    format!("Session not found for sessionId: {session}"),
                ));
            }
            Err(failed(
                method,
                "remote control is not available on this server (agentwire does not host the Copilot product's Mission Control)",
            ))
        }
        "agentRegistry.spawn" => Err(failed(
            method,
            "agentRegistry.spawn is not enabled: this server has no agent registry delegate (no TUI spawns agents)",
        )),
        "sessions.open" => open(host, &p),
        "session.remote.notifySteerableChanged" => {
            let session = required_str(&p, "sessionId")?.to_owned();
            let steerable = required_bool(&p, "remoteSteerable")?;
            if host.session(&session).is_none() {
                return Err(failed(
                    method,
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
        _ => Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("Unhandled method {method}"),
        )),
    });
    METHODS.contains(&method).then_some(answer)
}

/// `sessions.open`.
fn open(host: &Host, p: &Value) -> Answer {
    const METHOD: &str = "sessions.open";
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
            METHOD,
            format!("sessions.open kind `{kind}` is not available on this server: use session.create / session.resume"),
        )),
        "remote" | "cloud" | "handoff" => Err(failed(
            METHOD,
            format!("remote and cloud sessions (sessions.open kind `{kind}`) are not available on this server"),
        )),
        other => Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("invalid params: unknown kind `{other}`"),
        )),
    }
}
