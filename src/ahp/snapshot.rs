//! Snapshots of the channels this host serves: the root, a session, its chat; and the
//! session summaries of `listSessions` and `root/sessionAdded`.

use ahp_types::state::{
    AgentCapabilities, AgentInfo, ChatState, ChatSummary, MultipleChatsCapability, RootState,
    SessionConfigPropertySchema, SessionConfigSchema, SessionConfigState, SessionLifecycle,
    SessionState, SessionStatus, SessionSummary, Snapshot, SnapshotState, TurnState,
};

use serde_json::Value;

use crate::acp::modes;
use crate::host::Host;
use crate::session::Session;

use super::channels::{chat_uri, session_uri, Channel, ROOT};
use super::projection::ChatProjection;

/// The agent provider every session of this host has.
pub(crate) const PROVIDER: &str = "agentwire";

/// The root state: one agent, the number of loaded sessions.
pub(crate) fn root(host: &Host) -> RootState {
    RootState {
        agents: vec![AgentInfo {
            provider: PROVIDER.into(),
            display_name: "agentwire".into(),
            description: "The agent of agentwire's sessions (scripted, a model, or an ACP agent)"
                .into(),
            models: Vec::new(),
            protected_resources: None,
            customizations: None,
            capabilities: Some(AgentCapabilities {
                multiple_chats: Some(MultipleChatsCapability {
                    fork: Some(true),
                    side_chat: Some(false),
                }),
                ..AgentCapabilities::default()
            }),
        }],
        active_sessions: Some(i64::try_from(session_count(host)).unwrap_or(i64::MAX)),
        terminals: None,
        config: None,
        meta: None,
    }
}

/// The number of AHP sessions (host sessions that are not another session's extra chat).
pub(crate) fn session_count(host: &Host) -> usize {
    host.sessions()
        .filter(|s| super::chats::is_top_level(host, &s.id))
        .count()
}

/// The summary of the chat host session `id` backs (in its AHP session's `chats`).
pub(crate) fn chat_summary_of(host: &Host, id: &str) -> Option<ChatSummary> {
    let session = host.session(id)?;
    let chat = host.session_state_ref::<ChatProjection>(id);
    Some(chat_summary(session, chat, host.session_busy(id)))
}

fn status(chat: Option<&ChatProjection>, busy: bool) -> u32 {
    let running = chat.map_or(busy, |c| c.active_turn_id().is_some());
    let failed = chat
        .and_then(|c| c.turns().last())
        .is_some_and(|t| t.state == TurnState::Error);
    if running {
        SessionStatus::InProgress.bits()
    } else if failed {
        SessionStatus::Error.bits()
    } else {
        SessionStatus::Idle.bits()
    }
}

fn title(session: &Session, chat: Option<&ChatProjection>) -> String {
    chat.and_then(ChatProjection::title)
        .map(str::to_owned)
        .or_else(|| session.summary.clone())
        .unwrap_or_default()
}

fn working_directories(session: &Session) -> Option<Vec<String>> {
    session
        .cwd
        .as_ref()
        .map(|cwd| vec![format!("file://{cwd}")])
}

/// The summary of `session` (for `listSessions` and `root/sessionAdded`).
pub(crate) fn summary(host: &Host, session: &Session) -> SessionSummary {
    let chat = host.session_state_ref::<ChatProjection>(&session.id);
    SessionSummary {
        provider: PROVIDER.into(),
        title: title(session, chat),
        status: status(chat, host.session_busy(&session.id)),
        activity: None,
        origin: None,
        project: None,
        working_directories: working_directories(session),
        annotations: None,
        resource: session_uri(&session.id),
        created_at: session.start_time.to_rfc3339(),
        modified_at: session.modified_time.to_rfc3339(),
        changes: None,
        meta: None,
        chats: None,
        default_chat: Some(chat_uri(&session.id)),
    }
}

/// The summary of a session another cluster node holds (or none), as the shared log shows it:
/// idle, as far as this node knows.
pub(crate) fn summary_elsewhere(held: &crate::host::SessionSummary) -> SessionSummary {
    SessionSummary {
        provider: PROVIDER.into(),
        title: held.summary.clone().unwrap_or_default(),
        status: SessionStatus::Idle.bits(),
        activity: None,
        origin: None,
        project: None,
        working_directories: held.cwd.as_ref().map(|cwd| vec![format!("file://{cwd}")]),
        annotations: None,
        resource: session_uri(&held.id),
        created_at: held.start_time.to_rfc3339(),
        modified_at: held.modified_time.to_rfc3339(),
        changes: None,
        meta: None,
        chats: None,
        default_chat: Some(chat_uri(&held.id)),
    }
}

