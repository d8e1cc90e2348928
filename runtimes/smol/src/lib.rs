//! A smol runtime for the [`agentwire`] sans-IO core: stdio, TCP and in-memory streams, and
//! the generic `futures-io` driver behind it.
//!
//! The core ([`agentwire::host::Host`]) is synchronous: it takes bytes and timestamps in and
//! hands frames to write and actions out. This crate does the IO around it, with the same
//! behaviour as `agentwire-tokio`. One [`Server`] drives one `Host` over any number of
//! connections:
//!
//! * per connection, a **reader task** reads chunks of at most [`READ_CHUNK`] bytes and feeds
//!   them to `Host::handle_bytes`; end of input or a read error ends the connection;
//! * per connection, a **writer task** takes whole frames from `Host::poll_transmit_batch` in order
//!   and writes them. It is woken only when `Host::poll_ready` names its connection, so a
//!   peer that stops reading blocks its own writer and nothing else; its frames wait inside the
//!   host, whose per-connection outbox budget bounds the memory they take;
//! * one **timer task** sleeps on an `async-io` [`Timer`](async_io::Timer) until
//!   `Host::poll_timeout` and then calls `Host::handle_timeout`.
//!
//! The host sits behind a `std::sync::Mutex` that is held only for the synchronous calls
//! into it, never across an `.await`. After every call into the host the driver drains
//! `poll_ready` (waking writers), `poll_output` (`Output::Close`: flush then close;
//! `Output::Shutdown`: stop accepting, flush every connection within
//! [`ServerOptions::flush_timeout`], return) and re-arms the timer.
//!
//! Every connection that the driver opens with `Host::open` is later ended with exactly one
//! `Host::handle_eof`, whatever ended it (peer EOF, an IO error, or a close the host asked for
//! after its frames were flushed).
//!
//! # One driver, several runtimes
//!
//! The driver, [`Driver<R>`], only needs `futures-io` streams, `async-io` timers and a way to
//! spawn detached tasks; the [`Runtime`] trait supplies the last one plus TCP and stdio.
//! [`Server`] is `Driver<Smol>` (tasks on smol's global executor, `smol::net`, stdio through
//! `smol::Unblock`); `agentwire-async-std` implements [`Runtime`] for async-std and reuses
//! everything else. A task that must stop early (a writer blocked on a peer that stopped
//! reading, a reader of a closing connection, a flush watchdog) watches a flag of its
//! connection rather than being aborted, so no executor-specific cancellation is needed.
//!
//! # Example
//!
//! ```no_run
//! use agentwire_smol::agentwire::host::HostConfig;
//! use agentwire_smol::Server;
//!
//! # fn main() -> std::io::Result<()> {
//! smol::block_on(async {
//!     let server = Server::new(HostConfig::default());
//!     let (addr, serving) = server.bind_tcp("127.0.0.1:0").await?;
//!     println!("listening on port {}", addr.port());
//!     let stopped = serving.await; // returns after a client calls `runtime.shutdown`
//!     println!("{stopped:?}");
//!     Ok(())
//! })
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod clock;
mod driver;
mod sync;

use std::io;
use std::net::SocketAddr;

pub use agentwire;
pub use clock::now;
pub use driver::{Connection, Driver, Runtime, ServerOptions, Stopped, Task, READ_CHUNK};

/// The smol [`Runtime`]: tasks on smol's global executor (`smol::spawn`), `smol::net` TCP,
/// and stdin/stdout through `smol::Unblock`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Smol;

/// Runs one [`Host`](agentwire::host::Host) over any number of connections on smol.
/// See [`Driver`] for the methods.
pub type Server = Driver<Smol>;

impl Runtime for Smol {
    type TcpListener = smol::net::TcpListener;
    type TcpStream = smol::net::TcpStream;
    type Stdin = smol::Unblock<io::Stdin>;
    type Stdout = smol::Unblock<io::Stdout>;

    fn spawn(task: Task) {
        smol::spawn(task).detach();
    }

    fn tcp_listener(listener: std::net::TcpListener) -> io::Result<Self::TcpListener> {
        smol::net::TcpListener::try_from(listener)
    }

    fn local_addr(listener: &Self::TcpListener) -> io::Result<SocketAddr> {
        listener.local_addr()
    }

    fn accept(
        listener: &Self::TcpListener,
    ) -> impl std::future::Future<Output = io::Result<(Self::TcpStream, SocketAddr)>> + Send {
        listener.accept()
    }

    fn set_nodelay(stream: &Self::TcpStream) -> io::Result<()> {
        stream.set_nodelay(true)
    }

    fn stdio() -> (Self::Stdin, Self::Stdout) {
        (
            smol::Unblock::new(io::stdin()),
            smol::Unblock::new(io::stdout()),
        )
    }
}
