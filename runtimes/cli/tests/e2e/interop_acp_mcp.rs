//! The official ACP Rust SDK (`agent-client-protocol`) drives `agentwire --acp` (stdio) with an
//! MCP server in `session/new`'s `mcpServers`: the unmodified reference server
//! `@modelcontextprotocol/server-everything` (installed by `scripts/install-test-servers`). A scenario step calls a
//! tool that is not read-only: the client gets `session/request_permission`, allows it, and the
//! server's answer ends the turn; a read-only tool runs without a prompt. Killing the server
//! mid-call fails that tool call with a reason, the turn ends and the session carries on;
//! `session/delete` ends the server's process.

use crate::support::mcp_servers;

use crate::support::acp_stdio;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, DeleteSessionRequest, InitializeRequest, McpServer, McpServerStdio,
    NewSessionRequest, PromptRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionNotification, SessionUpdate,
    StopReason, TextContent, ToolCallStatus,
};
use agent_client_protocol::Client;

const LIMIT: Duration = Duration::from_secs(30);

const SCENARIO: &str = r#"{
  "rules": [
    { "match": "sum", "steps": [ { "mcp": "everything/get-sum", "arguments": { "a": 40, "b": 2 } },
                                 { "say": "{result}" } ] },
    { "match": "toggle", "steps": [ { "mcp": "everything/toggle-simulated-logging" },
                                    { "say": "{result}" } ] },
    { "match": "slow", "steps": [ { "mcp": "everything/trigger-long-running-operation",
                                    "arguments": { "duration": 60, "steps": 60 } },
                                  { "say": "after: {result}" } ] }
  ],
  "default": [ { "say": "You said: {prompt}" } ]
}"#;

#[tokio::test]
async fn an_acp_session_calls_mcp_tools_with_and_without_a_permission_request() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("mcp.pid");
    let (command, args) = mcp_servers::everything_command(&pidfile);
    let mut child = acp_stdio::spawn_scripted(dir.path(), SCENARIO);
    let transport = acp_stdio::lines(&mut child);
    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let permissions: Arc<Mutex<Vec<RequestPermissionRequest>>> = Arc::default();
    let on_update = updates.clone();
    let on_permission = permissions.clone();
    let cwd = dir.path().to_path_buf();
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
            async move |request: RequestPermissionRequest, responder, _cx| {
                on_permission.lock().unwrap().push(request);
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                        "allow-once",
                    )),
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let server = McpServer::Stdio(McpServerStdio::new("everything", command).args(args));
            let new = cx
                .send_request(NewSessionRequest::new(cwd).mcp_servers(vec![server]))
                .block_task()
                .await?;
            let mut stops = Vec::new();
            for prompt in ["sum please", "toggle logging"] {
                let prompt = vec![ContentBlock::Text(TextContent::new(prompt))];
                let response = cx
                    .send_request(PromptRequest::new(new.session_id.clone(), prompt))
                    .block_task()
                    .await?;
                stops.push(response.stop_reason);
            }
            Ok(stops)
        });
    let stops = tokio::time::timeout(LIMIT, run)
        .await
        .expect("the client finished in time")
        .expect("no protocol error");
    assert_eq!(stops, [StopReason::EndTurn, StopReason::EndTurn]);
    let mut text = String::new();
    for _ in 0..200 {
        text = acp_stdio::agent_text(&updates.lock().unwrap());
        if text.contains("logging") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        text.starts_with("The sum of 40 and 2 is 42."),
        "the read-only tool's answer first: {text:?}"
    );
    assert!(
        text.contains("logging"),
        "then the toggle's answer: {text:?}"
    );
    let asked = permissions.lock().unwrap().clone();
    assert_eq!(
        asked.len(),
        1,
        "one permission request (toggle), none for get-sum"
    );
    let title = asked[0].tool_call.fields.title.clone().unwrap_or_default();
    assert!(title.contains("toggle-simulated-logging"), "{title:?}");
    let pid = mcp_servers::read_pid(&pidfile);
    assert!(mcp_servers::alive(pid));
    let _ = child.kill().await;
    let _ = child.wait().await;
    // The agent died without a chance to kill the server; the server sees its stdin end.
    assert!(
        mcp_servers::gone(pid).await,
        "the MCP server (pid {pid}) outlived its agent"
    );
}

