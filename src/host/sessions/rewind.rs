//! File-change tracking and rewind (`enableFileChangeTracking`), as the runtime offers them.
//!
//! While tracking is on, each file the built-in tools create or edit is captured once per
//! user turn (the turn's `user.message` is its *rewind point*): what it held before the turn
//! (nothing, for a file the turn created) and what the tools last wrote to it. A session can
//! then be listed by turns ([`Host::rewind_points`]), a rewind to a turn previewed
//! ([`Host::rewind_preview`]), and rewound ([`Host::start_rewind`]): its history is truncated
//! at the turn's `user.message`, and in `conversation-and-files` mode every file the discarded
//! turns changed gets back what it held before them (a file they created is removed). A file
//! changed since the tools last wrote it is left as it is (`user-modified`). The file work is
//! the host's file effects (or the session's file provider); the captures are kept in memory.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

use crate::host::tool_ops::{FileReply, FileRequest};
use crate::host::{ConnId, Host};
use crate::jsonrpc::OwnedId;

/// A session's captures.
#[derive(Debug, Default)]
pub(crate) struct FileChanges {
    /// Tracking is on (`enableFileChangeTracking`).
    pub(crate) enabled: bool,
    captures: Vec<Capture>,
}

/// One file as one turn changed it.
#[derive(Clone, Debug)]
struct Capture {
    /// The turn's `user.message` event id.
    point: String,
    path: String,
    /// What the file held before the turn (`None`: it did not exist).
    original: Option<String>,
    /// What the tools last wrote to it in the turn.
    written: String,
}

/// A rewind in flight: its files, one at a time (read, then restore), then the truncation.
pub(crate) struct PendingRewind {
    session: String,
    conn: ConnId,
    id: OwnedId,
    event_id: String,
    todo: VecDeque<Capture>,
    restored: Vec<String>,
    skipped: Vec<Value>,
}

/// Where a rewind's file operation is.
pub(crate) struct RewindStep {
    rewind: u64,
    restoring: bool,
}

/// Lines added and removed from `old` to `new` (as multisets of lines).
fn line_delta(old: &str, new: &str) -> (u64, u64) {
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for line in new.lines() {
        *counts.entry(line).or_default() += 1;
    }
    for line in old.lines() {
        *counts.entry(line).or_default() -= 1;
    }
    let added = counts.values().filter(|c| **c > 0).map(|c| *c as u64).sum();
    let removed = counts
        .values()
        .filter(|c| **c < 0)
        .map(|c| c.unsigned_abs())
        .sum();
    (added, removed)
}

/// File-change tracking and rewind.
impl Host {
    /// Turns `session`'s file-change tracking on or off.
    pub(crate) fn set_file_change_tracking(&mut self, session: &str, on: bool) {
        if let Some(live) = self.sessions.get_mut(session) {
            live.file_changes.enabled = on;
        }
    }

    /// The root user turns of `session`: `user.message` event id, text and time.
    fn rewind_turns(&self, session: &str) -> Vec<(String, String, String)> {
        let Some(live) = self.sessions.get(session) else {
            return Vec::new();
        };
        live.session
            .events()
            .iter()
            .filter(|e| !e.ephemeral && e.event_type == "user.message")
            .filter_map(|e| {
                let v: Value = serde_json::from_slice(&e.json).ok()?;
                if v.get("agentId").is_some_and(|a| !a.is_null()) {
                    return None;
                }
                let text = v["data"]["content"].as_str().unwrap_or_default().to_owned();
                let at = v["timestamp"].as_str().unwrap_or_default().to_owned();
                Some((e.id.clone(), text, at))
            })
            .collect()
    }

    /// A built-in tool wrote `written` to `path` (which held `original`) in `session`.
    pub(in crate::host) fn file_written(
        &mut self,
        session: &str,
        path: &str,
        original: Option<String>,
        written: &str,
    ) {
        if !self
            .sessions
            .get(session)
            .is_some_and(|l| l.file_changes.enabled)
        {
            return;
        }
        let Some((point, _, _)) = self.rewind_turns(session).pop() else {
            return;
        };
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let captures = &mut live.file_changes.captures;
        match captures
            .iter_mut()
            .find(|c| c.point == point && c.path == path)
        {
            Some(capture) => capture.written = written.to_owned(),
            None => captures.push(Capture {
                point,
                path: path.to_owned(),
                original,
                written: written.to_owned(),
            }),
        }
    }

