//! `sessionFs.*`: an SDK client as the session's file store (issue 17 B). A connection that
//! sent `sessionFs.setProvider {initialCwd, sessionStatePath, conventions, capabilities}`
//! provides the files of the sessions it attaches to: the built-in tools' file work goes to
//! it as `sessionFs.stat` / `readFile` / `readdirWithTypes` / `writeFile` / `mkdir` /
//! `exists` requests (`{sessionId, path, …}`; answers carry an optional `error {code,
//! message}`) instead of the runtime's file system. Session event storage stays agentwire's.

use serde_json::{json, Value};

use crate::host::{FsAnswer, FsPrimitive};

/// The request for `op` (method and params).
pub(super) fn request(session: &str, op: &FsPrimitive) -> (&'static str, Value) {
    let p = |path: &str| json!({"sessionId": session, "path": path});
    match op {
        FsPrimitive::Stat { path } => ("sessionFs.stat", p(path)),
        FsPrimitive::ReadFile { path } => ("sessionFs.readFile", p(path)),
        FsPrimitive::ReadDir { path } => ("sessionFs.readdirWithTypes", p(path)),
        FsPrimitive::WriteFile { path, content } => (
            "sessionFs.writeFile",
            json!({"sessionId": session, "path": path, "content": content}),
        ),
        FsPrimitive::AppendFile { path, content } => (
            "sessionFs.appendFile",
            json!({"sessionId": session, "path": path, "content": content}),
        ),
        FsPrimitive::Remove { path } => (
            "sessionFs.rm",
            json!({"sessionId": session, "path": path, "recursive": false, "force": true}),
        ),
        FsPrimitive::Mkdir { path } => (
            "sessionFs.mkdir",
            json!({"sessionId": session, "path": path, "recursive": true}),
        ),
        FsPrimitive::Exists { path } => ("sessionFs.exists", p(path)),
        // One statement is a query; several, a transaction.
        FsPrimitive::Sqlite { statements } if statements.len() == 1 => {
            let one = &statements[0];
            (
                "sessionFs.sqliteQuery",
                json!({"sessionId": session, "queryType": one.query_type.as_str(),
                       "query": one.query}),
            )
        }
        FsPrimitive::Sqlite { statements } => {
            let statements: Vec<Value> = statements
                .iter()
                .map(|s| json!({"queryType": s.query_type.as_str(), "query": s.query}))
                .collect();
            (
                "sessionFs.sqliteTransaction",
                json!({"sessionId": session, "statements": statements}),
            )
        }
    }
}

/// Reads the provider's answer to `op`.
pub(super) fn answer(op: &FsPrimitive, result: &Value) -> Result<FsAnswer, String> {
    if let Some(error) = result.get("error").filter(|e| !e.is_null()) {
        let code = error
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("UNKNOWN");
        let path = match op {
            FsPrimitive::Stat { path }
            | FsPrimitive::ReadFile { path }
            | FsPrimitive::ReadDir { path }
            | FsPrimitive::WriteFile { path, .. }
            | FsPrimitive::AppendFile { path, .. }
            | FsPrimitive::Remove { path }
            | FsPrimitive::Mkdir { path }
            | FsPrimitive::Exists { path } => path,
            FsPrimitive::Sqlite { .. } => "SQLite",
        };
        return Err(match (code, error.get("message").and_then(Value::as_str)) {
            ("ENOENT", _) => format!("Path {path} does not exist"),
            (_, Some(message)) => format!("{path}: {message}"),
            (code, None) => format!("{path}: {code}"),
        });
    }
    let flag = |key: &str| result.get(key).and_then(Value::as_bool);
    let malformed = || format!("the file provider's answer is malformed: {result}");
    match op {
        FsPrimitive::Stat { .. } => flag("isDirectory")
            .map(|is_dir| FsAnswer::Stat { is_dir })
            .ok_or_else(malformed),
        FsPrimitive::ReadFile { .. } => result
            .get("content")
            .and_then(Value::as_str)
            .map(|c| FsAnswer::Text(c.to_owned()))
            .ok_or_else(malformed),
        FsPrimitive::ReadDir { .. } => result
            .get("entries")
            .and_then(Value::as_array)
            .map(|entries| {
                FsAnswer::Entries(
                    entries
                        .iter()
                        .filter_map(|e| {
                            let name = e.get("name")?.as_str()?.to_owned();
                            Some((
                                name,
                                e.get("type").and_then(Value::as_str) == Some("directory"),
                            ))
                        })
                        .collect(),
                )
            })
            .ok_or_else(malformed),
        FsPrimitive::WriteFile { .. }
        | FsPrimitive::AppendFile { .. }
        | FsPrimitive::Remove { .. }
        | FsPrimitive::Mkdir { .. } => Ok(FsAnswer::Done),
        FsPrimitive::Exists { .. } => flag("exists").map(FsAnswer::Exists).ok_or_else(malformed),
        // `exec` may answer nothing at all.
        FsPrimitive::Sqlite { statements } if statements.len() == 1 => Ok(FsAnswer::Rows(vec![
            crate::agent::sql_tool::SqlRows::from_json(result),
        ])),
        FsPrimitive::Sqlite { statements } => {
            let results = result.get("results").and_then(Value::as_array);
            match results {
                Some(results) if results.len() == statements.len() => Ok(FsAnswer::Rows(
                    results
                        .iter()
                        .map(crate::agent::sql_tool::SqlRows::from_json)
                        .collect(),
                )),
                _ => Err(malformed()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::sql_tool::SqlStatement;

    #[test]
    fn several_statements_are_one_sqlite_transaction() {
        let op = FsPrimitive::Sqlite {
            statements: vec![
                SqlStatement::new("INSERT INTO t VALUES (1)"),
                SqlStatement::new("SELECT * FROM t"),
            ],
        };
        let (method, params) = request("s1", &op);
        assert_eq!(method, "sessionFs.sqliteTransaction");
        assert_eq!(
            params,
            json!({"sessionId": "s1", "statements": [
                {"queryType": "run", "query": "INSERT INTO t VALUES (1)"},
                {"queryType": "query", "query": "SELECT * FROM t"}]})
        );
        let answer = json!({"results": [{"rows": [], "columns": [], "rowsAffected": 1,
                                         "lastInsertRowid": 4},
                                        {"rows": [{"a": 1}], "columns": ["a"], "rowsAffected": 0}]});
        let Ok(FsAnswer::Rows(rows)) = super::answer(&op, &answer) else {
            panic!("rows expected");
        };
        assert_eq!(rows[0].last_insert_rowid, Some(4));
        assert_eq!(rows[1].columns, ["a"]);
        // A failed transaction is the provider's error; a short answer is malformed.
        let failed =
            json!({"results": [], "error": {"errorClass": "fatal", "message": "no such table: t"}});
        assert_eq!(
            super::answer(&op, &failed),
            Err("SQLite: no such table: t".to_owned())
        );
        assert!(super::answer(&op, &json!({"results": []})).is_err());
    }
}
