//! SDK-like clients: scripted JSON-RPC frames (Content-Length framing, as the Copilot SDKs
//! use), what they are waiting for, and the client-side invariants.

use std::collections::{BTreeMap, VecDeque};

use agentwire::frame::{encode_frame, FrameDecoder, FrameLimits, Framing};
use agentwire::host::ConnId;
use bytes::BytesMut;
use serde_json::{json, Value};

use super::log::LogIndex;

/// A request sent and not answered yet.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) method: String,
    /// For `session.getMessages`: the ids of the events acknowledged before it was sent.
    pub(crate) acked_before: Vec<String>,
}

/// Where a client is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) node: usize,
    pub(crate) incarnation: u64,
    pub(crate) conn: ConnId,
}

/// One client of one session.
pub(crate) struct Client {
    pub(crate) session: String,
    /// Creates the session (the others resume it once it exists).
    pub(crate) creator: bool,
    /// Attaches with `streaming: true` (gets the ephemeral deltas).
    pub(crate) streaming: bool,
    pub(crate) link: Option<Link>,
    pub(crate) attached: bool,
    decoder: FrameDecoder,
    next_id: u64,
    pub(crate) pending: BTreeMap<u64, Pending>,
    /// Answers to send (tool results, permission decisions, server requests).
    pub(crate) answers: VecDeque<Value>,
    pub(crate) prompts_left: u32,
    /// Requests that ended with their connection (no response; the SDK fails them).
    pub(crate) ended_by_close: u64,
    pub(crate) responses: u64,
    /// The last error response (for failure messages).
    pub(crate) last_error: Option<String>,
}

/// Counters of what clients saw.
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct ClientStats {
    pub(crate) events: u64,
    pub(crate) ephemeral: u64,
    pub(crate) get_messages_checked: u64,
    pub(crate) tool_requests: u64,
    pub(crate) errors: u64,
}

impl ClientStats {
    pub(crate) fn add(&mut self, o: &ClientStats) {
        self.events += o.events;
        self.ephemeral += o.ephemeral;
        self.get_messages_checked += o.get_messages_checked;
        self.tool_requests += o.tool_requests;
        self.errors += o.errors;
    }
}

impl Client {
    pub(crate) fn new(session: String, creator: bool, prompts: u32) -> Self {
        Client {
            session,
            creator,
            streaming: !creator,
            link: None,
            attached: false,
            decoder: FrameDecoder::new(Framing::ContentLength, FrameLimits::default()),
            next_id: 1,
            pending: BTreeMap::new(),
            answers: VecDeque::new(),
            prompts_left: prompts,
            ended_by_close: 0,
            responses: 0,
            last_error: None,
        }
    }

    /// A fresh connection on `link`.
    pub(crate) fn connected(&mut self, link: Link) {
        self.link = Some(link);
        self.attached = false;
        self.decoder = FrameDecoder::new(Framing::ContentLength, FrameLimits::default());
    }

    /// The connection ended: every pending request ends with it (invariant 4 counts it once).
    pub(crate) fn disconnected(&mut self) {
        self.link = None;
        self.attached = false;
        self.ended_by_close += self.pending.len() as u64;
        self.pending.clear();
        // Answers to an old connection's questions are not sent on a new one.
        self.answers.clear();
    }

