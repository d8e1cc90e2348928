//! Inputs: connections opening, bytes, end of input and deadlines.

use crate::agent::AgentInput;
use crate::frame::Framing;
use crate::jsonrpc::{self, ErrorObject};
use crate::Timestamp;

use crate::host::io::conn::Conn;
use crate::host::{ConnId, DialectId, Host, TimerTarget};

/// Inputs.
impl Host {
    /// Opens a connection speaking `dialect` over `framing`.
    pub(crate) fn open_conn(
        &mut self,
        now: Timestamp,
        dialect: DialectId,
        framing: Framing,
    ) -> ConnId {
        self.advance_time(now);
        let authenticated = self.config.connection_token.is_none();
        let state = self.dialects[dialect.index()].new_conn_state();
        self.conns.insert(Conn::new(
            dialect,
            state,
            framing,
            self.config.frame_limits,
            self.config.outbox_budget_bytes,
            authenticated,
        ))
    }

    /// Feeds bytes read from `conn`. Unknown or closing connections are ignored.
    pub fn handle_bytes(&mut self, now: Timestamp, conn: ConnId, bytes: &[u8]) {
        self.advance_time(now);
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.closing {
            return;
        }
        if let Err(e) = c.decoder.push(bytes) {
            self.fail_connection(conn, -32700, format!("framing error: {e}"));
            return;
        }
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if c.closing {
                return;
            }
            match c.decoder.next_frame() {
                Ok(Some(frame)) => self.admit_frame(conn, frame, None),
                Ok(None) => break,
                Err(e) => {
                    self.fail_connection(conn, -32700, format!("framing error: {e}"));
                    return;
                }
            }
            self.run_agents();
        }
        self.run_agents();
    }

    /// The peer is gone (EOF or I/O error): detach it everywhere and forget it. Its pending
    /// answers are resolved (tool calls it owned fail; permission prompts nobody else can
    /// answer are denied).
    pub fn handle_eof(&mut self, now: Timestamp, conn: ConnId) {
        self.advance_time(now);
        let Some(mut c) = self.conns.remove(&conn) else {
            return;
        };
        let (relay, forwarded) = self.relays.remove(conn);
        if !self.relay_conn_ended(conn, relay, forwarded) {
            return;
        }
        for (_, call) in c.calls.close_all() {
            self.finish_client_call(call, crate::correlation::Outcome::Closed);
        }
        self.kill_processes_of(conn);
        self.extension_owner_left(conn);
        if c.http_provider {
            self.http_provider_left(conn);
        }
        self.file_provider_left(conn);
        self.dialects[c.dialect.index()].conn_ended(self, conn, c.state.as_mut());
        for session in c.sessions {
            self.detach_conn(&session, conn);
        }
        self.run_agents();
    }

    /// Fires every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.advance_time(now);
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (key, target) = entry.remove_entry();
            match target {
                TimerTarget::Agent(session) => {
                    if let Some(live) = self.sessions.get_mut(&session) {
                        if live.timer == Some(key) {
                            live.timer = None;
                            self.agent_inputs.push_back((session, AgentInput::Timer));
                        }
                    }
                }
                TimerTarget::ClientCall(conn, id) => self.client_call_timed_out(conn, &id),
                TimerTarget::ModelsList(call) => self.models_list_timed_out(call),
                TimerTarget::GitHubIdentity(call) => self.identity_timed_out(call),
                TimerTarget::ToolShell(process) => self.tool_shell_timed_out(process),
                TimerTarget::Dialect(dialect, conn, id) => {
                    let handler = self.dialects[dialect.index()];
                    handler.timer_fired(self, conn, &id);
                }
                TimerTarget::Mcp(session, server) => self.mcp_timer_fired(&session, &server, key),
                TimerTarget::AcpAgent => self.acp_timer_fired(key),
                TimerTarget::Sampling(request_id) => self.sampling_timer_fired(&request_id, key),
            }
        }
        self.run_agents();
    }

    pub(crate) fn advance_time(&mut self, now: Timestamp) {
        // Time never goes backwards inside the host, whatever the runtime passes.
        if now > self.now {
            self.now = now;
        }
    }

    // ----- inbound -----

    pub(in crate::host) fn handle_frame(&mut self, conn: ConnId, frame: &[u8]) {
        if let Some(c) = self.conns.get(&conn).filter(|c| c.framing == Framing::Http) {
            let handler = self.dialects[c.dialect.index()];
            handler.handle_http_request(self, conn, frame);
            self.run_after_response();
            return;
        }
        match jsonrpc::parse(frame) {
            jsonrpc::Parsed::Single(Ok(message)) => self.handle_message(conn, message),
            jsonrpc::Parsed::Single(Err(rejection)) => {
                let mut body = Vec::new();
                jsonrpc::write_error(&mut body, rejection.id.as_ref(), &rejection.error);
                self.send_body(conn, &body);
            }
            jsonrpc::Parsed::Batch(_) => {
                // Batches are off for this dialect (its clients never batch): one -32600.
                let mut body = Vec::new();
                let error = ErrorObject::new(
                    jsonrpc::code::INVALID_REQUEST,
                    "batch requests are not supported",
                );
                jsonrpc::write_error(&mut body, None, &error);
                self.send_body(conn, &body);
            }
        }
    }

    fn handle_message(&mut self, conn: ConnId, message: jsonrpc::Message<'_>) {
        let Some(dialect) = self.conns.get(&conn).map(|c| c.dialect) else {
            return;
        };
        if self.runtime_stopping {
            if let jsonrpc::Message::Request { id, .. } = &message {
                // The runtime is stopping: a client's request is answered with an error rather
                // than lost with its connection. Relayed traffic (cluster links) is left to the
                // relay, whose gateway follows the session to its next owner.
                let plain = self.conns.get(&conn).is_some() && self.relays.is_plain(conn);
                if plain {
                    let id = id.to_owned();
                    if self.begin_request(conn, &id) {
                        let error = ErrorObject::new(-32000, "the server is shutting down");
                        self.respond(conn, &id, Err(error));
                    }
                    return;
                }
            }
        }
        let handler = self.dialects[dialect.index()];
        handler.handle_message(self, conn, message);
        self.run_after_response();
    }
}
