//! The AHP commands: the method table over the host.
//!
//! | method | what it does |
//! |---|---|
//! | `initialize` | negotiates the version (`1.0.0`, or `0.9.0` when the client offers only that; else `-32005` with `supportedVersions`), subscribes the `initialSubscriptions` and answers their snapshots with the current `serverSeq` |
//! | `reconnect` | re-subscribes; answers the envelopes after `lastSeenServerSeq` on those channels (`type: "replay"`, with the channels that no longer exist as `missing`), or fresh snapshots (`type: "snapshot"`) when some were dropped, a channel was published here only since, or the sequence is not this host's; on a cluster node, channels of sessions loaded elsewhere are gathered from their owners (see `gateway`) |
//! | `ping` | `null`, initialized or not |
//! | `subscribe` | the channel's snapshot; a session or chat channel attaches the connection to the session (it streams and answers permission prompts) |
//! | `createSession` | a new session named by `channel` (`ahp-session:/<id>`, `-32003` if it exists), working directory from `workingDirectories[0]`; its default chat is `ahp-chat:/<id>`; `null` |
//! | `disposeSession` | deletes the session (its work is cancelled); `null` |
//! | `listSessions` | summaries of the loaded sessions and (on a cluster node) of those the shared log shows elsewhere, newest first (`limit` honoured, no further pages) |
//! | `createChat` | a new chat in a session, backed by a host session of its own (see `chats`); `session/chatAdded`; `null` |
//! | `disposeChat` | removes an extra chat with its host session (`session/chatRemoved`); a default chat goes only with its session |
//! | `moveChat` | `-32602`: chats are not movable |
//! | `fetchTurns` | `{}`: a chat snapshot holds every turn (no `turnsNextCursor`); an unknown cursor is `-32602` |
//!
//! Notifications: `unsubscribe` (a connection subscribed to neither a session's channel nor
//! its chat is detached from it) and `dispatchAction` (see `dispatch`). Every request but
//! `initialize`, `reconnect` and `ping` gets `-32600` before the connection is initialized;
//! unknown methods get `-32601`.

use std::collections::BTreeSet;

use ahp_types::commands::{
    CreateSessionParams, DisposeSessionParams, FetchTurnsParams, Implementation, InitializeParams,
    InitializeResult, ListSessionsParams, ListSessionsResult, ReconnectParams,
    ReconnectReplayResult, ReconnectResult, ReconnectSnapshotResult, SubscribeParams,
    SubscribeResult, UnsubscribeParams,
};
use ahp_types::errors::ahp_error_codes;
use ahp_types::errors::UnsupportedProtocolVersionErrorData;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::SessionSummary as HeldElsewhere;
use crate::host::{AfterResponse, ConnId, Host, SessionChange};
use crate::jsonrpc::{code, ErrorObject};
use crate::session::Session;
use crate::Timestamp;

use super::channels::{chat_uri, session_uri, Channel, ROOT};
use super::feed::Feed;
use super::{attach, ensure_live, snapshot, ConnState, PROTOCOL_VERSIONS};

pub(crate) type Answer = Result<Value, ErrorObject>;
type Handler = fn(&mut Host, ConnId, Option<&RawValue>) -> Answer;

/// The method table: every request this dialect answers, each named once. The first three
/// are answered before `initialize` succeeded.
const TABLE: &[(&str, Handler)] = &[
    ("initialize", initialize),
    ("reconnect", reconnect),
    ("ping", ping),
    ("subscribe", subscribe),
    ("createSession", create_session),
    ("disposeSession", dispose_session),
    ("listSessions", list_sessions),
    ("createChat", super::chats::create_chat),
    ("disposeChat", super::chats::dispose_chat),
    ("moveChat", super::chats::move_chat),
    ("fetchTurns", fetch_turns),
];

/// How many entries of [`TABLE`] are answered before initialization.
const OPEN: usize = 3;

/// Every request method this dialect answers.
pub const METHODS: [&str; TABLE.len()] = {
    let mut names = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = TABLE[i].0;
        i += 1;
    }
    names
};

