//! The scripted agent: plays a [`Scenario`] with the real runtime's event order.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{
    Agent, AgentInput, PromptContext, Scenario, SessionControl, Step, StreamStep, ToolOutcome,
};
use crate::Timestamp;

/// A deterministic agent that answers each prompt by playing the scenario's steps.
///
/// A turn follows the real runtime's order (reference §7): `user.message` →
/// `assistant.turn_start` → (`assistant.message_start` / `assistant.message_delta` for
/// streaming clients) → `assistant.message` → `assistant.turn_end` → `session.idle`. A `tool`
/// step emits `assistant.message{toolRequests}`, runs the tool through the host, then closes
/// the turn and opens the next one, as the runtime does around each model call.
/// Prompts that arrive while a turn runs are queued and played in order.
pub struct ScriptedAgent {
    scenario: Arc<Scenario>,
    run: Option<Run>,
    queued: VecDeque<(String, String, PromptContext)>,
}

struct Run {
    steps: Vec<Step>,
    next: usize,
    prompt: String,
    message_id: String,
    turn: u64,
    waiting: Waiting,
    /// The text of the last client answer, for `{answer}` in `say` steps.
    answer: String,
    /// The text of the last tool result (or failure message), for `{result}` in `say` steps.
    result: String,
    /// A `stream` step in progress (it yields to the host between batches).
    stream: Option<Streaming>,
}

/// Progress of a `stream` step.
struct Streaming {
    step: StreamStep,
    message_id: String,
    /// Index of the next delta.
    next: u64,
    /// The deltas emitted so far, concatenated: the final message's content.
    content: String,
    /// When the step started: paced batches are due at fixed offsets from it.
    started: Timestamp,
    /// Batches emitted so far.
    batches: u64,
}

#[derive(PartialEq, Eq)]
enum Waiting {
    Nothing,
    Timer,
    Tool(String),
    Client(u64),
}

impl ScriptedAgent {
    /// An agent playing `scenario`.
    pub fn new(scenario: Arc<Scenario>) -> Self {
        ScriptedAgent {
            scenario,
            run: None,
            queued: VecDeque::new(),
        }
    }

    fn start(
        &mut self,
        message_id: String,
        prompt: String,
        mut attachments: PromptContext,
        s: &mut dyn SessionControl,
    ) {
        let mut message = json!({"content": prompt, "messageId": message_id});
        attachments.annotate_user_message(&mut message);
        s.emit("user.message", message, false);
        s.emit("assistant.turn_start", json!({"turnId": "0"}), false);
        self.run = Some(Run {
            steps: self.scenario.steps_for(&prompt).to_vec(),
            next: 0,
            prompt,
            message_id,
            turn: 0,
            waiting: Waiting::Nothing,
            answer: String::new(),
            result: String::new(),
            stream: None,
        });
        self.advance(s);
    }

