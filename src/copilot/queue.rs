//! `session.queue.pendingItems` / `removeMostRecent` / `clear`: the session's pending queue —
//! prompts sent while a turn runs (the agent's queue) and slash commands
//! `session.commands.enqueue` queued that were not offered to a client yet (a command
//! offered as `command.queued` is being handled, no longer pending). There is no separate
//! steering queue: prompts sent during a turn wait for it (`steeringMessages` is empty).

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::host::Host;

use super::surface::{decode, failed, known, Answer};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionOnly {
    session_id: String,
}

/// Answers `method` if it is one of this module's.
pub(super) fn dispatch(host: &mut Host, method: &str, params: Option<&RawValue>) -> Option<Answer> {
    if !matches!(
        method,
        "session.queue.pendingItems" | "session.queue.removeMostRecent" | "session.queue.clear"
    ) {
        return None;
    }
    Some(decode::<SessionOnly>(params).and_then(|p| {
        known(host, method, &p.session_id)?;
        let gone = || {
            failed(
                method,
                format!("Session not found for sessionId: {}", p.session_id),
            )
        };
        match method {
            "session.queue.pendingItems" => {
                let items = host.queued_items(&p.session_id).ok_or_else(gone)?;
                let items: Vec<_> = items
                    .into_iter()
                    .map(|item| {
                        json!({"id": item.id,
                               "kind": if item.command { "command" } else { "message" },
                               "displayText": item.text, "agentMode": "interactive"})
                    })
                    .collect();
                Ok(json!({"items": items, "steeringMessages": []}))
            }
            "session.queue.removeMostRecent" => {
                let removed = host
                    .drop_queued_items(&p.session_id, false)
                    .ok_or_else(gone)?;
                Ok(json!({"removed": removed > 0}))
            }
            _ => {
                host.drop_queued_items(&p.session_id, true)
                    .ok_or_else(gone)?;
                Ok(json!({}))
            }
        }
    }))
}
