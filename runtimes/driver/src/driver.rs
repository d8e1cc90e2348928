//! [`Driver`]: the public face of the driver, generic over the [`Runtime`].

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentwire::host::{ConnId, Host, HostConfig};
use agentwire::serve::{ServerOptions, Stopped};
use agentwire::Timestamp;
use agentwire_store::{Problem, Store, SyncPolicy};
use futures_lite::future;
use futures_lite::io::{AsyncRead, AsyncWrite};
use tracing::{debug, info, warn};

use crate::clock::now;
use crate::shared::{ConnState, Inner, Shared};
use crate::sync::Watch;
use crate::tasks::{attach_streams, attach_streams_with, ensure_timer};
use crate::{HostHandle, Runtime, SessionLog};

/// How long to wait before retrying after a failed `accept`.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A connection attached with [`Driver::attach`].
#[derive(Clone)]
pub struct Connection {
    state: Arc<ConnState>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.id())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Connection {
    /// The host's id for this connection.
    pub fn id(&self) -> ConnId {
        self.state.id
    }

    /// Whether the connection has ended (and `Host::handle_eof` was called for it).
    pub fn is_closed(&self) -> bool {
        self.state.done.is_set()
    }

    /// Waits until the connection has ended: its frames were flushed (or the flush timed
    /// out or failed), its sink was closed and the host was told with `handle_eof`.
    pub async fn closed(&self) {
        self.state.done.wait().await;
    }
}

