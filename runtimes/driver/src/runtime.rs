//! What the driver needs from an async runtime: spawning, timers and I/O. Nothing else.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use futures_lite::io::{AsyncRead, AsyncWrite};

/// A task handed to [`Runtime::spawn`].
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// An async runtime as the [`Driver`](crate::Driver) sees it: a way to start detached tasks,
/// a timer, TCP and stdio, all as `futures-io` streams.
///
/// Everything else the driver does (connections, the host's outputs, shutdown, the session
/// store, shell commands, signals) is written once, in this crate, on top of these. The
/// implementations are `agentwire_tokio::Tokio`, `agentwire_smol::Smol` and
/// `agentwire_async_std::AsyncStd`; a runtime of your own needs about fifty lines.
pub trait Runtime: Send + Sync + 'static {
    /// A bound TCP listener.
    type TcpListener: Send + Sync + 'static;
    /// The reading half of an accepted TCP connection.
    type TcpReader: AsyncRead + Unpin + Send + 'static;
    /// The writing half of an accepted TCP connection.
    type TcpWriter: AsyncWrite + Unpin + Send + 'static;
    /// This process's standard input.
    type Stdin: AsyncRead + Unpin + Send + 'static;
    /// This process's standard output.
    type Stdout: AsyncWrite + Unpin + Send + 'static;

    /// Starts `task` in the background (detached: it runs to completion on its own).
    ///
    /// The driver calls this from inside its own tasks and from the calls the application
    /// makes into it (`attach`, `with_host`, `shutdown`, …), never from a thread of its own.
    fn spawn(task: Task);
    /// Completes after `duration`.
    fn sleep(duration: Duration) -> impl Future<Output = ()> + Send;
    /// Lets the other tasks run before this one continues: the timer task yields this way
    /// between timers that are already due. The default wakes the task at once
    /// (`futures_lite::future::yield_now`); a runtime whose scheduler would then run the
    /// same task again first (tokio's LIFO slot) supplies its own.
    fn yield_now() -> impl Future<Output = ()> + Send {
        futures_lite::future::yield_now()
    }
    /// Wraps a bound (blocking) std listener.
    fn tcp_listener(listener: std::net::TcpListener) -> io::Result<Self::TcpListener>;
    /// The listener's local address.
    fn local_addr(listener: &Self::TcpListener) -> io::Result<SocketAddr>;
    /// Accepts one connection (with Nagle's algorithm disabled: frames are written whole and
    /// flushed) and splits it into its two halves.
    fn accept(
        listener: &Self::TcpListener,
    ) -> impl Future<Output = io::Result<(Self::TcpReader, Self::TcpWriter, SocketAddr)>> + Send;
    /// This process's stdin and stdout.
    fn stdio() -> (Self::Stdin, Self::Stdout);
}
