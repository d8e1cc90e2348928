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
//!
//! What the host still has to do to run a session on an ACP agent (spawning and restarting
//! the process, routing the agent's permission, file and terminal requests to the session's
//! clients and built-in tools) is described in `docs/acp-agents.md`.
//!
//! [`SessionControl`]: crate::agent::SessionControl

mod client;
mod command;
mod translate;

pub use client::{
    AcpAgentClient, AcpAgentEvent, AcpClientConfig, AgentCapabilities, AgentRequest,
    ClientCapabilities, PermissionOption, PermissionOptionKind, StopReason, PROTOCOL_VERSION,
};
pub use command::{split_command, CommandError};
pub use translate::TurnTranslator;

#[cfg(test)]
mod tests;
