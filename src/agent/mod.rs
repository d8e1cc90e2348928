//! The agent seam: what an agent sees of a session, and the built-in scripted agent.
//!
//! The host owns sessions, connections and bridges; an agent owns only its reasoning. The
//! host hands the agent what it must act on ([`AgentInput`]: a prompt, an abort, a fired
//! timer, a finished tool call) together with a [`SessionControl`] through which the agent
//! drives the session (emit events, call a client tool, set a timer). A real model loop plugs
//! in by implementing [`Agent`]; [`ScriptedAgent`] is the deterministic default.

pub mod acp;
pub mod background;
pub mod builtin;
mod context_usage;
mod model;
mod model_settings;
pub mod model_tools;
mod scenario;
mod scripted;
pub mod sql_tool;
pub mod subagent;
pub mod system_prompt;
pub mod tool_text;

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

use crate::Timestamp;

pub use builtin::{BuiltinCall, BuiltinOp, GrepQuery, PromptKind};
pub use model::ModelAgent;
pub(crate) use model_settings::vision_of;
pub use model_settings::{
    InfiniteSessions, ModelSettings, ModelSetup, SystemMessage, DEFAULT_SYSTEM_PROMPT,
};
pub use scenario::{Rule, Scenario, ScenarioError, Step, StreamStep, BUILTIN_SCENARIO_JSON};
pub use scripted::ScriptedAgent;

use crate::model::{ChatMessage, HttpRequest, ToolSpec, TransportErrorKind};

/// What the host hands an agent to act on.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentInput {
    /// A user prompt arrived (`session.send`); `message_id` is the id returned to the client
    /// and must be carried as `user.message.messageId` / `assistant.message.originatingMessageId`.
    Prompt {
        /// The id returned by `session.send`.
        message_id: String,
        /// The prompt text.
        prompt: String,
        /// The prompt's attachments, and the text the runtime adds for them.
        attachments: PromptContext,
    },
    /// The client asked to abort the current turn (`session.abort`).
    Abort,
    /// The current turn's pending work was orphaned: the clients that would answer it left,
    /// and the session was resumed without `continuePendingWork`. The turn ends as an abort
    /// does (its tool calls interrupted, the model not called again), without an `abort`
    /// event, since nobody asked for one.
    Interrupt,
    /// A timer set with [`SessionControl::set_timer`] fired.
    Timer,
    /// A tool call started with [`SessionControl::call_tool`] finished. The host has already
    /// emitted `tool.execution_complete` for it.
    ToolDone {
        /// The tool call's id.
        tool_call_id: String,
        /// How it ended.
        outcome: ToolOutcome,
    },
    /// A request made with [`SessionControl::ask_client`] ended: the client's answer, or why
    /// there is none (nobody can answer, the client left, the deadline passed, it failed).
    ClientAnswer {
        /// The token `ask_client` returned.
        token: u64,
        /// The answer's JSON, or the reason there is none.
        outcome: Result<Value, String>,
    },
    /// Something of the session's ACP agent (sessions run by an ACP agent process; see
    /// [`SessionControl::acp_call`]).
    Acp(AcpInput),
    /// A client changed a setting of the session (`session.mode.set`,
    /// `session.model.switchTo`). The host keeps the setting; an agent that keeps its own
    /// copy (an ACP agent process) follows it.
    SettingChanged(SessionSetting),
    /// Progress of an HTTP exchange started with [`SessionControl::http_request`].
    Http {
        /// The id `http_request` returned.
        call: u64,
        /// What happened.
        event: HttpEvent,
    },
}

/// What an ACP agent process reports to the session it runs (see [`SessionControl::acp_call`]).
#[derive(Clone, Debug, PartialEq)]
pub enum AcpInput {
    /// A call made with [`SessionControl::acp_call`] ended: the agent's result, or why there is
    /// none.
    Done {
        /// The token `acp_call` returned.
        token: u64,
        /// The result object, or the reason.
        outcome: Result<Value, String>,
    },
    /// A `session/update` of the session's agent session (its `update` object).
    Update(Value),
    /// The agent process ended (its reason: exit status, stderr): the agent session is gone,
    /// and the next prompt opens a new one on a new process.
    Ended(String),
}

