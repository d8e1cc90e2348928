//! Sessions run by an ACP agent (`--acp-agent`), with real processes on both sides: the host is
//! the real `agentwire` binary serving the **official Copilot Rust SDK** over TCP, and the agent
//! is a second real `agentwire` process in `--acp` mode (its scripted agent), which the host
//! starts from the `--acp-agent` command line and speaks ACP to as its client.
//!
//! What the SDK sees must read as any agentwire session: the scripted agent's answer streams
//! back through the host's translation of the agent's `session/update`s, and the agent's
//! permission request reaches the SDK's permission handler as `permission.requested`.

use std::time::Duration;

use crate::support::sdk_scenarios::{
    self, assert_subsequence, create_session_with, new_session_id, types, Setup,
};
use crate::support::{sdk_client, sdk_turn, Agentwire};

const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// The host: `agentwire --headless --port 0 --acp-agent "'BIN' --acp"`.
async fn host() -> Agentwire {
    let agent = format!("'{BIN}' --acp");
    Agentwire::launch(["--headless", "--port", "0", "--acp-agent", agent.as_str()]).await
}

/// The host, with `agentwire --acp` playing `scenario` (JSON) as the agent; `extra` flags go to
/// the host. The scenario file lives in `dir`.
async fn host_with_scenario(dir: &std::path::Path, scenario: &str, extra: &[&str]) -> Agentwire {
    let path = dir.join("scenario.json");
    std::fs::write(&path, scenario).expect("write the scenario");
    let agent = format!("'{BIN}' --acp --scenario '{}'", path.display());
    let mut args = vec!["--headless", "--port", "0"];
    args.extend_from_slice(extra);
    args.extend(["--acp-agent", agent.as_str()]);
    Agentwire::launch(args).await
}

/// A scenario for the agent: "read file PATH" reads behind a permission prompt and says what
/// it read. The agent reads through its ACP client's `fs/read_text_file` (the host serves it
/// the session's files); the scripted `result` is what it would say without a client.
const READ_SCENARIO: &str = r#"{"rules": [{"match": "read file",
    "steps": [{"read_file": "{path}", "result": "(no client read)"}, {"say": "It says: {result}"}]}],
  "default": [{"say": "You said: {prompt}"}]}"#;

async fn client(host: &Agentwire) -> github_copilot_sdk::Client {
    sdk_client(host.addr().port()).await
}

#[tokio::test]
async fn an_sdk_turn_runs_on_the_acp_agent() {
    sdk_scenarios::bounded(async {
        let host = host().await;
        let client = client(&host).await;
        // The scripted agent behind ACP answers "You said: …"; everything the scenario checks
        // (the envelope chain, originatingMessageId, history) holds for the translated turn.
        sdk_scenarios::scenario_plain_turn(&client).await;
    })
    .await
}

#[tokio::test]
async fn a_streaming_client_gets_the_agents_chunks_as_deltas() {
    sdk_scenarios::bounded(async {
        let host = host().await;
        let client = client(&host).await;
        sdk_scenarios::scenario_streaming(&client).await;
    })
    .await
}

#[tokio::test]
async fn the_agents_permission_request_is_answered_by_the_sdk_client() {
    sdk_scenarios::bounded(async {
        let dir = tempfile::tempdir().expect("a scenario directory");
        let host = host_with_scenario(dir.path(), READ_SCENARIO, &[]).await;
        let client = client(&host).await;
        let id = new_session_id();
        let work = tempfile::tempdir().expect("a working directory");
        let notes = work.path().join("notes.txt");
        std::fs::write(&notes, "the notes say hi").expect("write the notes");
        let setup = Setup {
            working_directory: Some(work.path().to_owned()),
            ..Setup::default()
        };
        let mut c = create_session_with(&client, &id, setup).await;
        // The "read file PATH" rule runs the agent's built-in view tool behind a `read`
        // permission prompt, which the agent sends to its ACP client (the host); then it
        // reads the file through the host (`fs/read_text_file`: in the session's directory,
        // no second prompt).
        let prompt = format!("read file {}", notes.display());
        let (reply, events, _) = sdk_turn(&mut c, &prompt).await;
        let idx = assert_subsequence(
            &events,
            &[
                "user.message",
                "tool.execution_start",
                "permission.requested",
                "permission.completed",
                "tool.execution_complete",
                "assistant.message",
                "session.idle",
            ],
        );
        let asked = &events[idx[2]].data["permissionRequest"];
        assert_eq!(asked["kind"], "read", "the agent's read tool: {asked}");
        assert_eq!(asked["acp"]["kind"], "read");
        assert_eq!(events[idx[3]].data["result"]["kind"], "approved");
        assert_eq!(events[idx[4]].data["success"], true);
        let permissions = c.permissions.lock().unwrap().clone();
        assert_eq!(
            permissions.len(),
            1,
            "the SDK's handler was asked once: {permissions:?}"
        );
        assert_eq!(
            events[idx[1]].data["toolCallId"], events[idx[3]].data["toolCallId"],
            "the prompt names the agent's tool call"
        );
        assert_eq!(reply.data["content"], "It says: the notes say hi");
        assert_eq!(
            events[idx[4]].data["result"]["content"],
            "the notes say hi",
            "the agent's tool result: {:?}",
            types(&events)
        );
    })
    .await
}

