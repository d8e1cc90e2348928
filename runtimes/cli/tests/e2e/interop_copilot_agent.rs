//! The official **GitHub Copilot CLI** as the ACP agent behind agentwire's sessions
//! (`--acp-agent "copilot --acp --stdio"`, the npm package `@github/copilot` that
//! `scripts/install-test-servers` installs, unmodified), offline with a BYOK provider pointed at
//! the project's fake model endpoint, and the **official Copilot Rust SDK** as the client: the
//! real runtime's agent, driven through agentwire's host, seen by an SDK app.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::support::copilot_cli::{copilot_cli, offline_env};
use crate::support::fake_model::{FakeMode, FakeModel, FakeReply};
use crate::support::sdk_scenarios::{
    self, assert_subsequence, create_session_with, new_session_id, types, Setup,
};
use crate::support::{exclusive, sdk_client, sdk_turn};

const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// The host, killed on drop (its stderr is printed when a test fails).
struct Host {
    child: Child,
    port: u16,
    stderr: Arc<Mutex<String>>,
    _home: tempfile::TempDir,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if std::thread::panicking() {
            eprintln!("---- host stderr ----\n{}", self.stderr.lock().unwrap());
        }
    }
}

/// `agentwire --headless --port 0 --acp-agent "'COPILOT' --acp --stdio"`, its environment (which
/// the agent inherits) running the Copilot CLI offline on the fake model.
async fn host(fake: &FakeModel) -> Host {
    let home = tempfile::tempdir().expect("a home for the host and the agent");
    let agent = format!("'{}' --acp --stdio", copilot_cli().display());
    let mut command = Command::new(BIN);
    command
        .args(["--headless", "--port", "0", "--acp-agent", agent.as_str()])
        .envs(offline_env(&fake.base_url(), "fake-model", home.path()))
        .env("RUST_LOG", "info")
        .current_dir(home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("spawn agentwire");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut err_lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let sink = stderr.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = err_lines.next_line().await {
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.split("listening on port ").nth(1) {
                return rest.trim().parse::<u16>().expect("a port");
            }
        }
        panic!("agentwire exited before listening");
    })
    .await
    .expect("the port line");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Host {
        child,
        port,
        stderr,
        _home: home,
    }
}

async fn client(host: &Host) -> github_copilot_sdk::Client {
    sdk_client(host.port).await
}

#[tokio::test]
async fn an_sdk_turn_runs_on_the_copilot_cli_and_a_second_client_sees_it() {
    sdk_scenarios::bounded(async {
        let _exclusive = exclusive().await;
        let fake = FakeModel::start(FakeMode::Text);
        let host = host(&fake).await;
        let a = client(&host).await;
        let b = client(&host).await;
        let id = new_session_id();
        let mut first = create_session_with(&a, &id, Setup::default()).await;
        let prepared = b
            .prepare_resume_session(github_copilot_sdk::ResumeSessionConfig::new(id.clone()))
            .expect("prepare_resume_session");
        let mut second = sdk_scenarios::Recorder::new(prepared.subscribe());
        let _joined = sdk_scenarios::within("session.resume", prepared.start())
            .await
            .expect("the second client joins the session");
        let (reply, events, seen) = sdk_turn(&mut first, "What is the weather?").await;
        assert_eq!(reply.data["content"], "It is sunny in Paris.", "{seen:#?}");
        assert_subsequence(
            &events,
            &[
                "user.message",
                "assistant.turn_start",
                "assistant.message",
                "session.idle",
            ],
        );
        // The Copilot CLI called the fake model (its own request, not agentwire's model loop).
        assert!(
            !fake.completion_bodies().is_empty(),
            "the agent asked the model"
        );
        // The second client, on the same session, saw the same answer.
        let other = second.wait_for("assistant.message").await;
        assert_eq!(
            other.id,
            reply.id,
            "both clients see one assistant.message: {:?}",
            types(&events)
        );
    })
    .await
}