/// A session setting a client changed ([`AgentInput::SettingChanged`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionSetting {
    /// The session's mode (`interactive`, `plan`, `autopilot`).
    Mode(String),
    /// The session's model id.
    Model(String),
}

/// What a session run by an ACP agent asks of its agent process (the host fills in what the
/// session knows: its working directory, its MCP servers).
#[derive(Clone, Debug, PartialEq)]
pub enum AcpCall {
    /// Opens the agent's session for this one: `session/new`, or `session/load` /
    /// `session/resume` of `previous` (the agent's session id this session had) when the agent
    /// can. The result carries `sessionId` (absent on a load or resume: it is `previous`).
    Open {
        /// The agent session this session had before, if any.
        previous: Option<String>,
    },
    /// `session/prompt` with ACP content blocks.
    Prompt {
        /// The agent's session id.
        agent_session: String,
        /// The prompt's content blocks.
        blocks: Vec<Value>,
    },
    /// `session/cancel` (no result).
    Cancel {
        /// The agent's session id.
        agent_session: String,
    },
    /// `session/set_mode`.
    SetMode {
        /// The agent's session id.
        agent_session: String,
        /// The mode id.
        mode: String,
    },
    /// `session/set_config_option` (the agent's model selector, for one).
    SetConfigOption {
        /// The agent's session id.
        agent_session: String,
        /// The option's id.
        config_id: String,
        /// The value's id.
        value: String,
    },
}

/// What comes with a prompt: its attachments (files, directories, IDE selections, GitHub
/// references, …) as the client sent them, its mode, and what the runtime adds to the prompt
/// for the model because of them
/// (see the host's `prompt_attachments`). An agent puts `sent` on `user.message.attachments`
/// and `before` + prompt + `after` in its `transformedContent`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromptContext {
    /// The attachments as sent (`user.message.attachments`).
    pub sent: Vec<Value>,
    /// Text before the prompt (`<ide_selection>` blocks).
    pub before: String,
    /// Text after the prompt (`<tagged_files>`, `<github_references>`).
    pub after: String,
    /// `before` and `after` are filled in (files counted, directories listed).
    pub rendered: bool,
    /// The text the model gets for the prompt, when the host decided it (the
    /// `userPromptTransformed` hook); else the agent builds it (datetime, `before`, prompt,
    /// `after`).
    pub transformed: Option<String>,
    /// The prompt passed the session's prompt hooks.
    pub hooked: bool,
    /// The client rewrote the system prompt's sections for this prompt.
    pub system_transformed: bool,
    /// Extra headers for the model calls of this prompt's turn (`requestHeaders`).
    pub request_headers: Vec<(String, String)>,
    /// The agent mode the prompt was sent in (`agentMode`: `interactive`, `plan`, …), carried
    /// on `user.message`.
    pub agent_mode: Option<String>,
    /// Where a prompt the user did not type comes from (`user.message.source`: `system` for
    /// a background agent's completion notice).
    pub source: Option<String>,
    /// Sent to steer the running turn (`mode: "immediate"`): the agent gives it to the model
    /// at the turn's next model call (`user.message` with `delivery: "steering"`) instead of
    /// queueing it for a turn of its own. With no turn running it is an ordinary prompt.
    pub steering: bool,
}

impl PromptContext {
    /// Puts what a `user.message` carries of the prompt's context on its data:
    /// `attachments` (as sent) and `agentMode`.
    /// They are moved out of the context (an image blob's data is not copied).
    pub fn annotate_user_message(&mut self, message: &mut Value) {
        if !self.sent.is_empty() {
            message["attachments"] = Value::Array(std::mem::take(&mut self.sent));
        }
        if let Some(mode) = self.agent_mode.take() {
            message["agentMode"] = Value::String(mode);
        }
        if let Some(source) = self.source.take() {
            message["source"] = Value::String(source);
        }
    }

    /// Attachments as sent, not rendered yet.
    pub fn sent(sent: Vec<Value>) -> Self {
        PromptContext {
            rendered: sent.is_empty(),
            sent,
            ..Default::default()
        }
    }
}

