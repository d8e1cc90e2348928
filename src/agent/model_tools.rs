//! The built-in tools a model agent offers, named and shaped as the real runtime offers them
//! (`tests/fixtures/traces/model-requests.jsonl`: `bash`, `view`, `create`, `edit`, `grep`,
//! `glob`; the descriptions are agentwire's own), and how a model's call of one becomes a
//! [`BuiltinCall`]. `availableTools` / `excludedTools` filter them by name, `builtin:NAME` or
//! `builtin:*`.

use serde_json::{json, Value};

use super::builtin::{BuiltinCall, BuiltinOp, GrepQuery, PromptKind};
use crate::model::ToolSpec;

/// The built-in tools' names, in the order the runtime lists them.
pub const BUILTIN_TOOL_NAMES: [&str; 6] = ["bash", "view", "create", "edit", "grep", "glob"];

/// The tool through which the model asks the user a question; offered while a client of the
/// session answers user input (`requestUserInput`), performed by the model agent.
pub const ASK_USER: &str = "ask_user";

/// The `ask_user` tool's definition.
pub fn ask_user_spec() -> ToolSpec {
    ToolSpec {
        name: ASK_USER.to_owned(),
        description: "Ask the user a question and wait for the answer. Offer choices when the \
                      answer is one of a few options; allow a free-form answer unless it must \
                      be one of them."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "question": string("The question to ask the user."),
                "choices": {"type": "array", "items": {"type": "string"},
                            "description": "Options the user may pick from."},
                "allow_freeform": {"type": "boolean",
                                   "description": "Whether the user may answer freely (default true)."}
            },
            "required": ["question"]
        }),
    }
}

/// The tool through which the model, in plan mode, asks the user to approve its plan and
/// leave plan mode; offered for a prompt sent in plan mode while a client of the session
/// answers exit-plan-mode requests (`requestExitPlanMode`), performed by the model agent.
pub const EXIT_PLAN_MODE: &str = "exit_plan_mode";

/// The actions the user may pick when approving a plan, as the runtime offers them.
pub const EXIT_PLAN_ACTIONS: [&str; 3] = ["autopilot", "interactive", "exit_only"];

/// The `exit_plan_mode` tool's definition.
pub fn exit_plan_mode_spec() -> ToolSpec {
    ToolSpec {
        name: EXIT_PLAN_MODE.to_owned(),
        description: "Present the plan to the user for approval and leave plan mode. Call it \
                      once the plan is complete; the user picks how to go on (`actions`), and \
                      the result says which mode the session is in now."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "summary": string("A short summary of the plan."),
                "actions": {"type": "array", "items": {"type": "string", "enum": EXIT_PLAN_ACTIONS},
                            "description": "The ways to go on the user may pick from."},
                "recommendedAction": {"type": "string", "enum": EXIT_PLAN_ACTIONS,
                                      "description": "The action you recommend."}
            },
            "required": ["summary"]
        }),
    }
}

/// The tool through which the model loads one of the session's skills (offered whether or
/// not the session has skills, as the runtime offers it; performed by the host).
pub const SKILL: &str = "skill";

/// The `skill` tool's definition, listing the skills (`(name, description)`) it may load.
pub fn skill_spec(skills: &[(&str, &str)]) -> ToolSpec {
    let mut description = String::from(
        "Load a skill: its instructions are added to the conversation. Use it when the task \
         matches a skill's description. Available skills:",
    );
    for (name, what) in skills {
        description.push_str(&format!("\n- {name}: {what}"));
    }
    if skills.is_empty() {
        description.push_str(" none yet.");
    }
    ToolSpec {
        name: SKILL.to_owned(),
        description,
        parameters: json!({
            "type": "object",
            "properties": {"skill": string("The name of the skill to load.")},
            "required": ["skill"]
        }),
    }
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn paths(description: &str) -> Value {
    json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
           "description": description})
}

