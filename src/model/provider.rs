//! Provider configuration: the session's `provider` object (BYOK), and the server's default.
//!
//! Parsed from the JSON the SDKs send on `session.create` / `session.resume` (schema
//! `ProviderConfig`: `type`, `wireApi`, `transport`, `baseUrl`, `apiKey`, `bearerToken`,
//! `azure.apiVersion`, `modelId`, `wireModel`, `providerName`, `headers`, token limits,
//! `hasBearerTokenProvider`, `modelCapabilities`). Unknown fields are ignored.
//!
//! Credentials are held in [`Secret`]s: `Debug` and `Display` print `<redacted>`, and no error
//! message repeats a field's value (only its name), so a provider can be logged safely.

use std::fmt;

use serde_json::Value;

/// A credential (API key, bearer token, custom header value). Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The credential itself, for building a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The provider's API family (`provider.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ProviderKind {
    /// OpenAI or any OpenAI-compatible server (Ollama, llama.cpp, vLLM, LiteLLM, …).
    #[default]
    OpenAi,
    /// Azure OpenAI (deployment routes, `api-key` header).
    Azure,
    /// The Anthropic Messages API.
    Anthropic,
}

impl ProviderKind {
    /// The name used in `provider.type`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Azure => "azure",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

/// Which OpenAI API the provider speaks (`provider.wireApi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum WireApi {
    /// Chat Completions (`/chat/completions`), the default.
    #[default]
    Completions,
    /// The Responses API (`/responses`, OpenAI and Azure; see [`super::responses`]).
    Responses,
}

/// A provider configuration that could not be used; names the field, never its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderError {
    /// The offending field as the client spells it, e.g. `provider.baseUrl`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ProviderError {
    pub(crate) fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ProviderError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.field, self.reason)
    }
}

impl std::error::Error for ProviderError {}

/// One model provider: where to send model calls, and how to authenticate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderConfig {
    /// The API family.
    pub kind: ProviderKind,
    /// Completions or Responses (OpenAI and Azure only).
    pub wire_api: WireApi,
    /// `transport` (`"http"` / `"websockets"`, Responses only), kept as sent.
    pub transport: Option<String>,
    /// The base URL without a trailing `/`, e.g. `http://localhost:11434/v1`.
    pub base_url: String,
    /// `apiKey`.
    pub api_key: Option<Secret>,
    /// `bearerToken`; takes precedence over `apiKey`.
    pub bearer_token: Option<Secret>,
    /// Extra request headers (`headers`), in the order sent; values are treated as secrets.
    pub headers: Vec<(String, Secret)>,
    /// `wireModel`: the model name sent to the API, before `modelId` and the session model.
    pub wire_model: Option<String>,
    /// `modelId`.
    pub model_id: Option<String>,
    /// `azure.apiVersion`: selects the deployment route with `?api-version=`; without it the
    /// versionless v1 route is used.
    pub azure_api_version: Option<String>,
    /// `hasBearerTokenProvider`: ask the owning client for a token
    /// (`providerToken.getToken`) before each call.
    pub has_bearer_token_provider: bool,
    /// `providerName` (or a named provider's `name`); `"default"` is used when absent.
    pub provider_name: Option<String>,
    /// `maxPromptTokens`.
    pub max_prompt_tokens: Option<u64>,
    /// `maxContextWindowTokens`.
    pub max_context_window_tokens: Option<u64>,
    /// `maxOutputTokens` (sent as `max_tokens` where the API requires one: Anthropic).
    pub max_output_tokens: Option<u64>,
    /// Calls stream whether or not a client wants deltas (a BYOK provider, as the runtime
    /// calls one). `false` for the runtime's own route (`COPILOT_API_URL`): a call streams only
    /// while a client of the session asked for streaming, else the whole completion comes in
    /// one JSON body (its several `choices` are one answer, see `openai.rs`).
    pub streams_always: bool,
    /// The runtime's own route (`COPILOT_API_URL`, [`ServerDefault::copilot_api`]): calls
    /// carry the Copilot API's headers ([`copilot_api_headers`]).
    pub copilot_api: bool,
}

/// `Copilot-Integration-Id` of calls on the runtime's own route.
pub const COPILOT_INTEGRATION_ID: &str = "copilot-developer-cli";
/// `X-GitHub-Api-Version` of calls on the runtime's own route.
pub const COPILOT_API_VERSION: &str = "2025-05-01";

