//! Sans-IO conversations of the ACP dialect through the host (NDJSON frames in and out).

use std::time::Duration;

use serde_json::{json, Value};

use crate::agent::Scenario;
use crate::frame::{FrameDecoder, FrameLimits, Framing};
use crate::host::{ConnId, Dialect, Host, HostConfig};
use crate::Timestamp;

const T0: u64 = 1_795_983_976_952;

const SCENARIO: &str = r#"{
  "rules": [
    {"match": "read file", "steps": [{"read_file": "{path}"}, {"say": "{result}"}]},
    {"match": "write", "steps": [{"write_file": "out.txt", "content": "new text", "result": "written"},
                                 {"say": "done: {result}"}]},
    {"match": "run", "steps": [{"shell": "ls -l"}, {"say": "output: {result}"}]},
    {"match": "fetch", "steps": [{"shell": "curl https://Example.com/a", "permission": "url"},
                                 {"say": "fetched"}]},
    {"match": "outside", "steps": [{"read_file": "/etc/hosts", "permission": "path", "result": "x"},
                                   {"say": "{result}"}]},
    {"match": "hook", "steps": [{"read_file": "a.txt", "permission": "hook"}, {"say": "after: {result}"}]},
    {"match": "slow", "steps": [{"say": "one"}, {"sleep_ms": 1000}, {"say": "two"},
                                {"sleep_ms": 1000}, {"say": "three"}]},
    {"match": "fail", "steps": [{"error": "the model is down"}]}
  ],
  "default": [{"say": "You said: {prompt}"}]
}"#;

struct Peer {
    conn: ConnId,
    decoder: FrameDecoder,
    next_id: u64,
    inbox: Vec<Value>,
}

struct World {
    host: Host,
    now: Timestamp,
}

impl World {
    fn new() -> World {
        let scenario = Scenario::from_json(SCENARIO).unwrap();
        World {
            host: Host::new(HostConfig::with_scenario(scenario)),
            now: Timestamp::from_millis(T0),
        }
    }

    fn connect(&mut self) -> Peer {
        Peer {
            conn: self.host.open_dialect(self.now, Dialect::Acp),
            decoder: FrameDecoder::new(Framing::Ndjson, FrameLimits::default()),
            next_id: 0,
            inbox: Vec::new(),
        }
    }

    fn send_raw(&mut self, peer: &mut Peer, bytes: &[u8]) {
        self.now = self.now.saturating_add(Duration::from_millis(1));
        self.host.handle_bytes(self.now, peer.conn, bytes);
        self.pump(peer);
    }

    fn send(&mut self, peer: &mut Peer, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.send_raw(peer, &line);
    }

    /// Everything written to `peer` so far goes to its inbox. Other connections' frames are
    /// left queued until their own pump.
    fn pump(&mut self, peer: &mut Peer) {
        while let Some(frame) = self.host.poll_transmit(peer.conn) {
            let text = std::str::from_utf8(&frame).unwrap();
            assert!(text.ends_with('\n') && !text[..text.len() - 1].contains('\n'));
            peer.decoder.push(&frame).unwrap();
            while let Some(body) = peer.decoder.next_frame().unwrap() {
                peer.inbox.push(serde_json::from_slice(&body).unwrap());
            }
        }
        while self.host.poll_ready().is_some() {}
    }

