//! The MCP client: a session's Model Context Protocol servers, in the core.
//!
//! MCP is a third JSON-RPC role of the crate's own peer ([`Endpoint`](crate::endpoint::Endpoint)),
//! next to the Copilot SDK and ACP server roles: agentwire is the **client** of the MCP
//! servers a session's configuration names. Like everything else in the core it is sans-IO:
//! a stdio server is a child process the runtime starts ([`EffectOp::ProcessSpawn`]), whose
//! stdin is written with [`EffectOp::ProcessWrite`] and whose stdout, stderr and exit come
//! back as the runtime's reports ([`Host::handle_effect`]); the whole process group is killed
//! with [`EffectOp::ProcessKill`].
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
//! [`EffectOp::ProcessSpawn`]: crate::host::EffectOp::ProcessSpawn
//! [`EffectOp::ProcessWrite`]: crate::host::EffectOp::ProcessWrite
//! [`EffectOp::ProcessKill`]: crate::host::EffectOp::ProcessKill
//! [`Host::handle_effect`]: crate::Host::handle_effect

pub mod client;
pub mod config;
pub mod tool;

pub use client::{ClientEvent, McpClient, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
pub use config::{
    acp_servers, copilot_servers, McpServerConfig, McpTransport, OAuthClient, ToolFilter,
    DEFAULT_MCP_TIMEOUT,
};
pub use tool::McpTool;
