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
/// `fs` until nothing is pending. Returns the methods it answered.
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
                    fs.insert(path, m["params"]["content"].as_str().unwrap().to_owned());
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
            answered.push(fs_method.to_owned());
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
