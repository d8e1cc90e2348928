//! The hooks a prompt passes before its agent sees it, for sessions whose client registered
//! hooks (`hooks.invoke`, the runtime's hook types):
//!
//! 1. `sessionStart` once per loaded session, before its first prompt (`{source: "new" |
//!    "resume"}`);
//! 2. `userPromptSubmitted` (`{prompt}`): `modifiedPrompt` replaces the prompt;
//! 3. `userPromptTransformed` (`{prompt, transformedPrompt}`, the text the model would get):
//!    `modifiedTransformedPrompt` replaces that text.
//!
//! A `systemMessage` whose sections are marked `transform` is rewritten by the client once per
//! prompt (`systemMessage.transform`), after the hooks; the answer is kept for the session's
//! model calls.
//!
//! Every input carries `timestamp` (epoch ms) and `cwd`. A client that fails or does not
//! answer in time leaves the prompt as it was. Only a model agent's prompts pass the hooks
//! (they shape the conversation the model sees). Each invocation is announced by a persisted
//! `hook.start` and ends with `hook.end`; a `sessionStart`'s `additionalContext` reaches the
//! model as a user message of its own before the prompt (the history reads it from
//! `hook.end`).

use serde_json::{json, Value};

use crate::agent::AgentInput;
use crate::correlation::Outcome;
use crate::host::dialect::ServerRequest;
use crate::host::pending::{ClientCall, McpHookCall};
use crate::host::Host;
use crate::model::{current_datetime, user_message_content};

impl Host {
    /// Asks a client to rewrite the sections its `systemMessage` marks `transform`, once per
    /// prompt, before the prompt's turn (`systemMessage.transform`); returns whether the
    /// request is in flight. The answer is kept for the session's model calls.
    pub(in crate::host) fn next_system_transform(&mut self, session: &str) -> bool {
        let Some(live) = self.sessions.get(session) else {
            return false;
        };
        let Some(AgentInput::Prompt { attachments, .. }) = live.held.front() else {
            return false;
        };
        if attachments.system_transformed {
            return false;
        }
        let asked = live.model.transform_requests();
        let conns: Vec<_> = live.session.attached.keys().copied().collect();
        if asked.is_empty() {
            self.mark_system_transformed(session);
            return false;
        }
        let sections: serde_json::Map<String, Value> = asked
            .into_iter()
            .map(|(id, text)| (id, json!({"content": text})))
            .collect();
        let params = json!({"sessionId": session, "requestId": self.ids.next_uuid(),
                            "sections": sections});
        for conn in conns {
            let call = ClientCall::SystemTransform {
                session: session.to_owned(),
            };
            if self
                .send_client_call(conn, ServerRequest::SystemMessageTransform, &params, call)
                .is_ok()
            {
                if let Some(live) = self.sessions.get_mut(session) {
                    live.hooks.in_flight = true;
                }
                return true;
            }
        }
        // No client can rewrite them: the sections stay as they are.
        self.mark_system_transformed(session);
        false
    }

    fn mark_system_transformed(&mut self, session: &str) {
        if let Some(AgentInput::Prompt { attachments, .. }) = self
            .sessions
            .get_mut(session)
            .and_then(|l| l.held.front_mut())
        {
            attachments.system_transformed = true;
        }
    }

    /// The client's rewritten sections (`{sections: {id: {content}}}`) are kept for the
    /// session's model calls; a failed answer keeps the sections as they were.
    pub(crate) fn system_transform_answered(&mut self, session: &str, outcome: Outcome) {
        let sections = match outcome {
            Outcome::Result(raw) => serde_json::from_str::<Value>(raw.get()).ok(),
            _ => None,
        };
        if let Some(live) = self.sessions.get_mut(session) {
            live.hooks.in_flight = false;
            if let Some(Value::Object(sections)) = sections.as_ref().and_then(|v| v.get("sections"))
            {
                live.system_transformed = sections
                    .iter()
                    .filter_map(|(id, s)| {
                        Some((id.clone(), s.get("content")?.as_str()?.to_owned()))
                    })
                    .collect();
            }
        }
        self.mark_system_transformed(session);
        self.release_held(session);
    }
}

impl Host {
    /// Asks a hooks client for `preMcpToolCall` (`{toolCallId, serverName, toolName,
    /// arguments}`); returns whether the request is in flight (the call then waits for
    /// [`Host::mcp_hook_answered`]).
    pub(crate) fn invoke_mcp_hook(&mut self, session: &str, call: McpHookCall) -> bool {
        let Some(conn) = self.hooks_conn(session) else {
            return false;
        };
        let input = self.hook_input(
            session,
            json!({"toolCallId": call.tool_call_id, "serverName": call.server,
                   "toolName": call.tool, "arguments": call.arguments}),
        );
        let invocation = self.ids.next_uuid();
        let params = json!({"sessionId": session, "requestId": self.ids.next_uuid(),
                            "hookType": "preMcpToolCall", "input": input});
        let client_call = ClientCall::McpHook {
            session: session.to_owned(),
            invocation: invocation.clone(),
            call: Box::new(call),
        };
        if self
            .send_client_call(conn, ServerRequest::Hook, &params, client_call)
            .is_err()
        {
            return false;
        }
        self.emit_hook_start(session, &invocation, "preMcpToolCall", &input);
        true
    }

