//! Model lists: asked of a provider (`GET {baseUrl}/models`, or the provider kind's own
//! route: `model::build_models_request`) once, then answered from a cache kept per provider;
//! when there is no provider, or the provider fails or does not answer in time, the
//! configured model(s) are the list.
//!
//! Two askers: the server's list ([`Host::list_models`], the server default provider) and a
//! session's list ([`Host::list_session_models`], the session's own BYOK provider, else the
//! server default). The cache is keyed by the list's URL and a fingerprint of the request's
//! headers (so two credentials for one URL never share an answer); it lives in memory only,
//! holds no credential, and is bounded ([`MAX_CACHED`] providers).
//!
//! The dialect shapes the answer: it passes a function that turns the list into its result
//! (so no dialect wording lives here). Requests that arrive while the provider is being
//! asked wait for the same answer.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::Value;

use crate::agent::HttpEvent;
use crate::correlation::Outcome;
use crate::jsonrpc::OwnedId;
use crate::model::{
    build_models_request, parse_models_response, ModelInfo, ProviderCatalog, ProviderConfig, Secret,
};

use super::dialect::ServerRequest;
use super::pending::ClientCall;
use super::{ConnId, Host, TimerTarget};

/// Turns a model list into a dialect's result (an empty list: no model is known).
pub(crate) type ModelsReply = fn(&[ModelInfo]) -> Value;

/// How long the provider has to answer before the configured model is used.
const MODELS_TIMEOUT: Duration = Duration::from_secs(10);

/// Most providers whose answer is kept (the oldest is dropped first).
const MAX_CACHED: usize = 64;

/// Most bytes of a model list read.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// Which provider a list came from: its URL and a fingerprint of the request's headers
/// (credentials included, so a list fetched with one key is never served to another).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct ListKey {
    url: String,
    identity: u64,
}

/// The caches and the requests in flight.
#[derive(Default)]
pub(crate) struct ModelsLists {
    /// The providers' answers, oldest first.
    cache: IndexMap<ListKey, Vec<ModelInfo>>,
    /// Requests in flight, by HTTP call id.
    fetches: BTreeMap<u64, Fetch>,
    /// The model sessions of the server default get when neither they nor the operator name
    /// one: the first model the default provider lists.
    pub(super) default_choice: DefaultChoice,
}

/// Where the choice of the server default's model stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum DefaultChoice {
    /// Not asked yet.
    #[default]
    Unknown,
    /// The provider's list was asked for (HTTP call id).
    Asking(u64),
    /// The list's first model.
    Chosen(String),
    /// The provider gave no list: the prompts that waited go on without a model (and fail
    /// saying so); the next prompt asks again.
    Failed,
}

struct Fetch {
    key: ListKey,
    /// The provider, while the owning client is asked for its bearer token
    /// (a provider whose token a client supplies): the request goes out when it arrives.
    awaiting_token: Option<Box<ProviderConfig>>,
    status: Option<u16>,
    body: Vec<u8>,
    timer: (crate::Timestamp, u64),
    waiters: Vec<Waiter>,
}

/// Who waits for a provider's list.
enum Waiter {
    /// A client's model-list request, with what it answers if the provider fails.
    Request {
        conn: ConnId,
        id: OwnedId,
        reply: ModelsReply,
        fallback: Vec<ModelInfo>,
        /// Models listed after the provider's (those a client added to the session).
        extra: Vec<ModelInfo>,
    },
    /// The choice of the server default's model: the prompts held for it go on.
    DefaultChoice,
    /// The runtime's route's catalog as the client serving a session sees it (see
    /// [`Host::ask_route_catalog`]): the session's held prompts go on.
    RouteCatalog(String),
}

/// A session's view of the runtime's route's model catalog, when a client performs its model
/// requests.
#[derive(Debug, Default)]
pub(crate) enum RouteCatalog {
    /// Not asked.
    #[default]
    Unknown,
    /// Asked through the client.
    Asking,
    /// The catalog (empty when the client could not give it).
    Known(Vec<ModelInfo>),
}