    /// Sends a request; returns its id (the response may come later).
    fn request(&mut self, peer: &mut Peer, method: &str, params: Value) -> u64 {
        let id = peer.next_id;
        peer.next_id += 1;
        self.send(
            peer,
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        id
    }

    /// Sends a request and returns its response.
    fn call(&mut self, peer: &mut Peer, method: &str, params: Value) -> Value {
        let id = self.request(peer, method, params);
        peer.response(id)
            .unwrap_or_else(|| panic!("no response to {method}: {:#?}", peer.inbox))
    }

    fn respond(&mut self, peer: &mut Peer, id: &Value, result: Value) {
        self.send(peer, json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn advance(&mut self, peer: &mut Peer, by: Duration) {
        let until = self.now.saturating_add(by);
        while let Some(t) = self.host.poll_timeout() {
            if t > until {
                break;
            }
            self.now = t;
            self.host.handle_timeout(t);
            self.pump(peer);
        }
        self.now = until;
    }

    fn ready(&mut self, caps: Value) -> (Peer, String) {
        let mut peer = self.connect();
        let init = self.call(
            &mut peer,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": caps}),
        );
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        let new = self.call(
            &mut peer,
            "session/new",
            json!({"cwd": "/work/project", "mcpServers": []}),
        );
        let session = new["result"]["sessionId"].as_str().unwrap().to_owned();
        (peer, session)
    }
}

impl Peer {
    fn response(&self, id: u64) -> Option<Value> {
        self.inbox
            .iter()
            .find(|m| m["id"] == json!(id) && m.get("method").is_none())
            .cloned()
    }

    fn position_of_response(&self, id: u64) -> usize {
        self.inbox
            .iter()
            .position(|m| m["id"] == json!(id) && m.get("method").is_none())
            .expect("response")
    }

    fn updates(&self) -> Vec<Value> {
        self.inbox
            .iter()
            .filter(|m| m["method"] == "session/update")
            .map(|m| m["params"]["update"].clone())
            .collect()
    }

    fn update_kinds(&self) -> Vec<String> {
        self.updates()
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap().to_owned())
            .collect()
    }

    fn requests(&self, method: &str) -> Vec<Value> {
        self.inbox
            .iter()
            .filter(|m| m["method"] == method && m.get("id").is_some())
            .cloned()
            .collect()
    }

    fn agent_text(&self) -> String {
        self.updates()
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .map(|u| u["content"]["text"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn read_caps() -> Value {
    json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true})
}

#[test]
fn initialize_advertises_what_works_and_gates_other_requests() {
    let mut w = World::new();
    let mut peer = w.connect();
    let early = w.call(
        &mut peer,
        "session/new",
        json!({"cwd": "/w", "mcpServers": []}),
    );
    assert_eq!(early["error"]["code"], -32600, "{early}");
    let init = w.call(
        &mut peer,
        "initialize",
        json!({"protocolVersion": 7, "clientCapabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let r = &init["result"];
    assert_eq!(r["protocolVersion"], 1);
    assert_eq!(r["authMethods"], json!([]));
    assert_eq!(r["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        r["agentCapabilities"]["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}, "delete": {}})
    );
    assert_eq!(r["agentCapabilities"]["promptCapabilities"]["image"], false);
    assert_eq!(
        w.call(&mut peer, "authenticate", json!({"methodId": "x"}))["result"],
        json!({})
    );
    let unknown = w.call(&mut peer, "logout", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    assert_eq!(unknown["error"]["data"], json!({"method": "logout"}));
    let relative = w.call(
        &mut peer,
        "session/new",
        json!({"cwd": "rel", "mcpServers": []}),
    );
    assert_eq!(relative["error"]["code"], -32602);
}

#[test]
fn a_prompt_streams_chunks_then_ends_the_turn() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let new_state = &peer.inbox[1]["result"];
    assert_eq!(new_state["modes"]["currentModeId"], "interactive");
    assert_eq!(new_state["configOptions"][1]["id"], "model");
    let id = w.request(
        &mut peer,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello there"}]}),
    );
    let response = peer.response(id).expect("the scripted turn ends at once");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(peer.agent_text(), "You said: hello there");
    let updates = peer.updates();
    // The client's own prompt is not echoed; every chunk of the message has one messageId.
    assert!(
        updates
            .iter()
            .all(|u| u["sessionUpdate"] == "agent_message_chunk"),
        "{updates:#?}"
    );
    assert!(updates.len() > 1, "streamed as several chunks");
    assert!(updates
        .windows(2)
        .all(|p| p[0]["messageId"] == p[1]["messageId"]));
    let last_update = peer
        .inbox
        .iter()
        .rposition(|m| m["method"] == "session/update")
        .unwrap();
    assert!(
        last_update < peer.position_of_response(id),
        "updates before the response"
    );
    for m in peer
        .inbox
        .iter()
        .filter(|m| m["method"] == "session/update")
    {
        assert_eq!(m["params"]["sessionId"], json!(session));
    }
    // A session of another connection, or an unknown one, is not found.
    let other = w.call(
        &mut peer,
        "session/prompt",
        json!({"sessionId": "nope", "prompt": []}),
    );
    assert_eq!(other["error"]["code"], -32002);
    assert_eq!(other["error"]["data"], json!({"sessionId": "nope"}));
}

/// The brief's end-to-end flow, sans-IO: tool call, permission (allow once), fs read,
/// completion, answer with the content.
#[test]
fn reading_a_file_asks_permission_then_reads_through_the_client() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let prompt = w.request(
        &mut peer,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "Please read file hello.txt"}]}),
    );
    let tool_call = peer.updates()[0].clone();
    assert_eq!(tool_call["sessionUpdate"], "tool_call");
    assert_eq!(tool_call["kind"], "read");
    assert_eq!(tool_call["title"], "Read /work/project/hello.txt");
    assert_eq!(
        tool_call["locations"],
        json!([{"path": "/work/project/hello.txt"}])
    );
    let call_id = tool_call["toolCallId"].clone();
    let asks = peer.requests("session/request_permission");
    assert_eq!(asks.len(), 1);
    let ask = &asks[0];
    assert_eq!(ask["params"]["toolCall"]["toolCallId"], call_id);
    assert_eq!(ask["params"]["sessionId"], json!(session));
    // Our ids are a space of their own: 0 while the client's prompt is id 2.
    assert_eq!(ask["id"], 0);
    assert!(
        peer.requests("fs/read_text_file").is_empty(),
        "nothing read before approval"
    );
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
    );
    let reads = peer.requests("fs/read_text_file");
    assert_eq!(reads.len(), 1);
    assert_eq!(
        reads[0]["params"],
        json!({"sessionId": session, "path": "/work/project/hello.txt"})
    );
    assert!(peer.response(prompt).is_none());
    w.respond(
        &mut peer,
        &reads[0]["id"],
        json!({"content": "Hello, world!\n"}),
    );
    let response = peer.response(prompt).expect("turn ended");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let tool_updates: Vec<Value> = peer
        .updates()
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .collect();
    assert_eq!(tool_updates[0]["status"], "in_progress");
    let done = tool_updates.last().unwrap();
    assert_eq!(done["toolCallId"], call_id);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["content"][0]["content"]["text"], "Hello, world!\n");
    assert_eq!(peer.agent_text(), "Hello, world!\n");
    let events = w.host.session_events(&session).unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert!(kinds.contains(&"permission.requested") && kinds.contains(&"tool.execution_complete"));
}

