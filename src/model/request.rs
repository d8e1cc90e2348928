//! Building the HTTP requests of a model call, per provider, and reading the model list.

use bytes::Bytes;
use serde_json::Value;

use super::conversation::ChatMessage;
use super::error::{ModelError, ModelErrorKind};
use super::http::{HttpHeader, HttpMethod, HttpRequest};
use super::provider::{ProviderConfig, ProviderKind, Secret, WireApi};
use super::{anthropic, openai, responses};

/// One function tool offered to the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its parameters, a JSON Schema object.
    pub parameters: Value,
}

/// Sampling parameters sent with every call. The default is what the real runtime sends
/// (`temperature: 0`, `top_p: 0.95`, both penalties 0); `None` leaves a parameter out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingParams {
    /// `temperature`.
    pub temperature: Option<f64>,
    /// `top_p`.
    pub top_p: Option<f64>,
    /// `frequency_penalty` (OpenAI and Azure only).
    pub frequency_penalty: Option<f64>,
    /// `presence_penalty` (OpenAI and Azure only).
    pub presence_penalty: Option<f64>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: Some(0.0),
            top_p: Some(0.95),
            frequency_penalty: Some(0.0),
            presence_penalty: Some(0.0),
        }
    }
}

/// What to ask the model, provider-neutral.
#[derive(Clone, Debug)]
pub struct ChatRequest<'a> {
    /// The session's `model`, used when the provider names none (`wireModel`, `modelId`).
    pub session_model: Option<&'a str>,
    /// The conversation, system prompt first.
    pub messages: &'a [ChatMessage],
    /// The tools offered.
    pub tools: &'a [ToolSpec],
    /// Sampling parameters.
    pub sampling: SamplingParams,
    /// `reasoningEffort`, sent as `reasoning_effort` (OpenAI / Azure).
    pub reasoning_effort: Option<&'a str>,
    /// A cap on output tokens; Anthropic requires one (default 8192 when `None` and the
    /// provider sets no `maxOutputTokens`).
    pub max_output_tokens: Option<u64>,
    /// Ask for a stream of chunks (`stream: true`, the default) or one JSON completion
    /// (Chat Completions only; Anthropic calls always stream).
    pub stream: bool,
    /// `enableCitations`: documents ask the model for citations (Anthropic's
    /// `citations: {enabled: true}` on each document block).
    pub enable_citations: bool,
}

impl<'a> ChatRequest<'a> {
    /// A request with the runtime's default sampling and no limits.
    pub fn new(
        session_model: Option<&'a str>,
        messages: &'a [ChatMessage],
        tools: &'a [ToolSpec],
    ) -> Self {
        ChatRequest {
            session_model,
            messages,
            tools,
            sampling: SamplingParams::default(),
            reasoning_effort: None,
            max_output_tokens: None,
            stream: true,
            enable_citations: false,
        }
    }
}

/// Which stream format the response of a call is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamDialect {
    /// Chat Completions chunks (OpenAI, Azure and every OpenAI-compatible server).
    OpenAiChat,
    /// Anthropic Messages API events.
    AnthropicMessages,
    /// OpenAI Responses API events (`wireApi: "responses"`, OpenAI and Azure).
    OpenAiResponses,
}

impl StreamDialect {
    /// The dialect `provider` answers in.
    pub fn of(provider: &ProviderConfig) -> Self {
        match (provider.kind, provider.wire_api) {
            (ProviderKind::Anthropic, _) => StreamDialect::AnthropicMessages,
            (ProviderKind::OpenAi | ProviderKind::Azure, WireApi::Completions) => {
                StreamDialect::OpenAiChat
            }
            (ProviderKind::OpenAi | ProviderKind::Azure, WireApi::Responses) => {
                StreamDialect::OpenAiResponses
            }
        }
    }
}

