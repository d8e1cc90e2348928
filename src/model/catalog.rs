//! The session's model providers: the singular `provider`, or the experimental
//! `providers[]` + `models[]` pair (a model is selected as `provider/id`; combining them with
//! `provider` is rejected, as the SDK documents).

use serde_json::Value;

use super::provider::{ProviderConfig, ProviderError};
use super::request::ModelInfo;

/// One entry of `models[]` (`ProviderModelConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogModel {
    /// `id`, unique within its provider.
    pub id: String,
    /// `provider`: the `name` of an entry of `providers[]`.
    pub provider: String,
    /// `wireModel`.
    pub wire_model: Option<String>,
    /// `modelId`.
    pub model_id: Option<String>,
    /// `name` (display).
    pub name: Option<String>,
    /// `maxPromptTokens`.
    pub max_prompt_tokens: Option<u64>,
    /// `maxContextWindowTokens`.
    pub max_context_window_tokens: Option<u64>,
    /// `maxOutputTokens`.
    pub max_output_tokens: Option<u64>,
}

impl CatalogModel {
    /// The id clients select it by: `provider/id`.
    pub fn qualified_id(&self) -> String {
        format!("{}/{}", self.provider, self.id)
    }
}

/// The providers a session may call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderCatalog {
    /// `provider`: one provider; the model name comes from it or the session's `model`.
    Single(Box<ProviderConfig>),
    /// `providers[]` + `models[]`.
    Named {
        /// The providers.
        providers: Vec<ProviderConfig>,
        /// The models, in the order given.
        models: Vec<CatalogModel>,
    },
}

