//! Who a GitHub token belongs to, as the runtime finds out: `GET {github_api}/copilot_internal/user`
//! with the token (`Authorization: Bearer`). A session created with its own `gitHubToken`
//! waits for the answer: a good token gives the session its identity (login, Copilot plan), a
//! refused one fails the creation.
//!
//! Answers are kept per token in memory (bounded, [`MAX_KNOWN`]); a lookup in flight is
//! shared by every request naming the same token. The host performs the request as an
//! [`EffectOp::HttpRequest`](super::EffectOp::HttpRequest) and reports its result with
//! [`Host::handle_effect`]; a lookup that gets no answer in [`LOOKUP_TIMEOUT`] fails. Without
//! [`HostConfig::github_api_url`](super::HostConfig::github_api_url) no lookup is possible:
//! the token is then kept unverified.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use indexmap::IndexMap;
use serde_json::Value;

use crate::agent::HttpEvent;
use crate::model::{HttpHeader, HttpMethod, HttpRequest};

use super::{ConnId, Host, TimerTarget};

/// How long the GitHub API has to answer.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(15);

/// Most tokens whose answer is kept (the oldest is dropped first).
const MAX_KNOWN: usize = 256;

/// Most bytes of an answer read.
const MAX_BODY: usize = 256 * 1024;

/// The account a token belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitHubIdentity {
    /// The GitHub login.
    pub login: String,
    /// The Copilot plan (`copilot_plan`), if the API says.
    pub copilot_plan: Option<String>,
    /// The account's quota snapshots as the API gave them (`quota_snapshots`: by quota type,
    /// `entitlement`, `percent_remaining`, `overage_count`, …), if it did.
    pub quota_snapshots: Option<Value>,
    /// When the quotas reset (`quota_reset_date_utc` or `quota_reset_date`), if the API says.
    pub quota_reset_date: Option<String>,
}

/// Where the lookup of one token stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum IdentityLookup {
    /// No GitHub API is configured: the token cannot be checked.
    Unavailable,
    /// Asked; the connections waiting are told when the answer is in
    /// ([`super::DialectHandler::deferred_ready`]).
    Pending,
    /// The token's account.
    Known(GitHubIdentity),
    /// The API refused the token, or did not answer: why.
    Failed(String),
}

/// The answers and the lookups in flight.
#[derive(Default)]
pub(crate) struct GitHubIdentities {
    known: IndexMap<String, Result<GitHubIdentity, String>>,
    fetches: BTreeMap<u64, Fetch>,
}

struct Fetch {
    token: String,
    status: Option<u16>,
    body: Vec<u8>,
    timer: (crate::Timestamp, u64),
    waiters: Vec<ConnId>,
}

impl Host {
    /// The account of `token`: known, failed, or asked now (`conn` is told when the answer
    /// is in).
    pub(crate) fn github_identity(&mut self, token: &str, conn: ConnId) -> IdentityLookup {
        if let Some(known) = self.github_identities.known.get(token) {
            return match known {
                Ok(identity) => IdentityLookup::Known(identity.clone()),
                Err(reason) => IdentityLookup::Failed(reason.clone()),
            };
        }
        let Some(base) = self.config.github_api_url.clone() else {
            return IdentityLookup::Unavailable;
        };
        let identities = &mut self.github_identities;
        if let Some(fetch) = identities.fetches.values_mut().find(|f| f.token == token) {
            if !fetch.waiters.contains(&conn) {
                fetch.waiters.push(conn);
            }
            return IdentityLookup::Pending;
        }
        let call = self.next_effect_id().get();
        let at = self.now.saturating_add(LOOKUP_TIMEOUT);
        let timer = (at, self.timer_seq);
        self.timer_seq += 1;
        self.timers.insert(timer, TimerTarget::GitHubIdentity(call));
        self.github_identities.fetches.insert(
            call,
            Fetch {
                token: token.to_owned(),
                status: None,
                body: Vec::new(),
                timer,
                waiters: vec![conn],
            },
        );
        let request = HttpRequest {
            method: HttpMethod::Get,
            url: format!("{}/copilot_internal/user", base.trim_end_matches('/')),
            headers: vec![
                HttpHeader::secret("authorization", format!("Bearer {token}")),
                HttpHeader::plain("accept", "application/json"),
            ],
            body: Bytes::new(),
        };
        self.http_request(call, request);
        IdentityLookup::Pending
    }

