//! Loading sessions back from a store: the runtime reads its logs, the host rebuilds state.

use std::fmt;

use bytes::Bytes;
use serde::Deserialize;

use crate::session::{Event, Session};
use crate::Timestamp;

use crate::host::{Host, Live};

/// Why a stored session could not be restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// A session with this id is already loaded.
    AlreadyLoaded(String),
    /// Event number `index` (0-based) is not a valid stored event.
    BadEvent {
        /// Position of the bad event in the log.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The log is empty: there is nothing to restore.
    Empty,
}

impl fmt::Display for RestoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreError::AlreadyLoaded(id) => write!(f, "session {id} is already loaded"),
            RestoreError::BadEvent { index, reason } => {
                write!(f, "stored event #{index} is invalid: {reason}")
            }
            RestoreError::Empty => f.write_str("the session log holds no events"),
        }
    }
}

impl std::error::Error for RestoreError {}

/// The envelope fields the host needs from a stored event.
#[derive(Deserialize)]
struct Stored<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
    #[serde(rename = "type", borrow)]
    event_type: std::borrow::Cow<'a, str>,
    #[serde(default)]
    ephemeral: bool,
    #[serde(default)]
    data: serde_json::Value,
}

impl Host {
    pub(in crate::host) fn new_live(&self, session: Session) -> Live {
        let model_agent = self.config.model_default.is_some();
        let mut agent: Box<dyn crate::agent::Agent> = if model_agent {
            Box::new(crate::agent::ModelAgent::new())
        } else {
            (self.config.agent)(&session.id)
        };
        if !session.events().is_empty() {
            agent.restored(session.events());
        }
        Live {
            session,
            agent: Some(agent),
            model: Default::default(),
            model_agent,
            client_transport: false,
            pending: Default::default(),
            resolved: Default::default(),
            timer: None,
            ran_turn: false,
            approved_extensions: Default::default(),
            command_queue: Default::default(),
            command_queue_stopped: false,
            canvases: Default::default(),
            states: Vec::new(),
            mcp: Default::default(),
            sql_ready: false,
            tool_call_agents: Default::default(),
            route_catalog: Default::default(),
            deltas_emitted: [0; 2],
            held: Default::default(),
            released: 0,
            preparing: None,
            hooks: Default::default(),
            system_transformed: Default::default(),
            instructions: Default::default(),
            file_changes: Default::default(),
            large_output: Default::default(),
        }
    }

    /// Restores a session from its stored log: `events` are the persisted events in order,
    /// each one compact JSON object as [`StoreOutput::Persist`](crate::host::StoreOutput::Persist)
    /// handed it out. The session is loaded with no connection attached; `session.list`,
    /// `session.getMetadata` and `session.getMessages` see it, and `session.resume`
    /// continues its `parentId` chain. Nothing is sent to any client.
    pub fn restore_session(
        &mut self,
        now: Timestamp,
        session_id: &str,
        events: impl IntoIterator<Item = Bytes>,
    ) -> Result<(), RestoreError> {
        if self.sessions.contains_key(session_id) {
            return Err(RestoreError::AlreadyLoaded(session_id.to_owned()));
        }
        let mut session = Session::new(session_id.to_owned(), now);
        let mut first = true;
        for (index, json) in events.into_iter().enumerate() {
            let bad = |reason: String| RestoreError::BadEvent { index, reason };
            let stored: Stored<'_> =
                serde_json::from_slice(&json).map_err(|e| bad(e.to_string()))?;
            if stored.ephemeral {
                return Err(bad("ephemeral events are never stored".into()));
            }
            let timestamp = event_time(&json).unwrap_or(now);
            if first {
                session.start_time = timestamp;
                first = false;
            }
            match stored.event_type.as_ref() {
                "session.start" => {
                    if let Some(cwd) = stored.data.pointer("/context/cwd").and_then(|v| v.as_str())
                    {
                        session.cwd = Some(cwd.to_owned());
                    }
                    if let Some(m) = stored.data.get("selectedModel").and_then(|v| v.as_str()) {
                        session.model = Some(m.to_owned());
                    }
                }
                // `session.metadata.setWorkingDirectory` / `recordContextChange`.
                "session.context_changed" => {
                    if let Some(cwd) = stored.data.get("cwd").and_then(|v| v.as_str()) {
                        session.cwd = Some(cwd.to_owned());
                    }
                }
                "user.message" if session.summary.is_none() => {
                    if let Some(c) = stored.data.get("content").and_then(|v| v.as_str()) {
                        session.summary = Some(c.chars().take(200).collect());
                    }
                }
                _ => {}
            }
            let event = Event {
                id: stored.id.into_owned(),
                event_type: stored.event_type.into_owned(),
                ephemeral: false,
                json,
            };
            session.restore(event, timestamp);
        }
        if first {
            return Err(RestoreError::Empty);
        }
        let mut live = self.new_live(session);
        live.canvases = crate::host::requests::canvas::restore_open_canvases(&live);
        live.hooks.resumed = true;
        self.sessions.insert(session_id.to_owned(), live);
        Ok(())
    }
}

/// The event's `timestamp` field parsed back into a [`Timestamp`].
fn event_time(json: &[u8]) -> Option<Timestamp> {
    #[derive(Deserialize)]
    struct T<'a> {
        #[serde(borrow)]
        timestamp: std::borrow::Cow<'a, str>,
    }
    let t: T<'_> = serde_json::from_slice(json).ok()?;
    let time = humantime::parse_rfc3339(&t.timestamp).ok()?;
    Some(Timestamp::from_system_time(time))
}
