//! Installed plugins and local plugin marketplaces (`plugins.*`, `plugins.marketplaces.*`,
//! `session.plugins.*`): the host does its file work through `FileOp` effects, answered here
//! by an in-memory disk, so what a request leaves in the data directory (the copies, the
//! registry) is checked, and a second host over the same disk is a restart.

use std::collections::BTreeMap;

use agentwire::host::{Effect, EffectEvent, EffectOp, FileReply, FileRequest, HostConfig, Output};
use serde_json::{json, Value};

use crate::support::{create, response, send_request, Peer, World};

/// Files by absolute path.
#[derive(Clone, Default)]
pub(crate) struct Disk(pub(crate) BTreeMap<String, String>);

impl Disk {
    pub(crate) fn put(&mut self, path: &str, text: &str) {
        self.0.insert(path.to_owned(), text.to_owned());
    }

    pub(crate) fn has(&self, path: &str) -> bool {
        self.0.contains_key(path)
    }

    pub(crate) fn text(&self, path: &str) -> Option<&str> {
        self.0.get(path).map(String::as_str)
    }

    fn under(&self, dir: &str) -> Vec<(String, String)> {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        self.0
            .iter()
            .filter_map(|(p, t)| p.strip_prefix(&prefix).map(|r| (r.to_owned(), t.clone())))
            .collect()
    }

    fn answer(&mut self, request: FileRequest) -> Result<FileReply, String> {
        let missing = |p: &str| Err(format!("Path {p} does not exist"));
        match request {
            FileRequest::Read { path } => match self.0.get(&path) {
                Some(text) => Ok(FileReply::Text(text.clone())),
                None if !self.under(&path).is_empty() => Ok(FileReply::Entries(
                    self.under(&path).into_iter().map(|(r, _)| r).collect(),
                )),
                None => missing(&path),
            },
            FileRequest::Write { path, content, .. } => {
                self.0.insert(path, content);
                Ok(FileReply::Written)
            }
            FileRequest::Walk { root, limit } => {
                if self.has(&root) {
                    return Ok(FileReply::Entries(vec![String::new()]));
                }
                let files = self.under(&root);
                if files.is_empty() {
                    return missing(&root);
                }
                Ok(FileReply::Entries(
                    files.into_iter().map(|(r, _)| r).take(limit).collect(),
                ))
            }
            FileRequest::ReadMany { root, paths, .. } => Ok(FileReply::Texts(
                paths
                    .into_iter()
                    .filter_map(|rel| {
                        // An empty path is the root itself (a root that is a file).
                        let path = if rel.is_empty() {
                            root.clone()
                        } else {
                            format!("{root}/{rel}")
                        };
                        self.0.get(&path).map(|t| (rel, t.clone()))
                    })
                    .collect(),
            )),
            FileRequest::CopyDir { from, to } => {
                let files = self.under(&from);
                if files.is_empty() {
                    return missing(&from);
                }
                self.remove(&to);
                for (rel, text) in files {
                    self.0.insert(format!("{to}/{rel}"), text);
                }
                Ok(FileReply::Written)
            }
            FileRequest::Remove { path } => {
                self.remove(&path);
                Ok(FileReply::Written)
            }
            FileRequest::Append { path, content } => {
                self.0.entry(path).or_default().push_str(&content);
                Ok(FileReply::Written)
            }
            FileRequest::Sqlite { .. } => Err("this disk keeps no SQLite database".to_owned()),
        }
    }

    fn remove(&mut self, path: &str) {
        let prefix = format!("{path}/");
        self.0.retain(|p, _| p != path && !p.starts_with(&prefix));
    }
}

/// Answers every file operation the host asks for from `disk` until it asks for none.
pub(crate) fn serve_disk(w: &mut World, p: &mut Peer, disk: &mut Disk) {
    loop {
        let mut asked = Vec::new();
        while let Some(o) = w.host.poll_output() {
            if let Output::Effect(Effect {
                id,
                op: EffectOp::FileOp(request),
            }) = o
            {
                asked.push((id, request));
            }
        }
        if asked.is_empty() {
            break;
        }
        for (id, request) in asked {
            let result = disk.answer(request);
            w.host
                .handle_effect(w.now, id, EffectEvent::FileDone(result));
        }
    }
    w.pump(&mut [p]);
}

/// Sends `method` and answers its file work from `disk`; returns the whole response.
pub(crate) fn rpc(
    w: &mut World,
    p: &mut Peer,
    disk: &mut Disk,
    method: &str,
    params: Value,
) -> Value {
    let id = send_request(w, p, method, params);
    serve_disk(w, p, disk);
    response(p, id)
        .cloned()
        .unwrap_or_else(|| panic!("no response to {method}"))
}

pub(crate) fn ok(reply: Value) -> Value {
    assert!(reply.get("error").is_none(), "{reply}");
    reply["result"].clone()
}

