//! The server's model list: asked of the server default provider (`GET {baseUrl}/models`,
//! or the provider kind's own route: `model::build_models_request`) once, then answered
//! from a cache; when there is no provider, or the provider fails or does not answer in
//! time, the configured model (the server default's `model`) is the list.
//!
//! The dialect shapes the answer: it passes a function that turns the list into its result
//! (so no dialect wording lives here). Requests that arrive while the provider is being
//! asked wait for the same answer.

use std::time::Duration;

use serde_json::Value;

use crate::agent::HttpEvent;
use crate::jsonrpc::OwnedId;
use crate::model::{build_models_request, parse_models_response, ModelInfo};

use super::{ConnId, Host, Output, TimerTarget};

/// Turns a model list into a dialect's result (an empty list: no model is known).
pub(crate) type ModelsReply = fn(&[ModelInfo]) -> Value;

/// How long the provider has to answer before the configured model is used.
const MODELS_TIMEOUT: Duration = Duration::from_secs(10);

/// The cache and the request in flight.
#[derive(Default)]
pub(crate) struct ModelsLists {
    /// The provider's answer, by the URL it came from.
    cache: Option<(String, Vec<ModelInfo>)>,
    fetch: Option<Fetch>,
}

struct Fetch {
    call: u64,
    url: String,
    status: Option<u16>,
    body: Vec<u8>,
    timer: (crate::Timestamp, u64),
    waiters: Vec<(ConnId, OwnedId, ModelsReply)>,
}

/// Most bytes of a model list read.
const MAX_BODY: usize = 4 * 1024 * 1024;

impl Host {
    /// Answers a model-list request `id` of `conn`: at once (`Some`) from the cache or the
    /// configuration, or later (`None`: the response is sent when the provider answered).
    pub(crate) fn list_models(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        reply: ModelsReply,
    ) -> Option<Value> {
        let Some(default) = &self.config.model_default else {
            return Some(reply(&[]));
        };
        let request = match build_models_request(&default.provider, None) {
            Ok(r) => r,
            Err(_) => return Some(reply(&self.configured_models())),
        };
        if let Some((url, models)) = &self.models_lists.cache {
            if *url == request.url {
                return Some(reply(models));
            }
        }
        if let Some(fetch) = &mut self.models_lists.fetch {
            fetch.waiters.push((conn, id.clone(), reply));
            return None;
        }
        let call = self.next_http_call;
        self.next_http_call += 1;
        let at = self.now.saturating_add(MODELS_TIMEOUT);
        let key = (at, self.timer_seq);
        self.timer_seq += 1;
        self.timers.insert(key, TimerTarget::ModelsList(call));
        self.models_lists.fetch = Some(Fetch {
            call,
            url: request.url.clone(),
            status: None,
            body: Vec::new(),
            timer: key,
            waiters: vec![(conn, id.clone(), reply)],
        });
        self.outputs.push_back(Output::HttpRequest {
            call,
            session: String::new(),
            request,
        });
        None
    }

    /// The configured model, as a list.
    fn configured_models(&self) -> Vec<ModelInfo> {
        let model = self.config.model_default.as_ref().and_then(|d| {
            d.model
                .clone()
                .or_else(|| d.provider.wire_model_name(None).map(str::to_owned))
        });
        model
            .into_iter()
            .map(|id| ModelInfo {
                id,
                name: None,
                context_window: None,
            })
            .collect()
    }

    /// The HTTP call of the model-list request in flight.
    pub(super) fn models_lists_call(&self) -> Option<u64> {
        self.models_lists.fetch.as_ref().map(|f| f.call)
    }

    /// Routes an HTTP report for the model-list request; returns whether `call` was it.
    pub(super) fn models_http(&mut self, call: u64, event: HttpEvent) -> bool {
        let Some(fetch) = self.models_lists.fetch.as_mut().filter(|f| f.call == call) else {
            return false;
        };
        match event {
            HttpEvent::Response { status, .. } => fetch.status = Some(status),
            HttpEvent::Body(bytes) => {
                if fetch.body.len() + bytes.len() > MAX_BODY {
                    self.outputs.push_back(Output::HttpCancel { call });
                    self.finish_models(None);
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
                self.finish_models(models);
            }
            HttpEvent::Error { .. } => self.finish_models(None),
        }
        true
    }

    /// The provider did not answer the model list in time.
    pub(super) fn models_list_timed_out(&mut self, call: u64) {
        if self
            .models_lists
            .fetch
            .as_ref()
            .is_some_and(|f| f.call == call)
        {
            self.outputs.push_back(Output::HttpCancel { call });
            self.finish_models(None);
        }
    }

    /// Answers every waiter with the provider's list (cached), or the configured model.
    fn finish_models(&mut self, models: Option<Vec<ModelInfo>>) {
        let Some(fetch) = self.models_lists.fetch.take() else {
            return;
        };
        self.timers.remove(&fetch.timer);
        let list = match models {
            Some(models) => {
                self.models_lists.cache = Some((fetch.url, models.clone()));
                models
            }
            None => self.configured_models(),
        };
        for (conn, id, reply) in fetch.waiters {
            self.respond(conn, &id, Ok(reply(&list)));
        }
    }
}
