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

use serde_json::{json, Value};

use crate::agent::HttpEvent;
use crate::jsonrpc::OwnedId;
use crate::model::{
    build_chat_request, CallOutput, ChatMessage, ChatRequest, ModelCall, ModelEvent, StreamDialect,
};
use crate::Timestamp;

use crate::host::{ConnId, Host, TimerTarget};

/// One sampling execution in flight.
pub(crate) struct SamplingExec {
    session: String,
    conn: ConnId,
    id: OwnedId,
    call: ModelCall,
    model: String,
    /// The HTTP exchange of the current attempt.
    http: Option<u64>,
    timer: Option<(Timestamp, u64)>,
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
        let http = build_chat_request(&setup.provider, &chat, None).map_err(|e| e.to_string())?;
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
            setup.call,
        );
        self.sampling_execs.insert(
            request_id.to_owned(),
            SamplingExec {
                session: session.to_owned(),
                conn,
                id: id.clone(),
                call,
                model,
                http: None,
                timer: None,
            },
        );
        self.pump_sampling(request_id);
        Ok(())
    }

    /// `session.mcp.cancelSamplingExecution`: whether an execution was running.
    pub(crate) fn cancel_sampling_execution(&mut self, session: &str, request_id: &str) -> bool {
        if self
            .sampling_execs
            .get(request_id)
            .is_none_or(|e| e.session != session)
        {
            return false;
        }
        let Some(exec) = self.sampling_execs.remove(request_id) else {
            return false;
        };
        self.end_sampling(exec, json!({"action": "cancelled"}));
        true
    }

    /// Ends every execution of `session` as cancelled (the session is going away).
    pub(crate) fn cancel_sampling_of(&mut self, session: &str) {
        let ids: Vec<String> = self
            .sampling_execs
            .iter()
            .filter(|(_, e)| e.session == session)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.cancel_sampling_execution(session, &id);
        }
    }

    fn end_sampling(&mut self, exec: SamplingExec, result: Value) {
        if let Some(call) = exec.http {
            if self.sampling_http.remove(&call).is_some() {
                self.http_cancel(call);
            }
        }
        if let Some(key) = exec.timer {
            self.timers.remove(&key);
        }
        self.respond(exec.conn, &exec.id, Ok(result));
    }

    /// Acts on what the call produced; answers the caller once it ended.
    fn pump_sampling(&mut self, request_id: &str) {
        let mut ended = None;
        let mut sends = Vec::new();
        let mut cancels = Vec::new();
        if let Some(exec) = self.sampling_execs.get_mut(request_id) {
            while let Some(out) = exec.call.poll() {
                match out {
                    CallOutput::Send(request) => sends.push(request),
                    CallOutput::Cancel => cancels.extend(exec.http.take()),
                    CallOutput::Retrying { .. } | CallOutput::Event(_) => {
                        if let CallOutput::Event(ModelEvent::Done(response)) = out {
                            let stop = match response.finish_reason.as_deref() {
                                Some("length" | "max_tokens" | "max_output_tokens") => "maxTokens",
                                _ => "endTurn",
                            };
                            ended = Some(json!({"action": "success", "result": {
                                "role": "assistant",
                                "content": {"type": "text", "text": response.text},
                                "model": response.model.unwrap_or_else(|| exec.model.clone()),
                                "stopReason": stop,
                            }}));
                        }
                    }
                    CallOutput::Failed(e) => {
                        ended = Some(json!({"action": "failure", "error": e.to_string()}));
                    }
                }
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