/// The streaming completion request for `req` to `provider`: Chat Completions, the Responses
/// API (`wireApi: "responses"`, OpenAI and Azure) or the Anthropic Messages API.
/// `fetched_token` is the token the owning client returned from `providerToken.getToken`
/// (`hasBearerTokenProvider`); it takes precedence over the configured credentials.
pub fn build_chat_request(
    provider: &ProviderConfig,
    req: &ChatRequest<'_>,
    fetched_token: Option<&Secret>,
) -> Result<HttpRequest, ModelError> {
    let model = provider.wire_model_name(req.session_model).ok_or_else(|| {
        ModelError::new(
            ModelErrorKind::Config,
            "no model to call: set the session's `model` (or the provider's `wireModel` / `modelId`)",
        )
    })?;
    let responses = provider.wire_api == WireApi::Responses;
    let (url, body) = match provider.kind {
        ProviderKind::OpenAi if responses => (
            format!("{}/responses", provider.base_url),
            responses::request_body(model, req),
        ),
        // Azure serves the Responses API on the v1 route, or (older API versions) on
        // `/openai/responses?api-version=`; the deployment is the body's `model` either way.
        ProviderKind::Azure if responses => {
            let url = match &provider.azure_api_version {
                Some(version) => format!(
                    "{}/openai/responses?api-version={version}",
                    azure_root(&provider.base_url)
                ),
                None => format!("{}/openai/v1/responses", azure_root(&provider.base_url)),
            };
            (url, responses::request_body(model, req))
        }
        ProviderKind::OpenAi => (
            format!("{}/chat/completions", provider.base_url),
            openai::request_body(model, req),
        ),
        ProviderKind::Azure => {
            let url = match &provider.azure_api_version {
                Some(version) => format!(
                    "{}/openai/deployments/{}/chat/completions?api-version={}",
                    azure_root(&provider.base_url),
                    percent_encode_segment(model),
                    version
                ),
                None => format!(
                    "{}/openai/v1/chat/completions",
                    azure_root(&provider.base_url)
                ),
            };
            (url, openai::request_body(model, req))
        }
        ProviderKind::Anthropic => (
            anthropic_url(&provider.base_url, "messages"),
            anthropic::request_body(
                model,
                req,
                req.max_output_tokens.or(provider.max_output_tokens),
            ),
        ),
    };
    let mut headers = vec![
        HttpHeader::plain("content-type", "application/json"),
        HttpHeader::plain("accept", "text/event-stream"),
    ];
    auth_headers(provider, fetched_token, &mut headers);
    if responses && provider.transport.as_deref() == Some(WEBSOCKETS) {
        return Ok(websocket_request(url, headers, &body));
    }
    Ok(HttpRequest {
        method: HttpMethod::Post,
        url,
        headers,
        body: Bytes::from(body),
    })
}

/// The `transport` that sends Responses requests over a WebSocket.
pub const WEBSOCKETS: &str = "websockets";

/// The Responses request `body` for `url` sent over a WebSocket instead: a `GET` of the same
/// URL with the `ws` / `wss` scheme whose body is the first message, `{"type":
/// "response.create", …body}`; every message the server sends back is one Responses event
/// (see [`websocket_event_as_sse`]).
fn websocket_request(url: String, headers: Vec<HttpHeader>, body: &[u8]) -> HttpRequest {
    let url = match url.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some((_, rest)) => format!("ws://{rest}"),
        None => url,
    };
    let mut message = serde_json::json!({"type": "response.create"});
    if let (Some(out), Ok(Value::Object(fields))) = (
        message.as_object_mut(),
        serde_json::from_slice::<Value>(body),
    ) {
        for (key, value) in fields {
            // A WebSocket carries the events whatever `stream` says.
            if key != "stream" {
                out.insert(key, value);
            }
        }
    }
    let headers = headers
        .into_iter()
        .filter(|h| !h.name.eq_ignore_ascii_case("accept"))
        .collect();
    HttpRequest {
        method: HttpMethod::Get,
        url,
        headers,
        body: Bytes::from(message.to_string()),
    }
}

