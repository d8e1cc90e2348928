//! Built-in tools run through the client: `fs/*` writes, `terminal/*`, deadlines.

use super::*;

#[test]
fn writes_and_shell_commands_use_the_client() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "write it");
    let tool_call = peer.updates().into_iter().last_where("tool_call");
    assert_eq!(tool_call["content"][0]["type"], "diff");
    allow(&mut w, &mut peer, "allow-once");
    let write = peer.requests("fs/write_text_file").remove(0);
    assert_eq!(
        write["params"],
        json!({"sessionId": session, "path": "/work/project/out.txt", "content": "new text"})
    );
    w.respond(&mut peer, &write["id"], Value::Null);
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    assert!(peer.agent_text().ends_with("done: written"));

    let id = prompt(&mut w, &mut peer, &session, "run ls");
    allow(&mut w, &mut peer, "allow-once");
    let create = peer.requests("terminal/create").remove(0);
    assert_eq!(create["params"]["command"], "sh");
    assert_eq!(create["params"]["args"], json!(["-c", "ls -l"]));
    assert_eq!(create["params"]["cwd"], "/work/project");
    w.respond(&mut peer, &create["id"], json!({"terminalId": "t1"}));
    let embed = peer.updates().into_iter().last_where("tool_call_update");
    assert_eq!(
        embed["content"][0],
        json!({"type": "terminal", "terminalId": "t1"})
    );
    let wait = peer.requests("terminal/wait_for_exit").remove(0);
    w.respond(&mut peer, &wait["id"], json!({"exitCode": 0}));
    let output = peer.requests("terminal/output").remove(0);
    w.respond(
        &mut peer,
        &output["id"],
        json!({"output": "a.txt\n", "truncated": false}),
    );
    let release = peer.requests("terminal/release").remove(0);
    assert_eq!(release["params"]["terminalId"], "t1");
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    assert!(peer.agent_text().ends_with("output: a.txt\n"));
    w.respond(&mut peer, &release["id"], json!({}));
    assert_eq!(w.host.acp_ignored_responses(peer.conn), Some(0));
}

#[test]
fn an_unanswered_fs_request_times_out() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "read file a.txt");
    allow(&mut w, &mut peer, "allow-once");
    let read = peer.requests("fs/read_text_file").remove(0);
    w.advance(&mut peer, crate::acp::FS_TIMEOUT + Duration::from_millis(1));
    let cancel = peer
        .inbox
        .iter()
        .find(|m| m["method"] == "$/cancel_request")
        .expect("withdrawn at the deadline");
    assert_eq!(cancel["params"]["requestId"], read["id"]);
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    let failed = peer.updates().into_iter().last_where("tool_call_update");
    assert_eq!(failed["status"], "failed");
}
