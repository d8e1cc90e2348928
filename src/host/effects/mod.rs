//! Effects: the work the host hands the runtime and the runtime's reports about it, on one
//! path.
//!
//! The host never performs I/O. Everything it needs done outside (a child process, an HTTP
//! exchange, a file operation) is an [`Output::Effect`]: an [`Effect`] with an [`EffectId`]
//! and an [`EffectOp`]. Ids come from one allocator, so every effect in flight has its own,
//! whatever its kind. The runtime reports what happened with one input,
//! [`Host::handle_effect`], naming the id and an [`EffectEvent`]; the host routes it to
//! whatever started the effect:
//!
//! * a **process** ([`EffectOp::ProcessSpawn`], [`EffectOp::ProcessWrite`],
//!   [`EffectOp::ProcessKill`]) reports [`EffectEvent::Stdout`] / [`EffectEvent::Stderr`]
//!   chunks, then [`EffectEvent::Exit`] (or [`EffectEvent::SpawnFailed`]). Commands run for
//!   clients (`session.shell.exec`, `shell.rs`) and the model's `bash` tool (`tool_ops.rs`)
//!   are processes with argv `sh -c COMMAND` and a timeout; MCP servers are processes with
//!   stdin (`mcp/`);
//! * an **HTTP exchange** ([`EffectOp::HttpRequest`], [`EffectOp::HttpCancel`]) reports
//!   [`EffectEvent::HttpHead`], [`EffectEvent::HttpBody`] chunks, then
//!   [`EffectEvent::HttpEnd`] or [`EffectEvent::HttpError`] (`http.rs`: model agents, MCP's
//!   Streamable HTTP, sampling, the model list, GitHub identities);
//! * a **file operation** ([`EffectOp::FileOp`]) reports [`EffectEvent::FileDone`]
//!   (`tool_ops.rs`: built-in tools, attachments, instruction files, skills).
//!
//! Reports for an id the host does not know (finished, cancelled, killed) are ignored.

pub(crate) mod http;
pub(crate) mod output;
pub(crate) mod provided_http;
pub(crate) mod shell;

use std::fmt;

use bytes::Bytes;

use crate::agent::HttpEvent;
use crate::model::{HttpRequest, TransportErrorKind};
use crate::Timestamp;

use crate::host::{FileReply, FileRequest, Host, Output, ShellStream};

/// Names one effect, from its [`Output::Effect`] to the last [`Host::handle_effect`] about
/// it. One id space for every kind of effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EffectId(u64);

impl EffectId {
    /// The id with this number (ids the host hands out start at 1).
    pub const fn new(raw: u64) -> Self {
        EffectId(raw)
    }

    /// The id's number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for EffectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// Work the runtime performs for the host ([`Output::Effect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effect {
    /// The id the runtime's reports name ([`Host::handle_effect`]).
    pub id: EffectId,
    /// What to do.
    pub op: EffectOp,
}

/// What an [`Effect`] asks of the runtime. Match it without a `_` arm: a new kind is a
/// breaking change, so a runtime that compiles performs every kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EffectOp {
    /// Start a child process in a process group of its own (nothing it starts may outlive a
    /// kill), stdout and stderr piped. Report its output with [`EffectEvent::Stdout`] /
    /// [`EffectEvent::Stderr`] as it arrives and its end with [`EffectEvent::Exit`] after
    /// all of its output, or [`EffectEvent::SpawnFailed`] when it could not be started.
    ProcessSpawn(ProcessSpec),
    /// Write `bytes` to the stdin of process `id`, in order after earlier writes (ignored for
    /// a process without stdin, or gone).
    ProcessWrite(Bytes),
    /// Kill process `id` and its whole process group; its exit is still reported.
    ProcessKill {
        /// The signal the client asked for (e.g. `SIGTERM`); a runtime may always kill.
        signal: String,
    },
    /// Perform an HTTP request and stream the answer back with [`EffectEvent::HttpHead`],
    /// [`EffectEvent::HttpBody`] (chunk by chunk, as bytes arrive), then
    /// [`EffectEvent::HttpEnd`] or [`EffectEvent::HttpError`]. The host enforces the model's
    /// deadlines itself; the runtime needs only coarse backstops. Headers marked sensitive
    /// must never be logged.
    HttpRequest(HttpRequest),
    /// Abandon the exchange `id` (drop the connection); reports about it are ignored from now
    /// on.
    HttpCancel,
    /// Perform a file operation (for a built-in tool call of a session's model, an
    /// attachment, instruction files or skills) and report its result with
    /// [`EffectEvent::FileDone`]. Paths are the session's (absolute when it has a working
    /// directory); the host has already asked permission.
    FileOp(FileRequest),
}

