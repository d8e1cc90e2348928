//! A shared session log the driver hands persisted events to, asynchronously: the seam a
//! cluster engine (`agentwire-cluster` on NATS JetStream) plugs into.
//!
//! Unlike the file store, whose appends are synchronous page-cache writes, a shared log
//! acknowledges appends later. The driver numbers every persisted event (its *mark*) and
//! holds each connection's frames until the log reports, through [`HostHandle::durable`], that
//! every event up to the mark those frames carry is acknowledged: a client never sees an
//! event the log does not hold.

use std::sync::{Arc, Weak};
use std::time::Instant;

use agentwire::host::{ConnId, Host};
use agentwire::Framing;
use agentwire::Timestamp;
use bytes::Bytes;
use futures_lite::io::{AsyncRead, AsyncWrite};

use crate::shared::{LogSink, Shared};

/// A session log shared with other processes (see the module docs).
///
/// Every method is called under the host lock and must return at once: queue the work and
/// do it on a task of your own, then report back through the [`HostHandle`].
pub trait SessionLog: Send + 'static {
    /// Called once when the driver is built, with the handle the log reports through. Do not
    /// call [`HostHandle::with_host`] from inside this call.
    fn start(&mut self, host: HostHandle);
    /// Appends a persisted event of `session` (compact JSON). `mark` numbers the events
    /// handed to the log, 1, 2, 3, …; report [`HostHandle::durable`] once every event up to
    /// a mark is acknowledged.
    fn persist(&mut self, session: &str, event: Bytes, mark: u64);
    /// `session` was deleted: remove its log.
    fn deleted(&mut self, session: &str);
    /// A client named `session`, which the host has not loaded: restore it into the host if
    /// this process can serve it, then call `host.cluster().finish_session_lookup` (both through
    /// [`HostHandle::with_host`]).
    fn load(&mut self, session: String);
    /// Frames of a client connection for `session`, which another node owns
    /// (`ClusterOutput::Forward`): relay them, in order, to that node (the first for a connection
    /// and session opens the relay), and deliver its frames with
    /// `host.cluster().deliver_forwarded`.
    fn forward(&mut self, conn: ConnId, session: String, frames: Vec<Bytes>);
    /// A client connection that relayed sessions ended (`ClusterOutput::ForwardClosed`): close all
    /// its relays.
    fn forward_closed(&mut self, conn: ConnId);
}

/// The driver hands a session log what it is owed through [`LogSink`].
impl LogSink for Box<dyn SessionLog> {
    fn persist(&mut self, session: &str, event: Bytes, mark: u64) {
        SessionLog::persist(&mut **self, session, event, mark);
    }

    fn deleted(&mut self, session: &str) {
        SessionLog::deleted(&mut **self, session);
    }

    fn load(&mut self, session: String) {
        SessionLog::load(&mut **self, session);
    }

    fn forward(&mut self, conn: ConnId, session: String, frames: Vec<Bytes>) {
        SessionLog::forward(&mut **self, conn, session, frames);
    }

    fn forward_closed(&mut self, conn: ConnId) {
        SessionLog::forward_closed(&mut **self, conn);
    }
}

/// What a [`SessionLog`] reports through: the host (under its lock) and the durability mark.
#[derive(Clone)]
pub struct HostHandle {
    pub(crate) shared: Weak<Shared>,
}

impl std::fmt::Debug for HostHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostHandle")
            .field("alive", &(self.shared.strong_count() > 0))
            .finish()
    }
}

impl HostHandle {
    /// Runs `f` on the host under its lock, then does what every call into the host is
    /// followed by (wake writers, act on outputs, re-arm the timer). `None` once the driver
    /// is gone.
    pub fn with_host<T>(&self, f: impl FnOnce(&mut Host, Timestamp) -> T) -> Option<T> {
        let shared: Arc<Shared> = self.shared.upgrade()?;
        Some(shared.with_inner(|inner, now| f(&mut inner.host, now)))
    }

    /// Serves one more connection over `reader`/`writer` (for example an in-memory pipe that
    /// relays a client of another node), as `Driver::attach` does. `None` once the driver is
    /// gone.
    pub fn attach<Rd, Wr>(&self, reader: Rd, writer: Wr) -> Option<ConnId>
    where
        Rd: AsyncRead + Unpin + Send + 'static,
        Wr: AsyncWrite + Unpin + Send + 'static,
    {
        let shared = self.shared.upgrade()?;
        Some(crate::tasks::attach_streams(&shared, reader, writer).id)
    }

    /// [`HostHandle::attach`] for a connection speaking `dialect` over `framing` (a client
    /// of another node that speaks another dialect than this driver's own connections).
    pub fn attach_with<Rd, Wr>(
        &self,
        dialect: agentwire::host::Dialect,
        framing: Framing,
        reader: Rd,
        writer: Wr,
    ) -> Option<ConnId>
    where
        Rd: AsyncRead + Unpin + Send + 'static,
        Wr: AsyncWrite + Unpin + Send + 'static,
    {
        let shared = self.shared.upgrade()?;
        Some(crate::tasks::attach_streams_with(&shared, dialect, framing, reader, writer).id)
    }

    /// The framing of the driver's connections.
    pub fn framing(&self) -> Option<Framing> {
        self.shared.upgrade().map(|s| s.options.framing)
    }

    /// Every event up to `mark` is acknowledged by the log: frames carrying them may go out.
    pub fn durable(&self, mark: u64) {
        if let Some(synced) = self.shared.upgrade().and_then(|s| s.synced.clone()) {
            synced.update(|m| *m = (*m).max(mark));
        }
    }

    /// Frames go out only before `deadline`; once it has passed they wait until a later one
    /// is set. A cluster node passes its lease's validity: once it can no longer trust its
    /// lease another node may own its sessions, so nothing it emits from then on (a stale
    /// `getMessages`, a streaming delta) reaches a client, even before the node notices.
    pub fn release_until(&self, deadline: Instant) {
        if let Some(shared) = self.shared.upgrade() {
            shared.release_until.set(Some(deadline));
        }
    }

    /// Shuts the server down as `Driver::shutdown` does (for a log that can no longer keep
    /// its promise, e.g. it lost its ownership of a session).
    pub fn shutdown(&self, reason: impl Into<String>) {
        if let Some(shared) = self.shared.upgrade() {
            shared.shutdown(reason.into());
        }
    }
}
