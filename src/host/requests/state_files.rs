//! A session's state kept in its file provider's storage too, as the runtime keeps it in its
//! session state directory: a connection that registered as a file provider with a state
//! path (the Copilot SDK's `sessionFs.setProvider {sessionStatePath}`) gets, for each session
//! it provides, `events.jsonl` (every persisted event, one JSON line each, written whole when
//! the provider starts providing the session and appended to as events are persisted) and
//! the files the session's dialect writes beside it (plan, workspace metadata, checkpoints).
//!
//! The host's own log stays the session's record; the provider's copy is written in order,
//! one request at a time per session (appends made meanwhile go out as one), each directory
//! made before its first file. A provider that fails a write stops getting the session's
//! state: the session gets one `session.warning` saying why, and a provider that starts
//! providing the session again (a resume) gets the whole log again.

use std::collections::{BTreeSet, VecDeque};

use serde_json::{json, Value};

use crate::correlation::Outcome;
use crate::host::pending::ClientCall;
use crate::host::requests::remote_fs::{FsAnswer, FsPrimitive};
use crate::host::{ConnId, Host};
use crate::session::Event;

/// An event's line in `events.jsonl`.
fn log_line(json: &[u8]) -> String {
    let mut line = String::from_utf8_lossy(json).into_owned();
    line.push('\n');
    line
}

/// The file of the session's event log in its state directory.
pub(crate) const EVENTS_FILE: &str = "events.jsonl";

/// The state copies being written, by session.
#[derive(Debug, Default)]
pub(crate) struct StateMirrors {
    by_session: std::collections::BTreeMap<String, StateMirror>,
}

/// One session's state copy on one provider.
#[derive(Debug)]
struct StateMirror {
    /// The provider.
    conn: ConnId,
    /// The session's state directory on the provider.
    root: String,
    /// Writes not sent yet, in order.
    queue: VecDeque<FsPrimitive>,
    /// Whether a write is with the provider.
    busy: bool,
    /// Directories made (or being made) on the provider.
    made: BTreeSet<String>,
    /// A write failed: nothing more is written.
    failed: bool,
    /// The session's `session.idle` (its data), held until the writes queued before it are
    /// done, so a client that reads `events.jsonl` after the turn finds the whole turn.
    held_idle: Option<Value>,
}

impl StateMirror {
    /// Queues `path` (under the root) to be written with `content`, or appended to.
    fn push(&mut self, rel: &str, content: String, append: bool) {
        let path = format!("{}/{rel}", self.root.trim_end_matches('/'));
        let dir = crate::agent::builtin::parent_dir(&path).to_owned();
        if self.made.insert(dir.clone()) {
            self.queue.push_back(FsPrimitive::Mkdir { path: dir });
        }
        match (append, self.queue.back_mut()) {
            // Appends to one file made while a write was out go out as one.
            (
                true,
                Some(FsPrimitive::AppendFile {
                    path: last,
                    content: pending,
                }),
            ) if *last == path => pending.push_str(&content),
            (true, _) => self
                .queue
                .push_back(FsPrimitive::AppendFile { path, content }),
            (false, _) => self
                .queue
                .push_back(FsPrimitive::WriteFile { path, content }),
        }
    }
}

/// Keeping sessions' state in their file providers' storage.
impl Host {
    /// The state directory `conn` asked for as a file provider, if any.
    pub(crate) fn file_state_path(&self, conn: ConnId) -> Option<&str> {
        self.file_providers.get(&conn)?.as_deref()
    }

    /// Makes sure `session` has a mirror if a provider with a state directory provides it:
    /// one started now writes the log whole, then the dialect's files. `Some(started now)`
    /// when there is a mirror to write to, `None` when nothing is to be written.
    fn ensure_state_mirror(&mut self, session: &str) -> Option<bool> {
        let conn = self.file_provider(session);
        let current = self.state_mirrors.by_session.get(session).map(|m| m.conn);
        if conn.is_none() || current.is_some_and(|c| Some(c) != conn) {
            if let Some(idle) = self
                .state_mirrors
                .by_session
                .remove(session)
                .and_then(|m| m.held_idle)
            {
                self.emit(session, "session.idle", &idle, true);
            }
        }
        let conn = conn?;
        if !self.state_mirrors.by_session.contains_key(session) {
            let root = self.file_state_path(conn)?.to_owned();
            let handler = self.dialects[self.conns.get(&conn)?.dialect.index()];
            let log: String = self
                .sessions
                .get(session)?
                .session
                .events()
                .iter()
                .filter(|e| !e.ephemeral)
                .map(|e| log_line(handler.stored_event_json(e).as_ref()))
                .collect();
            let mut mirror = StateMirror {
                conn,
                root,
                queue: VecDeque::new(),
                busy: false,
                made: BTreeSet::new(),
                failed: false,
                held_idle: None,
            };
            mirror.push(EVENTS_FILE, log, false);
            self.state_mirrors
                .by_session
                .insert(session.to_owned(), mirror);
            let dialect = self.conns.get(&conn)?.dialect;
            self.dialects[dialect.index()].state_mirror_started(self, session);
            return Some(true);
        }
        let failed = self.state_mirrors.by_session.get(session)?.failed;
        (!failed).then_some(false)
    }

    /// The live mirror of `session` (see [`Host::ensure_state_mirror`]).
    fn state_mirror(&mut self, session: &str) -> Option<&mut StateMirror> {
        self.ensure_state_mirror(session)?;
        self.state_mirrors.by_session.get_mut(session)
    }