/// The specification of built-in tool `name` (one of [`BUILTIN_TOOL_NAMES`]).
pub fn builtin_tool_spec(name: &str) -> Option<ToolSpec> {
    let (description, parameters) = match name {
        "bash" => (
            "Run a shell command (sh -c) in the session's working directory and return its \
             output and exit code. The command is stopped after a timeout.",
            json!({"type": "object", "properties": {
                "command": string("The command line to run."),
                "description": string("A short description of what the command does."),
                "shellId": string("An id for the shell (accepted; every call runs in a fresh shell)."),
                "mode": {"type": "string", "enum": ["sync", "async"],
                         "description": "Only sync is supported: the call waits for the command."},
                "detach": {"type": "boolean", "description": "Accepted and ignored."},
                "initial_wait": {"type": "number",
                                 "description": "Seconds to wait before stopping the command (at most 600)."}},
                "required": ["command", "description"]}),
        ),
        "view" => (
            "Show a text file with numbered lines (or list a directory's entries). Paths are \
             relative to the working directory unless absolute.",
            json!({"type": "object", "properties": {
                "path": string("The file or directory."),
                "view_range": {"type": "array", "items": {"type": "integer"},
                               "description": "[first, last] line numbers, 1-based; last -1 means the end."},
                "forceReadLargeFiles": {"type": "boolean", "description": "Accepted and ignored."}},
                "required": ["path"]}),
        ),
        "create" => (
            "Create a new text file with the given content (fails when the file exists).",
            json!({"type": "object", "properties": {
                "path": string("The file to create."),
                "file_text": string("The file's content.")},
                "required": ["path", "file_text"]}),
        ),
        "edit" => (
            "Replace exactly one occurrence of old_str in a file with new_str. old_str must \
             match the file's text exactly, including whitespace, and occur once.",
            json!({"type": "object", "properties": {
                "path": string("The file to edit."),
                "old_str": string("The exact text to replace."),
                "new_str": string("The replacement text.")},
                "required": ["path"]}),
        ),
        "grep" => (
            "Search file contents with a regular expression.",
            json!({"type": "object", "properties": {
                "pattern": string("The regular expression."),
                "paths": paths("The file or directory to search (default: the working directory)."),
                "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"],
                                "description": "What to show (default files_with_matches)."},
                "glob": string("Only files matching this glob, e.g. *.rs."),
                "type": string("Accepted and ignored."),
                "-i": {"type": "boolean", "description": "Case-insensitive."},
                "-A": {"type": "number", "description": "Lines after each match (content mode)."},
                "-B": {"type": "number", "description": "Lines before each match (content mode)."},
                "-C": {"type": "number", "description": "Lines around each match (content mode)."},
                "-n": {"type": "boolean", "description": "Show line numbers (content mode)."},
                "head_limit": {"type": "number", "description": "At most this many lines."},
                "multiline": {"type": "boolean", "description": "Accepted and ignored."}},
                "required": ["pattern"]}),
        ),
        "glob" => (
            "List files whose path matches a glob.",
            json!({"type": "object", "properties": {
                "pattern": string("The glob, e.g. **/*.rs."),
                "paths": paths("The directory to search (default: the working directory).")},
                "required": ["pattern"]}),
        ),
        _ => return None,
    };
    Some(ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    })
}

/// Whether `name` is a built-in tool.
pub fn is_builtin_tool(name: &str) -> bool {
    BUILTIN_TOOL_NAMES.contains(&name)
}

