//! The `session.permissions.*` state methods through the host's sans-IO API (raw
//! JSON-RPC): configure and the allowed paths, rules deciding tool-call prompts before a
//! client is asked, location approvals and folder trust.

use agentwire::agent::Scenario;
use agentwire::host::HostConfig;
use serde_json::{json, Value};

use crate::support::*;

const WEATHER: &str = "What is the weather in Paris?";

fn perm(w: &mut World, p: &mut Peer, method: &str, mut params: Value) -> Value {
    params["sessionId"] = json!("s");
    w.call(p, &mut [], &format!("session.permissions.{method}"), params)
}

fn ok(r: &Value) {
    assert_eq!(r["result"], json!({"success": true}), "{r}");
}

fn send(w: &mut World, p: &mut Peer, prompt: &str) {
    w.call(
        p,
        &mut [],
        "session.send",
        json!({"sessionId":"s","prompt": prompt}),
    );
    w.run_timers(&mut [p]);
}

/// Answers the latest `external_tool.requested`, so the turn ends.
fn answer_tool(w: &mut World, p: &mut Peer) {
    let asked = p
        .events("s")
        .into_iter()
        .rev()
        .find(|e| e["type"] == "external_tool.requested")
        .expect("external_tool.requested");
    let r = w.call(
        p,
        &mut [],
        "session.tools.handlePendingToolCall",
        json!({"sessionId":"s","requestId":asked["data"]["requestId"],"result":"sunny"}),
    );
    assert_eq!(r["result"], json!({"success": true}), "{r}");
    w.run_timers(&mut [p]);
}

fn completes(p: &Peer) -> Vec<Value> {
    p.events("s")
        .into_iter()
        .filter(|e| e["type"] == "tool.execution_complete")
        .map(|e| e["data"].clone())
        .collect()
}

fn count(p: &Peer, ty: &str) -> usize {
    p.types("s").iter().filter(|t| *t == ty).count()
}

