//! A durable session store for the [`agentwire`] host: sessions outlive the process, as
//! they do with the real Copilot CLI (`<COPILOT_HOME>/session-state/<sessionId>/`).
//!
//! # Layout
//!
//! ```text
//! <data-dir>/session-state/<sessionId>/events.jsonl
//! ```
//!
//! Each session's persisted events are appended to its `events.jsonl`, one event per line, in
//! order: exactly the bytes of the host's [`StoreOutput::Persist`] followed by `\n`. Ephemeral
//! events (streaming deltas, `session.idle`, …) are never written: the host never reports
//! them. `session.delete` ([`StoreOutput::SessionDeleted`]) removes the session's directory.
//! Session ids are client-chosen, so a directory name is the id with every byte other than
//! `[A-Za-z0-9_-]` (and a `.` that is not the first byte) written as `%XX`; UUIDs are stored
//! under their own name.
//!
//! On start, [`Store::open`] reads every session directory and [`Store::restore`] hands each
//! log to `Host::restore_session`, so `session.list`, `session.getMetadata`,
//! `session.getMessages` (full history) and `session.resume` (continuing the `parentId`
//! chain) work for sessions of earlier runs.
//!
//! # When data reaches the disk
//!
//! * **Every event is written before any client can see it.** [`Store::append`] writes the
//!   line with a single `write(2)` on a file opened with `O_APPEND`. A runtime calls it while
//!   it drains the host's outputs, and the host hands out the `Persist` of an event before the
//!   frames carrying that event can be taken (`agentwire-tokio` drains outputs under the host
//!   lock before any writer task is woken). Once `write` returns, the line is in the kernel's
//!   page cache: it survives the process being killed (`SIGKILL`, an abort, the OOM killer).
//!   So **an event a client has received is in the log even if the server is killed right
//!   after**; a kill can at worst leave a torn last line that no client saw, which the next
//!   start detects, cuts off the file and reports.
//! * **Power loss or a kernel crash** loses what the kernel had not written back yet, and what
//!   that is depends on the [`SyncPolicy`] (`fsync`):
//!   * [`SyncPolicy::Never`] (the default): the kernel writes dirty pages back on its own
//!     schedule (on Linux typically within about 30 s, `vm.dirty_expire_centisecs`), so a power
//!     loss can lose the last half minute or so of events, including events clients saw. A
//!     graceful shutdown ([`Store::flush`]) syncs everything.
//!   * [`SyncPolicy::Interval`]: a background thread syncs the written logs every interval; a
//!     power loss loses at most about one interval of events.
//!   * [`SyncPolicy::EveryEvent`]: group commit. A background thread syncs as soon as events
//!     were appended, covering every append made so far with one `fsync` per log, and reports
//!     the covered sequence number ([`Store::set_sync_listener`]). A runtime holds the frames
//!     it takes from the host until the sync covering [`Store::durability_mark`] (read when it
//!     took them) is done, so **a client never sees an event that a power loss can lose**. The
//!     cost is latency (one `fsync` per batch of events), not throughput of the protocol loop.
//!
//!   In every policy a crash can leave a torn last line (repaired on load), and a file system
//!   that loses data it acknowledged with `fsync` (or an `fsync` error, logged) weakens the
//!   guarantee accordingly.
//!
//! # Why the appends are synchronous
//!
//! The issue asks that writes never block the protocol loop's other connections. The
//! appends here are synchronous on purpose: a `write` into the page cache is a copy of the
//! line into kernel memory, microseconds, the same order as encoding the event's frame, which
//! the host does anyway for the same input. Nothing in the append waits for the disk, so
//! there is no queue to bound and no backpressure to apply: the cost of storing an event is
//! charged to the input that produced it, like the rest of the host's work for it. The part
//! that does wait for the disk, `fsync`, runs on the store's own thread
//! ([`SyncPolicy::EveryEvent`] and [`SyncPolicy::Interval`]); with `every-event` only the
//! writer tasks wait for it, each for its own connection's frames, and the host lock is not
//! held meanwhile. (A writer thread with a bounded queue would also need the frame writers to
//! wait for its acknowledgement to keep the guarantee above, for no gain while the write
//! itself is this cheap.) If the disk stalls entirely under `every-event`, frames wait in the
//! host's per-connection outboxes, whose byte budget bounds the memory they take.
//!
//! A failed append (disk full, I/O error) is returned to the runtime, which logs it; the cut
//! of any partial line keeps the log well-formed, and the event lives on in memory only.
//!
//! # Sharing a data directory
//!
//! Several servers may use one data directory (the SDKs start one server per application):
//! each loads the sessions present when it starts, and since every line is one `O_APPEND`
//! write, two processes appending to the same log never interleave inside a line. A session
//! is meant to be served by one process at a time; nothing locks it.
//!
//! # Example
//!
//! ```no_run
//! use agentwire::host::{Host, HostConfig, Output};
//! use agentwire::Timestamp;
//! use agentwire_store::{Store, StoreOptions};
//!
//! # fn main() -> std::io::Result<()> {
//! let mut store = Store::open("/var/lib/agentwire", StoreOptions::default())?;
//! let mut host = Host::new(HostConfig::default().with_report_persisted_events(true));
//! let now = Timestamp::from_millis(1_795_983_976_952);
//! for problem in store.restore(&mut host, now) {
//!     eprintln!("warning: {problem}");
//! }
//! // In the run loop, after every input, before writing the frames it produced:
//! while let Some(output) = host.poll_output() {
//!     match output {
//!         Output::Store(output) => {
//!             if let Err(e) = store.apply(&output) {
//!                 eprintln!("warning: {e}");
//!             }
//!         }
//!         Output::Connection(_) | Output::Cluster(_) | Output::Effect(_) => {
//!             /* close connections, shut down, perform effects, … */
//!         }
//!     }
//! }
//! store.flush()?; // on a graceful shutdown
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod load;
mod name;
mod sync;

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use agentwire::host::{Host, RestoreError, StoreOutput};
use agentwire::Timestamp;

