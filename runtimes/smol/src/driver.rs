//! The generic futures-io driver: one `Host` behind a mutex, reader/writer tasks per
//! connection, one timer task. Executor-agnostic: tasks are started with [`Runtime::spawn`],
//! timers are `async-io` timers, and a task that must stop early watches a flag instead of
//! being aborted.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use agentwire::host::{ConnId, Host, HostConfig, Output};
use agentwire::Timestamp;
use async_io::Timer;
use bytes::Bytes;
use futures_lite::future;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tracing::{debug, warn};

use crate::clock::now;
use crate::sync::{lock, Flag, Notify, Watch};

/// The largest chunk a reader task passes to `Host::handle_bytes` at once (64 KiB).
pub const READ_CHUNK: usize = 64 * 1024;

/// A writer takes at most about this many bytes of frames out of the host per lock.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// Capacity of the buffer in front of each connection's byte sink.
const WRITE_BUFFER: usize = 64 * 1024;

/// How long to wait before retrying after a failed `accept`.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A task handed to [`Runtime::spawn`].
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What the driver needs from an async runtime built on `futures-io` (smol, async-std, …):
/// a way to start detached tasks, TCP, and stdio. Timers always come from `async-io`, which
/// works under any executor.
///
/// Implemented by [`Smol`](crate::Smol) here and by `AsyncStd` in `agentwire-async-std`.
pub trait Runtime: Send + Sync + 'static {
    /// A bound TCP listener.
    type TcpListener: Send + Sync + 'static;
    /// An accepted TCP connection; one clone reads, another writes.
    type TcpStream: AsyncRead + AsyncWrite + Clone + Unpin + Send + Sync + 'static;
    /// This process's standard input.
    type Stdin: AsyncRead + Unpin + Send + 'static;
    /// This process's standard output.
    type Stdout: AsyncWrite + Unpin + Send + 'static;

    /// Starts `task` in the background (detached: it runs to completion on its own).
    fn spawn(task: Task);
    /// Wraps a bound (blocking) std listener.
    fn tcp_listener(listener: std::net::TcpListener) -> io::Result<Self::TcpListener>;
    /// The listener's local address.
    fn local_addr(listener: &Self::TcpListener) -> io::Result<SocketAddr>;
    /// Accepts one connection.
    fn accept(
        listener: &Self::TcpListener,
    ) -> impl Future<Output = io::Result<(Self::TcpStream, SocketAddr)>> + Send;
    /// Disables Nagle's algorithm on `stream` (frames are written whole and flushed).
    fn set_nodelay(stream: &Self::TcpStream) -> io::Result<()>;
    /// This process's stdin and stdout.
    fn stdio() -> (Self::Stdin, Self::Stdout);
}

pub use agentwire::serve::{ServerOptions, Stopped};

