//! What the agent asks of the session's clients (`SessionControl::ask_client`).
//!
//! Requests that go to one capable client as a server-to-client JSON-RPC request
//! (`userInput.request`, `exitPlanMode.request`, `autoModeSwitch.request`, `hooks.invoke`) are
//! correlated on that connection with a deadline; each ends in exactly one outcome (the
//! answer, an error, the deadline, or the connection closing), which the agent gets as
//! `AgentInput::ClientAnswer`. Broadcast-style requests (elicitation, sampling, commands)
//! are pending requests of the session, answered through `session.ui.*` /
//! `session.commands.*` methods. A request nobody can answer fails at once with a reason.

use std::time::Duration;

use serde_json::{json, Value};

use crate::agent::{AgentInput, ClientRequest};
use crate::correlation::Outcome;
use crate::jsonrpc::{self, OwnedId};
use crate::session::Attachment;

use crate::host::dialect::ServerRequest;
use crate::host::pending::{AnswerTo, ClientCall};
use crate::host::{ConnId, Host, Pending, TimerTarget};

/// How long a client has to answer a server-to-client request.
pub const CLIENT_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// Which server-to-client request a call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallKind {
    UserInput,
    ExitPlanMode,
    AutoModeSwitch,
    Hook,
    ProviderToken,
}

impl CallKind {
    fn request(self) -> ServerRequest {
        match self {
            CallKind::UserInput => ServerRequest::UserInput,
            CallKind::ExitPlanMode => ServerRequest::ExitPlanMode,
            CallKind::AutoModeSwitch => ServerRequest::AutoModeSwitch,
            CallKind::Hook => ServerRequest::Hook,
            CallKind::ProviderToken => ServerRequest::ProviderToken,
        }
    }

    /// The completion event for the `*.requested` event emitted with the call, if any.
    fn completed_event(self) -> Option<&'static str> {
        match self {
            CallKind::UserInput => Some("user_input.completed"),
            CallKind::ExitPlanMode => Some("exit_plan_mode.completed"),
            CallKind::AutoModeSwitch => Some("auto_mode_switch.completed"),
            CallKind::Hook | CallKind::ProviderToken => None,
        }
    }

    fn served_by(self, a: &Attachment) -> bool {
        match self {
            CallKind::UserInput => a.request_user_input,
            CallKind::ExitPlanMode => a.request_exit_plan_mode,
            CallKind::AutoModeSwitch => a.request_auto_mode_switch,
            CallKind::Hook => a.hooks,
            // The SDK that set `hasBearerTokenProvider` answers for its session.
            CallKind::ProviderToken => a.extension.is_none(),
        }
    }
}

/// Who asked for a sampling: the `serverName` / `mcpRequestId` of `sampling.requested` and
/// where the answer goes.
pub(crate) struct SamplingOrigin<'a> {
    pub(crate) server_name: &'a str,
    pub(crate) mcp_request_id: Value,
    pub(crate) answer_to: AnswerTo,
}

/// A server-to-client request made for the session's agent.
#[derive(Clone, Debug)]
pub(crate) struct AgentCall {
    session: String,
    token: u64,
    request_id: String,
    kind: CallKind,
}

