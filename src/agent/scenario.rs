//! The scenario format that drives the scripted agent.
//!
//! A scenario is JSON:
//!
//! ```json
//! { "rules": [ { "match": "weather",
//!                "steps": [ { "tool": "get_weather", "arguments": { "city": "Paris" } },
//!                           { "say": "It is sunny in Paris." } ] } ],
//!   "default": [ { "say": "You said: {prompt}" } ] }
//! ```
//!
//! `match` is a case-insensitive substring of the prompt; the first matching rule wins, else
//! `default` runs. Step kinds:
//!
//! | step | meaning |
//! |---|---|
//! | `{"say": TEXT}` | an assistant message (streamed as deltas to streaming clients); `{prompt}` in TEXT is replaced by the prompt |
//! | `{"stream": COUNT, "text": TEXT, "batch": N}` | an assistant message streamed as exactly COUNT deltas (for load tests); each delta's content is TEXT (default `"{i} "`) with `{i}` replaced by the delta's index and `{now_ns}` by the host's current time in nanoseconds since the Unix epoch; with N, the deltas go out N at a time, the agent yielding to the host (a zero-length timer) between batches; with `"interval_us": U` the stream is paced: batch k (N deltas, 1 without `batch`) goes out k × U µs after the first, on a core timer |
//! | `{"tool": NAME, "arguments": {..}}` | a client tool call: permission check, then the tool runs on the client that declared it |
//! | `{"mcp": "SERVER/TOOL", "arguments": {..}}` | a call of tool TOOL of the session's MCP server SERVER (waits for the server to start): a permission prompt of kind `mcp` unless the server marks the tool read-only, then `tools/call`; its result text is `{result}` in later `say` steps |
//! | `{"event": TYPE, "data": {..}, "ephemeral": BOOL, "agent_id": ID}` | emit any raw session event; with `agent_id`, as sub-agent ID (`agentId` in the envelope; a sub-agent's streaming deltas reach only clients that kept `includeSubAgentStreamingEvents`) |
//! | `{"error": MESSAGE}` | emit `session.error` and end the turn |
//! | `{"sleep_ms": N}` | wait N milliseconds (through the core's timers) |
//! | `{"ask": MESSAGE, "schema": {..}, "url": URL}` | an elicitation (form, or URL mode with `url`), answered by a client with `requestElicitation` |
//! | `{"user_input": QUESTION, "choices": [..], "allow_freeform": BOOL}` | `userInput.request` to a client with `requestUserInput` |
//! | `{"sample": {..}}` | `sampling.requested` with this opaque request, answered by a client with `requestSampling` |
//! | `{"command": "/name args"}` | `command.execute` sent only to the client that declared the command |
//! | `{"exit_plan_mode": SUMMARY, "plan": TEXT, "actions": [..], "recommended": ACTION}` | `exitPlanMode.request` to a client with `requestExitPlanMode` |
//! | `{"auto_mode_switch": ERROR_CODE}` | `autoModeSwitch.request` to a client with `requestAutoModeSwitch` (`null` for no error code) |
//! | `{"hook": HOOK_TYPE, "input": {..}}` | `hooks.invoke` to a client with `hooks: true` |
//! | `{"read_file": PATH, "line": N, "limit": N, "result": TEXT, "permission": P}` | built-in tool `view`: a `read` permission prompt, then `fs/read_text_file` on an ACP client that offers it, else TEXT is the result |
//! | `{"write_file": PATH, "content": TEXT, "result": TEXT, "permission": P}` | built-in tool `create`: a `write` prompt, then `fs/write_text_file` on an ACP client that offers it |
//! | `{"shell": COMMAND, "result": TEXT, "permission": P}` | built-in tool `bash`: a `shell` prompt, then `terminal/*` (`sh -c COMMAND`) on an ACP client that offers it |
//!
//! The steps from `ask` down wait for the client's answer; its text replaces `{answer}` in
//! later `say` steps: a string answer as is, the `answer` field of a user-input reply, else
//! the compact JSON of the reply, or `error: <reason>` when there is no answer (nobody can
//! answer, the client left, the deadline passed).
//!
//! The built-in tool steps (`read_file`, `write_file`, `shell`; see
//! [`builtin`](super::builtin)) accept `{prompt}` and `{path}` (the prompt's last word) in
//! PATH, COMMAND, `content` and `result`; a relative PATH is resolved against the session's
//! working directory. `permission` picks the prompt: `default`, `path` (file steps), `url`
//! (for the first `http(s)://` URL in the step), `hook` or `none`. The tool's result text (the
//! file's content, the command's output, or the failure message) replaces `{result}` in
//! later `say` steps. The built-in scenario answers "read file PATH" this way.
//!
//! Loading validates everything and names the bad field in the error, e.g.
//! `rules[0].steps[1]: unknown step kind "sya" (expected one of say, tool, event, error, sleep_ms)`.

