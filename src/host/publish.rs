//! Publishing session events from outside an agent.

use serde_json::Value;

use crate::Timestamp;

use super::Host;

impl Host {
    /// Emits a session event that does not come from the session's agent: the runtime itself
    /// announces something (a title change, a model switch, a notice from an external
    /// process), or an embedding application runs its own agent loop outside the
    /// [`Agent`](crate::agent::Agent) seam.
    ///
    /// The event gets the next id and `parentId` like any agent event, is encoded once and is
    /// queued on every connection attached to `session_id` (streaming deltas only on
    /// connections that asked for streaming). A persisted event (`ephemeral == false`) is
    /// appended to the session's log (replayed by `session.getMessages`) and followed by a
    /// `session.lifecycle` `session.updated` notification to every connection. Emitting
    /// `session.idle` or `session.error` answers pending `session.sendAndWait` callers, as it
    /// does when the agent emits it. The event does not count as a turn (no
    /// `session.shutdown` is written on the last detach because of it).
    ///
    /// `data` should be a JSON object (anything else is wrapped as `{"value": data}`).
    /// Returns the event id, or `None` when no session `session_id` is loaded. Drain
    /// [`Host::poll_ready`] / [`Host::poll_transmit`] afterwards, as after any input.
    pub fn emit_event(
        &mut self,
        now: Timestamp,
        session_id: &str,
        event_type: &str,
        data: &Value,
        ephemeral: bool,
    ) -> Option<String> {
        self.advance_time(now);
        let id = self.emit(session_id, event_type, data, ephemeral);
        self.run_agents();
        id
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::frame::{FrameDecoder, FrameLimits, Framing};
    use crate::host::{ConnId, Host, HostConfig};
    use crate::Timestamp;

    fn request(host: &mut Host, now: Timestamp, conn: ConnId, body: &Value) {
        let body = serde_json::to_vec(body).unwrap();
        let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        wire.extend_from_slice(&body);
        host.handle_bytes(now, conn, &wire);
    }

    /// Every message written to each connection since the last call, decoded.
    fn drain(host: &mut Host) -> Vec<(ConnId, Value)> {
        let mut out = Vec::new();
        while let Some(conn) = host.poll_ready() {
            let mut decoder = FrameDecoder::new(Framing::ContentLength, FrameLimits::default());
            while let Some(frame) = host.poll_transmit(conn) {
                decoder.push(&frame).unwrap();
            }
            while let Some(body) = decoder.next_frame().unwrap() {
                out.push((conn, serde_json::from_slice(&body).unwrap()));
            }
        }
        out
    }

    #[test]
    fn emit_event_fans_out_persists_and_announces() {
        let now = Timestamp::from_millis(1_795_983_976_952);
        let mut host = Host::new(HostConfig::default());
        let a = host.open(now, Framing::ContentLength);
        let b = host.open(now, Framing::ContentLength);
        let bystander = host.open(now, Framing::ContentLength);
        request(
            &mut host,
            now,
            a,
            &json!({"jsonrpc":"2.0","id":1,"method":"session.create","params":{"sessionId":"s1"}}),
        );
        request(
            &mut host,
            now,
            b,
            &json!({"jsonrpc":"2.0","id":1,"method":"session.resume",
                    "params":{"sessionId":"s1","disableResume":true}}),
        );
        drain(&mut host);
        let before = host.session_events("s1").unwrap().len();

        let later = Timestamp::from_millis(1_795_983_977_000);
        let id = host
            .emit_event(
                later,
                "s1",
                "session.title_changed",
                &json!({"title": "Weather"}),
                false,
            )
            .expect("the session is loaded");

        let events = host.session_events("s1").unwrap();
        assert_eq!(events.len(), before + 1);
        assert_eq!(events[before].id, id);
        let parent = events[before - 1].id.clone();
        let written = drain(&mut host);
        for conn in [a, b] {
            let event = written
                .iter()
                .find(|(c, m)| *c == conn && m["method"] == "session.event")
                .map(|(_, m)| &m["params"]["event"])
                .expect("attached connections get the event");
            assert_eq!(event["type"], "session.title_changed");
            assert_eq!(event["data"], json!({"title": "Weather"}));
            assert_eq!(event["id"], json!(id));
            assert_eq!(event["parentId"], json!(parent));
            assert_eq!(event["timestamp"], "2026-11-29T20:26:17.000Z");
        }
        // The bystander is not attached: only the lifecycle notification reaches it.
        let for_bystander: Vec<&Value> = written
            .iter()
            .filter(|(c, _)| *c == bystander)
            .map(|(_, m)| m)
            .collect();
        assert_eq!(for_bystander.len(), 1);
        assert_eq!(for_bystander[0]["method"], "session.lifecycle");
        assert_eq!(for_bystander[0]["params"]["type"], "session.updated");
        assert_eq!(for_bystander[0]["params"]["sessionId"], "s1");
        assert_eq!(written.len(), 5);

        // Ephemeral: delivered, not persisted, no lifecycle notification.
        host.emit_event(later, "s1", "session.info", &json!({"message": "hi"}), true)
            .unwrap();
        assert_eq!(host.session_events("s1").unwrap().len(), before + 1);
        let written = drain(&mut host);
        assert_eq!(written.len(), 2);
        assert!(written.iter().all(|(_, m)| m["method"] == "session.event"));

        // Unknown session: nothing happens.
        assert!(host
            .emit_event(later, "nope", "session.info", &json!({}), false)
            .is_none());
        assert!(drain(&mut host).is_empty());
    }
}
