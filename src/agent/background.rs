//! Background sub-agents: the `task` tool's `mode: "background"`, `session.tasks.startAgent`,
//! and what the model and the clients read of them (`read_agent`, `list_agents`,
//! `session.tasks.list` / `getProgress`), in the runtime's words.
//!
//! A background agent is a sub-agent ([`super::subagent::Child`]) the parent does not wait
//! for: the `task` call answers at once ("Agent started in background with agent_id: …"),
//! the parent's turn goes on or ends, and when the agent is done a `system.notification`
//! wakes the parent with a new turn (`<system_notification>` as a user message). The
//! session is not idle (`session.idle`) while one runs. [`AgentTasks`] is the registry of
//! one session's background agents: running, then completed, failed or cancelled until a
//! client removes them.

use serde_json::{json, Value};

use crate::model::ToolSpec;
use crate::Timestamp;

/// The tool that reads a background agent's status and result.
pub const READ_AGENT: &str = "read_agent";
/// The tool that lists the session's background agents.
pub const LIST_AGENTS: &str = "list_agents";

/// How long `read_agent` with `wait: true` waits by default, and at most (seconds).
const READ_WAIT_DEFAULT_SECS: u64 = 30;
const READ_WAIT_MAX_SECS: u64 = 180;

/// `read_agent`'s declaration.
pub fn read_agent_spec() -> ToolSpec {
    ToolSpec {
        name: READ_AGENT.to_owned(),
        description: "Retrieves the status and results of a background agent. Use it with each \
                      agent_id from task results or notifications. Statuses: running, \
                      completed, failed, cancelled. You are notified when a background agent \
                      completes: then call this tool once with wait: true to retrieve the \
                      result."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "agent_id": {"type": "string", "description": "The ID of the background agent to read results from. This is returned when starting an agent with mode: \"background\"."},
                "wait": {"type": "boolean", "description": "If true, wait for the agent to complete before returning. If false (default), return immediately with current status."},
                "timeout": {"type": "number", "description": "Maximum time in seconds to wait if wait is true. Default is 30, maximum is 180."}
            },
            "required": ["agent_id"]
        }),
    }
}

/// `list_agents`' declaration.
pub fn list_agents_spec() -> ToolSpec {
    ToolSpec {
        name: LIST_AGENTS.to_owned(),
        description: "Lists the background agents of this session by status: running, \
                      completed, failed or cancelled. Use it only for an overview or when no \
                      agent_id is in recent context."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "include_completed": {"type": "boolean", "description": "Whether to include completed and failed agents in the list. Default is true."}
            }
        }),
    }
}

/// Where a background agent is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentTaskStatus {
    /// Working.
    Running,
    /// Its run ended with an answer.
    Completed,
    /// Its run failed.
    Failed,
    /// It was stopped (`session.tasks.cancel`, an abort of the session).
    Cancelled,
}

impl AgentTaskStatus {
    /// The runtime's name of the status (`TaskStatus`).
    pub fn as_str(self) -> &'static str {
        match self {
            AgentTaskStatus::Running => "running",
            AgentTaskStatus::Completed => "completed",
            AgentTaskStatus::Failed => "failed",
            AgentTaskStatus::Cancelled => "cancelled",
        }
    }
}

/// One background agent as the registry keeps it.
#[derive(Clone, Debug)]
pub struct AgentTask {
    /// Its task id (`agent_id` for `read_agent`): its `name`, made unique in the session.
    pub id: String,
    /// The `task` call that started it (empty for `session.tasks.startAgent`).
    pub tool_call_id: String,
    /// Its agent type (`explore`, …).
    pub agent_type: String,
    /// What it does, in a few words.
    pub description: String,
    /// The prompt it was given.
    pub prompt: String,
    /// When it started and, once over, when it ended.
    pub started: Timestamp,
    /// When it ended.
    pub ended: Option<Timestamp>,
    /// Where it is.
    pub status: AgentTaskStatus,
    /// Its final answer.
    pub result: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// The tool calls it made so far.
    pub tool_calls: u64,
}

impl AgentTask {
    fn elapsed_secs(&self, now: Timestamp) -> u64 {
        self.ended
            .unwrap_or(now)
            .saturating_duration_since(self.started)
            .as_secs()
    }

    /// `TaskAgentInfo` of `session.tasks.list`.
    pub fn info(&self) -> Value {
        let mut info = json!({
            "type": "agent",
            "id": self.id,
            "toolCallId": self.tool_call_id,
            "description": self.description,
            "status": self.status.as_str(),
            "startedAt": self.started.to_rfc3339(),
            "agentType": self.agent_type,
            "prompt": self.prompt,
            "executionMode": "background",
            "canPromoteToBackground": false,
        });
        if let Some(ended) = self.ended {
            info["completedAt"] = json!(ended.to_rfc3339());
            info["activeTimeMs"] =
                json!(ended.saturating_duration_since(self.started).as_millis() as u64);
        }
        if let Some(result) = &self.result {
            info["result"] = json!(result);
            info["latestResponse"] = json!(result);
        }
        if let Some(error) = &self.error {
            info["error"] = json!(error);
        }
        info
    }

