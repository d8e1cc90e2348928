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
use crate::jsonrpc::OwnedId;

use super::methods::Reply;
use super::surface::failed;
use super::ConnState;

/// The GitHub account a session runs as (its `gitHubToken`'s).
#[derive(Debug, Default)]
struct SessionAuth {
    /// The account, when the token was checked.
    identity: Option<GitHubIdentity>,
    /// The session has a token that could not be checked (no GitHub API configured).
    unverified: bool,
}

/// A `session.create` waiting for its token's lookup.
#[derive(Debug)]
pub(super) struct WaitingCreate {
    id: OwnedId,
    params: Box<RawValue>,
}

/// `session.create`, with its `gitHubToken` checked first (when it has one).
pub(super) fn create(
    host: &mut Host,
    conn: ConnId,
    id: &OwnedId,
    params: Option<&RawValue>,
) -> Reply {
    let token = params
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .and_then(|p| {
            p.get("gitHubToken")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return Some(super::methods::create(host, conn, params));
    };
    let auth = match host.github_identity(&token, conn) {
        IdentityLookup::Pending => {
            if let (Some(state), Some(params)) = (host.conn_state::<ConnState>(conn), params) {
                state.waiting_creates.push(WaitingCreate {
                    id: id.clone(),
                    params: params.to_owned(),
                });
            }
            return None;
        }
        IdentityLookup::Failed(why) => {
            return Some(Err(failed(
                "session.create",
                format!("GitHub authentication failed for the session's gitHubToken: {why}"),
            )))
        }
        IdentityLookup::Known(identity) => SessionAuth {
            identity: Some(identity),
            unverified: false,
        },
        IdentityLookup::Unavailable => SessionAuth {
            identity: None,
            unverified: true,
        },
    };
    let result = super::methods::create(host, conn, params);
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

/// A token lookup of `conn` finished: its waiting creations go on (or wait again for
/// another token).
pub(super) fn deferred_ready(host: &mut Host, conn: ConnId) {
    let waiting = match host.conn_state::<ConnState>(conn) {
        Some(state) => std::mem::take(&mut state.waiting_creates),
        None => return,
    };
    for w in waiting {
        if let Some(answer) = create(host, conn, &w.id, Some(&w.params)) {
            host.respond(conn, &w.id, answer);
        }
    }
}

/// `session.gitHubAuth.getStatus`: the session's account.
pub(super) fn session_status(host: &Host, session: &str) -> Value {
    match host.session_state_ref::<SessionAuth>(session) {
        Some(SessionAuth {
            identity: Some(identity),
            ..
        }) => {
            let mut status = json!({
                "isAuthenticated": true,
                "authType": "token",
                "login": identity.login,
                "statusMessage": format!("Authenticated as {}", identity.login),
            });
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