    /// A persisted event of `session` (its JSON line) goes to the provider's copy of its log.
    pub(in crate::host) fn mirror_persisted_event(&mut self, session: &str, event: &Event) {
        if self.file_providers.is_empty() {
            return;
        }
        // A mirror started now wrote the whole log, this event included.
        match self.ensure_state_mirror(session) {
            None => return,
            Some(true) => {}
            Some(false) => {
                let Some(mirror) = self.state_mirrors.by_session.get_mut(session) else {
                    return;
                };
                let Some(c) = self.conns.get(&mirror.conn) else {
                    return;
                };
                let handler = self.dialects[c.dialect.index()];
                mirror.push(
                    EVENTS_FILE,
                    log_line(&handler.stored_event_json(event)),
                    true,
                );
            }
        }
        self.send_state_write(session);
    }

    /// Writes `content` to `rel` in the state directory of `session` on its file provider
    /// (a dialect's state file: plan, workspace metadata, checkpoints); `false` when the
    /// session's state is not kept by a provider.
    pub(crate) fn write_state_file(&mut self, session: &str, rel: &str, content: String) -> bool {
        let Some(mirror) = self.state_mirror(session) else {
            return false;
        };
        mirror.push(rel, content, false);
        self.send_state_write(session);
        true
    }

    /// Removes `rel` from the state directory of `session` on its file provider; `false`
    /// when the session's state is not kept by a provider.
    pub(crate) fn remove_state_file(&mut self, session: &str, rel: &str) -> bool {
        let Some(mirror) = self.state_mirror(session) else {
            return false;
        };
        let path = format!("{}/{rel}", mirror.root.trim_end_matches('/'));
        mirror.queue.push_back(FsPrimitive::Remove { path });
        self.send_state_write(session);
        true
    }

    /// The state directory of `session` on its file provider, if its state is kept there.
    pub(crate) fn provided_state_dir(&self, session: &str) -> Option<&str> {
        let conn = self.file_provider(session)?;
        self.file_state_path(conn)
    }

    /// Sends the next queued write of `session` unless one is out.
    fn send_state_write(&mut self, session: &str) {
        let Some(mirror) = self.state_mirrors.by_session.get_mut(session) else {
            return;
        };
        if mirror.busy || mirror.failed {
            return;
        }
        let Some(write) = mirror.queue.pop_front() else {
            return;
        };
        mirror.busy = true;
        let conn = mirror.conn;
        let request = self
            .conns
            .get(&conn)
            .and_then(|c| self.dialects[c.dialect.index()].fs_request(session, &write));
        let call = ClientCall::StateFile {
            session: session.to_owned(),
            conn,
            write: Box::new(write),
        };
        let sent = match request {
            Some((method, params)) => self.send_client_request(conn, method, &params, call),
            None => Err("the file provider cannot write files".into()),
        };
        if let Err(e) = sent {
            self.state_write_failed(session, &e);
        }
    }

    /// Holds `session`'s `session.idle` (`data`) while its state writes are under way;
    /// `false` when nothing is being written (the event goes out now).
    pub(in crate::host) fn hold_idle_for_state(&mut self, session: &str, data: &Value) -> bool {
        let Some(mirror) = self.state_mirrors.by_session.get_mut(session) else {
            return false;
        };
        if mirror.failed || (!mirror.busy && mirror.queue.is_empty()) {
            return false;
        }
        mirror.held_idle = Some(data.clone());
        true
    }

    /// Emits `session`'s held `session.idle` once its mirror has nothing more to write (or
    /// has stopped writing).
    fn release_idle(&mut self, session: &str) {
        let Some(mirror) = self.state_mirrors.by_session.get_mut(session) else {
            return;
        };
        if !mirror.failed && (mirror.busy || !mirror.queue.is_empty()) {
            return;
        }
        if let Some(idle) = mirror.held_idle.take() {
            self.emit(session, "session.idle", &idle, true);
        }
    }

    /// The provider answered (or failed) a state write of `session`.
    pub(in crate::host) fn finish_state_write(
        &mut self,
        session: &str,
        conn: ConnId,
        write: FsPrimitive,
        outcome: Outcome,
    ) {
        // A mirror on another provider since (a resume) is not this write's.
        let Some(mirror) = self
            .state_mirrors
            .by_session
            .get_mut(session)
            .filter(|m| m.conn == conn)
        else {
            return;
        };
        mirror.busy = false;
        let answer = match outcome {
            Outcome::Result(raw) => {
                let value = serde_json::from_str(raw.get()).unwrap_or_default();
                match self.conns.get(&conn) {
                    Some(c) => self.dialects[c.dialect.index()].fs_answer(&write, &value),
                    None => Err("the file provider left".into()),
                }
            }
            Outcome::Error(e) => Err(e.message),
            Outcome::TimedOut => Err("the file provider did not answer in time".into()),
            Outcome::Cancelled | Outcome::Closed => Err("the file provider left".into()),
        };
        match answer {
            Ok(FsAnswer::Done) => self.send_state_write(session),
            Ok(_) => self.state_write_failed(session, "unexpected answer"),
            Err(e) => self.state_write_failed(session, &e),
        }
        self.release_idle(session);
    }

    /// A state write failed: the provider's copy stops, and the session says why once.
    fn state_write_failed(&mut self, session: &str, reason: &str) {
        let Some(mirror) = self.state_mirrors.by_session.get_mut(session) else {
            return;
        };
        if mirror.failed {
            return;
        }
        mirror.failed = true;
        mirror.busy = false;
        mirror.queue.clear();
        let message = format!(
            "the session's state is no longer written to its file provider ({}): {reason}",
            mirror.root
        );
        self.emit(
            session,
            "session.warning",
            &json!({"warningType": "session_fs", "message": message}),
            false,
        );
        self.release_idle(session);
    }
}
