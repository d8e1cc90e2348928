//! MCP server configurations as clients send them: the Copilot SDK's `mcpServers` map
//! (`{name: {type?, command, args?, env?, cwd?} | {type?, url, headers?}}` with `tools`,
//! `excludeTools`, `timeout`) and ACP's `mcpServers` list (`{name, command, args, env:
//! [{name, value}]}` or `{type: "http"|"sse", name, url, headers: [{name, value}]}`).

use std::time::Duration;

use serde_json::Value;

/// Default deadline of one MCP request (initialize, a tool listing, a tool call): 60 s.
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(60);

/// How agentwire reaches a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables added to the server's own.
        env: Vec<(String, String)>,
        /// Working directory (the session's when `None`).
        cwd: Option<String>,
    },
    /// Streamable HTTP (`type: "http"`) or the legacy SSE transport (`type: "sse"`).
    Http {
        /// The endpoint.
        url: String,
        /// Extra request headers.
        headers: Vec<(String, String)>,
        /// `type: "sse"` (the legacy transport, not supported yet).
        legacy_sse: bool,
    },
}

/// Which of a server's tools are offered.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ToolFilter {
    /// `None`: every tool (`tools` unset or `["*"]`); else only these names (`[]`: none).
    pub only: Option<Vec<String>>,
    /// Tools never offered (`excludeTools`).
    pub exclude: Vec<String>,
}

impl ToolFilter {
    /// Whether tool `name` is offered.
    pub fn allows(&self, name: &str) -> bool {
        if self.exclude.iter().any(|t| t == name) {
            return false;
        }
        match &self.only {
            None => true,
            Some(names) => names.iter().any(|t| t == name || t == "*"),
        }
    }
}

/// One configured MCP server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The server's name (the key of `mcpServers`).
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Which tools are offered.
    pub tools: ToolFilter,
    /// Deadline of each request to it.
    pub timeout: Duration,
    /// The OAuth client it names (`oauthClientId`, `oauthPublicClient`), for a remote server
    /// whose authorization the session's clients provide.
    pub oauth_client: Option<OAuthClient>,
}

/// A static OAuth client a remote server's configuration names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthClient {
    /// `oauthClientId`.
    pub client_id: String,
    /// `oauthPublicClient`.
    pub public: bool,
}

impl McpServerConfig {
    /// Whether the server is a process agentwire must start.
    pub fn spawns_process(&self) -> bool {
        matches!(self.transport, McpTransport::Stdio { .. })
    }

    /// The transport's name as the runtime reports it (`stdio`, `http`, `sse`).
    pub fn transport_name(&self) -> &'static str {
        match &self.transport {
            McpTransport::Stdio { .. } => "stdio",
            McpTransport::Http {
                legacy_sse: true, ..
            } => "sse",
            McpTransport::Http { .. } => "http",
        }
    }
}

/// Reads the Copilot SDK's `mcpServers` map, skipping the names in `disabled`
/// (`disabledMcpServers`). An entry that is not a valid configuration is an error naming it.
pub fn copilot_servers(value: &Value, disabled: &[String]) -> Result<Vec<McpServerConfig>, String> {
    let Some(map) = value.as_object() else {
        return if value.is_null() {
            Ok(Vec::new())
        } else {
            Err("mcpServers must be an object".to_owned())
        };
    };
    let mut out = Vec::new();
    for (name, config) in map {
        if disabled.iter().any(|d| d == name) {
            continue;
        }
        out.push(copilot_server(name, config).map_err(|e| format!("mcpServers.{name}: {e}"))?);
    }
    Ok(out)
}

fn copilot_server(name: &str, config: &Value) -> Result<McpServerConfig, String> {
    let obj = config.as_object().ok_or("must be an object")?;
    let str_field = |key: &str| obj.get(key).and_then(Value::as_str).map(str::to_owned);
    let kind = str_field("type");
    let transport = match kind.as_deref() {
        Some("http") | Some("sse") => http_transport(obj, kind.as_deref() == Some("sse"))?,
        Some("local") | Some("stdio") => stdio_transport(obj)?,
        None if obj.contains_key("url") && !obj.contains_key("command") => {
            http_transport(obj, false)?
        }
        None => stdio_transport(obj)?,
        Some(other) => return Err(format!("unknown type `{other}` (local, stdio, http, sse)")),
    };
    let only = match obj.get("tools") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let names = strings(items)?;
            if names.len() == 1 && names[0] == "*" {
                None
            } else {
                Some(names)
            }
        }
        Some(_) => return Err("tools must be an array of names".to_owned()),
    };
    let exclude = match obj.get("excludeTools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => strings(items)?,
        Some(_) => return Err("excludeTools must be an array of names".to_owned()),
    };
    let timeout = match obj.get("timeout") {
        None | Some(Value::Null) => DEFAULT_MCP_TIMEOUT,
        Some(v) => match v.as_u64() {
            Some(ms) if ms > 0 => Duration::from_millis(ms),
            _ => return Err("timeout must be a positive number of milliseconds".to_owned()),
        },
    };
    Ok(McpServerConfig {
        name: name.to_owned(),
        transport,
        tools: ToolFilter { only, exclude },
        timeout,
        oauth_client: str_field("oauthClientId")
            .filter(|id| !id.is_empty())
            .map(|client_id| OAuthClient {
                client_id,
                public: obj.get("oauthPublicClient") == Some(&Value::Bool(true)),
            }),
    })
}

