//! The host as the dialects see it: the calls a dialect makes (it never touches the host's
//! fields). Everything here is dialect-neutral: connections, sessions, the dialects' opaque
//! state, timers and the deferred work of a response.

use std::any::Any;

use crate::correlation::Outcome;
use crate::frame::Framing;
use crate::jsonrpc::{self, ErrorObject, OwnedId};
use crate::session::{Attachment, Session};
use crate::Timestamp;

use super::{
    AfterResponse, ConnId, DialectId, Host, Output, Pending, SessionChange, StoreOutput,
    TimerTarget,
};

/// Connections.
impl Host {
    /// The host's clock (the latest time an input carried).
    pub(crate) fn now(&self) -> Timestamp {
        self.now
    }

    /// A fresh id from the host's seeded generator (a UUID).
    pub(crate) fn new_id(&mut self) -> String {
        self.ids.next_uuid()
    }

    /// The dialect's state of `conn` ([`DialectHandler::new_conn_state`]), if the connection
    /// is open and its state is a `T`.
    ///
    /// [`DialectHandler::new_conn_state`]: super::DialectHandler::new_conn_state
    pub(crate) fn conn_state<T: Any>(&mut self, conn: ConnId) -> Option<&mut T> {
        self.conns.get_mut(&conn)?.state.downcast_mut::<T>()
    }

    /// Like [`Host::conn_state`], read-only.
    pub(crate) fn conn_state_ref<T: Any>(&self, conn: ConnId) -> Option<&T> {
        self.conns.get(&conn)?.state.downcast_ref::<T>()
    }

    /// The dialect `conn` speaks, if it is open.
    pub(crate) fn conn_dialect(&self, conn: ConnId) -> Option<DialectId> {
        self.conns.get(&conn).map(|c| c.dialect)
    }

    /// The framing of `conn`, if it is open (closing or not).
    pub(crate) fn conn_framing(&self, conn: ConnId) -> Option<Framing> {
        self.conns.get(&conn).map(|c| c.framing)
    }

    /// Whether `conn` is open and not closing (frames queued for it will be written).
    pub(crate) fn conn_is_open(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| !c.closing)
    }

    /// Whether `conn` passed the connection-token gate (always, without a token).
    pub(crate) fn is_authenticated(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.authenticated)
    }

    /// Marks `conn` as having presented the right connection token.
    pub(crate) fn set_authenticated(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.authenticated = true;
        }
    }

    /// Records request `id` from `conn` as in flight; `false` if that id already is (the
    /// dialect answers with its own error).
    pub(crate) fn begin_request(&mut self, conn: ConnId, id: &OwnedId) -> bool {
        self.conns
            .get_mut(&conn)
            .is_some_and(|c| c.in_flight.begin(id.clone()))
    }

    /// Starts request `id` of `conn` ([`Host::begin_request`]), or, when a request with that
    /// id is still in flight there, answers it `-32600` with `{prefix}request id … is already
    /// in flight` (each dialect's wording) and returns `false`.
    pub(crate) fn admit_request(&mut self, conn: ConnId, id: &OwnedId, prefix: &str) -> bool {
        if self.begin_request(conn, id) {
            return true;
        }
        let error = crate::jsonrpc::ErrorObject::new(
            crate::jsonrpc::code::INVALID_REQUEST,
            format!("{prefix}request id {} is already in flight", id.as_raw()),
        );
        let mut body = Vec::new();
        crate::jsonrpc::write_error(&mut body, Some(id), &error);
        self.send_body(conn, &body);
        false
    }

    /// The client cancelled its request `id` (it is still answered once).
    pub(crate) fn mark_cancelled(&mut self, conn: ConnId, id: &OwnedId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.in_flight.mark_cancelled(id);
        }
    }

    /// A response from `conn` to one of the host's server-to-client requests (a bridge's
    /// call): ends that call; late, duplicate or unknown responses are counted and dropped.
    pub(crate) fn handle_client_response(
        &mut self,
        conn: ConnId,
        id: &jsonrpc::Id<'_>,
        outcome: Result<&serde_json::value::RawValue, ErrorObject>,
    ) {
        let resolved = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.calls.resolve(id, Outcome::from_response(outcome)));
        match resolved {
            Some((call, outcome)) => self.finish_client_call(call, outcome),
            None => self.unknown_responses += 1,
        }
    }

    /// Sends a notification to one connection.
    pub(crate) fn notify(&mut self, conn: ConnId, method: &str, params: &serde_json::Value) {
        let mut body = Vec::with_capacity(128);
        if jsonrpc::write_notification(&mut body, method, params).is_ok() {
            self.send_body(conn, &body);
        }
    }

    /// The error `conn`'s dialect gives a client whose bridged request (`method`) failed.
    pub(crate) fn caller_error(
        &self,
        conn: ConnId,
        method: Option<&str>,
        message: &str,
    ) -> ErrorObject {
        match self.conns.get(&conn) {
            Some(c) => self.dialects[c.dialect.index()].request_failed(method, message),
            None => ErrorObject::internal(message.to_owned()),
        }
    }
}

