//! A session's model configuration, as a client sent it on `session.create` /
//! `session.resume` (secrets stay in memory only: the SDKs send the provider again on every
//! resume).

use serde_json::Value;

use crate::model::{CallConfig, ProviderCatalog, ProviderConfig, ProviderError, ServerDefault};

/// The system prompt agentwire sends (the runtime's own is not copied).
/// (The default prompt is [`super::system_prompt::DEFAULT_SECTIONS`] joined; this is its
/// first section, the preamble.)
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are an AI coding agent hosted by agentwire, a \
runtime for GitHub Copilot SDK apps and ACP editors. You help the user with software \
engineering tasks in their working directory.";

/// How the client adjusted the system prompt (`systemMessage`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SystemMessage {
    /// The default prompt.
    #[default]
    Default,
    /// The default prompt followed by this text (`mode: "append"`, or `customize` content).
    Append(String),
    /// This text instead of the default prompt (`mode: "replace"`).
    Replace(String),
    /// The default sections with overrides, then `content` (`mode: "customize"`; see
    /// [`super::system_prompt`]).
    Customize {
        /// The section overrides, by section id.
        sections: Vec<(String, super::system_prompt::SectionOverride)>,
        /// Text appended after the sections.
        content: String,
    },
}

/// What a session asked of its model: providers, model, prompt and tool filters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelSettings {
    /// `provider`, or `providers[]` + `models[]`; `None` uses the server default.
    pub catalog: Option<ProviderCatalog>,
    /// Providers and models a client added at runtime (`session.provider.add`) to a session
    /// that has a single provider or none (the server default's): its `provider/id` models
    /// are selectable beside that provider's. (A session with `providers[]` gets them in its
    /// catalog.)
    pub registry: Option<ProviderCatalog>,
    /// The session's `model`.
    pub model: Option<String>,
    /// `reasoningEffort`.
    pub reasoning_effort: Option<String>,
    /// `systemMessage`.
    pub system_message: SystemMessage,
    /// `availableTools`: only these tools are offered (`None`: all).
    pub available_tools: Option<Vec<String>>,
    /// `excludedTools`: never offered.
    pub excluded_tools: Vec<String>,
    /// `excludedBuiltinAgents`: built-in agent types the `task` tool does not offer.
    pub excluded_agents: Vec<String>,
    /// `clientName`: named in the `user-agent` of the session's model calls.
    pub client_name: Option<String>,
    /// `sessionLimits.maxAiCredits`: the session's AI-credit limit.
    pub max_ai_credits: Option<u64>,
    /// `enableCitations`: attached documents ask the model for citations.
    pub enable_citations: bool,
    /// `instructionDirectories`: directories whose `.github/instructions/*.instructions.md`
    /// files are the prompt's custom instructions.
    pub instruction_directories: Vec<String>,
    /// `modelCapabilities.supports.vision` (create, resume, `session.model.switchTo`): with
    /// `false` the model is sent no images; unset, images are sent.
    pub vision: Option<bool>,
    /// `infiniteSessions`: background compaction of the conversation.
    pub infinite_sessions: InfiniteSessions,
}

/// The infinite-sessions settings of a session (`infiniteSessions` of create / resume).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InfiniteSessions {
    /// `enabled` (default true).
    pub enabled: bool,
    /// `backgroundCompactionThreshold` (default 0.8).
    pub background_threshold: f64,
}

// The threshold comes from JSON, which has no NaN: equality is total.
impl Eq for InfiniteSessions {}

impl Default for InfiniteSessions {
    fn default() -> Self {
        InfiniteSessions {
            enabled: true,
            background_threshold: 0.8,
        }
    }
}

impl InfiniteSessions {
    /// Reads `infiniteSessions` of create / resume params (absent: the defaults; a threshold
    /// outside (0, 1] is ignored).
    pub fn from_params(params: &Value) -> Self {
        let mut out = InfiniteSessions::default();
        let Some(config) = params.get("infiniteSessions") else {
            return out;
        };
        if let Some(enabled) = config.get("enabled").and_then(Value::as_bool) {
            out.enabled = enabled;
        }
        if let Some(t) = config
            .get("backgroundCompactionThreshold")
            .and_then(Value::as_f64)
            .filter(|t| *t > 0.0 && *t <= 1.0)
        {
            out.background_threshold = t;
        }
        out
    }
}

/// `modelCapabilities.supports.vision` of create / resume / switch params.
pub(crate) fn vision_of(params: &Value) -> Option<bool> {
    params
        .pointer("/modelCapabilities/supports/vision")
        .and_then(Value::as_bool)
}

