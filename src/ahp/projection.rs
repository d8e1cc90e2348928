//! A session's chat as AHP sees it, kept from the session's events: its turns, the active
//! turn with its response parts, and the actions each event turns into.
//!
//! [`ChatProjection::on_event`] maps one session event to the AHP actions it implies and
//! applies them to the projection itself, so a snapshot taken at any point (`subscribe`,
//! `reconnect`) and the actions that follow it agree. A projection starts from the
//! session's persisted events the first time an AHP client looks at the session
//! ([`ChatProjection::replay`]); from then on every emitted event keeps it current.
//!
//! | session event | AHP action(s) on `ahp-chat:/<id>` |
//! |---|---|
//! | `user.message` | `chat/turnStarted` (unless an AHP client started the turn: its dispatch was the announcement) |
//! | `assistant.message_delta` | `chat/responsePart` (markdown, id = `messageId`) once, then `chat/delta` |
//! | `assistant.message` | `chat/responsePart` with the whole text, unless its deltas built the part |
//! | `assistant.reasoning_delta` / `assistant.reasoning` | `chat/responsePart` (reasoning) and `chat/reasoning`, same rule |
//! | `assistant.usage` | `chat/usage` |
//! | `tool.execution_start` | `chat/toolCallStart` |
//! | a pending permission prompt of the call | `chat/toolCallReady` without `confirmed` (→ `pending-confirmation`) |
//! | `permission.completed` | `chat/toolCallConfirmed` (approved → `running`, else `cancelled`/`denied`) |
//! | `tool.execution_complete` | `chat/toolCallReady` `confirmed: not-needed` if nobody was asked, then `chat/toolCallComplete` |
//! | `elicitation.requested` / `elicitation.completed` | `chat/inputRequested` (an input-request part, questions from the form schema) / `chat/inputCompleted` |
//! | `session.idle` | `chat/turnComplete`, `chat/turnCancelled` (`aborted`) or `chat/error` (after a `session.error`) |
//! | `session.title_changed` | `session/titleChanged` on `ahp-session:/<id>` |
//! | `session.mode_changed` | `session/configChanged` (`mode`) on `ahp-session:/<id>` |

use std::collections::BTreeSet;

use ahp_types::actions::{
    ActionOrigin, ChatDeltaAction, ChatErrorAction, ChatInputCompletedAction,
    ChatInputRequestedAction, ChatPendingMessageRemovedAction, ChatPendingMessageSetAction,
    ChatReasoningAction, ChatResponsePartAction, ChatToolCallCompleteAction,
    ChatToolCallConfirmedAction, ChatToolCallReadyAction, ChatToolCallStartAction,
    ChatTurnCancelledAction, ChatTurnCompleteAction, ChatTurnStartedAction, ChatUsageAction,
    SessionConfigChangedAction, SessionTitleChangedAction, StateAction,
};
use ahp_types::state::{
    ActiveTurn, ChatInputResponseKind, ErrorInfo, ErrorResponsePart, InputRequestResponsePart,
    MarkdownResponsePart, Message, MessageKind, MessageOrigin, ReasoningResponsePart, ResponsePart,
    SessionActiveClient, ToolCallCancellationReason, ToolCallCancelledState,
    ToolCallClientContributor, ToolCallCompletedState, ToolCallConfirmationReason,
    ToolCallContributor, ToolCallPendingConfirmationState, ToolCallResponsePart, ToolCallResult,
    ToolCallRunningState, ToolCallState, ToolCallStreamingState, ToolInput, ToolResultContent,
    ToolResultTextContent, Turn, TurnState, UsageInfo,
};
use ahp_types::state::{PendingMessage, PendingMessageKind};
use ahp_types::StringOrMarkdown;
use serde_json::Value;

use crate::host::ConnId;
use crate::Timestamp;

/// Where an action goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The session's chat channel.
    Chat,
    /// The session channel.
    Session,
}

/// One action the projection produced, already applied to it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Produced {
    pub scope: Scope,
    pub action: StateAction,
}

/// How far a tool call got.
#[derive(Clone, Debug, PartialEq)]
enum Stage {
    Streaming,
    PendingConfirmation,
    Running(ToolCallConfirmationReason),
    Completed {
        confirmed: ToolCallConfirmationReason,
        result: Box<ToolCallResult>,
    },
    Cancelled,
}