#[test]
fn configure_and_update_the_allowed_paths() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(
        &mut w,
        &mut p,
        "s",
        json!({"workingDirectory": "/home/u/proj"}),
    );
    // Before configure: the working directory is the primary directory.
    let r = perm(&mut w, &mut p, "paths.list", json!({}));
    assert_eq!(
        r["result"],
        json!({"primary": "/home/u/proj", "directories": ["/home/u/proj"]})
    );
    let r = perm(
        &mut w,
        &mut p,
        "configure",
        json!({
            "approveAllToolPermissionRequests": false,
            "approveAllReadPermissionRequests": true,
            "rules": {"approved": [{"kind": "read", "argument": null}],
                      "denied": [{"kind": "write", "argument": null}]},
            "paths": {"workspacePath": "/work/space/", "additionalDirectories": ["/extra/./a", "rel"],
                      "includeTempDirectory": false, "unrestricted": false},
            "urls": {"initialAllowed": ["https://example.invalid/permissions-configure"],
                     "unrestricted": false},
        }),
    );
    ok(&r);
    let r = perm(&mut w, &mut p, "paths.list", json!({}));
    assert_eq!(
        r["result"],
        json!({"primary": "/work/space",
               "directories": ["/work/space", "/extra/a", "/work/space/rel"]})
    );
    ok(&perm(
        &mut w,
        &mut p,
        "paths.add",
        json!({"path": "/added"}),
    ));
    let within = |w: &mut World, p: &mut Peer, method: &str, path: &str| {
        let r = perm(w, p, method, json!({"path": path}));
        r["result"]["allowed"]
            .as_bool()
            .unwrap_or_else(|| panic!("{r}"))
    };
    let allowed = "paths.isPathWithinAllowedDirectories";
    assert!(within(&mut w, &mut p, allowed, "/added/child.txt"));
    assert!(within(&mut w, &mut p, allowed, "/added"));
    assert!(!within(&mut w, &mut p, allowed, "/addedX/child.txt"));
    assert!(!within(&mut w, &mut p, allowed, "/added/../etc/passwd"));
    assert!(within(&mut w, &mut p, allowed, "/extra/a/b/c"));
    assert!(!within(&mut w, &mut p, allowed, "/home/u/proj/x"));

    ok(&perm(
        &mut w,
        &mut p,
        "paths.updatePrimary",
        json!({"path": "/new/primary"}),
    ));
    let r = perm(&mut w, &mut p, "paths.list", json!({}));
    assert_eq!(r["result"]["primary"], "/new/primary");
    let dirs = r["result"]["directories"].as_array().unwrap();
    assert!(dirs.contains(&json!("/new/primary")), "{r}");
    assert!(dirs.contains(&json!("/added")), "{r}");
    let workspace = "paths.isPathWithinWorkspace";
    assert!(within(&mut w, &mut p, workspace, "/new/primary/child.txt"));
    assert!(within(&mut w, &mut p, workspace, "child.txt"), "relative");
    assert!(!within(&mut w, &mut p, workspace, "/new/primaryX"));
    assert!(!within(&mut w, &mut p, workspace, "/added/child.txt"));

    // Bad params are invalid params.
    let r = perm(&mut w, &mut p, "paths.add", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = perm(&mut w, &mut p, "paths.add", json!({"path": ""}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = perm(
        &mut w,
        &mut p,
        "configure",
        json!({"rules": {"approved": [{"argument": null}], "denied": []}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = w.call(
        &mut p,
        &mut [],
        "session.permissions.paths.list",
        json!({"sessionId": "nope"}),
    );
    assert_eq!(r["error"]["code"], -32603, "{r}");
}

#[test]
fn a_denied_rule_fails_the_call_without_asking() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"tools": weather_tool()}));
    ok(&perm(
        &mut w,
        &mut p,
        "configure",
        json!({"rules": {"approved": [],
                         "denied": [{"kind": "custom-tool", "argument": "get_weather"}]}}),
    ));
    // Denial wins over approve-all.
    ok(&perm(
        &mut w,
        &mut p,
        "setApproveAll",
        json!({"enabled": true}),
    ));
    send(&mut w, &mut p, WEATHER);
    assert_eq!(count(&p, "permission.requested"), 0, "{:?}", p.types("s"));
    assert_eq!(count(&p, "external_tool.requested"), 0);
    let done = completes(&p);
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0]["success"], false);
    assert_eq!(done[0]["error"]["code"], "denied");
    assert!(
        done[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("custom-tool(get_weather)"),
        "{done:?}"
    );
    // A rule for another tool does not deny it.
    ok(&perm(
        &mut w,
        &mut p,
        "configure",
        json!({"rules": {"approved": [], "denied": [{"kind": "custom-tool", "argument": "other"}]}}),
    ));
    send(&mut w, &mut p, WEATHER);
    assert_eq!(
        count(&p, "external_tool.requested"),
        1,
        "approve-all ran it"
    );
}

