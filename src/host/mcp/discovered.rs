//! MCP servers a session finds rather than names: those of its plugin directories
//! (`pluginDirectories`, each directory's `.mcp.json`) and the built-in GitHub MCP server
//! (`github-mcp-server`, on the runtime's own route). As the runtime does, they are loaded
//! lazily: nothing is read or started when the session is created, only once its first
//! prompt needs its tools ([`Host::want_discovered_mcp`] from the turn gate) or a client asks
//! about its MCP servers (`session.mcp.*`). The servers the session names itself
//! (`mcpServers`) start with the session, as before.
//!
//! Servers named in `disabledMcpServers` are neither read nor started; they are listed with
//! status `disabled`.

use serde_json::Value;

use crate::host::tool_ops::FileRequest;
use crate::host::Host;
use crate::mcp::{McpServerConfig, McpTransport};

/// The plugin manifest of MCP servers, in a plugin directory.
const PLUGIN_MCP_FILE: &str = ".mcp.json";

/// The name of the built-in GitHub MCP server.
pub(crate) const GITHUB_SERVER: &str = "github-mcp-server";

/// What a session finds, and how far loading it went.
#[derive(Debug, Default)]
pub(crate) struct Discovery {
    /// Plugin directories whose `.mcp.json` is still to be read.
    to_read: Vec<String>,
    /// A read is in flight.
    reading: bool,
    /// Servers found and not started yet.
    found: Vec<McpServerConfig>,
    /// Loading was asked for (a prompt or a client's MCP request).
    wanted: bool,
    /// Servers found and not started, listed as such (disabled, or refused).
    pub(crate) unstarted: Vec<Unstarted>,
    /// Names of the servers the session disables.
    disabled_names: Vec<String>,
    /// The connection that set the session up may start processes (stdio servers).
    may_spawn: bool,
    /// The built-in GitHub MCP server was started.
    github_started: bool,
}

/// A server a session found but does not run.
#[derive(Debug, Clone)]
pub(crate) struct Unstarted {
    pub(crate) name: String,
    pub(crate) transport: &'static str,
    /// Where it comes from: `user` (the session's own `mcpServers`), `plugin` or `builtin`.
    pub(crate) source: &'static str,
    /// `disabled` or `failed`.
    pub(crate) status: &'static str,
    pub(crate) error: Option<String>,
}

impl Unstarted {
    fn disabled(name: &str, transport: &'static str, source: &'static str) -> Self {
        Unstarted {
            name: name.to_owned(),
            transport,
            source,
            status: "disabled",
            error: None,
        }
    }
}

/// A read of a plugin directory's `.mcp.json` for `session`.
#[derive(Debug)]
pub(crate) struct PluginMcpRead {
    session: String,
    dir: String,
}

/// The built-in GitHub MCP server's settings (`githubMcpToolConfig`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct GitHubMcpToolConfig {
    /// `enableAllTools`: every toolset (the `/mcp` endpoint, `X-MCP-Toolsets: all`); else the
    /// read-only endpoint.
    pub(crate) all_tools: bool,
    /// `additionalToolsets`.
    pub(crate) toolsets: Vec<String>,
    /// `additionalTools`.
    pub(crate) tools: Vec<String>,
    /// `enableInsidersMode`.
    pub(crate) insiders: bool,
}

impl GitHubMcpToolConfig {
    /// The settings in `githubMcpToolConfig` (`None`: absent or not an object).
    pub(crate) fn of(value: Option<&Value>) -> Option<Self> {
        let obj = value?.as_object()?;
        let flag = |key: &str| obj.get(key).and_then(Value::as_bool) == Some(true);
        let list = |key: &str| crate::jsonrpc::string_array(obj.get(key));
        Some(GitHubMcpToolConfig {
            all_tools: flag("enableAllTools"),
            toolsets: list("additionalToolsets"),
            tools: list("additionalTools"),
            insiders: flag("enableInsidersMode"),
        })
    }
}

/// The built-in GitHub MCP server on the runtime's route `api_url` with `token`.
fn github_server(api_url: &str, token: &str, tools: &GitHubMcpToolConfig) -> McpServerConfig {
    let base = api_url.trim_end_matches('/');
    let (url, toolsets) = if tools.all_tools {
        (format!("{base}/mcp"), "all".to_owned())
    } else {
        let mut sets = vec!["default".to_owned()];
        sets.extend(tools.toolsets.iter().cloned());
        (format!("{base}/mcp/readonly"), sets.join(","))
    };
    let mut headers = vec![
        ("Authorization".to_owned(), format!("Bearer {token}")),
        ("X-MCP-Toolsets".to_owned(), toolsets),
    ];
    if !tools.tools.is_empty() {
        headers.push(("X-MCP-Tools".to_owned(), tools.tools.join(",")));
    }
    if tools.insiders {
        headers.push(("X-MCP-Insiders".to_owned(), "true".to_owned()));
    }
    McpServerConfig {
        name: GITHUB_SERVER.to_owned(),
        transport: McpTransport::Http {
            url,
            headers,
            legacy_sse: false,
        },
        tools: Default::default(),
        timeout: crate::mcp::config::DEFAULT_MCP_TIMEOUT,
        oauth_client: None,
    }
}

