//! The driver: one `Host` behind a mutex, reader/writer tasks per connection, one timer task.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use agentwire::frame::encode_frame;
use agentwire::host::{ConnId, Dialect, Host, HostConfig, Output};
use agentwire::Timestamp;
use agentwire_store::{Store, SyncHandle, SyncPolicy};
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::{watch, Notify};
use tokio::task::AbortHandle;
use tracing::{debug, info, warn};

use crate::clock::now;

/// The largest chunk a reader task passes to `Host::handle_bytes` at once (64 KiB).
pub const READ_CHUNK: usize = 64 * 1024;

/// A writer takes at most about this many bytes of frames out of the host per lock.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// Capacity of the buffer in front of each connection's byte sink.
const WRITE_BUFFER: usize = 64 * 1024;

/// How long to wait before retrying after a failed `accept`.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The JSON-RPC notification every connection receives when the server shuts down, as the
/// last message before its stream ends: `{"jsonrpc":"2.0","method":"agentwire/shutdown",
/// "params":{"reason":"…"}}`. The reason is the one given to [`Server::shutdown`] (for
/// example `runtime.shutdown requested by a client` or `received SIGTERM`). ACP connections
/// receive it as the extension notification `_agentwire/shutdown` (ACP reserves names
/// starting with `_` for extensions).
pub const SHUTDOWN_NOTIFICATION: &str = "agentwire/shutdown";

pub use agentwire::serve::{ServerOptions, Stopped};

/// Runs one [`Host`] over any number of connections.
///
/// Cloning a `Server` is cheap and gives another handle to the same host, so one host can
/// serve a TCP listener, stdio and in-memory streams at the same time.
///
/// The methods that start tasks (`attach`, `serve_*`, `bind_tcp`, `with_host`, `shutdown`)
/// must be called from within a tokio runtime.
#[derive(Clone)]
pub struct Server {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("options", &self.shared.options)
            .field("connections", &self.connection_count())
            .finish_non_exhaustive()
    }
}

/// A connection attached with [`Server::attach`].
#[derive(Clone, Debug)]
pub struct Connection {
    id: ConnId,
    done: watch::Receiver<bool>,
}

impl Connection {
    /// The host's id for this connection.
    pub fn id(&self) -> ConnId {
        self.id
    }

    /// Whether the connection has ended (and `Host::handle_eof` was called for it).
    pub fn is_closed(&self) -> bool {
        *self.done.borrow()
    }

    /// Waits until the connection has ended: its frames were flushed (or the flush timed
    /// out or failed), its sink was shut down and the host was told with `handle_eof`.
    pub async fn closed(&self) {
        let mut done = self.done.clone();
        // An error means the sender is gone, which only happens once the connection ended.
        let _ = done.wait_for(|d| *d).await;
    }
}

impl Server {
    /// A server for a new [`Host`] built from `config`, with default [`ServerOptions`]
    /// (Content-Length framing).
    pub fn new(config: HostConfig) -> Self {
        Server::with_options(config, ServerOptions::default())
    }

    /// A server for a new [`Host`] built from `config`, with the given options.
    pub fn with_options(config: HostConfig, options: ServerOptions) -> Self {
        Server::from_host(Host::new(config), options)
    }

    /// A server that drives an existing host (for example one that already has state).
    pub fn from_host(host: Host, options: ServerOptions) -> Self {
        Server::build(host, options, None)
    }

    /// A server whose sessions outlive the process: a new [`Host`] built from `config` with
    /// [`HostConfig::report_persisted_events`] set, into which every session loaded by
    /// `store` is restored first (problems found while loading are logged as warnings). Then
    /// every persisted event is appended to the store before the frames carrying it can be
    /// written to any connection, `session.delete` removes the session's stored state, and
    /// the store is synced when a `serve_*` call returns. With
    /// [`SyncPolicy::EveryEvent`] each connection's frames wait until the events they carry
    /// are synced. When `config.workspace_root` is unset it becomes the store's data
    /// directory, so `workspacePath` names the session's directory in the store. See the
    /// `agentwire-store` crate docs for what reaches the disk when.
    pub fn with_store(mut config: HostConfig, options: ServerOptions, mut store: Store) -> Self {
        config.report_persisted_events = true;
        if config.workspace_root.is_none() {
            config.workspace_root = Some(store.data_dir().to_string_lossy().into_owned());
        }
        let mut host = Host::new(config);
        let found = store.loaded().len();
        let problems = store.restore(&mut host, now());
        let rejected = problems
            .iter()
            .filter(|p| matches!(p, agentwire_store::Problem::Rejected { .. }))
            .count();
        for problem in &problems {
            warn!("session store: {problem}");
        }
        info!(
            dir = %store.data_dir().display(),
            sessions = found - rejected,
            "sessions loaded"
        );
        Server::build(host, options, Some(store))
    }