fn error(reply: Value) -> String {
    reply["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {reply}"))
        .to_owned()
}

const SKILL: &str = "---\nname: demo-skill\ndescription: A demo skill.\n---\n# Demo\n";

/// A local marketplace in `/mp` advertising `demo` (version `version`), whose directory has
/// a root `SKILL.md` and `skills/extra/SKILL.md`.
fn marketplace(disk: &mut Disk, version: &str) {
    disk.put(
        "/mp/marketplace.json",
        &json!({"name": "local-mp", "owner": {"name": "Me"},
                "metadata": {"description": "Mine."},
                "plugins": [{"name": "demo", "source": "./demo",
                             "description": "A demo plugin.", "version": version}]})
        .to_string(),
    );
    disk.put("/mp/demo/SKILL.md", SKILL);
    disk.put(
        "/mp/demo/skills/extra/SKILL.md",
        "---\nname: extra-skill\ndescription: More.\n---\nx\n",
    );
    disk.put("/mp/demo/README.md", "readme");
}

fn world() -> World {
    World::new(HostConfig::default().with_data_dir(Some("/data".into())))
}

fn installed(w: &mut World, p: &mut Peer, disk: &mut Disk) -> Vec<Value> {
    ok(rpc(w, p, disk, "plugins.list", json!({})))["plugins"]
        .as_array()
        .unwrap()
        .clone()
}

/// A marketplace added from a local directory is listed beside the runtime's defaults and
/// browsable; `plugin@marketplace` installs a copy into `installed-plugins/<mp>/<plugin>`,
/// counting its `SKILL.md` files; enable / disable switch it; all of it is in the data
/// directory, so a new host over the same disk (a restart) sees it.
#[test]
fn marketplace_plugins_install_toggle_and_survive_a_restart() {
    let mut disk = Disk::default();
    marketplace(&mut disk, "1.0.0");
    let mut w = world();
    let mut p = w.connect();

    let add = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.add",
        json!({"source": "/mp"}),
    ));
    assert_eq!(add["name"], "local-mp");

    let list = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.list",
        json!({}),
    ));
    let list = list["marketplaces"].as_array().unwrap();
    let mine: Vec<&Value> = list.iter().filter(|m| m["name"] == "local-mp").collect();
    assert_eq!(mine.len(), 1);
    assert_ne!(mine[0]["isDefault"], true);
    assert!(mine[0]["source"].as_str().unwrap().contains("/mp"));
    assert!(list
        .iter()
        .any(|m| m["name"] == "copilot-plugins" && m["isDefault"] == true));

    let browse = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.browse",
        json!({"name": "local-mp"}),
    ));
    assert_eq!(
        browse["plugins"],
        json!([{"name": "demo", "description": "A demo plugin."}])
    );

    let install = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.install",
        json!({"source": "demo@local-mp"}),
    ));
    assert_eq!(install["plugin"]["name"], "demo");
    assert_eq!(install["plugin"]["marketplace"], "local-mp");
    assert_eq!(install["plugin"]["enabled"], true);
    assert_eq!(install["plugin"]["version"], "1.0.0");
    assert!(install["plugin"].get("directSourceId").is_none());
    assert_eq!(install["skillsInstalled"], 2);
    assert!(install.get("deprecationWarning").is_none());
    assert!(disk.has("/data/installed-plugins/local-mp/demo/SKILL.md"));
    assert!(disk.has("/data/installed-plugins/local-mp/demo/skills/extra/SKILL.md"));
    let registry: Value = serde_json::from_str(&disk.0["/data/plugins.json"]).unwrap();
    assert_eq!(registry["installed_plugins"][0]["name"], "demo");
    assert_eq!(
        registry["installed_plugins"][0]["cache_path"],
        "/data/installed-plugins/local-mp/demo"
    );

    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.disable",
        json!({"names": ["demo@local-mp"]}),
    ));
    assert_eq!(installed(&mut w, &mut p, &mut disk)[0]["enabled"], false);
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.enable",
        json!({"names": ["demo"]}),
    ));
    assert_eq!(installed(&mut w, &mut p, &mut disk)[0]["enabled"], true);
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.disable",
        json!({"names": ["demo", "unknown"]}),
    ));

    // A restart: a new host over the same data directory.
    let mut w = world();
    let mut p = w.connect();
    let plugins = installed(&mut w, &mut p, &mut disk);
    assert_eq!(plugins.len(), 1);
    assert_eq!(plugins[0]["name"], "demo");
    assert_eq!(plugins[0]["enabled"], false);
    let list = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.list",
        json!({}),
    ));
    assert!(list["marketplaces"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "local-mp"));
}

