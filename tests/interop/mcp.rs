//! MCP servers through the **official Copilot Rust SDK** (`github-copilot-sdk`, unmodified) with
//! a real, unmodified MCP server: `@modelcontextprotocol/server-everything` over stdio
//! (installed by `scripts/install-test-servers`; see `support/mcp_servers.rs`). The session's `mcpServers` start
//! the server; scenario steps `{"mcp": "everything/TOOL"}` call its tools.

use crate::support::fake_model;
use crate::support::mcp_servers;
use crate::support::sdk_scenarios;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::support::connect;
use agentwire_tokio::agentwire::host::{HostConfig, McpSpawnPolicy};
use agentwire_tokio::agentwire::Scenario;
use agentwire_tokio::Server;
use github_copilot_sdk::handler::ElicitationHandler;
use github_copilot_sdk::rpc::RegisterEventInterestParams;
use github_copilot_sdk::types::{
    ElicitationRequest, ElicitationResult, McpHttpServerConfig, McpServerConfig,
    McpStdioServerConfig, MessageOptions, RequestId, SessionConfig, SessionEvent, SessionId,
};
use github_copilot_sdk::IndexMap;
use sdk_scenarios::{bounded, within, Recorder, RecordingPermission, TURN};
use serde_json::Value;

const SCENARIO: &str = r#"{
  "rules": [
    { "match": "sum", "steps": [ { "mcp": "everything/get-sum", "arguments": { "a": 2, "b": 3 } },
                                 { "say": "{result}" } ] },
    { "match": "toggle", "steps": [ { "mcp": "everything/toggle-simulated-logging" },
                                    { "say": "{result}" } ] },
    { "match": "elicit", "steps": [ { "mcp": "everything/trigger-elicitation-request" },
                                    { "say": "{result}" } ] },
    { "match": "sample", "steps": [ { "mcp": "everything/trigger-sampling-request",
                                      "arguments": { "prompt": "ping", "maxTokens": 10 } },
                                    { "say": "{result}" } ] },
    { "match": "fast add", "steps": [ { "mcp": "fast/add", "arguments": { "a": 2, "b": 40 } },
                                      { "say": "{result}" } ] },
    { "match": "fast shout", "steps": [ { "mcp": "fast/shout", "arguments": { "text": "hi" } },
                                        { "say": "{result}" } ] },
    { "match": "fast clock", "steps": [ { "mcp": "fast/clock" }, { "say": "{result}" } ] },
    { "match": "fast fail", "steps": [ { "mcp": "fast/fail", "arguments": { "reason": "nope" } },
                                       { "say": "failed: {result}" } ] },
    { "match": "slow", "steps": [ { "mcp": "everything/trigger-long-running-operation",
                                    "arguments": { "duration": 60, "steps": 60 } },
                                  { "say": "after: {result}" } ] }
  ],
  "default": [ { "say": "You said: {prompt}" } ]
}"#;

fn server(policy: McpSpawnPolicy) -> Server {
    let scenario = Scenario::from_json(SCENARIO).expect("scenario");
    Server::new(HostConfig::with_scenario(scenario).with_mcp_spawn(policy))
}

struct McpSession {
    session: github_copilot_sdk::session::Session,
    events: Recorder,
    permissions: Arc<Mutex<Vec<(String, Value)>>>,
    pidfile: PathBuf,
}

fn pidfile(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "agentwire-mcp-{}-{tag}-{}",
        std::process::id(),
        sdk_scenarios::new_session_id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join("pid")
}

/// A session on the fake model endpoint (BYOK, `fake-model`).
fn model_config(fake: &fake_model::FakeModel) -> SessionConfig {
    SessionConfig::default()
        .with_session_id(sdk_scenarios::new_session_id())
        .with_model("fake-model")
        .with_provider(
            github_copilot_sdk::types::ProviderConfig::new(fake.base_url())
                .with_provider_type("openai")
                .with_api_key("sk-test"),
        )
}

/// The FastMCP server (`tests/fixtures/fastmcp_server.py`) as the session's `fast` server.
fn fast_servers() -> IndexMap<String, McpServerConfig> {
    let (command, args, env) = mcp_servers::fastmcp_command();
    let mut servers = IndexMap::new();
    servers.insert(
        "fast".to_owned(),
        McpServerConfig::Stdio(McpStdioServerConfig {
            command,
            args,
            env: env.into_iter().collect(),
            ..Default::default()
        }),
    );
    servers
}