    /// Plays steps until one must wait or the run ends.
    fn advance(&mut self, s: &mut dyn SessionControl) {
        loop {
            let Some(run) = self.run.as_mut() else { return };
            if run.waiting != Waiting::Nothing {
                return;
            }
            if run.stream.is_some() {
                stream_batch(s, run);
                continue;
            }
            let Some(step) = run.steps.get(run.next).cloned() else {
                self.finish(s, None);
                return;
            };
            run.next += 1;
            match step {
                Step::Say(text) => {
                    let text = text
                        .replace("{prompt}", &run.prompt)
                        .replace("{answer}", &run.answer)
                        .replace("{result}", &run.result);
                    say(s, &text, &run.message_id, run.turn);
                }
                Step::Stream(step) => {
                    let message_id = s.new_id();
                    if s.streaming() {
                        s.emit(
                            "assistant.message_start",
                            json!({"messageId": message_id}),
                            true,
                        );
                    }
                    run.stream = Some(Streaming {
                        step,
                        message_id,
                        next: 0,
                        content: String::new(),
                        started: s.now(),
                        batches: 0,
                    });
                }
                Step::Tool { name, arguments } => {
                    let tool_call_id = format!("call_{}", s.new_id());
                    let message_id = s.new_id();
                    let turn_id = run.turn.to_string();
                    s.emit(
                        "assistant.message",
                        json!({
                            "messageId": message_id,
                            "content": "",
                            "toolRequests": [{"toolCallId": tool_call_id, "name": name,
                                              "arguments": arguments, "type": "function"}],
                            "originatingMessageId": run.message_id,
                            "turnId": turn_id,
                        }),
                        false,
                    );
                    run.waiting = Waiting::Tool(tool_call_id.clone());
                    s.call_tool(&tool_call_id, &name, &arguments, &turn_id);
                }
                Step::Mcp {
                    server,
                    tool,
                    arguments,
                } => {
                    let tool_call_id = format!("call_{}", s.new_id());
                    let message_id = s.new_id();
                    let turn_id = run.turn.to_string();
                    s.emit(
                        "assistant.message",
                        json!({
                            "messageId": message_id,
                            "content": "",
                            "toolRequests": [{"toolCallId": tool_call_id,
                                              "name": format!("{server}-{tool}"),
                                              "arguments": arguments, "type": "function",
                                              "mcpServerName": server, "mcpToolName": tool}],
                            "originatingMessageId": run.message_id,
                            "turnId": turn_id,
                        }),
                        false,
                    );
                    run.waiting = Waiting::Tool(tool_call_id.clone());
                    s.call_mcp_tool(&tool_call_id, &server, &tool, &arguments, &turn_id);
                }
                Step::Event {
                    event_type,
                    data,
                    ephemeral,
                    agent_id,
                } => {
                    s.emit_as(agent_id.as_deref(), &event_type, data, ephemeral);
                }
                Step::Error(message) => {
                    s.emit(
                        "session.error",
                        json!({"errorType": "scenario", "message": message}),
                        false,
                    );
                    self.finish(s, None);
                    return;
                }
                Step::Builtin(call) => {
                    let call = call.with_placeholders(&run.prompt);
                    let tool_call_id = format!("call_{}", s.new_id());
                    let message_id = s.new_id();
                    let turn_id = run.turn.to_string();
                    s.emit(
                        "assistant.message",
                        json!({
                            "messageId": message_id,
                            "content": "",
                            "toolRequests": [{"toolCallId": tool_call_id,
                                              "name": call.tool_name(),
                                              "arguments": call.arguments(),
                                              "type": "function"}],
                            "originatingMessageId": run.message_id,
                            "turnId": turn_id,
                        }),
                        false,
                    );
                    run.waiting = Waiting::Tool(tool_call_id.clone());
                    s.call_builtin(&tool_call_id, &call, &turn_id);
                }
                Step::Ask(request) => {
                    // The answer may already be queued (nobody could answer); either way it
                    // arrives as an input after this call returns.
                    run.waiting = Waiting::Client(s.ask_client(request));
                }
                Step::SleepMs(ms) => {
                    run.waiting = Waiting::Timer;
                    let at = s.now().saturating_add(Duration::from_millis(ms));
                    s.set_timer(at);
                }
            }
        }
    }

    /// Ends the running turn (`aborted` carries the abort flag for `session.idle`) and starts
    /// the next queued prompt, if any.
    fn finish(&mut self, s: &mut dyn SessionControl, aborted: Option<bool>) {
        if let Some(run) = self.run.take() {
            s.emit(
                "assistant.turn_end",
                json!({"turnId": run.turn.to_string()}),
                false,
            );
            let data = match aborted {
                Some(true) => json!({"aborted": true, "mode": "interactive"}),
                _ => json!({"mode": "interactive"}),
            };
            s.emit("session.idle", data, true);
        }
        if let Some((message_id, prompt, attachments)) = self.queued.pop_front() {
            self.start(message_id, prompt, attachments, s);
        }
    }
}

