//! Built-in tools of the agent: read a file, write a file, run a shell command.
//!
//! Client tools (`tool` steps) run on the client that declared them. Built-in tools belong to
//! the agent itself (the Copilot CLI's `view`, `create` and `bash`): the host announces the
//! call (`tool.execution_start`), asks permission with the matching prompt kind (`read`,
//! `write`, `shell`, or the `path` / `url` / `hook` prompt a step asks for) and then runs it.
//! An attached ACP client that advertised `fs.readTextFile`, `fs.writeTextFile` or
//! `terminal` performs the operation (`fs/read_text_file`, `fs/write_text_file`,
//! `terminal/*`); otherwise (Copilot SDK clients, or an ACP client without the capability)
//! the call completes with the step's scripted result. Nothing here touches a file system.
//!
//! Scenario steps (validated when the scenario loads):
//!
//! | step | tool | permission kind |
//! |---|---|---|
//! | `{"read_file": PATH, "line": N, "limit": N, "result": TEXT, "permission": P}` | `view` | `read` |
//! | `{"write_file": PATH, "content": TEXT, "result": TEXT, "permission": P}` | `create` | `write` |
//! | `{"shell": COMMAND, "result": TEXT, "permission": P}` | `bash` | `shell` |
//!
//! `P` is `"default"` (the kind in the table), `"path"` (a path prompt: the file lies outside
//! the workspace; file steps only), `"url"` (a URL prompt for the first `http(s)://` URL in
//! PATH or COMMAND), `"hook"` (a prompt raised by a `preToolUse` hook) or `"none"` (no
//! prompt). A relative PATH is resolved against the session's working directory.

use serde_json::{json, Map, Value};

use super::ScenarioError;

/// What a built-in tool call does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuiltinOp {
    /// Read a text file (optionally from a 1-based `line`, at most `limit` lines).
    ReadFile {
        /// The file (absolute once the host resolved it against the session's cwd).
        path: String,
        /// First line to read, 1-based.
        line: Option<u32>,
        /// Maximum number of lines.
        limit: Option<u32>,
    },
    /// Create or overwrite a text file.
    WriteFile {
        /// The file (absolute once the host resolved it against the session's cwd).
        path: String,
        /// The new content.
        content: String,
    },
    /// Run a shell command line.
    Shell {
        /// The command line, run with `sh -c`.
        command: String,
    },
    /// Replace the one occurrence of `old_str` in a text file with `new_str` (`edit`).
    Edit {
        /// The file (absolute once the host resolved it against the session's cwd).
        path: String,
        /// The exact text to replace (must occur exactly once).
        old_str: String,
        /// Its replacement.
        new_str: String,
    },
    /// Search file contents for a regular expression below a directory (`grep`).
    Grep(GrepQuery),
    /// List the files below a directory whose relative path matches a glob (`glob`).
    Glob {
        /// The glob, e.g. `**/*.rs`.
        pattern: String,
        /// The directory searched (absolute once resolved; the session's cwd by default).
        path: String,
    },
}

/// A `grep` tool call's query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GrepQuery {
    /// The regular expression.
    pub pattern: String,
    /// The file or directory searched (absolute once resolved; the session's cwd by default).
    pub path: String,
    /// Only files whose relative path matches this glob.
    pub glob: Option<String>,
    /// `content` (matching lines), `files_with_matches` (the default) or `count`.
    pub output_mode: String,
    /// Case-insensitive (`-i`).
    pub case_insensitive: bool,
    /// Prefix matching lines with their line number (`-n`).
    pub line_numbers: bool,
    /// Lines of context after (`-A`) and before (`-B`) each match.
    pub after: usize,
    /// See `after`.
    pub before: usize,
    /// At most this many output lines (`head_limit`).
    pub head_limit: Option<usize>,
}

/// Which permission prompt precedes a built-in tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptKind {
    /// The operation's own kind: `read`, `write` or `shell`.
    Default,
    /// A `path` prompt: the file is outside the allowed directories.
    Path,
    /// A `url` prompt for the URL in the step's target.
    Url,
    /// A `hook` prompt: a `preToolUse` hook asks for confirmation.
    Hook,
    /// No prompt: the call runs at once.
    None,
}

