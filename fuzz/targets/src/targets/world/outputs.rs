//! The world's outputs: what the host wrote, checked against the model as each client reads it.

use super::*;

impl World {
    /// Reads everything the host queued for `c` (the peer's reader catches up).
    pub fn drain(&mut self, c: usize) -> Check {
        let id = self.conns[c].id;
        let Some(queued) = self.host.queued_bytes(id) else {
            return Ok(());
        };
        let mut frames = Vec::new();
        while let Some(f) = self.host.poll_transmit(id) {
            frames.push(f);
        }
        let total: usize = frames.iter().map(|f| f.len()).sum();
        ensure!(
            total == queued,
            "c{c}: queued_bytes said {queued} but {total} bytes were transmitted"
        );
        // Over budget only by the one frame that closes the connection: a slow consumer's
        // queue replaced by its reason, or after a framing error what was already queued (as
        // the budget allows it: within it, or one frame alone, e.g. one oversize answer)
        // followed by the reason (`Outbox::push_final`).
        let reason_len = frames.last().map_or(0, |f| f.len());
        let closing_with_reason = self.conns[c].closed_by_host
            && (queued - reason_len <= self.config.budget || frames.len() == 2);
        ensure!(
            queued <= self.config.budget || frames.len() == 1 || closing_with_reason,
            "c{c}: {queued} bytes queued in {} frames, over the budget of {}",
            frames.len(),
            self.config.budget
        );
        ensure!(
            self.host.queued_bytes(id) == Some(0),
            "c{c}: queued_bytes is not 0 after draining"
        );
        for f in frames {
            self.receive_bytes(c, &f)?;
        }
        self.conns[c].host_closes_at_drain = self.host_closes;
        Ok(())
    }

    /// Drains every connection the host reports ready (the runtime's loop).
    pub fn drain_ready(&mut self) -> Check {
        while let Some(id) = self.host.poll_ready() {
            let Some(c) = self.conns.iter().position(|x| x.id == id) else {
                return Err(format!("poll_ready returned unknown {id}"));
            };
            ensure!(self.conns[c].open, "poll_ready returned ended c{c}");
            self.drain(c)?;
        }
        Ok(())
    }

    /// Drains every open connection.
    pub fn drain_all(&mut self) -> Check {
        self.drain_ready()?;
        for c in 0..self.conns.len() {
            if self.conns[c].open {
                self.drain(c)?;
            }
        }
        Ok(())
    }

    /// The budget invariant for every connection right now: `queued_bytes <= budget`, or the
    /// outbox holds exactly one frame (an oversize frame is accepted into an empty outbox, and
    /// the reason frame before a close bypasses the budget). An outbox over its budget is
    /// drained at once to count its frames.
    pub fn check_budgets(&mut self) -> Check {
        for c in 0..self.conns.len() {
            let q = self.host.queued_bytes(self.conns[c].id);
            if q.is_some_and(|q| q > self.config.budget) {
                self.drain(c)?;
            }
        }
        Ok(())
    }

    /// Feeds `bytes` to `c`'s peer as if the host had written them (for testing the checker).
    pub fn inject_host_bytes(&mut self, c: usize, bytes: &[u8]) -> Check {
        self.receive_bytes(c, bytes)
    }

    pub(super) fn receive_bytes(&mut self, c: usize, bytes: &[u8]) -> Check {
        let conn = &mut self.conns[c];
        if let Err(e) = conn.decoder.push(bytes) {
            return Err(format!("c{c}: host output does not decode: {e}"));
        }
        loop {
            let body = match self.conns[c].decoder.next_frame() {
                Ok(Some(body)) => body,
                Ok(None) => return Ok(()),
                Err(e) => return Err(format!("c{c}: host output does not decode: {e}")),
            };
            self.conns[c].frames_received += 1;
            self.receive_message(c, &body)?;
        }
    }

