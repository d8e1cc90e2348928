//! MCP servers a session finds rather than names (`mcp/discovered.rs`): its plugin
//! directories' `.mcp.json` and the built-in GitHub MCP server on the runtime's route. They
//! load lazily (nothing is read, spawned or requested at `session.create`; a client's
//! `session.mcp.*` request or the first prompt loads them), and `disabledMcpServers` keeps
//! a server from starting while the list shows it `disabled`.

use agentwire::host::{
    Effect, EffectEvent, EffectOp, FileReply, HostConfig, McpSpawnPolicy, Output, ProcessSpec,
};
use agentwire::model::{HttpRequest, Secret, ServerDefault};
use serde_json::{json, Value};

use crate::support::{create, response, send_request, Peer, World};

/// The effects the host asked for since the last call (other outputs dropped).
fn effects(w: &mut World) -> Vec<Effect> {
    let mut out = Vec::new();
    while let Some(o) = w.host.poll_output() {
        if let Output::Effect(e) = o {
            out.push(e);
        }
    }
    out
}

/// What `pick` takes from each effect.
fn picked<T>(effects: &[Effect], pick: impl Fn(&EffectOp) -> Option<T>) -> Vec<T> {
    effects.iter().filter_map(|e| pick(&e.op)).collect()
}

fn spawns(effects: &[Effect]) -> Vec<ProcessSpec> {
    picked(effects, |op| match op {
        EffectOp::ProcessSpawn(spec) => Some(spec.clone()),
        _ => None,
    })
}

fn http(effects: &[Effect]) -> Vec<HttpRequest> {
    picked(effects, |op| match op {
        EffectOp::HttpRequest(r) => Some(r.clone()),
        _ => None,
    })
}

fn mcp_list(w: &mut World, p: &mut Peer, session: &str) -> (Vec<Value>, Vec<Effect>) {
    let id = send_request(w, p, "session.mcp.list", json!({"sessionId": session}));
    let asked = effects(w);
    w.pump(&mut [p]);
    let servers = response(p, id).expect("an answer")["result"]["servers"]
        .as_array()
        .unwrap()
        .clone();
    (servers, asked)
}

/// A host whose clients may configure stdio servers, and one client.
fn spawning_world() -> (World, Peer) {
    let mut w = World::new(HostConfig::default().with_mcp_spawn(McpSpawnPolicy::Anyone));
    let p = w.connect();
    (w, p)
}

fn status_of(servers: &[Value], name: &str) -> Option<String> {
    servers
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| s["status"].as_str().unwrap().to_owned())
}

#[test]
fn plugin_directory_servers_load_when_asked_for_and_disabled_ones_never_start() {
    let (mut w, mut p) = spawning_world();
    create(
        &mut w,
        &mut p,
        "s1",
        json!({"workingDirectory": "/work", "pluginDirectories": ["plug"],
               "disabledMcpServers": ["off"]}),
    );
    let at_create = effects(&mut w);
    assert!(
        at_create
            .iter()
            .all(|e| !matches!(e.op, EffectOp::FileOp(_) | EffectOp::ProcessSpawn(_))),
        "nothing is read or started at create: {at_create:?}"
    );

    // The client asks about the servers: the plugin's manifest is read.
    let id = send_request(
        &mut w,
        &mut p,
        "session.mcp.list",
        json!({"sessionId": "s1"}),
    );
    let (op, request) = w.next_file_op();
    assert_eq!(
        request,
        agentwire::host::FileRequest::Read {
            path: "/work/plug/.mcp.json".into()
        }
    );
    let manifest = json!({"mcpServers": {
        "on": {"command": "on-server", "args": ["--x"]},
        "off": {"command": "off-server"},
    }});
    w.host.handle_effect(
        w.now,
        op,
        EffectEvent::FileDone(Ok(FileReply::Text(manifest.to_string()))),
    );
    let started = spawns(&effects(&mut w));
    w.pump(&mut [&mut p]);
    assert!(response(&p, id).is_some(), "the list is answered");
    assert_eq!(
        started.len(),
        1,
        "only the enabled server starts: {started:?}"
    );
    assert_eq!(started[0].argv, ["on-server", "--x"]);
    assert_eq!(started[0].cwd.as_deref(), Some("/work/plug"));

    let (servers, asked) = mcp_list(&mut w, &mut p, "s1");
    assert!(spawns(&asked).is_empty(), "a second list starts nothing");
    assert_eq!(status_of(&servers, "on").as_deref(), Some("pending"));
    assert_eq!(status_of(&servers, "off").as_deref(), Some("disabled"));
    let off = servers.iter().find(|s| s["name"] == "off").unwrap();
    assert_eq!(off["source"], "plugin");
}

