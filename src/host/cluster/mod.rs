//! The host's cluster part: what a cluster runtime (`agentwire-cluster`) drives, behind the
//! borrowed [`ClusterApi`] ([`Host::cluster`]), as str0m's `Rtc::direct_api()`.
//!
//! * `lookup`: sessions the host has not loaded, looked up by the runtime;
//! * `forward`: connections of a gateway whose sessions are owned by another node;
//! * `relay_group`: the owner's side, one ordered stream per gateway node;
//! * `kept_requests`: requests of relayed connections kept across a broken link;
//! * `catalog`, `restore`: sessions found in the shared log, and loading them back.

pub(in crate::host) mod catalog;
pub(in crate::host) mod forward;
pub(crate) mod kept_requests;
pub(in crate::host) mod lookup;
pub(in crate::host) mod relay_group;
pub(crate) mod relay_requests;
pub(in crate::host) mod relays;
pub(in crate::host) mod restore;

use crate::Timestamp;

use super::{ConnId, Host, RelayedEventHead, SessionSummary};
#[cfg(doc)]
use super::{Output, RELAY_HANDSHAKE_ID};
#[cfg(doc)]
use crate::session::is_streaming_delta_type;

/// The host's cluster relaying, borrowed from a [`Host`] ([`Host::cluster`]): session lookups,
/// connections forwarded to a session's owner node (a gateway's side) and relay groups (the
/// owner's side). Only a cluster runtime calls it.
pub struct ClusterApi<'a>(&'a mut Host);

impl Host {
    /// The cluster relaying part of the host (see [`ClusterApi`]).
    pub fn cluster(&mut self) -> ClusterApi<'_> {
        ClusterApi(self)
    }
}

impl<'a> ClusterApi<'a> {
    /// The host, read-only (for the parts of cluster relaying that live beside the dialects).
    pub(crate) fn host(&self) -> &Host {
        self.0
    }

    /// The runtime found `session` (after [`ClusterOutput::LoadSession`](crate::host::ClusterOutput::LoadSession)) owned by another node: on
    /// every connection waiting for it, its frames are forwarded from now on, starting with
    /// the frames that waited that name it ([`Output::Forward`] with `session`); the others
    /// among them are handled here, in order, as if no lookup had held them.
    pub fn forward_session_lookup(&mut self, now: Timestamp, session: &str) {
        self.0.forward_session_lookup(now, session)
    }

    /// A frame (its body, without framing) from the owner of `session`, which the forwarded
    /// connection `conn` relays there: queued for the client under the same policy as the
    /// host's own frames.
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
    /// A request of the owner gets an id of this connection's own (the client's answer goes
    /// back to the owner under the owner's id): the body is then written anew.
    ///
    /// Cost: the body is read once without building anything (a borrowed parse of `method`,
    /// `id`, `params.sessionId` and `params.event`'s `type`, `id` and `ephemeral`; a string is
    /// copied only if it holds an escape), then framed into one buffer of the exact size: one
    /// allocation per delta, kept or dropped, plus the queue's amortised growth (and once per
    /// loss, the name of its session; once per session, its last persisted event id).
    pub fn deliver_forwarded(&mut self, now: Timestamp, conn: ConnId, session: &str, body: &[u8]) {
        self.0.deliver_forwarded(now, conn, session, body)
    }

    /// [`ClusterApi::deliver_forwarded`] of a `session.event` body whose head was read already
    /// (once for all the clients a gateway relays it to): the body is not parsed again.
    pub fn deliver_forwarded_with_head(
        &mut self,
        now: Timestamp,
        conn: ConnId,
        body: &[u8],
        head: &RelayedEventHead,
    ) {
        self.0.deliver_forwarded_with_head(now, conn, body, head)
    }

    /// The relaying node lost `lost` streaming deltas of `session` on their way to the forwarded
    /// connection `conn` (a link to the owner broke for good): they are reported with those
    /// the client dropped itself, in the same `events_dropped` warning before the next
    /// durable event of the session (see [`ClusterApi::deliver_forwarded`]). When the connection
    /// has drops of another session still unreported, they are reported together there.
    pub fn forwarded_deltas_lost(
        &mut self,
        now: Timestamp,
        conn: ConnId,
        session: &str,
        lost: u64,
    ) {
        self.0.forwarded_deltas_lost(now, conn, session, lost)
    }

