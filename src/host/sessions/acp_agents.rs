//! Sessions run by an ACP agent process ([`HostConfig::acp_agent`]): the host side of
//! [`SessionControl::acp_call`].
//!
//! One agent process serves every such session. It is started (an [`EffectOp::ProcessSpawn`]
//! with stdin) for the first call, and an [`AcpAgentClient`] speaks ACP to it through
//! [`EffectOp::ProcessWrite`] and the process's reports. Calls made before `initialize` is
//! answered wait for it. What the agent streams for one of its sessions goes to the host
//! session that opened it (`AgentInput::Acp`), whose agent (`AcpSessionAgent`) turns it into
//! session events. The agent's permission requests take the host's one permission path
//! ([`Approval::AcpAgent`]): approve-all and the session's rules answer first, else the
//! session's clients of every dialect are asked and the first answer is the agent's option.
//! The agent's `fs/*` requests are served on the session's files (a path outside its
//! directories behind a `path` prompt), its `terminal/*` requests by processes the host runs
//! (`acp_terminals.rs`), its `elicitation/create` by the elicitation bridge. The agent's
//! session gets the session's MCP servers and, when the session has client tools, the
//! client-tools server ([`crate::tool_server`]).
//!
//! When the process ends (it exited, broke the protocol, never answered `initialize`), every
//! session that used it gets `AcpInput::Ended` with the reason; the next call starts a new
//! process.
//!
//! [`HostConfig::acp_agent`]: crate::host::HostConfig::acp_agent
//! [`SessionControl::acp_call`]: crate::agent::SessionControl::acp_call

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::agent::acp::{
    AcpAgentClient, AcpAgentEvent, AcpClientConfig, AgentRequest, ClientCapabilities,
    PermissionOptionKind,
};
use crate::agent::{AcpCall, AcpInput, AgentInput};
use crate::host::pending::{
    AcpAsk, AcpChoice, AcpFileOp, AcpPermission, AnswerTo, Approval, PermissionAsk,
};
use crate::host::{
    EffectId, EffectOp, FileReply, FileRequest, Host, ProcessSpec, ShellStream, TimerTarget,
};
use crate::jsonrpc::OwnedId;
use crate::Timestamp;

/// What a call to the agent was for.
#[derive(Debug)]
enum CallPurpose {
    /// Opening (or reopening, `previous`) the agent session of a host session.
    Open { previous: Option<String> },
    /// Anything else: its result goes back as is.
    Other,
}

/// A call made to the agent for a session: the session, its agent's token, the purpose.
#[derive(Debug)]
struct Call {
    session: String,
    token: u64,
    purpose: CallPurpose,
}

/// The running agent process.
#[derive(Debug)]
struct AgentProcess {
    effect: EffectId,
    client: AcpAgentClient,
    /// Calls that wait for `initialize`.
    waiting: Vec<(String, u64, AcpCall)>,
    /// The client's tokens → the calls they are.
    calls: BTreeMap<u64, Call>,
    /// The agent's session ids → host sessions.
    sessions: BTreeMap<String, String>,
    /// Host sessions that used this process.
    users: BTreeSet<String>,
    timer: Option<(Timestamp, u64)>,
}

/// The host's ACP agent process, if one runs (see the [module docs](self)).
#[derive(Debug, Default)]
pub(in crate::host) struct AcpAgents {
    process: Option<AgentProcess>,
    next_token: u64,
    /// The commands the agent runs (`terminal/*`).
    pub(in crate::host) terminals: super::acp_terminals::AcpTerminals,
}

