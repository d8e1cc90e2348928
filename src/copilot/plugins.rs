//! Plugins and plugin marketplaces in the runtime's shapes: `plugins.*`,
//! `plugins.marketplaces.*` and `session.plugins.*`, served by the host from the data
//! directory ([`Host::plugin_request`]; what is kept where is described there). Each is
//! answered when its file operations finish.

use serde_json::value::RawValue;
use serde_json::Value;

use crate::host::plugins::PluginCommand;
use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

use super::method_table::{Call, Reply};
use super::session_state::session_id;
use super::surface::{decode, known};

/// A required non-empty string param.
fn required(p: &Value, key: &str) -> Result<String, ErrorObject> {
    match p.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(invalid(format!("`{key}` is empty"))),
        Some(_) => Err(invalid(format!("`{key}` must be a string"))),
        None => Err(invalid(format!("`{key}` is required"))),
    }
}

/// An optional string param (`null` is absent).
fn optional(p: &Value, key: &str) -> Result<Option<String>, ErrorObject> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("`{key}` must be a string"))),
    }
}

fn invalid(message: String) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {message}"))
}

/// Decodes the params into a command and hands it to the host.
fn serve(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
    command: fn(&Value) -> Result<PluginCommand, ErrorObject>,
) -> Reply {
    let command = match decode::<Value>(params).and_then(|p| command(&p)) {
        Ok(command) => command,
        Err(e) => return Some(Err(e)),
    };
    host.plugin_request(call.conn, call.id, call.method, command);
    None
}

pub(super) fn list(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    serve(host, call, params, |_| Ok(PluginCommand::List))
}

pub(super) fn install(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    serve(host, call, params, |p| {
        Ok(PluginCommand::Install {
            source: required(p, "source")?,
            cwd: optional(p, "workingDirectory")?,
        })
    })
}

pub(super) fn uninstall(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    serve(host, call, params, |p| {
        Ok(PluginCommand::Uninstall {
            name: required(p, "name")?,
            direct_source_id: optional(p, "directSourceId")?,
        })
    })
}

pub(super) fn update(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    serve(host, call, params, |p| {
        Ok(PluginCommand::Update {
            name: required(p, "name")?,
        })
    })
}

pub(super) fn update_all(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    serve(host, call, params, |_| Ok(PluginCommand::UpdateAll))
}

/// The `names` of `plugins.enable` / `plugins.disable`.
fn names(p: &Value) -> Result<Vec<String>, ErrorObject> {
    let Some(Value::Array(items)) = p.get("names") else {
        return Err(invalid("`names` must be an array of strings".into()));
    };
    items
        .iter()
        .map(|n| {
            n.as_str()
                .map(str::to_owned)
                .ok_or_else(|| invalid("`names` must be an array of strings".into()))
        })
        .collect()
}

pub(super) fn enable(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    serve(host, call, params, |p| {
        Ok(PluginCommand::SetEnabled {
            names: names(p)?,
            enabled: true,
        })
    })
}

pub(super) fn disable(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    serve(host, call, params, |p| {
        Ok(PluginCommand::SetEnabled {
            names: names(p)?,
            enabled: false,
        })
    })
}

pub(super) fn marketplaces_list(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Reply {
    serve(host, call, params, |_| Ok(PluginCommand::MarketplaceList))
}

pub(super) fn marketplaces_add(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Reply {
    serve(host, call, params, |p| {
        Ok(PluginCommand::MarketplaceAdd {
            source: required(p, "source")?,
            cwd: optional(p, "workingDirectory")?,
        })
    })
}

pub(super) fn marketplaces_remove(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Reply {
    serve(host, call, params, |p| {
        let force = match p.get("force") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(invalid("`force` must be a boolean".into())),
        };
        Ok(PluginCommand::MarketplaceRemove {
            name: required(p, "name")?,
            force,
        })
    })
}

pub(super) fn marketplaces_browse(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Reply {
    serve(host, call, params, |p| {
        Ok(PluginCommand::MarketplaceBrowse {
            name: required(p, "name")?,
        })
    })
}

pub(super) fn marketplaces_refresh(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Reply {
    serve(host, call, params, |p| {
        Ok(PluginCommand::MarketplaceRefresh {
            name: optional(p, "name")?,
        })
    })
}

/// The params' loaded session.
fn session_of(
    host: &Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Result<String, ErrorObject> {
    let p: Value = decode(params)?;
    let session = session_id(&p)?;
    known(host, call.method, &session)?;
    Ok(session)
}

/// `session.plugins.list`: the plugins the session took (the installed ones when it was
/// created, or when it last reloaded its plugins).
pub(super) fn session_list(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let session = match session_of(host, call, params) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    host.plugin_request(
        call.conn,
        call.id,
        call.method,
        PluginCommand::SessionList { session },
    );
    None
}

/// `session.plugins.reload`: the registry is read again and the session takes the installed
/// plugins (their skills are read again when next needed).
pub(super) fn session_reload(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let session = match session_of(host, call, params) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    host.reload_session_plugins(call.conn, call.id, call.method, &session);
    None
}
