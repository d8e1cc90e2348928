//! Several chats per session: `createChat`, `disposeChat` (and a refused `moveChat`).
//!
//! A host session is one conversation: one agent, one event log, one id every dialect
//! shares. An AHP session's extra chat is therefore backed by a host session of its own,
//! named by the chat's URI (`createChat` with `chat: ahp-chat:/<c>` creates host session
//! `<c>`), whose `session.start` names its AHP session (`ahpParentSession`): the link is in
//! the durable log, so it survives a restart. What AHP shares across a session's chats is
//! shared here too: the working directory (the session's, unless `createChat` names the
//! chat's own), the mode
//! (`session/configChanged` on the session reaches every chat's host session, and a new chat
//! starts in the session's mode) and the tools of its active clients (offered to every
//! chat's agent). Each chat has its own turns, queue, permissions and title, as in AHP.
//!
//! AHP clients see an extra chat only in its session (`session/chatAdded`,
//! `session/chatRemoved`, the session snapshot's `chats`); the root lists sessions, not
//! chats. Copilot SDK apps and ACP editors see each chat's host session as a session of its
//! own (it is one, for them: they can resume it and prompt it; AHP subscribers of the chat
//! see those turns).

use ahp_types::actions::{SessionChatAddedAction, SessionChatRemovedAction, StateAction};
use ahp_types::commands::{ChatSource, CreateChatParams, DisposeChatParams, ForkChatSource};
use ahp_types::errors::ahp_error_codes;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::acp::modes;
use crate::host::{AfterResponse, ConnId, Host, SessionChange};
use crate::jsonrpc::{code, ErrorObject};
use crate::session::{Session, ToolDecl};

use super::channels::{chat_uri, session_uri, Channel};
use super::methods::{decode, session_not_found, unknown_channel, Answer};
use super::projection::ChatProjection;
use super::{ensure_live, feed, snapshot};

/// The `session.start` field naming the AHP session an extra chat's host session belongs to.
pub(crate) const PARENT_KEY: &str = "ahpParentSession";

/// The AHP session whose extra chat host session `session` is (from its `session.start`);
/// `None` for a session of its own, or when that session is not loaded.
pub(crate) fn parent_of(host: &Host, session: &str) -> Option<String> {
    let first = host.session(session)?.events().first()?;
    if first.event_type != "session.start" {
        return None;
    }
    let envelope: Value = serde_json::from_slice(&first.json).ok()?;
    let parent = envelope.get("data")?.get(PARENT_KEY)?.as_str()?;
    host.session(parent).is_some().then(|| parent.to_owned())
}

/// The extra chats of AHP session `session` (host session ids), oldest first.
pub(crate) fn children_of(host: &Host, session: &str) -> Vec<String> {
    let mut children: Vec<&Session> = host
        .sessions()
        .filter(|s| s.id != session && parent_of(host, &s.id).as_deref() == Some(session))
        .collect();
    children.sort_by(|a, b| a.start_time.cmp(&b.start_time).then(a.id.cmp(&b.id)));
    children.into_iter().map(|s| s.id.clone()).collect()
}

/// Whether host session `session` is an AHP session of its own (not an extra chat).
pub(crate) fn is_top_level(host: &Host, session: &str) -> bool {
    parent_of(host, session).is_none()
}

/// `session` and its extra chats' host sessions: what a session-wide change reaches.
pub(crate) fn family(host: &Host, session: &str) -> Vec<String> {
    let mut all = vec![session.to_owned()];
    all.extend(children_of(host, session));
    all
}

/// The tools an active client provides, as the host declares them.
pub(crate) fn tool_decls(client: &ahp_types::state::SessionActiveClient) -> Vec<ToolDecl> {
    client
        .tools
        .iter()
        .map(|t| ToolDecl {
            name: t.name.clone(),
            description: t.description.clone().unwrap_or_default(),
            parameters: t.input_schema.clone(),
            skip_permission: false,
        })
        .collect()
}