/// A tool call of the active turn.
#[derive(Clone, Debug, PartialEq)]
struct ToolCall {
    id: String,
    name: String,
    input: String,
    stage: Stage,
    /// The AHP client that provides (executes) the tool, if one does.
    contributor: Option<String>,
    /// The host's request for the tool's result (`external_tool.requested`), once asked.
    request_id: Option<String>,
}

impl ToolCall {
    fn contributor(&self) -> Option<ToolCallContributor> {
        self.contributor.as_ref().map(|client_id| {
            ToolCallContributor::Client(ToolCallClientContributor {
                client_id: client_id.clone(),
            })
        })
    }

    fn invocation(&self) -> StringOrMarkdown {
        StringOrMarkdown::Plain(format!("Run {}", self.name))
    }

    /// The AHP state of the call.
    fn state(&self) -> ToolCallState {
        let (id, name, display) = (self.id.clone(), self.name.clone(), self.name.clone());
        let input = Some(ToolInput::Inline(self.input.clone()));
        match &self.stage {
            Stage::Streaming => ToolCallState::Streaming(ToolCallStreamingState {
                tool_call_id: id,
                tool_name: name,
                display_name: display,
                intention: None,
                contributor: self.contributor(),
                meta: None,
                partial_input: None,
                invocation_message: None,
            }),
            Stage::PendingConfirmation => {
                ToolCallState::PendingConfirmation(ToolCallPendingConfirmationState {
                    tool_call_id: id,
                    tool_name: name,
                    display_name: display,
                    intention: None,
                    contributor: self.contributor(),
                    meta: None,
                    invocation_message: self.invocation(),
                    tool_input: input,
                    confirmation_title: None,
                    risk_assessment: None,
                    edits: None,
                    editable: None,
                    options: None,
                })
            }
            Stage::Running(confirmed) => ToolCallState::Running(ToolCallRunningState {
                tool_call_id: id,
                tool_name: name,
                display_name: display,
                intention: None,
                contributor: self.contributor(),
                meta: None,
                invocation_message: self.invocation(),
                tool_input: input,
                confirmed: confirmed.clone(),
                selected_option: None,
                content: None,
            }),
            Stage::Completed { confirmed, result } => {
                ToolCallState::Completed(ToolCallCompletedState {
                    tool_call_id: id,
                    tool_name: name,
                    display_name: display,
                    intention: None,
                    contributor: self.contributor(),
                    meta: None,
                    invocation_message: self.invocation(),
                    tool_input: input,
                    success: result.success,
                    past_tense_message: result.past_tense_message.clone(),
                    content: result.content.clone(),
                    structured_content: None,
                    error: result.error.clone(),
                    confirmed: confirmed.clone(),
                    selected_option: None,
                })
            }
            Stage::Cancelled => ToolCallState::Cancelled(ToolCallCancelledState {
                tool_call_id: id,
                tool_name: name,
                display_name: display,
                intention: None,
                contributor: self.contributor(),
                meta: None,
                invocation_message: self.invocation(),
                tool_input: input,
                reason: ToolCallCancellationReason::Denied,
                reason_message: None,
                user_suggestion: None,
                selected_option: None,
            }),
        }
    }
}

/// The turn in progress.
#[derive(Clone, Debug)]
struct Active {
    turn: ActiveTurn,
    since: Timestamp,
    /// Markdown and reasoning parts already created, by id.
    parts: BTreeSet<String>,
    tools: Vec<ToolCall>,
    /// The message of a `session.error` of the turn.
    error: Option<String>,
}

