//! `session.plan.readSqlTodos` / `readSqlTodosWithDependencies`: the todos the model keeps
//! with the `sql` tool in the session's database (`host/sessions/sql.rs`), answered once
//! read.

use serde_json::value::RawValue;
use serde_json::Value;

use crate::host::Host;

use super::method_table::{Call, Reply};
use super::session_state::session_id;
use super::surface::{decode, known};

fn read(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>, deps: bool) -> Reply {
    let session = match decode::<Value>(params).and_then(|p| session_id(&p)) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = known(host, call.method, &session) {
        return Some(Err(e));
    }
    host.read_sql_todos(&session, (call.conn, call.id.clone()), deps);
    None
}

/// `session.plan.readSqlTodos`: `{rows}`.
pub(super) fn todos(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    read(host, call, params, false)
}

/// `session.plan.readSqlTodosWithDependencies`: `{rows, dependencies}`.
pub(super) fn with_dependencies(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Reply {
    read(host, call, params, true)
}