    /// The status line `read_agent` and `list_agents` give.
    fn status_line(&self, now: Timestamp) -> String {
        let mut line = format!(
            "agent_id: {}, agent_type: {}, status: {}, description: {}, elapsed: {}s",
            self.id,
            self.agent_type,
            self.status.as_str(),
            self.description,
            self.elapsed_secs(now)
        );
        if self.status == AgentTaskStatus::Running {
            line.push_str(&format!(", tool_calls_completed: {}", self.tool_calls));
        } else {
            // One-shot agents: no follow-up turns (`write_agent` is not served).
            line.push_str(&format!(
                ", total_turns: 0, duration: {}s",
                self.elapsed_secs(now)
            ));
        }
        line
    }

    /// `read_agent`'s answer at `now` (`waited`: a `wait: true` that ran out first, in
    /// seconds).
    pub fn read_text(&self, now: Timestamp, waited: Option<u64>) -> String {
        let status = self.status_line(now);
        match self.status {
            AgentTaskStatus::Running => match waited {
                Some(secs) => format!("Agent is still running after waiting {secs}s. {status}"),
                None => format!("Agent is still running. {status}"),
            },
            AgentTaskStatus::Completed => format!(
                "Agent completed. {status}\n\n{}",
                self.result
                    .as_deref()
                    .unwrap_or("Agent completed but produced no response.")
            ),
            AgentTaskStatus::Failed => format!(
                "Agent failed. {status}\n\n{}",
                self.error.as_deref().unwrap_or("The agent failed.")
            ),
            AgentTaskStatus::Cancelled => format!("Agent was cancelled. {status}"),
        }
    }

    /// The notification that wakes the parent once the agent is over (`None` while it
    /// runs, and for a cancelled agent: whoever cancelled it knows).
    pub fn notification(&self) -> Option<String> {
        let outcome = match self.status {
            AgentTaskStatus::Completed => "has completed successfully",
            AgentTaskStatus::Failed => "has failed",
            AgentTaskStatus::Running | AgentTaskStatus::Cancelled => return None,
        };
        Some(format!(
            "<system_notification>\nAgent \"{id}\" ({kind}) {outcome}. Use read_agent with \
             agent_id \"{id}\" to retrieve the full results.\n</system_notification>",
            id = self.id,
            kind = self.agent_type
        ))
    }

    /// `system.notification`'s data for the agent's end.
    pub fn notification_data(&self, content: &str) -> Value {
        json!({
            "content": content,
            "kind": {
                "type": "agent_completed",
                "agentId": self.id,
                "agentType": self.agent_type,
                "status": self.status.as_str(),
                "description": self.description,
                "prompt": self.prompt,
            }
        })
    }
}

/// The `task` call's answer for an agent started in the background.
pub fn started_text(id: &str) -> String {
    format!(
        "Agent started in background with agent_id: {id}. You'll be notified when it \
         completes. Tell the user you're waiting and end your response, or continue unrelated \
         work until notified."
    )
}

/// How long a `read_agent` call with `arguments` waits (`None`: it does not wait).
pub fn read_wait(arguments: &Value) -> Option<std::time::Duration> {
    if arguments.get("wait").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let secs = arguments
        .get("timeout")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t > 0.0)
        .map_or(READ_WAIT_DEFAULT_SECS as f64, |t| {
            t.min(READ_WAIT_MAX_SECS as f64)
        });
    Some(std::time::Duration::from_millis((secs * 1000.0) as u64))
}

/// The background agents of one session.
#[derive(Debug, Default)]
pub struct AgentTasks {
    tasks: Vec<AgentTask>,
}

/// What the log shows of one sub-agent run (by its instance id).
struct LoggedRun {
    instance: String,
    prompt: String,
    answer: Option<String>,
    started: Option<Timestamp>,
    taken: bool,
}

