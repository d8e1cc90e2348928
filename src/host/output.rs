//! What the host hands the runtime: frames to write ([`Host::poll_ready`],
//! [`Host::poll_transmit`]), actions ([`Output`], [`Host::poll_output`]) and the next
//! deadline ([`Host::poll_timeout`]), plus the host's queries.

use bytes::Bytes;

use crate::session::Event;
use crate::Timestamp;

use super::{ConnId, Host};

/// An action the runtime must perform.
///
/// A runtime's driver handles every variant (match it exhaustively, without a `_` arm):
/// adding a variant is a breaking change of this crate, so a driver that compiles handles
/// everything the host can ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Write every frame still queued for `conn` (drain [`Host::poll_transmit`]), then close it.
    Close {
        /// The connection to close.
        conn: ConnId,
        /// Why (also sent to the peer as a JSON-RPC error object before the close).
        reason: String,
    },
    /// A client asked the server to stop (`runtime.shutdown`): stop accepting, flush every
    /// connection (bounded by a timeout), then exit.
    Shutdown {
        /// Why.
        reason: String,
    },
    /// A persisted event to store durably (only when
    /// [`HostConfig::report_persisted_events`](super::HostConfig::report_persisted_events) is set): append `event` (one compact JSON
    /// object, no newline) as one line to the session's log. Outputs are produced before the
    /// frames carrying the same event can be taken, so a runtime that stores every `Persist`
    /// before writing the frames queued by the same input never shows a client an event it
    /// could lose.
    Persist {
        /// The session the event belongs to.
        session: String,
        /// The event as compact JSON (the same bytes clients receive inside `session.event`).
        event: Bytes,
    },
    /// A session was deleted (`session.delete`): remove its stored state (only when
    /// [`HostConfig::report_persisted_events`](super::HostConfig::report_persisted_events) is set).
    SessionDeleted {
        /// The deleted session.
        session: String,
    },
    /// A client named a session this host has not loaded (only with
    /// [`HostConfig::lookup_unknown_sessions`](super::HostConfig::lookup_unknown_sessions)):
    /// look it up in the runtime's shared log (restore it with [`Host::restore_session`] if it
    /// can be served here), then call [`Host::finish_session_lookup`] either way. Until then the
    /// frames of every connection that named it wait, in order.
    LoadSession {
        /// The session a client named.
        session: String,
    },
    /// Relay these frames (bodies, in order) of a client connection to the node that owns
    /// `session` (after [`Host::forward_session_lookup`]): the first for a connection and
    /// session opens the relay, the later ones follow on it. Deliver the owner's frames with
    /// [`Host::deliver_forwarded`], naming the same session.
    Forward {
        /// The client's connection on this node.
        conn: ConnId,
        /// The session whose owner the frames go to.
        session: String,
        /// Frame bodies, in order.
        frames: Vec<Bytes>,
    },
    /// A connection that relayed sessions ended: close its relays (tell the owner nodes).
    ForwardClosed {
        /// The client's connection on this node.
        conn: ConnId,
    },
    /// Run `command` with `sh -c` in `cwd` (`session.shell.exec`, only with
    /// [`HostConfig::shell_enabled`](super::HostConfig::shell_enabled)); report its output with [`Host::handle_shell_output`]
    /// and its end with [`Host::handle_shell_exit`]; kill it after `timeout_ms`.
    ShellExec {
        /// Id the client uses for this process.
        process_id: String,
        /// The command line.
        command: String,
        /// Working directory (the session's when the client gave none).
        cwd: Option<String>,
        /// Kill the command after this many milliseconds.
        timeout_ms: u64,
    },
    /// Send `signal` (e.g. `SIGTERM`) to a process started by [`Output::ShellExec`].
    ShellKill {
        /// The process.
        process_id: String,
        /// The signal's name.
        signal: String,
    },
    /// Perform an HTTP request for a session's model agent and stream the answer back with
    /// [`Host::handle_http_response`], [`Host::handle_http_body`] (chunk by chunk, as bytes
    /// arrive), then [`Host::handle_http_end`] or [`Host::handle_http_error`]. The host
    /// enforces the model's deadlines itself; the runtime needs only coarse backstops.
    /// Headers marked sensitive must never be logged.
    HttpRequest {
        /// Id of this exchange, for the inputs that report it.
        call: u64,
        /// The session it is for.
        session: String,
        /// Method, URL, headers and body.
        request: crate::model::HttpRequest,
    },
    /// Perform a file operation for a built-in tool call of a session's model (`view`,
    /// `create`, `edit`, `grep`, `glob` with no client performing it) and report its result
    /// with [`Host::handle_file_result`]. Paths are the session's (absolute when it has a
    /// working directory); the host has already asked permission.
    FileOp {
        /// Id of this operation, for [`Host::handle_file_result`].
        op: u64,
        /// The session it is for.
        session: String,
        /// What to do.
        request: super::FileRequest,
    },
    /// Abandon the exchange started by [`Output::HttpRequest`] `call` (drop the connection);
    /// input for it is ignored from now on.
    HttpCancel {
        /// The exchange.
        call: u64,
    },
    /// Start a long-lived child process (an MCP server) in a process group of its own, with
    /// stdin, stdout and stderr piped. Report its output with [`Host::handle_process_stdout`]
    /// / [`Host::handle_process_stderr`] and its end with [`Host::handle_process_exit`] (or
    /// [`Host::handle_process_spawn_error`] when it could not be started).
    ProcessSpawn {
        /// Id of this process, for the outputs and inputs that name it.
        process: u64,
        /// The program and its arguments (no shell).
        argv: Vec<String>,
        /// Environment variables added to the runtime's own.
        env: Vec<(String, String)>,
        /// Working directory (the runtime's own when `None`).
        cwd: Option<String>,
    },
    /// Write `bytes` to the stdin of process `process`, in order after earlier writes.
    ProcessWrite {
        /// The process.
        process: u64,
        /// What to write.
        bytes: Bytes,
    },
    /// Kill process `process` and its whole process group (nothing it started may be left
    /// running); its exit is still reported.
    ProcessKill {
        /// The process.
        process: u64,
    },
}

/// Outputs and queries.
impl Host {
    /// The next connection with frames to write. Each connection is reported once per
    /// transition from empty to non-empty; drain it with [`Host::poll_transmit`].
    #[must_use]
    pub fn poll_ready(&mut self) -> Option<ConnId> {
        while let Some(conn) = self.ready.pop_front() {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.in_ready = false;
                if !c.outbox.is_empty() {
                    return Some(conn);
                }
            }
        }
        None
    }

    /// The next frame to write to `conn`, in emit order.
    #[must_use]
    pub fn poll_transmit(&mut self, conn: ConnId) -> Option<Bytes> {
        self.conns.pop_frame(&conn)
    }

    /// The next action for the runtime.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next deadline, if any: call [`Host::handle_timeout`] then.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.keys().next().map(|(t, _)| *t)
    }

    /// Number of open connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Number of loaded sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Bytes queued for `conn` and not yet taken by the runtime.
    pub fn queued_bytes(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn).map(|c| c.outbox.queued_bytes())
    }

    /// Responses that matched no pending request (late, duplicate or unknown): counted and
    /// dropped.
    pub fn unknown_responses(&self) -> u64 {
        self.unknown_responses
    }

    /// Persisted events of a session, in order (what `session.getMessages` returns).
    pub fn session_events(&self, session_id: &str) -> Option<&[Event]> {
        self.sessions.get(session_id).map(|l| l.session.events())
    }
}
