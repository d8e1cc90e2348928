//! The runtime's slash commands: the built-ins agentwire runs itself (`/help`, `/compact`)
//! next to the commands the attached clients declared, as `session.commands.list` /
//! `commands.list` report them and `session.commands.invoke` runs them.
//!
//! A client's command runs in its client (`session.commands.execute`); `invoke` runs only
//! the built-ins and says so for anything else.

use serde_json::{json, Value};

use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

use super::session_state::required_str;
use super::surface::Answer;

/// One built-in command: its name, what it does, and whether it may run during a turn.
struct Builtin {
    name: &'static str,
    description: &'static str,
    during_turn: bool,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "help",
        description: "Show the available slash commands",
        during_turn: true,
    },
    Builtin {
        name: "compact",
        description: "Summarize the conversation so far to free context",
        during_turn: false,
    },
];

/// The built-in commands as `SlashCommandInfo` values.
pub(super) fn builtins() -> Vec<Value> {
    BUILTINS
        .iter()
        .map(|b| {
            json!({"name": b.name, "description": b.description, "kind": "builtin",
                   "allowDuringAgentExecution": b.during_turn})
        })
        .collect()
}

/// `session.commands.list {includeBuiltins?, includeClientCommands?, includeSkills?}` (each
/// included unless `false`; agentwire has no skill commands).
pub(super) fn list(p: &Value, client: Vec<Value>) -> Answer {
    let include = |key: &str| p.get(key).and_then(Value::as_bool).unwrap_or(true);
    let mut commands = Vec::new();
    if include("includeBuiltins") {
        commands.extend(builtins());
    }
    if include("includeClientCommands") {
        commands.extend(client);
    }
    Ok(json!({"commands": commands}))
}

/// `session.commands.invoke {name, input?}`: the name without leading slashes, matched
/// case-insensitively. `/help` lists the commands (`kind: "text"`), `/compact` compacts
/// the history as `session.history.compact` does (`kind: "completed"`).
pub(super) fn invoke(host: &mut Host, session: &str, p: &Value, client: Vec<Value>) -> Answer {
    let name = required_str(p, "name")?
        .trim_start_matches('/')
        .to_ascii_lowercase();
    match name.as_str() {
        "help" => {
            let mut text = String::from("Available commands:\n");
            for c in builtins().iter().chain(client.iter()) {
                let (n, d) = (c["name"].as_str(), c["description"].as_str());
                text.push_str(&format!(
                    "  /{} - {}\n",
                    n.unwrap_or_default(),
                    d.unwrap_or_default()
                ));
            }
            Ok(json!({"kind": "text", "text": text, "markdown": false}))
        }
        "compact" => {
            let instructions = p.get("input").and_then(Value::as_str).map(str::trim);
            let mut params = json!({"trigger": "manual"});
            if let Some(text) = instructions.filter(|t| !t.is_empty()) {
                params["customInstructions"] = json!(text);
            }
            // Its failures are `session.history.compact`'s, as that method's.
            super::history::compact_as(host, "session.history.compact", session, &params)?;
            Ok(json!({"kind": "completed", "message": "Conversation compacted"}))
        }
        other if client.iter().any(|c| c["name"].as_str() == Some(other)) => Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!(
                "/{other} is a client command: its client runs it \
                     (session.commands.execute)"
            ),
        )),
        other => Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("Unknown command: /{other}"),
        )),
    }
}
