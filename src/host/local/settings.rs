//! User settings: the keys agentwire knows with their defaults, and the edits the
//! `user.settings.*` and `skills.config.*` requests make.
//!
//! The file holds only what a user set; a key left out is at its default. Every key in the
//! file is kept and reported, known or not (a settings file may be shared with the Copilot
//! CLI, whose keys agentwire keeps as they are). Of the known keys agentwire itself acts on
//! `disabledSkills` (skills reported by `skills.discover` as disabled); the others are kept
//! for the clients that read them.

use serde_json::{json, Map, Value};

use crate::jsonrpc::{code, ErrorObject};

use super::SettingsOutcome;

/// The skills disabled for every session (`skills.config.*`).
pub(crate) const DISABLED_SKILLS: &str = "disabledSkills";

/// The known settings and their defaults (the Copilot CLI's, for the keys it shares).
fn defaults() -> [(&'static str, Value); 12] {
    [
        ("beep", json!(true)),
        (DISABLED_SKILLS, json!([])),
        ("disabledMcpServers", json!([])),
        ("includeCoAuthoredBy", json!(true)),
        ("renderMarkdown", json!(true)),
        ("respectGitignore", json!(true)),
        ("screenReader", json!(false)),
        ("showReasoning", json!(false)),
        ("skillDirectories", json!([])),
        ("storeTokenPlaintext", json!(false)),
        ("stream", json!(true)),
        ("theme", json!("auto")),
    ]
}

/// The strings of list setting `key` (empty when unset or not a list).
pub(crate) fn string_list(settings: &Map<String, Value>, key: &str) -> Vec<String> {
    settings
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn unchanged(answer: Value) -> Result<SettingsOutcome, ErrorObject> {
    Ok(SettingsOutcome {
        answer,
        changed: false,
    })
}

fn changed(answer: Value) -> Result<SettingsOutcome, ErrorObject> {
    Ok(SettingsOutcome {
        answer,
        changed: true,
    })
}

fn invalid(message: &str) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {message}"))
}

/// `user.settings.get`: every known key and every key set, each with its effective value,
/// its default (`null` for a key agentwire does not know) and whether it is at its default.
pub(crate) fn get(
    settings: &mut Map<String, Value>,
    _: &Value,
) -> Result<SettingsOutcome, ErrorObject> {
    let mut out = Map::new();
    for (key, default) in defaults() {
        let set = settings.get(key);
        out.insert(
            key.to_owned(),
            json!({
                "value": set.cloned().unwrap_or_else(|| default.clone()),
                "default": default,
                "isDefault": set.is_none(),
            }),
        );
    }
    for (key, value) in settings.iter() {
        if !out.contains_key(key) {
            out.insert(
                key.clone(),
                json!({"value": value, "default": null, "isDefault": false}),
            );
        }
    }
    unchanged(json!({ "settings": out }))
}

/// `user.settings.reload`: the settings were read again.
pub(crate) fn reloaded(
    _: &mut Map<String, Value>,
    _: &Value,
) -> Result<SettingsOutcome, ErrorObject> {
    unchanged(Value::Null)
}

/// `user.settings.set {settings}`: each top-level key replaces the one kept; `null` removes
/// it (back to its default). No key is shadowed: agentwire reads no legacy `config.json`.
pub(crate) fn set(
    settings: &mut Map<String, Value>,
    params: &Value,
) -> Result<SettingsOutcome, ErrorObject> {
    let Some(patch) = params.get("settings").and_then(Value::as_object) else {
        return Err(invalid("`settings` must be an object"));
    };
    for (key, value) in patch {
        if key.trim().is_empty() {
            return Err(invalid("a setting's name is empty"));
        }
        if value.is_null() {
            settings.remove(key);
        } else {
            settings.insert(key.clone(), value.clone());
        }
    }
    changed(json!({ "shadowedKeys": [] }))
}

/// `skills.config.setDisabledSkills {disabledSkills}`: the whole list.
pub(crate) fn set_disabled_skills(
    settings: &mut Map<String, Value>,
    params: &Value,
) -> Result<SettingsOutcome, ErrorObject> {
    let Some(list) = params.get("disabledSkills").and_then(Value::as_array) else {
        return Err(invalid("`disabledSkills` must be an array of skill names"));
    };
    let mut names = Vec::with_capacity(list.len());
    for name in list {
        match name.as_str() {
            Some(n) if !n.is_empty() => {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            _ => return Err(invalid("`disabledSkills` must hold skill names")),
        }
    }
    if names.is_empty() {
        settings.remove(DISABLED_SKILLS);
    } else {
        settings.insert(DISABLED_SKILLS.to_owned(), json!(names));
    }
    changed(Value::Null)
}

/// `skills.config.setSkillDisabled {name, disabled}`: adds or removes one name.
pub(crate) fn set_skill_disabled(
    settings: &mut Map<String, Value>,
    params: &Value,
) -> Result<SettingsOutcome, ErrorObject> {
    let name = match params.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_owned(),
        _ => return Err(invalid("`name` must be a skill name")),
    };
    let Some(disabled) = params.get("disabled").and_then(Value::as_bool) else {
        return Err(invalid("`disabled` must be a boolean"));
    };
    let mut names = string_list(settings, DISABLED_SKILLS);
    names.retain(|n| *n != name);
    if disabled {
        names.push(name);
    }
    if names.is_empty() {
        settings.remove(DISABLED_SKILLS);
    } else {
        settings.insert(DISABLED_SKILLS.to_owned(), json!(names));
    }
    changed(Value::Null)
}
