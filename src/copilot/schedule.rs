//! `session.schedule.list` / `stop`: recurring prompts. This server has no scheduler and no
//! method adds a schedule (`session.schedule.add*` are not answered), so every session has
//! none: `list` answers `{entries: []}` and `stop` of any id `{}` (no `entry`: the id is
//! unknown), as the runtime does for an unknown id.

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::host::Host;

use super::method_table::Call;
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

pub(super) fn list(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    decode::<ListParams>(params).and_then(|p| {
        known(host, call.method, &p.session_id)?;
        Ok(json!({"entries": []}))
    })
}

pub(super) fn stop(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    decode::<StopParams>(params).and_then(|p| {
        known(host, call.method, &p.session_id)?;
        Ok(json!({}))
    })
}
