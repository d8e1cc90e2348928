//! Outbound frames: responses, framed bodies, the outbox budget, closing a connection.

use bytes::{Bytes, BytesMut};
use serde_json::Value;

use crate::frame::{encode_frame, encoded_len, Framing};
use crate::jsonrpc::{self, ErrorObject, OwnedId};

use crate::host::{AfterResponse, ConnId, ConnectionOutput, Drops, Host, OutboxOverflow, Output};

/// Sending.
impl Host {
    /// Sends the response to request `id` on `conn` (exactly once).
    pub(crate) fn respond(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        result: Result<Value, ErrorObject>,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !c.in_flight.finish(id) {
            return;
        }
        let mut body = Vec::with_capacity(128);
        match result {
            Ok(value) => {
                if let Err(e) = jsonrpc::write_result_value(&mut body, id, &value) {
                    body.clear();
                    let error = ErrorObject::internal(format!("result not serialisable: {e}"));
                    jsonrpc::write_error(&mut body, Some(id), &error);
                }
            }
            Err(error) => jsonrpc::write_error(&mut body, Some(id), &error),
        }
        self.send_body(conn, &body);
    }

    pub(crate) fn run_after_response(&mut self) {
        let work = std::mem::take(&mut self.after_response);
        for item in work {
            match item {
                AfterResponse::Emit {
                    session,
                    event_type,
                    data,
                    ephemeral,
                } => {
                    self.emit(&session, event_type, &data, ephemeral);
                }
                AfterResponse::EmitTo {
                    session,
                    event_type,
                    data,
                    only,
                } => {
                    self.emit_to(&session, event_type, &data, true, Some(only));
                }
                AfterResponse::SessionChanged { change, session } => {
                    self.session_changed(change, &session)
                }
                AfterResponse::ExtensionAccess { session, extension } => {
                    self.request_extension_access(&session, &extension)
                }
                AfterResponse::StartExtensions {
                    session,
                    owner,
                    sdk_path,
                } => self.start_extensions(&session, owner, sdk_path),
                AfterResponse::StartMcp { session, configs } => {
                    self.start_mcp_servers(&session, configs)
                }
                AfterResponse::Shutdown { reason } => {
                    self.stop_all_mcp_servers("the server is shutting down");
                    self.outputs
                        .push_back(Output::Connection(ConnectionOutput::Shutdown { reason }))
                }
            }
        }
    }

