//! Whole conversations of the UI against scripted host messages.

use super::*;
use agentwire::frame::{encode_frame, FrameDecoder, FrameLimits, Framing};

/// The requests in `bytes`, as (id, method, params).
fn sent(app: &mut App) -> Vec<(u64, String, Value)> {
    let bytes = app.take_output();
    let mut frames = FrameDecoder::new(Framing::ContentLength, FrameLimits::default());
    frames.push(&bytes).unwrap();
    let mut out = Vec::new();
    while let Some(body) = frames.next_frame().unwrap() {
        let v: Value = serde_json::from_slice(&body).unwrap();
        out.push((
            v["id"].as_u64().unwrap_or(0),
            v["method"].as_str().unwrap_or("").to_owned(),
            v["params"].clone(),
        ));
    }
    out
}

fn methods(requests: &[(u64, String, Value)]) -> Vec<&str> {
    requests.iter().map(|(_, m, _)| m.as_str()).collect()
}

/// Feeds one message from the host, framed, to the app.
fn host_sends(app: &mut App, message: Value) {
    let mut wire = bytes::BytesMut::new();
    encode_frame(
        Framing::ContentLength,
        &serde_json::to_vec(&message).unwrap(),
        &mut wire,
    );
    app.on_bytes(&wire);
}

fn reply(app: &mut App, id: u64, result: Value) {
    host_sends(app, json!({"jsonrpc": "2.0", "id": id, "result": result}));
}

fn notify(app: &mut App, method: &str, params: Value) {
    let mut message = json!({"jsonrpc": "2.0", "method": method});
    if !params.is_null() {
        message["params"] = params;
    }
    host_sends(app, message);
}

fn event(app: &mut App, session: &str, id: &str, ty: &str, data: Value) {
    notify(
        app,
        "session.event",
        json!({"sessionId": session, "event": {"type": ty, "data": data, "id": id}}),
    );
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn type_line(app: &mut App, text: &str) {
    for c in text.chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
}

/// An app that created session `s1` (no foreground session existed).
fn started() -> App {
    let mut app = App::new(AppOptions {
        token: Some("tok".into()),
        cwd: Some("/w".into()),
    });
    app.start();
    let out = sent(&mut app);
    assert_eq!(methods(&out), ["connect", "session.getForeground"]);
    assert_eq!(out[0].2, json!({"token": "tok"}));
    reply(&mut app, out[0].0, json!({"ok": true}));
    reply(&mut app, out[1].0, json!({}));
    let out = sent(&mut app);
    assert_eq!(methods(&out), ["session.create"]);
    assert_eq!(
        out[0].2,
        json!({"requestPermission": true, "requestElicitation": true,
               "workingDirectory": "/w"})
    );
    reply(&mut app, out[0].0, json!({"sessionId": "s1"}));
    let out = sent(&mut app);
    assert_eq!(methods(&out), ["session.setForeground"]);
    assert_eq!(out[0].2, json!({"sessionId": "s1"}));
    assert_eq!(app.session(), Some("s1"));
    app
}

#[test]
fn creates_a_session_sends_prompts_and_shows_the_answer() {
    let mut app = started();
    type_line(&mut app, "hello");
    let out = sent(&mut app);
    assert_eq!(methods(&out), ["session.send"]);
    assert_eq!(out[0].2, json!({"sessionId": "s1", "prompt": "hello"}));
    assert_eq!(app.input().text(), "");
    event(
        &mut app,
        "s1",
        "e1",
        "user.message",
        json!({"content": "hello"}),
    );
    event(
        &mut app,
        "other",
        "x",
        "user.message",
        json!({"content": "no"}),
    );
    event(
        &mut app,
        "s1",
        "e2",
        "assistant.message",
        json!({"content": "You said: hello"}),
    );
    let lines: Vec<_> = app.transcript().lines().iter().map(|l| &l.text).collect();
    assert_eq!(lines, ["hello", "You said: hello"]);
    // Empty input sends nothing; /quit quits.
    app.on_key(key(KeyCode::Enter));
    assert!(sent(&mut app).is_empty());
    type_line(&mut app, "/quit");
    assert!(app.should_quit());
}

#[test]
fn joins_the_foreground_session_at_start() {
    let mut app = App::new(AppOptions::default());
    app.start();
    let out = sent(&mut app);
    reply(&mut app, out[1].0, json!({"sessionId": "fg"}));
    let out = sent(&mut app);
    assert_eq!(methods(&out), ["session.resume", "session.getMessages"]);
    assert_eq!(out[0].2["disableResume"], true);
    assert_eq!(out[0].2["requestPermission"], true);
    assert_eq!(app.session(), Some("fg"));
}

#[test]
fn follows_the_foreground_and_loads_history_in_order() {
    let mut app = started();
    event(
        &mut app,
        "s1",
        "a",
        "user.message",
        json!({"content": "old"}),
    );
    notify(
        &mut app,
        "session.lifecycle",
        json!({"type": "session.foreground", "sessionId": "s1"}),
    );
    assert!(sent(&mut app).is_empty(), "its own session: nothing to do");
    notify(
        &mut app,
        "session.lifecycle",
        json!({"type": "session.foreground", "sessionId": "s2"}),
    );
    let out = sent(&mut app);
    assert_eq!(
        methods(&out),
        ["session.detach", "session.resume", "session.getMessages"]
    );
    assert_eq!(out[0].2, json!({"sessionId": "s1"}));
    assert_eq!(app.session(), Some("s2"));
    // A live event overtakes the history response: it is applied after the history,
    // and once.
    event(
        &mut app,
        "s2",
        "h2",
        "assistant.message",
        json!({"content": "B"}),
    );
    event(
        &mut app,
        "s2",
        "h3",
        "user.message",
        json!({"content": "C"}),
    );
    assert!(app.transcript().lines().iter().all(|l| l.text != "C"));
    reply(&mut app, out[1].0, json!({"sessionId": "s2"}));
    reply(
        &mut app,
        out[2].0,
        json!({"events": [
            {"type": "user.message", "data": {"content": "A"}, "id": "h1"},
            {"type": "assistant.message", "data": {"content": "B"}, "id": "h2"}]}),
    );
    let lines: Vec<_> = app.transcript().lines().iter().map(|l| &l.text).collect();
    assert_eq!(lines, ["A", "B", "C"]);
    event(
        &mut app,
        "s2",
        "h4",
        "assistant.message",
        json!({"content": "D"}),
    );
    assert_eq!(app.transcript().lines().last().unwrap().text, "D");
}

#[test]
fn permission_prompts_take_y_and_n() {
    let mut app = started();
    event(
        &mut app,
        "s1",
        "p",
        "permission.requested",
        json!({"requestId": "r1", "permissionRequest": {"kind": "read", "path": "/a"}}),
    );
    assert_eq!(
        app.mode(),
        Mode::Permission {
            summary: "read request: /a"
        }
    );
    app.on_key(key(KeyCode::Char('x')));
    assert!(sent(&mut app).is_empty());
    assert_eq!(app.input().text(), "", "keys do not leak into the input");
    app.on_key(key(KeyCode::Char('y')));
    let out = sent(&mut app);
    assert_eq!(
        out[0].1,
        "session.permissions.handlePendingPermissionRequest"
    );
    assert_eq!(
        out[0].2,
        json!({"sessionId": "s1", "requestId": "r1", "result": {"kind": "approve-once"}})
    );
    assert_eq!(app.mode(), Mode::Chat);
    event(
        &mut app,
        "s1",
        "q",
        "permission.requested",
        json!({"requestId": "r2", "permissionRequest": {}}),
    );
    app.on_key(key(KeyCode::Char('n')));
    assert_eq!(sent(&mut app)[0].2["result"], json!({"kind": "reject"}));
}

#[test]
fn forms_are_filled_field_by_field() {
    let mut app = started();
    event(
        &mut app,
        "s1",
        "f",
        "elicitation.requested",
        json!({"requestId": "e1", "message": "Who?", "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"]}}),
    );
    let Mode::Form { field, steps, .. } = app.mode() else {
        panic!("expected a form");
    };
    assert_eq!((field.map(|f| f.name.as_str()), steps), (Some("name"), 2));
    type_line(&mut app, "Ada");
    assert!(matches!(app.mode(), Mode::Form { step: 1, .. }));
    type_line(&mut app, "old");
    assert!(app.status().contains("whole number"), "{}", app.status());
    assert!(sent(&mut app).is_empty());
    app.on_key(key(KeyCode::Home));
    for _ in 0..3 {
        app.on_key(key(KeyCode::Delete));
    }
    type_line(&mut app, "36");
    let out = sent(&mut app);
    assert_eq!(out[0].1, "session.ui.handlePendingElicitation");
    assert_eq!(
        out[0].2["result"],
        json!({"action": "accept", "content": {"name": "Ada", "age": 36}})
    );
    assert_eq!(app.mode(), Mode::Chat);

    event(
        &mut app,
        "s1",
        "g",
        "elicitation.requested",
        json!({"requestId": "e2", "message": "Sure?"}),
    );
    app.on_key(key(KeyCode::Esc));
    assert_eq!(sent(&mut app)[0].2["result"], json!({"action": "decline"}));
}

