//! The ACP agent's terminals (`terminal/*`): the host runs the agent's commands as its
//! built-in `bash` runs commands, as [`EffectOp::ProcessSpawn`] effects, and keeps their
//! output (the last `outputByteLimit` bytes) until the agent releases them.
//!
//! `terminal/create` starts the program with its arguments (no shell), its extra
//! environment, in the given directory or the session's; `terminal/output` answers the
//! output so far, whether it was truncated and, once it ended, the exit status;
//! `terminal/wait_for_exit` answers when the command ends; `terminal/kill` kills it (the
//! terminal stays readable); `terminal/release` kills it if it runs and forgets it. When the
//! agent process ends, its terminals are killed.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::agent::acp::AgentRequest;
use crate::jsonrpc::OwnedId;

use crate::host::{EffectId, EffectOp, Host, ProcessSpec};

/// The agent's terminals.
#[derive(Debug, Default)]
pub(in crate::host) struct AcpTerminals {
    by_id: BTreeMap<String, Terminal>,
    by_effect: BTreeMap<EffectId, String>,
    next: u64,
}

/// One command the agent runs.
#[derive(Debug)]
struct Terminal {
    /// The process running it.
    effect: EffectId,
    /// The agent process that created it (its answers go there).
    agent: EffectId,
    output: Vec<u8>,
    truncated: bool,
    /// Most bytes of output kept (from the end).
    limit: Option<usize>,
    /// `(exitCode, signal)` once it ended.
    exit: Option<(Option<i32>, Option<String>)>,
    /// `terminal/wait_for_exit` requests waiting for it.
    waiters: Vec<OwnedId>,
}

impl AcpTerminals {
    /// The terminal process `effect` runs.
    fn of_effect(&mut self, effect: EffectId) -> Option<&mut Terminal> {
        let id = self.by_effect.get(&effect)?;
        self.by_id.get_mut(id)
    }
}

impl Terminal {
    fn exit_status(&self) -> Option<Value> {
        self.exit
            .as_ref()
            .map(|(code, signal)| json!({"exitCode": code, "signal": signal}))
    }

    /// Keeps the output within the limit, cutting whole characters from the front.
    fn append(&mut self, bytes: &[u8]) {
        self.output.extend_from_slice(bytes);
        let Some(limit) = self.limit else {
            return;
        };
        if self.output.len() <= limit {
            return;
        }
        let mut cut = self.output.len() - limit;
        // Not inside a UTF-8 character: skip continuation bytes.
        while cut < self.output.len() && (self.output[cut] & 0xC0) == 0x80 {
            cut += 1;
        }
        self.output.drain(..cut);
        self.truncated = true;
    }
}

impl Host {
    /// A `terminal/*` request of agent process `agent` for `session`.
    pub(in crate::host) fn acp_terminal_request(
        &mut self,
        session: &str,
        agent: EffectId,
        id: OwnedId,
        request: AgentRequest,
    ) {
        let answer = match request {
            AgentRequest::TerminalCreate {
                command,
                args,
                env,
                cwd,
                output_byte_limit,
            } => Ok(self.acp_terminal_create(
                session,
                agent,
                command,
                args,
                env,
                cwd,
                output_byte_limit,
            )),
            AgentRequest::TerminalOutput { terminal_id } => self
                .acp
                .terminals
                .by_id
                .get(&terminal_id)
                .map(|t| {
                    let mut answer = json!({
                        "output": String::from_utf8_lossy(&t.output),
                        "truncated": t.truncated,
                    });
                    if let Some(status) = t.exit_status() {
                        answer["exitStatus"] = status;
                    }
                    answer
                })
                .ok_or(terminal_id),
            AgentRequest::TerminalWaitForExit { terminal_id } => {
                match self.acp.terminals.by_id.get_mut(&terminal_id) {
                    Some(t) => match t.exit_status() {
                        Some(status) => Ok(status),
                        None => {
                            t.waiters.push(id);
                            return;
                        }
                    },
                    None => Err(terminal_id),
                }
            }
            AgentRequest::TerminalKill { terminal_id } => {
                match self.acp.terminals.by_id.get(&terminal_id) {
                    Some(t) => {
                        if t.exit.is_none() {
                            let effect = t.effect;
                            self.kill_effect(effect);
                        }
                        Ok(json!({}))
                    }
                    None => Err(terminal_id),
                }
            }
            AgentRequest::TerminalRelease { terminal_id } => {
                match self.acp.terminals.by_id.remove(&terminal_id) {
                    Some(t) => {
                        self.acp.terminals.by_effect.remove(&t.effect);
                        if t.exit.is_none() {
                            self.kill_effect(t.effect);
                        }
                        for waiter in t.waiters {
                            self.acp_answer(
                                agent,
                                &waiter,
                                Err((-32000, "the terminal was released".into())),
                            );
                        }
                        Ok(json!({}))
                    }
                    None => Err(terminal_id),
                }
            }
            _ => return,
        };
        let answer = answer.map_err(|terminal| {
            (
                -32602,
                format!("Invalid params: unknown terminal {terminal}"),
            )
        });
        self.acp_answer(agent, &id, answer);
    }