pub use load::{load, Loaded, Problem, StoredSession};

/// The directory under the data directory that holds one directory per session.
pub const SESSION_STATE: &str = "session-state";

/// The name of a session's log inside its directory.
pub const EVENTS_FILE: &str = "events.jsonl";

/// When the store calls `fsync` (see the crate docs for what each policy can lose).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Never during operation (the kernel writes back on its own schedule); only on
    /// [`Store::flush`], e.g. at a graceful shutdown. Survives a killed process, not
    /// necessarily a power loss.
    #[default]
    Never,
    /// Group commit: every append is synced by the store's thread, and
    /// [`Store::durability_mark`] lets a runtime hold frames until their events are synced.
    EveryEvent,
    /// The store's thread syncs what was written every interval.
    Interval(Duration),
}

impl FromStr for SyncPolicy {
    type Err = String;

    /// `never`, `every-event`, or an interval such as `1s`, `250ms` or `2m`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "never" => Ok(SyncPolicy::Never),
            "every-event" => Ok(SyncPolicy::EveryEvent),
            other => match humantime::parse_duration(other) {
                Ok(d) if !d.is_zero() => Ok(SyncPolicy::Interval(d)),
                _ => Err(format!(
                    "invalid fsync policy {other:?}: expected `never`, `every-event` or an \
                     interval such as `1s` or `250ms`"
                )),
            },
        }
    }
}

impl fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncPolicy::Never => f.write_str("never"),
            SyncPolicy::EveryEvent => f.write_str("every-event"),
            SyncPolicy::Interval(d) => write!(f, "{}", humantime::format_duration(*d)),
        }
    }
}

/// How a [`Store`] behaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// When to `fsync`. Default: [`SyncPolicy::Never`].
    pub sync: SyncPolicy,
}

/// The per-user default data directory: `$COPILOT_HOME` when it is set (so sessions live in
/// `$COPILOT_HOME/session-state`, as with the real CLI), else `$HOME/.agentwire`
/// (`%USERPROFILE%\.agentwire` on Windows). `None` when neither variable is set.
pub fn default_data_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(home) = var("COPILOT_HOME") {
        return Some(PathBuf::from(home));
    }
    var("HOME")
        .or_else(|| var("USERPROFILE"))
        .map(|home| PathBuf::from(home).join(".agentwire"))
}

/// An operation on a session's stored state that failed.
#[derive(Debug)]
pub struct StoreError {
    /// The session.
    pub session: String,
    /// What was being done (`append to`, `remove`).
    pub action: &'static str,
    /// The path involved.
    pub path: PathBuf,
    /// The cause.
    pub source: io::Error,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "session store: cannot {} {} (session {}): {}",
            self.action,
            self.path.display(),
            self.session,
            self.source
        )
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// An open session log.
struct Log {
    file: Arc<File>,
    /// Bytes known to be in the file (to cut a partial line after a failed write).
    len: u64,
}