    /// Frames a request; `acked_before` is recorded for `session.getMessages`.
    pub(crate) fn request(&mut self, method: &str, params: Value, acked: Vec<String>) -> BytesMut {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(
            id,
            Pending {
                method: method.to_owned(),
                acked_before: acked,
            },
        );
        frame(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
    }

    /// The attach request for this client's session: create it or resume it.
    pub(crate) fn attach_params(&self) -> Value {
        json!({
            "sessionId": self.session,
            "requestPermission": true,
            "streaming": self.streaming,
            "tools": [{"name":"get_weather","description":"Get weather for a city",
                       "parameters":{"type":"object","properties":{"city":{"type":"string"}},
                                     "required":["city"]}}],
        })
    }

    /// Bytes the node released to this client's connection: decoded and checked.
    /// `subject` is the log subject of the client's session.
    pub(crate) fn receive(
        &mut self,
        bytes: &[u8],
        index: &LogIndex,
        subject: &str,
        stats: &mut ClientStats,
    ) -> Option<bool> {
        let mut created = None;
        self.decoder.push(bytes).expect("the host frames well");
        while let Some(body) = self.decoder.next_frame().expect("the host frames well") {
            let message: Value = serde_json::from_slice(&body).expect("the host writes JSON");
            if let Some(method) = message["method"].as_str() {
                if message.get("id").is_some_and(|id| !id.is_null()) {
                    // A server-to-client request this client does not serve.
                    self.answers
                        .push_back(json!({"jsonrpc":"2.0","id":message["id"],
                        "error":{"code":-32601,"message":"not handled by this client"}}));
                } else if method == "session.event" {
                    self.event(&message["params"], index, subject, stats);
                }
                continue;
            }
            let Some(id) = message["id"].as_u64() else {
                // An error without an id (a failed connection's reason): the close follows.
                continue;
            };
            let pending = self.pending.remove(&id).unwrap_or_else(|| {
                panic!("invariant 4: a response to request {id}, which is not pending: {message}")
            });
            self.responses += 1;
            let ok = message.get("result").is_some();
            if !ok {
                stats.errors += 1;
                self.last_error = Some(format!("{}: {message}", pending.method));
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!("client error {:?}", self.last_error);
                }
            }
            match pending.method.as_str() {
                "session.create" | "session.resume" => {
                    self.attached = ok;
                    if pending.method == "session.create" {
                        created = Some(ok || message.to_string().contains("already exists"));
                    }
                }
                "session.getMessages" if ok => {
                    check_messages(&message["result"], &pending.acked_before, index, subject);
                    stats.get_messages_checked += 1;
                }
                _ => {}
            }
        }
        created
    }

    fn event(&mut self, params: &Value, index: &LogIndex, subject: &str, stats: &mut ClientStats) {
        let event = &params["event"];
        // Invariant 5 (addressing, which a relay group's frames must keep): a client gets the
        // events of the session it attached to, and streaming deltas only if it asked.
        assert_eq!(
            params["sessionId"],
            self.session.as_str(),
            "invariant 5: a client of {} got an event of another session: {event}",
            self.session
        );
        let kind = event["type"].as_str().unwrap_or_default();
        assert!(
            self.streaming || !agentwire::is_streaming_delta_type(kind),
            "invariant 5: a client that attached without streaming got a streaming delta: {event}"
        );
        stats.events += 1;
        if event["ephemeral"] == true {
            stats.ephemeral += 1;
        }
        if event["ephemeral"] != true {
            // Invariant 1: a durable event reaches a client only once the log holds it.
            let id = event["id"].as_str().expect("an event id");
            let logged = index
                .subject(subject)
                .and_then(|s| s.by_id.get(id).map(|&at| &s.events[at].2));
            assert_eq!(
                logged,
                Some(event),
                "invariant 1: a client got event {id}, which the log does not hold"
            );
        }
        let request = event["data"]["requestId"].as_str();
        match (event["type"].as_str(), request) {
            (Some("external_tool.requested"), Some(request)) => {
                stats.tool_requests += 1;
                self.answers
                    .push_back(json!({"method":"session.tools.handlePendingToolCall",
                    "params":{"sessionId":self.session,"requestId":request,"result":"sunny"}}));
            }
            (Some("permission.requested"), Some(request)) => {
                self.answers.push_back(json!({
                    "method":"session.permissions.handlePendingPermissionRequest",
                    "params":{"sessionId":self.session,"requestId":request,
                              "result":{"kind":"approve-once"}}}));
            }
            _ => {}
        }
    }
}

/// Invariant 3: a `session.getMessages` answer is the log's events of the session, a prefix,
/// in order, with every event acknowledged before the request was sent.
fn check_messages(result: &Value, acked_before: &[String], index: &LogIndex, subject: &str) {
    let events = result["events"]
        .as_array()
        .expect("getMessages answers events");
    let ids: Vec<&str> = events
        .iter()
        .map(|e| e["id"].as_str().expect("an event id"))
        .collect();
    let logged: Vec<&str> = index
        .subject(subject)
        .map(|s| s.ids().collect())
        .unwrap_or_default();
    assert!(
        ids.len() <= logged.len() && ids[..] == logged[..ids.len()],
        "invariant 3: getMessages is not a prefix of the log\n got: {ids:?}\n log: {logged:?}"
    );
    for id in acked_before {
        assert!(
            ids.contains(&id.as_str()),
            "invariant 3: getMessages lacks acknowledged event {id}\n got: {ids:?}"
        );
    }
}

/// A JSON-RPC body, Content-Length framed.
pub(crate) fn frame(body: &Value) -> BytesMut {
    let mut out = BytesMut::new();
    encode_frame(
        Framing::ContentLength,
        &serde_json::to_vec(body).expect("JSON"),
        &mut out,
    );
    out
}
