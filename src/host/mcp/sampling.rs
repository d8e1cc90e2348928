//! Running an MCP sampling request on the session's own model
//! (`session.mcp.executeSampling {requestId, serverName, mcpRequestId, request}`).
//!
//! The MCP `CreateMessageRequest` params (`messages` of text content, `systemPrompt`,
//! `maxTokens`) become one chat completion on the session's provider ([`ModelCall`], the same
//! state machine, deadlines and retries as the model loop; HTTP through
//! [`EffectOp::HttpRequest`](crate::host::EffectOp::HttpRequest)). The caller's request is answered
//! when it ends: `{action: "success", result: {role: "assistant", content: {type: "text", text},
//! model, stopReason}}`, `{action: "failure", error}`, or `{action: "cancelled"}` after
//! `session.mcp.cancelSamplingExecution`. The client then delivers (or edits) the result with
//! `session.ui.handlePendingSampling`.
//!
//! The same one-shot call answers an *ephemeral query* (`session.ui.ephemeralQuery
//! {question}`): the question is asked after the session's conversation, with its system
//! prompt and no tools, and nothing is added to the conversation. Its progress is the
//! ephemeral `ui.ephemeral_query` event (`{requestId, phase}`: `started`, a `chunk` per text
//! delta, then `completed` with the `answer`, `failed` with the `error`, or `aborted` when the
//! session goes away), and the caller gets `{answer}` or the error.

use serde_json::{json, Value};

use crate::agent::HttpEvent;
use crate::jsonrpc::OwnedId;
use crate::model::{
    build_chat_request, CallOutput, ChatMessage, ChatRequest, ModelCall, ModelEvent, StreamDialect,
};
use crate::Timestamp;

use crate::host::{ConnId, Host, TimerTarget};

/// What a one-shot model call answers.
pub(crate) enum SideCall {
    /// An MCP sampling request (`{action, result}`).
    Sampling,
    /// An ephemeral query: its chunks and outcome are `ui.ephemeral_query` events.
    EphemeralQuery,
    /// A compaction of the session's conversation (`sessions/compaction.rs`): its outcome is
    /// `session.compaction_complete`; nobody waits for an answer.
    Compaction(CompactionJob),
}

/// A compaction in flight (`sessions/compaction.rs`): what `session.compaction_complete` reports of the conversation it
/// replaces.
pub(crate) struct CompactionJob {
    /// Estimated tokens of the conversation summarized.
    pub(crate) pre_tokens: u64,
    /// Conversation messages summarized.
    pub(crate) messages: usize,
    /// The context window the threshold was measured against.
    pub(crate) token_limit: u64,
    /// Estimated tokens of the compaction request (reported when the provider reports no
    /// usage).
    pub(crate) input_estimate: u64,
}

/// An ephemeral query waiting for the server default's model to be chosen (as a prompt
/// waits for it: `turn_gate.rs`).
pub(crate) struct WaitingQuery {
    session: String,
    conn: ConnId,
    id: OwnedId,
    question: String,
}

/// One sampling execution (or ephemeral query) in flight.
pub(crate) struct SamplingExec {
    session: String,
    /// Who gets the answer (none for a compaction).
    to: Option<(ConnId, OwnedId)>,
    call: ModelCall,
    kind: SideCall,
    model: String,
    /// The HTTP exchange of the current attempt.
    http: Option<u64>,
    timer: Option<(Timestamp, u64)>,
}

impl SamplingExec {
    /// Whether this is a compaction of `session`.
    pub(crate) fn compacts(&self, session: &str) -> bool {
        self.session == session && matches!(self.kind, SideCall::Compaction(_))
    }
}

/// The chat messages of an MCP `CreateMessageRequest`.
fn chat_messages(request: &Value) -> Result<Vec<ChatMessage>, String> {
    let mut out = Vec::new();
    if let Some(system) = request.get("systemPrompt").and_then(Value::as_str) {
        out.push(ChatMessage::System(system.to_owned()));
    }
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("request.messages is missing")?;
    for message in messages {
        let text = text_of(message.get("content").unwrap_or(&Value::Null));
        match message.get("role").and_then(Value::as_str) {
            Some("user") => out.push(ChatMessage::User(text)),
            Some("assistant") => out.push(ChatMessage::Assistant {
                content: Some(text),
                tool_calls: Vec::new(),
            }),
            other => return Err(format!("unknown message role {other:?}")),
        }
    }
    Ok(out)
}

