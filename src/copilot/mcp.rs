//! The MCP methods of the Copilot SDK protocol:
//!
//! * session scope: `session.mcp.list` (`{servers: [{name, status, source, error?}]}`),
//!   `session.mcp.listTools {serverName}` (the tools of the latest listing),
//!   `session.mcp.startServer {serverName, config?}`, `stopServer`, `restartServer`,
//!   `isServerRunning`, `enable` / `disable` (start / stop), `reload` (restart every
//!   server), `executeSampling` (the inference on the session's model, see
//!   `host/mcp_sampling.rs`) and `cancelSamplingExecution`;
//! * server scope, the "user configuration" every new session starts with — kept in memory,
//!   nothing is written to disk: `mcp.config.list` (`{servers: {NAME: CONFIG}}`),
//!   `mcp.config.add {name, config}`, `mcp.config.update`, `mcp.config.remove {name}`,
//!   `mcp.config.reload`, and `mcp.discover` (`{servers: [{name, type, source: "user",
//!   enabled: true}]}`).
//!
//! A configuration with a `command` is refused for a connection that may not start
//! processes, as on `session.create`.

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::{AppRequest, ConnId, GitHubMcpToolConfig, Host};
use crate::jsonrpc::{code, ErrorObject};
use crate::mcp::McpServerConfig;

use super::method_table::{Call, Reply};
use super::session_state::{required_str, session_id};
use super::surface::{decode, failed, known, Answer};

/// `session.ui.ephemeralQuery {question}`: answered (`{answer}`) when the session's model
/// has answered the question from the conversation, which it does not change; its progress
/// is the ephemeral `ui.ephemeral_query` event. An error when the session has no model.
pub(super) fn ephemeral_query(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Reply {
    let started = decode::<Value>(params).and_then(|p| {
        let session = session_id(&p)?;
        known(host, call.method, &session)?;
        let question = required_str(&p, "question")?;
        if question.trim().is_empty() {
            return Err(failed(call.method, "the question is empty"));
        }
        host.start_ephemeral_query(&session, call.conn, call.id, question)
            .map_err(|e| failed(call.method, e))
    });
    started.err().map(Err)
}

/// `session.mcp.executeSampling`: answered when the inference ends (`None`), or at once
/// with `{action: "failure", error}` when it cannot start.
pub(super) fn execute_sampling(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
) -> Reply {
    let started = decode::<Value>(params).and_then(|p| {
        let session = session_id(&p)?;
        known(host, call.method, &session)?;
        let request_id = required_str(&p, "requestId")?.to_owned();
        let request = p.get("request").cloned().unwrap_or(Value::Null);
        Ok(host.execute_sampling(&session, call.conn, call.id, &request_id, &request))
    });
    match started {
        Err(e) => Some(Err(e)),
        Ok(Ok(())) => None,
        Ok(Err(reason)) => Some(Ok(json!({"action": "failure", "error": reason}))),
    }
}

/// `session.mcp.apps.readResource {serverName, uri}`: answered when the server answers
/// (`None`), or at once with an error.
pub(super) fn read_resource(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    apps_request(host, call, params, AppRequest::ReadResource)
}

/// `session.mcp.apps.callTool {serverName, toolName, arguments}`: as `read_resource`.
pub(super) fn call_tool(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    apps_request(host, call, params, AppRequest::CallTool)
}

fn apps_request(
    host: &mut Host,
    call: &Call<'_>,
    params: Option<&RawValue>,
    request: AppRequest,
) -> Reply {
    let method = call.method;
    let call_tool = matches!(request, AppRequest::CallTool);
    let started = decode::<Value>(params).and_then(|p| {
        let session = session_id(&p)?;
        known(host, method, &session)?;
        let server = required_str(&p, "serverName")?.to_owned();
        if call_tool {
            apps_negotiated(host, method, &session)?;
            same_origin(method, &p, &server)?;
        }
        let mcp_params = if call_tool {
            json!({"name": required_str(&p, "toolName")?,
                   "arguments": p.get("arguments").cloned().unwrap_or(json!({}))})
        } else {
            json!({"uri": required_str(&p, "uri")?})
        };
        host.mcp_request_for_client(
            &session,
            &server,
            call.conn,
            call.id,
            method,
            request,
            &mcp_params,
        )
        .map_err(|e| failed(method, e))
    });
    match started {
        Ok(()) => None,
        Err(e) => Some(Err(e)),
    }
}

/// The session's MCP servers from create/resume params (`mcpServers`, minus
/// `disabledMcpServers`); stdio servers only for connections that may start processes.
pub(super) fn session_configs(
    host: &Host,
    conn: ConnId,
    method: &str,
    params: Option<&RawValue>,
) -> Result<Vec<crate::mcp::McpServerConfig>, ErrorObject> {
    let raw: Value = decode(params)?;
    let disabled = crate::jsonrpc::string_array(raw.get("disabledMcpServers"));
    let configs =
        crate::mcp::copilot_servers(raw.get("mcpServers").unwrap_or(&Value::Null), &disabled)
            .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}")))?;
    host.check_mcp_configs(conn, &configs)
        .map_err(|e| failed(method, e))?;
    // The user configuration (`mcp.config.*`) applies to every session; the session's own
    // entries win.
    let mut all = host.mcp_user_servers();
    all.retain(|u| !configs.iter().any(|c| c.name == u.name) && !disabled.contains(&u.name));
    all.extend(configs);
    Ok(all)
}

