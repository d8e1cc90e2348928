//! Reading the session logs back at start, with crash repair.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::{name, EVENTS_FILE};

/// One session read back from its log, ready for `Host::restore_session`.
#[derive(Clone, Debug)]
pub struct StoredSession {
    /// The session id.
    pub id: String,
    /// Its log (`<data-dir>/session-state/<id>/events.jsonl`).
    pub path: PathBuf,
    /// Its persisted events in order, one compact JSON object each (no newline).
    pub events: Vec<Bytes>,
}

/// Something wrong that the loader found in the store, and what it did about it.
///
/// Every variant names the file and, where it applies, the 1-based line.
#[derive(Debug)]
#[non_exhaustive]
pub enum Problem {
    /// The last line of a log was torn: it has no trailing newline, or it is not a JSON
    /// object. The process died in the middle of writing it, before any client could see the
    /// event (events are stored before they are sent). The line was cut off the file and the
    /// events before it were loaded.
    TruncatedTail {
        /// The session.
        session: String,
        /// The log.
        file: PathBuf,
        /// The line that was cut (1-based).
        line: usize,
        /// How many bytes were cut.
        bytes: u64,
        /// Why the line counts as torn.
        reason: String,
    },
    /// A line before the last one is not a JSON object. The log is damaged beyond what a crash
    /// does, so the session was **not loaded** and its file was left untouched (fix or remove
    /// it); the other sessions loaded.
    BadLine {
        /// The session.
        session: String,
        /// The log.
        file: PathBuf,
        /// The bad line (1-based).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The host refused the session's log (`Host::restore_session` failed); the session was
    /// not loaded and its file was left untouched.
    Rejected {
        /// The session.
        session: String,
        /// The log.
        file: PathBuf,
        /// The refused line (1-based), when the host named one.
        line: Option<usize>,
        /// The host's reason.
        reason: String,
    },
    /// A session directory or log could not be read (or repaired); the session was not loaded.
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The error.
        error: io::Error,
    },
    /// An entry of `session-state/` that is not a session directory written by this store
    /// (its name is not an encoded session id); it was ignored.
    Foreign {
        /// The entry.
        path: PathBuf,
    },
}

impl Problem {
    /// Whether the affected session was still loaded: only a torn tail is repaired in place
    /// (and the session loads if an event is left before it).
    pub fn session_loaded(&self) -> bool {
        match self {
            Problem::TruncatedTail { line, .. } => *line > 1,
            _ => false,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::TruncatedTail {
                session,
                file,
                line,
                bytes,
                reason,
            } => {
                write!(
                    f,
                    "{}:{line}: torn last line ({reason}): truncated {bytes} bytes away; ",
                    file.display()
                )?;
                if *line > 1 {
                    write!(
                        f,
                        "session {session} loaded with the {} events before it",
                        line - 1
                    )
                } else {
                    write!(
                        f,
                        "session {session} had no complete event and was not loaded"
                    )
                }
            }
            Problem::BadLine {
                session,
                file,
                line,
                reason,
            } => write!(
                f,
                "{}:{line}: {reason}; session {session} was not loaded (the file is left as \
                 it is: fix or remove it)",
                file.display()
            ),
            Problem::Rejected {
                session,
                file,
                line,
                reason,
            } => {
                write!(f, "{}", file.display())?;
                if let Some(line) = line {
                    write!(f, ":{line}")?;
                }
                write!(
                    f,
                    ": {reason}; session {session} was not loaded (the file is left as it is)"
                )
            }
            Problem::Io { path, error } => {
                write!(
                    f,
                    "{}: {error}; that session was not loaded",
                    path.display()
                )
            }
            Problem::Foreign { path } => write!(
                f,
                "{}: not a session directory of this store; ignored",
                path.display()
            ),
        }
    }
}

/// What loading a store found: the sessions to restore and the problems met.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Sessions whose logs loaded, by directory name order.
    pub sessions: Vec<StoredSession>,
    /// What went wrong, in the order it was found.
    pub problems: Vec<Problem>,
}

/// Reads every session under `state_dir` (`<data-dir>/session-state`). A missing directory
/// is an empty store. Session directories without a log, or with an empty one, are skipped
/// silently. Torn last lines are cut off their files (the only write the loader does).
///
/// Fails only when `state_dir` exists but cannot be listed; everything else is a [`Problem`].
pub fn load(state_dir: &Path) -> io::Result<Loaded> {
    let mut loaded = Loaded::default();
    let entries = match fs::read_dir(state_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(loaded),
        Err(e) => return Err(e),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => {}
            Ok(_) => continue,
            Err(error) => {
                loaded.problems.push(Problem::Io { path, error });
                continue;
            }
        }
        let id = entry.file_name().to_str().and_then(name::decode);
        match id {
            Some(id) => dirs.push((entry.file_name(), id, path)),
            None => loaded.problems.push(Problem::Foreign { path }),
        }
    }
    dirs.sort();
    for (_, id, dir) in dirs {
        let file = dir.join(EVENTS_FILE);
        match load_log(&id, &file, &mut loaded.problems) {
            Ok(Some(events)) => loaded.sessions.push(StoredSession {
                id,
                path: file,
                events,
            }),
            Ok(None) => {}
            Err(error) => loaded.problems.push(Problem::Io { path: file, error }),
        }
    }
    Ok(loaded)
}

/// One log: its events, or `None` when there is nothing to load (no file, empty, or damaged:
/// then a problem was recorded).
fn load_log(id: &str, file: &Path, problems: &mut Vec<Problem>) -> io::Result<Option<Vec<Bytes>>> {
    let data = match fs::read(file) {
        Ok(data) => Bytes::from(data),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut events = Vec::new();
    let mut start = 0;
    // Offset where the torn tail starts, with its line number and the reason.
    let mut torn: Option<(usize, usize, String)> = None;
    while start < data.len() {
        let line_no = events.len() + 1;
        let Some(nl) = data[start..].iter().position(|&b| b == b'\n') else {
            torn = Some((start, line_no, "no trailing newline".into()));
            break;
        };
        let end = start + nl;
        if let Err(reason) = check_line(&data[start..end]) {
            if end + 1 == data.len() {
                torn = Some((start, line_no, reason));
                break;
            }
            problems.push(Problem::BadLine {
                session: id.to_owned(),
                file: file.to_owned(),
                line: line_no,
                reason,
            });
            return Ok(None);
        }
        events.push(data.slice(start..end));
        start = end + 1;
    }
    if let Some((cut, line, reason)) = torn {
        let f = OpenOptions::new().write(true).open(file)?;
        f.set_len(cut as u64)?;
        f.sync_all()?;
        problems.push(Problem::TruncatedTail {
            session: id.to_owned(),
            file: file.to_owned(),
            line,
            bytes: (data.len() - cut) as u64,
            reason,
        });
    }
    Ok((!events.is_empty()).then_some(events))
}

/// A stored line must be one JSON object.
fn check_line(line: &[u8]) -> Result<(), String> {
    if line.is_empty() {
        return Err("empty line".into());
    }
    match serde_json::from_slice::<&serde_json::value::RawValue>(line) {
        Ok(raw) if raw.get().starts_with('{') => Ok(()),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(format!("invalid JSON: {e}")),
    }
}
