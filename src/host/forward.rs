//! Connections handed over to another node (cluster gateways).
//!
//! When the runtime finds that a session a connection named is owned by another live node, it
//! calls [`Host::forward_session_lookup`]: from then on that connection's frames are not
//! handled here but handed to the runtime ([`Output::Forward`]), which relays them to the
//! owner; the owner's frames for the client come back with [`Host::deliver_forwarded`], and
//! the end of the client is [`Output::ForwardClosed`]. The owner serves the relayed frames as
//! an ordinary connection, so it keeps deciding who is asked, tool and command ownership and
//! first answers. Frames the host already answered stay answered.

use bytes::Bytes;

use crate::Timestamp;

use super::{ConnId, Host, Output};

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
    /// to: queued for the client like the host's own frames.
    pub fn deliver_forwarded(&mut self, now: Timestamp, conn: ConnId, body: &[u8]) {
        self.advance_time(now);
        if self.conns.get(&conn).is_some_and(|c| c.forwarded) {
            self.send_body(conn, body);
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