/// `createChat`: a new chat in session `channel`, backed by host session `<c>` of
/// `chat: ahp-chat:/<c>`; `session/chatAdded` on the session's channel; `null`.
pub(crate) fn create_chat(host: &mut Host, _conn: ConnId, params: Option<&RawValue>) -> Answer {
    let p: CreateChatParams = decode(params)?;
    let Some(Channel::Session(parent)) = Channel::parse(&p.channel) else {
        return Err(unknown_channel(&p.channel));
    };
    if !ensure_live(host, parent) {
        return Err(session_not_found(&p.channel));
    }
    if !is_top_level(host, parent) {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("Invalid params: {} is a chat, not a session", p.channel),
        ));
    }
    let Some(Channel::Chat(id)) = Channel::parse(&p.chat) else {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!(
                "Invalid params: chat must be a chat URI (ahp-chat:/<id>), got {:?}",
                p.chat
            ),
        ));
    };
    if host.session(id).is_some() {
        return Err(ErrorObject::new(
            i64::from(ahp_error_codes::SESSION_ALREADY_EXISTS),
            format!("Chat already exists: {}", p.chat),
        ));
    }
    match &p.source {
        None => {}
        Some(ChatSource::Fork(fork)) => {
            let (id, parent) = (id.to_owned(), parent.to_owned());
            return fork_chat(host, &parent, &id, fork, p.initial_message);
        }
        Some(_) => {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                "Invalid params: side chats are not supported (the agent advertises \
                 multipleChats with fork, without sideChat)",
            ))
        }
    }
    let id = id.to_owned();
    let parent = parent.to_owned();
    let (cwd, mode) = match host.session(&parent) {
        Some(s) => (s.cwd.clone(), modes::current(s.events()).to_owned()),
        None => return Err(session_not_found(&p.channel)),
    };
    // The chat's own working directory, else its session's.
    let cwd = p
        .working_directories
        .and_then(|dirs| dirs.into_iter().next())
        .map(|d| d.strip_prefix("file://").map(str::to_owned).unwrap_or(d))
        .or(cwd);
    let mut session = Session::new(id.clone(), host.now());
    session.cwd = cwd.clone();
    host.insert_session(session);
    if let Some(chat) = host.session_state::<ChatProjection>(&id) {
        chat.live = true;
    }
    host.after_response(AfterResponse::Emit {
        session: id.clone(),
        event_type: "session.start",
        data: json!({
            "sessionId": id,
            "version": 1,
            "producer": "agentwire",
            "copilotVersion": host.config().version,
            "startTime": host.now().to_rfc3339(),
            "context": {"cwd": cwd},
            PARENT_KEY: parent,
        }),
        ephemeral: false,
    });
    if mode != modes::DEFAULT_MODE {
        host.after_response(AfterResponse::Emit {
            session: id.clone(),
            event_type: "session.mode_changed",
            data: json!({"previousMode": modes::DEFAULT_MODE, "newMode": mode}),
            ephemeral: false,
        });
    }
    host.after_response(AfterResponse::SessionChanged {
        change: SessionChange::Created,
        session: id.clone(),
    });
    // The session's active clients offer their tools to the new chat's agent too.
    let clients = host
        .session_state_ref::<ChatProjection>(&parent)
        .map(ChatProjection::active_client_conns)
        .unwrap_or_default();
    for (conn, client) in clients {
        host.attach(&id, conn, super::attachment(tool_decls(&client), false));
    }
    if let Some(message) = p.initial_message {
        let turn = format!("{id}-initial");
        super::dispatch::start_turn(host, &id, &turn, &message, None);
    }
    Ok(Value::Null)
}

fn invalid(message: String) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, format!("Invalid params: {message}"))
}

