//! The `host` tier's set-up: a sans-IO test world, the host plus test peers that frame
//! requests and decode what the host writes back (Content-Length framing, as the Copilot SDKs
//! use).
#![allow(dead_code)]

use std::time::Duration;

use agentwire::frame::{FrameDecoder, FrameLimits, Framing};
use agentwire::host::{ConnId, Host, HostConfig};
use agentwire::Timestamp;
use serde_json::{json, Value};

pub const T0: u64 = 1_795_983_976_952;

/// A test peer: frames requests into the host and decodes what the host writes back.
pub struct Peer {
    pub conn: ConnId,
    pub decoder: FrameDecoder,
    pub next_id: u64,
    pub inbox: Vec<Value>,
}

pub struct World {
    pub host: Host,
    pub now: Timestamp,
    /// Frames written to connections, not yet handed to their peer.
    pub stash: std::collections::BTreeMap<ConnId, Vec<bytes::Bytes>>,
    /// Connections whose reader is stalled: their frames stay queued in the host.
    pub stalled: std::collections::BTreeSet<ConnId>,
}

impl World {
    pub fn new(config: HostConfig) -> Self {
        World {
            host: Host::new(config),
            now: Timestamp::from_millis(T0),
            stash: Default::default(),
            stalled: Default::default(),
        }
    }

    pub fn connect(&mut self) -> Peer {
        let conn = self.host.open(self.now, Framing::ContentLength);
        Peer {
            conn,
            decoder: FrameDecoder::new(Framing::ContentLength, FrameLimits::default()),
            next_id: 0,
            inbox: Vec::new(),
        }
    }

    pub fn send_raw(&mut self, peer: &Peer, bytes: &[u8]) {
        self.now = self.now.saturating_add(Duration::from_millis(1));
        self.host.handle_bytes(self.now, peer.conn, bytes);
    }

    pub fn send_frame(&mut self, peer: &Peer, body: &Value) {
        let body = serde_json::to_vec(body).unwrap();
        let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        wire.extend_from_slice(&body);
        // Split the frame to exercise incremental decoding.
        let (a, b) = wire.split_at(wire.len() / 2);
        self.send_raw(peer, a);
        self.send_raw(peer, b);
    }

    /// Drains everything the host wrote, then hands each given peer its frames.
    pub fn pump(&mut self, peers: &mut [&mut Peer]) {
        while let Some(conn) = self.host.poll_ready() {
            if self.stalled.contains(&conn) {
                // A stalled reader takes nothing; its frames stay in the host's outbox.
                continue;
            }
            while let Some(frame) = self.host.poll_transmit(conn) {
                self.stash.entry(conn).or_default().push(frame);
            }
        }
        for peer in peers.iter_mut() {
            for frame in self.stash.remove(&peer.conn).unwrap_or_default() {
                peer.decoder.push(&frame).unwrap();
                while let Some(body) = peer.decoder.next_frame().unwrap() {
                    peer.inbox.push(serde_json::from_slice(&body).unwrap());
                }
            }
        }
    }

    /// A stalled reader starts reading again: everything queued for it is taken.
    pub fn resume_reading(&mut self, conn: ConnId) {
        self.stalled.remove(&conn);
        while let Some(frame) = self.host.poll_transmit(conn) {
            self.stash.entry(conn).or_default().push(frame);
        }
    }

    /// Frames request `method` from `peer` (nothing is pumped); returns its id.
    pub fn write_request(&mut self, peer: &mut Peer, method: &str, params: Value) -> u64 {
        let id = peer.next_id;
        peer.next_id += 1;
        self.send_frame(
            peer,
            &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}),
        );
        id
    }

    /// The next file operation the host asked for (other outputs are skipped).
    pub fn next_file_op(&mut self) -> (agentwire::host::EffectId, agentwire::host::FileRequest) {
        while let Some(o) = self.host.poll_output() {
            if let agentwire::host::Output::Effect(agentwire::host::Effect {
                id: op,
                op: agentwire::host::EffectOp::FileOp(request),
            }) = o
            {
                return (op, request);
            }
        }
        panic!("no FileOp output")
    }

    /// Sends a request and returns its response (pumping all peers).
    pub fn call(
        &mut self,
        peer: &mut Peer,
        others: &mut [&mut Peer],
        method: &str,
        params: Value,
    ) -> Value {
        let id = self.write_request(peer, method, params);
        let mut all: Vec<&mut Peer> = vec![peer];
        all.extend(others.iter_mut().map(|p| &mut **p));
        self.pump(&mut all);
        response(all[0], id)
            .cloned()
            .unwrap_or_else(|| panic!("no response to {method}"))
    }

    /// Fires timers until none is left (the scripted agent's sleeps).
    pub fn run_timers(&mut self, peers: &mut [&mut Peer]) {
        while let Some(t) = self.host.poll_timeout() {
            self.now = t;
            self.host.handle_timeout(t);
            self.pump(peers);
        }
    }
}

impl Peer {
    pub fn events(&self, session: &str) -> Vec<Value> {
        self.inbox
            .iter()
            .filter(|m| m["method"] == "session.event" && m["params"]["sessionId"] == session)
            .map(|m| m["params"]["event"].clone())
            .collect()
    }

    pub fn types(&self, session: &str) -> Vec<String> {
        self.events(session)
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect()
    }

    pub fn event(&self, session: &str, ty: &str) -> Value {
        self.events(session)
            .into_iter()
            .find(|e| e["type"] == ty)
            .unwrap_or_else(|| panic!("no {ty} event"))
    }

    pub fn lifecycle(&self) -> Vec<(String, String)> {
        self.inbox
            .iter()
            .filter(|m| m["method"] == "session.lifecycle")
            .map(|m| {
                (
                    m["params"]["type"].as_str().unwrap().to_owned(),
                    m["params"]["sessionId"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }
}

pub fn weather_tool() -> Value {
    json!([{"name":"get_weather","description":"Get weather for a city",
            "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}])
}

pub fn create(w: &mut World, p: &mut Peer, id: &str, extra: Value) -> Value {
    let mut params = json!({"sessionId": id, "requestPermission": true, "streaming": false});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    w.call(p, &mut [], "session.create", params)
}

pub fn only_subsequence(types: &[String], expected: &[&str]) -> bool {
    let mut it = types.iter();
    expected.iter().all(|e| it.any(|t| t == e))
}

/// Sends request `method` from `p` without waiting for its answer (only `p` is pumped);
/// returns its id (see [`response`]).
pub fn send_request(w: &mut World, p: &mut Peer, method: &str, params: Value) -> u64 {
    let id = w.write_request(p, method, params);
    w.pump(&mut [p]);
    id
}

/// The response to request `id` in `p`'s inbox, if it came (a response, not a
/// server-to-client request that happens to use the same id).
pub fn response(p: &Peer, id: u64) -> Option<&Value> {
    p.inbox
        .iter()
        .find(|m| m["id"] == json!(id) && m.get("method").is_none())
}
