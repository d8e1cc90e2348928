//! A client as a session's file store: the built-in tools' file work ([`FileRequest`]) goes
//! to the attached connection that registered itself as a file provider (the Copilot SDK's
//! `sessionFs.setProvider`) instead of the runtime's [`EffectOp::FileOp`].
//!
//! Each [`FileRequest`] becomes a short sequence of primitive operations ([`FsPrimitive`]:
//! stat, read, list, write, make a directory, exists), each a server-to-client request whose
//! method and params the connection's dialect chooses
//! ([`DialectHandler::fs_request`](crate::host::DialectHandler::fs_request)) and whose answer it
//! reads ([`DialectHandler::fs_answer`](crate::host::DialectHandler::fs_answer)). The sequence ends
//! in the same [`FileReply`] the runtime would give, so the tools cannot tell the difference.
//! A provider that leaves, errs or times out fails the operation (the model is told).
//!
//! [`EffectOp::FileOp`]: crate::host::EffectOp::FileOp

use std::collections::VecDeque;

use crate::agent::builtin::parent_dir;
use crate::correlation::Outcome;

use crate::host::pending::ClientCall;
use crate::host::{ConnId, FileReply, FileRequest, Host};

/// One primitive operation a file provider performs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FsPrimitive {
    /// Is `path` a directory? (`FsAnswer::Stat`)
    Stat { path: String },
    /// A text file's content (`FsAnswer::Text`).
    ReadFile { path: String },
    /// A directory's entries (`FsAnswer::Entries`).
    ReadDir { path: String },
    /// Write a text file (`FsAnswer::Done`).
    WriteFile { path: String, content: String },
    /// Append to a text file, making it if missing (`FsAnswer::Done`).
    AppendFile { path: String, content: String },
    /// Remove a file; a missing one is not an error (`FsAnswer::Done`).
    Remove { path: String },
    /// Make a directory and its parents (`FsAnswer::Done`).
    Mkdir { path: String },
    /// Does `path` exist? (`FsAnswer::Exists`)
    Exists { path: String },
    /// Run SQL statements on the session's SQLite database, several in one transaction
    /// (`FsAnswer::Rows`, one result per statement; only providers that declared SQLite).
    Sqlite {
        statements: Vec<crate::agent::sql_tool::SqlStatement>,
    },
}

/// A provider's answer to an [`FsPrimitive`], as its dialect read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FsAnswer {
    /// Whether the path is a directory.
    Stat { is_dir: bool },
    /// A file's text.
    Text(String),
    /// A directory's entries: (name, is a directory).
    Entries(Vec<(String, bool)>),
    /// Done.
    Done,
    /// Whether the path exists.
    Exists(bool),
    /// What each SQL statement gave, in order.
    Rows(Vec<crate::agent::sql_tool::SqlRows>),
}

/// Where a [`FileRequest`] is in its sequence.
#[derive(Clone, Debug)]
enum Plan {
    /// `Read`: stat, then read or list.
    Read { path: String },
    /// `Write`: exists (for `create_new`), mkdir the parent, write.
    Write { path: String, content: String },
    /// `Walk`: stat the root, then list directories breadth-first.
    Walk {
        root: String,
        limit: usize,
        dirs: VecDeque<String>,
        files: Vec<String>,
    },
    /// `Sqlite`: the statements, in one request.
    Sql,
    /// `ReadMany`: read each file in turn (failures are left out).
    ReadMany {
        root: String,
        paths: VecDeque<String>,
        texts: Vec<(String, String)>,
    },
}

/// A file operation in flight on a provider.
#[derive(Clone, Debug)]
pub(crate) struct FsCall {
    op: u64,
    conn: ConnId,
    session: String,
    plan: Plan,
    /// The primitive the provider is performing.
    asked: FsPrimitive,
}

fn join(root: &str, rel: &str) -> String {
    if rel.is_empty() {
        root.to_owned()
    } else if root.ends_with('/') {
        format!("{root}{rel}")
    } else {
        format!("{root}/{rel}")
    }
}

impl Host {
    /// `conn` provides the file storage of the sessions it is attached to; with
    /// `state_path`, their state is kept there too (`state_files.rs`).
    pub(crate) fn set_file_provider(&mut self, conn: ConnId, state_path: Option<String>) {
        self.file_providers.insert(conn, state_path);
    }

    /// `conn`'s provider keeps a SQLite database per session (`capabilities.sqlite`).
    pub(crate) fn set_file_provider_sqlite(&mut self, conn: ConnId) {
        self.sqlite_providers.insert(conn);
    }

