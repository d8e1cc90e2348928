//! A model agent's sub-agents: the one a `task` call waits for (`mode: "sync"`), the ones
//! running in the background (`mode: "background"`, `session.tasks.startAgent`), and the
//! `read_agent` / `list_agents` calls that read them ([`crate::agent::subagent`],
//! [`crate::agent::background`]).
//!
//! Inputs reach the agent that waits for them: the parent's run first, else the sub-agent
//! whose run owns the HTTP exchange, tool call or client answer. A timer input reaches
//! every one of them (each model call checks its own deadline), and the parent arms the
//! session's one timer at the earliest deadline of them all.

use serde_json::{json, Value};

use super::super::background::{
    read_wait, started_text, AgentTask, AgentTaskStatus, AgentTasks, LIST_AGENTS, READ_AGENT,
};
use super::super::subagent::{Child, BUILTIN_AGENTS, TASK};
use super::super::{AgentInput, BackgroundAgentRequest, PromptContext, SessionControl};
use super::{emit_call_start, end_call_at_once, ModelAgent, Run, Step, ToolOutcome};
use crate::model::ToolCall;
use crate::Timestamp;

/// A call of the model that the agent serves with its sub-agents.
pub(super) enum AgentCall {
    /// `task`: start a sub-agent.
    Spawn {
        tool_call_id: String,
        agent_type: String,
        prompt: String,
        name: String,
        description: String,
        background: bool,
    },
    /// `read_agent`.
    Read {
        tool_call_id: String,
        arguments: Value,
    },
    /// `list_agents`.
    List {
        tool_call_id: String,
        include_completed: bool,
    },
}

/// A `read_agent` call with `wait: true` waiting for its agent.
struct PendingRead {
    tool_call_id: String,
    task_id: String,
    deadline: Timestamp,
    secs: u64,
}

/// The sub-agents of one model agent.
#[derive(Default)]
pub(super) struct SubAgents {
    /// The sub-agent the running `task` call waits for.
    sync: Option<Box<Child>>,
    /// Background agents still running.
    background: Vec<Child>,
    /// Every background agent of the session, running or over.
    pub(super) tasks: AgentTasks,
    /// `read_agent` calls waiting for their agent.
    reads: Vec<PendingRead>,
    /// The parent went idle while background agents ran: `session.idle` (with `aborted`)
    /// is owed once they are done.
    idle_owed: Option<bool>,
}

impl SubAgents {
    /// Whether a background agent is running.
    pub(super) fn background_running(&self) -> bool {
        !self.background.is_empty()
    }

    /// `TaskAgentProgress` of background agent `id`.
    pub(super) fn progress(&self, id: &str) -> Option<Value> {
        let task = self.tasks.get(id)?;
        let mut progress = json!({"type": "agent", "recentActivity": []});
        if let Some(child) = self
            .background
            .iter()
            .find(|c| c.task_id.as_deref() == Some(id))
        {
            progress["recentActivity"] = json!([{
                "message": format!("{} tool call(s) so far", child.state.tool_calls),
                "timestamp": task.started.to_rfc3339(),
            }]);
        }
        Some(progress)
    }
}

/// Whether `name` is a tool the agent serves with its sub-agents.
pub(super) fn is_agent_tool(name: &str) -> bool {
    [TASK, READ_AGENT, LIST_AGENTS].contains(&name)
}

