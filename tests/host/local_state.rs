//! The user's local state beside the sessions: user settings kept in the data directory's
//! `settings.json` (`user.settings.*`, `skills.config.*`, the `enabled` of `skills.discover`)
//! and the accounts signed in to the server (`account.*`, in memory only).

use agentwire::host::HostConfig;
use serde_json::{json, Value};

use crate::plugins::{ok, rpc, Disk};
use crate::support::{Peer, World};

fn world() -> World {
    World::new(HostConfig::default().with_data_dir(Some("/data".into())))
}

fn settings(w: &mut World, p: &mut Peer, disk: &mut Disk) -> Value {
    ok(rpc(w, p, disk, "user.settings.get", json!({})))["settings"].clone()
}

#[test]
fn settings_are_kept_in_the_data_directory_and_survive_a_restart() {
    let mut disk = Disk::default();
    let mut w = world();
    let mut p = w.connect();
    let before = settings(&mut w, &mut p, &mut disk);
    assert_eq!(
        before["stream"],
        json!({"value": true, "default": true, "isDefault": true})
    );
    assert!(!disk.has("/data/settings.json"), "reading writes nothing");

    let set = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "user.settings.set",
        json!({"settings": {"stream": false, "myTool": {"x": 1}}}),
    ));
    assert_eq!(set, json!({"shadowedKeys": []}));
    let file: Value = serde_json::from_str(disk.text("/data/settings.json").unwrap()).unwrap();
    assert_eq!(file, json!({"stream": false, "myTool": {"x": 1}}));

    // A restart (a new host over the same disk) reads them back.
    let mut w = world();
    let mut p = w.connect();
    let after = settings(&mut w, &mut p, &mut disk);
    assert_eq!(
        after["stream"],
        json!({"value": false, "default": true, "isDefault": false})
    );
    assert_eq!(
        after["myTool"],
        json!({"value": {"x": 1}, "default": null, "isDefault": false})
    );

    // `null` clears a key; another process's edit is seen after a reload.
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "user.settings.set",
        json!({"settings": {"stream": null}}),
    ));
    assert_eq!(
        settings(&mut w, &mut p, &mut disk)["stream"]["isDefault"],
        true
    );
    disk.put("/data/settings.json", r#"{"theme": "dark"}"#);
    assert_eq!(
        settings(&mut w, &mut p, &mut disk)["theme"]["value"],
        "auto"
    );
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "user.settings.reload",
        json!({}),
    ));
    assert_eq!(
        settings(&mut w, &mut p, &mut disk)["theme"]["value"],
        "dark"
    );
}

#[test]
fn a_bad_settings_file_or_patch_is_an_error_and_changes_nothing() {
    let mut disk = Disk::default();
    disk.put("/data/settings.json", "{not json");
    let mut w = world();
    let mut p = w.connect();
    let reply = rpc(&mut w, &mut p, &mut disk, "user.settings.get", json!({}));
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("/data/settings.json: invalid settings"),
        "{message}"
    );

    disk.put("/data/settings.json", r#"{"beep": false}"#);
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "user.settings.reload",
        json!({}),
    ));
    let reply = rpc(
        &mut w,
        &mut p,
        &mut disk,
        "user.settings.set",
        json!({"settings": ["beep"]}),
    );
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(disk.text("/data/settings.json"), Some(r#"{"beep": false}"#));
    assert_eq!(settings(&mut w, &mut p, &mut disk)["beep"]["value"], false);
}

#[test]
fn disabled_skills_are_a_setting_that_skills_discover_follows() {
    let mut disk = Disk::default();
    disk.put(
        "/skills/lint/SKILL.md",
        "---\nname: lint\ndescription: Lints.\n---\nRun the linter.\n",
    );
    let mut w = world();
    let mut p = w.connect();
    let discover = |w: &mut World, p: &mut Peer, disk: &mut Disk| {
        let out = ok(rpc(
            w,
            p,
            disk,
            "skills.discover",
            json!({"skillDirectories": ["/skills"]}),
        ));
        out["skills"][0]["enabled"].clone()
    };
    assert_eq!(discover(&mut w, &mut p, &mut disk), true);
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "skills.config.setDisabledSkills",
        json!({"disabledSkills": ["lint"]}),
    ));
    assert_eq!(discover(&mut w, &mut p, &mut disk), false);
    assert_eq!(
        settings(&mut w, &mut p, &mut disk)["disabledSkills"]["value"],
        json!(["lint"])
    );
    // A restart reads the list before it answers a discovery.
    let mut w = world();
    let mut p = w.connect();
    assert_eq!(discover(&mut w, &mut p, &mut disk), false);
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "skills.config.setSkillDisabled",
        json!({"name": "lint", "disabled": false}),
    ));
    assert_eq!(discover(&mut w, &mut p, &mut disk), true);
}