fn everything_servers(pidfile: &std::path::Path) -> IndexMap<String, McpServerConfig> {
    let (command, args) = mcp_servers::everything_command(pidfile);
    let mut servers = IndexMap::new();
    servers.insert(
        "everything".to_owned(),
        McpServerConfig::Stdio(McpStdioServerConfig {
            command,
            args,
            ..Default::default()
        }),
    );
    servers
}

/// Answers every elicitation with `accept` and a name, recording the requests.
struct NameElicitation(Arc<Mutex<Vec<ElicitationRequest>>>);

impl ElicitationHandler for NameElicitation {
    fn handle<'life0, 'async_trait>(
        &'life0 self,
        _session_id: SessionId,
        _request_id: RequestId,
        request: ElicitationRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ElicitationResult> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.0.lock().unwrap().push(request);
        Box::pin(async {
            ElicitationResult {
                action: "accept".into(),
                content: Some(serde_json::json!({"name": "Ada Lovelace"})),
            }
        })
    }
}

async fn mcp_session(client: &github_copilot_sdk::Client, tag: &str) -> McpSession {
    mcp_session_with(client, tag, None).await
}

async fn mcp_session_with(
    client: &github_copilot_sdk::Client,
    tag: &str,
    elicitation: Option<Arc<Mutex<Vec<ElicitationRequest>>>>,
) -> McpSession {
    let pidfile = pidfile(tag);
    let mut config = SessionConfig::default()
        .with_session_id(sdk_scenarios::new_session_id())
        .with_model("fake-model")
        .with_mcp_servers(everything_servers(&pidfile));
    if let Some(requests) = elicitation {
        config = config.with_elicitation_handler(Arc::new(NameElicitation(requests)));
    }
    start_recorded(client, config, pidfile).await
}

/// Creates the session of `config` with a permission handler that records every request.
async fn start_recorded(
    client: &github_copilot_sdk::Client,
    config: SessionConfig,
    pidfile: PathBuf,
) -> McpSession {
    let permissions = Arc::new(Mutex::new(Vec::new()));
    let config = config.with_permission_handler(Arc::new(RecordingPermission {
        requests: permissions.clone(),
        reject: None,
    }));
    let prepared = client.prepare_session(config).expect("prepare_session");
    let events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create");
    McpSession {
        session,
        events,
        permissions,
        pidfile,
    }
}

fn data_str<'a>(ev: &'a SessionEvent, key: &str) -> &'a str {
    ev.data.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Runs a turn and returns the assistant message that ends it.
async fn turn(s: &mut McpSession, prompt: &str) -> SessionEvent {
    within(
        prompt,
        s.session
            .send_and_wait(MessageOptions::new(prompt).with_wait_timeout(TURN)),
    )
    .await
    .expect("the turn completes")
    .expect("an assistant message")
}

#[tokio::test]
async fn servers_load_and_tools_run_with_and_without_a_permission_prompt() {
    bounded(async {
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let mut s = mcp_session(&client, "tools").await;
        let loaded = s.events.wait_for("session.mcp_servers_loaded").await;
        assert_eq!(loaded.ephemeral, Some(true));
        let servers = loaded.data["servers"].as_array().expect("servers");
        assert_eq!(servers.len(), 1);
        assert_eq!(servers[0]["name"], "everything");
        assert_eq!(servers[0]["status"], "connected", "{servers:?}");
        assert_eq!(servers[0]["transport"], "stdio");

        // get-sum is annotated readOnlyHint: no prompt; its text result reaches the turn.
        let reply = turn(&mut s, "sum please").await;
        assert_eq!(data_str(&reply, "content"), "The sum of 2 and 3 is 5.");
        assert!(
            s.permissions.lock().unwrap().is_empty(),
            "no prompt for a read-only tool"
        );
        let start = s.events.wait_for("tool.execution_start").await;
        assert_eq!(data_str(&start, "mcpServerName"), "everything");
        assert_eq!(data_str(&start, "mcpToolName"), "get-sum");
        assert_eq!(data_str(&start, "toolName"), "everything-get-sum");
        let done = s.events.wait_for("tool.execution_complete").await;
        assert_eq!(done.data["success"], true);
        assert_eq!(done.data["result"]["contents"][0]["type"], "text");

        // toggle-simulated-logging is not read-only: a permission prompt of kind `mcp` first.
        let reply = turn(&mut s, "toggle logging").await;
        let text = data_str(&reply, "content");
        assert!(text.contains("logging"), "the tool's answer: {text:?}");
        let prompts = s.permissions.lock().unwrap().clone();
        assert_eq!(prompts.len(), 1, "one prompt: {prompts:?}");
        let request = &prompts[0].1;
        let request = request.get("permissionRequest").unwrap_or(request);
        assert_eq!(request["kind"], "mcp", "{request}");
        assert_eq!(request["serverName"], "everything");
        assert_eq!(request["toolName"], "toggle-simulated-logging");
        assert_eq!(request["readOnly"], false);
        assert!(request["toolTitle"].is_string());
        s.events.wait_for("permission.completed").await;
        let done = s.events.wait_for("tool.execution_complete").await;
        assert_eq!(done.data["success"], true, "{:?}", done.data);

        // session.delete stops the server: its process is gone.
        let pid = mcp_servers::read_pid(&s.pidfile);
        assert!(mcp_servers::alive(pid));
        within("delete", client.delete_session(s.session.id()))
            .await
            .expect("session.delete");
        assert!(
            mcp_servers::gone(pid).await,
            "the MCP server (pid {pid}) outlived session.delete"
        );
    })
    .await;
}