    /// The `preMcpToolCall` hook answered: its `metaToUse` (an object, or `null` for none)
    /// is the request's `_meta`; without one the call goes out as it was.
    pub(crate) fn mcp_hook_answered(
        &mut self,
        session: &str,
        invocation: &str,
        call: McpHookCall,
        outcome: Outcome,
    ) {
        let output = hook_output(outcome);
        self.emit_hook_end(session, invocation, "preMcpToolCall", output.as_ref());
        let meta = output.as_ref().and_then(|o| o.get("metaToUse"));
        let meta = match meta {
            Some(Value::Object(_)) => meta,
            _ => None,
        };
        self.send_mcp_tool_call(
            session,
            &call.tool_call_id,
            &call.server,
            &call.tool,
            &call.arguments,
            meta,
        );
    }
}

/// A hook's output from a `hooks.invoke` answer (`{output}`, or the bare output); `None`
/// when the client failed or gave no answer.
fn hook_output(outcome: Outcome) -> Option<Value> {
    match outcome {
        Outcome::Result(raw) => serde_json::from_str::<Value>(raw.get())
            .ok()
            .map(|v| v.get("output").cloned().unwrap_or(v)),
        _ => None,
    }
}

/// Which hook a call in flight is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PromptHook {
    SessionStart,
    Submitted,
    Transformed,
    SessionEnd,
}

impl PromptHook {
    fn hook_type(self) -> &'static str {
        match self {
            PromptHook::SessionStart => "sessionStart",
            PromptHook::Submitted => "userPromptSubmitted",
            PromptHook::Transformed => "userPromptTransformed",
            PromptHook::SessionEnd => "sessionEnd",
        }
    }
}

/// Where a session's hooks stand.
#[derive(Debug, Default)]
pub(crate) struct HookState {
    /// `sessionStart` was invoked for this load of the session.
    pub(crate) started: bool,
    /// A hook call for the first held prompt is in flight.
    pub(crate) in_flight: bool,
    /// The session was resumed rather than created (`sessionStart.source`).
    pub(crate) resumed: bool,
    /// The `hookInvocationId` of the hook call in flight.
    pub(crate) invocation: Option<String>,
}

impl Host {
    /// What every hook input of `session` carries: `sessionId` (a sub-agent's hooks name
    /// the sub-agent instead, so a hook tells them apart), `timestamp` (epoch ms) and
    /// `cwd` (the session's working directory, else the server's, else empty: the SDKs
    /// require a string).
    pub(crate) fn hook_input(&self, session: &str, extra: Value) -> Value {
        let cwd = self
            .sessions
            .get(session)
            .and_then(|l| l.session.cwd.clone())
            .or_else(|| self.config.server_cwd.clone())
            .unwrap_or_default();
        let mut input =
            json!({"sessionId": session, "timestamp": self.now.as_millis(), "cwd": cwd});
        if let (Value::Object(input), Value::Object(extra)) = (&mut input, extra) {
            for (k, v) in extra {
                // A sub-agent's hook names the sub-agent as its `sessionId`.
                if k == "sessionId" || !input.contains_key(&k) {
                    input.insert(k, v);
                }
            }
        }
        input
    }

    /// Whether a client of `session` answers hooks.
    pub(crate) fn has_hooks(&self, session: &str) -> bool {
        self.hooks_conn(session).is_some()
    }

    /// The (first) client of `session` that answers hooks.
    fn hooks_conn(&self, session: &str) -> Option<crate::host::ConnId> {
        let live = self.sessions.get(session)?;
        live.session
            .attached
            .iter()
            .find(|(_, a)| a.hooks)
            .map(|(c, _)| *c)
    }

    /// A persisted `hook.start {hookInvocationId, hookType, input}`.
    fn emit_hook_start(&mut self, session: &str, invocation: &str, hook_type: &str, input: &Value) {
        let data = json!({"hookInvocationId": invocation, "hookType": hook_type, "input": input});
        self.emit(session, "hook.start", &data, false);
    }

    /// A persisted `hook.end`: `{success: true, output}`, or `{success: false, error}` when
    /// the client gave no answer (the history reads hooks' outputs from it).
    fn emit_hook_end(
        &mut self,
        session: &str,
        invocation: &str,
        hook_type: &str,
        output: Option<&Value>,
    ) {
        let data = match output {
            Some(output) => json!({"hookInvocationId": invocation, "hookType": hook_type,
                                   "success": true, "output": output}),
            None => json!({"hookInvocationId": invocation, "hookType": hook_type,
                           "success": false, "error": {"message": "the client gave no answer"}}),
        };
        self.emit(session, "hook.end", &data, false);
    }

