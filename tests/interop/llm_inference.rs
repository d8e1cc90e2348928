//! Client-provided inference (issue 17 part B, `llmInference.*`) through the **official
//! Copilot Rust SDK** (`github-copilot-sdk`, unmodified, in process): the client registers
//! as the model transport with the SDK's typed `client.rpc().llm_inference().set_provider()`
//! and answers with its typed `http_response_start` / `http_response_chunk`; the server's
//! `llmInference.httpRequestStart` / `httpRequestChunk` requests reach handlers registered
//! with the SDK's `Client::register_request_handler`. (The SDK's own `CopilotRequestHandler`
//! adapter is only built with its `runtime` feature, which needs OpenSSL and a spawned CLI;
//! this test plays the adapter's part on the same wire.)
//!
//! The model's answer is an OpenAI Chat Completions SSE stream the test writes itself: the
//! base URL is one the server could never reach, so every byte of the answer came from the
//! client.

use crate::support::sdk_scenarios;

use std::collections::HashMap;

use crate::support::{connect, connect_cuttable, cut};
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use github_copilot_sdk::rpc::{
    LlmInferenceHttpResponseChunkError, LlmInferenceHttpResponseChunkRequest,
    LlmInferenceHttpResponseStartRequest,
};
use github_copilot_sdk::types::{
    MessageOptions, ProviderConfig, RequestId, ResumeSessionConfig, SessionConfig, SessionEvent,
    SessionId,
};
use github_copilot_sdk::Client;
use sdk_scenarios::{assert_subsequence, new_session_id, types, within, Recorder, WEATHER_ANSWER};
use serde_json::{json, Value};
use tokio::sync::mpsc;

const KEY: &str = "sk-client-provided-key";
/// Not resolvable, and refused by the server's default base-URL policy: only a client can
/// perform requests to it.
const BASE_URL: &str = "https://models.example.invalid/v1";

/// The provider side of a client: the server's requests as they arrive.
struct Provider {
    starts: mpsc::UnboundedReceiver<Value>,
    chunks: mpsc::UnboundedReceiver<Value>,
}

impl Provider {
    /// Registers the handlers for the server's requests, then `llmInference.setProvider`.
    async fn register(client: &Client) -> Provider {
        let (start_tx, starts) = mpsc::unbounded_channel();
        let (chunk_tx, chunks) = mpsc::unbounded_channel();
        client
            .register_request_handler("llmInference.httpRequestStart", move |params, _| {
                let _ = start_tx.send(params);
                async { Ok(json!({})) }
            })
            .expect("register httpRequestStart");
        client
            .register_request_handler("llmInference.httpRequestChunk", move |params, _| {
                let _ = chunk_tx.send(params);
                async { Ok(json!({})) }
            })
            .expect("register httpRequestChunk");
        let registered = within(
            "llmInference.setProvider",
            client.rpc().llm_inference().set_provider(),
        )
        .await
        .expect("llmInference.setProvider");
        assert!(registered.success);
        Provider { starts, chunks }
    }

    async fn next_start(&mut self) -> Value {
        within("llmInference.httpRequestStart", self.starts.recv())
            .await
            .expect("the server sends httpRequestStart")
    }

    async fn next_chunk(&mut self) -> Value {
        within("llmInference.httpRequestChunk", self.chunks.recv())
            .await
            .expect("the server sends httpRequestChunk")
    }

    /// The next request: its head and its (single, end-marked) body chunk.
    async fn next_request(&mut self) -> (Value, Value) {
        let start = self.next_start().await;
        let chunk = self.next_chunk().await;
        assert_eq!(chunk["requestId"], start["requestId"]);
        assert_eq!(chunk["end"], true);
        let body: Value = serde_json::from_str(chunk["data"].as_str().unwrap()).unwrap();
        (start, body)
    }
}

fn provider_config() -> ProviderConfig {
    ProviderConfig::new(BASE_URL)
        .with_provider_type("openai")
        .with_api_key(KEY)
}

/// Creates a streaming session on `client` whose provider only the client can reach.
async fn session_on(
    client: &Client,
    id: &SessionId,
) -> (github_copilot_sdk::session::Session, Recorder) {
    let config = SessionConfig::default()
        .with_session_id(id.clone())
        .with_model("client-model")
        .with_streaming(true)
        .with_provider(provider_config());
    let prepared = client.prepare_session(config).expect("prepare_session");
    let events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create with a base URL the server would refuse to reach");
    (session, events)
}