impl ProviderCatalog {
    /// Reads `provider` / `providers` / `models` from `session.create` or `session.resume`
    /// params; `None` when the session names no provider (the server default applies).
    pub fn from_session(params: &Value) -> Result<Option<Self>, ProviderError> {
        let present = |k: &str| params.get(k).is_some_and(|v| !v.is_null());
        let (single, named) = (
            present("provider"),
            present("providers") || present("models"),
        );
        if single && named {
            return Err(ProviderError {
                field: "providers".into(),
                reason: "cannot be combined with provider".into(),
            });
        }
        if single {
            return ProviderConfig::from_json(&params["provider"])
                .map(|p| Some(Self::Single(Box::new(p))));
        }
        if !named {
            return Ok(None);
        }
        let array = |k: &str| -> Result<&[Value], ProviderError> {
            match params.get(k) {
                None | Some(Value::Null) => Ok(&[]),
                Some(Value::Array(a)) => Ok(a),
                Some(_) => Err(ProviderError {
                    field: k.into(),
                    reason: "must be an array".into(),
                }),
            }
        };
        let providers = array("providers")?
            .iter()
            .map(ProviderConfig::from_named_json)
            .collect::<Result<Vec<_>, _>>()?;
        let models = array("models")?
            .iter()
            .map(|m| parse_model(m, &providers))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Self::Named { providers, models }))
    }

    /// A named catalog with nothing in it yet (providers are added at runtime).
    pub fn empty() -> Self {
        Self::Named {
            providers: Vec::new(),
            models: Vec::new(),
        }
    }

    /// Adds `providers` and `models` (as `session.provider.add` sends them) to a named
    /// catalog: a provider's name must be new, a model must name a provider of the catalog or
    /// of this call, and its `provider/id` must be new. Nothing is added when one is not.
    /// Returns the models added, as [`ProviderCatalog::models`] lists them.
    pub fn add(
        &mut self,
        providers: &[Value],
        models: &[Value],
    ) -> Result<Vec<ModelInfo>, ProviderError> {
        let Self::Named {
            providers: known_providers,
            models: known_models,
        } = self
        else {
            return Err(ProviderError::new(
                "providers",
                "cannot be added to a session with a single provider",
            ));
        };
        let mut all = known_providers.clone();
        for p in providers {
            let provider = ProviderConfig::from_named_json(p)?;
            if all
                .iter()
                .any(|k| k.provider_name == provider.provider_name)
            {
                return Err(ProviderError::new(
                    "providers[].name",
                    format!(
                        "{} is already registered",
                        provider.provider_name.as_deref().unwrap_or_default()
                    ),
                ));
            }
            all.push(provider);
        }
        let mut added: Vec<CatalogModel> = Vec::new();
        for m in models {
            let model = parse_model(m, &all)?;
            let id = model.qualified_id();
            if known_models
                .iter()
                .chain(&added)
                .any(|k| k.qualified_id() == id)
            {
                return Err(ProviderError::new(
                    "models[]",
                    format!("{id} is already registered"),
                ));
            }
            added.push(model);
        }
        *known_providers = all;
        known_models.extend(added.iter().cloned());
        Ok(added.iter().map(model_info).collect())
    }

    /// Whether `model` (a `provider/id`) is one of the catalog's models.
    pub fn has_model(&self, model: &str) -> bool {
        match self {
            Self::Single(_) => false,
            Self::Named { models, .. } => models.iter().any(|m| m.qualified_id() == model),
        }
    }

    /// The provider to call for the session's `model`, with the model name to send folded
    /// into its `wire_model` for catalog models (`wireModel` → `modelId` → `id`). For a single
    /// provider the model name is resolved later ([`ProviderConfig::wire_model_name`]).
    /// Without a model, a catalog selects its first model.
    pub fn select(&self, model: Option<&str>) -> Result<ProviderConfig, ProviderError> {
        let (providers, models) = match self {
            Self::Single(p) => return Ok((**p).clone()),
            Self::Named { providers, models } => (providers, models),
        };
        let entry = match model {
            None => models.first(),
            Some(wanted) => models
                .iter()
                .find(|m| m.qualified_id() == wanted)
                .or_else(|| {
                    let mut same_id = models.iter().filter(|m| m.id == wanted);
                    match (same_id.next(), same_id.next()) {
                        (Some(m), None) => Some(m),
                        _ => None,
                    }
                }),
        }
        .ok_or_else(|| ProviderError {
            field: "model".into(),
            reason: match model {
                Some(m) => format!("{m} is not one of the session's models"),
                None => "the session lists no models".into(),
            },
        })?;
        let mut provider = providers
            .iter()
            .find(|p| p.provider_name.as_deref() == Some(entry.provider.as_str()))
            .cloned()
            .expect("checked when parsed");
        provider.wire_model = Some(
            entry
                .wire_model
                .clone()
                .or_else(|| entry.model_id.clone())
                .unwrap_or_else(|| entry.id.clone()),
        );
        provider.max_prompt_tokens = entry.max_prompt_tokens.or(provider.max_prompt_tokens);
        provider.max_context_window_tokens = entry
            .max_context_window_tokens
            .or(provider.max_context_window_tokens);
        provider.max_output_tokens = entry.max_output_tokens.or(provider.max_output_tokens);
        Ok(provider)
    }

    /// Every provider the catalog may call.
    pub fn providers(&self) -> Vec<&ProviderConfig> {
        match self {
            Self::Single(p) => vec![&**p],
            Self::Named { providers, .. } => providers.iter().collect(),
        }
    }

    /// The catalog's models for `models.list` (`provider/id`); empty for a single provider,
    /// whose list comes from its `GET /models`.
    pub fn models(&self) -> Vec<ModelInfo> {
        match self {
            Self::Single(_) => Vec::new(),
            Self::Named { models, .. } => models.iter().map(model_info).collect(),
        }
    }
}

/// A catalog model as `models.list` lists it.
fn model_info(m: &CatalogModel) -> ModelInfo {
    ModelInfo {
        id: m.qualified_id(),
        name: m.name.clone(),
        context_window: m.max_context_window_tokens,
        endpoints: Vec::new(),
    }
}