impl Host {
    /// [`SessionControl::acp_call`](crate::agent::SessionControl::acp_call) for `session`:
    /// `None` when the host runs no ACP agent.
    pub(in crate::host) fn acp_call(&mut self, session: &str, call: AcpCall) -> Option<u64> {
        let argv = self.config.acp_agent.clone()?;
        self.acp.next_token += 1;
        let token = self.acp.next_token;
        let now = self.now;
        if self.acp.process.is_none() {
            let effect = self.next_effect_id();
            let config = AcpClientConfig {
                capabilities: ClientCapabilities {
                    read_text_file: true,
                    write_text_file: true,
                    terminal: true,
                    elicitation_form: true,
                },
                client_version: self.config.version.clone(),
                ..AcpClientConfig::default()
            };
            let mut client = AcpAgentClient::new(config);
            client.start(now);
            self.acp.process = Some(AgentProcess {
                effect,
                client,
                waiting: Vec::new(),
                calls: BTreeMap::new(),
                sessions: BTreeMap::new(),
                users: BTreeSet::new(),
                timer: None,
            });
            let spec = ProcessSpec {
                argv,
                env: Vec::new(),
                env_from_host: Vec::new(),
                cwd: self.config.server_cwd.clone(),
                stdin: true,
                timeout_ms: None,
            };
            self.push_effect(effect, EffectOp::ProcessSpawn(spec));
        }
        let process = self.acp.process.as_mut()?;
        process.users.insert(session.to_owned());
        if process.client.is_ready() {
            self.acp_issue(session, token, call);
        } else {
            process.waiting.push((session.to_owned(), token, call));
        }
        self.acp_flush();
        Some(token)
    }

    /// Sends `call` to the (ready) agent.
    fn acp_issue(&mut self, session: &str, token: u64, call: AcpCall) {
        let now = self.now;
        let cwd = self
            .sessions
            .get(session)
            .and_then(|l| l.session.cwd.clone())
            .or_else(|| self.config.server_cwd.clone())
            .unwrap_or_else(|| "/".to_owned());
        self.acp.next_token += 1;
        let client_token = self.acp.next_token;
        let Some(process) = self.acp.process.as_mut() else {
            return;
        };
        let purpose = match call {
            AcpCall::Open { previous } => {
                let caps = process.client.capabilities();
                // The session's own MCP servers (those of a transport the agent takes), and
                // its client tools as an MCP server the runtime serves (HTTP).
                let live = self.sessions.get(session);
                let mut servers: Vec<Value> = live
                    .into_iter()
                    .flat_map(|l| l.mcp.servers.values())
                    .filter(|s| match s.config.transport_name() {
                        "http" => caps.mcp_http,
                        "sse" => caps.mcp_sse,
                        _ => true,
                    })
                    .map(|s| s.config.to_acp())
                    .collect();
                let has_client_tools = live.is_some_and(|l| !l.session.client_tools().is_empty());
                if let Some(server) = self.config.tool_server.as_ref() {
                    if caps.mcp_http && has_client_tools {
                        servers.push(server.acp_server_entry(session));
                    }
                }
                match previous.as_deref() {
                    Some(id) if caps.load_session => {
                        process
                            .client
                            .load_session(now, client_token, id, &cwd, &servers)
                    }
                    Some(id) if caps.resume_session => {
                        process
                            .client
                            .resume_session(now, client_token, id, &cwd, &servers)
                    }
                    _ => process
                        .client
                        .new_session(now, client_token, &cwd, &servers),
                }
                CallPurpose::Open { previous }
            }
            AcpCall::Prompt {
                agent_session,
                blocks,
            } => {
                process
                    .client
                    .prompt(now, client_token, &agent_session, &blocks);
                CallPurpose::Other
            }
            AcpCall::Cancel { agent_session } => {
                process.client.cancel(&agent_session);
                return;
            }
            AcpCall::SetMode {
                agent_session,
                mode,
            } => {
                process
                    .client
                    .set_mode(now, client_token, &agent_session, &mode);
                CallPurpose::Other
            }
            AcpCall::SetConfigOption {
                agent_session,
                config_id,
                value,
            } => {
                process.client.set_config_option(
                    now,
                    client_token,
                    &agent_session,
                    &config_id,
                    &Value::String(value),
                );
                CallPurpose::Other
            }
        };
        process.calls.insert(
            client_token,
            Call {
                session: session.to_owned(),
                token,
                purpose,
            },
        );
    }