use std::fmt;

use serde_json::{Map, Value};

use super::ClientRequest;

/// One step of a scripted turn.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Say `text` as an assistant message; `{prompt}` is replaced by the user's prompt.
    Say(String),
    /// Call the client tool `name` with `arguments` (a JSON object).
    Tool {
        /// Tool name, as a client declared it in `tools[]`.
        name: String,
        /// Arguments passed to the tool.
        arguments: Value,
    },
    /// Call tool `tool` of the session's MCP server `server` with `arguments`; its result
    /// text is available to later `say` steps as `{result}`.
    Mcp {
        /// The server's name (its key in `mcpServers`).
        server: String,
        /// The tool's name on that server.
        tool: String,
        /// Arguments passed to the tool.
        arguments: Value,
    },
    /// Stream one assistant message as exactly `count` deltas (see [`StreamStep`]).
    Stream(StreamStep),
    /// Emit a raw session event.
    Event {
        /// Event type, e.g. `session.title_changed`.
        event_type: String,
        /// Event data (an object).
        data: Value,
        /// Whether the event is ephemeral (not persisted).
        ephemeral: bool,
        /// The sub-agent instance the event comes from (`agentId`); `None` for the main agent.
        agent_id: Option<String>,
    },
    /// Emit `session.error` with this message and end the turn.
    Error(String),
    /// Wait this many milliseconds.
    SleepMs(u64),
    /// Ask the session's clients something and wait for the answer; the answer's text is
    /// available to later `say` steps as `{answer}`.
    Ask(ClientRequest),
    /// Run a built-in tool (`read_file`, `write_file`, `shell`) and wait for it; its result
    /// text is available to later `say` steps as `{result}`.
    Builtin(super::BuiltinCall),
}

/// The `stream` step: one assistant message streamed as `count` deltas, for load tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamStep {
    /// How many deltas to emit (to streaming clients; the final `assistant.message` carries
    /// their concatenation).
    pub count: u64,
    /// Each delta's content: `{i}` is replaced by the delta's index (from 0) and `{now_ns}` by
    /// the host's current input time in nanoseconds since the Unix epoch.
    pub text: String,
    /// Deltas emitted per batch; between batches the agent yields to the host through a
    /// zero-length timer, so each batch carries a fresh time. `None`: all at once.
    pub batch: Option<u64>,
    /// Pacing: batch k (of `batch` deltas, 1 when `batch` is `None`) is due `k × interval_us`
    /// microseconds after the first (a timer of the core, so the pace is the host's clock, not
    /// the clients'); a batch that fires late does not delay the ones after it. `None`:
    /// batches back to back.
    pub interval_us: Option<u64>,
}

/// A rule: when the prompt contains `pattern` (case-insensitive), run `steps`.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// Lower-cased substring to look for in the prompt.
    pub pattern: String,
    /// Steps to run when it matches.
    pub steps: Vec<Step>,
}

/// A whole scenario: ordered rules and the default steps.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Rules, tried in order.
    pub rules: Vec<Rule>,
    /// Steps run when no rule matches.
    pub default: Vec<Step>,
}

