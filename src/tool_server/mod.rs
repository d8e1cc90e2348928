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

use sha2::{Digest, Sha256};

/// The name the client-tools server has in the agent's `session/new` (the agent names its
/// tools after it, e.g. `client-tools-get_weather` in the Copilot CLI).
pub const SERVER_NAME: &str = "client-tools";

/// Where the runtime serves the client-tools MCP server, and the key of its secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct ToolServerConfig {
    /// The server's base URL, e.g. `http://127.0.0.1:40123` (a loopback listener the runtime
    /// bound; sessions are served under `/mcp/{session}`).
    pub url: String,
    /// The key per-session secrets derive from: random, from the runtime (the core takes no
    /// OS randomness). Never sent anywhere.
    pub key: String,
}

impl std::fmt::Debug for ToolServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServerConfig")
            .field("url", &self.url)
            .field("key", &"<redacted>")
            .finish()
    }
}

impl crate::host::HostConfig {
    /// Sets [`HostConfig::tool_server`](crate::host::HostConfig::tool_server).
    pub fn with_tool_server(mut self, server: Option<ToolServerConfig>) -> Self {
        self.tool_server = server;
        self
    }
}

impl ToolServerConfig {
    /// The bearer secret of `session`'s server: hex of `SHA-256(key, 0, session)`.
    pub fn session_secret(&self, session: &str) -> String {
        let mut hash = Sha256::new();
        hash.update(self.key.as_bytes());
        hash.update([0u8]);
        hash.update(session.as_bytes());
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The ACP `McpServer` entry (`type: "http"`) that offers `session`'s client tools.
    pub fn acp_server_entry(&self, session: &str) -> serde_json::Value {
        serde_json::json!({
            "type": "http",
            "name": SERVER_NAME,
            "url": format!("{}/mcp/{}", self.url.trim_end_matches('/'), percent_encode(session)),
            "headers": [{"name": "Authorization",
                         "value": format!("Bearer {}", self.session_secret(session))}],
        })
    }
}

/// `text` with every byte outside RFC 3986's unreserved set percent-encoded (a path segment).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The inverse of [`percent_encode`]; `None` for a bad escape or bytes that are not UTF-8.
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