fn chat_summary(session: &Session, chat: Option<&ChatProjection>, busy: bool) -> ChatSummary {
    ChatSummary {
        resource: chat_uri(&session.id),
        title: title(session, chat),
        status: status(chat, busy),
        activity: None,
        modified_at: session.modified_time.to_rfc3339(),
        changes: None,
        origin: None,
        movable: Some(false),
        interactivity: None,
        working_directories: None,
    }
}

/// The state of session `id` (its projection must be live).
pub(crate) fn session(host: &Host, id: &str) -> Option<SessionState> {
    let session = host.session(id)?;
    let chat = host.session_state_ref::<ChatProjection>(id);
    let busy = host.session_busy(id);
    Some(SessionState {
        provider: PROVIDER.into(),
        title: title(session, chat),
        status: status(chat, busy),
        activity: None,
        origin: None,
        project: None,
        working_directories: working_directories(session),
        annotations: None,
        lifecycle: SessionLifecycle::Ready,
        creation_error: None,
        server_tools: None,
        active_clients: chat.map(ChatProjection::active_clients).unwrap_or_default(),
        chats: std::iter::once(chat_summary(session, chat, busy))
            .chain(
                super::chats::children_of(host, id)
                    .iter()
                    .filter_map(|c| chat_summary_of(host, c)),
            )
            .collect(),
        default_chat: Some(chat_uri(id)),
        config: Some(config(session)),
        customizations: None,
        changesets: None,
        input_needed: None,
        meta: None,
    })
}

/// The session's configuration: its mode (`interactive` / `autopilot`, which clients may
/// change with `session/configChanged`) and its model (read-only).
pub(crate) fn config(session: &Session) -> SessionConfigState {
    let property = |title: &str, values: Vec<Value>, labels: Vec<String>, read_only: bool| {
        SessionConfigPropertySchema {
            r#type: "string".into(),
            title: title.into(),
            description: None,
            default: values.first().cloned(),
            r#enum: Some(values),
            enum_labels: Some(labels),
            enum_descriptions: None,
            read_only: Some(read_only),
            items: None,
            min_items: None,
            max_items: None,
            properties: None,
            required: None,
            additional_properties: None,
            enum_dynamic: None,
            session_mutable: Some(!read_only),
        }
    };
    let model = session
        .model
        .clone()
        .unwrap_or_else(|| modes::MODEL.to_owned());
    let mut properties = std::collections::HashMap::new();
    properties.insert(
        "mode".to_owned(),
        property(
            "Mode",
            modes::MODES.iter().map(|m| Value::from(m.id)).collect(),
            modes::MODES.iter().map(|m| m.name.to_owned()).collect(),
            false,
        ),
    );
    properties.insert(
        "model".to_owned(),
        property(
            "Model",
            vec![Value::from(model.clone())],
            vec![model.clone()],
            true,
        ),
    );
    let mut values = serde_json::Map::new();
    values.insert("mode".into(), Value::from(modes::current(session.events())));
    values.insert("model".into(), Value::from(model));
    SessionConfigState {
        schema: SessionConfigSchema {
            r#type: "object".into(),
            properties,
            required: None,
        },
        values,
    }
}

/// The state of session `id`'s chat (its projection must be live).
pub(crate) fn chat(host: &Host, id: &str) -> Option<ChatState> {
    let session = host.session(id)?;
    let chat = host.session_state_ref::<ChatProjection>(id);
    let busy = host.session_busy(id);
    let summary = chat_summary(session, chat, busy);
    Some(ChatState {
        resource: summary.resource,
        title: summary.title,
        status: summary.status,
        activity: None,
        modified_at: summary.modified_at,
        changes: None,
        origin: None,
        movable: Some(false),
        interactivity: None,
        working_directories: None,
        changesets: None,
        background_work: None,
        canvases: None,
        turns: chat.map(|c| c.turns().to_vec()).unwrap_or_default(),
        turns_next_cursor: None,
        active_turn: chat.and_then(ChatProjection::active_turn),
        steering_message: chat.and_then(ChatProjection::steering_message),
        queued_messages: chat.and_then(ChatProjection::queued_messages),
        draft: None,
        meta: None,
    })
}

/// The snapshot of `channel` at `seq`; `None` when it names no loaded session.
pub(crate) fn snapshot(host: &Host, channel: Channel<'_>, seq: u64) -> Option<Snapshot> {
    let (resource, state) = match channel {
        Channel::Root => (ROOT.to_owned(), SnapshotState::Root(Box::new(root(host)))),
        Channel::Session(id) => (
            session_uri(id),
            SnapshotState::Session(Box::new(session(host, id)?)),
        ),
        Channel::Chat(id) => (chat_uri(id), SnapshotState::Chat(Box::new(chat(host, id)?))),
    };
    Some(Snapshot {
        resource,
        state,
        from_seq: i64::try_from(seq).unwrap_or(i64::MAX),
    })
}