/// A built-in tool call as a scenario step describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltinCall {
    /// What to do.
    pub op: BuiltinOp,
    /// The permission prompt asked first.
    pub prompt: PromptKind,
    /// The tool's result when no client performs the operation (also the result of a
    /// successful `write_file` performed by a client). Default: empty.
    pub result: String,
    /// The arguments a model sent, when the call is a model's (see
    /// [`crate::agent::model_tools`]): the runtime then performs the operation itself when
    /// no client does (instead of completing with `result`), and these are the arguments
    /// clients see. `None` for scripted calls.
    pub model_arguments: Option<Value>,
}

impl BuiltinCall {
    /// The tool's name as the Copilot runtime reports it: `view`, `create` or `bash`.
    pub fn tool_name(&self) -> &'static str {
        match self.op {
            BuiltinOp::ReadFile { .. } => "view",
            BuiltinOp::WriteFile { .. } => "create",
            BuiltinOp::Shell { .. } => "bash",
            BuiltinOp::Edit { .. } => "edit",
            BuiltinOp::Grep(_) => "grep",
            BuiltinOp::Glob { .. } => "glob",
        }
    }

    /// The tool's arguments (`tool.execution_start.arguments`): the model's, else derived
    /// from the operation.
    pub fn arguments(&self) -> Value {
        if let Some(args) = &self.model_arguments {
            return args.clone();
        }
        match &self.op {
            BuiltinOp::ReadFile { path, line, limit } => {
                let mut args = json!({"path": path});
                if let Some(line) = line {
                    args["line"] = json!(line);
                }
                if let Some(limit) = limit {
                    args["limit"] = json!(limit);
                }
                args
            }
            BuiltinOp::WriteFile { path, content } => json!({"path": path, "file_text": content}),
            BuiltinOp::Shell { command } => json!({"command": command}),
            BuiltinOp::Edit {
                path,
                old_str,
                new_str,
            } => json!({"path": path, "old_str": old_str, "new_str": new_str}),
            BuiltinOp::Grep(q) => json!({"pattern": q.pattern, "paths": q.path}),
            BuiltinOp::Glob { pattern, path } => json!({"pattern": pattern, "paths": path}),
        }
    }

    /// The file path (the directory searched, for `grep` / `glob`) or the command line.
    pub fn target(&self) -> &str {
        match &self.op {
            BuiltinOp::ReadFile { path, .. }
            | BuiltinOp::WriteFile { path, .. }
            | BuiltinOp::Edit { path, .. }
            | BuiltinOp::Grep(GrepQuery { path, .. })
            | BuiltinOp::Glob { path, .. } => path,
            BuiltinOp::Shell { command } => command,
        }
    }

    /// Whether the operation only reads (`view`, `grep`, `glob`).
    pub fn reads_only(&self) -> bool {
        matches!(
            self.op,
            BuiltinOp::ReadFile { .. } | BuiltinOp::Grep(_) | BuiltinOp::Glob { .. }
        )
    }

    /// The first `http://` or `https://` URL in the target, if any.
    pub fn url(&self) -> Option<&str> {
        first_url(self.target())
    }

    /// Replaces `{prompt}` with the user's prompt and `{path}` with its last word (see
    /// [`last_word`]) in every text of the call.
    pub fn with_placeholders(&self, prompt: &str) -> BuiltinCall {
        let word = last_word(prompt);
        let fill = |s: &str| s.replace("{prompt}", prompt).replace("{path}", word);
        let op = match &self.op {
            BuiltinOp::ReadFile { path, line, limit } => BuiltinOp::ReadFile {
                path: fill(path),
                line: *line,
                limit: *limit,
            },
            BuiltinOp::WriteFile { path, content } => BuiltinOp::WriteFile {
                path: fill(path),
                content: fill(content),
            },
            BuiltinOp::Shell { command } => BuiltinOp::Shell {
                command: fill(command),
            },
            other => other.clone(),
        };
        BuiltinCall {
            op,
            prompt: self.prompt,
            result: fill(&self.result),
            model_arguments: self.model_arguments.clone(),
        }
    }

    /// Resolves a relative file path against `cwd` (plain string joining; nothing is read).
    pub fn resolve_path(&mut self, cwd: Option<&str>) {
        let (BuiltinOp::ReadFile { path, .. }
        | BuiltinOp::WriteFile { path, .. }
        | BuiltinOp::Edit { path, .. }
        | BuiltinOp::Grep(GrepQuery { path, .. })
        | BuiltinOp::Glob { path, .. }) = &mut self.op
        else {
            return;
        };
        if let Some(cwd) = cwd {
            if !is_absolute(path) && !cwd.is_empty() {
                let rel = path.strip_prefix("./").unwrap_or(path);
                *path = if rel.is_empty() || rel == "." {
                    cwd.to_owned()
                } else if cwd.ends_with('/') || cwd.ends_with('\\') {
                    format!("{cwd}{rel}")
                } else {
                    format!("{cwd}/{rel}")
                };
            }
        }
    }

    /// The `permissionRequest` of the prompt that precedes the call (Copilot shapes), or
    /// `None` when the step asks for no prompt.
    pub fn permission_request(&self, tool_call_id: &str) -> Option<Value> {
        let target = self.target();
        let request = match self.prompt {
            PromptKind::None => return None,
            PromptKind::Hook => json!({
                "kind": "hook",
                "toolName": self.tool_name(),
                "toolArgs": self.arguments(),
                "hookMessage": "A preToolUse hook asks for confirmation",
            }),
            PromptKind::Url => json!({
                "kind": "url",
                "intention": "Fetch a URL",
                "url": self.url().unwrap_or(target),
            }),
            PromptKind::Path => json!({
                "kind": "path",
                "intention": "Access a path outside the allowed directories",
                "path": target,
                "accessKind": match self.op {
                    BuiltinOp::Shell { .. } => "shell",
                    _ if self.reads_only() => "read",
                    _ => "write",
                },
            }),
            PromptKind::Default => match &self.op {
                BuiltinOp::ReadFile { path, .. } => json!({
                    "kind": "read",
                    "intention": "Read file",
                    "path": path,
                }),
                BuiltinOp::Grep(GrepQuery { path, .. }) | BuiltinOp::Glob { path, .. } => json!({
                    "kind": "read",
                    "intention": "Search files",
                    "path": path,
                }),
                BuiltinOp::Edit {
                    path,
                    old_str,
                    new_str,
                } => json!({
                    "kind": "write",
                    "intention": "Edit file",
                    "fileName": path,
                    "diff": old_str.lines().map(|l| format!("-{l}\n"))
                        .chain(new_str.lines().map(|l| format!("+{l}\n")))
                        .collect::<String>(),
                    "canOfferSessionApproval": true,
                }),
                BuiltinOp::WriteFile { path, content } => json!({
                    "kind": "write",
                    "intention": "Create or overwrite file",
                    "fileName": path,
                    "diff": content.lines().map(|l| format!("+{l}\n")).collect::<String>(),
                    "canOfferSessionApproval": true,
                }),
                BuiltinOp::Shell { command } => json!({
                    "kind": "shell",
                    "intention": "Run a shell command",
                    "fullCommandText": command,
                    "commands": command_identifiers(command)
                        .into_iter()
                        .map(|id| json!({"identifier": id, "readOnly": false}))
                        .collect::<Vec<_>>(),
                    "possiblePaths": [],
                    "possibleUrls": first_url(command).into_iter().collect::<Vec<_>>(),
                    "hasWriteFileRedirection": command.contains('>'),
                    "canOfferSessionApproval": true,
                }),
            },
        };
        let mut request = request;
        request["toolCallId"] = json!(tool_call_id);
        Some(request)
    }
}

