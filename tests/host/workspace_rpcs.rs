//! The Copilot dialect's queue, schedule, task, pending-answer, workspace-checkpoint, paste,
//! diff and user-requested shell methods, and the shell policy, through the sans-IO host.

use agentwire::host::{Effect, EffectEvent, EffectId, EffectOp, HostConfig, Output};
use serde_json::{json, Value};

use crate::support::*;

/// The next command (a `sh -c` process) the host asked for: `(its effect id, command)`.
fn next_exec(w: &mut World) -> (EffectId, String) {
    loop {
        match w.host.poll_output() {
            Some(Output::Effect(Effect {
                id,
                op: EffectOp::ProcessSpawn(mut spec),
            })) => {
                assert_eq!(spec.argv[..2], ["sh", "-c"], "a command line");
                return (id, spec.argv.pop().unwrap());
            }
            Some(_) => continue,
            None => panic!("no ProcessSpawn"),
        }
    }
}

fn response(p: &Peer, id: u64) -> Value {
    p.inbox
        .iter()
        .find(|m| m["id"] == json!(id) && m.get("method").is_none())
        .cloned()
        .unwrap_or_else(|| panic!("no response {id}"))
}

#[test]
fn shell_commands_need_the_opt_in_or_the_connection_token() {
    // No token, no opt-in (a plain TCP client): refused.
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    for (method, params) in [
        (
            "session.shell.exec",
            json!({"sessionId":"s","command":"true"}),
        ),
        (
            "session.shell.executeUserRequested",
            json!({"sessionId":"s","requestId":"r","command":"true"}),
        ),
    ] {
        let r = w.call(&mut p, &mut [], method, params);
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("--allow-shell"), "{r}");
    }
    assert!(w.host.poll_output().is_none());

    // A connection that passed the token may; one that did not is not let in at all.
    let config = HostConfig::default().with_connection_token(Some("secret".into()));
    let mut w = World::new(config);
    let mut p = w.connect();
    w.call(&mut p, &mut [], "connect", json!({"token":"secret"}));
    create(&mut w, &mut p, "s", json!({}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.shell.exec",
        json!({"sessionId":"s","command":"true"}),
    );
    assert!(r["result"]["processId"].is_string(), "{r}");
    assert_eq!(next_exec(&mut w).1, "true");
}

#[test]
fn user_requested_commands_answer_when_they_end_and_can_be_cancelled() {
    let mut w = World::new(HostConfig::default().with_shell_enabled(true));
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory":"/w"}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.shell.cancelUserRequested",
        json!({"sessionId":"s","requestId":"missing"}),
    );
    assert_eq!(r["result"], json!({"cancelled": false}));

    // Answered when the command ends, with its collected output (no shell.output).
    let id = p.next_id;
    p.next_id += 1;
    w.send_frame(
        &p,
        &json!({"jsonrpc":"2.0","id":id,"method":"session.shell.executeUserRequested",
                "params":{"sessionId":"s","requestId":"r1","command":"echo hi"}}),
    );
    w.pump(&mut [&mut p]);
    assert!(p.inbox.iter().all(|m| m["id"] != json!(id)), "not yet");
    let (process, command) = next_exec(&mut w);
    assert_eq!(command, "echo hi");
    w.host
        .handle_effect(w.now, process, EffectEvent::Stdout(b"hi\n".to_vec()));
    w.host
        .handle_effect(w.now, process, EffectEvent::Exit(Some(0)));
    w.pump(&mut [&mut p]);
    let r = response(&p, id);
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(r["result"]["exitCode"], 0);
    assert_eq!(r["result"]["output"], "hi\n");
    assert!(r["result"]["toolCallId"].as_str().unwrap().len() > 5);
    assert!(p.inbox.iter().all(|m| m["method"] != "shell.output"));

    // Cancelled: killed, then answered as failed.
    let id = p.next_id;
    p.next_id += 1;
    w.send_frame(
        &p,
        &json!({"jsonrpc":"2.0","id":id,"method":"session.shell.executeUserRequested",
                "params":{"sessionId":"s","requestId":"r2","command":"sleep 60"}}),
    );
    let (process, _) = next_exec(&mut w);
    let r = w.call(
        &mut p,
        &mut [],
        "session.shell.cancelUserRequested",
        json!({"sessionId":"s","requestId":"r2"}),
    );
    assert_eq!(r["result"], json!({"cancelled": true}));
    assert_eq!(
        w.host.poll_output(),
        Some(Output::Effect(Effect {
            id: process,
            op: EffectOp::ProcessKill {
                signal: "SIGKILL".into()
            }
        }))
    );
    w.host
        .handle_effect(w.now, process, EffectEvent::Exit(None));
    w.pump(&mut [&mut p]);
    let r = response(&p, id);
    assert_eq!(r["result"]["success"], false, "{r}");
    assert!(r["result"]["error"].as_str().unwrap().contains("cancelled"));
}