/// The statuses and failure texts of the tool-call updates seen so far.
fn failed_tool_calls(updates: &[SessionNotification]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) if u.fields.status == Some(ToolCallStatus::Failed) => {
                Some(serde_json::to_string(u).unwrap_or_default())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn killing_the_mcp_server_mid_call_fails_the_acp_tool_call_and_delete_ends_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("mcp.pid");
    let (command, args) = mcp_servers::everything_command(&pidfile);
    // A second session with a server of its own, deleted while that server runs.
    let doomed_pidfile = dir.path().join("doomed.pid");
    let (doomed_command, doomed_args) = mcp_servers::everything_command(&doomed_pidfile);
    let mut child = acp_stdio::spawn_scripted(dir.path(), SCENARIO);
    let transport = acp_stdio::lines(&mut child);
    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let on_update = updates.clone();
    let doomed_cwd = dir.path().to_path_buf();
    let doomed_pids = doomed_pidfile.clone();
    let watched = updates.clone();
    let cwd = dir.path().to_path_buf();
    let pidfile_for_kill = pidfile.clone();
    let run = Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                on_update.lock().unwrap().push(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let server = McpServer::Stdio(McpServerStdio::new("everything", command).args(args));
            let new = cx
                .send_request(NewSessionRequest::new(cwd).mcp_servers(vec![server]))
                .block_task()
                .await?;
            // Kill the server once the long call is under way (its tool call was announced).
            let killer = tokio::spawn(async move {
                loop {
                    let started = watched
                        .lock()
                        .unwrap()
                        .iter()
                        .any(|n| matches!(n.update, SessionUpdate::ToolCall(_)));
                    if started && pidfile_for_kill.exists() {
                        let pid = mcp_servers::read_pid(&pidfile_for_kill);
                        mcp_servers::kill(pid);
                        return pid;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            });
            let slow = vec![ContentBlock::Text(TextContent::new("slow one"))];
            let first = cx
                .send_request(PromptRequest::new(new.session_id.clone(), slow))
                .block_task()
                .await?;
            let killed = killer.await.expect("the killer ran");
            let hello = vec![ContentBlock::Text(TextContent::new("hello"))];
            let second = cx
                .send_request(PromptRequest::new(new.session_id.clone(), hello))
                .block_task()
                .await?;
            let doomed_server = McpServer::Stdio(
                McpServerStdio::new("everything", doomed_command).args(doomed_args),
            );
            let doomed = cx
                .send_request(NewSessionRequest::new(doomed_cwd).mcp_servers(vec![doomed_server]))
                .block_task()
                .await?;
            // A read-only call: the server is up once it answers.
            let sum = vec![ContentBlock::Text(TextContent::new("sum please"))];
            cx.send_request(PromptRequest::new(doomed.session_id.clone(), sum))
                .block_task()
                .await?;
            let doomed_pid = mcp_servers::read_pid(&doomed_pids);
            let alive_before_delete = mcp_servers::alive(doomed_pid);
            cx.send_request(DeleteSessionRequest::new(doomed.session_id.clone()))
                .block_task()
                .await?;
            // Checked while the connection (and so agentwire) is still up: at the end of the
            // connection agentwire exits and every server goes with it.
            let gone_after_delete = mcp_servers::gone(doomed_pid).await;
            Ok((
                first.stop_reason,
                second.stop_reason,
                killed,
                doomed_pid,
                alive_before_delete,
                gone_after_delete,
            ))
        });
    let (first, second, killed, doomed_pid, alive_before_delete, gone_after_delete) =
        tokio::time::timeout(LIMIT, run)
            .await
            .expect("the client finished in time")
            .expect("no protocol error");
    assert_eq!((first, second), (StopReason::EndTurn, StopReason::EndTurn));
    let seen = updates.lock().unwrap().clone();
    let failed = failed_tool_calls(&seen);
    assert_eq!(failed.len(), 1, "the killed call failed: {failed:?}");
    assert!(
        failed[0].contains("killed") || failed[0].contains("exited"),
        "the failure says why: {}",
        failed[0]
    );
    let text = acp_stdio::agent_text(&seen);
    assert!(text.contains("after: "), "the turn went on: {text:?}");
    assert!(
        text.contains("You said: hello"),
        "the session carries on: {text:?}"
    );
    assert!(mcp_servers::gone(killed).await);
    assert!(
        alive_before_delete,
        "the second session's server was running"
    );
    assert!(
        gone_after_delete,
        "session/delete left the MCP server (pid {doomed_pid}) running"
    );
    let _ = child.kill().await;
}
