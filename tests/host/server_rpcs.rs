//! The server-scoped and session-metadata methods the official SDK's e2e suite calls
//! (remote control off, the session store's `sessions.*`, session metadata, the event log's
//! long poll), through the host's sans-IO API with raw JSON-RPC.

use agentwire::host::HostConfig;
use serde_json::{json, Value};

use crate::support::*;

fn message(r: &Value) -> String {
    r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn remote_control_is_off_and_its_writes_are_no_ops() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.getRemoteControlStatus",
        json!({}),
    );
    assert_eq!(r["result"]["status"]["state"], "off", "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.setRemoteControlSteering",
        json!({"enabled": false}),
    );
    assert_eq!(r["result"]["status"]["state"], "off", "{r}");
    let r = w.call(&mut p, &mut [], "sessions.stopRemoteControl", json!({}));
    assert_eq!(r["result"]["stopped"], false, "{r}");
    assert_eq!(r["result"]["status"]["state"], "off");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.transferRemoteControl",
        json!({"toSessionId": "a", "expectedFromSessionId": "b"}),
    );
    assert_eq!(r["result"]["transferred"], false, "{r}");
    // Bad params are invalid params, not a pretend success.
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.setRemoteControlSteering",
        json!({}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.startRemoteControl",
        json!({"sessionId": "missing", "config": {}}),
    );
    assert!(message(&r).contains("Session not found"), "{r}");
    create(&mut w, &mut p, "s", json!({}));
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.startRemoteControl",
        json!({"sessionId": "s", "config": {}}),
    );
    assert!(
        message(&r).contains("remote control is not available"),
        "{r}"
    );
    // Whether the session can be steered remotely is the steering client's to say: kept as
    // a persisted event.
    for steerable in [true, false] {
        let r = w.call(
            &mut p,
            &mut [],
            "session.remote.notifySteerableChanged",
            json!({"sessionId": "s", "remoteSteerable": steerable}),
        );
        assert_eq!(r["result"], json!({}), "{r}");
        let e = p
            .events("s")
            .into_iter()
            .rfind(|e| e["type"] == "session.remote_steerable_changed")
            .unwrap();
        assert_eq!(e["data"]["remoteSteerable"], steerable);
        assert!(e.get("ephemeral").is_none_or(|v| v == false));
    }
    let r = w.call(
        &mut p,
        &mut [],
        "session.remote.notifySteerableChanged",
        json!({"sessionId": "s"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn agent_registry_open_and_extension_attachments_answer_honestly() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let r = w.call(
        &mut p,
        &mut [],
        "agentRegistry.spawn",
        json!({"cwd": "/tmp"}),
    );
    let m = message(&r);
    assert!(
        m.contains("agentRegistry.spawn") && m.contains("not enabled"),
        "{r}"
    );
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.open",
        json!({"kind": "resumeLast"}),
    );
    assert_eq!(r["result"]["status"], "not_found", "{r}");
    assert!(r["result"].get("sessionId").is_none());
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/w"}));
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.open",
        json!({"kind": "resumeLast", "context": {"cwd": "/w"}}),
    );
    assert_eq!(r["result"]["status"], "resumed", "{r}");
    assert_eq!(r["result"]["sessionId"], "s");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.open",
        json!({"kind": "resumeLast", "context": {"cwd": "/elsewhere"}}),
    );
    assert_eq!(r["result"]["status"], "not_found", "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "session.extensions.sendAttachmentsToMessage",
        json!({"sessionId": "s", "attachments": []}),
    );
    assert!(message(&r).contains("only an extension connection"), "{r}");
}