/// Whether `request` is a WebSocket exchange (a `ws://` / `wss://` URL): only a client that
/// performs a session's model requests (`llmInference.*`) carries those.
pub fn is_websocket(request: &HttpRequest) -> bool {
    request.url.starts_with("ws://") || request.url.starts_with("wss://")
}

/// One message a Responses WebSocket sent, as the server-sent-events bytes the Responses
/// stream reader takes (`event: TYPE` and `data: MESSAGE`), and whether it ends the response
/// (`response.completed`, `response.failed`, `response.incomplete`, `error`).
pub fn websocket_event_as_sse(message: &[u8]) -> (Vec<u8>, bool) {
    let kind = serde_json::from_slice::<Value>(message)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    let mut out = Vec::with_capacity(message.len() + kind.len() + 16);
    if !kind.is_empty() {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    // One message is one event: a newline inside it would split the `data:` line.
    out.extend(message.iter().map(|&b| if b == b'\n' { b' ' } else { b }));
    out.extend_from_slice(b"\n\n");
    let last = matches!(
        kind.as_str(),
        "response.completed" | "response.failed" | "response.incomplete" | "error"
    );
    (out, last)
}

/// `GET` the provider's model list (`{baseUrl}/models` for OpenAI-compatible servers).
pub fn build_models_request(
    provider: &ProviderConfig,
    fetched_token: Option<&Secret>,
) -> Result<HttpRequest, ModelError> {
    let url = match provider.kind {
        ProviderKind::OpenAi => format!("{}/models", provider.base_url),
        ProviderKind::Azure => match &provider.azure_api_version {
            Some(v) => format!(
                "{}/openai/models?api-version={v}",
                azure_root(&provider.base_url)
            ),
            None => format!("{}/openai/v1/models", azure_root(&provider.base_url)),
        },
        ProviderKind::Anthropic => anthropic_url(&provider.base_url, "models"),
    };
    let mut headers = vec![HttpHeader::plain("accept", "application/json")];
    auth_headers(provider, fetched_token, &mut headers);
    Ok(HttpRequest {
        method: HttpMethod::Get,
        url,
        headers,
        body: Bytes::new(),
    })
}

/// One entry of a provider's model list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    /// The id to send as `model`.
    pub id: String,
    /// A display name, when the provider gives one.
    pub name: Option<String>,
    /// The context window in tokens, when the provider gives one.
    pub context_window: Option<u64>,
    /// The API routes the model is served on, when the provider says (the Copilot API's
    /// `supported_endpoints`: `/chat/completions`, `/responses`, `ws:/responses`, …).
    pub endpoints: Vec<String>,
}

/// Reads a model-list answer: `{"data": [{"id": …}, …]}` (OpenAI, Anthropic, Ollama, vLLM,
/// llama.cpp), also `{"models": […]}` and a bare array. Entries without an id are skipped.
pub fn parse_models_response(body: &[u8]) -> Result<Vec<ModelInfo>, ModelError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ModelError::new(
            ModelErrorKind::MalformedStream,
            format!("the model list is not valid JSON ({e})"),
        )
    })?;
    let list = value
        .get("data")
        .or_else(|| value.get("models"))
        .unwrap_or(&value)
        .as_array()
        .ok_or_else(|| {
            ModelError::new(
                ModelErrorKind::MalformedStream,
                "the model list has no `data` array",
            )
        })?;
    let number =
        |m: &Value, keys: &[&str]| keys.iter().find_map(|k| m.get(*k).and_then(Value::as_u64));
    Ok(list
        .iter()
        .filter_map(|m| {
            let id = m
                .get("id")
                .or_else(|| m.get("model"))
                .or_else(|| m.get("name"))
                .and_then(Value::as_str)?;
            Some(ModelInfo {
                id: id.to_owned(),
                name: m
                    .get("display_name")
                    .or_else(|| m.get("name"))
                    .and_then(Value::as_str)
                    .filter(|n| *n != id)
                    .map(str::to_owned),
                context_window: number(m, &["context_window", "context_length", "max_model_len"]),
                endpoints: crate::jsonrpc::string_array(m.get("supported_endpoints")),
            })
        })
        .collect())
}