/// Plays one batch of the running `stream` step: its deltas, then either a timer for the next
/// batch (zero-length, or the next paced slot with `interval_us`) or the final
/// `assistant.message`.
fn stream_batch(s: &mut dyn SessionControl, run: &mut Run) {
    let Some(st) = run.stream.as_mut() else {
        return;
    };
    let streaming = s.streaming();
    let now = s.now();
    let now_ns = now.as_nanos().to_string();
    // Without streaming clients nobody sees the deltas: build the content in one go.
    let batch = match (streaming, st.step.batch, st.step.interval_us) {
        (true, Some(batch), _) => batch,
        (true, None, Some(_)) => 1,
        _ => st.step.count,
    };
    let end = st.next.saturating_add(batch).min(st.step.count);
    while st.next < end {
        let chunk = st
            .step
            .text
            .replace("{i}", &st.next.to_string())
            .replace("{now_ns}", &now_ns);
        if streaming {
            s.emit(
                "assistant.message_delta",
                json!({"messageId": st.message_id, "deltaContent": chunk}),
                true,
            );
        }
        st.content.push_str(&chunk);
        st.next += 1;
    }
    st.batches += 1;
    if st.next < st.step.count {
        run.waiting = Waiting::Timer;
        let at = match st.step.interval_us {
            Some(us) => st
                .started
                .saturating_add(Duration::from_micros(us.saturating_mul(st.batches))),
            None => now,
        };
        s.set_timer(at);
        return;
    }
    let Some(st) = run.stream.take() else {
        return;
    };
    s.emit(
        "assistant.message",
        json!({
            "messageId": st.message_id,
            "content": st.content,
            "toolRequests": [],
            "originatingMessageId": run.message_id,
            "turnId": run.turn.to_string(),
        }),
        false,
    );
}

/// Emits one assistant message, streamed as deltas when a client asked for streaming.
fn say(s: &mut dyn SessionControl, text: &str, originating: &str, turn: u64) {
    let message_id = s.new_id();
    if s.streaming() {
        s.emit(
            "assistant.message_start",
            json!({"messageId": message_id}),
            true,
        );
        for chunk in text.split_inclusive(' ') {
            s.emit(
                "assistant.message_delta",
                json!({"messageId": message_id, "deltaContent": chunk}),
                true,
            );
        }
    }
    s.emit(
        "assistant.message",
        json!({
            "messageId": message_id,
            "content": text,
            "toolRequests": [],
            "originatingMessageId": originating,
            "turnId": turn.to_string(),
        }),
        false,
    );
}

