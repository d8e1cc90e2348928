//! Canvases: the provider registry, `session.canvas.*` routed to the provider as `canvas.*`
//! requests, the opened/recorded and closed/removed events, a provider leaving
//! (unavailable) and coming back (rehydrated), restore from the log, and the agent's canvas
//! tools. Reference: `copilot-sdk.md` §5.2 and the round trip in `wire2.jsonl:24-49`.

use crate::support::*;
use agentwire::agent::Scenario;
use agentwire::host::{Host, HostConfig, Output, StoreOutput};
use serde_json::{json, Value};

fn board() -> Value {
    json!([{"id":"board","displayName":"Board","description":"A test canvas",
            "inputSchema":{"type":"object","properties":{"title":{"type":"string"}}},
            "actions":[{"name":"refresh","description":"Refresh board"}]}])
}

/// Sends a request without waiting for its response (it may need another peer's answer).
fn request(w: &mut World, peer: &mut Peer, method: &str, params: Value) -> u64 {
    let id = peer.next_id;
    peer.next_id += 1;
    w.send_frame(
        peer,
        &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}),
    );
    id
}

/// The server-to-client requests `peer` received for `method`.
fn server_requests(peer: &Peer, method: &str) -> Vec<Value> {
    peer.inbox
        .iter()
        .filter(|m| m["method"] == method && m.get("id").is_some())
        .cloned()
        .collect()
}

fn answer(w: &mut World, peer: &Peer, request: &Value, result: Value) {
    w.send_frame(
        peer,
        &json!({"jsonrpc":"2.0","id":request["id"],"result":result}),
    );
}

fn count(peer: &Peer, session: &str, ty: &str) -> usize {
    peer.types(session).iter().filter(|t| *t == ty).count()
}

/// A (no canvases) creates the session; B joins as the provider of `board` and a renderer.
fn two_clients(config: HostConfig) -> (World, Peer, Peer) {
    let mut w = World::new(config);
    let mut a = w.connect();
    let mut b = w.connect();
    create(
        &mut w,
        &mut a,
        "s",
        json!({"workingDirectory":"/home/user/project"}),
    );
    let r = w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","canvases":board(),"requestCanvasRenderer":true}),
    );
    assert_eq!(r["result"]["capabilities"]["ui"]["canvases"], true);
    assert_eq!(r["result"]["openCanvases"], json!([]));
    (w, a, b)
}

