//! The model agent: each prompt becomes model calls (Chat Completions or Anthropic Messages
//! over [`SessionControl::http_request`]), the model's tool calls (all of a response's at
//! once) go through the client tool bridge or, for the built-in tools
//! ([`super::model_tools`]), the host, and their results go back to the model, in call
//! order, until it answers without tools.
//!
//! Events per prompt, as the real runtime emits them (`wire.jsonl:14-87`): `user.message`,
//! `system.message`, then per model call `assistant.turn_start {turnId, interactionId}`,
//! `assistant.streaming_delta` / `assistant.message_start` / `assistant.message_delta` /
//! `assistant.reasoning_delta` / `assistant.tool_call_delta` (streaming clients only),
//! `assistant.reasoning`, `assistant.usage` (ephemeral), `assistant.message`, the tool calls,
//! `assistant.turn_end`; at the end `assistant.idle` and `session.idle`. A failed call emits
//! `session.error` and ends the turn; the session stays usable.

mod children;

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::{
    Agent, AgentInput, ClientRequest, HttpEvent, ModelSetup, PromptContext, SessionControl,
    ToolOutcome,
};
use crate::model::{
    build_chat_request, current_datetime, user_message_content, CallOutput, ChatRequest,
    HttpHeader, ModelCall, ModelError, ModelErrorKind, ModelEvent, ModelResponse, Secret,
    StreamDialect, ToolCall, ToolSpec, Usage,
};
use crate::Timestamp;

/// An agent backed by a model provider.
#[derive(Default)]
pub struct ModelAgent {
    run: Option<Run>,
    queued: VecDeque<(String, String, PromptContext)>,
    /// Prompts sent to steer the running interaction (`mode: "immediate"`), given to the
    /// model at its next call; what is left when the interaction ends is queued.
    steering: VecDeque<(String, String, PromptContext)>,
    /// The client tools offered to the last prompt's model calls (`None` before the first).
    last_client_tools: Option<Vec<String>>,
    /// A `session.usage_info` went out (the next is not `isInitial`).
    usage_reported: bool,
    /// Its sub-agents: the one a `task` call waits for, background agents, `read_agent`
    /// calls waiting for one.
    agents: children::SubAgents,
}

/// One prompt's interaction.
struct Run {
    message_id: String,
    interaction_id: String,
    /// Counts model calls in this interaction.
    turn: u64,
    setup: ModelSetup,
    tools: Vec<ToolSpec>,
    /// The built-in tools among `tools` (the host performs them, not a client).
    builtins: Vec<String>,
    /// Cumulative bytes of text and tool calls streamed in this interaction.
    total_bytes: u64,
    /// `ask_user` calls waiting for the user: the `ask_client` token and the tool call id.
    asks: Vec<(u64, String)>,
    /// `exit_plan_mode` calls waiting for the user: the `ask_client` token and the tool call
    /// id.
    plan_exits: Vec<(u64, String)>,
    /// The prompt's `requestHeaders`, sent with each model call of the turn.
    request_headers: Vec<(String, String)>,
    /// The tool calls of the last response.
    calls: Vec<ToolCall>,
    /// Calls waiting for their `preToolUse` hook, by `ask_client` token.
    pre_hooks: Vec<(u64, String, ToolCall)>,
    /// Finished calls waiting for their `postToolUse` hook: token and tool call id.
    post_hooks: Vec<(u64, String, String)>,
    /// A call of the response was refused outright ([`ToolOutcome::ends_turn`]): the turn
    /// ends when the calls are done instead of calling the model again.
    refused: bool,
    /// How many times in a row an `agentStop` hook kept the agent running.
    stop_blocks: u32,
    /// A client was asked to switch to the `auto` model in this interaction.
    auto_switch_asked: bool,
    /// Calls of the last response the agent serves with its sub-agents (`task`,
    /// `read_agent`, `list_agents`), served once every call of the response is dispatched.
    agent_calls: Vec<children::AgentCall>,
    step: Step,
}

impl Run {
    /// Whether this run waits for the answer with `token`.
    fn awaits_token(&self, token: u64) -> bool {
        self.pre_hooks.iter().any(|(t, _, _)| *t == token)
            || self.post_hooks.iter().any(|(t, _, _)| *t == token)
            || self.asks.iter().any(|(t, _)| *t == token)
            || self.plan_exits.iter().any(|(t, _)| *t == token)
            || matches!(self.step, Step::Token(t) | Step::AutoSwitch(t) if t == token)
            || matches!(&self.step, Step::StopHook { token: t, .. } if *t == token)
    }
}

/// How many times in a row an `agentStop` hook may keep the agent running; a further `block`
/// is ignored and the agent stops.
const MAX_STOP_BLOCKS: u32 = 5;

enum Step {
    /// Waiting for the client's bearer token (`providerToken.getToken`, the
    /// [`SessionControl::ask_client`] token) before the model call.
    Token(u64),
    /// A model call is running.
    Calling(Box<Active>),
    /// The response's tool calls are running, all at once; `waiting` holds the ids of those
    /// not finished yet.
    Tools { waiting: Vec<String> },
    /// The model stopped; the `agentStop` hook (its `ask_client` token and invocation id)
    /// decides whether the agent goes on.
    StopHook { token: u64, invocation: String },
    /// The model is rate limiting the session; a client decides whether it switches to the
    /// `auto` model (the [`SessionControl::ask_client`] token).
    AutoSwitch(u64),
}

/// The model a rate-limited session may switch to (`autoModeSwitch.request`).
const AUTO_MODEL: &str = "auto";

