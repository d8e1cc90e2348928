//! An async-std runtime for the [`agentwire`] sans-IO core: stdio, TCP and in-memory streams.
//!
//! This crate is a thin adapter: everything the driver does is written once, in
//! `agentwire-driver` ([`Driver`]); this crate only implements its [`Runtime`] for
//! async-std — detached tasks with `async_std::task::spawn`, `async_std::task::sleep`,
//! `async_std::net` TCP and `async_std::io` stdio. Behaviour (frame order, timers,
//! per-connection writers, every host output: close, shutdown, the session store, shell
//! commands; signals) is exactly `agentwire-tokio`'s and `agentwire-smol`'s.
//!
//! **async-std is discontinued upstream** (RUSTSEC-2025-0052): its authors recommend smol.
//! This adapter exists for applications that are already on async-std; new code should use
//! `agentwire-smol` (or `agentwire-tokio`).
//!
//! # Example
//!
//! ```no_run
//! use agentwire_async_std::agentwire::host::HostConfig;
//! use agentwire_async_std::Server;
//!
//! # fn main() -> std::io::Result<()> {
//! async_std::task::block_on(async {
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

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use agentwire_driver::QuickAckReader;

pub use agentwire_driver::{
    agentwire, agentwire_store, now, Connection, Driver, Runtime, ServerOptions, Stopped, Task,
    READ_CHUNK, SHUTDOWN_NOTIFICATION,
};

/// The async-std [`Runtime`]: tasks on async-std's executor (`async_std::task::spawn`),
/// `async_std::task::sleep`, `async_std::net` TCP, and `async_std::io` stdin/stdout.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncStd;

/// Runs one [`Host`](agentwire::host::Host) over any number of connections on async-std.
/// See [`Driver`] for the methods.
pub type Server = Driver<AsyncStd>;

impl Runtime for AsyncStd {
    type TcpListener = async_std::net::TcpListener;
    /// Re-arms `TCP_QUICKACK` after every read (see [`QuickAckReader`]).
    type TcpReader = QuickAckReader<async_std::net::TcpStream>;
    type TcpWriter = async_std::net::TcpStream;
    type Stdin = async_std::io::Stdin;
    type Stdout = async_std::io::Stdout;

    fn spawn(task: Task) {
        // Dropping the handle detaches the task.
        drop(async_std::task::spawn(task));
    }

    fn sleep(duration: Duration) -> impl Future<Output = ()> + Send {
        async_std::task::sleep(duration)
    }

    fn tcp_listener(listener: std::net::TcpListener) -> io::Result<Self::TcpListener> {
        Ok(async_std::net::TcpListener::from(listener))
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
        (async_std::io::stdin(), async_std::io::stdout())
    }
}