    pub(super) fn receive_message(&mut self, c: usize, body: &[u8]) -> Check {
        let text = std::str::from_utf8(body).map_err(|_| format!("c{c}: body is not UTF-8"))?;
        let message = match jsonrpc::parse(body) {
            Parsed::Single(Ok(m)) => m,
            other => {
                return Err(format!(
                    "c{c}: host wrote an invalid message {other:?}: {text}"
                ))
            }
        };
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("c{c}: invalid JSON {e}: {text}"))?;
        self.log(|| format!("c{c} ← {}", truncate(text, 400)));
        self.conns[c].last_is_null_error = value["id"].is_null() && value.get("error").is_some();
        if self.keep_inbox {
            self.conns[c].inbox.push(value.clone());
        }
        match message {
            Message::Response { id, .. } => {
                let raw = id.as_raw().to_owned();
                self.receive_response(c, &raw, &value)
            }
            Message::Notification { method, .. } if self.conns[c].ahp.is_some() => {
                self.receive_ahp_notification(c, &method, &value)
            }
            Message::Request { method, .. } if self.conns[c].ahp.is_some() => Err(format!(
                "c{c}: the host sent AHP client a request ({method}); AHP hosts send none"
            )),
            Message::Notification { method, .. } if method == "session.event" => {
                self.receive_event(c, &value["params"])
            }
            Message::Notification { method, .. } if method == "session.lifecycle" => {
                // A deleted session's view ends here: a session created again under the
                // same id is a new incarnation, whose chain the connection starts afresh
                // when it attaches (its attach announcements come before the answer).
                let params = &value["params"];
                if params["type"] == "session.deleted" {
                    if let Some(session) = params["sessionId"].as_str() {
                        self.conns[c].views.remove(session);
                    }
                }
                Ok(())
            }
            Message::Notification { method, .. } if method == "$/cancelRequest" => {
                let raw = value["params"]["id"].to_string();
                // After raw bytes an answer counted as written may have reached the host
                // garbled (inside a frame it could not parse): no answer, so the host may
                // still give up on the request.
                let garbled = self.conns[c].tainted;
                let call = self
                    .calls
                    .iter_mut()
                    .find(|k| k.conn == c && k.id == raw && (!k.done || garbled));
                ensure!(
                    call.is_some(),
                    "c{c}: $/cancelRequest for {raw}, which is not an outstanding server request"
                );
                if let Some(call) = call {
                    call.done = true;
                }
                Ok(())
            }
            Message::Notification { method, .. } => {
                Err(format!("c{c}: unexpected notification {method}"))
            }
            Message::Request { id, method, .. } => {
                let raw = id.as_raw().to_owned();
                ensure!(
                    !self
                        .calls
                        .iter()
                        .any(|k| k.conn == c && k.id == raw && !k.done),
                    "c{c}: server request {method} reuses id {raw}, still outstanding"
                );
                // Canvas provider requests name the canvas instance instead of a request id,
                // and a client task's cancellation its task and cancellation.
                let names_its_request = if method.starts_with("canvas.") {
                    value["params"]["instanceId"].is_string()
                        && value["params"]["extensionId"].is_string()
                } else if method == "tasks.cancel" {
                    value["params"]["id"].is_string()
                        && value["params"]["cancellationId"].is_string()
                        && value["params"]["reason"] == "cancel_requested"
                } else {
                    value["params"]["requestId"].is_string()
                };
                ensure!(
                    value["params"]["sessionId"].is_string() && names_its_request,
                    "c{c}: server request {method} without sessionId / requestId: {value}"
                );
                self.calls.push(Call {
                    conn: c,
                    id: raw,
                    method: method.into_owned(),
                    done: false,
                });
                Ok(())
            }
        }
    }

    pub(super) fn receive_response(&mut self, c: usize, raw: &str, value: &Value) -> Check {
        let conn = &mut self.conns[c];
        if !conn.modelled() {
            return Ok(());
        }
        // The one error with id null sent before the host closes a connection (the host drops
        // whatever else was still queued for it).
        let closing_reason = raw == "null"
            && conn.closed_by_host
            && value["error"]["message"].as_str().is_some_and(|m| {
                m.starts_with("framing error") || m.starts_with("connection closed")
            });
        if closing_reason {
            return Ok(());
        }
        let owed = conn.owed.get(raw).copied().unwrap_or(0);
        ensure!(
            owed > 0,
            "c{c}: response for id {raw} that is not owed (a second response, or one for a \
             request never sent): {value}"
        );
        conn.owed.insert(raw.to_owned(), owed - 1);
        // A request reusing the id of one still in flight is refused at once: the in-flight
        // one is the oldest unanswered request with that id, so the refusal answers the
        // second oldest; anything else answers the oldest.
        let duplicate = value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("is already in flight"));
        let queue = conn.sent.entry(raw.to_owned()).or_default();
        let deferred_pending = queue.iter().any(|s| s.deferred);
        let index = if duplicate && queue.len() >= 2 {
            Some(1)
        } else if deferred_pending && queue.len() >= 2 {
            // A deferred request shares the id with another unanswered one: which one this
            // answers shows in the error text ("Request <method> failed …"), if at all.
            // `sendAndWait` reports its immediate failures as `session.send`'s.
            value["error"]["message"].as_str().and_then(|m| {
                let names = |method: &str| {
                    m.contains(&format!("Request {method} failed"))
                        || (method == "session.sendAndWait"
                            && m.contains("Request session.send failed"))
                };
                let matches: Vec<usize> = (0..queue.len())
                    .filter(|&i| !queue[i].method.is_empty() && names(&queue[i].method))
                    .collect();
                (matches.len() == 1).then(|| matches[0])
            })
        } else {
            Some(0)
        };
        let Some(index) = index else {
            // Ambiguous: stop modelling this connection rather than guess.
            conn.tainted = true;
            return Ok(());
        };
        let sent = queue.remove(index).unwrap_or_else(Sent::garbage);
        if !sent.deferred {
            let first = conn.sync_order.pop_front();
            ensure!(
                first.as_deref() == Some(raw),
                "c{c}: responses out of order: got the response for id {raw} while the one for \
                 {first:?} (sent earlier, answered in frame order) is still missing"
            );
        }
        conn.responses.insert(raw.to_owned(), value.clone());
        self.check_response(c, &sent, value)
    }

    /// Semantic checks of a response to a request the model knows.
    pub(super) fn check_response(&mut self, c: usize, sent: &Sent, value: &Value) -> Check {
        self.stats.responses += 1;
        let result = &value["result"];
        let ok = value.get("result").is_some();
        if ok && !sent.params.is_object() && !sent.method.is_empty() {
            // Positional (array) params: the model reads named fields only, so it stops here.
            if matches!(
                sent.method.as_str(),
                "session.create"
                    | "session.resume"
                    | "session.detach"
                    | "session.delete"
                    | "session.getMessages"
                    | "session.permissions.handlePendingPermissionRequest"
                    | "session.tools.handlePendingToolCall"
                    | "session.ui.handlePendingElicitation"
                    | "session.commands.handlePendingCommand"
                    | "session.ui.handlePendingSampling"
            ) {
                self.conns[c].tainted = true;
                return Ok(());
            }
        }
        if self.conns[c].ahp.is_some() {
            return if ok {
                self.check_ahp_response(c, sent, result)
            } else {
                Ok(())
            };
        }
        let session = sent.params["sessionId"].as_str().unwrap_or("").to_owned();
        match sent.method.as_str() {
            "connect" if ok => self.conns[c].authenticated = true,
            "session.create" | "session.resume" if ok => {
                let session = result["sessionId"].as_str().unwrap_or(&session).to_owned();
                self.session_ids.insert(session.clone());
                let view = self.conns[c].views.entry(session).or_default();
                view.attached = true;
                view.streaming = sent.params["streaming"].as_bool().unwrap_or(false);
                view.extension = sent.params.get("extensionInfo").is_some();
                view.last_persisted = None;
            }
            "session.detach" if ok => {
                let view = self.conns[c].views.entry(session).or_default();
                view.attached = false;
                view.streaming = false;
                view.last_persisted = None;
            }
            "session.delete" if ok => {
                self.conns[c].views.remove(&session);
            }
            "session.tasks.register" if ok => {
                if let Some(id) = result["task"]["id"].as_str() {
                    if !self.task_ids.iter().any(|t| t == id) {
                        self.task_ids.push(id.to_owned());
                    }
                }
            }
            // `session.commands.handlePendingCommand` is not here: as the runtime, it
            // acknowledges any request id (`success:true` even for one it never announced),
            // so its answer says nothing about acceptance.
            "session.permissions.handlePendingPermissionRequest"
            | "session.tools.handlePendingToolCall"
            | "session.ui.handlePendingElicitation"
            | "session.ui.handlePendingSampling"
                if ok && result["success"] == json!(true) =>
            {
                let rid = sent.params["requestId"].as_str().unwrap_or("").to_owned();
                ensure!(
                    self.ask_index.contains_key(&rid),
                    "c{c}: {} accepted request id {rid:?}, which the host never announced",
                    sent.method
                );
                self.stats.accepted += 1;
                let n = self.accepted.entry(rid.clone()).or_default();
                *n += 1;
                ensure!(
                    *n == 1,
                    "c{c}: request {rid} accepted {n} times (first answer wins)"
                );
                let kind = self.asks[self.ask_index[&rid]].kind;
                let want = match sent.method.as_str() {
                    "session.permissions.handlePendingPermissionRequest" => AskKind::Permission,
                    "session.tools.handlePendingToolCall" => AskKind::Tool,
                    "session.ui.handlePendingElicitation" => AskKind::Elicitation,
                    "session.ui.handlePendingSampling" => AskKind::Sampling,
                    _ => AskKind::Command,
                };
                ensure!(
                    kind == want,
                    "c{c}: {} accepted {rid}, which is a {kind:?} request",
                    sent.method
                );
            }
            "session.getMessages" if ok => self.check_messages(c, &session, result)?,
            "session.sendAndWait" if ok && !self.lenient_send_and_wait => {
                let message_id = &result["messageId"];
                let answered = &result["response"]["data"]["originatingMessageId"];
                ensure!(
                    result.get("response").is_none() || answered == message_id,
                    "c{c}: session.sendAndWait for message {message_id} was answered with the \
                     reply to message {answered} (another prompt's turn): {value}"
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// `session.getMessages`: a consistent chain holding every persisted event this client saw
    /// in that session (same incarnation).
    pub(super) fn check_messages(&mut self, c: usize, session: &str, result: &Value) -> Check {
        let Some(list) = result["events"].as_array() else {
            return Err(format!("c{c}: getMessages without events: {result}"));
        };
        let mut ids = BTreeSet::new();
        let mut previous: Option<&str> = None;
        for (i, e) in list.iter().enumerate() {
            let id = e["id"].as_str().unwrap_or("");
            ensure!(
                e.get("ephemeral").is_none(),
                "c{c}: getMessages returned an ephemeral event {e}"
            );
            ensure!(
                e["parentId"].as_str() == previous,
                "c{c}: getMessages event {i} has parentId {} but the previous event is {previous:?}",
                e["parentId"]
            );
            previous = Some(id);
            ids.insert(id.to_owned());
        }
        let Some(root) = list.first().and_then(|e| e["id"].as_str()) else {
            return Ok(());
        };
        self.stats.catch_ups += 1;
        // What the client saw on this connection (before this response: wire order) and on its
        // connections that had ended before this one opened (a reconnect).
        let client = self.conns[c].client;
        let opened = self.conns[c].opened_at;
        let earlier: Vec<usize> = (0..self.conns.len())
            .filter(|&d| {
                d == c
                    || (self.conns[d].client == client
                        && self.conns[d].ended_at.is_some_and(|t| t <= opened))
            })
            .collect();
        let seen: Vec<String> = earlier
            .iter()
            .filter_map(|&d| self.seen_persisted.get(&(d, session.to_owned())))
            .flatten()
            .cloned()
            .collect();
        for id in seen {
            if self.root_of(&id).as_deref() == Some(root) {
                ensure!(
                    ids.contains(&id),
                    "c{c}: client {client} saw persisted event {id} of {session}, but \
                     session.getMessages does not return it (durable event lost)"
                );
            }
        }
        Ok(())
    }

    /// The first event of the chain `id` belongs to (its session's incarnation), if known.
    pub(super) fn root_of(&self, id: &str) -> Option<String> {
        let mut current = id.to_owned();
        for _ in 0..100_000 {
            let info = self.events.get(&current)?;
            match &info.parent {
                None => return Some(current),
                Some(p) => current = p.clone(),
            }
        }
        None
    }

    pub(super) fn receive_event(&mut self, c: usize, params: &Value) -> Check {
        let session = params["sessionId"]
            .as_str()
            .ok_or_else(|| format!("c{c}: session.event without sessionId: {params}"))?
            .to_owned();
        let event = &params["event"];
        let ty = event["type"].as_str().unwrap_or("").to_owned();
        let id = event["id"]
            .as_str()
            .ok_or_else(|| format!("c{c}: event without id: {event}"))?
            .to_owned();
        let parent = event["parentId"].as_str().map(str::to_owned);
        let persisted = event.get("ephemeral").is_none();
        self.stats.events += 1;
        if is_streaming_delta_type(&ty) {
            self.stats.deltas += 1;
        }
        ensure!(
            event.get("ephemeral").is_none() || event["ephemeral"] == json!(true),
            "c{c}: ephemeral must be absent or true: {event}"
        );
        ensure!(
            event["data"].is_object(),
            "c{c}: event data is not an object: {event}"
        );
        if let Some(known) = self.events.get(&id) {
            ensure!(
                known.session == session && known.parent == parent,
                "c{c}: event {id} differs from the host's record of it"
            );
        }
        self.note_event(&session, event);
        self.session_ids.insert(session.clone());
        let modelled = self.conns[c].modelled();
        let view = self.conns[c].views.entry(session.clone()).or_default();
        if modelled && is_streaming_delta_type(&ty) {
            ensure!(
                view.attached && view.streaming,
                "c{c}: received {ty} for {session} without having attached with streaming:true"
            );
        }
        let reentrant_close =
            self.lenient_reentrant_emit && self.host_closes > self.conns[c].host_closes_at_drain;
        let view = self.conns[c].views.entry(session.clone()).or_default();
        if modelled && reentrant_close {
            if view
                .last_persisted
                .as_ref()
                .is_some_and(|expected| *expected != parent)
            {
                // Known issue (lenient mode only): another connection was closed during a
                // fan-out and its departure's events overtook the event being fanned out.
                view.last_persisted = None;
            }
        } else if modelled {
            let extension = view.extension;
            let last = view.last_persisted.clone();
            let extension = extension || self.conns[c].extension_sessions.contains(&session);
            let targeted_gap = last.as_ref().is_some_and(|expected| {
                *expected != parent
                    && self.only_targeted_between(
                        &session,
                        expected.as_deref(),
                        parent.as_deref(),
                        extension,
                    )
            });
            let view = self.conns[c].views.entry(session.clone()).or_default();
            if let Some(expected) = view.last_persisted.as_ref().filter(|_| !targeted_gap) {
                ensure!(
                    *expected == parent,
                    "c{c}: {ty} event {id} of {session} has parentId {parent:?}, but the last \
                     persisted event this connection received is {expected:?} (a persisted \
                     event was skipped or reordered)"
                );
            }
        }
        if persisted && self.config.persist {
            ensure!(
                self.stored.contains(&id),
                "c{c}: received persisted event {id} ({ty}) before Output::Persist reported it"
            );
        }
        let view = self.conns[c].views.entry(session.clone()).or_default();
        if persisted {
            view.last_persisted = Some(Some(id.clone()));
            self.seen_persisted
                .entry((c, session))
                .or_default()
                .push(id);
        } else if view.last_persisted.is_none() {
            view.last_persisted = Some(parent);
        }
        Ok(())
    }

    /// Whether every persisted event after `from` up to and including `to` in the session's
    /// log is one the host routes to some connections only: `external_tool.requested` (to an
    /// extension tool's owner) and, for an extension connection, `permission.requested`.
    pub(super) fn only_targeted_between(
        &self,
        session: &str,
        from: Option<&str>,
        to: Option<&str>,
        extension: bool,
    ) -> bool {
        let (Some(log), Some(to)) = (self.host.session_events(session), to) else {
            return false;
        };
        let Some(end) = log.iter().position(|e| e.id == to) else {
            return false;
        };
        let start = match from {
            None => 0,
            Some(from) => match log.iter().position(|e| e.id == from) {
                Some(i) if i < end => i + 1,
                _ => return false,
            },
        };
        log[start..=end].iter().all(|e| {
            e.event_type == "external_tool.requested"
                || (extension && e.event_type == "permission.requested")
        })
    }
}
