//! The world's inputs: connections opening and closing, client requests and bytes, time.

use super::*;
use agentwire::host::{ConnectionOutput, Effect, EffectOp, StoreOutput};

impl World {
    /// Opens a connection for `client`; returns its index.
    pub fn open(&mut self, framing: Framing, client: usize) -> usize {
        let id = self.host.open(self.now, framing);
        self.push_conn(id, framing, client, false)
    }

    /// Records a connection the host just opened; returns its index.
    pub(super) fn push_conn(
        &mut self,
        id: ConnId,
        framing: Framing,
        client: usize,
        ahp: bool,
    ) -> usize {
        self.inputs += 1;
        let index = self.conns.len();
        self.conns.push(Conn {
            id,
            extension_sessions: Default::default(),
            framing,
            client,
            open: true,
            closed_by_host: false,
            tainted: false,
            authenticated: !self.config.token,
            to_host: VecDeque::new(),
            decoder: FrameDecoder::new(
                framing,
                FrameLimits {
                    max_frame_bytes: usize::MAX / 4,
                    max_header_bytes: 1024,
                },
            ),
            owed: BTreeMap::new(),
            sent: BTreeMap::new(),
            sync_order: VecDeque::new(),
            views: BTreeMap::new(),
            inbox: Vec::new(),
            responses: BTreeMap::new(),
            frames_received: 0,
            last_is_null_error: false,
            host_closes_at_drain: 0,
            opened_at: self.inputs,
            ended_at: None,
            next_id: 0,
            last_id: None,
            ahp: ahp.then(AhpView::default),
        });
        self.log(|| {
            let dialect = if ahp { " AHP" } else { "" };
            format!("open c{index} ({id}) client {client} {framing:?}{dialect}")
        });
        index
    }

    /// The peer of `c` goes away (EOF); bytes it had not delivered are lost.
    pub fn eof(&mut self, c: usize) -> Check {
        let conn = &mut self.conns[c];
        conn.to_host.clear();
        conn.open = false;
        if conn.ended_at.is_none() {
            conn.ended_at = Some(self.inputs);
        }
        let id = conn.id;
        self.log(|| format!("eof c{c}"));
        self.host.handle_eof(self.now, id);
        self.inputs += 1;
        self.after_input()
    }

