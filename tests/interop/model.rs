//! BYOK sessions driven by the **official Copilot Rust SDK** (`github-copilot-sdk`,
//! unmodified) against `agentwire_tokio::Server`, whose driver performs the model's HTTP
//! requests against the fake OpenAI-compatible endpoint of `testkit/src/fake_model.rs` on
//! loopback: the streamed answer, a client tool round trip with permission, abort mid-stream,
//! and faults (500, 429 then 200, a cut or malformed stream) after which the next prompt works.

use crate::support::fake_model;
use crate::support::sdk_scenarios;

use std::sync::{Arc, Mutex};

use crate::support::connect;
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use fake_model::{FakeMode, FakeModel};
use github_copilot_sdk::types::{MessageOptions, ProviderConfig, SessionConfig, SessionId};
use github_copilot_sdk::Client;
use sdk_scenarios::{
    assert_subsequence, new_session_id, types, weather_tool, within, Recorder, RecordingPermission,
    WEATHER_ANSWER, WEATHER_PROMPT,
};

const KEY: &str = "sk-fake-interop-key";

struct Byok {
    session: github_copilot_sdk::session::Session,
    events: Recorder,
    tool_calls: Arc<Mutex<Vec<github_copilot_sdk::types::ToolInvocation>>>,
    permissions: Arc<Mutex<Vec<(String, serde_json::Value)>>>,
}

async fn byok_session(client: &Client, fake: &FakeModel, id: &SessionId, streaming: bool) -> Byok {
    let tool_calls = Arc::new(Mutex::new(Vec::new()));
    let permissions = Arc::new(Mutex::new(Vec::new()));
    let config = SessionConfig::default()
        .with_session_id(id.clone())
        .with_model("fake-model")
        .with_streaming(streaming)
        .with_provider(
            ProviderConfig::new(fake.base_url())
                .with_provider_type("openai")
                .with_api_key(KEY),
        )
        .with_tools([weather_tool(tool_calls.clone())])
        .with_permission_handler(Arc::new(RecordingPermission {
            requests: permissions.clone(),
            reject: None,
        }));
    let prepared = client.prepare_session(config).expect("prepare_session");
    let events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create succeeds");
    Byok {
        session,
        events,
        tool_calls,
        permissions,
    }
}

async fn send(b: &mut Byok, prompt: &str) -> Vec<github_copilot_sdk::types::SessionEvent> {
    within("session.send", b.session.send(MessageOptions::new(prompt)))
        .await
        .expect("session.send");
    b.events.turn().await
}

fn content(ev: &github_copilot_sdk::types::SessionEvent) -> &str {
    ev.data["content"].as_str().unwrap_or_default()
}

fn last_message(turn: &[github_copilot_sdk::types::SessionEvent]) -> String {
    turn.iter()
        .rev()
        .find(|e| e.event_type == "assistant.message")
        .map(|e| content(e).to_owned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_answer_reaches_the_client() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Text);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut b = byok_session(&client, &fake, &new_session_id(), true).await;
        let turn = send(&mut b, "hi").await;
        assert_subsequence(
            &turn,
            &[
                "user.message",
                "system.message",
                "assistant.turn_start",
                "assistant.message_start",
                "assistant.message_delta",
                "assistant.message",
                "assistant.turn_end",
                "assistant.idle",
                "session.idle",
            ],
        );
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
        let deltas: String = turn
            .iter()
            .filter(|e| e.event_type == "assistant.message_delta")
            .map(|e| e.data["deltaContent"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(deltas, WEATHER_ANSWER);
        let requests = fake.requests();
        let completion = requests
            .iter()
            .find(|r| r.path.ends_with("/chat/completions"))
            .expect("a completion request");
        assert_eq!(
            completion.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        let all = serde_json::to_string(&b.events.seen.iter().map(|e| &e.data).collect::<Vec<_>>())
            .unwrap();
        assert!(!all.contains(KEY), "the key leaked into an event");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tool_round_trip_with_permission() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::ToolCall);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut b = byok_session(&client, &fake, &new_session_id(), false).await;
        let turn = send(&mut b, WEATHER_PROMPT).await;
        assert_subsequence(
            &turn,
            &[
                "assistant.turn_start",
                "assistant.message",
                "tool.execution_start",
                "permission.requested",
                "external_tool.requested",
                "tool.execution_complete",
                "assistant.turn_end",
                "assistant.turn_start",
                "assistant.message",
                "assistant.turn_end",
                "session.idle",
            ],
        );
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
        assert_eq!(b.tool_calls.lock().unwrap().len(), 1);
        assert_eq!(b.permissions.lock().unwrap().len(), 1);
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 2, "{}", types(&turn).join(","));
        let messages = bodies[1]["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
        assert_eq!(messages[3]["tool_call_id"], "call_1");
        assert_eq!(messages[3]["content"], sdk_scenarios::TOOL_REPLY);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_mid_stream_ends_the_turn_and_the_session_stays_usable() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Stall);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut b = byok_session(&client, &fake, &new_session_id(), true).await;
        within("session.send", b.session.send(MessageOptions::new("hi")))
            .await
            .expect("send");
        b.events.wait_for("assistant.message_delta").await;
        within("session.abort", b.session.abort())
            .await
            .expect("abort");
        let turn = b.events.turn().await;
        let idle = turn.last().unwrap();
        assert_eq!(idle.data["aborted"], true);
        fake.set_mode(FakeMode::Text);
        let turn = send(&mut b, "again").await;
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
    })
    .await
}