/// `task`, `read_agent` or `list_agents`: the call starts (`tool.execution_start`) and is
/// served once the response's calls are dispatched ([`ModelAgent::serve_agent_calls`]). A
/// `task` call without a prompt, or in a mode that does not exist, fails at once. Returns
/// whether the call already ended.
pub(super) fn start_agent_tool(s: &mut dyn SessionControl, run: &mut Run, call: &ToolCall) -> bool {
    let arguments = call.parsed_arguments().unwrap_or_default();
    let text = |key: &str| super::super::model_tools::text_argument(&arguments, key);
    let tool_call_id = call.id.clone();
    let agent_call = match call.name.as_str() {
        TASK => {
            let (prompt, mode) = (text("prompt"), text("mode"));
            let problem = if prompt.trim().is_empty() {
                Some("the task has no prompt".to_owned())
            } else if !["", "sync", "background"].contains(&mode.as_str()) {
                Some(format!(
                    "mode \"{mode}\" does not exist: use \"sync\" or \"background\""
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                end_call_at_once(s, run, call, &problem, "failure");
                return true;
            }
            let agent_type = match text("agent_type") {
                t if t.is_empty() => "task".to_owned(),
                t => t,
            };
            AgentCall::Spawn {
                tool_call_id,
                agent_type,
                prompt,
                name: text("name"),
                description: text("description"),
                background: mode == "background",
            }
        }
        READ_AGENT => AgentCall::Read {
            tool_call_id,
            arguments: arguments.clone(),
        },
        _ => AgentCall::List {
            tool_call_id,
            include_completed: arguments
                .get("include_completed")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        },
    };
    emit_call_start(s, run, call, &arguments);
    run.agent_calls.push(agent_call);
    false
}

impl ModelAgent {
    /// Serves the agent tool calls just dispatched. Sync sub-agents run one at a time: a
    /// `task` call made while one runs fails, saying so.
    pub(super) fn serve_agent_calls(&mut self, s: &mut dyn SessionControl) {
        let Some(run) = self.run.as_mut() else { return };
        for call in std::mem::take(&mut run.agent_calls) {
            match call {
                AgentCall::Spawn {
                    tool_call_id,
                    agent_type,
                    prompt,
                    background: false,
                    ..
                } => self.start_sync(s, &tool_call_id, &agent_type, prompt),
                AgentCall::Spawn {
                    tool_call_id,
                    agent_type,
                    prompt,
                    name,
                    description,
                    background: true,
                } => {
                    let request = BackgroundAgentRequest {
                        agent_type,
                        prompt,
                        name,
                        description,
                    };
                    let id = self.start_background(s, &tool_call_id, request);
                    self.finish_task(s, &tool_call_id, ToolOutcome::Success(started_text(&id)));
                    self.check_background(s);
                }
                AgentCall::Read {
                    tool_call_id,
                    arguments,
                } => self.read_agent(s, tool_call_id, &arguments),
                AgentCall::List {
                    tool_call_id,
                    include_completed,
                } => {
                    let text = self.agents.tasks.list_text(include_completed, s.now());
                    self.finish_task(s, &tool_call_id, ToolOutcome::Success(text));
                }
            }
        }
    }

    fn start_sync(
        &mut self,
        s: &mut dyn SessionControl,
        tool_call_id: &str,
        agent_type: &str,
        prompt: String,
    ) {
        if self.agents.sync.is_some() {
            let outcome = ToolOutcome::Failure {
                message: "another sub-agent is running: sub-agents run one at a time, call the \
                          task tool again once it has answered"
                    .to_owned(),
                code: "failure".to_owned(),
            };
            return self.finish_task(s, tool_call_id, outcome);
        }
        let mut child = Child::new(s, tool_call_id, agent_type);
        s.emit("subagent.started", child.started_data(), false);
        child.begin(s, prompt);
        self.agents.sync = Some(Box::new(child));
        self.check_child(s);
    }

    /// Starts a background agent for the parent's call `tool_call_id` (empty for
    /// `session.tasks.startAgent`); returns its task id.
    fn start_background(
        &mut self,
        s: &mut dyn SessionControl,
        tool_call_id: &str,
        request: BackgroundAgentRequest,
    ) -> String {
        let fallback = s.new_id();
        let id = self.agents.tasks.unique_id(&request.name, &fallback);
        let mut child = Child::new(s, tool_call_id, &request.agent_type);
        child.task_id = Some(id.clone());
        s.emit("subagent.started", child.started_data(), false);
        self.agents.tasks.add(AgentTask {
            id: id.clone(),
            tool_call_id: tool_call_id.to_owned(),
            agent_type: request.agent_type,
            description: request.description,
            prompt: request.prompt.clone(),
            started: s.now(),
            ended: None,
            status: AgentTaskStatus::Running,
            result: None,
            error: None,
            tool_calls: 0,
        });
        s.emit("session.background_tasks_changed", json!({}), true);
        child.begin(s, request.prompt);
        self.agents.background.push(child);
        id
    }

    /// `session.tasks.startAgent`: a background agent of a built-in type the session
    /// offers, started whether or not a turn runs.
    pub(super) fn start_requested_agent(
        &mut self,
        request: BackgroundAgentRequest,
        s: &mut dyn SessionControl,
    ) -> Result<String, String> {
        let offered = s
            .builtin_tools()
            .into_iter()
            .find(|t| t.name == TASK)
            .and_then(|t| {
                let types = t.parameters["properties"]["agent_type"]["enum"]
                    .as_array()?
                    .clone();
                Some(
                    types
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect::<Vec<_>>(),
                )
            })
            .unwrap_or_default();
        if !offered.contains(&request.agent_type) {
            let known: Vec<&str> = BUILTIN_AGENTS
                .iter()
                .map(|(name, _)| *name)
                .filter(|name| offered.iter().any(|o| o == name))
                .collect();
            return Err(format!(
                "Unknown agent_type: {}. Valid types are: {}",
                request.agent_type,
                known.join(", ")
            ));
        }
        if request.prompt.trim().is_empty() {
            return Err("the agent has no prompt".to_owned());
        }
        let id = self.start_background(s, "", request);
        // Started while the session was idle: it is busy until the agent is done.
        if self.run.is_none() && self.agents.idle_owed.is_none() {
            self.agents.idle_owed = Some(false);
        }
        self.check_background(s);
        Ok(id)
    }

    /// When the sync sub-agent's run is over, its answer (or failure) completes the `task`
    /// call.
    fn check_child(&mut self, s: &mut dyn SessionControl) {
        if !self.agents.sync.as_ref().is_some_and(|c| c.finished()) {
            return;
        }
        let Some(child) = self.agents.sync.take() else {
            return;
        };
        let outcome = report_end(s, &child);
        self.finish_task(s, &child.tool_call_id, outcome);
    }

    /// Background agents whose run is over: their record is updated, `read_agent` calls
    /// waiting for them answered, and unless one was, the parent is notified (a new turn
    /// when it is idle, after its running one otherwise). Then an owed `session.idle` goes
    /// out when nothing is left running.
    fn check_background(&mut self, s: &mut dyn SessionControl) {
        while let Some(i) = self.agents.background.iter().position(|c| c.finished()) {
            let child = self.agents.background.remove(i);
            let outcome = report_end(s, &child);
            let Some(id) = child.task_id.as_deref() else {
                continue;
            };
            if let Some(task) = self.agents.tasks.get_mut(id) {
                task.ended = Some(s.now());
                task.tool_calls = child.state.tool_calls;
                match outcome {
                    ToolOutcome::Success(text) => {
                        task.status = AgentTaskStatus::Completed;
                        task.result = Some(text);
                    }
                    ToolOutcome::Failure { message, .. } => {
                        task.status = AgentTaskStatus::Failed;
                        task.error = Some(message);
                    }
                }
            }
            s.emit("session.background_tasks_changed", json!({}), true);
            if self.answer_reads(s, id) {
                continue;
            }
            self.notify(s, id);
        }
        self.settle(s);
    }

    /// Tells the parent that background agent `id` is over: `system.notification`, and the
    /// notice as the parent's next prompt (`source: "system"`).
    fn notify(&mut self, s: &mut dyn SessionControl, id: &str) {
        let Some(task) = self.agents.tasks.get(id) else {
            return;
        };
        let Some(content) = task.notification() else {
            return;
        };
        s.emit(
            "system.notification",
            task.notification_data(&content),
            false,
        );
        let context = PromptContext {
            transformed: Some(content.clone()),
            rendered: true,
            source: Some("system".to_owned()),
            ..PromptContext::default()
        };
        let message_id = s.new_id();
        s.emit("pending_messages.modified", json!({}), true);
        self.queued.push_back((message_id, content, context));
        self.next_queued(s);
    }

    /// The parent's run is over: `assistant.idle`, and `session.idle` unless background
    /// agents still run (then it is owed until they are done).
    pub(super) fn idle(&mut self, s: &mut dyn SessionControl, aborted: bool) {
        s.emit("assistant.idle", json!({}), true);
        if self.agents.background_running() {
            self.agents.idle_owed = Some(aborted || self.agents.idle_owed == Some(true));
            return;
        }
        self.agents.idle_owed = None;
        s.emit("session.idle", idle_data(aborted), true);
    }

    /// Sends the `session.idle` owed since the parent went idle, once nothing runs.
    fn settle(&mut self, s: &mut dyn SessionControl) {
        if self.run.is_some() || self.agents.background_running() || !self.queued.is_empty() {
            return;
        }
        if let Some(aborted) = self.agents.idle_owed.take() {
            s.emit("session.idle", idle_data(aborted), true);
        }
    }

    /// `read_agent`: the agent's status and result now, or once it is over when the call
    /// waits (at most its timeout).
    fn read_agent(&mut self, s: &mut dyn SessionControl, tool_call_id: String, arguments: &Value) {
        let id = super::super::model_tools::text_argument(arguments, "agent_id");
        let Some(task) = self.agents.tasks.get(&id) else {
            let outcome = ToolOutcome::Failure {
                message: format!(
                    "No agent found with agent_id: {id}. The agent may have been cleared or \
                     never existed."
                ),
                code: "failure".to_owned(),
            };
            return self.finish_task(s, &tool_call_id, outcome);
        };
        if task.status == AgentTaskStatus::Running {
            if let Some(wait) = read_wait(arguments) {
                self.agents.reads.push(PendingRead {
                    tool_call_id,
                    task_id: id,
                    deadline: s.now().saturating_add(wait),
                    secs: wait.as_secs(),
                });
                return;
            }
        }
        let text = task.read_text(s.now(), None);
        self.finish_task(s, &tool_call_id, ToolOutcome::Success(text));
    }

    /// Answers the `read_agent` calls waiting for agent `id`; whether there were any.
    fn answer_reads(&mut self, s: &mut dyn SessionControl, id: &str) -> bool {
        let (now, mut answered) = (s.now(), false);
        while let Some(i) = self.agents.reads.iter().position(|r| r.task_id == id) {
            let read = self.agents.reads.remove(i);
            let Some(task) = self.agents.tasks.get(id) else {
                continue;
            };
            let text = task.read_text(now, None);
            self.finish_task(s, &read.tool_call_id, ToolOutcome::Success(text));
            answered = true;
        }
        answered
    }

    /// Answers the waiting `read_agent` calls whose timeout passed.
    fn expire_reads(&mut self, s: &mut dyn SessionControl) {
        let now = s.now();
        while let Some(i) = self.agents.reads.iter().position(|r| r.deadline <= now) {
            let read = self.agents.reads.remove(i);
            let Some(task) = self.agents.tasks.get(&read.task_id) else {
                continue;
            };
            let text = task.read_text(now, Some(read.secs));
            self.finish_task(s, &read.tool_call_id, ToolOutcome::Success(text));
        }
    }

    /// Cancels the running background agent `id` (every one with `None`); how many.
    pub(super) fn cancel_background(
        &mut self,
        s: &mut dyn SessionControl,
        id: Option<&str>,
    ) -> usize {
        let mut cancelled = 0;
        while let Some(i) = self
            .agents
            .background
            .iter()
            .position(|c| id.is_none() || c.task_id.as_deref() == id)
        {
            let mut child = self.agents.background.remove(i);
            child.handle(s, AgentInput::Abort);
            child.state.error = Some("Cancelled".to_owned());
            s.emit("subagent.failed", child.ended_data(s.now()), false);
            let task_id = child.task_id.clone().unwrap_or_default();
            if let Some(task) = self.agents.tasks.get_mut(&task_id) {
                task.status = AgentTaskStatus::Cancelled;
                task.ended = Some(s.now());
                task.tool_calls = child.state.tool_calls;
            }
            self.answer_reads(s, &task_id);
            cancelled += 1;
        }
        if cancelled > 0 {
            s.emit("session.background_tasks_changed", json!({}), true);
            self.settle(s);
        }
        cancelled
    }

    /// Completes `task` call `tool_call_id` with `outcome`.
    pub(super) fn finish_task(
        &mut self,
        s: &mut dyn SessionControl,
        tool_call_id: &str,
        outcome: ToolOutcome,
    ) {
        if tool_call_id.is_empty() {
            return;
        }
        let data = match &outcome {
            ToolOutcome::Success(text) => json!({"toolCallId": tool_call_id, "success": true,
                "result": {"content": text, "detailedContent": text}}),
            ToolOutcome::Failure { message, code } => json!({"toolCallId": tool_call_id,
                "success": false, "error": {"message": message, "code": code}}),
        };
        s.emit("tool.execution_complete", data, false);
        self.tool_finished(s, tool_call_id.to_owned(), outcome);
    }

    /// Whether the running interaction waits for `input` (not a sub-agent's).
    fn owns(&self, input: &AgentInput) -> bool {
        let Some(run) = self.run.as_ref() else {
            return false;
        };
        match input {
            AgentInput::Http { call, .. } => {
                matches!(&run.step, Step::Calling(a) if a.http == Some(*call))
            }
            AgentInput::Timer => matches!(run.step, Step::Calling(_)),
            AgentInput::ToolDone { tool_call_id, .. } => {
                matches!(&run.step, Step::Tools { waiting } if waiting.contains(tool_call_id))
            }
            AgentInput::ClientAnswer { token, .. } => run.awaits_token(*token),
            AgentInput::Prompt { .. }
            | AgentInput::Abort
            | AgentInput::Interrupt
            | AgentInput::Acp(_)
            | AgentInput::SettingChanged(_) => true,
        }
    }

    /// Hands `input` to the sub-agent that waits for it (`None`: one took it); what the
    /// parent's run waits for, prompts and aborts go on to the parent. An abort ends the
    /// sync sub-agent with the parent's turn; background agents go on. A timer reaches
    /// every agent, and waiting `read_agent` calls whose timeout passed are answered.
    pub(super) fn route_to_children(
        &mut self,
        input: AgentInput,
        s: &mut dyn SessionControl,
    ) -> Option<AgentInput> {
        match &input {
            AgentInput::Abort | AgentInput::Interrupt => {
                if let Some(mut child) = self.agents.sync.take() {
                    child.handle(s, AgentInput::Abort);
                }
                self.agents.reads.clear();
                return Some(input);
            }
            AgentInput::Timer => {
                if let Some(child) = self.agents.sync.as_mut() {
                    child.handle(s, AgentInput::Timer);
                }
                for child in &mut self.agents.background {
                    child.handle(s, AgentInput::Timer);
                }
                self.expire_reads(s);
                self.check_child(s);
                self.check_background(s);
                return Some(input);
            }
            _ if self.owns(&input) => return Some(input),
            _ => {}
        }
        if let Some(child) = self.agents.sync.as_mut().filter(|c| c.agent.owns(&input)) {
            child.handle(s, input);
            self.check_child(s);
            return None;
        }
        if let Some(child) = self
            .agents
            .background
            .iter_mut()
            .find(|c| c.agent.owns(&input))
        {
            child.handle(s, input);
            self.check_background(s);
            return None;
        }
        Some(input)
    }

    /// The earliest deadline of the agent's model call, its sub-agents' and its waiting
    /// `read_agent` calls.
    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        let own = self.run.as_ref().and_then(|r| match &r.step {
            Step::Calling(active) => active.call.next_deadline(),
            _ => None,
        });
        let children = self
            .agents
            .sync
            .as_deref()
            .into_iter()
            .chain(self.agents.background.iter())
            .filter_map(|c| c.agent.next_deadline());
        let reads = self.agents.reads.iter().map(|r| r.deadline);
        own.into_iter().chain(children).chain(reads).min()
    }

    /// Arms the session's timer at [`ModelAgent::next_deadline`].
    pub(super) fn arm_timer(&self, s: &mut dyn SessionControl) {
        if let Some(at) = self.next_deadline() {
            s.set_timer(at);
        }
    }
}

/// `session.idle`'s data.
fn idle_data(aborted: bool) -> Value {
    if aborted {
        json!({"aborted": true, "mode": "interactive"})
    } else {
        json!({"mode": "interactive"})
    }
}

/// Reports the end of sub-agent `child` (`subagent.completed` / `subagent.failed`) and
/// returns its outcome as a tool result.
fn report_end(s: &mut dyn SessionControl, child: &Child) -> ToolOutcome {
    let data = child.ended_data(s.now());
    match (&child.state.error, &child.state.answer) {
        (Some(error), _) => {
            s.emit("subagent.failed", data, false);
            ToolOutcome::Failure {
                message: format!("The sub-agent failed: {error}"),
                code: "failure".to_owned(),
            }
        }
        (None, answer) => {
            s.emit("subagent.completed", data, false);
            ToolOutcome::Success(
                answer
                    .clone()
                    .unwrap_or_else(|| "The sub-agent finished without an answer.".to_owned()),
            )
        }
    }
}
