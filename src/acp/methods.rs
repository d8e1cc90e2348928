//! The ACP agent methods: the method table over the host.
//!
//! | method | what it does |
//! |---|---|
//! | `initialize` | answers `protocolVersion: 1`, the capabilities below and `authMethods: []`; records the client's `fs` / `terminal` capabilities |
//! | `authenticate` | `{}` (no authentication is required) |
//! | `session/new` | a new session in `cwd` (the client's, not the process's); its stdio `mcpServers` start with it (see docs/mcp.md) |
//! | `session/load` | replays the whole persisted history as `session/update`s, then answers `{modes, configOptions}`; an unknown id is `-32002` with `data.sessionId` |
//! | `session/resume` | attaches without replay |
//! | `session/list` | sessions with a working directory, newest first (`cwd` filter; no paging) |
//! | `session/prompt` | runs a turn; answered with a `stopReason` once the turn ends, after all its updates |
//! | `session/set_mode`, `session/set_config_option` | the modes and options of [`modes`](super::modes) |
//! | `session/close` | cancels this connection's turn (answered `cancelled`) and detaches it; the session stays loaded |
//! | `session/delete` | cancels the session's work and removes it |
//!
//! `session/load` and `session/resume` start the `mcpServers` they name that are not running.
//! With [`RELAY_REPLAY_AFTER`](super::RELAY_REPLAY_AFTER) in their `_meta`, both replay the
//! events after the one it names (how a cluster gateway re-attaches an editor), and a relay
//! group member gets its [`RELAY_POSITION`](super::RELAY_POSITION) before the answer.
//!
//! Notifications: `session/cancel` (the turn ends with `stopReason: "cancelled"`, never an
//! error) and `$/cancel_request` (a running `session/prompt` is cancelled the same way; every
//! other request is answered at once, so there is nothing else to cancel). Other
//! notifications are ignored; other requests get `-32601` with `data.method`. Every request
//! except `initialize` gets `-32600` until `initialize` succeeded (as the TS SDK's agents do).

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::builtin::is_absolute;
use crate::agent::AgentInput;
use crate::host::{AfterResponse, ConnId, Host, SessionChange};
use crate::jsonrpc::{code, ErrorObject, OwnedId};
use crate::session::{Attachment, Session};

use super::params::*;
use super::{answer_prompts_cancelled, modes, update, ConnState, PromptWait, PROTOCOL_VERSION};

type Reply = Option<Result<Value, ErrorObject>>;

fn decode<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    let raw = params.map(RawValue::get).unwrap_or("{}");
    serde_json::from_str(raw)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("Invalid params: {e}")))
}

/// `-32002 Resource not found` with `data.sessionId` (the SDKs' `sessionNotFound`).
pub(crate) fn session_not_found(session: &str) -> ErrorObject {
    let error = ErrorObject::new(-32002, "Resource not found");
    error
        .clone()
        .with_data_value(&json!({"sessionId": session}))
        .unwrap_or(error)
}

/// What an ACP connection declares when it attaches: it streams and answers permission
/// prompts (every ACP client implements `session/request_permission`), and elicitations
/// when its client advertised `elicitation.form` or `elicitation.url`.
fn attachment(host: &mut Host, conn: ConnId) -> Attachment {
    let caps = host
        .conn_state::<ConnState>(conn)
        .map(|c| c.caps)
        .unwrap_or_default();
    Attachment {
        streaming: true,
        include_sub_agent_streaming: true,
        request_permission: true,
        request_elicitation: caps.elicitation_form || caps.elicitation_url,
        ..Attachment::default()
    }
}

type Answer = Result<Value, ErrorObject>;

/// How a request is answered.
#[derive(Clone, Copy)]
enum Handler {
    /// Answered now.
    Now(fn(&mut Host, ConnId, Option<&RawValue>) -> Answer),
    /// Answered now or later (`None`: when the turn ends).
    Later(fn(&mut Host, ConnId, &OwnedId, Option<&RawValue>) -> Reply),
}

/// The method table: every request this dialect answers, each named once, next to its
/// handler. `initialize` is first: the only request answered before it succeeded. Eleven
/// names: a scan compares lengths first, as the `match` it replaces did.
const TABLE: &[(&str, Handler)] = &[
    ("initialize", Handler::Now(initialize)),
    // No authentication is required.
    ("authenticate", Handler::Now(|_, _, _| Ok(json!({})))),
    ("session/new", Handler::Now(new_session)),
    (
        "session/load",
        Handler::Now(|h, c, p| load_session(h, c, p, true)),
    ),
    (
        "session/resume",
        Handler::Now(|h, c, p| load_session(h, c, p, false)),
    ),
    ("session/list", Handler::Now(|h, _, p| list(h, p))),
    ("session/prompt", Handler::Later(prompt)),
    ("session/set_mode", Handler::Now(set_mode)),
    ("session/set_config_option", Handler::Now(set_config_option)),
    ("session/close", Handler::Now(close)),
    ("session/delete", Handler::Now(|h, _, p| delete(h, p))),
];