async fn fault_then_recovery(mode: FakeMode, expect_error: bool) {
    let fake = FakeModel::start(mode);
    let server = Server::new(HostConfig::default());
    let client = connect(&server).await;
    let mut b = byok_session(&client, &fake, &new_session_id(), false).await;
    let turn = send(&mut b, "hi").await;
    if expect_error {
        assert_subsequence(&turn, &["session.error", "session.idle"]);
        let error = turn
            .iter()
            .find(|e| e.event_type == "session.error")
            .unwrap();
        assert!(!error.data.to_string().contains(KEY));
    } else {
        assert!(
            turn.iter().all(|e| e.event_type != "session.error"),
            "{:?}",
            types(&turn)
        );
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
    }
    fake.set_mode(FakeMode::Text);
    let turn = send(&mut b, "again").await;
    assert_eq!(last_message(&turn), WEATHER_ANSWER, "{:?}", types(&turn));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_error_then_next_prompt_works() {
    sdk_scenarios::bounded(fault_then_recovery(FakeMode::ServerError, true)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_once_is_retried() {
    sdk_scenarios::bounded(fault_then_recovery(FakeMode::RateLimitedOnce, false)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_stream_then_next_prompt_works() {
    sdk_scenarios::bounded(fault_then_recovery(FakeMode::CutMidStream, true)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_stream_then_next_prompt_works() {
    sdk_scenarios::bounded(fault_then_recovery(FakeMode::MalformedChunk, true)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_a_restart_continues_the_conversation() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Text);
        let id = new_session_id();
        // The first server runs one turn; its persisted events are all a restart keeps.
        let stored: Vec<bytes::Bytes> = {
            let server = Server::new(HostConfig::default());
            let client = connect(&server).await;
            let mut b = byok_session(&client, &fake, &id, false).await;
            let turn = send(&mut b, "first question").await;
            assert_eq!(last_message(&turn), WEATHER_ANSWER);
            server.with_host(|host, _| {
                host.session_events(id.as_ref())
                    .expect("the session")
                    .iter()
                    .map(|e| e.json.clone())
                    .collect()
            })
        };
        // A new server restores them; the SDK resumes, sending the provider again.
        let server = Server::new(HostConfig::default());
        server
            .with_host(|host, now| host.restore_session(now, id.as_ref(), stored))
            .expect("restore");
        let client = connect(&server).await;
        let config = github_copilot_sdk::types::ResumeSessionConfig::new(id.clone())
            .with_provider(
                ProviderConfig::new(fake.base_url())
                    .with_provider_type("openai")
                    .with_api_key(KEY),
            )
            .with_permission_handler(Arc::new(RecordingPermission {
                requests: Arc::new(Mutex::new(Vec::new())),
                reject: None,
            }));
        let prepared = client
            .prepare_resume_session(config)
            .expect("prepare_resume_session");
        let mut events = Recorder::new(prepared.subscribe());
        let session = within("session.resume", prepared.start())
            .await
            .expect("session.resume succeeds");
        within(
            "session.send",
            session.send(MessageOptions::new("second question")),
        )
        .await
        .expect("send");
        let turn = events.turn().await;
        assert_eq!(last_message(&turn), WEATHER_ANSWER, "{:?}", types(&turn));
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 2);
        let messages = bodies[1]["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert!(messages[1]["content"]
            .as_str()
            .unwrap()
            .ends_with("first question"));
        assert_eq!(messages[2]["content"], WEATHER_ANSWER);
        assert!(messages[3]["content"]
            .as_str()
            .unwrap()
            .ends_with("second question"));
        // The key was never persisted.
        let stored_text = server.with_host(|host, _| {
            host.session_events(id.as_ref())
                .unwrap()
                .iter()
                .map(|e| String::from_utf8_lossy(&e.json).into_owned())
                .collect::<String>()
        });
        assert!(!stored_text.contains(KEY));
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_list_asks_the_provider_once_and_falls_back_to_the_configured_model() {
    use agentwire_tokio::agentwire::model::ServerDefault;
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Text);
        let default =
            ServerDefault::from_flags(&fake.base_url(), Some("configured".into()), None).unwrap();
        let server = Server::new(HostConfig::default().with_model_default(Some(default)));
        for _ in 0..2 {
            // A fresh client each time: the SDK caches per client, agentwire per provider.
            let client = connect(&server).await;
            let models = within("models.list", client.list_models()).await.unwrap();
            let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
            assert_eq!(ids, ["fake-model"]);
        }
        let gets = fake.requests().iter().filter(|r| r.method == "GET").count();
        assert_eq!(gets, 1, "the provider's answer is cached");
        assert_eq!(fake.requests()[0].path, "/v1/models");

        // A provider whose /models fails: the configured model is the list.
        let broken = format!("http://{}/v2", fake.addr());
        let default = ServerDefault::from_flags(&broken, Some("configured".into()), None).unwrap();
        let server = Server::new(HostConfig::default().with_model_default(Some(default)));
        let client = connect(&server).await;
        let models = within("models.list", client.list_models()).await.unwrap();
        let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["configured"]);
        assert!(fake.requests().iter().any(|r| r.path == "/v2/models"));
    })
    .await
}

/// A BYOK session on `base_url` (OpenAI type, key [`KEY`]) whose model is `model`.
async fn provider_session(
    client: &Client,
    base_url: String,
    model: &str,
) -> (github_copilot_sdk::session::Session, Recorder) {
    let config = SessionConfig::default()
        .with_session_id(new_session_id())
        .with_model(model)
        .with_provider(
            ProviderConfig::new(base_url)
                .with_provider_type("openai")
                .with_api_key(KEY),
        )
        .with_permission_handler(Arc::new(RecordingPermission {
            requests: Arc::new(Mutex::new(Vec::new())),
            reject: None,
        }));
    let prepared = client.prepare_session(config).expect("prepare_session");
    let events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create succeeds");
    (session, events)
}

fn list_ids(list: &github_copilot_sdk::rpc::SessionModelList) -> Vec<String> {
    list.list
        .iter()
        .map(|m| m["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_model_list_asks_the_sessions_provider_once_and_falls_back_to_its_model() {
    use github_copilot_sdk::rpc::ModelListRequest;
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Text);
        fake.set_models(&["model-a", "model-b"]);
        // No server default: the session's own provider is the only one to ask.
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let (session, mut events) = provider_session(&client, fake.base_url(), "model-a").await;
        let models_gets = || {
            fake.requests()
                .iter()
                .filter(|r| r.method == "GET" && r.path == "/v1/models")
                .count()
        };
        let first = within("session.model.list", session.rpc().model().list())
            .await
            .expect("session.model.list");
        assert_eq!(list_ids(&first), ["model-a", "model-b"]);
        let entry = &first.list[1];
        assert_eq!(entry["name"], "model-b");
        assert!(entry["capabilities"]["limits"]["max_context_window_tokens"].is_u64());
        let get = fake
            .requests()
            .into_iter()
            .find(|r| r.path == "/v1/models")
            .expect("the provider was asked");
        assert_eq!(
            get.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );

        // A second session on the same provider and key: answered from the cache.
        let (other, _) = provider_session(&client, fake.base_url(), "model-b").await;
        let second = within("session.model.list", other.rpc().model().list())
            .await
            .expect("session.model.list");
        assert_eq!(list_ids(&second), ["model-a", "model-b"]);
        let again = within("session.model.list", session.rpc().model().list())
            .await
            .expect("session.model.list");
        assert_eq!(list_ids(&again), ["model-a", "model-b"]);
        assert_eq!(models_gets(), 1, "the provider's answer is cached");

        // `skipCache` asks the provider again.
        fake.set_models(&["model-c"]);
        let refreshed = within(
            "session.model.list",
            session.rpc().model().list_with_params(ModelListRequest {
                skip_cache: Some(true),
            }),
        )
        .await
        .expect("session.model.list");
        assert_eq!(list_ids(&refreshed), ["model-c"]);
        assert_eq!(models_gets(), 2);

        // A provider whose /models fails: the session's configured model is the list.
        let broken = format!("http://{}/v2", fake.addr());
        let (failing, mut failing_events) = provider_session(&client, broken, "configured").await;
        let fallback = within("session.model.list", failing.rpc().model().list())
            .await
            .expect("session.model.list");
        assert_eq!(list_ids(&fallback), ["configured"]);
        assert!(fake.requests().iter().any(|r| r.path == "/v2/models"));

        // The key is in no response and no event.
        let responses =
            serde_json::to_string(&[&first, &second, &again, &refreshed, &fallback]).unwrap();
        assert!(!responses.contains(KEY), "the key leaked into a response");
        events.drain();
        failing_events.drain();
        let seen: Vec<_> = events
            .seen
            .iter()
            .chain(&failing_events.seen)
            .map(|e| serde_json::to_string(e).unwrap())
            .collect();
        assert!(!seen.is_empty());
        assert!(
            seen.iter().all(|e| !e.contains(KEY)),
            "the key leaked into an event"
        );
        let stored = server.with_host(|host, _| {
            [session.id(), failing.id()]
                .iter()
                .flat_map(|id| host.session_events(id.as_ref()).unwrap().to_vec())
                .map(|e| String::from_utf8_lossy(&e.json).into_owned())
                .collect::<String>()
        });
        assert!(!stored.contains(KEY), "the key was persisted");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_model_list_without_a_provider_uses_the_server_default() {
    use agentwire_tokio::agentwire::model::ServerDefault;
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Text);
        fake.set_models(&["default-a", "default-b"]);
        let default =
            ServerDefault::from_flags(&fake.base_url(), Some("configured".into()), None).unwrap();
        let server = Server::new(HostConfig::default().with_model_default(Some(default)));
        let client = connect(&server).await;
        let config = SessionConfig::default()
            .with_session_id(new_session_id())
            .with_permission_handler(Arc::new(RecordingPermission {
                requests: Arc::new(Mutex::new(Vec::new())),
                reject: None,
            }));
        let session = within("session.create", client.create_session(config))
            .await
            .expect("session.create");
        let list = within("session.model.list", session.rpc().model().list())
            .await
            .expect("session.model.list");
        assert_eq!(list_ids(&list), ["default-a", "default-b"]);
        // The server's `models.list` shares the server default's cached answer.
        let models = within("models.list", client.list_models()).await.unwrap();
        let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["default-a", "default-b"]);
        let gets = fake.requests().iter().filter(|r| r.method == "GET").count();
        assert_eq!(gets, 1);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_model_list_asks_a_bearer_token_provider_for_its_token() {
    use github_copilot_sdk::{BearerTokenError, ProviderTokenArgs};
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Text);
        fake.set_models(&["tok-model-a", "tok-model-b"]);
        let asked: Arc<Mutex<Vec<ProviderTokenArgs>>> = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let tokens = move |args: ProviderTokenArgs| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(args);
                Ok::<String, BearerTokenError>("tok-secret-list".to_owned())
            }
        };
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let config = SessionConfig::default()
            .with_session_id(new_session_id())
            .with_model("tok-model-a")
            .with_provider(
                ProviderConfig::new(fake.base_url())
                    .with_provider_type("openai")
                    .with_bearer_token_provider(Arc::new(tokens)),
            )
            .with_permission_handler(Arc::new(RecordingPermission {
                requests: Arc::new(Mutex::new(Vec::new())),
                reject: None,
            }));
        let session = within("session.create", client.create_session(config))
            .await
            .expect("session.create");
        for _ in 0..2 {
            let list = within("session.model.list", session.rpc().model().list())
                .await
                .expect("session.model.list");
            assert_eq!(list_ids(&list), ["tok-model-a", "tok-model-b"]);
            let text = serde_json::to_string(&list).unwrap();
            assert!(!text.contains("tok-secret-list"), "the token leaked");
        }
        let gets: Vec<_> = fake
            .requests()
            .into_iter()
            .filter(|r| r.path == "/v1/models")
            .collect();
        assert_eq!(gets.len(), 1, "the session's answer is cached");
        assert_eq!(
            gets[0].header("authorization"),
            Some("Bearer tok-secret-list")
        );
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "one token for the one request");
        assert_eq!(asked[0].provider_name, "default");
        assert_eq!(asked[0].session_id, session.id().to_string());
    })
    .await
}