/// The headers a call on the runtime's own route carries besides `Authorization`, in the
/// order sent: the integration id, the API version, the `User-Agent` (the client's name when
/// the session has one) and the session's interaction id.
pub fn copilot_api_headers(
    client_name: Option<&str>,
    interaction_id: &str,
) -> [(&'static str, String); 4] {
    let agent = match client_name {
        Some(name) => format!("{name} (agentwire; Copilot API)"),
        None => format!("agentwire/{} (Copilot API)", env!("CARGO_PKG_VERSION")),
    };
    [
        ("Copilot-Integration-Id", COPILOT_INTEGRATION_ID.to_owned()),
        ("X-GitHub-Api-Version", COPILOT_API_VERSION.to_owned()),
        ("User-Agent", agent),
        ("X-Interaction-Id", interaction_id.to_owned()),
    ]
}

impl ProviderConfig {
    /// Parses the session's `provider` object (`field` prefixes error messages).
    pub fn from_json(value: &Value) -> Result<Self, ProviderError> {
        parse(value, "provider")
    }

    /// Parses one entry of `providers[]` (a named provider: `name` is required, without `/`).
    pub fn from_named_json(value: &Value) -> Result<Self, ProviderError> {
        let provider = parse(value, "providers[]")?;
        match provider.provider_name.as_deref() {
            None | Some("") => Err(ProviderError::new("providers[].name", "is required")),
            Some(name) if name.contains('/') => Err(ProviderError::new(
                "providers[].name",
                "must not contain '/'",
            )),
            Some(_) => Ok(provider),
        }
    }

    /// An OpenAI-compatible provider at `base_url` (for server defaults and tests).
    pub fn openai_compatible(
        base_url: &str,
        api_key: Option<Secret>,
    ) -> Result<Self, ProviderError> {
        Ok(ProviderConfig {
            kind: ProviderKind::OpenAi,
            wire_api: WireApi::Completions,
            transport: None,
            base_url: check_base_url(base_url, "baseUrl")?,
            api_key,
            bearer_token: None,
            headers: Vec::new(),
            wire_model: None,
            model_id: None,
            azure_api_version: None,
            has_bearer_token_provider: false,
            provider_name: None,
            max_prompt_tokens: None,
            max_context_window_tokens: None,
            max_output_tokens: None,
            streams_always: true,
            copilot_api: false,
        })
    }

    /// The model name to send: `wireModel` → `modelId` → the session's `model`.
    pub fn wire_model_name<'a>(&'a self, session_model: Option<&'a str>) -> Option<&'a str> {
        self.wire_model
            .as_deref()
            .or(self.model_id.as_deref())
            .or(session_model)
            .filter(|m| !m.is_empty())
    }

    /// The `providerName` for `providerToken.getToken`: the configured name or `"default"`.
    pub fn token_provider_name(&self) -> &str {
        self.provider_name.as_deref().unwrap_or("default")
    }

    /// The host part of the base URL (lower-case, without port or user info).
    pub fn host(&self) -> &str {
        url_host(&self.base_url)
    }
}

/// Where sessions without a `provider` send their model calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerDefault {
    /// The provider (OpenAI-compatible).
    pub provider: ProviderConfig,
    /// The model to use when the session names none.
    pub model: Option<String>,
    /// Where the default came from.
    pub source: ServerDefaultSource,
}

/// How the server default was configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerDefaultSource {
    /// Operator flags (`--model-base-url`, `--model`, an API key from an env var).
    Flags,
    /// The runtime's own route: `COPILOT_API_URL` plus a token (as the SDKs' test harness
    /// points a runtime at a model); `GET {url}/models` lists the models.
    CopilotApi,
}

impl ServerDefault {
    /// A default from operator flags: an OpenAI-compatible `base_url`, optional model and key.
    pub fn from_flags(
        base_url: &str,
        model: Option<String>,
        api_key: Option<Secret>,
    ) -> Result<Self, ProviderError> {
        Ok(ServerDefault {
            provider: ProviderConfig::openai_compatible(base_url, api_key)?,
            model,
            source: ServerDefaultSource::Flags,
        })
    }

    /// The runtime's own route: `{api_url}/chat/completions` with `Authorization: Bearer
    /// <token>`.
    pub fn copilot_api(api_url: &str, token: Secret) -> Result<Self, ProviderError> {
        let mut provider = ProviderConfig::openai_compatible(api_url, None)?;
        provider.bearer_token = Some(token);
        provider.streams_always = false;
        provider.copilot_api = true;
        Ok(ServerDefault {
            provider,
            model: None,
            source: ServerDefaultSource::CopilotApi,
        })
    }
}

