//! The built-in `sql` tool: statements on the session's own SQLite database. A client that
//! provides the session's files and declared SQLite (`sessionFs.setProvider` with
//! `capabilities.sqlite`) keeps the database (`sessionFs.sqliteQuery`); otherwise the runtime
//! does, in the session's state directory (`<workspace root>/session-state/<id>/session.db`,
//! a [`FileRequest::Sqlite`] effect), when the server has one. A session with neither is not
//! offered the tool.
//!
//! Before a session's first statement the starting tables (`todos`, `todo_deps`) are made.
//! The statements of a call run in order in one transaction (`sessionFs.sqliteTransaction`
//! on a provider): all take effect or, when one fails, none, and the call fails with the
//! database's error. A call that wrote the todo tables emits
//! `session.todos_changed` (ephemeral, no payload).

use serde_json::{json, Value};

use crate::agent::sql_tool::{self, SqlStatement};
use crate::agent::ToolOutcome;
use crate::host::tool_ops::{FileReply, FileRequest};
use crate::host::Host;

/// A `sql` call in progress.
#[derive(Debug)]
pub(crate) struct SqlRun {
    /// The call's statements.
    statements: Vec<String>,
    /// The step in flight makes the starting tables.
    schema_step: bool,
}

impl Host {
    /// The file the runtime keeps `session`'s database in, if it keeps one.
    fn runtime_database(&self, session: &str) -> Option<String> {
        let root = self.config.workspace_root.as_deref()?;
        Some(format!(
            "{}/session-state/{session}/session.db",
            root.trim_end_matches('/')
        ))
    }

    /// Whether `session` has a SQLite database (its file provider's, or the runtime's).
    pub(crate) fn has_session_database(&self, session: &str) -> bool {
        if self.file_provider(session).is_some() {
            return self.provider_has_sqlite(session);
        }
        self.runtime_database(session).is_some()
    }

    /// The model called the `sql` tool.
    pub(crate) fn start_sql_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        arguments: &Value,
        turn_id: &str,
    ) {
        self.emit_tool_start(session, tool_call_id, sql_tool::SQL, arguments, turn_id);
        let failure = |message: String| ToolOutcome::Failure {
            message,
            code: "failure".to_owned(),
        };
        let database = arguments
            .get("database")
            .and_then(Value::as_str)
            .unwrap_or("session");
        if database != "session" {
            let message = format!(
                "SQL Error: database \"{database}\" is not available on this server (only \
                 \"session\", this session's own)"
            );
            return self.complete_tool(session, tool_call_id, failure(message));
        }
        let query = arguments
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let statements = sql_tool::split_statements(query);
        if statements.is_empty() {
            let message = "SQL Error: Empty query".to_owned();
            return self.complete_tool(session, tool_call_id, failure(message));
        }
        if !self.has_session_database(session) {
            let message = "SQL Error: this session has no SQLite database (its files are \
                           kept by a client without SQLite, or the server keeps no session \
                           state)"
                .to_owned();
            return self.complete_tool(session, tool_call_id, failure(message));
        }
        let schema_step = !self.sessions.get(session).is_some_and(|l| l.sql_ready);
        let run = SqlRun {
            statements,
            schema_step,
        };
        self.next_sql(session, tool_call_id, run);
    }

    /// Runs the call's next step: the starting tables, then its statements.
    fn next_sql(&mut self, session: &str, tool_call_id: &str, run: SqlRun) {
        let database = self.runtime_database(session).unwrap_or_default();
        let statements = if run.schema_step {
            vec![SqlStatement {
                query_type: sql_tool::SqlQueryType::Exec,
                query: sql_tool::SESSION_SCHEMA.to_owned(),
            }]
        } else {
            run.statements
                .iter()
                .map(|s| SqlStatement::new(s))
                .collect()
        };
        let request = FileRequest::Sqlite {
            database,
            statements,
        };
        self.sql_file_op(session, tool_call_id, request, Box::new(run));
    }

    /// A step of a `sql` call finished.
    pub(in crate::host) fn sql_done(
        &mut self,
        session: &str,
        tool_call_id: &str,
        mut run: SqlRun,
        result: Result<FileReply, String>,
    ) {
        let rows = match result {
            Ok(FileReply::Rows(rows)) => rows,
            Ok(_) => Vec::new(),
            Err(e) => {
                let outcome = ToolOutcome::Failure {
                    message: format!("SQL Error: {e}"),
                    code: "failure".to_owned(),
                };
                return self.complete_tool(session, tool_call_id, outcome);
            }
        };
        if run.schema_step {
            run.schema_step = false;
            if let Some(live) = self.sessions.get_mut(session) {
                live.sql_ready = true;
            }
            return self.next_sql(session, tool_call_id, run);
        }
        if run.statements.iter().any(|s| sql_tool::writes_todos(s)) {
            self.emit(session, "session.todos_changed", &json!({}), true);
        }
        let done: Vec<(String, sql_tool::SqlRows)> = run
            .statements
            .into_iter()
            .zip(
                rows.into_iter()
                    .chain(std::iter::repeat_with(Default::default)),
            )
            .collect();
        let text = sql_tool::describe_all(&done);
        self.complete_tool(session, tool_call_id, ToolOutcome::Success(text));
    }
}