    /// Bytes the agent process wrote; `false` when `id` is not the agent process.
    pub(in crate::host) fn acp_process_output(
        &mut self,
        id: EffectId,
        stream: ShellStream,
        bytes: &[u8],
    ) -> bool {
        let now = self.now;
        let Some(process) = self.acp.process.as_mut().filter(|p| p.effect == id) else {
            return false;
        };
        match stream {
            ShellStream::Stdout => process.client.handle_stdout(now, bytes),
            ShellStream::Stderr => process.client.handle_stderr(bytes),
        }
        self.acp_flush();
        self.run_agents();
        true
    }

    /// The agent process ended (or could not start); `false` when `id` is not it.
    pub(in crate::host) fn acp_process_ended(
        &mut self,
        id: EffectId,
        code: Option<i32>,
        message: Option<&str>,
    ) -> bool {
        let now = self.now;
        let Some(process) = self.acp.process.as_mut().filter(|p| p.effect == id) else {
            return false;
        };
        process.client.handle_exit(now, code, message);
        self.acp_flush();
        self.run_agents();
        true
    }

    /// The agent client's deadline is due.
    pub(in crate::host) fn acp_timer_fired(&mut self, key: (Timestamp, u64)) {
        let now = self.now;
        let Some(process) = self.acp.process.as_mut() else {
            return;
        };
        if process.timer != Some(key) {
            return;
        }
        process.timer = None;
        process.client.handle_timeout(now);
        self.acp_flush();
        self.run_agents();
    }

    /// Applies a permission decision to what the agent asked: its tool call's request is
    /// answered with the option `choice` picks; an approved file operation is performed, a
    /// refused one fails.
    pub(in crate::host) fn answer_acp_permission(
        &mut self,
        acp: &AcpPermission,
        choice: AcpChoice,
    ) {
        let Some(process) = self
            .acp
            .process
            .as_mut()
            .filter(|p| p.effect == acp.process)
        else {
            return;
        };
        let options = match &acp.ask {
            AcpAsk::ToolCall(options) => options,
            AcpAsk::File(op) => {
                if choice == AcpChoice::Reject {
                    let message = format!("Permission denied: {}", op.path());
                    process.client.respond_error(&acp.request, -32000, &message);
                    return self.acp_flush();
                }
                let (session, request) = (acp.session.clone(), acp.request.clone());
                return self.perform_acp_file_op(&session, acp.process, request, op.clone());
            }
        };
        let pick = |kinds: &[PermissionOptionKind]| {
            kinds
                .iter()
                .find_map(|k| options.iter().find(|o| o.kind == *k))
                .map(|o| o.id.clone())
        };
        let option = match choice {
            AcpChoice::AllowAlways => pick(&[
                PermissionOptionKind::AllowAlways,
                PermissionOptionKind::AllowOnce,
            ]),
            AcpChoice::Allow => pick(&[
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::AllowAlways,
            ]),
            AcpChoice::Reject => pick(&[
                PermissionOptionKind::RejectOnce,
                PermissionOptionKind::RejectAlways,
            ]),
        };
        let outcome = match option {
            Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
            // The agent offered no option of that kind: the request is withdrawn.
            None => json!({"outcome": {"outcome": "cancelled"}}),
        };
        process.client.respond(&acp.request, &outcome);
        self.acp_flush();
    }

    /// Answers the agent's request `id` if agent process `agent` still runs.
    pub(in crate::host) fn acp_answer(
        &mut self,
        agent: EffectId,
        id: &OwnedId,
        answer: Result<Value, (i64, String)>,
    ) {
        let Some(process) = self.acp.process.as_mut().filter(|p| p.effect == agent) else {
            return;
        };
        match answer {
            Ok(result) => process.client.respond(id, &result),
            Err((code, message)) => process.client.respond_error(id, code, &message),
        }
        self.acp_flush();
    }

