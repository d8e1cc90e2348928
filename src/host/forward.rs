//! Connections handed over to another node (cluster gateways).
//!
//! When the runtime finds that a session a connection named is owned by another live node, it
//! calls [`Host::forward_session_lookup`]: from then on that connection's frames are not
//! handled here but handed to the runtime ([`Output::Forward`]), which relays them to the
//! owner; the owner's frames for the client come back with [`Host::deliver_forwarded`], and
//! the end of the client is [`Output::ForwardClosed`]. The owner serves the relayed frames as
//! an ordinary connection, so it keeps deciding who is asked, tool and command ownership and
//! first answers. Frames the host already answered stay answered.
//!
//! The relayed frames follow the host's no-silent-drop policy here too: a relayed streaming
//! delta is queued droppable, and what a slow client lost is reported with an
//! `events_dropped` `session.warning` made here (see [`Host::deliver_forwarded`]).

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;

use crate::session::{is_streaming_delta_type, Event};
use crate::Timestamp;

use super::relay_group::RelayRole;
use super::send::{drops_warning_data, frame_body};
use super::{ConnId, Host, Output};

/// A forwarded connection's sessions, each with the id of the last persisted event relayed to
/// it: the `parentId` of a drop report made here (as the owner's reports name the last
/// persisted event, which the reader already has).
#[derive(Debug, Default)]
pub(super) struct ForwardedParents(Vec<(String, String)>);

impl ForwardedParents {
    fn get(&self, session: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(s, _)| s == session)
            .map(|(_, id)| id.as_str())
    }

    /// Remembers `id` for `session`, reusing the stored id's buffer (no allocation once the
    /// session is known, ids being of one length).
    fn set(&mut self, session: &str, id: &str) {
        match self.0.iter_mut().find(|(s, _)| s == session) {
            Some((_, last)) => {
                last.clear();
                last.push_str(id);
            }
            None => self.0.push((session.to_owned(), id.to_owned())),
        }
    }
}

/// The parts of a relayed body that decide how it is queued, borrowed from the body (a
/// string is copied only if it holds an escape); everything else is skipped unread.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    method: Cow<'a, str>,
    #[serde(borrow, default)]
    params: Option<HeadParams<'a>>,
}

#[derive(Deserialize)]
struct HeadParams<'a> {
    #[serde(borrow, default, rename = "sessionId")]
    session_id: Cow<'a, str>,
    #[serde(borrow, default)]
    event: Option<HeadEvent<'a>>,
}

#[derive(Deserialize)]
struct HeadEvent<'a> {
    #[serde(borrow, default, rename = "type")]
    event_type: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Cow<'a, str>,
    #[serde(default)]
    ephemeral: bool,
    /// Present on a sub-agent's events.
    #[serde(rename = "agentId", default)]
    agent_id: Option<serde::de::IgnoredAny>,
}

/// What decides how a relayed `session.event` notification is queued and followed, read from
/// its body once ([`RelayedEventHead::parse`]) and shared by every client of a gateway it is
/// for: hand it to [`Host::deliver_forwarded_with_head`] with the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayedEventHead {
    /// `params.sessionId`.
    pub session: String,
    /// The event's id (empty when it has none).
    pub id: String,
    /// The event's type.
    pub event_type: String,
    /// The event is ephemeral.
    pub ephemeral: bool,
    /// The event is a sub-agent's (it has an `agentId`).
    pub sub_agent: bool,
}

impl RelayedEventHead {
    /// The head of `body` if it is a `session.event` notification (one borrowed pass over the
    /// body; the three strings are then copied); `None` for any other body.
    pub fn parse(body: &[u8]) -> Option<RelayedEventHead> {
        let (session, event) = relayed_event(body)?;
        Some(RelayedEventHead {
            session: session.into_owned(),
            id: event.id.into_owned(),
            event_type: event.event_type.into_owned(),
            ephemeral: event.ephemeral,
            sub_agent: event.agent_id.is_some(),
        })
    }
}

/// The session and event of a relayed `session.event` notification; `None` for anything
/// else (a response, a request, another notification, or a body that does not parse).
fn relayed_event(body: &[u8]) -> Option<(Cow<'_, str>, HeadEvent<'_>)> {
    let head: Head<'_> = serde_json::from_slice(body).ok()?;
    if head.method != "session.event" {
        return None;
    }
    let params = head.params?;
    Some((params.session_id, params.event?))
}

impl Host {
    /// The runtime found `session` (after [`Output::LoadSession`]) owned by another node: every
    /// connection waiting for it is forwarded from now on, starting with the frames that
    /// waited ([`Output::Forward`] with `session` set, once per connection).
    pub fn forward_session_lookup(&mut self, now: Timestamp, session: &str) {
        self.advance_time(now);
        self.lookups.remove(session);
        let (conns, _) = self.conns.iter_mut_and_frames();
        let mut handed = Vec::new();
        for (id, c) in conns {
            if c.parked.as_ref().is_some_and(|(s, _)| s == session) {
                if let Some((_, frames)) = c.parked.take() {
                    c.forwarded = true;
                    handed.push((id, Vec::from(frames)));
                }
            }
        }
        for (conn, frames) in handed {
            self.outputs.push_back(Output::Forward {
                conn,
                session: Some(session.to_owned()),
                frames,
            });
        }
    }