#[tokio::test]
async fn an_agent_that_cannot_start_fails_the_turn_with_the_reason() {
    sdk_scenarios::bounded(async {
        let host = Agentwire::launch([
            "--headless",
            "--port",
            "0",
            "--acp-agent",
            "/nonexistent/acp-agent --acp",
        ])
        .await;
        let client = client(&host).await;
        let id = new_session_id();
        let mut c = create_session_with(&client, &id, Setup::default()).await;
        let _ = sdk_scenarios::within(
            "send",
            c.session
                .send(github_copilot_sdk::MessageOptions::new("hello")),
        )
        .await;
        let error = c.events.wait_for("session.error").await;
        let message = error.data["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains("could not be started") || message.contains("exited"),
            "the reason names the agent process: {message}"
        );
        c.events.wait_for("session.idle").await;
        // The host is still serving.
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(client.list_sessions(None).await.is_ok());
    })
    .await
}

/// A scenario for the agent: "weather" calls tool `get_weather` of its MCP server
/// `client-tools` (the server the host offers in `session/new`) and says what it returned.
const CLIENT_TOOL_SCENARIO: &str = r#"{"rules": [{"match": "weather",
    "steps": [{"mcp": "client-tools/get_weather", "arguments": {"city": "Paris"}},
              {"say": "The tool said: {result}"}]}],
  "default": [{"say": "You said: {prompt}"}]}"#;

#[tokio::test]
async fn the_sdk_clients_own_tool_is_called_through_the_agent() {
    sdk_scenarios::bounded(async {
        let dir = tempfile::tempdir().expect("a scenario directory");
        let host = host_with_scenario(dir.path(), CLIENT_TOOL_SCENARIO, &[]).await;
        let client = client(&host).await;
        let id = new_session_id();
        // The SDK declares `get_weather` with a handler that answers TOOL_REPLY.
        let mut c = create_session_with(&client, &id, Setup::default()).await;
        let (reply, events, _) = sdk_turn(&mut c, "what is the weather in Paris?").await;
        let idx = assert_subsequence(
            &events,
            &[
                "user.message",
                "tool.execution_start",
                "permission.requested",
                "permission.completed",
                "external_tool.requested",
                "external_tool.completed",
                "tool.execution_complete",
                "assistant.message",
                "session.idle",
            ],
        );
        // The agent's own tool call is the MCP tool, asked of the SDK's permission handler.
        let asked = &events[idx[2]].data["permissionRequest"];
        assert_eq!(asked["toolName"], "client-tools-get_weather", "{asked}");
        assert_eq!(
            asked["args"],
            serde_json::json!({"city": "Paris"}),
            "{asked}"
        );
        let requested = &events[idx[4]].data;
        assert_eq!(requested["toolName"], "get_weather");
        assert_eq!(requested["arguments"], serde_json::json!({"city": "Paris"}));
        let calls = c.tool_calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1, "the SDK's tool handler ran once: {calls:?}");
        assert_eq!(calls[0].tool_name, "get_weather");
        assert_eq!(calls[0].arguments, serde_json::json!({"city": "Paris"}));
        assert_eq!(
            events[idx[6]].data["success"], true,
            "{:?}",
            events[idx[6]].data
        );
        assert_eq!(
            reply.data["content"],
            format!("The tool said: {}", sdk_scenarios::TOOL_REPLY),
            "the tool's answer reached the agent: {:?}",
            types(&events)
        );
    })
    .await
}

