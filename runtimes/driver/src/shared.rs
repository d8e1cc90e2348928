//! The state every handle and task of one driver shares, and what the driver does with the
//! host's outputs. Runs the same on every runtime: tasks and timers come through function
//! pointers taken from the [`Runtime`](crate::Runtime).
//!
//! Layers: the effect executors ([`crate::effects`]) sit below this module and report back
//! through its [`Port`] implementation; the connection tasks (`tasks.rs`), the shared log's
//! handle (`log.rs`), the signal handler and the public [`Driver`](crate::Driver) sit above.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agentwire::host::{
    ClusterOutput, ConnId, ConnectionOutput, Dialect, Effect, EffectEvent, EffectId, Host, Output,
    StoreOutput,
};
use agentwire::serve::ServerOptions;
use agentwire::{Framing, Timestamp};
use agentwire_store::{Store, SyncHandle};
use bytes::Bytes;
use futures_lite::future;
use tracing::{debug, warn};

use crate::clock::now;
use crate::effects::{Effects, Port};
use crate::farewell::farewell;
use crate::sync::{lock, Flag, Notify, Watch};
use crate::Task;

/// State shared by the driver handles and all tasks.
pub(crate) struct Shared {
    pub(crate) inner: Mutex<Inner>,
    /// Wakes the timer task when the host's deadline changed.
    pub(crate) timer: Arc<Notify>,
    pub(crate) timer_started: AtomicBool,
    /// `Some(reason)` once the server is shutting down.
    pub(crate) shutdown: Watch<Option<String>>,
    /// Number of open connections (attached, and the host not yet told of their end).
    pub(crate) live: Watch<usize>,
    /// Number of connections whose tasks have not finished: a closing connection still
    /// writes the shutdown notice and closes its stream after the host forgot it.
    pub(crate) unfinished: Watch<usize>,
    pub(crate) options: ServerOptions,
    /// Syncs the store without the host lock.
    pub(crate) sync: Option<SyncHandle>,
    /// With `SyncPolicy::EveryEvent`: the append sequence number every completed sync covers.
    pub(crate) synced: Option<Arc<Watch<u64>>>,
    /// Frames are written only before this instant, if set ([`crate::HostHandle::release_until`]).
    pub(crate) release_until: Watch<Option<Instant>>,
    /// The effects in flight (`Output::Effect`: processes, HTTP exchanges, file operations).
    effects: Effects,
    /// The runtime's [`Runtime::spawn`](crate::Runtime::spawn).
    spawn: fn(Task),
    /// The runtime's [`Runtime::sleep`](crate::Runtime::sleep), boxed.
    sleep: fn(Duration) -> Task,
    /// The runtime's [`Runtime::yield_now`](crate::Runtime::yield_now), boxed.
    yield_now: fn() -> Task,
}

pub(crate) struct Inner {
    pub(crate) host: Host,
    pub(crate) conns: HashMap<ConnId, Arc<ConnState>>,
    /// The deadline the timer task last saw.
    pub(crate) armed: Option<Timestamp>,
    pub(crate) shutting_down: bool,
    /// Where persisted events go (appended while draining, under the lock, before any writer
    /// can take the frames produced by the same input).
    pub(crate) store: Option<Store>,
    /// Once shutting down: the reason each connection's farewell gives.
    pub(crate) farewell: Option<String>,
    /// A shared, asynchronous session log (a cluster engine), instead of or beside the store.
    pub(crate) log: Option<Box<dyn LogSink>>,
    /// The mark of the last event handed to `log`.
    pub(crate) log_mark: u64,
}

/// What the driver hands a shared session log ([`crate::SessionLog`]), under the host lock.
pub(crate) trait LogSink: Send {
    /// A persisted event, numbered by `mark`.
    fn persist(&mut self, session: &str, event: Bytes, mark: u64);
    /// A deleted session.
    fn deleted(&mut self, session: &str);
    /// A session to look up.
    fn load(&mut self, session: String);
    /// Frames to relay to the node that owns `session`.
    fn forward(&mut self, conn: ConnId, session: String, frames: Vec<Bytes>);
    /// A connection whose relays end.
    fn forward_closed(&mut self, conn: ConnId);
}

impl Inner {
    /// The mark frames taken from the host now must wait for, if any: the store's (with
    /// `every-event`) or the shared log's.
    pub(crate) fn durability_mark(&self) -> Option<u64> {
        match (&self.store, &self.log) {
            (Some(store), _) if store.durability_mark().is_some() => store.durability_mark(),
            (_, Some(_)) => Some(self.log_mark),
            _ => None,
        }
    }
}

pub(crate) struct ConnState {
    pub(crate) id: ConnId,
    /// Wakes the writer: frames are ready, or the connection is closing.
    pub(crate) wake: Notify,
    /// Set once the connection should end after its queued frames are written; the reader
    /// stops when it is set.
    pub(crate) closing: Flag,
    /// Set once the connection has ended; every task of the connection stops when it is set.
    pub(crate) done: Flag,
    /// Written after the last frame, before the stream is closed (server shutdown).
    pub(crate) farewell: Mutex<Option<Bytes>>,
    /// The connection's dialect and framing (its farewell is written in them).
    pub(crate) dialect: agentwire::host::Dialect,
    pub(crate) framing: agentwire::Framing,
}