pub(crate) fn decode<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    let raw = params.map(RawValue::get).unwrap_or("{}");
    serde_json::from_str(raw)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("Invalid params: {e}")))
}

fn to_value<T: serde::Serialize>(value: &T) -> Answer {
    serde_json::to_value(value).map_err(|e| ErrorObject::internal(e.to_string()))
}

/// `-32001` for a session channel that names no loaded session.
pub(crate) fn session_not_found(uri: &str) -> ErrorObject {
    ErrorObject::new(
        i64::from(ahp_error_codes::SESSION_NOT_FOUND),
        format!("Session not found: {uri}"),
    )
}

/// `-32602` for a channel URI this host does not serve.
pub(crate) fn unknown_channel(uri: &str) -> ErrorObject {
    ErrorObject::new(
        code::INVALID_PARAMS,
        format!(
            "Invalid params: unknown channel {uri:?} (this host serves ahp-root://, \
             ahp-session:/<id> and ahp-chat:/<id>)"
        ),
    )
}

/// Answers request `method`.
pub(crate) fn dispatch(
    host: &mut Host,
    conn: ConnId,
    method: &str,
    params: Option<&RawValue>,
) -> Answer {
    let found = TABLE.iter().position(|(m, _)| *m == method);
    let initialized = host
        .conn_state_ref::<ConnState>(conn)
        .is_some_and(|c| c.initialized);
    match found {
        None => Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )),
        Some(i) if i >= OPEN && !initialized => Err(ErrorObject::new(
            code::INVALID_REQUEST,
            format!("Invalid request: send initialize before {method}"),
        )),
        Some(i) => TABLE[i].1(host, conn, params),
    }
}

/// Handles notification `method`. Unknown notifications are ignored.
pub(crate) fn notification(host: &mut Host, conn: ConnId, method: &str, params: Option<&RawValue>) {
    let initialized = host
        .conn_state_ref::<ConnState>(conn)
        .is_some_and(|c| c.initialized);
    if !initialized {
        return;
    }
    match method {
        "unsubscribe" => {
            if let Ok(p) = decode::<UnsubscribeParams>(params) {
                unsubscribe(host, conn, &p.channel);
            }
        }
        "dispatchAction" => super::dispatch::dispatch_action(host, conn, params),
        _ => {}
    }
}

/// Subscribes `conn` to `uri` and returns the snapshot.
pub(super) fn subscribe_to(
    host: &mut Host,
    conn: ConnId,
    uri: &str,
) -> Result<ahp_types::state::Snapshot, ErrorObject> {
    let channel = Channel::parse(uri).ok_or_else(|| unknown_channel(uri))?;
    if let Some(session) = channel.session() {
        if !ensure_live(host, session) {
            return Err(session_not_found(uri));
        }
        attach(host, conn, session, matches!(channel, Channel::Chat(_)));
    }
    let seq = host.dialect_state::<Feed>().map_or(0, |f| f.seq());
    let snapshot = snapshot::snapshot(host, channel, seq).ok_or_else(|| session_not_found(uri))?;
    if let Some(feed) = host.dialect_state::<Feed>() {
        feed.subscribe(uri, conn);
    }
    Ok(snapshot)
}

fn unsubscribe(host: &mut Host, conn: ConnId, uri: &str) {
    if let Some(feed) = host.dialect_state::<Feed>() {
        feed.unsubscribe(uri, conn);
    }
    let Some(session) = Channel::parse(uri).and_then(Channel::session) else {
        return;
    };
    let still = host.dialect_state::<Feed>().is_some_and(|f| {
        f.subscribers(&session_uri(session)).contains(&conn)
            || f.subscribers(&chat_uri(session)).contains(&conn)
    });
    if !still {
        host.detach_conn(session, conn);
    } else if host
        .dialect_state::<Feed>()
        .is_some_and(|f| !f.subscribers(&chat_uri(session)).contains(&conn))
    {
        // Still on the session's channel only: prompts are shown in the chat it left.
        super::stop_answering(host, conn, session);
    }
}

