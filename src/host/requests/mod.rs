//! Pending requests: what the agent asks of a session's clients (client tool calls, permission
//! prompts, elicitation, built-in tool steps, canvases, remote files) and what a client asks
//! another client to answer. Each is resolved exactly once; permission rules decide which
//! prompts are answered without asking.

pub(in crate::host) mod bridge;
pub(in crate::host) mod builtin;
pub(in crate::host) mod canvas;
pub(in crate::host) mod client_calls;
pub(in crate::host) mod client_requests;
pub(in crate::host) mod large_output;
pub(in crate::host) mod permission;
pub(crate) mod permission_rules;
pub(in crate::host) mod remote_fs;
pub(in crate::host) mod served_tools;
pub(in crate::host) mod state_files;