    /// Forgets what is known of `token`: its next lookup asks the API again (a quota is read
    /// fresh).
    pub(crate) fn forget_github_identity(&mut self, token: &str) {
        self.github_identities.known.shift_remove(token);
    }

    /// Whether HTTP call `call` is an identity lookup in flight.
    pub(super) fn is_identity_call(&self, call: u64) -> bool {
        self.github_identities.fetches.contains_key(&call)
    }

    /// Routes an HTTP report of an identity lookup.
    pub(super) fn identity_http(&mut self, call: u64, event: HttpEvent) {
        let Some(fetch) = self.github_identities.fetches.get_mut(&call) else {
            return;
        };
        match event {
            HttpEvent::Response { status, .. } => fetch.status = Some(status),
            HttpEvent::Body(bytes) => {
                if fetch.body.len() + bytes.len() > MAX_BODY {
                    self.http_cancel(call);
                    let reason = "the GitHub API's answer is too large".to_owned();
                    self.finish_identity(call, Err(reason));
                } else {
                    fetch.body.extend_from_slice(&bytes);
                }
            }
            HttpEvent::End => {
                let result = identity_of(fetch.status, &fetch.body);
                self.finish_identity(call, result);
            }
            HttpEvent::Error { message, .. } => {
                let reason = format!("the GitHub API could not be reached: {message}");
                self.finish_identity(call, Err(reason));
            }
        }
    }

    /// An identity lookup got no answer in time.
    pub(super) fn identity_timed_out(&mut self, call: u64) {
        if self.is_identity_call(call) {
            self.http_cancel(call);
            let reason = "the GitHub API did not answer in time".to_owned();
            self.finish_identity(call, Err(reason));
        }
    }

    fn finish_identity(&mut self, call: u64, result: Result<GitHubIdentity, String>) {
        let Some(fetch) = self.github_identities.fetches.remove(&call) else {
            return;
        };
        self.timers.remove(&fetch.timer);
        // A failure to reach the API is not the token's fault: it is not remembered.
        let remember = match &result {
            Ok(_) => true,
            Err(reason) => reason.starts_with("401") || reason.starts_with("403"),
        };
        let known = &mut self.github_identities.known;
        if known.len() >= MAX_KNOWN && !known.contains_key(&fetch.token) {
            known.shift_remove_index(0);
        }
        known.insert(fetch.token.clone(), result);
        for conn in fetch.waiters {
            if let Some(dialect) = self.conns.get(&conn).map(|c| c.dialect) {
                self.dialects[dialect.index()].deferred_ready(self, conn);
            }
        }
        if !remember {
            self.github_identities.known.shift_remove(&fetch.token);
        }
        self.run_agents();
    }
}

/// The account in a `/copilot_internal/user` answer, or why there is none.
fn identity_of(status: Option<u16>, body: &[u8]) -> Result<GitHubIdentity, String> {
    let status = status.unwrap_or(0);
    let message = || {
        serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
    };
    match status {
        200..=299 => {}
        401 => {
            let why = message().unwrap_or_else(|| "Bad credentials".to_owned());
            return Err(format!("401 Unauthorized: {why}"));
        }
        403 => {
            let why = message().unwrap_or_else(|| "Forbidden".to_owned());
            return Err(format!("403 Forbidden: {why}"));
        }
        other => return Err(format!("the GitHub API answered HTTP {other}")),
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the GitHub API's answer is not JSON: {e}"))?;
    let login = value
        .get("login")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .ok_or("the GitHub API's answer names no login")?;
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    Ok(GitHubIdentity {
        login: login.to_owned(),
        copilot_plan: text("copilot_plan"),
        quota_snapshots: value
            .get("quota_snapshots")
            .filter(|q| q.is_object())
            .cloned(),
        quota_reset_date: text("quota_reset_date_utc").or_else(|| text("quota_reset_date")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_and_refusals_named() {
        let ok = identity_of(Some(200), br#"{"login":"alice","copilot_plan":"business"}"#);
        assert_eq!(
            ok,
            Ok(GitHubIdentity {
                login: "alice".into(),
                copilot_plan: Some("business".into()),
                quota_snapshots: None,
                quota_reset_date: None,
            })
        );
        let refused = identity_of(Some(401), br#"{"message":"Bad credentials"}"#).unwrap_err();
        assert_eq!(refused, "401 Unauthorized: Bad credentials");
        assert!(identity_of(Some(200), b"{}").is_err());
        assert!(identity_of(Some(200), b"not json").is_err());
        assert!(identity_of(Some(500), b"")
            .unwrap_err()
            .contains("HTTP 500"));
    }
}
