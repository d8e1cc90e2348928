//! An editor's ACP client on one cluster node driving a session owned by another node: node A
//! serves the Copilot SDK over TCP, node B is `agentwire --acp --cluster …` on stdio, as an
//! editor spawns it, driven by the **official ACP Rust SDK** (`agent-client-protocol`); the
//! session is created on A by the **official Copilot Rust SDK**. One real nats-server
//! (`$AGENTWIRE_NATS_SERVER`, or `target/nats/nats-server` installed by `.ci/run`).

#[path = "../../../tests/sdk_scenarios/mod.rs"]
mod sdk;

#[path = "../../tokio/tests/common/mod.rs"]
mod common;
#[path = "support/agentwire.rs"]
mod support;

#[allow(dead_code)]
#[path = "../../cluster/tests/support/server.rs"]
mod nats;

#[allow(dead_code)]
#[path = "support/cluster_node.rs"]
mod cluster_node;

#[path = "support/acp_stdio.rs"]
mod acp_stdio;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, LoadSessionRequest, PromptRequest, SessionNotification,
    StopReason, TextContent,
};
use agent_client_protocol::Client;
use cluster_node::{app_session, node, LEASE_TTL};
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn an_acp_client_of_node_b_loads_and_prompts_a_session_owned_by_node_a() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let a = node(&url, "a").await;

        // A Copilot SDK app creates the session on A and runs a turn.
        let (_client_a, id, session_a, first) = app_session(&a, Some("hello from the app")).await;
        let first = first.expect("the turn's answer");
        let first_answer = sdk::str_field(&first, "content")
            .expect("an answer")
            .to_owned();

        // The editor spawns node B as its ACP agent.
        let (mut b, stderr) = spawn_acp_node(&url, "b");
        let transport: acp_stdio::StdioLines = acp_stdio::lines(&mut b);
        let updates = Arc::new(Mutex::new(Vec::<SessionNotification>::new()));
        let on_update = updates.clone();
        let session = id.to_string();
        let cwd = std::env::temp_dir();
        let seen = updates.clone();
        let run = Client
            .v1()
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    on_update.lock().unwrap().push(n);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(transport, async move |cx| {
                let init = cx
                    .send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                assert!(init.agent_capabilities.load_session);
                // The session lives on A: B relays the client there, and A replays its
                // history to it as `session/update`s.
                cx.send_request(LoadSessionRequest::new(session.clone(), cwd.clone()))
                    .block_task()
                    .await?;
                let replayed = seen.lock().unwrap().clone();
                assert_eq!(acp_stdio::user_text(&replayed), "hello from the app");
                assert_eq!(acp_stdio::agent_text(&replayed), first_answer);
                // A prompt from the editor runs on A.
                let prompt = PromptRequest::new(
                    session.clone(),
                    vec![ContentBlock::Text(TextContent::new(
                        "hello from the editor",
                    ))],
                );
                let done = cx.send_request(prompt).block_task().await?;
                assert_eq!(done.stop_reason, StopReason::EndTurn);
                Ok(seen.lock().unwrap().len() - replayed.len())
            });
        let ran = tokio::time::timeout(Duration::from_secs(30), run).await;
        let new_updates = match ran {
            Ok(Ok(n)) => n,
            other => panic!(
                "the ACP client failed: {other:?}\n---- node B ----\n{}\n---- node A ----\n{}",
                stderr.lock().unwrap(),
                a.stderr()
            ),
        };
        let all = updates.lock().unwrap().clone();
        let live = &all[all.len() - new_updates..];
        assert!(
            !acp_stdio::agent_text(live).is_empty(),
            "the editor saw the answer: {live:?}"
        );

        // The app on A sees the editor's turn: it ran there, in the same session.
        let history = sdk::within("getMessages on A", session_a.get_events())
            .await
            .expect("getMessages");
        let prompts: Vec<&str> = history
            .iter()
            .filter(|e| e.event_type == "user.message")
            .filter_map(|e| e.data["content"].as_str())
            .collect();
        assert_eq!(prompts, ["hello from the app", "hello from the editor"]);
        let log = stderr.lock().unwrap().clone();
        assert!(log.contains("client relayed to the owner node"), "{log}");
        drop(b);
        drop(server);
    })
    .await
}

/// `agentwire --acp --cluster URL --node-id ID` on stdio, as an editor spawns its agent; its
/// stderr is collected.
fn spawn_acp_node(url: &str, id: &str) -> (tokio::process::Child, Arc<Mutex<String>>) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .args(["--acp", "--cluster", url, "--node-id", id])
        .args(["--cluster-lease-ttl", LEASE_TTL, "--seed", "7"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agentwire --acp --cluster");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let log = stderr.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let mut log = log.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    (child, stderr)
}

#[tokio::test]
async fn an_acp_client_whose_owner_dies_gets_its_prompt_answered_with_the_reason() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let (_client_a, id, _session_a, _) = app_session(&a, Some("hello from the app")).await;

        let (mut b, stderr) = spawn_acp_node(&url, "b");
        let transport: acp_stdio::StdioLines = acp_stdio::lines(&mut b);
        let session = id.to_string();
        let cwd = std::env::temp_dir();
        let killed = Arc::new(tokio::sync::Notify::new());
        let kill = killed.clone();
        let run = Client.v1().connect_with(transport, async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            cx.send_request(LoadSessionRequest::new(session.clone(), cwd.clone()))
                .block_task()
                .await?;
            // A is killed; the editor's next prompt goes to it and is never answered there.
            kill.notify_one();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let prompt = PromptRequest::new(
                session.clone(),
                vec![ContentBlock::Text(TextContent::new("anyone there?"))],
            );
            Ok(cx.send_request(prompt).block_task().await)
        });
        let run = tokio::spawn(run);
        sdk::within("the session loaded through B", killed.notified()).await;
        a.child.start_kill().expect("SIGKILL node A");
        a.exit(sdk::STEP).await;
        let answered = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .expect("the prompt was answered in time")
            .expect("the client task")
            .expect("the client ran");
        let error = answered.expect_err("no turn ran: the owner is dead");
        assert!(
            error.to_string().contains("owning the session")
                && error.to_string().contains("stopped"),
            "{error:?}\n---- node B ----\n{}",
            stderr.lock().unwrap()
        );
        // The editor's agent ends the connection with the reason (stdio: it exits).
        let status = tokio::time::timeout(Duration::from_secs(20), b.wait())
            .await
            .expect("node B ended the connection")
            .expect("wait");
        assert!(status.success(), "{status:?}");
        let log = stderr.lock().unwrap().clone();
        assert!(log.contains("client relayed to the owner node"), "{log}");
        drop(server);
    })
    .await
}