impl Host {
    /// Answers the server's model-list request `id` of `conn` (the server default provider):
    /// at once (`Some`) from the cache or the configuration, or later (`None`: the response
    /// is sent when the provider answered).
    pub(crate) fn list_models(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        reply: ModelsReply,
    ) -> Option<Value> {
        self.list_default_models(conn, id, false, reply, Vec::new())
    }

    /// Answers a session's model-list request: its own single provider's list, its catalog's
    /// declared models, else the server default's. `refresh` asks the provider again even
    /// when its answer is cached. A provider whose bearer token a client supplies is asked
    /// with the token a client of the session returns
    /// (its answer is cached for that session only). A session whose model requests a
    /// client performs answers its configured model: the runtime never connects for it.
    pub(crate) fn list_session_models(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        session: &str,
        refresh: bool,
        reply: ModelsReply,
    ) -> Option<Value> {
        let Some(live) = self.sessions.get(session) else {
            return Some(reply(&[]));
        };
        // The models a client added (`session.provider.add`) follow the provider's.
        let extra = live.model.registry_models();
        let joined =
            |list: &[ModelInfo]| -> Vec<ModelInfo> { list.iter().chain(&extra).cloned().collect() };
        let provider = match &live.model.catalog {
            None => return self.list_default_models(conn, id, refresh, reply, extra),
            Some(catalog @ ProviderCatalog::Named { .. }) => {
                return Some(reply(&joined(&catalog.models())))
            }
            Some(ProviderCatalog::Single(provider)) => (**provider).clone(),
        };
        let configured: Vec<ModelInfo> = live
            .model
            .model
            .clone()
            .or_else(|| live.session.model.clone())
            .or_else(|| provider.wire_model_name(None).map(str::to_owned))
            .into_iter()
            .map(model_info)
            .collect();
        // A session a client serves skipped the base-URL policy: never connect for it.
        if self.client_serves(session) {
            return Some(reply(&joined(&configured)));
        }
        let token_from = if provider.has_bearer_token_provider {
            // The asker if it answers token requests, else another client of the session.
            let answers = |a: &crate::session::Attachment| a.extension.is_none();
            let attached = &live.session.attached;
            let from = match attached.get(&conn) {
                Some(a) if answers(a) => Some(conn),
                _ => attached.iter().find(|(_, a)| answers(a)).map(|(c, _)| *c),
            };
            match from {
                Some(c) => Some((session.to_owned(), c)),
                None => return Some(reply(&joined(&configured))),
            }
        } else {
            None
        };
        let asked = Asked {
            conn,
            id,
            refresh,
            token_from,
            extra,
        };
        self.list_provider_models(&provider, configured, asked, reply)
    }

    fn list_default_models(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        refresh: bool,
        reply: ModelsReply,
        extra: Vec<ModelInfo>,
    ) -> Option<Value> {
        let Some(default) = &self.config.model_default else {
            return Some(reply(&extra));
        };
        let provider = default.provider.clone();
        let configured = self.configured_models();
        let asked = Asked {
            conn,
            id,
            refresh,
            token_from: None,
            extra,
        };
        self.list_provider_models(&provider, configured, asked, reply)
    }

