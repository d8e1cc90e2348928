//! Host-owned OAuth for remote MCP servers: the session's clients provide the tokens.
//!
//! A Streamable HTTP server that answers a POST with `401` / `403` and a `Bearer`
//! `WWW-Authenticate` challenge is not failed: the POST is held, the challenge's
//! `resource_metadata` document is fetched (when it names one), and the session is asked with
//! the ephemeral `mcp.oauth_required` event (`{requestId, serverName, serverUrl, reason,
//! wwwAuthenticateParams, resourceMetadata, staticClientConfig, httpResponse}`). A client
//! answers with `session.mcp.oauth.handlePendingRequest {requestId, result}` (the Copilot SDK's
//! `onMcpAuthRequest`): with a token, every held POST is sent again with
//! `Authorization: <tokenType> <token>` (as is every later one); cancelled, the held requests
//! fail with the reason, and a server that never connected is `needs-auth`. Either way
//! `mcp.oauth_completed {requestId, outcome}` follows.
//!
//! Why a token is asked for (`reason`): `initial` when the server has none yet, `upscope` when
//! it refuses one with `insufficient_scope` (a `403`), `refresh` when it refuses one otherwise;
//! a declined `refresh` is asked again as `reauth`. POSTs refused while a request is pending
//! wait for its answer.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::agent::HttpEvent;
use crate::mcp::OAuthClient;
use crate::model::{HttpHeader, HttpMethod, HttpRequest};

use crate::host::Host;

/// Most bytes of a protected-resource metadata document read.
const MAX_METADATA: usize = 64 * 1024;

/// Why a token is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    Initial,
    Refresh,
    Upscope,
    Reauth,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Initial => "initial",
            Reason::Refresh => "refresh",
            Reason::Upscope => "upscope",
            Reason::Reauth => "reauth",
        }
    }
}

/// A POST the server refused with an authorization challenge.
#[derive(Debug)]
pub(crate) struct Challenge {
    /// The response's status (`401` or `403`).
    pub(crate) status: u16,
    /// The response's headers.
    pub(crate) headers: Vec<(String, String)>,
    /// The response's body.
    pub(crate) body: Vec<u8>,
    /// The message the POST carried, to send again.
    pub(crate) frame: Bytes,
    /// The id of the request it carried (a notification carries none).
    pub(crate) request_id: Option<Value>,
}

impl Challenge {
    /// The `WWW-Authenticate` value of a refused POST, if it is a `Bearer` challenge.
    pub(crate) fn bearer(status: u16, headers: &[(String, String)]) -> Option<&str> {
        if status != 401 && status != 403 {
            return None;
        }
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("www-authenticate"))
            .map(|(_, v)| v.as_str())
            .filter(|v| {
                v.get(..6)
                    .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer"))
            })
    }
}

/// The authorization being asked for.
#[derive(Debug)]
struct Pending {
    request_id: String,
    reason: Reason,
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    params: Vec<(String, String)>,
    /// The POSTs waiting for the answer: their message and request id.
    held: Vec<(Bytes, Option<Value>)>,
    /// The metadata fetch in flight: its call, status and body so far.
    metadata: Option<(u64, u16, Vec<u8>)>,
    /// The metadata document, once fetched.
    resource_metadata: Option<String>,
}

/// A server's OAuth state.
#[derive(Debug, Default)]
pub(crate) struct AuthState {
    /// The token a client provided: `(type, token)`.
    token: Option<(String, String)>,
    pending: Option<Pending>,
    /// The OAuth client its configuration names.
    client: Option<OAuthClient>,
    /// The session declined to authorize a server that never connected.
    declined_initial: bool,
}

impl AuthState {
    /// The state of a server whose configuration names `client`.
    pub(crate) fn new(client: Option<OAuthClient>) -> Self {
        AuthState {
            client,
            ..AuthState::default()
        }
    }

    /// The `Authorization` header a POST carries, once a client provided a token.
    pub(crate) fn authorization(&self) -> Option<HttpHeader> {
        let (kind, token) = self.token.as_ref()?;
        Some(HttpHeader::secret(
            "authorization",
            format!("{kind} {token}"),
        ))
    }

    /// Whether `call` is the metadata fetch in flight.
    pub(crate) fn is_metadata_call(&self, call: u64) -> bool {
        self.pending
            .as_ref()
            .and_then(|p| p.metadata.as_ref())
            .is_some_and(|(c, _, _)| *c == call)
    }

    /// Whether the session declined to authorize the server before it ever connected.
    pub(crate) fn declined_initial(&self) -> bool {
        self.declined_initial
    }
}

