//! Elicitations reach ACP clients that advertised `elicitation` as `elicitation/create`.

use super::*;

fn form_caps() -> Value {
    json!({"elicitation": {"form": {}}})
}

/// A second ACP client attached to `session` with `caps`.
fn join(w: &mut World, session: &str, caps: Value) -> Peer {
    let mut peer = w.connect();
    w.call(
        &mut peer,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": caps}),
    );
    let resumed = w.call(
        &mut peer,
        "session/resume",
        json!({"sessionId": session, "cwd": "/work/project", "mcpServers": []}),
    );
    assert!(resumed.get("result").is_some(), "{resumed}");
    peer
}

#[test]
fn the_first_answer_resolves_the_elicitation_and_the_other_client_is_withdrawn() {
    let mut w = World::new();
    let (mut a, session) = w.ready(form_caps());
    let mut b = join(&mut w, &session, form_caps());
    let mut c = join(&mut w, &session, json!({}));
    let id = prompt(&mut w, &mut a, &session, "ask me");
    w.pump(&mut b);
    w.pump(&mut c);
    let asked = a.requests("elicitation/create");
    assert_eq!(asked.len(), 1, "{:#?}", a.inbox);
    let params = &asked[0]["params"];
    assert_eq!(params["sessionId"], json!(session));
    assert_eq!(params["mode"], "form");
    assert_eq!(params["message"], "Name?");
    assert_eq!(
        params["requestedSchema"]["properties"]["name"]["type"],
        "string"
    );
    assert_eq!(b.requests("elicitation/create").len(), 1);
    assert!(
        c.requests("elicitation/create").is_empty(),
        "c advertised none"
    );

    let b_ask = b.requests("elicitation/create")[0]["id"].clone();
    w.respond(
        &mut b,
        &b_ask,
        json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    w.pump(&mut a);
    let cancels: Vec<&Value> = a
        .inbox
        .iter()
        .filter(|m| m["method"] == "$/cancel_request")
        .collect();
    assert_eq!(cancels.len(), 1, "a's request is withdrawn: {:#?}", a.inbox);
    assert_eq!(cancels[0]["params"]["requestId"], asked[0]["id"]);
    assert_eq!(a.response(id).unwrap()["result"]["stopReason"], "end_turn");
    assert!(a.agent_text().contains("Ada"), "{:?}", a.agent_text());
}

#[test]
fn an_error_answer_cancels_the_elicitation() {
    let mut w = World::new();
    let (mut a, session) = w.ready(form_caps());
    let id = prompt(&mut w, &mut a, &session, "ask me");
    let asked = a.requests("elicitation/create");
    assert_eq!(asked.len(), 1);
    w.send(
        &mut a,
        json!({"jsonrpc": "2.0", "id": asked[0]["id"],
               "error": {"code": -32603, "message": "no dialog"}}),
    );
    assert_eq!(a.response(id).unwrap()["result"]["stopReason"], "end_turn");
    let text = a.agent_text();
    assert!(text.contains("cancel"), "{text:?}");
    assert!(!text.contains("Ada"), "{text:?}");
}

#[test]
fn a_mode_nobody_advertised_is_cancelled_at_once() {
    let mut w = World::new();
    let (mut a, session) = w.ready(json!({"elicitation": {"url": {}}}));
    let id = prompt(&mut w, &mut a, &session, "ask me");
    assert!(
        a.requests("elicitation/create").is_empty(),
        "a form to a url-only client"
    );
    assert_eq!(a.response(id).unwrap()["result"]["stopReason"], "end_turn");
    assert!(a.agent_text().contains("cancel"), "{:?}", a.agent_text());
}
