//! GitHub identities: a session created with its own `gitHubToken` is created once the host
//! knows whose the token is ([`Host::github_identity`]); a refused token fails
//! `session.create`. `session.gitHubAuth.getStatus` reports the session's account, and
//! `auth.getStatus` the server's own standing.
//!
//! While a token is looked up, its `session.create` waits in the connection's state and is
//! answered when the host reports the lookup done ([`deferred_ready`]).

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::{ConnId, GitHubIdentity, Host, IdentityLookup};
use crate::jsonrpc::{ErrorObject, OwnedId};

use super::method_table::{Call, Reply};
use super::surface::failed;
use super::ConnState;

/// The GitHub account a session runs as (its `gitHubToken`'s, or the credentials a client
/// installed with `session.gitHubAuth.setCredentials`).
#[derive(Debug, Default)]
struct SessionAuth {
    /// The account, when the token was checked or a client named it.
    identity: Option<GitHubIdentity>,
    /// The session has a token that could not be checked (no GitHub API configured).
    unverified: bool,
    /// Credentials a client installed: their `type` and `host`.
    installed: Option<(String, String)>,
}

/// A `session.create` waiting for its token's lookup.
#[derive(Debug)]
pub(super) struct WaitingCreate {
    id: OwnedId,
    method: &'static str,
    params: Box<RawValue>,
}