#[test]
fn a_session_disabling_its_own_server_lists_it_as_disabled() {
    let (mut w, mut p) = spawning_world();
    create(
        &mut w,
        &mut p,
        "s1",
        json!({"mcpServers": {"mine": {"command": "srv"}, "other": {"command": "srv2"}},
               "disabledMcpServers": ["other"]}),
    );
    let started = spawns(&effects(&mut w));
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0].argv, ["srv"]);
    let (servers, _) = mcp_list(&mut w, &mut p, "s1");
    assert_eq!(status_of(&servers, "other").as_deref(), Some("disabled"));
    assert_eq!(status_of(&servers, "mine").as_deref(), Some("pending"));
}

fn capi_world() -> World {
    let route = ServerDefault::copilot_api("http://capi.test", Secret::new("gh-token")).unwrap();
    World::new(HostConfig::default().with_model_default(Some(route)))
}

#[test]
fn the_built_in_github_server_connects_on_the_route_only_when_asked_for() {
    let mut w = capi_world();
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "gh",
        json!({"githubMcpToolConfig": {"enableAllTools": true, "enableInsidersMode": true,
                                       "additionalTools": ["get_me"]}}),
    );
    assert!(http(&effects(&mut w)).is_empty(), "no request at create");
    let (servers, asked) = mcp_list(&mut w, &mut p, "gh");
    let requests = http(&asked);
    assert_eq!(requests.len(), 1, "{requests:?}");
    let r = &requests[0];
    assert_eq!(r.url, "http://capi.test/mcp");
    assert_eq!(r.header("authorization"), Some("Bearer gh-token"));
    assert_eq!(r.header("x-mcp-toolsets"), Some("all"));
    assert_eq!(r.header("x-mcp-insiders"), Some("true"));
    assert_eq!(r.header("x-mcp-tools"), Some("get_me"));
    assert_eq!(
        status_of(&servers, "github-mcp-server").as_deref(),
        Some("pending")
    );
    let id = send_request(
        &mut w,
        &mut p,
        "session.mcp.removeGitHub",
        json!({"sessionId": "gh"}),
    );
    w.pump(&mut [&mut p]);
    assert_eq!(response(&p, id).unwrap()["result"]["removed"], true);

    // Config discovery alone asks for the read-only endpoint.
    create(&mut w, &mut p, "ro", json!({"enableConfigDiscovery": true}));
    let (_, asked) = mcp_list(&mut w, &mut p, "ro");
    let urls: Vec<String> = http(&asked).into_iter().map(|r| r.url).collect();
    assert_eq!(urls, ["http://capi.test/mcp/readonly"]);

    // Disabled: listed, never requested.
    create(
        &mut w,
        &mut p,
        "off",
        json!({"enableConfigDiscovery": true, "disabledMcpServers": ["github-mcp-server"]}),
    );
    let (servers, asked) = mcp_list(&mut w, &mut p, "off");
    assert!(http(&asked).is_empty(), "{asked:?}");
    assert_eq!(
        status_of(&servers, "github-mcp-server").as_deref(),
        Some("disabled")
    );

    // A session that asks for neither has no built-in server.
    create(&mut w, &mut p, "plain", json!({}));
    let (servers, asked) = mcp_list(&mut w, &mut p, "plain");
    assert!(http(&asked).is_empty());
    assert_eq!(status_of(&servers, "github-mcp-server"), None);
}

#[test]
fn without_the_runtime_route_there_is_no_built_in_github_server() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"enableConfigDiscovery": true}));
    let (servers, asked) = mcp_list(&mut w, &mut p, "s");
    assert!(http(&asked).is_empty());
    assert!(servers.is_empty(), "{servers:?}");
}