    /// Writes what the client produced, keeps its deadline, and handles its events.
    fn acp_flush(&mut self) {
        loop {
            let Some(process) = self.acp.process.as_mut() else {
                return;
            };
            let effect = process.effect;
            let mut frames = Vec::new();
            while let Some(frame) = process.client.poll_transmit() {
                frames.push(frame);
            }
            let event = process.client.poll_event();
            for frame in frames {
                self.push_effect(effect, EffectOp::ProcessWrite(frame));
            }
            match event {
                Some(event) => self.acp_event(event),
                None => break,
            }
        }
        self.acp_schedule();
    }

    fn acp_schedule(&mut self) {
        let seq = self.timer_seq;
        let Some(process) = self.acp.process.as_mut() else {
            return;
        };
        let due = process.client.poll_timeout();
        if process.timer.map(|(t, _)| t) == due {
            return;
        }
        if let Some(old) = process.timer.take() {
            self.timers.remove(&old);
        }
        if let Some(at) = due {
            process.timer = Some((at, seq));
            self.timer_seq += 1;
            self.timers.insert((at, seq), TimerTarget::AcpAgent);
        }
    }

    fn acp_event(&mut self, event: AcpAgentEvent) {
        match event {
            AcpAgentEvent::Ready => {
                let waiting = self
                    .acp
                    .process
                    .as_mut()
                    .map(|p| std::mem::take(&mut p.waiting))
                    .unwrap_or_default();
                for (session, token, call) in waiting {
                    self.acp_issue(&session, token, call);
                }
            }
            AcpAgentEvent::Done { token, outcome } => {
                let Some(process) = self.acp.process.as_mut() else {
                    return;
                };
                let Some(call) = process.calls.remove(&token) else {
                    return;
                };
                if let (CallPurpose::Open { previous }, Ok(result)) = (&call.purpose, &outcome) {
                    let opened = result
                        .get("sessionId")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .or_else(|| previous.clone());
                    if let Some(id) = opened {
                        process.sessions.insert(id, call.session.clone());
                    }
                }
                self.queue_agent_input(
                    &call.session,
                    AgentInput::Acp(AcpInput::Done {
                        token: call.token,
                        outcome,
                    }),
                );
            }
            AcpAgentEvent::Update { session_id, update } => {
                if let Some(session) = self.acp_session(&session_id) {
                    self.queue_agent_input(&session, AgentInput::Acp(AcpInput::Update(update)));
                }
            }
            AcpAgentEvent::Request {
                id,
                session_id,
                request,
            } => self.acp_request(id, &session_id, request),
            // A withdrawn permission request stays pending until a client answers; the
            // agent's answer then changes nothing.
            AcpAgentEvent::RequestCancelled { .. } => {}
            AcpAgentEvent::Failed(reason) => {
                let Some(process) = self.acp.process.take() else {
                    return;
                };
                if let Some(old) = process.timer {
                    self.timers.remove(&old);
                }
                self.acp_terminals_end(process.effect);
                self.push_effect(
                    process.effect,
                    EffectOp::ProcessKill {
                        signal: "SIGKILL".to_owned(),
                    },
                );
                // Calls still waiting for `initialize` fail with the reason too.
                for (session, token, _) in process.waiting {
                    self.queue_agent_input(
                        &session,
                        AgentInput::Acp(AcpInput::Done {
                            token,
                            outcome: Err(reason.clone()),
                        }),
                    );
                }
                for session in process.users {
                    self.queue_agent_input(
                        &session,
                        AgentInput::Acp(AcpInput::Ended(reason.clone())),
                    );
                }
            }
        }
    }

    /// The host session an agent session belongs to.
    fn acp_session(&self, agent_session: &str) -> Option<String> {
        self.acp
            .process
            .as_ref()?
            .sessions
            .get(agent_session)
            .cloned()
    }