    fn build(host: Host, options: ServerOptions, mut store: Option<Store>) -> Self {
        let (shutdown, _) = watch::channel(None);
        let (live, _) = watch::channel(0);
        let sync = store.as_ref().map(Store::sync_handle);
        let synced = match store.as_mut() {
            Some(store) if store.options().sync == SyncPolicy::EveryEvent => {
                let (tx, _) = watch::channel(0u64);
                let tx = Arc::new(tx);
                let listener = tx.clone();
                store.set_sync_listener(move |seq| {
                    listener.send_replace(seq);
                });
                Some(tx)
            }
            _ => None,
        };
        Server {
            shared: Arc::new(Shared {
                processes: Arc::default(),
                inner: Mutex::new(Inner {
                    host,
                    conns: HashMap::new(),
                    armed: None,
                    shutting_down: false,
                    store,
                    farewell: None,
                }),
                timer: Arc::new(Notify::new()),
                timer_started: AtomicBool::new(false),
                shutdown,
                live,
                options,
                sync,
                synced,
            }),
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

    fn flush_store_logged(&self) {
        if let Err(e) = self.flush_store() {
            warn!(error = %e, "session store: fsync failed");
        }
    }

    /// The options this server was built with.
    pub fn options(&self) -> ServerOptions {
        self.shared.options
    }

    /// How many connections are open (attached and not yet ended).
    pub fn connection_count(&self) -> usize {
        *self.shared.live.borrow()
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
    /// example the two halves of a socket, or of a `tokio::io::duplex` pair), and returns
    /// at once. The connection ends on end of input, on an IO error, or when the host closes
    /// it; [`Connection::closed`] waits for that.
    pub fn attach<R, W>(&self, reader: R, writer: W) -> Connection
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let shared = &self.shared;
        shared.ensure_timer();
        let (done, done_rx) = watch::channel(false);
        let (framing, dialect) = (shared.options.framing, shared.options.dialect);
        let (state, shutting_down) = shared.with_inner(|inner, now| {
            let id = inner.host.open_with(now, dialect, framing);
            let state = Arc::new(ConnState {
                id,
                wake: Notify::new(),
                closing: AtomicBool::new(false),
                done,
                tasks: Mutex::new(Tasks::default()),
                farewell: Mutex::new(inner.farewell.clone()),
            });
            inner.conns.insert(id, state.clone());
            shared.live.send_replace(inner.conns.len());
            (state, inner.shutting_down)
        });
        debug!(conn = %state.id, "connection opened");
        let reader_task = tokio::spawn(reader_task(shared.clone(), state.clone(), reader));
        let writer_task = tokio::spawn(writer_task(shared.clone(), state.clone(), writer));
        {
            let mut tasks = lock(&state.tasks);
            tasks.reader = Some(reader_task.abort_handle());
            tasks.writer = Some(writer_task.abort_handle());
            if tasks.finished {
                tasks.abort_all();
            } else if state.closing.load(Ordering::SeqCst) {
                if let Some(r) = tasks.reader.take() {
                    r.abort();
                }
            }
        }
        if shutting_down {
            shared.begin_close(&state, "server is shutting down");
        }
        Connection {
            id: state.id,
            done: done_rx,
        }
    }

    /// Serves one connection over `reader`/`writer` until it ends or the server shuts down.
    pub async fn serve_stream<R, W>(&self, reader: R, writer: W) -> Stopped
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let conn = self.attach(reader, writer);
        tokio::select! {
            _ = conn.closed() => {}
            _ = self.shutdown_requested() => {
                // Shutdown closes every connection; this one flushes within the flush timeout.
                let _ = tokio::time::timeout(self.grace(), conn.closed()).await;
            }
        }
        self.flush_store_logged();
        match self.shared.shutdown.borrow().clone() {
            Some(reason) => Stopped::Shutdown { reason },
            None => Stopped::Disconnected,
        }
    }

    /// Serves one connection on this process's stdin and stdout until stdin ends or the host
    /// shuts down. Only frames are written to stdout.
    ///
    /// tokio reads stdin on a blocking thread that cannot be interrupted, so after this
    /// returns the process should exit (or drop its runtime with
    /// `Runtime::shutdown_timeout`) rather than wait for that read.
    pub async fn serve_stdio(&self) -> Stopped {
        self.serve_stream(tokio::io::stdin(), tokio::io::stdout())
            .await
    }

    /// Binds a TCP listener on `addr` (port 0 picks a free port) and returns its local
    /// address together with the future that serves it (see [`Server::serve_tcp`]).
    pub async fn bind_tcp(
        &self,
        addr: impl ToSocketAddrs,
    ) -> io::Result<(SocketAddr, impl Future<Output = Stopped> + Send + 'static)> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let server = self.clone();
        Ok((local, async move { server.serve_tcp(listener).await }))
    }

    /// Accepts connections on `listener` and serves each of them until the host shuts
    /// down; then stops accepting, flushes and closes every connection (bounded by the
    /// flush timeout) and returns. Failed accepts are logged and retried.
    pub async fn serve_tcp(&self, listener: TcpListener) -> Stopped {
        self.shared.ensure_timer();
        loop {
            tokio::select! {
                reason = self.shutdown_requested() => {
                    drop(listener);
                    self.wait_all_closed().await;
                    self.flush_store_logged();
                    return Stopped::Shutdown { reason };
                }
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        let (r, w) = stream.into_split();
                        let conn = self.attach(r, w);
                        debug!(conn = %conn.id(), %peer, "accepted");
                    }
                    Err(e) => {
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
            }
        }
    }

    /// Waits until the host asks to shut down (or [`Server::shutdown`] is called) and returns
    /// the reason. Returns at once if that already happened.
    pub async fn shutdown_requested(&self) -> String {
        let mut rx = self.shared.shutdown.subscribe();
        let reason = match rx.wait_for(|r| r.is_some()).await {
            Ok(r) => r.clone(),
            Err(_) => None,
        };
        reason.unwrap_or_default()
    }

    /// Shuts the server down as if the host had output `Shutdown { reason }`: the listener
    /// stops accepting, every connection flushes what the host has queued for it (bounded by
    /// the flush timeout), receives the [`SHUTDOWN_NOTIFICATION`] with `reason` and is closed,
    /// the session store is synced, and the `serve_*` futures return [`Stopped::Shutdown`].
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
        let mut live = self.shared.live.subscribe();
        let _ = tokio::time::timeout(self.grace(), live.wait_for(|n| *n == 0)).await;
    }

