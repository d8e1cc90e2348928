//! `sessionFs.setProvider` (issue 17 B) through the host's sans-IO API with raw JSON-RPC (the
//! official Rust SDK sends it only from `Client::start`, which spawns a CLI): a client that
//! registered as the file provider gets the built-in tools' file work as `sessionFs.*`
//! requests, answered here from an in-memory file system, and no `EffectOp::FileOp` reaches
//! the runtime.

use std::collections::BTreeMap;

use agentwire::host::{Effect, EffectEvent, EffectId, EffectOp, HostConfig, Output};
use agentwire::model::HttpRequest;
use serde_json::{json, Value};

use crate::support::*;

fn sse(chunks: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunks {
        out.extend_from_slice(format!("data: {c}\n\n").as_bytes());
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

fn tool_call(name: &str, args: Value) -> Vec<u8> {
    sse(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_fs",
               "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ])
}

/// Drains outputs: the next HTTP request (panics on an `EffectOp::FileOp`).
fn next_request(w: &mut World) -> Option<(EffectId, HttpRequest)> {
    while let Some(out) = w.host.poll_output() {
        match out {
            Output::Effect(Effect {
                id: call,
                op: EffectOp::HttpRequest(request),
            }) => return Some((call, request)),
            Output::Effect(Effect {
                op: EffectOp::FileOp(_),
                ..
            }) => panic!("the runtime was asked to touch files"),
            _ => {}
        }
    }
    None
}

fn answer_http(w: &mut World, call: EffectId, body: &[u8], p: &mut Peer) {
    let headers = [("content-type".to_owned(), "text/event-stream".to_owned())];
    w.host.handle_effect(
        w.now,
        call,
        EffectEvent::HttpHead {
            status: 200,
            headers: headers.to_vec(),
        },
    );
    w.host
        .handle_effect(w.now, call, EffectEvent::HttpBody(body.to_vec()));
    w.host.handle_effect(w.now, call, EffectEvent::HttpEnd);
    w.pump(&mut [p]);
}

/// Plays the client: approves permission prompts and answers `sessionFs.*` requests from
/// `fs` until nothing is pending. Returns the methods it answered outside the session's state
/// directory `/state` (which the host keeps there too: `state_files.rs`).
fn play_client(w: &mut World, p: &mut Peer, fs: &mut BTreeMap<String, String>) -> Vec<String> {
    let mut answered = Vec::new();
    let mut seen = 0;
    loop {
        let new: Vec<Value> = p.inbox[seen..].to_vec();
        seen = p.inbox.len();
        if new.is_empty() {
            p.inbox.clear();
            return answered;
        }
        for m in new {
            let method = m["method"].as_str().unwrap_or_default();
            if method == "session.event" && m["params"]["event"]["type"] == "permission.requested" {
                let request_id = m["params"]["event"]["data"]["requestId"].clone();
                w.send_frame(p, &json!({"jsonrpc": "2.0", "id": 9000 + seen, "method":
                    "session.permissions.handlePendingPermissionRequest", "params":
                    {"sessionId": "s", "requestId": request_id, "result": {"kind": "approve-once"}}}));
            }
            let Some(fs_method) = method.strip_prefix("sessionFs.") else {
                continue;
            };
            let path = m["params"]["path"].as_str().unwrap_or_default().to_owned();
            assert_eq!(m["params"]["sessionId"], "s");
            let is_dir = fs.keys().any(|k| k.starts_with(&format!("{path}/")));
            let result = match fs_method {
                "stat" if is_dir || fs.contains_key(&path) => json!({"isFile": !is_dir,
                    "isDirectory": is_dir, "size": 0, "mtime": "", "birthtime": ""}),
                "stat" => json!({"isFile": false, "isDirectory": false, "size": 0, "mtime": "",
                    "birthtime": "", "error": {"code": "ENOENT"}}),
                "readFile" => match fs.get(&path) {
                    Some(c) => json!({"content": c}),
                    None => json!({"content": "", "error": {"code": "ENOENT"}}),
                },
                "writeFile" => {
                    fs.insert(
                        path.clone(),
                        m["params"]["content"].as_str().unwrap().to_owned(),
                    );
                    json!({})
                }
                "appendFile" => {
                    let content = m["params"]["content"].as_str().unwrap();
                    fs.entry(path.clone()).or_default().push_str(content);
                    json!({})
                }
                "rm" => {
                    fs.remove(&path);
                    json!({})
                }
                "mkdir" => json!({}),
                "exists" => json!({"exists": is_dir || fs.contains_key(&path)}),
                "readdirWithTypes" => {
                    let prefix = format!("{path}/");
                    let mut entries: Vec<Value> = Vec::new();
                    for k in fs.keys().filter_map(|k| k.strip_prefix(&prefix)) {
                        let (name, kind) = match k.split_once('/') {
                            Some((d, _)) => (d, "directory"),
                            None => (k, "file"),
                        };
                        let e = json!({"name": name, "type": kind});
                        if !entries.contains(&e) {
                            entries.push(e);
                        }
                    }
                    json!({"entries": entries})
                }
                other => panic!("unexpected sessionFs.{other}"),
            };
            if path != "/state" && !path.starts_with("/state/") {
                answered.push(fs_method.to_owned());
            }
            w.send_frame(
                p,
                &json!({"jsonrpc": "2.0", "id": m["id"], "result": result}),
            );
        }
        w.pump(&mut [p]);
    }
}

fn last_tool_result(request: &HttpRequest) -> String {
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool", "{last}");
    last["content"].as_str().unwrap().to_owned()
}

#[test]
fn a_file_provider_client_serves_the_builtin_tools_files() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let set = w.call(
        &mut p,
        &mut [],
        "sessionFs.setProvider",
        json!({"initialCwd": "/ws", "sessionStatePath": "/state",
               "conventions": "posix", "capabilities": {}}),
    );
    assert_eq!(set["result"], json!({"success": true}), "{set}");
    create(
        &mut w,
        &mut p,
        "s",
        json!({"provider": {"type": "openai", "baseUrl": "http://127.0.0.1:9/v1"}, "model": "m",
               "workingDirectory": "/ws", "requestPermission": true}),
    );
    let mut fs = BTreeMap::from([
        ("/ws/notes.txt".to_owned(), "hello world\n".to_owned()),
        ("/ws/src/a.rs".to_owned(), "// TODO\n".to_owned()),
    ]);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "go"}),
    );

    // edit: stat, readFile, mkdir, writeFile on the client.
    let (call, _) = next_request(&mut w).expect("a model call");
    let edit = json!({"path": "notes.txt", "old_str": "world", "new_str": "client fs"});
    answer_http(&mut w, call, &tool_call("edit", edit), &mut p);
    let methods = play_client(&mut w, &mut p, &mut fs);
    assert_eq!(methods, ["stat", "readFile", "mkdir", "writeFile"]);
    assert_eq!(fs["/ws/notes.txt"], "hello client fs\n");
    let (call, request) = next_request(&mut w).expect("the call after the edit");
    assert!(last_tool_result(&request).contains("updated"));

    // create: exists, then the write; an existing file is refused.
    let create_args = json!({"path": "notes.txt", "file_text": "x"});
    answer_http(&mut w, call, &tool_call("create", create_args), &mut p);
    assert_eq!(play_client(&mut w, &mut p, &mut fs), ["exists"]);
    let (call, request) = next_request(&mut w).expect("the call after the create");
    assert!(last_tool_result(&request).contains("already exists"));

    // grep walks the tree with readdirWithTypes and reads the files.
    let grep = json!({"pattern": "TODO", "output_mode": "content"});
    answer_http(&mut w, call, &tool_call("grep", grep), &mut p);
    let methods = play_client(&mut w, &mut p, &mut fs);
    assert!(
        methods.contains(&"readdirWithTypes".to_owned()),
        "{methods:?}"
    );
    let (_, request) = next_request(&mut w).expect("the call after the grep");
    // Matches are named by their full path (the runtime's form).
    assert_eq!(last_tool_result(&request), "/ws/src/a.rs:// TODO\n");
}

