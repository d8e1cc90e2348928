//! `session.schedule.list` / `stop`: recurring prompts. This server has no scheduler and no
//! method adds a schedule (`session.schedule.add*` are not answered), so every session has
//! none: `list` answers `{entries: []}` and `stop` of any id `{}` (no `entry`: the id is
//! unknown), as the runtime does for an unknown id.

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::host::Host;

use super::surface::{decode, known, Answer};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListParams {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StopParams {
    session_id: String,
    #[allow(dead_code)]
    id: u64,
}

/// Answers `method` if it is one of this module's.
pub(super) fn dispatch(host: &mut Host, method: &str, params: Option<&RawValue>) -> Option<Answer> {
    match method {
        "session.schedule.list" => Some(decode::<ListParams>(params).and_then(|p| {
            known(host, method, &p.session_id)?;
            Ok(json!({"entries": []}))
        })),
        "session.schedule.stop" => Some(decode::<StopParams>(params).and_then(|p| {
            known(host, method, &p.session_id)?;
            Ok(json!({}))
        })),
        _ => None,
    }
}
