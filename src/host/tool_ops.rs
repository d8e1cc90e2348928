//! Built-in tool calls the runtime performs: a model's approved `view`, `create`, `edit`,
//! `grep`, `glob` or `bash` call that no attached client performs (see
//! [`crate::agent::model_tools`]).
//!
//! The host never touches a file system. File work is a short sequence of
//! [`EffectOp::FileOp`] effects ([`FileRequest`]: read a file or list a directory, write a
//! file, walk a tree, read many files), each answered with [`EffectEvent::FileDone`]
//! ([`Host::handle_effect`]); what the tool makes of the bytes (numbered lines, the
//! exact-string edit, glob and regex matching) is [`crate::agent::tool_text`]. `bash` is an
//! [`EffectOp::ProcessSpawn`] of `sh -c COMMAND` in the session's working directory whose
//! output is collected ([`EffectEvent::Stdout`], [`EffectEvent::Stderr`]) until it exits
//! ([`EffectEvent::Exit`]). Each call ends with `tool.execution_complete`; an abort drops
//! what is in flight.
//!
//! [`EffectEvent::FileDone`]: super::EffectEvent::FileDone
//! [`EffectEvent::Stdout`]: super::EffectEvent::Stdout
//! [`EffectEvent::Stderr`]: super::EffectEvent::Stderr
//! [`EffectEvent::Exit`]: super::EffectEvent::Exit

use std::collections::BTreeMap;

use crate::agent::tool_text::{self, normalize_path};
use crate::agent::{BuiltinCall, BuiltinOp, GrepQuery, ToolOutcome};
use crate::Timestamp;

use super::{shell_argv, EffectId, EffectOp, Host, ProcessSpec};

/// A file operation the runtime performs for a built-in tool ([`EffectOp::FileOp`]). Paths
/// are absolute when the session has a working directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileRequest {
    /// Read a UTF-8 text file ([`FileReply::Text`]), or list a directory's entries
    /// ([`FileReply::Entries`]: names, directories with a trailing `/`).
    Read {
        /// The file or directory.
        path: String,
    },
    /// Write a text file, creating missing parent directories ([`FileReply::Written`]).
    Write {
        /// The file.
        path: String,
        /// Its new content.
        content: String,
        /// Fail if the file already exists.
        create_new: bool,
    },
    /// Run SQL statements on the SQLite database file `database` (created if missing), each
    /// executed as its `query_type` says, several in one transaction: all or none
    /// ([`FileReply::Rows`], one result per statement).
    Sqlite {
        /// The database file.
        database: String,
        /// The statements, in order.
        statements: Vec<crate::agent::sql_tool::SqlStatement>,
    },
    /// Append text to a file, creating it (and missing parent directories) if needed
    /// ([`FileReply::Written`]). The text is written with one call, so appends of whole
    /// lines from different effects never interleave within a line.
    Append {
        /// The file.
        path: String,
        /// The text to add at its end.
        content: String,
    },
    /// The files below `root` ([`FileReply::Entries`]: `/`-separated paths relative to
    /// `root`, `.git` directories skipped, at most `limit`). A `root` that is a file gives
    /// one empty path.
    Walk {
        /// The directory (or file).
        root: String,
        /// Most paths returned.
        limit: usize,
    },
    /// Read the UTF-8 files `paths` (relative to `root`; an empty path is `root` itself)
    /// ([`FileReply::Texts`]: files that cannot be read, are not UTF-8 or are larger than
    /// `max_file_bytes` are left out).
    ReadMany {
        /// The directory the paths are relative to.
        root: String,
        /// The files.
        paths: Vec<String>,
        /// Larger files are skipped.
        max_file_bytes: u64,
    },
    /// Copy the directory tree `from` to `to`, replacing whatever was at `to` (missing
    /// parents are created; `.git` directories and symbolic links are left out)
    /// ([`FileReply::Written`]). Used to install plugins into the data directory.
    CopyDir {
        /// The directory copied.
        from: String,
        /// Where the copy goes.
        to: String,
    },
    /// Remove the file or directory tree `path` ([`FileReply::Written`]); a path that does
    /// not exist is not an error. Used to uninstall plugins from the data directory.
    Remove {
        /// The file or directory.
        path: String,
    },
}