/// Answers the `sessionFs.*` requests in `p`'s inbox from `fs` (one round: the host sends
/// the next state write only once the previous one is answered), until none comes. Returns
/// the most requests that were waiting at once.
fn serve_files(w: &mut World, p: &mut Peer, fs: &mut BTreeMap<String, String>) -> usize {
    let mut most = 0;
    let mut seen = 0;
    loop {
        let asked: Vec<Value> = p.inbox[seen..]
            .iter()
            .filter(|m| {
                m["method"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("sessionFs."))
            })
            .cloned()
            .collect();
        seen = p.inbox.len();
        if asked.is_empty() {
            return most;
        }
        most = most.max(asked.len());
        for m in asked {
            let path = m["params"]["path"].as_str().unwrap().to_owned();
            let content = m["params"]["content"].as_str().unwrap_or_default();
            match m["method"].as_str().unwrap() {
                "sessionFs.writeFile" => {
                    fs.insert(path, content.to_owned());
                }
                "sessionFs.appendFile" => fs.entry(path).or_default().push_str(content),
                "sessionFs.rm" => {
                    fs.remove(&path);
                }
                "sessionFs.mkdir" => assert_eq!(m["params"]["recursive"], true),
                other => panic!("unexpected {other}"),
            }
            w.send_frame(p, &json!({"jsonrpc": "2.0", "id": m["id"], "result": {}}));
        }
        w.pump(&mut [p]);
    }
}