/// How long connections stay open once a shutdown began, their requests answered with a
/// shutting-down error, before they get their farewell and close.
const SHUTDOWN_DRAIN: std::time::Duration = std::time::Duration::from_millis(200);

/// Work found while draining the host, done after its lock is released: what happens to
/// connections, and the host's effects (performed by [`crate::effects`]).
enum Work {
    Close(Arc<ConnState>, String),
    /// Wait [`SHUTDOWN_DRAIN`], then close every connection and stop.
    Drain(String),
    Shutdown(String),
    Effect(Effect),
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Lets the timer task notice that the server is gone.
        self.timer.notify();
    }
}

impl Shared {
    pub(crate) fn new(
        inner: Inner,
        options: ServerOptions,
        spawn: fn(Task),
        sleep: fn(Duration) -> Task,
        yield_now: fn() -> Task,
        synced: Option<Arc<Watch<u64>>>,
    ) -> Self {
        Shared {
            sync: inner.store.as_ref().map(Store::sync_handle),
            inner: Mutex::new(inner),
            timer: Arc::new(Notify::new()),
            timer_started: AtomicBool::new(false),
            shutdown: Watch::new(None),
            live: Watch::new(0),
            unfinished: Watch::new(0),
            options,
            synced,
            release_until: Watch::new(None),
            effects: Effects::default(),
            spawn,
            sleep,
            yield_now,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        (self.spawn)(Box::pin(task));
    }

    pub(crate) fn sleep(&self, duration: Duration) -> Task {
        (self.sleep)(duration)
    }

    pub(crate) fn yield_now(&self) -> Task {
        (self.yield_now)()
    }

    /// Runs `fut`, giving up after `limit`; `None` if it did not finish in time.
    pub(crate) async fn timeout<T>(
        &self,
        limit: Duration,
        fut: impl Future<Output = T>,
    ) -> Option<T> {
        future::or(async { Some(fut.await) }, async {
            self.sleep(limit).await;
            None
        })
        .await
    }

    /// Runs `f` under the host lock, then drains the host and acts on what it asked for.
    pub(crate) fn with_inner<T>(self: &Arc<Self>, f: impl FnOnce(&mut Inner, Timestamp) -> T) -> T {
        let mut work = Vec::new();
        let out = {
            let mut inner = self.lock();
            let out = f(&mut inner, now());
            self.drain(&mut inner, &mut work);
            out
        };
        self.perform(work);
        out
    }

    /// Drains `poll_ready` and `poll_output` and re-arms the timer. Runs under the lock.
    fn drain(&self, inner: &mut Inner, work: &mut Vec<Work>) {
        // An output can be an input again (a lookup with nothing to look in): drain until
        // both are empty.
        loop {
            // `poll_ready` hands out each ready connection once; the bound only guards
            // against a host that keeps reporting the same one.
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
            let Some(output) = inner.host.poll_output() else {
                break;
            };
            self.handle_output(inner, output, work);
            while let Some(output) = inner.host.poll_output() {
                self.handle_output(inner, output, work);
            }
        }
        let deadline = inner.host.poll_timeout();
        if deadline != inner.armed {
            inner.armed = deadline;
            self.timer.notify();
        }
    }

    /// One output of the host. Every kind is named (no `_` arm, here or in the nested
    /// enums): a new kind does not compile until it is handled here.
    fn handle_output(&self, inner: &mut Inner, output: Output, work: &mut Vec<Work>) {
        match output {
            Output::Connection(ConnectionOutput::Close { conn, reason }) => {
                if let Some(state) = inner.conns.get(&conn) {
                    work.push(Work::Close(state.clone(), reason));
                }
            }
            Output::Connection(ConnectionOutput::Shutdown { reason }) => {
                self.start_shutdown(inner, reason, work)
            }
            // Stored now, before this lock is released: no writer can take the frames that
            // carry these events before their lines are written.
            Output::Store(output) => {
                if let Some(Err(e)) = inner.store.as_mut().map(|s| s.apply(&output)) {
                    warn!("{e}");
                }
                if let Some(log) = inner.log.as_mut() {
                    match output {
                        StoreOutput::Persist { session, event } => {
                            inner.log_mark += 1;
                            log.persist(&session, event, inner.log_mark);
                        }
                        StoreOutput::SessionDeleted { session } => log.deleted(&session),
                    }
                }
            }
            // Only a host with a shared log looks sessions up; without one there is nothing
            // to find.
            Output::Cluster(ClusterOutput::LoadSession { session }) => match inner.log.as_mut() {
                Some(log) => log.load(session),
                None => inner.host.cluster().finish_session_lookup(now(), &session),
            },
            // Only a shared log forwards connections.
            Output::Cluster(ClusterOutput::Forward {
                conn,
                session,
                frames,
            }) => {
                if let Some(log) = inner.log.as_mut() {
                    log.forward(conn, session, frames);
                }
            }
            Output::Cluster(ClusterOutput::ForwardClosed { conn }) => {
                if let Some(log) = inner.log.as_mut() {
                    log.forward_closed(conn);
                }
            }
            Output::Effect(effect) => work.push(Work::Effect(effect)),
        }
    }

    fn start_shutdown(&self, inner: &mut Inner, reason: String, work: &mut Vec<Work>) {
        if inner.shutting_down {
            return;
        }
        inner.shutting_down = true;
        // From now on the host answers every request with a shutting-down error; the
        // connections stay open for a short drain so a request a client sent as the shutdown
        // began is answered, not lost with the connection.
        inner.host.runtime_stopping();
        inner.farewell = Some(reason.clone());
        work.push(Work::Drain(reason));
    }

    /// After the drain: every connection gets its farewell and closes; the server stops.
    fn close_all(&self, inner: &Inner, reason: &str, work: &mut Vec<Work>) {
        // Encoded once per dialect and framing, shared by every connection that speaks them.
        let mut encoded: Vec<((Dialect, Framing), Option<Bytes>)> = Vec::with_capacity(1);
        for state in inner.conns.values() {
            let key = (state.dialect, state.framing);
            let frame = match encoded.iter().find(|(k, _)| *k == key) {
                Some((_, frame)) => frame.clone(),
                None => {
                    let frame = farewell(state.dialect, state.framing, reason);
                    encoded.push((key, frame.clone()));
                    frame
                }
            };
            *lock(&state.farewell) = frame;
            work.push(Work::Close(
                state.clone(),
                "server is shutting down".to_owned(),
            ));
        }
        work.push(Work::Shutdown(reason.to_owned()));
    }

    /// Shuts down as if the host had output `Shutdown { reason }`.
    pub(crate) fn shutdown(self: &Arc<Self>, reason: String) {
        let mut work = Vec::new();
        {
            let mut inner = self.lock();
            self.start_shutdown(&mut inner, reason, &mut work);
        }
        self.perform(work);
    }

    fn perform(self: &Arc<Self>, work: Vec<Work>) {
        for item in work {
            match item {
                Work::Close(state, reason) => self.begin_close(&state, &reason),
                Work::Drain(reason) => {
                    let shared = self.clone();
                    self.spawn(async move {
                        shared.sleep(SHUTDOWN_DRAIN).await;
                        let mut work = Vec::new();
                        {
                            let inner = shared.lock();
                            shared.close_all(&inner, &reason, &mut work);
                        }
                        shared.perform(work);
                    });
                }
                Work::Shutdown(reason) => {
                    debug!(%reason, "shutting down");
                    // Nothing the server started outlives it.
                    self.effects.kill_all();
                    self.shutdown.set(Some(reason));
                }
                Work::Effect(effect) => {
                    let port: Arc<dyn Port> = self.clone();
                    self.effects.perform(&port, effect);
                }
            }
        }
    }

    /// Starts closing a connection: stop reading, let the writer flush what is queued, and
    /// drop the connection anyway once the flush timeout has passed.
    pub(crate) fn begin_close(self: &Arc<Self>, state: &Arc<ConnState>, reason: &str) {
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
        let limit = self.options.flush_timeout;
        self.spawn(async move {
            if shared.timeout(limit, conn.done.wait()).await.is_none() {
                debug!(conn = %conn.id, "flush timed out");
                shared.finish(&conn);
            }
        });
    }

    /// Ends a connection at once: tells the host, stops its tasks, signals `done`.
    pub(crate) fn finish(self: &Arc<Self>, state: &Arc<ConnState>) {
        self.with_inner(|inner, now| forget(inner, now, state.id, &self.live));
        self.finished(state);
    }

    /// After the host was told: stop the connection's tasks and signal `done`.
    pub(crate) fn finished(&self, state: &ConnState) {
        state.closing.set();
        if !state.done.set() {
            self.unfinished.update(|n| *n -= 1);
            debug!(conn = %state.id, "connection ended");
        }
    }

    /// Syncs the store, logging a failure.
    pub(crate) fn flush_store_logged(&self) {
        if let Some(Err(e)) = self.sync.as_ref().map(SyncHandle::flush) {
            warn!(error = %e, "session store: fsync failed");
        }
    }
}

/// The effect executors report through the driver: each report is an input to the host.
impl Port for Shared {
    fn report(self: Arc<Self>, id: EffectId, event: EffectEvent) {
        self.with_inner(|inner, now| inner.host.handle_effect(now, id, event));
    }

    fn spawn(&self, task: Task) {
        (self.spawn)(task);
    }

    fn sleep(&self, duration: Duration) -> Task {
        (self.sleep)(duration)
    }
}

/// Removes a connection and tells the host, once. Runs under the lock.
pub(crate) fn forget(inner: &mut Inner, now: Timestamp, id: ConnId, live: &Watch<usize>) -> bool {
    if inner.conns.remove(&id).is_none() {
        return false;
    }
    inner.host.handle_eof(now, id);
    live.set(inner.conns.len());
    true
}