/// What the session finds besides its own servers (`pluginDirectories`, the built-in GitHub
/// MCP server with `enableConfigDiscovery` or `githubMcpToolConfig`), loaded lazily, and the
/// servers it disables (`disabledMcpServers`), listed as `disabled` (`mcp/discovered.rs`).
pub(super) fn apply_discovery(
    host: &mut Host,
    conn: ConnId,
    session: &str,
    params: Option<&RawValue>,
) {
    let Ok(raw) = decode::<Value>(params) else {
        return;
    };
    let strings = |key: &str| crate::jsonrpc::string_array(raw.get(key));
    let disabled = strings("disabledMcpServers");
    let plugin_dirs = strings("pluginDirectories");
    let github = GitHubMcpToolConfig::of(raw.get("githubMcpToolConfig")).or_else(|| {
        (raw.get("enableConfigDiscovery") == Some(&Value::Bool(true)))
            .then(GitHubMcpToolConfig::default)
    });
    host.set_discovered_mcp(session, conn, &plugin_dirs, github, disabled.clone());
    if let Some(Value::Object(own)) = raw.get("mcpServers") {
        for name in disabled.iter().filter(|d| own.contains_key(d.as_str())) {
            let one = json!({ name.clone(): own[name.as_str()].clone() });
            let transport = crate::mcp::copilot_servers(&one, &[])
                .ok()
                .and_then(|mut c| c.pop())
                .map_or("stdio", |c| c.transport_name());
            host.note_disabled_mcp(session, name, transport);
        }
    }
}

/// SEP-1865: an app may call only the server whose `ui://` view it is, so `originServerName`
/// is required and must equal `serverName`.
fn same_origin(method: &str, p: &Value, server: &str) -> Result<(), ErrorObject> {
    let origin = required_str(p, "originServerName")?;
    if origin == server {
        Ok(())
    } else {
        Err(failed(
            method,
            format!(
                "an app of MCP server '{origin}' may not reach MCP server '{server}' \
                 (originServerName must equal serverName)"
            ),
        ))
    }
}

/// One configuration from a method's `config`, checked against `conn`'s right to spawn.
fn parse_config(
    host: &Host,
    conn: ConnId,
    method: &str,
    name: &str,
    config: &Value,
) -> Result<McpServerConfig, ErrorObject> {
    let map = json!({ name: config });
    let mut configs = crate::mcp::copilot_servers(&map, &[])
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {e}")))?;
    host.check_mcp_configs(conn, &configs)
        .map_err(|e| failed(method, e))?;
    configs
        .pop()
        .ok_or_else(|| ErrorObject::new(code::INVALID_PARAMS, "invalid params: no config"))
}

