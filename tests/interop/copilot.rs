//! Interop with the **official Copilot Rust SDK** (`github-copilot-sdk`, unmodified), in-process:
//! the SDK's `Client::from_streams` on one end of a `tokio::io::duplex` pipe, the other end
//! served by `agentwire_tokio::Server` running the built-in scripted agent.
//!
//! The same scenarios run against the real `agentwire` binary over TCP and stdio in
//! `runtimes/cli/tests/e2e/interop_sdk_process.rs` (where `CARGO_BIN_EXE_agentwire` exists).
//! See /work/notes/SDK.md for why the SDK cannot spawn or dial the server itself with
//! `default-features = false` (no `runtime` feature, so `Client::start` is unavailable).

use crate::support::sdk_scenarios;

use std::path::PathBuf;

use crate::support::{connect, PIPE};
use agentwire_tokio::agentwire::agent::Scenario;
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use github_copilot_sdk::Client;

fn server() -> Server {
    Server::new(HostConfig::default())
}

#[tokio::test]
async fn handshake() {
    sdk_scenarios::bounded(async {
        let server = server();
        let (client_end, server_end) = tokio::io::duplex(PIPE);
        let (r, w) = tokio::io::split(server_end);
        server.attach(r, w);
        let (r, w) = tokio::io::split(client_end);
        let client = Client::from_streams(r, w, PathBuf::from("/tmp")).expect("from_streams");
        sdk_scenarios::scenario_handshake(&client).await;
    })
    .await
}

#[tokio::test]
async fn plain_turn() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_plain_turn(&client).await;
    })
    .await
}

#[tokio::test]
async fn tool_turn() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_tool_turn(&client).await;
    })
    .await
}

#[tokio::test]
async fn streaming_turn() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_streaming(&client).await;
    })
    .await
}

#[tokio::test]
async fn list_and_metadata() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_list_and_metadata(&client).await;
    })
    .await
}

#[tokio::test]
async fn resume_from_second_client() {
    sdk_scenarios::bounded(async {
        let server = server();
        let a = connect(&server).await;
        let b = connect(&server).await;
        sdk_scenarios::scenario_resume_shared(&a, &b).await;
    })
    .await
}

#[tokio::test]
async fn detach_and_delete() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_detach_delete(&client).await;
    })
    .await
}

#[tokio::test]
async fn send_correlation() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_send_correlation(&client).await;
    })
    .await
}

#[tokio::test]
async fn concurrent_sends() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_concurrent_sends(&client).await;
    })
    .await
}

#[tokio::test]
async fn permission_denied() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_permission_denied(&client).await;
    })
    .await
}

#[tokio::test]
async fn tool_on_joined_client() {
    sdk_scenarios::bounded(async {
        let server = server();
        let a = connect(&server).await;
        let b = connect(&server).await;
        sdk_scenarios::scenario_tool_on_joined_client(&a, &b).await;
    })
    .await
}

#[tokio::test]
async fn elicitation() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_elicitation(&client).await;
    })
    .await
}

#[tokio::test]
async fn elicitation_via_joined_client() {
    sdk_scenarios::bounded(async {
        let server = server();
        let a = connect(&server).await;
        let b = connect(&server).await;
        sdk_scenarios::scenario_elicitation_via_joined_client(&a, &b).await;
    })
    .await
}

#[tokio::test]
async fn slash_command() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        sdk_scenarios::scenario_command(&client).await;
    })
    .await
}

#[tokio::test]
async fn abort_turn() {
    sdk_scenarios::bounded(async {
        let scenario = Scenario::from_json(sdk_scenarios::SLOW_SCENARIO).expect("valid scenario");
        let server = Server::new(HostConfig::with_scenario(scenario));
        let client = connect(&server).await;
        sdk_scenarios::scenario_abort(&client).await;
    })
    .await
}

/// `client.stop()` on a `from_streams` client detaches every live session (and, owning no
/// process, sends no `runtime.shutdown`); an explicit `runtime.shutdown` then stops the server.
#[tokio::test]
async fn stop_and_runtime_shutdown() {
    sdk_scenarios::bounded(async {
        let server = server();
        let shutdown = {
            let server = server.clone();
            tokio::spawn(async move { server.shutdown_requested().await })
        };
        let client = connect(&server).await;
        let id = sdk_scenarios::new_session_id();
        let c = sdk_scenarios::create_session(&client, &id, false).await;
        sdk_scenarios::turn(&c.session, "hi").await;
        // stop() detaches the still-registered session; the host must answer success:true.
        sdk_scenarios::within("client.stop", client.stop())
            .await
            .expect("client.stop: every session.detach succeeded");
        assert!(
            !shutdown.is_finished(),
            "stop() of a from_streams client must not shut the host down"
        );
        // The session survives the detach.
        let other = connect(&server).await;
        let meta = sdk_scenarios::within("getMetadata", other.get_session_metadata(&id))
            .await
            .expect("getMetadata");
        assert!(meta.is_some(), "a detached session is kept");
        sdk_scenarios::within("runtime.shutdown", other.rpc().runtime().shutdown())
            .await
            .expect("runtime.shutdown answers");
        sdk_scenarios::within("server shutdown", shutdown)
            .await
            .expect("shutdown task");
    })
    .await
}