    /// Whether `session`'s files are provided by a connection that keeps its SQLite
    /// database.
    pub(in crate::host) fn provider_has_sqlite(&self, session: &str) -> bool {
        self.file_provider(session)
            .is_some_and(|c| self.sqlite_providers.contains(&c))
    }

    /// Whether `conn` sent `sessionFs.setProvider`.
    pub(crate) fn is_file_provider(&self, conn: ConnId) -> bool {
        self.file_providers.contains_key(&conn)
    }

    /// The attached connection that provides `session`'s files, if any.
    pub(in crate::host) fn file_provider(&self, session: &str) -> Option<ConnId> {
        let live = self.sessions.get(session)?;
        live.session
            .attached
            .keys()
            .find(|c| self.file_providers.contains_key(c) && self.conns.get(c).is_some())
            .copied()
    }

    /// Starts file operation `op` of `session` on provider `conn`.
    pub(in crate::host) fn start_remote_file_op(
        &mut self,
        conn: ConnId,
        session: &str,
        op: u64,
        request: FileRequest,
    ) {
        let (plan, first) = match request {
            FileRequest::Read { path } => (
                Plan::Read { path: path.clone() },
                FsPrimitive::Stat { path },
            ),
            FileRequest::Write {
                path,
                content,
                create_new,
            } => {
                let first = if create_new {
                    FsPrimitive::Exists { path: path.clone() }
                } else {
                    FsPrimitive::Mkdir {
                        path: parent_dir(&path).to_owned(),
                    }
                };
                (Plan::Write { path, content }, first)
            }
            FileRequest::Walk { root, limit } => (
                Plan::Walk {
                    root: root.clone(),
                    limit,
                    dirs: VecDeque::new(),
                    files: Vec::new(),
                },
                FsPrimitive::Stat { path: root },
            ),
            FileRequest::Sqlite { statements, .. } => {
                if !self.sqlite_providers.contains(&conn) {
                    let message = "the session's file provider has no SQLite database (it did \
                                   not declare the sqlite capability)";
                    return self.file_result(op, Err(message.to_owned()));
                }
                (Plan::Sql, FsPrimitive::Sqlite { statements })
            }
            FileRequest::CopyDir { .. }
            | FileRequest::Remove { .. }
            | FileRequest::Append { .. } => {
                let message = "a session's file provider does not append to files, or copy or \
                               remove directory trees";
                return self.file_result(op, Err(message.to_owned()));
            }
            FileRequest::ReadMany { root, paths, .. } => {
                let mut paths: VecDeque<String> = paths.into();
                let Some(first) = paths.pop_front() else {
                    return self.file_result(op, Ok(FileReply::Texts(Vec::new())));
                };
                let path = join(&root, &first);
                paths.push_front(first);
                (
                    Plan::ReadMany {
                        root,
                        paths,
                        texts: Vec::new(),
                    },
                    FsPrimitive::ReadFile { path },
                )
            }
        };
        let call = FsCall {
            op,
            conn,
            session: session.to_owned(),
            plan,
            asked: first,
        };
        self.ask_fs(call);
    }

    /// Sends the call's current primitive to its provider.
    fn ask_fs(&mut self, call: FsCall) {
        let Some(dialect) = self.conns.get(&call.conn).map(|c| c.dialect) else {
            return self.file_result(call.op, Err("the file provider left".into()));
        };
        let handler = self.dialects[dialect.index()];
        let Some((method, params)) = handler.fs_request(&call.session, &call.asked) else {
            return self.file_result(call.op, Err("the file provider cannot do this".into()));
        };
        let (op, conn) = (call.op, call.conn);
        if let Err(e) =
            self.send_client_request(conn, method, &params, ClientCall::Fs(Box::new(call)))
        {
            self.file_result(op, Err(format!("the file provider is unreachable: {e}")));
        }
    }

    /// The provider answered (or failed) the call's current primitive.
    pub(in crate::host) fn finish_fs_call(&mut self, call: FsCall, outcome: Outcome) {
        let answer = match outcome {
            Outcome::Result(raw) => {
                let value = serde_json::from_str(raw.get()).unwrap_or_default();
                let handler = self
                    .conns
                    .get(&call.conn)
                    .map(|c| self.dialects[c.dialect.index()]);
                match handler {
                    Some(h) => h.fs_answer(&call.asked, &value),
                    None => Err("the file provider left".into()),
                }
            }
            Outcome::Error(e) => Err(e.message),
            Outcome::TimedOut => Err("the file provider did not answer in time".into()),
            Outcome::Cancelled | Outcome::Closed => Err("the file provider left".into()),
        };
        self.fs_step(call, answer);
        self.run_agents();
    }