impl ModelSettings {
    /// Reads the settings from `session.create` / `session.resume` params. A malformed
    /// provider is an error naming the field (never its value).
    pub fn from_params(params: &Value) -> Result<Self, ProviderError> {
        let strings = |key: &str| {
            params.get(key).and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
        };
        let system_message = match params.get("systemMessage") {
            Some(m) => {
                let content = m
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                match m.get("mode").and_then(Value::as_str) {
                    Some("replace") => SystemMessage::Replace(content),
                    Some("customize") => SystemMessage::Customize {
                        sections: super::system_prompt::parse_sections(m.get("sections")),
                        content,
                    },
                    _ if content.is_empty() => SystemMessage::Default,
                    _ => SystemMessage::Append(content),
                }
            }
            None => SystemMessage::Default,
        };
        Ok(ModelSettings {
            catalog: ProviderCatalog::from_session(params)?,
            registry: None,
            model: params
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned),
            reasoning_effort: params
                .get("reasoningEffort")
                .and_then(Value::as_str)
                .map(str::to_owned),
            system_message,
            instruction_directories: strings("instructionDirectories").unwrap_or_default(),
            max_ai_credits: params
                .pointer("/sessionLimits/maxAiCredits")
                .and_then(Value::as_u64),
            enable_citations: params.get("enableCitations") == Some(&Value::Bool(true)),
            vision: vision_of(params),
            infinite_sessions: InfiniteSessions::from_params(params),
            client_name: params
                .get("clientName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
            available_tools: strings("availableTools"),
            excluded_agents: strings("excludedBuiltinAgents").unwrap_or_default(),
            // `defaultAgent.excludedTools` hides tools from the default agent, which is the
            // only agent the model loop runs.
            excluded_tools: strings("excludedTools")
                .unwrap_or_default()
                .into_iter()
                .chain(
                    params
                        .pointer("/defaultAgent/excludedTools")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned),
                )
                .collect(),
        })
    }

    /// The runtime's `<session_limits_status>` message, sent after every prompt of a session
    /// with limits. agentwire counts no credits: the remaining limit is the configured one.
    pub fn session_limits_status(&self) -> Option<String> {
        let credits = self.max_ai_credits?;
        Some(format!(
            "<session_limits_status>\nRemaining session limits: {credits} AI credits. Later \
             session_limits_status messages supersede earlier ones. Be frugal; avoid optional \
             exploration and unnecessary tool calls.\n</session_limits_status>"
        ))
    }

    /// The system prompt to send.
    pub fn system_prompt(&self) -> String {
        self.system_prompt_with(&Default::default())
    }

    /// The system prompt with the client's transformed sections (`systemMessage.transform`).
    pub fn system_prompt_with(
        &self,
        transformed: &std::collections::BTreeMap<String, String>,
    ) -> String {
        use super::system_prompt::{compose, customized_sections};
        match &self.system_message {
            SystemMessage::Default => compose(&customized_sections(&[]), transformed, ""),
            SystemMessage::Append(extra) => compose(&customized_sections(&[]), transformed, extra),
            SystemMessage::Replace(text) => text.clone(),
            SystemMessage::Customize { sections, content } => {
                compose(&customized_sections(sections), transformed, content)
            }
        }
    }

    /// The sections the client transforms, with their current text (`systemMessage.transform`
    /// params); empty when none.
    pub fn transform_requests(&self) -> std::collections::BTreeMap<String, String> {
        match &self.system_message {
            SystemMessage::Customize { sections, .. } => {
                let current = super::system_prompt::customized_sections(sections);
                super::system_prompt::transform_requests(sections, &current)
            }
            _ => Default::default(),
        }
    }

    /// Whether a client tool named `name` may be offered to the model.
    pub fn offers_tool(&self, name: &str) -> bool {
        let matches = |pattern: &String| {
            pattern == name || pattern == "*" || pattern == "custom:*" || {
                pattern.strip_prefix("custom:") == Some(name)
            }
        };
        if self.excluded_tools.iter().any(matches) {
            return false;
        }
        self.available_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(matches))
    }

    /// Whether built-in tool `name` may be offered to the model (`availableTools` /
    /// `excludedTools` entries `NAME`, `builtin:NAME`, `builtin:*` or `*`).
    pub fn offers_builtin(&self, name: &str) -> bool {
        let matches = |pattern: &String| {
            pattern == name
                || pattern == "*"
                || pattern == "builtin:*"
                || pattern.strip_prefix("builtin:") == Some(name)
        };
        if self.excluded_tools.iter().any(matches) {
            return false;
        }
        self.available_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(matches))
    }

    /// Adds `providers` and `models` (`session.provider.add`): to the session's catalog when
    /// it has `providers[]`, else beside its provider ([`ModelSettings::registry`]). Returns
    /// the models added.
    pub fn add_providers(
        &mut self,
        providers: &[Value],
        models: &[Value],
    ) -> Result<Vec<crate::model::ModelInfo>, crate::model::ProviderError> {
        match &mut self.catalog {
            Some(catalog @ ProviderCatalog::Named { .. }) => catalog.add(providers, models),
            _ => self
                .registry
                .get_or_insert_with(ProviderCatalog::empty)
                .add(providers, models),
        }
    }

    /// The models added beside the session's provider ([`ModelSettings::registry`]).
    pub fn registry_models(&self) -> Vec<crate::model::ModelInfo> {
        self.registry
            .as_ref()
            .map(ProviderCatalog::models)
            .unwrap_or_default()
    }

    /// Resolves the provider to call: the session's own, else `default`.
    pub fn resolve(
        &self,
        default: Option<&ServerDefault>,
        call: &CallConfig,
    ) -> Result<ModelSetup, String> {
        let added = self
            .registry
            .as_ref()
            .zip(self.model.as_deref())
            .filter(|(registry, model)| registry.has_model(model));
        let (provider, model) = match (&self.catalog, default) {
            _ if added.is_some() => {
                let (registry, model) = added.expect("checked");
                (
                    registry.select(Some(model)).map_err(|e| e.to_string())?,
                    self.model.clone(),
                )
            }
            (Some(catalog), _) => (
                catalog
                    .select(self.model.as_deref())
                    .map_err(|e| e.to_string())?,
                self.model.clone(),
            ),
            (None, Some(d)) => (
                d.provider.clone(),
                self.model.clone().or_else(|| d.model.clone()),
            ),
            (None, None) => return Err("no model provider is configured".to_owned()),
        };
        Ok(ModelSetup {
            provider,
            model,
            reasoning_effort: self.reasoning_effort.clone(),
            system_prompt: self.system_prompt(),
            call: call.clone(),
            client_name: self.client_name.clone(),
            enable_citations: self.enable_citations,
        })
    }
}

