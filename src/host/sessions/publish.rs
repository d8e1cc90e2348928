//! Publishing session events from outside an agent.

use serde_json::Value;
use smallvec::SmallVec;

use crate::Timestamp;

use bytes::{Bytes, BytesMut};

use crate::frame::{encode_frame, Framing};

use crate::session::Event;

use crate::host::cluster::relay_group::{addressed_head, group_frame};
use crate::host::io::outbox::{SharedFrame, SharedFrames};
use crate::host::sessions::audience::Audience;
use crate::host::{ConnId, DialectHandler, DialectId, Drops, Host, OutboxOverflow};

/// A body framed at most once per framing and stored in the shared-frame table, queued by
/// reference on every connection that receives it.
struct Published {
    body: Vec<u8>,
    /// The body encoded in each framing used, by [`Framing::index`].
    framed: [Option<SharedFrame>; Framing::ALL.len()],
}

/// Frames `body` once and stores it in the shared-frame table (the first receiver of a
/// framing pays this; kept out of line so the per-connection path stays small).
#[cold]
#[inline(never)]
fn encode_shared(framing: Framing, body: &[u8], shared: &mut SharedFrames) -> SharedFrame {
    let mut buf = BytesMut::with_capacity(body.len() + 32);
    encode_frame(framing, body, &mut buf);
    shared.insert(buf.freeze())
}

impl Published {
    fn new(body: Vec<u8>) -> Self {
        Published {
            body,
            framed: [None; Framing::ALL.len()],
        }
    }

    #[inline]
    fn get(&mut self, framing: Framing, shared: &mut SharedFrames) -> SharedFrame {
        let cell = &mut self.framed[framing.index()];
        match cell {
            Some(frame) => *frame,
            None => *cell.insert(encode_shared(framing, &self.body, shared)),
        }
    }

    /// Frees the encodings no connection took.
    fn settle(self, shared: &mut SharedFrames) {
        for frame in self.framed.into_iter().flatten() {
            shared.settle(frame);
        }
    }
}

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

/// What one dialect's connections get for the event being published.
enum DialectFrames {
    /// No connection of the dialect was reached yet.
    Unasked,
    /// The dialect's body, shared by all its receiving connections.
    Shared(Published),
    /// The dialect translates per connection: the receiving connections.
    PerConn(SmallVec<[ConnId; 4]>),
}

