//! An async-std runtime for the [`agentwire`] sans-IO core: stdio, TCP and in-memory streams.
//!
//! This crate is a thin adapter. async-std is built on the same foundations as smol
//! (`async-io` for the reactor and timers, `futures-io` streams, `async-executor` behind
//! `async_std::task::spawn`), so it shares `agentwire-smol`'s generic futures-io driver,
//! [`Driver`]: this crate only implements [`Runtime`] for async-std — detached tasks with
//! `async_std::task::spawn`, `async_std::net` TCP and `async_std::io` stdio. Behaviour
//! (frame order, timers, per-connection writers, `Output::Close` and `Output::Shutdown`
//! handling) is exactly `agentwire-smol`'s; see its crate docs.
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

use std::io;
use std::net::SocketAddr;

pub use agentwire_smol::agentwire;
pub use agentwire_smol::{
    now, Connection, Driver, Runtime, ServerOptions, Stopped, Task, READ_CHUNK,
};

/// The async-std [`Runtime`]: tasks on async-std's executor (`async_std::task::spawn`),
/// `async_std::net` TCP, and `async_std::io` stdin/stdout.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncStd;

/// Runs one [`Host`](agentwire::host::Host) over any number of connections on async-std.
/// See [`Driver`] for the methods.
pub type Server = Driver<AsyncStd>;

impl Runtime for AsyncStd {
    type TcpListener = async_std::net::TcpListener;
    type TcpStream = async_std::net::TcpStream;
    type Stdin = async_std::io::Stdin;
    type Stdout = async_std::io::Stdout;

    fn spawn(task: Task) {
        // Dropping the handle detaches the task.
        drop(async_std::task::spawn(task));
    }

    fn tcp_listener(listener: std::net::TcpListener) -> io::Result<Self::TcpListener> {
        Ok(async_std::net::TcpListener::from(listener))
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
        (async_std::io::stdin(), async_std::io::stdout())
    }
}