    /// `provider`'s list: cached, joined to the request in flight, or asked now.
    fn list_provider_models(
        &mut self,
        provider: &ProviderConfig,
        fallback: Vec<ModelInfo>,
        asked: Asked<'_>,
        reply: ModelsReply,
    ) -> Option<Value> {
        let Asked {
            conn,
            id,
            refresh,
            token_from,
            extra,
        } = asked;
        let joined =
            |list: &[ModelInfo]| -> Vec<ModelInfo> { list.iter().chain(&extra).cloned().collect() };
        let request = match build_models_request(provider, None) {
            Ok(r) => r,
            Err(_) => return Some(reply(&joined(&fallback))),
        };
        let key = list_key(
            &request.headers,
            &request.url,
            token_from
                .as_ref()
                .map(|(session, _)| (provider.token_provider_name(), session.as_str())),
        );
        if refresh {
            self.models_lists.cache.shift_remove(&key);
        } else if let Some(models) = self.models_lists.cache.get(&key) {
            return Some(reply(&joined(models)));
        }
        let waiter = Waiter::Request {
            conn,
            id: id.clone(),
            reply,
            fallback,
            extra,
        };
        if let Some(fetch) = self
            .models_lists
            .fetches
            .values_mut()
            .find(|f| f.key == key)
        {
            fetch.waiters.push(waiter);
            return None;
        }
        let awaiting_token = token_from.is_some().then(|| Box::new(provider.clone()));
        let call = self.start_models_fetch(key, awaiting_token, vec![waiter]);
        let Some((session, from)) = token_from else {
            self.http_request(call, request);
            return None;
        };
        let params = serde_json::json!({"providerName": provider.token_provider_name(),
            "sessionId": session, "requestId": self.ids.next_uuid()});
        let sent = self.send_client_call(
            from,
            ServerRequest::ProviderToken,
            &params,
            ClientCall::ModelsToken { call },
        );
        if sent.is_err() {
            self.finish_models(call, None);
        }
        None
    }

    /// Registers a model-list request in flight (its deadline armed) and returns its call id.
    fn start_models_fetch(
        &mut self,
        key: ListKey,
        awaiting_token: Option<Box<ProviderConfig>>,
        waiters: Vec<Waiter>,
    ) -> u64 {
        let call = self.next_effect_id().get();
        let at = self.now.saturating_add(MODELS_TIMEOUT);
        let timer = (at, self.timer_seq);
        self.timer_seq += 1;
        self.timers.insert(timer, TimerTarget::ModelsList(call));
        self.models_lists.fetches.insert(
            call,
            Fetch {
                key,
                awaiting_token,
                status: None,
                body: Vec::new(),
                timer,
                waiters,
            },
        );
        call
    }

    /// The client answered the bearer-token request of model-list request `call`: the
    /// request goes out with the token (never kept), or the configured models answer.
    pub(crate) fn models_token_answered(&mut self, call: u64, outcome: Outcome) {
        let Some(fetch) = self.models_lists.fetches.get_mut(&call) else {
            return;
        };
        let Some(provider) = fetch.awaiting_token.take() else {
            return;
        };
        let token = match outcome {
            Outcome::Result(raw) => serde_json::from_str::<Value>(raw.get())
                .ok()
                .and_then(|v| v.get("token")?.as_str().map(str::to_owned))
                .filter(|t| !t.is_empty())
                .map(Secret::new),
            _ => None,
        };
        let request = token.and_then(|t| build_models_request(&provider, Some(&t)).ok());
        match request {
            Some(request) => self.http_request(call, request),
            None => self.finish_models(call, None),
        }
    }

    /// The server default's configured model, as a list.
    fn configured_models(&self) -> Vec<ModelInfo> {
        let model = self.config.model_default.as_ref().and_then(|d| {
            d.model
                .clone()
                .or_else(|| d.provider.wire_model_name(None).map(str::to_owned))
        });
        model.into_iter().map(model_info).collect()
    }

    /// Whether HTTP call `call` is a model-list request in flight.
    pub(super) fn is_models_call(&self, call: u64) -> bool {
        self.models_lists.fetches.contains_key(&call)
    }