/// Which hosts client-chosen base URLs may reach (an operator allow-list).
///
/// Entries are host names (`localhost`, `api.openai.com`), optionally with a port
/// (`127.0.0.1:11434`) or a leading wildcard label (`*.openai.azure.com`). Matching is
/// ASCII case-insensitive. An empty list allows nothing; use [`BaseUrlPolicy::AllowAll`] to
/// allow everything.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum BaseUrlPolicy {
    /// Every host may be reached.
    #[default]
    AllowAll,
    /// Only these hosts.
    AllowHosts(Vec<String>),
}

impl BaseUrlPolicy {
    /// Whether `provider`'s base URL may be used; the error names the host and the flag.
    pub fn check(&self, provider: &ProviderConfig) -> Result<(), ProviderError> {
        let BaseUrlPolicy::AllowHosts(hosts) = self else {
            return Ok(());
        };
        let host = url_host(&provider.base_url).to_ascii_lowercase();
        let host = host.as_str();
        let host_port = url_host_port(&provider.base_url);
        let allowed = hosts.iter().any(|entry| {
            let entry = entry.to_ascii_lowercase();
            if let Some(suffix) = entry.strip_prefix("*.") {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix)
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            } else if entry.contains(':') && !entry.starts_with('[') {
                entry == host_port
            } else {
                entry == host
            }
        });
        if allowed {
            Ok(())
        } else {
            Err(ProviderError::new(
                "provider.baseUrl",
                format!("the host {host} is not in the server's allow-list of model hosts"),
            ))
        }
    }
}

fn url_authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    authority.rsplit_once('@').map_or(authority, |(_, a)| a)
}

fn url_host_port(url: &str) -> String {
    url_authority(url).to_ascii_lowercase()
}

