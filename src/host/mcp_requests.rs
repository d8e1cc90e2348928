//! What MCP servers ask of the host: `sampling/createMessage` and `elicitation/create`.

use serde_json::Value;

use crate::jsonrpc::OwnedId;

use super::Host;

impl Host {
    /// A server's request that only the session's clients (or its model) can answer.
    pub(crate) fn mcp_server_request(
        &mut self,
        session: &str,
        server: &str,
        id: OwnedId,
        method: &str,
        _params: Value,
    ) {
        if let Some(state) = self.mcp_server(session, server) {
            state
                .client
                .respond_error(&id, -32601, &format!("{method} is not supported yet"));
        }
        self.flush_mcp(session, server);
    }
}
