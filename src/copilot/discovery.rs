//! What this server has none of, answered truthfully in the runtime's shapes rather than
//! `-32601`: skills, extensions, instruction sources, hooks and built-in slash commands
//! (agentwire reads no user or repository configuration), a built-in model catalog, and
//! GitHub accounts; plus the cheap session queries over the loaded sessions
//! (`session.metadata.activity`, `session.interruptMainTurn`, `sessions.findByPrefix`,
//! `sessions.checkInUse`, `sessions.listNonEmptySessionIds`).

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::AgentInput;
use crate::host::Host;

use super::session_state::{required_str, session_id};
use super::surface::{decode, known, Answer};

/// Session methods whose answer is always the same (after the session check).
const SESSION_CONSTANT: &[(&str, &str)] = &[
    ("session.skills.list", r#"{"skills":[]}"#),
    ("session.skills.getInvoked", r#"{"skills":[]}"#),
    ("session.extensions.list", r#"{"extensions":[]}"#),
    ("session.instructions.getSources", r#"{"sources":[]}"#),
    ("session.gitHubAuth.getCurrentAuthInfo", "null"),
    ("session.gitHubAuth.getAllAuthAvailable", "[]"),
    ("session.gitHubAuth.lastAuthErrors", "[]"),
];

/// Server methods whose answer is always the same.
const SERVER_CONSTANT: &[(&str, &str)] = &[
    ("skills.discover", r#"{"skills":[]}"#),
    ("agents.discover", r#"{"agents":[]}"#),
    ("instructions.discover", r#"{"sources":[]}"#),
    (
        "hooks.discover",
        r#"{"hooks":[],"warnings":[],"errors":[]}"#,
    ),
    ("commands.list", r#"{"commands":[]}"#),
    ("models.getBuiltInCatalog", r#"{"models":[]}"#),
];

/// Answers `method` if it is one of this module's.
pub(super) fn dispatch(host: &mut Host, method: &str, params: Option<&RawValue>) -> Option<Answer> {
    if let Some((_, result)) = SERVER_CONSTANT.iter().find(|(m, _)| *m == method) {
        return Some(Ok(constant(result)));
    }
    if let Some((_, result)) = SESSION_CONSTANT.iter().find(|(m, _)| *m == method) {
        return Some(in_session(host, method, params, |_, _, _| {
            Ok(constant(result))
        }));
    }
    Some(match method {
        "session.metadata.activity" => in_session(host, method, params, |h, s, _| {
            let busy = h.session_busy(s);
            Ok(json!({"abortable": busy, "hasActiveWork": busy}))
        }),
        "session.interruptMainTurn" => in_session(host, method, params, |h, s, _| {
            let busy = h.session_busy(s);
            if busy {
                h.queue_agent_input(s, AgentInput::Abort);
            }
            Ok(json!({"interrupted": busy}))
        }),
        "sessions.findByPrefix" => decode::<Value>(params).and_then(|p| {
            let prefix = required_str(&p, "prefix")?;
            let matches: Vec<&str> = host
                .sessions()
                .map(|s| s.id.as_str())
                .filter(|id| !prefix.is_empty() && id.starts_with(prefix))
                .collect();
            Ok(match matches.as_slice() {
                [one] => json!({"sessionId": one}),
                _ => json!({}),
            })
        }),
        // One process holds every session of this server: none is in use elsewhere.
        "sessions.checkInUse" => decode::<Value>(params).map(|_| json!({"inUse": []})),
        "sessions.listNonEmptySessionIds" => decode::<Value>(params).map(|_| {
            let ids: Vec<&str> = host
                .sessions()
                .filter(|s| s.events().iter().any(|e| e.event_type == "user.message"))
                .map(|s| s.id.as_str())
                .collect();
            json!({"sessionIds": ids})
        }),
        _ => return None,
    })
}

fn constant(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

/// Runs `f` for the params' loaded session (the runtime's "Session not found" otherwise).
fn in_session(
    host: &mut Host,
    method: &str,
    params: Option<&RawValue>,
    f: impl FnOnce(&mut Host, &str, &Value) -> Answer,
) -> Answer {
    let p: Value = decode(params)?;
    let session = session_id(&p)?;
    known(host, method, &session)?;
    f(host, &session, &p)
}

/// Every method of this module.
#[cfg(test)]
pub(super) fn methods() -> Vec<&'static str> {
    let mut all: Vec<&str> = SERVER_CONSTANT.iter().map(|(m, _)| *m).collect();
    all.extend(SESSION_CONSTANT.iter().map(|(m, _)| *m));
    all.extend([
        "session.metadata.activity",
        "session.interruptMainTurn",
        "sessions.findByPrefix",
        "sessions.checkInUse",
        "sessions.listNonEmptySessionIds",
    ]);
    all
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_constant_answer_is_json_and_listed_in_the_method_table() {
        for (_, json) in super::SERVER_CONSTANT.iter().chain(super::SESSION_CONSTANT) {
            assert!(
                serde_json::from_str::<serde_json::Value>(json).is_ok(),
                "{json}"
            );
        }
        for method in super::methods() {
            assert!(super::super::METHODS.contains(&method), "{method}");
        }
    }
}