/// A directory with a `plugin.json` installs directly, with an empty marketplace, a stable
/// `directSourceId` and a deprecation warning; uninstalling it removes its copy.
#[test]
fn a_direct_install_warns_and_uninstall_removes_its_copy() {
    let mut disk = Disk::default();
    disk.put(
        "/src/direct/plugin.json",
        r#"{"name": "direct-one", "version": "0.3.0"}"#,
    );
    disk.put("/src/direct/SKILL.md", SKILL);
    let mut w = world();
    let mut p = w.connect();

    let install = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.install",
        json!({"source": "/src/direct"}),
    ));
    assert_eq!(install["plugin"]["name"], "direct-one");
    assert_eq!(install["plugin"]["marketplace"], "");
    assert_eq!(install["plugin"]["version"], "0.3.0");
    assert_eq!(install["skillsInstalled"], 1);
    let warning = install["deprecationWarning"].as_str().unwrap();
    assert!(warning.to_lowercase().contains("deprecated"), "{warning}");
    let id = install["plugin"]["directSourceId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!id.is_empty());
    let copy = format!("/data/installed-plugins/_direct/{id}/SKILL.md");
    assert!(disk.has(&copy));

    // The same source installs again under the same id (no second record).
    let again = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.install",
        json!({"source": "/src/direct/"}),
    ));
    assert_eq!(again["plugin"]["directSourceId"], id.as_str());
    assert_eq!(installed(&mut w, &mut p, &mut disk).len(), 1);

    let wrong = rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.uninstall",
        json!({"name": "direct-one", "directSourceId": "nope"}),
    );
    assert!(error(wrong).contains("not installed"));
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.uninstall",
        json!({"name": "direct-one", "directSourceId": id}),
    ));
    assert!(installed(&mut w, &mut p, &mut disk).is_empty());
    assert!(!disk.has(&copy));
    let gone = rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.uninstall",
        json!({"name": "direct-one"}),
    );
    assert!(error(gone).contains("not installed"));
}

/// `update` reads the marketplace's catalog again and reinstalls (versions before and
/// after); `updateAll` does so for each plugin; `refresh` re-reads catalogs; a marketplace
/// with installed plugins is only removed with `force`, which uninstalls them.
#[test]
fn update_refresh_and_remove_follow_the_marketplace() {
    let mut disk = Disk::default();
    marketplace(&mut disk, "1.0.0");
    let mut w = world();
    let mut p = w.connect();
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.add",
        json!({"source": "/mp"}),
    ));
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.install",
        json!({"source": "demo@local-mp"}),
    ));

    let same = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.update",
        json!({"name": "demo@local-mp"}),
    ));
    assert_eq!(
        same,
        json!({"previousVersion": "1.0.0", "newVersion": "1.0.0", "skillsInstalled": 2})
    );

    marketplace(&mut disk, "2.0.0");
    disk.put("/mp/demo/skills/third/SKILL.md", "---\nname: third\n---\n");
    let update = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.update",
        json!({"name": "demo"}),
    ));
    assert_eq!(update["previousVersion"], "1.0.0");
    assert_eq!(update["newVersion"], "2.0.0");
    assert_eq!(update["skillsInstalled"], 3);
    assert!(disk.has("/data/installed-plugins/local-mp/demo/skills/third/SKILL.md"));
    assert_eq!(installed(&mut w, &mut p, &mut disk)[0]["version"], "2.0.0");

    let all = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.updateAll",
        json!({}),
    ));
    assert_eq!(
        all["results"],
        json!([{"name": "demo", "marketplace": "local-mp", "success": true,
                "previousVersion": "2.0.0", "newVersion": "2.0.0", "skillsInstalled": 3}])
    );

    let refresh = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.refresh",
        json!({"name": "local-mp"}),
    ));
    assert_eq!(
        refresh["results"],
        json!([{"name": "local-mp", "success": true}])
    );
    let every = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.refresh",
        json!({}),
    ));
    let every = every["results"].as_array().unwrap();
    assert!(every
        .iter()
        .any(|r| r["name"] == "local-mp" && r["success"] == true));
    assert!(every.iter().any(|r| r["name"] == "copilot-plugins"
        && r["success"] == false
        && r["error"].as_str().unwrap().contains("GitHub")));

    let kept = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.remove",
        json!({"name": "local-mp"}),
    ));
    assert_eq!(
        kept,
        json!({"removed": false, "dependentPlugins": ["demo"]})
    );
    let removed = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.remove",
        json!({"name": "local-mp", "force": true}),
    ));
    assert_eq!(removed["removed"], true);
    assert!(installed(&mut w, &mut p, &mut disk).is_empty());
    assert!(!disk.has("/data/installed-plugins/local-mp/demo/SKILL.md"));
    let list = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.list",
        json!({}),
    ));
    assert!(!list["marketplaces"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "local-mp"));
    let default = rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.remove",
        json!({"name": "copilot-plugins"}),
    );
    assert!(error(default).contains("cannot be removed"));
}

