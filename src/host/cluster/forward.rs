//! Sessions handed over to another node (cluster gateways).
//!
//! When the runtime finds that a session a connection named is owned by another live node, it
//! calls [`ClusterApi::forward_session_lookup`]: from then on that connection's frames naming the
//! session (`params.sessionId`) are not handled here but handed to the runtime
//! ([`ClusterOutput::Forward`], with the session), which relays them to the owner; the owner's
//! frames for the client come back with [`ClusterApi::deliver_forwarded`], and the end of the
//! client is [`ClusterOutput::ForwardClosed`]. The owner serves the relayed frames as an
//! ordinary connection,
//! so it keeps deciding who is asked, tool and command ownership and first answers. Frames
//! the host already answered stay answered.
//!
//! Routing is per session: one connection may use sessions of this node and of several
//! owners at once. Its frames that name no forwarded session (the handshake, `ping`,
//! `session.list`, `session.create`, ...) are served here. An owner's requests to the client
//! are given an id of this connection's own (ids of different owners, and of this host,
//! would collide), and the client's answer goes back to that owner under the owner's id.
//!
//! The relayed frames follow the host's no-silent-drop policy here too: a relayed streaming
//! delta is queued droppable, and what a slow client lost is reported with an
//! `events_dropped` `session.warning` made here (see [`ClusterApi::deliver_forwarded`]).

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::session::{is_streaming_delta_type, Event};
use crate::Timestamp;

use super::relay_group::RelayRole;
use crate::host::dialect::OwnerFrameUse;
use crate::host::io::send::{drops_warning_data, frame_body};
use crate::host::{ClusterOutput, ConnId, Drops, Host, Output};
use crate::jsonrpc::OwnedId;

/// What a connection relaying some of its sessions to their owners keeps.
#[derive(Debug, Default)]
pub(in crate::host) struct Forwarded {
    /// The sessions whose frames go to their owner, in the order they were forwarded.
    sessions: Vec<String>,
    /// Per session, the last persisted event relayed to the client.
    parents: ForwardedParents,
    /// The owners' requests to the client not answered yet.
    requests: Vec<RelayedRequest>,
}

/// A request of an owner node to a forwarded connection's client, under an id of the
/// connection's own.
#[derive(Debug)]
struct RelayedRequest {
    /// The id the client was given.
    given: OwnedId,
    /// The session whose owner asked (the route of the answer).
    session: String,
    /// The id the owner used.
    owner: OwnedId,
}

/// A forwarded connection's sessions, each with the id of the last persisted event relayed to
/// it: the `parentId` of a drop report made here (as the owner's reports name the last
/// persisted event, which the reader already has).
#[derive(Debug, Default)]
pub(in crate::host) struct ForwardedParents(Vec<(String, String)>);

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
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<HeadParams<'a>>,
}

/// What routes a client frame of a forwarded connection: a request or notification by the
/// session it names (its dialect's [`DialectHandler::named_session`](crate::host::dialect::DialectHandler::named_session)), a response by its id.
#[derive(Deserialize)]
struct ClientProbe<'a> {
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
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
/// for: hand it to [`ClusterApi::deliver_forwarded_with_head`] with the body.
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
    /// The method of the event notifications whose head is read (the Copilot SDK dialect's).
    pub const EVENT_METHOD: &'static str = "session.event";

    /// The head of `body` if it is an event notification as the host writes one (`jsonrpc`,
    /// then `method`): only a body that starts so is parsed, so responses, requests and ACP
    /// updates cost a prefix comparison; `None` for any other body (a body written otherwise
    /// is left to [`ClientRelay::owner_sent`](crate::relay::ClientRelay::owner_sent)).
    pub fn read(body: &[u8]) -> Option<RelayedEventHead> {
        const EVENT: &[u8] = br#"{"jsonrpc":"2.0","method":"session.event""#;
        body.starts_with(EVENT).then(|| Self::parse(body)).flatten()
    }

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

/// `body`, a JSON-RPC message, with `id` as its id (its members otherwise the same).
fn with_id(body: &[u8], id: &OwnedId) -> Option<Vec<u8>> {
    let mut message: serde_json::Map<String, Value> = serde_json::from_slice(body).ok()?;
    message.insert("id".to_owned(), serde_json::from_str(id.as_raw()).ok()?);
    serde_json::to_vec(&message).ok()
}

/// The session and event of a relayed `session.event` notification; `None` for anything
/// else (a response, a request, another notification, or a body that does not parse).
fn relayed_event(body: &[u8]) -> Option<(Cow<'_, str>, HeadEvent<'_>)> {
    serde_json::from_slice::<Head<'_>>(body).ok()?.into_event()
}