/// The session's `clientName` is named in the `user-agent` of its model calls, over the real
/// driver's HTTP client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_name_is_in_the_model_calls_user_agent() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Text);
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let config = SessionConfig::default()
            .with_session_id(new_session_id())
            .with_model("fake-model")
            .with_client_name("my-sdk-app")
            .with_provider(
                ProviderConfig::new(fake.base_url())
                    .with_provider_type("openai")
                    .with_api_key(KEY),
            );
        let session = client.create_session(config).await.expect("create");
        session
            .send_and_wait(MessageOptions::new("hi"))
            .await
            .expect("turn");
        let request = fake
            .requests()
            .into_iter()
            .find(|r| r.path.ends_with("/chat/completions"))
            .expect("a model call");
        let agent = request.header("user-agent").unwrap_or_default().to_owned();
        assert!(agent.contains("my-sdk-app"), "{agent}");
    })
    .await;
}

/// The spans in the telemetry file at `path` once its root span is there.
async fn exported_spans(path: &std::path::Path) -> Vec<serde_json::Value> {
    for _ in 0..200 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let spans: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is one JSON span"))
            .collect();
        if spans.iter().any(|s| s["name"] == "invoke_agent") {
            return spans;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no invoke_agent span in {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_a_client_tool_is_exported_as_one_trace() {
    use agentwire_tokio::agentwire::telemetry::TelemetryConfig;
    sdk_scenarios::bounded(async {
        let dir = std::env::temp_dir().join(format!("agentwire-otel-{}", new_session_id()));
        let path = dir.join("spans.jsonl");
        let fake = FakeModel::start(FakeMode::ToolCall);
        let telemetry = TelemetryConfig::new(path.to_string_lossy())
            .with_source_name("interop-scope")
            .with_capture_content(true);
        let server = Server::new(HostConfig::default().with_telemetry(Some(telemetry)));
        let client = connect(&server).await;
        let id = new_session_id();
        let mut b = byok_session(&client, &fake, &id, false).await;
        let turn = send(&mut b, WEATHER_PROMPT).await;
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
        let spans = exported_spans(&path).await;
        let _ = std::fs::remove_dir_all(&dir);
        let op = |s: &serde_json::Value| s["attributes"]["gen_ai.operation.name"].clone();
        let root = spans.iter().find(|s| op(s) == "invoke_agent").unwrap();
        assert_eq!(root["parentSpanId"], "");
        assert_eq!(root["attributes"]["gen_ai.conversation.id"], id.to_string());
        let chats: Vec<_> = spans.iter().filter(|s| op(s) == "chat").collect();
        assert_eq!(chats.len(), 2, "one chat span per model call: {spans:#?}");
        assert!(chats[0]["attributes"]["gen_ai.input.messages"]
            .as_str()
            .unwrap()
            .contains(WEATHER_PROMPT));
        assert!(chats[1]["attributes"]["gen_ai.output.messages"]
            .as_str()
            .unwrap()
            .contains(WEATHER_ANSWER));
        let tool = spans.iter().find(|s| op(s) == "execute_tool").unwrap();
        assert_eq!(tool["attributes"]["gen_ai.tool.name"], "get_weather");
        assert_eq!(tool["attributes"]["gen_ai.tool.call.id"], "call_1");
        assert_eq!(
            tool["attributes"]["gen_ai.tool.call.arguments"],
            r#"{"city":"Paris"}"#
        );
        assert_eq!(
            tool["attributes"]["gen_ai.tool.call.result"],
            sdk_scenarios::TOOL_REPLY
        );
        for span in &spans {
            assert_eq!(span["traceId"], root["traceId"]);
            assert_eq!(span["instrumentationScope"]["name"], "interop-scope");
            assert_ne!(span["status"]["code"], 2, "{span}");
            if span != root {
                assert_eq!(span["parentSpanId"], root["spanId"]);
            }
        }
    })
    .await
}

/// OTLP/HTTP export: the spans of a turn are posted to the collector's `/v1/traces` as
/// OTLP JSON (`resourceSpans` → `scopeSpans` → spans with hex ids, nanosecond times, typed
/// attributes), with the configured headers. The collector here is the fake endpoint, which
/// answers 404: a failed post loses its spans and nothing else (the turn completes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_is_posted_to_an_otlp_collector() {
    use agentwire_tokio::agentwire::telemetry::TelemetryConfig;
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::ToolCall);
        let collector = FakeModel::start(FakeMode::Text);
        let url = format!("http://{}/v1/traces", collector.addr());
        let telemetry =
            TelemetryConfig::otlp(url, vec![("x-api-key".to_owned(), "k-123".to_owned())]);
        let server = Server::new(HostConfig::default().with_telemetry(Some(telemetry)));
        let client = connect(&server).await;
        let id = new_session_id();
        let mut b = byok_session(&client, &fake, &id, false).await;
        let turn = send(&mut b, WEATHER_PROMPT).await;
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
        let mut spans = Vec::new();
        for _ in 0..200 {
            let posts: Vec<_> = collector
                .requests()
                .into_iter()
                .filter(|r| r.method == "POST" && r.path == "/v1/traces")
                .collect();
            spans = posts
                .iter()
                .flat_map(|r| {
                    assert_eq!(r.header("content-type"), Some("application/json"));
                    assert_eq!(r.header("x-api-key"), Some("k-123"));
                    let body = r.json();
                    let resource = &body["resourceSpans"][0];
                    assert_eq!(
                        resource["resource"]["attributes"][0],
                        serde_json::json!({"key": "service.name",
                                           "value": {"stringValue": "github-copilot"}})
                    );
                    let scope = &resource["scopeSpans"][0];
                    assert_eq!(scope["scope"]["name"], "github.copilot");
                    scope["spans"].as_array().unwrap().clone()
                })
                .collect();
            if spans.iter().any(|s| s["name"] == "invoke_agent") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let root = spans
            .iter()
            .find(|s| s["name"] == "invoke_agent")
            .expect("the root span was posted");
        assert!(root.get("parentSpanId").is_none());
        assert_eq!(root["kind"], 1, "INTERNAL in OTLP's numbering");
        assert_eq!(root["traceId"].as_str().unwrap().len(), 32);
        let start: u128 = root["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
        let end: u128 = root["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
        assert!(start > 0 && end >= start);
        let conversation = root["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == "gen_ai.conversation.id")
            .unwrap();
        assert_eq!(conversation["value"]["stringValue"], id.to_string());
        let chats = spans
            .iter()
            .filter(|s| s["name"].as_str().unwrap().starts_with("chat"))
            .count();
        assert_eq!(chats, 2, "{spans:#?}");
        for span in spans.iter().filter(|s| s["name"] != "invoke_agent") {
            assert_eq!(span["traceId"], root["traceId"]);
            assert_eq!(span["parentSpanId"], root["spanId"]);
        }
    })
    .await
}