impl AgentTasks {
    /// The background agents that were over when `history` (a session's persisted events)
    /// ends, as the log shows them: each `system.notification` of an agent's end, with the
    /// answer of the sub-agent run it reported (its last `assistant.message`). An agent still
    /// running when the log ends is not there (a restart or takeover ends it, as it ends a
    /// running turn).
    pub fn from_history(history: &[crate::session::Event]) -> AgentTasks {
        let mut runs: Vec<LoggedRun> = Vec::new();
        let mut tasks = AgentTasks::default();
        for event in history {
            let relevant = matches!(
                event.event_type.as_str(),
                "user.message" | "assistant.message" | "system.notification"
            );
            let Some(envelope) = relevant
                .then(|| serde_json::from_slice::<Value>(&event.json).ok())
                .flatten()
            else {
                continue;
            };
            let data = &envelope["data"];
            let at = envelope["timestamp"]
                .as_str()
                .and_then(Timestamp::parse_rfc3339);
            let text = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();
            let instance = envelope["agentId"].as_str();
            match (event.event_type.as_str(), instance) {
                ("user.message", Some(instance))
                    if !runs.iter().any(|r| r.instance == instance) =>
                {
                    runs.push(LoggedRun {
                        instance: instance.to_owned(),
                        prompt: text(data, "content"),
                        answer: None,
                        started: at,
                        taken: false,
                    });
                }
                ("assistant.message", Some(instance)) => {
                    let content = text(data, "content");
                    if let Some(run) = runs.iter_mut().find(|r| r.instance == instance) {
                        if !content.trim().is_empty() {
                            run.answer = Some(content);
                        }
                    }
                }
                ("system.notification", None) if data["kind"]["type"] == "agent_completed" => {
                    let kind = &data["kind"];
                    let prompt = text(kind, "prompt");
                    let run = runs
                        .iter_mut()
                        .rev()
                        .find(|r| !r.taken && r.prompt == prompt);
                    let (started, answer) = match run {
                        Some(run) => {
                            run.taken = true;
                            (run.started, run.answer.clone())
                        }
                        None => (None, None),
                    };
                    let ended = at.unwrap_or(Timestamp::EPOCH);
                    let failed = kind["status"] == "failed";
                    tasks.add(AgentTask {
                        id: text(kind, "agentId"),
                        tool_call_id: String::new(),
                        agent_type: text(kind, "agentType"),
                        description: text(kind, "description"),
                        prompt,
                        started: started.unwrap_or(ended),
                        ended: Some(ended),
                        status: if failed {
                            AgentTaskStatus::Failed
                        } else {
                            AgentTaskStatus::Completed
                        },
                        result: if failed { None } else { answer },
                        error: failed.then(|| "The sub-agent failed.".to_owned()),
                        tool_calls: 0,
                    });
                }
                _ => {}
            }
        }
        tasks
    }

    /// A task id for an agent called `name` that no agent of the session has (`name`,
    /// `name-2`, …; `fallback` when the name is empty).
    pub fn unique_id(&self, name: &str, fallback: &str) -> String {
        let base = if name.trim().is_empty() {
            fallback
        } else {
            name.trim()
        };
        let taken = |id: &str| self.tasks.iter().any(|t| t.id == id);
        if !taken(base) {
            return base.to_owned();
        }
        (2..)
            .map(|n| format!("{base}-{n}"))
            .find(|id| !taken(id))
            .unwrap_or_default()
    }

    /// Registers a running agent.
    pub fn add(&mut self, task: AgentTask) {
        self.tasks.push(task);
    }

    /// The agent with task id `id`.
    pub fn get(&self, id: &str) -> Option<&AgentTask> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The agent with task id `id`, to update.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut AgentTask> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    /// Every agent, oldest first.
    pub fn all(&self) -> &[AgentTask] {
        &self.tasks
    }

    /// Whether an agent is still running.
    pub fn any_running(&self) -> bool {
        self.tasks
            .iter()
            .any(|t| t.status == AgentTaskStatus::Running)
    }

    /// Forgets an agent that is over; `false` when there is none or it still runs.
    pub fn remove(&mut self, id: &str) -> bool {
        let before = self.tasks.len();
        self.tasks
            .retain(|t| t.id != id || t.status == AgentTaskStatus::Running);
        self.tasks.len() < before
    }

