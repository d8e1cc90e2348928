//! `agentwire`: a scripted, model-free stand-in for the Copilot CLI server (protocol v3).
//!
//! Run with no arguments to serve on TCP with the built-in defaults; see `--help`.

mod cluster_args;
mod fd_limit;
mod model_args;
mod serve;
mod store_args;
mod telemetry_env;
mod tui;

use std::path::PathBuf;
use std::process::ExitCode;

use agentwire::agent::Scenario;
use agentwire::frame::Framing;
use agentwire::host::{Dialect, HostConfig};
use agentwire_driver::ServerOptions;
use clap::{Parser, ValueEnum};

use serve::Mode;

const DEFAULT_HOST: &str = "127.0.0.1";

const AFTER_HELP: &str = "\
With no mode flag (neither --stdio nor --port) the server listens on TCP at 127.0.0.1 on a free \
port, so `cargo run -p agentwire-cli` just works.

In TCP mode the only line on stdout is `listening on port N`; in --stdio mode stdout carries only \
Content-Length framed JSON-RPC. Logs go to stderr (filter with RUST_LOG, default `warn`).

With --acp the server speaks the Agent Client Protocol v1 instead (for editors such as Zed): \
newline-delimited JSON-RPC on stdin/stdout by default (stdout carries only compact JSON lines), \
or TCP with --port N, on any runtime.

If COPILOT_CONNECTION_TOKEN is set, clients must send it in `connect` before anything else.
The process exits 0 after a client calls `runtime.shutdown` (or, with --stdio, when stdin ends), or on SIGINT/SIGTERM: it stops accepting, writes what is queued (5 s at most), sends every client an `agentwire/shutdown` notification with the reason, and syncs the session store. A second signal exits at once (status 130/143).

Sessions are stored in --data-dir (default: $COPILOT_HOME, else ~/.agentwire) under session-state/<sessionId>/events.jsonl and loaded again at start; --no-store keeps them in memory. Installed plugins and registered plugin marketplaces live there too (installed-plugins/, plugins.json).

Models: a session whose client sends a `provider` (BYOK: openai, azure, anthropic) gets a real \
agent that calls it. Sessions without one call the server default (--model-base-url URL --model \
NAME --model-api-key-env VAR), else, when COPILOT_API_URL is set and a token is found \
(--auth-token-env NAME, COPILOT_SDK_AUTH_TOKEN, GH_TOKEN, GITHUB_TOKEN), \
{COPILOT_API_URL}/chat/completions with that Bearer token; else they run the scripted agent. \
See docs/model.md.

Also accepted and ignored, for compatibility with the Copilot SDKs: --no-auto-update, \
--log-level L, --no-auto-login, --session-idle-timeout S, --remote.";

/// A sans-IO protocol host for AI-agent sessions, wire-compatible with the Copilot SDK
/// protocol v3 (Content-Length framed JSON-RPC over stdio or TCP). Sessions with a model
/// provider (the client's BYOK `provider`, or the server default) call the model; the others
/// run scripted agent turns.
#[derive(Parser, Debug)]
#[command(name = "agentwire", version, after_help = AFTER_HELP)]
struct Cli {
    /// JSON-RPC server mode (the default; accepted for compatibility).
    #[arg(long)]
    server: bool,

    /// JSON-RPC server mode, as the Copilot SDKs pass it (the default).
    #[arg(long)]
    headless: bool,

    /// Speak the Agent Client Protocol (ACP) v1: NDJSON on stdin/stdout, or TCP with --port.
    #[arg(long)]
    acp: bool,

    /// Serve one connection on stdin/stdout instead of TCP.
    #[arg(long)]
    stdio: bool,

    /// Run a terminal UI showing the foreground session, and serve SDK clients on TCP
    /// (prints `listening on port N` before the UI takes over the screen).
    #[arg(long)]
    ui_server: bool,

    /// Also serve the Agent Host Protocol (AHP) over WebSocket on this port (0 picks a free
    /// port), announced on stdout as `ahp: listening on port N` after the main line. With
    /// COPILOT_CONNECTION_TOKEN set, the upgrade must carry `Authorization: Bearer <token>`.
    #[arg(long, value_name = "N")]
    ahp_port: Option<u16>,

