//! Sessions the host has not loaded, looked up by the runtime (cluster nodes).
//!
//! With [`HostConfig::lookup_unknown_sessions`](crate::host::HostConfig::lookup_unknown_sessions), a
//! frame whose `params.sessionId` names a session that is not loaded is not handled at once:
//! the connection's frames wait (in order), the runtime gets [`ClusterOutput::LoadSession`],
//! restores the session if it can serve it, and calls [`ClusterApi::finish_session_lookup`].
//! Then the waiting frames are handled as usual: the session is there, or the dialect answers
//! that it is not
//! found. The check is dialect-neutral: both dialects name sessions by `params.sessionId`.

use std::borrow::Cow;
use std::collections::VecDeque;

use bytes::Bytes;
use serde::Deserialize;

use crate::Timestamp;

use crate::host::{ClusterOutput, ConnId, Host, Output};

/// The part of a JSON-RPC message the lookup looks at.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow, default)]
    params: Option<ProbeParams<'a>>,
}

#[derive(Deserialize)]
struct ProbeParams<'a> {
    #[serde(rename = "sessionId", borrow, default)]
    session_id: Option<Cow<'a, str>>,
}

/// The session a frame names in `params.sessionId`, if any.
fn named_session(frame: &[u8]) -> Option<String> {
    let probe: Probe<'_> = serde_json::from_slice(frame).ok()?;
    let id = probe.params?.session_id?;
    (!id.is_empty()).then(|| id.into_owned())
}

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
        // Frames wait behind a lookup in order, whichever session they name.
        if let Some((_, waiting)) = c.parked.as_mut() {
            waiting.push_back(frame);
            return;
        }
        if self.relays.is_forwarded(conn) && self.forward_frame(conn, &frame) {
            return;
        }
        if self.config.lookup_unknown_sessions {
            if let Some(session) = named_session(&frame) {
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

    /// See [`ClusterApi::finish_session_lookup`].
    pub(in crate::host) fn finish_session_lookup(&mut self, now: Timestamp, session: &str) {
        self.advance_time(now);
        self.lookups.remove(session);
        let (conns, _) = self.conns.iter_mut_and_frames();
        let waiting: Vec<ConnId> = conns
            .filter(|(_, c)| c.parked.as_ref().is_some_and(|(s, _)| s == session))
            .map(|(id, _)| id)
            .collect();
        for conn in waiting {
            let Some((_, frames)) = self.conns.get_mut(&conn).and_then(|c| c.parked.take()) else {
                continue;
            };
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

    /// See [`ClusterApi::pending_lookups`].
    pub(in crate::host) fn pending_lookups(&self) -> impl Iterator<Item = &str> {
        self.lookups.iter().map(String::as_str)
    }
}
