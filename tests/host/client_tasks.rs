//! Client-owned tasks (`session.tasks.register` / `update`): registered by a client of the
//! session, updated in sequence by their owner only, listed to the clients that declared
//! the `client` task kind, cancelled by asking their owner (`tasks.cancel`), orphaned when
//! the owner leaves and reclaimed by another client with the right sequence.

use serde_json::{json, Value};

use crate::support::{create, response, send_request, Peer, World};
use agentwire::host::HostConfig;

/// Calls `method` on session `s` with `extra` params as `p`.
fn call(w: &mut World, p: &mut Peer, method: &str, extra: Value) -> Value {
    let mut params = json!({"sessionId": "s"});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    w.call(p, &mut [], method, params)
}

fn register(w: &mut World, p: &mut Peer, key: &str, extra: Value) -> Value {
    let mut params = json!({"type": "client", "clientTaskId": key,
                            "description": "Indexing the repository", "cancellable": true});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    call(w, p, "session.tasks.register", params)
}

fn update(w: &mut World, p: &mut Peer, id: &str, sequence: i64, update: Value) -> Value {
    call(
        w,
        p,
        "session.tasks.update",
        json!({"id": id, "sequence": sequence, "update": update}),
    )
}

fn listed(w: &mut World, p: &mut Peer) -> Vec<Value> {
    call(w, p, "session.tasks.list", json!({}))["result"]["tasks"]
        .as_array()
        .unwrap()
        .clone()
}

/// A connection that declared the `client` task kind.
fn connect_decoding(w: &mut World) -> Peer {
    let mut p = w.connect();
    let r = w.call(
        &mut p,
        &mut [],
        "connect",
        json!({"supportedTaskKinds": ["agent", "client"]}),
    );
    assert_eq!(
        r["result"]["taskKinds"],
        json!(["agent", "shell", "client"])
    );
    p
}

/// Session `s` created by a client that will own tasks, joined by another; both declared
/// the `client` task kind.
fn owner_and_other() -> (World, Peer, Peer) {
    let mut w = World::new(HostConfig::default());
    let mut owner = connect_decoding(&mut w);
    create(&mut w, &mut owner, "s", json!({}));
    let mut other = connect_decoding(&mut w);
    call(&mut w, &mut other, "session.resume", json!({}));
    (w, owner, other)
}