/// The runtime's answer to a [`FileRequest`]
/// ([`EffectEvent::FileDone`](super::EffectEvent::FileDone)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileReply {
    /// A file's text.
    Text(String),
    /// Directory entries or walked paths.
    Entries(Vec<String>),
    /// Files read: (relative path, text).
    Texts(Vec<(String, String)>),
    /// The file was written.
    Written,
    /// An image file's bytes (a `Read` of a file that is not UTF-8 text and whose name says
    /// it is an image: `.png`, `.jpg` / `.jpeg`, `.gif`, `.webp`).
    Bytes(Vec<u8>),
    /// What each SQL statement gave ([`FileRequest::Sqlite`]), in order.
    Rows(Vec<crate::agent::sql_tool::SqlRows>),
}

/// The media type of an image file, by its extension (`None`: not an image `view` shows).
pub fn image_media_type(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

/// Most paths a walk returns.
const WALK_LIMIT: usize = 20_000;
/// Files larger than this are not searched.
const GREP_MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Most bytes of a command's output kept for the model.
const BASH_OUTPUT_LIMIT: usize = 64 * 1024;
/// A `bash` call is stopped after this long unless it asks for less (`initial_wait`).
pub(crate) const BASH_TIMEOUT_MS: u64 = 120_000;

/// What a file operation in flight is for.
enum Stage {
    View {
        path: String,
        line: Option<u32>,
        limit: Option<u32>,
    },
    Create {
        result: String,
        path: String,
        content: String,
    },
    EditRead {
        path: String,
        old_str: String,
        new_str: String,
    },
    EditWrite {
        summary: String,
        path: String,
        original: String,
        content: String,
    },
    Glob {
        pattern: String,
    },
    GrepWalk {
        query: GrepQuery,
    },
    GrepRead {
        query: GrepQuery,
        root: String,
    },
    /// A read for attachment `index` of the prompt its session prepares
    /// (`prompt_attachments.rs`), not a tool call.
    Attachment {
        index: usize,
    },
    /// A read for the session's instruction files (`instructions.rs`), not a tool call.
    Instructions(super::sessions::instructions::InstructionStep),
    /// A read for skills (`skills.rs`), not a tool call.
    Skills(
        super::sessions::skills::SkillTarget,
        super::sessions::skills::SkillStep,
    ),
    /// An ACP agent's `fs/*` request (`acp_agents.rs`), not a tool call.
    AcpAgent(super::sessions::acp_agents::AcpFileWait),
    /// A directory listing of extension discovery (`extensions.rs`), not a tool call.
    Extensions(Box<super::extensions::ExtensionScan>),
    /// A plugins request's file work in the data directory (`plugins.rs`), not a tool call.
    Plugins(super::plugins::PluginWait),
    /// A statement of the `sql` tool (`sessions/sql.rs`).
    Sql(Box<super::sessions::sql::SqlRun>),
    /// A client's read of the session's todos (`sessions/sql.rs`), not a tool call.
    TodosRead(Box<super::sessions::sql::TodosRead>),
    /// A span appended to the telemetry file (`sessions/telemetry.rs`), not a tool call.
    Telemetry,
    /// A read of a plugin directory's MCP servers (`mcp/discovered.rs`), not a tool call.
    PluginMcp(super::mcp::discovered::PluginMcpRead),
    /// A read or write of the user settings (`local/`), not a tool call.
    Local(super::local::LocalStep),
    /// A walk or read of a configuration scan (`local/scan.rs`), not a tool call.
    Scan(super::local::scan::ScanStep),
    /// A rewind's file work (`sessions/rewind.rs`), not a tool call.
    Rewind(super::sessions::rewind::RewindStep),
    /// A client tool's large result being saved (`requests/large_output.rs`): what the model
    /// gets once it is, and the result itself if it cannot be.
    LargeOutput {
        message: String,
        original: String,
    },
}

struct ToolOp {
    session: String,
    tool_call_id: String,
    stage: Stage,
}

struct ToolShell {
    session: String,
    tool_call_id: String,
    output: Vec<u8>,
    truncated: bool,
    /// How long the command may run.
    timeout_ms: u64,
    /// The host's deadline timer (its key), when it kills the command.
    timer: (Timestamp, u64),
    /// The deadline passed and the command was told to stop.
    timed_out: bool,
}

/// The runtime-performed tool calls in flight.
#[derive(Default)]
pub(crate) struct RuntimeTools {
    /// File operations by effect id number (a file provider answers with the number too).
    ops: BTreeMap<u64, ToolOp>,
    shells: BTreeMap<EffectId, ToolShell>,
}

impl Host {
    /// Checks a model's built-in call before it is announced: its path lexically normalised
    /// and confined to the session's working directory (a path outside gets the `path`
    /// prompt). Returns why it cannot run, if it cannot.
    pub(crate) fn prepare_model_builtin(
        &self,
        session: &str,
        call: &mut BuiltinCall,
    ) -> Option<String> {
        if let Some(problem) = crate::agent::model_tools::invalid_call(call) {
            return Some(problem);
        }
        let cwd = self
            .sessions
            .get(session)
            .and_then(|l| l.session.cwd.clone());
        if matches!(call.op, BuiltinOp::Shell { .. }) {
            return None;
        }
        normalize_target(call);
        if let Some(cwd) = cwd.filter(|c| !c.is_empty()) {
            let cwd = normalize_path(&cwd);
            if !crate::agent::builtin::is_within(call.target(), &cwd) {
                call.prompt = crate::agent::PromptKind::Path;
            }
        }
        None
    }

    /// Performs an approved model built-in call no client performs.
    pub(crate) fn perform_builtin(&mut self, session: &str, tool_call_id: &str, call: BuiltinCall) {
        let (request, stage) = match call.op {
            BuiltinOp::ReadFile { path, line, limit } => (
                FileRequest::Read { path: path.clone() },
                Stage::View { path, line, limit },
            ),
            BuiltinOp::WriteFile { path, content } => (
                FileRequest::Write {
                    path: path.clone(),
                    content: content.clone(),
                    create_new: true,
                },
                Stage::Create {
                    result: call.result,
                    path,
                    content,
                },
            ),
            BuiltinOp::Edit {
                path,
                old_str,
                new_str,
            } => (
                FileRequest::Read { path: path.clone() },
                Stage::EditRead {
                    path,
                    old_str,
                    new_str,
                },
            ),
            BuiltinOp::Glob { pattern, path } => (
                FileRequest::Walk {
                    root: path,
                    limit: WALK_LIMIT,
                },
                Stage::Glob { pattern },
            ),
            BuiltinOp::Grep(query) => (
                FileRequest::Walk {
                    root: query.path.clone(),
                    limit: WALK_LIMIT,
                },
                Stage::GrepWalk { query },
            ),
            BuiltinOp::Shell { command } => {
                let wait = call
                    .model_arguments
                    .as_ref()
                    .and_then(|a| a.get("initial_wait"))
                    .and_then(serde_json::Value::as_f64)
                    .filter(|s| *s > 0.0)
                    .map_or(BASH_TIMEOUT_MS, |s| (s.min(600.0) * 1000.0) as u64);
                return self.start_tool_shell(session, tool_call_id, command, wait);
            }
        };
        self.file_op(session, tool_call_id, request, stage);
    }

    /// Reads a file or lists a directory for attachment `index` of the prompt `session`
    /// prepares; the answer goes to [`Host::attachment_read_done`].
    pub(super) fn attachment_read(&mut self, session: &str, index: usize, request: FileRequest) {
        self.file_op(session, "", request, Stage::Attachment { index });
    }

    /// A read for `session`'s instruction files; the answer goes to
    /// [`Host::instruction_read_done`].
    pub(super) fn instruction_read(
        &mut self,
        session: &str,
        request: FileRequest,
        step: super::sessions::instructions::InstructionStep,
    ) {
        self.file_op(session, "", request, Stage::Instructions(step));
    }

    /// A read for skills; the answer goes to [`Host::skill_read_done`].
    pub(super) fn skill_read(
        &mut self,
        target: super::sessions::skills::SkillTarget,
        request: FileRequest,
        step: super::sessions::skills::SkillStep,
    ) {
        let session = match &target {
            super::sessions::skills::SkillTarget::Session(s) => s.clone(),
            super::sessions::skills::SkillTarget::Discovery(_) => String::new(),
        };
        self.file_op(&session, "", request, Stage::Skills(target, step));
    }

    /// A read or write for an ACP agent's `fs/*` request; the answer goes to
    /// [`Host::acp_file_done`].
    pub(super) fn acp_file_read_or_write(
        &mut self,
        session: &str,
        request: FileRequest,
        wait: super::sessions::acp_agents::AcpFileWait,
    ) {
        self.file_op(session, "", request, Stage::AcpAgent(wait));
    }

    /// A directory listing for extension discovery, always on the runtime's own file system
    /// (extensions run there); the answer goes to [`Host::extension_scan_done`].
    pub(super) fn extension_read(
        &mut self,
        scan: super::extensions::ExtensionScan,
        request: FileRequest,
    ) {
        self.runtime_file_op(request, Stage::Extensions(Box::new(scan)));
    }

    /// File work of a plugins request (always the runtime's, never a session's file
    /// provider); the answer goes to [`Host::plugin_file_done`].
    pub(super) fn plugin_file_op(
        &mut self,
        request: FileRequest,
        wait: super::plugins::PluginWait,
    ) {
        self.runtime_file_op(request, Stage::Plugins(wait));
    }

    /// A read or write of the user settings (always the runtime's own files); the answer
    /// goes to [`Host::local_file_done`].
    pub(super) fn local_file_op(&mut self, request: FileRequest, step: super::local::LocalStep) {
        self.runtime_file_op(request, Stage::Local(step));
    }

    /// A walk or read of a configuration scan (always the runtime's own files); the answer
    /// goes to [`Host::scan_file_done`].
    pub(super) fn scan_file_op(
        &mut self,
        request: FileRequest,
        step: super::local::scan::ScanStep,
    ) {
        self.runtime_file_op(request, Stage::Scan(step));
    }

    /// Runs a statement of the `sql` tool call `tool_call_id` on `session`'s database.
    pub(super) fn sql_file_op(
        &mut self,
        session: &str,
        tool_call_id: &str,
        request: FileRequest,
        run: Box<super::sessions::sql::SqlRun>,
    ) {
        self.file_op(session, tool_call_id, request, Stage::Sql(run));
    }

    /// Reads `session`'s todos for a client.
    pub(super) fn todos_file_op(
        &mut self,
        session: &str,
        request: FileRequest,
        read: Box<super::sessions::sql::TodosRead>,
    ) {
        self.file_op(session, "", request, Stage::TodosRead(read));
    }

    /// Reads a plugin directory's MCP servers.
    pub(super) fn plugin_mcp_file_op(
        &mut self,
        request: FileRequest,
        read: super::mcp::discovered::PluginMcpRead,
    ) {
        self.runtime_file_op(request, Stage::PluginMcp(read));
    }

    /// Appends finished spans to the telemetry file.
    pub(super) fn telemetry_file_op(&mut self, request: FileRequest) {
        self.runtime_file_op(request, Stage::Telemetry);
    }

    /// A file operation of no session, on the runtime's own file system, answered to
    /// `stage`.
    fn runtime_file_op(&mut self, request: FileRequest, stage: Stage) {
        let id = self.next_effect_id();
        self.runtime_tools.ops.insert(
            id.get(),
            ToolOp {
                session: String::new(),
                tool_call_id: String::new(),
                stage,
            },
        );
        self.push_effect(id, EffectOp::FileOp(request));
    }

    /// Saves a client tool's large result at `path`; the call completes with `message` once
    /// it is saved, else with the result itself.
    pub(super) fn save_large_output(
        &mut self,
        session: &str,
        tool_call_id: &str,
        path: String,
        content: String,
        message: String,
    ) {
        let request = FileRequest::Write {
            path,
            content: content.clone(),
            create_new: false,
        };
        let stage = Stage::LargeOutput {
            message,
            original: content,
        };
        self.file_op(session, tool_call_id, request, stage);
    }

    /// File work of a rewind of `session` (the session's file provider's, or the
    /// runtime's); the answer goes to [`Host::rewind_file_done`].
    pub(super) fn rewind_file_op(
        &mut self,
        session: &str,
        request: FileRequest,
        step: super::sessions::rewind::RewindStep,
    ) {
        self.file_op(session, "", request, Stage::Rewind(step));
    }

    fn file_op(&mut self, session: &str, tool_call_id: &str, request: FileRequest, stage: Stage) {
        let id = self.next_effect_id();
        let op = id.get();
        self.runtime_tools.ops.insert(
            op,
            ToolOp {
                session: session.to_owned(),
                tool_call_id: tool_call_id.to_owned(),
                stage,
            },
        );
        // A client that provides the session's files performs it; else the runtime.
        if let Some(conn) = self.file_provider(session) {
            return self.start_remote_file_op(conn, session, op, request);
        }
        self.push_effect(id, EffectOp::FileOp(request));
    }

    fn start_tool_shell(
        &mut self,
        session: &str,
        tool_call_id: &str,
        command: String,
        timeout_ms: u64,
    ) {
        let id = self.next_effect_id();
        let cwd = self
            .sessions
            .get(session)
            .and_then(|l| l.session.cwd.clone());
        // The host's own deadline decides that the command timed out (the runtime's kill at
        // the same deadline is a backstop; either way the exit reports the timeout).
        let timer = (
            self.now
                .saturating_add(std::time::Duration::from_millis(timeout_ms)),
            self.timer_seq,
        );
        self.timer_seq += 1;
        self.timers.insert(timer, super::TimerTarget::ToolShell(id));
        self.runtime_tools.shells.insert(
            id,
            ToolShell {
                session: session.to_owned(),
                tool_call_id: tool_call_id.to_owned(),
                output: Vec::new(),
                truncated: false,
                timeout_ms,
                timer,
                timed_out: false,
            },
        );
        let spec = ProcessSpec {
            argv: shell_argv(command),
            env: Vec::new(),
            env_from_host: Vec::new(),
            cwd,
            stdin: false,
            timeout_ms: Some(timeout_ms),
        };
        self.push_effect(id, EffectOp::ProcessSpawn(spec));
    }

    /// A file operation's result, from the runtime or a file provider.
    pub(crate) fn file_result(&mut self, op: u64, result: Result<FileReply, String>) {
        let Some(ToolOp {
            session,
            tool_call_id,
            stage,
        }) = self.runtime_tools.ops.remove(&op)
        else {
            return;
        };
        if let Stage::Attachment { index } = stage {
            self.attachment_read_done(&session, index, result);
            return;
        }
        if let Stage::Instructions(step) = stage {
            self.instruction_read_done(&session, step, result);
            return;
        }
        if let Stage::Skills(target, step) = stage {
            self.skill_read_done(target, step, result);
            return;
        }
        if let Stage::AcpAgent(wait) = stage {
            self.acp_file_done(wait, result);
            return;
        }
        if let Stage::Extensions(scan) = stage {
            self.extension_scan_done(*scan, result);
            return;
        }
        if let Stage::Plugins(wait) = stage {
            self.plugin_file_done(wait, result);
            return;
        }
        if let Stage::TodosRead(read) = stage {
            self.todos_read_done(&session, *read, result);
            return;
        }
        if let Stage::Sql(run) = stage {
            self.sql_done(&session, &tool_call_id, *run, result);
            return;
        }
        if let Stage::PluginMcp(read) = stage {
            self.plugin_mcp_read_done(read, result);
            return;
        }
        if let Stage::Telemetry = stage {
            // A span that could not be written is lost; the session goes on (an exporter
            // never fails the work it observes).
            return;
        }
        if let Stage::Local(step) = stage {
            self.local_file_done(step, result);
            return;
        }
        if let Stage::Scan(step) = stage {
            self.scan_file_done(step, result);
            return;
        }
        if let Stage::Rewind(step) = stage {
            self.rewind_file_done(step, result);
            return;
        }
        if let Stage::LargeOutput { message, original } = stage {
            let text = match result {
                Ok(FileReply::Written) => message,
                _ => original,
            };
            self.complete_tool(&session, &tool_call_id, ToolOutcome::Success(text));
            return;
        }
        // A file the tools created or edited is captured for rewind (`sessions/rewind.rs`).
        match (&stage, &result) {
            (Stage::Create { path, content, .. }, Ok(FileReply::Written)) => {
                self.file_written(&session, path, None, content)
            }
            (
                Stage::EditWrite {
                    path,
                    original,
                    content,
                    ..
                },
                Ok(FileReply::Written),
            ) => self.file_written(&session, path, Some(original.clone()), content),
            _ => {}
        }
        if let (Stage::View { path, .. }, Ok(FileReply::Bytes(bytes))) = (&stage, &result) {
            // An image: the model is told it was viewed, and gets the image itself after the
            // call's results (the history adds it from the event's `result.image`).
            use base64::Engine as _;
            let media_type = image_media_type(path).unwrap_or("application/octet-stream");
            let mut extra = serde_json::Map::new();
            extra.insert(
                "image".into(),
                serde_json::json!({"path": path, "mimeType": media_type,
                    "data": base64::engine::general_purpose::STANDARD.encode(bytes)}),
            );
            let outcome = ToolOutcome::Success(VIEWED_IMAGE.to_owned());
            self.complete_tool_with(&session, &tool_call_id, outcome, extra);
            return;
        }
        if let (Stage::View { .. }, Err(message)) = (&stage, &result) {
            if message.starts_with("Path ") && message.ends_with(" does not exist") {
                // The runtime's answer to a view of a missing path, which the model sees as is.
                let outcome = ToolOutcome::Failure {
                    message: format!("{message}. Please provide a valid path."),
                    code: "not_found".into(),
                };
                self.complete_tool(&session, &tool_call_id, outcome);
                return;
            }
        }
        let next = file_step(stage, result);
        match next {
            Next::Done(outcome) => {
                let outcome = match outcome {
                    Ok(text) => ToolOutcome::Success(text),
                    Err(message) => ToolOutcome::Failure {
                        message,
                        code: "failure".into(),
                    },
                };
                self.complete_tool(&session, &tool_call_id, outcome);
            }
            Next::Then(request, stage) => self.file_op(&session, &tool_call_id, request, stage),
        }
    }

    /// Whether process `id` runs a `bash` call's command.
    pub(crate) fn is_tool_shell(&self, id: EffectId) -> bool {
        self.runtime_tools.shells.contains_key(&id)
    }

    /// Output of a `bash` call's command: collected for the model. Returns whether `id` is
    /// one.
    pub(crate) fn tool_shell_output(&mut self, id: EffectId, data: &[u8]) -> bool {
        let Some(shell) = self.runtime_tools.shells.get_mut(&id) else {
            return false;
        };
        let room = BASH_OUTPUT_LIMIT.saturating_sub(shell.output.len());
        shell
            .output
            .extend_from_slice(&data[..data.len().min(room)]);
        shell.truncated |= data.len() > room;
        true
    }

    /// A `bash` call's deadline passed: its command is killed (the exit then reports the
    /// timeout).
    pub(crate) fn tool_shell_timed_out(&mut self, id: EffectId) {
        let Some(shell) = self.runtime_tools.shells.get_mut(&id) else {
            return;
        };
        shell.timed_out = true;
        let signal = "SIGKILL".to_owned();
        self.push_effect(id, EffectOp::ProcessKill { signal });
    }

    /// A `bash` call's command ended: the call completes. Returns whether `id` is one.
    /// A command killed once its deadline passed (by the host, or by the runtime's own
    /// timeout) is reported as timed out, not as killed by a signal.
    pub(crate) fn tool_shell_exit(&mut self, id: EffectId, exit_code: Option<i32>) -> bool {
        let Some(shell) = self.runtime_tools.shells.remove(&id) else {
            return false;
        };
        self.timers.remove(&shell.timer);
        let mut text = String::from_utf8_lossy(&shell.output).into_owned();
        if shell.truncated {
            text.push_str("\n[output truncated]");
        }
        let past_deadline = self.now >= shell.timer.0;
        let timed_out = exit_code.is_none() && (shell.timed_out || past_deadline);
        let timeout = timed_out.then_some(shell.timeout_ms);
        let answer = tool_text::bash_answer(&text, exit_code, timeout);
        self.complete_tool(
            &shell.session,
            &shell.tool_call_id,
            ToolOutcome::Success(answer),
        );
        self.run_agents();
        true
    }

    /// Drops the session's runtime-performed calls (abort): their commands are killed and
    /// each call completes as cancelled.
    pub(crate) fn cancel_runtime_tools(&mut self, session: &str) {
        let ops: Vec<u64> = (self.runtime_tools.ops.iter())
            .filter(|(_, o)| {
                o.session == session
                    && !matches!(
                        o.stage,
                        Stage::Attachment { .. }
                            | Stage::Instructions(_)
                            | Stage::Plugins(_)
                            | Stage::Local(_)
                            | Stage::Scan(_)
                            | Stage::Rewind(_)
                    )
            })
            .map(|(id, _)| *id)
            .collect();
        let mut cancelled = Vec::new();
        for id in ops {
            if let Some(op) = self.runtime_tools.ops.remove(&id) {
                cancelled.push(op.tool_call_id);
            }
        }
        let shells: Vec<EffectId> = (self.runtime_tools.shells.iter())
            .filter(|(_, s)| s.session == session)
            .map(|(id, _)| *id)
            .collect();
        for id in shells {
            if let Some(shell) = self.runtime_tools.shells.remove(&id) {
                self.timers.remove(&shell.timer);
                cancelled.push(shell.tool_call_id);
            }
            let signal = "SIGKILL".to_owned();
            self.push_effect(id, EffectOp::ProcessKill { signal });
        }
        for tool_call_id in cancelled {
            self.emit(
                session,
                "tool.execution_complete",
                &serde_json::json!({"toolCallId": tool_call_id, "success": false,
                        "error": {"message": "The tool call was cancelled", "code": "cancelled"}}),
                false,
            );
        }
    }
}

/// What the model sees for a `view` of an image.
const VIEWED_IMAGE: &str = "Viewed image file successfully.";

/// What follows a file operation's result.
enum Next {
    Done(Result<String, String>),
    Then(FileRequest, Stage),
}

fn file_step(stage: Stage, result: Result<FileReply, String>) -> Next {
    let reply = match result {
        Ok(FileReply::Bytes(_)) => return Next::Done(Err("the file is not UTF-8 text".to_owned())),
        Ok(reply) => reply,
        Err(message) => return Next::Done(Err(message)),
    };
    let unexpected = || {
        Next::Done(Err(
            "the runtime answered the file operation unexpectedly".into()
        ))
    };
    match (stage, reply) {
        (Stage::View { line, limit, .. }, FileReply::Text(text)) => {
            Next::Done(Ok(tool_text::view_text(&text, line, limit)))
        }
        (Stage::View { .. }, FileReply::Entries(entries)) => {
            Next::Done(Ok(tool_text::view_dir(&entries)))
        }
        (Stage::Create { result, .. }, FileReply::Written) => Next::Done(Ok(result)),
        (
            Stage::EditRead {
                path,
                old_str,
                new_str,
            },
            FileReply::Text(text),
        ) => match tool_text::apply_edit(&text, &path, &old_str, &new_str) {
            Ok((content, summary)) => Next::Then(
                FileRequest::Write {
                    path: path.clone(),
                    content: content.clone(),
                    create_new: false,
                },
                Stage::EditWrite {
                    summary,
                    path,
                    original: text,
                    content,
                },
            ),
            Err(message) => Next::Done(Err(message)),
        },
        (Stage::EditRead { path, .. }, FileReply::Entries(_)) => {
            Next::Done(Err(format!("{path} is a directory, not a file")))
        }
        (Stage::EditWrite { summary, .. }, FileReply::Written) => Next::Done(Ok(summary)),
        (Stage::Glob { pattern }, FileReply::Entries(files)) => Next::Done(
            tool_text::glob_files(&files, &pattern).map(|m| tool_text::glob_answer(&m, &pattern)),
        ),
        (Stage::GrepWalk { query }, FileReply::Entries(files)) => {
            if let Err(e) = tool_text::grep_regex(&query) {
                return Next::Done(Err(e));
            }
            match tool_text::grep_candidates(&files, &query) {
                Ok(paths) => {
                    let root = query.path.clone();
                    Next::Then(
                        FileRequest::ReadMany {
                            root: root.clone(),
                            paths,
                            max_file_bytes: GREP_MAX_FILE_BYTES,
                        },
                        Stage::GrepRead { query, root },
                    )
                }
                Err(e) => Next::Done(Err(e)),
            }
        }
        (Stage::GrepRead { query, root }, FileReply::Texts(texts)) => {
            // A search of one file names it by its path.
            let texts: Vec<(String, String)> = texts
                .into_iter()
                .map(|(p, t)| {
                    if p.is_empty() {
                        (root.clone(), t)
                    } else {
                        // Matches are named by their full path, as the runtime names them.
                        (format!("{}/{p}", root.trim_end_matches('/')), t)
                    }
                })
                .collect();
            Next::Done(tool_text::grep_answer(&query, &texts))
        }
        _ => unexpected(),
    }
}

/// Normalises the path of a file or search call (`a/../b` → `b`).
fn normalize_target(call: &mut BuiltinCall) {
    let path = match &mut call.op {
        BuiltinOp::ReadFile { path, .. }
        | BuiltinOp::WriteFile { path, .. }
        | BuiltinOp::Edit { path, .. }
        | BuiltinOp::Grep(GrepQuery { path, .. })
        | BuiltinOp::Glob { path, .. } => path,
        BuiltinOp::Shell { .. } => return,
    };
    *path = normalize_path(path);
}