fn stdio_transport(obj: &serde_json::Map<String, Value>) -> Result<McpTransport, String> {
    let command = obj
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or("missing `command`")?
        .to_owned();
    let args = match obj.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => strings(items)?,
        Some(_) => return Err("args must be an array of strings".to_owned()),
    };
    let env = pairs(obj.get("env"), "env")?;
    let cwd = obj
        .get("cwd")
        .or_else(|| obj.get("workingDirectory"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(McpTransport::Stdio {
        command,
        args,
        env,
        cwd,
    })
}

fn http_transport(
    obj: &serde_json::Map<String, Value>,
    legacy_sse: bool,
) -> Result<McpTransport, String> {
    let url = obj
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .ok_or("missing or invalid `url` (http:// or https://)")?
        .to_owned();
    Ok(McpTransport::Http {
        url,
        headers: pairs(obj.get("headers"), "headers")?,
        legacy_sse,
    })
}

fn strings(items: &[Value]) -> Result<Vec<String>, String> {
    items
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| "expected strings".to_owned())
        })
        .collect()
}

/// `{NAME: VALUE}` (Copilot) or `[{name, value}]` (ACP).
fn pairs(value: Option<&Value>, field: &str) -> Result<Vec<(String, String)>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v.as_str() {
                Some(s) => Ok((k.clone(), s.to_owned())),
                None => Err(format!("{field}.{k} must be a string")),
            })
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                let name = item.get("name").and_then(Value::as_str);
                let value = item.get("value").and_then(Value::as_str);
                match (name, value) {
                    (Some(n), Some(v)) => Ok((n.to_owned(), v.to_owned())),
                    _ => Err(format!("{field} entries must be {{name, value}} strings")),
                }
            })
            .collect(),
        Some(_) => Err(format!("{field} must be an object")),
    }
}

/// Reads ACP's `mcpServers` list (`session/new`, `session/load`, `session/resume`).
pub fn acp_servers(value: &Value) -> Result<Vec<McpServerConfig>, String> {
    let Some(items) = value.as_array() else {
        return if value.is_null() {
            Ok(Vec::new())
        } else {
            Err("mcpServers must be an array".to_owned())
        };
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let name = item
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("mcpServers[{i}]: missing `name`"))?;
        out.push(copilot_server(name, item).map_err(|e| format!("mcpServers[{i}]: {e}"))?);
    }
    Ok(out)
}

impl McpServerConfig {
    /// The server as an ACP `McpServer` (what an agent's `session/new` takes): stdio
    /// `{name, command, args, env: [{name, value}]}`, HTTP `{type: "http", name, url,
    /// headers: [{name, value}]}`, SSE likewise with `type: "sse"`. A stdio server's working
    /// directory and the tool filter have no ACP field: the agent runs it in the session's
    /// directory and offers all its tools.
    pub fn to_acp(&self) -> Value {
        let pairs = |items: &[(String, String)]| -> Vec<Value> {
            items
                .iter()
                .map(|(name, value)| serde_json::json!({"name": name, "value": value}))
                .collect()
        };
        match &self.transport {
            McpTransport::Stdio {
                command, args, env, ..
            } => serde_json::json!({"name": self.name, "command": command, "args": args,
                                    "env": pairs(env)}),
            McpTransport::Http {
                url,
                headers,
                legacy_sse,
            } => serde_json::json!({"type": if *legacy_sse { "sse" } else { "http" },
                                    "name": self.name, "url": url, "headers": pairs(headers)}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn acp_shapes_round_trip() {
        let acp = json!([
            {"name": "s", "command": "node", "args": ["x.js"], "env": [{"name": "K", "value": "V"}]},
            {"type": "http", "name": "h", "url": "https://x/mcp", "headers": [{"name": "A", "value": "b"}]},
            {"type": "sse", "name": "e", "url": "https://x/sse", "headers": []},
        ]);
        let servers = acp_servers(&acp).unwrap();
        let back: Vec<Value> = servers.iter().map(McpServerConfig::to_acp).collect();
        assert_eq!(Value::Array(back), acp);
    }

    #[test]
    fn copilot_shapes_parse() {
        let servers = copilot_servers(
            &json!({
                "a": {"command": "node", "args": ["x.js"], "env": {"K": "V"}, "cwd": "/tmp",
                      "tools": ["echo"], "excludeTools": ["bad"], "timeout": 5000},
                "b": {"type": "http", "url": "http://localhost:1/mcp", "headers": {"X": "1"}},
                "c": {"type": "local", "command": "x", "tools": ["*"]},
                "off": {"command": "y"},
            }),
            &["off".to_owned()],
        )
        .unwrap();
        assert_eq!(servers.len(), 3);
        assert_eq!(servers[0].timeout, Duration::from_millis(5000));
        assert!(servers[0].tools.allows("echo") && !servers[0].tools.allows("bad"));
        assert!(!servers[0].tools.allows("other"));
        assert_eq!(servers[1].transport_name(), "http");
        assert!(servers[2].tools.allows("anything"));
        assert!(copilot_servers(&json!({"x": {"args": []}}), &[]).is_err());
        assert!(copilot_servers(&json!({"x": {"type": "ftp"}}), &[]).is_err());
    }

    #[test]
    fn acp_shapes_parse() {
        let servers = acp_servers(&json!([
            {"name": "s", "command": "node", "args": [], "env": [{"name": "K", "value": "V"}]},
            {"type": "http", "name": "h", "url": "https://x/mcp", "headers": []},
        ]))
        .unwrap();
        let McpTransport::Stdio { env, .. } = &servers[0].transport else {
            panic!()
        };
        assert_eq!(env, &[("K".to_owned(), "V".to_owned())]);
        assert_eq!(servers[1].transport_name(), "http");
    }
}