/// The persisted events `p` saw of session `s`, as `session.getMessages` answers them.
fn logged_types(w: &mut World, p: &mut Peer) -> Vec<String> {
    let messages = w.call(p, &mut [], "session.getMessages", json!({"sessionId": "s"}));
    messages["result"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

/// A provider that names a state directory keeps the session's state there, as the runtime
/// keeps its session state directory: `events.jsonl` holds every persisted event (the same as
/// `session.getMessages`, without the store's own fields), written one request at a time;
/// `workspace.yaml`, the checkpoint index, `plan.md` (written and removed with the plan) and a
/// compaction's checkpoint, which `session.workspaces.listCheckpoints` / `readCheckpoint`
/// list and read.
#[test]
fn a_file_provider_keeps_the_sessions_state_directory() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    let set = w.call(
        &mut p,
        &mut [],
        "sessionFs.setProvider",
        json!({"initialCwd": "/ws", "sessionStatePath": "/state", "conventions": "posix"}),
    );
    assert_eq!(set["result"], json!({"success": true}), "{set}");
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/ws"}));
    let mut fs = BTreeMap::new();
    assert_eq!(
        serve_files(&mut w, &mut p, &mut fs),
        1,
        "one write at a time"
    );
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hello"}),
    );
    // The turn's writes are answered as they come (the agent's sleeps are timers).
    serve_files(&mut w, &mut p, &mut fs);
    while let Some(t) = w.host.poll_timeout() {
        w.now = t;
        w.host.handle_timeout(t);
        w.pump(&mut [&mut p]);
        serve_files(&mut w, &mut p, &mut fs);
    }

    let lines: Vec<Value> = fs["/state/events.jsonl"]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<String> = lines
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(types, logged_types(&mut w, &mut p));
    assert!(types.contains(&"assistant.message".to_owned()), "{types:?}");
    assert!(fs["/state/workspace.yaml"].contains("id: \"s\""), "{fs:?}");
    assert!(
        fs["/state/workspace.yaml"].contains("cwd: \"/ws\""),
        "{fs:?}"
    );
    assert!(fs["/state/checkpoints/index.md"].starts_with("# Checkpoint History"));

    let plan = "# Test Plan\n\nThis is a test.";
    w.call(
        &mut p,
        &mut [],
        "session.plan.update",
        json!({"sessionId": "s", "content": plan}),
    );
    serve_files(&mut w, &mut p, &mut fs);
    assert_eq!(fs["/state/plan.md"], plan);
    // The store's copy of the plan is not in the provider's log.
    assert!(!fs["/state/events.jsonl"].contains("agentwireContent"));
    let read = w.call(
        &mut p,
        &mut [],
        "session.plan.read",
        json!({"sessionId": "s"}),
    );
    assert_eq!(read["result"]["path"], "/state/plan.md", "{read}");
    w.call(
        &mut p,
        &mut [],
        "session.plan.delete",
        json!({"sessionId": "s"}),
    );
    serve_files(&mut w, &mut p, &mut fs);
    assert!(!fs.contains_key("/state/plan.md"), "{fs:?}");

    let compacted = w.call(
        &mut p,
        &mut [],
        "session.history.compact",
        json!({"sessionId": "s"}),
    );
    assert_eq!(compacted["result"]["success"], true, "{compacted}");
    serve_files(&mut w, &mut p, &mut fs);
    let complete = fs["/state/events.jsonl"]
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "session.compaction_complete")
        .expect("the compaction in the provider's log");
    assert_eq!(complete["data"]["checkpointNumber"], 1);
    let path = complete["data"]["checkpointPath"].as_str().unwrap();
    assert!(path.starts_with("/state/checkpoints/001-"), "{path}");
    assert!(
        fs[path].starts_with("# Checkpoint 1: hello"),
        "{}",
        fs[path]
    );
    let filename = path.rsplit('/').next().unwrap();
    assert!(fs["/state/checkpoints/index.md"].contains(&format!("| 1 | hello | {filename} |")));
    let listed = w.call(
        &mut p,
        &mut [],
        "session.workspaces.listCheckpoints",
        json!({"sessionId": "s"}),
    );
    assert_eq!(
        listed["result"]["checkpoints"],
        json!([{"number": 1, "title": "hello", "filename": filename}])
    );
    let read = w.call(
        &mut p,
        &mut [],
        "session.workspaces.readCheckpoint",
        json!({"sessionId": "s", "number": 1}),
    );
    assert_eq!(read["result"]["content"], fs[path].as_str());
}

