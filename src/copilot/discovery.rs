//! What this server has none of, answered truthfully in the runtime's shapes rather than
//! `-32601`: skills, extensions, instruction sources and hooks (agentwire reads no user or
//! repository configuration), a built-in model catalog, and
//! GitHub accounts, background compactions; plus the cheap session queries and edits over
//! the loaded sessions (`session.metadata.activity`, `session.interruptMainTurn`,
//! `session.commands.list` / `invoke` (with [`super::slash_commands`]), the client metadata bag (in memory), `sessions.delete`,
//! `sessions.findByPrefix`, `sessions.checkInUse`, `sessions.listNonEmptySessionIds`).

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::AgentInput;
use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

use super::session_state::{required_str, session_id};
use super::surface::{decode, known, Answer};

/// Session methods whose answer is always the same (after the session check).
const SESSION_CONSTANT: &[(&str, &str)] = &[
    ("session.skills.getInvoked", r#"{"skills":[]}"#),
    ("session.extensions.list", r#"{"extensions":[]}"#),
    ("session.instructions.getSources", r#"{"sources":[]}"#),
    ("session.gitHubAuth.getCurrentAuthInfo", "null"),
    ("session.gitHubAuth.getAllAuthAvailable", "[]"),
    ("session.gitHubAuth.lastAuthErrors", "[]"),
    // Compaction is synchronous: there is never one to cancel or abort.
    (
        "session.history.cancelBackgroundCompaction",
        r#"{"cancelled":false}"#,
    ),
    (
        "session.history.abortManualCompaction",
        r#"{"aborted":false}"#,
    ),
];

/// Server methods whose answer is always the same.
const SERVER_CONSTANT: &[(&str, &str)] = &[
    ("agents.discover", r#"{"agents":[]}"#),
    ("instructions.discover", r#"{"sources":[]}"#),
    (
        "hooks.discover",
        r#"{"hooks":[],"warnings":[],"errors":[]}"#,
    ),
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
        "session.commands.list" => in_session(host, method, params, |h, s, p| {
            let client = client_commands(h, s);
            super::slash_commands::list(p, client)
        }),
        "session.extensions.enable"
        | "session.extensions.disable"
        | "session.extensions.reload" => in_session(host, method, params, |_, _, _| {
            Err(super::surface::failed(
                method,
                "Extensions not available: agentwire loads no extensions itself (an \
                     extension is an SDK client that attaches to the session)",
            ))
        }),
        "session.commands.invoke" => in_session(host, method, params, |h, s, p| {
            let client = client_commands(h, s);
            super::slash_commands::invoke(h, s, p, client)
        }),
        "commands.list" => Ok(json!({"commands": super::slash_commands::builtins()})),
        "session.metadata.getClientMetadata" => in_session(host, method, params, |h, s, _| {
            Ok(json!(client_metadata(h, s).0))
        }),
        "session.metadata.updateClientMetadata" => {
            in_session(host, method, params, update_client_metadata)
        }
        "session.permissions.pendingRequests" => in_session(host, method, params, |h, s, _| {
            let items: Vec<Value> = h
                .pending_permissions(s)
                .into_iter()
                .map(|(id, request)| json!({"requestId": id, "request": request}))
                .collect();
            Ok(json!({"items": items}))
        }),
        "sessions.delete" => in_session(host, method, params, |h, s, _| {
            h.delete_session(s);
            Ok(Value::Null)
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

/// The slash commands the session's clients declared (first declaration of a name wins).
fn client_commands(host: &Host, session: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let Some(s) = host.session(session) else {
        return out;
    };
    for attachment in s.attached.values() {
        for c in &attachment.commands {
            if out.iter().all(|o| o["name"] != c.name.as_str()) {
                out.push(
                    json!({"name": c.name, "description": c.description, "kind": "client",
                                "allowDuringAgentExecution": false}),
                );
            }
        }
    }
    out
}

/// The client-owned string metadata of a session (`session.metadata.*ClientMetadata`), kept
/// in memory with the session.
#[derive(Debug, Default)]
struct ClientMetadata(BTreeMap<String, String>);

fn client_metadata<'a>(host: &'a mut Host, session: &str) -> &'a mut ClientMetadata {
    // `in_session` checked the session first: it is loaded, so its state exists.
    host.session_state::<ClientMetadata>(session)
        .expect("the session is loaded")
}

/// A key clients may use: non-empty, at most 256 bytes, outside the reserved namespaces.
fn check_key(key: &str) -> Result<(), ErrorObject> {
    if key.is_empty()
        || key.len() > 256
        || key.starts_with("copilot/")
        || key.starts_with("github/")
    {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("invalid params: client metadata key `{key}` must be 1-256 bytes, outside copilot/ and github/"),
        ));
    }
    Ok(())
}

/// Applies `clear`, then `remove`, then `set`; the result has at most 128 entries of at most
/// 16 KiB each. Returns the committed bag.
fn update_client_metadata(host: &mut Host, session: &str, p: &Value) -> Answer {
    let invalid = |m: &str| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {m}"));
    let mut bag = if p["clear"] == true {
        BTreeMap::new()
    } else {
        client_metadata(host, session).0.clone()
    };
    if let Some(remove) = p.get("remove") {
        let keys = remove
            .as_array()
            .ok_or_else(|| invalid("`remove` must be a list of keys"))?;
        for key in keys {
            let key = key
                .as_str()
                .ok_or_else(|| invalid("`remove` must be a list of keys"))?;
            check_key(key)?;
            bag.remove(key);
        }
    }
    if let Some(set) = p.get("set") {
        let entries = set
            .as_object()
            .ok_or_else(|| invalid("`set` must be an object"))?;
        for (key, value) in entries {
            check_key(key)?;
            let value = value
                .as_str()
                .ok_or_else(|| invalid("`set` values must be strings"))?;
            if value.len() > 16 * 1024 {
                return Err(invalid("a client metadata value is larger than 16 KiB"));
            }
            bag.insert(key.clone(), value.to_owned());
        }
    }
    if bag.len() > 128 {
        return Err(invalid("client metadata holds at most 128 entries"));
    }
    client_metadata(host, session).0 = bag.clone();
    Ok(json!(bag))
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
        "session.commands.list",
        "session.commands.invoke",
        "commands.list",
        "session.extensions.enable",
        "session.extensions.disable",
        "session.extensions.reload",
        "session.metadata.getClientMetadata",
        "session.metadata.updateClientMetadata",
        "sessions.delete",
        "session.permissions.pendingRequests",
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