/// The non-empty `gitHubToken` of params.
fn github_token(params: Option<&RawValue>) -> Option<String> {
    params
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .and_then(|p| {
            p.get("gitHubToken")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .filter(|t| !t.is_empty())
}

/// `session.create`, with its `gitHubToken` checked first (when it has one).
pub(super) fn create(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let (conn, method) = (call.conn, call.method);
    let token = github_token(params);
    let Some(token) = token else {
        return Some(super::methods::create(host, conn, method, params));
    };
    let auth = match host.github_identity(&token, conn) {
        IdentityLookup::Pending => {
            if let (Some(state), Some(params)) = (host.conn_state::<ConnState>(conn), params) {
                state.waiting_creates.push(WaitingCreate {
                    id: call.id.clone(),
                    method,
                    params: params.to_owned(),
                });
            }
            return None;
        }
        IdentityLookup::Failed(why) => {
            return Some(Err(failed(
                method,
                format!("GitHub authentication failed for the session's gitHubToken: {why}"),
            )))
        }
        IdentityLookup::Known(identity) => SessionAuth {
            identity: Some(identity),
            ..SessionAuth::default()
        },
        IdentityLookup::Unavailable => SessionAuth {
            unverified: true,
            ..SessionAuth::default()
        },
    };
    let result = super::methods::create(host, conn, method, params);
    if let Some(session) = result
        .as_ref()
        .ok()
        .and_then(|r| r.get("sessionId"))
        .and_then(Value::as_str)
    {
        if let Some(state) = host.session_state::<SessionAuth>(session) {
            *state = auth;
        }
    }
    Some(result)
}

/// An `account.getQuota` waiting for its token's fresh lookup.
#[derive(Debug)]
pub(super) struct WaitingQuota {
    id: OwnedId,
    token: String,
}

/// `account.getQuota {gitHubToken}`: the token's account quotas, read fresh from the GitHub
/// API (`/copilot_internal/user`'s `quota_snapshots`), in the SDK's shape.
pub(super) fn get_quota(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let token = github_token(params);
    let Some(token) = token else {
        return Some(Err(failed(
            call.method,
            "a gitHubToken is needed: this server keeps no signed-in GitHub account",
        )));
    };
    host.forget_github_identity(&token);
    quota_answer(host, call.conn, call.id, call.method, token)
}

/// The quota answer for `token`, or `None` while its lookup is in flight (answered by
/// [`deferred_ready`]).
fn quota_answer(host: &mut Host, conn: ConnId, id: &OwnedId, method: &str, token: String) -> Reply {
    match host.github_identity(&token, conn) {
        IdentityLookup::Pending => {
            if let Some(state) = host.conn_state::<ConnState>(conn) {
                state.waiting_quotas.push(WaitingQuota {
                    id: id.clone(),
                    token,
                });
            }
            None
        }
        IdentityLookup::Failed(why) => Some(Err(failed(
            method,
            format!("the GitHub API refused the token: {why}"),
        ))),
        IdentityLookup::Unavailable => Some(Err(failed(
            method,
            "account quotas need the GitHub API, and none is configured \
             (--github-api-url or COPILOT_DEBUG_GITHUB_API_URL)",
        ))),
        IdentityLookup::Known(identity) => Some(Ok(json!({
            "quotaSnapshots": quota_snapshots(&identity),
        }))),
    }
}

/// The SDK's `quotaSnapshots` from the API's `quota_snapshots`.
fn quota_snapshots(identity: &GitHubIdentity) -> Value {
    let mut out = serde_json::Map::new();
    let Some(snapshots) = identity.quota_snapshots.as_ref().and_then(Value::as_object) else {
        return Value::Object(out);
    };
    for (kind, s) in snapshots {
        let number = |k: &str| s.get(k).and_then(Value::as_f64);
        let flag = |k: &str| s.get(k).and_then(Value::as_bool).unwrap_or(false);
        let unlimited = flag("unlimited");
        let entitlement = number("entitlement").unwrap_or(0.0);
        let percent = number("percent_remaining").unwrap_or(if unlimited { 100.0 } else { 0.0 });
        let used = match number("remaining") {
            Some(remaining) => (entitlement - remaining).max(0.0),
            None => (entitlement * (100.0 - percent) / 100.0).round().max(0.0),
        };
        let overage_permitted = flag("overage_permitted");
        let mut snapshot = json!({
            "isUnlimitedEntitlement": unlimited,
            "entitlementRequests": if unlimited { -1.0 } else { entitlement },
            "usedRequests": used,
            "usageAllowedWithExhaustedQuota": overage_permitted || unlimited,
            "remainingPercentage": percent,
            "overage": number("overage_count").unwrap_or(0.0),
            "overageAllowedWithExhaustedQuota": overage_permitted,
        });
        let reset = identity.quota_reset_date.clone().or_else(|| {
            s.get("timestamp_utc")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        if let Some(reset) = reset {
            snapshot["resetDate"] = json!(reset);
        }
        out.insert(kind.clone(), snapshot);
    }
    Value::Object(out)
}

/// A token lookup of `conn` finished: its waiting creations and quota requests go on (or
/// wait again for another token).
pub(super) fn deferred_ready(host: &mut Host, conn: ConnId) {
    let quotas = match host.conn_state::<ConnState>(conn) {
        Some(state) => std::mem::take(&mut state.waiting_quotas),
        None => return,
    };
    for w in quotas {
        if let Some(answer) = quota_answer(host, conn, &w.id, "account.getQuota", w.token) {
            host.respond(conn, &w.id, answer);
        }
    }
    let waiting = match host.conn_state::<ConnState>(conn) {
        Some(state) => std::mem::take(&mut state.waiting_creates),
        None => return,
    };
    for w in waiting {
        let call = Call {
            conn,
            id: &w.id,
            method: w.method,
        };
        if let Some(answer) = create(host, &call, Some(&w.params)) {
            host.respond(conn, &w.id, answer);
        }
    }
}

/// `session.gitHubAuth.getStatus`: the session's account.
pub(super) fn session_status(host: &Host, session: &str) -> Value {
    match host.session_state_ref::<SessionAuth>(session) {
        Some(SessionAuth {
            identity: Some(identity),
            installed,
            ..
        }) => {
            let mut status = json!({
                "isAuthenticated": true,
                "authType": "token",
                "login": identity.login,
                "statusMessage": format!("Authenticated as {}", identity.login),
            });
            if let Some((kind, github)) = installed {
                status["authType"] = json!(kind);
                status["host"] = json!(github);
            }
            if let Some(plan) = &identity.copilot_plan {
                status["copilotPlan"] = json!(plan);
            }
            status
        }
        Some(SessionAuth {
            unverified: true, ..
        }) => json!({
            "isAuthenticated": false,
            "authType": "token",
            "statusMessage": "The session's gitHubToken was not verified (no GitHub API is configured)",
        }),
        _ => json!({"isAuthenticated": false, "statusMessage": "Not authenticated"}),
    }
}

/// `session.gitHubAuth.setCredentials {credentials: {type, host, login, copilotUser?}}`: the
/// client installs the account the session runs as (as a host that signed its user in
/// does); `getStatus` reports it. Nothing is verified: the client vouches for it.
pub(super) fn set_credentials(
    host: &mut Host,
    session: &str,
    p: &Value,
) -> Result<Value, ErrorObject> {
    let invalid = |what: &str| {
        ErrorObject::new(
            crate::jsonrpc::code::INVALID_PARAMS,
            format!("invalid params: {what}"),
        )
    };
    let credentials = p
        .get("credentials")
        .filter(|c| c.is_object())
        .ok_or_else(|| invalid("missing object field `credentials`"))?;
    let text = |k: &str| {
        credentials
            .get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let login = text("login")
        .or_else(|| {
            credentials
                .pointer("/copilotUser/login")
                .and_then(Value::as_str)
        })
        .ok_or_else(|| invalid("`credentials` names no `login`"))?;
    let kind = text("type").unwrap_or("user");
    let github = text("host").unwrap_or("https://github.com");
    let plan = credentials
        .pointer("/copilotUser/copilot_plan")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let auth = SessionAuth {
        identity: Some(GitHubIdentity {
            login: login.to_owned(),
            copilot_plan: plan,
            quota_snapshots: None,
            quota_reset_date: None,
        }),
        unverified: false,
        installed: Some((kind.to_owned(), github.to_owned())),
    };
    if let Some(state) = host.session_state::<SessionAuth>(session) {
        *state = auth;
    }
    Ok(json!({"success": true}))
}

/// `auth.getStatus`: the server's own standing. With the runtime's route it runs on the
/// GitHub token from its environment; otherwise its models (BYOK, the scripted agent) need
/// no GitHub sign-in, so nothing stands in a client's way: authenticated, and the message
/// says why (no login is claimed).
pub(super) fn server_status(host: &Host) -> Value {
    let has_token = host
        .config()
        .model_default
        .as_ref()
        .is_some_and(|d| d.source == crate::model::ServerDefaultSource::CopilotApi);
    if has_token {
        json!({"isAuthenticated": true, "authType": "env",
               "statusMessage": "Authenticated with a GitHub token from the environment"})
    } else {
        json!({"isAuthenticated": true, "authType": "api-key",
               "statusMessage": "No GitHub sign-in needed: this server's models need no GitHub account"})
    }
}
