//! Actions AHP clients dispatch (`dispatchAction`), applied to the host.
//!
//! | action | channel | what the host does |
//! |---|---|---|
//! | `chat/turnStarted` | `ahp-chat:/<id>` | echoes it (with the client's origin) and runs the message as the session's prompt; while another turn runs, the prompt is queued in the agent instead, announced as `chat/pendingMessageSet` (queued, id = the turn id, the client's origin), and its `chat/turnStarted` (with `queuedMessageId`) comes when the agent takes it; an abort drops queued messages (`chat/pendingMessageRemoved`) |
//! | `chat/pendingMessageSet` (`kind: steering`) | `ahp-chat:/<id>` | steers the running turn: the message goes to the agent as a steering prompt (a Copilot SDK `send` with `mode: "immediate"`), echoed as the action; it replaces a steering message still waiting; the host's `chat/pendingMessageRemoved` comes when the agent takes it into the turn (at its next model call), or when the turn ended first, with the `chat/turnStarted` of the turn it starts instead. With no turn running it is rejected (start a turn) |
//! | `chat/pendingMessageRemoved` (`kind: steering`) | `ahp-chat:/<id>` | withdraws the waiting steering message, echoed as the action; one the agent already took is rejected |
//! | `chat/toolCallConfirmed` | `ahp-chat:/<id>` | answers the tool call's pending permission prompt (approve once, or deny); the first answer from any client of any dialect wins, a late one is rejected |
//! | `chat/turnCancelled` | `ahp-chat:/<id>` | aborts the turn; the host's own `chat/turnCancelled` follows when it stopped |
//! | `chat/toolCallComplete` | `ahp-chat:/<id>` | the result of a tool the dispatching client provides, once the host asked for it (`running`); another client's call is rejected |
//! | `chat/inputCompleted` | `ahp-chat:/<id>` | answers the elicitation behind the input request (`accept` with the submitted answers as its content, `decline`, `cancel`); the first answer from any client wins |
//! | `session/activeClientSet` | `ahp-session:/<id>` | the client (itself only) provides `tools` to the session: the agent can call them |
//! | `session/activeClientRemoved` | `ahp-session:/<id>` | the client stops providing tools |
//! | `session/configChanged` | `ahp-session:/<id>` | `mode` (`interactive` / `autopilot`): a persisted `session.mode_changed`, seen by every dialect; `model` is read-only |
//! | `session/titleChanged` | `ahp-session:/<id>` | a `session.title_changed` event, echoed as the action |
//!
//! Anything else, or an action on a channel it does not belong to, comes back to its sender
//! alone with a `rejectionReason`.

use ahp_types::actions::{ActionOrigin, StateAction};
use ahp_types::commands::DispatchActionParams;
use ahp_types::state::{
    ChatInputResponseKind, PendingMessageKind, ToolCallResult, ToolResultContent,
};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::AgentInput;
use crate::host::{ConnId, Host};

use super::channels::Channel;
use super::feed;
use super::projection::ChatProjection;
use super::{
    ensure_live, origin, provide_tools, COMPLETE, CONFIG_CHANGED, CONFIRMED, INPUT_COMPLETED,
};
use crate::acp::modes;

