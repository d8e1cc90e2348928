//! What the host hands the runtime: frames to write ([`Host::poll_ready`],
//! [`Host::poll_transmit`]), actions ([`Output`], [`Host::poll_output`]) and the next
//! deadline ([`Host::poll_timeout`]), plus the host's queries.

use bytes::Bytes;

use crate::session::Event;
use crate::Timestamp;

use crate::host::{ConnId, Effect, Host};

/// An action the runtime must perform, grouped by concern.
///
/// A runtime's driver handles every variant, and every variant of the nested enums (match
/// them exhaustively, without a `_` arm): adding a variant is a breaking change of this
/// crate, so a driver that compiles handles everything the host can ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// About a connection, or the whole server.
    Connection(ConnectionOutput),
    /// For the runtime's session store (only with
    /// [`HostConfig::report_persisted_events`](crate::host::HostConfig::report_persisted_events)).
    Store(StoreOutput),
    /// For the runtime's shared session log (a cluster node).
    Cluster(ClusterOutput),
    /// Work the runtime performs and reports about with [`Host::handle_effect`] (see
    /// [`Effect`]).
    Effect(Effect),
}

/// About a connection, or the whole server ([`Output::Connection`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectionOutput {
    /// Write every frame still queued for `conn` (drain [`Host::poll_transmit`]), then close it.
    Close {
        /// The connection to close.
        conn: ConnId,
        /// Why (also sent to the peer as a JSON-RPC error object before the close).
        reason: String,
    },
    /// A client asked the server to stop (`runtime.shutdown`): stop accepting, flush every
    /// connection (bounded by a timeout), then exit.
    Shutdown {
        /// Why.
        reason: String,
    },
}

/// For the runtime's session store ([`Output::Store`], only when
/// [`HostConfig::report_persisted_events`](crate::host::HostConfig::report_persisted_events)
/// is set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreOutput {
    /// A persisted event to store durably: append `event` (one compact JSON object, no
    /// newline) as one line to the session's log. Outputs are produced before the frames
    /// carrying the same event can be taken, so a runtime that stores every `Persist` before
    /// writing the frames queued by the same input never shows a client an event it could
    /// lose.
    Persist {
        /// The session the event belongs to.
        session: String,
        /// The event as compact JSON (the same bytes clients receive inside `session.event`).
        event: Bytes,
    },
    /// A session was deleted (`session.delete`): remove its stored state.
    SessionDeleted {
        /// The deleted session.
        session: String,
    },
}

/// For the runtime's shared session log ([`Output::Cluster`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterOutput {
    /// A client named a session this host has not loaded (only with
    /// [`HostConfig::lookup_unknown_sessions`](crate::host::HostConfig::lookup_unknown_sessions)):
    /// look it up in the runtime's shared log (restore it with [`Host::restore_session`] if it
    /// can be served here), then call
    /// [`ClusterApi::finish_session_lookup`](crate::host::ClusterApi::finish_session_lookup)
    /// either way. Until then the frames of every connection that named it wait, in order.
    LoadSession {
        /// The session a client named.
        session: String,
    },
    /// Relay these frames (bodies, in order) of a client connection to the node that owns
    /// `session` (after
    /// [`ClusterApi::forward_session_lookup`](crate::host::ClusterApi::forward_session_lookup)):
    /// the first for a connection and session opens the relay, the later ones follow on it.
    /// Deliver the owner's frames with
    /// [`ClusterApi::deliver_forwarded`](crate::host::ClusterApi::deliver_forwarded), naming the
    /// same session.
    Forward {
        /// The client's connection on this node.
        conn: ConnId,
        /// The session whose owner the frames go to.
        session: String,
        /// Frame bodies, in order.
        frames: Vec<Bytes>,
    },
    /// A connection that relayed sessions ended: close its relays (tell the owner nodes).
    ForwardClosed {
        /// The client's connection on this node.
        conn: ConnId,
    },
}

/// Outputs and queries.
impl Host {
    /// The next connection with frames to write. Each connection is reported once per
    /// transition from empty to non-empty; drain it with [`Host::poll_transmit`].
    #[must_use]
    pub fn poll_ready(&mut self) -> Option<ConnId> {
        self.flush_extension_conns();
        while let Some(conn) = self.ready.pop_front() {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.in_ready = false;
                if !c.outbox.is_empty() {
                    return Some(conn);
                }
            }
        }
        None
    }

    /// The next frame to write to `conn`, in emit order.
    #[must_use]
    pub fn poll_transmit(&mut self, conn: ConnId) -> Option<Bytes> {
        self.conns.pop_frame(&conn)
    }

    /// The next action for the runtime.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.flush_extension_conns();
        self.outputs.pop_front()
    }

    /// The next deadline, if any: call [`Host::handle_timeout`] then.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.keys().next().map(|(t, _)| *t)
    }

    /// Number of open connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Number of loaded sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Bytes queued for `conn` and not yet taken by the runtime.
    pub fn queued_bytes(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn).map(|c| c.outbox.queued_bytes())
    }

    /// Responses that matched no pending request (late, duplicate or unknown): counted and
    /// dropped.
    pub fn unknown_responses(&self) -> u64 {
        self.unknown_responses
    }

    /// Persisted events of a session, in order (what `session.getMessages` returns).
    pub fn session_events(&self, session_id: &str) -> Option<&[Event]> {
        self.sessions.get(session_id).map(|l| l.session.events())
    }
}