/// A session's model configuration resolved to one provider.
#[derive(Clone, Debug)]
pub struct ModelSetup {
    /// The provider to call.
    pub provider: ProviderConfig,
    /// The session's model name (the provider's `wireModel` / `modelId` take precedence).
    pub model: Option<String>,
    /// `reasoningEffort`.
    pub reasoning_effort: Option<String>,
    /// The system prompt to send.
    pub system_prompt: String,
    /// Deadlines, retries and limits of each call.
    pub call: CallConfig,
    /// The session's `clientName`, named in the calls' `user-agent`.
    pub client_name: Option<String>,
    /// `enableCitations`: attached documents ask the model for citations.
    pub enable_citations: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_default_to_on_at_80_percent_and_ignore_bad_thresholds() {
        let d = InfiniteSessions::from_params(&json!({}));
        assert_eq!(d, InfiniteSessions::default());
        assert!(d.enabled);
        let off = InfiniteSessions::from_params(&json!({"infiniteSessions": {"enabled": false}}));
        assert!(!off.enabled);
        let low = InfiniteSessions::from_params(
            &json!({"infiniteSessions": {"backgroundCompactionThreshold": 0.005}}),
        );
        assert_eq!(low.background_threshold, 0.005);
        let bad = InfiniteSessions::from_params(
            &json!({"infiniteSessions": {"backgroundCompactionThreshold": 7}}),
        );
        assert_eq!(bad.background_threshold, 0.8);
    }

    #[test]
    fn settings_from_create_params() {
        let s = ModelSettings::from_params(&json!({
            "provider": {"type": "openai", "baseUrl": "http://127.0.0.1:1/v1", "apiKey": "sk-x"},
            "model": "m1",
            "systemMessage": {"mode": "append", "content": "Be terse."},
            "excludedTools": ["danger"],
        }))
        .unwrap();
        assert!(s.catalog.is_some());
        assert!(s.system_prompt().ends_with("\n\nBe terse."));
        assert!(!s.offers_tool("danger"));
        assert!(s.offers_tool("weather"));
        let setup = s.resolve(None, &CallConfig::default()).unwrap();
        assert_eq!(setup.model.as_deref(), Some("m1"));
        let replaced = ModelSettings::from_params(&json!({
            "systemMessage": {"mode": "replace", "content": "Only this."},
            "availableTools": ["a"],
        }))
        .unwrap();
        assert_eq!(replaced.system_prompt(), "Only this.");
        assert!(replaced.offers_tool("a") && !replaced.offers_tool("b"));
        assert!(!replaced.offers_builtin("view"));
        let builtins =
            ModelSettings::from_params(&json!({"excludedTools": ["builtin:edit", "bash"]}))
                .unwrap();
        assert!(builtins.offers_builtin("view"));
        assert!(!builtins.offers_builtin("edit") && !builtins.offers_builtin("bash"));
        assert!(replaced.resolve(None, &CallConfig::default()).is_err());
    }

    #[test]
    fn a_bad_provider_names_the_field_not_the_key() {
        let err = ModelSettings::from_params(&json!({
            "provider": {"type": "openai", "apiKey": "sk-secret-value"},
        }))
        .unwrap_err();
        assert!(!err.to_string().contains("sk-secret-value"));
    }
}