/// What the runtime reported about an HTTP exchange (see [`AgentInput::Http`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpEvent {
    /// The status line and headers arrived.
    Response {
        /// The HTTP status.
        status: u16,
        /// The response headers (names as sent).
        headers: Vec<(String, String)>,
    },
    /// A piece of the body.
    Body(Vec<u8>),
    /// The body ended normally.
    End,
    /// The exchange failed (connect, TLS, timeout, I/O).
    Error {
        /// The failure's class.
        kind: TransportErrorKind,
        /// What the runtime saw.
        message: String,
    },
}

/// Something the agent asks of the session's clients (see [`SessionControl::ask_client`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ClientRequest {
    /// Ask the user a question (`userInput.request` to a client with `requestUserInput`).
    UserInput {
        /// The question.
        question: String,
        /// Choices offered, if any.
        choices: Vec<String>,
        /// Whether a free-form answer is allowed.
        allow_freeform: bool,
    },
    /// A form or URL elicitation (`elicitation.requested`, answered by a client with
    /// `requestElicitation`).
    Elicitation {
        /// What to ask.
        message: String,
        /// JSON Schema of the form (form mode).
        schema: Option<Value>,
        /// URL to open (URL mode).
        url: Option<String>,
    },
    /// An MCP sampling request (`sampling.requested`, answered by a client with
    /// `requestSampling`).
    Sampling {
        /// The opaque sampling request.
        request: Value,
    },
    /// Run a client's slash command (`command.execute` to the command's owner).
    Command {
        /// The command line, e.g. `/deploy prod`.
        command_line: String,
    },
    /// Propose leaving plan mode (`exitPlanMode.request` to a client with `requestExitPlanMode`).
    ExitPlanMode {
        /// Summary of the plan.
        summary: String,
        /// The plan's text.
        plan: String,
        /// Actions offered.
        actions: Vec<String>,
        /// The recommended action.
        recommended: String,
    },
    /// Ask to switch to auto mode (`autoModeSwitch.request` to a client with
    /// `requestAutoModeSwitch`).
    AutoModeSwitch {
        /// The error that prompted the switch, if any.
        error_code: Option<String>,
        /// How long the rate limit asked to wait, in seconds, if it said.
        retry_after_seconds: Option<u64>,
    },
    /// A bearer token for the session's BYOK provider (`providerToken.getToken` to the
    /// session's client, when the provider says `hasBearerTokenProvider`); the answer is
    /// `{token}`.
    ProviderToken {
        /// The provider's name (`"default"` for the singular `provider`).
        provider_name: String,
    },
    /// Invoke a client hook (`hooks.invoke` to a client with `hooks: true`).
    Hook {
        /// The hook type, e.g. `preToolUse`.
        hook_type: String,
        /// The hook's input.
        input: Value,
    },
}

/// How a tool call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolOutcome {
    /// The tool ran; its text result for the model.
    Success(String),
    /// The tool did not run or failed (`code` is `denied` or `failure`, as the runtime reports).
    Failure {
        /// Human-readable reason.
        message: String,
        /// `denied` (permission) or `failure` (the tool failed or is unavailable).
        code: String,
    },
}

/// The start of the text a call the user rejected shows (`The user rejected this tool call.`,
/// then the user's feedback, if any).
pub const USER_REJECTED: &str = "The user rejected this tool call.";

impl ToolOutcome {
    /// Whether the call was refused outright (the user rejected it at its permission prompt
    /// without feedback for the model, or the client's tool answered `resultType:
    /// "rejected"`): the runtime then ends the turn instead of calling the model again. A
    /// rejection with feedback goes back to the model.
    pub fn ends_turn(&self) -> bool {
        matches!(self, ToolOutcome::Failure { message, code }
            if code == "rejected" || (code == "denied" && message == USER_REJECTED))
    }
}

