//! A session run by an ACP agent: the [`Agent`] behind the session seam that opens the
//! agent's session, sends it the session's prompts one turn at a time, cancels on abort, and
//! turns what the agent streams into session events ([`TurnTranslator`]).
//!
//! The agent process is the host's: this agent asks for it through
//! [`SessionControl::acp_call`] and hears from it as [`AgentInput::Acp`]. The agent's own
//! requests (permission prompts, files, terminals) never come here: the host serves them for
//! the session.

use std::collections::VecDeque;

use serde_json::{json, Value};

use crate::agent::{
    drop_queued, queued_view, AcpCall, AcpInput, Agent, AgentInput, PromptContext, SessionControl,
    SessionSetting,
};

use super::client::StopReason;
use super::translate::TurnTranslator;

/// Where the session's turn is.
#[derive(Debug)]
enum Turn {
    /// No turn.
    Idle,
    /// The agent's session is being opened; the prompt waits.
    Opening { token: u64, blocks: Vec<Value> },
    /// The prompt was sent.
    Prompting { token: u64 },
}

/// An [`Agent`] for a session whose agent is an ACP agent process (see the
/// [module docs](self)).
#[derive(Debug)]
pub struct AcpSessionAgent {
    /// The agent's session id, once opened.
    agent_session: Option<String>,
    /// The agent session this session had on an agent process that ended.
    previous: Option<String>,
    turn: Turn,
    /// The running turn was interrupted (no `abort` event when it ends).
    interrupted: bool,
    queued: VecDeque<(String, String, PromptContext)>,
    translator: TurnTranslator,
    /// What the agent's session offers to change (from opening it).
    choices: AgentChoices,
    /// Settings clients changed before the agent's session was open.
    pending_settings: Vec<SessionSetting>,
    /// The agent session the log records for this session (its last
    /// [`AGENT_SESSION_INFO`] event).
    recorded: Option<String>,
}

/// The `infoType` of the `session.info` event that records the agent session a session
/// runs on (read back when the session is restored).
pub const AGENT_SESSION_INFO: &str = "acp_agent_session";

/// The modes and the model selector the agent's session offers (`session/new`'s `modes` and
/// its `configOptions` of category `model`).
#[derive(Debug, Default)]
struct AgentChoices {
    /// `(id, name)` of each mode.
    modes: Vec<(String, String)>,
    current_mode: Option<String>,
    /// The model selector: its option id and `(value, name)` of each model.
    model: Option<(String, Vec<(String, String)>)>,
}

impl AgentChoices {
    fn of(result: &Value) -> Self {
        let pairs = |items: Option<&Value>, id: &str| -> Vec<(String, String)> {
            items
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|item| {
                    let value = item.get(id)?.as_str()?.to_owned();
                    let name = item.get("name").and_then(Value::as_str).unwrap_or(&value);
                    Some((value.clone(), name.to_owned()))
                })
                .collect()
        };
        let model = result
            .get("configOptions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|o| o.get("category").and_then(Value::as_str) == Some("model"))
            .and_then(|o| {
                let id = o.get("id")?.as_str()?.to_owned();
                Some((id, pairs(o.get("options"), "value")))
            });
        AgentChoices {
            modes: pairs(result.pointer("/modes/availableModes"), "id"),
            current_mode: result
                .pointer("/modes/currentModeId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            model,
        }
    }

    /// The agent's call that applies `setting`, if the agent offers a matching choice (its
    /// id or name equal to the setting, ignoring case).
    fn call_for(&mut self, agent_session: &str, setting: &SessionSetting) -> Option<AcpCall> {
        let find = |choices: &[(String, String)], wanted: &str| {
            choices
                .iter()
                .find(|(id, name)| {
                    id.eq_ignore_ascii_case(wanted) || name.eq_ignore_ascii_case(wanted)
                })
                .map(|(id, _)| id.clone())
        };
        match setting {
            SessionSetting::Mode(mode) => {
                let id = find(&self.modes, mode)?;
                if self.current_mode.as_deref() == Some(id.as_str()) {
                    return None;
                }
                self.current_mode = Some(id.clone());
                Some(AcpCall::SetMode {
                    agent_session: agent_session.to_owned(),
                    mode: id,
                })
            }
            SessionSetting::Model(model) => {
                let (config_id, values) = self.model.as_ref()?;
                Some(AcpCall::SetConfigOption {
                    agent_session: agent_session.to_owned(),
                    config_id: config_id.clone(),
                    value: find(values, model)?,
                })
            }
        }
    }
}

impl AcpSessionAgent {
    /// An agent for a new session, or for a restored one that had agent session `previous`.
    pub fn new(previous: Option<String>) -> Self {
        AcpSessionAgent {
            agent_session: None,
            previous,
            turn: Turn::Idle,
            interrupted: false,
            queued: VecDeque::new(),
            translator: TurnTranslator::new(),
            choices: AgentChoices::default(),
            pending_settings: Vec::new(),
            recorded: None,
        }
    }