#[test]
fn without_the_fs_capability_the_scripted_result_is_used() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let prompt = w.request(
        &mut peer,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "read file a.txt"}]}),
    );
    let ask = peer.requests("session/request_permission").remove(0);
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
    );
    assert!(
        peer.requests("fs/read_text_file").is_empty(),
        "not advertised, never called"
    );
    assert_eq!(
        peer.response(prompt).unwrap()["result"]["stopReason"],
        "end_turn"
    );
}

#[test]
fn deny_fails_the_tool_call_and_the_turn_goes_on() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let prompt = w.request(
        &mut peer,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "read file secret.txt"}]}),
    );
    let ask = peer.requests("session/request_permission").remove(0);
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}}),
    );
    assert!(peer.requests("fs/read_text_file").is_empty());
    let failed = peer.updates().into_iter().last_where("tool_call_update");
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        peer.response(prompt).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    assert!(
        peer.agent_text().contains("rejected"),
        "{}",
        peer.agent_text()
    );
}

trait LastWhere {
    fn last_where(self, kind: &str) -> Value;
}

impl<I: Iterator<Item = Value>> LastWhere for I {
    fn last_where(self, kind: &str) -> Value {
        self.filter(|u| u["sessionUpdate"] == kind)
            .last()
            .unwrap_or_else(|| panic!("no {kind}"))
    }
}