    /// Also serve ACP (NDJSON) over TCP on this port (0 picks a free port), announced on
    /// stdout as `acp: listening on port N` after the main line.
    #[arg(long, value_name = "N")]
    acp_port: Option<u16>,

    /// TCP port to listen on; 0 picks a free port [default: 0].
    #[arg(long, value_name = "N")]
    port: Option<u16>,

    /// Address to listen on [default: 127.0.0.1].
    #[arg(long, value_name = "ADDR")]
    host: Option<String>,

    /// Scenario file (JSON) that scripts the agent's turns; default: the built-in scenario.
    #[arg(long, value_name = "FILE", conflicts_with = "acp_agent")]
    scenario: Option<PathBuf>,

    /// Run sessions on an ACP agent ("COMMAND [ARGS...]", split as a shell splits words,
    /// without a shell): sessions whose client names no BYOK provider are served by one
    /// process of that agent (e.g. "copilot --acp --stdio", "gemini --acp").
    #[arg(long, value_name = "COMMAND")]
    acp_agent: Option<String>,

    /// Seed for generated ids (session, event and message ids), for reproducible runs;
    /// default: a random seed from the OS.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,

    /// Let every TCP client run shell commands on this machine (`session.shell.exec`).
    /// Without it only the stdio client and, when COPILOT_CONNECTION_TOKEN is set, clients
    /// that passed the token may.
    #[arg(long)]
    allow_shell: bool,

    /// Honour clients' `requestMcpApps` (also enabled by COPILOT_MCP_APPS=true in the
    /// environment, as with the real runtime).
    #[arg(long)]
    mcp_apps: bool,

    /// Let every TCP client configure stdio MCP servers (`mcpServers` entries with a
    /// `command`, run as this process's user). Without it only the stdio client and, when
    /// COPILOT_CONNECTION_TOKEN is set, clients that passed the token may.
    #[arg(long)]
    allow_mcp_spawn: bool,

    /// Approve every permission prompt without asking, in every session (as the real
    /// runtime's `--yolo`): no `permission.*` events are emitted.
    #[arg(long)]
    yolo: bool,

    /// Async runtime that drives the server; all three behave the same.
    #[arg(long, value_enum, default_value_t = RuntimeKind::Tokio)]
    runtime: RuntimeKind,

    #[command(flatten)]
    store: store_args::StoreArgs,

    #[command(flatten)]
    model: model_args::ModelArgs,

    #[command(flatten)]
    cluster: cluster_args::ClusterArgs,

    #[arg(long, hide = true)]
    no_auto_update: bool,

    #[arg(long, hide = true, value_name = "L")]
    log_level: Option<String>,

    #[arg(long, hide = true)]
    no_auto_login: bool,

    #[arg(long, hide = true, value_name = "S")]
    session_idle_timeout: Option<String>,

    #[arg(long, hide = true)]
    remote: bool,
}

/// The `--runtime` choices.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum RuntimeKind {
    /// agentwire-tokio
    Tokio,
    /// agentwire-smol
    Smol,
    /// agentwire-async-std (async-std is unmaintained upstream; prefer smol)
    AsyncStd,
}