    /// A client changed a setting: the agent's session follows when it offers that choice
    /// (a setting changed before the session opened is applied once it is open).
    fn setting_changed(&mut self, s: &mut dyn SessionControl, setting: SessionSetting) {
        let Some(agent_session) = self.agent_session.clone() else {
            self.pending_settings.push(setting);
            return;
        };
        if let Some(call) = self.choices.call_for(&agent_session, &setting) {
            if let AcpCall::SetMode { mode, .. } = &call {
                // The client's change was announced already: the agent's confirmation
                // (`current_mode_update`) is not announced again.
                self.translator.set_initial_mode(Some(mode));
            }
            // Its result (or failure) changes nothing here: the agent reports its mode
            // (`current_mode_update`) and options (`config_option_update`) itself.
            s.acp_call(call);
        }
    }

    /// The agent's session id, once opened.
    pub fn agent_session(&self) -> Option<&str> {
        self.agent_session.as_deref()
    }

    fn start(
        &mut self,
        s: &mut dyn SessionControl,
        message_id: String,
        prompt: String,
        mut context: PromptContext,
    ) {
        let interaction_id = s.new_id();
        let blocks = prompt_blocks(&prompt, &context);
        let mut message = json!({
            "content": prompt,
            "messageId": &message_id,
            "interactionId": interaction_id,
        });
        context.annotate_user_message(&mut message);
        s.emit("user.message", message, false);
        self.translator.begin_turn(s, &message_id, &interaction_id);
        self.interrupted = false;
        match self.agent_session.clone() {
            Some(agent_session) => self.send_prompt(s, agent_session, blocks),
            None => {
                let previous = self.previous.clone();
                match s.acp_call(AcpCall::Open { previous }) {
                    Some(token) => self.turn = Turn::Opening { token, blocks },
                    None => self.end(s, Err("this session has no ACP agent".to_owned())),
                }
            }
        }
    }

    fn send_prompt(
        &mut self,
        s: &mut dyn SessionControl,
        agent_session: String,
        blocks: Vec<Value>,
    ) {
        match s.acp_call(AcpCall::Prompt {
            agent_session,
            blocks,
        }) {
            Some(token) => self.turn = Turn::Prompting { token },
            None => self.end(s, Err("this session has no ACP agent".to_owned())),
        }
    }

    /// The turn ends: its events, then the next queued prompt.
    fn end(&mut self, s: &mut dyn SessionControl, outcome: Result<StopReason, String>) {
        self.turn = Turn::Idle;
        self.close_turn(s, outcome);
        self.next_queued(s);
    }

    /// The turn's closing events (an interrupted turn's cancel without an `abort` event).
    fn close_turn(&mut self, s: &mut dyn SessionControl, outcome: Result<StopReason, String>) {
        if self.interrupted && outcome == Ok(StopReason::Cancelled) {
            self.translator.end_interrupted_turn(s);
        } else {
            self.translator.end_turn(s, outcome);
        }
        self.interrupted = false;
    }