    fn fs_step(&mut self, mut call: FsCall, answer: Result<FsAnswer, String>) {
        let op = call.op;
        let next = match (&mut call.plan, &call.asked, answer) {
            (Plan::ReadMany { root, paths, texts }, FsPrimitive::ReadFile { .. }, answer) => {
                let done = paths.pop_front().unwrap_or_default();
                if let Ok(FsAnswer::Text(text)) = answer {
                    texts.push((done, text));
                }
                match paths.front() {
                    Some(rel) => FsPrimitive::ReadFile {
                        path: join(root, rel),
                    },
                    None => {
                        return self.file_result(op, Ok(FileReply::Texts(std::mem::take(texts))))
                    }
                }
            }
            (_, _, Err(message)) => return self.file_result(op, Err(message)),
            (Plan::Sql, FsPrimitive::Sqlite { .. }, Ok(FsAnswer::Rows(rows))) => {
                return self.file_result(op, Ok(FileReply::Rows(rows)))
            }
            (Plan::Read { path }, FsPrimitive::Stat { .. }, Ok(FsAnswer::Stat { is_dir })) => {
                if is_dir {
                    FsPrimitive::ReadDir { path: path.clone() }
                } else {
                    FsPrimitive::ReadFile { path: path.clone() }
                }
            }
            (Plan::Read { .. }, FsPrimitive::ReadFile { .. }, Ok(FsAnswer::Text(text))) => {
                return self.file_result(op, Ok(FileReply::Text(text)))
            }
            (Plan::Read { .. }, FsPrimitive::ReadDir { .. }, Ok(FsAnswer::Entries(entries))) => {
                let names = entries
                    .into_iter()
                    .map(|(n, dir)| if dir { format!("{n}/") } else { n })
                    .collect();
                return self.file_result(op, Ok(FileReply::Entries(names)));
            }
            (Plan::Write { path, .. }, FsPrimitive::Exists { .. }, Ok(FsAnswer::Exists(true))) => {
                let message = format!("Path {path} already exists");
                return self.file_result(op, Err(message));
            }
            (Plan::Write { path, .. }, FsPrimitive::Exists { .. }, Ok(FsAnswer::Exists(false))) => {
                FsPrimitive::Mkdir {
                    path: parent_dir(path).to_owned(),
                }
            }
            (Plan::Write { path, content, .. }, FsPrimitive::Mkdir { .. }, Ok(FsAnswer::Done)) => {
                FsPrimitive::WriteFile {
                    path: path.clone(),
                    content: std::mem::take(content),
                }
            }
            (Plan::Write { .. }, FsPrimitive::WriteFile { .. }, Ok(FsAnswer::Done)) => {
                return self.file_result(op, Ok(FileReply::Written))
            }
            (Plan::Walk { root, .. }, FsPrimitive::Stat { .. }, Ok(FsAnswer::Stat { is_dir })) => {
                if !is_dir {
                    return self.file_result(op, Ok(FileReply::Entries(vec![String::new()])));
                }
                FsPrimitive::ReadDir { path: root.clone() }
            }
            (
                Plan::Walk {
                    root,
                    limit,
                    dirs,
                    files,
                },
                FsPrimitive::ReadDir { path },
                Ok(FsAnswer::Entries(entries)),
            ) => {
                let rel_dir = path
                    .strip_prefix(root.as_str())
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_owned();
                for (name, is_dir) in entries {
                    let rel = join_rel(&rel_dir, &name);
                    if is_dir {
                        if name != ".git" {
                            dirs.push_back(rel);
                        }
                    } else if files.len() < *limit {
                        files.push(rel);
                    }
                }
                match dirs.pop_front() {
                    Some(next) if files.len() < *limit => FsPrimitive::ReadDir {
                        path: join(root, &next),
                    },
                    _ => {
                        let mut files = std::mem::take(files);
                        files.sort();
                        return self.file_result(op, Ok(FileReply::Entries(files)));
                    }
                }
            }
            _ => {
                let message = "the file provider answered unexpectedly".to_owned();
                return self.file_result(op, Err(message));
            }
        };
        call.asked = next;
        self.ask_fs(call);
    }

    /// Drops every file operation `conn` was performing (it left): they fail.
    pub(crate) fn file_provider_left(&mut self, conn: ConnId) {
        self.file_providers.remove(&conn);
        self.sqlite_providers.remove(&conn);
    }
}

fn join_rel(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}
