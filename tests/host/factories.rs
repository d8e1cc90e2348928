//! Extensions and agent factories: a session created with `requestExtensions` lists
//! `.github/extensions`, starts each `<name>/extension.mjs` as a Node process whose stdio is
//! a Copilot SDK connection, and `session.factory.*` drives `factory.execute` on the
//! extension that declared the factory.

use agentwire::frame::{FrameDecoder, FrameLimits, Framing};
use agentwire::host::{
    Effect, EffectEvent, EffectId, EffectOp, ExtensionsConfig, FileReply, FileRequest, HostConfig,
    Output, ProcessSpec,
};
use serde_json::{json, Value};

use crate::support::*;

/// An extension process as the host sees it: what it wrote to its stdin, decoded.
struct Ext {
    id: EffectId,
    spec: ProcessSpec,
    decoder: FrameDecoder,
    inbox: Vec<Value>,
    killed: bool,
    next_id: u64,
}

fn world() -> World {
    World::new(HostConfig::default().with_extensions(Some(
        ExtensionsConfig::new().with_user_dirs(vec!["/home/u/.copilot/extensions".to_owned()]),
    )))
}

/// Every output the host has (after pumping `peers`).
fn outputs(w: &mut World, peers: &mut [&mut Peer]) -> Vec<Output> {
    w.pump(peers);
    std::iter::from_fn(|| w.host.poll_output()).collect()
}

fn file_read(outs: &[Output]) -> Vec<(EffectId, String)> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Effect(Effect {
                id,
                op: EffectOp::FileOp(FileRequest::Read { path }),
            }) => Some((*id, path.clone())),
            _ => None,
        })
        .collect()
}

fn entries(w: &mut World, id: EffectId, names: &[&str]) {
    let names = names.iter().map(|n| (*n).to_owned()).collect();
    w.host.handle_effect(
        w.now,
        id,
        EffectEvent::FileDone(Ok(FileReply::Entries(names))),
    );
}

/// Hands process writes to their extensions; returns the other outputs.
fn route(exts: &mut [&mut Ext], outs: Vec<Output>) -> Vec<Output> {
    let mut rest = Vec::new();
    for o in outs {
        match &o {
            Output::Effect(Effect {
                id,
                op: EffectOp::ProcessWrite(bytes),
            }) if exts.iter().any(|e| e.id == *id) => {
                let ext = exts.iter_mut().find(|e| e.id == *id).unwrap();
                ext.decoder.push(bytes).unwrap();
                while let Some(body) = ext.decoder.next_frame().unwrap() {
                    ext.inbox.push(serde_json::from_slice(&body).unwrap());
                }
            }
            Output::Effect(Effect {
                id,
                op: EffectOp::ProcessKill { .. },
            }) if exts.iter().any(|e| e.id == *id) => {
                exts.iter_mut().find(|e| e.id == *id).unwrap().killed = true;
            }
            _ => rest.push(o),
        }
    }
    rest
}

/// Writes `body` to the extension's stdout.
fn ext_send(w: &mut World, ext: &Ext, body: &Value) {
    let body = serde_json::to_vec(body).unwrap();
    let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    wire.extend_from_slice(&body);
    w.host
        .handle_effect(w.now, ext.id, EffectEvent::Stdout(wire));
}

/// Sends request `method` from the extension; returns its id.
fn ext_request(w: &mut World, ext: &mut Ext, method: &str, params: Value) -> u64 {
    let id = 1000 + ext.next_id;
    ext.next_id += 1;
    ext_send(
        w,
        ext,
        &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}),
    );
    id
}

fn ext_response(ext: &Ext, id: u64) -> Option<&Value> {
    ext.inbox
        .iter()
        .find(|m| m["id"] == json!(id) && m.get("method").is_none())
}

/// The server-to-client requests `method` the extension got.
fn ext_requests<'a>(ext: &'a Ext, method: &str) -> Vec<&'a Value> {
    ext.inbox.iter().filter(|m| m["method"] == method).collect()
}

