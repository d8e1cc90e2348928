//! An editor's ACP client on one cluster node driving a session owned by another node: node A
//! serves the Copilot SDK over TCP, node B is `agentwire --acp --cluster …` on stdio, as an
//! editor spawns it, driven by the **official ACP Rust SDK** (`agent-client-protocol`); the
//! session is created on A by the **official Copilot Rust SDK**. One real nats-server
//! (`$AGENTWIRE_NATS_SERVER`, or `target/nats/nats-server` installed by `scripts/install-test-servers`).

use crate::support::sdk_scenarios as sdk;

use crate::support::nats;

use crate::support::cluster_node;

use crate::support::acp_stdio;

use std::future::Future;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, LoadSessionRequest, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::Client;
use cluster_node::{app_session, node, LEASE_TTL};
use futures::StreamExt;
use github_copilot_sdk::tool::ToolHandler;
use github_copilot_sdk::types::{ToolInvocation, ToolResult};
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
        assert_eq!(
            cluster_node::prompts(&session_a).await,
            ["hello from the app", "hello from the editor"]
        );
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

/// A client tool whose calls are never answered (each one notifies `asked`).
struct HangingTool {
    asked: Arc<tokio::sync::Notify>,
}

impl ToolHandler for HangingTool {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        _invocation: ToolInvocation,
    ) -> Pin<
        Box<
            dyn Future<Output = Result<ToolResult, github_copilot_sdk::Error>>
                + Send
                + 'async_trait,
        >,
    >
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.asked.notify_one();
        Box::pin(std::future::pending())
    }
}

/// Node A dies while a turn the editor (on node B) prompted waits on a client tool of A's app:
/// B takes the session over and re-attaches the editor. The prompt in flight gets an error
/// naming the reason; the tool call's failure, stored by the new owner while the editor was
/// away, reaches it once (replayed after the last event it had); nothing it had is sent
/// again; its next prompt on the same connection runs.
#[tokio::test]
async fn an_acp_client_whose_owner_dies_mid_turn_is_reattached_and_its_next_prompt_runs() {
    owner_dies_mid_turn(false).await
}

/// The same with a third node C, which may take the session over instead of B (a race: B's
/// lookup or C's sweep): then B re-attaches the editor to C over a new link, and C replays
/// what the editor missed and tells B its positions from then on.
#[tokio::test]
async fn an_acp_client_whose_owner_dies_is_reattached_to_whichever_node_took_the_session() {
    owner_dies_mid_turn(true).await
}