    /// Routes an HTTP report for a model-list request; returns whether `call` was one.
    pub(super) fn models_http(&mut self, call: u64, event: HttpEvent) -> bool {
        let Some(fetch) = self.models_lists.fetches.get_mut(&call) else {
            return false;
        };
        match event {
            HttpEvent::Response { status, .. } => fetch.status = Some(status),
            HttpEvent::Body(bytes) => {
                if fetch.body.len() + bytes.len() > MAX_BODY {
                    self.http_cancel(call);
                    self.finish_models(call, None);
                } else {
                    fetch.body.extend_from_slice(&bytes);
                }
            }
            HttpEvent::End => {
                let ok = fetch.status.is_some_and(|s| (200..300).contains(&s));
                let models = ok
                    .then(|| parse_models_response(&fetch.body).ok())
                    .flatten()
                    .filter(|m| !m.is_empty());
                self.finish_models(call, models);
            }
            HttpEvent::Error { .. } => self.finish_models(call, None),
        }
        true
    }

    /// A provider (or the client asked for its token) did not answer in time.
    pub(super) fn models_list_timed_out(&mut self, call: u64) {
        let Some(fetch) = self.models_lists.fetches.get(&call) else {
            return;
        };
        if fetch.awaiting_token.is_none() {
            self.http_cancel(call);
        }
        self.finish_models(call, None);
    }

    /// Answers every waiter of `call` with the provider's list (cached), or its own
    /// configured models.
    fn finish_models(&mut self, call: u64, models: Option<Vec<ModelInfo>>) {
        let Some(fetch) = self.models_lists.fetches.remove(&call) else {
            return;
        };
        self.timers.remove(&fetch.timer);
        if let Some(models) = &models {
            let cache = &mut self.models_lists.cache;
            if cache.len() >= MAX_CACHED && !cache.contains_key(&fetch.key) {
                cache.shift_remove_index(0);
            }
            cache.insert(fetch.key, models.clone());
        }
        for waiter in fetch.waiters {
            match waiter {
                Waiter::Request {
                    conn,
                    id,
                    reply,
                    fallback,
                    extra,
                } => {
                    let list = models.as_ref().unwrap_or(&fallback);
                    let list: Vec<ModelInfo> = list.iter().chain(&extra).cloned().collect();
                    let result = reply(&list);
                    self.respond(conn, &id, Ok(result));
                }
                Waiter::RouteCatalog(session) => {
                    if let Some(live) = self.sessions.get_mut(&session) {
                        live.route_catalog =
                            RouteCatalog::Known(models.clone().unwrap_or_default());
                    }
                    self.release_held(&session);
                }
                Waiter::DefaultChoice => {
                    self.models_lists.default_choice = match models.as_ref().and_then(|m| m.first())
                    {
                        Some(first) => DefaultChoice::Chosen(first.id.clone()),
                        None => DefaultChoice::Failed,
                    };
                    self.release_gated_sessions();
                }
            }
        }
    }

    /// Whether `session`'s first model call waits for the route's catalog: a client performs
    /// its model requests on the runtime's route, and the catalog (whose
    /// `supported_endpoints` choose the API) is not known yet.
    pub(crate) fn needs_route_catalog(&self, session: &str) -> bool {
        let on_route = self
            .config
            .model_default
            .as_ref()
            .is_some_and(|d| d.provider.copilot_api);
        on_route
            && self.client_serves(session)
            && self.sessions.get(session).is_some_and(|live| {
                live.model_agent
                    && live.model.catalog.is_none()
                    && !matches!(live.route_catalog, RouteCatalog::Known(_))
            })
    }

    /// Asks the client that serves `session` for the route's catalog (`GET {route}/models`
    /// through it, as the runtime asks); `true` while the answer is awaited.
    pub(crate) fn ask_route_catalog(&mut self, session: &str) -> bool {
        if !self.needs_route_catalog(session) {
            return false;
        }
        if self
            .sessions
            .get(session)
            .is_some_and(|l| matches!(l.route_catalog, RouteCatalog::Asking))
        {
            return true;
        }
        let Some(default) = &self.config.model_default else {
            return false;
        };
        let Ok(request) = build_models_request(&default.provider, None) else {
            return false;
        };
        let key = list_key(&request.headers, &request.url, Some((session, "route")));
        let call =
            self.start_models_fetch(key, None, vec![Waiter::RouteCatalog(session.to_owned())]);
        if let Some(live) = self.sessions.get_mut(session) {
            live.route_catalog = RouteCatalog::Asking;
        }
        if !self.start_provided_http(call, session, &request, None) {
            // No client to ask after all: the runtime's own answer will do.
            self.finish_models(call, None);
            return false;
        }
        true
    }