/// Creates session `s1` (working directory `/w`) with extensions requested and starts the
/// one extension the project has, `smoke`; the extension joins with `factories`.
fn start(w: &mut World, client: &mut Peer, factories: Value) -> Ext {
    create(
        w,
        client,
        "s1",
        json!({"workingDirectory": "/w", "requestExtensions": true, "extensionSdkPath": "/sdk/dist"}),
    );
    let outs = outputs(w, &mut [client]);
    let reads = file_read(&outs);
    assert_eq!(reads.len(), 1, "one listing first: {reads:?}");
    assert_eq!(reads[0].1, "/w/.github/extensions");
    entries(w, reads[0].0, &["smoke/", "README.md", ".hidden/"]);
    let outs = outputs(w, &mut [client]);
    let reads = file_read(&outs);
    let paths: Vec<&str> = reads.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        paths,
        ["/w/.github/extensions/smoke", "/home/u/.copilot/extensions"]
    );
    entries(w, reads[1].0, &["smoke/"]);
    entries(w, reads[0].0, &["extension.mjs", "package.json"]);
    let outs = outputs(w, &mut [client]);
    let spawns: Vec<(EffectId, ProcessSpec)> = outs
        .iter()
        .filter_map(|o| match o {
            Output::Effect(Effect {
                id,
                op: EffectOp::ProcessSpawn(spec),
            }) => Some((*id, spec.clone())),
            _ => None,
        })
        .collect();
    // The user's `smoke` is shadowed by the project's: one process.
    assert_eq!(spawns.len(), 1, "{outs:?}");
    assert!(
        file_read(&outs).is_empty(),
        "the user's smoke is not listed"
    );
    let (id, spec) = spawns.into_iter().next().unwrap();
    let mut ext = Ext {
        id,
        spec,
        decoder: FrameDecoder::new(Framing::ContentLength, FrameLimits::default()),
        inbox: Vec::new(),
        killed: false,
        next_id: 0,
    };
    let c = ext_request(w, &mut ext, "connect", json!({}));
    let r = ext_request(
        w,
        &mut ext,
        "session.resume",
        json!({"sessionId": "s1", "factories": factories, "disableResume": true,
               "requestPermission": false}),
    );
    let outs = outputs(w, &mut [client]);
    route(&mut [&mut ext], outs);
    assert!(
        ext_response(&ext, c).is_some_and(|m| m.get("result").is_some()),
        "{:?}",
        ext.inbox
    );
    let resumed = ext_response(&ext, r).unwrap();
    assert_eq!(resumed["result"]["sessionId"], "s1", "{resumed}");
    ext
}

fn echo() -> Value {
    json!([{"name": "echo", "description": "Echo the args.", "phases": []}])
}

#[test]
fn an_extension_is_started_as_node_with_the_sdk_loader_and_the_session_id() {
    let mut w = world();
    let mut client = w.connect();
    let ext = start(&mut w, &mut client, echo());
    let argv = &ext.spec.argv;
    assert_eq!(argv[0], "node");
    assert_eq!(argv[1], "--import");
    assert!(argv[2].starts_with("data:text/javascript,"), "{argv:?}");
    // The loader maps the SDK's module names to the session's extensionSdkPath.
    let loader = &argv[2];
    assert!(
        loader.contains("register"),
        "the loader registers a resolve hook: {loader}"
    );
    assert!(
        loader.contains("%252Fsdk%252Fdist%252Fextension.js"),
        "{loader}"
    );
    assert_eq!(argv[3], "/w/.github/extensions/smoke/extension.mjs");
    assert!(ext
        .spec
        .env
        .contains(&("SESSION_ID".to_owned(), "s1".to_owned())));
    assert_eq!(ext.spec.cwd.as_deref(), Some("/w"));
    assert!(ext.spec.stdin);
}

#[test]
fn no_extension_starts_without_the_request_or_the_feature() {
    let mut w = world();
    let mut client = w.connect();
    create(&mut w, &mut client, "s1", json!({"workingDirectory": "/w"}));
    assert!(file_read(&outputs(&mut w, &mut [&mut client])).is_empty());

    let mut w = World::new(HostConfig::default());
    let mut client = w.connect();
    create(
        &mut w,
        &mut client,
        "s1",
        json!({"workingDirectory": "/w", "requestExtensions": true}),
    );
    assert!(file_read(&outputs(&mut w, &mut [&mut client])).is_empty());
}

#[test]
fn a_factory_runs_on_the_extension_that_declared_it() {
    let mut w = world();
    let mut client = w.connect();
    let mut ext = start(&mut w, &mut client, echo());
    let id = send_request(
        &mut w,
        &mut client,
        "session.factory.run",
        json!({"sessionId": "s1", "name": "echo", "args": [1, "two", false], "options": {}}),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    assert!(
        response(&client, id).is_none(),
        "answered when the run settles"
    );
    let exec = ext_requests(&ext, "factory.execute");
    assert_eq!(exec.len(), 1, "{:?}", ext.inbox);
    let p = exec[0]["params"].clone();
    assert_eq!(p["sessionId"], "s1");
    assert_eq!(p["name"], "echo");
    assert_eq!(p["args"], json!([1, "two", false]));
    let run_id = p["runId"].as_str().unwrap().to_owned();
    assert!(p["executionToken"].as_str().is_some_and(|t| !t.is_empty()));
    // The client sees the run change.
    let updates: Vec<Value> = client
        .events("s1")
        .into_iter()
        .filter(|e| e["type"] == "factory.run_updated")
        .collect();
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0]["data"]["runId"], json!(run_id));
    assert_eq!(updates[0]["ephemeral"], true);

    ext_send(
        &mut w,
        &ext,
        &json!({"jsonrpc":"2.0","id":exec[0]["id"],"result":{"result":[1,"two",false]}}),
    );
    w.pump(&mut [&mut client]);
    let answer = response(&client, id).unwrap();
    assert_eq!(
        answer["result"],
        json!({"runId": run_id, "status": "completed", "result": [1, "two", false]})
    );
    let got = w.call(
        &mut client,
        &mut [],
        "session.factory.getRun",
        json!({"sessionId": "s1", "runId": run_id}),
    );
    assert_eq!(got["result"]["status"], "completed");
    assert_eq!(got["result"]["result"], json!([1, "two", false]));
}

