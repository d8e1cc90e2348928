//! Sessions the host has not loaded, looked up by the runtime (cluster nodes).
//!
//! With [`HostConfig::lookup_unknown_sessions`](crate::host::HostConfig::lookup_unknown_sessions), a
//! frame that names a session that is not loaded is not handled at once:
//! the connection's frames wait (in order), the runtime gets [`ClusterOutput::LoadSession`],
//! restores the session if it can serve it, and calls [`ClusterApi::finish_session_lookup`].
//! Then the waiting frames are handled as usual: the session is there, or the dialect answers
//! that it is not
//! found. Each dialect says which session a frame names (`params.sessionId` for the Copilot
//! SDK protocol and ACP, the `channel` for AHP).

use std::collections::VecDeque;

use bytes::Bytes;

use crate::jsonrpc::{self, ErrorObject};
use crate::Timestamp;

use crate::host::{ClusterOutput, ConnId, Host, Output};

impl Host {
    /// Handles a decoded frame of `conn`, or parks it behind a session lookup. `looked_up` is
    /// a session whose lookup just finished: frames naming it are handled, not parked again.
    pub(in crate::host) fn admit_frame(
        &mut self,
        conn: ConnId,
        frame: Bytes,
        looked_up: Option<&str>,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let dialect = c.dialect.index();
        // Frames wait behind a lookup in order, whichever session they name.
        if let Some((_, waiting)) = c.parked.as_mut() {
            waiting.push_back(frame);
            return;
        }
        let forwarded = self.relays.is_forwarded(conn);
        // The session the frame names, read once (only a cluster node routes by it).
        let named = (forwarded || self.config.lookup_unknown_sessions)
            .then(|| self.dialects[dialect].named_session(&frame))
            .flatten();
        if forwarded && self.forward_frame(conn, &frame, named.as_deref()) {
            return;
        }
        if self.config.lookup_unknown_sessions {
            if let Some(session) = named {
                if looked_up != Some(session.as_str()) && !self.sessions.contains_key(&session) {
                    if self.lookups.insert(session.clone()) {
                        self.outputs
                            .push_back(Output::Cluster(ClusterOutput::LoadSession {
                                session: session.clone(),
                            }));
                    }
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.parked = Some((session, VecDeque::from([frame])));
                    }
                    return;
                }
            }
        }
        if self.is_forwarded(conn) {
            self.handle_frame_of_forwarded(conn, &frame);
        } else {
            self.handle_frame(conn, &frame);
        }
    }

    /// Admits `frame` on `conn` as if its client sent it: a request a dialect makes on the
    /// client's behalf (the subscriptions an AHP `reconnect` gathers from the nodes owning
    /// them) is looked up, relayed or handled in the connection's order, as the client's own.
    pub(crate) fn admit_on_behalf(&mut self, conn: ConnId, frame: Bytes) {
        self.admit_frame(conn, frame, None);
    }

    /// See [`ClusterApi::finish_session_lookup`].
    pub(in crate::host) fn finish_session_lookup(&mut self, now: Timestamp, session: &str) {
        for (conn, frames) in self.end_lookup(now, session) {
            for frame in frames {
                if !self.conn_is_open(conn) {
                    break;
                }
                self.admit_frame(conn, frame, Some(session));
                self.run_agents();
            }
        }
        self.run_agents();
    }

    /// See [`ClusterApi::fail_session_lookup`].
    pub(in crate::host) fn fail_session_lookup(
        &mut self,
        now: Timestamp,
        session: &str,
        reason: &str,
    ) {
        for (conn, frames) in self.end_lookup(now, session) {
            let Some(dialect) = self.conns.get(&conn).map(|c| c.dialect.index()) else {
                continue;
            };
            for frame in frames {
                let Some(c) = self.conns.get(&conn).filter(|_| self.conn_is_open(conn)) else {
                    break;
                };
                // Once the connection waits for another lookup, the rest waits behind it, in
                // order (a frame naming this session is then looked up again).
                let waits = c.parked.is_some();
                if !waits
                    && self.dialects[dialect].named_session(&frame).as_deref() == Some(session)
                {
                    self.refuse_unserved_frame(conn, &frame, session, reason);
                } else {
                    self.admit_frame(conn, frame, None);
                    self.run_agents();
                }
            }
        }
        self.run_agents();
    }

    /// The lookup of `session` ended at `now`: the frames that waited for it, by connection.
    fn end_lookup(&mut self, now: Timestamp, session: &str) -> Vec<(ConnId, VecDeque<Bytes>)> {
        self.advance_time(now);
        self.lookups.remove(session);
        let (conns, _) = self.conns.iter_mut_and_frames();
        conns
            .filter_map(|(id, c)| {
                let waits = c.parked.as_ref().is_some_and(|(s, _)| s == session);
                waits
                    .then(|| c.parked.take())
                    .flatten()
                    .map(|(_, frames)| (id, frames))
            })
            .collect()
    }

    /// Answers a request naming `session`, which cannot be served now, with an error naming
    /// `reason`; a notification naming it is dropped (there is no one to answer).
    fn refuse_unserved_frame(&mut self, conn: ConnId, frame: &[u8], session: &str, reason: &str) {
        let jsonrpc::Parsed::Single(Ok(jsonrpc::Message::Request { id, method, .. })) =
            jsonrpc::parse(frame)
        else {
            return;
        };
        let id = id.to_owned();
        if self.admit_request(conn, &id, "") {
            let message =
                format!("{method}: session {session} cannot be served now: {reason}; try again");
            let error = ErrorObject::new(jsonrpc::code::INTERNAL_ERROR, message);
            self.respond(conn, &id, Err(error));
        }
    }

    /// See [`ClusterApi::pending_lookups`].
    pub(in crate::host) fn pending_lookups(&self) -> impl Iterator<Item = &str> {
        self.lookups.iter().map(String::as_str)
    }
}
