//! Host-owned OAuth of a remote MCP server, through the host's sans-IO API: the server's
//! HTTP exchanges are answered by hand, as an OAuth-protected Streamable HTTP server would.

use agentwire::host::{Effect, EffectEvent, EffectId, EffectOp, HostConfig, Output};
use agentwire::model::{HttpMethod, HttpRequest};
use serde_json::{json, Value};

use crate::support::*;

const URL: &str = "http://mcp.test/mcp";
const METADATA: &str = "http://mcp.test/.well-known/oauth-protected-resource";

/// The next HTTP request the host asked for.
fn next_http(w: &mut World) -> Option<(EffectId, HttpRequest)> {
    while let Some(out) = w.host.poll_output() {
        if let Output::Effect(Effect {
            id,
            op: EffectOp::HttpRequest(request),
        }) = out
        {
            return Some((id, request));
        }
    }
    None
}

fn reply(
    w: &mut World,
    p: &mut Peer,
    call: EffectId,
    status: u16,
    headers: &[(&str, &str)],
    body: &str,
) {
    let headers = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    w.host
        .handle_effect(w.now, call, EffectEvent::HttpHead { status, headers });
    w.host
        .handle_effect(w.now, call, EffectEvent::HttpBody(body.as_bytes().to_vec()));
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(&mut [p]);
}