#[test]
fn approved_rules_skip_the_prompt() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"tools": weather_tool()}));
    ok(&perm(
        &mut w,
        &mut p,
        "configure",
        json!({"rules": {"approved": [{"kind": "custom-tool", "argument": "get_weather"}],
                         "denied": []}}),
    ));
    send(&mut w, &mut p, WEATHER);
    assert_eq!(count(&p, "permission.requested"), 0, "{:?}", p.types("s"));
    assert_eq!(count(&p, "external_tool.requested"), 1);
    answer_tool(&mut w, &mut p);

    // Session-scoped rules: added, they approve; removed, the client is asked again.
    ok(&perm(
        &mut w,
        &mut p,
        "configure",
        json!({"rules": {"approved": [], "denied": []}}),
    ));
    let rule = json!({"kind": "custom-tool", "argument": "get_weather"});
    ok(&perm(
        &mut w,
        &mut p,
        "modifyRules",
        json!({"scope": "session", "add": [rule]}),
    ));
    send(&mut w, &mut p, WEATHER);
    assert_eq!(count(&p, "permission.requested"), 0);
    assert_eq!(count(&p, "external_tool.requested"), 2);
    answer_tool(&mut w, &mut p);
    ok(&perm(
        &mut w,
        &mut p,
        "modifyRules",
        json!({"scope": "session", "remove": [rule]}),
    ));
    send(&mut w, &mut p, WEATHER);
    assert_eq!(count(&p, "permission.requested"), 1, "asked again");

    // resetSessionApprovals forgets session-scoped rules.
    ok(&perm(
        &mut w,
        &mut p,
        "modifyRules",
        json!({"scope": "session", "add": [rule]}),
    ));
    let r = perm(&mut w, &mut p, "resetSessionApprovals", json!({}));
    ok(&r);
    let before = count(&p, "permission.requested");
    let asked = p
        .events("s")
        .into_iter()
        .rev()
        .find(|e| e["type"] == "permission.requested")
        .unwrap();
    w.call(
        &mut p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":asked["data"]["requestId"],"result":{"kind":"reject"}}),
    );
    send(&mut w, &mut p, WEATHER);
    assert_eq!(
        count(&p, "permission.requested"),
        before + 1,
        "asked after the reset"
    );

    let r = perm(&mut w, &mut p, "modifyRules", json!({"scope": "galaxy"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn read_and_shell_prompts_of_built_in_tools_follow_the_rules() {
    let scenario = Scenario::from_json(
        r#"{"default":[{"read_file":"/proj/notes.txt","result":"notes"},
                       {"shell":"rm -rf build","result":"removed"},
                       {"say":"done"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/proj"}));
    ok(&perm(
        &mut w,
        &mut p,
        "configure",
        json!({"approveAllReadPermissionRequests": true,
               "rules": {"approved": [], "denied": [{"kind": "shell", "argument": "rm"}]}}),
    ));
    send(&mut w, &mut p, "go");
    assert_eq!(count(&p, "permission.requested"), 0, "{:?}", p.types("s"));
    let done = completes(&p);
    assert_eq!(done.len(), 2, "{done:?}");
    assert_eq!(done[0]["success"], true, "the read ran: {done:?}");
    assert_eq!(done[1]["success"], false);
    assert_eq!(done[1]["error"]["code"], "denied");

    // Without the rules, both are asked (nothing else approves them).
    ok(&perm(
        &mut w,
        &mut p,
        "configure",
        json!({"approveAllReadPermissionRequests": false,
               "rules": {"approved": [], "denied": []}}),
    ));
    send(&mut w, &mut p, "go");
    assert_eq!(count(&p, "permission.requested"), 1, "the read is asked");
}

#[test]
fn location_approvals_apply_to_the_session() {
    let scenario = Scenario::from_json(
        r#"{"default":[{"shell":"my-tool --flag","result":"ran"},{"say":"done"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/proj"}));
    let r = perm(
        &mut w,
        &mut p,
        "locations.resolve",
        json!({"workingDirectory": "/proj/loc/"}),
    );
    assert_eq!(
        r["result"],
        json!({"locationType": "dir", "locationKey": "/proj/loc"})
    );
    ok(&perm(
        &mut w,
        &mut p,
        "locations.addToolApproval",
        json!({"locationKey": "/proj/loc",
               "approval": {"kind": "commands", "commandIdentifiers": ["my-tool"]}}),
    ));
    // Not applied yet: the command is asked.
    send(&mut w, &mut p, "go");
    assert_eq!(count(&p, "permission.requested"), 1);
    let asked = p.event("s", "permission.requested");
    w.call(
        &mut p,
        &mut [],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId":"s","requestId":asked["data"]["requestId"],"result":{"kind":"reject"}}),
    );
    w.run_timers(&mut [&mut p]);

    let r = perm(
        &mut w,
        &mut p,
        "locations.apply",
        json!({"workingDirectory": "loc"}),
    );
    assert_eq!(
        r["result"],
        json!({"locationType": "dir", "locationKey": "/proj/loc", "changed": true,
               "appliedRuleCount": 1, "appliedDirectoryCount": 0,
               "appliedRules": [{"kind": "shell", "argument": "my-tool"}]})
    );
    send(&mut w, &mut p, "go");
    assert_eq!(count(&p, "permission.requested"), 1, "not asked again");
    let done = completes(&p);
    assert_eq!(done.last().unwrap()["success"], true, "{done:?}");

    // Location approvals are the host's: another session applying the location gets them.
    create(&mut w, &mut p, "s2", json!({"workingDirectory": "/else"}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.permissions.locations.apply",
        json!({"sessionId": "s2", "workingDirectory": "/proj/loc"}),
    );
    assert_eq!(r["result"]["appliedRuleCount"], 1, "{r}");

    let r = perm(
        &mut w,
        &mut p,
        "locations.addToolApproval",
        json!({"locationKey": "/proj/loc", "approval": {"kind": "teleport"}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn folder_trust_is_kept_by_the_host() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/proj"}));
    create(&mut w, &mut p, "s2", json!({"workingDirectory": "/proj"}));
    let trusted = |w: &mut World, p: &mut Peer, session: &str, path: &str| {
        let r = w.call(
            p,
            &mut [],
            "session.permissions.folderTrust.isTrusted",
            json!({"sessionId": session, "path": path}),
        );
        r["result"]["trusted"]
            .as_bool()
            .unwrap_or_else(|| panic!("{r}"))
    };
    assert!(!trusted(&mut w, &mut p, "s", "/proj/trust"));
    ok(&perm(
        &mut w,
        &mut p,
        "folderTrust.addTrusted",
        json!({"path": "/proj/trust"}),
    ));
    assert!(trusted(&mut w, &mut p, "s", "/proj/trust"));
    assert!(trusted(&mut w, &mut p, "s", "/proj/trust/sub"));
    assert!(trusted(&mut w, &mut p, "s", "trust"), "relative to /proj");
    assert!(!trusted(&mut w, &mut p, "s", "/proj/trusted"));
    assert!(!trusted(&mut w, &mut p, "s", "/proj"));
    assert!(trusted(&mut w, &mut p, "s2", "/proj/trust"), "host-wide");
    let r = perm(&mut w, &mut p, "folderTrust.isTrusted", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn state_calls_answer_success() {
    let scenario = Scenario::from_json(
        r#"{"default":[{"shell":"curl https://example.com/x","permission":"url","result":"ok"},
                       {"say":"done"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    ok(&perm(
        &mut w,
        &mut p,
        "setRequired",
        json!({"required": true}),
    ));
    ok(&perm(
        &mut w,
        &mut p,
        "setRequired",
        json!({"required": false}),
    ));
    ok(&perm(
        &mut w,
        &mut p,
        "notifyPromptShown",
        json!({"message": "shown"}),
    ));
    ok(&perm(
        &mut w,
        &mut p,
        "urls.setUnrestrictedMode",
        json!({"enabled": true}),
    ));
    // Unrestricted URLs: a `url` prompt is approved without asking.
    send(&mut w, &mut p, "go");
    assert_eq!(count(&p, "permission.requested"), 0, "{:?}", p.types("s"));
    assert_eq!(completes(&p)[0]["success"], true);
    ok(&perm(
        &mut w,
        &mut p,
        "urls.setUnrestrictedMode",
        json!({"enabled": false}),
    ));
    send(&mut w, &mut p, "go");
    assert_eq!(
        count(&p, "permission.requested"),
        1,
        "asked once restricted"
    );
    let r = perm(&mut w, &mut p, "setRequired", json!({"required": "yes"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = perm(&mut w, &mut p, "urls.setUnrestrictedMode", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}