/// Credentials: a fetched token or `bearerToken` as `Authorization: Bearer`, else `apiKey`
/// in the provider's header (`Authorization: Bearer` / `api-key` / `x-api-key`); then the
/// custom headers; Anthropic also gets `anthropic-version`.
fn auth_headers(
    provider: &ProviderConfig,
    fetched_token: Option<&Secret>,
    out: &mut Vec<HttpHeader>,
) {
    let bearer = fetched_token.or(provider.bearer_token.as_ref());
    match (bearer, &provider.api_key, provider.kind) {
        (Some(token), _, _) => out.push(HttpHeader::secret(
            "authorization",
            format!("Bearer {}", token.expose()),
        )),
        (None, Some(key), ProviderKind::OpenAi) => out.push(HttpHeader::secret(
            "authorization",
            format!("Bearer {}", key.expose()),
        )),
        (None, Some(key), ProviderKind::Azure) => {
            out.push(HttpHeader::secret("api-key", key.expose()))
        }
        (None, Some(key), ProviderKind::Anthropic) => {
            out.push(HttpHeader::secret("x-api-key", key.expose()))
        }
        (None, None, _) => {}
    }
    if provider.kind == ProviderKind::Anthropic {
        out.push(HttpHeader::plain("anthropic-version", "2023-06-01"));
    }
    for (name, value) in &provider.headers {
        out.push(HttpHeader::secret(name.clone(), value.expose()));
    }
}

/// Azure's base URL is the resource root; tolerate one that already ends in `/openai` or
/// `/openai/v1`.
fn azure_root(base: &str) -> &str {
    base.strip_suffix("/openai/v1")
        .or_else(|| base.strip_suffix("/openai"))
        .unwrap_or(base)
}

/// `{base}/v1/{path}`, or `{base}/{path}` when the base already ends in `/v1`.
fn anthropic_url(base: &str, path: &str) -> String {
    if base.ends_with("/v1") {
        format!("{base}/{path}")
    } else {
        format!("{base}/v1/{path}")
    }
}

