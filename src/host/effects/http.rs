//! HTTP for model agents: [`EffectOp::HttpRequest`] / [`EffectOp::HttpCancel`] out, the
//! runtime's reports ([`Host::handle_effect`]) in, routed to the session's agent by call id
//! (the exchange's [`EffectId`] number); and the sessions' model settings (which decide
//! whether a session gets a model agent).

use serde_json::Value;

use crate::agent::{AgentInput, HttpEvent, ModelAgent, ModelSettings, ModelSetup};
use crate::model::{HttpRequest, ProviderError, ToolSpec};

use super::provided_http::HttpCall;
use crate::host::{EffectId, EffectOp, Host};

/// HTTP exchanges (the runtime's reports about an [`EffectOp::HttpRequest`]).
impl Host {
    /// A report about exchange `call` (`last`: the exchange ends), routed to whatever
    /// started it.
    pub(crate) fn http_input(&mut self, call: u64, event: HttpEvent, last: bool) {
        if self.mcp_http_calls.contains_key(&call) {
            self.mcp_http_input(call, event, last);
            return;
        }
        if self.sampling_http.contains_key(&call) {
            self.sampling_http_input(call, event, last);
            self.run_agents();
            return;
        }
        if self.is_models_call(call) {
            self.models_http(call, event);
            self.run_agents();
            return;
        }
        if self.is_identity_call(call) {
            self.identity_http(call, event);
            return;
        }
        // An OTLP post's answer changes nothing (a failed post loses its spans).
        if self.telemetry_post_event(call, last) {
            return;
        }
        // Input for an unknown or cancelled exchange, or one a client performs, is ignored.
        if self
            .http_calls
            .get(&call)
            .is_some_and(|c| c.provider.is_none())
        {
            self.route_http_event(call, event, last);
        }
        self.run_agents();
    }

    /// Hands `event` of exchange `call` to its session's agent (`last`: the exchange ends);
    /// a model-list request a client performs goes to its list.
    pub(crate) fn route_http_event(&mut self, call: u64, event: HttpEvent, last: bool) {
        if self.is_models_call(call) {
            if last {
                self.http_calls.remove(&call);
            }
            self.models_http(call, event);
            return;
        }
        let session = if last {
            self.http_calls.remove(&call).map(|c| c.session)
        } else {
            self.http_calls.get(&call).map(|c| c.session.clone())
        };
        if let Some(session) = session {
            self.queue_agent_input(&session, AgentInput::Http { call, event });
        }
    }

    /// Starts an exchange for `session`'s agent (`agent`: for its sub-agent with that
    /// instance id): through a client that provides the session's model transport, else
    /// through the runtime ([`EffectOp::HttpRequest`]).
    pub(crate) fn start_http(
        &mut self,
        session: &str,
        request: HttpRequest,
        agent: Option<&str>,
    ) -> u64 {
        let call = self.next_effect_id().get();
        if self.start_provided_http(call, session, &request, agent) {
            return call;
        }
        self.http_calls.insert(
            call,
            HttpCall {
                session: session.to_owned(),
                provider: None,
                agent: agent.map(str::to_owned),
            },
        );
        self.http_request(call, request);
        call
    }

    /// Hands the runtime exchange `call` (an [`EffectId`] number).
    pub(crate) fn http_request(&mut self, call: u64, request: HttpRequest) {
        self.push_effect(EffectId::new(call), EffectOp::HttpRequest(request));
    }

    /// Tells the runtime to abandon exchange `call`.
    pub(crate) fn http_cancel(&mut self, call: u64) {
        self.push_effect(EffectId::new(call), EffectOp::HttpCancel);
    }

    /// The sub-agent exchange `call` is made for (its instance id), if not the main agent.
    pub(crate) fn http_call_agent(&self, call: u64) -> Option<&str> {
        self.http_calls.get(&call)?.agent.as_deref()
    }

    /// Abandons an exchange (nothing more is routed for it).
    pub(crate) fn cancel_http(&mut self, call: u64) {
        match self.http_calls.remove(&call).map(|c| c.provider) {
            Some(None) => self.http_cancel(call),
            Some(Some(conn)) => self.cancel_provided_http(conn, call),
            None => {}
        }
    }