impl<'a> Head<'a> {
    /// The owner's id of a request (a message with a method and an id).
    fn request_id(&self) -> Option<OwnedId> {
        (!self.method.is_empty())
            .then_some(self.id?)
            .and_then(|id| OwnedId::parse(id.get()))
    }

    /// The session and event of a `session.event` notification; `None` for anything else.
    fn into_event(self) -> Option<(Cow<'a, str>, HeadEvent<'a>)> {
        if self.method != "session.event" {
            return None;
        }
        let params = self.params?;
        Some((params.session_id, params.event?))
    }
}

impl Host {
    /// See [`ClusterApi::forward_session_lookup`].
    pub(in crate::host) fn forward_session_lookup(&mut self, now: Timestamp, session: &str) {
        let (conns, _) = self.conns.iter_mut_and_frames();
        for (conn, c) in conns {
            if c.parked.as_ref().is_some_and(|(s, _)| s == session) {
                let forwarded = self.relays.forward(conn);
                if !forwarded.sessions.iter().any(|s| s == session) {
                    forwarded.sessions.push(session.to_owned());
                }
            }
        }
        self.finish_session_lookup(now, session);
    }

    /// See [`ClusterApi::deliver_forwarded`].
    pub(in crate::host) fn deliver_forwarded(
        &mut self,
        now: Timestamp,
        conn: ConnId,
        session: &str,
        body: &[u8],
    ) {
        if !self.forwarded_body_is_ours(now, conn, body) {
            return;
        }
        let Some(dialect) = self.conns.get(&conn).map(|c| c.dialect) else {
            return;
        };
        let handler = self.dialects[dialect.index()];
        let rewritten = match handler.owner_frame(self, conn, body) {
            OwnerFrameUse::AsIs => None,
            OwnerFrameUse::Rewritten(body) => Some(body),
            OwnerFrameUse::Taken => return,
        };
        let body = rewritten.as_deref().unwrap_or(body);
        let Ok(head) = serde_json::from_slice::<Head<'_>>(body) else {
            self.send_body(conn, body);
            return;
        };
        let request = head.request_id();
        if let Some((event_session, event)) = head.into_event() {
            self.deliver_relayed_event(
                conn,
                body,
                &event_session,
                &event.id,
                &event.event_type,
                event.ephemeral,
            );
            return;
        }
        match request {
            Some(owner) => self.deliver_owner_request(conn, session, owner, body),
            None => self.send_body(conn, body),
        }
    }

    /// Queues the request `body` of the owner of `session` (its id `owner`) for the client of
    /// `conn`, under an id of the connection's own.
    fn deliver_owner_request(&mut self, conn: ConnId, session: &str, owner: OwnedId, body: &[u8]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let given = c.calls.reserve();
        let Some(rewritten) = with_id(body, &given) else {
            return;
        };
        if let Some(forwarded) = self.relays.forwarded_mut(conn) {
            forwarded.requests.push(RelayedRequest {
                given,
                session: session.to_owned(),
                owner,
            });
        }
        self.send_body(conn, &rewritten);
    }

    /// Where a client frame of `conn` goes, if it is relayed: the session whose owner it is
    /// for and the body to relay (an answer to an owner's request carries the owner's id
    /// again). `named`: the session the frame names. `None` for a frame served here: the
    /// connection has no forwarded session, or the frame names none of them and answers no
    /// owner.
    fn forward_route(
        &mut self,
        conn: ConnId,
        frame: &Bytes,
        named: Option<&str>,
    ) -> Option<(String, Bytes)> {
        let forwarded = self.relays.forwarded_mut(conn)?;
        let probe: ClientProbe<'_> = serde_json::from_slice(frame).ok()?;
        if probe.method.is_none() {
            let given = OwnedId::parse(probe.id?.get())?;
            let at = forwarded.requests.iter().position(|r| r.given == given)?;
            let request = forwarded.requests.swap_remove(at);
            let body = with_id(frame, &request.owner)?;
            return Some((request.session, Bytes::from(body)));
        }
        let session = named?;
        forwarded
            .sessions
            .iter()
            .find(|s| *s == session)
            .map(|s| (s.clone(), frame.clone()))
    }

    /// See [`ClusterApi::deliver_forwarded_with_head`].
    pub(in crate::host) fn deliver_forwarded_with_head(
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
        if !self.relays.is_forwarded(conn) || c.closing {
            return false;
        }
        if self.relays.role(conn) != RelayRole::None {
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
    /// the streaming events the client lost, if any (see [`ClusterApi::deliver_forwarded`]).
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
                let parent = self
                    .relays
                    .forwarded(conn)
                    .and_then(|f| f.parents.get(report_in));
                let room = REPORT_ROOM + 6 * (report_in.len() + parent.map_or(0, str::len));
                // A reader with nothing unreported is told only if making room for this frame
                // drops something (that drop would otherwise be reported after it).
                if unreported > 0 || !c.outbox.fits(frame.len() + room) {
                    c.outbox.make_room(frame.len() + room, shared);
                    let dropped = c.outbox.unreported();
                    if dropped.count > 0 {
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
            if let Some(forwarded) = self.relays.forwarded_mut(conn) {
                forwarded.parents.set(session, id);
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
        dropped: Drops,
    ) -> Option<Bytes> {
        let id = self.ids.next_uuid();
        let data = drops_warning_data(dropped);
        let event = Event::new(id, "session.warning", &data, true, self.now, parent);
        let c = self.conns.get(&conn)?;
        let body = self.dialects[c.dialect.index()].event_body(session, &event)?;
        Some(frame_body(c.framing, &body))
    }

    /// See [`ClusterApi::forwarded_deltas_lost`].
    pub(in crate::host) fn forwarded_deltas_lost(
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
        if !self.relays.is_forwarded(conn) || c.closing || lost == 0 {
            return;
        }
        c.outbox.count_lost(lost);
        if c.drop_session.is_none() {
            c.drop_session = Some(session.to_owned());
        }
    }

    /// See [`ClusterApi::end_forwarding`].
    pub(in crate::host) fn end_forwarding(&mut self, now: Timestamp, conn: ConnId, reason: String) {
        self.advance_time(now);
        if self.conns.get(&conn).is_some() && self.relays.is_forwarded(conn) {
            self.close_with_reason(conn, -32603, reason, true);
        }
    }

    /// See [`ClusterApi::is_connection_authenticated`].
    pub(in crate::host) fn is_connection_authenticated(&self, conn: ConnId) -> bool {
        self.is_authenticated(conn)
    }

    /// See [`ClusterApi::authenticate_connection`].
    pub(in crate::host) fn authenticate_connection(&mut self, conn: ConnId) {
        self.set_authenticated(conn);
    }

    /// See [`ClusterApi::is_forwarded`].
    pub(in crate::host) fn is_forwarded(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some() && self.relays.is_forwarded(conn)
    }

    /// See [`ClusterApi::forwarded_sessions`].
    pub(in crate::host) fn forwarded_sessions(&self, conn: ConnId) -> impl Iterator<Item = &str> {
        self.relays
            .forwarded(conn)
            .into_iter()
            .flat_map(|f| f.sessions.iter().map(String::as_str))
    }

    /// Handles here a frame of `conn`, which relays sessions: a connection-level registration
    /// it makes (`sessionFs.setProvider`, `llmInference.setProvider`: the entries of the link
    /// set-up, [`ClusterApi::relay_handshake`]) is made on every owner it relays to as well, as a
    /// link opened now would make it (its answer there is not the client's).
    pub(in crate::host) fn handle_frame_of_forwarded(&mut self, conn: ConnId, frame: &[u8]) {
        let before = self.relay_handshake(conn);
        self.handle_frame(conn, frame);
        let added: Vec<Bytes> = self
            .relay_handshake(conn)
            .into_iter()
            .filter(|setup| !before.contains(setup))
            .map(Bytes::from)
            .collect();
        if added.is_empty() {
            return;
        }
        let sessions: Vec<String> = self.forwarded_sessions(conn).map(str::to_owned).collect();
        for session in sessions {
            self.outputs
                .push_back(Output::Cluster(ClusterOutput::Forward {
                    conn,
                    session,
                    frames: added.clone(),
                }));
        }
    }

    /// Relays a decoded frame of `conn` if it is for a forwarded session (`named`: the session
    /// it names) or answers an owner's request; whether it was.
    pub(in crate::host) fn forward_frame(
        &mut self,
        conn: ConnId,
        frame: &Bytes,
        named: Option<&str>,
    ) -> bool {
        let Some((session, body)) = self.forward_route(conn, frame, named) else {
            return false;
        };
        self.outputs
            .push_back(Output::Cluster(ClusterOutput::Forward {
                conn,
                session,
                frames: vec![body],
            }));
        true
    }
}
