//! The built-in `sql` tool's text: its declaration, how a query is split into statements and
//! what kind of execution each needs, and how results are told to the model (the runtime's
//! words). The host runs the statements on the session's SQLite database
//! (`host/sessions/sql.rs`).

use serde_json::{json, Map, Value};

use crate::model::ToolSpec;

/// The tool's name.
pub const SQL: &str = "sql";

/// How a statement is executed, as a session file provider names it (`queryType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SqlQueryType {
    /// No result (schema changes, several statements at once).
    Exec,
    /// Rows changed and the last inserted row id (`INSERT`, `UPDATE`, `DELETE`).
    Run,
    /// Rows returned (`SELECT`, `WITH`, `PRAGMA`, …).
    Query,
}

impl SqlQueryType {
    /// The wire name (`exec`, `run`, `query`).
    pub fn as_str(self) -> &'static str {
        match self {
            SqlQueryType::Exec => "exec",
            SqlQueryType::Run => "run",
            SqlQueryType::Query => "query",
        }
    }
}

/// One statement and how it is executed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlStatement {
    /// How it is executed.
    pub query_type: SqlQueryType,
    /// The SQL.
    pub query: String,
}

impl SqlStatement {
    /// `query`, executed as its first keyword says ([`query_type`]).
    pub fn new(query: &str) -> Self {
        SqlStatement {
            query_type: query_type(query),
            query: query.to_owned(),
        }
    }
}

/// What one statement gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SqlRows {
    /// The column names of the rows returned.
    pub columns: Vec<String>,
    /// The rows returned (objects by column name).
    pub rows: Vec<Map<String, Value>>,
    /// Rows changed.
    pub rows_affected: u64,
    /// The last inserted row id, after an `INSERT`.
    pub last_insert_rowid: Option<i64>,
}

impl SqlRows {
    /// Reads the `{rows, columns, rowsAffected, lastInsertRowid}` shape (absent parts empty).
    pub fn from_json(value: &Value) -> Self {
        let rows: Vec<Map<String, Value>> = value
            .get("rows")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_object().cloned())
            .collect();
        let mut columns = crate::jsonrpc::string_array(value.get("columns"));
        if columns.is_empty() {
            if let Some(first) = rows.first() {
                columns = first.keys().cloned().collect();
            }
        }
        SqlRows {
            columns,
            rows,
            rows_affected: value
                .get("rowsAffected")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            last_insert_rowid: value.get("lastInsertRowid").and_then(Value::as_i64),
        }
    }
}

/// The tables every session database starts with (created before its first statement).
pub const SESSION_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS todos (\
id TEXT PRIMARY KEY, title TEXT NOT NULL, description TEXT, \
status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'in_progress', 'done', 'blocked')), \
created_at TEXT DEFAULT CURRENT_TIMESTAMP, updated_at TEXT DEFAULT CURRENT_TIMESTAMP); \
CREATE TABLE IF NOT EXISTS todo_deps (\
todo_id TEXT NOT NULL, depends_on TEXT NOT NULL, PRIMARY KEY (todo_id, depends_on));";

/// The tool's declaration.
pub fn sql_spec() -> ToolSpec {
    ToolSpec {
        name: SQL.to_owned(),
        description: "Run SQL on this session's own SQLite database, for structured working \
            data: todo tracking, test cases, batches, state. The database lasts as long as the \
            session and no other session sees it. It starts with two tables: `todos` (id, \
            title, description, status: pending/in_progress/done/blocked, created_at, \
            updated_at) and `todo_deps` (todo_id, depends_on); insert into them rather than \
            creating them, and create any other tables you need. Any SQLite statement works; \
            several may be sent at once, separated by semicolons."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "description": {"type": "string",
                    "description": "What the query does, in two to five words (e.g. 'Insert auth todos')."},
                "query": {"type": "string", "description": "The SQL to run."},
                "database": {"type": "string", "enum": ["session"],
                    "description": "The database: \"session\" (the default), this session's own."}
            },
            "required": ["description", "query"]
        }),
    }
}