/// Every request method this dialect answers (the names of the method table).
pub const METHODS: [&str; TABLE.len()] = {
    let mut names = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = TABLE[i].0;
        i += 1;
    }
    names
};

/// Answers one ACP request. `None` means the answer comes later (`session/prompt`).
pub(crate) fn dispatch(
    host: &mut Host,
    conn: ConnId,
    id: &OwnedId,
    method: &str,
    params: Option<&RawValue>,
) -> Reply {
    let found = TABLE.iter().position(|(m, _)| *m == method);
    let initialized = host
        .conn_state_ref::<ConnState>(conn)
        .is_some_and(|c| c.initialized);
    if !initialized && found != Some(0) {
        return Some(Err(ErrorObject::new(
            code::INVALID_REQUEST,
            format!("Invalid request: ACP connection must be initialized before '{method}'"),
        )));
    }
    let Some(i) = found else {
        let error = ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("\"Method not found\": {method}"),
        );
        return Some(Err(error
            .clone()
            .with_data_value(&json!({"method": method}))
            .unwrap_or(error)));
    };
    match TABLE[i].1 {
        Handler::Now(f) => Some(f(host, conn, params)),
        Handler::Later(f) => f(host, conn, id, params),
    }
}

fn initialize(
    host: &mut Host,
    conn: ConnId,
    params: Option<&RawValue>,
) -> Result<Value, ErrorObject> {
    let p: InitializeParams = decode(params)?;
    if p.protocol_version.is_none() {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            "Invalid params: missing field `protocolVersion`",
        ));
    }
    if let Some(c) = host.conn_state::<ConnState>(conn) {
        c.initialized = true;
        c.caps = super::ClientCaps::from_value(&p.client_capabilities);
        c.initialize_params = params.map(|p| p.get().to_owned());
    }
    // A v1-only agent answers 1 whatever was asked (the client disconnects if it
    // cannot speak it).
    Ok(json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": true, "sse": false},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
        },
        "agentInfo": {"name": "agentwire", "title": "agentwire", "version": host.config().version},
        "authMethods": [],
    }))
}

/// The `{modes, configOptions}` part of new/load/resume results.
fn modes_and_options(host: &Host, session: &str) -> Value {
    let mode = host
        .session(session)
        .map_or(modes::DEFAULT_MODE, |s| modes::current(s.events()));
    json!({"modes": modes::mode_state(mode), "configOptions": modes::config_options(mode)})
}

fn new_session(
    host: &mut Host,
    conn: ConnId,
    params: Option<&RawValue>,
) -> Result<Value, ErrorObject> {
    let p: NewSessionParams = decode(params)?;
    if !is_absolute(&p.cwd) {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!(
                "Invalid params: cwd must be an absolute path, got {:?}",
                p.cwd
            ),
        ));
    }
    let mcp = mcp_configs(host, conn, &p.mcp_servers)?;
    let session_id = host.new_id();
    let mut session = Session::new(session_id.clone(), host.now());
    session.cwd = Some(p.cwd.clone());
    host.insert_session(session);
    // Attach silently: announcements follow `session.start`, as for the Copilot dialect.
    let attachment = attachment(host, conn);
    host.attach_silently(&session_id, conn, attachment);
    host.after_response(AfterResponse::Emit {
        session: session_id.clone(),
        event_type: "session.start",
        data: json!({
            "sessionId": session_id,
            "version": 1,
            "producer": "agentwire",
            "copilotVersion": host.config().version,
            "startTime": host.now().to_rfc3339(),
            "context": {"cwd": p.cwd},
        }),
        ephemeral: false,
    });
    host.after_response(AfterResponse::SessionChanged {
        change: SessionChange::Created,
        session: session_id.clone(),
    });
    if !mcp.is_empty() {
        host.after_response(AfterResponse::StartMcp {
            session: session_id.clone(),
            configs: mcp,
        });
    }
    let mut result = modes_and_options(host, &session_id);
    result["sessionId"] = json!(session_id);
    Ok(result)
}