#[test]
fn open_action_close_round_trip_through_the_provider() {
    let (mut w, mut a, mut b) = two_clients(HostConfig::default());

    // The registry is announced and listed under a connection-derived extension id.
    let registry = a.event("s", "session.canvas.registry_changed");
    assert_eq!(registry["ephemeral"], true);
    let entry = &registry["data"]["canvases"][0];
    let extension_id = entry["extensionId"].as_str().unwrap().to_owned();
    assert!(extension_id.starts_with("connection:"), "{extension_id}");
    assert_eq!(entry["canvasId"], "board");
    assert_eq!(entry["displayName"], "Board");
    assert_eq!(entry["actions"][0]["name"], "refresh");
    let listed = w.call(
        &mut a,
        &mut [&mut b],
        "session.canvas.list",
        json!({"sessionId":"s"}),
    );
    assert_eq!(listed["result"]["canvases"], registry["data"]["canvases"]);

    // open: A asks, B (the provider) gets canvas.open, answers, everyone sees the events.
    let open = request(
        &mut w,
        &mut a,
        "session.canvas.open",
        json!({"sessionId":"s","canvasId":"board","instanceId":"inst-1","input":{"title":"T"}}),
    );
    w.pump(&mut [&mut a, &mut b]);
    assert!(response(&a, open).is_none(), "answered before the provider");
    let opens = server_requests(&b, "canvas.open");
    assert_eq!(opens.len(), 1);
    assert!(server_requests(&a, "canvas.open").is_empty());
    let params = &opens[0]["params"];
    assert_eq!(params["extensionId"], extension_id.as_str());
    assert_eq!(params["canvasId"], "board");
    assert_eq!(params["instanceId"], "inst-1");
    assert_eq!(params["input"], json!({"title":"T"}));
    assert_eq!(params["sessionId"], "s");
    assert_eq!(params["session"]["workingDirectory"], "/home/user/project");
    assert!(opens[0]["id"].is_u64(), "integer ids for the Rust SDK");
    answer(
        &mut w,
        &b,
        &opens[0],
        json!({"url":"http://localhost/board","title":"Board 1"}),
    );
    w.pump(&mut [&mut a, &mut b]);
    let expected = json!({"instanceId":"inst-1","extensionId":extension_id,"canvasId":"board",
                          "title":"Board 1","url":"http://localhost/board","input":{"title":"T"}});
    assert_eq!(response(&a, open).unwrap()["result"], expected);
    for peer in [&a, &b] {
        let opened = peer.event("s", "session.canvas.opened");
        assert_eq!(opened["data"], expected);
        assert_eq!(opened["ephemeral"], true);
        let recorded = peer.event("s", "session.canvas.recorded");
        assert_eq!(
            recorded["data"],
            json!({"instanceId":"inst-1","extensionId":extension_id,"canvasId":"board",
                   "title":"Board 1","input":{"title":"T"}})
        );
        assert!(recorded.get("ephemeral").is_none());
        let types = peer.types("s");
        let at = |t: &str| types.iter().position(|x| x == t).unwrap();
        assert!(at("session.canvas.opened") < at("session.canvas.recorded"));
    }
    let open_list = w.call(
        &mut b,
        &mut [&mut a],
        "session.canvas.listOpen",
        json!({"sessionId":"s"}),
    );
    assert_eq!(open_list["result"]["openCanvases"], json!([expected]));

    // action.invoke: routed to the provider, its answer wrapped in `result`.
    let act = request(
        &mut w,
        &mut a,
        "session.canvas.action.invoke",
        json!({"sessionId":"s","instanceId":"inst-1","actionName":"refresh","input":{}}),
    );
    w.pump(&mut [&mut a, &mut b]);
    let invokes = server_requests(&b, "canvas.action.invoke");
    assert_eq!(invokes.len(), 1);
    assert_eq!(invokes[0]["params"]["actionName"], "refresh");
    assert_eq!(invokes[0]["params"]["instanceId"], "inst-1");
    assert_eq!(invokes[0]["params"]["canvasId"], "board");
    answer(&mut w, &b, &invokes[0], json!({"refreshed":true}));
    w.pump(&mut [&mut a, &mut b]);
    assert_eq!(
        response(&a, act).unwrap()["result"],
        json!({"result":{"refreshed":true}})
    );

    // close: the provider's null answer closes it; closed (E) + removed (P); result null.
    let close = request(
        &mut w,
        &mut a,
        "session.canvas.close",
        json!({"sessionId":"s","instanceId":"inst-1"}),
    );
    w.pump(&mut [&mut a, &mut b]);
    let closes = server_requests(&b, "canvas.close");
    assert_eq!(closes.len(), 1);
    assert!(closes[0]["params"].get("input").is_none());
    assert_eq!(count(&a, "s", "session.canvas.closed"), 0);
    answer(&mut w, &b, &closes[0], Value::Null);
    w.pump(&mut [&mut a, &mut b]);
    let closed = response(&a, close).unwrap().clone();
    assert!(closed.get("error").is_none(), "{closed}");
    assert_eq!(closed["result"], Value::Null);
    for peer in [&a, &b] {
        let ids = json!({"instanceId":"inst-1","extensionId":extension_id,"canvasId":"board"});
        assert_eq!(peer.event("s", "session.canvas.closed")["data"], ids);
        assert_eq!(peer.event("s", "session.canvas.removed")["data"], ids);
    }
    let open_list = w.call(
        &mut a,
        &mut [&mut b],
        "session.canvas.listOpen",
        json!({"sessionId":"s"}),
    );
    assert_eq!(open_list["result"]["openCanvases"], json!([]));

    // The durable log holds recorded and removed, not the ephemeral opened/closed.
    let log = w.host.session_events("s").unwrap();
    let types: Vec<&str> = log.iter().map(|e| e.event_type.as_str()).collect();
    assert!(types.contains(&"session.canvas.recorded"));
    assert!(types.contains(&"session.canvas.removed"));
    assert!(!types.contains(&"session.canvas.opened"));
}

