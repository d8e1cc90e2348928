//! Client-initiated requests that another client answers: elicitation
//! (`session.ui.elicitation`) and slash commands (`session.commands.execute`).
//!
//! The caller's request stays open while the session asks a provider: elicitation goes to
//! every connection (any that attached with `requestElicitation` may answer; the first answer
//! wins), `command.execute` goes only to the connection that declared the command. When the
//! answer arrives, the completion event is emitted and the caller gets its response. If the
//! providers leave first, the request is resolved (elicitation as `cancel`, a command with an
//! error) so nobody waits forever.

use serde_json::{json, Value};

use crate::host::pending::AnswerTo;
use crate::host::{ConnId, Host, Pending};

impl Host {
    /// `session.ui.elicitation`: asks the session's elicitation providers; the response to
    /// `caller_id` comes when one answers. Returns an error when no provider is attached.
    pub(crate) fn start_elicitation(
        &mut self,
        session: &str,
        answer_to: AnswerTo,
        request: &Value,
    ) -> Result<(), String> {
        let Some(live) = self.sessions.get(session) else {
            return Err(session_not_found(session));
        };
        if !live.session.any_elicitation_handler()
            && !self.has_interest(session, "elicitation.requested")
        {
            return Err(
                "no attached client handles elicitation (none attached with requestElicitation)"
                    .into(),
            );
        }
        let request_id = self.ids.next_uuid();
        let mut data = json!({"requestId": request_id});
        for field in [
            "message",
            "requestedSchema",
            "mode",
            "url",
            "elicitationSource",
            "toolCallId",
        ] {
            if let Some(v) = request.get(field) {
                data[field] = v.clone();
            }
        }
        if let Some(live) = self.sessions.get_mut(session) {
            live.pending.insert(
                request_id,
                Pending::Elicitation {
                    answer_to,
                    announced: Box::new(data.clone()),
                },
            );
        }
        self.emit(session, "elicitation.requested", &data, true);
        Ok(())
    }

    /// `session.ui.handlePendingElicitation`: the first answer completes the request.
    pub(crate) fn resolve_elicitation(
        &mut self,
        session: &str,
        request_id: &str,
        result: &Value,
    ) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        if !matches!(
            live.pending.get(request_id),
            Some(Pending::Elicitation { .. })
        ) {
            return false;
        }
        let action = result.get("action").and_then(Value::as_str).unwrap_or("");
        if !matches!(action, "accept" | "decline" | "cancel") {
            return false;
        }
        let Some(Pending::Elicitation { answer_to, .. }) = live.pending.shift_remove(request_id)
        else {
            return false;
        };
        live.resolved.insert(request_id.to_owned());
        let mut answer = json!({"action": action});
        if let Some(content) = result.get("content") {
            answer["content"] = content.clone();
        }
        let mut completed = json!({"requestId": request_id});
        for (k, v) in answer.as_object().into_iter().flatten() {
            completed[k] = v.clone();
        }
        self.emit(session, "elicitation.completed", &completed, true);
        self.answer(session, answer_to, Ok(answer));
        true
    }

    /// `session.commands.execute`: sends `command.execute` to the command's owner only.
    pub(crate) fn start_command(
        &mut self,
        session: &str,
        answer_to: AnswerTo,
        command_name: &str,
        args: &str,
    ) -> Result<(), String> {
        let Some(live) = self.sessions.get(session) else {
            return Err(session_not_found(session));
        };
        let owner = live
            .session
            .attached
            .iter()
            .find(|(_, a)| a.commands.iter().any(|c| c.name == command_name))
            .map(|(c, _)| *c);
        let Some(owner) = owner else {
            return Err(format!("Unknown command: {command_name}"));
        };
        let request_id = self.ids.next_uuid();
        let command = if args.is_empty() {
            format!("/{command_name}")
        } else {
            format!("/{command_name} {args}")
        };
        if let Some(live) = self.sessions.get_mut(session) {
            live.pending
                .insert(request_id.clone(), Pending::Command { owner, answer_to });
        }
        self.emit_to(
            session,
            "command.execute",
            &json!({"requestId": request_id, "command": command,
                    "commandName": command_name, "args": args}),
            true,
            Some(owner),
        );
        Ok(())
    }

    /// `session.commands.handlePendingCommand`: the owner ran the command (or failed to).
    pub(crate) fn resolve_command(
        &mut self,
        session: &str,
        request_id: &str,
        error: Option<&str>,
    ) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        if !matches!(live.pending.get(request_id), Some(Pending::Command { .. })) {
            return false;
        }
        let Some(Pending::Command { answer_to, .. }) = live.pending.shift_remove(request_id) else {
            return false;
        };
        live.resolved.insert(request_id.to_owned());
        self.emit(
            session,
            "command.completed",
            &json!({"requestId": request_id}),
            true,
        );
        let result = match error {
            None => Ok(json!({})),
            Some(e) => Err(e.to_owned()),
        };
        self.answer(session, answer_to, result);
        true
    }

    /// Resolves elicitations nobody can answer any more and commands whose owner left.
    pub(crate) fn resolve_client_requests_for_departed(&mut self, session: &str, conn: ConnId) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let providers_left = live.session.any_elicitation_handler();
        let samplers_left = live.session.attached.values().any(|a| a.request_sampling);
        let nobody_left = live.session.attached.is_empty();
        let queued: Vec<String> = live
            .pending
            .iter()
            .filter(|(_, p)| nobody_left && matches!(p, Pending::QueuedCommand))
            .map(|(id, _)| id.clone())
            .collect();
        let mut samplings = Vec::new();
        let mut elicitations = Vec::new();
        let mut commands = Vec::new();
        for (id, p) in &live.pending {
            match p {
                Pending::Elicitation { .. } if !providers_left => elicitations.push(id.clone()),
                Pending::Command { owner, .. } if *owner == conn => commands.push(id.clone()),
                Pending::Sampling { .. } if !samplers_left => samplings.push(id.clone()),
                _ => {}
            }
        }
        for id in elicitations {
            self.resolve_elicitation(session, &id, &json!({"action": "cancel"}));
        }
        for id in queued {
            // Nobody is left to run it: answered as not handled; the queue waits for a client.
            self.resolve_queued_command(session, &id, &json!({"handled": false}));
        }
        for id in samplings {
            if let Some(Pending::Sampling { answer_to, .. }) = self
                .sessions
                .get_mut(session)
                .and_then(|l| l.pending.shift_remove(&id))
            {
                if let Some(live) = self.sessions.get_mut(session) {
                    live.resolved.insert(id.clone());
                }
                self.emit(
                    session,
                    "sampling.completed",
                    &serde_json::json!({"requestId": id}),
                    true,
                );
                self.answer(
                    session,
                    answer_to,
                    Err("the last client that answers sampling left".into()),
                );
            }
        }
        for id in commands {
            self.resolve_command(
                session,
                &id,
                Some("the client that provides this command disconnected"),
            );
        }
    }
}