#[tokio::test]
async fn killing_the_server_mid_call_fails_the_call_with_a_reason_and_the_turn_ends() {
    bounded(async {
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let mut s = mcp_session(&client, "kill").await;
        s.events.wait_for("session.mcp_servers_loaded").await;
        within("send", s.session.send(MessageOptions::new("slow one")))
            .await
            .expect("session.send");
        let start = s.events.wait_for("tool.execution_start").await;
        assert_eq!(
            data_str(&start, "mcpToolName"),
            "trigger-long-running-operation"
        );
        let pid = mcp_servers::read_pid(&s.pidfile);
        mcp_servers::kill(pid);
        let done = s.events.wait_for("tool.execution_complete").await;
        assert_eq!(done.data["success"], false, "{:?}", done.data);
        let message = done.data["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("killed") || message.contains("exited"),
            "the failure says why: {message:?}"
        );
        let reply = s.events.wait_for("assistant.message").await;
        assert!(data_str(&reply, "content").starts_with("after: "));
        s.events.wait_for("session.idle").await;
        let status = s
            .events
            .seen
            .iter()
            .rfind(|e| e.event_type == "session.mcp_server_status_changed")
            .expect("a status change");
        assert_eq!(status.data["status"], "failed");
        assert_eq!(status.data["serverName"], "everything");
        // The session carries on.
        let reply = turn(&mut s, "hello").await;
        assert_eq!(data_str(&reply, "content"), "You said: hello");
    })
    .await;
}

#[tokio::test]
async fn a_connection_that_may_not_spawn_gets_a_clear_error() {
    bounded(async {
        let server = server(McpSpawnPolicy::TokenHolders);
        let client = connect(&server).await;
        let pidfile = pidfile("refused");
        let config = SessionConfig::default()
            .with_session_id(sdk_scenarios::new_session_id())
            .with_mcp_servers(everything_servers(&pidfile));
        let err = within("session.create", client.create_session(config))
            .await
            .err()
            .expect("session.create is refused");
        let text = err.to_string();
        assert!(text.contains("stdio MCP servers"), "{text}");
        assert!(!pidfile.exists(), "nothing was started");
    })
    .await;
}

#[tokio::test]
async fn a_server_elicitation_reaches_the_client_and_its_answer_returns() {
    bounded(async {
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let mut s = mcp_session_with(&client, "elicit", Some(requests.clone())).await;
        s.events.wait_for("session.mcp_servers_loaded").await;
        let reply = turn(&mut s, "elicit now").await;
        let text = data_str(&reply, "content");
        assert!(
            text.contains("Name: Ada Lovelace"),
            "the server got the answer: {text:?}"
        );
        let requests = requests.lock().unwrap().clone();
        assert_eq!(requests.len(), 1);
        assert_eq!(
            requests[0].elicitation_source.as_deref(),
            Some("everything")
        );
        let schema = requests[0].requested_schema.as_ref().expect("a form");
        assert!(schema["properties"]["name"].is_object(), "{schema}");
        let requested = s.events.wait_for("elicitation.requested").await;
        assert_eq!(requested.data["mode"], "form");
        assert_eq!(requested.data["elicitationSource"], "everything");
        let completed = s.events.wait_for("elicitation.completed").await;
        assert_eq!(completed.data["action"], "accept");
    })
    .await;
}

