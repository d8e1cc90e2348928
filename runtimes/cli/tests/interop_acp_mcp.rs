//! The official ACP Rust SDK (`agent-client-protocol`) drives `agentwire --acp` (stdio) with an
//! MCP server in `session/new`'s `mcpServers`: the unmodified reference server
//! `@modelcontextprotocol/server-everything` (installed by `.ci/run`). A scenario step calls a
//! tool that is not read-only: the client gets `session/request_permission`, allows it, and the
//! server's answer ends the turn; a read-only tool runs without a prompt.

#[path = "../../../tests/support/mcp_servers.rs"]
mod mcp_servers;

#[path = "support/acp_stdio.rs"]
mod acp_stdio;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, McpServer, McpServerStdio, NewSessionRequest, PromptRequest,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::Client;

const LIMIT: Duration = Duration::from_secs(30);

const SCENARIO: &str = r#"{
  "rules": [
    { "match": "sum", "steps": [ { "mcp": "everything/get-sum", "arguments": { "a": 40, "b": 2 } },
                                 { "say": "{result}" } ] },
    { "match": "toggle", "steps": [ { "mcp": "everything/toggle-simulated-logging" },
                                    { "say": "{result}" } ] }
  ],
  "default": [ { "say": "You said: {prompt}" } ]
}"#;

fn agent_text(updates: &[SessionNotification]) -> String {
    updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_acp_session_calls_mcp_tools_with_and_without_a_permission_request() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.json");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let pidfile = dir.path().join("mcp.pid");
    let (command, args) = mcp_servers::everything_command(&pidfile);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .args(["--acp", "--no-store", "--seed", "7", "--scenario"])
        .arg(&scenario)
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agentwire --acp");
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
        text = agent_text(&updates.lock().unwrap());
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
