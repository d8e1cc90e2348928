//! Infinite sessions: background compaction of a model session's conversation.
//!
//! When a model call of the session starts with its conversation (the messages after the
//! system prompt) filling more than `infiniteSessions.backgroundCompactionThreshold` of the
//! model's context window (default 0.8; `tokenLimit` as `session.usage_info` reports it), and
//! at least [`MIN_MESSAGES`] conversation messages came since the last compaction, the host
//! asks the session's model, beside the running call, to summarize the conversation so far:
//! the conversation, its system prompt and [`COMPACTION_PROMPT`], no tools (the one-shot call
//! of `mcp/sampling.rs`). `session.compaction_start {trigger: "threshold", conversationTokens,
//! tokenLimit}` marks the point the summary covers; when the model answers,
//! `session.compaction_complete {success, summaryContent, compactionTokensUsed, …}` is
//! persisted, and from then on the model sees, instead of the messages before that point,
//! one user message with the user's messages and the summary ([`summary_message`]); what came
//! after the point (the answer of the call that was running) stays. A failed compaction is a
//! `session.compaction_complete {success: false, error}`; the conversation stays whole.
//!
//! `infiniteSessions.enabled: false` turns it off. The session is not held at
//! `bufferExhaustionThreshold` while a compaction runs (a call that overflows the window
//! fails as any call does).

use serde_json::{json, Value};

use crate::host::mcp::sampling::CompactionJob;
use crate::host::Host;
use crate::model::{ChatMessage, ChatRequest};

/// Fewest conversation messages since the last compaction before another one starts.
pub(crate) const MIN_MESSAGES: usize = 3;

/// What the model is asked to summarize the conversation with.
pub(crate) const COMPACTION_PROMPT: &str = "Please create a detailed summary of the \
conversation so far. The history is being compacted so that the work can continue with less \
context: your summary replaces the earlier messages, so it must carry everything needed to go \
on without them.

Write the summary with these sections, each in its own tag:

<overview>
What the user asked for overall and the approach taken.
</overview>

<history>
The user's requests in order, each with what was done in response.
</history>

<work_done>
What was completed, changed or delivered, and what is still in progress.
</work_done>

<technical_details>
Facts, decisions, constraints and findings that later work depends on.
</technical_details>