fn allow(w: &mut World, peer: &mut Peer, option: &str) {
    let asks = peer.requests("session/request_permission");
    let ask = asks.last().expect("a permission request");
    w.respond(
        peer,
        &ask["id"],
        json!({"outcome": {"outcome": "selected", "optionId": option}}),
    );
}

fn prompt(w: &mut World, peer: &mut Peer, session: &str, text: &str) -> u64 {
    w.request(
        peer,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    )
}

#[test]
fn always_is_remembered_for_the_session() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let first = prompt(&mut w, &mut peer, &session, "read file a.txt");
    allow(&mut w, &mut peer, "allow-always");
    let read = peer.requests("fs/read_text_file").remove(0);
    w.respond(&mut peer, &read["id"], json!({"content": "A"}));
    assert!(peer.response(first).is_some());
    let second = prompt(&mut w, &mut peer, &session, "read file b.txt");
    assert_eq!(
        peer.requests("session/request_permission").len(),
        1,
        "not asked again"
    );
    let read = peer.requests("fs/read_text_file").remove(1);
    assert_eq!(read["params"]["path"], "/work/project/b.txt");
    w.respond(&mut peer, &read["id"], json!({"content": "B"}));
    assert_eq!(
        peer.response(second).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    // Another kind of prompt is still asked.
    prompt(&mut w, &mut peer, &session, "run it");
    assert_eq!(peer.requests("session/request_permission").len(), 2);
}

#[test]
fn url_and_path_always_cover_the_domain_and_the_location() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let first = prompt(&mut w, &mut peer, &session, "fetch it");
    let ask = peer.requests("session/request_permission").remove(0);
    assert_eq!(ask["params"]["toolCall"]["kind"], "execute");
    allow(&mut w, &mut peer, "allow-always");
    assert!(peer.response(first).is_some());
    prompt(&mut w, &mut peer, &session, "fetch again");
    assert_eq!(
        peer.requests("session/request_permission").len(),
        1,
        "same domain"
    );
    let outside = prompt(&mut w, &mut peer, &session, "outside");
    assert_eq!(peer.requests("session/request_permission").len(), 2);
    allow(&mut w, &mut peer, "allow-always");
    assert!(peer.response(outside).is_some());
    prompt(&mut w, &mut peer, &session, "outside again");
    assert_eq!(
        peer.requests("session/request_permission").len(),
        2,
        "same location"
    );
    let completed: Vec<Value> = w
        .host
        .session_events(&session)
        .unwrap()
        .iter()
        .filter(|e| e.event_type == "permission.completed")
        .map(|e| serde_json::from_slice::<Value>(&e.json).unwrap()["data"]["result"].clone())
        .collect();
    assert_eq!(completed[0]["domain"], "example.com");
    assert_eq!(completed[2]["kind"], "approved-for-location");
    assert_eq!(completed[2]["locationKey"], "/etc");
}

#[test]
fn hook_prompts_are_denied_without_asking() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "hook please");
    assert!(peer.requests("session/request_permission").is_empty());
    assert!(peer.requests("fs/read_text_file").is_empty());
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    let failed = peer.updates().into_iter().last_where("tool_call_update");
    assert_eq!(failed["status"], "failed");
}

#[test]
fn autopilot_approves_without_asking_and_modes_are_announced() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let r = w.call(
        &mut peer,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "autopilot"}),
    );
    assert_eq!(r["result"], json!({}));
    let kinds = peer.update_kinds();
    assert_eq!(kinds, ["current_mode_update", "config_option_update"]);
    assert_eq!(peer.updates()[0]["currentModeId"], "autopilot");
    let bad = w.call(
        &mut peer,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "yolo"}),
    );
    assert_eq!(bad["error"]["code"], -32602);
    prompt(&mut w, &mut peer, &session, "read file a.txt");
    assert!(peer.requests("session/request_permission").is_empty());
    assert_eq!(peer.requests("fs/read_text_file").len(), 1);
    let r = w.call(
        &mut peer,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "mode", "value": "interactive"}),
    );
    assert_eq!(
        r["result"]["configOptions"][0]["currentValue"],
        "interactive"
    );
    let bad = w.call(
        &mut peer,
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "gpt"}),
    );
    assert_eq!(bad["error"]["code"], -32602);
}

