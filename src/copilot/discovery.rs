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

use super::method_table::Call;
use super::session_state::required_str;
use super::surface::Answer;

pub(super) fn activity(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    let busy = host.session_busy(session);
    Ok(json!({"abortable": busy, "hasActiveWork": busy}))
}

pub(super) fn interrupt_main_turn(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    _: &Value,
) -> Answer {
    let busy = host.session_busy(session);
    if busy {
        host.queue_agent_input(session, AgentInput::Abort);
    }
    Ok(json!({"interrupted": busy}))
}

pub(super) fn commands_list(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let client = client_commands(host, session);
    super::slash_commands::list(p, client)
}

pub(super) fn commands_invoke(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let client = client_commands(host, session);
    super::slash_commands::invoke(host, session, p, client)
}

pub(super) fn builtin_commands(_: &mut Host, _: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Ok(json!({"commands": super::slash_commands::builtins()}))
}

/// `session.extensions.enable` / `disable` / `reload`.
pub(super) fn no_extensions(_: &mut Host, call: &Call<'_>, _: &str, _: &Value) -> Answer {
    Err(super::surface::failed(
        call.method,
        "Extensions not available: agentwire loads no extensions itself (an \
             extension is an SDK client that attaches to the session)",
    ))
}

pub(super) fn client_metadata_get(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    _: &Value,
) -> Answer {
    Ok(json!(client_metadata(host, session).0))
}

pub(super) fn client_metadata_update(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    update_client_metadata(host, session, p)
}

pub(super) fn pending_permissions(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    _: &Value,
) -> Answer {
    let items: Vec<Value> = host
        .pending_permissions(session)
        .into_iter()
        .map(|(id, request)| json!({"requestId": id, "request": request}))
        .collect();
    Ok(json!({"items": items}))
}

pub(super) fn delete(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    host.delete_session(session);
    Ok(Value::Null)
}

pub(super) fn find_by_prefix(host: &mut Host, _: &Call<'_>, p: &Value) -> Answer {
    let prefix = required_str(p, "prefix")?;
    let matches: Vec<&str> = host
        .sessions()
        .map(|s| s.id.as_str())
        .filter(|id| !prefix.is_empty() && id.starts_with(prefix))
        .collect();
    Ok(match matches.as_slice() {
        [one] => json!({"sessionId": one}),
        _ => json!({}),
    })
}

pub(super) fn non_empty_sessions(host: &mut Host, _: &Call<'_>, _: Option<&RawValue>) -> Answer {
    let ids: Vec<&str> = host
        .sessions()
        .filter(|s| s.events().iter().any(|e| e.event_type == "user.message"))
        .map(|s| s.id.as_str())
        .collect();
    Ok(json!({"sessionIds": ids}))
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
