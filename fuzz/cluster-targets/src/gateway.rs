//! The body of the `cluster_gateway` fuzz target: one relayed client's [`Gateway`] machine
//! driven as a runner drives it, with fuzzed timing and answers — the client's frames, the
//! owner's frames (canned answers, events and shutdown notices, or a peer's raw bytes), the
//! link ending (broken or closed) at any moment, every question the machine asks answered in
//! any order with any answer, time. Beyond "no panic" it asserts what a runner relies on:
//!
//! * a frame goes to the owner only while a link is open (the machine was told of every
//!   link's end);
//! * a link is asked for only when none is open or being opened, and a re-attachment is
//!   announced only over an open link;
//! * once the machine says the relayed connection ended, it asks for nothing more;
//! * it never gets stuck: when every question is answered as a healthy cluster would and
//!   time passes, it either ended or relays the client's next frame to the owner.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use agentwire::host::Dialect;
use agentwire_cluster::machines::gateway::{Gateway, GatewayEvent, SessionLog, Target};
use agentwire_cluster::machines::group_in::OwnerFrame;
use agentwire_cluster::NodeIdentity;
use agentwire_fuzz_targets::targets::Input;
use bytes::Bytes;
use serde_json::{json, Value};

const TTL: Duration = Duration::from_secs(6);
const SESSION: &str = "s";

fn node(name: &str) -> NodeIdentity {
    NodeIdentity {
        node: name.to_owned(),
        incarnation: 1,
    }
}

/// A question the machine asked and the runner has not answered yet.
#[derive(Debug)]
enum Question {
    OpenLink(Target),
    Probe,
    CheckLease,
    FindOwner,
    Drain,
    LastSeqs(Vec<String>),
    Logs(Vec<String>),
}

/// The runner's side: what it knows of the link and what it was asked.
struct Runner {
    gateway: Gateway,
    now: Instant,
    link_open: bool,
    questions: VecDeque<Question>,
    /// Ids of the requests sent to the owner, for its answers.
    owner_requests: Vec<Value>,
    next_id: u64,
    next_event: u64,
    ended: bool,
}

impl Runner {
    fn new(dialect: Dialect, now: Instant) -> Self {
        let gateway = Gateway::new(SESSION.to_owned(), dialect, node("a"), TTL);
        let mut runner = Runner {
            gateway,
            now,
            link_open: false,
            questions: VecDeque::new(),
            owner_requests: Vec::new(),
            next_id: 1,
            next_event: 1,
            ended: false,
        };
        runner.drain();
        runner
    }

    /// Takes the machine's events, checking each against what the runner knows.
    fn drain(&mut self) {
        while let Some(event) = self.gateway.poll_event() {
            assert!(!self.ended, "an event after the end: {event:?}");
            match event {
                GatewayEvent::ToOwner(body) => {
                    assert!(self.link_open, "a frame for the owner with no link open");
                    if let Ok(message) = serde_json::from_slice::<Value>(&body) {
                        if message.get("method").is_some() && !message["id"].is_null() {
                            self.owner_requests.push(message["id"].clone());
                        }
                    }
                }
                GatewayEvent::OpenLink(target) => {
                    let opening = self
                        .questions
                        .iter()
                        .any(|q| matches!(q, Question::OpenLink(_)));
                    assert!(!self.link_open && !opening, "a second link asked for");
                    self.questions.push_back(Question::OpenLink(target));
                }
                GatewayEvent::Reattached(_) => {
                    assert!(self.link_open, "re-attached with no link open")
                }
                GatewayEvent::Probe(_) => self.questions.push_back(Question::Probe),
                GatewayEvent::CheckLease(_) => self.questions.push_back(Question::CheckLease),
                GatewayEvent::FindOwner { .. } => self.questions.push_back(Question::FindOwner),
                GatewayEvent::DrainLink => {
                    // What is left on the link is the client's; the link is dropped after.
                    self.link_open = false;
                    self.questions.push_back(Question::Drain);
                }
                GatewayEvent::ReadLastSeqs(s) => self.questions.push_back(Question::LastSeqs(s)),
                GatewayEvent::ReadLogs(s) => self.questions.push_back(Question::Logs(s)),
                GatewayEvent::End(_) => {
                    assert!(self.gateway.is_ended());
                    self.ended = true;
                    self.link_open = false;
                }
                GatewayEvent::ToClient(_)
                | GatewayEvent::EventToClient(_)
                | GatewayEvent::DeltasLost { .. }
                | GatewayEvent::LookUp(_) => {}
            }
        }
    }

    fn client_request(&mut self, method: &str) -> Bytes {
        let id = self.next_id;
        self.next_id += 1;
        let params = json!({"sessionId": SESSION, "prompt": "x"});
        Bytes::from(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )
    }