/// The string argument `key` of a model's call (empty when missing or not a string).
pub(crate) fn text_argument(arguments: &Value, key: &str) -> String {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The model's call of built-in tool `name` with `arguments` as a [`BuiltinCall`] (`None`
/// when `name` is not a built-in). Missing arguments become empty strings: the host
/// answers the model with what is wrong instead of running the tool.
pub fn builtin_call(name: &str, arguments: &Value) -> Option<BuiltinCall> {
    let text = |key: &str| text_argument(arguments, key);
    let number = |key: &str| arguments.get(key).and_then(Value::as_f64);
    let flag = |key: &str| arguments.get(key).and_then(Value::as_bool).unwrap_or(false);
    // `paths` is a string or an array; the first entry is searched.
    let first_path = || match arguments.get("paths") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .find_map(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    };
    let dir = |p: String| if p.is_empty() { ".".to_owned() } else { p };
    let (op, result) = match name {
        "bash" => (
            BuiltinOp::Shell {
                command: text("command"),
            },
            String::new(),
        ),
        "view" => {
            let range: Vec<i64> = arguments
                .get("view_range")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default();
            let (line, limit) = match range.as_slice() {
                [first, last, ..] if *first >= 1 => {
                    let limit = (*last >= *first).then(|| (*last - *first + 1) as u32);
                    (Some(*first as u32), limit)
                }
                [first] if *first >= 1 => (Some(*first as u32), None),
                _ => (None, None),
            };
            let op = BuiltinOp::ReadFile {
                path: text("path"),
                line,
                limit,
            };
            (op, String::new())
        }
        "create" => {
            let (path, content) = (text("path"), text("file_text"));
            let result = format!("Created file {path} with {} characters", content.len());
            (BuiltinOp::WriteFile { path, content }, result)
        }
        "edit" => {
            let path = text("path");
            let result = format!("File {path} updated with changes.");
            let op = BuiltinOp::Edit {
                path,
                old_str: text("old_str"),
                new_str: text("new_str"),
            };
            (op, result)
        }
        "grep" => {
            let context = number("-C").unwrap_or(0.0) as usize;
            let query = GrepQuery {
                pattern: text("pattern"),
                path: dir(first_path()),
                glob: arguments
                    .get("glob")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                output_mode: arguments
                    .get("output_mode")
                    .and_then(Value::as_str)
                    .unwrap_or("files_with_matches")
                    .to_owned(),
                case_insensitive: flag("-i"),
                line_numbers: flag("-n"),
                after: number("-A").map_or(context, |n| n as usize),
                before: number("-B").map_or(context, |n| n as usize),
                head_limit: number("head_limit").map(|n| n as usize),
            };
            (BuiltinOp::Grep(query), String::new())
        }
        "glob" => {
            let op = BuiltinOp::Glob {
                pattern: text("pattern"),
                path: dir(first_path()),
            };
            (op, String::new())
        }
        _ => return None,
    };
    Some(BuiltinCall {
        op,
        prompt: PromptKind::Default,
        result,
        model_arguments: Some(arguments.clone()),
    })
}

/// What is missing from a model's built-in call, if anything (the model is told instead of
/// the tool running).
pub fn invalid_call(call: &BuiltinCall) -> Option<String> {
    let missing = |what: &str| Some(format!("missing required argument {what:?}"));
    match &call.op {
        BuiltinOp::Shell { command } if command.trim().is_empty() => missing("command"),
        BuiltinOp::ReadFile { path, .. }
        | BuiltinOp::WriteFile { path, .. }
        | BuiltinOp::Edit { path, .. }
            if path.is_empty() =>
        {
            missing("path")
        }
        BuiltinOp::Grep(GrepQuery { pattern, .. }) | BuiltinOp::Glob { pattern, .. }
            if pattern.is_empty() =>
        {
            missing("pattern")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_have_the_runtime_names_and_required_fields() {
        for name in BUILTIN_TOOL_NAMES {
            let spec = builtin_tool_spec(name).unwrap();
            assert_eq!(spec.name, name);
            assert_eq!(spec.parameters["type"], "object");
        }
        let bash = builtin_tool_spec("bash").unwrap();
        assert_eq!(
            bash.parameters["required"],
            json!(["command", "description"])
        );
        assert!(builtin_tool_spec("web_fetch").is_none());
    }

    #[test]
    fn calls_parse_leniently() {
        let c = builtin_call("view", &json!({"path": "a.txt", "view_range": [2, 4]})).unwrap();
        assert_eq!(
            c.op,
            BuiltinOp::ReadFile {
                path: "a.txt".into(),
                line: Some(2),
                limit: Some(3)
            }
        );
        assert_eq!(
            c.arguments(),
            json!({"path": "a.txt", "view_range": [2, 4]})
        );
        let c = builtin_call("view", &json!({"path": "a", "view_range": [5, -1]})).unwrap();
        assert!(matches!(
            c.op,
            BuiltinOp::ReadFile {
                line: Some(5),
                limit: None,
                ..
            }
        ));
        let c = builtin_call("grep", &json!({"pattern": "x", "paths": ["src"], "-C": 2})).unwrap();
        let BuiltinOp::Grep(q) = &c.op else { panic!() };
        assert_eq!((q.path.as_str(), q.after, q.before), ("src", 2, 2));
        let c = builtin_call("glob", &json!({"pattern": "*.rs"})).unwrap();
        assert_eq!(c.target(), ".");
        let c = builtin_call("edit", &json!({})).unwrap();
        assert_eq!(
            invalid_call(&c).unwrap(),
            "missing required argument \"path\""
        );
        assert!(builtin_call("get_weather", &json!({})).is_none());
    }
}