async fn owner_dies_mid_turn(third_node: bool) {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let c = match third_node {
            true => Some(node(&url, "c").await),
            false => None,
        };
        // A's app: a client tool that never answers, every permission approved.
        let app = cluster_node::client(&a).await;
        let id = sdk::new_session_id();
        let asked = Arc::new(tokio::sync::Notify::new());
        let tool = sdk::weather_declaration().with_handler(Arc::new(HangingTool {
            asked: asked.clone(),
        }));
        let config = cluster_node::session_config(&id)
            .with_tools([tool])
            .with_permission_handler(Arc::new(github_copilot_sdk::handler::ApproveAllHandler));
        let app_session = sdk::within("session.create", app.create_session(config))
            .await
            .expect("session.create");
        let first = sdk::turn(&app_session, "hello from the app").await;
        let first_answer = sdk::str_field(&first, "content")
            .expect("an answer")
            .to_owned();

        let (mut b, stderr) = spawn_acp_node(&url, "b");
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let transport = acp_stdio::lines_recorded(&mut b, Some(lines.clone()));
        let updates = Arc::new(Mutex::new(Vec::<SessionNotification>::new()));
        let on_update = updates.clone();
        let seen = updates.clone();
        let session = id.to_string();
        let cwd = std::env::temp_dir();
        let run = Client
            .v1()
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    on_update.lock().unwrap().push(n);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |_: RequestPermissionRequest, responder, _cx| {
                    responder.respond(RequestPermissionResponse::new(
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                            "allow-once",
                        )),
                    ))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx| {
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                cx.send_request(LoadSessionRequest::new(session.clone(), cwd.clone()))
                    .block_task()
                    .await?;
                let loaded = seen.lock().unwrap().len();
                let text = |t: &str| vec![ContentBlock::Text(TextContent::new(t))];
                // Its turn waits on A's app's tool; A is killed there.
                let lost = cx
                    .send_request(PromptRequest::new(
                        session.clone(),
                        text(sdk::WEATHER_PROMPT),
                    ))
                    .block_task()
                    .await;
                let interrupted = seen.lock().unwrap().len();
                // The same connection: the session's new owner runs the next one.
                let next = cx
                    .send_request(PromptRequest::new(session.clone(), text("hello again")))
                    .block_task()
                    .await?;
                Ok((loaded, interrupted, lost, next.stop_reason))
            });
        let run = tokio::spawn(run);
        sdk::within("the tool call at A's app", asked.notified()).await;
        a.child.start_kill().expect("SIGKILL node A");
        a.exit(sdk::STEP).await;
        let ran = tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("the prompts were answered in time")
            .expect("the client task");
        let (loaded, interrupted, lost, stop) = match ran {
            Ok(outcome) => outcome,
            Err(e) => panic!(
                "the ACP client failed: {e:?}\n---- node B ----\n{}",
                stderr.lock().unwrap()
            ),
        };
        // Node B's stderr is read by a thread of its own: give it the lines B wrote before the
        // prompts were answered (bounded) before reading them.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !stderr
            .lock()
            .unwrap()
            .contains("relayed client re-attached")
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let log = stderr.lock().unwrap().clone();
        let error = lost.expect_err("the owner died before the turn ended");
        assert!(
            error.to_string().contains("owning the session")
                && error.to_string().contains("stopped"),
            "{error:?}\n---- node B ----\n{log}"
        );
        assert_eq!(stop, StopReason::EndTurn);
        let all = updates.lock().unwrap().clone();
        let history = &all[..loaded];
        assert_eq!(acp_stdio::user_text(history), "hello from the app");
        assert_eq!(acp_stdio::agent_text(history), first_answer);
        // The tool call started before A died and failed after: each update once.
        let calls: Vec<(String, String)> = all[loaded..]
            .iter()
            .filter_map(|n| match &n.update {
                SessionUpdate::ToolCall(call) => {
                    Some((call.tool_call_id.to_string(), format!("{:?}", call.status)))
                }
                SessionUpdate::ToolCallUpdate(update) => Some((
                    update.tool_call_id.to_string(),
                    format!("{:?}", update.fields.status),
                )),
                _ => None,
            })
            .collect();
        let statuses: Vec<&str> = calls.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(
            statuses,
            ["Pending", "Some(InProgress)", "Some(Failed)"],
            "{calls:?}\n---- node B ----\n{log}"
        );
        assert!(calls.iter().all(|(id, _)| *id == calls[0].0), "{calls:?}");
        // The failure came with the re-attachment, before the next turn's answer.
        let failed_at = all
            .iter()
            .rposition(|n| matches!(&n.update, SessionUpdate::ToolCallUpdate(_)))
            .unwrap();
        let next_turn = &all[interrupted.max(failed_at + 1)..];
        assert!(!acp_stdio::agent_text(next_turn).is_empty(), "{all:?}");
        // Nothing the editor had was sent again.
        let after = &all[loaded..];
        assert_eq!(acp_stdio::user_text(after), "", "{after:?}");
        assert!(!acp_stdio::agent_text(after).contains(&first_answer));
        // The positions the owner told B were B's, not the editor's.
        let written = lines.lock().unwrap().clone();
        assert!(
            written
                .iter()
                .all(|l| !l.contains(agentwire::acp::RELAY_POSITION)),
            "{written:#?}"
        );
        assert!(log.contains("client relayed to the owner node"), "{log}");
        assert!(log.contains("relayed client re-attached"), "{log}");
        // The editor's agent process kept running until the editor left: it still runs, or
        // it ended because its stdin did when the client's connection closed (the end of a
        // stdio server), with success.
        match b.try_wait().expect("try_wait") {
            None => {}
            Some(status) => {
                // Its last lines may still be on their way from the pipe.
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                while !stderr.lock().unwrap().contains("connection closed")
                    && std::time::Instant::now() < deadline
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let log = stderr.lock().unwrap().clone();
                assert!(
                    status.success() && log.contains("connection closed"),
                    "node B ended on its own: {status}\n{log}"
                );
            }
        }
        if let Some(c) = &c {
            let remote = log.contains("to=Remote");
            eprintln!(
                "the session went to {}",
                if remote { "node c" } else { "node b" }
            );
            assert_eq!(
                remote,
                c.stderr().contains("relayed client attached"),
                "{log}"
            );
        }
        drop(b);
        drop(server);
    })
    .await
}

