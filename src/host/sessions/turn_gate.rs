//! A prompt waits for what its first model call needs, as the runtime does:
//!
//! * **the model**, when neither the session nor the operator names one: the server
//!   default's provider is asked for its list (`GET {url}/models`, once; the answer is kept)
//!   and its first model is the one called ([`DefaultChoice`]). A provider that gives no list
//!   lets the prompt go on, and its call fails saying no model is set; the next prompt asks
//!   again;
//! * **the session's MCP servers**: a server still starting is awaited until it is connected
//!   or has failed (its own deadlines bound the wait), so its tools are offered to the
//!   first call;
//! * **its attachments**: files are counted and directories listed for the text the runtime
//!   adds to the prompt (`prompt_attachments.rs`).
//!
//! Only a model agent's prompts wait. While a prompt waits, every later input of its session
//! waits behind it, so the agent sees them in the order they came; each held prompt is
//! prepared in turn when it reaches the front.

use crate::agent::AgentInput;
use crate::host::mcp::McpStatus;
use crate::host::models_list::DefaultChoice;
use crate::host::sessions::prompt_attachments::needs_rendering;
use crate::host::Host;

impl Host {
    /// `input` for `session`'s agent, or `None` when it waits (held until the session is
    /// ready for it; see the module docs).
    pub(in crate::host) fn gate_agent_input(
        &mut self,
        session: &str,
        input: AgentInput,
    ) -> Option<AgentInput> {
        let Some(live) = self.sessions.get_mut(session) else {
            return Some(input);
        };
        if live.released > 0 {
            // Released by `release_held`: it waited already.
            live.released -= 1;
            return Some(input);
        }
        if live.held.is_empty() && !self.must_wait(session, &input) {
            return Some(input);
        }
        if let Some(live) = self.sessions.get_mut(session) {
            live.held.push_back(input);
        }
        if self.gated.insert(session.to_owned()) {
            self.release_held(session);
        }
        None
    }

    /// Whether `input`, with nothing held before it, must wait.
    fn must_wait(&self, session: &str, input: &AgentInput) -> bool {
        let Some(live) = self.sessions.get(session) else {
            return false;
        };
        live.model_agent
            && matches!(input, AgentInput::Prompt { .. })
            && (self.needs_default_choice(session)
                || self.mcp_starting(session)
                || self.discovered_mcp_pending(session)
                || self.needs_route_catalog(session)
                || needs_rendering(input)
                || self.has_hooks(session)
                || !live.model.transform_requests().is_empty()
                || !live.model.instruction_directories.is_empty()
                || self.skills_unread(session))
    }

    /// Whether `session`'s model calls need the server default's choice and it is not known.
    pub(in crate::host) fn needs_default_choice(&self, session: &str) -> bool {
        let Some(live) = self.sessions.get(session) else {
            return false;
        };
        let Some(default) = &self.config.model_default else {
            return false;
        };
        live.model.catalog.is_none()
            && live.model.model.is_none()
            && live.session.model.is_none()
            && default.model.is_none()
            && default.provider.wire_model_name(None).is_none()
            && !matches!(self.models_lists.default_choice, DefaultChoice::Chosen(_))
    }

    /// Whether one of `session`'s MCP servers is still starting.
    fn mcp_starting(&self, session: &str) -> bool {
        self.mcp_servers(session)
            .any(|s| s.status == McpStatus::Pending)
    }

    /// Lets `session`'s held inputs go on, in order, up to the first prompt that still waits
    /// (starting what it waits for). They go before any input queued since.
    pub(in crate::host) fn release_held(&mut self, session: &str) {
        if !self.gated.contains(session) {
            return;
        }
        let mut released = Vec::new();
        while let Some(live) = self.sessions.get(session) {
            if live.preparing.is_some() || live.hooks.in_flight || live.instructions.loading() {
                break;
            }
            let Some(front) = live.held.front() else {
                self.gated.remove(session);
                break;
            };
            if live.model_agent && matches!(front, AgentInput::Prompt { .. }) {
                if self.needs_default_choice(session) {
                    if matches!(self.models_lists.default_choice, DefaultChoice::Failed) {
                        // The ask that just failed: this prompt goes on without a model.
                    } else {
                        self.ask_default_choice();
                        if !matches!(
                            self.models_lists.default_choice,
                            DefaultChoice::Chosen(_) | DefaultChoice::Failed
                        ) {
                            break;
                        }
                    }
                }
                if self.ask_route_catalog(session) {
                    break;
                }
                if self.want_discovered_mcp(session) || self.mcp_starting(session) {
                    break;
                }
                let front = self.sessions.get(session).and_then(|l| l.held.front());
                if front.is_some_and(needs_rendering) && self.prepare_attachments(session) {
                    break;
                }
                if self.next_prompt_hook(session)
                    || self.next_system_transform(session)
                    || self.load_instructions(session)
                    || self.load_skills(session)
                {
                    break;
                }
            }
            let Some(live) = self.sessions.get_mut(session) else {
                break;
            };
            if let Some(input) = live.held.pop_front() {
                released.push(input);
            }
        }
        if let Some(live) = self.sessions.get_mut(session) {
            live.released += released.len();
        }
        for input in released.into_iter().rev() {
            self.agent_inputs.push_front((session.to_owned(), input));
        }
    }

    /// Re-checks every session with held inputs (the default's model list came in).
    pub(in crate::host) fn release_gated_sessions(&mut self) {
        let gated: Vec<String> = self.gated.iter().cloned().collect();
        for session in gated {
            self.release_held(&session);
        }
        self.start_waiting_queries();
        if self.models_lists.default_choice == DefaultChoice::Failed {
            // The prompts that waited went on; the next prompt asks again.
            self.models_lists.default_choice = DefaultChoice::Unknown;
        }
    }

    /// Forgets what `session` held (it is gone).
    pub(in crate::host) fn drop_held(&mut self, session: &str) {
        self.gated.remove(session);
    }
}