/// The `key="value"` / `key=value` parameters of a `Bearer` challenge.
fn challenge_params(header: &str) -> Vec<(String, String)> {
    let rest = header.get(6..).unwrap_or_default();
    let mut params = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ','))
            .collect::<String>()
            .trim()
            .to_owned();
        if key.is_empty() {
            break;
        }
        if chars.next_if_eq(&'=').is_none() {
            continue;
        }
        let value = if chars.next_if_eq(&'"').is_some() {
            let mut value = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
            value
        } else {
            std::iter::from_fn(|| chars.next_if(|c| *c != ','))
                .collect::<String>()
                .trim()
                .to_owned()
        };
        params.push((key.to_ascii_lowercase(), value));
    }
    params
}

fn param<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Host-owned OAuth of remote MCP servers.
impl Host {
    /// A POST of `session`'s server `name` was refused with a `Bearer` challenge: it waits for
    /// a token, which the session is asked for unless it already is.
    pub(crate) fn mcp_auth_challenge(&mut self, session: &str, name: &str, challenge: Challenge) {
        let request_id = self.ids.next_uuid();
        let Some(http) = self.mcp_server(session, name).and_then(|s| s.http.as_mut()) else {
            return;
        };
        let auth = &mut http.auth;
        if let Some(pending) = auth.pending.as_mut() {
            pending.held.push((challenge.frame, challenge.request_id));
            return;
        }
        let header = Challenge::bearer(challenge.status, &challenge.headers).unwrap_or_default();
        let params = challenge_params(header);
        let reason = match (&auth.token, challenge.status, param(&params, "error")) {
            (None, _, _) => Reason::Initial,
            (Some(_), 403, _) | (Some(_), _, Some("insufficient_scope")) => Reason::Upscope,
            (Some(_), _, _) => Reason::Refresh,
        };
        let metadata_url = param(&params, "resource_metadata")
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .map(str::to_owned);
        auth.pending = Some(Pending {
            request_id,
            reason,
            status: challenge.status,
            headers: challenge.headers,
            body: challenge.body,
            params,
            held: vec![(challenge.frame, challenge.request_id)],
            metadata: None,
            resource_metadata: None,
        });
        match metadata_url {
            Some(url) => {
                let request = HttpRequest {
                    method: HttpMethod::Get,
                    url,
                    headers: vec![HttpHeader::plain("accept", "application/json")],
                    body: Bytes::new(),
                };
                let call = self.next_effect_id().get();
                if let Some(pending) = self
                    .mcp_server(session, name)
                    .and_then(|s| s.http.as_mut())
                    .and_then(|h| h.auth.pending.as_mut())
                {
                    pending.metadata = Some((call, 0, Vec::new()));
                }
                self.mcp_http_calls
                    .insert(call, (session.to_owned(), name.to_owned()));
                self.http_request(call, request);
            }
            None => self.ask_mcp_auth(session, name),
        }
    }

    /// A report of the metadata fetch of `session`'s server `name`: once it ends (or fails:
    /// the session is asked without the document), the session is asked.
    pub(crate) fn mcp_auth_metadata_input(&mut self, session: &str, name: &str, event: HttpEvent) {
        let Some(pending) = self
            .mcp_server(session, name)
            .and_then(|s| s.http.as_mut())
            .and_then(|h| h.auth.pending.as_mut())
        else {
            return;
        };
        let Some((_, status, body)) = pending.metadata.as_mut() else {
            return;
        };
        match event {
            HttpEvent::Response { status: s, .. } => *status = s,
            HttpEvent::Body(bytes) if body.len() + bytes.len() <= MAX_METADATA => {
                body.extend_from_slice(&bytes)
            }
            HttpEvent::Body(_) => {
                // Too large to be a metadata document: asked without it.
                body.clear();
                *status = 0;
            }
            HttpEvent::End => {
                if (200..300).contains(status) {
                    pending.resource_metadata = String::from_utf8(std::mem::take(body)).ok();
                }
                pending.metadata = None;
                self.ask_mcp_auth(session, name);
            }
            HttpEvent::Error { .. } => {
                pending.metadata = None;
                self.ask_mcp_auth(session, name);
            }
        }
    }