    /// `list_agents`' answer at `now`.
    pub fn list_text(&self, include_completed: bool, now: Timestamp) -> String {
        let shown: Vec<&AgentTask> = self
            .tasks
            .iter()
            .filter(|t| include_completed || t.status == AgentTaskStatus::Running)
            .collect();
        if shown.is_empty() {
            return "No background agents.".to_owned();
        }
        let mut text = String::from("Background agents:");
        for task in shown {
            text.push_str("\n- ");
            text.push_str(&task.status_line(now));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, status: AgentTaskStatus) -> AgentTask {
        AgentTask {
            id: id.to_owned(),
            tool_call_id: "call-1".to_owned(),
            agent_type: "explore".to_owned(),
            description: "Reading a file".to_owned(),
            prompt: "Read it".to_owned(),
            started: Timestamp::from_millis(1_000),
            ended: (status != AgentTaskStatus::Running).then(|| Timestamp::from_millis(3_500)),
            status,
            result: (status == AgentTaskStatus::Completed).then(|| "It says hi.".to_owned()),
            error: (status == AgentTaskStatus::Failed).then(|| "model down".to_owned()),
            tool_calls: 2,
        }
    }

    #[test]
    fn ids_are_the_name_made_unique() {
        let mut tasks = AgentTasks::default();
        assert_eq!(tasks.unique_id("read-file", "agent-0"), "read-file");
        tasks.add(task("read-file", AgentTaskStatus::Running));
        assert_eq!(tasks.unique_id("read-file", "agent-1"), "read-file-2");
        assert_eq!(tasks.unique_id(" ", "agent-1"), "agent-1");
    }

    #[test]
    fn read_texts_say_where_the_agent_is_in_the_runtime_words() {
        let now = Timestamp::from_millis(10_000);
        assert_eq!(
            task("a", AgentTaskStatus::Completed).read_text(now, None),
            "Agent completed. agent_id: a, agent_type: explore, status: completed, \
             description: Reading a file, elapsed: 2s, total_turns: 0, duration: 2s\n\n\
             It says hi."
        );
        assert_eq!(
            task("a", AgentTaskStatus::Running).read_text(now, Some(30)),
            "Agent is still running after waiting 30s. agent_id: a, agent_type: explore, \
             status: running, description: Reading a file, elapsed: 9s, tool_calls_completed: 2"
        );
        assert!(task("a", AgentTaskStatus::Failed)
            .read_text(now, None)
            .ends_with("model down"));
    }

    #[test]
    fn only_an_agent_that_is_over_notifies_and_can_be_removed() {
        let mut tasks = AgentTasks::default();
        tasks.add(task("run", AgentTaskStatus::Running));
        tasks.add(task("done", AgentTaskStatus::Completed));
        assert_eq!(tasks.get("run").unwrap().notification(), None);
        assert_eq!(
            tasks.get("done").unwrap().notification().unwrap(),
            "<system_notification>\nAgent \"done\" (explore) has completed successfully. Use \
             read_agent with agent_id \"done\" to retrieve the full results.\n\
             </system_notification>"
        );
        assert!(!tasks.remove("run"));
        assert!(tasks.remove("done"));
        assert!(!tasks.remove("done"));
        assert!(tasks.any_running());
        assert_eq!(
            tasks.list_text(false, Timestamp::from_millis(2_000)),
            "Background agents:\n- agent_id: run, agent_type: explore, status: running, \
             description: Reading a file, elapsed: 1s, tool_calls_completed: 2"
        );
    }

    #[test]
    fn agents_that_were_over_are_read_back_from_the_log() {
        use crate::session::Event;
        let at = |ms: u64| Timestamp::from_millis(1_795_983_977_000 + ms);
        let event = |ty: &str, data: Value, ms: u64, agent: Option<&str>| {
            Event::new_from(format!("e{ms}"), ty, &data, false, at(ms), None, agent)
        };
        let done = task("reader", AgentTaskStatus::Completed);
        let notice = done.notification().unwrap();
        let history = vec![
            event("user.message", json!({"content": "hello"}), 0, None),
            event(
                "user.message",
                json!({"content": "Read it"}),
                1_000,
                Some("inst-1"),
            ),
            event(
                "assistant.message",
                json!({"content": "Looking."}),
                1_500,
                Some("inst-1"),
            ),
            event(
                "assistant.message",
                json!({"content": "It says hi."}),
                2_000,
                Some("inst-1"),
            ),
            event(
                "assistant.message",
                json!({"content": ""}),
                2_100,
                Some("inst-1"),
            ),
            event(
                "user.message",
                json!({"content": "Still going"}),
                2_500,
                Some("inst-2"),
            ),
            event(
                "system.notification",
                done.notification_data(&notice),
                3_500,
                None,
            ),
        ];
        let tasks = AgentTasks::from_history(&history);
        assert_eq!(tasks.all().len(), 1, "the running one is not restored");
        let read = &tasks.all()[0];
        assert_eq!(read.id, "reader");
        assert_eq!(read.status, AgentTaskStatus::Completed);
        assert_eq!(read.result.as_deref(), Some("It says hi."));
        assert_eq!((read.started, read.ended), (at(1_000), Some(at(3_500))));
        assert_eq!(tasks.unique_id("reader", "x"), "reader-2");
    }

    #[test]
    fn a_wait_is_bounded() {
        assert_eq!(read_wait(&json!({"wait": false})), None);
        assert_eq!(
            read_wait(&json!({"wait": true})),
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(
            read_wait(&json!({"wait": true, "timeout": 1000})),
            Some(std::time::Duration::from_secs(180))
        );
    }
}