impl Host {
    /// Queues `event` on every connection attached to `session_id` that the event's audience
    /// admits (only `only` when set): each dialect encodes it once
    /// ([`DialectHandler::event_body`](crate::host::DialectHandler::event_body)), framed once per
    /// framing and shared by reference; dialects that translate per connection get their
    /// receiving connections afterwards. `None` when the session is not loaded.
    ///
    /// Per receiving connection this is a slab lookup, a counter increment in the
    /// shared-frame table (no allocation, no atomic), an outbox push (one add and one compare
    /// while within budget) and, on the queue's empty → non-empty transition, one push on the
    /// ready queue. Slow consumers are closed and drop reports sent after the loop.
    pub(in crate::host) fn deliver_event(
        &mut self,
        session_id: &str,
        event: &Event,
        droppable: bool,
        only: Option<ConnId>,
        from_sub_agent: bool,
    ) -> Option<()> {
        // The audience is decided here, at publish time, once per event.
        let audience = Audience::of(&event.event_type).with_sub_agent(from_sub_agent);
        let everyone = audience.is_everyone();
        let dialects: &'static [&'static dyn DialectHandler] = self.dialects;
        let Host {
            sessions,
            conns,
            ready,
            relays,
            ..
        } = self;
        let live = sessions.get(session_id)?;
        let mut per_dialect: SmallVec<[DialectFrames; 2]> =
            dialects.iter().map(|_| DialectFrames::Unasked).collect();
        let mut overflowed: SmallVec<[ConnId; 2]> = SmallVec::new();
        let mut caught_up: SmallVec<[(ConnId, String, Drops); 2]> = SmallVec::new();
        // Relay group members reached: (group, member, dialect index).
        let mut relayed: SmallVec<[(ConnId, ConnId, usize); 4]> = SmallVec::new();
        for (conn, attachment) in &live.session.attached {
            if only.is_some_and(|o| o != *conn)
                || !(everyone || audience.admits(attachment, &live.approved_extensions))
            {
                continue;
            }
            let Some((c, shared)) = conns.get_mut_and_frames(conn) else {
                continue;
            };
            let slot = &mut per_dialect[c.dialect.index()];
            if let DialectFrames::Unasked = slot {
                *slot = ask_dialect(dialects[c.dialect.index()], session_id, event);
            }
            let frames = match slot {
                DialectFrames::Shared(frames) => frames,
                DialectFrames::PerConn(targets) => {
                    targets.push(*conn);
                    continue;
                }
                DialectFrames::Unasked => continue,
            };
            if c.closing {
                continue;
            }
            if let Some(group) = relays.group_of(*conn) {
                // Queued once per group, after the loop.
                relayed.push((group, *conn, c.dialect.index()));
                continue;
            }
            let frame = frames.get(c.framing, shared);
            match c.outbox.push_shared(frame, droppable, shared) {
                Ok(became_ready) => {
                    if became_ready && !c.in_ready {
                        c.in_ready = true;
                        ready.push_back(*conn);
                    }
                    // The reader caught up (its queue was empty) after losing streaming
                    // events: tell it how many, once.
                    if became_ready && !droppable {
                        if let Some(session) = c.drop_session.take() {
                            caught_up.push((*conn, session, c.outbox.take_unreported_drops()));
                        }
                    }
                }
                Err(OutboxOverflow::DurableDoesNotFit) => overflowed.push(*conn),
            }
            if droppable && c.drop_session.is_none() && c.outbox.unreported_drops() > 0 {
                // Remember where to report the loss once the reader catches up.
                c.drop_session = Some(session_id.to_owned());
            }
        }
        // One frame per relay group, naming its members that receive the event.
        let mut group_frames: SmallVec<[(ConnId, Bytes); 1]> = SmallVec::new();
        if !relayed.is_empty() {
            relayed.sort_by_key(|(group, member, _)| (*group, *member));
            for run in relayed.chunk_by(|a, b| a.0 == b.0) {
                let (group, _, dialect) = run[0];
                let DialectFrames::Shared(frames) = &per_dialect[dialect] else {
                    continue;
                };
                let members: SmallVec<[ConnId; 8]> = run.iter().map(|r| r.1).collect();
                let Some(framing) = conns.get(&group).map(|g| g.framing) else {
                    continue;
                };
                let head = addressed_head(&members);
                group_frames.push((group, group_frame(framing, &head, &frames.body)));
            }
        }
        let mut per_conn: SmallVec<[(usize, SmallVec<[ConnId; 4]>); 1]> = SmallVec::new();
        for (index, frames) in per_dialect.into_iter().enumerate() {
            match frames {
                DialectFrames::Shared(frames) => frames.settle(conns.frames_mut()),
                DialectFrames::PerConn(targets) => per_conn.push((index, targets)),
                DialectFrames::Unasked => {}
            }
        }
        for (group, frame) in group_frames {
            self.push_on_group(group, frame);
        }
        for conn in overflowed {
            self.fail_slow_consumer(conn);
        }
        for (conn, session, dropped) in caught_up {
            self.report_drops(conn, &session, dropped);
        }
        for (index, targets) in per_conn {
            self.dialects[index].deliver_event(self, session_id, event, &targets);
        }
        Some(())
    }

    /// Sends every connection attached to `session_id` that lost streaming events a drop
    /// report now, before an event with `data` is recorded and queued (recorded after the
    /// report, so the report's `parentId` is an event the reader already has). Room for the
    /// report and the event is made first (dropping older streaming frames, which the same
    /// report then counts), so the count is exact: nothing is dropped between the report and
    /// the event.
    pub(in crate::host) fn report_lagging_readers(
        &mut self,
        session_id: &str,
        data: &serde_json::Value,
    ) {
        // Framing, envelope and the report itself: generous, so neither push drops.
        const REPORT_ROOM: usize = 1024;
        // The event's envelope around `data` (id, timestamp, parentId, type, session.event).
        const ENVELOPE_ROOM: usize = 512;
        let mut event_len = None;
        let Some(live) = self.sessions.get(session_id) else {
            return;
        };
        let mut lagging: SmallVec<[(ConnId, Drops); 2]> = SmallVec::new();
        for conn in live.session.attached.keys() {
            let Some((c, shared)) = self.conns.get_mut_and_frames(conn) else {
                continue;
            };
            // Drops are remembered per session when a streaming frame is refused; drops made
            // to fit a response (no session) are reported in the session at hand.
            let other_session = c.drop_session.as_deref().is_some_and(|s| s != session_id);
            let unreported = c.outbox.unreported_drops();
            // An empty queue has nothing to drop: the fan-out fast path stops here.
            if c.closing || other_session || (unreported == 0 && c.outbox.queued_bytes() == 0) {
                continue;
            }
            // Measured only when some reader has a backlog, once per event.
            let len = *event_len.get_or_insert_with(|| encoded_len(data) + ENVELOPE_ROOM);
            // A reader with nothing unreported is told only if making room for this event
            // drops something (otherwise that drop would be reported after the event, which
            // may be its `session.idle`).
            if unreported == 0 && c.outbox.fits(len + REPORT_ROOM) {
                continue;
            }
            c.outbox.make_room(len + REPORT_ROOM, shared);
            let dropped = c.outbox.take_unreported_drops();
            if dropped.count == 0 {
                continue;
            }
            c.drop_session = None;
            lagging.push((*conn, dropped));
        }
        for (conn, dropped) in lagging {
            self.report_drops(conn, session_id, dropped);
        }
    }

    /// Moves the frames queued for `conn` into `out`, in emit order, until at least
    /// `max_bytes` bytes were taken or nothing is left (a frame larger than `max_bytes` is
    /// still taken whole). Returns the bytes taken (0: nothing queued, or `conn` unknown).
    ///
    /// The same frames as calling [`Host::poll_transmit`] until it returns `None` or the
    /// running total reaches `max_bytes`, with one connection lookup for the whole batch: a
    /// runtime that writes several frames per system call (vectored writes) uses this.
    pub fn poll_transmit_batch(
        &mut self,
        conn: ConnId,
        max_bytes: usize,
        out: &mut Vec<Bytes>,
    ) -> usize {
        match self.conns.get_mut_and_frames(&conn) {
            Some((c, shared)) => c.outbox.pop_into(max_bytes, out, shared),
            None => 0,
        }
    }

    /// Queues the durable notification `body` on every open connection of `dialect` (e.g.
    /// the Copilot SDK dialect's `session.lifecycle`), encoded once per framing and shared by
    /// reference.
    pub(crate) fn broadcast(&mut self, dialect: DialectId, body: Vec<u8>) {
        let mut frames = Published::new(body);
        let Host {
            conns,
            ready,
            relays,
            ..
        } = self;
        let mut overflowed: SmallVec<[ConnId; 2]> = SmallVec::new();
        let (all, shared) = conns.iter_mut_and_frames();
        for (conn, c) in all {
            // A relay group member gets it through its group (for all its members).
            if c.closing || c.dialect != dialect || relays.group_of(conn).is_some() {
                continue;
            }
            let frame = frames.get(c.framing, shared);
            match c.outbox.push_shared(frame, false, shared) {
                Ok(became_ready) => {
                    if became_ready && !c.in_ready {
                        c.in_ready = true;
                        ready.push_back(conn);
                    }
                }
                Err(OutboxOverflow::DurableDoesNotFit) => overflowed.push(conn),
            }
        }
        frames.settle(shared);
        for conn in overflowed {
            self.fail_slow_consumer(conn);
        }
    }
}