#[tokio::test]
async fn a_server_sampling_request_reaches_an_interested_client_and_its_answer_returns() {
    bounded(async {
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let mut s = mcp_session(&client, "sample").await;
        s.events.wait_for("session.mcp_servers_loaded").await;

        // Nobody is interested: the server gets an error with the reason, the call fails.
        let reply = turn(&mut s, "sample without interest").await;
        let text = data_str(&reply, "content");
        assert!(text.contains("sampling is not available"), "{text:?}");

        let handle = within(
            "registerInterest",
            s.session
                .rpc()
                .event_log()
                .register_interest(RegisterEventInterestParams {
                    event_type: "sampling.requested".into(),
                }),
        )
        .await
        .expect("registerInterest")
        .handle;
        assert!(!handle.is_empty());
        within("send", s.session.send(MessageOptions::new("sample again")))
            .await
            .expect("session.send");
        let requested = s.events.wait_for("sampling.requested").await;
        assert_eq!(requested.data["serverName"], "everything");
        assert!(!requested.data["mcpRequestId"].is_null());
        let prompt = requested.data["request"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            prompt.contains("ping"),
            "the server's request: {}",
            requested.data
        );
        let request_id = requested.data["requestId"].as_str().unwrap().to_owned();
        let answered = within(
            "handlePendingSampling",
            client.call(
                "session.ui.handlePendingSampling",
                Some(serde_json::json!({
                    "sessionId": s.session.id().to_string(),
                    "requestId": request_id,
                    "response": {"role": "assistant", "model": "fake-model",
                                 "stopReason": "endTurn",
                                 "content": {"type": "text", "text": "pong from the client"}},
                })),
            ),
        )
        .await
        .expect("handlePendingSampling");
        assert_eq!(answered["success"], true);
        let reply = s.events.wait_for("assistant.message").await;
        let text = data_str(&reply, "content");
        assert!(
            text.contains("pong from the client"),
            "the server got the answer: {text:?}"
        );
        s.events.wait_for("session.idle").await;
        assert!(s
            .events
            .seen
            .iter()
            .any(|e| e.event_type == "sampling.completed"));
    })
    .await;
}

#[tokio::test]
async fn session_mcp_methods_list_stop_and_start_servers_and_the_user_config_applies() {
    bounded(async {
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let mut s = mcp_session(&client, "methods").await;
        s.events.wait_for("session.mcp_servers_loaded").await;
        let id = s.session.id().to_string();
        let call = |method: &'static str, params: Value| {
            let client = client.clone();
            async move { within(method, client.call(method, Some(params))).await }
        };
        let list = call("session.mcp.list", serde_json::json!({"sessionId": id}))
            .await
            .unwrap();
        assert_eq!(list["servers"][0]["status"], "connected", "{list}");
        let tools = call(
            "session.mcp.listTools",
            serde_json::json!({"sessionId": id, "serverName": "everything"}),
        )
        .await
        .unwrap();
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(
            names.contains(&"get-sum") && names.contains(&"echo"),
            "{names:?}"
        );

        let diagnosis = call(
            "session.mcp.apps.diagnose",
            serde_json::json!({"sessionId": id, "serverName": "everything"}),
        )
        .await
        .unwrap();
        assert_eq!(diagnosis["server"]["connected"], true, "{diagnosis}");
        assert_eq!(diagnosis["server"]["toolCount"], names.len());
        assert_eq!(diagnosis["server"]["toolsWithUiMeta"], 0);

        let pid = mcp_servers::read_pid(&s.pidfile);
        call(
            "session.mcp.stopServer",
            serde_json::json!({"sessionId": id, "serverName": "everything"}),
        )
        .await
        .unwrap();
        assert!(mcp_servers::gone(pid).await, "stopServer kills the process");
        let running = call(
            "session.mcp.isServerRunning",
            serde_json::json!({"sessionId": id, "serverName": "everything"}),
        )
        .await
        .unwrap();
        assert_eq!(running["running"], false);
        // A call now fails with a reason; the turn ends.
        let reply = turn(&mut s, "sum again").await;
        assert!(
            data_str(&reply, "content").contains("not configured"),
            "{:?}",
            reply.data
        );

        // The user configuration: a new session starts its servers.
        let (command, args) = mcp_servers::everything_command(&pidfile("user"));
        call(
            "mcp.config.add",
            serde_json::json!({"name": "user-everything",
                               "config": {"type": "stdio", "command": command, "args": args}}),
        )
        .await
        .unwrap();
        let listed = call("mcp.config.list", serde_json::json!({}))
            .await
            .unwrap();
        assert!(listed["servers"]["user-everything"].is_object(), "{listed}");
        let discovered = call("mcp.discover", serde_json::json!({})).await.unwrap();
        assert_eq!(discovered["servers"][0]["name"], "user-everything");
        let config = SessionConfig::default().with_session_id(sdk_scenarios::new_session_id());
        let prepared = client.prepare_session(config).expect("prepare");
        let mut events = Recorder::new(prepared.subscribe());
        let _second = within("session.create", prepared.start()).await.unwrap();
        let loaded = events.wait_for("session.mcp_servers_loaded").await;
        assert_eq!(loaded.data["servers"][0]["name"], "user-everything");
        assert_eq!(loaded.data["servers"][0]["status"], "connected");
        // Turned off, the configuration stays listed and new sessions do not start it.
        call(
            "mcp.config.disable",
            serde_json::json!({"names": ["user-everything"]}),
        )
        .await
        .unwrap();
        let third_id = sdk_scenarios::new_session_id();
        let config = SessionConfig::default().with_session_id(third_id.clone());
        let prepared = client.prepare_session(config).expect("prepare");
        let _third = within("session.create", prepared.start()).await.unwrap();
        let servers = call(
            "session.mcp.list",
            serde_json::json!({"sessionId": third_id.to_string()}),
        )
        .await
        .unwrap();
        assert_eq!(servers["servers"], serde_json::json!([]), "{servers}");
        let listed = call("mcp.config.list", serde_json::json!({}))
            .await
            .unwrap();
        assert!(listed["servers"]["user-everything"].is_object(), "{listed}");
        call(
            "mcp.config.enable",
            serde_json::json!({"names": ["user-everything"]}),
        )
        .await
        .unwrap();
        assert!(call(
            "mcp.config.enable",
            serde_json::json!({"names": ["no-such-server"]})
        )
        .await
        .is_err());
        call(
            "mcp.config.remove",
            serde_json::json!({"name": "user-everything"}),
        )
        .await
        .unwrap();
        let listed = call("mcp.config.list", serde_json::json!({}))
            .await
            .unwrap();
        assert_eq!(listed["servers"], serde_json::json!({}));
    })
    .await;
}