impl Host {
    /// Sets what `session` finds: its plugin directories (absolute, or relative to its
    /// working directory), the built-in GitHub MCP server when `github` asks for it and the
    /// server has the runtime's route, and the names it disables. Nothing is read or
    /// started yet.
    pub(crate) fn set_discovered_mcp(
        &mut self,
        session: &str,
        conn: crate::host::ConnId,
        plugin_dirs: &[String],
        github: Option<GitHubMcpToolConfig>,
        disabled: Vec<String>,
    ) {
        let route = self
            .config
            .model_default
            .as_ref()
            .filter(|d| d.provider.copilot_api)
            .and_then(|d| {
                let token = d.provider.bearer_token.as_ref()?;
                Some((d.provider.base_url.clone(), token.expose().to_owned()))
            });
        let may_spawn = self.may_spawn_mcp(conn);
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let cwd = live.session.cwd.clone();
        let discovery = &mut live.mcp.discovery;
        discovery.may_spawn = may_spawn;
        discovery.to_read = plugin_dirs
            .iter()
            .map(|dir| match &cwd {
                Some(cwd) if !dir.starts_with('/') => format!("{cwd}/{dir}"),
                _ => dir.clone(),
            })
            .collect();
        if let (Some(tools), Some((url, token))) = (github, route) {
            if disabled.iter().any(|d| d == GITHUB_SERVER) {
                discovery
                    .unstarted
                    .push(Unstarted::disabled(GITHUB_SERVER, "http", "builtin"));
            } else {
                discovery.found.push(github_server(&url, &token, &tools));
            }
        }
        discovery.disabled_names = disabled;
    }

    /// Records that `session`'s explicitly configured server `name` (transport `transport`)
    /// is disabled, for the list.
    pub(crate) fn note_disabled_mcp(&mut self, session: &str, name: &str, transport: &'static str) {
        if let Some(live) = self.sessions.get_mut(session) {
            live.mcp
                .discovery
                .unstarted
                .push(Unstarted::disabled(name, transport, "user"));
        }
    }

    /// Loads what `session` finds (reads its plugin directories, starts the servers found);
    /// `true` while some of it is still being read.
    pub(crate) fn want_discovered_mcp(&mut self, session: &str) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        let discovery = &mut live.mcp.discovery;
        discovery.wanted = true;
        let found = std::mem::take(&mut discovery.found);
        if found.iter().any(|c| c.name == GITHUB_SERVER) {
            discovery.github_started = true;
        }
        let reading = discovery.reading || !discovery.to_read.is_empty();
        if !found.is_empty() {
            self.start_mcp_servers(session, found);
        }
        if reading {
            self.read_next_plugin_mcp(session);
        }
        reading
    }

    /// Whether `session` has found servers not started yet, or directories still to read.
    pub(crate) fn discovered_mcp_pending(&self, session: &str) -> bool {
        self.sessions.get(session).is_some_and(|live| {
            let d = &live.mcp.discovery;
            d.reading || !d.to_read.is_empty() || !d.found.is_empty()
        })
    }

    /// Forgets the built-in GitHub MCP server of `session` (stopping it if it runs);
    /// whether there was one.
    pub(crate) fn remove_github_mcp(&mut self, session: &str) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        let discovery = &mut live.mcp.discovery;
        let before = discovery.found.len();
        discovery.found.retain(|c| c.name != GITHUB_SERVER);
        let mut removed = discovery.found.len() != before;
        if std::mem::take(&mut discovery.github_started) {
            self.stop_mcp_server(session, GITHUB_SERVER, "the GitHub MCP server was removed");
            removed = true;
        }
        removed
    }

    fn read_next_plugin_mcp(&mut self, session: &str) {
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let discovery = &mut live.mcp.discovery;
        if discovery.reading || discovery.to_read.is_empty() {
            return;
        }
        let dir = discovery.to_read.remove(0);
        discovery.reading = true;
        let path = format!("{}/{PLUGIN_MCP_FILE}", dir.trim_end_matches('/'));
        let read = PluginMcpRead {
            session: session.to_owned(),
            dir,
        };
        self.plugin_mcp_file_op(FileRequest::Read { path }, read);
    }

    /// A plugin directory's `.mcp.json` was read (or not: a directory without one has no
    /// servers).
    pub(in crate::host) fn plugin_mcp_read_done(
        &mut self,
        read: PluginMcpRead,
        result: Result<crate::host::FileReply, String>,
    ) {
        let session = read.session;
        let Some(live) = self.sessions.get_mut(&session) else {
            return;
        };
        let discovery = &mut live.mcp.discovery;
        discovery.reading = false;
        if let Ok(crate::host::FileReply::Text(text)) = result {
            // A manifest that does not parse names no server; the session goes on.
            let servers = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.get("mcpServers").cloned());
            if let Some(Value::Object(map)) = servers {
                for (name, raw) in map {
                    let one = serde_json::json!({ name.clone(): raw });
                    let Ok(mut configs) = crate::mcp::copilot_servers(&one, &[]) else {
                        continue;
                    };
                    let Some(mut config) = configs.pop() else {
                        continue;
                    };
                    let transport = config.transport_name();
                    if discovery.disabled_names.contains(&name) {
                        discovery
                            .unstarted
                            .push(Unstarted::disabled(&name, transport, "plugin"));
                        continue;
                    }
                    if config.spawns_process() && !discovery.may_spawn {
                        discovery.unstarted.push(Unstarted {
                            name,
                            transport,
                            source: "plugin",
                            status: "failed",
                            error: Some(super::SPAWN_REFUSED.to_owned()),
                        });
                        continue;
                    }
                    if let McpTransport::Stdio { cwd, .. } = &mut config.transport {
                        cwd.get_or_insert_with(|| read.dir.clone());
                    }
                    discovery.found.push(config);
                }
            }
        }
        if discovery.wanted {
            self.want_discovered_mcp(&session);
        }
        if !self.discovered_mcp_pending(&session) {
            self.release_held(&session);
        }
    }
}