/// A refusal with a `Bearer` challenge.
fn challenge(w: &mut World, p: &mut Peer, call: EffectId, status: u16, header: &str) {
    let headers = [
        ("www-authenticate", header),
        ("content-type", "application/json"),
    ];
    reply(w, p, call, status, &headers, r#"{"error":"denied"}"#);
}

/// Serves the MCP requests that carry `token` (the handshake, `tools/list`, `tools/call`)
/// until the host asks nothing more; a request with another token is returned unanswered.
fn serve(w: &mut World, p: &mut Peer, token: &str) -> Option<(EffectId, HttpRequest)> {
    while let Some((call, request)) = next_http(w) {
        if request.header("authorization") != Some(&format!("Bearer {token}")) {
            return Some((call, request));
        }
        let message: Value = serde_json::from_slice(&request.body).unwrap();
        let result = match message["method"].as_str().unwrap() {
            "initialize" => json!({"protocolVersion": "2025-03-26", "capabilities": {"tools": {}},
                                   "serverInfo": {"name": "oauth-test", "version": "1"}}),
            "tools/list" => {
                json!({"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]})
            }
            "tools/call" => json!({"content": [{"type": "text", "text": "oauth-test-user"}]}),
            _ => {
                reply(w, p, call, 202, &[], "");
                continue;
            }
        };
        let body = json!({"jsonrpc": "2.0", "id": message["id"], "result": result}).to_string();
        reply(
            w,
            p,
            call,
            200,
            &[("content-type", "application/json")],
            &body,
        );
    }
    None
}

/// The `mcp.oauth_required` events `p` saw, in order.
fn auth_requests(p: &Peer) -> Vec<Value> {
    p.events("s")
        .into_iter()
        .filter(|e| e["type"] == "mcp.oauth_required")
        .map(|e| e["data"].clone())
        .collect()
}

fn answer(w: &mut World, p: &mut Peer, request: &Value, result: Value) -> Value {
    w.call(
        p,
        &mut [],
        "session.mcp.oauth.handlePendingRequest",
        json!({"sessionId": "s", "requestId": request["requestId"], "result": result}),
    )
}

fn status(w: &mut World, p: &mut Peer) -> String {
    let list = w.call(p, &mut [], "session.mcp.list", json!({"sessionId": "s"}));
    list["result"]["servers"][0]["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn session_with_server(w: &mut World, p: &mut Peer) -> (EffectId, HttpRequest) {
    let server = json!({"secure": {"type": "http", "url": URL, "tools": ["*"],
                                   "oauthClientId": "sdk-e2e-client", "oauthPublicClient": true}});
    create(
        w,
        p,
        "s",
        json!({"mcpServers": server, "requestMcpApps": true}),
    );
    next_http(w).expect("the initialize POST")
}

/// A server that challenges the first POST: the resource metadata is fetched, the session is
/// asked (`initial`, with the challenge's parameters, the document as served, the OAuth
/// client and the response), and the client's token authorizes the POST sent again and
/// every later one; the server connects. Later refusals ask again: `refresh` for a rejected
/// token, `upscope` for `insufficient_scope`, and a declined refresh as `reauth`.
#[test]
fn a_challenged_server_is_authorized_by_the_clients_tokens() {
    let config = HostConfig::default().with_mcp_apps_enabled(true);
    let mut w = World::new(config);
    let mut p = w.connect();
    let (call, first) = session_with_server(&mut w, &mut p);
    assert_eq!(first.header("authorization"), None);
    let initial = format!(
        r#"Bearer resource_metadata="{METADATA}", scope="mcp.read", error="invalid_token""#
    );
    challenge(&mut w, &mut p, call, 401, &initial);
    let (call, fetch) = next_http(&mut w).expect("the metadata fetch");
    assert_eq!(fetch.method, HttpMethod::Get);
    assert_eq!(fetch.url, METADATA);
    assert!(auth_requests(&p).is_empty(), "asked before the metadata");
    let document =
        r#"{"resource":"http://mcp.test/mcp","authorization_servers":["http://mcp.test"]}"#;
    reply(
        &mut w,
        &mut p,
        call,
        200,
        &[("content-type", "application/json")],
        document,
    );
    let asked = auth_requests(&p);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let request = &asked[0];
    assert_eq!(request["reason"], "initial");
    assert_eq!(request["serverName"], "secure");
    assert_eq!(request["serverUrl"], URL);
    assert_eq!(
        request["wwwAuthenticateParams"],
        json!({"resourceMetadataUrl": METADATA, "scope": "mcp.read", "error": "invalid_token"})
    );
    assert_eq!(request["resourceMetadata"], document);
    assert_eq!(
        request["staticClientConfig"],
        json!({"clientId": "sdk-e2e-client", "publicClient": true})
    );
    assert_eq!(request["httpResponse"]["statusCode"], 401);
    assert_eq!(status(&mut w, &mut p), "pending");

    let answered = answer(
        &mut w,
        &mut p,
        request,
        json!({"kind": "token", "accessToken": "t1"}),
    );
    assert_eq!(answered["result"], json!({"success": true}));
    // The same request again is not pending any more.
    let again = answer(
        &mut w,
        &mut p,
        request,
        json!({"kind": "token", "accessToken": "t1"}),
    );
    assert_eq!(again["result"], json!({"success": false}));
    assert!(serve(&mut w, &mut p, "t1").is_none());
    assert_eq!(status(&mut w, &mut p), "connected");
    let completed: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "mcp.oauth_completed")
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(
        completed,
        [json!({"requestId": request["requestId"], "outcome": "token"})]
    );

    let call_tool = |w: &mut World, p: &mut Peer| {
        send_request(
            w,
            p,
            "session.mcp.apps.callTool",
            json!({"sessionId": "s", "serverName": "secure", "originServerName": "secure",
                   "toolName": "whoami", "arguments": {}}),
        )
    };
    // A rejected token: `refresh`, then the call goes through with the new one.
    let id = call_tool(&mut w, &mut p);
    let (call, _) = serve(&mut w, &mut p, "none").unwrap();
    challenge(&mut w, &mut p, call, 401, r#"Bearer error="invalid_token""#);
    let refresh = auth_requests(&p).pop().unwrap();
    assert_eq!(refresh["reason"], "refresh");
    assert!(refresh.get("resourceMetadata").is_none());
    answer(
        &mut w,
        &mut p,
        &refresh,
        json!({"kind": "token", "accessToken": "t2"}),
    );
    assert!(serve(&mut w, &mut p, "t2").is_none());
    let done = response(&p, id).expect("the call is answered").clone();
    assert_eq!(
        done["result"]["content"][0]["text"], "oauth-test-user",
        "{done}"
    );

    // Too little scope: `upscope`.
    let id = call_tool(&mut w, &mut p);
    let (call, _) = serve(&mut w, &mut p, "none").unwrap();
    challenge(
        &mut w,
        &mut p,
        call,
        403,
        r#"Bearer scope="mcp.write", error="insufficient_scope""#,
    );
    let upscope = auth_requests(&p).pop().unwrap();
    assert_eq!(upscope["reason"], "upscope");
    answer(
        &mut w,
        &mut p,
        &upscope,
        json!({"kind": "token", "accessToken": "t3"}),
    );
    assert!(serve(&mut w, &mut p, "t3").is_none());
    assert!(response(&p, id).is_some_and(|r| r.get("result").is_some()));

    // A declined refresh is asked again as `reauth`.
    let id = call_tool(&mut w, &mut p);
    let (call, _) = serve(&mut w, &mut p, "none").unwrap();
    challenge(&mut w, &mut p, call, 401, r#"Bearer error="invalid_token""#);
    let refresh = auth_requests(&p).pop().unwrap();
    assert_eq!(refresh["reason"], "refresh");
    answer(&mut w, &mut p, &refresh, json!({"kind": "cancelled"}));
    let reauth = auth_requests(&p).pop().unwrap();
    assert_eq!(reauth["reason"], "reauth");
    assert_ne!(reauth["requestId"], refresh["requestId"]);
    answer(
        &mut w,
        &mut p,
        &reauth,
        json!({"kind": "token", "accessToken": "t4", "tokenType": "Bearer"}),
    );
    assert!(serve(&mut w, &mut p, "t4").is_none());
    assert!(response(&p, id).is_some_and(|r| r.get("result").is_some()));
    let reasons: Vec<Value> = auth_requests(&p)
        .iter()
        .map(|r| r["reason"].clone())
        .collect();
    assert_eq!(
        reasons,
        ["initial", "refresh", "upscope", "refresh", "reauth"]
    );
}

/// A session that declines to authorize a server that never connected leaves it `needs-auth`.
#[test]
fn a_declined_first_authorization_leaves_the_server_needing_it() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let (call, _) = session_with_server(&mut w, &mut p);
    challenge(&mut w, &mut p, call, 401, r#"Bearer error="invalid_token""#);
    let request = auth_requests(&p).pop().expect("asked");
    assert_eq!(request["reason"], "initial");
    answer(&mut w, &mut p, &request, json!({"kind": "cancelled"}));
    assert_eq!(status(&mut w, &mut p), "needs-auth");
    let bad = answer(&mut w, &mut p, &request, json!({"kind": "sideways"}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}