impl Agent for ScriptedAgent {
    fn handle(&mut self, input: AgentInput, s: &mut dyn SessionControl) {
        match input {
            AgentInput::Prompt {
                message_id,
                prompt,
                attachments,
            } => {
                if self.run.is_some() {
                    self.queued.push_back((message_id, prompt, attachments));
                } else {
                    self.start(message_id, prompt, attachments, s);
                }
            }
            AgentInput::Abort | AgentInput::Interrupt => {
                self.queued.clear();
                if self.run.is_some() {
                    s.cancel_tool_calls();
                    if matches!(input, AgentInput::Abort) {
                        s.emit("abort", json!({"reason": "user_initiated"}), false);
                    }
                    self.finish(s, Some(true));
                }
            }
            // Only a session run by an ACP agent gets these.
            AgentInput::Acp(_) | AgentInput::SettingChanged(_) => {}
            AgentInput::Timer => {
                if let Some(run) = self.run.as_mut() {
                    if run.waiting == Waiting::Timer {
                        run.waiting = Waiting::Nothing;
                        self.advance(s);
                    }
                }
            }
            // The scripted agent makes no HTTP calls.
            AgentInput::Http { .. } => {}
            AgentInput::ClientAnswer { token, outcome } => {
                let Some(run) = self.run.as_mut() else { return };
                if run.waiting != Waiting::Client(token) {
                    return;
                }
                run.waiting = Waiting::Nothing;
                run.answer = match outcome {
                    Ok(serde_json::Value::String(text)) => text,
                    // `userInput.request` answers `{answer, wasFreeform}`: the text is `answer`.
                    Ok(serde_json::Value::Object(fields))
                        if fields
                            .get("answer")
                            .is_some_and(serde_json::Value::is_string) =>
                    {
                        fields["answer"].as_str().unwrap_or_default().to_owned()
                    }
                    Ok(value) => value.to_string(),
                    Err(reason) => format!("error: {reason}"),
                };
                self.advance(s);
            }
            AgentInput::ToolDone {
                tool_call_id,
                outcome,
            } => {
                let Some(run) = self.run.as_mut() else { return };
                if run.waiting != Waiting::Tool(tool_call_id) {
                    return;
                }
                run.waiting = Waiting::Nothing;
                // The runtime closes the turn after a tool round and opens the next one for
                // the model's follow-up call.
                s.emit(
                    "assistant.turn_end",
                    json!({"turnId": run.turn.to_string()}),
                    false,
                );
                run.turn += 1;
                s.emit(
                    "assistant.turn_start",
                    json!({"turnId": run.turn.to_string()}),
                    false,
                );
                // On a failure the script plays its next steps regardless, as a model
                // would go on after explaining the failure.
                run.result = match outcome {
                    ToolOutcome::Success(text) => text,
                    ToolOutcome::Failure { message, .. } => message,
                };
                self.advance(s);
            }
        }
    }

    fn is_busy(&self) -> bool {
        self.run.is_some()
    }

    fn queued_prompts(&self) -> Vec<(String, String)> {
        super::queued_view(&self.queued)
    }

    fn drop_queued_prompts(&mut self, all: bool) -> usize {
        super::drop_queued(&mut self.queued, all)
    }
}

