//! The model flags: a server default provider for sessions that name none, the runtime's own
//! `COPILOT_API_URL` route, the allow-list for client-chosen base URLs, and the GitHub API
//! that checks sessions' `gitHubToken`s. Environment
//! variables are read here, never in the core.

use agentwire::host::HostConfig;
use agentwire::model::{BaseUrlPolicy, ProviderKind, Secret, ServerDefault};
use clap::{Args, ValueEnum};

use crate::UsageError;

/// Model flags (flattened into the CLI).
#[derive(Args, Debug, Default)]
pub(crate) struct ModelArgs {
    /// Base URL of the model for sessions that send no `provider` (ACP editors, SDK apps
    /// without BYOK), e.g. `http://localhost:11434/v1`; without it (and without
    /// COPILOT_API_URL) such sessions get the scripted agent.
    #[arg(long, value_name = "URL")]
    pub(crate) model_base_url: Option<String>,

    /// Model name for sessions that name none (with --model-base-url or COPILOT_API_URL).
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,

    /// Environment variable holding the API key for --model-base-url (sent as a Bearer
    /// token; the key itself never appears in events, errors or logs).
    #[arg(long, value_name = "VAR")]
    pub(crate) model_api_key_env: Option<String>,

    /// API dialect of --model-base-url.
    #[arg(long, value_enum, default_value_t = ModelProvider::Openai)]
    pub(crate) model_provider: ModelProvider,

    /// Host a client-chosen provider `baseUrl` may reach (repeat the flag; `host`,
    /// `host:port` or `*.domain`); without it every host is allowed.
    #[arg(long, value_name = "HOST")]
    pub(crate) model_allow_host: Vec<String>,

    /// Environment variable holding the token for the COPILOT_API_URL route (default:
    /// COPILOT_SDK_AUTH_TOKEN, then GH_TOKEN, then GITHUB_TOKEN).
    #[arg(long, value_name = "NAME")]
    pub(crate) auth_token_env: Option<String>,

    /// GitHub API that says whose a session's `gitHubToken` is (`GET
    /// URL/copilot_internal/user`; a refused token fails `session.create`). Default: the
    /// runtime's COPILOT_DEBUG_GITHUB_API_URL when set; without either, tokens are kept
    /// unverified.
    #[arg(long, value_name = "URL")]
    pub(crate) github_api_url: Option<String>,

    /// Do not offer the model the built-in tools (view, create, edit, grep, glob, bash);
    /// it then sees only the clients' tools.
    #[arg(long)]
    pub(crate) no_builtin_tools: bool,
}

/// The `--model-provider` choices.
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub(crate) enum ModelProvider {
    /// OpenAI Chat Completions (`{url}/chat/completions`; Ollama, llama.cpp, vLLM...)
    #[default]
    Openai,
    /// Azure OpenAI (versionless v1 route)
    Azure,
    /// Anthropic Messages API
    Anthropic,
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl ModelArgs {
    /// Sets the server default and the base-URL policy in `config`.
    pub(crate) fn apply(&self, config: &mut HostConfig) -> Result<(), UsageError> {
        config.builtin_tools = !self.no_builtin_tools;
        config.github_api_url = self
            .github_api_url
            .clone()
            .or_else(|| env_nonempty("COPILOT_DEBUG_GITHUB_API_URL"));
        if !self.model_allow_host.is_empty() {
            config.model_base_urls = BaseUrlPolicy::AllowHosts(self.model_allow_host.clone());
        }
        if let Some(url) = &self.model_base_url {
            let key = match &self.model_api_key_env {
                Some(var) => Some(Secret::new(env_nonempty(var).ok_or_else(|| {
                    UsageError(format!("--model-api-key-env: {var} is not set"))
                })?)),
                None => None,
            };
            let mut default = ServerDefault::from_flags(url, self.model.clone(), key)
                .map_err(|e| UsageError(format!("--model-base-url: {e}")))?;
            default.provider.kind = match self.model_provider {
                ModelProvider::Openai => ProviderKind::OpenAi,
                ModelProvider::Azure => ProviderKind::Azure,
                ModelProvider::Anthropic => ProviderKind::Anthropic,
            };
            config.model_default = Some(default);
            return Ok(());
        }
        // The runtime's own route, as the SDKs' test harness points a runtime at a model.
        let Some(api_url) = env_nonempty("COPILOT_API_URL") else {
            return Ok(());
        };
        let token = match &self.auth_token_env {
            Some(name) => env_nonempty(name),
            None => ["COPILOT_SDK_AUTH_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"]
                .iter()
                .find_map(|n| env_nonempty(n)),
        };
        if let Some(token) = token {
            let mut default = ServerDefault::copilot_api(&api_url, Secret::new(token))
                .map_err(|e| UsageError(format!("COPILOT_API_URL: {e}")))?;
            default.model = self.model.clone();
            config.model_default = Some(default);
        }
        Ok(())
    }
}