    /// `mcp.oauth_required` for the pending request of `session`'s server `name`.
    fn ask_mcp_auth(&mut self, session: &str, name: &str) {
        let Some(http) = self.mcp_server(session, name).and_then(|s| s.http.as_ref()) else {
            return;
        };
        let Some(pending) = http.auth.pending.as_ref() else {
            return;
        };
        let mut www = serde_json::Map::new();
        for (key, field) in [
            ("resource_metadata", "resourceMetadataUrl"),
            ("scope", "scope"),
            ("error", "error"),
        ] {
            if let Some(value) = param(&pending.params, key) {
                www.insert(field.to_owned(), json!(value));
            }
        }
        let headers: Vec<Value> = pending
            .headers
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v}))
            .collect();
        let mut response = json!({"statusCode": pending.status, "headers": headers});
        if let Ok(body) = std::str::from_utf8(&pending.body) {
            response["body"] = json!(body);
        }
        let mut data = json!({
            "requestId": pending.request_id,
            "serverName": name,
            "serverUrl": http.url(),
            "reason": pending.reason.as_str(),
            "wwwAuthenticateParams": www,
            "httpResponse": response,
        });
        if let Some(metadata) = &pending.resource_metadata {
            data["resourceMetadata"] = json!(metadata);
        }
        if let Some(client) = &http.auth.client {
            data["staticClientConfig"] =
                json!({"clientId": client.client_id, "publicClient": client.public});
        }
        self.emit(session, "mcp.oauth_required", &data, true);
    }

    /// `session.mcp.oauth.handlePendingRequest`: a client's answer to request `request_id`
    /// of `session` (`token`: `(type, token)`, or `None`: declined). `false` when no server of
    /// the session is waiting for it.
    pub(crate) fn resolve_mcp_auth(
        &mut self,
        session: &str,
        request_id: &str,
        token: Option<(String, String)>,
    ) -> bool {
        let name = self.mcp_servers(session).find_map(|s| {
            let pending = s.http.as_ref()?.auth.pending.as_ref()?;
            (pending.request_id == request_id && pending.metadata.is_none())
                .then(|| s.config.name.clone())
        });
        let Some(name) = name else {
            return false;
        };
        let outcome = if token.is_some() {
            "token"
        } else {
            "cancelled"
        };
        self.emit(
            session,
            "mcp.oauth_completed",
            &json!({"requestId": request_id, "outcome": outcome}),
            true,
        );
        let status_pending = self
            .mcp_server(session, &name)
            .is_some_and(|s| s.status == super::McpStatus::Pending);
        let next_request = self.ids.next_uuid();
        let Some(auth) = self
            .mcp_server(session, &name)
            .and_then(|s| s.http.as_mut())
            .map(|h| &mut h.auth)
        else {
            return true;
        };
        let Some(mut pending) = auth.pending.take() else {
            return true;
        };
        match token {
            Some(token) => {
                auth.token = Some(token);
                for (frame, _) in pending.held {
                    self.post_mcp(session, &name, frame);
                }
            }
            // A declined refresh is asked again as a new authorization.
            None if pending.reason == Reason::Refresh => {
                pending.reason = Reason::Reauth;
                pending.request_id = next_request;
                auth.pending = Some(pending);
                self.ask_mcp_auth(session, &name);
            }
            None => {
                auth.declined_initial = pending.reason == Reason::Initial && status_pending;
                let reason = format!("authorization for MCP server '{name}' was declined");
                let now = self.now;
                if let Some(server) = self.mcp_server(session, &name) {
                    for (_, id) in pending.held {
                        let Some(id) = id else { continue };
                        let error = json!({"jsonrpc": "2.0", "id": id,
                                           "error": {"code": -32001, "message": reason}});
                        let mut line = serde_json::to_vec(&error).unwrap_or_default();
                        line.push(b'\n');
                        server.client.handle_stdout(now, &line);
                    }
                }
                self.flush_mcp(session, &name);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_are_read() {
        let header = r#"Bearer resource_metadata="http://a/.well-known/x", scope="mcp.read", error="invalid_token""#;
        let headers = vec![("WWW-Authenticate".to_owned(), header.to_owned())];
        let found = Challenge::bearer(401, &headers).unwrap();
        let params = challenge_params(found);
        assert_eq!(
            param(&params, "resource_metadata"),
            Some("http://a/.well-known/x")
        );
        assert_eq!(param(&params, "scope"), Some("mcp.read"));
        assert_eq!(param(&params, "error"), Some("invalid_token"));
        let bare = challenge_params(r#"Bearer error=invalid_token, realm="a\"b""#);
        assert_eq!(param(&bare, "error"), Some("invalid_token"));
        assert_eq!(param(&bare, "realm"), Some("a\"b"));
        assert!(Challenge::bearer(500, &headers).is_none());
        let basic = vec![("www-authenticate".to_owned(), "Basic realm=x".to_owned())];
        assert!(Challenge::bearer(401, &basic).is_none());
        assert!(challenge_params("Bearer").is_empty());
        assert!(challenge_params("Bearer ,,, =x, y").is_empty());
    }
}
