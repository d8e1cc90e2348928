//! The session's client tools as an MCP server, for the ACP agent that runs the session.
//!
//! A Copilot SDK app declares its own tools (`tools` of `session.create`); agentwire's model
//! loop calls them with `external_tool.requested`. An ACP agent behind the session
//! (`--acp-agent`) has its own model loop and knows nothing of them, so agentwire offers them
//! to it as an MCP server over Streamable HTTP on loopback: `session/new` names the server
//! (`client-tools`, URL `{url}/mcp/{session}`, header `Authorization: Bearer {secret}`), the
//! agent lists and calls the tools, and a call becomes `external_tool.requested` to the
//! session's client that provides the tool; its answer is the call's result.
//!
//! * [`ToolServerConfig`] says where the runtime listens and holds the key the per-session
//!   secrets derive from (`SHA-256(key, session id)`: a secret names one session; the key
//!   never leaves the process).
//! * The HTTP connections speak [`Dialect::ClientTools`](crate::Dialect::ClientTools) over
//!   [`Framing::Http`](crate::Framing::Http): the runtime accepts them on the loopback
//!   listener it bound for [`ToolServerConfig::url`], and the host answers each request.
//!   `POST /mcp/{session}` only: `initialize`, `ping`, `tools/list`, `tools/call`; the
//!   client's notifications are accepted (`202`). No `Mcp-Session-Id` (the server keeps no
//!   state between requests but the session's tools), no server-sent events (`GET` is `405`).
//!   A wrong or missing secret is `401`, an unknown session `404`; requests pipelined on one
//!   connection are answered in order.

mod protocol;
mod serve;

pub(crate) use serve::ClientTools;

pub use crate::host::{ToolServerConfig, CLIENT_TOOLS_SERVER as SERVER_NAME};

/// The inverse of the path encoding of [`ToolServerConfig::acp_server_entry`]; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests;