<important_files>
The files that matter, with why (or \"None\").
</important_files>

<next_steps>
What remains to be done next, if anything.
</next_steps>

<checkpoint_title>A short title for this point of the conversation</checkpoint_title>";

/// Estimated tokens of `bytes` bytes of text (as `session.usage_info` counts them).
fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The user message that stands for the messages a compaction summarized: the user's
/// messages before it, then the summary (the runtime's wording).
pub(crate) fn summary_message(user_messages: &[String], summary: &str) -> String {
    let mut text = String::from(
        "Some of the conversation history has been summarized to free up context.\n\nYou were \
         originally given instructions from a user over one or more turns. Here were the user \
         messages:\n",
    );
    for message in user_messages {
        text.push_str("<user_message>\n");
        text.push_str(message);
        text.push_str("\n</user_message>\n");
    }
    text.push_str("\nHere is a summary of the prior context:\n<summary>\n");
    text.push_str(summary.trim());
    text.push_str("\n</summary>");
    text
}

impl Host {
    /// A model call of `session` starts with `conversation_tokens` of conversation in a
    /// window of `token_limit`: starts a background compaction when the session's settings
    /// call for one.
    pub(crate) fn consider_compaction(
        &mut self,
        session: &str,
        conversation_tokens: u64,
        token_limit: u64,
    ) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let settings = live.model.infinite_sessions;
        let threshold = (settings.background_threshold * token_limit as f64) as u64;
        if !settings.enabled || token_limit == 0 || conversation_tokens < threshold {
            return;
        }
        let running = self.sampling_execs.values().any(|e| e.compacts(session));
        if running || self.messages_since_compaction(session) < MIN_MESSAGES {
            return;
        }
        let Ok(setup) = self.model_setup(session) else {
            return;
        };
        let mut messages = self.model_history(session);
        if !matches!(messages.first(), Some(ChatMessage::System(_))) {
            messages.insert(0, ChatMessage::System(setup.system_prompt.clone()));
        }
        let summarized = messages.len() - 1;
        messages.push(ChatMessage::User(COMPACTION_PROMPT.to_owned()));
        let input_estimate = tokens(messages.iter().map(ChatMessage::text_len).sum());
        let mut chat = ChatRequest::new(setup.model.as_deref(), &messages, &[]);
        chat.reasoning_effort = setup.reasoning_effort.as_deref();
        let job = CompactionJob {
            pre_tokens: conversation_tokens,
            messages: summarized,
            token_limit,
            input_estimate,
        };
        let kind = super::super::mcp::sampling::SideCall::Compaction(job);
        let Ok(exec) = self.side_call(session, None, &setup, &chat, kind) else {
            return;
        };
        self.emit(
            session,
            "session.compaction_start",
            &json!({"trigger": "threshold", "conversationTokens": conversation_tokens,
                    "tokenLimit": token_limit}),
            false,
        );
        let key = self.ids.next_uuid();
        self.sampling_execs.insert(key.clone(), exec);
        self.pump_sampling(&key);
    }

    /// Conversation messages (prompts, answers, tool results) since the session's last
    /// compaction point.
    fn messages_since_compaction(&self, session: &str) -> usize {
        let Some(live) = self.sessions.get(session) else {
            return 0;
        };
        let events = live.session.events();
        let since = events
            .iter()
            .rposition(|e| e.event_type == "session.compaction_start")
            .map_or(0, |i| i + 1);
        events[since..]
            .iter()
            .filter(|e| {
                matches!(
                    e.event_type.as_str(),
                    "user.message" | "assistant.message" | "tool.execution_complete"
                )
            })
            .count()
    }

    /// How many compactions of `session` succeeded (its checkpoints so far).
    fn successful_compactions(&self, session: &str) -> u64 {
        let Some(s) = self.session(session) else {
            return 0;
        };
        s.events()
            .iter()
            .filter(|e| e.event_type == "session.compaction_complete")
            .filter(|e| {
                serde_json::from_slice::<Value>(&e.json)
                    .is_ok_and(|v| v["data"]["success"] == Value::Bool(true))
            })
            .count() as u64
    }

    /// A compaction's model call ended (`result`: the summary and the call's usage, or why
    /// it failed).
    pub(crate) fn compaction_done(
        &mut self,
        session: &str,
        job: CompactionJob,
        result: Result<Value, String>,
    ) {
        let complete = match result {
            Ok(out) => {
                let summary = out["summary"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                if summary.is_empty() {
                    json!({"success": false, "trigger": "threshold",
                           "error": "the model returned no summary"})
                } else {
                    let post = tokens(summary.len());
                    let number = self.successful_compactions(session) + 1;
                    // The provider's usage, else estimates (as `session.usage_info` counts).
                    let reported = |key: &str| out[key].as_u64().filter(|n| *n > 0);
                    let input = reported("inputTokens").unwrap_or(job.input_estimate);
                    let output = reported("outputTokens").unwrap_or(post);
                    json!({
                        "success": true,
                        "trigger": "threshold",
                        "preCompactionTokens": job.pre_tokens,
                        "postCompactionTokens": post,
                        "preCompactionMessagesLength": job.messages,
                        "messagesRemoved": job.messages,
                        "tokensRemoved": job.pre_tokens.saturating_sub(post),
                        "tokenLimit": job.token_limit,
                        "summaryContent": summary,
                        "checkpointNumber": number,
                        "compactionTokensUsed": {
                            "inputTokens": input,
                            "outputTokens": output,
                            "cacheReadTokens": out["cacheReadTokens"],
                            "model": out["model"],
                        },
                    })
                }
            }
            Err(error) => json!({"success": false, "trigger": "threshold", "error": error}),
        };
        self.emit(session, "session.compaction_complete", &complete, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_message_lists_the_user_messages_then_the_summary() {
        let text = summary_message(&["a".into(), "b".into()], "<overview>x</overview>\n");
        assert_eq!(
            text,
            "Some of the conversation history has been summarized to free up context.\n\n\
             You were originally given instructions from a user over one or more turns. Here \
             were the user messages:\n<user_message>\na\n</user_message>\n<user_message>\nb\n\
             </user_message>\n\nHere is a summary of the prior context:\n<summary>\n\
             <overview>x</overview>\n</summary>"
        );
    }
}
