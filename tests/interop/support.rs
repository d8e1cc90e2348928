//! The `interop` tier's set-up: official-SDK clients connected in-process to an
//! `agentwire_tokio::Server` (one end of a `tokio::io::duplex` pipe each), and the helpers the
//! tier shares with other crates' tiers (from `agentwire-testkit`).
#![allow(dead_code)]

use std::path::PathBuf;

use agentwire_tokio::Server;
use github_copilot_sdk::Client;
use tokio::io::DuplexStream;

pub use agentwire_testkit::{fake_model, mcp_servers, sdk_scenarios};

/// Duplex buffer per direction; small enough to exercise back-pressure, big enough for a frame.
pub const PIPE: usize = 64 * 1024;

/// A client connected in-process to `server`, handshake done.
pub async fn connect(server: &Server) -> Client {
    let (client_end, server_end) = tokio::io::duplex(PIPE);
    handshake(server, client_end, server_end).await
}

/// Like [`connect`], but the bytes flow through a relay task; aborting the returned handle
/// (or [`cut`]) cuts the connection (the host sees EOF), whatever the SDK is doing.
pub async fn connect_cuttable(server: &Server) -> (Client, tokio::task::JoinHandle<()>) {
    let (client_end, mut relay_a) = tokio::io::duplex(PIPE);
    let (mut relay_b, server_end) = tokio::io::duplex(PIPE);
    let relay = tokio::spawn(async move {
        let _ = tokio::io::copy_bidirectional(&mut relay_a, &mut relay_b).await;
    });
    (handshake(server, client_end, server_end).await, relay)
}

/// Cuts a connection made by [`connect_cuttable`] and waits until the relay is gone.
pub async fn cut(relay: tokio::task::JoinHandle<()>) {
    relay.abort();
    let _ = relay.await;
}

/// Serves `server_end`, builds the SDK client on `client_end` and runs its handshake.
async fn handshake(server: &Server, client_end: DuplexStream, server_end: DuplexStream) -> Client {
    let (server_read, server_write) = tokio::io::split(server_end);
    server.attach(server_read, server_write);
    let (client_read, client_write) = tokio::io::split(client_end);
    let client = Client::from_streams(client_read, client_write, PathBuf::from("/tmp"))
        .expect("Client::from_streams");
    sdk_scenarios::within("connect", client.verify_protocol_version())
        .await
        .expect("connect handshake");
    client
}