    /// A frame (its body, without framing) from the node a forwarded connection is relayed
    /// to: queued for the client under the same policy as the host's own frames.
    ///
    /// A `session.event` notification whose event is an ephemeral streaming delta
    /// ([`is_streaming_delta_type`]) is queued droppable: a client that falls a whole outbox
    /// budget behind loses such frames instead of being closed. Every other body is durable.
    /// Before the next durable `session.event` of the session that lost deltas (so before its
    /// `session.idle`), the client gets a `session.warning` event notification made here
    /// (this node does not hold the session): `warningType: "events_dropped"`, the exact
    /// `droppedCount` and the host's usual message, `ephemeral: true`, a fresh id, `now` as
    /// its timestamp and, as `parentId`, the last persisted event relayed to the client for
    /// that session (`null` if none). Room for the report and the durable frame is made first
    /// (dropping older deltas, which the report counts), so nothing is dropped between them.
    /// A client that cannot take a durable frame (or the report and the frame) is closed as a
    /// slow consumer, with the count of the deltas it lost in the reason's `data`.
    ///
    /// Cost: the body is read once without building anything (a borrowed parse of `method`,
    /// `params.sessionId` and `params.event`'s `type`, `id` and `ephemeral`; a string is
    /// copied only if it holds an escape), then framed into one buffer of the exact size: one
    /// allocation per delta, kept or dropped, plus the queue's amortised growth (and once per
    /// loss, the name of its session; once per session, its last persisted event id).
    pub fn deliver_forwarded(&mut self, now: Timestamp, conn: ConnId, body: &[u8]) {
        if !self.forwarded_body_is_ours(now, conn, body) {
            return;
        }
        let Some((session, event)) = relayed_event(body) else {
            self.send_body(conn, body);
            return;
        };
        self.deliver_relayed_event(
            conn,
            body,
            &session,
            &event.id,
            &event.event_type,
            event.ephemeral,
        );
    }

    /// [`Host::deliver_forwarded`] of a `session.event` body whose head was read already
    /// (once for all the clients a gateway relays it to): the body is not parsed again.
    pub fn deliver_forwarded_with_head(
        &mut self,
        now: Timestamp,
        conn: ConnId,
        body: &[u8],
        head: &RelayedEventHead,
    ) {
        if !self.forwarded_body_is_ours(now, conn, body) {
            return;
        }
        self.deliver_relayed_event(
            conn,
            body,
            &head.session,
            &head.id,
            &head.event_type,
            head.ephemeral,
        );
    }

    /// Whether the relayed `body` for `conn` is to be queued by the forwarded-frame policy:
    /// not for an unknown, closing or not forwarded connection (dropped), nor for a relay
    /// group member (sent as it is: not the case of a gateway's relayed client).
    fn forwarded_body_is_ours(&mut self, now: Timestamp, conn: ConnId, body: &[u8]) -> bool {
        self.advance_time(now);
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        if !c.forwarded || c.closing {
            return false;
        }
        if c.relay != RelayRole::None {
            self.send_body(conn, body);
            return false;
        }
        true
    }

