//! The MCP client: a session's Model Context Protocol servers, in the core.
//!
//! MCP is a third JSON-RPC role of the crate's own peer ([`Endpoint`](crate::endpoint::Endpoint)),
//! next to the Copilot SDK and ACP server roles: agentwire is the **client** of the MCP
//! servers a session's configuration names. Like everything else in the core it is sans-IO:
//! a stdio server is a child process the runtime starts ([`Output::ProcessSpawn`]), whose
//! stdin is written with [`Output::ProcessWrite`] and whose stdout, stderr and exit come back
//! as host inputs ([`Host::handle_process_stdout`], `handle_process_stderr`,
//! `handle_process_exit`); the whole process group is killed with [`Output::ProcessKill`].
//!
//! * [`config`]: the `mcpServers` shapes of both dialects ([`McpServerConfig`]).
//! * [`client`]: the protocol state machine of one server ([`McpClient`]): `initialize`
//!   (protocol versions [`SUPPORTED_PROTOCOL_VERSIONS`]), `tools/list` with pagination and
//!   `notifications/tools/list_changed`, `tools/call` with a deadline each, the server's own
//!   requests (`ping`, `roots/list`, `sampling/createMessage`, `elicitation/create`).
//! * [`tool`]: tool definitions and how a call's result maps to the session's
//!   `tool.execution_complete`.
//!
//! The host side (servers starting with the session, tools offered to the model as
//! `SERVER-TOOL`, permission prompts of kind `mcp`, the session events) lives in the host.
//!
//! [`Output::ProcessSpawn`]: crate::Output::ProcessSpawn
//! [`Output::ProcessWrite`]: crate::Output::ProcessWrite
//! [`Output::ProcessKill`]: crate::Output::ProcessKill
//! [`Host::handle_process_stdout`]: crate::Host::handle_process_stdout

pub mod client;
pub mod config;
pub mod tool;

pub use client::{ClientEvent, McpClient, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
pub use config::{
    acp_servers, copilot_servers, McpServerConfig, McpTransport, ToolFilter, DEFAULT_MCP_TIMEOUT,
};
pub use tool::McpTool;