#[tokio::test]
async fn the_sessions_own_mcp_servers_are_passed_down_to_the_agent() {
    use github_copilot_sdk::types::{McpServerConfig, McpStdioServerConfig};
    sdk_scenarios::bounded(async {
        let dir = tempfile::tempdir().expect("a scenario directory");
        let scenario = r#"{"rules": [{"match": "echo",
            "steps": [{"mcp": "everything/echo", "arguments": {"message": "passed down"}},
                      {"say": "The server said: {result}"}]}],
          "default": [{"say": "You said: {prompt}"}]}"#;
        // `--allow-mcp-spawn`: the SDK's TCP connection may configure a stdio server.
        let host = host_with_scenario(dir.path(), scenario, &["--allow-mcp-spawn"]).await;
        let client = client(&host).await;
        let (command, args) =
            crate::support::mcp_servers::everything_command(&dir.path().join("pid"));
        let server = McpServerConfig::Stdio(McpStdioServerConfig {
            command,
            args,
            ..Default::default()
        });
        let setup = Setup {
            mcp_servers: vec![("everything".to_owned(), server)],
            ..Setup::default()
        };
        let mut c = create_session_with(&client, &new_session_id(), setup).await;
        // The agent knows the server only from the host's `session/new`.
        let (reply, events, _) = sdk_turn(&mut c, "echo something").await;
        assert_eq!(
            reply.data["content"],
            "The server said: Echo: passed down",
            "{:?}",
            types(&events)
        );
    })
    .await
}

/// The agent writes a file in the session's directory and reads one outside it: the host
/// performs both on the session's files, the outside read only after a `path` prompt the SDK
/// answered.
#[tokio::test]
async fn the_host_serves_the_agents_file_reads_and_writes() {
    sdk_scenarios::bounded(async {
        let dir = tempfile::tempdir().expect("a scenario directory");
        let work = tempfile::tempdir().expect("a working directory");
        let outside = tempfile::tempdir().expect("a directory outside the session's");
        let secret = outside.path().join("elsewhere.txt");
        std::fs::write(&secret, "from outside").expect("write the outside file");
        let written = work.path().join("out/new.txt");
        let scenario = serde_json::json!({"rules": [
            {"match": "write", "steps": [
                {"write_file": written.display().to_string(), "content": "made by the agent",
                 "result": "(no client write)"},
                {"say": "Wrote: {result}"}]},
            {"match": "outside", "steps": [
                {"read_file": secret.display().to_string(), "result": "(no client read)"},
                {"say": "Read: {result}"}]}],
            "default": [{"say": "You said: {prompt}"}]});
        let host = host_with_scenario(dir.path(), &scenario.to_string(), &[]).await;
        let client = client(&host).await;
        let setup = Setup {
            working_directory: Some(work.path().to_owned()),
            ..Setup::default()
        };
        let mut c = create_session_with(&client, &new_session_id(), setup).await;

        let (_, events, _) = sdk_turn(&mut c, "write it").await;
        assert_eq!(
            std::fs::read_to_string(&written).expect("the host wrote the file"),
            "made by the agent",
            "{:?}",
            types(&events)
        );
        let asked_before = c.permissions.lock().unwrap().len();

        let (reply, events, _) = sdk_turn(&mut c, "read outside").await;
        assert_eq!(
            reply.data["content"],
            "Read: from outside",
            "{:?}",
            types(&events)
        );
        let permissions = c.permissions.lock().unwrap().clone();
        let kinds: Vec<&serde_json::Value> = permissions[asked_before..]
            .iter()
            .map(|(_, data)| &data["permissionRequest"]["kind"])
            .collect();
        assert_eq!(
            kinds,
            ["read", "path"],
            "the agent's own prompt, then the host's for a path outside the session's"
        );
        let path_prompt = &permissions.last().unwrap().1["permissionRequest"];
        assert_eq!(path_prompt["path"], secret.display().to_string());
        assert_eq!(path_prompt["accessKind"], "read");
    })
    .await
}

/// The agent runs a command through the host's terminals (`terminal/create`, wait, output,
/// release): the host runs it in the session's directory and the agent reads its output.
#[tokio::test]
async fn the_host_runs_the_agents_commands_in_its_terminals() {
    sdk_scenarios::bounded(async {
        let dir = tempfile::tempdir().expect("a scenario directory");
        let work = tempfile::tempdir().expect("a working directory");
        std::fs::write(work.path().join("marker.txt"), "").expect("a marker file");
        let scenario = serde_json::json!({"rules": [
            {"match": "run", "steps": [
                {"shell": "ls; echo done", "result": "(no client terminal)"},
                {"say": "Ran: {result}"}]}],
            "default": [{"say": "You said: {prompt}"}]});
        let host = host_with_scenario(dir.path(), &scenario.to_string(), &[]).await;
        let client = client(&host).await;
        let setup = Setup {
            working_directory: Some(work.path().to_owned()),
            ..Setup::default()
        };
        let mut c = create_session_with(&client, &new_session_id(), setup).await;
        let (reply, events, _) = sdk_turn(&mut c, "run it").await;
        let content = reply.data["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            content.starts_with("Ran: ")
                && content.contains("marker.txt")
                && content.contains("done"),
            "the command ran in the session's directory and its output came back: {content:?} {:?}",
            types(&events)
        );
        let kinds: Vec<serde_json::Value> = c
            .permissions
            .lock()
            .unwrap()
            .iter()
            .map(|(_, data)| data["permissionRequest"]["kind"].clone())
            .collect();
        assert_eq!(kinds, ["shell"], "the agent's own prompt for its command");
    })
    .await
}