    /// A frame the owner may send: an answer to a request it got, an event, a shutdown
    /// notice, or an error answer.
    fn owner_frame(&mut self, pick: u8, which: u8) -> OwnerFrame {
        let request = (!self.owner_requests.is_empty())
            .then(|| self.owner_requests[usize::from(which) % self.owner_requests.len()].clone());
        let body = match (pick % 5, request) {
            (0, Some(id)) => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": SESSION}})
            }
            (1, Some(id)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "no"}})
            }
            (2, _) => json!({"jsonrpc": "2.0",
                             "method": agentwire_driver::SHUTDOWN_NOTIFICATION, "params": {}}),
            _ => {
                let id = format!("e{}", self.next_event);
                self.next_event += 1;
                let kind = if pick & 0x80 != 0 {
                    "assistant.message_delta"
                } else {
                    "session.idle"
                };
                json!({"jsonrpc": "2.0", "method": "session.event", "params": {
                    "sessionId": SESSION,
                    "event": {"id": id, "type": kind, "data": {}, "ephemeral": pick & 0x80 != 0,
                              "timestamp": "2026-12-05T00:00:00Z", "parentId": null}}})
            }
        };
        OwnerFrame::read(Bytes::from(body.to_string()))
    }

    /// Answers question `k` (`healthy`: as a cluster whose owner lives and answers would).
    fn answer(&mut self, k: usize, choice: u8, healthy: bool) {
        let Some(question) = self.questions.remove(k) else {
            return;
        };
        let now = self.now;
        let yes = healthy || choice & 1 == 0;
        match question {
            Question::OpenLink(target) => {
                if yes {
                    self.link_open = true;
                    let member = matches!(target, Target::Remote(_)).then_some(7);
                    self.gateway.handle_link_opened(now, Ok(member));
                } else {
                    self.gateway
                        .handle_link_opened(now, Err("refused".to_owned()));
                }
            }
            Question::Probe => self.gateway.handle_probe(yes),
            Question::CheckLease => self.gateway.handle_lease(now, yes),
            Question::FindOwner => {
                let found = match (healthy, choice % 3) {
                    (true, _) | (false, 0) => Some(Target::Remote(node("b"))),
                    (false, 1) => Some(Target::Local),
                    _ => None,
                };
                self.gateway.handle_owner_found(now, found);
            }
            Question::Drain => self.gateway.handle_drained(now),
            Question::LastSeqs(sessions) => {
                let seqs = sessions
                    .into_iter()
                    .map(|s| (s, yes.then_some(3)))
                    .collect();
                self.gateway.handle_last_seqs(seqs);
            }
            Question::Logs(sessions) => {
                let logs: Result<Vec<SessionLog>, (String, String)> = if yes {
                    Ok(sessions
                        .into_iter()
                        .map(|s| {
                            let event = json!({"id": "logged", "type": "session.idle", "data": {},
                                               "timestamp": "2026-12-05T00:00:00Z"});
                            (s, vec![(4, Bytes::from(event.to_string()))])
                        })
                        .collect())
                } else {
                    Err((SESSION.to_owned(), "unreadable".to_owned()))
                };
                self.gateway.handle_logs(logs, "2026-12-05T00:00:01Z");
            }
        }
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        if self
            .gateway
            .poll_timeout()
            .is_some_and(|due| due <= self.now)
        {
            self.gateway.handle_timeout(self.now);
        }
    }

    /// Answers everything as a healthy cluster would while time passes; then the machine
    /// either ended or relays the client's next frame.
    fn settle(&mut self) {
        for _ in 0..400 {
            self.drain();
            if let Some(id) = self.owner_requests.pop() {
                if self.link_open {
                    let answer =
                        json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": SESSION}});
                    let frame = OwnerFrame::read(Bytes::from(answer.to_string()));
                    self.gateway.handle_owner_frame(frame);
                }
                continue;
            }
            if !self.questions.is_empty() {
                self.answer(0, 0, true);
                continue;
            }
            self.advance(Duration::from_secs(1));
        }
        self.drain();
        if self.ended {
            return;
        }
        let request = self.client_request("session.getMessages");
        self.gateway.handle_client_frames(vec![request]);
        let relayed = std::iter::from_fn(|| self.gateway.poll_event())
            .any(|e| matches!(e, GatewayEvent::ToOwner(_)));
        assert!(
            relayed && self.link_open,
            "stuck: neither ended nor relaying (link open: {}, questions: {:?})",
            self.link_open,
            self.questions
        );
    }
}

/// Runs the target on `data` (see the module docs).
pub fn cluster_gateway(data: &[u8]) {
    let mut input = Input::new(data);
    let dialect = [Dialect::CopilotSdk, Dialect::Acp, Dialect::Ahp][usize::from(input.u8() % 3)];
    let mut runner = Runner::new(dialect, Instant::now());
    let mut steps = 0;
    while !input.is_empty() && steps < 300 && !runner.ended {
        steps += 1;
        match input.u8() % 9 {
            0 | 1 => {
                let methods = ["session.send", "session.sendAndWait", "session.getMessages"];
                let method = methods[usize::from(input.u8()) % methods.len()];
                let request = runner.client_request(method);
                runner.gateway.handle_client_frames(vec![request]);
            }
            2 => {
                let n = usize::from(input.u8() % 64);
                let raw = Bytes::copy_from_slice(input.bytes(n));
                runner.gateway.handle_client_frames(vec![raw]);
            }
            3 if runner.link_open => {
                let (pick, which) = (input.u8(), input.u8());
                let frame = runner.owner_frame(pick, which);
                runner.gateway.handle_owner_frame(frame);
            }
            4 if runner.link_open => {
                let n = usize::from(input.u8() % 96);
                let raw = Bytes::copy_from_slice(input.bytes(n));
                runner.gateway.handle_owner_frame(OwnerFrame::read(raw));
            }
            5 if runner.link_open => {
                runner.link_open = false;
                let broken = (input.u8() & 1 == 0).then(|| "lost".to_owned());
                let now = runner.now;
                runner.gateway.handle_link_ended(now, broken);
            }
            6 | 7 if !runner.questions.is_empty() => {
                let k = usize::from(input.u8()) % runner.questions.len();
                let choice = input.u8();
                runner.answer(k, choice, false);
            }
            _ => runner.advance(Duration::from_millis(u64::from(input.u16()) * 4)),
        }
        runner.drain();
    }
    runner.settle();
}