/// Sessions.
impl Host {
    /// The loaded session `id`.
    pub(crate) fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.get(id).map(|l| &l.session)
    }

    /// The loaded session `id`, mutably.
    pub(crate) fn session_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.sessions.get_mut(id).map(|l| &mut l.session)
    }

    /// Every loaded session, by id.
    pub(crate) fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values().map(|l| &l.session)
    }

    /// Loads a new session (with its agent) and makes it the last used one. Nothing is
    /// emitted: the dialect emits `session.start` and announces the creation.
    pub(crate) fn insert_session(&mut self, session: Session) {
        let id = session.id.clone();
        let live = self.new_live(session);
        self.sessions.insert(id.clone(), live);
        self.last_session = Some(id);
    }

    /// Attaches `conn` to `session` without announcing anything (a session's creator: its
    /// announcements follow `session.start`).
    pub(crate) fn attach_silently(&mut self, session: &str, conn: ConnId, attachment: Attachment) {
        if let Some(live) = self.sessions.get_mut(session) {
            live.session.attached.insert(conn, attachment);
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.sessions.push(session.to_owned());
        }
    }

    /// A dialect's host-wide state (not tied to a connection or a session: AHP's action
    /// sequence), one value per type, created on first use.
    pub(crate) fn dialect_state<T: Any + Send + Default>(&mut self) -> Option<&mut T> {
        let states = &mut self.dialect_states;
        let index = match states.iter().position(|s| s.is::<T>()) {
            Some(index) => index,
            None => {
                states.push(Box::<T>::default());
                states.len() - 1
            }
        };
        states[index].downcast_mut::<T>()
    }

    /// A dialect's state of `session`, one value per type, created on first use.
    pub(crate) fn session_state<T: Any + Send + Default>(
        &mut self,
        session: &str,
    ) -> Option<&mut T> {
        let states = &mut self.sessions.get_mut(session)?.states;
        let index = match states.iter().position(|s| s.is::<T>()) {
            Some(index) => index,
            None => {
                states.push(Box::<T>::default());
                states.len() - 1
            }
        };
        states[index].downcast_mut::<T>()
    }

    /// A dialect's state of `session`, if it was ever created.
    pub(crate) fn session_state_ref<T: Any>(&self, session: &str) -> Option<&T> {
        self.sessions
            .get(session)?
            .states
            .iter()
            .find_map(|s| s.downcast_ref::<T>())
    }

    /// The session most recently created, resumed or prompted.
    pub(crate) fn last_session(&self) -> Option<&str> {
        self.last_session.as_deref()
    }

    /// Makes `session` the last used one.
    pub(crate) fn set_last_session(&mut self, session: &str) {
        self.last_session = Some(session.to_owned());
    }

    /// The foreground session, if a client chose one.
    pub(crate) fn foreground(&self) -> Option<&str> {
        self.foreground.as_deref()
    }

    /// Makes `session` the foreground session; returns the previous one.
    pub(crate) fn replace_foreground(&mut self, session: &str) -> Option<String> {
        self.foreground.replace(session.to_owned())
    }

    /// Work to do once the response being built has been queued.
    pub(crate) fn after_response(&mut self, work: AfterResponse) {
        self.after_response.push(work);
    }

    /// Deletes a loaded session: its pending work is cancelled and every caller waiting on
    /// it answered, the dialects are told first ([`DialectHandler::session_deleting`]) and
    /// after ([`SessionChange::Deleted`]), and the runtime's store hears of it
    /// ([`StoreOutput::SessionDeleted`]). Returns `false` when no such session is loaded.
    ///
    /// [`DialectHandler::session_deleting`]: super::DialectHandler::session_deleting
    pub(crate) fn delete_session(&mut self, session: &str) -> bool {
        if !self.sessions.contains_key(session) {
            return false;
        }
        // Nothing waits forever on a deleted session: cancel its pending work first.
        self.cancel_tool_calls(session);
        self.drop_held(session);
        self.stop_mcp_servers(session, "the session was deleted");
        self.stop_extensions(session, None);
        self.cancel_sampling_of(session);
        for handler in self.dialects {
            handler.session_deleting(self, session);
        }
        if let Some(live) = self.sessions.remove(session) {
            if let Some(key) = live.timer {
                self.timers.remove(&key);
            }
            // Clients waiting on the session's elicitations and commands get their answer.
            for pending in live.pending.values() {
                if let Pending::Elicitation {
                    answer_to: super::AnswerTo::Caller(conn, id),
                    ..
                }
                | Pending::Command {
                    answer_to: super::AnswerTo::Caller(conn, id),
                    ..
                } = pending
                {
                    let error = self.caller_error(*conn, None, "the session was deleted");
                    self.respond(*conn, id, Err(error));
                }
            }
            for conn in live.session.attached.keys() {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.sessions.retain(|s| s != session);
                }
            }
        }
        if self.last_session.as_deref() == Some(session) {
            self.last_session = None;
        }
        if self.foreground.as_deref() == Some(session) {
            self.foreground = None;
        }
        if self.config.report_persisted_events {
            self.outputs
                .push_back(Output::Store(StoreOutput::SessionDeleted {
                    session: session.to_owned(),
                }));
        }
        self.session_changed(SessionChange::Deleted, session);
        true
    }
}

/// Timers.
impl Host {
    /// A timer key for a deadline `after` from now (arm it with [`Host::arm_dialect_timer`]).
    pub(crate) fn timer_key(&mut self, after: std::time::Duration) -> (Timestamp, u64) {
        let seq = self.timer_seq;
        self.timer_seq += 1;
        (self.now.saturating_add(after), seq)
    }

    /// Arms `key`: at its deadline the dialect `dialect` gets
    /// [`DialectHandler::timer_fired`](super::DialectHandler::timer_fired) with `conn` and
    /// `id`.
    pub(crate) fn arm_dialect_timer(
        &mut self,
        key: (Timestamp, u64),
        dialect: DialectId,
        conn: ConnId,
        id: OwnedId,
    ) {
        self.timers
            .insert(key, TimerTarget::Dialect(dialect, conn, id));
    }

    /// Disarms a timer (nothing happens if it already fired).
    pub(crate) fn cancel_timer(&mut self, key: &(Timestamp, u64)) {
        self.timers.remove(key);
    }
}
