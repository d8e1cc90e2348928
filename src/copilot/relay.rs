//! What a gateway remembers about the client connection it relays, so that a takeover of the
//! owner does not cost the client its connection: the attachments to re-establish at the new
//! owner, the requests to answer if the owner dies before it does, and the last durable event
//! the client received of each session. I/O-free: the gateway task feeds it the frames it
//! relays and sends what it returns.
//!
//! This module follows Copilot SDK connections and speaks that dialect's method names;
//! [`crate::acp::relay`] follows editors (ACP).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::{
    RelayedEventHead, RELAY_AWAITING, RELAY_DELTAS_EMITTED, RELAY_FORMER_MEMBER,
    RELAY_HANDSHAKE_ID, RELAY_LAST_EVENT, RELAY_SESSION_BUSY,
};
use crate::is_streaming_delta_type;

use crate::host::cluster::relay_requests::{
    error_message, failure, id_key, response, ClientRequests, OwnerMessage, Pending, Reattachments,
    OWNER_STOPPED,
};

/// One session the relayed client is attached to.
#[derive(Debug, Clone)]
struct Attached {
    /// The params of its `session.create` / `session.resume`, `sessionId` set.
    params: Value,
    /// Attached by `session.create` (the client received every event of the session).
    created: bool,
    /// The id of the last durable event the client received since it attached.
    last_event: Option<String>,
    /// For a resume: the log's last sequence read when its answer came, before the client saw
    /// it (every event up to it is history the client did not get as events; later ones are
    /// live). Where the catch-up starts if no event was received.
    floor: Option<u64>,
    /// Durable events delivered from the log after a re-attachment, which the new owner may
    /// send again live: dropped once, until a newer event arrives.
    caught_up: HashSet<String>,
    /// A turn started (`user.message`, `assistant.turn_start`) and its `session.idle` has not
    /// reached the client yet.
    awaiting_idle: bool,
    /// What the owner answered to the last re-attachment: whether the session is in a turn.
    owner_busy: Option<bool>,
    /// The client asked for streaming deltas (`streaming: true`), and for the sub-agents'
    /// too (`includeSubAgentStreamingEvents`, on unless `false`).
    streaming: [bool; 2],
    /// The deltas the session had emitted on the owner when the client was (re-)attached
    /// there ([`RELAY_DELTAS_EMITTED`]: main agent, sub-agents); `None` when not known (the
    /// owner changed).
    deltas_base: Option<[u64; 2]>,
    /// The deltas relayed to the client since then.
    deltas_received: [u64; 2],
}

/// The relay state of one client connection (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Relay {
    /// Requests in flight to the owner.
    requests: ClientRequests,
    attached: BTreeMap<String, Attached>,
    /// Re-attachments sent to a new owner and not answered yet, and those it refused.
    pub(crate) replays: Reattachments,
    /// Resumed sessions whose floor is to be read (see [`Relay::floors_wanted`]).
    floors_wanted: Vec<String>,
    /// Streaming deltas the client lost with a broken link, found at its re-attachment:
    /// (session, count).
    gaps: Vec<(String, u64)>,
    /// The body to deliver instead of the owner's last frame (an attach answer without the
    /// relay's own field).
    rewritten: Option<Bytes>,
    /// Connection-level registrations the owner accepted (`sessionFs.setProvider`, …): their
    /// methods, made again at a re-attachment.
    registrations: Vec<String>,
    /// `session.sendAndWait`s the dead owner did not answer, with the reason: answered by the
    /// catch-up when it ends their session's interrupted turn, else with the reason.
    turn_waiters: Vec<(Pending, String)>,
    /// The link broke, the owner still answers: the relayed connection the owner served the
    /// link as, whose `session.sendAndWait`s stay pending for the owner to answer on the next
    /// link (named by the re-attachment, [`RELAY_FORMER_MEMBER`]).
    former_member: Option<u64>,
}

/// The connection-level registrations of a Copilot SDK client (they set up its connection,
/// not a session): a re-attachment makes them again on the new owner.
const REGISTRATIONS: &[&str] = &["sessionFs.setProvider", "llmInference.setProvider"];

/// The params of a `session.event` notification, as far as the relay reads them.
#[derive(Deserialize)]
struct EventParams<'a> {
    #[serde(rename = "sessionId", borrow)]
    session_id: Cow<'a, str>,
    #[serde(borrow)]
    event: EventHead<'a>,
}

/// An event's id, type and whether it is ephemeral.
#[derive(Deserialize)]
struct EventHead<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    ephemeral: Option<bool>,
    /// Present on a sub-agent's events.
    #[serde(rename = "agentId", default)]
    agent_id: Option<serde::de::IgnoredAny>,
}

/// How an event of type `kind` moves a session's turn: `Some(true)` a turn started,
/// `Some(false)` it ended (`session.idle`).
fn turn_edge(kind: &str) -> Option<bool> {
    match kind {
        "user.message" | "assistant.turn_start" => Some(true),
        "session.idle" => Some(false),
        _ => None,
    }
}

/// The owner's [`RELAY_DELTAS_EMITTED`] in an attach answer's `result`.
fn deltas_emitted(result: &Value) -> Option<[u64; 2]> {
    let counts = result.get(RELAY_DELTAS_EMITTED)?.as_array()?;
    Some([counts.first()?.as_u64()?, counts.get(1)?.as_u64()?])
}

impl Attached {
    /// The deltas the client should have received between its last attachment and one the
    /// owner answered with `now`, less those it did: `None` when that is not known (no base,
    /// no count, or counts that went back: not the same session state) or nothing was lost.
    fn deltas_lost(&self, now: Option<[u64; 2]>) -> Option<u64> {
        let (base, now) = (self.deltas_base?, now?);
        let mut lost = 0;
        for class in 0..2 {
            if !self.streaming[0] || !self.streaming[class] {
                continue;
            }
            let emitted = now[class].checked_sub(base[class])?;
            lost += emitted.saturating_sub(self.deltas_received[class]);
        }
        (lost > 0).then_some(lost)
    }
}

