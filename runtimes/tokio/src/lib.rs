//! A tokio runtime for the [`agentwire`] sans-IO core: stdio, TCP and in-memory streams.
//!
//! The core ([`agentwire::host::Host`]) is synchronous: it takes bytes and timestamps in and
//! hands frames to write and actions out. This crate does the IO around it. One [`Server`]
//! drives one `Host` over any number of connections:
//!
//! * per connection, a **reader task** reads chunks of at most [`READ_CHUNK`] bytes and feeds
//!   them to `Host::handle_bytes`; end of input or a read error ends the connection;
//! * per connection, a **writer task** takes whole frames from `Host::poll_transmit_batch` in order
//!   and writes them. It is woken only when `Host::poll_ready` names its connection, so a
//!   peer that stops reading blocks its own writer and nothing else; its frames wait inside the
//!   host, whose per-connection outbox budget bounds the memory they take;
//! * one **timer task** sleeps until `Host::poll_timeout` and then calls
//!   `Host::handle_timeout`.
//!
//! The host sits behind a `std::sync::Mutex` that is held only for the synchronous calls
//! into it, never across an `.await`. After every call into the host the driver drains
//! `poll_ready` (waking writers), `poll_output` (closing connections, shutting down) and
//! re-arms the timer.
//!
//! Every connection that the driver opens with `Host::open` is later ended with exactly one
//! `Host::handle_eof`, whatever ended it (peer EOF, an IO error, or a close the host asked for
//! after its frames were flushed).
//!
//! With a durable session store ([`Server::with_store`], an [`agentwire_store::Store`]), the
//! driver appends every `Output::Persist` to the store while it drains the host's outputs,
//! under the lock and therefore before any writer task can take the frames produced by the
//! same input: an event a client has received is in the store's log, even if the process is
//! killed right after. `Output::SessionDeleted` removes the session's stored state.
//!
//! Shutting down ([`Server::shutdown`], the host's `Output::Shutdown` for `runtime.shutdown`,
//! or a signal with [`Server::shutdown_on_signals`]) stops accepting, lets every connection
//! write what is queued for it (bounded by [`ServerOptions::flush_timeout`]), sends it the
//! [`SHUTDOWN_NOTIFICATION`] with the reason, closes it, and syncs the store.
//!
//! # Example
//!
//! ```no_run
//! use agentwire_tokio::agentwire::host::HostConfig;
//! use agentwire_tokio::Server;
//!
//! # async fn demo() -> std::io::Result<()> {
//! let server = Server::new(HostConfig::default());
//! let (addr, serving) = server.bind_tcp("127.0.0.1:0").await?;
//! println!("listening on port {}", addr.port());
//! let stopped = serving.await; // returns after a client calls `runtime.shutdown`
//! println!("{stopped:?}");
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod clock;
mod driver;
mod shell;
mod signals;

pub use agentwire;
pub use agentwire_store;
pub use clock::now;
pub use driver::{Connection, Server, ServerOptions, Stopped, READ_CHUNK, SHUTDOWN_NOTIFICATION};
