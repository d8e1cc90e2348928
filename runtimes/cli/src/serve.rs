//! Serving with the flags' settings, the same on every runtime.

use std::io::Write;
use std::process::ExitCode;

use agentwire::host::HostConfig;
use agentwire::{Dialect, Framing};
use agentwire_cluster::node::ClusterNode;
use agentwire_driver::{Driver, Runtime, ServerOptions, Stopped, WebSocketOptions};
use agentwire_store::Store;
use tracing::{error, info};

/// What to serve on.
pub enum Mode {
    Stdio,
    Tcp {
        host: String,
        port: u16,
        /// Listeners beside the main one.
        extra: ExtraListeners,
    },
}

/// Listeners beside the main TCP one, on the same host address.
#[derive(Default)]
pub struct ExtraListeners {
    /// `--ahp-port`: the Agent Host Protocol over WebSocket.
    pub ahp_port: Option<u16>,
    /// `--acp-port`: ACP (NDJSON) over TCP.
    pub acp_port: Option<u16>,
    /// The connection token AHP clients present at the upgrade (`Authorization: Bearer`).
    pub token: Option<String>,
}

/// Serves `mode` on the runtime `R` (called inside it) until the host shuts down, a signal
/// arrives or, on stdio, the input ends.
pub async fn run<R: Runtime>(
    mode: Mode,
    tools: Option<std::net::TcpListener>,
    config: HostConfig,
    options: ServerOptions,
    store: Option<Store>,
) -> ExitCode {
    let server = match store {
        Some(store) => Driver::<R>::with_store(config, options, store),
        None => Driver::<R>::with_options(config, options),
    };
    serve(server, mode, tools).await
}

/// Serves `mode` as a node of a cluster: the node's session log holds every session.
pub async fn run_cluster<R: Runtime>(
    mode: Mode,
    tools: Option<std::net::TcpListener>,
    config: HostConfig,
    options: ServerOptions,
    node: ClusterNode,
) -> ExitCode {
    info!(node = %node.identity().node, "cluster node");
    let server = Driver::<R>::with_session_log(config, options, node.session_log());
    serve(server, mode, tools).await
}

async fn serve<R: Runtime>(
    server: Driver<R>,
    mode: Mode,
    tools: Option<std::net::TcpListener>,
) -> ExitCode {
    if let Err(e) = server.shutdown_on_signals() {
        error!(error = %e, "cannot handle SIGINT/SIGTERM");
    }
    if let Some(listener) = tools {
        // The client-tools server the ACP agent calls (loopback; bound during set-up, so
        // its URL is in the host's configuration).
        match R::tcp_listener(listener) {
            Ok(listener) => {
                let server = server.clone();
                R::spawn(Box::pin(async move {
                    let (dialect, framing) = (Dialect::ClientTools, Framing::Http);
                    server.serve_tcp_as(listener, dialect, framing).await;
                }));
            }
            Err(e) => error!(error = %e, "cannot serve the client tools to the ACP agent"),
        }
    }
    let stopped = match mode {
        Mode::Stdio => {
            info!("serving on stdio");
            server.serve_stdio().await
        }
        Mode::Tcp { host, port, extra } => {
            let (addr, serving) = match server.bind_tcp((host.as_str(), port)).await {
                Ok(bound) => bound,
                Err(e) => return cannot_listen(&host, port, &e),
            };
            announce("", addr);
            if let Some(port) = extra.acp_port {
                let bound = server
                    .bind_tcp_as((host.as_str(), port), Dialect::Acp, Framing::Ndjson)
                    .await;
                match bound {
                    Ok((addr, serving)) => {
                        R::spawn(Box::pin(async move {
                            serving.await;
                        }));
                        announce("acp: ", addr);
                    }
                    Err(e) => return cannot_listen(&host, port, &e),
                }
            }
            if let Some(port) = extra.ahp_port {
                let options = WebSocketOptions::ahp(extra.token.clone());
                match server.bind_websocket((host.as_str(), port), options).await {
                    Ok((addr, serving)) => {
                        R::spawn(Box::pin(async move {
                            serving.await;
                        }));
                        announce("ahp: ", addr);
                    }
                    Err(e) => return cannot_listen(&host, port, &e),
                }
            }
            serving.await
        }
    };
    match stopped {
        Stopped::Shutdown { reason } => info!(%reason, "shut down"),
        Stopped::Disconnected => info!("connection closed"),
    }
    ExitCode::SUCCESS
}

fn cannot_listen(host: &str, port: u16, e: &std::io::Error) -> ExitCode {
    error!(%host, port, error = %e, "cannot listen");
    eprintln!("error: cannot listen on {host}:{port}: {e}");
    ExitCode::FAILURE
}

/// Prints the port line the SDKs wait for (`prefix` names a listener beside the main one:
/// `ahp: listening on port N`).
fn announce(prefix: &str, addr: std::net::SocketAddr) {
    info!(%addr, listener = prefix.trim_end_matches(": "), "listening");
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{prefix}listening on port {}", addr.port())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        // Nobody reads stdout (the SDK ignores it after the port line); keep serving.
        info!("stdout is closed");
    }
}
