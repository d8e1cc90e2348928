//! A session's pending queue as clients see it (`session.queue.*` in the Copilot dialect):
//! the prompts waiting for the running turn ([`Agent::queued_prompts`]) and the slash
//! commands `session.commands.enqueue` queued that were not offered to a client yet.
//!
//! [`Agent::queued_prompts`]: crate::agent::Agent::queued_prompts

use serde_json::json;

use crate::agent::AgentInput;
use crate::host::Host;

/// One pending item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct QueuedItem {
    /// The prompt's message id, or the command's queue id.
    pub id: String,
    /// Whether it is a slash command (else a prompt).
    pub command: bool,
    /// The prompt or the command text.
    pub text: String,
}

impl Host {
    /// The session's pending items: queued prompts first (oldest first), then queued
    /// commands (in order). `None` when the session is not loaded.
    pub(crate) fn queued_items(&self, session: &str) -> Option<Vec<QueuedItem>> {
        let live = self.sessions.get(session)?;
        let prompts = live.agent.as_ref().map(|a| a.queued_prompts());
        let mut items: Vec<QueuedItem> = (prompts.into_iter().flatten())
            .map(|(id, text)| QueuedItem {
                id,
                command: false,
                text,
            })
            .collect();
        items.extend(live.command_queue.iter().map(|(id, text)| QueuedItem {
            id: id.clone(),
            command: true,
            text: text.clone(),
        }));
        Some(items)
    }

    /// The message ids of the prompts waiting for the session's agent: in its queue or its
    /// steering, held by the turn gate, or not handed to it yet; `None` when that cannot be told now (no
    /// such session, or its agent is handling an input: this is called from an event it
    /// emits).
    pub(crate) fn queued_prompt_ids(&self, session: &str) -> Option<Vec<String>> {
        let live = self.sessions.get(session)?;
        let agent = live.agent.as_ref()?;
        let prompt_id = |input: &AgentInput| match input {
            AgentInput::Prompt { message_id, .. } => Some(message_id.clone()),
            _ => None,
        };
        let mut ids: Vec<String> = agent
            .queued_prompts()
            .into_iter()
            .chain(agent.steering_prompts())
            .map(|(id, _)| id)
            .collect();
        ids.extend(live.held.iter().filter_map(prompt_id));
        ids.extend(
            self.agent_inputs
                .iter()
                .filter(|(s, _)| s == session)
                .filter_map(|(_, input)| prompt_id(input)),
        );
        Some(ids)
    }

    /// Removes the most recent pending item (the last queued command, else the last queued
    /// prompt), or every item with `all`. Returns how many were removed (`None`: the session
    /// is not loaded). Dropping prompts emits `pending_messages.modified`.
    pub(crate) fn drop_queued_items(&mut self, session: &str, all: bool) -> Option<usize> {
        let live = self.sessions.get_mut(session)?;
        let mut commands = 0;
        if all {
            commands = live.command_queue.len();
            live.command_queue.clear();
        } else if live.command_queue.pop_back().is_some() {
            return Some(1);
        }
        let prompts = match live.agent.as_mut() {
            Some(agent) => agent.drop_queued_prompts(all),
            None => 0,
        };
        if prompts > 0 {
            self.emit(session, "pending_messages.modified", &json!({}), true);
        }
        Some(commands + prompts)
    }
}