/// A session's chat (per-session AHP state, [`Host::session_state`](crate::host::Host)).
#[derive(Debug, Default)]
pub(crate) struct ChatProjection {
    /// Built from the session's events and kept current.
    pub(crate) live: bool,
    turns: Vec<Turn>,
    active: Option<Active>,
    /// Prompts AHP clients started: the host message id and the client's turn id.
    started: Vec<(String, String)>,
    /// Turns AHP clients started while another ran, queued in the agent: the host message
    /// id and the queued message (its id is the client's turn id), oldest first.
    queued: Vec<(String, PendingMessage)>,
    /// The steering message an AHP client set for the running turn, waiting for the
    /// agent's next model call: the host message id and the pending message.
    steering: Option<(String, PendingMessage)>,
    /// The agent's queue changed (a turn ended, or `pending_messages.modified`) while it
    /// could not be read: compare once the agent is back.
    pub(crate) queue_dirty: bool,
    title: Option<String>,
    /// The origins of tool-call actions AHP clients dispatched (`chat/toolCallConfirmed`,
    /// `chat/toolCallComplete`), by tool call id and action type, until the host's own action
    /// carries them.
    origins: Vec<(String, &'static str, ActionOrigin)>,
    /// Tool calls about to start whose tool an AHP client provides: call id, client id.
    contributors: Vec<(String, String)>,
    /// The clients providing tools, with their connections.
    active_clients: Vec<(ConnId, SessionActiveClient)>,
}

fn text(data: &Value, name: &str) -> String {
    data.get(name)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn int(data: &Value, name: &str) -> Option<i64> {
    data.get(name).and_then(Value::as_i64)
}

/// A user message.
pub(crate) fn user_message(text: String) -> Message {
    Message {
        text,
        origin: MessageOrigin {
            kind: MessageKind::User,
        },
        attachments: None,
        model: None,
        agent: None,
        meta: None,
    }
}

impl ChatProjection {
    /// The completed turns, oldest first.
    pub(crate) fn turns(&self) -> &[Turn] {
        &self.turns
    }

    /// The turn in progress, as AHP shows it.
    pub(crate) fn active_turn(&self) -> Option<ActiveTurn> {
        self.active.as_ref().map(|a| {
            let mut turn = a.turn.clone();
            // Tool call parts carry their current state.
            for part in &mut turn.response_parts {
                if let ResponsePart::ToolCall(tc) = part {
                    let id = tool_call_id(&tc.tool_call);
                    if let Some(call) = a.tools.iter().find(|c| c.id == id) {
                        tc.tool_call = call.state();
                    }
                }
            }
            turn
        })
    }

    /// The id of the turn in progress.
    pub(crate) fn active_turn_id(&self) -> Option<&str> {
        self.active.as_ref().map(|a| a.turn.id.as_str())
    }

    /// The title a client or the agent gave the session.
    pub(crate) fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Remembers who dispatched the `kind` action (`chat/toolCallConfirmed`,
    /// `chat/toolCallComplete`) for tool call `id`: the host's own action carries that origin.
    pub(crate) fn set_origin(&mut self, id: &str, kind: &'static str, origin: ActionOrigin) {
        self.origins.retain(|(i, k, _)| !(i == id && *k == kind));
        self.origins.push((id.to_owned(), kind, origin));
    }

    /// The origin of the `kind` action for tool call `id`, if a client dispatched it.
    pub(crate) fn take_origin(&mut self, id: &str, kind: &str) -> Option<ActionOrigin> {
        let at = self
            .origins
            .iter()
            .position(|(i, k, _)| i == id && *k == kind)?;
        Some(self.origins.remove(at).2)
    }

    /// Whether input request `id` of the active turn waits for an answer.
    pub(crate) fn awaits_input(&self, id: &str) -> bool {
        self.active.as_ref().is_some_and(|a| {
            a.turn.response_parts.iter().any(|p| {
                matches!(p, ResponsePart::InputRequest(r) if r.request.id == id && r.response.is_none())
            })
        })
    }

    /// Tool call `id` (about to start) runs a tool AHP client `client_id` provides.
    pub(crate) fn note_contributor(&mut self, id: &str, client_id: String) {
        self.contributors.push((id.to_owned(), client_id));
    }

    /// The host's request id for the result of client-provided tool call `id`, with the
    /// client that must provide it; `None` when the host is not waiting for it.
    pub(crate) fn client_tool_request(&self, id: &str) -> Option<(String, String)> {
        let call = self.active.as_ref()?.tools.iter().find(|c| c.id == id)?;
        if !matches!(call.stage, Stage::Running(_)) {
            return None;
        }
        Some((call.request_id.clone()?, call.contributor.clone()?))
    }

    /// The clients providing tools to the session, with their connections.
    pub(crate) fn active_client_conns(&self) -> Vec<(ConnId, SessionActiveClient)> {
        self.active_clients.clone()
    }

    /// The clients providing tools to the session.
    pub(crate) fn active_clients(&self) -> Vec<SessionActiveClient> {
        self.active_clients.iter().map(|(_, c)| c.clone()).collect()
    }

    /// `conn`'s client provides tools as `client` (replacing what it declared before).
    pub(crate) fn set_active_client(&mut self, conn: ConnId, client: SessionActiveClient) {
        self.active_clients
            .retain(|(_, c)| c.client_id != client.client_id);
        self.active_clients.push((conn, client));
    }

    /// Forgets the active clients of `conn` (or only `client_id`); returns their ids.
    pub(crate) fn remove_active_clients(
        &mut self,
        conn: ConnId,
        client_id: Option<&str>,
    ) -> Vec<String> {
        let mut removed = Vec::new();
        self.active_clients.retain(|(c, client)| {
            let gone = *c == conn && client_id.is_none_or(|id| id == client.client_id);
            if gone {
                removed.push(client.client_id.clone());
            }
            !gone
        });
        removed
    }

    /// An AHP client started turn `turn_id` with `message`; the host queued it as
    /// `message_id`. Returns the action that announces it.
    pub(crate) fn start_turn(
        &mut self,
        turn_id: String,
        message_id: String,
        message: Message,
        now: Timestamp,
    ) -> StateAction {
        self.started.push((message_id, turn_id.clone()));
        let action = ChatTurnStartedAction {
            turn_id,
            started_at: now.to_rfc3339(),
            message,
            queued_message_id: None,
            meta: None,
        };
        self.open_turn(&action, now);
        StateAction::ChatTurnStarted(action)
    }

    /// An AHP client started turn `turn_id` with `message` while another turn runs: the
    /// host queued it in the agent as `message_id` (as a Copilot SDK `send` while busy is).
    /// Returns the action that announces the queued message; the turn starts, with
    /// `queuedMessageId`, when the agent takes the prompt.
    pub(crate) fn queue_turn(
        &mut self,
        turn_id: String,
        message_id: String,
        message: Message,
    ) -> StateAction {
        let pending = PendingMessage {
            id: turn_id,
            message,
        };
        self.queued.push((message_id, pending.clone()));
        StateAction::ChatPendingMessageSet(ChatPendingMessageSetAction {
            kind: PendingMessageKind::Queued,
            id: pending.id,
            message: pending.message,
        })
    }

    /// An AHP client set steering message `id` (host message `message_id`) for the running
    /// turn. Returns the host message id of the steering message it replaces, if any, and
    /// the action that announces it.
    pub(crate) fn steer(
        &mut self,
        id: String,
        message_id: String,
        message: Message,
    ) -> (Option<String>, StateAction) {
        let pending = PendingMessage { id, message };
        let replaced = self
            .steering
            .replace((message_id, pending.clone()))
            .map(|(m, _)| m);
        let action = StateAction::ChatPendingMessageSet(ChatPendingMessageSetAction {
            kind: PendingMessageKind::Steering,
            id: pending.id,
            message: pending.message,
        });
        (replaced, action)
    }

    /// The host message id of steering message `id`, if it is the one waiting.
    pub(crate) fn steering_message_id(&self, id: &str) -> Option<&str> {
        self.steering
            .as_ref()
            .filter(|(_, p)| p.id == id)
            .map(|(m, _)| m.as_str())
    }

    /// Forgets the waiting steering message (a client removed it); the action that says so.
    pub(crate) fn unsteer(&mut self) -> Option<StateAction> {
        let (_, pending) = self.steering.take()?;
        Some(StateAction::ChatPendingMessageRemoved(
            ChatPendingMessageRemovedAction {
                kind: PendingMessageKind::Steering,
                id: pending.id,
            },
        ))
    }

    /// The waiting steering message (for snapshots).
    pub(crate) fn steering_message(&self) -> Option<PendingMessage> {
        self.steering.as_ref().map(|(_, p)| p.clone())
    }

    /// Whether `turn_id` names the active turn or a queued one.
    pub(crate) fn knows_turn(&self, turn_id: &str) -> bool {
        self.active_turn_id() == Some(turn_id) || self.queued.iter().any(|(_, p)| p.id == turn_id)
    }

    /// Whether messages are queued.
    pub(crate) fn has_queued(&self) -> bool {
        !self.queued.is_empty()
    }

    /// The queued messages (for snapshots); `None` when there are none.
    pub(crate) fn queued_messages(&self) -> Option<Vec<PendingMessage>> {
        (!self.queued.is_empty()).then(|| self.queued.iter().map(|(_, p)| p.clone()).collect())
    }

    /// The agent's queue holds only `still` (message ids): queued messages it dropped (an
    /// abort clears the scripted and model agents' queues) are removed.
    pub(crate) fn sync_queue(&mut self, still: &[String]) -> Vec<Produced> {
        self.queue_dirty = false;
        let mut produced = Vec::new();
        if self
            .steering
            .as_ref()
            .is_some_and(|(message_id, _)| !still.contains(message_id))
        {
            produced.extend(self.unsteer().map(chat));
        }
        self.queued.retain(|(message_id, pending)| {
            let kept = still.contains(message_id);
            if !kept {
                produced.push(chat(StateAction::ChatPendingMessageRemoved(
                    ChatPendingMessageRemovedAction {
                        kind: PendingMessageKind::Queued,
                        id: pending.id.clone(),
                    },
                )));
            }
            kept
        });
        produced
    }

    fn open_turn(&mut self, a: &ChatTurnStartedAction, now: Timestamp) {
        self.active = Some(Active {
            turn: ActiveTurn {
                id: a.turn_id.clone(),
                started_at: a.started_at.clone(),
                message: a.message.clone(),
                response_parts: Vec::new(),
                usage: None,
            },
            since: now,
            parts: BTreeSet::new(),
            tools: Vec::new(),
            error: None,
        });
    }

    /// Builds the projection from a session's persisted events (no actions come out); a
    /// turn still open at the end is closed unless `busy` (the session's agent still runs).
    pub(crate) fn replay<'a>(
        &mut self,
        events: impl Iterator<Item = (&'a str, Value, Timestamp)>,
        busy: bool,
        now: Timestamp,
    ) {
        for (event_type, data, at) in events {
            if event_type == "user.message"
                && self.active.is_some()
                && data.get("delivery").and_then(Value::as_str) != Some("steering")
            {
                // The previous prompt's turn ended (its `session.idle` is not persisted).
                self.close_turn(&Value::Null, at);
            }
            self.on_event(event_type, &data, at);
        }
        if !busy && self.active.is_some() {
            self.close_turn(&Value::Null, now);
        }
        self.live = true;
    }

    /// A permission prompt for tool call `id` is pending.
    pub(crate) fn confirmation_asked(&mut self, id: &str) -> Vec<Produced> {
        let Some(active) = &mut self.active else {
            return Vec::new();
        };
        let turn_id = active.turn.id.clone();
        let Some(call) = active.tools.iter_mut().find(|c| c.id == id) else {
            return Vec::new();
        };
        if !matches!(call.stage, Stage::Streaming | Stage::Running(_)) {
            return Vec::new();
        }
        call.stage = Stage::PendingConfirmation;
        vec![chat(StateAction::ChatToolCallReady(ready(
            &turn_id, call, None,
        )))]
    }

    /// Maps one session event to its actions and applies them.
    pub(crate) fn on_event(
        &mut self,
        event_type: &str,
        data: &Value,
        now: Timestamp,
    ) -> Vec<Produced> {
        match event_type {
            "user.message" => {
                let message_id = text(data, "messageId");
                let mut produced = Vec::new();
                if self
                    .steering
                    .as_ref()
                    .is_some_and(|(m, _)| *m == message_id)
                {
                    // The steering message reached the agent: taken into the running turn
                    // (`delivery: "steering"`), or, if that turn ended first, as a turn of
                    // its own (below).
                    produced.extend(self.unsteer().map(chat));
                    if data.get("delivery").and_then(Value::as_str) == Some("steering") {
                        return produced;
                    }
                }
                if let Some(at) = self.started.iter().position(|(m, _)| *m == message_id) {
                    // Announced when the AHP client dispatched it.
                    self.started.remove(at);
                    return Vec::new();
                }
                if let Some(at) = self.queued.iter().position(|(m, _)| *m == message_id) {
                    // A queued message's turn starts (its turn id is the client's).
                    let (_, pending) = self.queued.remove(at);
                    let action = ChatTurnStartedAction {
                        turn_id: pending.id.clone(),
                        started_at: now.to_rfc3339(),
                        message: pending.message,
                        queued_message_id: Some(pending.id),
                        meta: None,
                    };
                    self.open_turn(&action, now);
                    return vec![chat(StateAction::ChatTurnStarted(action))];
                }
                if self.active.is_some() {
                    // Not ours to end: a turn ends at `session.idle`. Keep the first.
                    return produced;
                }
                let turn_id = if message_id.is_empty() {
                    format!("turn-{}", self.turns.len() + 1)
                } else {
                    message_id
                };
                let action = ChatTurnStartedAction {
                    turn_id,
                    started_at: now.to_rfc3339(),
                    message: user_message(text(data, "content")),
                    queued_message_id: None,
                    meta: None,
                };
                self.open_turn(&action, now);
                produced.push(chat(StateAction::ChatTurnStarted(action)));
                produced
            }
            "assistant.message_delta"
            | "assistant.reasoning_delta"
            | "assistant.message"
            | "assistant.reasoning" => {
                let reasoning = event_type.starts_with("assistant.reasoning");
                let delta = event_type.ends_with("_delta");
                let id = text(
                    data,
                    if reasoning {
                        "reasoningId"
                    } else {
                        "messageId"
                    },
                );
                let content = text(data, if delta { "deltaContent" } else { "content" });
                self.append(id, content, reasoning, delta)
            }
            "assistant.usage" => {
                let Some(active) = &mut self.active else {
                    return Vec::new();
                };
                let usage = UsageInfo {
                    input_tokens: int(data, "inputTokens"),
                    output_tokens: int(data, "outputTokens"),
                    model: data.get("model").and_then(Value::as_str).map(str::to_owned),
                    cache_read_tokens: int(data, "cacheReadTokens"),
                    meta: None,
                };
                active.turn.usage = Some(usage.clone());
                vec![chat(StateAction::ChatUsage(ChatUsageAction {
                    turn_id: active.turn.id.clone(),
                    usage,
                    meta: None,
                }))]
            }
            "tool.execution_start" => {
                let Some(active) = &mut self.active else {
                    return Vec::new();
                };
                let id = text(data, "toolCallId");
                if id.is_empty() || active.tools.iter().any(|c| c.id == id) {
                    return Vec::new();
                }
                let contributor = self
                    .contributors
                    .iter()
                    .position(|(call, _)| *call == id)
                    .map(|at| self.contributors.remove(at).1);
                let Some(active) = &mut self.active else {
                    return Vec::new();
                };
                let call = ToolCall {
                    id: id.clone(),
                    name: text(data, "toolName"),
                    input: data
                        .get("arguments")
                        .map(Value::to_string)
                        .unwrap_or_default(),
                    stage: Stage::Streaming,
                    contributor,
                    request_id: None,
                };
                let action = ChatToolCallStartAction {
                    turn_id: active.turn.id.clone(),
                    tool_call_id: id,
                    meta: None,
                    tool_name: call.name.clone(),
                    display_name: call.name.clone(),
                    intention: None,
                    contributor: call.contributor(),
                };
                active
                    .turn
                    .response_parts
                    .push(ResponsePart::ToolCall(Box::new(ToolCallResponsePart {
                        tool_call: call.state(),
                    })));
                active.tools.push(call);
                vec![chat(StateAction::ChatToolCallStart(action))]
            }
            "permission.completed" => {
                let Some(active) = &mut self.active else {
                    return Vec::new();
                };
                let turn_id = active.turn.id.clone();
                let id = text(data, "toolCallId");
                let Some(call) = active.tools.iter_mut().find(|c| c.id == id) else {
                    return Vec::new();
                };
                if call.stage != Stage::PendingConfirmation {
                    return Vec::new();
                }
                let kind = data
                    .pointer("/result/kind")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let approved = kind.starts_with("approved");
                call.stage = if approved {
                    Stage::Running(ToolCallConfirmationReason::UserAction)
                } else {
                    Stage::Cancelled
                };
                vec![chat(StateAction::ChatToolCallConfirmed(
                    ChatToolCallConfirmedAction {
                        turn_id,
                        tool_call_id: id,
                        meta: None,
                        approved,
                        confirmed: approved.then_some(ToolCallConfirmationReason::UserAction),
                        reason: (!approved).then_some(ToolCallCancellationReason::Denied),
                        edited_tool_input: None,
                        user_suggestion: None,
                        reason_message: None,
                        selected_option_id: None,
                    },
                ))]
            }
            "external_tool.requested" => {
                // The client providing the tool is asked for its result: the call runs.
                let Some(active) = &mut self.active else {
                    return Vec::new();
                };
                let turn_id = active.turn.id.clone();
                let id = text(data, "toolCallId");
                let Some(call) = active.tools.iter_mut().find(|c| c.id == id) else {
                    return Vec::new();
                };
                call.request_id = Some(text(data, "requestId"));
                if call.stage != Stage::Streaming {
                    return Vec::new();
                }
                call.stage = Stage::Running(ToolCallConfirmationReason::NotNeeded);
                vec![chat(StateAction::ChatToolCallReady(ready(
                    &turn_id,
                    call,
                    Some(ToolCallConfirmationReason::NotNeeded),
                )))]
            }
            "tool.execution_complete" => self.tool_completed(data),
            "elicitation.requested" => {
                let Some(active) = &mut self.active else {
                    // Outside a turn there is no response stream to put it in.
                    return Vec::new();
                };
                let request = super::input::request(data);
                let known = active.turn.response_parts.iter().any(
                    |p| matches!(p, ResponsePart::InputRequest(r) if r.request.id == request.id),
                );
                if request.id.is_empty() || known {
                    // Offered again to a client that attached later: already in the stream.
                    return Vec::new();
                }
                active.turn.response_parts.push(ResponsePart::InputRequest(
                    InputRequestResponsePart {
                        request: request.clone(),
                        response: None,
                    },
                ));
                vec![chat(StateAction::ChatInputRequested(
                    ChatInputRequestedAction { request },
                ))]
            }
            "elicitation.completed" => {
                let Some(active) = &mut self.active else {
                    return Vec::new();
                };
                let id = text(data, "requestId");
                let response = match data.get("action").and_then(Value::as_str) {
                    Some("accept") => ChatInputResponseKind::Accept,
                    Some("decline") => ChatInputResponseKind::Decline,
                    _ => ChatInputResponseKind::Cancel,
                };
                let Some(part) = active.turn.response_parts.iter_mut().find_map(|p| match p {
                    ResponsePart::InputRequest(r) if r.request.id == id && r.response.is_none() => {
                        Some(r)
                    }
                    _ => None,
                }) else {
                    return Vec::new();
                };
                part.response = Some(response);
                vec![chat(StateAction::ChatInputCompleted(
                    ChatInputCompletedAction {
                        request_id: id,
                        response,
                        answers: None,
                    },
                ))]
            }
            "session.error" => {
                if let Some(active) = &mut self.active {
                    active.error = Some(text(data, "message"));
                }
                Vec::new()
            }
            "session.idle" => self.close_turn(data, now),
            "session.mode_changed" => {
                let mut config = serde_json::Map::new();
                config.insert("mode".into(), Value::from(text(data, "newMode")));
                vec![Produced {
                    scope: Scope::Session,
                    action: StateAction::SessionConfigChanged(SessionConfigChangedAction {
                        config,
                        replace: None,
                    }),
                }]
            }
            "session.title_changed" => {
                let title = text(data, "title");
                self.title = Some(title.clone());
                vec![Produced {
                    scope: Scope::Session,
                    action: StateAction::SessionTitleChanged(SessionTitleChangedAction { title }),
                }]
            }
            _ => Vec::new(),
        }
    }

    /// Text for markdown or reasoning part `id`: a delta (`streamed`) or the whole text.
    fn append(
        &mut self,
        id: String,
        content: String,
        reasoning: bool,
        streamed: bool,
    ) -> Vec<Produced> {
        let Some(active) = &mut self.active else {
            return Vec::new();
        };
        if id.is_empty() || content.is_empty() {
            return Vec::new();
        }
        let turn_id = active.turn.id.clone();
        let mut out = Vec::new();
        if active.parts.insert(id.clone()) {
            let initial = if streamed {
                String::new()
            } else {
                content.clone()
            };
            let part = if reasoning {
                ResponsePart::Reasoning(ReasoningResponsePart {
                    id: id.clone(),
                    content: initial,
                })
            } else {
                ResponsePart::Markdown(MarkdownResponsePart {
                    id: id.clone(),
                    content: initial,
                })
            };
            active.turn.response_parts.push(part.clone());
            out.push(chat(StateAction::ChatResponsePart(
                ChatResponsePartAction {
                    turn_id: turn_id.clone(),
                    part,
                    meta: None,
                },
            )));
            if !streamed {
                return out;
            }
        } else if !streamed {
            // Its deltas built the part already.
            return out;
        }
        for part in &mut active.turn.response_parts {
            match part {
                ResponsePart::Markdown(p) if p.id == id => p.content.push_str(&content),
                ResponsePart::Reasoning(p) if p.id == id => p.content.push_str(&content),
                _ => {}
            }
        }
        out.push(chat(if reasoning {
            StateAction::ChatReasoning(ChatReasoningAction {
                turn_id,
                part_id: id,
                content,
                meta: None,
            })
        } else {
            StateAction::ChatDelta(ChatDeltaAction {
                turn_id,
                part_id: id,
                content,
                meta: None,
            })
        }));
        out
    }

    fn tool_completed(&mut self, data: &Value) -> Vec<Produced> {
        let Some(active) = &mut self.active else {
            return Vec::new();
        };
        let turn_id = active.turn.id.clone();
        let id = text(data, "toolCallId");
        let Some(call) = active.tools.iter_mut().find(|c| c.id == id) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let confirmed = match &call.stage {
            Stage::Streaming => {
                // Nobody was asked.
                call.stage = Stage::Running(ToolCallConfirmationReason::NotNeeded);
                out.push(chat(StateAction::ChatToolCallReady(ready(
                    &turn_id,
                    call,
                    Some(ToolCallConfirmationReason::NotNeeded),
                ))));
                ToolCallConfirmationReason::NotNeeded
            }
            Stage::Running(confirmed) => confirmed.clone(),
            // Denied (cancelled) or already complete: nothing more to say.
            _ => return out,
        };
        let success = data
            .get("success")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let (message, error) = if success {
            (
                data.pointer("/result/content")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                None,
            )
        } else {
            let error = data.get("error").cloned();
            let message = data
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("The tool call failed")
                .to_owned();
            (message, error)
        };
        let result = ToolCallResult {
            success,
            past_tense_message: StringOrMarkdown::Plain(format!("Ran {}", call.name)),
            content: (!message.is_empty()).then(|| {
                vec![ToolResultContent::Text(ToolResultTextContent {
                    text: message,
                })]
            }),
            structured_content: None,
            error,
        };
        call.stage = Stage::Completed {
            confirmed,
            result: Box::new(result.clone()),
        };
        out.push(chat(StateAction::ChatToolCallComplete(
            ChatToolCallCompleteAction {
                turn_id,
                tool_call_id: id,
                meta: None,
                result,
                requires_result_confirmation: None,
            },
        )));
        out
    }

    /// Ends the active turn (a `session.idle` with `data`).
    fn close_turn(&mut self, data: &Value, now: Timestamp) -> Vec<Produced> {
        let Some(active) = self.active.take() else {
            return Vec::new();
        };
        let duration = i64::try_from(now.saturating_duration_since(active.since).as_millis())
            .unwrap_or(i64::MAX);
        let aborted = data
            .get("aborted")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let turn_id = active.turn.id.clone();
        let mut parts = active.turn.response_parts.clone();
        for part in &mut parts {
            if let ResponsePart::ToolCall(tc) = part {
                let id = tool_call_id(&tc.tool_call);
                if let Some(call) = active.tools.iter().find(|c| c.id == id) {
                    tc.tool_call = call.state();
                }
            }
        }
        let (state, action) = if aborted {
            (
                TurnState::Cancelled,
                StateAction::ChatTurnCancelled(ChatTurnCancelledAction {
                    turn_id,
                    duration,
                    meta: None,
                }),
            )
        } else if let Some(message) = active.error {
            let part = ErrorResponsePart {
                error: ErrorInfo {
                    error_type: "error".into(),
                    message,
                    stack: None,
                    meta: None,
                },
                resumable: None,
            };
            parts.push(ResponsePart::Error(part.clone()));
            (
                TurnState::Error,
                StateAction::ChatError(ChatErrorAction {
                    turn_id,
                    duration,
                    part,
                    meta: None,
                }),
            )
        } else {
            (
                TurnState::Complete,
                StateAction::ChatTurnComplete(ChatTurnCompleteAction {
                    turn_id,
                    duration,
                    meta: None,
                }),
            )
        };
        self.turns.push(Turn {
            id: active.turn.id,
            started_at: Some(active.turn.started_at),
            duration: Some(duration),
            message: active.turn.message,
            response_parts: parts,
            usage: active.turn.usage,
            state,
        });
        vec![chat(action)]
    }
}

fn chat(action: StateAction) -> Produced {
    Produced {
        scope: Scope::Chat,
        action,
    }
}

fn ready(
    turn_id: &str,
    call: &ToolCall,
    confirmed: Option<ToolCallConfirmationReason>,
) -> ChatToolCallReadyAction {
    ChatToolCallReadyAction {
        turn_id: turn_id.to_owned(),
        tool_call_id: call.id.clone(),
        meta: None,
        contributor: call.contributor(),
        intention: None,
        invocation_message: call.invocation(),
        tool_input: Some(ToolInput::Inline(call.input.clone())),
        confirmation_title: None,
        risk_assessment: None,
        edits: None,
        editable: None,
        confirmed,
        options: None,
    }
}

fn tool_call_id(state: &ToolCallState) -> String {
    let id = match state {
        ToolCallState::Streaming(s) => &s.tool_call_id,
        ToolCallState::PendingConfirmation(s) => &s.tool_call_id,
        ToolCallState::Running(s) => &s.tool_call_id,
        ToolCallState::AuthRequired(s) => &s.tool_call_id,
        ToolCallState::PendingResultConfirmation(s) => &s.tool_call_id,
        ToolCallState::Completed(s) => &s.tool_call_id,
        ToolCallState::Cancelled(s) => &s.tool_call_id,
        ToolCallState::Unknown(_) => return String::new(),
    };
    id.clone()
}