#[test]
fn errors_reach_the_caller_with_the_providers_data() {
    let (mut w, mut a, mut b) = two_clients(HostConfig::default());
    let r = w.call(
        &mut a,
        &mut [&mut b],
        "session.canvas.open",
        json!({"sessionId":"s","canvasId":"nope","instanceId":"i"}),
    );
    assert_eq!(r["error"]["code"], -32603);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("No canvas registered with id \"nope\""),
        "{r}"
    );
    // A provider that refuses to open: its error (with data) is the caller's; nothing opened.
    let open = request(
        &mut w,
        &mut a,
        "session.canvas.open",
        json!({"sessionId":"s","canvasId":"board","instanceId":"i1"}),
    );
    w.pump(&mut [&mut a, &mut b]);
    let req = server_requests(&b, "canvas.open").pop().unwrap();
    w.send_frame(
        &b,
        &json!({"jsonrpc":"2.0","id":req["id"],"error":{"code":-32603,"message":"boom",
                "data":{"code":"canvas_handler_error","message":"boom"}}}),
    );
    w.pump(&mut [&mut a, &mut b]);
    let r = response(&a, open).unwrap().clone();
    assert_eq!(r["error"]["code"], -32603);
    assert_eq!(
        r["error"]["message"],
        "Request session.canvas.open failed with message: boom"
    );
    assert_eq!(r["error"]["data"]["code"], "canvas_handler_error");
    assert_eq!(count(&a, "s", "session.canvas.opened"), 0);
    let r = w.call(
        &mut a,
        &mut [&mut b],
        "session.canvas.action.invoke",
        json!({"sessionId":"s","instanceId":"i1","actionName":"refresh"}),
    );
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Canvas instance not found: i1"));
    let r = w.call(
        &mut a,
        &mut [&mut b],
        "session.canvas.close",
        json!({"sessionId":"s","instanceId":"i1"}),
    );
    assert_eq!(r["error"]["code"], -32603);
    let r = w.call(
        &mut a,
        &mut [&mut b],
        "session.canvas.list",
        json!({"sessionId":"missing"}),
    );
    assert_eq!(r["error"]["code"], -32603);
}

fn open_board(w: &mut World, a: &mut Peer, b: &mut Peer, instance: &str) -> Value {
    let open = request(
        w,
        a,
        "session.canvas.open",
        json!({"sessionId":"s","canvasId":"board","instanceId":instance,"input":{"title":"T"}}),
    );
    w.pump(&mut [&mut *a, &mut *b]);
    let req = server_requests(b, "canvas.open").pop().unwrap();
    answer(
        w,
        b,
        &req,
        json!({"url":"http://localhost/board","title":"Board 1"}),
    );
    w.pump(&mut [&mut *a, &mut *b]);
    response(a, open).unwrap()["result"].clone()
}

