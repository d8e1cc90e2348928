//! `fsync` off the protocol loop: the dirty set, group commit and the sync thread.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::warn;

use crate::SyncPolicy;

/// Called with the append sequence number that every completed `fsync` covers.
pub(crate) type Listener = Box<dyn Fn(u64) + Send + Sync>;

/// What has been written but not yet synced.
#[derive(Default)]
struct State {
    /// Logs written since their last `fsync`, by session.
    files: HashMap<String, Arc<File>>,
    /// Directories that gained an entry (a new session directory or log) since the last sync.
    dirs: BTreeSet<PathBuf>,
    /// Appends so far (the sequence number of the last one).
    appended: u64,
    /// Every append up to this number has been synced.
    synced: u64,
    stop: bool,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Serialises flushes, so `synced` only moves once the fsyncs that cover it are done.
    flushing: Mutex<()>,
    listener: Mutex<Option<Listener>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new() -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            flushing: Mutex::new(()),
            listener: Mutex::new(None),
        })
    }

    /// Records one append to `session`'s log (and new directory entries); returns its number.
    pub(crate) fn appended(
        &self,
        session: &str,
        file: &Arc<File>,
        new_dirs: impl IntoIterator<Item = PathBuf>,
        wake: bool,
    ) -> u64 {
        let mut st = lock(&self.state);
        st.appended += 1;
        if !st.files.contains_key(session) {
            st.files.insert(session.to_owned(), file.clone());
        }
        st.dirs.extend(new_dirs);
        let seq = st.appended;
        drop(st);
        if wake {
            self.wake.notify_one();
        }
        seq
    }

    /// Forgets a deleted session's log (nothing left to sync); `parent` gained a removal.
    pub(crate) fn forget(&self, session: &str, parent: PathBuf) {
        let mut st = lock(&self.state);
        st.files.remove(session);
        st.dirs.insert(parent);
    }

    pub(crate) fn appended_seq(&self) -> u64 {
        lock(&self.state).appended
    }

    pub(crate) fn set_listener(&self, listener: Listener) {
        let synced = lock(&self.state).synced;
        listener(synced);
        *lock(&self.listener) = Some(listener);
    }

    /// Syncs everything written so far; returns the first error (the rest is still tried).
    pub(crate) fn flush(&self) -> std::io::Result<()> {
        let _one_at_a_time = lock(&self.flushing);
        let (files, dirs, target) = {
            let mut st = lock(&self.state);
            if st.synced == st.appended && st.files.is_empty() && st.dirs.is_empty() {
                return Ok(());
            }
            (
                std::mem::take(&mut st.files),
                std::mem::take(&mut st.dirs),
                st.appended,
            )
        };
        let mut first_error = None;
        for file in files.values() {
            if let Err(e) = file.sync_data() {
                first_error.get_or_insert(e);
            }
        }
        for dir in &dirs {
            // Directories are synced through a read-only handle (POSIX; a no-op elsewhere).
            if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
                if cfg!(unix) {
                    first_error.get_or_insert(e);
                }
            }
        }
        {
            let mut st = lock(&self.state);
            st.synced = st.synced.max(target);
        }
        if let Some(listener) = lock(&self.listener).as_ref() {
            listener(target);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn stop(&self) {
        lock(&self.state).stop = true;
        self.wake.notify_all();
    }
}

/// The background thread of the `every-event` and interval policies.
pub(crate) struct Syncer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Starts the thread for `policy` (none for [`SyncPolicy::Never`]).
    pub(crate) fn start(shared: &Arc<Shared>, policy: SyncPolicy) -> std::io::Result<Syncer> {
        let thread = match policy {
            SyncPolicy::Never => None,
            SyncPolicy::EveryEvent | SyncPolicy::Interval(_) => {
                let shared = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name("agentwire-store-sync".into())
                        .spawn(move || run(&shared, policy))?,
                )
            }
        };
        Ok(Syncer {
            shared: shared.clone(),
            thread,
        })
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.shared.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared, policy: SyncPolicy) {
    loop {
        let stop = {
            let mut st = lock(&shared.state);
            match policy {
                SyncPolicy::Interval(every) => {
                    let deadline = Instant::now() + every.max(Duration::from_millis(1));
                    while !st.stop {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        st = shared
                            .wake
                            .wait_timeout(st, left)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0;
                    }
                }
                _ => {
                    while !st.stop && st.appended == st.synced {
                        st = shared.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
                    }
                }
            }
            st.stop
        };
        if let Err(e) = shared.flush() {
            // What failed to reach the disk may be lost on a power failure (the kernel may
            // already have dropped the dirty pages); the process itself keeps serving.
            warn!(error = %e, "session store: fsync failed");
        }
        if stop {
            return;
        }
    }
}