/// The text of a content block or a list of them (other kinds are described).
fn text_of(content: &Value) -> String {
    match content {
        Value::Array(blocks) => blocks.iter().map(text_of).collect::<Vec<_>>().join("\n"),
        block => match block.get("type").and_then(Value::as_str) {
            Some("text") => block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Some(kind) => format!("[{kind}]"),
            None => String::new(),
        },
    }
}

impl Host {
    /// Starts running `request` on `session`'s model for `conn`'s request `id`; an error
    /// when it cannot start (no model, a bad request, a duplicate `request_id`).
    pub(crate) fn execute_sampling(
        &mut self,
        session: &str,
        conn: ConnId,
        id: &OwnedId,
        request_id: &str,
        request: &Value,
    ) -> Result<(), String> {
        if self.sampling_execs.contains_key(request_id) {
            return Err(format!(
                "a sampling execution {request_id} is already running"
            ));
        }
        let setup = self.model_setup(session)?;
        let messages = chat_messages(request)?;
        let mut chat = ChatRequest::new(setup.model.as_deref(), &messages, &[]);
        chat.max_output_tokens = request.get("maxTokens").and_then(Value::as_u64);
        let exec = self.side_call(session, Some((conn, id)), &setup, &chat, SideCall::Sampling)?;
        self.sampling_execs.insert(request_id.to_owned(), exec);
        self.pump_sampling(request_id);
        Ok(())
    }

    /// The one-shot call of `chat` on `setup`'s provider for `to` (a connection's request).
    pub(crate) fn side_call(
        &self,
        session: &str,
        to: Option<(ConnId, &OwnedId)>,
        setup: &crate::agent::ModelSetup,
        chat: &ChatRequest<'_>,
        kind: SideCall,
    ) -> Result<SamplingExec, String> {
        let http = build_chat_request(&setup.provider, chat, None).map_err(|e| e.to_string())?;
        let model = setup
            .provider
            .wire_model_name(setup.model.as_deref())
            .unwrap_or_default()
            .to_owned();
        let call = ModelCall::new(
            self.now,
            http,
            StreamDialect::of(&setup.provider),
            model.clone(),
            setup.call.clone(),
        );
        Ok(SamplingExec {
            session: session.to_owned(),
            to: to.map(|(conn, id)| (conn, id.clone())),
            call,
            kind,
            model,
            http: None,
            timer: None,
        })
    }

    /// Starts answering `question` from `session`'s conversation for `conn`'s request `id`
    /// (`session.ui.ephemeralQuery`): the conversation so far, its system prompt, the question;
    /// no tools, nothing added to the conversation. An error when the session has no model.
    pub(crate) fn start_ephemeral_query(
        &mut self,
        session: &str,
        conn: ConnId,
        id: &OwnedId,
        question: &str,
    ) -> Result<(), String> {
        if self.needs_default_choice(session)
            && self.models_lists.default_choice != crate::host::models_list::DefaultChoice::Failed
        {
            self.ask_default_choice();
            if self.needs_default_choice(session)
                && self.models_lists.default_choice
                    != crate::host::models_list::DefaultChoice::Failed
            {
                self.waiting_queries.push(WaitingQuery {
                    session: session.to_owned(),
                    conn,
                    id: id.clone(),
                    question: question.to_owned(),
                });
                return Ok(());
            }
        }
        let setup = self.model_setup(session)?;
        // The conversation carries the system prompt it was started with (its
        // `system.message`); one that has not started yet gets the session's.
        let mut messages = self.model_history(session);
        if !matches!(messages.first(), Some(ChatMessage::System(_))) {
            messages.insert(0, ChatMessage::System(setup.system_prompt.clone()));
        }
        messages.push(ChatMessage::User(question.to_owned()));
        let mut chat = ChatRequest::new(setup.model.as_deref(), &messages, &[]);
        chat.reasoning_effort = setup.reasoning_effort.as_deref();
        let exec = self.side_call(
            session,
            Some((conn, id)),
            &setup,
            &chat,
            SideCall::EphemeralQuery,
        )?;
        let query = self.ids.next_uuid();
        self.emit(
            session,
            "ui.ephemeral_query",
            &json!({"requestId": query, "phase": "started"}),
            true,
        );
        self.sampling_execs.insert(query.clone(), exec);
        self.pump_sampling(&query);
        Ok(())
    }