    /// Queues the relayed `session.event` `body` (of `session`, with the event's id, type and
    /// ephemeral flag) on the forwarded connection `conn`.
    fn deliver_relayed_event(
        &mut self,
        conn: ConnId,
        body: &[u8],
        session: &str,
        id: &str,
        event_type: &str,
        ephemeral: bool,
    ) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let frame = frame_body(c.framing, body);
        if ephemeral && is_streaming_delta_type(event_type) {
            self.deliver(conn, frame, true);
            if let Some(c) = self.conns.get_mut(&conn) {
                if !c.closing && c.drop_session.is_none() && c.outbox.unreported_drops() > 0 {
                    // Remember where to report the loss.
                    c.drop_session = Some(session.to_owned());
                }
            }
            return;
        }
        let persisted = (!ephemeral && !id.is_empty()).then_some(id);
        self.deliver_forwarded_event(conn, session, persisted, frame);
    }

    /// Queues the durable frame of a relayed event of `session` on `conn`, after the report of
    /// the streaming events the client lost, if any (see [`Host::deliver_forwarded`]).
    /// `persisted`: the event's id, when it is persisted.
    fn deliver_forwarded_event(
        &mut self,
        conn: ConnId,
        session: &str,
        persisted: Option<&str>,
        frame: Bytes,
    ) {
        // The report's envelope and data without its session id and parent id (which may take
        // up to 6 bytes per byte escaped): generous, so room made for it is always enough.
        const REPORT_ROOM: usize = 1024;
        let Some((c, shared)) = self.conns.get_mut_and_frames(&conn) else {
            return;
        };
        // Drops are remembered per session; those made to fit a response (no session) are
        // reported in the session at hand, and another session's once the reader caught up
        // (its queue is empty), as for the host's own readers.
        let report_in = match c.drop_session.as_deref() {
            None => Some(session),
            Some(s) if s == session || c.outbox.is_empty() => Some(s),
            Some(_) => None,
        };
        let unreported = c.outbox.unreported_drops();
        let mut report = None;
        if let Some(report_in) = report_in {
            // An empty queue has nothing to drop: the common path stops here.
            if unreported > 0 || c.outbox.queued_bytes() > 0 {
                let parent = c.forwarded_parents.as_ref().and_then(|p| p.get(report_in));
                let room = REPORT_ROOM + 6 * (report_in.len() + parent.map_or(0, str::len));
                // A reader with nothing unreported is told only if making room for this frame
                // drops something (that drop would otherwise be reported after it).
                if unreported > 0 || !c.outbox.fits(frame.len() + room) {
                    c.outbox.make_room(frame.len() + room, shared);
                    let dropped = c.outbox.unreported_drops();
                    if dropped > 0 {
                        report = Some((report_in.to_owned(), parent.map(str::to_owned), dropped));
                    }
                }
            }
        }
        let report = report.and_then(|(report_in, parent, dropped)| {
            self.forwarded_drop_report(conn, &report_in, parent.as_deref(), dropped)
        });
        if let Some(report) = report {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if !c.outbox.fits(report.len() + frame.len()) {
                // Nothing droppable is left (room was made): the reader is behind on durable
                // frames. Closed now, its loss is counted in the reason (not yet taken).
                self.fail_slow_consumer(conn);
                return;
            }
            c.outbox.take_unreported_drops();
            c.drop_session = None;
            // Both fit: neither push drops anything the report would miss.
            self.deliver(conn, report, false);
        }
        if let Some(id) = persisted {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.forwarded_parents
                    .get_or_insert_with(Default::default)
                    .set(session, id);
            }
        }
        self.deliver(conn, frame, false);
    }

    /// The framed `session.warning` notification telling `conn` it lost `dropped` streaming
    /// events of `session`, made here as the owner would make it (`None` for a dialect without
    /// one shared event body: its relayed frames are never `session.event`s).
    fn forwarded_drop_report(
        &mut self,
        conn: ConnId,
        session: &str,
        parent: Option<&str>,
        dropped: u64,
    ) -> Option<Bytes> {
        let id = self.ids.next_uuid();
        let data = drops_warning_data(dropped);
        let event = Event::new(id, "session.warning", &data, true, self.now, parent);
        let c = self.conns.get(&conn)?;
        let body = self.dialects[c.dialect.index()].event_body(session, &event)?;
        Some(frame_body(c.framing, &body))
    }

    /// The relaying node lost `lost` streaming deltas of `session` on their way to the forwarded
    /// connection `conn` (a link to the owner broke for good): they are reported with those
    /// the client dropped itself, in the same `events_dropped` warning before the next
    /// durable event of the session (see [`Host::deliver_forwarded`]). When the connection
    /// has drops of another session still unreported, they are reported together there.
    pub fn forwarded_deltas_lost(
        &mut self,
        now: Timestamp,
        conn: ConnId,
        session: &str,
        lost: u64,
    ) {
        self.advance_time(now);
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !c.forwarded || c.closing || lost == 0 {
            return;
        }
        c.outbox.count_lost(lost);
        if c.drop_session.is_none() {
            c.drop_session = Some(session.to_owned());
        }
    }

    /// Ends a forwarded connection: what is queued for it is written, then `reason` as a
    /// JSON-RPC error, then the connection is closed ([`Output::Close`]), e.g. when the owner
    /// node died (the answers the runtime gave its unanswered requests reach it first).
    pub fn end_forwarding(&mut self, now: Timestamp, conn: ConnId, reason: String) {
        self.advance_time(now);
        if self.conns.get(&conn).is_some_and(|c| c.forwarded) {
            self.close_with_reason(conn, -32603, reason, true);
        }
    }

    /// Whether `conn` passed the host's connection check (it sent the connection token, or the
    /// host has none): a gateway tells the owner node so when it relays the connection.
    pub fn is_connection_authenticated(&self, conn: ConnId) -> bool {
        self.is_authenticated(conn)
    }

    /// Counts `conn` as authenticated without the dialect's handshake: for a connection
    /// relayed from a cluster peer that authenticated its client itself (the peer is trusted
    /// through the cluster's own credentials). Unknown connections are ignored.
    pub fn authenticate_connection(&mut self, conn: ConnId) {
        self.set_authenticated(conn);
    }

    /// Whether `conn` is forwarded to another node.
    pub fn is_forwarded(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.forwarded)
    }

    /// A decoded frame of a forwarded connection goes to the runtime.
    pub(super) fn forward_frame(&mut self, conn: ConnId, frame: Bytes) {
        self.outputs.push_back(Output::Forward {
            conn,
            session: None,
            frames: vec![frame],
        });
    }
}
