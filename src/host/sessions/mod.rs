//! Sessions: their agents (attach, detach, driving), the prompt's way to the agent (turn
//! gate, hooks, attachments, instructions, skills, the pending queue), per-session policies,
//! and the path of a session event: emit, record, audience, fan-out.

pub(in crate::host) mod acp_agents;
pub(in crate::host) mod acp_terminals;
pub(in crate::host) mod audience;
pub(in crate::host) mod compaction;
pub(in crate::host) mod drive;
pub(in crate::host) mod emit;
pub(in crate::host) mod instructions;
pub(in crate::host) mod interrupt;
pub(in crate::host) mod policy;
pub(in crate::host) mod prompt_attachments;
pub(in crate::host) mod prompt_hooks;
pub(in crate::host) mod publish;
pub(in crate::host) mod queue;
pub(in crate::host) mod rewind;
pub(in crate::host) mod skills;
pub(in crate::host) mod sql;
pub(in crate::host) mod telemetry;
pub(in crate::host) mod turn_gate;