    /// The agent asks: permission prompts go to the session's clients; nothing else was
    /// offered, so the client role already refused it.
    fn acp_request(&mut self, id: OwnedId, agent_session: &str, request: AgentRequest) {
        let Some(process) = self.acp.process.as_ref() else {
            return;
        };
        let effect = process.effect;
        let Some(session) = self.acp_session(agent_session) else {
            if let Some(process) = self.acp.process.as_mut() {
                process.client.respond_error(
                    &id,
                    -32602,
                    &format!("Invalid params: unknown session {agent_session}"),
                );
            }
            return self.acp_flush();
        };
        match request {
            AgentRequest::Permission { tool_call, options } => {
                let tool_call_id = tool_call
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let title = tool_call
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or("the agent's tool")
                    .to_owned();
                let arguments = tool_call.get("rawInput").cloned().unwrap_or(json!({}));
                let request = permission_request(&tool_call_id, &title, &tool_call);
                // What the agent streamed before it asked (its `tool_call`) reaches the
                // session first.
                self.run_agents();
                self.ask_permission(
                    &session,
                    PermissionAsk {
                        tool_call_id,
                        tool_name: title,
                        arguments,
                        request,
                        approval: Approval::AcpAgent(Box::new(AcpPermission {
                            process: effect,
                            request: id,
                            session: session.clone(),
                            ask: AcpAsk::ToolCall(options),
                        })),
                    },
                );
                self.run_agents();
            }
            AgentRequest::ReadTextFile { path, line, limit } => {
                self.acp_file_request(&session, effect, id, AcpFileOp::Read { path, line, limit })
            }
            AgentRequest::WriteTextFile { path, content } => {
                self.acp_file_request(&session, effect, id, AcpFileOp::Write { path, content })
            }
            AgentRequest::Elicitation { params } => {
                // The session's clients fill the form (the elicitation bridge); their answer
                // (`{action, content}`) is the agent's.
                let mut ask = json!({"elicitationSource": "agent"});
                for field in ["message", "requestedSchema", "mode", "url"] {
                    if let Some(value) = params.get(field) {
                        ask[field] = value.clone();
                    }
                }
                if ask.get("mode").is_none() {
                    ask["mode"] = json!(if ask.get("url").is_some() {
                        "url"
                    } else {
                        "form"
                    });
                }
                let answer_to = AnswerTo::AcpAgent {
                    process: effect,
                    request: id.clone(),
                };
                if let Err(reason) = self.start_elicitation(&session, answer_to, &ask) {
                    self.acp_answer(effect, &id, Err((-32000, reason)));
                }
            }
            AgentRequest::TerminalCreate { .. }
            | AgentRequest::TerminalOutput { .. }
            | AgentRequest::TerminalWaitForExit { .. }
            | AgentRequest::TerminalKill { .. }
            | AgentRequest::TerminalRelease { .. } => {
                self.acp_terminal_request(&session, effect, id, request)
            }
        }
    }
}

impl Host {
    /// The agent's `fs/*` request: a path in the session's directories is served at once;
    /// any other takes the permission path the built-in tools' `path` prompt takes.
    fn acp_file_request(&mut self, session: &str, process: EffectId, id: OwnedId, op: AcpFileOp) {
        if self.path_allowed(session, op.path()).unwrap_or(false) {
            return self.perform_acp_file_op(session, process, id, op);
        }
        let (access, intention) = match &op {
            AcpFileOp::Read { .. } => (
                "read",
                "The agent reads a file outside the allowed directories",
            ),
            AcpFileOp::Write { .. } => (
                "write",
                "The agent writes a file outside the allowed directories",
            ),
        };
        let request = json!({"kind": "path", "intention": intention, "path": op.path(),
                             "accessKind": access});
        let tool_name = match &op {
            AcpFileOp::Read { .. } => "fs/read_text_file",
            AcpFileOp::Write { .. } => "fs/write_text_file",
        };
        self.ask_permission(
            session,
            PermissionAsk {
                tool_call_id: String::new(),
                tool_name: tool_name.to_owned(),
                arguments: json!({"path": op.path()}),
                request,
                approval: Approval::AcpAgent(Box::new(AcpPermission {
                    process,
                    request: id,
                    session: session.to_owned(),
                    ask: AcpAsk::File(op),
                })),
            },
        );
    }