struct Active {
    call: ModelCall,
    http: Option<u64>,
    message_id: Option<String>,
    reasoning_id: Option<String>,
    usage: Option<Usage>,
    api_call_id: Option<String>,
    /// The streaming payloads, kept and updated in place for each delta (no JSON objects
    /// built per chunk): `{totalResponseSizeBytes}`, `{messageId, deltaContent}`,
    /// `{reasoningId, deltaContent}`.
    size_payload: Option<Value>,
    message_payload: Option<Value>,
    reasoning_payload: Option<Value>,
}

impl ModelAgent {
    /// An idle model agent.
    pub fn new() -> Self {
        ModelAgent::default()
    }

    /// The runtime's `<tools_changed_notice>` (then a blank line) before a prompt when client
    /// tools the last prompt offered are gone (their client left); empty otherwise.
    fn tools_changed_notice(&mut self, client_tools: &[ToolSpec]) -> String {
        let now: Vec<String> = client_tools.iter().map(|t| t.name.clone()).collect();
        let before = self.last_client_tools.replace(now);
        let gone: Vec<String> = before
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !client_tools.iter().any(|c| &c.name == t))
            .collect();
        if gone.is_empty() {
            return String::new();
        }
        format!(
            "<tools_changed_notice>\nTools no longer available: {}\n\nImportant: Do not attempt \
             to call tools that are no longer available unless you've been notified that \
             they're available again.\n</tools_changed_notice>\n\n",
            gone.join(", ")
        )
    }

    fn start(
        &mut self,
        message_id: String,
        prompt: String,
        mut attachments: PromptContext,
        s: &mut dyn SessionControl,
    ) {
        let interaction_id = s.new_id();
        let now = s.now();
        let client_tools = s.client_tools();
        let notice = self.tools_changed_notice(&client_tools);
        let transformed = match attachments.transformed.take() {
            Some(text) => text,
            None => {
                let with_attachments = format!(
                    "{notice}{}{prompt}{}",
                    attachments.before, attachments.after
                );
                user_message_content(&current_datetime(now), &with_attachments)
            }
        };
        let mut message = json!({
            "content": prompt,
            "transformedContent": transformed,
            "messageId": message_id,
            "interactionId": interaction_id,
        });
        let plan_mode = attachments.agent_mode.as_deref() == Some("plan");
        attachments.annotate_user_message(&mut message);
        s.emit("user.message", message, false);
        let setup = match s.model_setup() {
            Ok(setup) => setup,
            Err(message) => {
                s.emit(
                    "session.error",
                    json!({"errorType": "configuration", "message": message}),
                    false,
                );
                self.idle(s, false);
                self.next_queued(s);
                return;
            }
        };
        s.emit(
            "system.message",
            json!({"role": "system", "content": setup.system_prompt,
                   "interactionId": interaction_id}),
            false,
        );
        let mut tools = client_tools;
        let mut builtins = Vec::new();
        for spec in s.builtin_tools() {
            // `exit_plan_mode` only for a prompt sent in plan mode.
            if spec.name == super::model_tools::EXIT_PLAN_MODE && !plan_mode {
                continue;
            }
            // A client tool of the same name takes precedence.
            if !tools.iter().any(|t| t.name == spec.name) {
                builtins.push(spec.name.clone());
                tools.push(spec);
            }
        }
        self.run = Some(Run {
            message_id,
            interaction_id,
            turn: 0,
            setup,
            tools,
            builtins,
            total_bytes: 0,
            asks: Vec::new(),
            plan_exits: Vec::new(),
            request_headers: attachments.request_headers.clone(),
            calls: Vec::new(),
            pre_hooks: Vec::new(),
            post_hooks: Vec::new(),
            refused: false,
            stop_blocks: 0,
            auto_switch_asked: false,
            agent_calls: Vec::new(),
            step: Step::Tools {
                waiting: Vec::new(),
            },
        });
        self.call_model(s);
    }

    /// Starts the next model call of the running interaction.
    fn call_model(&mut self, s: &mut dyn SessionControl) {
        let Some(run) = self.run.as_mut() else { return };
        for (message_id, prompt, mut context) in self.steering.drain(..) {
            let with_attachments = format!("{}{prompt}{}", context.before, context.after);
            let transformed = context.transformed.take().unwrap_or_else(|| {
                user_message_content(&current_datetime(s.now()), &with_attachments)
            });
            let mut message = json!({
                "content": prompt,
                "transformedContent": transformed,
                "messageId": message_id,
                "interactionId": run.interaction_id,
                "delivery": "steering",
            });
            context.annotate_user_message(&mut message);
            s.emit("user.message", message, false);
            s.emit("pending_messages.modified", json!({}), true);
        }
        s.emit(
            "assistant.turn_start",
            json!({"turnId": run.turn.to_string(), "interactionId": run.interaction_id}),
            false,
        );
        self.start_call(s);
    }

    /// Starts the model call of the current turn (again, after an auto-mode switch).
    fn start_call(&mut self, s: &mut dyn SessionControl) {
        let Some(run) = self.run.as_mut() else { return };
        if run.setup.provider.has_bearer_token_provider {
            // Before each call the client supplies a fresh token; it is never stored.
            let provider_name = run.setup.provider.token_provider_name().to_owned();
            run.step = Step::Token(s.ask_client(ClientRequest::ProviderToken { provider_name }));
            return;
        }
        self.send_model(s, None);
    }

    /// The client answered the bearer-token request `token`.
    fn token_answered(
        &mut self,
        s: &mut dyn SessionControl,
        token: u64,
        outcome: Result<Value, String>,
    ) {
        let Some(run) = self.run.as_mut() else { return };
        if let Some(i) = run.pre_hooks.iter().position(|(t, _, _)| *t == token) {
            let (_, invocation, call) = run.pre_hooks.remove(i);
            let output = hook_ended(s, &invocation, "preToolUse", outcome);
            return self.pre_hook_answered(s, call, output);
        }
        if let Some(i) = run.post_hooks.iter().position(|(t, _, _)| *t == token) {
            let (_, invocation, tool_call_id) = run.post_hooks.remove(i);
            hook_ended(s, &invocation, "postToolUse", outcome);
            self.tool_done(s, &tool_call_id);
            return;
        }
        if let Step::StopHook {
            token: stop,
            invocation,
        } = &run.step
        {
            if *stop == token {
                let invocation = invocation.clone();
                let output = hook_ended(s, &invocation, "agentStop", outcome);
                return self.stop_hook_answered(s, &output);
            }
        }
        if let Some(i) = run.plan_exits.iter().position(|(t, _)| *t == token) {
            let (_, tool_call_id) = run.plan_exits.remove(i);
            finish_exit_plan_mode(s, &tool_call_id, outcome);
            self.tool_done(s, &tool_call_id);
            return;
        }
        if let Some(i) = run.asks.iter().position(|(t, _)| *t == token) {
            let (_, tool_call_id) = run.asks.remove(i);
            finish_ask_user(s, &tool_call_id, outcome);
            self.tool_done(s, &tool_call_id);
            return;
        }
        if matches!(run.step, Step::AutoSwitch(t) if t == token) {
            let switch = outcome.as_ref().ok().and_then(|v| v.get("response"));
            if matches!(switch.and_then(Value::as_str), Some("yes" | "yes_always")) {
                s.switch_model(AUTO_MODEL, "rate_limit_auto_switch");
                run.setup.model = Some(AUTO_MODEL.to_owned());
                return self.start_call(s);
            }
            // Declined (or nobody answered): the rate limit, already reported, ends the turn.
            return self.end_failed_turn(s);
        }
        if !matches!(run.step, Step::Token(t) if t == token) {
            return;
        }
        let bearer = outcome.and_then(|v| {
            v.get("token")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(|t| Secret::new(t.to_owned()))
                .ok_or_else(|| "the answer has no token".to_owned())
        });
        match bearer {
            Ok(bearer) => self.send_model(s, Some(bearer)),
            Err(reason) => {
                let message = format!(
                    "the client did not provide a bearer token for provider {:?}: {reason}",
                    run.setup.provider.token_provider_name()
                );
                self.fail(s, ModelError::new(ModelErrorKind::Unauthorized, message));
            }
        }
    }

    /// Builds and starts the model call (with the client's bearer token, if it gave one).
    fn send_model(&mut self, s: &mut dyn SessionControl, bearer: Option<Secret>) {
        let Some(run) = self.run.as_mut() else { return };
        let messages = s.history();
        let provider = &run.setup.provider;
        let limit = provider
            .max_prompt_tokens
            .or(provider.max_context_window_tokens);
        let info =
            super::context_usage::usage_info(limit, &messages, &run.tools, !self.usage_reported);
        self.usage_reported = true;
        let conversation = info["conversationTokens"].as_u64().unwrap_or(0);
        let window = info["tokenLimit"].as_u64().unwrap_or(0);
        s.emit("session.usage_info", info, true);
        // A full enough context starts a background compaction (infinite sessions).
        s.context_filled(conversation, window);
        let mut req = ChatRequest::new(run.setup.model.as_deref(), &messages, &run.tools);
        req.reasoning_effort = run.setup.reasoning_effort.as_deref();
        req.enable_citations = run.setup.enable_citations;
        req.stream = run.setup.provider.streams_always || s.streaming();
        let mut request = match build_chat_request(&run.setup.provider, &req, bearer.as_ref()) {
            Ok(r) => r,
            Err(e) => return self.fail(s, e),
        };
        for (name, value) in &run.request_headers {
            request
                .headers
                .push(HttpHeader::plain(name.as_str(), value.as_str()));
        }
        if let Some(name) = run
            .setup
            .client_name
            .as_ref()
            .filter(|_| !run.setup.provider.copilot_api)
        {
            request.headers.push(HttpHeader::plain(
                "user-agent",
                format!("{name} (agentwire)"),
            ));
        }
        let model = run
            .setup
            .provider
            .wire_model_name(run.setup.model.as_deref())
            .unwrap_or_default()
            .to_owned();
        let call = ModelCall::new(
            s.now(),
            request,
            StreamDialect::of(&run.setup.provider),
            model,
            run.setup.call.clone(),
        );
        run.step = Step::Calling(Box::new(Active {
            call,
            http: None,
            message_id: None,
            reasoning_id: None,
            usage: None,
            api_call_id: None,
            size_payload: None,
            message_payload: None,
            reasoning_payload: None,
        }));
        self.drain(s);
    }

    /// Acts on everything the running call produced, then arms its next deadline.
    fn drain(&mut self, s: &mut dyn SessionControl) {
        loop {
            let Some(run) = self.run.as_mut() else { return };
            let Step::Calling(active) = &mut run.step else {
                return;
            };
            let Some(out) = active.call.poll() else {
                // The deadline is armed once the input is handled (`arm_timer`).
                return;
            };
            match out {
                CallOutput::Send(request) => {
                    if let Some(old) = active.http.take() {
                        s.cancel_http(old);
                    }
                    active.http = Some(s.http_request(request));
                }
                CallOutput::Cancel => {
                    if let Some(old) = active.http.take() {
                        s.cancel_http(old);
                    }
                }
                CallOutput::Retrying { message, .. } => {
                    s.emit(
                        "session.warning",
                        json!({"warningType": "model_retry", "message": message}),
                        false,
                    );
                }
                CallOutput::Event(ModelEvent::Done(response)) => {
                    return self.answered(s, response);
                }
                CallOutput::Event(event) => stream_event(s, run, event),
                CallOutput::Failed(error) => return self.call_failed(s, error),
            }
        }
    }

    /// The model call failed: a rate limit a client may lift by switching to the `auto`
    /// model is reported (`eligibleForAutoSwitch`) and the client asked; any other failure
    /// ends the turn.
    fn call_failed(&mut self, s: &mut dyn SessionControl, error: ModelError) {
        let Some(run) = self.run.as_mut() else { return };
        let eligible = error.kind == ModelErrorKind::RateLimited
            && !run.auto_switch_asked
            && run.setup.model.as_deref() != Some(AUTO_MODEL)
            && s.answers_auto_mode_switch();
        if !eligible {
            return self.fail(s, error);
        }
        let mut data = error_data(&error);
        data["eligibleForAutoSwitch"] = json!(true);
        s.emit("session.error", data, false);
        run.auto_switch_asked = true;
        let token = s.ask_client(ClientRequest::AutoModeSwitch {
            error_code: error.code.clone(),
            retry_after_seconds: error.retry_after_secs,
        });
        run.step = Step::AutoSwitch(token);
    }

    /// The model call ended with `response`: its events, then its tools or the end.
    fn answered(&mut self, s: &mut dyn SessionControl, response: ModelResponse) {
        let Some(run) = self.run.as_mut() else { return };
        let Step::Calling(active) = &mut run.step else {
            return;
        };
        let turn_id = run.turn.to_string();
        let timing = active.call.timing();
        let api_call_id = response
            .response_id
            .clone()
            .or_else(|| active.api_call_id.clone());
        if !response.reasoning.is_empty() {
            let reasoning_id = active.reasoning_id.clone().unwrap_or_else(|| s.new_id());
            s.emit(
                "assistant.reasoning",
                json!({"reasoningId": reasoning_id, "content": response.reasoning}),
                false,
            );
        }
        let usage = response.usage.or(active.usage);
        let model = response
            .model
            .clone()
            .or_else(|| {
                run.setup
                    .provider
                    .wire_model_name(run.setup.model.as_deref())
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        let mut usage_data = json!({
            "model": model,
            "inputTokens": usage.as_ref().map_or(0, |u| u.input_tokens),
            "outputTokens": usage.as_ref().map_or(0, |u| u.output_tokens),
            "cacheReadTokens": usage.as_ref().map_or(0, |u| u.cache_read_tokens),
            "cacheWriteTokens": usage.as_ref().map_or(0, |u| u.cache_write_tokens),
            "reasoningTokens": usage.as_ref().map_or(0, |u| u.reasoning_tokens),
            "cost": 0,
            "duration": ms_between(timing.sent, s.now()),
            "initiator": if run.turn == 0 { "user" } else { "agent" },
            "isByok": true,
            "numToolCalls": response.tool_calls.len(),
            "finishReason": response.finish_reason,
        });
        if let Some(id) = &api_call_id {
            usage_data["apiCallId"] = json!(id);
        }
        if let Some(first) = timing.first_byte {
            usage_data["timeToFirstTokenMs"] = json!(ms_between(timing.sent, first));
        }
        s.emit("assistant.usage", usage_data, true);
        let message_id = active.message_id.clone().unwrap_or_else(|| s.new_id());
        let mut message = json!({
            "messageId": message_id,
            "originatingMessageId": run.message_id,
            "model": model,
            "content": response.text,
            "toolRequests": response.tool_requests_json(),
            "interactionId": run.interaction_id,
            "turnId": turn_id,
        });
        if let Some(id) = &api_call_id {
            message["apiCallId"] = json!(id);
        }
        if !response.reasoning.is_empty() {
            message["reasoningText"] = json!(response.reasoning);
        }
        s.emit("assistant.message", message, false);
        // Whether there were tool calls is decided from the calls, never `finish_reason`.
        if response.has_tool_calls() {
            run.step = Step::Tools {
                waiting: response.tool_calls.iter().map(|c| c.id.clone()).collect(),
            };
            // Every call starts now (their permission prompts may be pending together); the
            // results go back in call order, whatever order they finish in.
            // With hooks, each call first passes `preToolUse` (see `pre_hook_answered`).
            let hooks = s.has_hooks();
            run.calls = response.tool_calls.clone();
            let mut done_now = Vec::new();
            for call in &response.tool_calls {
                if hooks {
                    let input = json!({"toolCallId": call.id, "toolName": call.name,
                                       "toolArgs": call.parsed_arguments().unwrap_or_default()});
                    let (token, invocation) = invoke_hook(s, "preToolUse", input);
                    run.pre_hooks.push((token, invocation, call.clone()));
                } else if dispatch_tool(s, run, call) {
                    done_now.push(call.id.clone());
                }
            }
            self.serve_agent_calls(s);
            for id in done_now {
                self.tool_done(s, &id);
            }
        } else {
            s.emit("assistant.turn_end", json!({"turnId": turn_id}), false);
            self.stopped(s);
        }
    }

    /// The model answered without tools: a natural stop. With hooks, the `agentStop` hook
    /// (`{stopReason: "end_turn", stopHookActive, transcriptPath?}`) may keep the agent
    /// running ([`ModelAgent::stop_hook_answered`]); otherwise the interaction ends.
    fn stopped(&mut self, s: &mut dyn SessionControl) {
        let Some(run) = self.run.as_mut() else { return };
        if !s.has_hooks() {
            self.run = None;
            self.idle(s, false);
            return self.next_queued(s);
        }
        let mut input = json!({"stopReason": "end_turn", "stopHookActive": run.stop_blocks > 0});
        if let Some(path) = s.transcript_path() {
            input["transcriptPath"] = json!(path);
        }
        let (token, invocation) = invoke_hook(s, "agentStop", input);
        run.step = Step::StopHook { token, invocation };
    }

    /// The `agentStop` hook answered: `{decision: "block", reason}` sends `reason` as the next
    /// user message before the session goes idle (at most [`MAX_STOP_BLOCKS`] times in a
    /// row); anything else, or a failed hook, lets the agent stop.
    fn stop_hook_answered(&mut self, s: &mut dyn SessionControl, output: &Value) {
        let Some(run) = self.run.take() else { return };
        let reason = output
            .get("reason")
            .and_then(Value::as_str)
            .filter(|r| !r.trim().is_empty());
        let blocked = output.get("decision").and_then(Value::as_str) == Some("block");
        match reason {
            Some(reason) if blocked && run.stop_blocks < MAX_STOP_BLOCKS => {
                let message_id = s.new_id();
                self.start(message_id, reason.to_owned(), PromptContext::default(), s);
                if let Some(next) = self.run.as_mut() {
                    next.stop_blocks = run.stop_blocks + 1;
                }
            }
            _ => {
                self.idle(s, false);
                self.next_queued(s);
            }
        }
    }

    /// A call's `preToolUse` hook answered: `permissionDecision: "deny"` ends the call with
    /// the runtime's words (`Denied by preToolUse hook: REASON`); `modifiedArgs` replace its
    /// arguments; otherwise it runs as asked. A hook that failed lets it run.
    fn pre_hook_answered(&mut self, s: &mut dyn SessionControl, mut call: ToolCall, output: Value) {
        let Some(run) = self.run.as_mut() else { return };
        if output.get("permissionDecision").and_then(Value::as_str) == Some("deny") {
            let reason = output
                .get("permissionDecisionReason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
                .unwrap_or("No reason provided");
            let message = format!("Denied by preToolUse hook: {reason}");
            end_call_at_once(s, run, &call, &message, "denied");
            return self.tool_done(s, &call.id);
        }
        if let Some(args) = output.get("modifiedArgs").filter(|a| a.is_object()) {
            call.arguments = args.to_string();
        }
        if dispatch_tool(s, run, &call) {
            self.tool_done(s, &call.id);
        }
        self.serve_agent_calls(s);
    }

    /// A call finished: with hooks, `postToolUse` sees its result before the model does.
    fn tool_finished(
        &mut self,
        s: &mut dyn SessionControl,
        tool_call_id: String,
        outcome: ToolOutcome,
    ) {
        let Some(run) = self.run.as_mut() else { return };
        if outcome.ends_turn() && run.calls.iter().any(|c| c.id == tool_call_id) {
            run.refused = true;
        }
        let call = run.calls.iter().find(|c| c.id == tool_call_id);
        let (Some(call), true) = (call, s.has_hooks()) else {
            return self.tool_done(s, &tool_call_id);
        };
        let (result_type, text) = match &outcome {
            ToolOutcome::Success(text) => ("success", text.as_str()),
            ToolOutcome::Failure { message, code } if code == "denied" => {
                ("denied", message.as_str())
            }
            ToolOutcome::Failure { message, .. } => ("failure", message.as_str()),
        };
        let input = json!({"toolCallId": tool_call_id, "toolName": call.name,
                           "toolArgs": call.parsed_arguments().unwrap_or_default(),
                           "toolResult": {"resultType": result_type, "textResultForLlm": text}});
        let (token, invocation) = invoke_hook(s, "postToolUse", input);
        run.post_hooks.push((token, invocation, tool_call_id));
    }

    /// A tool call of the response finished: when it was the last one, the model is called
    /// with the results.
    fn tool_done(&mut self, s: &mut dyn SessionControl, tool_call_id: &str) {
        let Some(run) = self.run.as_mut() else { return };
        let Step::Tools { waiting } = &mut run.step else {
            return;
        };
        let Some(i) = waiting.iter().position(|id| id == tool_call_id) else {
            return;
        };
        waiting.remove(i);
        if waiting.is_empty() {
            s.emit(
                "assistant.turn_end",
                json!({"turnId": run.turn.to_string()}),
                false,
            );
            if run.refused {
                // A refused call ends the interaction: the model is not asked again.
                self.run = None;
                self.idle(s, false);
                self.next_queued(s);
                return;
            }
            run.turn += 1;
            self.call_model(s);
        }
    }

    /// The call failed: `session.error`, the turn ends, the session stays usable.
    fn fail(&mut self, s: &mut dyn SessionControl, error: ModelError) {
        if self.run.is_none() {
            return;
        }
        s.emit("session.error", error_data(&error), false);
        self.end_failed_turn(s);
    }

    /// Ends the running interaction after its failure was reported.
    fn end_failed_turn(&mut self, s: &mut dyn SessionControl) {
        let Some(run) = self.run.take() else { return };
        s.emit(
            "assistant.turn_end",
            json!({"turnId": run.turn.to_string()}),
            false,
        );
        self.idle(s, false);
        self.next_queued(s);
    }

    fn next_queued(&mut self, s: &mut dyn SessionControl) {
        if self.run.is_none() {
            // Steering the interaction did not take waits for a turn of its own, first.
            while let Some(steer) = self.steering.pop_back() {
                self.queued.push_front(steer);
            }
            if let Some((message_id, prompt, attachments)) = self.queued.pop_front() {
                s.emit("pending_messages.modified", json!({}), true);
                self.start(message_id, prompt, attachments, s);
            }
        }
    }

    fn active(&mut self) -> Option<&mut Active> {
        match &mut self.run.as_mut()?.step {
            Step::Calling(active) => Some(active),
            Step::Tools { .. } | Step::Token(_) | Step::StopHook { .. } | Step::AutoSwitch(_) => {
                None
            }
        }
    }
}

/// `session.error`'s data for a failed model call.
fn error_data(error: &ModelError) -> Value {
    let mut data = json!({"errorType": error.error_type(), "message": error.message});
    if let Some(status) = error.status {
        data["statusCode"] = json!(status);
    }
    if let Some(code) = &error.code {
        data["errorCode"] = json!(code);
    }
    data
}

/// A call of a tool that was not offered ends at once with the runtime's answer, which the
/// model sees as is: ``Tool 'NAME' does not exist. Available tools that can be called are A,
/// B.`` (the offered tools, in the order offered).
fn refuse_unknown_tool(s: &mut dyn SessionControl, run: &Run, call: &ToolCall) {
    let message = unknown_tool_text(&call.name, &run.tools);
    end_call_at_once(s, run, call, &message, "tool_not_found");
}

/// A call that ends without running: `tool.execution_start`, then a failed
/// `tool.execution_complete` whose `message` (code `code`, never `failure`) the model sees.
fn end_call_at_once(
    s: &mut dyn SessionControl,
    run: &Run,
    call: &ToolCall,
    message: &str,
    code: &str,
) {
    let arguments = call
        .parsed_arguments()
        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
    emit_call_start(s, run, call, &arguments);
    s.emit(
        "tool.execution_complete",
        json!({"toolCallId": call.id, "success": false,
               "error": {"message": message, "code": code}}),
        false,
    );
}

/// Invokes hook `hook_type` through a client (`hooks.invoke`), announced by a persisted
/// `hook.start {hookInvocationId, hookType, input}`; returns the `ask_client` token and the
/// invocation id.
fn invoke_hook(s: &mut dyn SessionControl, hook_type: &str, input: Value) -> (u64, String) {
    let invocation = s.new_id();
    s.emit(
        "hook.start",
        json!({"hookInvocationId": invocation, "hookType": hook_type, "input": input}),
        false,
    );
    let token = s.ask_client(ClientRequest::Hook {
        hook_type: hook_type.to_owned(),
        input,
    });
    (token, invocation)
}

/// A hook answered (or failed): `hook.end {hookInvocationId, hookType, success, output? |
/// error?}`, persisted (the history reads a `postToolUse`'s `modifiedResult` from it).
/// Returns the hook's output (`null` when it gave none or failed).
fn hook_ended(
    s: &mut dyn SessionControl,
    invocation: &str,
    hook_type: &str,
    outcome: Result<Value, String>,
) -> Value {
    let (data, output) = match outcome {
        Ok(v) => {
            let output = v.get("output").cloned().unwrap_or(v);
            let data = json!({"hookInvocationId": invocation, "hookType": hook_type,
                              "success": true, "output": output});
            (data, output)
        }
        Err(message) => {
            let data = json!({"hookInvocationId": invocation, "hookType": hook_type,
                              "success": false, "error": {"message": message}});
            (data, Value::Null)
        }
    };
    s.emit("hook.end", data, false);
    output
}

/// Starts a call of the response by what it names: `ask_user`, a tool that was offered, or
/// one that was not (refused at once). Returns whether the call already ended.
fn dispatch_tool(s: &mut dyn SessionControl, run: &mut Run, call: &ToolCall) -> bool {
    if call.name == super::model_tools::ASK_USER && run.builtins.iter().any(|b| b == &call.name) {
        start_ask_user(s, run, call);
        false
    } else if call.name == super::model_tools::EXIT_PLAN_MODE && run.builtins.contains(&call.name) {
        start_exit_plan_mode(s, run, call);
        false
    } else if children::is_agent_tool(&call.name) && run.builtins.contains(&call.name) {
        children::start_agent_tool(s, run, call)
    } else if run.tools.iter().any(|t| t.name == call.name) {
        start_tool(s, run, call);
        false
    } else {
        refuse_unknown_tool(s, run, call);
        true
    }
}

/// `tool.execution_start` of one of the model's calls that the agent itself serves.
fn emit_call_start(s: &mut dyn SessionControl, run: &Run, call: &ToolCall, arguments: &Value) {
    s.emit(
        "tool.execution_start",
        json!({"toolCallId": call.id, "toolName": call.name, "arguments": arguments,
               "turnId": run.turn.to_string()}),
        false,
    );
}

/// `ask_user`: the question goes to a client that answers user input (`userInput.request`);
/// the tool completes when it answers ([`finish_ask_user`]).
fn start_ask_user(s: &mut dyn SessionControl, run: &mut Run, call: &ToolCall) {
    let arguments = call.parsed_arguments().unwrap_or_default();
    emit_call_start(s, run, call, &arguments);
    let question = arguments
        .get("question")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let choices = arguments
        .get("choices")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let allow_freeform = arguments
        .get("allow_freeform")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let token = s.ask_client(ClientRequest::UserInput {
        question,
        choices,
        allow_freeform,
    });
    run.asks.push((token, call.id.clone()));
}

/// `exit_plan_mode`: the plan goes to a client that answers exit-plan-mode requests
/// (`exitPlanMode.request`); the tool completes when it answers ([`finish_exit_plan_mode`]).
fn start_exit_plan_mode(s: &mut dyn SessionControl, run: &mut Run, call: &ToolCall) {
    let arguments = call.parsed_arguments().unwrap_or_default();
    emit_call_start(s, run, call, &arguments);
    let text = |key: &str| super::model_tools::text_argument(&arguments, key);
    let offered = super::model_tools::EXIT_PLAN_ACTIONS;
    let mut actions: Vec<String> = arguments
        .get("actions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|a| offered.contains(a))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if actions.is_empty() {
        actions = offered.iter().map(|a| (*a).to_owned()).collect();
    }
    let recommended = Some(text("recommendedAction"))
        .filter(|a| actions.contains(a))
        .unwrap_or_else(|| actions[0].clone());
    let token = s.ask_client(ClientRequest::ExitPlanMode {
        summary: text("summary"),
        plan: text("planContent"),
        actions,
        recommended,
    });
    run.plan_exits.push((token, call.id.clone()));
}

/// Completes an `exit_plan_mode` call with the user's decision as the runtime words it for
/// the model.
fn finish_exit_plan_mode(
    s: &mut dyn SessionControl,
    tool_call_id: &str,
    outcome: Result<Value, String>,
) {
    let text = match outcome {
        Ok(answer) => exit_plan_text(&answer),
        Err(reason) => format!("The user did not answer the plan approval: {reason}"),
    };
    let data = json!({"toolCallId": tool_call_id, "success": true,
                      "result": {"content": text, "detailedContent": text}});
    s.emit("tool.execution_complete", data, false);
}

/// What the model is told of the user's answer to its plan (`{approved, selectedAction?,
/// feedback?}`).
fn exit_plan_text(answer: &Value) -> String {
    let approved = answer.get("approved").and_then(Value::as_bool) == Some(true);
    let feedback = answer
        .get("feedback")
        .and_then(Value::as_str)
        .filter(|f| !f.trim().is_empty());
    if !approved {
        let mut text = "Plan not approved. You are still in plan mode: revise the plan, then \
                        request approval again with exit_plan_mode."
            .to_owned();
        if let Some(feedback) = feedback {
            text.push_str(&format!("\n\nUser feedback: {feedback}"));
        }
        return text;
    }
    match answer.get("selectedAction").and_then(Value::as_str) {
        Some("exit_only") => "Plan approved! Exited plan mode.\n\nYou are now in interactive \
                              mode. Do not start implementing the plan: wait for the user's \
                              next message."
            .to_owned(),
        action => format!(
            "Plan approved! Exited plan mode.\n\nYou are now in {} mode. Start implementing \
             the plan now, in this same response. Approving the plan is your go-signal, so do \
             not stop to ask whether to proceed or wait for another message.",
            action.unwrap_or("interactive")
        ),
    }
}

/// Completes an `ask_user` call with the user's answer as the runtime words it for the
/// model: `User selected: CHOICE`, or `User responded: TEXT` for a free-form answer.
fn finish_ask_user(s: &mut dyn SessionControl, tool_call_id: &str, outcome: Result<Value, String>) {
    let answer = outcome.and_then(|v| {
        let answer = v
            .get("answer")
            .and_then(Value::as_str)
            .ok_or_else(|| "the client's answer has no `answer`".to_owned())?;
        let freeform = v.get("wasFreeform").and_then(Value::as_bool) == Some(true);
        Ok(if freeform {
            format!("User responded: {answer}")
        } else {
            format!("User selected: {answer}")
        })
    });
    let data = match answer {
        Ok(text) => json!({"toolCallId": tool_call_id, "success": true,
                           "result": {"content": text, "detailedContent": text}}),
        Err(reason) => json!({"toolCallId": tool_call_id, "success": false,
                              "error": {"message": format!("The user did not answer: {reason}"),
                                        "code": "failure"}}),
    };
    s.emit("tool.execution_complete", data, false);
}

/// The runtime's answer to a call of a tool that does not exist.
fn unknown_tool_text(name: &str, offered: &[ToolSpec]) -> String {
    let mut text = format!("Tool '{name}' does not exist.");
    if !offered.is_empty() {
        text.push_str(" Available tools that can be called are ");
        for (i, tool) in offered.iter().enumerate() {
            if i > 0 {
                text.push_str(", ");
            }
            text.push_str(&tool.name);
        }
        text.push('.');
    }
    text
}

/// Starts one of the model's tool calls: a built-in tool on the host, else a client tool.
fn start_tool(s: &mut dyn SessionControl, run: &Run, call: &ToolCall) {
    let arguments = call
        .parsed_arguments()
        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
    let turn_id = run.turn.to_string();
    if call.name == super::model_tools::SKILL && run.builtins.contains(&call.name) {
        s.call_skill(&call.id, &arguments, &turn_id);
        return;
    }
    if call.name == super::sql_tool::SQL && run.builtins.contains(&call.name) {
        s.call_sql(&call.id, &arguments, &turn_id);
        return;
    }
    if run.builtins.contains(&call.name) {
        if let Some(builtin) = super::model_tools::builtin_call(&call.name, &arguments) {
            s.call_builtin(&call.id, &builtin, &turn_id);
            return;
        }
    }
    s.call_tool(&call.id, &call.name, &arguments, &turn_id);
}

/// A streamed step: the deltas streaming clients see.
fn stream_event(s: &mut dyn SessionControl, run: &mut Run, event: ModelEvent) {
    let Step::Calling(active) = &mut run.step else {
        return;
    };
    let streaming = s.streaming();
    let Active {
        message_id,
        reasoning_id,
        size_payload,
        message_payload,
        reasoning_payload,
        ..
    } = &mut **active;
    let mut size = |s: &mut dyn SessionControl, added: usize| {
        run.total_bytes += added as u64;
        if streaming {
            let payload = size_payload.get_or_insert_with(|| json!({}));
            set(
                payload,
                "totalResponseSizeBytes",
                Value::from(run.total_bytes),
            );
            s.emit_ref("assistant.streaming_delta", payload, true);
        }
    };
    match event {
        ModelEvent::TextDelta(text) => {
            size(s, text.len());
            let id = message_id.get_or_insert_with(|| {
                let id = s.new_id();
                if streaming {
                    s.emit("assistant.message_start", json!({"messageId": id}), true);
                }
                id
            });
            if streaming {
                let payload = message_payload.get_or_insert_with(|| json!({"messageId": id}));
                set(payload, "deltaContent", Value::String(text));
                s.emit_ref("assistant.message_delta", payload, true);
            }
        }
        ModelEvent::ReasoningDelta(text) => {
            let id = reasoning_id.get_or_insert_with(|| s.new_id());
            if streaming {
                let payload = reasoning_payload.get_or_insert_with(|| json!({"reasoningId": id}));
                set(payload, "deltaContent", Value::String(text));
                s.emit_ref("assistant.reasoning_delta", payload, true);
            }
        }
        ModelEvent::ToolCallStart { name, .. } => size(s, name.len()),
        ModelEvent::ToolCallDelta {
            id,
            name,
            arguments_delta,
            ..
        } => {
            size(s, arguments_delta.len());
            if streaming {
                s.emit(
                    "assistant.tool_call_delta",
                    json!({"toolCallId": id, "toolName": name, "toolType": "function",
                           "inputDelta": arguments_delta}),
                    true,
                );
            }
        }
        ModelEvent::Usage(usage) => active.usage = Some(usage),
        ModelEvent::Done(_) => {}
    }
}

/// Sets `key` of a payload object, reusing the key when it is there.
fn set(payload: &mut Value, key: &str, value: Value) {
    let Value::Object(map) = payload else { return };
    match map.get_mut(key) {
        Some(slot) => *slot = value,
        None => {
            map.insert(key.to_owned(), value);
        }
    }
}

fn ms_between(from: Timestamp, to: Timestamp) -> u64 {
    to.as_millis().saturating_sub(from.as_millis())
}

impl Agent for ModelAgent {
    fn handle(&mut self, input: AgentInput, s: &mut dyn SessionControl) {
        if let Some(input) = self.route_to_children(input, s) {
            self.handle_own(input, s);
        }
        self.arm_timer(s);
    }

    fn is_busy(&self) -> bool {
        self.run.is_some()
    }

    fn queued_prompts(&self) -> Vec<(String, String)> {
        super::queued_view(&self.queued)
    }

    fn steering_prompts(&self) -> Vec<(String, String)> {
        super::queued_view(&self.steering)
    }

    fn drop_steering(&mut self, message_id: &str) -> bool {
        let before = self.steering.len();
        self.steering.retain(|(id, _, _)| id != message_id);
        self.steering.len() < before
    }

    fn drop_queued_prompts(&mut self, all: bool) -> usize {
        super::drop_queued(&mut self.queued, all)
    }

    fn tasks(&self) -> Vec<Value> {
        self.agents.tasks.all().iter().map(|t| t.info()).collect()
    }

    fn has_background_work(&self) -> bool {
        self.agents.background_running()
    }

    fn task_progress(&self, id: &str) -> Option<Value> {
        self.agents.progress(id)
    }

    fn start_background_agent(
        &mut self,
        request: super::BackgroundAgentRequest,
        s: &mut dyn SessionControl,
    ) -> Result<String, String> {
        let result = self.start_requested_agent(request, s);
        self.arm_timer(s);
        result
    }

    fn cancel_task(&mut self, id: &str, s: &mut dyn SessionControl) -> bool {
        let cancelled = self.cancel_background(s, Some(id)) > 0;
        self.arm_timer(s);
        cancelled
    }

    fn cancel_all_tasks(&mut self, s: &mut dyn SessionControl) -> usize {
        self.cancel_background(s, None)
    }

    fn remove_task(&mut self, id: &str) -> bool {
        self.agents.tasks.remove(id)
    }

    fn restored(&mut self, history: &[crate::session::Event]) {
        self.agents.tasks = super::background::AgentTasks::from_history(history);
    }
}

impl ModelAgent {
    /// Acts on an input meant for this agent's own run (not a sub-agent's).
    fn handle_own(&mut self, input: AgentInput, s: &mut dyn SessionControl) {
        match input {
            AgentInput::Prompt {
                message_id,
                prompt,
                attachments,
            } => {
                // The runtime queues every prompt: `pending_messages.modified` when it joins
                // the queue and again when it leaves it.
                s.emit("pending_messages.modified", json!({}), true);
                if attachments.steering && self.run.is_some() {
                    self.steering.push_back((message_id, prompt, attachments));
                    return;
                }
                self.queued.push_back((message_id, prompt, attachments));
                self.next_queued(s);
            }
            AgentInput::Abort | AgentInput::Interrupt => {
                let asked = matches!(input, AgentInput::Abort);
                if !self.queued.is_empty() || !self.steering.is_empty() {
                    self.queued.clear();
                    self.steering.clear();
                    s.emit("pending_messages.modified", json!({}), true);
                }
                let Some(run) = self.run.as_mut() else { return };
                if let Step::Calling(active) = &mut run.step {
                    active.call.cancel(s.now());
                    if let Some(http) = active.http.take() {
                        s.cancel_http(http);
                    }
                }
                let turn = run.turn;
                let turn_ended = matches!(run.step, Step::StopHook { .. });
                self.run = None;
                s.cancel_tool_calls();
                if asked {
                    s.emit("abort", json!({"reason": "user_initiated"}), false);
                }
                if !turn_ended {
                    s.emit(
                        "assistant.turn_end",
                        json!({"turnId": turn.to_string()}),
                        false,
                    );
                }
                self.idle(s, true);
            }
            // Only a session run by an ACP agent gets these.
            AgentInput::Acp(_) | AgentInput::SettingChanged(_) => {}
            AgentInput::Timer => {
                let now = s.now();
                if let Some(active) = self.active() {
                    active.call.handle_timeout(now);
                    self.drain(s);
                }
            }
            AgentInput::Http { call, event } => {
                let now = s.now();
                let Some(active) = self.active() else { return };
                if active.http != Some(call) {
                    return;
                }
                match event {
                    HttpEvent::Response { status, headers } => {
                        active.call.handle_response(now, status, &headers)
                    }
                    HttpEvent::Body(bytes) => active.call.handle_body(now, &bytes),
                    HttpEvent::End => {
                        active.http = None;
                        active.call.handle_end(now);
                    }
                    HttpEvent::Error { kind, message } => {
                        active.http = None;
                        active.call.handle_transport_error(now, kind, &message);
                    }
                }
                self.drain(s);
            }
            AgentInput::ToolDone {
                tool_call_id,
                outcome,
            } => self.tool_finished(s, tool_call_id, outcome),
            AgentInput::ClientAnswer { token, outcome } => self.token_answered(s, token, outcome),
        }
    }
}