/// A prompt sent right after `session.create`, while the stdio server is still starting (it
/// takes ~0.4 s) and with a model endpoint that answers at once: the first model call waits
/// for the server, so its tools are offered and the call reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_sent_while_the_servers_start_waits_for_their_tools() {
    bounded(async {
        let fake = fake_model::FakeModel::start(fake_model::FakeMode::McpEcho);
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let pidfile = pidfile("early");
        let config = model_config(&fake).with_mcp_servers(everything_servers(&pidfile));
        let prepared = client.prepare_session(config).expect("prepare_session");
        let mut events = Recorder::new(prepared.subscribe());
        let session = within("session.create", prepared.start()).await.unwrap();
        within("send", session.send(MessageOptions::new("echo something")))
            .await
            .expect("send");
        let done = events.wait_for("tool.execution_complete").await;
        assert_eq!(done.data["success"], true, "{:?}", done.data);
        events.wait_for("session.idle").await;
        let bodies = fake.completion_bodies();
        let offered: Vec<&str> = bodies[0]["tools"]
            .as_array()
            .expect("tools offered")
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        assert!(offered.contains(&"everything-echo"), "{offered:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_sees_mcp_tools_as_server_tool_and_calls_them() {
    bounded(async {
        let fake = fake_model::FakeModel::start(fake_model::FakeMode::McpEcho);
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let pidfile = pidfile("model");
        let config = model_config(&fake).with_mcp_servers(everything_servers(&pidfile));
        let prepared = client.prepare_session(config).expect("prepare_session");
        let mut events = Recorder::new(prepared.subscribe());
        let session = within("session.create", prepared.start()).await.unwrap();
        events.wait_for("session.mcp_servers_loaded").await;
        within("send", session.send(MessageOptions::new("echo something")))
            .await
            .expect("send");
        let start = events.wait_for("tool.execution_start").await;
        assert_eq!(data_str(&start, "mcpServerName"), "everything");
        assert_eq!(data_str(&start, "mcpToolName"), "echo");
        let done = events.wait_for("tool.execution_complete").await;
        assert_eq!(done.data["success"], true, "{:?}", done.data);
        events.wait_for("session.idle").await;
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 2);
        let offered: Vec<&str> = bodies[0]["tools"]
            .as_array()
            .expect("tools offered")
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        assert!(offered.contains(&"everything-echo"), "{offered:?}");
        assert!(offered.contains(&"everything-get-sum"), "{offered:?}");
        let messages = bodies[1]["messages"].as_array().unwrap();
        let tool = messages.last().unwrap();
        assert_eq!(tool["role"], "tool");
        assert_eq!(tool["content"], "Echo: hello from the model");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_loads_and_its_tools_run() {
    bounded(async {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut http_server = tokio::process::Command::new("node")
            .arg(mcp_servers::everything_entry())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("node server-everything streamableHttp");
        let start = std::time::Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "the server listens"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // No process is started for an HTTP server: the default policy admits it.
        let server = server(McpSpawnPolicy::TokenHolders);
        let client = connect(&server).await;
        let mut servers = IndexMap::new();
        servers.insert(
            "everything".to_owned(),
            McpServerConfig::Http(McpHttpServerConfig {
                url: format!("http://127.0.0.1:{port}/mcp"),
                ..Default::default()
            }),
        );
        let config = SessionConfig::default()
            .with_session_id(sdk_scenarios::new_session_id())
            .with_mcp_servers(servers);
        let mut s = start_recorded(&client, config, PathBuf::new()).await;
        let loaded = s.events.wait_for("session.mcp_servers_loaded").await;
        let entry = &loaded.data["servers"][0];
        assert_eq!(entry["status"], "connected", "{entry}");
        assert_eq!(entry["transport"], "http");
        let reply = turn(&mut s, "sum please").await;
        assert_eq!(data_str(&reply, "content"), "The sum of 2 and 3 is 5.");
        let reply = turn(&mut s, "toggle logging").await;
        assert!(
            data_str(&reply, "content").contains("logging"),
            "{:?}",
            reply.data
        );
        assert_eq!(s.permissions.lock().unwrap().len(), 1);
        let _ = http_server.kill().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_sampling_runs_the_servers_request_on_the_sessions_model() {
    bounded(async {
        let fake = fake_model::FakeModel::start(fake_model::FakeMode::McpSample);
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let pidfile = pidfile("exec");
        let permissions = Arc::new(Mutex::new(Vec::new()));
        let config = SessionConfig::default()
            .with_session_id(sdk_scenarios::new_session_id())
            .with_model("fake-model")
            .with_provider(
                github_copilot_sdk::types::ProviderConfig::new(fake.base_url())
                    .with_provider_type("openai")
                    .with_api_key("sk-test"),
            )
            .with_mcp_servers(everything_servers(&pidfile))
            .with_permission_handler(Arc::new(RecordingPermission {
                requests: permissions.clone(),
                reject: None,
            }));
        let prepared = client.prepare_session(config).expect("prepare_session");
        let mut events = Recorder::new(prepared.subscribe());
        let session = within("session.create", prepared.start()).await.unwrap();
        events.wait_for("session.mcp_servers_loaded").await;
        within(
            "registerInterest",
            session
                .rpc()
                .event_log()
                .register_interest(RegisterEventInterestParams {
                    event_type: "sampling.requested".into(),
                }),
        )
        .await
        .expect("registerInterest");
        within(
            "send",
            session.send(MessageOptions::new("sample through the model")),
        )
        .await
        .expect("send");
        let requested = events.wait_for("sampling.requested").await;
        let request_id = requested.data["requestId"].as_str().unwrap().to_owned();
        let executed = within(
            "executeSampling",
            client.call(
                "session.mcp.executeSampling",
                Some(serde_json::json!({
                    "sessionId": session.id().to_string(),
                    "requestId": "exec-1",
                    "serverName": requested.data["serverName"],
                    "mcpRequestId": requested.data["mcpRequestId"],
                    "request": requested.data["request"],
                })),
            ),
        )
        .await
        .expect("executeSampling");
        assert_eq!(executed["action"], "success", "{executed}");
        assert_eq!(
            executed["result"]["content"]["text"],
            "It is sunny in Paris."
        );
        assert_eq!(executed["result"]["role"], "assistant");
        let bodies = fake.completion_bodies();
        let sampled = bodies.last().unwrap().to_string();
        assert!(
            sampled.contains("Resource trigger-sampling-request context: ping"),
            "{sampled}"
        );
        let answered = within(
            "handlePendingSampling",
            client.call(
                "session.ui.handlePendingSampling",
                Some(serde_json::json!({"sessionId": session.id().to_string(),
                                        "requestId": request_id,
                                        "response": executed["result"]})),
            ),
        )
        .await
        .expect("handlePendingSampling");
        assert_eq!(answered["success"], true);
        let done = events.wait_for("tool.execution_complete").await;
        assert_eq!(done.data["success"], true, "{:?}", done.data);
        let text = done.data["result"]["content"].as_str().unwrap_or_default();
        assert!(
            text.contains("It is sunny in Paris."),
            "the server got the model's answer: {text}"
        );
        events.wait_for("session.idle").await;
        let cancelled = within(
            "cancelSamplingExecution",
            client.call(
                "session.mcp.cancelSamplingExecution",
                Some(serde_json::json!({"sessionId": session.id().to_string(),
                                        "requestId": "exec-1"})),
            ),
        )
        .await
        .expect("cancelSamplingExecution");
        assert_eq!(cancelled["cancelled"], false, "it already finished");
    })
    .await;
}

#[tokio::test]
async fn a_second_implementation_fastmcp_in_python_works_the_same() {
    bounded(async {
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let servers = fast_servers();
        let config = SessionConfig::default()
            .with_session_id(sdk_scenarios::new_session_id())
            .with_mcp_servers(servers);
        let mut s = start_recorded(&client, config, PathBuf::new()).await;
        let loaded = s.events.wait_for("session.mcp_servers_loaded").await;
        assert_eq!(
            loaded.data["servers"][0]["status"], "connected",
            "{}",
            loaded.data
        );

        // Read-only (annotated): no prompt; structured content is passed on.
        let reply = turn(&mut s, "fast add").await;
        assert_eq!(data_str(&reply, "content"), "42");
        let done = s.events.wait_for("tool.execution_complete").await;
        assert_eq!(
            done.data["result"]["structuredContent"],
            serde_json::json!({"result": 42})
        );
        assert!(s.permissions.lock().unwrap().is_empty());

        // Not read-only: a prompt of kind mcp first.
        let reply = turn(&mut s, "fast shout").await;
        assert_eq!(data_str(&reply, "content"), "HI");
        assert_eq!(s.permissions.lock().unwrap().len(), 1);

        // isError: the call fails with the server's text.
        let reply = turn(&mut s, "fast fail").await;
        assert!(
            data_str(&reply, "content").contains("nope"),
            "{:?}",
            reply.data
        );
        let done = loop {
            let ev = s.events.wait_for("tool.execution_complete").await;
            if ev.data["success"] == false {
                break ev;
            }
        };
        assert!(done.data["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nope"));
    })
    .await;
}

#[tokio::test]
async fn mcp_apps_ui_resources_and_app_tool_calls_reach_the_server() {
    bounded(async {
        let scenario = Scenario::from_json(SCENARIO).expect("scenario");
        let server = Server::new(
            HostConfig::with_scenario(scenario)
                .with_mcp_spawn(McpSpawnPolicy::Anyone)
                .with_mcp_apps_enabled(true),
        );
        let client = connect(&server).await;
        let servers = fast_servers();
        let config = SessionConfig::default()
            .with_session_id(sdk_scenarios::new_session_id())
            .with_mcp_servers(servers)
            .with_enable_mcp_apps(true);
        let prepared = client.prepare_session(config).expect("prepare_session");
        let events = Recorder::new(prepared.subscribe());
        let session = within("session.create", prepared.start()).await.unwrap();
        let mut s = McpSession {
            session,
            events,
            permissions: Arc::default(),
            pidfile: PathBuf::new(),
        };
        s.events.wait_for("session.mcp_servers_loaded").await;
        let reply = turn(&mut s, "fast clock").await;
        assert_eq!(data_str(&reply, "content"), "12:00");
        let start = s.events.wait_for("tool.execution_start").await;
        assert_eq!(
            start.data["toolDescription"]["_meta"]["ui"]["resourceUri"],
            "ui://fast/clock.html"
        );
        let done = s.events.wait_for("tool.execution_complete").await;
        let ui = &done.data["result"]["uiResource"];
        assert_eq!(ui["uri"], "ui://fast/clock.html", "{:?}", done.data);
        assert!(ui["text"].as_str().unwrap_or_default().contains("clock"));

        let id = s.session.id().to_string();
        let call = |method: &'static str, params: Value| {
            let client = client.clone();
            async move { within(method, client.call(method, Some(params))).await }
        };
        // An app may reach only its own server (SEP-1865): `originServerName` is required
        // and must name the server called.
        for params in [
            serde_json::json!({"sessionId": id, "serverName": "fast"}),
            serde_json::json!({"sessionId": id, "serverName": "fast", "originServerName": "other"}),
        ] {
            let refused = call("session.mcp.apps.listTools", params.clone()).await;
            assert!(refused.is_err(), "{params} was answered: {refused:?}");
            let mut call_params = params;
            call_params["toolName"] = serde_json::json!("add");
            call_params["arguments"] = serde_json::json!({"a": 1, "b": 2});
            let refused = call("session.mcp.apps.callTool", call_params.clone()).await;
            assert!(refused.is_err(), "{call_params} was answered: {refused:?}");
        }
        let tools = call(
            "session.mcp.apps.listTools",
            serde_json::json!({"sessionId": id, "serverName": "fast", "originServerName": "fast"}),
        )
        .await
        .unwrap();
        assert_eq!(tools["tools"].as_array().unwrap().len(), 1, "{tools}");
        assert_eq!(tools["tools"][0]["name"], "clock");
        let read = call(
            "session.mcp.apps.readResource",
            serde_json::json!({"sessionId": id, "serverName": "fast",
                               "uri": "ui://fast/clock.html"}),
        )
        .await
        .unwrap();
        assert!(read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("<html>"));
        let called = call(
            "session.mcp.apps.callTool",
            serde_json::json!({"sessionId": id, "serverName": "fast", "originServerName": "fast",
                               "toolName": "add", "arguments": {"a": 1, "b": 2}}),
        )
        .await
        .unwrap();
        assert_eq!(called["structuredContent"]["result"], 3, "{called}");
        let complete = s.events.wait_for("mcp_app.tool_call_complete").await;
        assert_eq!(complete.data["serverName"], "fast");
        assert_eq!(complete.data["toolName"], "add");
        assert_eq!(complete.data["success"], true);
        assert!(complete.data["durationMs"].is_number());
        let diagnosis = call(
            "session.mcp.apps.diagnose",
            serde_json::json!({"sessionId": id, "serverName": "fast"}),
        )
        .await
        .unwrap();
        assert_eq!(diagnosis["server"]["toolsWithUiMeta"], 1, "{diagnosis}");
        assert_eq!(
            diagnosis["server"]["sampleToolNames"],
            serde_json::json!(["clock"])
        );
    })
    .await;
}

#[tokio::test]
async fn server_shutdown_leaves_no_mcp_process() {
    bounded(async {
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let mut s = mcp_session(&client, "shutdown").await;
        s.events.wait_for("session.mcp_servers_loaded").await;
        let pid = mcp_servers::read_pid(&s.pidfile);
        assert!(mcp_servers::alive(pid));
        let _ = within(
            "runtime.shutdown",
            client.call("runtime.shutdown", Some(serde_json::json!({}))),
        )
        .await;
        assert!(
            mcp_servers::gone(pid).await,
            "the MCP server (pid {pid}) outlived the server's shutdown"
        );
    })
    .await;
}

/// Answers `preMcpToolCall` with `metaToUse` and records the hook's input.
struct MetaHook {
    inputs: Arc<Mutex<Vec<(String, String)>>>,
}

impl github_copilot_sdk::hooks::SessionHooks for MetaHook {
    fn on_hook<'life0, 'async_trait>(
        &'life0 self,
        event: github_copilot_sdk::hooks::HookEvent,
    ) -> sdk_scenarios::BoxFut<'async_trait, github_copilot_sdk::hooks::HookOutput>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        use github_copilot_sdk::hooks::{HookEvent, HookOutput, PreMcpToolCallOutput};
        let output = match event {
            HookEvent::PreMcpToolCall { input, .. } => {
                self.inputs
                    .lock()
                    .unwrap()
                    .push((input.server_name, input.tool_name));
                HookOutput::PreMcpToolCall(PreMcpToolCallOutput {
                    meta_to_use: Some(serde_json::json!({"injected": "by-hook"})),
                })
            }
            _ => HookOutput::None,
        };
        Box::pin(async move { output })
    }
}

/// A `preMcpToolCall` hook of the official Rust SDK decides the `_meta` of the `tools/call`
/// a FastMCP server receives (its `echo_meta` tool shows it back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_mcp_tool_call_hook_sets_the_requests_meta() {
    bounded(async {
        let fake = fake_model::FakeModel::start_script(vec![
            fake_model::FakeReply::tool(
                "call_1",
                "fast-echo_meta",
                serde_json::json!({"value": "v"}),
            ),
            fake_model::FakeReply::Text("done".into()),
        ]);
        let server = server(McpSpawnPolicy::Anyone);
        let client = connect(&server).await;
        let servers = fast_servers();
        let inputs = Arc::new(Mutex::new(Vec::new()));
        let config = model_config(&fake)
            .with_mcp_servers(servers)
            .with_hooks(Arc::new(MetaHook {
                inputs: inputs.clone(),
            }));
        let prepared = client.prepare_session(config).expect("prepare_session");
        let mut events = Recorder::new(prepared.subscribe());
        let session = within("session.create", prepared.start()).await.unwrap();
        within("send", session.send(MessageOptions::new("echo the meta")))
            .await
            .expect("send");
        events.wait_for("session.idle").await;
        assert_eq!(
            inputs.lock().unwrap().as_slice(),
            [("fast".to_owned(), "echo_meta".to_owned())]
        );
        let bodies = fake.completion_bodies();
        let tool = bodies[1]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        let shown: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
        assert_eq!(
            shown,
            serde_json::json!({"meta": {"injected": "by-hook"}, "value": "v"})
        );
    })
    .await;
}