/// A handle that syncs a [`Store`]'s logs without access to the store itself (for example
/// from outside the lock a runtime keeps the store under). Cheap to clone.
#[derive(Clone)]
pub struct SyncHandle {
    shared: Arc<sync::Shared>,
}

impl SyncHandle {
    /// `fsync`s every log written since the last sync (and the directories that gained
    /// entries). Returns the first error; the rest is still tried.
    pub fn flush(&self) -> io::Result<()> {
        self.shared.flush()
    }
}

impl fmt::Debug for SyncHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncHandle").finish_non_exhaustive()
    }
}

/// The durable session store: one append-only log per session under
/// `<data-dir>/session-state/`. See the crate docs for the guarantees.
pub struct Store {
    data_dir: PathBuf,
    state_dir: PathBuf,
    options: StoreOptions,
    logs: HashMap<String, Log>,
    /// Loaded by `open`, handed to the host by `restore`.
    loaded: Loaded,
    shared: Arc<sync::Shared>,
    /// Declared last: dropped (stopped, after a final sync) after everything else.
    _syncer: sync::Syncer,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("data_dir", &self.data_dir)
            .field("options", &self.options)
            .field("open_logs", &self.logs.len())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the store in `data_dir` and loads every session log in
    /// `<data_dir>/session-state/` (see [`load`]): torn last lines are cut off their files,
    /// and damaged logs are skipped; both are listed by [`Store::problems`]. Nothing is
    /// created on disk until the first event is appended.
    ///
    /// Fails only when the session directory exists but cannot be listed, or when the sync
    /// thread cannot be started.
    pub fn open(data_dir: impl Into<PathBuf>, options: StoreOptions) -> io::Result<Store> {
        let data_dir = data_dir.into();
        let state_dir = data_dir.join(SESSION_STATE);
        let loaded = load::load(&state_dir)?;
        let shared = sync::Shared::new();
        let syncer = sync::Syncer::start(&shared, options.sync)?;
        Ok(Store {
            data_dir,
            state_dir,
            options,
            logs: HashMap::new(),
            loaded,
            shared,
            _syncer: syncer,
        })
    }

    /// The data directory (`--data-dir`).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The directory that holds session `id`'s state (`<data-dir>/session-state/<id>`);
    /// `None` for the empty id, which cannot be stored.
    pub fn session_dir(&self, id: &str) -> Option<PathBuf> {
        name::encode(id).map(|n| self.state_dir.join(n))
    }

    /// The options the store was opened with.
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// The sessions loaded by [`Store::open`] and not yet handed to a host.
    pub fn loaded(&self) -> &[StoredSession] {
        &self.loaded.sessions
    }

    /// The problems [`Store::open`] found (until [`Store::restore`] takes them).
    pub fn problems(&self) -> &[Problem] {
        &self.loaded.problems
    }

    /// Restores every loaded session into `host` (`Host::restore_session`) and returns every
    /// problem met while loading and restoring; a session the host refuses is skipped. The
    /// host should have [`agentwire::host::HostConfig::report_persisted_events`] set so the
    /// sessions keep being stored.
    pub fn restore(&mut self, host: &mut Host, now: Timestamp) -> Vec<Problem> {
        let loaded = std::mem::take(&mut self.loaded);
        let mut problems = loaded.problems;
        for session in loaded.sessions {
            let StoredSession { id, path, events } = session;
            if let Err(e) = host.restore_session(now, &id, events) {
                let line = match &e {
                    // One event per line: the event index is the line number minus one.
                    RestoreError::BadEvent { index, .. } => Some(index + 1),
                    _ => None,
                };
                let reason = match e {
                    RestoreError::BadEvent { reason, .. } => format!("refused event: {reason}"),
                    other => other.to_string(),
                };
                problems.push(Problem::Rejected {
                    session: id,
                    file: path,
                    line,
                    reason,
                });
            }
        }
        problems
    }

    /// Acts on a host's store output ([`Output::Store`](agentwire::host::Output::Store)):
    /// appends a [`StoreOutput::Persist`], removes the state of a
    /// [`StoreOutput::SessionDeleted`].
    pub fn apply(&mut self, output: &StoreOutput) -> Result<(), StoreError> {
        match output {
            StoreOutput::Persist { session, event } => self.append(session, event),
            StoreOutput::SessionDeleted { session } => self.delete(session),
        }
    }

