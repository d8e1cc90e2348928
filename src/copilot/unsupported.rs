//! Features of the hosted Copilot product that this server does not offer: trusted built-in
//! plugin directories, remote sessions, factory workflows, sessions' own GitHub login,
//! usage-limit prediction, managed settings, sandboxing and MCP server OAuth probes. Each answers
//! `-32603 "Request <m> failed with message: <feature> is not available on this server"`
//! rather than `-32601`: a client can tell "this server has no such feature" from "no such
//! method", and the SDKs' `-32601` fallbacks (`connect` → `ping`, `sendAndWait` → `send`)
//! are not triggered.

use crate::jsonrpc::ErrorObject;

use super::surface::failed;

/// Every method answered as not available, with the feature it belongs to.
pub const UNSUPPORTED_METHODS: &[(&str, &str)] = &[
    ("plugins.builtin.set", "trusted built-in plugin directories"),
    ("session.remote.enable", "remote sessions"),
    ("session.remote.disable", "remote sessions"),
    ("sessions.connect", "remote sessions"),
    ("session.factory.runFromTool", "factory workflows"),
    ("session.factory.resumeFromTool", "factory workflows"),
    ("session.factory.listRuns", "factory workflows"),
    ("session.factory.getRunDetail", "factory workflows"),
    ("session.factory.getRunProgress", "factory workflows"),
    ("session.factory.pause", "factory workflows"),
    ("session.factory.pauseAtCheckpoint", "factory workflows"),
    ("session.factory.log", "factory workflows"),
    ("session.factory.agent", "factory workflows"),
    ("session.factory.journal.get", "factory workflows"),
    ("session.factory.journal.put", "factory workflows"),
    (
        "session.gitHubAuth.refreshCopilotUser",
        "GitHub account login",
    ),
    ("session.gitHubAuth.login", "GitHub account login"),
    ("session.gitHubAuth.switchToAuth", "GitHub account login"),
    ("session.gitHubAuth.logout", "GitHub account login"),
    ("session.gitHubAuth.logoutUser", "GitHub account login"),
    ("session.limitPrediction.predict", "Copilot usage limits"),
    ("managedSettings.read", "enterprise managed settings"),
    ("managedSettings.clearCache", "enterprise managed settings"),
    ("session.sandbox.getEnforcementStatus", "sandboxing"),
    ("session.sandbox.disableForSession", "sandboxing"),
    ("session.mcp.oauth.probe", "MCP server OAuth"),
    ("session.mcp.oauth.respond", "MCP server OAuth"),
    (
        "session.mcp.oauth.authenticationStateChanged",
        "MCP server OAuth",
    ),
];

/// The "not available" error of `method`, a method of `feature`.
pub(super) fn error(method: &str, feature: &str) -> ErrorObject {
    failed(
        method,
        format!("{feature} is not available on this server (agentwire does not host the Copilot product's {feature})"),
    )
}