/// The editor's task, ending with its prompt's stop reason.
type EditorTask = tokio::task::JoinHandle<agent_client_protocol::Result<StopReason>>;

/// The editor's task, the updates it received, and a receiver told once it loaded.
type Editor = (
    EditorTask,
    Arc<Mutex<Vec<SessionNotification>>>,
    tokio::sync::oneshot::Receiver<()>,
);

/// An editor (the official ACP Rust SDK) on `transport`: it initializes, loads session `id`
/// (then says so), waits for `go` when given, and prompts `text`; its task ends with the
/// prompt's stop reason.
fn editor_loading_then_prompting(
    transport: acp_stdio::StdioLines,
    id: &github_copilot_sdk::types::SessionId,
    text: &'static str,
    go: Option<tokio::sync::oneshot::Receiver<()>>,
) -> Editor {
    let updates = Arc::new(Mutex::new(Vec::<SessionNotification>::new()));
    let on_update = updates.clone();
    let session = id.to_string();
    let cwd = std::env::temp_dir();
    let (loaded_tx, loaded) = tokio::sync::oneshot::channel();
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
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            cx.send_request(LoadSessionRequest::new(session.clone(), cwd.clone()))
                .block_task()
                .await?;
            let _ = loaded_tx.send(());
            if let Some(go) = go {
                let _ = go.await;
            }
            let prompt = PromptRequest::new(
                session.clone(),
                vec![ContentBlock::Text(TextContent::new(text))],
            );
            Ok(cx.send_request(prompt).block_task().await?.stop_reason)
        });
    (tokio::spawn(run), updates, loaded)
}

/// The stop reason the editor's prompt ended with (30 s at most), or a failure naming the
/// error and node B's log.
async fn stop_reason(run: EditorTask, log_of_b: &dyn Fn() -> String) -> StopReason {
    let stop = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the prompt was answered in time")
        .expect("the client task");
    match stop {
        Ok(stop) => stop,
        Err(e) => panic!(
            "the ACP client failed: {e:?}\n---- node B ----\n{}",
            log_of_b()
        ),
    }
}

/// The editor's relay group from node A breaks (a heartbeat naming a message A never sent is
/// injected, and A says it does not keep it) while an app on A runs a turn: B re-attaches the
/// editor to A over a new link, replaying what follows the last event it had. Whenever the
/// turn's events came (before the break, in the gap, or after), the editor sees each of their
/// updates once, and its next prompt runs.
#[tokio::test]
async fn an_acp_client_whose_link_broke_is_reattached_to_the_same_owner_missing_nothing() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let a = node(&url, "a").await;
        let watcher = async_nats::connect(&url).await.expect("connect to NATS");
        let mut from_owner = watcher
            .subscribe("agentwire.live.grp.>")
            .await
            .expect("subscribe");
        watcher.flush().await.expect("flush");
        let (_client_a, id, session_a, _) = app_session(&a, Some("hello from the app")).await;

        let (mut b, stderr) = spawn_acp_node(&url, "b");
        let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
        let (run, updates, loaded) = editor_loading_then_prompting(
            acp_stdio::lines(&mut b),
            &id,
            "hello from the editor",
            Some(go),
        );
        sdk::within("the session loaded through B", loaded)
            .await
            .expect("loaded");
        let first = sdk::within("a group message from A", from_owner.next())
            .await
            .expect("a message")
            .subject;

        // The break, while the app runs a turn.
        cluster_node::inject_unsent_heartbeat(&watcher, first).await;
        let during = sdk::turn(&session_a, "while the link broke").await;
        let during = sdk::str_field(&during, "content")
            .expect("an answer")
            .to_owned();
        // B is on a new group from A once it re-attached the editor.
        let log_of_b = || stderr.lock().unwrap().clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !log_of_b().contains("relayed client re-attached") {
            assert!(tokio::time::Instant::now() < deadline, "{}", log_of_b());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = go_tx.send(());
        let stop = stop_reason(run, &log_of_b).await;
        assert_eq!(stop, StopReason::EndTurn);
        let all = updates.lock().unwrap().clone();
        assert_eq!(
            acp_stdio::user_text(&all),
            "hello from the appwhile the link broke",
            "{all:?}\n---- node B ----\n{}",
            log_of_b()
        );
        assert_eq!(
            acp_stdio::agent_text(&all).matches(&during).count(),
            1,
            "{all:?}"
        );
        let log = log_of_b();
        assert!(
            log.contains("the relay group from the owner node broke"),
            "{log}"
        );
        assert!(log.contains("no longer keeps them"), "{log}");
        drop(b);
        drop(server);
    })
    .await
}