/// The built-in scenario, used when no `--scenario` file is given.
pub const BUILTIN_SCENARIO_JSON: &str = r#"{
  "rules": [ { "match": "weather",
               "steps": [ { "tool": "get_weather", "arguments": { "city": "Paris" } },
                          { "say": "It is sunny in Paris." } ] },
             { "match": "read file",
               "steps": [ { "read_file": "{path}" },
                          { "say": "{result}" } ] } ],
  "default": [ { "say": "You said: {prompt}" } ]
}"#;

impl Default for Scenario {
    fn default() -> Self {
        Scenario::from_json(BUILTIN_SCENARIO_JSON).expect("the built-in scenario is valid")
    }
}

/// Why a scenario failed to load: the path of the bad field and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// Where the problem is, e.g. `rules[0].steps[1].arguments`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "scenario: {}", self.message)
        } else {
            write!(f, "scenario: {}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ScenarioError {}

fn err(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        path: path.into(),
        message: message.into(),
    }
}

const STEP_KINDS: &str =
    "say, stream, tool, mcp, event, error, sleep_ms, ask, user_input, sample, command, exit_plan_mode, auto_mode_switch, hook, read_file, write_file, shell";

impl Scenario {
    /// Parses and validates a scenario from JSON text.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| err("", format!("invalid JSON: {e}")))?;
        Scenario::from_value(&value)
    }

    /// Validates a scenario given as a JSON value.
    pub fn from_value(value: &Value) -> Result<Scenario, ScenarioError> {
        let root = value
            .as_object()
            .ok_or_else(|| err("", "the scenario must be a JSON object"))?;
        reject_unknown(root, "", &["rules", "default"])?;
        let mut rules = Vec::new();
        if let Some(raw_rules) = root.get("rules") {
            let list = raw_rules
                .as_array()
                .ok_or_else(|| err("rules", "must be an array"))?;
            for (i, raw) in list.iter().enumerate() {
                rules.push(parse_rule(raw, &format!("rules[{i}]"))?);
            }
        }
        let default = match root.get("default") {
            Some(raw) => parse_steps(raw, "default")?,
            None => Vec::new(),
        };
        Ok(Scenario { rules, default })
    }

    /// The steps to run for `prompt`: the first rule whose pattern occurs in it, else the default.
    pub fn steps_for(&self, prompt: &str) -> &[Step] {
        let lower = prompt.to_lowercase();
        self.rules
            .iter()
            .find(|r| lower.contains(&r.pattern))
            .map(|r| r.steps.as_slice())
            .unwrap_or(&self.default)
    }
}

fn reject_unknown(
    obj: &Map<String, Value>,
    path: &str,
    known: &[&str],
) -> Result<(), ScenarioError> {
    for key in obj.keys() {
        if !known.contains(&key.as_str()) {
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            return Err(err(
                at,
                format!("unknown field (expected one of: {})", known.join(", ")),
            ));
        }
    }
    Ok(())
}

fn parse_rule(raw: &Value, path: &str) -> Result<Rule, ScenarioError> {
    let obj = raw.as_object().ok_or_else(|| {
        err(
            path,
            "a rule must be an object with \"match\" and \"steps\"",
        )
    })?;
    reject_unknown(obj, path, &["match", "steps"])?;
    let pattern = obj
        .get("match")
        .ok_or_else(|| err(format!("{path}.match"), "missing"))?
        .as_str()
        .ok_or_else(|| err(format!("{path}.match"), "must be a string"))?;
    if pattern.is_empty() {
        return Err(err(format!("{path}.match"), "must not be empty"));
    }
    let steps = obj
        .get("steps")
        .ok_or_else(|| err(format!("{path}.steps"), "missing"))?;
    Ok(Rule {
        pattern: pattern.to_lowercase(),
        steps: parse_steps(steps, &format!("{path}.steps"))?,
    })
}

fn parse_steps(raw: &Value, path: &str) -> Result<Vec<Step>, ScenarioError> {
    let list = raw
        .as_array()
        .ok_or_else(|| err(path, "must be an array of steps"))?;
    list.iter()
        .enumerate()
        .map(|(i, s)| parse_step(s, &format!("{path}[{i}]")))
        .collect()
}