    /// Queues a request (or, with `id: None`, a notification) from `c`; returns the raw id.
    /// `id` is raw JSON text. The bytes reach the host on [`World::deliver`].
    pub fn request_raw_id(
        &mut self,
        c: usize,
        id: Option<&str>,
        method: &str,
        params: &Value,
    ) -> Option<String> {
        let mut body = String::from(r#"{"jsonrpc":"2.0","#);
        if let Some(id) = id {
            let _ = write!(body, r#""id":{id},"#);
        }
        let _ = write!(
            body,
            r#""method":{},"params":{}}}"#,
            serde_json::to_string(method).unwrap_or_default(),
            params
        );
        self.log(|| format!("c{c} → {}", truncate(&body, 300)));
        self.queue_body(c, body.as_bytes());
        if let Some(id) = id {
            self.conns[c].last_id = Some(id.to_owned());
        }
        id.map(str::to_owned)
    }

    /// Queues a request with the connection's next numeric id; returns the raw id.
    pub fn request(&mut self, c: usize, method: &str, params: Value) -> String {
        let n = self.conns[c].next_id;
        self.conns[c].next_id += 1;
        let id = n.to_string();
        self.request_raw_id(c, Some(&id), method, &params);
        id
    }

    /// A fresh id for `c` (numbers, or strings when `string`).
    pub fn fresh_id(&mut self, c: usize, string: bool) -> String {
        let n = self.conns[c].next_id;
        self.conns[c].next_id += 1;
        if string {
            format!("\"r-{n}\"")
        } else {
            n.to_string()
        }
    }

    /// Queues any body (framed correctly) from `c`; the model learns what it asks for by
    /// parsing it as the host will.
    pub fn queue_body(&mut self, c: usize, body: &[u8]) {
        let framing = self.conns[c].framing;
        let mut body = body.to_vec();
        if framing == Framing::Ndjson {
            // One line: no `\n` inside; a whitespace-only line is skipped by the host, and a
            // final `\r` is stripped.
            for b in &mut body {
                if *b == b'\n' {
                    *b = b' ';
                }
            }
            if body.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
                body.push(b'0');
            }
        }
        let wire = frame(framing, &body);
        self.log(|| {
            format!(
                "c{c} ⇒ body {}",
                truncate(&String::from_utf8_lossy(&body), 300)
            )
        });
        if framing == Framing::Ndjson && body.last() == Some(&b'\r') {
            body.pop();
        }
        self.bodies_sent += 1;
        let order = self.bodies_sent;
        let sent = match jsonrpc::parse(&body) {
            Parsed::Single(Ok(Message::Request { method, params, .. })) => Sent {
                order,
                deferred: DEFERRED_METHODS.contains(&&*method),
                method: method.into_owned(),
                params: params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or(Value::Null),
            },
            _ => Sent::garbage(),
        };
        if matches!(sent.method.as_str(), "session.create" | "session.resume")
            && sent.params.get("extensionInfo").is_some()
        {
            // Whatever becomes of the response (an id the model cannot follow, e.g. `null`),
            // the host may now treat this connection as that session's extension.
            if let Some(session) = sent.params["sessionId"].as_str() {
                self.conns[c].extension_sessions.insert(session.to_owned());
            }
        }
        if let Some(s) = sent.params.get("sessionId").and_then(Value::as_str) {
            self.session_ids.insert(s.to_owned());
        }
        for key in ["channel", "chat"] {
            if let Some(s) = sent.params.get(key).and_then(Value::as_str) {
                if let Some(session) = channel_session(s) {
                    self.session_ids.insert(session.to_owned());
                }
            }
        }
        self.ahp_note_sent(c, &body);
        let conn = &mut self.conns[c];
        for raw in expected_responses(&body) {
            *conn.owed.entry(raw.clone()).or_default() += 1;
            if !sent.deferred {
                conn.sync_order.push_back(raw.clone());
            }
            conn.sent.entry(raw).or_default().push_back(sent.clone());
        }
        conn.to_host.extend(wire);
    }

    /// Queues raw bytes from `c` (not a frame): the stream may go out of sync.
    pub fn queue_raw(&mut self, c: usize, bytes: &[u8]) {
        self.log(|| format!("c{c} raw {:?}", String::from_utf8_lossy(bytes)));
        let conn = &mut self.conns[c];
        conn.tainted = true;
        conn.to_host.extend(bytes.iter().copied());
    }

    /// Hands up to `n` bytes written by `c`'s peer to the host.
    pub fn deliver(&mut self, c: usize, n: usize) -> Check {
        let conn = &mut self.conns[c];
        if !conn.open {
            conn.to_host.clear();
            return Ok(());
        }
        let n = n.min(conn.to_host.len());
        if n == 0 {
            return Ok(());
        }
        let chunk: Vec<u8> = conn.to_host.drain(..n).collect();
        let id = conn.id;
        self.host.handle_bytes(self.now, id, &chunk);
        self.inputs += 1;
        self.after_input()
    }

    /// Hands everything `c`'s peer wrote to the host.
    pub fn deliver_all(&mut self, c: usize) -> Check {
        let n = self.conns[c].to_host.len();
        self.deliver(c, n)
    }

    /// Moves time forward by `ms` and fires due deadlines.
    pub fn advance(&mut self, ms: u64) -> Check {
        self.now = self.now.saturating_add(Duration::from_millis(ms));
        self.log(|| format!("advance {ms} ms"));
        self.host.handle_timeout(self.now);
        self.inputs += 1;
        self.after_input()
    }

    /// Fires the next deadline, if any; returns whether there was one.
    pub fn fire_next_timer(&mut self) -> Result<bool, String> {
        let Some(deadline) = self.host.poll_timeout() else {
            return Ok(false);
        };
        if deadline > self.now {
            self.now = deadline;
        }
        self.log(|| "timer".to_owned());
        self.host.handle_timeout(self.now);
        self.inputs += 1;
        self.after_input()?;
        Ok(true)
    }

    /// Calls `handle_timeout` with a time in the past (the host must not go backwards).
    pub fn stale_timeout(&mut self, back_ms: u64) -> Check {
        let then = Timestamp::from_millis(self.now.as_millis().saturating_sub(back_ms));
        self.host.handle_timeout(then);
        self.inputs += 1;
        self.after_input()
    }

    /// After every input: the runtime's outputs, then the per-step checks.
    pub(super) fn after_input(&mut self) -> Check {
        while let Some(output) = self.host.poll_output() {
            match output {
                Output::Connection(ConnectionOutput::Close { conn, reason }) => {
                    let Some(c) = self.conns.iter().position(|x| x.id == conn) else {
                        return Err(format!("Output::Close for unknown {conn}"));
                    };
                    self.log(|| format!("host closes c{c}: {reason}"));
                    ensure!(
                        self.conns[c].open,
                        "Output::Close for c{c}, which the runtime already ended"
                    );
                    ensure!(
                        !self.conns[c].closed_by_host,
                        "Output::Close twice for c{c}"
                    );
                    self.conns[c].closed_by_host = true;
                    self.host_closes += 1;
                    self.stats.host_closes += 1;
                    // The runtime flushes what is queued, then closes.
                    self.drain(c)?;
                    ensure!(
                        self.conns[c].last_is_null_error,
                        "c{c}: the last frame before a close is not an error with id null"
                    );
                    self.conns[c].open = false;
                    self.conns[c].ended_at = Some(self.inputs);
                    self.conns[c].to_host.clear();
                    self.host.handle_eof(self.now, conn);
                    self.inputs += 1;
                }
                Output::Connection(ConnectionOutput::Shutdown { .. }) => {
                    self.shutdown_requested = true
                }
                Output::Store(StoreOutput::Persist { session, event }) => {
                    ensure!(
                        self.config.persist,
                        "Output::Persist without report_persisted_events"
                    );
                    let v: Value = serde_json::from_slice(&event)
                        .map_err(|e| format!("Output::Persist holds invalid JSON: {e}"))?;
                    ensure!(
                        v.get("ephemeral").is_none(),
                        "Output::Persist for an ephemeral event: {v}"
                    );
                    let id = v["id"].as_str().unwrap_or("").to_owned();
                    self.stored.insert(id.clone());
                    self.store.entry(session).or_default().push(id);
                }
                // Without a simulated model (a client's own `provider`), nobody answers: the
                // call ends at its deadline.
                Output::Effect(Effect {
                    id: call,
                    op: EffectOp::HttpRequest(request),
                }) => {
                    if let Some(model) = self.model.as_mut() {
                        model.request(call, &request);
                    }
                }
                Output::Effect(Effect {
                    id: call,
                    op: EffectOp::HttpCancel,
                }) => {
                    if let Some(model) = self.model.as_mut() {
                        model.cancel(call);
                    }
                }
                // The built-in tools' work is always answered (a runtime performs it).
                Output::Effect(Effect {
                    id: op,
                    op: EffectOp::FileOp(request),
                }) => {
                    let seed = self.config.seed;
                    let model = self.model.get_or_insert_with(|| SimModel::new(seed));
                    model.file(op, &request);
                }
                // Commands (no stdin) are answered too.
                Output::Effect(Effect {
                    id,
                    op: EffectOp::ProcessSpawn(spec),
                }) if !spec.stdin => {
                    let seed = self.config.seed;
                    let model = self.model.get_or_insert_with(|| SimModel::new(seed));
                    model.shell(id);
                }
                Output::Store(StoreOutput::SessionDeleted { session }) => {
                    ensure!(
                        self.config.persist,
                        "Output::SessionDeleted without report_persisted_events"
                    );
                    self.store.remove(&session);
                }
                _ => {}
            }
        }
        if self.config.persist {
            // The durable store the runtime keeps from the outputs equals the host's logs.
            for (session, ids) in &self.store {
                if let Some(events) = self.host.session_events(session) {
                    ensure!(
                        events.len() == ids.len()
                            && events.iter().zip(ids).all(|(e, id)| &e.id == id),
                        "the store built from Output::Persist for {session} ({} events) differs \
                         from the host's log ({} events)",
                        ids.len(),
                        events.len()
                    );
                }
            }
        }
        self.index_logs();
        // Sessions deleted by this input (any dialect): their AHP channels are gone.
        let live: BTreeSet<String> = self
            .session_ids
            .iter()
            .filter(|s| self.host.session_events(s).is_some())
            .cloned()
            .collect();
        let gone: Vec<String> = self.live_sessions.difference(&live).cloned().collect();
        for session in gone {
            self.ahp_session_gone(&session);
        }
        self.live_sessions = live;
        for c in 0..self.conns.len() {
            let conn = &self.conns[c];
            let queued = self.host.queued_bytes(conn.id);
            if !conn.open {
                ensure!(
                    queued.is_none(),
                    "c{c} was ended but the host still knows it"
                );
            }
        }
        Ok(())
    }

    /// Records every event in the host's logs (ids, parents, persisted asks).
    pub(super) fn index_logs(&mut self) {
        let ids: Vec<String> = self.session_ids.iter().cloned().collect();
        for s in ids {
            let Some(events) = self.host.session_events(&s) else {
                continue;
            };
            let mut new = Vec::new();
            for e in events.iter().rev() {
                if self.events.contains_key(&e.id) {
                    break;
                }
                new.push(e.json.clone());
            }
            for json in new.into_iter().rev() {
                if let Ok(v) = serde_json::from_slice::<Value>(&json) {
                    self.note_event(&s, &v);
                }
            }
        }
    }

    /// Records an event and the request it announces.
    pub(super) fn note_event(&mut self, session: &str, event: &Value) {
        let Some(id) = event["id"].as_str() else {
            return;
        };
        self.events.entry(id.to_owned()).or_insert(EventInfo {
            session: session.to_owned(),
            parent: event["parentId"].as_str().map(str::to_owned),
        });
        let kind = match event["type"].as_str().unwrap_or("") {
            "permission.requested" => Some(AskKind::Permission),
            "external_tool.requested" => Some(AskKind::Tool),
            "elicitation.requested" => Some(AskKind::Elicitation),
            "command.execute" => Some(AskKind::Command),
            "sampling.requested" => Some(AskKind::Sampling),
            "permission.completed"
            | "external_tool.completed"
            | "elicitation.completed"
            | "command.completed"
            | "sampling.completed" => {
                if let Some(rid) = event["data"]["requestId"].as_str() {
                    if let Some(&i) = self.ask_index.get(rid) {
                        self.asks[i].completed = true;
                    }
                }
                None
            }
            _ => None,
        };
        if let (Some(kind), Some(rid)) = (kind, event["data"]["requestId"].as_str()) {
            if !self.ask_index.contains_key(rid) {
                self.ask_index.insert(rid.to_owned(), self.asks.len());
                self.asks.push(Ask {
                    session: session.to_owned(),
                    kind,
                    request_id: rid.to_owned(),
                    tool_call_id: event["data"]["toolCallId"]
                        .as_str()
                        .or_else(|| event["data"]["permissionRequest"]["toolCallId"].as_str())
                        .map(str::to_owned),
                    completed: false,
                    settled: false,
                });
            }
        }
    }
}
