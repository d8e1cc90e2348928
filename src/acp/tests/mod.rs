//! Sans-IO conversations of the ACP dialect through the host (NDJSON frames in and out).

use std::time::Duration;

use serde_json::{json, Value};

use crate::agent::Scenario;
use crate::frame::{FrameDecoder, FrameLimits, Framing};
use crate::host::{ConnId, Dialect, Host, HostConfig};
use crate::Timestamp;

mod client_ops;
mod elicitation;
mod model;
mod permissions;
mod prompts;
mod relay;
mod sessions;

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
    {"match": "fail", "steps": [{"error": "the model is down"}]},
    {"match": "ask me", "steps": [{"ask": "Name?", "schema": {"type": "object",
                                   "properties": {"name": {"type": "string"}}}},
                                  {"say": "answer: {answer}"}]}
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