fn parse_step(raw: &Value, path: &str) -> Result<Step, ScenarioError> {
    let obj = raw
        .as_object()
        .ok_or_else(|| err(path, format!("a step must be an object ({STEP_KINDS})")))?;
    let field_str = |name: &str| -> Result<String, ScenarioError> {
        obj.get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| err(format!("{path}.{name}"), "must be a string"))
    };
    if obj.contains_key("say") {
        reject_unknown(obj, path, &["say"])?;
        return Ok(Step::Say(field_str("say")?));
    }
    if obj.contains_key("stream") {
        reject_unknown(obj, path, &["stream", "text", "batch", "interval_us"])?;
        let count = obj
            .get("stream")
            .and_then(Value::as_u64)
            .ok_or_else(|| err(format!("{path}.stream"), "must be a non-negative integer"))?;
        let text = match obj.get("text") {
            None => "{i} ".to_owned(),
            Some(_) => field_str("text")?,
        };
        let batch = match obj.get("batch") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => Some(n),
                _ => return Err(err(format!("{path}.batch"), "must be a positive integer")),
            },
        };
        let interval_us = match obj.get("interval_us") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => Some(n),
                _ => {
                    return Err(err(
                        format!("{path}.interval_us"),
                        "must be a positive integer",
                    ))
                }
            },
        };
        return Ok(Step::Stream(StreamStep {
            count,
            text,
            batch,
            interval_us,
        }));
    }
    if obj.contains_key("tool") {
        reject_unknown(obj, path, &["tool", "arguments"])?;
        let name = field_str("tool")?;
        if name.is_empty() {
            return Err(err(format!("{path}.tool"), "must not be empty"));
        }
        let arguments = match obj.get("arguments") {
            None => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(err(format!("{path}.arguments"), "must be an object")),
        };
        return Ok(Step::Tool { name, arguments });
    }
    if obj.contains_key("mcp") {
        reject_unknown(obj, path, &["mcp", "arguments"])?;
        let target = field_str("mcp")?;
        let Some((server, tool)) = target
            .split_once('/')
            .filter(|(s, t)| !s.is_empty() && !t.is_empty())
        else {
            return Err(err(format!("{path}.mcp"), "must be \"SERVER/TOOL\""));
        };
        let arguments = match obj.get("arguments") {
            None => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(err(format!("{path}.arguments"), "must be an object")),
        };
        return Ok(Step::Mcp {
            server: server.to_owned(),
            tool: tool.to_owned(),
            arguments,
        });
    }
    if obj.contains_key("event") {
        reject_unknown(obj, path, &["event", "data", "ephemeral", "agent_id"])?;
        let event_type = field_str("event")?;
        if event_type.is_empty() {
            return Err(err(format!("{path}.event"), "must not be empty"));
        }
        let data = match obj.get("data") {
            None => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(err(format!("{path}.data"), "must be an object")),
        };
        let ephemeral = match obj.get("ephemeral") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(err(format!("{path}.ephemeral"), "must be true or false")),
        };
        let agent_id = match obj.get("agent_id") {
            None => None,
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(_) => {
                return Err(err(
                    format!("{path}.agent_id"),
                    "must be a non-empty string",
                ))
            }
        };
        return Ok(Step::Event {
            event_type,
            data,
            ephemeral,
            agent_id,
        });
    }
    if obj.contains_key("error") {
        reject_unknown(obj, path, &["error"])?;
        return Ok(Step::Error(field_str("error")?));
    }
    if obj.contains_key("sleep_ms") {
        reject_unknown(obj, path, &["sleep_ms"])?;
        let ms = obj
            .get("sleep_ms")
            .and_then(Value::as_u64)
            .ok_or_else(|| err(format!("{path}.sleep_ms"), "must be a non-negative integer"))?;
        return Ok(Step::SleepMs(ms));
    }
    if let Some(call) = super::builtin::parse_step(obj, path)? {
        return Ok(Step::Builtin(call));
    }
    if let Some(request) = parse_client_request(obj, path)? {
        return Ok(Step::Ask(request));
    }
    let kind = obj.keys().next().map(String::as_str).unwrap_or("");
    Err(err(
        path,
        format!("unknown step kind {kind:?} (expected one of {STEP_KINDS})"),
    ))
}