#[test]
fn cancel_mid_stream_ends_with_cancelled() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let id = prompt(&mut w, &mut peer, &session, "slow please");
    assert_eq!(peer.agent_text(), "one");
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let response = peer.response(id).expect("answered when the turn stops");
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    let at = peer.position_of_response(id);
    w.advance(&mut peer, Duration::from_secs(5));
    assert_eq!(peer.inbox.len(), at + 1, "nothing after the response");
    assert_eq!(peer.agent_text(), "one");
}

#[test]
fn cancel_request_on_a_prompt_and_a_cancelled_permission_cancel_the_turn() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "slow");
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": id}}),
    );
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "cancelled"
    );

    let id = prompt(&mut w, &mut peer, &session, "read file a.txt");
    let ask = peer.requests("session/request_permission").remove(0);
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "cancelled"}}),
    );
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "cancelled"
    );
    assert!(peer.requests("fs/read_text_file").is_empty());
}

#[test]
fn cancel_while_the_permission_is_pending_withdraws_the_request() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "read file a.txt");
    let ask = peer.requests("session/request_permission").remove(0);
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "cancelled"
    );
    let withdrawn = peer
        .inbox
        .iter()
        .find(|m| m["method"] == "$/cancel_request")
        .expect("our request is withdrawn");
    assert_eq!(withdrawn["params"]["requestId"], ask["id"]);
    // The client's late `cancelled` answer is ignored.
    w.respond(
        &mut peer,
        &ask["id"],
        json!({"outcome": {"outcome": "cancelled"}}),
    );
    assert_eq!(w.host.acp_ignored_responses(peer.conn), Some(1));
}

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

#[test]
fn load_replays_the_history_before_answering() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(read_caps());
    let id = prompt(&mut w, &mut peer, &session, "read file hello.txt");
    allow(&mut w, &mut peer, "allow-once");
    let read = peer.requests("fs/read_text_file").remove(0);
    w.respond(&mut peer, &read["id"], json!({"content": "hi there"}));
    assert!(peer.response(id).is_some());

    let mut other = w.connect();
    w.call(&mut other, "initialize", json!({"protocolVersion": 1}));
    let missing = w.call(
        &mut other,
        "session/load",
        json!({"sessionId": "nope", "cwd": "/w", "mcpServers": []}),
    );
    assert_eq!(missing["error"]["code"], -32002);
    assert_eq!(missing["error"]["data"]["sessionId"], "nope");
    let load_id = w.request(
        &mut other,
        "session/load",
        json!({"sessionId": session, "cwd": "/work/project", "mcpServers": []}),
    );
    let at = other.position_of_response(load_id);
    let response = &other.inbox[at];
    assert_eq!(response["result"]["modes"]["currentModeId"], "interactive");
    let kinds = other.update_kinds();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "agent_message_chunk"
        ]
    );
    assert!(
        other
            .inbox
            .iter()
            .rposition(|m| m["method"] == "session/update")
            .unwrap()
            < at
    );
    let updates = other.updates();
    assert_eq!(updates[0]["content"]["text"], "read file hello.txt");
    assert_eq!(updates[1]["toolCallId"], updates[3]["toolCallId"]);
    assert_eq!(updates[4]["content"]["text"], "hi there");
    // The loaded session takes prompts; the first client sees the new user message.
    let next = prompt(&mut w, &mut other, &session, "and now?");
    assert_eq!(
        other.response(next).unwrap()["result"]["stopReason"],
        "end_turn"
    );
    assert!(other.agent_text().ends_with("You said: and now?"));
    w.pump(&mut peer);
    let seen = peer.updates().into_iter().last_where("user_message_chunk");
    assert_eq!(seen["content"]["text"], "and now?");
    // Resume does not replay.
    let mut third = w.connect();
    w.call(&mut third, "initialize", json!({"protocolVersion": 1}));
    let resumed = w.call(
        &mut third,
        "session/resume",
        json!({"sessionId": session, "cwd": "/work/project"}),
    );
    assert!(resumed["result"]["configOptions"].is_array());
    assert!(third.updates().is_empty());
}