/// The calls an agent makes to drive its session. Implemented by the host.
pub trait SessionControl {
    /// The current input time.
    fn now(&self) -> Timestamp;
    /// A fresh UUID from the host's seeded generator.
    fn new_id(&mut self) -> String;
    /// Whether any attached connection asked for streaming (delta) events.
    fn streaming(&self) -> bool;
    /// Whether a client of the session answers hooks ([`ClientRequest::Hook`]).
    fn has_hooks(&self) -> bool {
        false
    }
    /// A model call is about to start with `conversation_tokens` of conversation (the
    /// messages after the system prompt) in a window of `token_limit`: the host may start a
    /// background compaction (infinite sessions). The default implementation does nothing.
    fn context_filled(&mut self, conversation_tokens: u64, token_limit: u64) {
        let _ = (conversation_tokens, token_limit);
    }
    /// Whether a client of the session answers auto-mode switches
    /// ([`ClientRequest::AutoModeSwitch`]).
    fn answers_auto_mode_switch(&self) -> bool {
        false
    }
    /// Switches the session's next model calls to `model`: the session's model changes and
    /// `session.model_change` (with `cause`) is emitted. The default implementation, for
    /// controls without model settings, only emits the event.
    fn switch_model(&mut self, model: &str, cause: &str) {
        self.emit(
            "session.model_change",
            serde_json::json!({"newModel": model, "cause": cause}),
            false,
        );
    }
    /// Emits a session event and returns its id. `data` must be a JSON object.
    fn emit(&mut self, event_type: &str, data: Value, ephemeral: bool) -> String;
    /// Like [`SessionControl::emit`], with `data` borrowed, so an agent that emits the same
    /// shape many times (a streaming delta per model chunk) can keep one payload and
    /// update it in place. The default implementation clones `data` into
    /// [`SessionControl::emit`].
    fn emit_ref(&mut self, event_type: &str, data: &Value, ephemeral: bool) -> String {
        self.emit(event_type, data.clone(), ephemeral)
    }
    /// Emits a session event on behalf of sub-agent `agent_id` (`agentId` in the envelope;
    /// `None` is the main agent, as [`SessionControl::emit`]). A sub-agent's streaming deltas
    /// reach only clients that kept `includeSubAgentStreamingEvents`. The default
    /// implementation, for controls without sub-agent support, emits as the main agent.
    fn emit_as(
        &mut self,
        agent_id: Option<&str>,
        event_type: &str,
        data: Value,
        ephemeral: bool,
    ) -> String {
        let _ = agent_id;
        self.emit(event_type, data, ephemeral)
    }
    /// Runs a client tool: `tool.execution_start`, the permission check, the client's
    /// execution and `tool.execution_complete`. The agent gets [`AgentInput::ToolDone`] later.
    fn call_tool(&mut self, tool_call_id: &str, name: &str, arguments: &Value, turn_id: &str);
    /// Runs a built-in tool (read or write a file, run a shell command; see [`builtin`]):
    /// `tool.execution_start`, the permission prompt, the operation (through an ACP client
    /// that offers it, else the call's scripted result) and `tool.execution_complete`. The
    /// agent gets [`AgentInput::ToolDone`] later.
    fn call_builtin(&mut self, tool_call_id: &str, call: &BuiltinCall, turn_id: &str);
    /// Runs tool `tool` of the session's MCP server `server`: `tool.execution_start` (with
    /// `mcpServerName` / `mcpToolName`), the `mcp` permission prompt unless the tool is
    /// read-only, `tools/call` and `tool.execution_complete`. The agent gets
    /// [`AgentInput::ToolDone`] later. The default implementation, for controls without MCP
    /// servers, calls the client tool `SERVER-TOOL`.
    fn call_mcp_tool(
        &mut self,
        tool_call_id: &str,
        server: &str,
        tool: &str,
        arguments: &Value,
        turn_id: &str,
    ) {
        let name = format!("{server}-{tool}");
        self.call_tool(tool_call_id, &name, arguments, turn_id);
    }
    /// Runs the built-in `skill` tool ([`model_tools::SKILL`]): the host loads the named skill
    /// of the session (`tool.execution_start`, `skill.invoked`, `tool.execution_complete`);
    /// the agent gets [`AgentInput::ToolDone`] later. The default implementation, for
    /// controls without skills, calls the client tool `skill`.
    fn call_skill(&mut self, tool_call_id: &str, arguments: &Value, turn_id: &str) {
        self.call_tool(tool_call_id, model_tools::SKILL, arguments, turn_id);
    }
    /// Runs the built-in `sql` tool ([`sql_tool::SQL`]) on the session's SQLite database
    /// (`tool.execution_start`, the statements, `tool.execution_complete`); the agent gets
    /// [`AgentInput::ToolDone`] later. The default implementation, for controls without a
    /// database, calls the client tool `sql`.
    fn call_sql(&mut self, tool_call_id: &str, arguments: &Value, turn_id: &str) {
        self.call_tool(tool_call_id, sql_tool::SQL, arguments, turn_id);
    }
    /// Resolves every tool call this agent has in flight as cancelled (used on abort).
    fn cancel_tool_calls(&mut self);
    /// Asks for [`AgentInput::Timer`] at `at` (replaces an earlier timer of this session).
    fn set_timer(&mut self, at: Timestamp);
    /// Asks the session's clients for something; the answer comes back later as
    /// [`AgentInput::ClientAnswer`] with the returned token (at once, as an error, when no
    /// attached client can answer).
    fn ask_client(&mut self, request: ClientRequest) -> u64;
    /// Asks the runtime to perform `request`
    /// ([`EffectOp::HttpRequest`](crate::host::EffectOp::HttpRequest)); its response arrives as
    /// [`AgentInput::Http`] with the returned call id. The default implementation, for controls
    /// without HTTP, returns 0 and never answers.
    fn http_request(&mut self, request: HttpRequest) -> u64 {
        let _ = request;
        0
    }
    /// [`SessionControl::http_request`] on behalf of the sub-agent with instance id
    /// `agent_id` (a client performing it is told which agent asks). Default: as the session.
    fn http_request_as(&mut self, agent_id: &str, request: HttpRequest) -> u64 {
        let _ = agent_id;
        self.http_request(request)
    }
    /// Abandons an exchange started with [`SessionControl::http_request`]
    /// ([`EffectOp::HttpCancel`](crate::host::EffectOp::HttpCancel)); nothing more arrives for it.
    fn cancel_http(&mut self, call: u64) {
        let _ = call;
    }
    /// Asks the session's ACP agent process (sessions run by an ACP agent); the outcome
    /// arrives as [`AgentInput::Acp`] [`AcpInput::Done`] with the returned token (a
    /// [`AcpCall::Cancel`] has none). `None` when the session has no ACP agent.
    fn acp_call(&mut self, call: AcpCall) -> Option<u64> {
        let _ = call;
        None
    }
    /// The session's model configuration resolved to one provider (the session's own, else
    /// the server default), or why there is none.
    fn model_setup(&self) -> Result<ModelSetup, String> {
        Err("no model provider is configured".to_owned())
    }
    /// Where the session's transcript (its persisted event log) lives on disk, when the
    /// host keeps one (the `transcriptPath` of the `agentStop` hook).
    fn transcript_path(&self) -> Option<String> {
        None
    }
    /// The conversation so far, rebuilt from the session's persisted events (so a session
    /// resumed after a restart continues it).
    fn history(&self) -> Vec<ChatMessage> {
        Vec::new()
    }
    /// The conversation of sub-agent `agent_id` so far (its own events only). The default
    /// implementation, for controls without sub-agents, has none.
    fn agent_history(&self, agent_id: &str) -> Vec<ChatMessage> {
        let _ = agent_id;
        Vec::new()
    }
    /// Tool call `tool_call_id` is sub-agent `agent_id`'s: the events of the call carry its
    /// `agentId`. The default implementation does nothing.
    fn tag_tool_call(&mut self, tool_call_id: &str, agent_id: &str) {
        let _ = (tool_call_id, agent_id);
    }
    /// The tools the session's clients declared, as offered to a model.
    fn client_tools(&self) -> Vec<ToolSpec> {
        Vec::new()
    }
    /// The built-in tools ([`model_tools`]) offered to the session's model: those the
    /// session's `availableTools` / `excludedTools` admit, none when the operator switched
    /// them off.
    fn builtin_tools(&self) -> Vec<ToolSpec> {
        Vec::new()
    }
}