fn opt_string(
    obj: &Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<Option<String>, ScenarioError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(err(format!("{path}.{name}"), "must be a string")),
    }
}

fn string_list(
    obj: &Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<Vec<String>, ScenarioError> {
    match obj.get(name) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| err(format!("{path}.{name}[{i}]"), "must be a string"))
            })
            .collect(),
        Some(_) => Err(err(format!("{path}.{name}"), "must be an array of strings")),
    }
}

fn required_string(
    obj: &Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<String, ScenarioError> {
    opt_string(obj, path, name)?.ok_or_else(|| err(format!("{path}.{name}"), "must be a string"))
}

/// The client-request step kinds (`ask`, `user_input`, …), or `None` for other kinds.
fn parse_client_request(
    obj: &Map<String, Value>,
    path: &str,
) -> Result<Option<ClientRequest>, ScenarioError> {
    let request = if obj.contains_key("ask") {
        reject_unknown(obj, path, &["ask", "schema", "url"])?;
        let schema = match obj.get("schema") {
            None => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(_) => return Err(err(format!("{path}.schema"), "must be an object")),
        };
        ClientRequest::Elicitation {
            message: required_string(obj, path, "ask")?,
            schema,
            url: opt_string(obj, path, "url")?,
        }
    } else if obj.contains_key("user_input") {
        reject_unknown(obj, path, &["user_input", "choices", "allow_freeform"])?;
        let allow_freeform = match obj.get("allow_freeform") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(err(
                    format!("{path}.allow_freeform"),
                    "must be true or false",
                ))
            }
        };
        ClientRequest::UserInput {
            question: required_string(obj, path, "user_input")?,
            choices: string_list(obj, path, "choices")?,
            allow_freeform,
        }
    } else if obj.contains_key("sample") {
        reject_unknown(obj, path, &["sample"])?;
        match obj.get("sample") {
            Some(v @ Value::Object(_)) => ClientRequest::Sampling { request: v.clone() },
            _ => return Err(err(format!("{path}.sample"), "must be an object")),
        }
    } else if obj.contains_key("command") {
        reject_unknown(obj, path, &["command"])?;
        let line = required_string(obj, path, "command")?;
        if !line.starts_with('/') || line.len() < 2 {
            return Err(err(
                format!("{path}.command"),
                "must be a slash command like \"/name args\"",
            ));
        }
        ClientRequest::Command { command_line: line }
    } else if obj.contains_key("exit_plan_mode") {
        reject_unknown(
            obj,
            path,
            &["exit_plan_mode", "plan", "actions", "recommended"],
        )?;
        let actions = string_list(obj, path, "actions")?;
        let recommended = opt_string(obj, path, "recommended")?
            .or_else(|| actions.first().cloned())
            .unwrap_or_default();
        ClientRequest::ExitPlanMode {
            summary: required_string(obj, path, "exit_plan_mode")?,
            plan: opt_string(obj, path, "plan")?.unwrap_or_default(),
            actions,
            recommended,
        }
    } else if obj.contains_key("auto_mode_switch") {
        reject_unknown(obj, path, &["auto_mode_switch"])?;
        ClientRequest::AutoModeSwitch {
            error_code: opt_string(obj, path, "auto_mode_switch")?,
            retry_after_seconds: None,
        }
    } else if obj.contains_key("hook") {
        reject_unknown(obj, path, &["hook", "input"])?;
        let input = match obj.get("input") {
            None => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(err(format!("{path}.input"), "must be an object")),
        };
        ClientRequest::Hook {
            hook_type: required_string(obj, path, "hook")?,
            input,
        }
    } else {
        return Ok(None);
    };
    Ok(Some(request))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_scenario_matches_weather_case_insensitively() {
        let s = Scenario::default();
        assert!(matches!(
            s.steps_for("What is the WEATHER in Paris?")[0],
            Step::Tool { ref name, .. } if name == "get_weather"
        ));
        assert_eq!(
            s.steps_for("hello"),
            &[Step::Say("You said: {prompt}".into())]
        );
    }

    #[test]
    fn errors_name_the_bad_field() {
        let e =
            Scenario::from_json(r#"{"rules":[{"match":"x","steps":[{"say":"a"},{"sya":"b"}]}]}"#)
                .unwrap_err();
        assert_eq!(e.path, "rules[0].steps[1]");
        assert!(e.message.contains("unknown step kind \"sya\""), "{e}");

        let e = Scenario::from_json(r#"{"default":[{"tool":"t","arguments":[1]}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].arguments");

        let e = Scenario::from_json(r#"{"default":[{"sleep_ms":-1}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].sleep_ms");

        let e = Scenario::from_json(r#"{"rulez":[]}"#).unwrap_err();
        assert_eq!(e.path, "rulez");

        let e = Scenario::from_json("{").unwrap_err();
        assert!(e.message.starts_with("invalid JSON"), "{e}");
    }

    #[test]
    fn client_request_steps_parse_and_validate() {
        let s = Scenario::from_json(
            r#"{"default":[{"ask":"Proceed?","schema":{"type":"object"}},{"user_input":"Name?","choices":["a","b"]},
                           {"sample":{"messages":[]}},{"command":"/deploy prod"},
                           {"exit_plan_mode":"Plan","actions":["autopilot"]},{"auto_mode_switch":null},
                           {"hook":"preToolUse","input":{"toolName":"x"}}]}"#,
        )
        .unwrap();
        assert_eq!(s.default.len(), 7);
        assert!(
            matches!(&s.default[1], Step::Ask(ClientRequest::UserInput { choices, allow_freeform: true, .. }) if choices.len() == 2)
        );
        assert!(
            matches!(&s.default[4], Step::Ask(ClientRequest::ExitPlanMode { recommended, .. }) if recommended == "autopilot")
        );
        let e = Scenario::from_json(r#"{"default":[{"command":"deploy"}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].command");
        let e =
            Scenario::from_json(r#"{"default":[{"user_input":"q","choices":[1]}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].choices[0]");
        let e = Scenario::from_json(r#"{"default":[{"ask":"q","colour":"red"}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].colour");
    }

    #[test]
    fn stream_step_parses_with_defaults_and_validates() {
        let s = Scenario::from_json(
            r#"{"default":[{"stream":3},{"stream":5,"text":"{now_ns} ","batch":2},
                           {"stream":2,"interval_us":10000}]}"#,
        )
        .unwrap();
        assert_eq!(
            s.default,
            vec![
                Step::Stream(StreamStep {
                    count: 3,
                    text: "{i} ".into(),
                    batch: None,
                    interval_us: None
                }),
                Step::Stream(StreamStep {
                    count: 5,
                    text: "{now_ns} ".into(),
                    batch: Some(2),
                    interval_us: None
                }),
                Step::Stream(StreamStep {
                    count: 2,
                    text: "{i} ".into(),
                    batch: None,
                    interval_us: Some(10_000)
                }),
            ]
        );
        let e = Scenario::from_json(r#"{"default":[{"stream":-1}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].stream");
        let e = Scenario::from_json(r#"{"default":[{"stream":1,"batch":0}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].batch");
        let e = Scenario::from_json(r#"{"default":[{"stream":1,"text":1}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].text");
        let e = Scenario::from_json(r#"{"default":[{"stream":1,"interval_us":0}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].interval_us");
        let e = Scenario::from_json(r#"{"default":[{"stream":1,"every":1}]}"#).unwrap_err();
        assert_eq!(e.path, "default[0].every");
    }

    #[test]
    fn all_step_kinds_parse() {
        let s = Scenario::from_json(
            r#"{"default":[{"say":"hi"},{"tool":"t"},{"event":"x.y","data":{"a":1},"ephemeral":true},
                           {"error":"boom"},{"sleep_ms":5}]}"#,
        )
        .unwrap();
        assert_eq!(s.default.len(), 5);
        assert_eq!(s.default[4], Step::SleepMs(5));
        assert!(matches!(
            &s.default[2],
            Step::Event {
                ephemeral: true,
                ..
            }
        ));
    }
}
