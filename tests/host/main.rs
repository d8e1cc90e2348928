//! The `host` tier: the host's behaviour, sans-IO, through the test world in `support.rs`
//! (connections, routing, bridges, canvases, model sessions, the SDK surface, cluster
//! gateways, the AHP dialect), plus the routing and AHP property tests. One test binary: `cargo test --test host`.

mod acp_agent_flood;
mod ahp;
mod bridges;
mod canvas;
mod client_tasks;
mod cluster;
mod copilot;
mod factories;
mod forward_drops;
mod lifecycle;
mod local_state;
mod mcp_discovery;
mod mcp_oauth;
mod model;
mod permissions;
mod plugins;
mod relay_group;
mod routing;
mod routing_props;
mod sdk_surface;
mod server_rpcs;
mod session_fs;
mod support;
mod tool_server;
mod workspace_rpcs;
