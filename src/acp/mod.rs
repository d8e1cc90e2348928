//! The Agent Client Protocol (ACP) v1 dialect, mapped onto the same sessions.
//!
//! Not implemented yet: every request from an ACP connection is answered with
//! `-32601` and no `session/update` is sent. The host routes ACP connections here
//! ([`Dialect::Acp`](crate::host::Dialect::Acp)).

use crate::host::{ConnId, Host};
use crate::jsonrpc::{self, ErrorObject};
use crate::session::Event;

/// Per-connection state of the ACP dialect.
#[derive(Debug, Default)]
pub struct ConnState {}

impl Host {
    /// Handles one message from an ACP connection.
    pub(crate) fn acp_handle_message(&mut self, conn: ConnId, message: jsonrpc::Message<'_>) {
        if let jsonrpc::Message::Request { id, method, .. } = message {
            let mut body = Vec::new();
            let error = ErrorObject::new(
                jsonrpc::code::METHOD_NOT_FOUND,
                format!("Method not found: {method} (the ACP dialect is not implemented yet)"),
            );
            jsonrpc::write_error(&mut body, Some(&id.to_owned()), &error);
            self.send_body(conn, &body);
        }
    }

    /// Delivers a session event to the ACP connections attached to the session.
    pub(crate) fn acp_on_event(&mut self, _session: &str, _event: &Event, _conns: &[ConnId]) {}
}