/// `session/load` (`replay`) and `session/resume`.
fn load_session(
    host: &mut Host,
    conn: ConnId,
    params: Option<&RawValue>,
    replay: bool,
) -> Result<Value, ErrorObject> {
    let p: LoadSessionParams = decode(params)?;
    let relay_former = p.relay_former();
    let mcp = mcp_configs(host, conn, &p.mcp_servers)?;
    let Some(session) = host.session_mut(&p.session_id) else {
        return Err(session_not_found(&p.session_id));
    };
    // What to replay: everything (`session/load`), nothing (`session/resume`), or what
    // follows the event a relaying gateway names (its client has the rest).
    let from = match p.replay_after() {
        Some(after) => match session.events().iter().position(|e| e.id == after) {
            Some(at) => Some(at + 1),
            None => {
                return Err(ErrorObject::new(
                    code::INVALID_PARAMS,
                    format!(
                        "Invalid params: event {after} is not in session {}'s history",
                        p.session_id
                    ),
                ))
            }
        },
        None => replay.then_some(0),
    };
    if session.cwd.is_none() {
        session.cwd = p.cwd.filter(|c| is_absolute(c));
    }
    if let Some(from) = from {
        replay_history(host, conn, &p.session_id, from);
    }
    let attachment = attachment(host, conn);
    host.attach(&p.session_id, conn, attachment);
    host.set_last_session(&p.session_id);
    if let (Some((former, awaiting)), true) = (relay_former, host.is_relay_member(conn)) {
        // A gateway took its editor back after a broken link: the prompts it waits for.
        super::relayed_prompts::rebind(host, &p.session_id, conn, former, &awaiting);
    }
    // A relayed editor's gateway learns how far the client got (see `RELAY_POSITION`).
    let last = host
        .session(&p.session_id)
        .and_then(|s| s.events().last())
        .map(|e| e.id.clone());
    if let Some(last) = last.filter(|_| host.is_relay_member(conn)) {
        super::relay_position(host, conn, &p.session_id, &last);
    }
    // Slash commands offered by other clients (not history: the current state).
    let commands = host.session(&p.session_id).map(|s| {
        s.commands()
            .into_iter()
            .map(|c| json!({"name": c.name, "description": c.description}))
            .collect::<Vec<_>>()
    });
    if let Some(commands) = commands.filter(|c| !c.is_empty()) {
        host.notify(
            conn,
            "session/update",
            &json!({"sessionId": p.session_id, "update": {
                "sessionUpdate": "available_commands_update", "availableCommands": commands}}),
        );
    }
    if !mcp.is_empty() {
        host.after_response(AfterResponse::StartMcp {
            session: p.session_id.clone(),
            configs: mcp,
        });
    }
    Ok(modes_and_options(host, &p.session_id))
}

/// The `mcpServers` of new/load/resume params; stdio servers only for connections that may
/// start processes.
fn mcp_configs(
    host: &Host,
    conn: ConnId,
    servers: &Value,
) -> Result<Vec<crate::mcp::McpServerConfig>, ErrorObject> {
    let configs = crate::mcp::acp_servers(servers)
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("Invalid params: {e}")))?;
    host.check_mcp_configs(conn, &configs)
        .map_err(|e| ErrorObject::new(code::INVALID_REQUEST, e))?;
    Ok(configs)
}

/// Sends the session's persisted history from its `from`th event on to `conn` as
/// `session/update`s.
fn replay_history(host: &mut Host, conn: ConnId, session: &str, from: usize) {
    let Some(live) = host.session(session) else {
        return;
    };
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for event in live.events().iter().skip(from) {
        if !update::is_relevant(&event.event_type) {
            continue;
        }
        let Ok(envelope) = serde_json::from_slice::<Value>(&event.json) else {
            continue;
        };
        let data = envelope.get("data").unwrap_or(&Value::Null);
        for mapped in update::map_event(&event.event_type, data, true) {
            if let Some(u) = mapped.update {
                bodies.push(super::update_body(session, &u));
            }
        }
    }
    for body in bodies {
        host.send_body(conn, &body);
    }
}

/// A `session/list` row: id, working directory, modified time, title.
type ListRow<'a> = (
    &'a str,
    &'a Option<String>,
    crate::Timestamp,
    &'a Option<String>,
);

fn list(host: &Host, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
    let p: ListParams = decode(params)?;
    let sessions: Vec<&crate::session::Session> = host
        .sessions()
        .filter(|s| s.cwd.is_some())
        .filter(|s| p.cwd.is_none() || s.cwd == p.cwd)
        .collect();
    // Loaded sessions, and those of other cluster nodes (read from the shared log).
    let mut sessions: Vec<ListRow<'_>> = sessions
        .into_iter()
        .map(|s| (s.id.as_str(), &s.cwd, s.modified_time, &s.summary))
        .chain(
            host.cluster_sessions()
                .filter(|s| s.cwd.is_some())
                .filter(|s| p.cwd.is_none() || s.cwd == p.cwd)
                .map(|s| (s.id.as_str(), &s.cwd, s.modified_time, &s.summary)),
        )
        .collect();
    sessions.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    let sessions: Vec<Value> = sessions
        .into_iter()
        .map(|(id, cwd, modified, summary)| {
            let mut info = json!({
                "sessionId": id,
                "cwd": cwd,
                "updatedAt": modified.to_rfc3339(),
            });
            if let Some(summary) = summary {
                info["title"] = json!(summary);
            }
            info
        })
        .collect();
    Ok(json!({"sessions": sessions}))
}