#[test]
fn a_provider_that_leaves_makes_canvases_unavailable_and_one_that_returns_rehydrates_them() {
    let (mut w, mut a, mut b) = two_clients(HostConfig::default());
    let opened = open_board(&mut w, &mut a, &mut b, "inst-1");
    let old_extension = opened["extensionId"].clone();

    let now = w.now;
    w.host.handle_eof(now, b.conn);
    w.pump(&mut [&mut a]);
    let unavailable = a.event("s", "session.canvas.unavailable");
    assert_eq!(
        unavailable["data"],
        json!({"instanceId":"inst-1","extensionId":old_extension,"canvasId":"board"})
    );
    assert_eq!(unavailable["ephemeral"], true);
    let last_registry = a
        .events("s")
        .into_iter()
        .rfind(|e| e["type"] == "session.canvas.registry_changed")
        .unwrap();
    assert_eq!(last_registry["data"]["canvases"], json!([]));
    let caps = a
        .events("s")
        .into_iter()
        .rfind(|e| e["type"] == "capabilities.changed")
        .unwrap();
    assert_eq!(caps["data"]["ui"]["canvases"], false);
    let r = w.call(
        &mut a,
        &mut [],
        "session.canvas.listOpen",
        json!({"sessionId":"s"}),
    );
    assert_eq!(r["result"]["openCanvases"], json!([]));
    let r = w.call(
        &mut a,
        &mut [],
        "session.canvas.action.invoke",
        json!({"sessionId":"s","instanceId":"inst-1","actionName":"refresh"}),
    );
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unavailable"));

    // The provider reconnects (a new connection) and re-declares the canvas.
    let mut c = w.connect();
    let r = w.call(
        &mut c,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","canvases":board()}),
    );
    let new_extension = r["result"]["openCanvases"][0]["extensionId"].clone();
    assert_ne!(new_extension, old_extension);
    assert_eq!(r["result"]["openCanvases"][0]["instanceId"], "inst-1");
    assert_eq!(r["result"]["openCanvases"][0]["title"], "Board 1");
    assert_eq!(count(&a, "s", "session.canvas.opened"), 2);
    let again = a
        .events("s")
        .into_iter()
        .rfind(|e| e["type"] == "session.canvas.opened")
        .unwrap();
    assert_eq!(again["data"]["extensionId"], new_extension);
    // Actions reach the new provider.
    let act = request(
        &mut w,
        &mut a,
        "session.canvas.action.invoke",
        json!({"sessionId":"s","instanceId":"inst-1","actionName":"refresh"}),
    );
    w.pump(&mut [&mut a, &mut c]);
    let req = server_requests(&c, "canvas.action.invoke").pop().unwrap();
    answer(&mut w, &c, &req, json!("ok"));
    w.pump(&mut [&mut a, &mut c]);
    assert_eq!(response(&a, act).unwrap()["result"], json!({"result":"ok"}));
}

#[test]
fn an_open_whose_provider_disconnects_mid_call_is_answered_with_an_error() {
    let (mut w, mut a, mut b) = two_clients(HostConfig::default());
    let open = request(
        &mut w,
        &mut a,
        "session.canvas.open",
        json!({"sessionId":"s","canvasId":"board","instanceId":"i"}),
    );
    w.pump(&mut [&mut a, &mut b]);
    assert_eq!(server_requests(&b, "canvas.open").len(), 1);
    let now = w.now;
    w.host.handle_eof(now, b.conn);
    w.pump(&mut [&mut a]);
    let r = response(&a, open)
        .expect("answered when the provider left")
        .clone();
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("disconnected"));
    assert_eq!(count(&a, "s", "session.canvas.opened"), 0);
}