    #[allow(clippy::too_many_arguments)]
    fn acp_terminal_create(
        &mut self,
        session: &str,
        agent: EffectId,
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
        output_byte_limit: Option<u64>,
    ) -> Value {
        let effect = self.next_effect_id();
        let terminals = &mut self.acp.terminals;
        terminals.next += 1;
        let terminal_id = format!("term-{}", terminals.next);
        terminals.by_effect.insert(effect, terminal_id.clone());
        terminals.by_id.insert(
            terminal_id.clone(),
            Terminal {
                effect,
                agent,
                output: Vec::new(),
                truncated: false,
                limit: output_byte_limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                exit: None,
                waiters: Vec::new(),
            },
        );
        let cwd = cwd.or_else(|| {
            self.sessions
                .get(session)
                .and_then(|l| l.session.cwd.clone())
        });
        let mut argv = vec![command];
        argv.extend(args);
        let spec = ProcessSpec {
            argv,
            env,
            env_from_host: Vec::new(),
            cwd,
            stdin: false,
            timeout_ms: None,
        };
        self.push_effect(effect, EffectOp::ProcessSpawn(spec));
        json!({"terminalId": terminal_id})
    }

    /// Output of process `id`, if it is a terminal's (`false`: not a terminal).
    pub(in crate::host) fn acp_terminal_output(&mut self, id: EffectId, bytes: &[u8]) -> bool {
        let Some(terminal) = self.acp.terminals.of_effect(id) else {
            return false;
        };
        terminal.append(bytes);
        true
    }

    /// Process `id` ended, if it is a terminal's: its waiters get the exit status.
    pub(in crate::host) fn acp_terminal_ended(
        &mut self,
        id: EffectId,
        code: Option<i32>,
        message: Option<&str>,
    ) -> bool {
        let Some(terminal) = self.acp.terminals.of_effect(id) else {
            return false;
        };
        let code = match message {
            // A program that could not start reads as a shell's "command not found".
            Some(message) => {
                terminal.append(format!("cannot start the command: {message}\n").as_bytes());
                Some(127)
            }
            None => code,
        };
        let signal = code.is_none().then(|| "SIGKILL".to_owned());
        terminal.exit = Some((code, signal));
        let status = terminal.exit_status().unwrap_or(Value::Null);
        let agent = terminal.agent;
        let waiters = std::mem::take(&mut terminal.waiters);
        for waiter in waiters {
            self.acp_answer(agent, &waiter, Ok(status.clone()));
        }
        true
    }

    /// The agent process `agent` ended: its terminals are killed and forgotten.
    pub(in crate::host) fn acp_terminals_end(&mut self, agent: EffectId) {
        let ids: Vec<String> = (self.acp.terminals.by_id.iter())
            .filter(|(_, t)| t.agent == agent)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            if let Some(t) = self.acp.terminals.by_id.remove(&id) {
                self.acp.terminals.by_effect.remove(&t.effect);
                if t.exit.is_none() {
                    self.kill_effect(t.effect);
                }
            }
        }
    }

    fn kill_effect(&mut self, effect: EffectId) {
        let signal = "SIGKILL".to_owned();
        self.push_effect(effect, EffectOp::ProcessKill { signal });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_keeps_the_last_bytes_on_character_boundaries() {
        let mut t = Terminal {
            effect: EffectId::new(1),
            agent: EffectId::new(2),
            output: Vec::new(),
            truncated: false,
            limit: Some(4),
            exit: None,
            waiters: Vec::new(),
        };
        t.append(b"abc");
        assert!(!t.truncated);
        t.append("dé日".as_bytes());
        // "abcdé日" is 9 bytes; the last 4 would start inside "é": the cut moves past it.
        assert_eq!(String::from_utf8(t.output.clone()).unwrap(), "日");
        assert!(t.truncated);
    }
}
