//! The last message every connection receives when the server shuts down.

use agentwire::frame::encode_frame;
use agentwire::host::Dialect;
use agentwire::Framing;
use bytes::{Bytes, BytesMut};

/// The JSON-RPC notification every connection receives when the server shuts down, as the
/// last message before its stream ends: `{"jsonrpc":"2.0","method":"agentwire/shutdown",
/// "params":{"reason":"…"}}`. The reason is the one given to
/// [`Driver::shutdown`](crate::Driver::shutdown) (for example `runtime.shutdown requested by a
/// client` or `received SIGTERM`). ACP connections receive it as the extension notification
/// `_agentwire/shutdown` (ACP reserves names starting with `_` for extensions).
pub const SHUTDOWN_NOTIFICATION: &str = "agentwire/shutdown";

/// The framed [`SHUTDOWN_NOTIFICATION`] for a connection speaking `dialect` over `framing`;
/// `None` for the client-tools server's HTTP connections (an HTTP client reads only the
/// answers to its requests: they just close).
pub(crate) fn farewell(dialect: Dialect, framing: Framing, reason: &str) -> Option<Bytes> {
    let method = match dialect {
        Dialect::Acp => "_agentwire/shutdown",
        Dialect::CopilotSdk | Dialect::Ahp => SHUTDOWN_NOTIFICATION,
        Dialect::ClientTools => return None,
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "method": method,
        "params": {"reason": reason},
    });
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let mut buf = BytesMut::with_capacity(body.len() + 32);
    encode_frame(framing, &body, &mut buf);
    Some(buf.freeze())
}