    fn grace(&self) -> Duration {
        self.shared.options.flush_timeout + Duration::from_secs(1)
    }
}

/// A handle to a [`Server`] that does not keep it alive.
#[derive(Clone)]
pub(crate) struct WeakServer(Weak<Shared>);

impl WeakServer {
    /// The server, if a handle to it still exists.
    pub(crate) fn upgrade(&self) -> Option<Server> {
        self.0.upgrade().map(|shared| Server { shared })
    }
}

impl Server {
    pub(crate) fn downgrade(&self) -> WeakServer {
        WeakServer(Arc::downgrade(&self.shared))
    }
}

/// State shared by the server handles and all tasks.
struct Shared {
    inner: Mutex<Inner>,
    /// Commands run for clients (`session.shell.exec`).
    processes: Arc<crate::shell::Processes>,
    /// Wakes the timer task when the host's deadline changed.
    timer: Arc<Notify>,
    timer_started: AtomicBool,
    /// `Some(reason)` once the server is shutting down.
    shutdown: watch::Sender<Option<String>>,
    /// Number of open connections.
    live: watch::Sender<usize>,
    options: ServerOptions,
    /// Syncs the store without the host lock.
    sync: Option<SyncHandle>,
    /// With `SyncPolicy::EveryEvent`: the append sequence number every completed sync covers.
    synced: Option<Arc<watch::Sender<u64>>>,
}

struct Inner {
    host: Host,
    conns: HashMap<ConnId, Arc<ConnState>>,
    /// The deadline the timer task last saw.
    armed: Option<Timestamp>,
    shutting_down: bool,
    /// Where persisted events go (appended while draining, under the lock, before any writer
    /// can take the frames produced by the same input).
    store: Option<Store>,
    /// Once shutting down: the framed [`SHUTDOWN_NOTIFICATION`] each connection ends with.
    farewell: Option<Bytes>,
}

struct ConnState {
    id: ConnId,
    /// Wakes the writer: frames are ready, or the connection is closing.
    wake: Notify,
    /// Set once the connection should end after its queued frames are written.
    closing: AtomicBool,
    /// `true` once the connection has ended.
    done: watch::Sender<bool>,
    tasks: Mutex<Tasks>,
    /// Written after the last frame, before the stream is shut down (server shutdown).
    farewell: Mutex<Option<Bytes>>,
}