    fn cancel(&mut self, s: &mut dyn SessionControl, interrupted: bool) {
        self.interrupted = interrupted;
        match &self.turn {
            Turn::Idle => {}
            // Nothing was sent to the agent yet: the turn ends here (the session, once
            // opened, is kept).
            Turn::Opening { token, .. } => {
                let token = *token;
                self.turn = Turn::Opening {
                    token,
                    blocks: Vec::new(),
                };
                // Nothing reached the agent: the turn ends cancelled, the open request stays.
                self.close_turn(s, Ok(StopReason::Cancelled));
            }
            Turn::Prompting { .. } => {
                if let Some(agent_session) = self.agent_session.clone() {
                    s.acp_call(AcpCall::Cancel { agent_session });
                }
            }
        }
    }

    fn acp(&mut self, s: &mut dyn SessionControl, input: AcpInput) {
        match input {
            AcpInput::Update(update) => {
                if matches!(self.turn, Turn::Opening { .. }) && self.previous.is_some() {
                    // The agent replays the session it loads: the session's log already
                    // holds that history.
                    return;
                }
                if update.get("sessionUpdate").and_then(Value::as_str)
                    == Some("current_mode_update")
                {
                    // The agent changed its mode itself.
                    if let Some(mode) = update.get("currentModeId").and_then(Value::as_str) {
                        self.choices.current_mode = Some(mode.to_owned());
                    }
                }
                if let Err(reason) = self.translator.apply(s, &update) {
                    s.emit(
                        "session.warning",
                        json!({"warningType": "acp_update",
                               "message": format!("The agent sent an update agentwire cannot read: {reason}")}),
                        false,
                    );
                }
            }
            AcpInput::Done { token, outcome } => {
                match std::mem::replace(&mut self.turn, Turn::Idle) {
                    Turn::Opening { token: t, blocks } if t == token => {
                        let opened = outcome.and_then(|result| {
                            result
                                .get("sessionId")
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                                .or_else(|| self.previous.clone())
                                .ok_or_else(|| {
                                    "the agent opened a session without a sessionId".to_owned()
                                })
                                .map(|id| (id, result))
                        });
                        match opened {
                            Ok((id, result)) => {
                                if self.recorded.as_deref() != Some(id.as_str()) {
                                    // In the log, so a restored session loads it again.
                                    s.emit(
                                        "session.info",
                                        json!({"infoType": AGENT_SESSION_INFO,
                                               "message": format!("This session runs on the ACP agent's session {id}"),
                                               "agentSessionId": id}),
                                        false,
                                    );
                                    self.recorded = Some(id.clone());
                                }
                                self.agent_session = Some(id.clone());
                                self.previous = None;
                                let mode = result
                                    .pointer("/modes/currentModeId")
                                    .and_then(Value::as_str);
                                self.translator.set_initial_mode(mode);
                                self.choices = AgentChoices::of(&result);
                                for setting in std::mem::take(&mut self.pending_settings) {
                                    self.setting_changed(s, setting);
                                }
                                if blocks.is_empty() {
                                    // The turn was cancelled while the session opened.
                                    self.turn = Turn::Idle;
                                    self.next_queued(s);
                                } else {
                                    self.send_prompt(s, id, blocks);
                                }
                            }
                            Err(reason) if self.previous.is_some() => {
                                // The agent no longer has the session this one ran on (a
                                // new agent process, its store gone): the session goes on
                                // in a new agent session; its log keeps the history.
                                self.previous = None;
                                s.emit(
                                    "session.warning",
                                    json!({"warningType": "acp_agent_session",
                                           "message": format!("The agent could not load this session's earlier agent session ({reason}); it continues in a new one, without that context")}),
                                    false,
                                );
                                match s.acp_call(AcpCall::Open { previous: None }) {
                                    Some(token) => self.turn = Turn::Opening { token, blocks },
                                    None if blocks.is_empty() => self.next_queued(s),
                                    None => {
                                        self.end(s, Err("this session has no ACP agent".to_owned()))
                                    }
                                }
                            }
                            Err(reason) if blocks.is_empty() => {
                                let _ = reason;
                                self.next_queued(s);
                            }
                            Err(reason) => self.end(
                                s,
                                Err(format!("The agent could not open a session: {reason}")),
                            ),
                        }
                    }
                    Turn::Prompting { token: t } if t == token => {
                        let outcome = outcome.and_then(|result| StopReason::of_result(&result));
                        self.end(s, outcome);
                    }
                    other => self.turn = other,
                }
            }
            AcpInput::Ended(reason) => {
                // The agent session died with the process; the next prompt opens another (or
                // loads this one, when the new process can).
                self.previous = self.agent_session.take().or(self.previous.take());
                match std::mem::replace(&mut self.turn, Turn::Idle) {
                    Turn::Idle => {}
                    Turn::Opening { blocks, .. } if blocks.is_empty() => self.next_queued(s),
                    Turn::Opening { .. } | Turn::Prompting { .. } => self.end(s, Err(reason)),
                }
            }
        }
    }