/// The statements of `query`, split at semicolons outside quotes and comments (empty ones
/// dropped, each trimmed).
pub fn split_statements(query: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = query.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            current.push(c);
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => {
                quote = Some(c);
                current.push(c);
            }
            '-' if chars.peek() == Some(&'-') => {
                // A line comment: dropped up to its newline.
                for c in chars.by_ref() {
                    if c == '\n' {
                        current.push('\n');
                        break;
                    }
                }
            }
            ';' => {
                let statement = current.trim();
                if !statement.is_empty() {
                    out.push(statement.to_owned());
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    let statement = current.trim();
    if !statement.is_empty() {
        out.push(statement.to_owned());
    }
    out
}

/// The statement's first keyword, upper case.
pub fn keyword(statement: &str) -> String {
    statement
        .split(|c: char| !c.is_ascii_alphabetic())
        .find(|w| !w.is_empty())
        .unwrap_or_default()
        .to_ascii_uppercase()
}

/// How `statement` is executed.
pub fn query_type(statement: &str) -> SqlQueryType {
    match keyword(statement).as_str() {
        "SELECT" | "WITH" | "PRAGMA" | "EXPLAIN" | "VALUES" => SqlQueryType::Query,
        "INSERT" | "UPDATE" | "DELETE" | "REPLACE" => SqlQueryType::Run,
        _ => SqlQueryType::Exec,
    }
}

/// Whether `statement` writes the `todos` or `todo_deps` table.
pub fn writes_todos(statement: &str) -> bool {
    query_type(statement) != SqlQueryType::Query && statement.to_ascii_lowercase().contains("todo")
}

/// What the model is told one statement gave.
pub fn describe(statement: &str, rows: &SqlRows) -> String {
    match keyword(statement).as_str() {
        "INSERT" | "REPLACE" => {
            let mut text = format!("{} row(s) inserted.", rows.rows_affected);
            if let Some(id) = rows.last_insert_rowid {
                text.push_str(&format!(" Last inserted row ID: {id}."));
            }
            text
        }
        "UPDATE" => format!("{} row(s) updated.", rows.rows_affected),
        "DELETE" => format!("{} row(s) deleted.", rows.rows_affected),
        _ if query_type(statement) == SqlQueryType::Query => table(rows),
        "CREATE" | "DROP" | "ALTER" => "Schema operation completed successfully.".to_owned(),
        _ => format!(
            "Query executed successfully. Rows affected: {}.",
            rows.rows_affected
        ),
    }
}

/// What the model is told a whole query gave: one statement's result, or each in turn.
pub fn describe_all(results: &[(String, SqlRows)]) -> String {
    if let [(statement, rows)] = results {
        return describe(statement, rows);
    }
    let mut text = format!("Executed {} statement(s):", results.len());
    for (i, (statement, rows)) in results.iter().enumerate() {
        text.push_str(&format!(
            "\n\n{}. {}\n   {}",
            i + 1,
            keyword(statement),
            describe(statement, rows).replace('\n', "\n   ")
        ));
    }
    text
}

/// Rows as a Markdown table under a count.
fn table(rows: &SqlRows) -> String {
    if rows.rows.is_empty() {
        return "Query returned 0 rows.".to_owned();
    }
    let cell = |v: Option<&Value>| match v {
        None | Some(Value::Null) => "NULL".to_owned(),
        Some(Value::String(s)) => s.replace('|', "\\|").replace('\n', " "),
        Some(other) => other.to_string(),
    };
    let mut text = format!("{} row(s) returned:\n\n", rows.rows.len());
    text.push_str(&format!("| {} |\n", rows.columns.join(" | ")));
    text.push_str(&format!(
        "|{}\n",
        " --- |".repeat(rows.columns.len().max(1))
    ));
    for row in &rows.rows {
        let cells: Vec<String> = rows.columns.iter().map(|c| cell(row.get(c))).collect();
        text.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    text.truncate(text.trim_end().len());
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_outside_quotes_and_comments() {
        let q = "INSERT INTO t VALUES ('a;b'); -- note; here\nSELECT \"x;\" FROM t;;  ";
        assert_eq!(
            split_statements(q),
            ["INSERT INTO t VALUES ('a;b')", "SELECT \"x;\" FROM t"]
        );
        assert!(split_statements("  ; -- only a comment").is_empty());
    }

    #[test]
    fn each_statement_kind_has_its_execution_and_words() {
        assert_eq!(query_type("select 1"), SqlQueryType::Query);
        assert_eq!(query_type("  insert into t values (1)"), SqlQueryType::Run);
        assert_eq!(query_type("CREATE TABLE t (a)"), SqlQueryType::Exec);
        let inserted = SqlRows {
            rows_affected: 1,
            last_insert_rowid: Some(3),
            ..SqlRows::default()
        };
        assert_eq!(
            describe("INSERT INTO t VALUES (1)", &inserted),
            "1 row(s) inserted. Last inserted row ID: 3."
        );
        assert_eq!(
            describe("CREATE TABLE t (a)", &SqlRows::default()),
            "Schema operation completed successfully."
        );
        assert_eq!(
            describe("SELECT 1", &SqlRows::default()),
            "Query returned 0 rows."
        );
        let rows = SqlRows::from_json(&json!({"rows": [{"id": "a", "n": 1}], "columns": []}));
        assert_eq!(
            describe("SELECT * FROM t", &rows),
            "1 row(s) returned:\n\n| id | n |\n| --- | --- |\n| a | 1 |"
        );
    }

    #[test]
    fn several_statements_are_told_in_turn() {
        let one = SqlRows {
            rows_affected: 1,
            last_insert_rowid: Some(1),
            ..SqlRows::default()
        };
        let text = describe_all(&[
            ("INSERT INTO a VALUES (1)".into(), one.clone()),
            ("insert into b values (2)".into(), one),
        ]);
        assert_eq!(
            text,
            "Executed 2 statement(s):\n\n1. INSERT\n   1 row(s) inserted. Last inserted row ID: 1.\
             \n\n2. INSERT\n   1 row(s) inserted. Last inserted row ID: 1."
        );
        assert!(writes_todos("INSERT INTO todos (id) VALUES ('x')"));
        assert!(!writes_todos("SELECT * FROM todos"));
    }
}