#[derive(Default)]
struct Tasks {
    reader: Option<AbortHandle>,
    writer: Option<AbortHandle>,
    watchdog: Option<AbortHandle>,
    finished: bool,
}

impl Tasks {
    fn abort_all(&mut self) {
        for t in [self.reader.take(), self.writer.take(), self.watchdog.take()]
            .into_iter()
            .flatten()
        {
            t.abort();
        }
    }
}

/// Which task is ending a connection (it must not abort itself).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Caller {
    Reader,
    Writer,
    Watchdog,
}

/// Work found while draining the host, done after its lock is released.
enum Deferred {
    Close(Arc<ConnState>, String),
    Shutdown(String),
    /// `Output::ShellExec` / `Output::ShellKill`, performed after the lock is released.
    Shell(Output),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside the host is a bug; keep serving the other connections.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Lets the timer task notice that the server is gone.
        self.timer.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
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
                state.wake.notify_one();
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
                // Stored now, before this lock is released: no writer can take the frames that
                // carry these events before their lines are written.
                store @ (Output::Persist { .. } | Output::SessionDeleted { .. }) => {
                    if let Some(Err(e)) = inner.store.as_mut().map(|s| s.apply(&store)) {
                        warn!("{e}");
                    }
                }
                shell @ (Output::ShellExec { .. } | Output::ShellKill { .. }) => {
                    deferred.push(Deferred::Shell(shell));
                }
                other => tracing::debug!(?other, "ignoring host output"),
            }
        }
        let deadline = inner.host.poll_timeout();
        if deadline != inner.armed {
            inner.armed = deadline;
            self.timer.notify_one();
        }
    }

    fn start_shutdown(&self, inner: &mut Inner, reason: String, deferred: &mut Vec<Deferred>) {
        if inner.shutting_down {
            return;
        }
        inner.shutting_down = true;
        let farewell = farewell(&self.options, &reason);
        inner.farewell = Some(farewell.clone());
        for state in inner.conns.values() {
            *lock(&state.farewell) = Some(farewell.clone());
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
                    self.shutdown.send_replace(Some(reason));
                }
                Deferred::Shell(Output::ShellExec {
                    process_id,
                    command,
                    cwd,
                    timeout_ms,
                }) => {
                    let shared = Arc::clone(self);
                    let with_host: crate::shell::WithHost = Arc::new(move |f| {
                        shared.with_inner(|inner, now| f(&mut inner.host, now));
                    });
                    self.processes
                        .start(with_host, process_id, command, cwd, timeout_ms);
                }
                Deferred::Shell(Output::ShellKill { process_id, .. }) => {
                    self.processes.kill(&process_id);
                }
                Deferred::Shell(_) => {}
            }
        }
    }

    /// Starts closing a connection: stop reading, let the writer flush what is queued, and
    /// drop the connection anyway once the flush timeout has passed.
    fn begin_close(self: &Arc<Self>, state: &Arc<ConnState>, reason: &str) {
        if state.closing.swap(true, Ordering::SeqCst) {
            return;
        }
        debug!(conn = %state.id, %reason, "closing connection");
        state.wake.notify_one();
        let mut tasks = lock(&state.tasks);
        if tasks.finished {
            return;
        }
        if let Some(reader) = tasks.reader.take() {
            reader.abort();
        }
        let shared = self.clone();
        let conn = state.clone();
        let timeout = self.options.flush_timeout;
        let watchdog = tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            debug!(conn = %conn.id, "flush timed out");
            shared.finish(&conn, Caller::Watchdog);
        });
        tasks.watchdog = Some(watchdog.abort_handle());
    }

    /// Ends a connection at once: tells the host, stops the other tasks, signals `done`.
    fn finish(self: &Arc<Self>, state: &Arc<ConnState>, caller: Caller) {
        self.with_inner(|inner, now| forget(inner, now, state.id, &self.live));
        self.finished(state, caller);
    }

    /// After the host was told: stop the other tasks and signal `done`.
    fn finished(&self, state: &ConnState, caller: Caller) {
        {
            let mut tasks = lock(&state.tasks);
            tasks.finished = true;
            let mine = match caller {
                Caller::Reader => tasks.reader.take(),
                Caller::Writer => tasks.writer.take(),
                Caller::Watchdog => tasks.watchdog.take(),
            };
            drop(mine);
            tasks.abort_all();
        }
        state.done.send_replace(true);
        debug!(conn = %state.id, "connection ended");
    }

    fn ensure_timer(self: &Arc<Self>) {
        if !self.timer_started.swap(true, Ordering::SeqCst) {
            tokio::spawn(timer_task(Arc::downgrade(self), self.timer.clone()));
        }
    }
}