/// The durable request events clients act on, and the events that complete them (both
/// carry the request's `data.requestId`).
const DURABLE_REQUESTS: &[(&str, &str)] = &[
    ("external_tool.requested", "external_tool.completed"),
    ("permission.requested", "permission.completed"),
];

/// The `requestId`s of the durable requests `events` complete.
fn answered_requests<'a>(events: impl Iterator<Item = &'a Value>) -> HashSet<String> {
    events
        .filter(|e| {
            let kind = e["type"].as_str().unwrap_or_default();
            DURABLE_REQUESTS.iter().any(|(_, done)| *done == kind)
        })
        .filter_map(|e| e["data"]["requestId"].as_str().map(str::to_owned))
        .collect()
}

/// Whether `event`, of type `kind`, is a durable request whose completion is among
/// `answered`.
fn is_answered_request(kind: &str, event: &Value, answered: &HashSet<String>) -> bool {
    DURABLE_REQUESTS.iter().any(|(asked, _)| *asked == kind)
        && event["data"]["requestId"]
            .as_str()
            .is_some_and(|r| answered.contains(r))
}

/// The `session.event` notification carrying `event` (its JSON text, as stored).
fn event_notification(session: &str, event: &[u8]) -> Option<Bytes> {
    let event: &RawValue = serde_json::from_slice(event).ok()?;
    let body = json!({"jsonrpc": "2.0", "method": "session.event",
                      "params": {"sessionId": session, "event": event}});
    Some(Bytes::from(body.to_string()))
}

/// The `session.event` notification of a `session.idle` the gateway adds for its client (the
/// owner's was lost, or ended with it): its id derived from `seed`, with `timestamp`,
/// `parent` and `data`.
fn idle_notification(
    session: &str,
    seed: &str,
    timestamp: &Value,
    parent: &Value,
    data: Value,
) -> Option<Bytes> {
    let idle = json!({
        "id": derived_id(seed),
        "timestamp": timestamp,
        "parentId": parent,
        "type": "session.idle",
        "data": data,
        "ephemeral": true,
    });
    event_notification(session, idle.to_string().as_bytes())
}

