//! [`Server`]: the driver on tokio, taking tokio's streams.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use agentwire::host::{Host, HostConfig};
use agentwire::Timestamp;
use agentwire_driver::{Connection, Driver, ServerOptions, Stopped};
use agentwire_store::Store;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::Tokio;

/// Runs one [`Host`] over any number of connections, on tokio: a [`Driver<Tokio>`] whose
/// streams are tokio's ([`tokio::io::AsyncRead`] / [`tokio::io::AsyncWrite`]).
///
/// Cloning a `Server` is cheap and gives another handle to the same host, so one host can
/// serve a TCP listener, stdio and in-memory streams at the same time.
///
/// The methods that start tasks (`attach`, `serve_*`, `bind_tcp`, `with_host`, `shutdown`,
/// `shutdown_on_signals`) must be called from within a tokio runtime.
#[derive(Clone, Debug)]
pub struct Server {
    driver: Driver<Tokio>,
}

impl From<Driver<Tokio>> for Server {
    fn from(driver: Driver<Tokio>) -> Self {
        Server { driver }
    }
}

impl Server {
    /// A server for a new [`Host`] built from `config`, with default [`ServerOptions`]
    /// (Content-Length framing).
    pub fn new(config: HostConfig) -> Self {
        Driver::new(config).into()
    }

    /// A server for a new [`Host`] built from `config`, with the given options.
    pub fn with_options(config: HostConfig, options: ServerOptions) -> Self {
        Driver::with_options(config, options).into()
    }

    /// A server that drives an existing host (for example one that already has state).
    pub fn from_host(host: Host, options: ServerOptions) -> Self {
        Driver::from_host(host, options).into()
    }

    /// A server whose sessions outlive the process; see [`Driver::with_store`].
    pub fn with_store(config: HostConfig, options: ServerOptions, store: Store) -> Self {
        Driver::with_store(config, options, store).into()
    }

    /// The runtime-independent driver behind this server.
    pub fn driver(&self) -> &Driver<Tokio> {
        &self.driver
    }

    /// Syncs the session store to disk, if the server has one; see [`Driver::flush_store`].
    pub fn flush_store(&self) -> io::Result<()> {
        self.driver.flush_store()
    }

    /// The options this server was built with.
    pub fn options(&self) -> ServerOptions {
        self.driver.options()
    }

    /// How many connections are open (attached and not yet ended).
    pub fn connection_count(&self) -> usize {
        self.driver.connection_count()
    }

    /// Runs `f` on the host under its lock, with the current time, then does what every call
    /// into the host is followed by; see [`Driver::with_host`].
    pub fn with_host<T>(&self, f: impl FnOnce(&mut Host, Timestamp) -> T) -> T {
        self.driver.with_host(f)
    }

    /// Starts serving one connection that reads from `reader` and writes to `writer` (for
    /// example the two halves of a socket, or of a `tokio::io::duplex` pair), and returns
    /// at once. The connection ends on end of input, on an IO error, or when the host closes
    /// it; [`Connection::closed`] waits for that.
    pub fn attach<R, W>(&self, reader: R, writer: W) -> Connection
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        self.driver.attach(reader.compat(), writer.compat_write())
    }

    /// Serves one connection over `reader`/`writer` until it ends or the server shuts down.
    pub async fn serve_stream<R, W>(&self, reader: R, writer: W) -> Stopped
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let conn = self.attach(reader, writer);
        self.driver.serve_connection(&conn).await
    }

    /// Serves one connection on this process's stdin and stdout until stdin ends or the host
    /// shuts down. Only frames are written to stdout.
    ///
    /// tokio reads stdin on a blocking thread that cannot be interrupted, so after this
    /// returns the process should exit (or drop its runtime with
    /// `Runtime::shutdown_timeout`) rather than wait for that read.
    pub async fn serve_stdio(&self) -> Stopped {
        self.driver.serve_stdio().await
    }

    /// Binds a TCP listener on `addr` (port 0 picks a free port) and returns its local
    /// address together with the future that serves it (see [`Server::serve_tcp`]).
    pub async fn bind_tcp(
        &self,
        addr: impl ToSocketAddrs,
    ) -> io::Result<(SocketAddr, impl Future<Output = Stopped> + Send + 'static)> {
        self.driver.serve_listener(TcpListener::bind(addr).await?)
    }

    /// Accepts connections on `listener` and serves each of them until the host shuts
    /// down; then stops accepting, flushes and closes every connection (bounded by the
    /// flush timeout) and returns. Failed accepts are logged and retried.
    pub async fn serve_tcp(&self, listener: TcpListener) -> Stopped {
        self.driver.serve_tcp(listener).await
    }

    /// Waits until the host asks to shut down (or [`Server::shutdown`] is called) and returns
    /// the reason. Returns at once if that already happened.
    pub async fn shutdown_requested(&self) -> String {
        self.driver.shutdown_requested().await
    }

    /// Shuts the server down as if the host had output `Shutdown { reason }`; see
    /// [`Driver::shutdown`].
    pub fn shutdown(&self, reason: impl Into<String>) {
        self.driver.shutdown(reason)
    }

    /// Shuts the server down gracefully on the first SIGINT or SIGTERM; a second one exits at
    /// once. See [`Driver::shutdown_on_signals`].
    pub fn shutdown_on_signals(&self) -> io::Result<()> {
        self.driver.shutdown_on_signals()
    }
}