/// Fails with `message` when the session has no MCP host yet: it exists once the session
/// has servers (configured at create / resume or started with a config).
fn need_host(host: &Host, method: &str, session: &str, message: &str) -> Result<(), ErrorObject> {
    if host.mcp_servers(session).next().is_some() {
        Ok(())
    } else {
        Err(failed(method, message))
    }
}

fn server(p: &Value) -> Result<&str, ErrorObject> {
    required_str(p, "serverName")
}

pub(super) fn oauth_login(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    let method = call.method;
    need_host(host, method, session, "MCP host is not available")?;
    let name = server(p)?;
    let Some(config) = host.mcp_server_config(session, name) else {
        return Err(failed(
            method,
            format!("MCP server '{name}' is not configured"),
        ));
    };
    if config.spawns_process() {
        return Err(failed(
            method,
            format!("MCP server '{name}' is not a remote server: OAuth applies to HTTP servers"),
        ));
    }
    Err(failed(
        method,
        "MCP server OAuth is not available on this server (agentwire runs no OAuth flow; \
         give the server's headers in its config)",
    ))
}

pub(super) fn list(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    // Asking about the servers loads what the session finds, as the runtime does.
    host.want_discovered_mcp(session);
    Ok(json!({"servers": host.mcp_servers_json(session)}))
}

pub(super) fn list_tools(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    let name = server(p)?;
    if !host.mcp_server_running(session, name) {
        return Err(failed(
            call.method,
            format!("MCP server '{name}' is not connected"),
        ));
    }
    Ok(json!({"tools": host.mcp_tools_json(session, name)}))
}

/// An app's calls need a session some client of which declared MCP Apps (`requestMcpApps`
/// on a server that enables them): the views are theirs.
fn apps_negotiated(host: &Host, method: &str, session: &str) -> Result<(), ErrorObject> {
    if host
        .session(session)
        .is_some_and(|s| s.attached.values().any(|a| a.mcp_apps))
    {
        return Ok(());
    }
    Err(failed(
        method,
        "MCP Apps are not available in this session: no client of it declared the mcp-apps \
         capability (requestMcpApps on a server started with MCP Apps enabled)",
    ))
}

pub(super) fn app_tools(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    let name = server(p)?;
    apps_negotiated(host, call.method, session)?;
    same_origin(call.method, p, name)?;
    if !host.mcp_server_running(session, name) {
        return Err(failed(
            call.method,
            format!("MCP server '{name}' is not connected"),
        ));
    }
    Ok(json!({"tools": host.mcp_app_tools(session, name)}))
}

pub(super) fn is_server_running(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    Ok(json!({"running": host.mcp_server_running(session, server(p)?)}))
}

pub(super) fn stop_server(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let name = server(p)?;
    host.stop_mcp_server(session, name, "the server was stopped");
    Ok(Value::Null)
}

/// `session.mcp.disable`: as `stopServer`; without a `config`, only once the session has an
/// MCP host.
pub(super) fn disable(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    if p.get("config").is_none() {
        need_host(host, call.method, session, "No MCP host initialized")?;
    }
    stop_server(host, call, session, p)
}

pub(super) fn start_server(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    start(host, call, session, p, false)
}

pub(super) fn restart_server(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    start(host, call, session, p, true)
}

/// `session.mcp.enable`: as `startServer`; without a `config`, only once the session has an
/// MCP host.
pub(super) fn enable(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    if p.get("config").is_none() {
        need_host(host, call.method, session, "No MCP host initialized")?;
    }
    start(host, call, session, p, false)
}

/// Starts the named server (with the params' `config`, else its configuration); a restart,
/// or a start with a new `config`, stops the running one first.
fn start(host: &mut Host, call: &Call<'_>, session: &str, p: &Value, restart: bool) -> Answer {
    let (conn, method) = (call.conn, call.method);
    let name = server(p)?;
    let config = match p.get("config").filter(|c| !c.is_null()) {
        Some(raw) => parse_config(host, conn, method, name, raw)?,
        None => host
            .mcp_server_config(session, name)
            .ok_or_else(|| failed(method, format!("MCP server '{name}' is not configured")))?,
    };
    host.check_mcp_configs(conn, std::slice::from_ref(&config))
        .map_err(|e| failed(method, e))?;
    if restart || p.get("config").is_some() {
        host.stop_mcp_server(session, name, "the server is restarting");
    }
    host.start_mcp_servers(session, vec![config]);
    Ok(Value::Null)
}

