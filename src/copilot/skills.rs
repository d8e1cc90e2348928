//! Skills in the runtime's shapes: `session.skills.list` / `reload` / `ensureLoaded` /
//! `enable` / `disable` over the session's `skillDirectories` (read by the host,
//! [`Host::session_skills`]), and `skills.discover` for given directories. Skills found in
//! a configured directory are `source: "custom"`; agentwire runs no skill as a slash command
//! (`userInvocable: false`) and offers the model no `skill` tool, so none is ever invoked.

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::{ConnId, Host, SkillInfo};
use crate::jsonrpc::{code, ErrorObject, OwnedId};

use super::methods::Reply;
use super::session_state::{required_str, session_id};
use super::surface::{decode, known};

fn skill_json(s: &SkillInfo) -> Value {
    json!({"name": s.name, "description": s.description, "source": "custom",
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

/// Answers `method` if it is one of this module's (`None` inside: answered later).
pub(super) fn dispatch(
    host: &mut Host,
    conn: ConnId,
    id: &OwnedId,
    method: &str,
    params: Option<&RawValue>,
) -> Option<Reply> {
    if !matches!(
        method,
        "session.skills.list"
            | "session.skills.reload"
            | "session.skills.ensureLoaded"
            | "session.skills.enable"
            | "session.skills.disable"
            | "skills.discover"
    ) {
        return None;
    }
    let p: Value = match decode(params) {
        Ok(p) => p,
        Err(e) => return Some(Some(Err(e))),
    };
    if method == "skills.discover" {
        let dirs = strings(&p, "skillDirectories");
        host.discover_skills(dirs, conn, id, list_reply);
        return Some(None);
    }
    let session = match session_id(&p).and_then(|s| known(host, method, &s).map(|()| s)) {
        Ok(s) => s,
        Err(e) => return Some(Some(Err(e))),
    };
    let answer = match method {
        "session.skills.list" => host.session_skills(&session, conn, id, list_reply, false),
        "session.skills.ensureLoaded" => host.session_skills(&session, conn, id, done_reply, false),
        "session.skills.reload" => host.session_skills(&session, conn, id, done_reply, true),
        _ => {
            let enabled = method == "session.skills.enable";
            return Some(Some(required_str(&p, "name").and_then(|name| {
                if name.is_empty() {
                    return Err(ErrorObject::new(
                        code::INVALID_PARAMS,
                        "invalid params: `name` is empty",
                    ));
                }
                host.set_skill_enabled(&session, name, enabled);
                Ok(json!({}))
            })));
        }
    };
    Some(answer.map(Ok))
}
