//! The Streamable HTTP transport of MCP over the host's HTTP outputs.
//!
//! Every message the client writes is one `POST` ([`EffectOp::HttpRequest`]) to the server's
//! URL with `Content-Type: application/json`, `Accept: application/json, text/event-stream`,
//! the configuration's headers and, once the server assigned one, `Mcp-Session-Id` and
//! `MCP-Protocol-Version`. The response is `202` (nothing to read), a JSON body (one message),
//! or an SSE stream whose `data:` fields are messages (responses, and the server's own
//! requests and notifications); each message is fed to the client as if it were a line on
//! stdio. A POST that carried a request and fails (transport error, non-2xx status) answers
//! that request with an error naming the failure, so the call fails with the reason. The
//! optional `GET` stream for unsolicited server messages is not opened.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::agent::HttpEvent;
use crate::model::{HttpHeader, HttpMethod, HttpRequest, SseDecoder, SseLimits};

use super::mcp::oauth::{AuthState, Challenge};
#[cfg(doc)]
use super::EffectOp;
use super::Host;

/// Most bytes of one JSON response body kept (a longer body fails its request).
const MAX_BODY: usize = 32 * 1024 * 1024;

/// One server's HTTP state.
#[derive(Debug)]
pub(crate) struct HttpTransport {
    url: String,
    headers: Vec<(String, String)>,
    /// `Mcp-Session-Id` the server assigned.
    session_id: Option<String>,
    /// POSTs in flight by call id.
    exchanges: BTreeMap<u64, Exchange>,
    /// Its authorization, when the session's clients provide it (`mcp/oauth.rs`).
    pub(crate) auth: AuthState,
}

#[derive(Debug)]
struct Exchange {
    /// The id of the request this POST carried (a response or notification carries none).
    request_id: Option<Value>,
    /// The message it carried (sent again once authorized).
    frame: Bytes,
    status: u16,
    headers: Vec<(String, String)>,
    sse: Option<SseDecoder>,
    body: Vec<u8>,
}

impl HttpTransport {
    pub(crate) fn new(
        url: String,
        headers: Vec<(String, String)>,
        oauth_client: Option<crate::mcp::OAuthClient>,
    ) -> Self {
        HttpTransport {
            url,
            headers,
            session_id: None,
            exchanges: BTreeMap::new(),
            auth: AuthState::new(oauth_client),
        }
    }

    /// The server's URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

impl Host {
    /// POSTs one framed message of `session`'s HTTP server `name`.
    pub(crate) fn post_mcp(&mut self, session: &str, name: &str, frame: Bytes) {
        let call = self.next_effect;
        let Some(server) = self.mcp_server(session, name) else {
            return;
        };
        let protocol = server.client.protocol_version().map(str::to_owned);
        let Some(http) = server.http.as_mut() else {
            return;
        };
        let body = frame.strip_suffix(b"\n").unwrap_or(&frame);
        let message: Value = serde_json::from_slice(body).unwrap_or_default();
        let request_id = message
            .get("method")
            .and(message.get("id"))
            .cloned()
            .filter(|id| !id.is_null());
        let mut headers = vec![
            HttpHeader::plain("content-type", "application/json"),
            HttpHeader::plain("accept", "application/json, text/event-stream"),
        ];
        if let Some(id) = &http.session_id {
            headers.push(HttpHeader::plain("mcp-session-id", id.clone()));
        }
        if let Some(version) = protocol {
            headers.push(HttpHeader::plain("mcp-protocol-version", version));
        }
        for (k, v) in &http.headers {
            headers.push(HttpHeader::secret(k.clone(), v.clone()));
        }
        if let Some(authorization) = http.auth.authorization() {
            headers.retain(|h| !h.name.eq_ignore_ascii_case("authorization"));
            headers.push(authorization);
        }
        http.exchanges.insert(
            call,
            Exchange {
                request_id,
                frame: Bytes::copy_from_slice(body),
                status: 0,
                headers: Vec::new(),
                sse: None,
                body: Vec::new(),
            },
        );
        let request = HttpRequest {
            method: HttpMethod::Post,
            url: http.url.clone(),
            headers,
            body: Bytes::copy_from_slice(body),
        };
        let call = self.next_effect_id().get();
        self.mcp_http_calls
            .insert(call, (session.to_owned(), name.to_owned()));
        self.http_request(call, request);
    }

    /// Abandons every POST of a server that is going away.
    pub(crate) fn cancel_mcp_http(&mut self, calls: impl IntoIterator<Item = u64>) {
        for call in calls {
            if self.mcp_http_calls.remove(&call).is_some() {
                self.http_cancel(call);
            }
        }
    }

    /// The calls a server's transport has in flight.
    pub(crate) fn mcp_http_exchanges(transport: &HttpTransport) -> Vec<u64> {
        transport.exchanges.keys().copied().collect()
    }