pub(super) fn reload(host: &mut Host, call: &Call<'_>, session: &str, _: &Value) -> Answer {
    let method = call.method;
    need_host(host, method, session, "MCP config reload not available")?;
    let configs: Vec<McpServerConfig> = host
        .mcp_servers(session)
        .map(|s| s.config.clone())
        .collect();
    host.check_mcp_configs(call.conn, &configs)
        .map_err(|e| failed(method, e))?;
    host.stop_mcp_servers(session, "the servers are reloading");
    host.start_mcp_servers(session, configs);
    Ok(Value::Null)
}

/// `session.mcp.oauth.handlePendingRequest {requestId, result}`: a client's token for (or
/// refusal of) a remote server's pending authorization (`mcp/oauth.rs`).
pub(super) fn oauth_answer(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let request_id = required_str(p, "requestId")?;
    let result = p.get("result").unwrap_or(&Value::Null);
    let token = match result.get("kind").and_then(Value::as_str) {
        Some("token") => {
            let token = result
                .get("accessToken")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    ErrorObject::new(
                        code::INVALID_PARAMS,
                        "invalid params: a token result needs `accessToken`",
                    )
                })?;
            let kind = result
                .get("tokenType")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .unwrap_or("Bearer");
            Some((kind.to_owned(), token.to_owned()))
        }
        Some("cancelled") => None,
        _ => {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                "invalid params: result.kind must be \"token\" or \"cancelled\"",
            ))
        }
    };
    Ok(json!({"success": host.resolve_mcp_auth(session, request_id, token)}))
}

/// `"indirect"` → `true`, `"direct"` → `false`.
fn env_mode(mode: &str) -> Option<bool> {
    match mode {
        "indirect" => Some(true),
        "direct" => Some(false),
        _ => None,
    }
}

/// The `envValueMode` of `session.create` / `session.resume` params, applied to the
/// session's stdio servers started from then on (absent or unknown: unchanged).
pub(super) fn apply_env_value_mode(host: &mut Host, session: &str, params: Option<&RawValue>) {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Mode {
        env_value_mode: Option<String>,
    }
    let mode = params.and_then(|p| serde_json::from_str::<Mode>(p.get()).ok());
    if let Some(indirect) = mode
        .and_then(|m| m.env_value_mode)
        .and_then(|m| env_mode(&m))
    {
        host.set_mcp_env_indirect(session, indirect);
    }
}

/// `session.mcp.setEnvValueMode {mode}`: how the `env` values of the session's stdio servers
/// started from now on are read, `direct` (the values) or `indirect` (names of the runtime's
/// own environment variables, read when the server starts). Running servers keep theirs.
pub(super) fn set_env_value_mode(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    let mode = required_str(p, "mode")?;
    let indirect = env_mode(mode).ok_or_else(|| {
        ErrorObject::new(
            code::INVALID_PARAMS,
            format!("invalid params: mode must be \"direct\" or \"indirect\", not {mode:?}"),
        )
    })?;
    host.set_mcp_env_indirect(session, indirect);
    Ok(json!({ "mode": mode }))
}

/// `session.mcp.removeGitHub`: forgets the session's built-in GitHub MCP server (stopped if
/// it runs); `removed: false` when it has none (a session's own server of that name is its
/// own).
pub(super) fn remove_github(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    Ok(json!({"removed": host.remove_github_mcp(session)}))
}

pub(super) fn cancel_sampling(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let request_id = required_str(p, "requestId")?;
    Ok(json!({"cancelled": host.cancel_sampling_execution(session, request_id)}))
}

pub(super) fn config_list(host: &mut Host, _: &Call<'_>, _: &Value) -> Answer {
    let servers: serde_json::Map<String, Value> = host
        .mcp_user_configs()
        .map(|(name, raw)| (name.to_owned(), raw.clone()))
        .collect();
    Ok(json!({"servers": servers}))
}