#[test]
fn a_factory_the_session_does_not_have_is_refused() {
    let mut w = world();
    let mut client = w.connect();
    let _ext = start(&mut w, &mut client, echo());
    let r = w.call(
        &mut client,
        &mut [],
        "session.factory.run",
        json!({"sessionId": "s1", "name": "nope", "args": {}}),
    );
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"nope\" is not registered"), "{r}");
}

#[test]
fn resume_refuses_unknown_and_completed_runs_with_their_codes() {
    let mut w = world();
    let mut client = w.connect();
    let mut ext = start(&mut w, &mut client, echo());
    let r = w.call(
        &mut client,
        &mut [],
        "session.factory.resume",
        json!({"sessionId": "s1", "runId": "00000000-0000-0000-0000-000000000000"}),
    );
    assert_eq!(r["error"]["data"]["code"], "not_found", "{r}");

    let id = send_request(
        &mut w,
        &mut client,
        "session.factory.run",
        json!({"sessionId": "s1", "name": "echo", "args": {}}),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    let exec = ext_requests(&ext, "factory.execute")[0].clone();
    ext_send(
        &mut w,
        &ext,
        &json!({"jsonrpc":"2.0","id":exec["id"],"result":{}}),
    );
    w.pump(&mut [&mut client]);
    let run = response(&client, id).unwrap()["result"].clone();
    assert_eq!(run["status"], "completed");
    assert!(run.get("result").is_none(), "no result: {run}");
    let r = w.call(
        &mut client,
        &mut [],
        "session.factory.resume",
        json!({"sessionId": "s1", "runId": run["runId"]}),
    );
    assert_eq!(r["error"]["data"]["code"], "non_resumable", "{r}");
}

#[test]
fn a_failed_run_resumes_under_its_id_with_its_arguments() {
    let mut w = world();
    let mut client = w.connect();
    let mut ext = start(&mut w, &mut client, echo());
    let id = send_request(
        &mut w,
        &mut client,
        "session.factory.run",
        json!({"sessionId": "s1", "name": "echo", "args": {"k": 7}}),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    let first = ext_requests(&ext, "factory.execute")[0].clone();
    ext_send(
        &mut w,
        &ext,
        &json!({"jsonrpc":"2.0","id":first["id"],"error":{"code":-32603,"message":"first attempt failed"}}),
    );
    w.pump(&mut [&mut client]);
    let failed = response(&client, id).unwrap()["result"].clone();
    assert_eq!(failed["status"], "error");
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("first attempt failed")),
        "{failed}"
    );
    let run_id = failed["runId"].clone();

    let id = send_request(
        &mut w,
        &mut client,
        "session.factory.resume",
        json!({"sessionId": "s1", "runId": run_id}),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    let execs = ext_requests(&ext, "factory.execute");
    assert_eq!(execs.len(), 2);
    let second = execs[1].clone();
    assert_eq!(second["params"]["runId"], run_id);
    assert_eq!(second["params"]["args"], json!({"k": 7}));
    assert_ne!(
        second["params"]["executionToken"],
        first["params"]["executionToken"]
    );
    // While it runs, another resume is refused.
    let r = w.call(
        &mut client,
        &mut [],
        "session.factory.resume",
        json!({"sessionId": "s1", "runId": run_id}),
    );
    assert_eq!(r["error"]["data"]["code"], "already_active", "{r}");
    ext_send(
        &mut w,
        &ext,
        &json!({"jsonrpc":"2.0","id":second["id"],"result":{"result":"resumed"}}),
    );
    w.pump(&mut [&mut client]);
    assert_eq!(
        response(&client, id).unwrap()["result"],
        json!({"factoryName": "echo", "run": {"runId": run_id, "status": "completed", "result": "resumed"}})
    );
}

#[test]
fn an_extension_can_run_a_factory_while_another_run_is_in_flight() {
    let mut w = world();
    let mut client = w.connect();
    let mut ext = start(&mut w, &mut client, echo());
    let parked = send_request(
        &mut w,
        &mut client,
        "session.factory.run",
        json!({"sessionId": "s1", "name": "echo", "args": "parked"}),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    // The extension itself starts a run on its session.
    let own = ext_request(
        &mut w,
        &mut ext,
        "session.factory.run",
        json!({"sessionId": "s1", "name": "echo", "args": {"source": "module-watcher"}}),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    let execs: Vec<Value> = ext_requests(&ext, "factory.execute")
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(execs.len(), 2);
    ext_send(
        &mut w,
        &ext,
        &json!({"jsonrpc":"2.0","id":execs[1]["id"],"result":{"result":{"source":"module-watcher"}}}),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    assert_eq!(
        ext_response(&ext, own).unwrap()["result"]["result"],
        json!({"source": "module-watcher"})
    );
    assert!(response(&client, parked).is_none());
    ext_send(
        &mut w,
        &ext,
        &json!({"jsonrpc":"2.0","id":execs[0]["id"],"result":{"result":"released"}}),
    );
    w.pump(&mut [&mut client]);
    assert_eq!(
        response(&client, parked).unwrap()["result"]["result"],
        "released"
    );
}

#[test]
fn a_run_whose_extension_exits_fails_and_the_owner_letting_go_ends_the_extension() {
    let mut w = world();
    let mut client = w.connect();
    let mut ext = start(&mut w, &mut client, echo());
    let id = send_request(
        &mut w,
        &mut client,
        "session.factory.run",
        json!({"sessionId": "s1", "name": "echo", "args": {}}),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    w.host
        .handle_effect(w.now, ext.id, EffectEvent::Exit(Some(1)));
    w.pump(&mut [&mut client]);
    let run = &response(&client, id).unwrap()["result"];
    assert_eq!(run["status"], "error");
    assert!(
        run["error"].as_str().unwrap().contains("disconnected"),
        "{run}"
    );
    // Its factories left with it.
    let r = w.call(
        &mut client,
        &mut [],
        "session.factory.run",
        json!({"sessionId": "s1", "name": "echo", "args": {}}),
    );
    assert!(r.get("error").is_some(), "{r}");

    // A second session's extension ends when its creator destroys the session.
    let mut w = world();
    let mut client = w.connect();
    let mut ext = start(&mut w, &mut client, echo());
    w.call(
        &mut client,
        &mut [],
        "session.destroy",
        json!({"sessionId": "s1"}),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    assert!(ext.killed, "the extension is killed with its session");
}

#[test]
fn an_extension_that_writes_garbage_is_closed_not_the_host() {
    let mut w = world();
    let mut client = w.connect();
    let mut ext = start(&mut w, &mut client, echo());
    w.host.handle_effect(
        w.now,
        ext.id,
        EffectEvent::Stdout(b"Content-Length: nope\r\n\r\n{}".to_vec()),
    );
    let outs = outputs(&mut w, &mut [&mut client]);
    route(&mut [&mut ext], outs);
    assert!(
        ext.killed,
        "a framing error closes the extension's connection"
    );
    assert!(ext.inbox.iter().any(|m| m["error"]["code"] == -32700));
    // The client's session goes on.
    let r = w.call(
        &mut client,
        &mut [],
        "session.factory.getRun",
        json!({"sessionId": "s1", "runId": "r"}),
    );
    assert_eq!(r["error"]["data"]["code"], "not_found");
}

#[test]
fn the_session_lists_its_extensions_with_their_status() {
    let mut w = world();
    let mut client = w.connect();
    let list = w.call(
        &mut client,
        &mut [],
        "session.create",
        json!({"sessionId": "s0", "workingDirectory": "/w"}),
    );
    assert!(list.get("result").is_some());
    let none = w.call(
        &mut client,
        &mut [],
        "session.extensions.list",
        json!({"sessionId": "s0"}),
    );
    assert_eq!(none["result"], json!({"extensions": []}));

    let ext = start(&mut w, &mut client, echo());
    let listed = w.call(
        &mut client,
        &mut [],
        "session.extensions.list",
        json!({"sessionId": "s1"}),
    );
    assert_eq!(
        listed["result"],
        json!({"extensions": [{"id": "project:smoke", "name": "smoke", "source": "project",
                               "status": "running"}]})
    );
    w.host
        .handle_effect(w.now, ext.id, EffectEvent::Exit(Some(1)));
    let listed = w.call(
        &mut client,
        &mut [],
        "session.extensions.list",
        json!({"sessionId": "s1"}),
    );
    assert_eq!(listed["result"]["extensions"][0]["status"], "failed");
}