#[test]
fn errors_odd_messages_and_host_requests_are_handled() {
    let mut app = started();
    type_line(&mut app, "hi");
    let out = sent(&mut app);
    host_sends(
        &mut app,
        json!({"jsonrpc": "2.0", "id": out[0].0,
               "error": {"code": -32603, "message": "Session not found"}}),
    );
    assert_eq!(app.status(), "session.send failed: Session not found");
    // Unknown ids, unknown notifications and events without a session are ignored.
    reply(&mut app, 999, json!({}));
    notify(&mut app, "brand.new", json!(null));
    notify(&mut app, "session.event", json!({"event": {}}));
    notify(&mut app, "session.lifecycle", json!({"type": 3}));
    // A request from the host is answered with -32601.
    host_sends(
        &mut app,
        json!({"jsonrpc": "2.0", "id": 7, "method": "hooks.invoke"}),
    );
    let bytes = app.take_output();
    assert!(std::str::from_utf8(&bytes).unwrap().contains("-32601"));
    // Deleting the shown session starts a new one.
    notify(
        &mut app,
        "session.lifecycle",
        json!({"type": "session.deleted", "sessionId": "s1"}),
    );
    assert_eq!(methods(&sent(&mut app)), ["session.create"]);
    assert_eq!(app.session(), None);
}

#[test]
fn input_editing_and_quit_keys() {
    let mut app = started();
    for c in "helo".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Left));
    app.on_key(key(KeyCode::Char('l')));
    app.on_key(key(KeyCode::End));
    app.on_key(key(KeyCode::Backspace));
    assert_eq!(app.input().text(), "hell");
    assert_eq!(app.input().cursor(), 4);
    app.on_key(key(KeyCode::PageUp));
    assert_eq!(app.scroll(), PAGE);
    app.clamp_scroll(3);
    assert_eq!(app.scroll(), 3);
    app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.should_quit());
}