/// A client's read of the session's todos (`session.plan.readSqlTodos*`).
#[derive(Debug)]
pub(crate) struct TodosRead {
    to: (crate::host::ConnId, crate::jsonrpc::OwnedId),
    /// Also the dependency edges (`…WithDependencies`).
    with_dependencies: bool,
    /// The rows read, once read.
    rows: Option<Vec<Value>>,
}

/// The todo rows, ordered by creation then insertion.
const READ_TODOS: &str =
    "SELECT id, title, description, status, created_at FROM todos ORDER BY created_at, rowid";
/// The dependency edges.
const READ_DEPENDENCIES: &str = "SELECT todo_id, depends_on FROM todo_deps";

impl Host {
    /// Answers `to` with `session`'s todos (and their dependencies): `{rows}` or `{rows,
    /// dependencies}`; a part that cannot be read (no database, no table) is empty.
    pub(crate) fn read_sql_todos(
        &mut self,
        session: &str,
        to: (crate::host::ConnId, crate::jsonrpc::OwnedId),
        with_dependencies: bool,
    ) {
        let read = TodosRead {
            to,
            with_dependencies,
            rows: None,
        };
        self.next_todos_read(session, read);
    }

    fn next_todos_read(&mut self, session: &str, read: TodosRead) {
        let query = match (&read.rows, read.with_dependencies) {
            (None, _) if self.has_session_database(session) => READ_TODOS,
            (Some(_), true) if self.has_session_database(session) => READ_DEPENDENCIES,
            _ => {
                let mut answer = json!({"rows": read.rows.unwrap_or_default()});
                if read.with_dependencies {
                    answer["dependencies"] = json!([]);
                }
                return self.respond(read.to.0, &read.to.1, Ok(answer));
            }
        };
        let request = FileRequest::Sqlite {
            database: self.runtime_database(session).unwrap_or_default(),
            statements: vec![SqlStatement::new(query)],
        };
        self.todos_file_op(session, request, Box::new(read));
    }

    /// A read of the todos (or their dependencies) finished.
    pub(in crate::host) fn todos_read_done(
        &mut self,
        session: &str,
        mut read: TodosRead,
        result: Result<FileReply, String>,
    ) {
        let rows = match result {
            Ok(FileReply::Rows(mut rows)) if !rows.is_empty() => rows.swap_remove(0).rows,
            _ => Vec::new(),
        };
        if read.rows.is_none() {
            let todos = rows
                .into_iter()
                .map(|r| {
                    let mut todo = serde_json::Map::new();
                    for (from, to) in [
                        ("id", "id"),
                        ("title", "title"),
                        ("description", "description"),
                        ("status", "status"),
                        ("created_at", "createdAt"),
                    ] {
                        if let Some(Value::String(v)) = r.get(from) {
                            todo.insert(to.to_owned(), json!(v));
                        }
                    }
                    Value::Object(todo)
                })
                .collect();
            read.rows = Some(todos);
            return self.next_todos_read(session, read);
        }
        let dependencies: Vec<Value> = rows
            .into_iter()
            .filter_map(|r| {
                Some(json!({"todoId": r.get("todo_id")?.as_str()?,
                            "dependsOn": r.get("depends_on")?.as_str()?}))
            })
            .collect();
        let answer = json!({"rows": read.rows.unwrap_or_default(), "dependencies": dependencies});
        self.respond(read.to.0, &read.to.1, Ok(answer));
    }
}