#[test]
fn list_close_and_delete() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    prompt(&mut w, &mut peer, &session, "hello");
    let list = w.call(&mut peer, "session/list", json!({}));
    let sessions = list["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["sessionId"], json!(session));
    assert_eq!(sessions[0]["cwd"], "/work/project");
    assert_eq!(sessions[0]["title"], "hello");
    let filtered = w.call(&mut peer, "session/list", json!({"cwd": "/elsewhere"}));
    assert_eq!(filtered["result"]["sessions"], json!([]));

    let slow = prompt(&mut w, &mut peer, &session, "slow");
    let closed = w.call(&mut peer, "session/close", json!({"sessionId": session}));
    assert_eq!(closed["result"], json!({}));
    assert_eq!(
        peer.response(slow).unwrap()["result"]["stopReason"],
        "cancelled"
    );
    assert!(peer.position_of_response(slow) < peer.inbox.len() - 1);
    let again = prompt(&mut w, &mut peer, &session, "hi");
    assert_eq!(
        peer.response(again).unwrap()["error"]["code"],
        -32002,
        "detached"
    );
    assert_eq!(w.host.session_count(), 1, "close keeps the session");

    let deleted = w.call(&mut peer, "session/delete", json!({"sessionId": session}));
    assert_eq!(deleted["result"], json!({}));
    assert_eq!(w.host.session_count(), 0);
    let gone = w.call(&mut peer, "session/delete", json!({"sessionId": session}));
    assert_eq!(gone["error"]["code"], -32002);
}

#[test]
fn junk_from_the_client_never_breaks_the_session() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    w.send_raw(&mut peer, b"this is not json\n\r\n\n");
    let parse_error = peer.inbox.last().unwrap().clone();
    assert_eq!(parse_error["error"]["code"], -32700);
    assert_eq!(parse_error["id"], Value::Null);
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
    );
    w.send(&mut peer, json!({"jsonrpc": "2.0", "id": 99, "result": {}}));
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "_vendor/notice", "params": {}}),
    );
    w.send(
        &mut peer,
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"bogus": 1}}),
    );
    assert_eq!(w.host.acp_ignored_responses(peer.conn), Some(2));
    let unknown = w.call(&mut peer, "session/fork", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    let bad = w.call(&mut peer, "session/prompt", json!({"sessionId": 5}));
    assert_eq!(bad["error"]["code"], -32602);
    let id = prompt(&mut w, &mut peer, &session, "still here?");
    assert_eq!(
        peer.response(id).unwrap()["result"]["stopReason"],
        "end_turn"
    );
}

#[test]
fn a_turn_error_is_an_error_response() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let id = prompt(&mut w, &mut peer, &session, "fail now");
    let r = peer.response(id).unwrap();
    assert_eq!(r["error"]["code"], -32603);
    assert_eq!(r["error"]["message"], "the model is down");
}