    /// Frames `body` for `conn` and queues it (durable).
    pub(crate) fn send_body(&mut self, conn: ConnId, body: &[u8]) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        if let Some(group) = self.relays.group_of(conn) {
            if !c.closing {
                self.queue_for_members(group, &[conn], body);
            }
            return;
        }
        self.deliver(conn, frame_body(c.framing, body), false);
    }

    /// Queues an encoded frame on `conn`, closing the connection if it cannot keep up.
    pub(crate) fn deliver(&mut self, conn: ConnId, frame: Bytes, droppable: bool) {
        if !self.try_deliver(conn, frame, droppable) {
            self.fail_slow_consumer(conn);
        }
    }

    /// Queues an encoded frame on `conn`; `false` when its outbox cannot take a durable frame
    /// (the caller closes it with [`Host::fail_slow_consumer`], after a fan-out so that the
    /// departure's own messages do not overtake the frame the other receivers still get).
    pub(crate) fn try_deliver(&mut self, conn: ConnId, frame: Bytes, droppable: bool) -> bool {
        let Some((c, shared)) = self.conns.get_mut_and_frames(&conn) else {
            return true;
        };
        if c.closing {
            return true;
        }
        if let Some(group) = self.relays.group_of(conn) {
            self.queue_member_frame(group, conn, &frame);
            return true;
        }
        match c.outbox.push(frame, droppable, shared) {
            Ok(became_ready) => {
                if became_ready && !c.in_ready {
                    c.in_ready = true;
                    self.ready.push_back(conn);
                }
                true
            }
            Err(OutboxOverflow::DurableDoesNotFit) => false,
        }
    }

    /// Closes a connection whose outbox cannot take a durable frame: it is told why first.
    pub(crate) fn fail_slow_consumer(&mut self, conn: ConnId) {
        let budget = self.config.outbox_budget_bytes;
        let advice = self.conns.get(&conn).map_or("reconnect to catch up", |c| {
            self.dialects[c.dialect.index()].slow_reader_advice()
        });
        self.fail_connection(
            conn,
            -32000,
            format!("connection closed: the client is not reading fast enough (outbox budget of {budget} bytes exceeded); {advice}"),
        );
    }

    /// Sends a JSON-RPC error object with `id: null` carrying `reason`, then asks the runtime
    /// to close the connection after flushing it. Used for framing errors and slow consumers.
    pub(crate) fn fail_connection(&mut self, conn: ConnId, code: i64, reason: String) {
        self.close_with_reason(conn, code, reason, code == -32700);
    }

    /// [`Host::fail_connection`]; `keep_queued`: what is queued is still written before the
    /// reason (a framing error, a relayed connection ended after its last answers), otherwise
    /// the queue is replaced by the reason (a slow consumer).
    pub(crate) fn close_with_reason(
        &mut self,
        conn: ConnId,
        code: i64,
        reason: String,
        keep_queued: bool,
    ) {
        let Some((c, shared)) = self.conns.get_mut_and_frames(&conn) else {
            return;
        };
        if c.closing {
            return;
        }
        // A slow consumer's queue is over budget: it is replaced by the reason. After a
        // framing error, what was already answered is still written, then the reason.
        // Streaming events it lost, reported or not yet, are counted in the reason's `data`.
        let lost = c.outbox.take_unreported_drops().count
            + if keep_queued {
                0
            } else {
                c.outbox.queued_droppable()
            };
        c.drop_session = None;
        if !keep_queued {
            c.outbox.clear(shared);
        }
        let mut error = ErrorObject::new(code, reason.clone());
        if lost > 0 {
            let data = serde_json::json!({
                "warningType": "events_dropped",
                "droppedCount": lost,
            });
            if let Ok(with_data) = error.clone().with_data_value(&data) {
                error = with_data;
            }
        }
        let mut body = Vec::new();
        let role = self.relays.role(conn);
        if role.is_group() {
            // Not a message for any one client: the gateway learns the group ended, and why.
            body.extend_from_slice(b"@?\n");
            body.extend_from_slice(reason.as_bytes());
        } else {
            jsonrpc::write_error(&mut body, None, &error);
        }
        if role.is_member() {
            // Its reason and its end travel in its group's stream, in order.
            self.relays.set_role(conn, Default::default());
        } else {
            // Bypass the budget: the reason is the last frame this peer gets.
            c.outbox.push_final(frame_body(c.framing, &body));
        }
        c.closing = true;
        if !c.in_ready {
            c.in_ready = true;
            self.ready.push_back(conn);
        }
        let calls = c.calls.close_all();
        let sessions = std::mem::take(&mut c.sessions);
        self.relay_conn_closing(conn, role, &body, &reason);
        self.outputs
            .push_back(Output::Connection(ConnectionOutput::Close { conn, reason }));
        for (_, call) in calls {
            self.finish_client_call(call, crate::correlation::Outcome::Closed);
        }
        for session in sessions {
            self.detach_conn(&session, conn);
        }
    }

    /// Sends a lagging connection a `session.warning` (`warningType: "events_dropped"`)
    /// saying how many streaming events it lost; durable events are never dropped.
    pub(in crate::host) fn report_drops(&mut self, conn: ConnId, session: &str, dropped: Drops) {
        if dropped.count == 0 {
            return;
        }
        self.emit_to(
            session,
            "session.warning",
            &drops_warning_data(dropped),
            true,
            Some(conn),
        );
    }
}

/// `body` framed into one buffer of the exact size (so it becomes a [`Bytes`] without a
/// second allocation).
pub(in crate::host) fn frame_body(framing: Framing, body: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(encoded_len(framing, body.len()));
    encode_frame(framing, body, &mut buf);
    buf.freeze()
}

/// The `data` of the `session.warning` that reports `dropped` lost streaming events (sent by
/// [`Host::report_drops`], and by a gateway for a forwarded connection), naming why they
/// were lost: the reader fell behind, or (a cluster gateway's client) the link to the
/// session's owner node broke.
pub(in crate::host) fn drops_warning_data(dropped: Drops) -> Value {
    let Drops {
        count,
        lost_upstream,
    } = dropped;
    const SLOW: &str = "because this client was not reading fast enough";
    const LINK: &str = "with the broken link to the node owning the session";
    const COMPLETE: &str = "durable events are complete (session.getMessages)";
    let message = match lost_upstream {
        0 => format!("{count} streaming events were dropped {SLOW}; {COMPLETE}"),
        n if n >= count => format!("{count} streaming events were dropped {LINK}; {COMPLETE}"),
        n => format!(
            "{count} streaming events were dropped ({n} {LINK}, the others {SLOW}); {COMPLETE}"
        ),
    };
    serde_json::json!({
        "warningType": "events_dropped",
        "message": message,
        "droppedCount": count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(count: u64, lost_upstream: u64) -> String {
        let data = drops_warning_data(Drops {
            count,
            lost_upstream,
        });
        assert_eq!(data["droppedCount"], count);
        data["message"].as_str().unwrap_or_default().to_owned()
    }

    #[test]
    fn the_drops_warning_names_why_the_events_were_lost() {
        assert_eq!(
            message(3, 0),
            "3 streaming events were dropped because this client was not reading fast enough; \
             durable events are complete (session.getMessages)"
        );
        assert_eq!(
            message(3, 3),
            "3 streaming events were dropped with the broken link to the node owning the \
             session; durable events are complete (session.getMessages)"
        );
        assert_eq!(
            message(5, 2),
            "5 streaming events were dropped (2 with the broken link to the node owning the \
             session, the others because this client was not reading fast enough); durable \
             events are complete (session.getMessages)"
        );
    }
}