/// The framed [`SHUTDOWN_NOTIFICATION`] for this server's dialect and framing.
fn farewell(options: &ServerOptions, reason: &str) -> Bytes {
    let method = match options.dialect {
        Dialect::Acp => "_agentwire/shutdown",
        _ => SHUTDOWN_NOTIFICATION,
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "method": method,
        "params": {"reason": reason},
    });
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let mut buf = BytesMut::with_capacity(body.len() + 32);
    encode_frame(options.framing, &body, &mut buf);
    buf.freeze()
}

/// Removes a connection and tells the host, once. Runs under the lock.
fn forget(inner: &mut Inner, now: Timestamp, id: ConnId, live: &watch::Sender<usize>) -> bool {
    if inner.conns.remove(&id).is_none() {
        return false;
    }
    inner.host.handle_eof(now, id);
    live.send_replace(inner.conns.len());
    true
}

async fn reader_task<R>(shared: Arc<Shared>, state: Arc<ConnState>, mut reader: R)
where
    R: AsyncRead + Unpin,
{
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) => {
                // The peer finished sending; still write what is queued for it.
                shared.begin_close(&state, "end of input");
                return;
            }
            Ok(n) => {
                let bytes = &buf[..n];
                shared.with_inner(|inner, now| {
                    if inner.conns.contains_key(&state.id) {
                        inner.host.handle_bytes(now, state.id, bytes);
                    }
                });
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                debug!(conn = %state.id, error = %e, "read failed");
                shared.finish(&state, Caller::Reader);
                return;
            }
        }
    }
}

async fn writer_task<W>(shared: Arc<Shared>, state: Arc<ConnState>, writer: W)
where
    W: AsyncWrite + Unpin,
{
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER, writer);
    let mut batch: Vec<Bytes> = Vec::new();
    let result: io::Result<()> = 'run: loop {
        let (ended, mark) = shared.with_inner(|inner, now| {
            // Every queued frame up to the batch limit, with one host call.
            inner
                .host
                .poll_transmit_batch(state.id, WRITE_BATCH_BYTES, &mut batch);
            // Nothing left and closing: tell the host in the same critical section, so no
            // frame can be queued between the last check and `handle_eof`.
            if batch.is_empty() && state.closing.load(Ordering::SeqCst) {
                forget(inner, now, state.id, &shared.live);
                return (true, None);
            }
            // Every event in these frames was appended up to this mark (`every-event` only).
            let mark = match batch.is_empty() {
                true => None,
                false => inner.store.as_ref().and_then(Store::durability_mark),
            };
            // A connection the host already forgot (ended elsewhere) has nothing to write.
            (
                batch.is_empty() && !inner.conns.contains_key(&state.id),
                mark,
            )
        });
        if ended {
            break Ok(());
        }
        if batch.is_empty() {
            state.wake.notified().await;
            continue;
        }
        if let (Some(mark), Some(synced)) = (mark, &shared.synced) {
            // Hold the frames until their events are on disk; other connections go on.
            let _ = synced.subscribe().wait_for(|s| *s >= mark).await;
        }
        for frame in batch.drain(..) {
            if let Err(e) = writer.write_all(&frame).await {
                break 'run Err(e);
            }
        }
        if let Err(e) = writer.flush().await {
            break Err(e);
        }
    };
    match result {
        Ok(()) => {
            let farewell = lock(&state.farewell).take();
            let _ = tokio::time::timeout(shared.options.flush_timeout, async {
                if let Some(frame) = farewell {
                    writer.write_all(&frame).await?;
                    writer.flush().await?;
                }
                writer.shutdown().await
            })
            .await;
            shared.finished(&state, Caller::Writer);
        }
        Err(e) => {
            debug!(conn = %state.id, error = %e, "write failed");
            shared.finish(&state, Caller::Writer);
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
                    // Already due: fire now rather than at tokio's next 1 ms timer tick (an
                    // agent that yields with a zero-length timer would otherwise wait ~1 ms).
                    tokio::task::yield_now().await;
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    shared.with_inner(|inner, now| inner.host.handle_timeout(now));
                    continue;
                }
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {
                        let Some(shared) = shared.upgrade() else {
                            return;
                        };
                        shared.with_inner(|inner, now| inner.host.handle_timeout(now));
                    }
                    _ = wake.notified() => {}
                }
            }
        }
    }
}