#[test]
fn the_queue_lists_and_drops_commands_not_yet_offered() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let pending = |w: &mut World, p: &mut Peer| {
        w.call(
            p,
            &mut [],
            "session.queue.pendingItems",
            json!({"sessionId":"s"}),
        )["result"]
            .clone()
    };
    assert_eq!(
        pending(&mut w, &mut p),
        json!({"items": [], "steeringMessages": []})
    );
    let r = w.call(
        &mut p,
        &mut [],
        "session.queue.removeMostRecent",
        json!({"sessionId":"s"}),
    );
    assert_eq!(r["result"], json!({"removed": false}));
    for c in ["/first", "/second"] {
        w.call(
            &mut p,
            &mut [],
            "session.commands.enqueue",
            json!({"sessionId":"s","command":c}),
        );
    }
    // The first is offered (command.queued), the second waits.
    let items = pending(&mut w, &mut p)["items"].clone();
    assert_eq!(items.as_array().unwrap().len(), 1, "{items}");
    assert_eq!(items[0]["kind"], "command");
    assert_eq!(items[0]["displayText"], "/second");
    let r = w.call(
        &mut p,
        &mut [],
        "session.queue.removeMostRecent",
        json!({"sessionId":"s"}),
    );
    assert_eq!(r["result"], json!({"removed": true}));
    assert_eq!(pending(&mut w, &mut p)["items"], json!([]));
    w.call(
        &mut p,
        &mut [],
        "session.commands.enqueue",
        json!({"sessionId":"s","command":"/third"}),
    );
    assert_eq!(
        pending(&mut w, &mut p)["items"].as_array().unwrap().len(),
        1
    );
    w.call(
        &mut p,
        &mut [],
        "session.queue.clear",
        json!({"sessionId":"s"}),
    );
    assert_eq!(pending(&mut w, &mut p)["items"], json!([]));
    let r = w.call(
        &mut p,
        &mut [],
        "session.queue.pendingItems",
        json!({"sessionId":"nope"}),
    );
    assert_eq!(r["error"]["code"], -32603);
}

#[test]
fn schedules_tasks_and_pending_answers_of_a_fresh_session() {
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let mut call = |method: &str, extra: Value| {
        let mut params = json!({"sessionId":"s"});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        w.call(&mut p, &mut [], method, params)
    };
    assert_eq!(
        call("session.schedule.list", json!({}))["result"],
        json!({"entries": []})
    );
    assert_eq!(
        call("session.schedule.stop", json!({"id": 9007199254740991u64}))["result"],
        json!({})
    );
    assert_eq!(
        call("session.schedule.stop", json!({}))["error"]["code"],
        -32602
    );
    assert_eq!(
        call("session.tasks.getProgress", json!({"id":"x"}))["result"],
        json!({"progress": null})
    );
    assert_eq!(
        call("session.tasks.cancel", json!({"id":"x"}))["result"],
        json!({"cancelled": false})
    );
    let sent = call(
        "session.tasks.sendMessage",
        json!({"id":"x","message":"hi"}),
    );
    assert_eq!(sent["result"]["sent"], false);
    assert!(sent["result"]["error"].is_string());
    assert_eq!(
        call("session.tasks.getCurrentPromotable", json!({}))["result"],
        json!({})
    );
    for method in [
        "session.ui.handlePendingUserInput",
        "session.ui.handlePendingAutoModeSwitch",
        "session.ui.handlePendingExitPlanMode",
        "session.ui.handlePendingSessionLimitsExhausted",
        "session.mcp.headers.handlePendingHeadersRefreshRequest",
    ] {
        let r = call(method, json!({"requestId":"missing"}));
        assert_eq!(r["result"], json!({"success": false}), "{method}: {r}");
    }
    assert_eq!(
        call(
            "session.commands.handlePendingCommand",
            json!({"requestId":"missing"})
        )["result"],
        json!({"success": true})
    );
    let unregister = "session.ui.unregisterDirectAutoModeSwitchHandler";
    assert_eq!(
        call(unregister, json!({"handle":"missing"}))["result"],
        json!({"unregistered": false})
    );
    let handle = call("session.ui.registerDirectAutoModeSwitchHandler", json!({}))["result"]
        ["handle"]
        .clone();
    assert!(handle.is_string());
    assert_eq!(
        call(unregister, json!({"handle":handle}))["result"],
        json!({"unregistered": true})
    );
    assert_eq!(
        call(unregister, json!({"handle":handle}))["result"],
        json!({"unregistered": false})
    );
}