/// The session, if `conn` is attached to it.
fn attached(host: &Host, conn: ConnId, session: &str) -> Result<(), ErrorObject> {
    match host.session(session) {
        Some(s) if s.attached.contains_key(&conn) => Ok(()),
        _ => Err(session_not_found(session)),
    }
}

fn prompt(host: &mut Host, conn: ConnId, id: &OwnedId, params: Option<&RawValue>) -> Reply {
    let p: PromptParams = match decode(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = attached(host, conn, &p.session_id) {
        return Some(Err(e));
    }
    let text = update::prompt_text(&p.prompt);
    let message_id = host.new_id();
    if let Some(session) = host.session_mut(&p.session_id) {
        if session.summary.is_none() {
            session.summary = Some(text.chars().take(200).collect());
        }
    }
    host.set_last_session(&p.session_id);
    let relayed = host.is_relay_member(conn);
    if let Some(c) = host.conn_state::<ConnState>(conn) {
        c.prompts.push(PromptWait {
            session: p.session_id.clone(),
            id: id.clone(),
            message_id: message_id.clone(),
            started: false,
            cancelled: false,
            error: None,
            relayed,
        });
    }
    host.queue_agent_input(
        &p.session_id,
        AgentInput::Prompt {
            message_id,
            prompt: text,
            attachments: Default::default(),
        },
    );
    None
}

fn set_mode(
    host: &mut Host,
    conn: ConnId,
    params: Option<&RawValue>,
) -> Result<Value, ErrorObject> {
    let p: SetModeParams = decode(params)?;
    attached(host, conn, &p.session_id)?;
    change_mode(host, &p.session_id, &p.mode_id)?;
    Ok(json!({}))
}

fn set_config_option(
    host: &mut Host,
    conn: ConnId,
    params: Option<&RawValue>,
) -> Result<Value, ErrorObject> {
    let p: SetConfigParams = decode(params)?;
    attached(host, conn, &p.session_id)?;
    let value = p.value.as_str().unwrap_or_default();
    match p.config_id.as_str() {
        "mode" => change_mode(host, &p.session_id, value)?,
        "model" if value == modes::MODEL => {}
        "model" => {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                format!(
                    "Invalid params: unknown model {value:?} (the only one is {:?})",
                    modes::MODEL
                ),
            ))
        }
        other => {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                format!("Invalid params: unknown config option {other:?}"),
            ))
        }
    }
    let state = modes_and_options(host, &p.session_id);
    Ok(json!({"configOptions": state["configOptions"]}))
}

/// Switches the session's mode: a persisted `session.mode_changed` event, which attached
/// ACP clients see as `current_mode_update` + `config_option_update`.
fn change_mode(host: &mut Host, session: &str, mode: &str) -> Result<(), ErrorObject> {
    let Some(mode) = modes::find(mode) else {
        return Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("Invalid params: unknown mode {mode:?}"),
        ));
    };
    let current = host
        .session(session)
        .map_or(modes::DEFAULT_MODE, |s| modes::current(s.events()));
    if current != mode.id {
        host.emit(
            session,
            "session.mode_changed",
            &json!({"previousMode": current, "newMode": mode.id}),
            false,
        );
    }
    Ok(())
}

fn close(host: &mut Host, conn: ConnId, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
    let p: SessionParams = decode(params)?;
    attached(host, conn, &p.session_id)?;
    // The turn is cancelled as `session/cancel` would; this connection hears nothing
    // more of the session, so its prompts are answered now.
    let had_prompts = answer_prompts_cancelled(host, conn, &p.session_id);
    if had_prompts {
        host.queue_agent_input(&p.session_id, AgentInput::Abort);
    }
    host.detach_conn(&p.session_id, conn);
    Ok(json!({}))
}

fn delete(host: &mut Host, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
    let p: SessionParams = decode(params)?;
    let session = p.session_id;
    if host.session(&session).is_none() {
        return Err(session_not_found(&session));
    }
    // Nothing waits forever on a deleted session: its work and prompts end with it.
    host.delete_session(&session);
    Ok(json!({}))
}

#[cfg(test)]
mod table_tests {
    #[test]
    fn each_request_is_named_once_and_initialize_comes_first() {
        let mut names = super::METHODS.to_vec();
        assert_eq!(names[0], "initialize");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), super::METHODS.len());
    }
}