impl Host {
    /// Starts a client request for the session's agent and returns its token.
    pub(crate) fn ask_client(&mut self, session: &str, request: ClientRequest) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        if let Err(reason) = self.start_client_request(session, token, request) {
            self.queue_agent_input(
                session,
                AgentInput::ClientAnswer {
                    token,
                    outcome: Err(reason),
                },
            );
        }
        token
    }

    fn start_client_request(
        &mut self,
        session: &str,
        token: u64,
        request: ClientRequest,
    ) -> Result<(), String> {
        let request_id = self.ids.next_uuid();
        let (kind, params, event) = match request {
            ClientRequest::Elicitation {
                message,
                schema,
                url,
            } => {
                let mut req = json!({"message": message});
                if let Some(schema) = schema {
                    req["requestedSchema"] = schema;
                }
                if let Some(url) = url {
                    req["mode"] = json!("url");
                    req["url"] = json!(url);
                }
                return self.start_elicitation(session, AnswerTo::Agent(token), &req);
            }
            ClientRequest::Command { command_line } => {
                let line = command_line.trim_start_matches('/');
                let (name, args) = line.split_once(' ').unwrap_or((line, ""));
                return self.start_command(session, AnswerTo::Agent(token), name, args);
            }
            ClientRequest::Sampling { request } => {
                return self.start_sampling(session, token, request_id, request);
            }
            ClientRequest::UserInput {
                question,
                choices,
                allow_freeform,
            } => {
                let mut params = json!({"question": question, "allowFreeform": allow_freeform});
                if !choices.is_empty() {
                    params["choices"] = json!(choices);
                }
                (CallKind::UserInput, params, Some("user_input.requested"))
            }
            ClientRequest::ExitPlanMode {
                summary,
                plan,
                actions,
                recommended,
            } => (
                CallKind::ExitPlanMode,
                json!({"summary": summary, "planContent": plan, "actions": actions,
                       "recommendedAction": recommended}),
                Some("exit_plan_mode.requested"),
            ),
            ClientRequest::AutoModeSwitch {
                error_code,
                retry_after_seconds,
            } => {
                let mut params = json!({});
                if let Some(code) = error_code {
                    params["errorCode"] = json!(code);
                }
                if let Some(seconds) = retry_after_seconds {
                    params["retryAfterSeconds"] = json!(seconds);
                }
                (
                    CallKind::AutoModeSwitch,
                    params,
                    Some("auto_mode_switch.requested"),
                )
            }
            ClientRequest::ProviderToken { provider_name } => (
                CallKind::ProviderToken,
                json!({"providerName": provider_name}),
                None,
            ),
            ClientRequest::Hook {
                hook_type,
                mut input,
            } => {
                // Every hook input carries the session, the time and the working directory.
                if input.is_object() {
                    input = self.hook_input(session, input);
                }
                (
                    CallKind::Hook,
                    json!({"hookType": hook_type, "input": input}),
                    None,
                )
            }
        };
        let live = self.sessions.get(session).ok_or("the session is gone")?;
        let conn = live
            .session
            .attached
            .iter()
            .find(|(_, a)| kind.served_by(a))
            .map(|(c, _)| *c)
            .ok_or_else(|| {
                format!(
                    "no attached client handles {}",
                    self.request_name(kind.request())
                )
            })?;
        if let Some(event) = event {
            let mut data = params.clone();
            data["requestId"] = json!(request_id);
            self.emit(session, event, &data, true);
        }
        let mut params = params;
        params["sessionId"] = json!(session);
        params["requestId"] = json!(request_id);
        let call = ClientCall::Agent(AgentCall {
            session: session.to_owned(),
            token,
            request_id,
            kind,
        });
        self.send_client_call(conn, kind.request(), &params, call)
    }

    /// How errors name `request`: its method on the wire of the first dialect that has it,
    /// else a description in words.
    pub(crate) fn request_name(&self, request: ServerRequest) -> &'static str {
        self.dialects
            .iter()
            .find_map(|d| d.server_request_method(request))
            .unwrap_or_else(|| request.describe())
    }

    /// Sends `request` to `conn` as a server-to-client request correlated with `call`, named
    /// as the connection's dialect names it (see [`Host::send_client_request`]).
    pub(crate) fn send_client_call(
        &mut self,
        conn: ConnId,
        request: ServerRequest,
        params: &Value,
        call: ClientCall,
    ) -> Result<(), String> {
        let Some(c) = self.conns.get(&conn) else {
            return Err("the client left".into());
        };
        let Some(method) = self.dialects[c.dialect.index()].server_request_method(request) else {
            return Err(format!(
                "this client's protocol has no {}",
                request.describe()
            ));
        };
        self.send_client_request(conn, method, params, call)
    }

    /// Sends `method` to `conn` as a server-to-client request correlated with `call`, with
    /// the [`CLIENT_CALL_TIMEOUT`] deadline. The call then ends exactly once, in
    /// [`Host::finish_client_call`]. Dialects name the method themselves.
    pub(crate) fn send_client_request(
        &mut self,
        conn: ConnId,
        method: &str,
        params: &Value,
        call: ClientCall,
    ) -> Result<(), String> {
        let mut body = Vec::with_capacity(160);
        let deadline = self.now.saturating_add(CLIENT_CALL_TIMEOUT);
        let Some(c) = self.conns.get_mut(&conn) else {
            return Err("the client left".into());
        };
        let id = c.calls.start(None, call);
        jsonrpc::write_request(&mut body, &id, method, params)
            .map_err(|e| format!("request not serialisable: {e}"))?;
        self.send_body(conn, &body);
        let seq = self.timer_seq;
        self.timer_seq += 1;
        self.timers
            .insert((deadline, seq), TimerTarget::ClientCall(conn, id));
        Ok(())
    }

    fn start_sampling(
        &mut self,
        session: &str,
        token: u64,
        request_id: String,
        request: Value,
    ) -> Result<(), String> {
        let origin = SamplingOrigin {
            server_name: "agentwire-scripted",
            mcp_request_id: json!(token),
            answer_to: AnswerTo::Agent(token),
        };
        self.announce_sampling(session, request_id, request, origin)
    }

    /// `sampling.requested` for a sampling request, pending until a client answers
    /// (`session.ui.handlePendingSampling`); an error when no client can.
    pub(crate) fn announce_sampling(
        &mut self,
        session: &str,
        request_id: String,
        request: Value,
        origin: SamplingOrigin<'_>,
    ) -> Result<(), String> {
        let interest = self.has_interest(session, "sampling.requested");
        let live = self
            .sessions
            .get_mut(session)
            .ok_or("the session is gone")?;
        if !interest && !live.session.attached.values().any(|a| a.request_sampling) {
            return Err("sampling is not available: no attached client answers sampling requests (requestSampling)".into());
        }
        let data = json!({"requestId": request_id, "serverName": origin.server_name,
                          "mcpRequestId": origin.mcp_request_id, "request": request});
        live.pending.insert(
            request_id.clone(),
            Pending::Sampling {
                answer_to: origin.answer_to,
                announced: Box::new(data.clone()),
            },
        );
        self.emit(session, "sampling.requested", &data, true);
        Ok(())
    }

    /// `session.ui.handlePendingSampling`: the first answer wins; no `response` rejects.
    pub(crate) fn resolve_sampling(
        &mut self,
        session: &str,
        request_id: &str,
        response: Option<Value>,
    ) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        if !matches!(live.pending.get(request_id), Some(Pending::Sampling { .. })) {
            return false;
        }
        let Some(Pending::Sampling { answer_to, .. }) = live.pending.shift_remove(request_id)
        else {
            return false;
        };
        live.resolved.insert(request_id.to_owned());
        self.emit(
            session,
            "sampling.completed",
            &json!({"requestId": request_id}),
            true,
        );
        let outcome = response.ok_or_else(|| "the client rejected the sampling request".to_owned());
        self.answer(session, answer_to, outcome);
        true
    }

    /// Ends a server-to-client call with `outcome`: emits its completion event and hands the
    /// answer to the agent.
    pub(crate) fn finish_client_call(&mut self, call: ClientCall, outcome: Outcome) {
        let call = match call {
            ClientCall::Agent(call) => call,
            ClientCall::Canvas(call) => return self.finish_canvas_call(*call, outcome),
            ClientCall::Http { call } => return self.finish_http_frame(call, outcome),
            ClientCall::Fs(call) => return self.finish_fs_call(*call, outcome),
            ClientCall::StateFile {
                session,
                conn,
                write,
            } => return self.finish_state_write(&session, conn, *write, outcome),
            ClientCall::ModelsToken { call } => return self.models_token_answered(call, outcome),
            ClientCall::PromptHook { session, hook } => {
                return self.prompt_hook_answered(&session, hook, outcome)
            }
            ClientCall::McpHook {
                session,
                invocation,
                call,
            } => return self.mcp_hook_answered(&session, &invocation, *call, outcome),
            ClientCall::SystemTransform { session } => {
                return self.system_transform_answered(&session, outcome)
            }
            ClientCall::Factory(call) => return self.finish_factory_call(*call, outcome),
            ClientCall::FactoryAbort => return,
            ClientCall::Dialect {
                dialect,
                session,
                tag,
            } => {
                let handler = self.dialects[dialect.index()];
                return handler.client_call_finished(self, &session, tag, outcome);
            }
        };
        let result: Result<Value, String> = match outcome {
            Outcome::Result(raw) => serde_json::from_str(raw.get()).map_err(|e| e.to_string()),
            Outcome::Error(e) => Err(e.message),
            Outcome::Cancelled => Err("cancelled".into()),
            Outcome::TimedOut => Err(format!(
                "the client did not answer {} in time",
                self.request_name(call.kind.request())
            )),
            Outcome::Closed => Err("the client's connection closed".into()),
        };
        if let Some(event) = call.kind.completed_event() {
            let mut data = json!({"requestId": call.request_id});
            if let Ok(Value::Object(fields)) = &result {
                for (k, v) in fields {
                    if k != "requestId" {
                        data[k] = v.clone();
                    }
                }
            }
            self.emit(&call.session, event, &data, true);
        }
        self.queue_agent_input(
            &call.session,
            AgentInput::ClientAnswer {
                token: call.token,
                outcome: result,
            },
        );
    }

    /// A call's deadline passed: tell the client to stop (`$/cancelRequest`) and end the
    /// call as timed out. A call already answered is left alone.
    pub(crate) fn client_call_timed_out(&mut self, conn: ConnId, id: &OwnedId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(call) = c.calls.cancel(id) else {
            return;
        };
        let mut body = Vec::with_capacity(64);
        if jsonrpc::write_notification(&mut body, "$/cancelRequest", &json!({"id": id})).is_ok() {
            self.send_body(conn, &body);
        }
        self.finish_client_call(call, Outcome::TimedOut);
    }
}