/// The editor's `session/prompt` is in flight (its turn running on A) when its relay group
/// from A breaks, A alive: B re-attaches the editor to A over a new link naming the prompt,
/// and A answers it there when the turn ends. The editor's prompt ends with `end_turn`, not
/// with an error, and the turn's reply reaches it once.
#[tokio::test]
async fn an_acp_prompt_in_flight_when_the_link_broke_ends_with_its_turn() {
    sdk::bounded(async {
        let _exclusive = crate::support::exclusive().await;
        let server = nats::NatsServer::single();
        let url = server.url();
        let dir = tempfile::tempdir().expect("temp dir");
        // The turn outlasts the receiver's repair deadline (REPAIR_HEARTBEATS heartbeats): the
        // group breaks while the prompt is in flight whether the sender's "not kept" answer
        // comes at once or the deadline ends the repair (with room for a loaded machine's
        // late timers).
        let repair = agentwire_cluster::link_messages::HEARTBEAT
            * (agentwire_cluster::link_messages::REPAIR_HEARTBEATS + 4);
        let sleep_ms = u64::try_from(repair.as_millis()).expect("milliseconds");
        let scenario = cluster_node::slow_scenario_taking(dir.path(), sleep_ms);
        let a = cluster_node::node_with_args(&url, "a", &["--scenario", &scenario]).await;
        let watcher = async_nats::connect(&url).await.expect("connect to NATS");
        let mut from_owner = watcher
            .subscribe("agentwire.live.grp.>")
            .await
            .expect("subscribe");
        watcher.flush().await.expect("flush");
        let (_client_a, id, session_a, _) = app_session(&a, None).await;

        let (mut b, stderr) = spawn_acp_node(&url, "b");
        let (run, updates, loaded) =
            editor_loading_then_prompting(acp_stdio::lines(&mut b), &id, "Answer slowly", None);
        sdk::within("the session loaded through B", loaded)
            .await
            .expect("loaded");
        let first = sdk::within("a group message from A", from_owner.next())
            .await
            .expect("a message")
            .subject;
        // The editor's turn runs on A; then its group breaks.
        cluster_node::until_prompted(&session_a, "slowly").await;
        cluster_node::inject_unsent_heartbeat(&watcher, first).await;

        let log_of_b = || stderr.lock().unwrap().clone();
        let stop = stop_reason(run, &log_of_b).await;
        assert_eq!(stop, StopReason::EndTurn);
        let all = updates.lock().unwrap().clone();
        assert_eq!(
            acp_stdio::agent_text(&all).matches("Done slowly.").count(),
            1,
            "{all:?}"
        );
        let log = log_of_b();
        assert!(log.contains("relayed client re-attached"), "{log}");
        assert!(
            log.contains("the relay group from the owner node broke"),
            "{log}"
        );
        drop(b);
        drop(server);
    })
    .await
}