fn percent_encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn provider(v: Value) -> ProviderConfig {
        ProviderConfig::from_json(&v).unwrap()
    }

    fn body(r: &HttpRequest) -> Value {
        serde_json::from_slice(&r.body).unwrap()
    }

    fn msgs() -> Vec<ChatMessage> {
        vec![
            ChatMessage::System("s".into()),
            ChatMessage::User("u".into()),
        ]
    }

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "get_weather".into(),
            description: "Get weather for a city".into(),
            parameters: json!({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}),
        }]
    }

    #[test]
    fn openai_request_like_the_runtime() {
        let p = provider(
            json!({"type":"openai","baseUrl":"http://127.0.0.1:18080/v1","apiKey":"sk-fake","headers":{"X-Org":"o"}}),
        );
        let (m, t) = (msgs(), tools());
        let r =
            build_chat_request(&p, &ChatRequest::new(Some("fake-model"), &m, &t), None).unwrap();
        assert_eq!(r.method, HttpMethod::Post);
        assert_eq!(r.url, "http://127.0.0.1:18080/v1/chat/completions");
        assert_eq!(r.header("authorization"), Some("Bearer sk-fake"));
        assert_eq!(r.header("x-org"), Some("o"));
        assert_eq!(r.header("content-type"), Some("application/json"));
        let b = body(&r);
        assert_eq!(b["model"], "fake-model");
        assert_eq!(b["stream"], true);
        assert_eq!(b["stream_options"], json!({"include_usage": true}));
        assert_eq!(b["temperature"], 0.0);
        assert_eq!(b["top_p"], 0.95);
        assert_eq!(b["tools"][0]["type"], "function");
        assert_eq!(b["tools"][0]["function"]["name"], "get_weather");
        assert_eq!(b["messages"][1], json!({"role":"user","content":"u"}));
        assert!(b.get("tool_choice").is_none() && b.get("max_tokens").is_none());
        let text = String::from_utf8(r.body.to_vec()).unwrap();
        assert!(
            text.starts_with(r#"{"model":"fake-model","messages":"#),
            "{text}"
        );
    }

    #[test]
    fn bearer_token_wins_and_fetched_token_wins_over_both() {
        let p = provider(
            json!({"baseUrl":"http://h/v1","apiKey":"k","bearerToken":"b","wireModel":"w"}),
        );
        let m = msgs();
        let req = ChatRequest::new(Some("s"), &m, &[]);
        let r = build_chat_request(&p, &req, None).unwrap();
        assert_eq!(r.header("authorization"), Some("Bearer b"));
        assert_eq!(body(&r)["model"], "w");
        assert!(body(&r).get("tools").is_none(), "no empty tools array");
        let r = build_chat_request(&p, &req, Some(&Secret::new("f"))).unwrap();
        assert_eq!(r.header("authorization"), Some("Bearer f"));
    }

    #[test]
    fn azure_routes() {
        let m = msgs();
        let req = ChatRequest::new(Some("gpt-4o"), &m, &[]);
        let p = provider(
            json!({"type":"azure","baseUrl":"https://x.openai.azure.com","apiKey":"k","azure":{"apiVersion":"2024-10-21"}}),
        );
        let r = build_chat_request(&p, &req, None).unwrap();
        assert_eq!(r.url, "https://x.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21");
        assert_eq!(r.header("api-key"), Some("k"));
        assert_eq!(r.header("authorization"), None);
        let p = provider(
            json!({"type":"azure","baseUrl":"https://x.openai.azure.com/openai/v1","apiKey":"k"}),
        );
        let r = build_chat_request(&p, &req, None).unwrap();
        assert_eq!(
            r.url,
            "https://x.openai.azure.com/openai/v1/chat/completions"
        );
        assert_eq!(body(&r)["model"], "gpt-4o");
        assert_eq!(
            build_models_request(&p, None).unwrap().url,
            "https://x.openai.azure.com/openai/v1/models"
        );
    }

    #[test]
    fn anthropic_request() {
        let m = msgs();
        let t = tools();
        let p = provider(
            json!({"type":"anthropic","baseUrl":"https://api.anthropic.com","apiKey":"sk-ant"}),
        );
        let r = build_chat_request(&p, &ChatRequest::new(Some("claude"), &m, &t), None).unwrap();
        assert_eq!(r.url, "https://api.anthropic.com/v1/messages");
        assert_eq!(r.header("x-api-key"), Some("sk-ant"));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        let b = body(&r);
        assert_eq!(b["system"], "s");
        assert_eq!(b["max_tokens"], 8192);
        assert_eq!(b["tools"][0]["input_schema"]["required"][0], "city");
        let p = provider(json!({"type":"anthropic","baseUrl":"https://proxy/v1"}));
        assert_eq!(
            build_models_request(&p, None).unwrap().url,
            "https://proxy/v1/models"
        );
    }

    #[test]
    fn responses_api_routes() {
        let (m, t) = (msgs(), tools());
        let req = ChatRequest::new(Some("gpt-5"), &m, &t);
        let p = provider(
            json!({"baseUrl":"http://h/v1","wireApi":"responses","apiKey":"k","headers":{"X-Org":"o"}}),
        );
        assert_eq!(StreamDialect::of(&p), StreamDialect::OpenAiResponses);
        let r = build_chat_request(&p, &req, None).unwrap();
        assert_eq!(r.url, "http://h/v1/responses");
        assert_eq!(r.header("authorization"), Some("Bearer k"));
        assert_eq!(r.header("x-org"), Some("o"));
        assert_eq!(r.header("accept"), Some("text/event-stream"));
        let b = body(&r);
        assert_eq!(b["model"], "gpt-5");
        assert_eq!(b["instructions"], "s");
        assert_eq!(b["input"], json!([{"role":"user","content":"u"}]));
        assert_eq!(b["tools"][0]["name"], "get_weather");
        assert_eq!((&b["stream"], &b["store"]), (&json!(true), &json!(false)));
        assert!(b.get("messages").is_none(), "{b}");
        // The model list is asked the same way as with Chat Completions.
        assert_eq!(
            build_models_request(&p, None).unwrap().url,
            "http://h/v1/models"
        );
        // Azure: the v1 route, or the api-version route; the deployment is `model`.
        let p = provider(
            json!({"type":"azure","wireApi":"responses","baseUrl":"https://x.openai.azure.com/openai/v1","apiKey":"k"}),
        );
        assert_eq!(StreamDialect::of(&p), StreamDialect::OpenAiResponses);
        let r = build_chat_request(&p, &req, None).unwrap();
        assert_eq!(r.url, "https://x.openai.azure.com/openai/v1/responses");
        assert_eq!(r.header("api-key"), Some("k"));
        assert_eq!(body(&r)["model"], "gpt-5");
        let p = provider(
            json!({"type":"azure","wireApi":"responses","baseUrl":"https://x.openai.azure.com","azure":{"apiVersion":"2025-04-01-preview"}}),
        );
        assert_eq!(
            build_chat_request(&p, &req, None).unwrap().url,
            "https://x.openai.azure.com/openai/responses?api-version=2025-04-01-preview"
        );
        // Anthropic has one API whatever wireApi says; completions stay Chat Completions.
        let p = provider(
            json!({"type":"anthropic","wireApi":"responses","baseUrl":"https://api.anthropic.com"}),
        );
        assert_eq!(StreamDialect::of(&p), StreamDialect::AnthropicMessages);
        assert_eq!(
            build_chat_request(&p, &req, None).unwrap().url,
            "https://api.anthropic.com/v1/messages"
        );
        let p = provider(json!({"baseUrl":"http://h/v1","wireApi":"completions"}));
        assert_eq!(StreamDialect::of(&p), StreamDialect::OpenAiChat);
    }

    #[test]
    fn a_missing_model_is_a_clear_error() {
        let m = msgs();
        for wire_api in ["completions", "responses"] {
            let p = provider(json!({"baseUrl":"http://h/v1","wireApi":wire_api}));
            let e = build_chat_request(&p, &ChatRequest::new(None, &m, &[]), None).unwrap_err();
            assert_eq!(e.kind, ModelErrorKind::Config);
        }
    }

    #[test]
    fn models_list() {
        let p = provider(json!({"baseUrl":"http://localhost:11434/v1","apiKey":"k"}));
        let r = build_models_request(&p, None).unwrap();
        assert_eq!(
            (r.method, r.url.as_str()),
            (HttpMethod::Get, "http://localhost:11434/v1/models")
        );
        assert_eq!(r.header("authorization"), Some("Bearer k"));
        let list = parse_models_response(br#"{"object":"list","data":[{"id":"qwen3","object":"model","owned_by":"library"},{"id":"claude","display_name":"Claude","context_window":200000},{"object":"model"}]}"#).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(
            list[0],
            ModelInfo {
                id: "qwen3".into(),
                name: None,
                context_window: None,
                endpoints: Vec::new(),
            }
        );
        assert_eq!(list[1].name.as_deref(), Some("Claude"));
        assert_eq!(list[1].context_window, Some(200000));
        assert_eq!(
            parse_models_response(br#"{"models":[{"name":"a"}]}"#).unwrap()[0].id,
            "a"
        );
        assert!(parse_models_response(b"<html>").is_err());
        assert!(parse_models_response(br#"{"data":1}"#).is_err());
    }
}