#[test]
fn copilot_clients_see_builtin_tools_with_their_permission_kinds() {
    let mut w = World::new();
    let conn = w.host.open(w.now, Framing::ContentLength);
    let mut decoder = FrameDecoder::new(Framing::ContentLength, FrameLimits::default());
    let mut inbox: Vec<Value> = Vec::new();
    let mut send = |w: &mut World, inbox: &mut Vec<Value>, body: Value| {
        let body = serde_json::to_vec(&body).unwrap();
        let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        wire.extend_from_slice(&body);
        w.host.handle_bytes(w.now, conn, &wire);
        while let Some(frame) = w.host.poll_transmit(conn) {
            decoder.push(&frame).unwrap();
            while let Some(b) = decoder.next_frame().unwrap() {
                inbox.push(serde_json::from_slice(&b).unwrap());
            }
        }
    };
    send(
        &mut w,
        &mut inbox,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session.create",
               "params": {"sessionId": "s1", "requestPermission": true, "workingDirectory": "/w"}}),
    );
    send(
        &mut w,
        &mut inbox,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session.send",
               "params": {"sessionId": "s1", "prompt": "run the tests"}}),
    );
    let events: Vec<Value> = inbox
        .iter()
        .filter(|m| m["method"] == "session.event")
        .map(|m| m["params"]["event"].clone())
        .collect();
    let start = events
        .iter()
        .find(|e| e["type"] == "tool.execution_start")
        .unwrap();
    assert_eq!(start["data"]["toolName"], "bash");
    let asked = events
        .iter()
        .find(|e| e["type"] == "permission.requested")
        .unwrap();
    let request = &asked["data"]["permissionRequest"];
    assert_eq!(request["kind"], "shell");
    assert_eq!(request["fullCommandText"], "ls -l");
    assert_eq!(request["toolCallId"], start["data"]["toolCallId"]);
    let request_id = asked["data"]["requestId"].clone();
    send(
        &mut w,
        &mut inbox,
        json!({"jsonrpc": "2.0", "id": 3, "method": "session.permissions.handlePendingPermissionRequest",
               "params": {"sessionId": "s1", "requestId": request_id, "result": {"kind": "approve-once"}}}),
    );
    let events: Vec<Value> = inbox
        .iter()
        .filter(|m| m["method"] == "session.event")
        .map(|m| m["params"]["event"].clone())
        .collect();
    let done = events
        .iter()
        .find(|e| e["type"] == "tool.execution_complete")
        .expect("the scripted result completes the call");
    assert_eq!(done["data"]["success"], true);
    assert!(events.iter().any(|e| e["type"] == "session.idle"));
}

/// What a durable store does between processes: the first host reports its persisted events,
/// a second host restores them; `session/load` there replays the same history, keeps the
/// mode and the "always" approvals, and the session takes prompts.
#[test]
fn a_restored_session_loads_like_a_live_one() {
    let scenario = Scenario::from_json(SCENARIO).unwrap();
    let mut config = HostConfig::with_scenario(scenario);
    config.report_persisted_events = true;
    let mut w = World::new();
    w.host = Host::new(config.clone());
    let (mut peer, session) = w.ready(read_caps());
    w.call(
        &mut peer,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "autopilot"}),
    );
    w.call(
        &mut peer,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "interactive"}),
    );
    let id = prompt(&mut w, &mut peer, &session, "read file hello.txt");
    allow(&mut w, &mut peer, "allow-always");
    let read = peer.requests("fs/read_text_file").remove(0);
    w.respond(&mut peer, &read["id"], json!({"content": "stored"}));
    assert!(peer.response(id).is_some());
    let mut stored = Vec::new();
    while let Some(output) = w.host.poll_output() {
        if let crate::host::Output::Persist { session: s, event } = output {
            assert_eq!(s, session);
            stored.push(event);
        }
    }

    // "The next process".
    let mut w2 = World::new();
    w2.host = Host::new(config);
    w2.host
        .restore_session(w2.now, &session, stored)
        .expect("restores");
    let mut other = w2.connect();
    w2.call(
        &mut other,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": read_caps()}),
    );
    let list = w2.call(&mut other, "session/list", json!({}));
    assert_eq!(list["result"]["sessions"][0]["cwd"], "/work/project");
    let load_id = w2.request(
        &mut other,
        "session/load",
        json!({"sessionId": session, "cwd": "/work/project", "mcpServers": []}),
    );
    let at = other.position_of_response(load_id);
    assert_eq!(
        other.inbox[at]["result"]["modes"]["currentModeId"],
        "interactive"
    );
    let replayed: Vec<Value> = other.inbox[..at]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .collect();
    assert!(replayed
        .iter()
        .any(|u| u["sessionUpdate"] == "user_message_chunk"
            && u["content"]["text"] == "read file hello.txt"));
    let text: String = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "stored");
    // The "always" from the earlier process still holds; the session takes prompts.
    let next = prompt(&mut w2, &mut other, &session, "read file again.txt");
    assert!(other.requests("session/request_permission").is_empty());
    let read = other.requests("fs/read_text_file").remove(0);
    w2.respond(&mut other, &read["id"], json!({"content": "again"}));
    assert_eq!(
        other.response(next).unwrap()["result"]["stopReason"],
        "end_turn"
    );
}
