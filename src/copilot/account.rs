//! Server-level methods about the account, user settings, secrets and built-in tools,
//! answered truthfully for a server with no GitHub account (BYOK / scripted agent):
//! `account.getCurrentAuth` → `{}`, `account.getAllUsers` → `[]`,
//! `session.gitHubAuth.getStatus` (see `github_auth`), `user.settings.*` over an empty
//! settings set, `secrets.addFilterValues` and `tools.list`.

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::Host;

use super::method_table::Call;
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

/// agentwire keeps no user settings file: nothing to list, cache or write.
pub(super) fn settings_set(_: &mut Host, call: &Call<'_>, _: Option<&RawValue>) -> Answer {
    Err(failed(
        call.method,
        "user settings are not available on this server (it keeps no settings file)",
    ))
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