/// `createChat` with `source: {kind: "fork", chat, turnId}`: host session `<id>` is a copy of
/// the source chat's log through completed turn `turnId` (the persisted events before the
/// next turn's prompt), linked to AHP session `parent`; its snapshot holds the copied turns,
/// and from then on the two chats go their own ways.
fn fork_chat(
    host: &mut Host,
    parent: &str,
    id: &str,
    fork: &ForkChatSource,
    initial_message: Option<ahp_types::state::Message>,
) -> Answer {
    let Some(Channel::Chat(source)) = Channel::parse(&fork.chat) else {
        return Err(invalid(format!(
            "source.chat must be a chat URI (ahp-chat:/<id>), got {:?}",
            fork.chat
        )));
    };
    let source = source.to_owned();
    if !family(host, parent).contains(&source) || !ensure_live(host, &source) {
        return Err(invalid(format!(
            "source chat {} is not a chat of {}",
            fork.chat,
            session_uri(parent)
        )));
    }
    let turns = host
        .session_state_ref::<ChatProjection>(&source)
        .map(|c| c.turns().iter().map(|t| t.id.clone()).collect::<Vec<_>>())
        .unwrap_or_default();
    let Some(index) = turns.iter().position(|t| *t == fork.turn_id) else {
        return Err(invalid(format!(
            "turn {} is not a completed turn of {}",
            fork.turn_id, fork.chat
        )));
    };
    // The turns of the log are delimited by their prompts (top-level `user.message`s that
    // are not steering): the copy ends before the prompt of the turn after this one.
    let end = host.session(&source).and_then(|s| {
        s.events()
            .iter()
            .filter(|e| e.event_type == "user.message")
            .filter(|e| {
                serde_json::from_slice::<Value>(&e.json).is_ok_and(|v| {
                    v.get("agentId").is_none() && v["data"]["delivery"] != "steering"
                })
            })
            .nth(index + 1)
            .map(|e| e.id.clone())
    });
    let link = parent.to_owned();
    host.fork_session_with(&source, id, end.as_deref(), |data| {
        if let Some(data) = data.as_object_mut() {
            data.insert("sessionId".to_owned(), json!(id));
            data.insert(PARENT_KEY.to_owned(), json!(link));
        }
    })
    .map_err(|e| invalid(format!("the fork failed: {e:?}")))?;
    ensure_live(host, id);
    host.after_response(AfterResponse::SessionChanged {
        change: SessionChange::Created,
        session: id.to_owned(),
    });
    let clients = host
        .session_state_ref::<ChatProjection>(parent)
        .map(ChatProjection::active_client_conns)
        .unwrap_or_default();
    for (conn, client) in clients {
        host.attach(id, conn, super::attachment(tool_decls(&client), false));
    }
    if let Some(message) = initial_message {
        let turn = format!("{id}-initial");
        super::dispatch::start_turn(host, id, &turn, &message, None);
    }
    Ok(Value::Null)
}

/// `disposeChat`: an extra chat is deleted with its host session (`session/chatRemoved` on
/// its session's channel); a session's default chat goes only with its session.
pub(crate) fn dispose_chat(host: &mut Host, _conn: ConnId, params: Option<&RawValue>) -> Answer {
    let p: DisposeChatParams = decode(params)?;
    let Some(Channel::Chat(id)) = Channel::parse(&p.channel) else {
        return Err(unknown_channel(&p.channel));
    };
    if host.session(id).is_none() {
        return Err(session_not_found(&p.channel));
    }
    if is_top_level(host, id) {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!(
                "Invalid params: {} is its session's default chat (disposeSession removes it \
                 with the session)",
                p.channel
            ),
        ));
    }
    host.delete_session(id);
    Ok(Value::Null)
}

/// `moveChat`: refused (chats do not move between sessions here: each is a host session
/// whose link to its AHP session is in its durable log).
pub(crate) fn move_chat(_host: &mut Host, _conn: ConnId, _params: Option<&RawValue>) -> Answer {
    Err(ErrorObject::new(
        code::INVALID_PARAMS,
        "Invalid params: chats cannot be moved between sessions on this host (chats are not \
         movable)",
    ))
}

/// A chat's host session was created (announce it in its session) or deleted (remove it
/// there). Returns whether `session` was an extra chat (then the root hears nothing).
pub(crate) fn chat_changed(host: &mut Host, change: SessionChange, session: &str) -> bool {
    match change {
        SessionChange::Created => {
            let Some(parent) = parent_of(host, session) else {
                return false;
            };
            if let Some(feed) = host.dialect_state::<feed::Feed>() {
                feed.note_chat(session, &parent);
            }
            let Some(summary) = snapshot::chat_summary_of(host, session) else {
                return true;
            };
            feed::publish(
                host,
                &session_uri(&parent),
                StateAction::SessionChatAdded(SessionChatAddedAction { summary }),
                None,
            );
            true
        }
        SessionChange::Deleted => {
            let parent = host
                .dialect_state::<feed::Feed>()
                .and_then(|f| f.forget_chat(session));
            let Some(parent) = parent else {
                return false;
            };
            feed::publish(
                host,
                &session_uri(&parent),
                StateAction::SessionChatRemoved(SessionChatRemovedAction {
                    chat: chat_uri(session),
                }),
                None,
            );
            true
        }
        // Nothing to announce (and nothing to read on this hot path).
        SessionChange::Updated => false,
    }
}
