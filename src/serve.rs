//! Plain data shared by the runtimes that serve a [`Host`](crate::host::Host): how they serve
//! it and why a serve call returned. No I/O here; each runtime re-exports these types.

use std::time::Duration;

use crate::frame::Framing;
use crate::Dialect;

/// How a runtime serves a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// How messages are framed on every connection of this server.
    /// Default: [`Framing::ContentLength`] (the Copilot SDK protocol).
    pub framing: Framing,
    /// The protocol every connection of this server speaks. Default:
    /// [`Dialect::CopilotSdk`]; [`Dialect::Acp`] goes with [`Framing::Ndjson`].
    pub dialect: Dialect,
    /// The longest a closing connection may take to flush its remaining frames (after the host
    /// asked to close it, after the peer closed its side, or during shutdown) before it is
    /// dropped. Default: 5 seconds.
    pub flush_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            framing: Framing::ContentLength,
            dialect: Dialect::CopilotSdk,
            flush_timeout: Duration::from_secs(5),
        }
    }
}

/// Why a runtime's `serve_*` call returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The host asked to shut down (`ConnectionOutput::Shutdown`, e.g. the `runtime.shutdown`
    /// method) or the runtime's `shutdown` was called. Every connection has been flushed (within
    /// the flush timeout) and closed.
    Shutdown {
        /// The reason the host (or the caller of `shutdown`) gave.
        reason: String,
    },
    /// The one connection served by `serve_stream` / `serve_stdio` ended (end of input, an IO
    /// error, or the host closed it).
    Disconnected,
}