pub(super) fn config_add(host: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    set_config(host, call, p, false)
}

pub(super) fn config_update(host: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    set_config(host, call, p, true)
}

/// `mcp.config.add` (a new name) / `update` (an existing one).
fn set_config(host: &mut Host, call: &Call<'_>, p: &Value, update: bool) -> Answer {
    let method = call.method;
    let name = required_str(p, "name")?;
    let raw = p.get("config").ok_or_else(|| {
        ErrorObject::new(
            code::INVALID_PARAMS,
            "invalid params: missing field `config`",
        )
    })?;
    let config = parse_config(host, call.conn, method, name, raw)?;
    let exists = host.mcp_user_configs().any(|(n, _)| n == name);
    if !update && exists {
        return Err(failed(
            method,
            format!("MCP server '{name}' already exists"),
        ));
    }
    if update && !exists {
        return Err(failed(method, format!("MCP server '{name}' not found")));
    }
    host.set_mcp_user_config(name, Some((raw.clone(), config)));
    Ok(Value::Null)
}

pub(super) fn config_remove(host: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    let name = required_str(p, "name")?;
    if !host.set_mcp_user_config(name, None) {
        return Err(failed(
            call.method,
            format!("MCP server '{name}' not found"),
        ));
    }
    Ok(Value::Null)
}

pub(super) fn config_enable(host: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    set_enabled(host, call, p, true)
}

pub(super) fn config_disable(host: &mut Host, call: &Call<'_>, p: &Value) -> Answer {
    set_enabled(host, call, p, false)
}

fn set_enabled(host: &mut Host, call: &Call<'_>, p: &Value, enabled: bool) -> Answer {
    let names: Vec<&str> = p
        .get("names")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .ok_or_else(|| {
            ErrorObject::new(
                code::INVALID_PARAMS,
                "invalid params: missing array field `names`",
            )
        })?;
    let unknown: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !host.mcp_user_configs().any(|(c, _)| c == *n))
        .collect();
    if !unknown.is_empty() {
        return Err(failed(
            call.method,
            format!("MCP server(s) not found: {}", unknown.join(", ")),
        ));
    }
    for name in names {
        host.set_mcp_user_enabled(name, enabled);
    }
    Ok(Value::Null)
}

pub(super) fn discover(host: &mut Host, _: &Call<'_>, _: &Value) -> Answer {
    let servers: Vec<Value> = host
        .mcp_user_configs()
        .map(|(name, raw)| {
            let kind = match raw.get("type").and_then(Value::as_str) {
                Some("http") => "http",
                Some("sse") => "sse",
                _ if raw.get("url").is_some() && raw.get("command").is_none() => "http",
                _ => "stdio",
            };
            json!({"name": name, "type": kind, "source": "user", "enabled": true})
        })
        .collect();
    Ok(json!({"servers": servers}))
}

/// Why MCP Apps do or do not work in this session: the gate, and the named server's
/// figures (`serverName`; not connected when the session has no such server up).
pub(super) fn diagnose(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: Value = decode(params)?;
    let session = session_id(&p)?;
    known(host, call.method, &session)?;
    let has = host
        .session(&session)
        .is_some_and(|s| s.attached.values().any(|a| a.mcp_apps));
    let name = p.get("serverName").and_then(Value::as_str).unwrap_or("");
    let tools = host.mcp_tools_json(&session, name);
    let with_ui = tools.iter().filter(|t| t.get("ui").is_some()).count();
    let sample: Vec<&Value> = tools
        .iter()
        .filter(|t| t.get("ui").is_some())
        .filter_map(|t| t.get("name"))
        .take(5)
        .collect();
    Ok(json!({
        "capability": {"sessionHasMcpApps": has,
                       "featureFlagEnabled": host.config().mcp_apps_enabled,
                       "advertised": has},
        "server": {"connected": host.mcp_server_running(&session, name),
                   "toolCount": tools.len(), "toolsWithUiMeta": with_ui,
                   "sampleToolNames": sample},
    }))
}