/// One entry of `models[]`, whose `provider` must name one of `providers`.
fn parse_model(m: &Value, providers: &[ProviderConfig]) -> Result<CatalogModel, ProviderError> {
    let text = |k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let number = |k: &str| m.get(k).and_then(Value::as_u64);
    let (Some(id), Some(provider)) = (text("id"), text("provider")) else {
        return Err(ProviderError {
            field: "models[]".into(),
            reason: "each model needs an id and a provider".into(),
        });
    };
    if !providers
        .iter()
        .any(|p| p.provider_name.as_deref() == Some(provider.as_str()))
    {
        return Err(ProviderError {
            field: "models[].provider".into(),
            reason: format!("names no entry of providers: {provider}"),
        });
    }
    Ok(CatalogModel {
        id,
        provider,
        wire_model: text("wireModel"),
        model_id: text("modelId"),
        name: text("name"),
        max_prompt_tokens: number("maxPromptTokens").or_else(|| {
            m.pointer("/capabilities/limits/maxPromptTokens")
                .and_then(Value::as_u64)
        }),
        max_context_window_tokens: number("maxContextWindowTokens").or_else(|| {
            m.pointer("/capabilities/limits/maxContextWindowTokens")
                .and_then(Value::as_u64)
        }),
        max_output_tokens: number("maxOutputTokens").or_else(|| {
            m.pointer("/capabilities/limits/maxOutputTokens")
                .and_then(Value::as_u64)
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn single_provider_and_none() {
        let c = ProviderCatalog::from_session(
            &json!({"provider": {"baseUrl": "http://h/v1"}, "model": "m"}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.select(Some("m")).unwrap().base_url, "http://h/v1");
        assert_eq!(
            ProviderCatalog::from_session(&json!({"model": "m"})).unwrap(),
            None
        );
    }

    #[test]
    fn named_providers_and_models() {
        let params = json!({
            "providers": [
                {"name": "local", "baseUrl": "http://localhost:11434/v1"},
                {"name": "corp", "type": "azure", "baseUrl": "https://x.openai.azure.com", "apiKey": "k"}
            ],
            "models": [
                {"id": "qwen", "provider": "local", "wireModel": "qwen3:8b"},
                {"id": "gpt", "provider": "corp", "name": "GPT", "maxOutputTokens": 99}
            ]
        });
        let c = ProviderCatalog::from_session(&params).unwrap().unwrap();
        let p = c.select(Some("corp/gpt")).unwrap();
        assert_eq!(
            (p.wire_model.as_deref(), p.max_output_tokens),
            (Some("gpt"), Some(99))
        );
        assert_eq!(p.base_url, "https://x.openai.azure.com");
        let p = c.select(None).unwrap();
        assert_eq!(p.wire_model.as_deref(), Some("qwen3:8b"));
        assert_eq!(
            c.select(Some("qwen")).unwrap().provider_name.as_deref(),
            Some("local")
        );
        assert_eq!(c.select(Some("nope")).unwrap_err().field, "model");
        let ids: Vec<String> = c.models().into_iter().map(|m| m.id).collect();
        assert_eq!(ids, ["local/qwen", "corp/gpt"]);
    }

    #[test]
    fn rejections() {
        let both = json!({"provider": {"baseUrl": "http://h"}, "providers": []});
        assert_eq!(
            ProviderCatalog::from_session(&both).unwrap_err().field,
            "providers"
        );
        let dangling = json!({"providers": [{"name": "a", "baseUrl": "http://h"}], "models": [{"id": "m", "provider": "b"}]});
        assert_eq!(
            ProviderCatalog::from_session(&dangling).unwrap_err().field,
            "models[].provider"
        );
        let unnamed = json!({"providers": [{"baseUrl": "http://h"}]});
        assert_eq!(
            ProviderCatalog::from_session(&unnamed).unwrap_err().field,
            "providers[].name"
        );
    }
}