    /// The route's model `id` as `session` sees it: its client's catalog, else the server
    /// default's list.
    pub(crate) fn route_model(&self, session: &str, id: &str) -> Option<&ModelInfo> {
        if let Some(RouteCatalog::Known(models)) =
            self.sessions.get(session).map(|l| &l.route_catalog)
        {
            if let Some(info) = models.iter().find(|m| m.id == id) {
                return Some(info);
            }
        }
        self.default_list_model(id)
    }

    /// Model `id` of the server default's list, when the list was fetched.
    pub(crate) fn default_list_model(&self, id: &str) -> Option<&ModelInfo> {
        let default = self.config.model_default.as_ref()?;
        let request = build_models_request(&default.provider, None).ok()?;
        let key = list_key(&request.headers, &request.url, None);
        self.models_lists
            .cache
            .get(&key)?
            .iter()
            .find(|m| m.id == id)
    }

    /// Asks the server default's provider for its list, to choose the model of the sessions
    /// that name none (see [`DefaultChoice`]). A cached list chooses at once.
    pub(super) fn ask_default_choice(&mut self) {
        // `Failed` asks again: a new prompt after a failed ask.
        if matches!(
            self.models_lists.default_choice,
            DefaultChoice::Asking(_) | DefaultChoice::Chosen(_)
        ) {
            return;
        }
        let Some(default) = &self.config.model_default else {
            return;
        };
        let provider = default.provider.clone();
        let request = match build_models_request(&provider, None) {
            Ok(r) => r,
            Err(_) => {
                self.models_lists.default_choice = DefaultChoice::Failed;
                return;
            }
        };
        let key = list_key(&request.headers, &request.url, None);
        if let Some(first) = self.models_lists.cache.get(&key).and_then(|m| m.first()) {
            self.models_lists.default_choice = DefaultChoice::Chosen(first.id.clone());
            return;
        }
        if let Some((call, fetch)) = self
            .models_lists
            .fetches
            .iter_mut()
            .find(|(_, f)| f.key == key)
        {
            fetch.waiters.push(Waiter::DefaultChoice);
            self.models_lists.default_choice = DefaultChoice::Asking(*call);
            return;
        }
        let call = self.start_models_fetch(key, None, vec![Waiter::DefaultChoice]);
        self.models_lists.default_choice = DefaultChoice::Asking(call);
        self.http_request(call, request);
    }
}

/// Who asked for a list, and how.
struct Asked<'a> {
    conn: ConnId,
    id: &'a OwnedId,
    /// Ask the provider even when its answer is cached.
    refresh: bool,
    /// The session and the client to ask for the provider's bearer token, if it needs one.
    token_from: Option<(String, ConnId)>,
    /// Models listed after the provider's (those a client added to the session).
    extra: Vec<ModelInfo>,
}

/// The cache key of a list request: its URL and a fingerprint of its headers, and of the
/// session whose client supplies the token (a client's token may differ per session: its
/// answer is the session's own).
fn list_key(
    headers: &[crate::model::HttpHeader],
    url: &str,
    token_of: Option<(&str, &str)>,
) -> ListKey {
    let mut hasher = DefaultHasher::new();
    for header in headers {
        (&header.name, &header.value).hash(&mut hasher);
    }
    if let Some(token_of) = token_of {
        token_of.hash(&mut hasher);
    }
    ListKey {
        url: url.to_owned(),
        identity: hasher.finish(),
    }
}

/// A model known only by its id.
fn model_info(id: String) -> ModelInfo {
    ModelInfo {
        id,
        name: None,
        context_window: None,
        endpoints: Vec::new(),
    }
}