    /// Whether `call` is an MCP exchange; if so, `event` is handled.
    pub(crate) fn mcp_http_input(&mut self, call: u64, event: HttpEvent, last: bool) -> bool {
        let Some((session, name)) = self.mcp_http_calls.get(&call).cloned() else {
            return false;
        };
        if last {
            self.mcp_http_calls.remove(&call);
        }
        let metadata = self
            .mcp_server(&session, &name)
            .and_then(|s| s.http.as_ref())
            .is_some_and(|h| h.auth.is_metadata_call(call));
        if metadata {
            self.mcp_auth_metadata_input(&session, &name, event);
            return true;
        }
        let mut lines: Vec<Vec<u8>> = Vec::new();
        let mut challenge = None;
        if let Some(http) = self
            .mcp_server(&session, &name)
            .and_then(|s| s.http.as_mut())
        {
            challenge = exchange_event(http, call, event, &mut lines);
        }
        if let Some(challenge) = challenge {
            self.mcp_auth_challenge(&session, &name, challenge);
        }
        let now = self.now;
        if let Some(server) = self.mcp_server(&session, &name) {
            for line in lines {
                server.client.handle_stdout(now, &line);
            }
        }
        self.flush_mcp(&session, &name);
        self.run_agents();
        true
    }
}

/// Applies one report of exchange `call`; the messages it completed go to `lines`. A POST
/// refused with a `Bearer` challenge is returned, to wait for authorization.
fn exchange_event(
    http: &mut HttpTransport,
    call: u64,
    event: HttpEvent,
    lines: &mut Vec<Vec<u8>>,
) -> Option<Challenge> {
    let ex = http.exchanges.get_mut(&call)?;
    let mut failure = None;
    match event {
        HttpEvent::Response { status, headers } => {
            ex.status = status;
            if Challenge::bearer(status, &headers).is_some() {
                ex.headers = headers.clone();
            }
            let header = |name: &str| {
                headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.clone())
            };
            if let Some(id) = header("mcp-session-id").filter(|id| !id.is_empty()) {
                http.session_id = Some(id);
            }
            let sse = header("content-type").is_some_and(|t| t.contains("text/event-stream"));
            if sse && (200..300).contains(&status) {
                ex.sse = Some(SseDecoder::new(SseLimits::default()));
            }
        }
        HttpEvent::Body(bytes) => match ex.sse.as_mut() {
            Some(decoder) => {
                decoder.push(&bytes);
                loop {
                    match decoder.next_event() {
                        Ok(Some(event)) if !event.data.trim().is_empty() => {
                            let mut line = event.data.replace('\n', "").into_bytes();
                            line.push(b'\n');
                            lines.push(line);
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => {
                            failure = Some(format!("the server's event stream broke: {e:?}"));
                            break;
                        }
                    }
                }
            }
            None => {
                if ex.body.len() + bytes.len() > MAX_BODY {
                    failure = Some("the server's response is too large".to_owned());
                } else {
                    ex.body.extend_from_slice(&bytes);
                }
            }
        },
        HttpEvent::End => {
            let ex = http.exchanges.remove(&call)?;
            if Challenge::bearer(ex.status, &ex.headers).is_some() {
                return Some(Challenge {
                    status: ex.status,
                    headers: ex.headers,
                    body: ex.body,
                    frame: ex.frame,
                    request_id: ex.request_id,
                });
            }
            if !(200..300).contains(&ex.status) {
                let text = String::from_utf8_lossy(&ex.body);
                let text = text.trim();
                let reason = if text.is_empty() {
                    format!("HTTP {}", ex.status)
                } else {
                    format!(
                        "HTTP {}: {}",
                        ex.status,
                        text.chars().take(300).collect::<String>()
                    )
                };
                fail_request(&ex, &reason, lines);
            } else if ex.sse.is_none() && !ex.body.iter().all(u8::is_ascii_whitespace) {
                let mut line: Vec<u8> = ex.body.into_iter().filter(|b| *b != b'\n').collect();
                line.push(b'\n');
                lines.push(line);
            }
            return None;
        }
        HttpEvent::Error { message, .. } => {
            failure = Some(format!("the HTTP request failed: {message}"));
        }
    }
    if let Some(reason) = failure {
        if let Some(ex) = http.exchanges.remove(&call) {
            fail_request(&ex, &reason, lines);
        }
    }
    None
}

/// An error response for the request `ex` carried (nothing for a response or notification).
fn fail_request(ex: &Exchange, reason: &str, lines: &mut Vec<Vec<u8>>) {
    if let Some(id) = &ex.request_id {
        let error = json!({"jsonrpc": "2.0", "id": id,
                           "error": {"code": -32000, "message": reason}});
        let mut line = serde_json::to_vec(&error).unwrap_or_default();
        line.push(b'\n');
        lines.push(line);
    }
}
