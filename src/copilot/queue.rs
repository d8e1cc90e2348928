//! `session.queue.pendingItems` / `removeMostRecent` / `clear`: the session's pending queue —
//! prompts sent while a turn runs (the agent's queue) and slash commands
//! `session.commands.enqueue` queued that were not offered to a client yet (a command
//! offered as `command.queued` is being handled, no longer pending). Prompts sent with
//! `mode: "immediate"` during a turn wait for the turn's next model call instead:
//! `steeringMessages` lists their texts.

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::host::Host;
use crate::jsonrpc::ErrorObject;

use super::method_table::Call;
use super::surface::{decode, failed, known, Answer};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionOnly {
    session_id: String,
}

/// The params' loaded session, and the "Session not found" failure of `method` for it.
fn queue_of(
    host: &Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Result<String, ErrorObject> {
    let p = decode::<SessionOnly>(params)?;
    known(host, call.method, &p.session_id)?;
    Ok(p.session_id)
}

fn gone(call: &Call<'_>, session: &str) -> ErrorObject {
    failed(
        call.method,
        format!("Session not found for sessionId: {session}"),
    )
}

pub(super) fn pending_items(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let session = queue_of(host, call, params)?;
    let items = host
        .queued_items(&session)
        .ok_or_else(|| gone(call, &session))?;
    let items: Vec<_> = items
        .into_iter()
        .map(|item| {
            json!({"id": item.id,
                   "kind": if item.command { "command" } else { "message" },
                   "displayText": item.text, "agentMode": "interactive"})
        })
        .collect();
    let steering: Vec<String> = host
        .session_agent(&session)
        .map(|agent| agent.steering_prompts())
        .unwrap_or_default()
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    Ok(json!({"items": items, "steeringMessages": steering}))
}

pub(super) fn remove_most_recent(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Answer {
    let session = queue_of(host, call, params)?;
    let removed = host
        .drop_queued_items(&session, false)
        .ok_or_else(|| gone(call, &session))?;
    Ok(json!({"removed": removed > 0}))
}

pub(super) fn clear(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let session = queue_of(host, call, params)?;
    host.drop_queued_items(&session, true)
        .ok_or_else(|| gone(call, &session))?;
    Ok(json!({}))
}