    /// Invokes the next hook the first held prompt of `session` must pass, if any; returns
    /// whether one is in flight.
    pub(in crate::host) fn next_prompt_hook(&mut self, session: &str) -> bool {
        if !self.has_hooks(session) {
            return false;
        }
        let Some(live) = self.sessions.get(session) else {
            return false;
        };
        let Some(AgentInput::Prompt {
            prompt,
            attachments,
            ..
        }) = live.held.front()
        else {
            return false;
        };
        let (hook, extra) = if !live.hooks.started {
            let source = if live.hooks.resumed { "resume" } else { "new" };
            (PromptHook::SessionStart, json!({"source": source}))
        } else if !attachments.hooked {
            (PromptHook::Submitted, json!({"prompt": prompt}))
        } else {
            return false;
        };
        self.invoke_prompt_hook(session, hook, extra)
    }

    /// A client of `session` with hooks is leaving it (`session.destroy`, the SDKs'
    /// disconnect): `sessionEnd` (`{reason: "user_exit", finalMessage?}`) goes out before the
    /// answer, so the client's hook still runs; its output is not awaited.
    pub(crate) fn session_end_hook(&mut self, session: &str, conn: crate::host::ConnId) {
        let hooks_here = self
            .sessions
            .get(session)
            .and_then(|l| l.session.attached.get(&conn))
            .is_some_and(|a| a.hooks);
        if !hooks_here {
            return;
        }
        let final_message = self.session(session).and_then(|s| {
            s.events().iter().rev().find_map(|e| {
                if e.event_type != "assistant.message" {
                    return None;
                }
                let v: Value = serde_json::from_slice(&e.json).ok()?;
                v.pointer("/data/content")?.as_str().map(str::to_owned)
            })
        });
        let mut extra = json!({"reason": "user_exit"});
        if let Some(text) = final_message {
            extra["finalMessage"] = json!(text);
        }
        self.invoke_prompt_hook(session, PromptHook::SessionEnd, extra);
    }

    fn invoke_prompt_hook(&mut self, session: &str, hook: PromptHook, extra: Value) -> bool {
        let Some(conn) = self.hooks_conn(session) else {
            return false;
        };
        let input = self.hook_input(session, extra);
        let params = json!({"sessionId": session, "requestId": self.ids.next_uuid(),
                            "hookType": hook.hook_type(), "input": input});
        let invocation = self.ids.next_uuid();
        let call = ClientCall::PromptHook {
            session: session.to_owned(),
            hook,
        };
        if self
            .send_client_call(conn, ServerRequest::Hook, &params, call)
            .is_err()
        {
            // Nobody can answer: the prompt goes on as it is.
            self.apply_prompt_hook(session, hook, None);
            return false;
        }
        self.emit_hook_start(session, &invocation, hook.hook_type(), &input);
        if let Some(live) = self.sessions.get_mut(session) {
            live.hooks.in_flight = true;
            live.hooks.invocation = Some(invocation);
        }
        true
    }

    /// A hook call ended: its output applies to the first held prompt, then the next hook
    /// (or the prompt) goes on.
    pub(crate) fn prompt_hook_answered(
        &mut self,
        session: &str,
        hook: PromptHook,
        outcome: Outcome,
    ) {
        let output = hook_output(outcome);
        let invocation = self.sessions.get_mut(session).and_then(|live| {
            live.hooks.in_flight = false;
            live.hooks.invocation.take()
        });
        if let Some(invocation) = invocation {
            self.emit_hook_end(session, &invocation, hook.hook_type(), output.as_ref());
        }
        if self.apply_prompt_hook(session, hook, output.as_ref()) {
            return;
        }
        self.release_held(session);
    }

    /// Applies `output` of `hook`; returns whether a further hook is now in flight.
    fn apply_prompt_hook(
        &mut self,
        session: &str,
        hook: PromptHook,
        output: Option<&Value>,
    ) -> bool {
        let text = |key: &str| {
            output
                .and_then(|o| o.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let now = self.now;
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        match hook {
            PromptHook::SessionStart => {
                live.hooks.started = true;
                false
            }
            PromptHook::Submitted => {
                let Some(AgentInput::Prompt {
                    prompt,
                    attachments,
                    ..
                }) = live.held.front_mut()
                else {
                    return false;
                };
                if let Some(modified) = text("modifiedPrompt") {
                    *prompt = modified;
                }
                let with_attachments =
                    format!("{}{prompt}{}", attachments.before, attachments.after);
                let transformed = user_message_content(&current_datetime(now), &with_attachments);
                let extra = json!({"prompt": prompt.clone(), "transformedPrompt": transformed});
                attachments.transformed = Some(transformed);
                self.invoke_prompt_hook(session, PromptHook::Transformed, extra)
            }
            PromptHook::SessionEnd => false,
            PromptHook::Transformed => {
                if let Some(AgentInput::Prompt { attachments, .. }) = live.held.front_mut() {
                    if let Some(modified) = text("modifiedTransformedPrompt") {
                        attachments.transformed = Some(modified);
                    }
                    attachments.hooked = true;
                }
                false
            }
        }
    }
}