#[test]
fn checkpoints_pastes_and_the_diff() {
    let config = HostConfig::default()
        .with_workspace_root(Some("/data".into()))
        .with_shell_enabled(true);
    let mut w = World::new(config);
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({"workingDirectory":"/repo"}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.workspaces.listCheckpoints",
        json!({"sessionId":"s"}),
    );
    assert_eq!(r["result"], json!({"checkpoints": []}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.workspaces.readCheckpoint",
        json!({"sessionId":"s","number":4294967294u64}),
    );
    assert_eq!(r["result"], json!({"content": null}));

    let content = "Large paste 🚀\n".repeat(100);
    let r = w.call(
        &mut p,
        &mut [],
        "session.workspaces.saveLargePaste",
        json!({"sessionId":"s","content":content}),
    );
    let saved = r["result"]["saved"].clone();
    assert_eq!(saved["sizeBytes"], content.len(), "{r}");
    let filename = saved["filename"].as_str().unwrap();
    assert_eq!(
        saved["filePath"],
        format!("/data/session-state/s/files/{filename}")
    );
    let r = w.call(
        &mut p,
        &mut [],
        "session.workspaces.readFile",
        json!({"sessionId":"s","path":filename}),
    );
    assert_eq!(r["result"]["content"], content);

    // The diff runs git through the runtime and parses its output.
    let id = p.next_id;
    p.next_id += 1;
    w.send_frame(
        &p,
        &json!({"jsonrpc":"2.0","id":id,"method":"session.workspaces.diff",
                "params":{"sessionId":"s","mode":"unstaged"}}),
    );
    let (process, command) = next_exec(&mut w);
    assert!(
        command.contains("git -c core.quotepath=off diff"),
        "{command}"
    );
    let diff = "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y\n\
diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+n\n\
diff --git a/old.txt b/gone.txt\nsimilarity index 100%\nrename from old.txt\nrename to gone.txt\n";
    w.host.handle_effect(
        w.now,
        process,
        EffectEvent::Stdout(diff.as_bytes().to_vec()),
    );
    w.host
        .handle_effect(w.now, process, EffectEvent::Exit(Some(0)));
    w.pump(&mut [&mut p]);
    let r = response(&p, id)["result"].clone();
    assert_eq!(r["requestedMode"], "unstaged");
    let kinds: Vec<(&str, &str)> = r["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap(),
                c["changeType"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("a.txt", "modified"),
            ("new.txt", "added"),
            ("gone.txt", "renamed")
        ]
    );
    assert!(r["changes"][0]["diff"].as_str().unwrap().contains("+y"));
    assert_eq!(r["changes"][2]["oldPath"], "old.txt");

    // Outside a git work tree: no changes.
    let id = p.next_id;
    p.next_id += 1;
    w.send_frame(
        &p,
        &json!({"jsonrpc":"2.0","id":id,"method":"session.workspaces.diff",
                "params":{"sessionId":"s","mode":"branch"}}),
    );
    let (process, _) = next_exec(&mut w);
    w.host
        .handle_effect(w.now, process, EffectEvent::Exit(Some(3)));
    w.pump(&mut [&mut p]);
    let r = response(&p, id)["result"].clone();
    assert_eq!(r["changes"], json!([]));
    assert_eq!(r["mode"], "branch");

    // Without a workspace root there is nowhere to report: `saved: null`.
    let mut w = World::new(HostConfig::default());
    let mut p = w.connect();
    create(&mut w, &mut p, "s", json!({}));
    let r = w.call(
        &mut p,
        &mut [],
        "session.workspaces.saveLargePaste",
        json!({"sessionId":"s","content":"x"}),
    );
    assert_eq!(r["result"], json!({"saved": null}));
}