fn initialize(host: &mut Host, conn: ConnId, params: Option<&RawValue>) -> Answer {
    let p: InitializeParams = decode(params)?;
    if p.channel != ROOT {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!(
                "Invalid params: initialize targets {ROOT}, not {:?}",
                p.channel
            ),
        ));
    }
    let Some(version) = negotiate(&p.protocol_versions)? else {
        let error = ErrorObject::new(
            i64::from(ahp_error_codes::UNSUPPORTED_PROTOCOL_VERSION),
            format!(
                "Unsupported protocol version: offered {:?}, supported {:?}",
                p.protocol_versions, PROTOCOL_VERSIONS
            ),
        );
        let data = UnsupportedProtocolVersionErrorData {
            supported_versions: PROTOCOL_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
        };
        return Err(error.clone().with_data_value(&data).unwrap_or(error));
    };
    if let Some(c) = host.conn_state::<ConnState>(conn) {
        c.initialized = true;
        c.client_id = p.client_id;
        c.version = Some(version.clone());
    }
    let mut snapshots = Vec::new();
    for uri in p.initial_subscriptions.unwrap_or_default() {
        snapshots.push(subscribe_to(host, conn, &uri)?);
    }
    initialize_result(host, version, snapshots)
}

/// The answer to an `initialize` that agreed on `version`, with the initial subscriptions'
/// `snapshots`.
pub(super) fn initialize_result(
    host: &mut Host,
    version: String,
    snapshots: Vec<ahp_types::state::Snapshot>,
) -> Answer {
    let seq = host.dialect_state::<Feed>().map_or(0, |f| f.seq());
    to_value(&InitializeResult {
        protocol_version: version,
        server_seq: i64::try_from(seq).unwrap_or(i64::MAX),
        server_info: Some(Implementation {
            name: "agentwire".into(),
            version: Some(host.config().version.to_string()),
            title: None,
        }),
        meta: None,
        snapshots,
        default_directory: None,
        completion_trigger_characters: None,
        terminal_command_prefix: None,
        telemetry: None,
        automations: None,
    })
}

/// The version this host speaks of those a client offers, if any.
pub(super) fn negotiate(offered: &[String]) -> Result<Option<String>, ErrorObject> {
    let version = ahp_types::negotiate_protocol_version(offered)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("Invalid params: {e}")))?;
    Ok(version.map(str::to_owned))
}

fn reconnect(host: &mut Host, conn: ConnId, params: Option<&RawValue>) -> Answer {
    let p: ReconnectParams = decode(params)?;
    if let Some(c) = host.conn_state::<ConnState>(conn) {
        c.initialized = true;
        c.client_id = p.client_id;
        c.version = None;
    }
    let mut missing = Vec::new();
    let mut snapshots = Vec::new();
    let mut kept = BTreeSet::new();
    for uri in p.subscriptions {
        match subscribe_to(host, conn, &uri) {
            Ok(snapshot) => {
                snapshots.push(snapshot);
                kept.insert(uri);
            }
            Err(_) => missing.push(uri),
        }
    }
    let after = u64::try_from(p.last_seen_server_seq).unwrap_or(0);
    let replay = host
        .dialect_state::<Feed>()
        .and_then(|f| f.since(after, &kept));
    let result = match replay {
        Some(actions) => ReconnectResult::Replay(ReconnectReplayResult { actions, missing }),
        None => ReconnectResult::Snapshot(ReconnectSnapshotResult { snapshots }),
    };
    to_value(&result)
}

fn ping(_host: &mut Host, _conn: ConnId, _params: Option<&RawValue>) -> Answer {
    Ok(Value::Null)
}

fn subscribe(host: &mut Host, conn: ConnId, params: Option<&RawValue>) -> Answer {
    let p: SubscribeParams = decode(params)?;
    let snapshot = subscribe_to(host, conn, &p.channel)?;
    to_value(&SubscribeResult {
        snapshot: Some(snapshot),
    })
}

