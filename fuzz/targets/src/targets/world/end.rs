//! The end of a run: settling like a well-behaved runtime and client, then the final checks.

use super::*;

impl World {
    /// Plays a well-behaved runtime and client until nothing is left to do: every byte is
    /// delivered, every reader catches up, every announced request is answered once and every
    /// deadline fires. Returns an error if the host does not go quiet within `max_rounds`.
    pub fn settle(&mut self, max_rounds: usize) -> Check {
        for c in 0..self.conns.len() {
            if self.conns[c].open {
                self.deliver_all(c)?;
            }
        }
        for _ in 0..max_rounds {
            self.drain_all()?;
            let mut progressed = false;
            let open: Vec<usize> = self
                .asks
                .iter()
                .enumerate()
                .filter(|(_, a)| !a.settled && !a.completed)
                .map(|(i, _)| i)
                .collect();
            if !open.is_empty() {
                let s = self.settler_conn()?;
                for i in open {
                    self.asks[i].settled = true;
                    let ask = self.asks[i].clone();
                    let (method, params) = match ask.kind {
                        AskKind::Permission => (
                            "session.permissions.handlePendingPermissionRequest",
                            json!({"sessionId": ask.session, "requestId": ask.request_id,
                                   "result": {"kind": "approve-once"}}),
                        ),
                        AskKind::Tool => (
                            "session.tools.handlePendingToolCall",
                            json!({"sessionId": ask.session, "requestId": ask.request_id,
                                   "result": "settled"}),
                        ),
                        AskKind::Elicitation => (
                            "session.ui.handlePendingElicitation",
                            json!({"sessionId": ask.session, "requestId": ask.request_id,
                                   "result": {"action": "cancel"}}),
                        ),
                        AskKind::Command => (
                            "session.commands.handlePendingCommand",
                            json!({"sessionId": ask.session, "requestId": ask.request_id}),
                        ),
                        AskKind::Sampling => (
                            "session.ui.handlePendingSampling",
                            json!({"sessionId": ask.session, "requestId": ask.request_id}),
                        ),
                    };
                    self.request(s, method, params);
                }
                self.deliver_all(s)?;
                progressed = true;
            }
            let calls: Vec<usize> = (0..self.calls.len())
                .filter(|&k| !self.calls[k].done && self.conns[self.calls[k].conn].usable())
                .collect();
            for k in calls {
                self.calls[k].done = true;
                let (c, id, method) = {
                    let call = &self.calls[k];
                    (call.conn, call.id.clone(), call.method.clone())
                };
                let body = call_response(&id, &method, 0);
                self.queue_body(c, body.as_bytes());
                self.deliver_all(c)?;
                progressed = true;
            }
            // The model answers before deadlines fire (a runtime that keeps up).
            if self.model_busy() {
                while self.model_step()? {}
                progressed = true;
            } else if self.fire_next_timer()? {
                progressed = true;
            }
            if !progressed {
                self.drain_all()?;
                return Ok(());
            }
        }
        Err(format!(
            "the host did not go quiet within {max_rounds} settle rounds (a turn that never \
             ends?)"
        ))
    }

    /// The connection the settle phase answers through (opened and authenticated on demand).
    pub(super) fn settler_conn(&mut self) -> Result<usize, String> {
        if let Some(s) = self.settler {
            if self.conns[s].usable() {
                return Ok(s);
            }
        }
        let s = self.open(Framing::ContentLength, usize::MAX);
        self.settler = Some(s);
        if self.config.token {
            self.request(s, "connect", json!({"token": TOKEN}));
            self.deliver_all(s)?;
            self.drain(s)?;
        }
        Ok(s)
    }

    /// What must hold once [`World::settle`] returned: every request on a live, modelled
    /// connection answered exactly once, no deadline left, no turn still running.
    pub fn final_checks(&mut self) -> Check {
        ensure!(
            self.host.poll_timeout().is_none(),
            "a deadline is still armed after settling"
        );
        self.ahp_final_checks()?;
        for (c, conn) in self.conns.iter().enumerate() {
            if conn.usable() && conn.modelled() {
                let owed: Vec<(&String, &u32)> =
                    conn.owed.iter().filter(|(_, n)| **n > 0).collect();
                ensure!(
                    owed.is_empty(),
                    "c{c}: requests never answered (id → count): {owed:?}; sent: {:?}",
                    conn.sent
                        .iter()
                        .filter(|(_, q)| !q.is_empty())
                        .map(|(id, q)| (
                            id,
                            q.iter().map(|s| s.method.as_str()).collect::<Vec<_>>()
                        ))
                        .collect::<Vec<_>>()
                );
            }
        }
        for call in &self.calls {
            ensure!(
                call.done || !self.conns[call.conn].usable(),
                "c{}: server request {} ({}) neither answered nor cancelled after settling",
                call.conn,
                call.id,
                call.method
            );
        }
        // Every loaded session is idle after a final resume: `isProcessing` is false.
        let sessions: Vec<String> = self
            .session_ids
            .iter()
            .filter(|s| self.host.session_events(s).is_some())
            .cloned()
            .collect();
        if sessions.is_empty() {
            return Ok(());
        }
        for session in &sessions {
            let s = self.settler_conn()?;
            let id = self.request(s, "session.resume", json!({"sessionId": session}));
            self.deliver_all(s)?;
            self.drain_all()?;
            if self.conns[s].closed_by_host {
                // The resume's own output overflowed a tiny budget: nothing to observe.
                continue;
            }
            ensure!(
                !self.conns[s].is_owed(&id),
                "final resume of {session} was not answered"
            );
            let tail: Vec<String> = self
                .host
                .session_events(session)
                .unwrap_or_default()
                .iter()
                .rev()
                .take(8)
                .rev()
                .map(|e| {
                    let v: Value = serde_json::from_slice(&e.json).unwrap_or_default();
                    format!("{} {}", e.event_type, truncate(&v["data"].to_string(), 80))
                })
                .collect();
            let sampling_turn = self
                .host
                .session_events(session)
                .unwrap_or_default()
                .iter()
                .rev()
                .find(|e| e.event_type == "user.message")
                .is_some_and(|e| String::from_utf8_lossy(&e.json).contains(r#""content":"sample"#));
            if self.lenient_orphan_sampling && sampling_turn {
                // Known issue (lenient mode only): a sampling request whose last provider left
                // unheard is never resolved.
                continue;
            }
            // `sessionWasActive` says whether another client still had the session; whether a
            // turn is still running is `isProcessing`. (A resume by a client when no other
            // had the session interrupts work its departed clients left pending.)
            let probe = self.request(
                s,
                "session.metadata.isProcessing",
                json!({"sessionId": session}),
            );
            self.deliver_all(s)?;
            self.drain_all()?;
            if self.conns[s].closed_by_host {
                continue;
            }
            let processing = self.conns[s]
                .responses
                .get(&probe)
                .map(|r| r["result"]["processing"].clone());
            ensure!(
                processing == Some(json!(false)),
                "session {session}: still processing after settling and a final resume \
                 ({processing:?}: a turn that never reached session.idle); the log ends with \
                 {tail:#?}"
            );
        }
        Ok(())
    }
}