/// As the runtime, a connection cannot become the file provider once sessions exist (their
/// files are already somewhere else); one that is already a provider may register again.
#[test]
fn a_file_provider_is_refused_once_sessions_exist() {
    let mut w = World::new(HostConfig::default());
    let mut first = w.connect();
    let params = json!({"initialCwd": "/ws", "sessionStatePath": "/state", "conventions": "posix"});
    let set = w.call(&mut first, &mut [], "sessionFs.setProvider", params.clone());
    assert_eq!(set["result"], json!({"success": true}), "{set}");
    create(&mut w, &mut first, "s", json!({}));
    let again = w.call(&mut first, &mut [], "sessionFs.setProvider", params.clone());
    assert_eq!(again["result"], json!({"success": true}), "{again}");
    let mut late = w.connect();
    let refused = w.call(&mut late, &mut [], "sessionFs.setProvider", params);
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("before any session exists"), "{refused}");
}

/// A host and a connection that provides files and keeps session state in `/state`.
fn state_provider() -> (World, Peer) {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    w.call(
        &mut p,
        &mut [],
        "sessionFs.setProvider",
        json!({"initialCwd": "/ws", "sessionStatePath": "/state", "conventions": "posix"}),
    );
    (w, p)
}

/// A provider that fails a state write stops getting the session's state, and the session
/// says why once (a `session.warning`); the turn goes on.
#[test]
fn a_failed_state_write_stops_the_copy_with_one_warning() {
    let (mut w, mut p) = state_provider();
    create(&mut w, &mut p, "s", json!({}));
    let asked = p
        .inbox
        .iter()
        .find(|m| m["method"] == "sessionFs.mkdir")
        .cloned()
        .expect("the state directory is made first");
    w.send_frame(
        &p,
        &json!({"jsonrpc": "2.0", "id": asked["id"],
                "result": {"error": {"code": "EACCES", "message": "read-only"}}}),
    );
    w.pump(&mut [&mut p]);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hello"}),
    );
    w.run_timers(&mut [&mut p]);
    let warnings: Vec<Value> = p
        .events("s")
        .into_iter()
        .filter(|e| e["type"] == "session.warning")
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let message = warnings[0]["data"]["message"].as_str().unwrap();
    assert!(message.contains("read-only"), "{message}");
    let later = p
        .inbox
        .iter()
        .filter(|m| {
            m["method"]
                .as_str()
                .is_some_and(|m| m.starts_with("sessionFs."))
        })
        .count();
    assert_eq!(later, 1, "nothing is written after the failure");
    assert!(p.events("s").iter().any(|e| e["type"] == "session.idle"));
}

/// `session.idle` waits for the session's state copy: a client that reads `events.jsonl`
/// once the turn is idle finds the whole turn in it. While the provider has not answered
/// the turn's writes, no `session.idle` is sent; once it answers them all, it is.
#[test]
fn session_idle_waits_for_the_state_copy_of_the_turn() {
    let (mut w, mut p) = state_provider();
    create(&mut w, &mut p, "s", json!({"workingDirectory": "/ws"}));
    let mut fs = BTreeMap::new();
    serve_files(&mut w, &mut p, &mut fs);
    w.call(
        &mut p,
        &mut [],
        "session.send",
        json!({"sessionId": "s", "prompt": "hello"}),
    );
    // Run the turn to its end without answering a single write (before the writes' own
    // deadline, which would stop the copy).
    while !p.types("s").iter().any(|t| t == "assistant.turn_end") {
        let t = w.host.poll_timeout().expect("the turn goes on");
        w.now = t;
        w.host.handle_timeout(t);
        w.pump(&mut [&mut p]);
    }
    let idle = |p: &Peer| p.types("s").iter().filter(|t| *t == "session.idle").count();
    assert!(
        p.types("s").iter().any(|t| t == "assistant.message"),
        "{:?}",
        p.types("s")
    );
    assert_eq!(
        idle(&p),
        0,
        "idle before the state copy: {:?}",
        p.types("s")
    );
    serve_files(&mut w, &mut p, &mut fs);
    assert_eq!(idle(&p), 1, "{:?}", p.types("s"));
    let copied: Vec<Value> = fs["/state/events.jsonl"]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(copied.iter().any(|e| e["type"] == "assistant.message"));
}