    /// Why `session` cannot be rewound now, if it cannot.
    fn rewind_unavailable(&self, session: &str, files: bool) -> Option<&'static str> {
        if self.session_busy(session) {
            return Some("session-busy");
        }
        let enabled = self
            .sessions
            .get(session)
            .is_some_and(|l| l.file_changes.enabled);
        (files && !enabled).then_some("file-change-tracking-disabled")
    }

    /// The captures of the turns from `event_id` on, one per file: the earliest turn's
    /// original and the latest turn's write, by path.
    fn captures_from(&self, session: &str, event_id: &str) -> Option<Vec<Capture>> {
        let turns = self.rewind_turns(session);
        let from = turns.iter().position(|(id, _, _)| id == event_id)?;
        let later: Vec<&str> = turns[from..].iter().map(|(id, _, _)| id.as_str()).collect();
        let live = self.sessions.get(session)?;
        let mut files: BTreeMap<&str, Capture> = BTreeMap::new();
        for c in &live.file_changes.captures {
            if !later.contains(&c.point.as_str()) {
                continue;
            }
            files
                .entry(c.path.as_str())
                .and_modify(|f| f.written = c.written.clone())
                .or_insert_with(|| c.clone());
        }
        Some(files.into_values().collect())
    }

    /// `session.history.listRewindPoints`: the session's turns and what rewinding to each
    /// would restore.
    pub(crate) fn rewind_points(&self, session: &str) -> Value {
        let enabled = self
            .sessions
            .get(session)
            .is_some_and(|l| l.file_changes.enabled);
        let mut result = json!({"fileChangeTrackingEnabled": enabled, "points": []});
        if let Some(reason) = self.rewind_unavailable(session, true) {
            result["unavailableReason"] = json!(reason);
            return result;
        }
        let captures = self
            .sessions
            .get(session)
            .map(|l| l.file_changes.captures.clone())
            .unwrap_or_default();
        let points: Vec<Value> = self
            .rewind_turns(session)
            .into_iter()
            .map(|(id, text, at)| {
                let files = self.captures_from(session, &id).unwrap_or_default();
                let own: Vec<&Capture> = captures.iter().filter(|c| c.point == id).collect();
                let (added, removed) = own.iter().fold((0, 0), |(a, r), c| {
                    let (da, dr) = line_delta(c.original.as_deref().unwrap_or(""), &c.written);
                    (a + da, r + dr)
                });
                json!({"eventId": id, "userMessage": text, "timestamp": at,
                       "canRestoreFiles": !files.is_empty(), "fileCount": files.len(),
                       "turnChangedFiles": !own.is_empty(), "linesAdded": added,
                       "linesRemoved": removed, "isAutopilotContinuation": false})
            })
            .collect();
        result["points"] = json!(points);
        result
    }

    /// `session.history.previewRewind {eventId}`: the files a rewind to it would restore;
    /// `None` when the session has no such turn.
    pub(crate) fn rewind_preview(&self, session: &str, event_id: &str) -> Option<Value> {
        if let Some(reason) = self.rewind_unavailable(session, true) {
            return Some(json!({"available": false, "reason": reason, "fileCount": 0,
                               "files": []}));
        }
        let files: Vec<Value> = self
            .captures_from(session, event_id)?
            .iter()
            .map(|c| {
                let (added, removed) = line_delta(c.original.as_deref().unwrap_or(""), &c.written);
                let change = if c.original.is_some() {
                    "modified"
                } else {
                    "created"
                };
                json!({"path": c.path, "changeType": change, "linesAdded": added,
                       "linesRemoved": removed})
            })
            .collect();
        Some(json!({"available": true, "fileCount": files.len(), "files": files}))
    }

    /// `session.history.rewind {eventId, mode}` for `conn`'s request `id`: answered now
    /// (`Some`) or once the files are restored. An unknown turn is `Err`.
    pub(crate) fn start_rewind(
        &mut self,
        session: &str,
        conn: ConnId,
        id: &OwnedId,
        event_id: &str,
        files: bool,
    ) -> Result<Option<Value>, String> {
        let Some(todo) = self.captures_from(session, event_id) else {
            return Err(format!("Event {event_id} is not a turn of this session"));
        };
        if let Some(reason) = self.rewind_unavailable(session, files) {
            return Ok(Some(
                json!({"outcome": reason, "restoredFiles": [], "skippedFiles": []}),
            ));
        }
        let rewind = PendingRewind {
            session: session.to_owned(),
            conn,
            id: id.clone(),
            event_id: event_id.to_owned(),
            todo: if files { todo.into() } else { VecDeque::new() },
            restored: Vec::new(),
            skipped: Vec::new(),
        };
        let key = self.next_rewind;
        self.next_rewind += 1;
        self.rewinds.insert(key, rewind);
        Ok(self.next_rewind_step(key).map(|(_, _, answer)| answer))
    }

    /// Reads the next file of rewind `key`, or truncates the history once none is left
    /// (then: who asked, and the answer).
    fn next_rewind_step(&mut self, key: u64) -> Option<(ConnId, OwnedId, Value)> {
        let rewind = self.rewinds.get(&key)?;
        if let Some(capture) = rewind.todo.front() {
            let request = FileRequest::Read {
                path: capture.path.clone(),
            };
            let session = rewind.session.clone();
            let step = RewindStep {
                rewind: key,
                restoring: false,
            };
            self.rewind_file_op(&session, request, step);
            return None;
        }
        let rewind = self.rewinds.remove(&key)?;
        let result = match self.truncate_history(&rewind.session, &rewind.event_id) {
            Ok(removed) => {
                self.emit(
                    &rewind.session,
                    "session.snapshot_rewind",
                    &json!({"upToEventId": rewind.event_id, "eventsRemoved": removed}),
                    true,
                );
                // The discarded turns' captures go with them.
                let kept: Vec<String> = self
                    .rewind_turns(&rewind.session)
                    .into_iter()
                    .map(|(id, _, _)| id)
                    .collect();
                if let Some(live) = self.sessions.get_mut(&rewind.session) {
                    live.file_changes
                        .captures
                        .retain(|c| kept.contains(&c.point));
                }
                json!({"outcome": "success", "eventsRemoved": removed,
                       "restoredFiles": rewind.restored, "skippedFiles": rewind.skipped})
            }
            Err(e) => json!({"outcome": "truncation-failed", "error": format!("{e:?}"),
                             "restoredFiles": rewind.restored, "skippedFiles": rewind.skipped}),
        };
        Some((rewind.conn, rewind.id, result))
    }

    /// A file operation of a rewind ended.
    pub(in crate::host) fn rewind_file_done(
        &mut self,
        step: RewindStep,
        result: Result<FileReply, String>,
    ) {
        let key = step.rewind;
        let Some(rewind) = self.rewinds.get_mut(&key) else {
            return;
        };
        let Some(capture) = rewind.todo.front().cloned() else {
            return;
        };
        let session = rewind.session.clone();
        if step.restoring {
            match result {
                Ok(_) => {
                    rewind.todo.pop_front();
                    rewind.restored.push(capture.path);
                }
                Err(e) => {
                    // Nothing is rolled back: what was restored stays, the history is kept.
                    let rewind = self.rewinds.remove(&key).expect("present");
                    let answer = json!({"outcome": "rollback-incomplete",
                        "error": format!("{}: {e}", capture.path),
                        "restoredFiles": rewind.restored, "skippedFiles": rewind.skipped});
                    self.respond(rewind.conn, &rewind.id, Ok(answer));
                    return;
                }
            }
        } else {
            let current = match result {
                Ok(FileReply::Text(text)) => Some(text),
                _ => None,
            };
            if current.as_deref() != Some(capture.written.as_str()) {
                // Changed (or gone) since the tools wrote it: left as it is.
                rewind.todo.pop_front();
                rewind
                    .skipped
                    .push(json!({"path": capture.path, "reason": "user-modified"}));
            } else {
                let request = match capture.original {
                    Some(content) => FileRequest::Write {
                        path: capture.path,
                        content,
                        create_new: false,
                    },
                    None => FileRequest::Remove { path: capture.path },
                };
                let step = RewindStep {
                    rewind: key,
                    restoring: true,
                };
                self.rewind_file_op(&session, request, step);
                return;
            }
        }
        if let Some((conn, id, answer)) = self.next_rewind_step(key) {
            self.respond(conn, &id, Ok(answer));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::line_delta;

    #[test]
    fn line_deltas_count_lines_added_and_removed() {
        assert_eq!(line_delta("", "a\nb\n"), (2, 0));
        assert_eq!(line_delta("a\nb\n", "a\nc\n"), (1, 1));
        assert_eq!(line_delta("a\n", ""), (0, 1));
    }
}