/// A connection attached with [`Driver::attach`].
#[derive(Clone)]
pub struct Connection {
    id: ConnId,
    state: Arc<ConnState>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.id)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Connection {
    /// The host's id for this connection.
    pub fn id(&self) -> ConnId {
        self.id
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
/// `agentwire_smol::Server` is `Driver<Smol>`; `agentwire_async_std::Server` is
/// `Driver<AsyncStd>`. Cloning a driver is cheap and gives another handle to the same host, so
/// one host can serve a TCP listener, stdio and in-memory streams at the same time.
///
/// Unlike tokio's, these methods need no ambient runtime: tasks go to [`Runtime::spawn`].
pub struct Driver<R: Runtime> {
    shared: Arc<Shared>,
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

    /// A server for a new [`Host`] built from `config`, with the given options.
    pub fn with_options(config: HostConfig, options: ServerOptions) -> Self {
        Driver::from_host(Host::new(config), options)
    }

    /// A server that drives an existing host (for example one that already has state).
    pub fn from_host(host: Host, options: ServerOptions) -> Self {
        Driver {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    host,
                    conns: HashMap::new(),
                    armed: None,
                    shutting_down: false,
                }),
                timer: Arc::new(Notify::new()),
                timer_started: AtomicBool::new(false),
                shutdown: Watch::new(None),
                live: Watch::new(0),
                options,
                spawn: R::spawn,
            }),
            runtime: PhantomData,
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
        self.shared.ensure_timer();
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
        let shared = &self.shared;
        shared.ensure_timer();
        let (framing, dialect) = (shared.options.framing, shared.options.dialect);
        let (state, shutting_down) = shared.with_inner(|inner, now| {
            let id = inner.host.open_with(now, dialect, framing);
            let state = Arc::new(ConnState {
                id,
                wake: Notify::new(),
                closing: Flag::new(),
                done: Flag::new(),
            });
            inner.conns.insert(id, state.clone());
            shared.live.set(inner.conns.len());
            (state, inner.shutting_down)
        });
        debug!(conn = %state.id, "connection opened");
        shared.spawn(reader_task(shared.clone(), state.clone(), reader));
        shared.spawn(writer_task(shared.clone(), state.clone(), writer));
        if shutting_down {
            shared.begin_close(&state, "server is shutting down");
        }
        Connection {
            id: state.id,
            state,
        }
    }

    /// Serves one connection over `reader`/`writer` until it ends or the server shuts down.
    pub async fn serve_stream<Rd, Wr>(&self, reader: Rd, writer: Wr) -> Stopped
    where
        Rd: AsyncRead + Unpin + Send + 'static,
        Wr: AsyncWrite + Unpin + Send + 'static,
    {
        let conn = self.attach(reader, writer);
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
            let _ = future::or(
                async {
                    conn.closed().await;
                    true
                },
                async {
                    Timer::after(self.grace()).await;
                    false
                },
            )
            .await;
        }
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
        let listener = R::tcp_listener(std::net::TcpListener::bind(addr)?)?;
        let local = R::local_addr(&listener)?;
        let server = self.clone();
        Ok((local, async move { server.serve_tcp(listener).await }))
    }

    /// Accepts connections on `listener` and serves each of them until the host shuts
    /// down; then stops accepting, flushes and closes every connection (bounded by the
    /// flush timeout) and returns. Failed accepts are logged and retried.
    pub async fn serve_tcp(&self, listener: R::TcpListener) -> Stopped {
        self.shared.ensure_timer();
        loop {
            let next = future::or(async { Err(self.shutdown_requested().await) }, async {
                Ok(R::accept(&listener).await)
            })
            .await;
            match next {
                Err(reason) => {
                    drop(listener);
                    self.wait_all_closed().await;
                    return Stopped::Shutdown { reason };
                }
                Ok(Ok((stream, peer))) => {
                    let _ = R::set_nodelay(&stream);
                    let conn = self.attach(stream.clone(), stream);
                    debug!(conn = %conn.id(), %peer, "accepted");
                }
                Ok(Err(e)) => {
                    warn!(error = %e, "accept failed");
                    Timer::after(ACCEPT_BACKOFF).await;
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

    /// Shuts the server down as if the host had output `Shutdown { reason }`: every
    /// connection flushes what the host has queued for it and is closed, and the `serve_*`
    /// futures return [`Stopped::Shutdown`].
    pub fn shutdown(&self, reason: impl Into<String>) {
        let reason = reason.into();
        let mut deferred = Vec::new();
        {
            let mut inner = self.shared.lock();
            self.shared
                .start_shutdown(&mut inner, reason, &mut deferred);
        }
        self.shared.run_deferred(deferred);
    }

    /// Waits (bounded by the flush timeout plus a margin) until no connection is open.
    async fn wait_all_closed(&self) {
        let _ = future::or(
            async {
                self.shared.live.wait_for(|n| *n == 0).await;
            },
            async {
                Timer::after(self.grace()).await;
            },
        )
        .await;
    }

    fn grace(&self) -> Duration {
        self.shared.options.flush_timeout + Duration::from_secs(1)
    }
}

/// State shared by the server handles and all tasks.
struct Shared {
    inner: Mutex<Inner>,
    /// Wakes the timer task when the host's deadline changed.
    timer: Arc<Notify>,
    timer_started: AtomicBool,
    /// `Some(reason)` once the server is shutting down.
    shutdown: Watch<Option<String>>,
    /// Number of open connections.
    live: Watch<usize>,
    options: ServerOptions,
    /// The runtime's [`Runtime::spawn`].
    spawn: fn(Task),
}

struct Inner {
    host: Host,
    conns: HashMap<ConnId, Arc<ConnState>>,
    /// The deadline the timer task last saw.
    armed: Option<Timestamp>,
    shutting_down: bool,
}

struct ConnState {
    id: ConnId,
    /// Wakes the writer: frames are ready, or the connection is closing.
    wake: Notify,
    /// Set once the connection should end after its queued frames are written; the reader
    /// stops when it is set.
    closing: Flag,
    /// Set once the connection has ended; every task of the connection stops when it is set.
    done: Flag,
}

/// Work found while draining the host, done after its lock is released.
enum Deferred {
    Close(Arc<ConnState>, String),
    Shutdown(String),
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Lets the timer task notice that the server is gone.
        self.timer.notify();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        (self.spawn)(Box::pin(task));
    }

    /// Runs `f` under the host lock, then drains the host and acts on what it asked for.
    fn with_inner<T>(self: &Arc<Self>, f: impl FnOnce(&mut Inner, Timestamp) -> T) -> T {
        let mut deferred = Vec::new();
        let out = {
            let mut inner = self.lock();
            let out = f(&mut inner, now());
            self.drain(&mut inner, &mut deferred);
            out
        };
        self.run_deferred(deferred);
        out
    }

    /// Drains `poll_ready` and `poll_output` and re-arms the timer. Runs under the lock.
    fn drain(&self, inner: &mut Inner, deferred: &mut Vec<Deferred>) {
        // `poll_ready` hands out each ready connection once; the bound only guards against a
        // host that keeps reporting the same one.
        let mut budget = inner.conns.len() + 64;
        while let Some(conn) = inner.host.poll_ready() {
            if let Some(state) = inner.conns.get(&conn) {
                state.wake.notify();
            }
            budget -= 1;
            if budget == 0 {
                break;
            }
        }
        while let Some(output) = inner.host.poll_output() {
            match output {
                Output::Close { conn, reason } => {
                    if let Some(state) = inner.conns.get(&conn) {
                        deferred.push(Deferred::Close(state.clone(), reason));
                    }
                }
                Output::Shutdown { reason } => self.start_shutdown(inner, reason, deferred),
                // Persistence outputs are only produced when the host is configured to report
                // them (`HostConfig::report_persisted_events`); this driver keeps no store.
                other => debug!(?other, "ignoring host output"),
            }
        }
        let deadline = inner.host.poll_timeout();
        if deadline != inner.armed {
            inner.armed = deadline;
            self.timer.notify();
        }
    }

    fn start_shutdown(&self, inner: &mut Inner, reason: String, deferred: &mut Vec<Deferred>) {
        if inner.shutting_down {
            return;
        }
        inner.shutting_down = true;
        for state in inner.conns.values() {
            deferred.push(Deferred::Close(
                state.clone(),
                "server is shutting down".to_owned(),
            ));
        }
        deferred.push(Deferred::Shutdown(reason));
    }

    fn run_deferred(self: &Arc<Self>, deferred: Vec<Deferred>) {
        for d in deferred {
            match d {
                Deferred::Close(state, reason) => self.begin_close(&state, &reason),
                Deferred::Shutdown(reason) => {
                    debug!(%reason, "shutting down");
                    self.shutdown.set(Some(reason));
                }
            }
        }
    }

    /// Starts closing a connection: stop reading, let the writer flush what is queued, and
    /// drop the connection anyway once the flush timeout has passed.
    fn begin_close(self: &Arc<Self>, state: &Arc<ConnState>, reason: &str) {
        if state.closing.set() {
            return;
        }
        debug!(conn = %state.id, %reason, "closing connection");
        state.wake.notify();
        if state.done.is_set() {
            return;
        }
        let shared = self.clone();
        let conn = state.clone();
        let timeout = self.options.flush_timeout;
        self.spawn(async move {
            let timed_out = future::or(
                async {
                    conn.done.wait().await;
                    false
                },
                async {
                    Timer::after(timeout).await;
                    true
                },
            )
            .await;
            if timed_out {
                debug!(conn = %conn.id, "flush timed out");
                shared.finish(&conn);
            }
        });
    }

    /// Ends a connection at once: tells the host, stops its tasks, signals `done`.
    fn finish(self: &Arc<Self>, state: &Arc<ConnState>) {
        self.with_inner(|inner, now| forget(inner, now, state.id, &self.live));
        finished(state);
    }

    fn ensure_timer(self: &Arc<Self>) {
        if !self.timer_started.swap(true, Ordering::SeqCst) {
            self.spawn(timer_task(Arc::downgrade(self), self.timer.clone()));
        }
    }
}

/// After the host was told: stop the connection's tasks and signal `done`.
fn finished(state: &ConnState) {
    state.closing.set();
    if !state.done.set() {
        debug!(conn = %state.id, "connection ended");
    }
}

/// Removes a connection and tells the host, once. Runs under the lock.
fn forget(inner: &mut Inner, now: Timestamp, id: ConnId, live: &Watch<usize>) -> bool {
    if inner.conns.remove(&id).is_none() {
        return false;
    }
    inner.host.handle_eof(now, id);
    live.set(inner.conns.len());
    true
}

async fn reader_task<Rd>(shared: Arc<Shared>, state: Arc<ConnState>, mut reader: Rd)
where
    Rd: AsyncRead + Unpin,
{
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        if state.closing.is_set() {
            return;
        }
        let read = future::or(async { Some(reader.read(&mut buf).await) }, async {
            state.closing.wait().await;
            None
        })
        .await;
        match read {
            // Closing (or ended): stop reading; the writer flushes what is queued.
            None => return,
            Some(Ok(0)) => {
                // The peer finished sending; still write what is queued for it.
                shared.begin_close(&state, "end of input");
                return;
            }
            Some(Ok(n)) => {
                let bytes = &buf[..n];
                shared.with_inner(|inner, now| {
                    if inner.conns.contains_key(&state.id) {
                        inner.host.handle_bytes(now, state.id, bytes);
                    }
                });
            }
            Some(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Some(Err(e)) => {
                debug!(conn = %state.id, error = %e, "read failed");
                shared.finish(&state);
                return;
            }
        }
    }
}

/// How a writer's run ended.
enum WriterEnd {
    /// Everything queued was written and the connection is closing: the host was told.
    Flushed,
    /// The connection was ended by another task (watchdog, reader error).
    Ended,
    Failed(io::Error),
}

async fn writer_task<Wr>(shared: Arc<Shared>, state: Arc<ConnState>, writer: Wr)
where
    Wr: AsyncWrite + Unpin,
{
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER, writer);
    let mut batch: Vec<Bytes> = Vec::new();
    let run = async {
        loop {
            let ended = shared.with_inner(|inner, now| {
                // Every queued frame up to the batch limit, with one host call.
                inner
                    .host
                    .poll_transmit_batch(state.id, WRITE_BATCH_BYTES, &mut batch);
                // Nothing left and closing: tell the host in the same critical section, so no
                // frame can be queued between the last check and `handle_eof`.
                if batch.is_empty() && state.closing.is_set() {
                    forget(inner, now, state.id, &shared.live);
                    return true;
                }
                // A connection the host already forgot (ended elsewhere) has nothing to write.
                batch.is_empty() && !inner.conns.contains_key(&state.id)
            });
            if ended {
                return WriterEnd::Flushed;
            }
            if batch.is_empty() {
                state.wake.notified().await;
                continue;
            }
            for frame in batch.drain(..) {
                if let Err(e) = writer.write_all(&frame).await {
                    return WriterEnd::Failed(e);
                }
            }
            if let Err(e) = writer.flush().await {
                return WriterEnd::Failed(e);
            }
        }
    };
    // A writer blocked on a peer that stopped reading is released when the connection ends.
    let end = future::or(run, async {
        state.done.wait().await;
        WriterEnd::Ended
    })
    .await;
    match end {
        WriterEnd::Flushed => {
            let _ = future::or(
                async {
                    let _ = writer.close().await;
                },
                async {
                    Timer::after(shared.options.flush_timeout).await;
                },
            )
            .await;
            finished(&state);
        }
        WriterEnd::Ended => {}
        WriterEnd::Failed(e) => {
            debug!(conn = %state.id, error = %e, "write failed");
            shared.finish(&state);
        }
    }
}

async fn timer_task(shared: Weak<Shared>, wake: Arc<Notify>) {
    loop {
        let deadline = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let mut inner = shared.lock();
            inner.armed = inner.host.poll_timeout();
            inner.armed
        };
        match deadline {
            None => wake.notified().await,
            Some(deadline) => {
                let delay = deadline.saturating_duration_since(now());
                if delay.is_zero() {
                    // Already due: yield first, or an agent that yields with zero-length
                    // timers (stream step batches) would keep this task running and starve
                    // the writers on the same executor thread.
                    future::yield_now().await;
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    shared.with_inner(|inner, now| inner.host.handle_timeout(now));
                    continue;
                }
                let fired = future::or(
                    async {
                        Timer::after(delay).await;
                        true
                    },
                    async {
                        wake.notified().await;
                        false
                    },
                )
                .await;
                if fired {
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    shared.with_inner(|inner, now| inner.host.handle_timeout(now));
                }
            }
        }
    }
}