/// What cannot be served gets an error saying why: a bad manifest names its file and field,
/// remote sources and the GitHub-hosted default marketplaces are refused, and a server
/// without a data directory says so.
#[test]
fn bad_manifests_and_remote_sources_fail_clearly() {
    let mut disk = Disk::default();
    disk.put(
        "/bad/marketplace.json",
        r#"{"name": "bad", "plugins": [{"source": "./x"}]}"#,
    );
    disk.put("/noname/plugin.json", r#"{"version": "1"}"#);
    disk.put("/broken/marketplace.json", "{not json");
    let mut w = world();
    let mut p = w.connect();

    let bad = error(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.add",
        json!({"source": "/bad"}),
    ));
    assert!(
        bad.contains("/bad/marketplace.json") && bad.contains("plugins[0].name"),
        "{bad}"
    );
    let broken = error(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.add",
        json!({"source": "/broken"}),
    ));
    assert!(
        broken.contains("/broken/marketplace.json") && broken.contains("JSON"),
        "{broken}"
    );
    let none = error(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.add",
        json!({"source": "/nowhere"}),
    ));
    assert!(none.contains("no marketplace.json in /nowhere"), "{none}");
    let noname = error(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.install",
        json!({"source": "/noname"}),
    ));
    assert!(
        noname.contains("/noname/plugin.json") && noname.contains("`name`"),
        "{noname}"
    );
    let remote = error(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.add",
        json!({"source": "owner/repo"}),
    ));
    assert!(remote.contains("not a local directory"), "{remote}");
    let hosted = error(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.install",
        json!({"source": "x@copilot-plugins"}),
    ));
    assert!(hosted.contains("GitHub"), "{hosted}");
    let browse = error(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.browse",
        json!({"name": "awesome-copilot"}),
    ));
    assert!(browse.contains("GitHub"), "{browse}");
    let unknown = error(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.browse",
        json!({"name": "nope"}),
    ));
    assert!(unknown.contains("not registered"), "{unknown}");
    let params = rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.install",
        json!({"source": 3}),
    );
    assert_eq!(params["error"]["code"], -32602);
    // Nothing was registered by the failures.
    assert!(installed(&mut w, &mut p, &mut disk).is_empty());

    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let no_dir = error(rpc(&mut w, &mut p, &mut disk, "plugins.list", json!({})));
    assert!(no_dir.contains("no data directory"), "{no_dir}");
}

/// A session takes the installed plugins: `session.plugins.list` lists them, the skills of
/// the enabled ones are among `session.skills.list` (`source: "plugin"`), and
/// `session.plugins.reload` takes a change (a disabled plugin's skills leave).
#[test]
fn a_session_takes_the_installed_plugins_and_their_skills() {
    let mut disk = Disk::default();
    marketplace(&mut disk, "1.0.0");
    let mut w = world();
    let mut p = w.connect();
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.marketplaces.add",
        json!({"source": "/mp"}),
    ));
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.install",
        json!({"source": "demo@local-mp"}),
    ));

    create(&mut w, &mut p, "s1", json!({}));
    serve_disk(&mut w, &mut p, &mut disk);
    let list = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "session.plugins.list",
        json!({"sessionId": "s1"}),
    ));
    assert_eq!(
        list["plugins"],
        json!([{"name": "demo", "marketplace": "local-mp", "enabled": true, "version": "1.0.0"}])
    );
    let skills = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "session.skills.list",
        json!({"sessionId": "s1"}),
    ));
    let names: Vec<&str> = skills["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["demo-skill", "extra-skill"]);
    assert_eq!(skills["skills"][0]["source"], "plugin");
    assert_eq!(
        skills["skills"][0]["path"],
        "/data/installed-plugins/local-mp/demo/SKILL.md"
    );

    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "plugins.disable",
        json!({"names": ["demo"]}),
    ));
    // Until the session reloads its plugins it keeps them.
    let before = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "session.plugins.list",
        json!({"sessionId": "s1"}),
    ));
    assert_eq!(before["plugins"][0]["enabled"], true);
    ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "session.plugins.reload",
        json!({"sessionId": "s1"}),
    ));
    let after = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "session.plugins.list",
        json!({"sessionId": "s1"}),
    ));
    assert_eq!(after["plugins"][0]["enabled"], false);
    let skills = ok(rpc(
        &mut w,
        &mut p,
        &mut disk,
        "session.skills.list",
        json!({"sessionId": "s1"}),
    ));
    assert_eq!(skills["skills"], json!([]));

    let unknown = rpc(
        &mut w,
        &mut p,
        &mut disk,
        "session.plugins.list",
        json!({"sessionId": "nope"}),
    );
    assert!(error(unknown).contains("not found"));
}
