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
//! * `ConnectionOutput::Close`: stop reading, flush what is queued (bounded by
//!   [`ServerOptions::flush_timeout`]), close;
//! * `ConnectionOutput::Shutdown` (also [`Driver::shutdown`] and, with
//!   [`Driver::shutdown_on_signals`], SIGINT/SIGTERM): stop accepting, let every connection
//!   write what is queued for it, send it the [`SHUTDOWN_NOTIFICATION`] with the reason, close
//!   it, kill the processes still running, sync the store;
//! * `Output::Store` (`StoreOutput::Persist` / `SessionDeleted`): with a store
//!   ([`Driver::with_store`], an [`agentwire_store::Store`]), appended to it (or the session's
//!   state removed) while draining, under the lock and therefore before any writer can take
//!   the frames produced by the same input: an event a client has received is in the store's
//!   log, even if the process is killed right after;
//! * `Output::Cluster` (`ClusterOutput::LoadSession` / `Forward` / `ForwardClosed`): handed to
//!   the shared session log ([`Driver::with_session_log`], a [`SessionLog`] such as the
//!   cluster engine), which restores the session if it can and finishes the lookup, and
//!   relays the connections of sessions other nodes own; without one a lookup finishes at
//!   once. With a shared log every `StoreOutput::Persist` goes to it too, numbered, and each
//!   connection's frames wait until the log acknowledged the events they carry;
//! * `Output::Effect` (an `Effect { id, op }`), performed after the lock is released, its
//!   reports fed back with `Host::handle_effect(now, id, event)`:
//!   * `EffectOp::ProcessSpawn` / `ProcessWrite` / `ProcessKill` (MCP servers, and commands
//!     as `sh -c COMMAND`): argv, env and cwd in a process group of its own, stdin (when
//!     asked for) written in order by a thread of its own, stdout, stderr and the exit (or a
//!     failed spawn) reported; killed (the whole group) on request, at its timeout, and when
//!     the server shuts down;
//!   * `EffectOp::HttpRequest` / `HttpCancel`: a blocking `ureq` (rustls) request on a
//!     thread of its own, its status and headers, body chunks (as they arrive), end or
//!     transport error reported; a cancelled exchange reports nothing more;
//!   * `EffectOp::FileOp`: a built-in tool's file operation (read, write, append, walk, read
//!     many, one SQLite statement on a session database with rusqlite)
//!     with `std::fs` on a thread of its own, its result reported.
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
//! `Output` and its nested enums are matched without a catch-all arm (`shared.rs` for the
//! outputs, `effects/mod.rs` for `EffectOp`), so a kind the host gains does not compile until
//! it is handled here — once, for every runtime. An output that needs more than a store
//! append is an effect: performed after the host lock is released by an executor in
//! `effects/` (which knows nothing of connections: it reports through a `Port` the shared
//! state implements), its reports coming back into the host from a driver task.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// Layered, each module importing only those below it: the leaves (`clock`, `runtime`,
// `sync`, `farewell`, `quickack`), the effect executors (`effects`), the shared state and
// what it does with the host's outputs (`shared`), the connection tasks (`tasks`), the shared
// log's handle (`log`), signals, and the public `Driver` (`driver`).
mod clock;
mod driver;
mod effects;
mod farewell;
mod log;
mod quickack;
mod runtime;
mod shared;
mod signals;
mod sync;
mod tasks;
mod websocket;

pub use agentwire;
pub use agentwire::serve::{ServerOptions, Stopped};
pub use agentwire_store;
pub use clock::now;
pub use driver::{Connection, Driver};
pub use farewell::SHUTDOWN_NOTIFICATION;
pub use log::{HostHandle, SessionLog};
pub use quickack::{rearm as rearm_quickack, QuickAckReader, TcpSocket};
pub use runtime::{Runtime, Task};
pub use websocket::WebSocketOptions;

/// The largest chunk a reader task passes to `Host::handle_bytes` at once (64 KiB).
pub const READ_CHUNK: usize = 64 * 1024;