    /// Reads a session's model settings from `session.create` / `session.resume` params;
    /// a malformed provider, or one the operator's base-URL policy refuses, is an error.
    /// `served_by_client`: a client performs the session's model requests (the runtime
    /// never connects to its base URLs, so the policy does not apply).
    pub(crate) fn model_settings_of(
        &self,
        params: &Value,
        served_by_client: bool,
    ) -> Result<ModelSettings, ProviderError> {
        let settings = ModelSettings::from_params(params)?;
        if served_by_client {
            return Ok(settings);
        }
        if let Some(catalog) = &settings.catalog {
            for provider in catalog.providers() {
                self.config.model_base_urls.check(provider)?;
            }
        }
        Ok(settings)
    }

    /// Keeps a session's model settings: a session that names a provider gets a model agent
    /// (unless its current agent is in a turn).
    pub(crate) fn set_model_settings(&mut self, session: &str, settings: ModelSettings) {
        let busy = self.session_busy(session);
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        if settings.catalog.is_some() && !live.model_agent && !busy {
            live.agent = Some(Box::new(ModelAgent::new()));
            live.model_agent = true;
        }
        // What clients added at runtime stays (a resume names only its own providers).
        let registry = live.model.registry.take();
        live.model = settings;
        if live.model.registry.is_none() {
            live.model.registry = registry;
        }
    }

    /// A client chose `session`'s model (`session.model.switchTo`): its next model calls use
    /// it (a model a client added with `session.provider.add` is called on its provider).
    /// Sets whether the session's model sees images (`modelCapabilities.supports.vision` of
    /// a model switch); `None` leaves it as it is.
    pub(crate) fn set_model_vision(&mut self, session: &str, vision: Option<bool>) {
        if let (Some(live), Some(vision)) = (self.sessions.get_mut(session), vision) {
            live.model.vision = Some(vision);
        }
    }

    pub(crate) fn select_model(&mut self, session: &str, model: &str) {
        let busy = self.session_busy(session);
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        live.model.model = Some(model.to_owned());
        let added = live
            .model
            .registry
            .as_ref()
            .is_some_and(|r| r.has_model(model));
        if added && !live.model_agent && !busy {
            live.agent = Some(Box::new(ModelAgent::new()));
            live.model_agent = true;
        }
    }

    /// Adds providers and models to `session` at runtime (`session.provider.add`): checked
    /// against the operator's base-URL policy unless a client performs the session's model
    /// requests. Returns the models added.
    pub(crate) fn add_session_providers(
        &mut self,
        session: &str,
        providers: &[Value],
        models: &[Value],
        served_by_client: bool,
    ) -> Result<Vec<crate::model::ModelInfo>, ProviderError> {
        if !served_by_client {
            for p in providers {
                let provider = crate::model::ProviderConfig::from_named_json(p)?;
                self.config.model_base_urls.check(&provider)?;
            }
        }
        let Some(live) = self.sessions.get_mut(session) else {
            return Ok(Vec::new());
        };
        live.model.add_providers(providers, models)
    }

    /// The session's model configuration resolved to one provider.
    pub(crate) fn model_setup(&self, session: &str) -> Result<ModelSetup, String> {
        let live = self
            .sessions
            .get(session)
            .ok_or_else(|| "the session is gone".to_owned())?;
        // A resume that names no model keeps the session's (`session.start.selectedModel`).
        let fallback;
        let settings = if live.model.model.is_none() && live.session.model.is_some() {
            fallback = ModelSettings {
                model: live.session.model.clone(),
                ..live.model.clone()
            };
            &fallback
        } else {
            &live.model
        };
        let mut setup =
            settings.resolve(self.config.model_default.as_ref(), &self.config.model_call)?;
        if setup.provider.copilot_api {
            // The runtime's own route: the Copilot API's headers, the session as interaction.
            for (name, value) in
                crate::model::copilot_api_headers(setup.client_name.as_deref(), session)
            {
                setup
                    .provider
                    .headers
                    .push((name.to_owned(), crate::model::Secret::new(value)));
            }
        }
        if !live.system_transformed.is_empty() || !live.instructions.text.is_empty() {
            // The instruction files are the `custom_instructions` section (a client's
            // transform of that section wins).
            let mut sections = live.system_transformed.clone();
            if !live.instructions.text.is_empty() {
                sections
                    .entry("custom_instructions".to_owned())
                    .or_insert_with(|| live.instructions.text.clone());
            }
            setup.system_prompt = settings.system_prompt_with(&sections);
        }
        if setup.model.is_none() && settings.catalog.is_none() {
            if let crate::host::models_list::DefaultChoice::Chosen(model) =
                &self.models_lists.default_choice
            {
                setup.model = Some(model.clone());
            }
        }
        if setup.provider.copilot_api {
            self.choose_route_api(session, &mut setup);
        }
        Ok(setup)
    }