    /// Performs the agent's file operation on the session's files (the runtime's, or its
    /// file provider's); [`Host::acp_file_done`] answers the agent.
    fn perform_acp_file_op(
        &mut self,
        session: &str,
        process: EffectId,
        id: OwnedId,
        op: AcpFileOp,
    ) {
        let request = match &op {
            AcpFileOp::Read { path, .. } => FileRequest::Read { path: path.clone() },
            AcpFileOp::Write { path, content } => FileRequest::Write {
                path: path.clone(),
                content: content.clone(),
                create_new: false,
            },
        };
        self.acp_file_read_or_write(
            session,
            request,
            AcpFileWait {
                process,
                request: id,
                op,
            },
        );
    }

    /// A file operation of the agent finished: its answer goes back.
    pub(in crate::host) fn acp_file_done(
        &mut self,
        wait: AcpFileWait,
        result: Result<FileReply, String>,
    ) {
        let answer = match (&wait.op, result) {
            (AcpFileOp::Read { line, limit, .. }, Ok(FileReply::Text(text))) => {
                Ok(json!({"content": select_lines(&text, *line, *limit)}))
            }
            (AcpFileOp::Read { path, .. }, Ok(FileReply::Entries(_))) => {
                Err(format!("{path} is a directory"))
            }
            (AcpFileOp::Read { path, .. }, Ok(_)) => {
                Err(format!("{path} is not a UTF-8 text file"))
            }
            (AcpFileOp::Write { .. }, Ok(_)) => Ok(json!({})),
            (_, Err(message)) => Err(message),
        };
        self.acp_answer(wait.process, &wait.request, answer.map_err(|m| (-32000, m)));
    }
}

/// A file operation of the agent in flight: who asked, and what.
#[derive(Debug)]
pub(in crate::host) struct AcpFileWait {
    process: EffectId,
    request: OwnedId,
    op: AcpFileOp,
}

/// `limit` lines of `text` from line `line` (1-based; the whole text when both are absent),
/// line endings kept.
fn select_lines(text: &str, line: Option<u64>, limit: Option<u64>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_owned();
    }
    let skip = usize::try_from(line.unwrap_or(1).saturating_sub(1)).unwrap_or(usize::MAX);
    let take = limit.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

/// An ACP tool call's permission request as the session's clients see it
/// (`permission.requested`'s `permissionRequest`): `execute` is a `shell` request, `edit` /
/// `delete` / `move` a `write`, `read` / `search` a `read`, `fetch` a `url`, anything else a
/// `custom-tool` named by its title. The ACP tool call is kept under `acp`.
fn permission_request(tool_call_id: &str, title: &str, tool_call: &Value) -> Value {
    let raw = tool_call.get("rawInput").unwrap_or(&Value::Null);
    let path = tool_call
        .pointer("/locations/0/path")
        .or_else(|| raw.get("path"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut request = match tool_call.get("kind").and_then(Value::as_str) {
        Some("execute") => {
            let command = raw.get("command").and_then(Value::as_str).unwrap_or(title);
            json!({"kind": "shell", "fullCommandText": command, "intention": title,
                   "commands": [], "possiblePaths": [], "hasWriteFileRedirection": false,
                   "canOfferSessionApproval": false})
        }
        Some("edit" | "delete" | "move") => {
            json!({"kind": "write", "fileName": path, "intention": title, "diff": ""})
        }
        Some("read" | "search") => json!({"kind": "read", "path": path, "intention": title}),
        Some("fetch") => {
            let url = raw.get("url").and_then(Value::as_str).unwrap_or_default();
            json!({"kind": "url", "url": url, "intention": title})
        }
        _ => json!({"kind": "custom-tool", "toolName": title, "toolDescription": title,
                    "args": raw}),
    };
    request["toolCallId"] = json!(tool_call_id);
    request["acp"] = tool_call.clone();
    request
}