#[test]
fn a_stable_provider_id_names_the_extension_and_survives_a_restart() {
    let config = HostConfig::default().with_report_persisted_events(true);
    let mut w = World::new(config);
    let mut a = w.connect();
    let mut b = w.connect();
    create(&mut w, &mut a, "s", json!({}));
    let provider = json!({"id":"app:builtin:7","name":"App"});
    w.call(
        &mut b,
        &mut [&mut a],
        "session.resume",
        json!({"sessionId":"s","canvases":board(),"canvasProvider":provider}),
    );
    let registry = a.event("s", "session.canvas.registry_changed");
    assert_eq!(
        registry["data"]["canvases"][0]["extensionId"],
        "app:builtin:7"
    );
    assert_eq!(registry["data"]["canvases"][0]["extensionName"], "App");
    let opened = open_board(&mut w, &mut a, &mut b, "keep");
    assert_eq!(opened["extensionId"], "app:builtin:7");
    assert_eq!(opened["extensionName"], "App");

    // Restart: a new host restored from the persisted log, the provider re-declares.
    let mut stored = Vec::new();
    while let Some(out) = w.host.poll_output() {
        if let Output::Store(StoreOutput::Persist { session, event }) = out {
            assert_eq!(session, "s");
            stored.push(event);
        }
    }
    let mut host = Host::new(HostConfig::default());
    host.restore_session(w.now, "s", stored).unwrap();
    let mut w2 = World::new(HostConfig::default());
    w2.host = host;
    let mut p = w2.connect();
    let r = w2.call(
        &mut p,
        &mut [],
        "session.resume",
        json!({"sessionId":"s","canvases":board(),"canvasProvider":provider}),
    );
    let open = &r["result"]["openCanvases"];
    assert_eq!(open.as_array().unwrap().len(), 1, "{r}");
    assert_eq!(open[0]["instanceId"], "keep");
    assert_eq!(open[0]["extensionId"], "app:builtin:7");
    assert_eq!(open[0]["input"], json!({"title":"T"}));
    // A different provider id does not take it over.
    let mut w3 = World::new(HostConfig::default());
    let mut stored = Vec::new();
    for e in w2.host.session_events("s").unwrap() {
        stored.push(e.json.clone());
    }
    w3.host.restore_session(w3.now, "s", stored).unwrap();
    let mut q = w3.connect();
    let r = w3.call(
        &mut q,
        &mut [],
        "session.resume",
        json!({"sessionId":"s","canvases":board(),"canvasProvider":{"id":"other"}}),
    );
    assert_eq!(r["result"]["openCanvases"], json!([]));
}

#[test]
fn the_agent_gets_canvas_tools_only_while_a_renderer_is_attached() {
    let scenario = r#"{"default":[
        {"tool":"list_canvas_capabilities"},
        {"tool":"open_canvas","arguments":{"canvasId":"board","instanceId":"agent-1","input":{"title":"A"}}},
        {"tool":"invoke_canvas_action","arguments":{"instanceId":"agent-1","actionName":"refresh"}},
        {"say":"done: {result}"}]}"#;
    let config = HostConfig::with_scenario(Scenario::from_json(scenario).unwrap());
    let (mut w, mut a, mut b) = two_clients(config.clone());
    request(
        &mut w,
        &mut a,
        "session.send",
        json!({"sessionId":"s","prompt":"go"}),
    );
    w.pump(&mut [&mut a, &mut b]);
    let req = server_requests(&b, "canvas.open")
        .pop()
        .expect("canvas.open");
    assert_eq!(req["params"]["instanceId"], "agent-1");
    answer(&mut w, &b, &req, json!({"title":"Agent board"}));
    w.pump(&mut [&mut a, &mut b]);
    let req = server_requests(&b, "canvas.action.invoke")
        .pop()
        .expect("canvas.action.invoke");
    answer(&mut w, &b, &req, json!({"refreshed":true}));
    w.pump(&mut [&mut a, &mut b]);
    let done: Vec<Value> = a
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "tool.execution_complete")
        .collect();
    assert_eq!(done.len(), 3);
    assert!(
        done.iter().all(|e| e["data"]["success"] == true),
        "{done:?}"
    );
    let listed: Value =
        serde_json::from_str(done[0]["data"]["result"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(listed["canvases"][0]["canvasId"], "board");
    let opened: Value =
        serde_json::from_str(done[1]["data"]["result"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(opened["title"], "Agent board");
    assert_eq!(count(&a, "s", "session.canvas.opened"), 1);
    // No permission prompt for the runtime's own canvas tools.
    assert_eq!(count(&a, "s", "permission.requested"), 0);
    let message = a
        .events("s")
        .into_iter()
        .rfind(|e| e["type"] == "assistant.message")
        .unwrap();
    assert!(message["data"]["content"]
        .as_str()
        .unwrap()
        .contains("refreshed"));
    assert!(a.types("s").contains(&"session.idle".to_owned()));

    // Without a renderer, the tools do not exist.
    let mut w = World::new(config);
    let mut a = w.connect();
    create(&mut w, &mut a, "s", json!({"canvases": board()}));
    w.call(
        &mut a,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt":"go"}),
    );
    let done = a.event("s", "tool.execution_complete");
    assert_eq!(done["data"]["success"], false);
    assert!(done["data"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not available"));
}
