//! The official ACP Rust SDK (`agent-client-protocol`) drives `agentwire --acp` with a server
//! default provider (`--model-base-url`, `--model`) pointing at the fake OpenAI-compatible
//! endpoint on loopback: the model's answer streams as agent message chunks and the prompt
//! ends with `end_turn`; the request carries the prompt.

use crate::support::fake_model;

use crate::support::acp_stdio;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, SessionNotification,
    SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::Client;
use fake_model::{FakeMode, FakeModel};

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_server_default_model_answers_an_acp_prompt() {
    let fake = FakeModel::start(FakeMode::Text);
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .args([
            "--acp",
            "--no-store",
            "--seed",
            "7",
            "--model",
            "fake-model",
        ])
        .arg("--model-base-url")
        .arg(fake.base_url())
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agentwire --acp");
    let transport = acp_stdio::lines(&mut child);
    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let on_update = updates.clone();
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
        .connect_with(transport, async |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let new = cx
                .send_request(NewSessionRequest::new(cwd))
                .block_task()
                .await?;
            let prompt = vec![ContentBlock::Text(TextContent::new("What is the weather?"))];
            let response = cx
                .send_request(PromptRequest::new(new.session_id.clone(), prompt))
                .block_task()
                .await?;
            Ok(response.stop_reason)
        });
    let stop = tokio::time::timeout(LIMIT, run)
        .await
        .expect("the client finished in time")
        .expect("no protocol error");
    assert_eq!(stop, StopReason::EndTurn);
    // Notifications sent before the response may still be in the SDK's hands briefly.
    let mut text = String::new();
    for _ in 0..200 {
        text = updates
            .lock()
            .unwrap()
            .iter()
            .filter_map(|n| match &n.update {
                SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        if text == "It is sunny in Paris." {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(text, "It is sunny in Paris.");
    let bodies = fake.completion_bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["model"], "fake-model");
    let user = bodies[0]["messages"][1]["content"].as_str().unwrap();
    assert!(user.ends_with("What is the weather?"), "{user}");
    let _ = child.kill().await;
}
