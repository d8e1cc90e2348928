//! The built-in `task` tool: the model hands a piece of work to a sub-agent, a second model
//! loop of the same session with a conversation of its own, and gets the sub-agent's final
//! answer as the tool's result (`mode: "sync"`), or lets it run in the background
//! (`mode: "background"`, see [`super::background`]).
//!
//! The sub-agent runs as a [`ModelAgent`] driven through [`SubAgentControl`], which stands
//! between it and the session: every event it emits carries its `agentId` (so do the events
//! of the tool calls it makes, through [`SessionControl::tag_tool_call`]); its model calls
//! see only its own conversation ([`SessionControl::agent_history`]) under a system prompt
//! of its own; its model requests and hooks name it (`agentId` of a client-performed
//! request, `sessionId` of a hook input); the session-level events a run ends with
//! (`session.idle`, …) stay its own business; its deadlines are armed by the parent, which
//! keeps the session's one timer at the earliest of its agents'. The parent agent routes to it every input its own run is not waiting for.
//! `subagent.started` / `subagent.completed` / `subagent.failed` frame it in the session's
//! log.

use serde_json::{json, Value};

use super::model::ModelAgent;
use super::{
    AcpCall, Agent, AgentInput, BuiltinCall, ClientRequest, ModelSetup, PromptContext,
    SessionControl,
};
use crate::model::{ChatMessage, HttpRequest, ToolSpec};
use crate::Timestamp;

/// The tool's name.
pub const TASK: &str = "task";

/// The built-in agent types a `task` call may name, with what each is for.
pub const BUILTIN_AGENTS: [(&str, &str); 3] = [
    (
        "task",
        "Runs a well-defined piece of work (commands, edits, queries) and reports the outcome \
         briefly.",
    ),
    (
        "explore",
        "Investigates the codebase or the data: reads, searches and answers questions without \
         changing anything.",
    ),
    (
        "general-purpose",
        "Handles a larger multi-step job with every tool the session has.",
    ),
];

/// The tool's declaration, offering `agent_types`.
pub fn task_spec(agent_types: &[&str]) -> ToolSpec {
    let mut description = String::from(
        "Hand a piece of work to a sub-agent that has the same tools (except this one) and a \
         fresh conversation: it sees only the prompt you give it, so make the prompt \
         self-contained. In \"sync\" mode (the default) the sub-agent's final answer is this \
         tool's result; in \"background\" mode the tool returns at once with the agent's id, \
         you are notified when it completes and read its result with read_agent. Agent \
         types:",
    );
    for (name, what) in BUILTIN_AGENTS {
        if agent_types.contains(&name) {
            description.push_str(&format!("\n- {name}: {what}"));
        }
    }
    ToolSpec {
        name: TASK.to_owned(),
        description,
        parameters: json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "A short kebab-case name for the sub-agent."},
                "agent_type": {"type": "string", "enum": agent_types,
                               "description": "Which kind of agent does the work."},
                "description": {"type": "string", "description": "What the sub-agent does, in three to five words."},
                "prompt": {"type": "string", "description": "The whole task, self-contained."},
                "mode": {"type": "string", "enum": ["sync", "background"],
                         "description": "\"sync\" (default) waits for the sub-agent's answer; \"background\" returns immediately and notifies you when it completes. Use \"background\" only with independent work."}
            },
            "required": ["agent_type", "description", "prompt"]
        }),
    }
}

/// What a built-in agent of type `agent_type` is for (empty for another type).
pub(super) fn purpose(agent_type: &str) -> &'static str {
    BUILTIN_AGENTS
        .iter()
        .find(|(name, _)| *name == agent_type)
        .map_or("", |(_, what)| what)
}

/// The system prompt of a sub-agent of type `agent_type`.
fn system_prompt(agent_type: &str) -> String {
    let what = purpose(agent_type);
    format!(
        "You are a {agent_type} sub-agent of GitHub Copilot, working for another agent that \
         handed you one task. {what} Do the task with the tools you have, then answer with a \
         concise summary of what you did and found: your final message is all the other agent \
         sees."
    )
}

/// What a sub-agent run has shown so far.
#[derive(Debug, Default)]
pub(super) struct ChildState {
    /// Its instance id (`agentId` on its events).
    pub(super) agent_id: String,
    /// Its agent type.
    pub(super) agent_type: String,
    /// Its last non-empty answer.
    pub(super) answer: Option<String>,
    /// Why its run failed (`session.error`).
    pub(super) error: Option<String>,
    /// Tool calls it made.
    pub(super) tool_calls: u64,
    /// Tokens it used.
    pub(super) tokens: u64,
}

