//! Client tools served to an ACP agent: the host's side of the client-tools MCP server
//! ([`crate::tool_server`]). A `tools/call` becomes `external_tool.requested` to the
//! session's client that provides the tool ([`ToolCaller::Served`]); its result, a failure,
//! or the turn's abort answers the call's HTTP request.

use serde_json::{json, Value};

use crate::agent::ToolOutcome;
use crate::jsonrpc::{self, OwnedId};

use crate::host::pending::ToolCaller;
use crate::host::{ConnId, Host};

impl Host {
    /// The session's client tools, once per name (`None` for an unknown session).
    pub(crate) fn served_tools(&self, session: &str) -> Option<Vec<&crate::session::ToolDecl>> {
        Some(self.sessions.get(session)?.session.client_tools())
    }

    /// `tools/call` request `id` of client-tools connection `conn`: the session's client that
    /// provides `name` runs it (`external_tool.requested`), and its result answers `id`.
    pub(crate) fn serve_tool_call(
        &mut self,
        session: &str,
        conn: ConnId,
        id: OwnedId,
        name: &str,
        arguments: &Value,
    ) {
        let tool_call_id = self.ids.next_uuid();
        self.request_external_tool_for(
            session,
            &tool_call_id,
            name,
            arguments,
            ToolCaller::Served { conn, id },
        );
    }

    /// Answers a served `tools/call` with `outcome` (a `CallToolResult`: the text as one text
    /// block, `isError` when the tool failed), then lets the connection's dialect go on with
    /// the requests that arrived behind it.
    pub(in crate::host) fn answer_served_tool_call(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        outcome: &ToolOutcome,
    ) {
        let result = match outcome {
            ToolOutcome::Success(text) => {
                json!({"content": [{"type": "text", "text": text}], "isError": false})
            }
            ToolOutcome::Failure { message, .. } => {
                json!({"content": [{"type": "text", "text": message}], "isError": true})
            }
        };
        let mut body = Vec::new();
        // A `Value` always serializes.
        let _ = jsonrpc::write_result_value(&mut body, id, &result);
        self.send_body(conn, &body);
        if let Some(dialect) = self.conns.get(&conn).map(|c| c.dialect) {
            self.dialects[dialect.index()].deferred_ready(self, conn);
        }
    }
}