/// An agent driving one session.
pub trait Agent: Send {
    /// Acts on `input`, driving the session through `session`.
    fn handle(&mut self, input: AgentInput, session: &mut dyn SessionControl);
    /// Whether a turn is running (a new prompt would be queued).
    fn is_busy(&self) -> bool;
    /// Prompts waiting for the running turn to end, oldest first: `(message id, prompt)`.
    /// Default: none (an agent that queues nothing).
    fn queued_prompts(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Prompts waiting to steer the running turn, oldest first: `(message id, prompt)`.
    /// Default: none.
    fn steering_prompts(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Drops the steering prompt `message_id` the turn has not taken yet; whether it was
    /// waiting.
    fn drop_steering(&mut self, message_id: &str) -> bool {
        let _ = message_id;
        false
    }
    /// Drops queued prompts (never the running turn): the most recent one, or all of them
    /// with `all`. Returns how many were dropped.
    fn drop_queued_prompts(&mut self, all: bool) -> usize {
        let _ = all;
        0
    }
    /// The session was restored from its log (a restart, a cluster takeover) and this agent
    /// was made for it: `history` is what the log holds. An agent that keeps something the
    /// log records (an ACP agent's session id) reads it back. Default: nothing.
    fn restored(&mut self, history: &[crate::session::Event]) {
        let _ = history;
    }
    /// The background tasks the agent runs or ran (`TaskInfo` of `session.tasks.list`),
    /// oldest first. Default: none.
    fn tasks(&self) -> Vec<Value> {
        Vec::new()
    }
    /// Whether background work is still running (the session is not idle while it is).
    fn has_background_work(&self) -> bool {
        false
    }
    /// Progress of background task `id` (`TaskAgentProgress`); `None` for an unknown id.
    fn task_progress(&self, id: &str) -> Option<Value> {
        let _ = id;
        None
    }
    /// Starts a background agent (`session.tasks.startAgent`); its task id, or why not.
    fn start_background_agent(
        &mut self,
        request: BackgroundAgentRequest,
        session: &mut dyn SessionControl,
    ) -> Result<String, String> {
        let _ = (request, session);
        Err("this session's agent runs no background agents".to_owned())
    }
    /// Cancels running background task `id`; whether it was running.
    fn cancel_task(&mut self, id: &str, session: &mut dyn SessionControl) -> bool {
        let _ = (id, session);
        false
    }
    /// Cancels every running background agent; how many there were.
    fn cancel_all_tasks(&mut self, session: &mut dyn SessionControl) -> usize {
        let _ = session;
        0
    }
    /// Forgets finished background task `id`; `false` when unknown or still running.
    fn remove_task(&mut self, id: &str) -> bool {
        let _ = id;
        false
    }
}

/// What `session.tasks.startAgent` asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackgroundAgentRequest {
    /// The agent type (`explore`, `task`, `general-purpose`).
    pub agent_type: String,
    /// Its prompt.
    pub prompt: String,
    /// Its friendly name (its task id, made unique).
    pub name: String,
    /// What it does, in a few words.
    pub description: String,
}

/// [`Agent::queued_prompts`] / [`Agent::drop_queued_prompts`] over an agent's prompt queue.
pub(crate) fn queued_view<T>(queued: &VecDeque<(String, String, T)>) -> Vec<(String, String)> {
    queued
        .iter()
        .map(|(id, prompt, _)| (id.clone(), prompt.clone()))
        .collect()
}

/// Drops the most recent queued prompt, or all of them.
pub(crate) fn drop_queued<T>(queued: &mut VecDeque<(String, String, T)>, all: bool) -> usize {
    if all {
        let n = queued.len();
        queued.clear();
        n
    } else {
        usize::from(queued.pop_back().is_some())
    }
}

/// Makes the agent for a new session (given its id). Sessions with a model provider (their
/// own, or [`HostConfig::model_default`](crate::HostConfig::model_default)) get a
/// [`ModelAgent`] instead.
pub type AgentFactory = Arc<dyn Fn(&str) -> Box<dyn Agent> + Send + Sync>;

/// An [`AgentFactory`] that gives every session a [`ScriptedAgent`] running `scenario`.
pub fn scripted_factory(scenario: Scenario) -> AgentFactory {
    let scenario = Arc::new(scenario);
    Arc::new(move |_session_id: &str| {
        Box::new(ScriptedAgent::new(scenario.clone())) as Box<dyn Agent>
    })
}