/// A usage or setup error: printed as `error: ...`, exit code 2.
struct UsageError(String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(log_writer(&cli))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();

    // One descriptor per connection: allow as many as the OS lets this process have.
    match fd_limit::raise_to_hard_limit() {
        Some(Ok(limit)) => tracing::debug!(limit, "open-file limit"),
        Some(Err(e)) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
        None => {}
    }
    let (mode, config, tools) = match setup(&cli) {
        Ok(ok) => ok,
        Err(UsageError(msg)) => {
            eprintln!("error: {msg}");
            return ExitCode::from(2);
        }
    };
    if cli.ui_server {
        return match mode {
            Mode::Tcp { host, port, .. } if !cli.acp => {
                tui::serve(&host, port, config.with_foreground_ui(true))
            }
            _ => {
                eprintln!(
                    "error: --ui-server serves TCP; it cannot be combined with --stdio or --acp"
                );
                ExitCode::from(2)
            }
        };
    }

    let options = server_options(&cli);
    let cluster = match cli.cluster.setup() {
        Ok(cluster) => cluster,
        Err(msg) => {
            eprintln!("error: {msg}");
            return ExitCode::from(2);
        }
    };
    if let Some(cluster) = cluster {
        if cli.store.explicit() {
            eprintln!("error: --cluster keeps sessions in JetStream; it cannot be combined with --data-dir, --no-store or --fsync");
            return ExitCode::from(2);
        }
        if !matches!(cli.runtime, RuntimeKind::Tokio) {
            eprintln!("error: --cluster runs on the tokio runtime only");
            return ExitCode::from(2);
        }
        let mut config = config;
        config.node_id = Some(cluster.node.node_id.clone());
        let runtime = match tokio::runtime::Runtime::new() {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("error: cannot start the tokio runtime: {e}");
                return ExitCode::FAILURE;
            }
        };
        let code = runtime.block_on(async {
            let node =
                match agentwire_cluster::node::ClusterNode::start(cluster.node, cluster.connect)
                    .await
                {
                    Ok(node) => node,
                    Err(e) => {
                        eprintln!("error: cannot join the cluster: {e}");
                        return ExitCode::FAILURE;
                    }
                };
            serve::run_cluster::<agentwire_tokio::Tokio>(mode, tools, config, options, node).await
        });
        runtime.shutdown_timeout(std::time::Duration::from_millis(100));
        return code;
    }
    let store = match cli.store.open() {
        Ok(store) => store,
        Err(code) => return code,
    };
    match cli.runtime {
        RuntimeKind::Tokio => {
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: cannot start the tokio runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let code = runtime.block_on(serve::run::<agentwire_tokio::Tokio>(
                mode, tools, config, options, store,
            ));
            // The stdin reader may be parked in a blocking read; don't wait for it.
            runtime.shutdown_timeout(std::time::Duration::from_millis(100));
            code
        }
        // As with tokio, the stdin reader may be parked in a blocking read: returning from
        // `main` ends the process without waiting for it.
        RuntimeKind::Smol => smol::block_on(serve::run::<agentwire_smol::Smol>(
            mode, tools, config, options, store,
        )),
        RuntimeKind::AsyncStd => {
            async_std::task::block_on(serve::run::<agentwire_async_std::AsyncStd>(
                mode, tools, config, options, store,
            ))
        }
    }
}

/// The server's options (every runtime): the Copilot SDK protocol, or ACP over NDJSON with
/// `--acp`.
fn server_options(cli: &Cli) -> ServerOptions {
    if cli.acp {
        ServerOptions {
            framing: Framing::Ndjson,
            dialect: Dialect::Acp,
            ..ServerOptions::default()
        }
    } else {
        ServerOptions::default()
    }
}

