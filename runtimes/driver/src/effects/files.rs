//! Performs the file operations of built-in tool calls (`EffectOp::FileOp`): each runs with
//! blocking `std::fs` calls on a plain thread, and its result is fed back to the host by a
//! driver task (`EffectEvent::FileDone`). The host has already asked permission and
//! decided the paths; this only moves bytes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentwire::agent::sql_tool::{SqlQueryType, SqlRows, SqlStatement};
use agentwire::host::{EffectEvent, EffectId, FileReply, FileRequest};

use super::Port;
use crate::sync::Queue;

/// Starts file operation `id`; its result reaches the host later.
pub(super) fn perform(port: &Arc<dyn Port>, id: EffectId, request: FileRequest) {
    let queue = Arc::new(Queue::new());
    let producer = queue.clone();
    let started = std::thread::Builder::new()
        .name(format!("agentwire-file-{}", id.get()))
        .spawn(move || producer.push(run(&request)));
    if let Err(e) = started {
        queue.push(Err(format!("cannot start the file thread: {e}")));
    }
    let reporter = port.clone();
    port.spawn(Box::pin(async move {
        let result = queue.pop().await;
        reporter.report(id, EffectEvent::FileDone(result));
    }));
}

/// Performs one request on this thread.
fn run(request: &FileRequest) -> Result<FileReply, String> {
    match request {
        FileRequest::Read { path } => read(Path::new(path)),
        FileRequest::Write {
            path,
            content,
            create_new,
        } => write(Path::new(path), content, *create_new),
        FileRequest::Append { path, content } => append(Path::new(path), content),
        FileRequest::Sqlite {
            database,
            statements,
        } => sqlite(Path::new(database), statements),
        FileRequest::Walk { root, limit } => {
            let root = Path::new(root);
            let meta = fs::metadata(root).map_err(|e| describe(root, &e))?;
            if meta.is_file() {
                return Ok(FileReply::Entries(vec![String::new()]));
            }
            let mut out = Vec::new();
            walk(root, "", *limit, &mut out);
            out.sort();
            Ok(FileReply::Entries(out))
        }
        FileRequest::ReadMany {
            root,
            paths,
            max_file_bytes,
        } => {
            let mut texts = Vec::new();
            for rel in paths {
                let path = if rel.is_empty() {
                    PathBuf::from(root)
                } else {
                    Path::new(root).join(rel)
                };
                let small = fs::metadata(&path).is_ok_and(|m| m.len() <= *max_file_bytes);
                if let (true, Ok(bytes)) = (small, fs::read(&path)) {
                    if let Ok(text) = String::from_utf8(bytes) {
                        texts.push((rel.clone(), text));
                    }
                }
            }
            Ok(FileReply::Texts(texts))
        }
        FileRequest::CopyDir { from, to } => copy_dir(Path::new(from), Path::new(to)),
        FileRequest::Remove { path } => remove(Path::new(path)),
    }
}