    /// On the runtime's route, the model's `supported_endpoints` (from the route's model
    /// list) choose its API: the Responses API for a model served there and not on
    /// `/chat/completions`, and over a WebSocket (`ws:/responses`) when the server enables it
    /// ([`HostConfig::websocket_responses`](crate::host::HostConfig::websocket_responses)) and a
    /// client performs the session's model requests.
    fn choose_route_api(&self, session: &str, setup: &mut ModelSetup) {
        let Some(info) = setup
            .model
            .as_deref()
            .and_then(|m| self.route_model(session, m))
        else {
            return;
        };
        let serves = |endpoint: &str| info.endpoints.iter().any(|e| e == endpoint);
        if serves("/responses") && !serves("/chat/completions") {
            setup.provider.wire_api = crate::model::WireApi::Responses;
        }
        if setup.provider.wire_api == crate::model::WireApi::Responses
            && serves("ws:/responses")
            && self.config.websocket_responses
            && self.client_serves(session)
        {
            setup.provider.transport = Some(crate::model::WEBSOCKETS.to_owned());
        }
    }

    /// The conversation from the session's persisted events (the main agent's: no
    /// sub-agent's events).
    pub(crate) fn model_history(&self, session: &str) -> Vec<crate::model::ChatMessage> {
        self.agent_model_history(session, None)
    }

    /// The conversation of `agent` (`None`: the main agent) from the session's persisted
    /// events: those that carry its `agentId` (none for the main agent).
    pub(crate) fn agent_model_history(
        &self,
        session: &str,
        agent: Option<&str>,
    ) -> Vec<crate::model::ChatMessage> {
        let Some(live) = self.sessions.get(session) else {
            return Vec::new();
        };
        let mut parsed: Vec<(String, Value)> = live
            .session
            .events()
            .iter()
            .filter(|e| !e.ephemeral)
            .filter_map(|e| {
                let v: Value = serde_json::from_slice(&e.json).ok()?;
                if v.get("agentId").and_then(Value::as_str) != agent {
                    return None;
                }
                Some((
                    e.event_type.clone(),
                    v.get("data").cloned().unwrap_or_default(),
                ))
            })
            .collect();
        compacted(&mut parsed);
        let mut builder =
            crate::model::HistoryBuilder::with_after_prompt(live.model.session_limits_status());
        if live.model.vision == Some(false) {
            builder = builder.without_images();
        }
        for (kind, data) in &parsed {
            builder.push(kind, data);
        }
        builder.finish(None)
    }

