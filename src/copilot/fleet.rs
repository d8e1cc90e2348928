//! `session.fleet.start {prompt?}`: fleet mode, as the runtime starts it. The session's
//! agent gets one prompt: the runtime's fleet instructions (decompose the work into todos in
//! the session database, the `sql` tool, and dispatch sub-agents for them, the `task` tool),
//! followed by `User request: <prompt>` when one is given. `{started: true}` once it is
//! queued; the turn then runs as any other (its events are the session's; no
//! `session.idle` waits for the sub-agents beyond the turn's own). Sub-agents run in `sync`
//! mode only (see `agent/subagent.rs`), so the instructions' background dispatch is
//! answered by the `task` tool with that limit.

use serde_json::{json, Value};

use crate::agent::{AgentInput, PromptContext};
use crate::host::Host;

use super::method_table::Call;
use super::surface::Answer;

/// The runtime's fleet-mode instructions (the text its model sees).
const FLEET_INSTRUCTIONS: &str = r#"You are now in fleet mode. Dispatch sub-agents (via the task tool) in parallel to do the work.

**Getting Started**
1. Check for existing todos: `SELECT id, title, status FROM todos WHERE status != 'done'`
2. If todos exist, dispatch them in parallel (respecting dependencies)
3. If no todos exist, help decompose the work into todos first. Try to structure todos to minimize dependencies and maximize parallel execution.

**Parallel Execution**
- Dispatch independent todos simultaneously
- Never dispatch just a single background subagent. Prefer one sync subagent, or better, prefer to efficiently dispatch multiple background subagents in the same turn.
- Only serialize todos with true dependencies (check todo_deps)
- Query ready todos: `SELECT * FROM todos WHERE status = 'pending' AND id NOT IN (SELECT todo_id FROM todo_deps td JOIN todos t ON td.depends_on = t.id WHERE t.status != 'done')`

**Sub-Agent Instructions**
When dispatching a sub-agent, include these instructions in your prompt:
1. Update the todo status when finished:
   - Success: `UPDATE todos SET status = 'done' WHERE id = '<todo-id>'`
   - Blocked: `UPDATE todos SET status = 'blocked' WHERE id = '<todo-id>'`
2. Always return a response summarizing:
   - What was completed
   - Whether the todo is fully done or needs more work
   - Any blockers or questions that need resolution

**Coordination**
- After sub-agents return, check todo status in SQL (source of truth)
- If status is still 'in_progress', the sub-agent may have failed to update - investigate
- Use the sub-agent's response to understand context, but trust SQL for status

**After Sub-Agents Complete**
- Check the work done by sub-agents and validate the original request is fully satisfied
- Ensure the work done by sub-agents (both implementation and testing) is sensible, robust, and handles edge cases, not just the happy path
- If the original request is not fully satisfied, decompose remaining work into new todos and dispatch more sub-agents as needed

Now proceed with the user's request using fleet mode."#;

/// The prompt fleet mode sends for the client's `prompt`.
fn fleet_prompt(prompt: Option<&str>) -> String {
    match prompt.map(str::trim).filter(|p| !p.is_empty()) {
        Some(prompt) => format!("{FLEET_INSTRUCTIONS}\n\nUser request: {prompt}"),
        None => FLEET_INSTRUCTIONS.to_owned(),
    }
}

pub(super) fn start(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let prompt = fleet_prompt(p.get("prompt").and_then(Value::as_str));
    let message_id = host.new_id();
    host.set_last_session(session);
    host.queue_agent_input(
        session,
        AgentInput::Prompt {
            message_id,
            prompt,
            attachments: PromptContext::default(),
        },
    );
    Ok(json!({"started": true}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_request_follows_the_instructions() {
        let text = fleet_prompt(Some("Ship it."));
        assert!(text.starts_with("You are now in fleet mode."));
        assert!(text.ends_with("using fleet mode.\n\nUser request: Ship it."));
        assert_eq!(fleet_prompt(Some("  ")), FLEET_INSTRUCTIONS);
        assert_eq!(fleet_prompt(None), FLEET_INSTRUCTIONS);
    }
}