/// A restarted host loads the agent session its log records: the agent (agentwire `--acp`
/// with its own store) goes on with the same session, and nothing it replays while loading
/// is added to the session's history.
#[tokio::test]
async fn a_restarted_host_loads_the_agent_session_its_log_records() {
    use github_copilot_sdk::ResumeSessionConfig;
    sdk_scenarios::bounded(async {
        let host_data = tempfile::tempdir().expect("the host's data directory");
        let agent_data = tempfile::tempdir().expect("the agent's data directory");
        let agent = format!("'{BIN}' --acp --data-dir '{}'", agent_data.path().display());
        let args = [
            "--headless",
            "--port",
            "0",
            "--data-dir",
            host_data.path().to_str().expect("a UTF-8 path"),
            "--acp-agent",
            agent.as_str(),
        ];
        let mut host = Agentwire::launch(args).await;
        let first = client(&host).await;
        let id = new_session_id();
        let mut c = create_session_with(&first, &id, Setup::default()).await;
        let (reply, _, _) = sdk_turn(&mut c, "hello").await;
        assert_eq!(reply.data["content"], "You said: hello");
        sdk_scenarios::within("runtime.shutdown", first.rpc().runtime().shutdown())
            .await
            .expect("runtime.shutdown");
        host.exit(Duration::from_secs(20)).await;
        drop(first);

        let host = Agentwire::launch(args).await;
        let second = client(&host).await;
        let session = sdk_scenarios::within(
            "session.resume",
            second.resume_session(ResumeSessionConfig::new(id.clone())),
        )
        .await
        .expect("resume the stored session");
        let reply = sdk_scenarios::turn(&session, "again").await;
        assert_eq!(reply.data["content"], "You said: again");
        let history = sdk_scenarios::within("getMessages", session.get_events())
            .await
            .expect("getMessages");
        let recorded: Vec<&serde_json::Value> = history
            .iter()
            .filter(|e| e.event_type == "session.info")
            .filter(|e| e.data["infoType"] == agentwire::agent::acp::AGENT_SESSION_INFO)
            .map(|e| &e.data["agentSessionId"])
            .collect();
        assert_eq!(
            recorded.len(),
            1,
            "the agent session was loaded, not replaced: {recorded:?}"
        );
        let users = history
            .iter()
            .filter(|e| e.event_type == "user.message")
            .count();
        assert_eq!(users, 2, "{:?}", types(&history));
    })
    .await
}

/// The agent's `elicitation/create` goes through the elicitation bridge: the SDK client's
/// elicitation handler fills the form and its answer is the agent's.
#[tokio::test]
async fn the_agents_form_is_filled_by_the_sdk_clients_elicitation_handler() {
    use github_copilot_sdk::SessionConfig;
    use std::sync::{Arc, Mutex};
    sdk_scenarios::bounded(async {
        let dir = tempfile::tempdir().expect("a scenario directory");
        let scenario = serde_json::json!({"rules": [
            {"match": "ask", "steps": [
                {"ask": "Deploy now?", "schema": {"type": "object",
                    "properties": {"confirmed": {"type": "boolean"}}}},
                {"say": "Answered: {answer}"}]}],
            "default": [{"say": "You said: {prompt}"}]});
        let host = host_with_scenario(dir.path(), &scenario.to_string(), &[]).await;
        let client = client(&host).await;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let prepared = client
            .prepare_session(
                SessionConfig::default()
                    .with_session_id(new_session_id())
                    .with_elicitation_handler(Arc::new(sdk_scenarios::RecordingElicitation {
                        requests: requests.clone(),
                    })),
            )
            .expect("prepare_session");
        let session = sdk_scenarios::within("session.create", prepared.start())
            .await
            .expect("session.create");
        let reply = sdk_scenarios::turn(&session, "ask me").await;
        let seen = requests.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "the handler ran once");
        assert_eq!(seen[0].message, "Deploy now?");
        let content = reply.data["content"].as_str().unwrap_or_default();
        assert!(
            content.starts_with("Answered: ")
                && content.contains("accept")
                && content.contains("confirmed"),
            "the handler's answer reached the agent: {content}"
        );
    })
    .await
}
