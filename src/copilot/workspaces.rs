//! `session.workspaces.listCheckpoints` / `readCheckpoint` / `saveLargePaste` (and
//! `session.workspaces.diff`, which runs git: `user_shell`).
//!
//! The workspace is the file map kept with the session's events (`stored_state`). Each
//! compaction is a checkpoint (`state_files.rs`: its number, a title from the conversation,
//! its file name, the summary it wrote), read from the log: `listCheckpoints` answers
//! `{checkpoints: [{number, title, filename}]}` in order, `readCheckpoint {number}` its
//! markdown (`{content: null}` for a number the session does not have). `saveLargePaste {content}` stores the content as a new
//! workspace file `paste-<id>.txt` (readable with `session.workspaces.readFile`, listed, and
//! kept across a restart like every workspace file) and answers
//! `{saved: {filename, filePath, sizeBytes}}`; `filePath` is the file's place under the
//! workspace root (`<root>/session-state/<id>/files/<name>`), and `saved` is `null` when
//! no workspace root is configured.

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::host::Host;

use super::method_table::Call;
use super::session_state;
use super::state_files;
use super::surface::{decode, known, Answer};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionOnly {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CheckpointParams {
    session_id: String,
    number: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PasteParams {
    session_id: String,
    content: String,
}

pub(super) fn list_checkpoints(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode::<SessionOnly>(params).and_then(|p| {
        known(host, call.method, &p.session_id)?;
        let checkpoints: Vec<_> = host
            .session(&p.session_id)
            .map(|s| state_files::checkpoints(s.events()))
            .unwrap_or_default()
            .iter()
            .map(|c| json!({"number": c.number, "title": c.title, "filename": c.filename}))
            .collect();
        Ok(json!({ "checkpoints": checkpoints }))
    })
}

pub(super) fn read_checkpoint(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode::<CheckpointParams>(params).and_then(|p| {
        known(host, call.method, &p.session_id)?;
        let content = host
            .session(&p.session_id)
            .map(|s| state_files::checkpoints(s.events()))
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.number == p.number)
            .map(|c| c.content());
        Ok(json!({ "content": content }))
    })
}

pub(super) fn save_large_paste(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    decode::<PasteParams>(params).and_then(|p| {
        known(host, call.method, &p.session_id)?;
        Ok(save_paste(host, &p.session_id, p.content))
    })
}

fn save_paste(host: &mut Host, session: &str, content: String) -> serde_json::Value {
    let mut filename = format!("paste-{}.txt", host.new_id());
    while session_state::has_file(host, session, &filename) {
        filename = format!("paste-{}.txt", host.new_id());
    }
    let Some(file_path) = session_state::file_location(host, session, &filename) else {
        return json!({"saved": null});
    };
    let size = content.len();
    session_state::store_file(host, session, filename.clone(), content);
    json!({"saved": {"filename": filename, "filePath": file_path, "sizeBytes": size}})
}
