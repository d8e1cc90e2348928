//! ACP agents behind a session: agentwire as the ACP *client* of an agent process (the Gemini
//! CLI `--acp`, Claude Code through `claude-code-acp`, `copilot --acp`, agentwire's own
//! `--acp`, …), sans-IO like the rest of the core.
//!
//! * [`split_command`] turns the `--acp-agent "COMMAND [ARGS…]"` line into the program and
//!   its arguments, as a shell would split it, without a shell.
//! * [`AcpAgentClient`] is one agent process's conversation: bytes of its stdout in, frames
//!   for its stdin out, typed [`AcpAgentEvent`]s (updates of the agent's sessions, the
//!   agent's requests, the results of ours). One process serves many sessions.
//! * [`TurnTranslator`] turns one session's `session/update`s into the session events
//!   agentwire's own model loop emits, through the same [`SessionControl`] seam, so every
//!   dialect's clients see the agent's turns as they see any other.
//! * [`AcpSessionAgent`] is the [`Agent`](crate::agent::Agent) of a session run by an ACP
//!   agent: it opens the agent's session, sends prompts one turn at a time (queueing the
//!   rest), cancels on abort, and survives the agent process ending (the turn fails with the
//!   reason; the next prompt opens a session on a new process). It talks to the process
//!   through [`SessionControl::acp_call`] and hears from it as
//!   [`AgentInput::Acp`](crate::agent::AgentInput::Acp).
//!
//! What the host still has to do to run a session on an ACP agent (serving `acp_call` with a
//! process it spawns and restarts, routing the agent's permission, file and terminal
//! requests to the session's clients and built-in tools) is described in
//! `docs/acp-agents.md`.
//!
//! [`SessionControl`]: crate::agent::SessionControl
//! [`SessionControl::acp_call`]: crate::agent::SessionControl::acp_call

mod agent;
mod client;
mod command;
mod translate;

pub use agent::{AcpSessionAgent, AGENT_SESSION_INFO};
pub use client::{
    AcpAgentClient, AcpAgentEvent, AcpClientConfig, AgentCapabilities, AgentRequest,
    ClientCapabilities, PermissionOption, PermissionOptionKind, StopReason, PROTOCOL_VERSION,
};
pub use command::{split_command, CommandError};
pub use translate::TurnTranslator;

#[cfg(test)]
mod tests;