    /// The built-in tools offered to the session's model (none when the operator switched
    /// them off).
    pub(crate) fn model_builtin_tools(&self, session: &str) -> Vec<ToolSpec> {
        let Some(live) = self.sessions.get(session) else {
            return Vec::new();
        };
        if !self.config.builtin_tools {
            return Vec::new();
        }
        let mut tools: Vec<ToolSpec> = crate::agent::model_tools::BUILTIN_TOOL_NAMES
            .iter()
            .filter(|name| live.model.offers_builtin(name))
            .filter_map(|name| crate::agent::model_tools::builtin_tool_spec(name))
            .collect();
        let asks_user = live.session.attached.values().any(|a| a.request_user_input);
        if asks_user
            && live
                .model
                .offers_builtin(crate::agent::model_tools::ASK_USER)
        {
            tools.push(crate::agent::model_tools::ask_user_spec());
        }
        let plans = live
            .session
            .attached
            .values()
            .any(|a| a.request_exit_plan_mode);
        if plans
            && live
                .model
                .offers_builtin(crate::agent::model_tools::EXIT_PLAN_MODE)
        {
            tools.push(crate::agent::model_tools::exit_plan_mode_spec());
        }
        let skills = self.enabled_skills(session);
        // Offered whether or not the session has skills, as the runtime offers it.
        if live.model.offers_builtin(crate::agent::model_tools::SKILL) {
            let listed: Vec<(&str, &str)> = skills
                .iter()
                .map(|s| (s.name.as_str(), s.description.as_str()))
                .collect();
            tools.push(crate::agent::model_tools::skill_spec(&listed));
        }
        if self.has_session_database(session)
            && live.model.offers_builtin(crate::agent::sql_tool::SQL)
        {
            tools.push(crate::agent::sql_tool::sql_spec());
        }
        if live.model.offers_builtin(crate::agent::subagent::TASK) {
            let agents: Vec<&str> = crate::agent::subagent::BUILTIN_AGENTS
                .iter()
                .map(|(name, _)| *name)
                .filter(|name| !live.model.excluded_agents.iter().any(|x| x == name))
                .collect();
            if !agents.is_empty() {
                tools.push(crate::agent::subagent::task_spec(&agents));
                tools.push(crate::agent::background::read_agent_spec());
                tools.push(crate::agent::background::list_agents_spec());
            }
        }
        tools
    }

    /// The client tools of the session the model may call (first declaration of a name wins).
    pub(crate) fn model_tools(&self, session: &str) -> Vec<ToolSpec> {
        let Some(live) = self.sessions.get(session) else {
            return Vec::new();
        };
        let mut out: Vec<ToolSpec> = Vec::new();
        for attachment in live.session.attached.values() {
            for tool in &attachment.tools {
                if out.iter().any(|t| t.name == tool.name) || !live.model.offers_tool(&tool.name) {
                    continue;
                }
                out.push(ToolSpec {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: tool
                        .parameters
                        .clone()
                        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
                });
            }
        }
        for tool in self.mcp_tool_specs(session) {
            if !out.iter().any(|t| t.name == tool.name) && live.model.offers_tool(&tool.name) {
                out.push(tool);
            }
        }
        out
    }
}

/// Applies the session's last successful compaction (`session.compaction_complete`) to its
/// events: what came before it is replaced by its summary (as one user message), except the
/// system prompts.
fn compacted(events: &mut Vec<(String, Value)>) {
    let Some(at) = events.iter().rposition(|(t, d)| {
        t == "session.compaction_complete" && d.get("success") == Some(&Value::Bool(true))
    }) else {
        return;
    };
    let summary = events[at]
        .1
        .get("summaryContent")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    // A background compaction (`trigger: "threshold"`) covers the conversation up to its
    // `session.compaction_start`; what came after it (the answer of the call that ran
    // meanwhile) stays. Its summary stands for the earlier messages as the runtime words it.
    let background = events[at].1.get("trigger").and_then(Value::as_str) == Some("threshold");
    let point = if background {
        events[..at]
            .iter()
            .rposition(|(t, _)| t == "session.compaction_start")
            .unwrap_or(at)
    } else {
        at
    };
    let mut kept: Vec<(String, Value)> = events[..point]
        .iter()
        .filter(|(t, _)| t == "system.message")
        .cloned()
        .collect();
    if !summary.is_empty() {
        let content = if background {
            let prompts: Vec<String> = events[..point]
                .iter()
                .filter(|(t, _)| t == "user.message")
                .filter_map(|(_, d)| d.get("content").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            crate::host::sessions::compaction::summary_message(&prompts, &summary)
        } else {
            summary
        };
        kept.push((
            "user.message".to_owned(),
            serde_json::json!({ "content": content }),
        ));
    }
    kept.extend(
        events
            .drain(point + 1..)
            .filter(|(t, _)| t != "session.compaction_complete"),
    );
    *events = kept;
}
