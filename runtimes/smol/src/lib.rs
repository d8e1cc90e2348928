//! A smol runtime for the [`agentwire`] sans-IO core: stdio, TCP and in-memory streams.
//!
//! One [`Server`] drives one [`Host`](agentwire::host::Host) over any number of connections,
//! with the same behaviour as `agentwire-tokio` and `agentwire-async-std`: a reader and a
//! writer task per connection, one timer task (an `async-io` [`Timer`]), and every host
//! output acted on (see the `agentwire-driver` crate docs).
//!
//! # One driver, several runtimes
//!
//! Everything the driver does is written once, in `agentwire-driver` ([`Driver<R>`]): the
//! connection tasks, every host output (close, shutdown with the [`SHUTDOWN_NOTIFICATION`],
//! the session store, shell commands) and signals. This crate only implements its
//! [`Runtime`] for smol: tasks on smol's global executor, `async-io` timers, `smol::net` TCP
//! and stdio through `smol::Unblock`. [`Server`] is `Driver<Smol>`.
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

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use async_io::Timer;

use agentwire_driver::QuickAckReader;

pub use agentwire_driver::{
    agentwire, agentwire_store, now, Connection, Driver, Runtime, ServerOptions, Stopped, Task,
    READ_CHUNK, SHUTDOWN_NOTIFICATION,
};

/// The smol [`Runtime`]: tasks on smol's global executor (`smol::spawn`), `async-io` timers,
/// `smol::net` TCP, and stdin/stdout through `smol::Unblock`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Smol;

/// Runs one [`Host`](agentwire::host::Host) over any number of connections on smol.
/// See [`Driver`] for the methods.
pub type Server = Driver<Smol>;

impl Runtime for Smol {
    type TcpListener = smol::net::TcpListener;
    /// Re-arms `TCP_QUICKACK` after every read (see [`QuickAckReader`]).
    type TcpReader = QuickAckReader<smol::net::TcpStream>;
    type TcpWriter = smol::net::TcpStream;
    type Stdin = smol::Unblock<io::Stdin>;
    type Stdout = smol::Unblock<io::Stdout>;

    fn spawn(task: Task) {
        smol::spawn(task).detach();
    }

    async fn sleep(duration: Duration) {
        Timer::after(duration).await;
    }

    fn tcp_listener(listener: std::net::TcpListener) -> io::Result<Self::TcpListener> {
        smol::net::TcpListener::try_from(listener)
    }

    fn local_addr(listener: &Self::TcpListener) -> io::Result<SocketAddr> {
        listener.local_addr()
    }

    async fn accept(
        listener: &Self::TcpListener,
    ) -> io::Result<(Self::TcpReader, Self::TcpWriter, SocketAddr)> {
        let (stream, peer) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        Ok((QuickAckReader(stream.clone()), stream, peer))
    }

    fn stdio() -> (Self::Stdin, Self::Stdout) {
        (
            smol::Unblock::new(io::stdin()),
            smol::Unblock::new(io::stdout()),
        )
    }
}