#[test]
fn accounts_sign_in_and_out_and_are_not_written_anywhere() {
    let mut disk = Disk::default();
    let mut w = world();
    let mut p = w.connect();
    let mut call = |w: &mut World, p: &mut Peer, method: &str, params: Value| {
        ok(rpc(w, p, &mut disk, method, params))
    };
    assert_eq!(
        call(&mut w, &mut p, "account.getCurrentAuth", json!({})),
        json!({})
    );
    let login = call(
        &mut w,
        &mut p,
        "account.login",
        json!({"host": "https://github.com", "login": "octo", "token": "gho_x"}),
    );
    assert_eq!(login, json!({"storedInVault": false}));
    let current = call(&mut w, &mut p, "account.getCurrentAuth", json!({}));
    assert_eq!(
        current["authInfo"],
        json!({"type": "user", "host": "https://github.com", "login": "octo"})
    );
    let users = call(&mut w, &mut p, "account.getAllUsers", json!({}));
    assert_eq!(users[0]["token"], "gho_x");
    let out = call(
        &mut w,
        &mut p,
        "account.logout",
        json!({"authInfo": current["authInfo"]}),
    );
    assert_eq!(out, json!({"hasMoreUsers": false}));
    assert_eq!(
        call(&mut w, &mut p, "account.getCurrentAuth", json!({})),
        json!({})
    );
    assert!(disk.0.is_empty(), "a token is never written to disk");
}

#[test]
fn discovery_paths_name_the_locations_the_discover_methods_read() {
    let mut disk = Disk::default();
    disk.put(
        "/repo/.github/skills/fmt/SKILL.md",
        "---\nname: fmt\ndescription: Formats.\n---\nRun fmt.\n",
    );
    disk.put(
        "/data/skills/notes/SKILL.md",
        "---\nname: notes\ndescription: Takes notes.\n---\n",
    );
    disk.put(
        "/repo/.github/agents/reviewer.agent.md",
        "---\ndescription: Reviews code.\ntools: [view, grep]\nmodel: m1\n---\nReview carefully.\n",
    );
    disk.put("/data/agents/helper.md", "---\nname: helper\n---\nHelp.\n");
    disk.put("/repo/.github/copilot-instructions.md", "Use tabs.\n");
    disk.put(
        "/repo/.github/instructions/rust.instructions.md",
        "---\napplyTo: \"**/*.rs\"\n---\nNo unsafe.\n",
    );
    disk.put(
        "/repo/.github/instructions/notes.txt",
        "not an instruction file",
    );
    let mut w = world();
    let mut p = w.connect();
    let project = json!({"projectPaths": ["/repo/"]});
    let mut call = |w: &mut World, p: &mut Peer, method: &str, params: &Value| {
        ok(rpc(w, p, &mut disk, method, params.clone()))
    };

    let skill_paths = call(&mut w, &mut p, "skills.getDiscoveryPaths", &project);
    let preferred: Vec<(&str, &str)> = skill_paths["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["preferredForCreation"] == true)
        .map(|l| (l["scope"].as_str().unwrap(), l["path"].as_str().unwrap()))
        .collect();
    assert_eq!(
        preferred,
        [
            ("project", "/repo/.github/skills"),
            ("personal-copilot", "/data/skills")
        ]
    );
    let skills = call(&mut w, &mut p, "skills.discover", &project);
    let names: Vec<&str> = skills["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fmt", "notes"]);
    let only_project = json!({"projectPaths": ["/repo"], "excludeHostSkills": true});
    let skills = call(&mut w, &mut p, "skills.discover", &only_project);
    assert_eq!(skills["skills"].as_array().unwrap().len(), 1);

    let agent_paths = call(&mut w, &mut p, "agents.getDiscoveryPaths", &project);
    assert_eq!(
        agent_paths["paths"][0],
        json!({"path": "/repo/.github/agents", "scope": "project",
               "preferredForCreation": true, "projectPath": "/repo"})
    );
    let agents = call(&mut w, &mut p, "agents.discover", &project);
    let reviewer = &agents["agents"][0];
    assert_eq!(reviewer["name"], "reviewer");
    assert_eq!(reviewer["source"], "project");
    assert_eq!(reviewer["tools"], json!(["view", "grep"]));
    assert_eq!(reviewer["model"], "m1");
    assert_eq!(reviewer["prompt"], "Review carefully.");
    assert_eq!(agents["agents"][1]["name"], "helper");
    assert_eq!(agents["agents"][1]["source"], "user");
    let host_excluded = json!({"projectPaths": ["/repo"], "excludeHostAgents": true});
    let agents = call(&mut w, &mut p, "agents.discover", &host_excluded);
    assert_eq!(agents["agents"].as_array().unwrap().len(), 1);

    let instruction_paths = call(&mut w, &mut p, "instructions.getDiscoveryPaths", &project);
    assert_eq!(
        instruction_paths["paths"][0],
        json!({"path": "/repo/.github/copilot-instructions.md", "location": "repository",
               "kind": "file", "preferredForCreation": true, "projectPath": "/repo"})
    );
    let sources = call(&mut w, &mut p, "instructions.discover", &project);
    let found: Vec<(&str, &str)> = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["sourcePath"].as_str().unwrap(),
                s["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("/repo/.github/copilot-instructions.md", "Use tabs."),
            (
                "/repo/.github/instructions/rust.instructions.md",
                "No unsafe."
            )
        ]
    );
    assert_eq!(sources["sources"][1]["applyTo"], json!(["**/*.rs"]));
}