fn create_session(host: &mut Host, _conn: ConnId, params: Option<&RawValue>) -> Answer {
    let p: CreateSessionParams = decode(params)?;
    let Some(Channel::Session(id)) = Channel::parse(&p.channel) else {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!(
                "Invalid params: createSession names the new session's URI in channel \
                 (ahp-session:/<id>), got {:?}",
                p.channel
            ),
        ));
    };
    if p.provider
        .as_deref()
        .is_some_and(|v| v != snapshot::PROVIDER)
    {
        return Err(ErrorObject::new(
            i64::from(ahp_error_codes::PROVIDER_NOT_FOUND),
            format!(
                "Provider not found: {:?} (this host has {:?})",
                p.provider.unwrap_or_default(),
                snapshot::PROVIDER
            ),
        ));
    }
    if host.session(id).is_some() {
        return Err(ErrorObject::new(
            i64::from(ahp_error_codes::SESSION_ALREADY_EXISTS),
            format!("Session already exists: {}", p.channel),
        ));
    }
    let id = id.to_owned();
    let cwd = p
        .working_directories
        .and_then(|dirs| dirs.into_iter().next())
        .map(|d| d.strip_prefix("file://").map(str::to_owned).unwrap_or(d));
    let mut session = Session::new(id.clone(), host.now());
    session.cwd = cwd.clone();
    host.insert_session(session);
    if let Some(chat) = host.session_state::<super::projection::ChatProjection>(&id) {
        // A new session has no history to build from.
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
        }),
        ephemeral: false,
    });
    host.after_response(AfterResponse::SessionChanged {
        change: SessionChange::Created,
        session: id,
    });
    Ok(Value::Null)
}

fn dispose_session(host: &mut Host, _conn: ConnId, params: Option<&RawValue>) -> Answer {
    let p: DisposeSessionParams = decode(params)?;
    let Some(Channel::Session(id)) = Channel::parse(&p.channel) else {
        return Err(unknown_channel(&p.channel));
    };
    if host.session(id).is_none() || !super::chats::is_top_level(host, id) {
        return Err(session_not_found(&p.channel));
    }
    // Its extra chats go with it.
    let id = id.to_owned();
    for chat in super::chats::children_of(host, &id) {
        host.delete_session(&chat);
    }
    host.delete_session(&id);
    Ok(Value::Null)
}

fn list_sessions(host: &mut Host, _conn: ConnId, params: Option<&RawValue>) -> Answer {
    let p: ListSessionsParams = decode(params)?;
    if p.cursor.is_some() {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            "Invalid params: unknown cursor (listSessions answers one page)",
        ));
    }
    // The sessions loaded here, then (on a cluster node) those the shared log shows elsewhere.
    let mut sessions: Vec<(Timestamp, &str, Result<&Session, &HeldElsewhere>)> = host
        .sessions()
        .filter(|s| super::chats::is_top_level(host, &s.id))
        .map(|s| (s.modified_time, s.id.as_str(), Ok(s)))
        .collect();
    sessions.extend(
        host.cluster_sessions()
            .map(|s| (s.modified_time, s.id.as_str(), Err(s))),
    );
    sessions.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let limit = p
        .limit
        .and_then(|l| usize::try_from(l).ok())
        .unwrap_or(usize::MAX);
    let items = sessions
        .into_iter()
        .take(limit)
        .map(|(_, _, session)| match session {
            Ok(loaded) => snapshot::summary(host, loaded),
            Err(elsewhere) => snapshot::summary_elsewhere(elsewhere),
        })
        .collect();
    to_value(&ListSessionsResult {
        next_cursor: None,
        items,
    })
}

fn fetch_turns(host: &mut Host, _conn: ConnId, params: Option<&RawValue>) -> Answer {
    let p: FetchTurnsParams = decode(params)?;
    let Some(Channel::Chat(id)) = Channel::parse(&p.channel) else {
        return Err(unknown_channel(&p.channel));
    };
    if !ensure_live(host, id) {
        return Err(session_not_found(&p.channel));
    }
    if let Some(cursor) = p.cursor {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("Invalid params: unknown cursor {cursor:?} (a chat snapshot holds every turn)"),
        ));
    }
    Ok(json!({}))
}

#[cfg(test)]
mod table_tests {
    #[test]
    fn each_request_is_named_once_and_the_open_ones_come_first() {
        let mut names = super::METHODS.to_vec();
        assert_eq!(&names[..super::OPEN], ["initialize", "reconnect", "ping"]);
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), super::METHODS.len());
    }
}
