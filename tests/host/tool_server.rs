//! The client-tools server (`agentwire::tool_server`): an ACP agent behind a session reaches
//! the session's client tools as an MCP server over HTTP. Driven here as the agent's MCP
//! client drives it: HTTP requests on `Dialect::ClientTools` connections, the Copilot SDK
//! client that declared the tool answering `external_tool.requested`.

use agentwire::host::HostConfig;
use agentwire::tool_server::ToolServerConfig;
use agentwire::{ConnId, Dialect};
use serde_json::{json, Value};

use crate::support::*;

fn server() -> ToolServerConfig {
    ToolServerConfig {
        url: "http://127.0.0.1:40000".into(),
        key: "a test key".into(),
    }
}

/// A world with the tool server configured and session `s` created by `p` with `get_weather`.
fn world() -> (World, Peer) {
    let mut w = World::new(HostConfig::default().with_tool_server(Some(server())));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"tools": weather_tool()}));
    (w, p)
}

fn open_http(w: &mut World) -> ConnId {
    w.host.open_dialect(w.now, Dialect::ClientTools)
}

fn post(path: &str, bearer: Option<&str>, body: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(body).unwrap();
    let auth = bearer.map_or(String::new(), |b| format!("Authorization: Bearer {b}\r\n"));
    let mut wire = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    wire.extend_from_slice(&body);
    wire
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Sends `bytes` on `conn` and returns everything the host wrote to it (pumping `peers`).
fn exchange(w: &mut World, conn: ConnId, bytes: &[u8], peers: &mut [&mut Peer]) -> String {
    w.host.handle_bytes(w.now, conn, bytes);
    written(w, conn, peers)
}

fn written(w: &mut World, conn: ConnId, peers: &mut [&mut Peer]) -> String {
    w.pump(peers);
    let frames = w.stash.remove(&conn).unwrap_or_default();
    frames
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

/// The JSON bodies of the `200 OK` responses in `text`, in order.
fn bodies(text: &str) -> Vec<Value> {
    text.split("HTTP/1.1 ")
        .filter(|r| !r.is_empty())
        .map(|r| {
            assert!(r.starts_with("200 OK\r\n"), "a 200 response: {r}");
            assert!(r.contains("Content-Type: application/json\r\n"), "{r}");
            let body = r.split_once("\r\n\r\n").unwrap().1;
            serde_json::from_str(body).unwrap()
        })
        .collect()
}

fn secret(session: &str) -> String {
    server().session_secret(session)
}

#[test]
fn an_agent_lists_and_calls_the_sessions_client_tools() {
    let (mut w, mut p) = world();
    let conn = open_http(&mut w);
    let s = secret("s");
    let init = rpc(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "agent", "version": "1"}}),
    );
    let answer = bodies(&exchange(
        &mut w,
        conn,
        &post("/mcp/s", Some(&s), &init),
        &mut [],
    ));
    assert_eq!(answer[0]["id"], 1);
    assert_eq!(answer[0]["result"]["protocolVersion"], "2025-06-18");
    assert!(answer[0]["result"]["capabilities"]["tools"].is_object());

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = exchange(&mut w, conn, &post("/mcp/s", Some(&s), &note), &mut []);
    assert!(
        accepted.starts_with("HTTP/1.1 202 Accepted\r\n"),
        "{accepted}"
    );

    let list = rpc(2, "tools/list", json!({}));
    let answer = bodies(&exchange(
        &mut w,
        conn,
        &post("/mcp/s", Some(&s), &list),
        &mut [],
    ));
    let tools = answer[0]["result"]["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["name"], "get_weather");
    assert_eq!(tools[0]["description"], "Get weather for a city");
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["city"]));

    // A call waits for the client that declared the tool.
    let call = rpc(
        3,
        "tools/call",
        json!({"name": "get_weather", "arguments": {"city": "Oslo"}}),
    );
    let nothing = exchange(
        &mut w,
        conn,
        &post("/mcp/s", Some(&s), &call),
        &mut [&mut p],
    );
    assert_eq!(nothing, "", "no answer before the client's");
    let requested = p.event("s", "external_tool.requested");
    assert_eq!(requested["data"]["toolName"], "get_weather");
    assert_eq!(requested["data"]["arguments"], json!({"city": "Oslo"}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.tools.handlePendingToolCall",
        json!({"sessionId": "s", "requestId": requested["data"]["requestId"],
               "result": {"textResultForLlm": "snow, -3 C", "resultType": "success"}}),
    );
    assert_eq!(r["result"], json!({"success": true}));
    let answer = bodies(&written(&mut w, conn, &mut []));
    assert_eq!(answer[0]["id"], 3);
    assert_eq!(
        answer[0]["result"],
        json!({"content": [{"type": "text", "text": "snow, -3 C"}], "isError": false})
    );
    let types = p.types("s");
    assert!(
        types.contains(&"external_tool.completed".to_owned()),
        "{types:?}"
    );
    // The agent reports its own tool call; the host adds no completion of its own.
    assert!(
        !types.contains(&"tool.execution_complete".to_owned()),
        "{types:?}"
    );
}