    /// Appends one event (compact JSON, no newline) to `session`'s log with a single
    /// `write(2)` of the event and its `\n`, creating the session's directory on its first
    /// event. When the write fails, any partial line is cut off again so the log stays
    /// well-formed. The event must not contain a newline (compact JSON never does).
    pub fn append(&mut self, session: &str, event: &[u8]) -> Result<(), StoreError> {
        let fail = |action, path: PathBuf, source| StoreError {
            session: session.to_owned(),
            action,
            path,
            source,
        };
        let Some(dir) = self.session_dir(session) else {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "empty session id");
            return Err(fail("store", self.state_dir.clone(), e));
        };
        let path = dir.join(EVENTS_FILE);
        if event.contains(&b'\n') {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "event contains a newline");
            return Err(fail("append to", path, e));
        }
        let mut new_dirs = Vec::new();
        if !self.logs.contains_key(session) {
            let log = self
                .open_log(&dir, &path, &mut new_dirs)
                .map_err(|e| fail("open", path.clone(), e))?;
            self.logs.insert(session.to_owned(), log);
        }
        let Some(log) = self.logs.get_mut(session) else {
            let e = io::Error::other("the log is not open");
            return Err(fail("append to", path, e));
        };
        let mut line = Vec::with_capacity(event.len() + 1);
        line.extend_from_slice(event);
        line.push(b'\n');
        if let Err(e) = (&*log.file).write_all(&line) {
            // Cut a partial line so the next append does not glue onto it.
            let _ = log.file.set_len(log.len);
            return Err(fail("append to", path, e));
        }
        log.len += line.len() as u64;
        let wake = self.options.sync == SyncPolicy::EveryEvent;
        self.shared.appended(session, &log.file, new_dirs, wake);
        Ok(())
    }

    fn open_log(&self, dir: &Path, path: &Path, new_dirs: &mut Vec<PathBuf>) -> io::Result<Log> {
        if !dir.is_dir() {
            if !self.state_dir.is_dir() {
                fs::create_dir_all(&self.state_dir)?;
                if let Some(parent) = self.state_dir.parent() {
                    new_dirs.push(parent.to_owned());
                }
            }
            fs::create_dir_all(dir)?;
            new_dirs.push(self.state_dir.clone());
        }
        let existed = path.exists();
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        if !existed {
            new_dirs.push(dir.to_owned());
        }
        let len = file.metadata()?.len();
        Ok(Log {
            file: Arc::new(file),
            len,
        })
    }

    /// Removes `session`'s directory and everything in it. A session that was never stored is
    /// not an error.
    pub fn delete(&mut self, session: &str) -> Result<(), StoreError> {
        self.logs.remove(session);
        let Some(dir) = self.session_dir(session) else {
            return Ok(());
        };
        self.shared.forget(session, self.state_dir.clone());
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError {
                session: session.to_owned(),
                action: "remove",
                path: dir,
                source,
            }),
        }
    }

    /// `fsync`s every log written since the last sync, whatever the policy (call it on a
    /// graceful shutdown). Returns the first error; the rest is still tried.
    pub fn flush(&mut self) -> io::Result<()> {
        self.shared.flush()
    }

    /// A handle that can [`SyncHandle::flush`] this store from elsewhere.
    pub fn sync_handle(&self) -> SyncHandle {
        SyncHandle {
            shared: self.shared.clone(),
        }
    }

    /// With [`SyncPolicy::EveryEvent`], the sequence number of the last append: frames taken
    /// from the host now carry events appended up to this number, so a runtime that wants the
    /// every-event guarantee waits until the sync listener reports at least this number
    /// before writing them. `None` for the other policies (nothing to wait for).
    pub fn durability_mark(&self) -> Option<u64> {
        (self.options.sync == SyncPolicy::EveryEvent).then(|| self.shared.appended_seq())
    }

    /// Installs the function called (on the sync thread, or in [`Store::flush`]) with the
    /// append sequence number that every completed sync covers. It is called once at once
    /// with the current value.
    pub fn set_sync_listener(&mut self, listener: impl Fn(u64) + Send + Sync + 'static) {
        self.shared.set_listener(Box::new(listener));
    }
}
