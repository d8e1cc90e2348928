//! The non-OpenAI providers and the client-supplied bearer token, end to end: the **official
//! Copilot Rust SDK** (unmodified) creates BYOK sessions against `agentwire_tokio::Server`,
//! whose driver calls the fake endpoint of `testkit/src/fake_model.rs`. Asserted: the
//! request path, headers and body each provider needs, and that the streamed answer (and,
//! for Anthropic, a client tool round trip) reaches the client.
//!
//! * `type: "azure"`: the versionless `/openai/v1/chat/completions` route, and the
//!   deployment route `/openai/deployments/{model}/chat/completions?api-version=…` with
//!   `azure.apiVersion`; the key as `api-key`.
//! * `type: "anthropic"`: `POST /v1/messages` with `x-api-key` and `anthropic-version`,
//!   the Messages SSE stream (text, `tool_use` with `input_json_delta`).
//! * `hasBearerTokenProvider`: before each model call agentwire asks the client
//!   (`providerToken.getToken`, which the SDK answers from its `BearerTokenProvider`) and
//!   sends the token as `Authorization: Bearer`.

use crate::support::fake_model;
use crate::support::sdk_scenarios;

use std::sync::{Arc, Mutex};

use crate::support::connect;
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use fake_model::{FakeMode, FakeModel, RecordedRequest};
use github_copilot_sdk::types::{
    AzureProviderOptions, MessageOptions, ProviderConfig, SessionConfig, SessionEvent,
};
use github_copilot_sdk::{BearerTokenError, ProviderTokenArgs};
use sdk_scenarios::{
    assert_subsequence, new_session_id, weather_tool, within, Recorder, RecordingPermission,
    WEATHER_ANSWER, WEATHER_PROMPT,
};

async fn run_turn(provider: ProviderConfig, streaming: bool) -> (Vec<SessionEvent>, usize) {
    let server = Server::new(HostConfig::default());
    let client = connect(&server).await;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let config = SessionConfig::default()
        .with_session_id(new_session_id())
        .with_model("fake-model")
        .with_streaming(streaming)
        .with_provider(provider)
        .with_tools([weather_tool(calls.clone())])
        .with_permission_handler(Arc::new(RecordingPermission {
            requests: Arc::new(Mutex::new(Vec::new())),
            reject: None,
        }));
    let prepared = client.prepare_session(config).expect("prepare_session");
    let mut events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create");
    within(
        "session.send",
        session.send(MessageOptions::new(WEATHER_PROMPT)),
    )
    .await
    .expect("session.send");
    let turn = events.turn().await;
    let tool_calls = calls.lock().unwrap().len();
    (turn, tool_calls)
}

fn last_message(turn: &[SessionEvent]) -> String {
    turn.iter()
        .rev()
        .find(|e| e.event_type == "assistant.message")
        .and_then(|e| e.data["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn posts(fake: &FakeModel) -> Vec<RecordedRequest> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_versionless_route_with_the_api_key_header() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Text);
        let provider = ProviderConfig::new(format!("http://{}", fake.addr()))
            .with_provider_type("azure")
            .with_api_key("az-key");
        let (turn, _) = run_turn(provider, true).await;
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
        assert_subsequence(
            &turn,
            &[
                "assistant.message_delta",
                "assistant.message",
                "session.idle",
            ],
        );
        let post = &posts(&fake)[0];
        assert_eq!(post.path, "/openai/v1/chat/completions");
        assert_eq!(post.header("api-key"), Some("az-key"));
        assert_eq!(post.header("authorization"), None);
        let body = post.json();
        assert_eq!(body["model"], "fake-model");
        assert_eq!(body["stream"], true);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_deployment_route_with_an_api_version() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::ToolCall);
        let azure = AzureProviderOptions {
            api_version: Some("2024-10-21".into()),
        };
        let provider = ProviderConfig::new(format!("http://{}", fake.addr()))
            .with_provider_type("azure")
            .with_api_key("az-key")
            .with_azure(azure)
            .with_wire_model("my-deployment");
        let (turn, tool_calls) = run_turn(provider, false).await;
        assert_eq!(tool_calls, 1, "the client tool ran");
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
        let posts = posts(&fake);
        assert_eq!(posts.len(), 2);
        assert_eq!(
            posts[0].path,
            "/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(posts[1].header("api-key"), Some("az-key"));
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_api_streams_text_and_runs_a_tool() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::ToolCall);
        let provider = ProviderConfig::new(format!("http://{}", fake.addr()))
            .with_provider_type("anthropic")
            .with_api_key("sk-ant-fake");
        let (turn, tool_calls) = run_turn(provider, true).await;
        assert_eq!(tool_calls, 1, "the tool_use reached the client tool");
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
        let deltas: String = turn
            .iter()
            .filter(|e| e.event_type == "assistant.message_delta")
            .filter_map(|e| e.data["deltaContent"].as_str())
            .collect();
        assert_eq!(deltas, WEATHER_ANSWER);
        let posts = posts(&fake);
        assert_eq!(posts.len(), 2);
        assert_eq!(posts[0].path, "/v1/messages");
        assert_eq!(posts[0].header("x-api-key"), Some("sk-ant-fake"));
        assert!(posts[0].header("anthropic-version").is_some());
        let first = posts[0].json();
        assert_eq!(first["model"], "fake-model");
        assert_eq!(first["stream"], true);
        assert!(first["system"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "get_weather" && t["input_schema"].is_object()));
        // The tool result goes back as a `tool_result` block for the `tool_use` id.
        let second = posts[1].json();
        let last = second["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["role"], "user");
        assert_eq!(last["content"][0]["type"], "tool_result");
        assert_eq!(last["content"][0]["tool_use_id"], "toolu_1");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_provider_supplies_the_token_before_each_call() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::ToolCall);
        let asked: Arc<Mutex<Vec<ProviderTokenArgs>>> = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let tokens = move |args: ProviderTokenArgs| {
            let log = log.clone();
            async move {
                let mut log = log.lock().unwrap();
                log.push(args);
                Ok::<String, BearerTokenError>(format!("tok-{}", log.len()))
            }
        };
        let provider = ProviderConfig::new(fake.base_url())
            .with_provider_type("openai")
            .with_bearer_token_provider(Arc::new(tokens));
        let (turn, tool_calls) = run_turn(provider, false).await;
        assert_eq!(tool_calls, 1);
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 2, "one token per model call");
        assert_eq!(asked[0].provider_name, "default");
        let posts = posts(&fake);
        assert_eq!(posts[0].header("authorization"), Some("Bearer tok-1"));
        assert_eq!(posts[1].header("authorization"), Some("Bearer tok-2"));
        let all = serde_json::to_string(&turn.iter().map(|e| &e.data).collect::<Vec<_>>()).unwrap();
        assert!(!all.contains("tok-1"), "the token leaked into an event");
    })
    .await
}