/// The id of a task `p` registers as `key`.
fn registered_id(w: &mut World, p: &mut Peer, key: &str, extra: Value) -> String {
    register(w, p, key, extra)["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_client_task_is_registered_updated_in_sequence_and_listed_to_who_decodes_it() {
    let (mut w, mut owner, mut other) = owner_and_other();
    let mut legacy = w.connect();
    call(&mut w, &mut legacy, "session.resume", json!({}));

    let r = register(&mut w, &mut owner, "k1", json!({"displayName": "Indexer"}))["result"].clone();
    assert_eq!(
        (r["created"].clone(), r["reclaimed"].clone()),
        (json!(true), json!(false))
    );
    let task = r["task"].clone();
    let id = task["id"].as_str().unwrap().to_owned();
    assert_eq!(task["type"], "client");
    assert_eq!(task["status"], "running");
    assert_eq!(task["sequence"], 0);
    assert_eq!(task["executionMode"], "background");
    assert_eq!(task["canCancel"], true);
    assert_eq!(task["displayName"], "Indexer");
    assert_eq!(task["owner"]["presence"], "connected");
    assert_eq!(task["owner"]["kind"], "sdk");

    // The owner registering its key again gets the same task; another client cannot.
    let again = register(&mut w, &mut owner, "k1", json!({}))["result"].clone();
    assert_eq!(again["created"], false);
    assert_eq!(again["task"]["id"], id.as_str());
    let theirs = register(&mut w, &mut other, "k1", json!({}));
    assert_eq!(theirs["error"]["code"], -32602, "{theirs}");
    assert_eq!(
        register(&mut w, &mut owner, "k9", json!({"type": "agent"}))["error"]["code"],
        -32602
    );

    // Updates apply in sequence, by the owner only.
    let progress = json!({"kind": "progress", "message": "scanned 10 files",
                          "percentage": 10, "phase": "scan"});
    let first = update(&mut w, &mut owner, &id, 1, progress.clone())["result"].clone();
    assert_eq!(
        (first["applied"].clone(), first["duplicate"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(first["task"]["sequence"], 1);
    let dup = update(&mut w, &mut owner, &id, 1, progress.clone())["result"].clone();
    assert_eq!(
        (dup["applied"].clone(), dup["duplicate"].clone()),
        (json!(false), json!(true))
    );
    assert_eq!(
        update(&mut w, &mut owner, &id, 3, progress.clone())["error"]["code"],
        -32602
    );
    assert_eq!(
        update(&mut w, &mut other, &id, 2, progress)["error"]["code"],
        -32602
    );
    let bad = json!({"kind": "progress", "percentage": 400});
    assert_eq!(
        update(&mut w, &mut owner, &id, 2, bad)["error"]["code"],
        -32602
    );
    let idle = json!({"kind": "progress", "status": "idle", "percentage": null});
    let idle = update(&mut w, &mut owner, &id, 2, idle)["result"]["task"].clone();
    assert_eq!(idle["status"], "idle");
    assert!(idle["idleSince"].is_string());

    let progress = call(
        &mut w,
        &mut other,
        "session.tasks.getProgress",
        json!({"id": id}),
    );
    let progress = &progress["result"]["progress"];
    assert_eq!(progress["type"], "client");
    assert_eq!(progress["lastMessage"], "scanned 10 files");
    assert_eq!(progress["phase"], "scan");
    assert!(
        progress.get("percentage").is_none(),
        "null cleared it: {progress}"
    );
    assert_eq!(progress["recentActivity"][0]["message"], "scanned 10 files");
    assert_eq!(progress["sequence"], 2);

    assert_eq!(listed(&mut w, &mut other).len(), 1);
    assert!(
        listed(&mut w, &mut legacy).is_empty(),
        "no client kind declared"
    );

    // Over: it takes no more updates and can be removed.
    let done = json!({"kind": "completed", "message": "indexed", "result": {"files": 10}});
    let done = update(&mut w, &mut owner, &id, 3, done)["result"]["task"].clone();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"], json!({"files": 10}));
    assert!(done["completedAt"].is_string());
    let late = json!({"kind": "progress", "message": "more"});
    assert_eq!(
        update(&mut w, &mut owner, &id, 4, late)["error"]["code"],
        -32602
    );
    let removed = call(
        &mut w,
        &mut other,
        "session.tasks.remove",
        json!({"id": id}),
    );
    assert_eq!(removed["result"]["removed"], true);
    assert!(listed(&mut w, &mut other).is_empty());
}

#[test]
fn cancelling_asks_the_owner_and_callers_share_its_answer() {
    let (mut w, mut owner, mut other) = owner_and_other();
    let id = registered_id(&mut w, &mut owner, "k1", json!({}));
    let not = registered_id(&mut w, &mut owner, "k2", json!({"cancellable": false}));
    let r = call(
        &mut w,
        &mut other,
        "session.tasks.cancel",
        json!({"id": not}),
    );
    assert_eq!(r["result"]["cancelled"], false, "not cancellable");

    let params = json!({"sessionId": "s", "id": id});
    let first = send_request(&mut w, &mut other, "session.tasks.cancel", params.clone());
    let second = send_request(&mut w, &mut other, "session.tasks.cancel", params);
    w.pump(&mut [&mut owner, &mut other]);
    assert!(response(&other, first).is_none(), "waits for the owner");
    let asks: Vec<Value> = owner
        .inbox
        .iter()
        .filter(|m| m["method"] == "tasks.cancel")
        .cloned()
        .collect();
    assert_eq!(asks.len(), 1, "one request for both callers");
    let ask = &asks[0];
    assert_eq!(ask["params"]["id"], id.as_str());
    assert_eq!(ask["params"]["clientTaskId"], "k1");
    assert_eq!(ask["params"]["reason"], "cancel_requested");
    assert!(ask["params"]["cancellationId"].is_string());
    w.send_frame(
        &owner,
        &json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"cancelled": true}}),
    );
    w.pump(&mut [&mut owner, &mut other]);
    for id in [first, second] {
        assert_eq!(response(&other, id).unwrap()["result"]["cancelled"], true);
    }
    let task = listed(&mut w, &mut other)
        .into_iter()
        .find(|t| t["clientTaskId"] == "k1")
        .unwrap();
    assert_eq!(task["status"], "cancelled");
    assert_eq!(task["cancellationReason"], "cancel_requested");
    assert_eq!(task["canCancel"], false);
}

#[test]
fn a_task_whose_owner_left_is_orphaned_and_reclaimed_with_its_sequence() {
    let (mut w, mut owner, mut other) = owner_and_other();
    let id = registered_id(&mut w, &mut owner, "k1", json!({}));
    update(
        &mut w,
        &mut owner,
        &id,
        1,
        json!({"kind": "progress", "message": "half"}),
    );

    let now = w.now;
    w.host.handle_eof(now, owner.conn);
    w.pump(&mut [&mut other]);
    let task = listed(&mut w, &mut other).remove(0);
    assert_eq!(task["status"], "orphaned");
    assert_eq!(task["owner"]["presence"], "disconnected");
    assert!(task["orphanedAt"].is_string());
    assert_eq!(task["canCancel"], false);

    // Reclaiming needs the task's sequence.
    let wrong = register(&mut w, &mut other, "k1", json!({"expectedSequence": 0}));
    assert_eq!(wrong["error"]["code"], -32602);
    assert!(wrong["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expectedSequence 1"));
    let r = register(&mut w, &mut other, "k1", json!({"expectedSequence": 1}))["result"].clone();
    assert_eq!(
        (r["created"].clone(), r["reclaimed"].clone()),
        (json!(false), json!(true))
    );
    assert_eq!(r["task"]["id"], id.as_str());
    assert_eq!(r["task"]["status"], "running");
    assert!(r["task"]["reclaimedAt"].is_string());
    let failed = json!({"kind": "failed", "error": "disk full", "code": "ENOSPC"});
    let failed = update(&mut w, &mut other, &id, 2, failed)["result"]["task"].clone();
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"], "disk full");
    assert_eq!(failed["errorCode"], "ENOSPC");
}
