//! Server-level methods about the account, user settings, secrets and built-in tools:
//! `account.login` / `logout` / `getCurrentAuth` / `getAllUsers` over the accounts signed in
//! to this server (kept in memory, see `host::local::accounts`), `user.settings.*` and
//! `skills.config.*` over the data directory's `settings.json` (`host::local::settings`),
//! `session.gitHubAuth.getStatus` (see `github_auth`), `secrets.addFilterValues` and
//! `tools.list`.

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::local::{self, SettingsEdit};
use crate::host::Host;

use super::method_table::{Call, Reply};
use super::surface::{decode, failed, Answer};

pub(super) fn github_status(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    Ok(super::github_auth::session_status(host, session))
}

pub(super) fn github_credentials(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    super::github_auth::set_credentials(host, session, p)
}

/// Queues a settings request; answered once the settings are read (and written).
fn settings(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
    reload: bool,
    edit: SettingsEdit,
) -> Reply {
    let p: Value = match params {
        None => Value::Null,
        Some(_) => match decode(params) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        },
    };
    host.settings_request(call.conn, call.id, reload, edit, p);
    None
}

pub(super) fn settings_get(host: &mut Host, call: &Call<'_>, p: Option<&RawValue>) -> Reply {
    settings(host, call, p, false, local::settings::get)
}

pub(super) fn settings_set(host: &mut Host, call: &Call<'_>, p: Option<&RawValue>) -> Reply {
    settings(host, call, p, false, local::settings::set)
}

pub(super) fn settings_reload(host: &mut Host, call: &Call<'_>, p: Option<&RawValue>) -> Reply {
    settings(host, call, p, true, local::settings::reloaded)
}

pub(super) fn set_disabled_skills(host: &mut Host, call: &Call<'_>, p: Option<&RawValue>) -> Reply {
    settings(host, call, p, false, local::settings::set_disabled_skills)
}

pub(super) fn set_skill_disabled(host: &mut Host, call: &Call<'_>, p: Option<&RawValue>) -> Reply {
    settings(host, call, p, false, local::settings::set_skill_disabled)
}

pub(super) fn login(host: &mut Host, _: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: Value = decode(params)?;
    host.accounts_mut().login(&p)
}

pub(super) fn logout(host: &mut Host, _: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: Value = decode(params)?;
    host.accounts_mut().logout(&p)
}

pub(super) fn current_auth(host: &mut Host, _: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Ok(host.accounts_mut().current())
}

pub(super) fn all_users(host: &mut Host, _: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Ok(host.accounts_mut().all())
}

pub(super) fn tools_list(_: &mut Host, _: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Ok(json!({"tools": builtin_tools()}))
}

/// `secrets.addFilterValues {values}`: from now on the values are masked (`******`) in every
/// event this server emits.
pub(super) fn secrets(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let method = call.method;
    let p: Value = decode(params)?;
    let Some(values) = p.get("values").and_then(Value::as_array) else {
        return Err(crate::jsonrpc::ErrorObject::new(
            crate::jsonrpc::code::INVALID_PARAMS,
            "invalid params: missing field `values`",
        ));
    };
    let values: Vec<String> = values
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    if values.iter().any(String::is_empty) {
        return Err(failed(method, "secret filter values must not be empty"));
    }
    host.add_secret_filters(values);
    Ok(json!({"ok": true}))
}

/// The built-in tools the scripted agent's steps run (`view`, `create`, `bash`).
fn builtin_tools() -> Value {
    json!([
        {"name": "view", "description": "Reads a file (a scenario's `read_file` step).",
         "parameters": {"type": "object",
                        "properties": {"path": {"type": "string"},
                                       "line": {"type": "integer"},
                                       "limit": {"type": "integer"}},
                        "required": ["path"]}},
        {"name": "create", "description": "Writes a file (a scenario's `write_file` step).",
         "parameters": {"type": "object",
                        "properties": {"path": {"type": "string"},
                                       "file_text": {"type": "string"}},
                        "required": ["path", "file_text"]}},
        {"name": "bash", "description": "Runs a shell command (a scenario's `shell` step).",
         "parameters": {"type": "object",
                        "properties": {"command": {"type": "string"}},
                        "required": ["command"]}},
    ])
}