#[test]
fn delete_of_an_unknown_session_and_foreground_without_a_ui_fail() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let r = w.call(
        &mut p,
        &mut [],
        "session.delete",
        json!({"sessionId": "nope"}),
    );
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(r["result"]["error"].as_str().unwrap().contains("nope"));
    create(&mut w, &mut p, "s", json!({}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.setForeground",
        json!({"sessionId": "s"}),
    );
    assert_eq!(r["result"]["success"], false, "{r}");
    assert_eq!(r["result"]["error"], "Not running in TUI+server mode");
    let r = w.call(&mut p, &mut [], "session.getForeground", json!({}));
    assert!(r["result"].get("sessionId").is_none(), "{r}");

    let mut w = World::new(HostConfig::default().with_foreground_ui(true));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.setForeground",
        json!({"sessionId": "s"}),
    );
    assert_eq!(r["result"]["success"], true, "{r}");
    let r = w.call(&mut p, &mut [], "session.getForeground", json!({}));
    assert_eq!(r["result"]["sessionId"], "s");
}

#[test]
fn close_detaches_and_the_store_methods_size_prune_and_delete() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/w"}));
    w.call(
        &mut p,
        &mut [],
        "session.log",
        json!({"sessionId": "s", "message": "ready"}),
    );
    let r = w.call(&mut p, &mut [], "sessions.close", json!({"sessionId": "s"}));
    assert_eq!(r["result"], json!({}), "{r}");
    // The closing client lost the session until it resumes it; the store keeps it.
    let r = w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    assert!(message(&r).contains("Session not found"), "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.list",
        json!({"filter": {"cwd": "/w"}}),
    );
    assert_eq!(r["result"]["sessions"][0]["sessionId"], "s", "{r}");
    assert_eq!(r["result"]["sessions"][0]["isDetached"], true);
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.releaseLock",
        json!({"sessionId": "s"}),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let r = w.call(&mut p, &mut [], "sessions.getSizes", json!({}));
    let size = r["result"]["sizes"]["s"].as_u64().unwrap();
    assert!(size > 0, "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.getLastForContext",
        json!({"context": {"cwd": "/w"}}),
    );
    assert_eq!(r["result"]["sessionId"], "s", "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.findByTaskId",
        json!({"taskId": "t"}),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.pruneOld",
        json!({"olderThanDays": 0, "dryRun": true, "includeNamed": true}),
    );
    assert_eq!(r["result"]["candidates"], json!(["s"]), "{r}");
    assert_eq!(r["result"]["deleted"], json!([]));
    assert_eq!(r["result"]["freedBytes"], size);
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.pruneOld",
        json!({"olderThanDays": 3650}),
    );
    assert_eq!(r["result"]["candidates"], json!([]), "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.enrichMetadata",
        json!({"sessions": [{"sessionId": "s", "startTime": "x", "modifiedTime": "x",
                             "isRemote": false}]}),
    );
    assert_eq!(r["result"]["sessions"][0]["context"]["cwd"], "/w", "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.bulkDelete",
        json!({"sessionIds": ["s", "missing"]}),
    );
    assert_eq!(r["result"]["freedBytes"]["s"], size, "{r}");
    assert_eq!(r["result"]["freedBytes"]["missing"], 0);
    let r = w.call(&mut p, &mut [], "sessions.list", json!({}));
    assert_eq!(r["result"]["sessions"], json!([]), "{r}");
}

#[test]
fn plugins_are_refused_except_the_empty_list_and_no_repo_hooks_load() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.setAdditionalPlugins",
        json!({"plugins": []}),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.setAdditionalPlugins",
        json!({"plugins": [{"name": "x"}]}),
    );
    assert!(message(&r).contains("plugins are not available"), "{r}");
    create(&mut w, &mut p, "s", json!({}));
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.loadDeferredRepoHooks",
        json!({"sessionId": "s"}),
    );
    assert_eq!(
        r["result"],
        json!({"startupPrompts": [], "hookCount": 0}),
        "{r}"
    );
    let r = w.call(
        &mut p,
        &mut [],
        "sessions.reloadPluginHooks",
        json!({"sessionId": "nope"}),
    );
    assert!(message(&r).contains("Session not found"), "{r}");
}