    /// The server default's model was chosen (or could not be): the queries that waited for
    /// it start, or fail with the reason.
    pub(crate) fn start_waiting_queries(&mut self) {
        for q in std::mem::take(&mut self.waiting_queries) {
            if let Err(reason) = self.start_ephemeral_query(&q.session, q.conn, &q.id, &q.question)
            {
                let Some(dialect) = self.conns.get(&q.conn).map(|c| c.dialect) else {
                    continue;
                };
                let error = self.dialects[dialect.index()]
                    .request_failed(Some("session.ui.ephemeralQuery"), &reason);
                self.respond(q.conn, &q.id, Err(error));
            }
        }
    }

    /// `session.mcp.cancelSamplingExecution`: whether an execution was running.
    pub(crate) fn cancel_sampling_execution(&mut self, session: &str, request_id: &str) -> bool {
        if self
            .sampling_execs
            .get(request_id)
            .is_none_or(|e| e.session != session || !matches!(e.kind, SideCall::Sampling))
        {
            return false;
        }
        let Some(exec) = self.sampling_execs.remove(request_id) else {
            return false;
        };
        self.end_sampling(exec, Ok(json!({"action": "cancelled"})));
        true
    }

    /// Ends every execution and ephemeral query of `session` as cancelled (the session is
    /// going away).
    pub(crate) fn cancel_sampling_of(&mut self, session: &str) {
        let ids: Vec<String> = self
            .sampling_execs
            .iter()
            .filter(|(_, e)| e.session == session)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            if !self.cancel_sampling_execution(session, &id) {
                if let Some(exec) = self.sampling_execs.remove(&id) {
                    let reason = "the session ended before the query was answered";
                    self.emit(
                        session,
                        "ui.ephemeral_query",
                        &json!({"requestId": id, "phase": "aborted"}),
                        true,
                    );
                    self.end_sampling(exec, Err(reason.to_owned()));
                }
            }
        }
    }

    fn end_sampling(&mut self, exec: SamplingExec, result: Result<Value, String>) {
        if let Some(call) = exec.http {
            if self.sampling_http.remove(&call).is_some() {
                self.http_cancel(call);
            }
        }
        if let Some(key) = exec.timer {
            self.timers.remove(&key);
        }
        if let SideCall::Compaction(job) = exec.kind {
            return self.compaction_done(&exec.session, job, result);
        }
        let result = result.map_err(|reason| {
            crate::jsonrpc::ErrorObject::new(crate::jsonrpc::code::INTERNAL_ERROR, reason)
        });
        if let Some((conn, id)) = exec.to {
            self.respond(conn, &id, result);
        }
    }

    /// Acts on what the call produced; answers the caller once it ended.
    pub(crate) fn pump_sampling(&mut self, request_id: &str) {
        let mut ended = None;
        let mut sends = Vec::new();
        let mut cancels = Vec::new();
        let mut chunks = Vec::new();
        let mut session = None;
        if let Some(exec) = self.sampling_execs.get_mut(request_id) {
            let query = matches!(exec.kind, SideCall::EphemeralQuery);
            let compaction = matches!(exec.kind, SideCall::Compaction(_));
            session = Some(exec.session.clone());
            while let Some(out) = exec.call.poll() {
                match out {
                    CallOutput::Event(ModelEvent::Done(response)) if compaction => {
                        let usage = response.usage.unwrap_or_default();
                        ended = Some(Ok(json!({"summary": response.text,
                                               "inputTokens": usage.input_tokens,
                                               "outputTokens": usage.output_tokens,
                                               "cacheReadTokens": usage.cache_read_tokens,
                                               "model": response.model.unwrap_or_else(|| exec.model.clone())})));
                    }
                    CallOutput::Failed(e) if compaction => ended = Some(Err(e.to_string())),
                    CallOutput::Send(request) => sends.push(request),
                    CallOutput::Cancel => cancels.extend(exec.http.take()),
                    CallOutput::Event(ModelEvent::TextDelta(text)) if query => chunks.push(text),
                    CallOutput::Event(ModelEvent::Done(response)) if query => {
                        ended = Some(Ok(json!({"answer": response.text})));
                    }
                    CallOutput::Failed(e) if query => ended = Some(Err(e.to_string())),
                    CallOutput::Retrying { .. } | CallOutput::Event(_) => {
                        if let CallOutput::Event(ModelEvent::Done(response)) = out {
                            let stop = match response.finish_reason.as_deref() {
                                Some("length" | "max_tokens" | "max_output_tokens") => "maxTokens",
                                _ => "endTurn",
                            };
                            ended = Some(Ok(json!({"action": "success", "result": {
                                "role": "assistant",
                                "content": {"type": "text", "text": response.text},
                                "model": response.model.unwrap_or_else(|| exec.model.clone()),
                                "stopReason": stop,
                            }})));
                        }
                    }
                    CallOutput::Failed(e) => {
                        ended = Some(Ok(json!({"action": "failure", "error": e.to_string()})));
                    }
                }
            }
        }
        if let Some(session) = &session {
            for chunk in chunks {
                let data = json!({"requestId": request_id, "phase": "chunk", "chunk": chunk});
                self.emit(session, "ui.ephemeral_query", &data, true);
            }
        }
        for call in cancels {
            if self.sampling_http.remove(&call).is_some() {
                self.http_cancel(call);
            }
        }
        for request in sends {
            let call = self.next_effect_id().get();
            self.sampling_http.insert(call, request_id.to_owned());
            if let Some(e) = self.sampling_execs.get_mut(request_id) {
                e.http = Some(call);
            }
            self.http_request(call, request);
        }
        if let Some(result) = ended {
            if let Some(exec) = self.sampling_execs.remove(request_id) {
                if matches!(exec.kind, SideCall::EphemeralQuery) {
                    let data = match &result {
                        Ok(answer) => json!({"requestId": request_id, "phase": "completed",
                                             "answer": answer["answer"]}),
                        Err(error) => json!({"requestId": request_id, "phase": "failed",
                                             "error": error}),
                    };
                    self.emit(&exec.session, "ui.ephemeral_query", &data, true);
                }
                self.end_sampling(exec, result);
            }
            return;
        }
        self.rearm_sampling_timer(request_id);
    }

    fn rearm_sampling_timer(&mut self, request_id: &str) {
        let seq = self.timer_seq;
        let Some(exec) = self.sampling_execs.get_mut(request_id) else {
            return;
        };
        let due = exec.call.next_deadline();
        if exec.timer.map(|(t, _)| t) == due {
            return;
        }
        if let Some(old) = exec.timer.take() {
            self.timers.remove(&old);
        }
        if let Some(at) = due {
            exec.timer = Some((at, seq));
            self.timer_seq += 1;
            self.timers
                .insert((at, seq), TimerTarget::Sampling(request_id.to_owned()));
        }
    }

    /// A sampling execution's deadline.
    pub(crate) fn sampling_timer_fired(&mut self, request_id: &str, key: (Timestamp, u64)) {
        let now = self.now;
        let Some(exec) = self.sampling_execs.get_mut(request_id) else {
            return;
        };
        if exec.timer != Some(key) {
            return;
        }
        exec.timer = None;
        exec.call.handle_timeout(now);
        self.pump_sampling(request_id);
    }

    /// Whether `call` belongs to a sampling execution; if so, `event` is handled.
    pub(crate) fn sampling_http_input(&mut self, call: u64, event: HttpEvent, last: bool) -> bool {
        let Some(request_id) = self.sampling_http.get(&call).cloned() else {
            return false;
        };
        if last {
            self.sampling_http.remove(&call);
        }
        let now = self.now;
        if let Some(exec) = self.sampling_execs.get_mut(&request_id) {
            match event {
                HttpEvent::Response { status, headers } => {
                    exec.call.handle_response(now, status, &headers)
                }
                HttpEvent::Body(bytes) => exec.call.handle_body(now, &bytes),
                HttpEvent::End => exec.call.handle_end(now),
                HttpEvent::Error { kind, message } => {
                    exec.call.handle_transport_error(now, kind, &message)
                }
            }
        }
        self.pump_sampling(&request_id);
        true
    }
}