/// What `handler` does with an event: one shared body, or per-connection translation.
#[cold]
#[inline(never)]
fn ask_dialect(handler: &dyn DialectHandler, session: &str, event: &Event) -> DialectFrames {
    match handler.event_body(session, event) {
        Some(body) => DialectFrames::Shared(Published::new(body)),
        None => DialectFrames::PerConn(SmallVec::new()),
    }
}

/// The length of `value` as compact JSON, counted without building it.
fn encoded_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
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
        // Every shared frame was freed but the session's latest `session.updated`, which
        // the host keeps to coalesce the next ones.
        assert_eq!(
            host.conns.shared_frames(),
            host.latest.held_frames(),
            "every shared frame was freed"
        );
        assert_eq!(host.latest.held_frames(), 1);
    }

    #[test]
    fn shared_frames_are_freed_when_taken_batched_or_dropped_with_their_connection() {
        let now = Timestamp::from_millis(1_795_983_976_952);
        let mut host = Host::new(HostConfig::default());
        let a = host.open(now, Framing::ContentLength);
        let b = host.open(now, Framing::ContentLength);
        let c = host.open(now, Framing::ContentLength);
        request(
            &mut host,
            now,
            a,
            &json!({"jsonrpc":"2.0","id":1,"method":"session.create","params":{"sessionId":"s1"}}),
        );
        for conn in [b, c] {
            request(
                &mut host,
                now,
                conn,
                &json!({"jsonrpc":"2.0","id":1,"method":"session.resume",
                        "params":{"sessionId":"s1","disableResume":true}}),
            );
        }
        drain(&mut host);
        assert_eq!(host.conns.shared_frames(), 0);
        for n in 0..3 {
            host.emit_event(now, "s1", "session.info", &json!({ "n": n }), false)
                .unwrap();
        }
        // Three events, each stored once for all three readers, and one `session.updated`
        // (queued on each reader by the first event, brought up to date by the next two).
        assert_eq!(host.conns.shared_frames(), 4);
        assert_eq!(
            host.latest.held_frames(),
            1,
            "the update, also kept by the host"
        );
        // `a` takes its frames one by one, `b` in batches, `c` goes away unread.
        let mut one_by_one = Vec::new();
        while let Some(frame) = host.poll_transmit(a) {
            one_by_one.push(frame);
        }
        let mut batched = Vec::new();
        let mut taken = 0;
        loop {
            let n = host.poll_transmit_batch(b, 1, &mut batched);
            if n == 0 {
                break;
            }
            taken += n;
        }
        assert_eq!(
            batched.len(),
            4,
            "a 1-byte limit still takes one frame per call"
        );
        assert_eq!(one_by_one, batched, "the same frames in the same order");
        assert_eq!(taken, batched.iter().map(|f| f.len()).sum::<usize>());
        assert_eq!(host.conns.shared_frames(), 4, "c still holds them");
        host.handle_eof(now, c);
        assert_eq!(host.poll_transmit_batch(c, usize::MAX, &mut batched), 0);
        // Whatever the detach announced to the others is taken; `c`'s four are gone with it,
        // but for the session's latest `session.updated`, which the host keeps to coalesce
        // the next ones (see `latest.rs`).
        drain(&mut host);
        assert_eq!(host.conns.shared_frames(), 1);
        assert_eq!(host.latest.held_frames(), 1);
    }
}