/// A running sub-agent: the `task` call it serves and its model loop.
pub(super) struct Child {
    /// The parent's `task` tool call.
    pub(super) tool_call_id: String,
    /// Its task id when it runs in the background (`agent_id` of `read_agent`).
    pub(super) task_id: Option<String>,
    pub(super) started: Timestamp,
    pub(super) agent: ModelAgent,
    pub(super) state: ChildState,
}

impl Child {
    /// A sub-agent of `agent_type` for the parent's call `tool_call_id`; it starts with its
    /// first input ([`Child::handle`] with the prompt).
    pub(super) fn new(s: &mut dyn SessionControl, tool_call_id: &str, agent_type: &str) -> Child {
        Child {
            tool_call_id: tool_call_id.to_owned(),
            task_id: None,
            started: s.now(),
            agent: ModelAgent::new(),
            state: ChildState {
                agent_id: s.new_id(),
                agent_type: agent_type.to_owned(),
                ..ChildState::default()
            },
        }
    }

    /// Starts the sub-agent's run on `prompt`.
    pub(super) fn begin(&mut self, s: &mut dyn SessionControl, prompt: String) {
        let message_id = s.new_id();
        self.handle(
            s,
            AgentInput::Prompt {
                message_id,
                prompt,
                attachments: PromptContext::default(),
            },
        );
    }

    /// Gives the sub-agent one input.
    pub(super) fn handle(&mut self, s: &mut dyn SessionControl, input: AgentInput) {
        let mut control = SubAgentControl {
            inner: s,
            state: &mut self.state,
        };
        self.agent.handle(input, &mut control);
    }

    /// Whether the sub-agent's run is over.
    pub(super) fn finished(&self) -> bool {
        !self.agent.is_busy()
    }

    /// The data of `subagent.started`.
    pub(super) fn started_data(&self) -> Value {
        json!({"toolCallId": self.tool_call_id, "agentName": self.state.agent_type,
               "agentDisplayName": display_name(&self.state.agent_type),
               "agentDescription": purpose(&self.state.agent_type)})
    }

    /// The data of `subagent.completed` / `subagent.failed` at `now`.
    pub(super) fn ended_data(&self, now: Timestamp) -> Value {
        let mut data = json!({"toolCallId": self.tool_call_id,
               "agentName": self.state.agent_type,
               "agentDisplayName": display_name(&self.state.agent_type),
               "durationMs": now.saturating_duration_since(self.started).as_millis() as u64,
               "totalToolCalls": self.state.tool_calls,
               "totalTokens": self.state.tokens});
        if let Some(error) = &self.state.error {
            data["error"] = json!(error);
        }
        data
    }
}

fn display_name(agent_type: &str) -> String {
    let mut name = String::new();
    for (i, word) in agent_type.split('-').enumerate() {
        if i > 0 {
            name.push(' ');
        }
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            name.extend(first.to_uppercase());
            name.push_str(chars.as_str());
        }
    }
    format!("{name} Agent")
}

/// The session as a sub-agent sees it (see the module docs).
pub(super) struct SubAgentControl<'a> {
    inner: &'a mut dyn SessionControl,
    state: &'a mut ChildState,
}

impl SubAgentControl<'_> {
    /// Notes what an event of the sub-agent shows; `false` for the events that stay its own.
    fn observe(&mut self, event_type: &str, data: &Value) -> bool {
        match event_type {
            "session.idle" | "assistant.idle" | "pending_messages.modified" | "abort" => false,
            "session.error" => {
                let message = data
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the sub-agent failed");
                self.state.error = Some(message.to_owned());
                false
            }
            "assistant.message" => {
                if let Some(text) = data
                    .get("content")
                    .and_then(Value::as_str)
                    .filter(|t| !t.trim().is_empty())
                {
                    self.state.answer = Some(text.to_owned());
                }
                true
            }
            "assistant.usage" => {
                for key in ["inputTokens", "outputTokens"] {
                    self.state.tokens += data.get(key).and_then(Value::as_u64).unwrap_or(0);
                }
                true
            }
            "tool.execution_start" => {
                self.state.tool_calls += 1;
                true
            }
            _ => true,
        }
    }

    fn tag(&mut self, tool_call_id: &str) {
        self.inner.tag_tool_call(tool_call_id, &self.state.agent_id);
    }
}