/// Replaces `to` with a copy of the directory tree `from` (`.git` and symbolic links left
/// out). The copy is made beside `to` and renamed into place, so a failed copy leaves `to`
/// as it was.
fn copy_dir(from: &Path, to: &Path) -> Result<FileReply, String> {
    let meta = fs::metadata(from).map_err(|e| describe(from, &e))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", from.display()));
    }
    let parent = to
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| format!("{} has no parent directory", to.display()))?;
    fs::create_dir_all(parent).map_err(|e| describe(parent, &e))?;
    let name = to
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let staging = parent.join(format!(".{name}.copy-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    if let Err(e) = copy_tree(from, &staging) {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    if let Err(e) = remove(to) {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    fs::rename(&staging, to).map_err(|e| {
        let _ = fs::remove_dir_all(&staging);
        describe(to, &e)
    })?;
    Ok(FileReply::Written)
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    fs::create_dir_all(to).map_err(|e| describe(to, &e))?;
    for entry in fs::read_dir(from).map_err(|e| describe(from, &e))? {
        let entry = entry.map_err(|e| describe(from, &e))?;
        let target = to.join(entry.file_name());
        match entry.file_type() {
            Ok(t) if t.is_dir() && entry.file_name() != ".git" => {
                copy_tree(&entry.path(), &target)?;
            }
            Ok(t) if t.is_file() => {
                fs::copy(entry.path(), &target).map_err(|e| describe(&entry.path(), &e))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs SQL statements on the database file `database` (made, with its directory, if
/// missing), several in one transaction. Each call opens the file afresh: a session's calls
/// come one at a time, and SQLite's own locking covers the rest.
fn sqlite(database: &Path, statements: &[SqlStatement]) -> Result<FileReply, String> {
    if let Some(parent) = database.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|e| describe(parent, &e))?;
    }
    let mut db = rusqlite::Connection::open(database).map_err(|e| e.to_string())?;
    db.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    if let [one] = statements {
        return Ok(FileReply::Rows(vec![run_statement(&db, one)?]));
    }
    // All or none: the transaction rolls back when dropped uncommitted.
    let tx = db.transaction().map_err(|e| e.to_string())?;
    let mut results = Vec::with_capacity(statements.len());
    for statement in statements {
        results.push(run_statement(&tx, statement)?);
    }
    tx.commit().map_err(|e| e.to_string())?;
    Ok(FileReply::Rows(results))
}

/// One statement, executed as its query type says.
fn run_statement(db: &rusqlite::Connection, statement: &SqlStatement) -> Result<SqlRows, String> {
    let query = statement.query.as_str();
    match statement.query_type {
        SqlQueryType::Exec => {
            db.execute_batch(query).map_err(|e| e.to_string())?;
            Ok(SqlRows::default())
        }
        SqlQueryType::Run => {
            let changed = db.execute(query, []).map_err(|e| e.to_string())?;
            Ok(SqlRows {
                rows_affected: changed as u64,
                last_insert_rowid: Some(db.last_insert_rowid()),
                ..SqlRows::default()
            })
        }
        SqlQueryType::Query => {
            let mut prepared = db.prepare(query).map_err(|e| e.to_string())?;
            let columns: Vec<String> = prepared
                .column_names()
                .into_iter()
                .map(str::to_owned)
                .collect();
            let mut rows = Vec::new();
            let mut cursor = prepared.query([]).map_err(|e| e.to_string())?;
            while let Some(row) = cursor.next().map_err(|e| e.to_string())? {
                let mut object = serde_json::Map::new();
                for (i, column) in columns.iter().enumerate() {
                    let value = match row.get_ref(i).map_err(|e| e.to_string())? {
                        rusqlite::types::ValueRef::Null => serde_json::Value::Null,
                        rusqlite::types::ValueRef::Integer(n) => n.into(),
                        rusqlite::types::ValueRef::Real(x) => x.into(),
                        rusqlite::types::ValueRef::Text(t) => {
                            String::from_utf8_lossy(t).into_owned().into()
                        }
                        rusqlite::types::ValueRef::Blob(b) => format!("<{} bytes>", b.len()).into(),
                    };
                    object.insert(column.clone(), value);
                }
                rows.push(object);
            }
            Ok(SqlRows {
                columns,
                rows,
                ..SqlRows::default()
            })
        }
    }
}

/// Removes the file or directory tree `path` (a missing path is fine).
fn remove(path: &Path) -> Result<FileReply, String> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileReply::Written),
        Err(e) => Err(describe(path, &e)),
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path)
            .map(|()| FileReply::Written)
            .map_err(|e| describe(path, &e)),
        Ok(_) => fs::remove_file(path)
            .map(|()| FileReply::Written)
            .map_err(|e| describe(path, &e)),
    }
}

fn describe(path: &Path, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("Path {} does not exist", path.display()),
        std::io::ErrorKind::AlreadyExists => {
            format!("Path {} already exists", path.display())
        }
        _ => format!("{}: {e}", path.display()),
    }
}

fn read(path: &Path) -> Result<FileReply, String> {
    let meta = fs::metadata(path).map_err(|e| describe(path, &e))?;
    if meta.is_dir() {
        let mut entries = Vec::new();
        for entry in fs::read_dir(path).map_err(|e| describe(path, &e))? {
            let entry = entry.map_err(|e| describe(path, &e))?;
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            entries.push(name);
        }
        return Ok(FileReply::Entries(entries));
    }
    let bytes = fs::read(path).map_err(|e| describe(path, &e))?;
    String::from_utf8(bytes).map(FileReply::Text).or_else(|e| {
        // An image is answered with its bytes (`view` shows it to the model).
        if agentwire::host::image_media_type(&path.to_string_lossy()).is_some() {
            Ok(FileReply::Bytes(e.into_bytes()))
        } else {
            Err(format!("{} is not a UTF-8 text file", path.display()))
        }
    })
}

fn write(path: &Path, content: &str, create_new: bool) -> Result<FileReply, String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|e| describe(parent, &e))?;
    }
    let mut options = fs::OpenOptions::new();
    options.write(true);
    if create_new {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    let mut file = options.open(path).map_err(|e| describe(path, &e))?;
    file.write_all(content.as_bytes())
        .map_err(|e| describe(path, &e))?;
    Ok(FileReply::Written)
}

/// Appends `content` to `path` with one write (creating the file and its parents).
fn append(path: &Path, content: &str) -> Result<FileReply, String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|e| describe(parent, &e))?;
    }
    let mut file = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| describe(path, &e))?;
    file.write_all(content.as_bytes())
        .map_err(|e| describe(path, &e))?;
    Ok(FileReply::Written)
}

/// Collects the files below `dir` (paths relative to the walk's root), skipping `.git`
/// and not following symbolic links to directories.
fn walk(dir: &Path, prefix: &str, limit: usize, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() >= limit {
            return;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        match entry.file_type() {
            Ok(t) if t.is_dir() && name != ".git" => walk(&entry.path(), &rel, limit, out),
            Ok(t) if t.is_file() => out.push(rel),
            _ => {}
        }
    }
}