#[test]
fn working_directory_and_context_changes_are_persisted_events() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/one"}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.metadata.setWorkingDirectory",
        json!({"sessionId": "s", "workingDirectory": "/two"}),
    );
    assert_eq!(r["result"]["workingDirectory"], "/two", "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "session.metadata.snapshot",
        json!({"sessionId": "s"}),
    );
    assert_eq!(r["result"]["workingDirectory"], "/two", "{r}");
    // A context naming another directory is ignored: no event.
    let before = p.types("s").len();
    w.call(
        &mut p,
        &mut [],
        "session.metadata.recordContextChange",
        json!({"sessionId": "s", "context": {"cwd": "/one", "branch": "b0"}}),
    );
    assert_eq!(p.types("s").len(), before);
    w.call(
        &mut p,
        &mut [],
        "session.metadata.recordContextChange",
        json!({"sessionId": "s", "context": {"cwd": "/two", "gitRoot": "/one", "branch": "b1",
                                             "hostType": "github"}}),
    );
    let changed: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "session.context_changed")
        .collect();
    assert_eq!(changed.len(), 2, "{changed:?}");
    assert_eq!(changed[1]["data"]["branch"], "b1");
    assert_eq!(changed[1]["data"]["gitRoot"], "/one");
    assert!(changed[1].get("ephemeral").is_none(), "persisted");
    let r = w.call(
        &mut p,
        &mut [],
        "session.metadata.setWorkingDirectory",
        json!({"sessionId": "s"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn session_services_agentwire_does_not_run_answer_empty_and_context_waits_for_a_call() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let call = |w: &mut World, p: &mut Peer, m: &str, extra: Value| {
        let mut params = json!({"sessionId": "s"});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        w.call(p, &mut [], m, params)
    };
    let r = call(&mut w, &mut p, "session.visibility.get", json!({}));
    assert_eq!(r["result"], json!({"synced": false}), "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.visibility.set",
        json!({"status": "repo"}),
    );
    assert_eq!(r["result"], json!({"synced": false}), "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.visibility.set",
        json!({"status": "public"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.completions.getTriggerCharacters",
        json!({}),
    );
    assert_eq!(r["result"]["triggerCharacters"], json!([]), "{r}");
    let r = call(&mut w, &mut p, "session.plan.readSqlTodos", json!({}));
    assert_eq!(r["result"]["rows"], json!([]), "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.telemetry.getEngagementId",
        json!({}),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.lsp.initialize",
        json!({"force": true}),
    );
    assert_eq!(r["result"], Value::Null, "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.tools.updateSubagentSettings",
        json!({"subagents": null}),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.tools.updateSubagentSettings",
        json!({"subagents": 3}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.tools.getCurrentMetadata",
        json!({}),
    );
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"view"), "{r}");
    // No model call yet: no context figures.
    let r = call(
        &mut w,
        &mut p,
        "session.metadata.contextInfo",
        json!({"promptTokenLimit": 1000, "outputTokenLimit": 100}),
    );
    assert_eq!(r["result"]["contextInfo"], Value::Null, "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.metadata.getContextAttribution",
        json!({}),
    );
    assert_eq!(r["result"]["contextAttribution"], Value::Null, "{r}");
    let r = call(
        &mut w,
        &mut p,
        "session.mcp.oauth.login",
        json!({"serverName": "x"}),
    );
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(message(&r).contains("session.mcp.oauth.login"), "{r}");
}

#[test]
fn an_event_log_read_at_the_tail_waits_for_an_admitted_event() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let tail = w.call(
        &mut p,
        &mut [],
        "session.eventLog.tail",
        json!({"sessionId": "s"}),
    );
    let cursor = tail["result"]["cursor"].clone();
    w.send_frame(
        &p,
        &json!({"jsonrpc": "2.0", "id": 900, "method": "session.eventLog.read",
                "params": {"sessionId": "s", "cursor": cursor, "max": 10, "waitMs": 5000,
                           "types": ["session.title_changed"]}}),
    );
    w.pump(&mut [&mut p]);
    assert!(
        !p.inbox.iter().any(|m| m["id"] == 900),
        "the read waits for an event"
    );
    // An event the filter does not admit does not answer it.
    w.call(
        &mut p,
        &mut [],
        "session.log",
        json!({"sessionId": "s", "message": "not a title"}),
    );
    assert!(!p.inbox.iter().any(|m| m["id"] == 900));
    w.call(
        &mut p,
        &mut [],
        "session.name.set",
        json!({"sessionId": "s", "name": "Title-1"}),
    );
    let r = p
        .inbox
        .iter()
        .find(|m| m["id"] == 900)
        .expect("answered")
        .clone();
    assert_eq!(r["result"]["cursorStatus"], "ok", "{r}");
    let events = r["result"]["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{r}");
    assert_eq!(events[0]["type"], "session.title_changed");
    assert_eq!(events[0]["data"]["title"], "Title-1");

    // Nothing arrives: the deadline answers an ordinary (empty) read.
    let tail = w.call(
        &mut p,
        &mut [],
        "session.eventLog.tail",
        json!({"sessionId": "s"}),
    );
    w.send_frame(
        &p,
        &json!({"jsonrpc": "2.0", "id": 901, "method": "session.eventLog.read",
                "params": {"sessionId": "s", "cursor": tail["result"]["cursor"],
                           "waitMs": 100, "types": ["session.title_changed"]}}),
    );
    w.pump(&mut [&mut p]);
    assert!(!p.inbox.iter().any(|m| m["id"] == 901));
    w.run_timers(&mut [&mut p]);
    let r = p
        .inbox
        .iter()
        .find(|m| m["id"] == 901)
        .expect("answered at the deadline");
    assert_eq!(r["result"]["events"], json!([]), "{r}");
}

/// A session without MCP servers has no MCP host: enabling, disabling, reloading and OAuth
/// say so in the runtime's words instead of pretending.
#[test]
fn a_session_without_mcp_servers_says_it_has_no_mcp_host() {
    let config = HostConfig::default().with_mcp_spawn(agentwire::host::McpSpawnPolicy::Anyone);
    let mut w = World::new(config);
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    for (method, expected) in [
        ("session.mcp.enable", "No MCP host initialized"),
        ("session.mcp.disable", "No MCP host initialized"),
        ("session.mcp.reload", "MCP config reload not available"),
        ("session.mcp.oauth.login", "MCP host is not available"),
        ("session.extensions.enable", "Extensions not available"),
        ("session.extensions.reload", "Extensions not available"),
    ] {
        let r = w.call(
            &mut p,
            &mut [],
            method,
            json!({"sessionId": "s", "serverName": "missing"}),
        );
        assert!(message(&r).contains(expected), "{method}: {r}");
    }
    // With servers: OAuth names what is wrong with the one asked for.
    let created = create(
        &mut w,
        &mut p,
        "m",
        json!({"mcpServers": {"local": {"command": "mcp-server", "args": []}}}),
    );
    assert!(created.get("result").is_some(), "{created}");
    for (server, expected) in [
        ("missing", "MCP server 'missing' is not configured"),
        ("local", "MCP server 'local' is not a remote server"),
    ] {
        let r = w.call(
            &mut p,
            &mut [],
            "session.mcp.oauth.login",
            json!({"sessionId": "m", "serverName": server}),
        );
        assert!(message(&r).contains(expected), "{server}: {r}");
    }
}

/// The stdio MCP servers' `env` values are the values (`envValueMode: "direct"`, what the SDKs
/// send) or names of the runtime's own variables (`indirect`, read by the runtime when the
/// server starts: `ProcessSpec::env_from_host`); `session.mcp.setEnvValueMode` changes it for
/// servers started after it, and a mode that is neither is refused.
#[test]
fn the_env_value_mode_decides_how_stdio_servers_env_is_read() {
    use agentwire::host::{Effect, EffectOp, Output, ProcessSpec};
    fn spawned(w: &mut World) -> ProcessSpec {
        while let Some(out) = w.host.poll_output() {
            if let Output::Effect(Effect {
                op: EffectOp::ProcessSpawn(spec),
                ..
            }) = out
            {
                return spec;
            }
        }
        panic!("no server process started");
    }
    let config = HostConfig::default().with_mcp_spawn(agentwire::host::McpSpawnPolicy::Anyone);
    let mut w = World::new(config);
    let mut p = w.connect();
    let server = json!({"local": {"command": "mcp-server", "args": [],
                                  "env": {"TOKEN": "GITHUB_TOKEN"}}});
    let created = create(
        &mut w,
        &mut p,
        "s",
        json!({"mcpServers": server, "envValueMode": "indirect"}),
    );
    assert!(created.get("result").is_some(), "{created}");
    let spec = spawned(&mut w);
    assert!(spec.env.is_empty(), "{spec:?}");
    let pair = ("TOKEN".to_owned(), "GITHUB_TOKEN".to_owned());
    assert_eq!(spec.env_from_host, std::slice::from_ref(&pair));

    let set = w.call(
        &mut p,
        &mut [],
        "session.mcp.setEnvValueMode",
        json!({"sessionId": "s", "mode": "direct"}),
    );
    assert_eq!(set["result"], json!({"mode": "direct"}), "{set}");
    w.call(
        &mut p,
        &mut [],
        "session.mcp.restartServer",
        json!({"sessionId": "s", "serverName": "local"}),
    );
    let spec = spawned(&mut w);
    assert_eq!(spec.env, [pair]);
    assert!(spec.env_from_host.is_empty(), "{spec:?}");

    let refused = w.call(
        &mut p,
        &mut [],
        "session.mcp.setEnvValueMode",
        json!({"sessionId": "s", "mode": "sideways"}),
    );
    assert!(message(&refused).contains("direct"), "{refused}");
    let removed = w.call(
        &mut p,
        &mut [],
        "session.mcp.removeGitHub",
        json!({"sessionId": "s"}),
    );
    assert_eq!(removed["result"], json!({"removed": false}), "{removed}");
}

/// An app's calls (`session.mcp.apps.listTools` / `callTool`) need a session that negotiated
/// MCP Apps: without a client that declared them (`requestMcpApps`), they are refused naming
/// the `mcp-apps` capability, before anything else is checked.
#[test]
fn app_calls_need_a_session_that_negotiated_mcp_apps() {
    let config = HostConfig::default().with_mcp_apps_enabled(true);
    let mut w = World::new(config);
    let mut p = w.connect();
    create(&mut w, &mut p, "plain", json!({}));
    for (method, extra) in [
        ("session.mcp.apps.listTools", json!({})),
        (
            "session.mcp.apps.callTool",
            json!({"toolName": "t", "arguments": {}}),
        ),
    ] {
        for origin in ["apps", "other"] {
            let mut params = json!({"sessionId": "plain", "serverName": "apps",
                                    "originServerName": origin});
            for (k, v) in extra.as_object().unwrap() {
                params[k] = v.clone();
            }
            let r = w.call(&mut p, &mut [], method, params);
            assert!(message(&r).contains("mcp-apps"), "{method}: {r}");
        }
    }
    // A session whose client declared them gets past the gate (to the server check).
    create(&mut w, &mut p, "apps", json!({"requestMcpApps": true}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.mcp.apps.listTools",
        json!({"sessionId": "apps", "serverName": "apps", "originServerName": "apps"}),
    );
    assert!(message(&r).contains("not connected"), "{r}");
}