impl std::fmt::Debug for ScriptedAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedAgent")
            .field("busy", &self.run.is_some())
            .field("queued", &self.queued.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{BuiltinCall, ClientRequest};
    use serde_json::Value;

    /// A session that records what the agent emits and the timer it sets.
    struct Recorder {
        now: Timestamp,
        streaming: bool,
        ids: u64,
        events: Vec<(String, Value)>,
        timer: Option<Timestamp>,
    }

    impl SessionControl for Recorder {
        fn now(&self) -> Timestamp {
            self.now
        }
        fn new_id(&mut self) -> String {
            self.ids += 1;
            format!("id{}", self.ids)
        }
        fn streaming(&self) -> bool {
            self.streaming
        }
        fn emit(&mut self, event_type: &str, data: Value, _ephemeral: bool) -> String {
            self.events.push((event_type.to_owned(), data));
            self.new_id()
        }
        fn call_tool(&mut self, _: &str, _: &str, _: &Value, _: &str) {}
        fn call_builtin(&mut self, _: &str, _: &BuiltinCall, _: &str) {}
        fn cancel_tool_calls(&mut self) {}
        fn set_timer(&mut self, at: Timestamp) {
            self.timer = Some(at);
        }
        fn ask_client(&mut self, _: ClientRequest) -> u64 {
            0
        }
    }

    fn recorder(streaming: bool) -> Recorder {
        Recorder {
            now: Timestamp::from_nanos(1_000),
            streaming,
            ids: 0,
            events: Vec::new(),
            timer: None,
        }
    }

    fn prompt(agent: &mut ScriptedAgent, s: &mut Recorder) {
        agent.handle(
            AgentInput::Prompt {
                message_id: "m".into(),
                prompt: "go".into(),
                attachments: Default::default(),
            },
            s,
        );
    }

    fn deltas(s: &Recorder) -> Vec<&str> {
        s.events
            .iter()
            .filter(|(t, _)| t == "assistant.message_delta")
            .map(|(_, d)| d["deltaContent"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn stream_step_yields_between_batches_and_stamps_each_batch_with_the_input_time() {
        let scenario =
            Scenario::from_json(r#"{"default":[{"stream":5,"text":"{i}@{now_ns} ","batch":2}]}"#)
                .unwrap();
        let mut agent = ScriptedAgent::new(Arc::new(scenario));
        let mut s = recorder(true);
        prompt(&mut agent, &mut s);
        assert_eq!(deltas(&s), ["0@1000 ", "1@1000 "]);
        assert_eq!(s.timer, Some(Timestamp::from_nanos(1_000)));
        assert!(agent.is_busy());

        s.now = Timestamp::from_nanos(2_000);
        s.timer = None;
        agent.handle(AgentInput::Timer, &mut s);
        s.now = Timestamp::from_nanos(3_000);
        agent.handle(AgentInput::Timer, &mut s);
        assert_eq!(
            deltas(&s),
            ["0@1000 ", "1@1000 ", "2@2000 ", "3@2000 ", "4@3000 "]
        );
        let types: Vec<&str> = s.events.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types[..3],
            [
                "user.message",
                "assistant.turn_start",
                "assistant.message_start"
            ]
        );
        assert_eq!(
            types[types.len() - 3..],
            ["assistant.message", "assistant.turn_end", "session.idle"]
        );
        let message = &s.events[types.len() - 3].1;
        assert_eq!(message["content"], "0@1000 1@1000 2@2000 3@2000 4@3000 ");
        assert_eq!(message["messageId"], s.events[2].1["messageId"]);
        assert!(!agent.is_busy());
    }

    #[test]
    fn paced_stream_step_sets_each_timer_at_its_slot_from_the_start() {
        let scenario = Scenario::from_json(
            r#"{"default":[{"stream":4,"text":"{i}@{now_ns} ","interval_us":10}]}"#,
        )
        .unwrap();
        let mut agent = ScriptedAgent::new(Arc::new(scenario));
        let mut s = recorder(true);
        prompt(&mut agent, &mut s);
        // One delta per batch without `batch`; the next slot is 10 µs after the start.
        assert_eq!(deltas(&s), ["0@1000 "]);
        assert_eq!(s.timer, Some(Timestamp::from_nanos(11_000)));
        // A late timer does not shift the schedule: the next slot stays at start + 2 × 10 µs.
        s.now = Timestamp::from_nanos(15_000);
        agent.handle(AgentInput::Timer, &mut s);
        assert_eq!(s.timer, Some(Timestamp::from_nanos(21_000)));
        s.now = Timestamp::from_nanos(21_000);
        agent.handle(AgentInput::Timer, &mut s);
        assert_eq!(s.timer, Some(Timestamp::from_nanos(31_000)));
        s.timer = None;
        s.now = Timestamp::from_nanos(31_000);
        agent.handle(AgentInput::Timer, &mut s);
        assert_eq!(deltas(&s), ["0@1000 ", "1@15000 ", "2@21000 ", "3@31000 "]);
        assert_eq!(s.timer, None, "no timer after the last batch");
        assert!(!agent.is_busy());
    }

    #[test]
    fn stream_step_without_streaming_clients_emits_only_the_message() {
        let scenario = Scenario::from_json(r#"{"default":[{"stream":3,"batch":1}]}"#).unwrap();
        let mut agent = ScriptedAgent::new(Arc::new(scenario));
        let mut s = recorder(false);
        prompt(&mut agent, &mut s);
        let types: Vec<&str> = s.events.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types,
            [
                "user.message",
                "assistant.turn_start",
                "assistant.message",
                "assistant.turn_end",
                "session.idle"
            ]
        );
        assert_eq!(s.events[2].1["content"], "0 1 2 ");
        assert_eq!(s.timer, None);
    }
}