fn sse(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "chatcmpl-client", "object": "chat.completion.chunk", "created": 1,
                   "model": "client-model",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

async fn respond_start(client: &Client, id: &RequestId, status: i64) -> bool {
    let head = LlmInferenceHttpResponseStartRequest {
        headers: HashMap::from([(
            "content-type".to_owned(),
            vec!["text/event-stream".to_owned()],
        )]),
        request_id: id.clone(),
        status,
        status_text: Some("OK".to_owned()),
    };
    within(
        "llmInference.httpResponseStart",
        client.rpc().llm_inference().http_response_start(head),
    )
    .await
    .expect("httpResponseStart")
    .accepted
}

async fn respond_chunk(client: &Client, id: &RequestId, data: &str, end: bool) -> bool {
    let chunk = LlmInferenceHttpResponseChunkRequest {
        binary: None,
        data: data.to_owned(),
        end: Some(end),
        error: None,
        request_id: id.clone(),
    };
    within(
        "llmInference.httpResponseChunk",
        client.rpc().llm_inference().http_response_chunk(chunk),
    )
    .await
    .expect("httpResponseChunk")
    .accepted
}

fn request_id(start: &Value) -> RequestId {
    RequestId::new(start["requestId"].as_str().expect("requestId"))
}

fn last_message(turn: &[SessionEvent]) -> String {
    turn.iter()
        .rev()
        .find(|e| e.event_type == "assistant.message")
        .and_then(|e| e.data["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_answer_comes_from_the_client_provider_streamed() {
    sdk_scenarios::bounded(async {
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut provider = Provider::register(&client).await;
        let id = new_session_id();
        let (session, mut events) = session_on(&client, &id).await;
        within(
            "session.send",
            session.send(MessageOptions::new("hello from the client")),
        )
        .await
        .expect("session.send");

        let (start, body) = provider.next_request().await;
        assert_eq!(start["method"], "POST");
        assert_eq!(start["url"], format!("{BASE_URL}/chat/completions"));
        assert_eq!(start["sessionId"], id.to_string());
        // The session's main agent: a stable trajectory id next to the session id.
        let agent = start["agentId"].as_str().unwrap_or_default();
        assert!(!agent.is_empty(), "{start}");
        assert_ne!(start["agentId"], start["sessionId"]);
        assert_eq!(start["interactionType"], "conversation-agent");
        assert_eq!(start["transport"], "http");
        assert_eq!(
            start["headers"]["authorization"],
            json!([format!("Bearer {KEY}")])
        );
        assert_eq!(body["stream"], true);
        assert!(body["messages"]
            .to_string()
            .contains("hello from the client"));

        let rid = request_id(&start);
        assert!(respond_start(&client, &rid, 200).await);
        let first = sse(json!({"role": "assistant", "content": "It is "}), None);
        assert!(respond_chunk(&client, &rid, &first, false).await);
        // Streamed: the first delta reaches the client before the rest of the answer exists.
        let delta = events.wait_for("assistant.message_delta").await;
        assert_eq!(delta.data["deltaContent"], "It is ");
        let rest = format!(
            "{}{}data: [DONE]\n\n",
            sse(json!({"content": "sunny in Paris."}), None),
            sse(json!({}), Some("stop"))
        );
        assert!(respond_chunk(&client, &rid, &rest, true).await);

        let turn = events.turn().await;
        assert_subsequence(
            &turn,
            &[
                "user.message",
                "assistant.turn_start",
                "assistant.message_delta",
                "assistant.message",
                "assistant.turn_end",
                "session.idle",
            ],
        );
        assert!(
            turn.iter().all(|e| e.event_type != "session.error"),
            "{:?}",
            types(&turn)
        );
        assert_eq!(last_message(&turn), WEATHER_ANSWER);
        // The exchange is over: later frames for it match nothing.
        assert!(!respond_chunk(&client, &rid, "late", true).await);
        assert!(!respond_start(&client, &RequestId::new("no-such-request"), 200).await);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provider_disconnecting_mid_stream_ends_the_turn_with_session_error() {
    sdk_scenarios::bounded(async {
        let server = Server::new(HostConfig::default());
        let (client, relay) = connect_cuttable(&server).await;
        let mut provider = Provider::register(&client).await;
        let id = new_session_id();
        let (session, _events) = session_on(&client, &id).await;
        // A second client watches the session (it does not provide inference).
        let observer = connect(&server).await;
        let prepared = observer
            .prepare_resume_session(
                ResumeSessionConfig::new(id.clone())
                    .with_streaming(true)
                    .with_provider(provider_config()),
            )
            .expect("prepare_resume_session");
        let mut watched = Recorder::new(prepared.subscribe());
        let watching = within("session.resume", prepared.start())
            .await
            .expect("the observer resumes the session");
        watched.wait_for("session.resume").await;

        within("session.send", session.send(MessageOptions::new("hi")))
            .await
            .expect("session.send");
        let (start, _) = provider.next_request().await;
        let rid = request_id(&start);
        assert!(respond_start(&client, &rid, 200).await);
        let first = sse(json!({"role": "assistant", "content": "It is "}), None);
        assert!(respond_chunk(&client, &rid, &first, false).await);
        watched.wait_for("assistant.message_delta").await;

        cut(relay).await;
        let turn = watched.turn().await;
        assert_subsequence(&turn, &["session.error", "session.idle"]);
        let error = turn
            .iter()
            .find(|e| e.event_type == "session.error")
            .unwrap();
        let message = error.data["message"].as_str().unwrap_or_default();
        assert!(message.contains("disconnected mid-request"), "{message}");
        assert!(!error.data.to_string().contains(KEY));

        // The session's requests never fall back to the network: with no provider attached
        // the next prompt fails at once, with a reason.
        within("session.send", watching.send(MessageOptions::new("again")))
            .await
            .expect("session.send");
        let turn = watched.turn().await;
        let error = turn
            .iter()
            .find(|e| e.event_type == "session.error")
            .unwrap_or_else(|| panic!("no session.error in {:?}", types(&turn)));
        let message = error.data["message"].as_str().unwrap_or_default();
        assert!(message.contains("no client that performs"), "{message}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_cancels_the_request_at_the_provider_and_an_error_chunk_fails_the_call() {
    sdk_scenarios::bounded(async {
        let server = Server::new(HostConfig::default());
        let client = connect(&server).await;
        let mut provider = Provider::register(&client).await;
        let id = new_session_id();
        let (session, mut events) = session_on(&client, &id).await;

        within("session.send", session.send(MessageOptions::new("hi")))
            .await
            .expect("session.send");
        let (start, _) = provider.next_request().await;
        let rid = request_id(&start);
        assert!(respond_start(&client, &rid, 200).await);
        let first = sse(json!({"role": "assistant", "content": "It is "}), None);
        assert!(respond_chunk(&client, &rid, &first, false).await);
        events.wait_for("assistant.message_delta").await;
        within("session.abort", session.abort())
            .await
            .expect("session.abort");
        let cancel = provider.next_chunk().await;
        assert_eq!(cancel["requestId"], start["requestId"]);
        assert_eq!(cancel["cancel"], true);
        let turn = events.turn().await;
        assert_eq!(turn.last().unwrap().data["aborted"], true);
        assert!(!respond_chunk(&client, &rid, "late", true).await);

        // The next prompt: the client's transport fails (an error chunk) -> session.error.
        within("session.send", session.send(MessageOptions::new("again")))
            .await
            .expect("session.send");
        let (start, _) = provider.next_request().await;
        let rid = request_id(&start);
        let failed = LlmInferenceHttpResponseChunkRequest {
            binary: None,
            data: String::new(),
            end: Some(true),
            error: Some(LlmInferenceHttpResponseChunkError {
                code: Some("ECONNRESET".to_owned()),
                message: "upstream reset".to_owned(),
            }),
            request_id: rid,
        };
        let answer = within(
            "httpResponseChunk",
            client.rpc().llm_inference().http_response_chunk(failed),
        )
        .await
        .expect("httpResponseChunk");
        assert!(answer.accepted);
        let turn = events.turn().await;
        let error = turn
            .iter()
            .find(|e| e.event_type == "session.error")
            .unwrap_or_else(|| panic!("no session.error in {:?}", types(&turn)));
        assert!(
            error.data["message"]
                .as_str()
                .unwrap_or_default()
                .contains("upstream reset"),
            "{}",
            error.data
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_default_provider_key_is_never_sent_to_a_client() {
    use agentwire_tokio::agentwire::model::{Secret, ServerDefault};
    const OPERATOR_KEY: &str = "sk-operator-only-key";
    sdk_scenarios::bounded(async {
        let default = ServerDefault::from_flags(
            "http://127.0.0.1:9/v1",
            Some("operator-model".into()),
            Some(Secret::new(OPERATOR_KEY)),
        )
        .expect("server default");
        let server = Server::new(HostConfig::default().with_model_default(Some(default)));
        let client = connect(&server).await;
        let mut provider = Provider::register(&client).await;
        // No provider of its own: the session uses the operator's default.
        let config = SessionConfig::default().with_session_id(new_session_id());
        let prepared = client.prepare_session(config).expect("prepare_session");
        let mut events = Recorder::new(prepared.subscribe());
        let session = within("session.create", prepared.start())
            .await
            .expect("session.create");
        within("session.send", session.send(MessageOptions::new("hi")))
            .await
            .expect("session.send");
        let start = provider.next_start().await;
        let chunk = provider.next_chunk().await;
        assert_eq!(start["url"], "http://127.0.0.1:9/v1/chat/completions");
        assert!(start["headers"].get("authorization").is_none(), "{start}");
        assert!(!start.to_string().contains(OPERATOR_KEY));
        assert!(!chunk.to_string().contains(OPERATOR_KEY));
        let rid = request_id(&start);
        assert!(respond_start(&client, &rid, 200).await);
        let answer = format!(
            "{}{}data: [DONE]\n\n",
            sse(
                json!({"role": "assistant", "content": WEATHER_ANSWER}),
                None
            ),
            sse(json!({}), Some("stop"))
        );
        assert!(respond_chunk(&client, &rid, &answer, true).await);
        let turn = events.turn().await;
        assert_eq!(last_message(&turn), WEATHER_ANSWER, "{:?}", types(&turn));
    })
    .await
}

/// A Responses event as one WebSocket message.
fn responses_event(event: Value) -> String {
    event.to_string()
}

/// On the runtime's route, a client that performs a session's model requests is first asked
/// for the route's catalog (`GET {route}/models`); a model served only on `/responses`, and
/// also over a WebSocket (`ws:/responses`) when the server enables it, is then called that
/// way: a `websocket` exchange whose first message is `response.create`, whose response
/// messages are the Responses events, and which agentwire ends once the response completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routes_catalog_picks_responses_over_the_clients_websocket() {
    use agentwire_tokio::agentwire::model::{Secret, ServerDefault};
    sdk_scenarios::bounded(async {
        let route = ServerDefault::copilot_api("http://127.0.0.1:9", Secret::new("gh-route-token"))
            .expect("route");
        let server = Server::new(
            HostConfig::default()
                .with_model_default(Some(route))
                .with_websocket_responses(true),
        );
        let client = connect(&server).await;
        let mut provider = Provider::register(&client).await;
        let config = SessionConfig::default()
            .with_session_id(new_session_id())
            .with_model("ws-model")
            .with_streaming(true);
        let prepared = client.prepare_session(config).expect("prepare_session");
        let mut events = Recorder::new(prepared.subscribe());
        let session = within("session.create", prepared.start())
            .await
            .expect("session.create");
        within("session.send", session.send(MessageOptions::new("hi over a socket")))
            .await
            .expect("session.send");

        // The catalog, through the client.
        let (start, _) = (provider.next_start().await, provider.next_chunk().await);
        assert_eq!(start["method"], "GET");
        assert_eq!(start["url"], "http://127.0.0.1:9/models");
        let rid = request_id(&start);
        assert!(respond_start(&client, &rid, 200).await);
        let catalog = json!({"data": [{"id": "ws-model",
            "supported_endpoints": ["/responses", "ws:/responses"]}]});
        assert!(respond_chunk(&client, &rid, &catalog.to_string(), true).await);

        // The model call: a WebSocket whose first message is `response.create`.
        let start = provider.next_start().await;
        assert_eq!(start["transport"], "websocket");
        assert_eq!(start["url"], "ws://127.0.0.1:9/responses");
        let first = provider.next_chunk().await;
        assert_ne!(first["end"], true, "the socket stays open: {first}");
        let message: Value = serde_json::from_str(first["data"].as_str().unwrap()).unwrap();
        assert_eq!(message["type"], "response.create");
        assert_eq!(message["model"], "ws-model");
        assert!(message["input"].to_string().contains("hi over a socket"));

        let rid = request_id(&start);
        assert!(respond_start(&client, &rid, 101).await);
        for event in [
            json!({"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}}),
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"id": "m1", "type": "message", "role": "assistant", "content": []}}),
            json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                   "delta": "Over the socket."}),
            json!({"type": "response.output_text.done", "output_index": 0, "content_index": 0,
                   "text": "Over the socket."}),
            json!({"type": "response.completed", "response": {"id": "r1", "status": "completed",
                   "output": [{"id": "m1", "type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": "Over the socket."}]}],
                   "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}}}),
        ] {
            assert!(respond_chunk(&client, &rid, &responses_event(event), false).await);
        }
        // The response is complete: agentwire ends its side, which closes the socket.
        let closing = provider.next_chunk().await;
        assert_eq!(closing["requestId"], start["requestId"]);
        assert_eq!(closing["end"], true);
        let turn = events.turn().await;
        assert!(
            turn.iter().all(|e| e.event_type != "session.error"),
            "{:?}",
            types(&turn)
        );
        assert_eq!(last_message(&turn), "Over the socket.");
    })
    .await
}