#[tokio::test]
async fn the_copilot_cli_views_a_file_and_runs_a_command_the_sdk_client_allowed() {
    sdk_scenarios::bounded(async {
        let _exclusive = exclusive().await;
        let files = tempfile::tempdir().expect("a directory with a file");
        let notes = files.path().join("notes.txt");
        std::fs::write(&notes, "the notes say: agentwire-notes-42\n").expect("write the file");
        let fake = FakeModel::start_script(vec![
            FakeReply::tool(
                "call_1",
                "view",
                serde_json::json!({"path": notes.display().to_string()}),
            ),
            FakeReply::tool(
                "call_2",
                "bash",
                serde_json::json!({"command": "echo agentwire-was-here", "description": "Say hi"}),
            ),
            FakeReply::Text("The command said hi.".into()),
        ]);
        let host = host(&fake).await;
        let a = client(&host).await;
        let id = new_session_id();
        let mut c = create_session_with(&a, &id, Setup::default()).await;
        let (reply, events, seen) = sdk_turn(&mut c, "Read my notes, then run a command").await;
        assert_eq!(reply.data["content"], "The command said hi.", "{seen:#?}");
        // Both tools ran as the agent's tool calls, each announced and completed.
        let completed: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e.event_type == "tool.execution_complete")
            .map(|e| &e.data["success"])
            .collect();
        assert_eq!(
            completed,
            [&serde_json::json!(true), &serde_json::json!(true)],
            "{seen:#?}"
        );
        // The command was asked of the SDK client first (the read too, when the CLI asks:
        // the file is outside the session's directory).
        let asked: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e.event_type == "permission.requested")
            .map(|e| &e.data["permissionRequest"]["kind"])
            .collect();
        assert!(asked.contains(&&serde_json::json!("shell")), "{seen:#?}");
        assert_eq!(c.permissions.lock().unwrap().len(), asked.len());
        assert_subsequence(
            &events,
            &[
                "tool.execution_start",
                "tool.execution_complete",
                "tool.execution_start",
                "permission.requested",
                "permission.completed",
                "tool.execution_complete",
                "assistant.message",
            ],
        );
        // The file's content and the command's output went back to the model.
        let bodies = fake.completion_bodies();
        let calls: Vec<String> = bodies.iter().map(|b| b.to_string()).collect();
        assert!(calls.len() >= 3, "three model calls: {}", calls.len());
        assert!(
            calls[1].contains("agentwire-notes-42"),
            "the view result reached the model"
        );
        assert!(
            calls[2].contains("agentwire-was-here"),
            "the command's output reached the model"
        );
    })
    .await
}

#[tokio::test]
async fn an_sdk_abort_cancels_the_copilot_clis_turn() {
    sdk_scenarios::bounded(async {
        let _exclusive = exclusive().await;
        // The model sends its first delta, then nothing: the turn runs until it is aborted.
        let fake = FakeModel::start(FakeMode::Stall);
        let host = host(&fake).await;
        let a = client(&host).await;
        let id = new_session_id();
        let mut c = create_session_with(&a, &id, Setup::default()).await;
        sdk_scenarios::within(
            "send",
            c.session.send(github_copilot_sdk::MessageOptions::new(
                "Tell me a long story",
            )),
        )
        .await
        .expect("send");
        c.events.wait_for("assistant.turn_start").await;
        // Wait until the agent is really waiting on the model.
        for _ in 0..100 {
            if !fake.completion_bodies().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sdk_scenarios::within("abort", c.session.abort())
            .await
            .expect("session.abort");
        let abort = c.events.wait_for("abort").await;
        assert_eq!(abort.data["reason"], "user_initiated");
        let idle = c.events.wait_for("session.idle").await;
        assert_eq!(idle.data["aborted"], true);
        // The session takes the next prompt.
        fake.set_mode(FakeMode::Text);
        let reply = sdk_scenarios::within(
            "send_and_wait",
            c.session
                .send_and_wait(github_copilot_sdk::MessageOptions::new("Again, briefly")),
        )
        .await
        .expect("the next turn ends")
        .expect("an answer");
        assert_eq!(reply.data["content"], "It is sunny in Paris.");
    })
    .await
}