/// A child process to start ([`EffectOp::ProcessSpawn`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessSpec {
    /// The program and its arguments (no shell; a command line is `["sh", "-c", LINE]`).
    pub argv: Vec<String>,
    /// Environment variables added to the runtime's own.
    pub env: Vec<(String, String)>,
    /// Environment variables whose value is the runtime's own variable of the name given
    /// (an MCP server's `env` in the `indirect` mode), read when the process starts; one the
    /// runtime does not have is left unset.
    pub env_from_host: Vec<(String, String)>,
    /// Working directory (the runtime's own when `None`, or when it is not a directory).
    pub cwd: Option<String>,
    /// Pipe stdin for [`EffectOp::ProcessWrite`]; otherwise stdin is empty (`/dev/null`).
    pub stdin: bool,
    /// Kill the process (its group) after this many milliseconds; its exit is then reported
    /// as killed by a signal.
    pub timeout_ms: Option<u64>,
}

/// What the runtime reports about an effect ([`Host::handle_effect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EffectEvent {
    /// Bytes a process wrote to stdout.
    Stdout(Vec<u8>),
    /// Bytes a process wrote to stderr.
    Stderr(Vec<u8>),
    /// A process ended (`None` when a signal ended it), after all of its output.
    Exit(Option<i32>),
    /// A process could not be started (why).
    SpawnFailed(String),
    /// The response to an HTTP exchange began: its status and headers.
    HttpHead {
        /// The HTTP status.
        status: u16,
        /// The response headers (names as received).
        headers: Vec<(String, String)>,
    },
    /// A piece of an HTTP response body, as it arrived.
    HttpBody(Vec<u8>),
    /// The HTTP response body ended normally.
    HttpEnd,
    /// The HTTP exchange failed in transport (connect, TLS, the runtime's backstop, I/O).
    HttpError {
        /// The failure's class.
        kind: TransportErrorKind,
        /// What the runtime saw.
        message: String,
    },
    /// A file operation's result, or what went wrong (the message reaches the model).
    FileDone(Result<FileReply, String>),
}

/// The effect input.
impl Host {
    /// The runtime's report about effect `id` (see the module docs for which events each
    /// kind of effect reports). Reports about an id the host does not know are ignored.
    pub fn handle_effect(&mut self, now: Timestamp, id: EffectId, event: EffectEvent) {
        self.advance_time(now);
        let call = id.get();
        match event {
            EffectEvent::Stdout(bytes) => self.process_output(id, ShellStream::Stdout, &bytes),
            EffectEvent::Stderr(bytes) => self.process_output(id, ShellStream::Stderr, &bytes),
            EffectEvent::Exit(code) => self.process_ended(id, code, None),
            EffectEvent::SpawnFailed(message) => self.process_ended(id, None, Some(&message)),
            EffectEvent::HttpHead { status, headers } => {
                self.http_input(call, HttpEvent::Response { status, headers }, false)
            }
            EffectEvent::HttpBody(bytes) => self.http_input(call, HttpEvent::Body(bytes), false),
            EffectEvent::HttpEnd => self.http_input(call, HttpEvent::End, true),
            EffectEvent::HttpError { kind, message } => {
                self.http_input(call, HttpEvent::Error { kind, message }, true)
            }
            EffectEvent::FileDone(result) => {
                self.file_result(call, result);
                self.run_agents();
            }
        }
    }

    /// A new effect id (the one allocator of every kind of effect).
    pub(crate) fn next_effect_id(&mut self) -> EffectId {
        let id = EffectId(self.next_effect);
        self.next_effect += 1;
        id
    }

    /// Hands the runtime effect `id`.
    pub(crate) fn push_effect(&mut self, id: EffectId, op: EffectOp) {
        self.outputs.push_back(Output::Effect(Effect { id, op }));
    }

    /// Output of process `id`: a `bash` tool call's, a client's command's or an MCP server's.
    fn process_output(&mut self, id: EffectId, stream: ShellStream, bytes: &[u8]) {
        if self.extension_output(id, matches!(stream, ShellStream::Stdout), bytes) {
            return;
        }
        if self.tool_shell_output(id, bytes)
            || self.shell_output(id, stream, bytes)
            || self.acp_process_output(id, stream, bytes)
            || self.acp_terminal_output(id, bytes)
        {
            return;
        }
        self.mcp_process_output(id.get(), stream, bytes);
    }

    /// Process `id` ended (`message`: it could not be started).
    fn process_ended(&mut self, id: EffectId, code: Option<i32>, message: Option<&str>) {
        if self.extension_ended(id) {
            return;
        }
        if self.is_shell(id) {
            // A command that could not start reads as a shell's "command not found".
            let code = match message {
                Some(message) => {
                    let text = format!("cannot start the command: {message}\n");
                    self.process_output(id, ShellStream::Stderr, text.as_bytes());
                    Some(127)
                }
                None => code,
            };
            if !self.tool_shell_exit(id, code) {
                self.shell_exit(id, code);
            }
            return;
        }
        if self.acp_process_ended(id, code, message) || self.acp_terminal_ended(id, code, message) {
            return;
        }
        self.mcp_process_ended(id.get(), code, message);
    }
}