    /// Ends a forwarded connection: what is queued for it is written, then `reason` as a
    /// JSON-RPC error, then the connection is closed ([`Output::Close`]), e.g. when the owner
    /// node died (the answers the runtime gave its unanswered requests reach it first).
    pub fn end_forwarding(&mut self, now: Timestamp, conn: ConnId, reason: String) {
        self.0.end_forwarding(now, conn, reason)
    }

    /// Whether `conn` passed the host's connection check (it sent the connection token, or the
    /// host has none): a gateway tells the owner node so when it relays the connection.
    pub fn is_connection_authenticated(&self, conn: ConnId) -> bool {
        self.0.is_connection_authenticated(conn)
    }

    /// Counts `conn` as authenticated without the dialect's handshake: for a connection
    /// relayed from a cluster peer that authenticated its client itself (the peer is trusted
    /// through the cluster's own credentials). Unknown connections are ignored.
    pub fn authenticate_connection(&mut self, conn: ConnId) {
        self.0.authenticate_connection(conn)
    }

    /// Whether `conn` relays a session to another node.
    pub fn is_forwarded(&self, conn: ConnId) -> bool {
        self.0.is_forwarded(conn)
    }

    /// The sessions `conn` relays to their owners, in the order they were forwarded.
    pub fn forwarded_sessions(self, conn: ConnId) -> impl Iterator<Item = &'a str> + 'a {
        let host: &'a Host = self.0;
        host.forwarded_sessions(conn)
    }

    /// The requests that set a connection up as `conn` was set up, in order, for relaying
    /// `conn` to another node that must see the same set-up, each with the id
    /// [`RELAY_HANDSHAKE_ID`] (the relaying node keeps their answers from the client): for ACP,
    /// `initialize` with the client's params; for the Copilot SDK protocol, the
    /// connection-level registrations it made (`sessionFs.setProvider`,
    /// `llmInference.setProvider`). Empty when there are none.
    pub fn relay_handshake(&self, conn: ConnId) -> Vec<Vec<u8>> {
        self.0.relay_handshake(conn)
    }

    /// Makes `member`, a relayed connection, a member of the relay group connection `group`
    /// (see the module documentation): from now on every frame for `member` is queued on
    /// `group`, addressed to it, and an event for several members of `group` is queued there
    /// once. Call it before the member's first frame. Returns `false` (and changes nothing)
    /// when either connection is unknown or closing, they are the same, they speak different
    /// dialects, `group` uses NDJSON framing (a group frame's head ends with a newline),
    /// `member` is a group or already a member, or `group` is a member.
    pub fn join_relay_group(&mut self, member: ConnId, group: ConnId) -> bool {
        self.0.join_relay_group(member, group)
    }

    /// The link from the gateway of relay group member `member` broke: its group tells the
    /// gateway so (`@?` frame, with `reason`), so that the gateway may attach the client
    /// again; the member's end is not announced again when its connection then ends. Call it
    /// before closing the member's connection.
    pub fn relay_member_link_broke(&mut self, now: Timestamp, member: ConnId, reason: &str) {
        self.0.relay_member_link_broke(now, member, reason)
    }

    /// The runtime finished looking up `session` (after [`ClusterOutput::LoadSession`](crate::host::ClusterOutput::LoadSession)): it is
    /// restored, or it cannot be served here. The frames that waited for it are handled now,
    /// in order (a later frame naming another unknown session waits again).
    pub fn finish_session_lookup(&mut self, now: Timestamp, session: &str) {
        self.0.finish_session_lookup(now, session)
    }

    /// The runtime could not tell whether `session` can be served here (after
    /// [`ClusterOutput::LoadSession`](crate::host::ClusterOutput::LoadSession)): its log could
    /// not be read, or the session is in it and could not be claimed. The requests that
    /// waited for it are answered with an error naming `reason` (a `session.create` must not
    /// create a session the log may already hold); the frames that waited behind them and
    /// name other sessions are handled now, in order.
    pub fn fail_session_lookup(&mut self, now: Timestamp, session: &str, reason: &str) {
        self.0.fail_session_lookup(now, session, reason)
    }

    /// Sessions the runtime is looking up right now.
    pub fn pending_lookups(self) -> impl Iterator<Item = &'a str> + 'a {
        let host: &'a Host = self.0;
        host.pending_lookups()
    }

    /// Replaces the summaries of the sessions the runtime found in its shared log (a cluster
    /// node: sessions of other nodes, and sessions no node holds). Session lists show those
    /// that are not loaded here, after the loaded ones.
    pub fn set_cluster_sessions(&mut self, sessions: impl IntoIterator<Item = SessionSummary>) {
        self.0.set_cluster_sessions(sessions)
    }
}