/// Runs one [`Host`] over any number of connections, on the runtime `R`.
///
/// Cloning a driver is cheap and gives another handle to the same host, so one host can
/// serve a TCP listener, stdio and in-memory streams at the same time. The methods that start
/// tasks (`attach`, `serve_*`, `with_host`, `shutdown`, `shutdown_on_signals`) hand them to
/// [`Runtime::spawn`], so they must be called where that works (for tokio: inside its runtime).
pub struct Driver<R: Runtime> {
    pub(crate) shared: Arc<Shared>,
    runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> Clone for Driver<R> {
    fn clone(&self) -> Self {
        Driver {
            shared: self.shared.clone(),
            runtime: PhantomData,
        }
    }
}

impl<R: Runtime> std::fmt::Debug for Driver<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("runtime", &std::any::type_name::<R>())
            .field("options", &self.shared.options)
            .field("connections", &self.connection_count())
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Driver<R> {
    /// A server for a new [`Host`] built from `config`, with default [`ServerOptions`]
    /// (Content-Length framing).
    pub fn new(config: HostConfig) -> Self {
        Driver::with_options(config, ServerOptions::default())
    }

    /// A server for a new [`Host`] built from `config`, with the given options. When
    /// `config.server_cwd` is unset it becomes the process's current directory (the working
    /// directory of sessions created without one).
    pub fn with_options(config: HostConfig, options: ServerOptions) -> Self {
        Driver::from_host(Host::new(with_process_cwd(config)), options)
    }

    /// A server that drives an existing host (for example one that already has state).
    pub fn from_host(host: Host, options: ServerOptions) -> Self {
        Driver::build(host, options, None)
    }

    /// A server whose sessions outlive the process: a new [`Host`] built from `config` with
    /// [`HostConfig::report_persisted_events`] set, into which every session loaded by
    /// `store` is restored first (problems found while loading are logged as warnings). Then
    /// every persisted event is appended to the store before the frames carrying it can be
    /// written to any connection, `session.delete` removes the session's stored state, and
    /// the store is synced when a `serve_*` call returns. With
    /// [`SyncPolicy::EveryEvent`] each connection's frames wait until the events they carry
    /// are synced. When `config.workspace_root` is unset it becomes the store's data
    /// directory, so `workspacePath` names the session's directory in the store (an unset
    /// `config.data_dir`, where plugins and marketplaces live, becomes it too); an unset
    /// `config.server_cwd` becomes the process's current directory. See the
    /// `agentwire-store` crate docs for what reaches the disk when.
    pub fn with_store(config: HostConfig, options: ServerOptions, mut store: Store) -> Self {
        let mut config = with_process_cwd(config);
        config.report_persisted_events = true;
        if config.workspace_root.is_none() {
            config.workspace_root = Some(store.data_dir().to_string_lossy().into_owned());
        }
        if config.data_dir.is_none() {
            config.data_dir = Some(store.data_dir().to_string_lossy().into_owned());
        }
        let mut host = Host::new(config);
        let found = store.loaded().len();
        let problems = store.restore(&mut host, now());
        let rejected = problems
            .iter()
            .filter(|p| matches!(p, Problem::Rejected { .. }))
            .count();
        for problem in &problems {
            warn!("session store: {problem}");
        }
        info!(
            dir = %store.data_dir().display(),
            sessions = found - rejected,
            "sessions loaded"
        );
        Driver::build(host, options, Some(store))
    }

    /// A server whose sessions live in a shared, asynchronous log (a cluster node): a new
    /// [`Host`] built from `config` with [`HostConfig::report_persisted_events`] and
    /// [`HostConfig::lookup_unknown_sessions`] set. Every persisted event goes to `log`
    /// before the frames carrying it can be taken, and those frames are written only once
    /// the log reports the event acknowledged ([`HostHandle::durable`]); sessions the host
    /// has not loaded are looked up with [`SessionLog::load`].
    ///
    /// [`HostHandle::durable`]: crate::HostHandle::durable
    pub fn with_session_log(
        mut config: HostConfig,
        options: ServerOptions,
        log: Box<dyn SessionLog>,
    ) -> Self {
        config.report_persisted_events = true;
        config.lookup_unknown_sessions = true;
        let mut log = log;
        let driver = Driver::build_with(Host::new(config), options, None, true);
        let handle = HostHandle {
            shared: Arc::downgrade(&driver.shared),
        };
        // Started under the host lock, and in place before any call into the host can
        // produce an output for it.
        let mut inner = driver.shared.lock();
        log.start(handle);
        inner.log = Some(Box::new(log));
        drop(inner);
        driver
    }

    fn build(host: Host, options: ServerOptions, store: Option<Store>) -> Self {
        Driver::build_with(host, options, store, false)
    }

    fn build_with(
        host: Host,
        options: ServerOptions,
        mut store: Option<Store>,
        shared_log: bool,
    ) -> Self {
        let synced = match store.as_mut() {
            Some(store) if store.options().sync == SyncPolicy::EveryEvent => {
                let synced = Arc::new(Watch::new(0u64));
                let listener = synced.clone();
                store.set_sync_listener(move |seq| listener.set(seq));
                Some(synced)
            }
            _ if shared_log => Some(Arc::new(Watch::new(0u64))),
            _ => None,
        };
        let inner = Inner {
            log: None,
            log_mark: 0,
            host,
            conns: HashMap::new(),
            armed: None,
            shutting_down: false,
            store,
            farewell: None,
        };
        let shared = Shared::new(
            inner,
            options,
            R::spawn,
            |d| Box::pin(R::sleep(d)),
            || Box::pin(R::yield_now()),
            synced,
        );
        Driver {
            shared: Arc::new(shared),
            runtime: PhantomData,
        }
    }

    /// Syncs the session store to disk (`fsync` of every log written since the last sync),
    /// if the server has one. The `serve_*` calls do this when they return.
    pub fn flush_store(&self) -> io::Result<()> {
        match &self.shared.sync {
            Some(sync) => sync.flush(),
            None => Ok(()),
        }
    }

    /// The options this server was built with.
    pub fn options(&self) -> ServerOptions {
        self.shared.options
    }

    /// How many connections are open (attached and not yet ended).
    pub fn connection_count(&self) -> usize {
        self.shared.live.get()
    }

    /// Runs `f` on the host under its lock, with the current time, then does what every call
    /// into the host is followed by (wake writers, act on outputs, re-arm the timer).
    ///
    /// Keep `f` short: every connection waits for the lock.
    pub fn with_host<T>(&self, f: impl FnOnce(&mut Host, Timestamp) -> T) -> T {
        ensure_timer(&self.shared);
        self.shared.with_inner(|inner, now| f(&mut inner.host, now))
    }

    /// Starts serving one connection that reads from `reader` and writes to `writer` (for
    /// example two clones of a socket, or the halves of `futures_lite::io::split`), and
    /// returns at once. The connection ends on end of input, on an IO error, or when the host
    /// closes it; [`Connection::closed`] waits for that.
    pub fn attach<Rd, Wr>(&self, reader: Rd, writer: Wr) -> Connection
    where
        Rd: AsyncRead + Unpin + Send + 'static,
        Wr: AsyncWrite + Unpin + Send + 'static,
    {
        let state = attach_streams(&self.shared, reader, writer);
        Connection { state }
    }

    /// Serves one connection over `reader`/`writer` until it ends or the server shuts down.
    pub async fn serve_stream<Rd, Wr>(&self, reader: Rd, writer: Wr) -> Stopped
    where
        Rd: AsyncRead + Unpin + Send + 'static,
        Wr: AsyncWrite + Unpin + Send + 'static,
    {
        let conn = self.attach(reader, writer);
        self.serve_connection(&conn).await
    }

    /// Waits until `conn` ends or the server shuts down (then lets `conn` flush, within the
    /// flush timeout), syncs the store, and says which happened.
    pub async fn serve_connection(&self, conn: &Connection) -> Stopped {
        let shut = future::or(
            async {
                conn.closed().await;
                false
            },
            async {
                self.shutdown_requested().await;
                true
            },
        )
        .await;
        if shut {
            // Shutdown closes every connection; this one flushes within the flush timeout.
            let _ = self.shared.timeout(self.grace(), conn.closed()).await;
        }
        self.shared.flush_store_logged();
        match self.shared.shutdown.get() {
            Some(reason) => Stopped::Shutdown { reason },
            None => Stopped::Disconnected,
        }
    }

    /// Serves one connection on this process's stdin and stdout until stdin ends or the host
    /// shuts down. Only frames are written to stdout.
    ///
    /// Stdin is read on a blocking thread that cannot be interrupted, so after this returns
    /// the process should exit rather than wait for that read.
    pub async fn serve_stdio(&self) -> Stopped {
        let (stdin, stdout) = R::stdio();
        self.serve_stream(stdin, stdout).await
    }

    /// Binds a TCP listener on `addr` (port 0 picks a free port) and returns its local
    /// address together with the future that serves it (see [`Driver::serve_tcp`]).
    ///
    /// `addr` is resolved with `std::net::ToSocketAddrs`, which may block on a DNS lookup for
    /// a host name; IP addresses never do.
    pub async fn bind_tcp(
        &self,
        addr: impl std::net::ToSocketAddrs,
    ) -> io::Result<(SocketAddr, impl Future<Output = Stopped> + Send + 'static)> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        self.serve_listener(R::tcp_listener(listener)?)
    }

    /// The local address of `listener` and the future that serves it (see
    /// [`Driver::serve_tcp`]).
    pub fn serve_listener(
        &self,
        listener: R::TcpListener,
    ) -> io::Result<(SocketAddr, impl Future<Output = Stopped> + Send + 'static)> {
        let local = R::local_addr(&listener)?;
        let server = self.clone();
        Ok((local, async move { server.serve_tcp(listener).await }))
    }

    /// Accepts connections on `listener` and serves each of them until the host shuts
    /// down; then stops accepting, flushes and closes every connection (bounded by the
    /// flush timeout), syncs the store and returns. Failed accepts are logged and retried.
    pub async fn serve_tcp(&self, listener: R::TcpListener) -> Stopped {
        let (dialect, framing) = (self.shared.options.dialect, self.shared.options.framing);
        self.serve_tcp_as(listener, dialect, framing).await
    }

    /// Binds a TCP listener on `addr` whose connections speak `dialect` over `framing`
    /// (a listener beside the main one, e.g. ACP's `--acp-port`), and returns its local
    /// address with the future that serves it (see [`Driver::serve_tcp_as`]).
    pub async fn bind_tcp_as(
        &self,
        addr: impl std::net::ToSocketAddrs,
        dialect: agentwire::Dialect,
        framing: agentwire::Framing,
    ) -> io::Result<(SocketAddr, impl Future<Output = Stopped> + Send + 'static)> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let listener = R::tcp_listener(listener)?;
        let local = R::local_addr(&listener)?;
        let server = self.clone();
        Ok((local, async move {
            server.serve_tcp_as(listener, dialect, framing).await
        }))
    }

    /// [`Driver::serve_tcp`] for connections that speak `dialect` over `framing` instead of
    /// the options' (a second listener beside the main one, e.g. the client-tools server's
    /// loopback listener: [`Dialect::ClientTools`] over [`Framing::Http`]).
    ///
    /// [`Dialect::ClientTools`]: agentwire::Dialect::ClientTools
    /// [`Framing::Http`]: agentwire::Framing::Http
    pub async fn serve_tcp_as(
        &self,
        listener: R::TcpListener,
        dialect: agentwire::Dialect,
        framing: agentwire::Framing,
    ) -> Stopped {
        ensure_timer(&self.shared);
        loop {
            let next = future::or(async { Err(self.shutdown_requested().await) }, async {
                Ok(R::accept(&listener).await)
            })
            .await;
            match next {
                Err(reason) => {
                    drop(listener);
                    self.wait_all_closed().await;
                    self.shared.flush_store_logged();
                    return Stopped::Shutdown { reason };
                }
                Ok(Ok((reader, writer, peer))) => {
                    let state = attach_streams_with(&self.shared, dialect, framing, reader, writer);
                    debug!(conn = %state.id, %peer, ?dialect, "accepted");
                }
                Ok(Err(e)) => {
                    warn!(error = %e, "accept failed");
                    R::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    }

    /// Waits until the host asks to shut down (or [`Driver::shutdown`] is called) and returns
    /// the reason. Returns at once if that already happened.
    pub async fn shutdown_requested(&self) -> String {
        self.shared
            .shutdown
            .wait_for(Option::is_some)
            .await
            .unwrap_or_default()
    }

    /// Shuts the server down as if the host had output `Shutdown { reason }`: the listener
    /// stops accepting, every connection flushes what the host has queued for it (bounded by
    /// the flush timeout), receives the [`SHUTDOWN_NOTIFICATION`](crate::SHUTDOWN_NOTIFICATION)
    /// with `reason` and is closed, the session store is synced, and the `serve_*` futures
    /// return [`Stopped::Shutdown`].
    pub fn shutdown(&self, reason: impl Into<String>) {
        self.shared.shutdown(reason.into());
    }

    /// Shuts the server down gracefully on the first SIGINT or SIGTERM, as
    /// [`Driver::shutdown`] does with the reason `received SIGTERM` (or `SIGINT`): the
    /// listener stops accepting, queued frames are written (bounded by the flush timeout),
    /// every client receives the [`SHUTDOWN_NOTIFICATION`](crate::SHUTDOWN_NOTIFICATION) and
    /// then end of stream, and the session store is synced; the `serve_*` futures then return
    /// [`Stopped::Shutdown`].
    ///
    /// A second signal during that shutdown ends the process at once with status 128 + the
    /// signal number (130 for SIGINT, 143 for SIGTERM), without waiting for any connection.
    /// No stored event is lost by that: every event is in the store (the kernel's page cache)
    /// before any client can receive it.
    ///
    /// The signals are awaited on a thread of their own, so a second signal ends the process
    /// even when every worker of the server's runtime is busy; that thread lives as long as
    /// the process. The handler does not keep the server alive. Unix only: elsewhere this
    /// returns an `Unsupported` error.
    pub fn shutdown_on_signals(&self) -> io::Result<()> {
        crate::signals::shutdown_on_signals(&self.shared)
    }

    /// Waits (bounded by the flush timeout plus a margin) until every connection has ended:
    /// flushed, sent the shutdown notice and closed its stream.
    async fn wait_all_closed(&self) {
        let _ = self
            .shared
            .timeout(self.grace(), self.shared.unfinished.wait_for(|n| *n == 0))
            .await;
    }

    fn grace(&self) -> Duration {
        self.shared.options.flush_timeout + Duration::from_secs(1)
    }
}

/// `config` with [`HostConfig::server_cwd`] set to the process's current directory when it
/// was unset (and the directory is readable and valid UTF-8).
fn with_process_cwd(mut config: HostConfig) -> HostConfig {
    if config.server_cwd.is_none() {
        config.server_cwd = std::env::current_dir()
            .ok()
            .and_then(|d| d.to_str().map(str::to_owned));
    }
    config
}