/// A UUID-shaped id derived from `seed` (the synthetic events' ids are stable per seed).
fn derived_id(seed: &str) -> String {
    let mut a: u64 = 0xCBF2_9CE4_8422_2325;
    let mut b: u64 = 0x8422_2325_CBF2_9CE4;
    for &byte in seed.as_bytes() {
        a = (a ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01B3);
        b = (b ^ u64::from(byte))
            .wrapping_mul(0x0000_0100_0000_01B3)
            .rotate_left(7);
    }
    let hex = format!("{a:016x}{b:016x}");
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

impl Relay {
    /// A frame the client sends to the owner (only its envelope is parsed, and the params of
    /// `session.create` / `session.resume`): the body to relay instead, if the client's
    /// request carried params only a gateway may send (removed).
    pub(crate) fn client_sent(&mut self, body: &[u8]) -> Option<Bytes> {
        self.requests
            .sent(body, &["session.create", "session.resume"])
    }

    /// A frame the owner sends to the client: whether to deliver it. Only the envelope is
    /// parsed (borrowed): event payloads and results are not copied.
    pub(crate) fn owner_sent(&mut self, body: &[u8]) -> bool {
        let Ok(message) = serde_json::from_slice::<OwnerMessage<'_>>(body) else {
            return true;
        };
        match (message.method, message.id) {
            (None, Some(id)) => self.answered(id, &message),
            (Some(method), _) if method.get() == r#""session.event""# => {
                self.event_sent(&message).unwrap_or(true)
            }
            _ => true,
        }
    }

    /// A `session.event` notification of the owner whose head the gateway read already
    /// (once for all its clients): whether to deliver it.
    pub(crate) fn owner_sent_event(&mut self, head: &RelayedEventHead) -> bool {
        let id = (!head.id.is_empty()).then_some(head.id.as_str());
        let kind = &head.event_type;
        self.event_seen(&head.session, id, kind, head.ephemeral, head.sub_agent)
            .unwrap_or(true)
    }

    /// A `session.event` notification of the owner: whether to deliver it (`None`: not one
    /// the relay follows).
    fn event_sent(&mut self, message: &OwnerMessage<'_>) -> Option<bool> {
        let params: EventParams<'_> = serde_json::from_str(message.params?.get()).ok()?;
        let kind = params.event.kind.as_deref().unwrap_or_default();
        self.event_seen(
            &params.session_id,
            params.event.id.as_deref(),
            kind,
            params.event.ephemeral == Some(true),
            params.event.agent_id.is_some(),
        )
    }

    /// The bookkeeping of an event of `session` (its id, type, whether it is ephemeral and a
    /// sub-agent's): whether to deliver it (`None`: not one the relay follows).
    fn event_seen(
        &mut self,
        session: &str,
        id: Option<&str>,
        kind: &str,
        ephemeral: bool,
        sub_agent: bool,
    ) -> Option<bool> {
        let edge = turn_edge(kind);
        if ephemeral {
            let attached = self.attached.get_mut(session)?;
            if is_streaming_delta_type(kind) {
                attached.deltas_received[usize::from(sub_agent)] += 1;
            }
            // Of the other ephemeral events, only a turn's edges are followed.
            attached.awaiting_idle = edge.unwrap_or(attached.awaiting_idle);
            return None;
        }
        let event_id = id?;
        let attached = self.attached.get_mut(session)?;
        if let Some(turn) = edge {
            attached.awaiting_idle = turn;
        }
        if attached.caught_up.remove(event_id) {
            return Some(false);
        }
        attached.caught_up.clear();
        match &mut attached.last_event {
            // Ids are of one length: the buffer is reused.
            Some(last) => {
                last.clear();
                last.push_str(event_id);
            }
            None => attached.last_event = Some(event_id.to_owned()),
        }
        Some(true)
    }

    /// A response of the owner (`message` holds `id` and `result` or `error`).
    fn answered(&mut self, id: &RawValue, message: &OwnerMessage<'_>) -> bool {
        let Some(key) = id_key(id) else {
            return true;
        };
        if let Some(session) = self.replays.answered(&key) {
            if let (Some(result), Some(attached)) =
                (message.result, self.attached.get_mut(&session))
            {
                let result = serde_json::from_str::<Value>(result.get()).unwrap_or_default();
                attached.owner_busy = result[RELAY_SESSION_BUSY].as_bool();
                let now = deltas_emitted(&result);
                if let Some(lost) = attached.deltas_lost(now) {
                    self.gaps.push((session.clone(), lost));
                }
                attached.deltas_base = now;
                attached.deltas_received = [0; 2];
            }
            if let Some(error) = message.error {
                // The new owner refused the re-attachment: the client is no longer attached.
                self.attached.remove(&session);
                self.replays.refused(session, error_message(error));
            }
            return false;
        }
        let Some(pending) = self.requests.answered(&key) else {
            return true;
        };
        let Some(result) = message.result else {
            return true;
        };
        let mut result = match pending.method.as_str() {
            "session.create" | "session.resume" => {
                serde_json::from_str::<Value>(result.get()).unwrap_or(Value::Null)
            }
            _ => Value::Null,
        };
        // The owner's count of the session's deltas and its last event are the relay's, not
        // the client's.
        let emitted = deltas_emitted(&result);
        let mut owner_last: Option<Option<String>> = None;
        if let Some(fields) = result.as_object_mut() {
            let counted = fields.remove(RELAY_DELTAS_EMITTED).is_some();
            if let Some(last) = fields.remove(RELAY_LAST_EVENT) {
                owner_last = Some(last.as_str().map(str::to_owned));
            }
            if counted || owner_last.is_some() {
                self.rewritten = Some(response(&pending.id, Ok(result.clone())));
            }
        }
        match pending.method.as_str() {
            "session.create" | "session.resume" => {
                let mut params = pending.attach.unwrap_or(Value::Null);
                if !params.is_object() {
                    params = json!({});
                }
                let session = result["sessionId"]
                    .as_str()
                    .or_else(|| params["sessionId"].as_str())
                    .map(str::to_owned);
                if let Some(session) = session {
                    params["sessionId"] = json!(session);
                    let created = pending.method == "session.create";
                    let streaming = [
                        params["streaming"] == true,
                        params["includeSubAgentStreamingEvents"] != false,
                    ];
                    // A created session starts with no delta.
                    let deltas_base = emitted.or(created.then_some([0; 2]));
                    let previous = self.attached.remove(&session);
                    let (mut last_event, mut floor, awaiting_idle) = previous
                        .map(|p| (p.last_event, p.floor, p.awaiting_idle))
                        .unwrap_or_default();
                    if !created && last_event.is_none() && floor.is_none() {
                        match owner_last {
                            // Where the client attached, as the owner says: exact.
                            Some(Some(last)) => last_event = Some(last),
                            Some(None) => floor = Some(0),
                            // Read from the log after the answer (an owner that does not say).
                            None => self.floors_wanted.push(session.clone()),
                        }
                    }
                    self.attached.insert(
                        session,
                        Attached {
                            params,
                            created,
                            last_event,
                            floor,
                            caught_up: HashSet::new(),
                            awaiting_idle,
                            owner_busy: None,
                            streaming,
                            deltas_base,
                            deltas_received: [0; 2],
                        },
                    );
                }
            }
            "session.detach" | "session.delete" => {
                if let Some(session) = &pending.session {
                    self.attached.remove(session);
                }
            }
            method
                if REGISTRATIONS.contains(&method)
                    && !self.registrations.iter().any(|m| m == method) =>
            {
                self.registrations.push(method.to_owned());
            }
            _ => {}
        }
        true
    }

    /// The body to deliver instead of the frame [`Relay::owner_sent`] just said to deliver,
    /// if it was rewritten.
    pub(crate) fn take_rewritten(&mut self) -> Option<Bytes> {
        self.rewritten.take()
    }

    /// The sessions are about to be attached to another owner, whose delta counts are its
    /// own: what the client lost meanwhile cannot be counted.
    pub(crate) fn owner_changed(&mut self) {
        for attached in self.attached.values_mut() {
            attached.deltas_base = None;
        }
    }

    /// The streaming deltas the client lost with the link, per session, found as the
    /// re-attachments were answered (report them before the catch-up).
    pub(crate) fn take_gaps(&mut self) -> Vec<(String, u64)> {
        std::mem::take(&mut self.gaps)
    }

    /// The sessions the client is attached to through this relay.
    pub(crate) fn sessions(&self) -> Vec<String> {
        self.attached.keys().cloned().collect()
    }

    /// The owner died: an error answer (with `reason`) for every request it did not answer,
    /// in the order the client sent them. Each request is answered once: the new owner never
    /// saw them.
    pub(crate) fn fail_pending(&mut self, reason: &str) -> Vec<Bytes> {
        self.replays.clear();
        self.requests.fail_all(reason)
    }

    /// [`Relay::fail_pending`] after the owner died, except for the `session.sendAndWait`s
    /// of attached sessions: a `sendAndWait` ends with its turn, so each is answered as the
    /// owner would have when the catch-up ends the session's interrupted turn (the error of
    /// its `session.error`), or, when there is none, by [`Relay::fail_turn_waiters`].
    pub(crate) fn fail_pending_but_turns(&mut self, reason: &str) -> Vec<Bytes> {
        self.replays.clear();
        let mut answers = Vec::new();
        for pending in self.requests.take_all() {
            let waits_for_a_turn = pending.method == "session.sendAndWait"
                && pending
                    .session
                    .as_ref()
                    .is_some_and(|s| self.attached.contains_key(s));
            if waits_for_a_turn {
                self.turn_waiters.push((pending, reason.to_owned()));
            } else {
                answers.push(failure(&pending, reason));
            }
        }
        answers
    }

    /// [`Relay::fail_pending`] after the link to the owner, which still answers, broke
    /// (the owner served it as relayed connection `member`), except for the
    /// `session.sendAndWait`s of attached sessions: their turns go on at the owner, which
    /// answers them on the next link ([`Relay::reattach`] names them), so they stay pending.
    pub(crate) fn fail_pending_but_turns_at(&mut self, member: u64, reason: &str) -> Vec<Bytes> {
        self.replays.clear();
        self.former_member = Some(member);
        let attached = &self.attached;
        self.requests.fail_all_but_turns(
            "session.sendAndWait",
            |s| attached.contains_key(s),
            reason,
        )
    }

    /// The error answers of the `session.sendAndWait`s no catch-up ended (their prompt was
    /// not stored, or their session had no interrupted turn).
    pub(crate) fn fail_turn_waiters(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.turn_waiters)
            .iter()
            .map(|(pending, reason)| failure(pending, reason))
            .collect()
    }

    /// The requests that re-attach the client to a new owner: the connection-level
    /// registrations it made through the relay (under [`RELAY_HANDSHAKE_ID`], as a link's
    /// set-up), then a `session.resume` per session, with the params it attached with (no
    /// `session.resume` event: the client did not resume). Their answers are not delivered
    /// ([`Relay::owner_sent`] drops the resumes'; the gateway, the set-up answers).
    pub(crate) fn reattach(&mut self) -> Vec<Bytes> {
        // The registrations first (their answers are kept from the client as a link's set-up
        // answers are), then the sessions.
        let mut frames: Vec<Bytes> = self
            .registrations
            .iter()
            .map(|method| {
                let body = json!({"jsonrpc": "2.0", "id": RELAY_HANDSHAKE_ID, "method": method,
                                  "params": {}});
                Bytes::from(body.to_string())
            })
            .collect();
        let former = self.former_member.take();
        for (session, attached) in &self.attached {
            let mut params = attached.params.clone();
            params["disableResume"] = json!(true);
            params["continuePendingWork"] = json!(false);
            params["agentwireRelayReattach"] = json!(true);
            if let Some(former) = former {
                // The same owner answers the turns the client still waits for here.
                params[RELAY_FORMER_MEMBER] = json!(former);
                params[RELAY_AWAITING] =
                    Value::Array(self.requests.ids_of("session.sendAndWait", session));
            }
            frames.push(self.replays.request(session, "session.resume", params));
        }
        frames
    }

    /// Sessions the client just resumed, with no event received yet: read the log's last
    /// sequence for each and report it with [`Relay::set_floor`] before the answer that made
    /// this call return them reaches the client.
    pub(crate) fn floors_wanted(&mut self) -> Vec<String> {
        std::mem::take(&mut self.floors_wanted)
    }

    /// The log's last sequence of `session` (`0`: empty), read after its resume was answered.
    pub(crate) fn set_floor(&mut self, session: &str, seq: u64) {
        if let Some(attached) = self.attached.get_mut(session) {
            attached.floor.get_or_insert(seq);
        }
    }

    /// After a re-attachment and its catch-up: a `session.idle` (stamped `timestamp`) for each
    /// session whose turn the client saw start but not end, when the owner answered that the
    /// session is not in a turn any more (its `session.idle` was lost with the link). A turn
    /// still running ends live, as for every client.
    pub(crate) fn missed_idles(&mut self, timestamp: &str) -> Vec<Bytes> {
        let mut frames = Vec::new();
        for (session, attached) in &mut self.attached {
            let owner_busy = attached.owner_busy.take();
            if !attached.awaiting_idle || owner_busy != Some(false) {
                continue;
            }
            attached.awaiting_idle = false;
            let parent = attached.last_event.clone();
            let seed = format!("{}:idle", parent.as_deref().unwrap_or(session));
            let data = json!({"mode": "interactive"});
            frames.extend(idle_notification(
                session,
                &seed,
                &json!(timestamp),
                &json!(parent),
                data,
            ));
        }
        frames
    }

    /// The events of `session`'s log (`events`, oldest first, as stored) the client has not
    /// received: the notifications to deliver after a re-attachment. A turn the takeover
    /// interrupted ends with `session.idle` as it does for attached clients (that event is
    /// ephemeral, so not in the log).
    pub(crate) fn catch_up(&mut self, session: &str, events: &[(u64, Bytes)]) -> Vec<Bytes> {
        let Some(attached) = self.attached.get_mut(session) else {
            return Vec::new();
        };
        let ids: Vec<Option<String>> = events
            .iter()
            .map(|(_, e)| {
                serde_json::from_slice::<Value>(e)
                    .ok()
                    .and_then(|v| v["id"].as_str().map(str::to_owned))
            })
            .collect();
        let start = match &attached.last_event {
            Some(last) => match ids.iter().position(|id| id.as_deref() == Some(last)) {
                Some(at) => at + 1,
                // Not in the log (it cannot be: the owner releases an event once stored).
                None => events.len(),
            },
            None if attached.created => 0,
            // A resume with no event received yet: after what was in the log when it was
            // answered (where it attached is not known without that read).
            None => match attached.floor {
                Some(floor) => events
                    .iter()
                    .position(|(seq, _)| *seq > floor)
                    .unwrap_or(events.len()),
                None => events.len(),
            },
        };
        let mcp_apps = attached.params["requestMcpApps"] == true;
        let missed: Vec<Option<Value>> = events[start..]
            .iter()
            .map(|(_, e)| serde_json::from_slice::<Value>(e).ok())
            .collect();
        let answered = answered_requests(missed.iter().flatten());
        let mut frames = Vec::new();
        for (((_, event), parsed), id) in events[start..].iter().zip(missed).zip(&ids[start..]) {
            let (Some(id), Some(parsed)) = (id, parsed) else {
                continue;
            };
            // The owner's audience rule for durable MCP Apps events.
            let kind = parsed["type"].as_str().unwrap_or_default();
            if kind.starts_with("mcp_app.") && !mcp_apps {
                continue;
            }
            if is_answered_request(kind, &parsed, &answered) {
                // Over before the client could see it (the SDKs act on a request event:
                // they would run the tool or ask the user for nothing). Its completion
                // follows; a live copy of it from the new owner is dropped too.
                attached.caught_up.insert(id.clone());
                continue;
            }
            let Some(frame) = event_notification(session, event) else {
                continue;
            };
            frames.push(frame);
            attached.caught_up.insert(id.clone());
            attached.last_event = Some(id.clone());
            if let Some(turn) = turn_edge(kind) {
                attached.awaiting_idle = turn;
            }
            if parsed["type"] == "session.error" && parsed["data"]["errorType"] == "interrupted" {
                // The turn's `sendAndWait`s end with its error, as on the owner.
                let message = parsed["data"]["message"]
                    .as_str()
                    .unwrap_or("session error")
                    .to_owned();
                let (ended, waiting) = std::mem::take(&mut self.turn_waiters)
                    .into_iter()
                    .partition(|(p, _)| p.session.as_deref() == Some(session));
                self.turn_waiters = waiting;
                let ended: Vec<(Pending, String)> = ended;
                for (pending, _) in ended {
                    frames.push(response(&pending.id, Err((OWNER_STOPPED, message.clone()))));
                }
                attached.awaiting_idle = false;
                let data = json!({"aborted": true, "mode": "interactive"});
                frames.extend(idle_notification(
                    session,
                    id,
                    &parsed["timestamp"],
                    &json!(id),
                    data,
                ));
            }
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, kind: &str, data: Value) -> Bytes {
        Bytes::from(
            json!({"id": id, "timestamp": "2026-12-02T00:00:00.000Z", "parentId": null,
                   "type": kind, "data": data})
            .to_string(),
        )
    }

    fn notification(session: &str, event: &Bytes) -> Vec<u8> {
        event_notification(session, event).unwrap().to_vec()
    }

    fn attached_relay() -> Relay {
        let mut relay = Relay::default();
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":1,"method":"session.resume","params":{"sessionId":"s","requestPermission":true,"tools":[{"name":"t"}]}}"#,
        );
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#));
        relay
    }

    #[test]
    fn an_event_whose_head_was_read_is_followed_as_if_the_relay_read_it() {
        let with_ephemeral = |mut e: Value, agent: bool| {
            e["ephemeral"] = json!(true);
            if agent {
                e["agentId"] = json!("sub-1");
            }
            Bytes::from(e.to_string())
        };
        let parse = |b: &Bytes| serde_json::from_slice::<Value>(b).unwrap();
        let log = [
            event("e1", "user.message", json!({})),
            event("e2", "assistant.message", json!({})),
        ];
        let stream = [
            // Caught up from the log already: the live copy is dropped once.
            notification("s", &log[1]),
            notification(
                "s",
                &with_ephemeral(
                    parse(&event("d1", "assistant.message_delta", json!({}))),
                    false,
                ),
            ),
            notification(
                "s",
                &with_ephemeral(
                    parse(&event("d2", "assistant.message_delta", json!({}))),
                    true,
                ),
            ),
            notification("s", &event("e3", "user.message", json!({}))),
            notification("other", &log[1]),
        ];
        let mut by_body = attached_relay();
        let mut by_head = attached_relay();
        by_body.set_floor("s", 0);
        by_head.set_floor("s", 0);
        assert_eq!(by_body.catch_up("s", &[(5, log[1].clone())]).len(), 1);
        assert_eq!(by_head.catch_up("s", &[(5, log[1].clone())]).len(), 1);
        let delivered: Vec<(bool, bool)> = stream
            .iter()
            .map(|body| {
                let head = RelayedEventHead::parse(body).unwrap();
                (by_body.owner_sent(body), by_head.owner_sent_event(&head))
            })
            .collect();
        assert_eq!(
            delivered,
            [
                (false, false),
                (true, true),
                (true, true),
                (true, true),
                (true, true)
            ]
        );
        let state = |r: &Relay| {
            let a = &r.attached["s"];
            (a.last_event.clone(), a.deltas_received, a.awaiting_idle)
        };
        assert_eq!(state(&by_head), state(&by_body));
        assert_eq!(state(&by_head), (Some("e3".to_owned()), [1, 1], true));
    }

    #[test]
    fn registrations_made_through_the_relay_are_made_again_first() {
        let mut relay = attached_relay();
        relay.client_sent(br#"{"jsonrpc":"2.0","id":7,"method":"sessionFs.setProvider","params":{"initialCwd":"/w"}}"#);
        relay.client_sent(br#"{"jsonrpc":"2.0","id":8,"method":"llmInference.setProvider"}"#);
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":7,"result":{"success":true}}"#));
        // A refused one is not made again.
        assert!(
            relay.owner_sent(br#"{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"no"}}"#)
        );
        let frames: Vec<Value> = relay
            .reattach()
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect();
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(frames[0]["method"], "sessionFs.setProvider");
        assert_eq!(frames[0]["id"], RELAY_HANDSHAKE_ID);
        assert_eq!(frames[1]["method"], "session.resume");
        // Only the resumes are re-attachments to wait for.
        let answer = json!({"jsonrpc": "2.0", "id": RELAY_HANDSHAKE_ID, "result": {}});
        assert!(!relay.replays.is_answer(answer.to_string().as_bytes()));
    }

    #[test]
    fn pending_requests_are_failed_once_in_order() {
        let mut relay = attached_relay();
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":2,"method":"session.send","params":{"sessionId":"s"}}"#,
        );
        relay.client_sent(br#"{"jsonrpc":"2.0","id":"x","method":"session.getMessages"}"#);
        relay.client_sent(br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#));
        let failed: Vec<Value> = relay
            .fail_pending("node a stopped")
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect();
        assert_eq!(failed.len(), 2);
        assert_eq!(failed[0]["id"], 2);
        assert_eq!(failed[1]["id"], "x");
        assert!(failed[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("node a stopped"));
        assert!(relay.fail_pending("again").is_empty());
    }

    #[test]
    fn reattachment_replays_the_attach_params_and_hides_its_answer() {
        let mut relay = attached_relay();
        let frames = relay.reattach();
        assert_eq!(frames.len(), 1);
        let replay: Value = serde_json::from_slice(&frames[0]).unwrap();
        assert_eq!(replay["method"], "session.resume");
        assert_eq!(replay["params"]["sessionId"], "s");
        assert_eq!(replay["params"]["requestPermission"], true);
        assert_eq!(replay["params"]["tools"][0]["name"], "t");
        assert_eq!(replay["params"]["disableResume"], true);
        assert!(relay.replays.any_open());
        let answer = json!({"jsonrpc": "2.0", "id": replay["id"], "result": {"sessionId": "s"}});
        assert!(relay.replays.is_answer(answer.to_string().as_bytes()));
        assert!(!relay
            .replays
            .is_answer(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(!relay.owner_sent(answer.to_string().as_bytes()));
        assert!(!relay.replays.any_open());
        assert_eq!(relay.sessions(), ["s"]);
        assert!(relay.replays.take_refused().is_empty());

        // A refused re-attachment: the session is no longer attached, and the reason kept.
        let replay: Value = serde_json::from_slice(&relay.reattach()[0]).unwrap();
        let refusal = json!({"jsonrpc": "2.0", "id": replay["id"],
                             "error": {"code": -32603, "message": "Session not found: s"}});
        assert!(!relay.owner_sent(refusal.to_string().as_bytes()));
        assert!(relay.sessions().is_empty());
        assert_eq!(
            relay.replays.take_refused(),
            [("s".to_owned(), "Session not found: s".to_owned())]
        );
    }

    #[test]
    fn catch_up_sends_what_the_client_missed_once_and_ends_the_interrupted_turn() {
        let mut relay = attached_relay();
        let log = [
            event("e1", "user.message", json!({})),
            event("e2", "permission.requested", json!({})),
            event("e3", "permission.completed", json!({})),
            event("e4", "session.error", json!({"errorType": "interrupted"})),
        ];
        assert!(relay.owner_sent(&notification("s", &log[0])));
        assert!(relay.owner_sent(&notification("s", &log[1])));
        let log: Vec<(u64, Bytes)> = log.into_iter().zip(1..).map(|(e, seq)| (seq, e)).collect();
        let frames = relay.catch_up("s", &log);
        let types: Vec<String> = frames
            .iter()
            .map(|f| {
                let v: Value = serde_json::from_slice(f).unwrap();
                v["params"]["event"]["type"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(
            types,
            ["permission.completed", "session.error", "session.idle"]
        );
        // The new owner sending a caught-up event live again: dropped; a new one passes.
        assert!(!relay.owner_sent(&notification("s", &log[3].1)));
        let next = event("e5", "user.message", json!({}));
        assert!(relay.owner_sent(&notification("s", &next)));
        assert!(relay.catch_up("s", &[log[3].clone(), (5, next)]).is_empty());
    }

    #[test]
    fn catch_up_does_not_ask_the_client_what_was_answered_before_it_could_see_it() {
        let mut relay = attached_relay();
        let log = [
            event("e1", "user.message", json!({})),
            // Asked and answered while the client was away: not asked again.
            event("e2", "permission.requested", json!({"requestId": "p1"})),
            event("e3", "permission.completed", json!({"requestId": "p1"})),
            event("e4", "external_tool.requested", json!({"requestId": "t1"})),
            // Still open when the log was read: the client may answer it.
            event("e5", "external_tool.requested", json!({"requestId": "t2"})),
            // The interrupted turn fails the first tool call.
            event("e6", "external_tool.completed", json!({"requestId": "t1"})),
            event("e7", "session.error", json!({"errorType": "interrupted"})),
        ];
        assert!(relay.owner_sent(&notification("s", &log[0])));
        let log: Vec<(u64, Bytes)> = log.into_iter().zip(1..).map(|(e, seq)| (seq, e)).collect();
        let ids: Vec<String> = relay
            .catch_up("s", &log)
            .iter()
            .map(|f| {
                let v: Value = serde_json::from_slice(f).unwrap();
                let event = &v["params"]["event"];
                format!(
                    "{} {}",
                    event["id"].as_str().unwrap(),
                    event["type"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            ids[..4],
            [
                "e3 permission.completed",
                "e5 external_tool.requested",
                "e6 external_tool.completed",
                "e7 session.error"
            ]
        );
        assert!(ids[4].ends_with("session.idle"), "{ids:?}");
        assert_eq!(ids.len(), 5);
        // The new owner sending a skipped request live: dropped as well.
        assert!(!relay.owner_sent(&notification("s", &log[3].1)));
    }

    /// An attached relay whose client sent, not answered yet: a `sendAndWait` (5) and a
    /// `send` (6) of its session, and a `sendAndWait` of a session it is not attached to (7).
    fn relay_with_turn_requests_in_flight() -> Relay {
        let mut relay = attached_relay();
        relay.client_sent(br#"{"jsonrpc":"2.0","id":5,"method":"session.sendAndWait","params":{"sessionId":"s","prompt":"p"}}"#);
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":6,"method":"session.send","params":{"sessionId":"s"}}"#,
        );
        relay.client_sent(br#"{"jsonrpc":"2.0","id":7,"method":"session.sendAndWait","params":{"sessionId":"other"}}"#);
        relay
    }

    #[test]
    fn a_send_and_wait_the_owner_did_not_answer_ends_with_its_interrupted_turn() {
        let mut relay = relay_with_turn_requests_in_flight();
        let failed: Vec<Value> = relay
            .fail_pending_but_turns("node a stopped")
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect();
        // The send and the sendAndWait of a session the client is not attached to: now.
        assert_eq!(failed.len(), 2);
        assert_eq!(
            (failed[0]["id"].clone(), failed[1]["id"].clone()),
            (json!(6), json!(7))
        );
        let log = [
            (1, event("e1", "user.message", json!({}))),
            (
                2,
                event(
                    "e2",
                    "session.error",
                    json!({"errorType": "interrupted", "message": "interrupted: node c took over"}),
                ),
            ),
        ];
        relay.set_floor("s", 0);
        let frames: Vec<Value> = relay
            .catch_up("s", &log)
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect();
        // After the turn's error, before its idle: the sendAndWait's answer, as the owner's.
        assert_eq!(frames.len(), 4, "{frames:?}");
        assert_eq!(frames[1]["params"]["event"]["type"], "session.error");
        assert_eq!(frames[2]["id"], 5);
        assert_eq!(
            frames[2]["error"]["message"],
            "interrupted: node c took over"
        );
        assert_eq!(frames[3]["params"]["event"]["type"], "session.idle");
        assert!(relay.fail_turn_waiters().is_empty(), "answered once");

        // No interrupted turn (the prompt was never stored): the reason, after the catch-up.
        let mut relay = attached_relay();
        relay.client_sent(br#"{"jsonrpc":"2.0","id":8,"method":"session.sendAndWait","params":{"sessionId":"s"}}"#);
        assert!(relay.fail_pending_but_turns("node a stopped").is_empty());
        relay.set_floor("s", 0);
        assert_eq!(relay.catch_up("s", &log[..1]).len(), 1);
        let left: Vec<Value> = relay
            .fail_turn_waiters()
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0]["id"], 8);
        assert!(left[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("node a stopped"));
    }

    #[test]
    fn a_send_and_wait_in_flight_when_only_the_link_broke_is_left_to_the_owner() {
        let mut relay = relay_with_turn_requests_in_flight();
        let failed: Vec<Value> = relay
            .fail_pending_but_turns_at(41, "the link broke")
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect();
        // The send, and the sendAndWait of a session the client is not attached to: now.
        let ids: Vec<&Value> = failed.iter().map(|f| &f["id"]).collect();
        assert_eq!(ids, [&json!(6), &json!(7)]);
        // The re-attachment names the former member and what the client waits for, once.
        let frames = relay.reattach();
        let replay: Value = serde_json::from_slice(&frames[0]).unwrap();
        assert_eq!(replay["params"][RELAY_FORMER_MEMBER], 41);
        assert_eq!(replay["params"][RELAY_AWAITING], json!([5]));
        let again: Value = serde_json::from_slice(&relay.reattach()[0]).unwrap();
        assert!(again["params"].get(RELAY_FORMER_MEMBER).is_none());
        // The owner's answer on the new link reaches the client, once.
        let answer = br#"{"jsonrpc":"2.0","id":5,"result":{"messageId":"m","aborted":false}}"#;
        assert!(relay.owner_sent(answer));
        assert!(
            relay.fail_pending("later").is_empty(),
            "nothing left pending"
        );
    }

    #[test]
    fn a_resume_with_no_event_received_catches_up_after_its_floor() {
        let mut relay = attached_relay();
        assert_eq!(relay.floors_wanted(), ["s"]);
        relay.set_floor("s", 2);
        let log = [
            (1, event("e1", "session.start", json!({}))),
            (2, event("e2", "session.idle", json!({}))),
            (4, event("e3", "user.message", json!({}))),
        ];
        let frames = relay.catch_up("s", &log);
        assert_eq!(frames.len(), 1);
        let v: Value = serde_json::from_slice(&frames[0]).unwrap();
        assert_eq!(v["params"]["event"]["id"], "e3");
        // Without the floor nothing is known: nothing is sent.
        let mut unknown = attached_relay();
        unknown.floors_wanted();
        assert!(unknown.catch_up("s", &log).is_empty());
    }

    #[test]
    fn a_resume_the_owner_says_where_it_attached_catches_up_after_exactly_that_event() {
        let log = [
            (1, event("e1", "session.start", json!({}))),
            (2, event("e2", "user.message", json!({}))),
            // Stored between the answer and any read of the log's end.
            (4, event("e3", "session.resume", json!({}))),
        ];
        for (said, expected) in [
            (json!("e2"), vec!["e3"]),
            (json!(null), vec!["e1", "e2", "e3"]),
        ] {
            let mut relay = Relay::default();
            relay.client_sent(
                br#"{"jsonrpc":"2.0","id":1,"method":"session.resume","params":{"sessionId":"s"}}"#,
            );
            let answer = json!({"jsonrpc": "2.0", "id": 1,
                                "result": {"sessionId": "s", RELAY_LAST_EVENT: said}});
            assert!(relay.owner_sent(answer.to_string().as_bytes()));
            // The client gets the answer without the relay's field, and no log read is needed.
            let delivered: Value =
                serde_json::from_slice(&relay.take_rewritten().unwrap()).unwrap();
            assert_eq!(
                delivered,
                json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}})
            );
            assert!(relay.floors_wanted().is_empty());
            let caught: Vec<String> = relay
                .catch_up("s", &log)
                .iter()
                .map(|f| {
                    let v: Value = serde_json::from_slice(f).unwrap();
                    v["params"]["event"]["id"].as_str().unwrap().to_owned()
                })
                .collect();
            assert_eq!(caught, expected, "after {said}");
        }
    }

    #[test]
    fn a_created_session_catches_up_from_its_start() {
        let mut relay = Relay::default();
        relay.client_sent(br#"{"jsonrpc":"2.0","id":1,"method":"session.create","params":{}}"#);
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"new"}}"#));
        assert!(
            relay.floors_wanted().is_empty(),
            "a created session needs no floor"
        );
        let log = [(1, event("e1", "session.start", json!({})))];
        assert_eq!(relay.catch_up("new", &log).len(), 1);
        let replay: Value = serde_json::from_slice(&relay.reattach()[0]).unwrap();
        assert_eq!(replay["params"]["sessionId"], "new");
    }

    #[test]
    fn a_turn_whose_idle_was_lost_is_ended_when_the_owner_says_it_is_not_in_a_turn() {
        let idle = |id: &str| {
            json!({"jsonrpc": "2.0", "method": "session.event", "params": {"sessionId": "s",
                   "event": {"id": id, "timestamp": "t", "parentId": null, "type": "session.idle",
                             "data": {}, "ephemeral": true}}})
            .to_string()
        };
        let answer = |relay: &mut Relay, busy: bool| {
            let replay: Value = serde_json::from_slice(&relay.reattach()[0]).unwrap();
            assert_eq!(replay["params"]["agentwireRelayReattach"], true);
            let answer = json!({"jsonrpc": "2.0", "id": replay["id"],
                                "result": {"sessionId": "s", RELAY_SESSION_BUSY: busy}});
            assert!(!relay.owner_sent(answer.to_string().as_bytes()));
        };
        let mut relay = attached_relay();
        // Nothing started: nothing to end, whatever the owner says.
        answer(&mut relay, false);
        assert!(relay.missed_idles("now").is_empty());
        // A turn started; the link broke before its session.idle.
        let prompt = event("e1", "user.message", json!({}));
        assert!(relay.owner_sent(&notification("s", &prompt)));
        // Still in a turn on the owner: its idle comes live.
        answer(&mut relay, true);
        assert!(relay.missed_idles("now").is_empty());
        // Over on the owner: one idle, after the last event the client has, once.
        answer(&mut relay, false);
        let frames = relay.missed_idles("now");
        assert_eq!(frames.len(), 1);
        let v: Value = serde_json::from_slice(&frames[0]).unwrap();
        assert_eq!(v["params"]["sessionId"], "s");
        assert_eq!(v["params"]["event"]["type"], "session.idle");
        assert_eq!(v["params"]["event"]["parentId"], "e1");
        assert_eq!(v["params"]["event"]["ephemeral"], true);
        assert!(relay.missed_idles("now").is_empty());
        // A turn whose idle the client did receive needs none.
        assert!(relay.owner_sent(&notification("s", &event("e2", "user.message", json!({})))));
        assert!(relay.owner_sent(idle("i2").as_bytes()));
        answer(&mut relay, false);
        assert!(relay.missed_idles("now").is_empty());
    }

    #[test]
    fn deltas_lost_with_a_broken_link_are_counted_from_the_owners_counts() {
        let delta = |id: &str, sub: bool| {
            let mut event = json!({"id": id, "timestamp": "t", "parentId": null,
                                   "type": "assistant.message_delta",
                                   "data": {"deltaContent": "x"}, "ephemeral": true});
            if sub {
                event["agentId"] = json!("sub");
            }
            json!({"jsonrpc": "2.0", "method": "session.event",
                   "params": {"sessionId": "s", "event": event}})
            .to_string()
        };
        let attach = |params: Value, emitted: [u64; 2]| {
            let mut relay = Relay::default();
            let request = json!({"jsonrpc": "2.0", "id": 1, "method": "session.resume",
                                 "params": params});
            relay.client_sent(request.to_string().as_bytes());
            let answer = json!({"jsonrpc": "2.0", "id": 1,
                                "result": {"sessionId": "s", RELAY_DELTAS_EMITTED: emitted}});
            assert!(relay.owner_sent(answer.to_string().as_bytes()));
            // The client gets the answer without the relay's field.
            let delivered: Value =
                serde_json::from_slice(&relay.take_rewritten().expect("rewritten")).unwrap();
            assert_eq!(delivered["id"], 1);
            assert_eq!(delivered["result"], json!({"sessionId": "s"}));
            relay
        };
        let reattached = |relay: &mut Relay, emitted: [u64; 2]| {
            let replay: Value = serde_json::from_slice(&relay.reattach()[0]).unwrap();
            let answer = json!({"jsonrpc": "2.0", "id": replay["id"],
                                "result": {"sessionId": "s", RELAY_DELTAS_EMITTED: emitted}});
            assert!(!relay.owner_sent(answer.to_string().as_bytes()));
            relay.take_gaps()
        };
        let streaming = json!({"sessionId": "s", "streaming": true});
        let mut relay = attach(streaming.clone(), [5, 1]);
        for id in ["d1", "d2", "d3"] {
            assert!(relay.owner_sent(delta(id, false).as_bytes()));
        }
        assert!(relay.owner_sent(delta("d4", true).as_bytes()));
        // 12 - 5 main deltas emitted, 3 received; 3 - 1 sub-agent deltas, 1 received.
        assert_eq!(reattached(&mut relay, [12, 3]), [("s".to_owned(), 5)]);
        // Counted from the re-attachment on: nothing lost since.
        assert!(relay.owner_sent(delta("d5", false).as_bytes()));
        assert!(reattached(&mut relay, [13, 3]).is_empty());
        // A new owner counts its own deltas: nothing can be said.
        relay.owner_changed();
        assert!(reattached(&mut relay, [2, 0]).is_empty());
        assert!(reattached(&mut relay, [4, 0]) == [("s".to_owned(), 2)]);

        // Without sub-agent streaming only the main agent's deltas count; without streaming
        // none do.
        let mut relay = attach(
            json!({"sessionId": "s", "streaming": true, "includeSubAgentStreamingEvents": false}),
            [0, 0],
        );
        assert_eq!(reattached(&mut relay, [2, 9]), [("s".to_owned(), 2)]);
        let mut relay = attach(json!({"sessionId": "s"}), [0, 0]);
        assert!(reattached(&mut relay, [2, 9]).is_empty());
    }
}
