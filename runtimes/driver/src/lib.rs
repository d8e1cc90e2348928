//! The driver of the [`agentwire`] sans-IO host, written once for every async runtime.
//!
//! The core ([`agentwire::host::Host`]) is synchronous: it takes bytes and timestamps in and
//! hands frames to write and actions out. This crate does everything a runtime does around
//! it; a runtime only supplies spawning, a timer and I/O (the small [`Runtime`] trait,
//! implemented by `agentwire-tokio`, `agentwire-smol` and `agentwire-async-std`). One
//! [`Driver`] drives one `Host` over any number of connections:
//!
//! * per connection, a **reader task** reads chunks of at most [`READ_CHUNK`] bytes and feeds
//!   them to `Host::handle_bytes`; end of input or a read error ends the connection;
//! * per connection, a **writer task** takes whole frames from `Host::poll_transmit_batch` in
//!   order and writes them. It is woken only when `Host::poll_ready` names its connection, so
//!   a peer that stops reading blocks its own writer and nothing else; its frames wait inside
//!   the host, whose per-connection outbox budget bounds the memory they take;
//! * one **timer task** sleeps until `Host::poll_timeout` and then calls
//!   `Host::handle_timeout`.
//!
//! The host sits behind a `std::sync::Mutex` that is held only for the synchronous calls
//! into it, never across an `.await`. After every call into the host the driver drains
//! `poll_ready` (waking writers) and `poll_output`, and re-arms the timer. Every output is
//! handled, whatever the runtime:
//!
//! * `Output::Close`: stop reading, flush what is queued (bounded by
//!   [`ServerOptions::flush_timeout`]), close;
//! * `Output::Shutdown` (also [`Driver::shutdown`] and, with [`Driver::shutdown_on_signals`],
//!   SIGINT/SIGTERM): stop accepting, let every connection write what is queued for it, send
//!   it the [`SHUTDOWN_NOTIFICATION`] with the reason, close it, sync the store;
//! * `Output::Persist` / `Output::SessionDeleted`: with a store ([`Driver::with_store`], an
//!   [`agentwire_store::Store`]), appended to it (or the session's state removed) while
//!   draining, under the lock and therefore before any writer can take the frames produced by
//!   the same input: an event a client has received is in the store's log, even if the
//!   process is killed right after;
//! * `Output::LoadSession`: handed to the shared session log ([`Driver::with_session_log`],
//!   a [`SessionLog`] such as the cluster engine), which restores the session if it can and
//!   finishes the lookup; without one the lookup finishes at once. With a shared log every
//!   `Output::Persist` goes to it too, numbered, and each connection's frames wait until the
//!   log acknowledged the events they carry;
//! * `Output::ShellExec` / `Output::ShellKill`: `sh -c COMMAND` in a process group of its own,
//!   its output and exit fed back with `Host::handle_shell_output` / `handle_shell_exit`,
//!   killed (the whole group) on request or at its timeout;
//! * `Output::HttpRequest` / `Output::HttpCancel`: a blocking `ureq` (rustls) request on a
//!   thread of its own, its status and headers, body chunks (as they arrive), end or
//!   transport error fed back with `Host::handle_http_response` / `handle_http_body` /
//!   `handle_http_end` / `handle_http_error`; a cancelled exchange reports nothing more;
//! * `Output::FileOp`: a built-in tool's file operation (read, write, walk, read many) with
//!   `std::fs` on a thread of its own, its result fed back with `Host::handle_file_result`.
//! * `Output::ProcessSpawn` / `ProcessWrite` / `ProcessKill` (MCP servers): argv, env and cwd
//!   in a process group of its own, stdin written in order by a thread of its own, stdout,
//!   stderr and the exit fed back with `Host::handle_process_stdout` / `_stderr` / `_exit`
//!   (or `handle_process_spawn_error`); a kill, and the server shutting down, end the whole
//!   group.
//!
//! Every connection that the driver opens with `Host::open_with` is later ended with exactly
//! one `Host::handle_eof`, whatever ended it (peer EOF, an IO error, or a close the host asked
//! for after its frames were flushed).
//!
//! Streams are `futures-io` ([`futures_lite::io::AsyncRead`] / `AsyncWrite`); tokio's are
//! adapted by `agentwire-tokio`.
//!
//! # Where a new output kind goes
//!
//! `Output` is matched without a catch-all arm (in `shared.rs`), so a kind the host gains does
//! not compile until it is handled here — once, for every runtime. An output that needs more
//! than a store append becomes an `Effect`, performed after the host lock is released by a
//! module of its own whose results come back into the host from a driver task:
//!
//! * child processes (`child.rs`): `std::process` in a process group of its own, output read
//!   by plain threads into a queue, one driver task feeding chunks and the exit to the host
//!   (shell commands, `shell.rs`, and the processes the host asks for directly, with argv,
//!   env, cwd and stdin bytes, `process.rs`);
//! * HTTP requests to a model endpoint (`HttpRequest { call, method, url, headers, body }` /
//!   `HttpCancel { call }`): the same shape — blocking `ureq` calls (rustls) on threads, the
//!   response start, body chunks, end or error queued for a driver task that feeds them to
//!   the host; a cancel marks the call so its thread stops at the next chunk and nothing more
//!   is reported. Threads rather than reqwest on a background tokio runtime: no second
//!   runtime inside smol and async-std processes, the same mechanism as child processes, a
//!   much smaller dependency tree, and streaming bodies (SSE) read chunk by chunk all the same.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod child;
mod clock;
mod driver;
mod farewell;
mod files;
mod http;
mod log;
mod process;
mod quickack;
mod runtime;
mod shared;
mod shell;
mod signals;
mod sync;
mod tasks;

pub use agentwire;
pub use agentwire::serve::{ServerOptions, Stopped};
pub use agentwire_store;
pub use clock::now;
pub use driver::{Connection, Driver};
pub use farewell::SHUTDOWN_NOTIFICATION;
pub use log::{HostHandle, SessionLog};
pub use quickack::{rearm as rearm_quickack, QuickAckReader, TcpSocket};
pub use runtime::{Runtime, Task};

/// The largest chunk a reader task passes to `Host::handle_bytes` at once (64 KiB).
pub const READ_CHUNK: usize = 64 * 1024;