impl Host {
    /// `session.commands.enqueue`: queues a slash command; it is offered to clients as
    /// `command.queued` as soon as the session is idle, one at a time, in order.
    pub(crate) fn enqueue_command(
        &mut self,
        session: &str,
        command: &str,
    ) -> Result<Value, String> {
        let queue_id = self.ids.next_uuid();
        let Some(live) = self.sessions.get_mut(session) else {
            return Err(session_not_found(session));
        };
        live.command_queue
            .push_back((queue_id.clone(), command.to_owned()));
        // A new request restarts a queue a client stopped.
        live.command_queue_stopped = false;
        self.offer_queued_command(session);
        Ok(json!({"queued": true, "queueId": queue_id}))
    }

    /// Offers the next queued command when the session is idle and none is being answered.
    pub(crate) fn offer_queued_command(&mut self, session: &str) {
        if self.session_busy(session) {
            return;
        }
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let in_progress = live
            .pending
            .values()
            .any(|p| matches!(p, Pending::QueuedCommand));
        if in_progress || live.command_queue_stopped || live.session.attached.is_empty() {
            return;
        }
        let Some((request_id, command)) = live.command_queue.pop_front() else {
            return;
        };
        live.pending
            .insert(request_id.clone(), Pending::QueuedCommand);
        self.emit(
            session,
            "command.queued",
            &json!({"requestId": request_id, "command": command}),
            true,
        );
    }

    /// `session.commands.respondToQueuedCommand`: `result` is `{handled, stopProcessingQueue?}`.
    /// The first answer wins; then the next queued command is offered unless the client asked
    /// to stop the queue.
    pub(crate) fn resolve_queued_command(
        &mut self,
        session: &str,
        request_id: &str,
        result: &Value,
    ) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        if !matches!(live.pending.get(request_id), Some(Pending::QueuedCommand)) {
            return false;
        }
        live.pending.shift_remove(request_id);
        live.resolved.insert(request_id.to_owned());
        if result.get("stopProcessingQueue").and_then(Value::as_bool) == Some(true) {
            live.command_queue_stopped = true;
        }
        self.emit(
            session,
            "command.completed",
            &json!({"requestId": request_id}),
            true,
        );
        self.offer_queued_command(session);
        true
    }
}

/// Why a request for an unknown session fails (the dialect adds its own framing).
fn session_not_found(session: &str) -> String {
    format!("Session not found for sessionId: {session}")
}

impl Host {
    /// Delivers the answer of a pending request to whoever asked: the calling client's
    /// request is answered (an error in its dialect's wording), or the
    /// agent gets [`AgentInput::ClientAnswer`](crate::agent::AgentInput::ClientAnswer).
    pub(crate) fn answer(&mut self, session: &str, to: AnswerTo, result: Result<Value, String>) {
        match to {
            AnswerTo::Caller(conn, id) => {
                let result = result.map_err(|e| self.caller_error(conn, None, &e));
                self.respond(conn, &id, result);
            }
            AnswerTo::Agent(token) => self.queue_agent_input(
                session,
                crate::agent::AgentInput::ClientAnswer {
                    token,
                    outcome: result,
                },
            ),
            AnswerTo::Mcp { server, id } => self.answer_mcp(session, &server, &id, result),
            AnswerTo::AcpAgent { process, request } => {
                self.acp_answer(process, &request, result.map_err(|e| (-32000, e)))
            }
        }
    }
}