#[test]
fn a_failed_tool_or_a_departed_client_is_a_tool_error_the_agent_reads() {
    let (mut w, mut p) = world();
    let conn = open_http(&mut w);
    let s = secret("s");
    let call = |id| {
        rpc(
            id,
            "tools/call",
            json!({"name": "get_weather", "arguments": {}}),
        )
    };
    exchange(
        &mut w,
        conn,
        &post("/mcp/s", Some(&s), &call(1)),
        &mut [&mut p],
    );
    let requested = p.event("s", "external_tool.requested");
    w.call(
        &mut p,
        &mut [],
        "session.tools.handlePendingToolCall",
        json!({"sessionId": "s", "requestId": requested["data"]["requestId"],
               "result": {"textResultForLlm": "no such city", "resultType": "failure"}}),
    );
    let answer = bodies(&written(&mut w, conn, &mut []));
    assert_eq!(answer[0]["result"]["isError"], true);
    assert_eq!(answer[0]["result"]["content"][0]["text"], "no such city");

    // A tool nobody provides is answered at once; a call whose client leaves fails.
    let unknown = rpc(2, "tools/call", json!({"name": "nope", "arguments": {}}));
    let answer = bodies(&exchange(
        &mut w,
        conn,
        &post("/mcp/s", Some(&s), &unknown),
        &mut [],
    ));
    assert_eq!(answer[0]["result"]["isError"], true, "{answer:?}");
    exchange(
        &mut w,
        conn,
        &post("/mcp/s", Some(&s), &call(3)),
        &mut [&mut p],
    );
    let mut q = w.connect();
    w.call(&mut q, &mut [], "session.resume", json!({"sessionId": "s"}));
    w.host.handle_eof(w.now, p.conn);
    let answer = bodies(&written(&mut w, conn, &mut []));
    assert_eq!(answer[0]["id"], 3);
    assert_eq!(answer[0]["result"]["isError"], true, "{answer:?}");
}

#[test]
fn requests_pipelined_behind_a_waiting_call_are_answered_in_order() {
    let (mut w, mut p) = world();
    let conn = open_http(&mut w);
    let s = secret("s");
    let mut both = post(
        "/mcp/s",
        Some(&s),
        &rpc(1, "tools/call", json!({"name": "get_weather"})),
    );
    both.extend(post("/mcp/s", Some(&s), &rpc(2, "ping", json!({}))));
    assert_eq!(
        exchange(&mut w, conn, &both, &mut [&mut p]),
        "",
        "the ping waits"
    );
    let requested = p.event("s", "external_tool.requested");
    w.call(
        &mut p,
        &mut [],
        "session.tools.handlePendingToolCall",
        json!({"sessionId": "s", "requestId": requested["data"]["requestId"], "result": "ok"}),
    );
    let answers = bodies(&written(&mut w, conn, &mut []));
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2)]);
    assert_eq!(answers[1]["result"], json!({}));
}

#[test]
fn requests_without_the_sessions_secret_or_of_another_kind_are_refused() {
    let (mut w, mut p) = world();
    create(&mut w, &mut p, "other", json!({"tools": weather_tool()}));
    let list = rpc(1, "tools/list", json!({}));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (post("/mcp/s", None, &list), "401 Unauthorized"),
        (post("/mcp/s", Some("wrong"), &list), "401 Unauthorized"),
        // One session's secret does not open another's tools.
        (post("/mcp/other", Some(&secret("s")), &list), "401 Unauthorized"),
        (post("/elsewhere", Some(&secret("s")), &list), "404 Not Found"),
        (post("/mcp/gone", Some(&secret("gone")), &list), "404 Not Found"),
        (
            format!("GET /mcp/s HTTP/1.1\r\nAuthorization: Bearer {}\r\n\r\n", secret("s"))
                .into_bytes(),
            "405 Method Not Allowed",
        ),
        (
            format!(
                "POST /mcp/s HTTP/1.1\r\nAuthorization: Bearer {}\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{{}}",
                secret("s")
            )
            .into_bytes(),
            "415 Unsupported Media Type",
        ),
    ];
    for (request, status) in cases {
        let conn = open_http(&mut w);
        let text = exchange(&mut w, conn, &request, &mut []);
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status}\r\n")),
            "{status}: {text}"
        );
    }
    // A JSON-RPC body that is not JSON is a 400 with the parse error; the connection stays.
    let conn = open_http(&mut w);
    let mut junk = post("/mcp/s", Some(&secret("s")), &json!(null));
    let at = junk.len() - 4;
    junk.truncate(at);
    let cl = junk.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(junk[..cl].to_vec()).unwrap();
    let head = head.replace("Content-Length: 4", "Content-Length: 3");
    let mut bad = head.into_bytes();
    bad.extend_from_slice(b"\r\n\r\n{x}");
    let text = exchange(&mut w, conn, &bad, &mut []);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(text.contains("-32700"), "{text}");
    let ok = exchange(
        &mut w,
        conn,
        &post("/mcp/s", Some(&secret("s")), &list),
        &mut [],
    );
    assert_eq!(bodies(&ok)[0]["result"]["tools"][0]["name"], "get_weather");
    // Bytes that are not HTTP end the connection with the reason.
    let conn = open_http(&mut w);
    let text = exchange(&mut w, conn, b"\x16\x03\x01 hello\r\n\r\n", &mut []);
    assert!(text.contains("not an HTTP/1.1 request"), "{text}");
    let mut closed = false;
    while let Some(output) = w.host.poll_output() {
        if let agentwire::Output::Connection(agentwire::host::ConnectionOutput::Close {
            conn: c,
            ..
        }) = output
        {
            closed |= c == conn;
        }
    }
    assert!(closed, "the connection is closed");
}
