//! Skills in the runtime's shapes: `session.skills.list` / `reload` / `ensureLoaded` /
//! `enable` / `disable` over the session's `skillDirectories` (read by the host,
//! [`Host::session_skills`]), and `skills.discover` for given directories. Skills found in
//! a configured directory are `source: "custom"`; agentwire runs no skill as a slash command
//! (`userInvocable: false`) and offers the model no `skill` tool, so none is ever invoked.

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::{Host, SkillInfo};
use crate::jsonrpc::{code, ErrorObject};

use super::method_table::{Call, Reply};
use super::session_state::{required_str, session_id};
use super::surface::{decode, known, Answer};

fn skill_json(s: &SkillInfo) -> Value {
    let source = if s.plugin { "plugin" } else { "custom" };
    json!({"name": s.name, "description": s.description, "source": source,
           "userInvocable": false, "enabled": s.enabled, "path": s.path})
}

fn list_reply(skills: &[SkillInfo]) -> Value {
    json!({"skills": skills.iter().map(skill_json).collect::<Vec<_>>()})
}

fn done_reply(_: &[SkillInfo]) -> Value {
    json!({})
}

/// The strings of array `key` of `p` (none when absent).
fn strings(p: &Value, key: &str) -> Vec<String> {
    p.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Records the `skillDirectories` / `disabledSkills` of `session.create` / `session.resume`
/// params (a resume that names none keeps the session's).
pub(super) fn configure(host: &mut Host, session: &str, params: Option<&RawValue>) {
    let Some(p) = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok()) else {
        return;
    };
    if p.get("skillDirectories").is_none() && p.get("disabledSkills").is_none() {
        return;
    }
    let dirs = strings(&p, "skillDirectories");
    let disabled = strings(&p, "disabledSkills");
    host.set_skill_directories(session, dirs, disabled);
}

/// The params' loaded session.
fn session_of(
    host: &Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Result<(String, Value), ErrorObject> {
    let p: Value = decode(params)?;
    let session = session_id(&p)?;
    known(host, call.method, &session)?;
    Ok((session, p))
}

/// `skills.discover {skillDirectories}`: answered when the directories are read.
pub(super) fn discover(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let p: Value = match decode(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let mut dirs = strings(&p, "skillDirectories");
    dirs.extend(super::config_discovery::discovered_skill_dirs(host, &p));
    host.discover_skills_with_settings(dirs, call.conn, call.id, list_reply);
    None
}

/// The session's skills, answered with `reply` once read (`refresh`: read again).
fn session_skills(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
    reply: fn(&[SkillInfo]) -> Value,
    refresh: bool,
) -> Reply {
    let session = match session_of(host, call, params) {
        Ok((s, _)) => s,
        Err(e) => return Some(Err(e)),
    };
    host.session_skills(&session, call.conn, call.id, reply, refresh)
        .map(Ok)
}

pub(super) fn list(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    session_skills(host, call, params, list_reply, false)
}

pub(super) fn ensure_loaded(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    session_skills(host, call, params, done_reply, false)
}

pub(super) fn reload(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    session_skills(host, call, params, done_reply, true)
}

pub(super) fn enable(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    Some(set_enabled(host, call, params, true))
}

pub(super) fn disable(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    Some(set_enabled(host, call, params, false))
}

fn set_enabled(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
    enabled: bool,
) -> Answer {
    let (session, p) = session_of(host, call, params)?;
    let name = required_str(&p, "name")?;
    if name.is_empty() {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            "invalid params: `name` is empty",
        ));
    }
    host.set_skill_enabled(&session, name, enabled);
    Ok(json!({}))
}

/// `session.skills.getInvoked`: the skills the model loaded in this session (its persisted
/// `skill.invoked` events, oldest first), each with the number of the user turn it was
/// loaded in (1 for the first prompt).
pub(super) fn invoked(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    _: &Value,
) -> super::surface::Answer {
    let events = host.session(session).map_or(&[][..], |s| s.events());
    let mut turn = 0u64;
    let mut skills = Vec::new();
    for e in events {
        match e.event_type.as_str() {
            "user.message" => turn += 1,
            "skill.invoked" => {
                let Ok(v) = serde_json::from_slice::<Value>(&e.json) else {
                    continue;
                };
                let d = &v["data"];
                let mut skill = json!({"name": d["name"], "path": d["path"],
                                       "content": d["content"], "invokedAtTurn": turn});
                if let Some(tools) = d.get("allowedTools").filter(|t| t.is_array()) {
                    skill["allowedTools"] = tools.clone();
                }
                skills.push(skill);
            }
            _ => {}
        }
    }
    Ok(json!({ "skills": skills }))
}