impl SessionControl for SubAgentControl<'_> {
    fn now(&self) -> Timestamp {
        self.inner.now()
    }

    fn new_id(&mut self) -> String {
        self.inner.new_id()
    }

    fn streaming(&self) -> bool {
        self.inner.streaming()
    }

    fn has_hooks(&self) -> bool {
        self.inner.has_hooks()
    }

    fn emit(&mut self, event_type: &str, data: Value, ephemeral: bool) -> String {
        if !self.observe(event_type, &data) {
            return String::new();
        }
        let agent = self.state.agent_id.clone();
        self.inner
            .emit_as(Some(&agent), event_type, data, ephemeral)
    }

    fn emit_as(
        &mut self,
        _agent_id: Option<&str>,
        event_type: &str,
        data: Value,
        ephemeral: bool,
    ) -> String {
        self.emit(event_type, data, ephemeral)
    }

    fn call_tool(&mut self, tool_call_id: &str, name: &str, arguments: &Value, turn_id: &str) {
        self.tag(tool_call_id);
        self.inner.call_tool(tool_call_id, name, arguments, turn_id);
    }

    fn call_builtin(&mut self, tool_call_id: &str, call: &BuiltinCall, turn_id: &str) {
        self.tag(tool_call_id);
        self.inner.call_builtin(tool_call_id, call, turn_id);
    }

    fn call_mcp_tool(
        &mut self,
        tool_call_id: &str,
        server: &str,
        tool: &str,
        arguments: &Value,
        turn_id: &str,
    ) {
        self.tag(tool_call_id);
        self.inner
            .call_mcp_tool(tool_call_id, server, tool, arguments, turn_id);
    }

    fn call_skill(&mut self, tool_call_id: &str, arguments: &Value, turn_id: &str) {
        self.tag(tool_call_id);
        self.inner.call_skill(tool_call_id, arguments, turn_id);
    }

    fn call_sql(&mut self, tool_call_id: &str, arguments: &Value, turn_id: &str) {
        self.tag(tool_call_id);
        self.inner.call_sql(tool_call_id, arguments, turn_id);
    }

    fn cancel_tool_calls(&mut self) {
        self.inner.cancel_tool_calls();
    }

    fn set_timer(&mut self, _at: Timestamp) {
        // The parent arms the session's timer at the earliest deadline of all its agents
        // (`ModelAgent::next_deadline`); a timer input reaches every one of them.
    }

    fn ask_client(&mut self, request: ClientRequest) -> u64 {
        let request = match request {
            ClientRequest::Hook {
                hook_type,
                mut input,
            } => {
                if let Some(input) = input.as_object_mut() {
                    input.insert("sessionId".to_owned(), json!(self.state.agent_id));
                }
                ClientRequest::Hook { hook_type, input }
            }
            other => other,
        };
        self.inner.ask_client(request)
    }

    fn http_request(&mut self, request: HttpRequest) -> u64 {
        self.inner.http_request_as(&self.state.agent_id, request)
    }

    fn cancel_http(&mut self, call: u64) {
        self.inner.cancel_http(call);
    }

    fn acp_call(&mut self, _call: AcpCall) -> Option<u64> {
        None
    }

    fn model_setup(&self) -> Result<ModelSetup, String> {
        let mut setup = self.inner.model_setup()?;
        setup.system_prompt = system_prompt(&self.state.agent_type);
        Ok(setup)
    }

    fn transcript_path(&self) -> Option<String> {
        self.inner.transcript_path()
    }

    fn history(&self) -> Vec<ChatMessage> {
        self.inner.agent_history(&self.state.agent_id)
    }

    fn client_tools(&self) -> Vec<ToolSpec> {
        self.inner.client_tools()
    }

    fn builtin_tools(&self) -> Vec<ToolSpec> {
        // No sub-agents of its own, and nobody to ask or to approve a plan.
        self.inner
            .builtin_tools()
            .into_iter()
            .filter(|t| {
                ![
                    TASK,
                    super::background::READ_AGENT,
                    super::background::LIST_AGENTS,
                    super::model_tools::ASK_USER,
                    super::model_tools::EXIT_PLAN_MODE,
                ]
                .contains(&t.name.as_str())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_offers_the_agent_types_given() {
        let spec = task_spec(&["task", "general-purpose"]);
        assert_eq!(
            spec.parameters["properties"]["agent_type"]["enum"],
            json!(["task", "general-purpose"])
        );
        assert!(!spec.description.contains("explore:"));
        assert_eq!(display_name("general-purpose"), "General Purpose Agent");
    }
}