/// Whether `path` is absolute (`/x`, `C:\x`, `C:/x` or `\\server\x`).
pub fn is_absolute(path: &str) -> bool {
    let b = path.as_bytes();
    path.starts_with('/')
        || path.starts_with("\\\\")
        || (b.len() >= 3
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && matches!(b[2], b'\\' | b'/'))
}

/// The last whitespace-separated word of `text`, without surrounding quotes, brackets or
/// trailing punctuation (`"Please read file notes/todo.txt."` → `notes/todo.txt`).
pub fn last_word(text: &str) -> &str {
    let word = text.split_whitespace().next_back().unwrap_or("");
    word.trim_matches(|c| matches!(c, '"' | '\'' | '`' | '(' | ')' | '[' | ']' | '<' | '>'))
        .trim_end_matches(['.', ',', ';', ':', '!', '?'])
        .trim_matches(|c| matches!(c, '"' | '\'' | '`'))
}

/// The first `http://` or `https://` URL in `text` (up to the next whitespace or quote).
pub fn first_url(text: &str) -> Option<&str> {
    let start = text
        .find("https://")
        .into_iter()
        .chain(text.find("http://"))
        .min()?;
    let rest = &text[start..];
    let end = rest
        .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The host of a URL, lower-cased, without user info or port (`https://u@Ex.com:8/x` →
/// `ex.com`).
pub fn url_domain(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host.starts_with('[') {
        host.split_inclusive(']').next().unwrap_or(host)
    } else {
        host.split(':').next().unwrap_or(host)
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The command names of a shell command line: the first word of each `|`, `;` or `&`
/// separated part, without duplicates (`ls -l | grep x && ls` → `["ls", "grep"]`).
pub fn command_identifiers(command: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for part in command.split(['|', ';', '&', '\n']) {
        if let Some(word) = part.split_whitespace().next() {
            if !ids.iter().any(|i| i == word) {
                ids.push(word.to_owned());
            }
        }
    }
    ids
}

/// The directory holding `path` (`/a/b/c.txt` → `/a/b`; `/a` → `/`).
pub fn parent_dir(path: &str) -> &str {
    let trimmed = path.trim_end_matches(['/', '\\']);
    match trimmed.rfind(['/', '\\']) {
        Some(0) => &trimmed[..1],
        Some(i) => &trimmed[..i],
        None => trimmed,
    }
}

/// Whether `path` is `dir` or lies below it.
pub fn is_within(path: &str, dir: &str) -> bool {
    let dir = if dir.len() > 1 {
        dir.trim_end_matches(['/', '\\'])
    } else {
        dir
    };
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| dir.ends_with(['/', '\\']) || rest.starts_with(['/', '\\']))
}

const STEP_FIELDS: [&str; 3] = ["read_file", "write_file", "shell"];

fn err(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        path: path.into(),
        message: message.into(),
    }
}

/// Parses a `read_file`, `write_file` or `shell` step (`None` for other step kinds).
pub(crate) fn parse_step(
    obj: &Map<String, Value>,
    path: &str,
) -> Result<Option<BuiltinCall>, ScenarioError> {
    let Some(kind) = STEP_FIELDS.into_iter().find(|k| obj.contains_key(*k)) else {
        return Ok(None);
    };
    let known: &[&str] = match kind {
        "read_file" => &["read_file", "line", "limit", "result", "permission"],
        "write_file" => &["write_file", "content", "result", "permission"],
        _ => &["shell", "result", "permission"],
    };
    for key in obj.keys() {
        if !known.contains(&key.as_str()) {
            return Err(err(
                format!("{path}.{key}"),
                format!("unknown field (expected one of: {})", known.join(", ")),
            ));
        }
    }
    let string = |name: &str, required: bool| -> Result<Option<String>, ScenarioError> {
        match obj.get(name) {
            None if !required => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            _ => Err(err(format!("{path}.{name}"), "must be a string")),
        }
    };
    let number = |name: &str| -> Result<Option<u32>, ScenarioError> {
        match obj.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
                .map(Some)
                .ok_or_else(|| err(format!("{path}.{name}"), "must be a positive integer")),
        }
    };
    let target = string(kind, true)?.unwrap_or_default();
    if target.trim().is_empty() {
        return Err(err(format!("{path}.{kind}"), "must not be empty"));
    }
    let op = match kind {
        "read_file" => BuiltinOp::ReadFile {
            path: target,
            line: number("line")?,
            limit: number("limit")?,
        },
        "write_file" => BuiltinOp::WriteFile {
            path: target,
            content: string("content", true)?.unwrap_or_default(),
        },
        _ => BuiltinOp::Shell { command: target },
    };
    let prompt = match string("permission", false)?.as_deref() {
        None | Some("default") => PromptKind::Default,
        Some("path") if kind != "shell" => PromptKind::Path,
        Some("path") => {
            return Err(err(
                format!("{path}.permission"),
                "\"path\" prompts are for read_file and write_file steps",
            ))
        }
        Some("url") => PromptKind::Url,
        Some("hook") => PromptKind::Hook,
        Some("none") => PromptKind::None,
        Some(other) => {
            return Err(err(
                format!("{path}.permission"),
                format!(
                    "unknown prompt kind {other:?} (expected default, path, url, hook or none)"
                ),
            ))
        }
    };
    let call = BuiltinCall {
        op,
        prompt,
        result: string("result", false)?.unwrap_or_default(),
        model_arguments: None,
    };
    if prompt == PromptKind::Url && call.url().is_none() && !call.target().contains('{') {
        return Err(err(
            format!("{path}.permission"),
            format!("a \"url\" prompt needs an http(s):// URL in the {kind} field"),
        ));
    }
    Ok(Some(call))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<Option<BuiltinCall>, ScenarioError> {
        parse_step(v.as_object().unwrap(), "default[0]")
    }

    #[test]
    fn steps_parse_and_validate() {
        let call = parse(json!({"read_file": "a.txt", "line": 2, "limit": 3}))
            .unwrap()
            .unwrap();
        assert_eq!(call.tool_name(), "view");
        assert_eq!(
            call.arguments(),
            json!({"path": "a.txt", "line": 2, "limit": 3})
        );
        assert_eq!(call.prompt, PromptKind::Default);
        let call = parse(json!({"shell": "curl https://Example.com:8/x", "permission": "url"}))
            .unwrap()
            .unwrap();
        assert_eq!(call.url(), Some("https://Example.com:8/x"));
        assert!(parse(json!({"say": "x"})).unwrap().is_none());

        let e = parse(json!({"read_file": "a", "colour": 1})).unwrap_err();
        assert_eq!(e.path, "default[0].colour");
        let e = parse(json!({"write_file": "a"})).unwrap_err();
        assert_eq!(e.path, "default[0].content");
        let e = parse(json!({"shell": "ls", "permission": "path"})).unwrap_err();
        assert_eq!(e.path, "default[0].permission");
        let e = parse(json!({"shell": "ls", "permission": "url"})).unwrap_err();
        assert!(e.message.contains("URL"), "{e}");
        let e = parse(json!({"read_file": "a", "line": 0})).unwrap_err();
        assert_eq!(e.path, "default[0].line");
        let e = parse(json!({"read_file": " "})).unwrap_err();
        assert_eq!(e.path, "default[0].read_file");
    }

    #[test]
    fn placeholders_and_paths() {
        let call = parse(json!({"read_file": "{path}", "result": "read {path}"}))
            .unwrap()
            .unwrap();
        let mut filled = call.with_placeholders("Please read file `notes/todo.txt`.");
        assert_eq!(filled.target(), "notes/todo.txt");
        assert_eq!(filled.result, "read notes/todo.txt");
        filled.resolve_path(Some("/work/project"));
        assert_eq!(filled.target(), "/work/project/notes/todo.txt");
        filled.resolve_path(Some("/elsewhere"));
        assert_eq!(
            filled.target(),
            "/work/project/notes/todo.txt",
            "absolute stays"
        );
        assert!(is_absolute("C:\\x") && is_absolute("/x") && !is_absolute("x/y"));
        assert_eq!(last_word("read file \"a b.txt\"?"), "b.txt");
        assert_eq!(last_word(""), "");
    }

    #[test]
    fn helpers() {
        assert_eq!(url_domain("https://u@Ex.COM:8/x?y"), Some("ex.com".into()));
        assert_eq!(url_domain("http://[::1]:80/"), Some("[::1]".into()));
        assert_eq!(first_url("get 'http://a.b/c' now"), Some("http://a.b/c"));
        assert_eq!(first_url("no url"), None);
        assert_eq!(
            command_identifiers("ls -l | grep x && ls; rm -f y"),
            vec!["ls", "grep", "rm"]
        );
        assert_eq!(parent_dir("/a/b/c.txt"), "/a/b");
        assert_eq!(parent_dir("/a"), "/");
        assert!(is_within("/a/b/c", "/a/b"));
        assert!(is_within("/a/b", "/a/b/"));
        assert!(!is_within("/a/bc", "/a/b"));
        assert!(is_within("/x", "/"));
    }

    #[test]
    fn permission_requests_have_the_copilot_shapes() {
        let call = parse(json!({"shell": "ls -l | wc > out"}))
            .unwrap()
            .unwrap();
        let r = call.permission_request("call_1").unwrap();
        assert_eq!(r["kind"], "shell");
        assert_eq!(r["toolCallId"], "call_1");
        assert_eq!(r["commands"][1]["identifier"], "wc");
        assert_eq!(r["hasWriteFileRedirection"], true);
        let call = parse(json!({"write_file": "/a/b", "content": "x\ny", "permission": "path"}))
            .unwrap()
            .unwrap();
        let r = call.permission_request("c").unwrap();
        assert_eq!(
            (r["kind"].as_str(), r["accessKind"].as_str()),
            (Some("path"), Some("write"))
        );
        let call = parse(json!({"read_file": "/a", "permission": "none"}))
            .unwrap()
            .unwrap();
        assert!(call.permission_request("c").is_none());
        let call = parse(json!({"read_file": "/a", "permission": "hook"}))
            .unwrap()
            .unwrap();
        assert_eq!(call.permission_request("c").unwrap()["toolName"], "view");
    }
}