    fn next_queued(&mut self, s: &mut dyn SessionControl) {
        if let Some((message_id, prompt, context)) = self.queued.pop_front() {
            s.emit("pending_messages.modified", json!({}), true);
            self.start(s, message_id, prompt, context);
        }
    }
}

impl Agent for AcpSessionAgent {
    fn handle(&mut self, input: AgentInput, s: &mut dyn SessionControl) {
        match input {
            AgentInput::Prompt {
                message_id,
                prompt,
                attachments,
            } => {
                if self.is_busy() {
                    self.queued.push_back((message_id, prompt, attachments));
                    s.emit("pending_messages.modified", json!({}), true);
                } else {
                    self.start(s, message_id, prompt, attachments);
                }
            }
            AgentInput::Abort => self.cancel(s, false),
            AgentInput::Interrupt => self.cancel(s, true),
            AgentInput::Acp(input) => self.acp(s, input),
            AgentInput::SettingChanged(setting) => self.setting_changed(s, setting),
            // The agent runs its own tools, model calls and timers.
            AgentInput::Timer
            | AgentInput::ToolDone { .. }
            | AgentInput::ClientAnswer { .. }
            | AgentInput::Http { .. } => {}
        }
    }

    fn is_busy(&self) -> bool {
        !matches!(self.turn, Turn::Idle)
    }

    fn queued_prompts(&self) -> Vec<(String, String)> {
        queued_view(&self.queued)
    }

    fn drop_queued_prompts(&mut self, all: bool) -> usize {
        drop_queued(&mut self.queued, all)
    }

    /// The agent session the log records is the one to load (or resume) for the next prompt.
    fn restored(&mut self, history: &[crate::session::Event]) {
        let recorded = history.iter().rev().find_map(|event| {
            if event.event_type != "session.info" {
                return None;
            }
            let envelope: Value = serde_json::from_slice(&event.json).ok()?;
            let data = envelope.get("data")?;
            if data.get("infoType")?.as_str()? != AGENT_SESSION_INFO {
                return None;
            }
            Some(data.get("agentSessionId")?.as_str()?.to_owned())
        });
        if let Some(id) = recorded {
            if self.agent_session.is_none() {
                self.previous = Some(id.clone());
            }
            self.recorded = Some(id);
        }
    }
}

/// A prompt as ACP content: the text (with what the runtime adds around it for the prompt's
/// attachments, such as IDE selections), then a `resource_link` for each attached file or
/// directory.
fn prompt_blocks(prompt: &str, context: &PromptContext) -> Vec<Value> {
    let mut text = String::new();
    text.push_str(&context.before);
    text.push_str(prompt);
    text.push_str(&context.after);
    let mut blocks = vec![json!({"type": "text", "text": text})];
    for attachment in &context.sent {
        let kind = attachment.get("type").and_then(Value::as_str);
        let path = attachment.get("path").and_then(Value::as_str);
        if let (Some("file" | "directory"), Some(path)) = (kind, path) {
            let name = attachment
                .get("displayName")
                .and_then(Value::as_str)
                .unwrap_or_else(|| path.rsplit('/').next().unwrap_or(path));
            blocks.push(
                json!({"type": "resource_link", "uri": format!("file://{path}"),
                               "name": name}),
            );
        }
    }
    blocks
}