/// Handles a `dispatchAction` notification.
pub(crate) fn dispatch_action(host: &mut Host, conn: ConnId, params: Option<&RawValue>) {
    let raw = params.map(RawValue::get).unwrap_or("{}");
    let p: DispatchActionParams = match serde_json::from_str(raw) {
        Ok(p) => p,
        Err(e) => {
            // Not an action at all: tell the sender what was wrong, with what it sent.
            let channel = serde_json::from_str::<Value>(raw)
                .ok()
                .and_then(|v| v.get("channel").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            let origin = origin(host, conn, 0);
            feed::reject(
                host,
                conn,
                &channel,
                StateAction::Unknown(Value::Null),
                origin,
                format!("invalid dispatchAction params: {e}"),
            );
            return;
        }
    };
    let origin = origin(host, conn, p.client_seq);
    if let Err(reason) = apply(host, conn, &p.channel, &p.action, &origin) {
        feed::reject(host, conn, &p.channel, p.action, origin, reason);
    }
}

/// Applies one dispatched action; `Err` is the rejection reason.
fn apply(
    host: &mut Host,
    conn: ConnId,
    channel: &str,
    action: &StateAction,
    origin: &ActionOrigin,
) -> Result<(), String> {
    let parsed = Channel::parse(channel).ok_or_else(|| format!("unknown channel {channel:?}"))?;
    let session = parsed.session().ok_or_else(|| {
        format!(
            "{} cannot be dispatched on the root channel",
            type_name(action)
        )
    })?;
    if !ensure_live(host, session) {
        return Err(format!("session not found: {channel}"));
    }
    match (parsed, action) {
        (Channel::Chat(_), StateAction::ChatTurnStarted(a)) => {
            let chat = host
                .session_state::<ChatProjection>(session)
                .ok_or("session not found")?;
            if chat.knows_turn(&a.turn_id) {
                return Err(format!("turn {} already exists", a.turn_id));
            }
            if chat.active_turn_id().is_some() {
                // Another turn runs: the prompt waits in the agent's queue (as a Copilot SDK
                // `send` while busy does), shown as a queued message; its turn starts when
                // the agent takes it.
                let message_id = host.new_id();
                let Some(chat) = host.session_state::<ChatProjection>(session) else {
                    return Err("session not found".into());
                };
                let queued =
                    chat.queue_turn(a.turn_id.clone(), message_id.clone(), a.message.clone());
                feed::publish(host, channel, queued, Some(origin.clone()));
                host.set_last_session(session);
                host.queue_agent_input(
                    session,
                    AgentInput::Prompt {
                        message_id,
                        prompt: a.message.text.clone(),
                        attachments: Default::default(),
                    },
                );
                return Ok(());
            }
            start_turn(host, session, &a.turn_id, &a.message, Some(origin.clone()));
            Ok(())
        }
        (Channel::Chat(_), StateAction::ChatPendingMessageSet(a))
            if a.kind == PendingMessageKind::Steering =>
        {
            let running = host
                .session_state_ref::<ChatProjection>(session)
                .and_then(ChatProjection::active_turn_id)
                .is_some();
            if !running {
                return Err(
                    "no turn is in progress to steer: start one with chat/turnStarted".into(),
                );
            }
            let message_id = host.new_id();
            let Some(chat) = host.session_state::<ChatProjection>(session) else {
                return Err("session not found".into());
            };
            let (replaced, set) = chat.steer(a.id.clone(), message_id.clone(), a.message.clone());
            if let Some(replaced) = replaced {
                host.with_agent(session, |agent, _| agent.drop_steering(&replaced));
            }
            feed::publish(host, channel, set, Some(origin.clone()));
            host.queue_agent_input(
                session,
                AgentInput::Prompt {
                    message_id,
                    prompt: a.message.text.clone(),
                    attachments: crate::agent::PromptContext {
                        steering: true,
                        ..Default::default()
                    },
                },
            );
            Ok(())
        }
        (Channel::Chat(_), StateAction::ChatPendingMessageRemoved(a))
            if a.kind == PendingMessageKind::Steering =>
        {
            let waiting = host
                .session_state_ref::<ChatProjection>(session)
                .and_then(|c| c.steering_message_id(&a.id))
                .map(str::to_owned);
            let Some(message_id) = waiting else {
                return Err(format!("steering message {} is not waiting", a.id));
            };
            let dropped = host
                .with_agent(session, |agent, _| agent.drop_steering(&message_id))
                .unwrap_or(false);
            if !dropped {
                return Err(format!("steering message {} was already taken", a.id));
            }
            let removed = host
                .session_state::<ChatProjection>(session)
                .and_then(ChatProjection::unsteer);
            if let Some(removed) = removed {
                feed::publish(host, channel, removed, Some(origin.clone()));
            }
            Ok(())
        }
        (Channel::Chat(_), StateAction::ChatToolCallConfirmed(a)) => {
            let pending = host
                .pending_permissions(session)
                .into_iter()
                .map(|(id, _)| id)
                .find(|id| {
                    host.pending_permission(session, id)
                        .is_some_and(|p| p.tool_call_id == a.tool_call_id)
                });
            let Some(request_id) = pending else {
                return Err(format!(
                    "tool call {} has no pending confirmation (already answered, or not this session's)",
                    a.tool_call_id
                ));
            };
            let decision = if a.approved {
                json!({"kind": "approve-once"})
            } else {
                json!({"kind": "reject"})
            };
            if let Some(chat) = host.session_state::<ChatProjection>(session) {
                chat.set_origin(&a.tool_call_id, CONFIRMED, origin.clone());
            }
            if host.resolve_permission(session, &request_id, &decision) {
                Ok(())
            } else {
                if let Some(chat) = host.session_state::<ChatProjection>(session) {
                    chat.take_origin(&a.tool_call_id, CONFIRMED);
                }
                Err(format!("tool call {} was already answered", a.tool_call_id))
            }
        }
        (Channel::Chat(_), StateAction::ChatTurnCancelled(a)) => {
            let active = host
                .session_state_ref::<ChatProjection>(session)
                .and_then(ChatProjection::active_turn_id);
            if active != Some(a.turn_id.as_str()) {
                return Err(format!("turn {} is not in progress", a.turn_id));
            }
            host.queue_agent_input(session, AgentInput::Abort);
            Ok(())
        }
        (Channel::Chat(_), StateAction::ChatToolCallComplete(a)) => {
            let request = host
                .session_state_ref::<ChatProjection>(session)
                .and_then(|c| c.client_tool_request(&a.tool_call_id));
            let Some((request_id, owner)) = request else {
                return Err(format!(
                    "tool call {} is not waiting for a client's result",
                    a.tool_call_id
                ));
            };
            if owner != origin.client_id {
                return Err(format!(
                    "tool call {} is executed by client {owner:?}, not by {:?}",
                    a.tool_call_id, origin.client_id
                ));
            }
            let result = tool_result(&a.result);
            if let Some(chat) = host.session_state::<ChatProjection>(session) {
                chat.set_origin(&a.tool_call_id, COMPLETE, origin.clone());
            }
            if host.resolve_tool_call(session, &request_id, Some(&result), None) {
                Ok(())
            } else {
                if let Some(chat) = host.session_state::<ChatProjection>(session) {
                    chat.take_origin(&a.tool_call_id, COMPLETE);
                }
                Err(format!(
                    "tool call {} already has its result",
                    a.tool_call_id
                ))
            }
        }
        (Channel::Chat(_), StateAction::ChatInputCompleted(a)) => {
            let waiting = host
                .session_state_ref::<ChatProjection>(session)
                .is_some_and(|c| c.awaits_input(&a.request_id));
            if !waiting {
                return Err(format!(
                    "input request {} is not waiting for an answer",
                    a.request_id
                ));
            }
            let response = match a.response {
                ChatInputResponseKind::Accept => "accept",
                ChatInputResponseKind::Decline => "decline",
                ChatInputResponseKind::Cancel => "cancel",
            };
            let mut answer = json!({"action": response});
            if let Some(answers) = &a.answers {
                answer["content"] = super::input::content(answers);
            }
            if let Some(chat) = host.session_state::<ChatProjection>(session) {
                chat.set_origin(&a.request_id, INPUT_COMPLETED, origin.clone());
            }
            if host.resolve_elicitation(session, &a.request_id, &answer) {
                Ok(())
            } else {
                if let Some(chat) = host.session_state::<ChatProjection>(session) {
                    chat.take_origin(&a.request_id, INPUT_COMPLETED);
                }
                Err(format!(
                    "input request {} was already answered",
                    a.request_id
                ))
            }
        }
        (Channel::Session(_), StateAction::SessionActiveClientSet(a)) => {
            let client = &a.active_client;
            if client.client_id != origin.client_id {
                return Err(format!(
                    "a client sets only itself active: {:?} is not {:?}",
                    client.client_id, origin.client_id
                ));
            }
            // Every chat of the session offers the tools to its agent.
            for member in super::chats::family(host, session) {
                provide_tools(host, conn, &member, super::chats::tool_decls(client));
            }
            if let Some(chat) = host.session_state::<ChatProjection>(session) {
                chat.set_active_client(conn, client.clone());
            }
            feed::publish(host, channel, action.clone(), Some(origin.clone()));
            Ok(())
        }
        (Channel::Session(_), StateAction::SessionActiveClientRemoved(a)) => {
            if a.client_id != origin.client_id {
                return Err(format!(
                    "a client removes only itself: {:?} is not {:?}",
                    a.client_id, origin.client_id
                ));
            }
            let removed = host
                .session_state::<ChatProjection>(session)
                .map(|c| c.remove_active_clients(conn, Some(&a.client_id)))
                .unwrap_or_default();
            if removed.is_empty() {
                return Err(format!("{:?} is not an active client", a.client_id));
            }
            for member in super::chats::family(host, session) {
                provide_tools(host, conn, &member, Vec::new());
            }
            feed::publish(host, channel, action.clone(), Some(origin.clone()));
            Ok(())
        }
        (Channel::Session(_), StateAction::SessionConfigChanged(a)) => {
            let mut mode = None;
            for (key, value) in &a.config {
                match (key.as_str(), value.as_str()) {
                    ("mode", Some(m)) if modes::find(m).is_some() => mode = modes::find(m),
                    ("mode", _) => return Err(format!("unknown mode {value}")),
                    ("model", _) => return Err("the model of a session is read-only".into()),
                    (other, _) => return Err(format!("unknown config property {other:?}")),
                }
            }
            let Some(mode) = mode else {
                return Err("nothing to change (the mode is the only mutable property)".into());
            };
            let current = host
                .session(session)
                .map_or(modes::DEFAULT_MODE, |s| modes::current(s.events()));
            if current == mode.id {
                // Nothing changes: the echo confirms the state the client already has.
                feed::publish(host, channel, action.clone(), Some(origin.clone()));
            } else {
                if let Some(chat) = host.session_state::<ChatProjection>(session) {
                    chat.set_origin(session, CONFIG_CHANGED, origin.clone());
                }
                host.emit(
                    session,
                    "session.mode_changed",
                    &json!({"previousMode": current, "newMode": mode.id}),
                    false,
                );
            }
            // The mode is the session's: every extra chat's host session follows it.
            for chat in super::chats::children_of(host, session) {
                let current = host
                    .session(&chat)
                    .map_or(modes::DEFAULT_MODE, |s| modes::current(s.events()));
                if current != mode.id {
                    host.emit(
                        &chat,
                        "session.mode_changed",
                        &json!({"previousMode": current, "newMode": mode.id}),
                        false,
                    );
                }
            }
            Ok(())
        }
        (Channel::Session(_), StateAction::SessionTitleChanged(a)) => {
            host.emit(
                session,
                "session.title_changed",
                &json!({"title": a.title}),
                false,
            );
            Ok(())
        }
        _ => Err(format!(
            "{} is not supported on {channel} by this host",
            type_name(action)
        )),
    }
}

/// Starts turn `turn_id` running `message` on `session`'s chat (no turn runs): announced
/// with `origin` (the dispatching client's), then the prompt goes to the agent.
pub(crate) fn start_turn(
    host: &mut Host,
    session: &str,
    turn_id: &str,
    message: &ahp_types::state::Message,
    origin: Option<ActionOrigin>,
) {
    let message_id = host.new_id();
    let now = host.now();
    let Some(chat) = host.session_state::<ChatProjection>(session) else {
        return;
    };
    let echo = chat.start_turn(turn_id.to_owned(), message_id.clone(), message.clone(), now);
    feed::publish(host, &super::channels::chat_uri(session), echo, origin);
    super::status_changed(
        host,
        session,
        ahp_types::state::SessionStatus::InProgress.bits(),
    );
    if let Some(s) = host.session_mut(session) {
        if s.summary.is_none() {
            s.summary = Some(message.text.chars().take(200).collect());
        }
    }
    host.set_last_session(session);
    host.queue_agent_input(
        session,
        AgentInput::Prompt {
            message_id,
            prompt: message.text.clone(),
            attachments: Default::default(),
        },
    );
}

/// A client's tool result as the host's tool bridge reads it: `textResultForLlm` (the text
/// content) and `resultType`.
fn tool_result(result: &ToolCallResult) -> Value {
    let text: String = result
        .content
        .iter()
        .flatten()
        .filter_map(|c| match c {
            ToolResultContent::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let text = if text.is_empty() && !result.success {
        result
            .error
            .as_ref()
            .and_then(|e| e.get("message").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default()
    } else {
        text
    };
    json!({
        "textResultForLlm": text,
        "resultType": if result.success { "success" } else { "failure" },
    })
}

/// The action's `type` (for rejection reasons).
fn type_name(action: &StateAction) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "this action".to_owned())
}
