//! The crate's dialects and the host built with them.
//!
//! [`Host`] is the neutral core (see [`host`](crate::host)); this module registers the
//! dialects this crate ships in its dialect table — the Copilot SDK protocol
//! ([`copilot`](crate::copilot)), ACP ([`acp`](crate::acp)), AHP ([`ahp`](crate::ahp)) and the
//! client-tools server — and adds the ways to open a
//! connection speaking one of them. A new dialect (an MCP client role, cluster peers) is a
//! new [`Dialect`] variant and a new table entry; the host's fan-out does not change.

use crate::frame::Framing;
use crate::host::{ConnId, DialectHandler, DialectId, Host, HostConfig};
use crate::Timestamp;

/// The protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// The Copilot SDK protocol v3 (`session.event` notifications, `session.*` methods).
    CopilotSdk,
    /// The Agent Client Protocol v1 (`session/update` notifications, `session/*` methods).
    Acp,
    /// The client-tools MCP server an ACP agent calls (Streamable HTTP requests,
    /// [`Framing::Http`]; see [`crate::tool_server`]).
    ClientTools,
    /// The Agent Host Protocol 1.0 (`action` envelopes on subscribed channels), one JSON-RPC
    /// message per WebSocket text frame. The runtime re-frames each frame's message with a
    /// `Content-Length` header, so a message may hold newlines.
    Ahp,
}

impl Dialect {
    /// The framing the dialect's clients use: Content-Length for the Copilot SDKs, NDJSON
    /// for ACP, HTTP for the client-tools server, Content-Length for AHP (each WebSocket
    /// message, re-framed by the runtime).
    pub fn default_framing(self) -> Framing {
        match self {
            Dialect::CopilotSdk | Dialect::Ahp => Framing::ContentLength,
            Dialect::Acp => Framing::Ndjson,
            Dialect::ClientTools => Framing::Http,
        }
    }

    /// The dialect's entry in [`DIALECTS`].
    pub(crate) fn id(self) -> DialectId {
        match self {
            Dialect::CopilotSdk => crate::copilot::ID,
            Dialect::Acp => crate::acp::ID,
            Dialect::ClientTools => CLIENT_TOOLS_ID,
            Dialect::Ahp => crate::ahp::ID,
        }
    }
}

/// The dialect table of every [`Host`] built by [`Host::new`], indexed by [`DialectId`].
static DIALECTS: [&dyn DialectHandler; 4] = [
    &crate::copilot::Copilot,
    &crate::acp::Acp,
    &crate::tool_server::ClientTools,
    &crate::ahp::Ahp,
];

/// The client-tools server's entry in [`DIALECTS`].
const CLIENT_TOOLS_ID: DialectId = DialectId(2);

impl Host {
    /// A host with no connections and no sessions, speaking the Copilot SDK protocol, ACP and AHP (and serving the client-tools server).
    pub fn new(config: HostConfig) -> Self {
        Host::with_dialects(config, &DIALECTS)
    }

    /// Opens a Copilot SDK connection that uses `framing` (Content-Length for the SDKs).
    /// The same as `open_with(now, Dialect::CopilotSdk, framing)`.
    pub fn open(&mut self, now: Timestamp, framing: Framing) -> ConnId {
        self.open_with(now, Dialect::CopilotSdk, framing)
    }

    /// Opens a connection speaking `dialect` with its usual framing
    /// ([`Dialect::default_framing`]). The same as
    /// `open_with(now, dialect, dialect.default_framing())`.
    pub fn open_dialect(&mut self, now: Timestamp, dialect: Dialect) -> ConnId {
        self.open_with(now, dialect, dialect.default_framing())
    }

    /// Opens a connection speaking `dialect` over `framing`: the one way to open a
    /// connection ([`Host::open`] and [`Host::open_dialect`] are shorthands for it).
    pub fn open_with(&mut self, now: Timestamp, dialect: Dialect, framing: Framing) -> ConnId {
        self.open_conn(now, dialect.id(), framing)
    }

    /// The dialect `conn` speaks (`None` for an unknown connection).
    pub fn connection_dialect(&self, conn: ConnId) -> Option<Dialect> {
        let id = self.conn_dialect(conn)?;
        [
            Dialect::CopilotSdk,
            Dialect::Acp,
            Dialect::ClientTools,
            Dialect::Ahp,
        ]
        .into_iter()
        .find(|d| d.id() == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dialect_has_its_own_table_entry() {
        let all = [
            Dialect::CopilotSdk,
            Dialect::Acp,
            Dialect::ClientTools,
            Dialect::Ahp,
        ];
        for (i, dialect) in all.into_iter().enumerate() {
            assert!(dialect.id().index() < DIALECTS.len());
            for other in &all[..i] {
                assert_ne!(dialect.id(), other.id());
            }
        }
    }
}