/// The mode to serve in, the host's configuration, and the loopback listener of the
/// client-tools server (with `--acp-agent`: the agent reaches the sessions' client tools there).
fn setup(cli: &Cli) -> Result<(Mode, HostConfig, Option<std::net::TcpListener>), UsageError> {
    // ACP clients spawn the agent and talk over stdio unless a port is asked for.
    let acp_stdio = cli.acp && cli.port.is_none() && cli.host.is_none();
    let mode = if cli.stdio || acp_stdio {
        if cli.port.is_some() {
            return Err(UsageError("--stdio cannot be combined with --port".into()));
        }
        if cli.host.is_some() {
            return Err(UsageError("--stdio cannot be combined with --host".into()));
        }
        if cli.ahp_port.is_some() || cli.acp_port.is_some() {
            return Err(UsageError(
                "--ahp-port and --acp-port open listeners beside the TCP one; they cannot be \
                 combined with --stdio"
                    .into(),
            ));
        }
        Mode::Stdio
    } else {
        Mode::Tcp {
            host: cli.host.clone().unwrap_or_else(|| DEFAULT_HOST.to_owned()),
            port: cli.port.unwrap_or(0),
            extra: serve::ExtraListeners {
                ahp_port: cli.ahp_port,
                acp_port: cli.acp_port,
                token: std::env::var("COPILOT_CONNECTION_TOKEN")
                    .ok()
                    .filter(|t| !t.is_empty()),
            },
        }
    };

    let mut config = match &cli.scenario {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                UsageError(format!("cannot read scenario file {}: {e}", path.display()))
            })?;
            let scenario = Scenario::from_json(&text).map_err(|e| {
                UsageError(format!("invalid scenario file {}: {e}", path.display()))
            })?;
            HostConfig::with_scenario(scenario)
        }
        None => HostConfig::default(),
    };
    let mut tools = None;
    if let Some(command) = &cli.acp_agent {
        let argv = agentwire::agent::acp::split_command(command)
            .map_err(|e| UsageError(format!("--acp-agent: {e}")))?;
        config = config.with_acp_agent(argv);
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| UsageError(format!("cannot listen for the client-tools server: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| UsageError(format!("cannot listen for the client-tools server: {e}")))?
            .port();
        let key = format!("{:016x}{:016x}{:016x}", os_seed(), os_seed(), os_seed());
        config = config.with_tool_server(Some(agentwire::tool_server::ToolServerConfig {
            url: format!("http://127.0.0.1:{port}"),
            key,
        }));
        tools = Some(listener);
    }
    config.seed = cli.seed.unwrap_or_else(os_seed);
    config.connection_token = std::env::var("COPILOT_CONNECTION_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    config.approve_all_permissions = cli.yolo;
    // The stdio client is the process owner; TCP clients need the token or the opt-in (for
    // shell commands and for stdio MCP servers alike).
    config.shell_enabled = cli.allow_shell || matches!(mode, Mode::Stdio);
    if cli.allow_mcp_spawn || matches!(mode, Mode::Stdio) {
        config.mcp_spawn = agentwire::host::McpSpawnPolicy::Anyone;
    }
    config.mcp_apps_enabled = cli.mcp_apps
        || std::env::var("COPILOT_MCP_APPS").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    config.extensions = extensions_config();
    // On, as in the runtime, unless the experiment variable turns it off.
    config.websocket_responses = !std::env::var("COPILOT_EXP_COPILOT_CLI_WEBSOCKET_RESPONSES")
        .is_ok_and(|v| v.eq_ignore_ascii_case("false"));
    config.telemetry =
        telemetry_env::from_env(|name| std::env::var(name).ok()).unwrap_or_else(|warning| {
            tracing::warn!("{warning}");
            None
        });
    cli.model.apply(&mut config)?;
    Ok((mode, config, tools))
}

/// Extensions, when the runtime's `EXTENSIONS` feature flag is on
/// (`COPILOT_CLI_ENABLED_FEATURE_FLAGS`, comma-separated): run with `node` from `PATH`, user
/// extensions in `$COPILOT_HOME/extensions` (else `~/.copilot/extensions`).
fn extensions_config() -> Option<agentwire::host::ExtensionsConfig> {
    let flags = std::env::var("COPILOT_CLI_ENABLED_FEATURE_FLAGS").unwrap_or_default();
    if !flags
        .split(',')
        .any(|f| f.trim().eq_ignore_ascii_case("EXTENSIONS"))
    {
        return None;
    }
    let home = std::env::var("COPILOT_HOME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::env::var("HOME")
                .ok()
                .filter(|h| !h.is_empty())
                .map(|h| format!("{h}/.copilot"))
        });
    let user_dirs = home
        .map(|h| vec![format!("{}/extensions", h.trim_end_matches('/'))])
        .unwrap_or_default();
    Some(agentwire::host::ExtensionsConfig::new().with_user_dirs(user_dirs))
}

/// Where logs go: stderr, except with `--ui-server` on a terminal, where the UI owns the
/// screen and logs are dropped.
fn log_writer(cli: &Cli) -> tracing_subscriber::fmt::writer::BoxMakeWriter {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    if cli.ui_server && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        BoxMakeWriter::new(std::io::sink)
    } else {
        BoxMakeWriter::new(std::io::stderr)
    }
}

/// A seed from the OS: `RandomState` keys come from the OS's random source; mixed with the
/// time and the process id for good measure.
fn os_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    h.write_u128(nanos);
    h.write_u32(std::process::id());
    h.finish()
}