/// The host of `url` without port or user info (IPv6 keeps its brackets).
pub(crate) fn url_host(url: &str) -> &str {
    let authority = url_authority(url);
    if authority.starts_with('[') {
        return authority.find(']').map_or(authority, |i| &authority[..=i]);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

fn check_base_url(url: &str, field: &str) -> Result<String, ProviderError> {
    let url = url.trim();
    let lower = url.to_ascii_lowercase();
    let rest = if let Some(r) = lower.strip_prefix("http://") {
        r
    } else if let Some(r) = lower.strip_prefix("https://") {
        r
    } else {
        return Err(ProviderError::new(
            field,
            "must start with http:// or https://",
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(ProviderError::new(field, "has no host"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ProviderError::new(
            field,
            "must not contain spaces or control characters",
        ));
    }
    if url.contains(['?', '#']) {
        return Err(ProviderError::new(
            field,
            "must not contain a query or fragment",
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn parse(v: &Value, prefix: &str) -> Result<ProviderConfig, ProviderError> {
    let obj = v
        .as_object()
        .ok_or_else(|| ProviderError::new(prefix, "must be an object"))?;
    let field = |name: &str| format!("{prefix}.{name}");
    let string = |name: &str| -> Result<Option<String>, ProviderError> {
        match obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ProviderError::new(field(name), "must be a string")),
        }
    };
    let number = |name: &str| -> Result<Option<u64>, ProviderError> {
        match obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(n) => n
                .as_u64()
                .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
                .map(Some)
                .ok_or_else(|| ProviderError::new(field(name), "must be a non-negative number")),
        }
    };
    let kind = match string("type")?.as_deref() {
        None | Some("openai") => ProviderKind::OpenAi,
        Some("azure") => ProviderKind::Azure,
        Some("anthropic") => ProviderKind::Anthropic,
        Some(_) => {
            return Err(ProviderError::new(
                field("type"),
                "must be one of openai, azure, anthropic",
            ))
        }
    };
    let wire_api = match string("wireApi")?.as_deref() {
        None | Some("completions") => WireApi::Completions,
        Some("responses") => WireApi::Responses,
        Some(_) => {
            return Err(ProviderError::new(
                field("wireApi"),
                "must be completions or responses",
            ))
        }
    };
    let base_url =
        string("baseUrl")?.ok_or_else(|| ProviderError::new(field("baseUrl"), "is required"))?;
    let base_url = check_base_url(&base_url, &field("baseUrl"))?;
    let secret = |name: &str| -> Result<Option<Secret>, ProviderError> {
        Ok(string(name)?.filter(|s| !s.is_empty()).map(Secret))
    };
    let mut headers = Vec::new();
    match obj.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, value) in map {
                if name.is_empty() || !name.bytes().all(is_token_char) {
                    return Err(ProviderError::new(
                        field("headers"),
                        "has a header name that is not a valid HTTP token",
                    ));
                }
                let Some(value) = value.as_str() else {
                    return Err(ProviderError::new(
                        format!("{prefix}.headers.{name}"),
                        "must be a string",
                    ));
                };
                if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                    return Err(ProviderError::new(
                        format!("{prefix}.headers.{name}"),
                        "must not contain CR, LF or NUL",
                    ));
                }
                headers.push((name.clone(), Secret(value.to_owned())));
            }
        }
        Some(_) => return Err(ProviderError::new(field("headers"), "must be an object")),
    }
    let azure_api_version = match obj.get("azure") {
        None | Some(Value::Null) => None,
        Some(Value::Object(a)) => match a.get("apiVersion") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => {
                if !s
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
                {
                    return Err(ProviderError::new(
                        field("azure.apiVersion"),
                        "must contain only letters, digits, '-' and '.'",
                    ));
                }
                Some(s.clone())
            }
            Some(Value::String(_)) => None,
            Some(_) => {
                return Err(ProviderError::new(
                    field("azure.apiVersion"),
                    "must be a string",
                ))
            }
        },
        Some(_) => return Err(ProviderError::new(field("azure"), "must be an object")),
    };
    let has_bearer_token_provider = match obj.get("hasBearerTokenProvider") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(ProviderError::new(
                field("hasBearerTokenProvider"),
                "must be a boolean",
            ))
        }
    };
    let provider_name = string("providerName")?.or(string("name")?);
    Ok(ProviderConfig {
        kind,
        wire_api,
        transport: string("transport")?,
        base_url,
        api_key: secret("apiKey")?,
        bearer_token: secret("bearerToken")?,
        headers,
        wire_model: string("wireModel")?.filter(|s| !s.is_empty()),
        model_id: string("modelId")?.filter(|s| !s.is_empty()),
        azure_api_version,
        has_bearer_token_provider,
        provider_name,
        max_prompt_tokens: number("maxPromptTokens")?,
        max_context_window_tokens: number("maxContextWindowTokens")?,
        max_output_tokens: number("maxOutputTokens")?,
        streams_always: true,
        copilot_api: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_provider_the_sdk_sends() {
        // wire.jsonl:9
        let p = ProviderConfig::from_json(
            &json!({"type":"openai","baseUrl":"http://127.0.0.1:18080/v1","apiKey":"sk-fake"}),
        )
        .unwrap();
        assert_eq!(p.kind, ProviderKind::OpenAi);
        assert_eq!(p.base_url, "http://127.0.0.1:18080/v1");
        assert_eq!(p.api_key.as_ref().map(Secret::expose), Some("sk-fake"));
        assert_eq!(p.wire_model_name(Some("fake-model")), Some("fake-model"));
        assert_eq!(p.token_provider_name(), "default");
    }

    #[test]
    fn every_field() {
        let p = ProviderConfig::from_json(&json!({
            "type": "azure", "wireApi": "completions", "baseUrl": "https://x.openai.azure.com/",
            "bearerToken": "tok", "apiKey": "key", "headers": {"X-Team": "t1"},
            "wireModel": "w", "modelId": "m", "azure": {"apiVersion": "2024-10-21"},
            "hasBearerTokenProvider": true, "providerName": "corp", "maxOutputTokens": 512,
            "maxPromptTokens": 1000, "maxContextWindowTokens": 2000, "transport": "http",
            "modelCapabilities": {"supports": {}}
        }))
        .unwrap();
        assert_eq!(p.kind, ProviderKind::Azure);
        assert_eq!(p.base_url, "https://x.openai.azure.com");
        assert_eq!(p.azure_api_version.as_deref(), Some("2024-10-21"));
        assert_eq!(p.wire_model_name(Some("s")), Some("w"));
        assert!(p.has_bearer_token_provider);
        assert_eq!(p.token_provider_name(), "corp");
        assert_eq!(p.max_output_tokens, Some(512));
        assert_eq!(p.headers[0].0, "X-Team");
        let mut p2 = p.clone();
        p2.wire_model = None;
        assert_eq!(p2.wire_model_name(Some("s")), Some("m"));
        p2.model_id = None;
        assert_eq!(p2.wire_model_name(Some("s")), Some("s"));
        assert_eq!(p2.wire_model_name(None), None);
    }

    #[test]
    fn debug_and_errors_never_show_secrets() {
        let v = json!({"baseUrl":"http://h/v1","apiKey":"sk-secret-1","bearerToken":"bt-secret-2",
                       "headers":{"X-Key":"hv-secret-3"}});
        let p = ProviderConfig::from_json(&v).unwrap();
        let text = format!("{p:?}");
        for s in ["sk-secret-1", "bt-secret-2", "hv-secret-3"] {
            assert!(!text.contains(s), "{text}");
        }
        let bad = ProviderConfig::from_json(&json!({"baseUrl":"ftp://sk-secret-4","apiKey":5}))
            .unwrap_err();
        assert!(!bad.to_string().contains("sk-secret-4"), "{bad}");
        let bad =
            ProviderConfig::from_json(&json!({"baseUrl":"http://h","headers":{"X":"a\r\nb"}}))
                .unwrap_err();
        assert!(!bad.to_string().contains("a\r\nb"));
        assert_eq!(format!("{}", Secret::new("x")), "<redacted>");
    }

    #[test]
    fn rejections_name_the_field() {
        let cases = [
            (json!({}), "provider.baseUrl"),
            (json!({"baseUrl": "localhost:11434"}), "provider.baseUrl"),
            (
                json!({"baseUrl": "http://h", "type": "gemini"}),
                "provider.type",
            ),
            (
                json!({"baseUrl": "http://h", "wireApi": "x"}),
                "provider.wireApi",
            ),
            (
                json!({"baseUrl": "http://h", "headers": []}),
                "provider.headers",
            ),
            (
                json!({"baseUrl": "http://h", "headers": {"a b": "c"}}),
                "provider.headers",
            ),
            (
                json!({"baseUrl": "http://h", "azure": {"apiVersion": "1&x=2"}}),
                "provider.azure.apiVersion",
            ),
            (
                json!({"baseUrl": "http://h", "hasBearerTokenProvider": "yes"}),
                "provider.hasBearerTokenProvider",
            ),
            (json!("http://h"), "provider"),
        ];
        for (v, f) in cases {
            assert_eq!(ProviderConfig::from_json(&v).unwrap_err().field, f, "{v}");
        }
        assert!(ProviderConfig::from_named_json(&json!({"baseUrl":"http://h"})).is_err());
        assert!(
            ProviderConfig::from_named_json(&json!({"baseUrl":"http://h","name":"a/b"})).is_err()
        );
        assert!(ProviderConfig::from_named_json(&json!({"baseUrl":"http://h","name":"a"})).is_ok());
    }

    #[test]
    fn server_defaults() {
        let d = ServerDefault::from_flags("http://localhost:11434/v1/", Some("qwen3".into()), None)
            .unwrap();
        assert_eq!(d.provider.base_url, "http://localhost:11434/v1");
        assert_eq!(d.source, ServerDefaultSource::Flags);
        let c = ServerDefault::copilot_api("http://127.0.0.1:9/api", Secret::new("gh")).unwrap();
        assert_eq!(
            c.provider.bearer_token.as_ref().map(Secret::expose),
            Some("gh")
        );
        assert_eq!(c.source, ServerDefaultSource::CopilotApi);
    }

    #[test]
    fn allow_list_matches_hosts_ports_and_wildcards() {
        let policy = BaseUrlPolicy::AllowHosts(vec![
            "localhost".into(),
            "127.0.0.1:11434".into(),
            "*.openai.azure.com".into(),
        ]);
        let ok = |url: &str| {
            policy
                .check(&ProviderConfig::openai_compatible(url, None).unwrap())
                .is_ok()
        };
        assert!(ok("http://LOCALHOST:8080/v1"));
        assert!(ok("http://127.0.0.1:11434/v1"));
        assert!(!ok("http://127.0.0.1:8080/v1"));
        assert!(ok("https://x.openai.azure.com"));
        assert!(!ok("https://openai.azure.com"));
        assert!(!ok("https://evil.com/x.openai.azure.com"));
        assert!(!ok("https://localhost@evil.com/v1"));
        assert!(BaseUrlPolicy::AllowAll
            .check(&ProviderConfig::openai_compatible("http://x", None).unwrap())
            .is_ok());
    }
}
