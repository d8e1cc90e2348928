//! What a gateway remembers about an editor (an ACP client) it relays, so that a takeover of
//! the owner does not cost the editor its connection: the sessions it is attached to, the
//! requests to answer if the owner dies before it does, and how far it got in each session.
//! I/O-free, like [`crate::copilot::relay`] for Copilot SDK clients.
//!
//! ACP's `session/update`s carry no event ids, so the owner tells the gateway after the
//! updates of each durable event which event that was ([`RELAY_POSITION`], kept from the
//! client). To re-attach, the gateway sends the new owner a `session/resume` naming that event
//! ([`RELAY_REPLAY_AFTER`]): the owner replays the updates of the events after it, then
//! attaches the connection, so the editor misses nothing durable and gets nothing twice.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::acp::{RELAY_POSITION, RELAY_REPLAY_AFTER};
use crate::host::{RELAY_AWAITING, RELAY_FORMER_MEMBER};

use crate::host::cluster::relay_requests::{
    error_message, id_key, ClientRequests, OwnerMessage, Reattachments,
};

/// The ACP methods that attach the client to a session.
const ATTACHES: &[&str] = &["session/new", "session/load", "session/resume"];

/// One session the editor is attached to.
#[derive(Debug, Clone)]
struct Attached {
    /// `cwd` and `mcpServers` of the request that attached it.
    params: Value,
    /// Attached by `session/new` (it received every update of the session).
    created: bool,
}

/// The relay state of one ACP client connection (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct AcpRelay {
    /// Requests in flight to the owner.
    requests: ClientRequests,
    attached: BTreeMap<String, Attached>,
    /// The last durable event whose updates the client has, per session.
    positions: HashMap<String, String>,
    /// Re-attachments sent to a new owner and not answered yet, and those it refused.
    pub(crate) replays: Reattachments,
    /// The link broke, the owner still answers: the relayed connection the owner served the
    /// link as, whose `session/prompt`s stay pending for the owner to answer on the next link
    /// (named by the re-attachment, [`RELAY_FORMER_MEMBER`]).
    former_member: Option<u64>,
    /// The `session/update`s delivered since the last position (their event's position may
    /// have been lost with the link or the owner), which a re-attachment's replay sends again:
    /// see [`AcpRelay::skip_replayed`].
    unconfirmed: Unconfirmed,
}

/// The updates a client received after the last position it was told, in order.
#[derive(Debug, Default)]
struct Unconfirmed {
    updates: Vec<Bytes>,
    bytes: usize,
    /// More than [`UNCONFIRMED_MAX_BYTES`] since the last position: not kept (a replay is
    /// then delivered whole).
    overflowed: bool,
}

/// How many bytes of updates since the last position the relay keeps to recognise a replay
/// (a long stream of chunks between two durable events is not kept).
const UNCONFIRMED_MAX_BYTES: usize = 1 << 20;

/// How the host writes every `session/update` notification.
const UPDATE_HEAD: &[u8] = br#"{"jsonrpc":"2.0","method":"session/update""#;

/// The params of a [`RELAY_POSITION`] notification.
#[derive(Deserialize)]
struct Position {
    #[serde(rename = "sessionId")]
    session_id: String,
    #[serde(rename = "eventId")]
    event_id: String,
}

/// Whether `method` (its JSON text) is the position notification.
fn is_position(method: &RawValue) -> bool {
    method
        .get()
        .strip_prefix('"')
        .and_then(|m| m.strip_suffix('"'))
        == Some(RELAY_POSITION)
}

impl AcpRelay {
    /// A frame the client sends to the owner: the body to relay instead, if the client's
    /// request carried params only a gateway may send (removed).
    pub(crate) fn client_sent(&mut self, body: &[u8]) -> Option<Bytes> {
        self.requests.sent(body, ATTACHES)
    }

    /// A frame the owner sends to the client: whether to deliver it (positions and answers to
    /// re-attachments are the gateway's).
    pub(crate) fn owner_sent(&mut self, body: &[u8]) -> bool {
        let Ok(message) = serde_json::from_slice::<OwnerMessage<'_>>(body) else {
            return true;
        };
        match (message.method, message.id) {
            (Some(method), None) if is_position(method) => {
                let position = message
                    .params
                    .and_then(|p| serde_json::from_str::<Position>(p.get()).ok());
                if let Some(p) = position {
                    self.positions.insert(p.session_id, p.event_id);
                }
                self.unconfirmed = Unconfirmed::default();
                false
            }
            (None, Some(id)) => self.answered(id, &message),
            _ => true,
        }
    }

    /// A response of the owner: whether to deliver it.
    fn answered(&mut self, id: &RawValue, message: &OwnerMessage<'_>) -> bool {
        let Some(key) = id_key(id) else {
            return true;
        };
        if let Some(session) = self.replays.answered(&key) {
            if let Some(error) = message.error {
                // The new owner refused the re-attachment: the client is no longer attached.
                self.attached.remove(&session);
                self.positions.remove(&session);
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
        match pending.method.as_str() {
            "session/new" | "session/load" | "session/resume" => {
                let created = pending.method == "session/new";
                let session = if created {
                    serde_json::from_str::<Value>(result.get())
                        .ok()
                        .and_then(|r| r["sessionId"].as_str().map(str::to_owned))
                } else {
                    pending.session
                };
                let Some(session) = session else {
                    return true;
                };
                let attach = pending.attach.unwrap_or_default();
                let params = json!({"cwd": attach["cwd"], "mcpServers": attach["mcpServers"]});
                self.attached.insert(session, Attached { params, created });
            }
            "session/close" | "session/delete" => {
                if let Some(session) = &pending.session {
                    self.attached.remove(session);
                    self.positions.remove(session);
                }
            }
            _ => {}
        }
        true
    }

    /// `body`, a frame of the owner, was delivered to the client: an update is remembered
    /// until the next position.
    pub(crate) fn delivered(&mut self, body: &Bytes) {
        let kept = &mut self.unconfirmed;
        if kept.overflowed || !body.starts_with(UPDATE_HEAD) {
            return;
        }
        kept.bytes += body.len();
        if kept.bytes > UNCONFIRMED_MAX_BYTES {
            *kept = Unconfirmed {
                overflowed: true,
                ..Unconfirmed::default()
            };
            return;
        }
        kept.updates.push(body.clone());
    }

    /// The frames the owner sent before answering a re-attachment (its replay of what
    /// follows the client's last position, then that position), without the updates the
    /// client already received: a position lost with the link or the owner (it travels after
    /// its event's updates) makes the replay start before them. Each replayed update that
    /// equals, in order, one the client got since its last position is left out, up to the
    /// first that does not (the rest is new to the client). Forgets what it compared.
    pub(crate) fn skip_replayed<T>(&mut self, held: Vec<T>, body: impl Fn(&T) -> &[u8]) -> Vec<T> {
        let unconfirmed = std::mem::take(&mut self.unconfirmed).updates;
        let mut next = 0;
        let mut skipping = true;
        held.into_iter()
            .filter(|frame| {
                let body = body(frame);
                if !skipping || !body.starts_with(UPDATE_HEAD) {
                    return true;
                }
                match unconfirmed[next..].iter().position(|u| u[..] == *body) {
                    Some(at) => {
                        next += at + 1;
                        false
                    }
                    None => {
                        skipping = false;
                        true
                    }
                }
            })
            .collect()
    }

    /// The sessions the client is attached to through this relay.
    pub(crate) fn sessions(&self) -> Vec<String> {
        self.attached.keys().cloned().collect()
    }

    /// The owner died or the link broke: an error answer (with `reason`) for every request
    /// the owner did not answer, in the order the client sent them, each once.
    pub(crate) fn fail_pending(&mut self, reason: &str) -> Vec<Bytes> {
        self.replays.clear();
        self.requests.fail_all(reason)
    }

    /// [`AcpRelay::fail_pending`] after the link to the owner, which still answers, broke
    /// (the owner served it as relayed connection `member`), except for the `session/prompt`s
    /// of attached sessions: their turns go on at the owner, which answers them on the next
    /// link ([`AcpRelay::reattach`] names them), so they stay pending.
    pub(crate) fn fail_pending_but_prompts_at(&mut self, member: u64, reason: &str) -> Vec<Bytes> {
        self.replays.clear();
        self.former_member = Some(member);
        let attached = &self.attached;
        self.requests
            .fail_all_but_turns("session/prompt", |s| attached.contains_key(s), reason)
    }

    /// The requests that re-attach the client to a new owner, one per session: a
    /// `session/resume` replaying what follows the client's position, or, for a session it
    /// created and got no position of yet, a `session/load` replaying everything. Their
    /// answers are not delivered ([`AcpRelay::owner_sent`] drops them).
    pub(crate) fn reattach(&mut self) -> Vec<Bytes> {
        let mut frames = Vec::new();
        let former = self.former_member.take();
        for (session, attached) in &self.attached {
            let mut params = attached.params.clone();
            params["sessionId"] = json!(session);
            if let Some(former) = former {
                // The same owner answers the prompts the client still waits for here.
                params["_meta"] = json!({
                    RELAY_FORMER_MEMBER: former,
                    RELAY_AWAITING: self.requests.ids_of("session/prompt", session),
                });
            }
            let method = match self.positions.get(session) {
                Some(after) => {
                    params["_meta"][RELAY_REPLAY_AFTER] = json!(after);
                    "session/resume"
                }
                None if attached.created => "session/load",
                // Loaded or resumed: its position came before the answer; without one (an
                // owner that sends none), nothing is replayed.
                None => "session/resume",
            };
            frames.push(self.replays.request(session, method, params));
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &[u8]) -> Value {
        serde_json::from_slice(body).unwrap()
    }

    fn position(session: &str, event: &str) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "method": RELAY_POSITION,
               "params": {"sessionId": session, "eventId": event}})
        .to_string()
        .into_bytes()
    }

    /// A relay whose client loaded session `s` (position `e2`) and created session `n`.
    fn attached_relay() -> AcpRelay {
        let mut relay = AcpRelay::default();
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s","cwd":"/w","mcpServers":[{"name":"m","command":"x","args":[],"env":[]}]}}"#,
        );
        assert!(relay.owner_sent(
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk"}}}"#
        ));
        assert!(
            !relay.owner_sent(&position("s", "e2")),
            "kept from the client"
        );
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":1,"result":{"modes":null}}"#));
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/n","mcpServers":[]}}"#,
        );
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"n"}}"#));
        relay
    }

    #[test]
    fn reattachments_replay_what_follows_the_last_position_the_client_got() {
        let mut relay = attached_relay();
        assert_eq!(relay.sessions(), ["n", "s"]);
        assert!(!relay.owner_sent(&position("s", "e5")));
        let frames: Vec<Value> = relay.reattach().iter().map(|b| parse(b)).collect();
        assert_eq!(frames.len(), 2);
        // A created session with no position yet: everything, as a load.
        assert_eq!(frames[0]["method"], "session/load");
        assert_eq!(frames[0]["params"]["sessionId"], "n");
        assert_eq!(frames[0]["params"]["cwd"], "/n");
        assert!(frames[0]["params"].get("_meta").is_none());
        // A loaded one: what follows the last position, with the params it was loaded with.
        assert_eq!(frames[1]["method"], "session/resume");
        assert_eq!(frames[1]["params"]["sessionId"], "s");
        assert_eq!(frames[1]["params"]["_meta"][RELAY_REPLAY_AFTER], "e5");
        assert_eq!(frames[1]["params"]["mcpServers"][0]["name"], "m");
        assert!(relay.replays.any_open());
        // Their answers are the gateway's.
        for frame in &frames {
            let answer = json!({"jsonrpc": "2.0", "id": frame["id"], "result": {}}).to_string();
            assert!(relay.replays.is_answer(answer.as_bytes()));
            assert!(!relay.owner_sent(answer.as_bytes()));
        }
        assert!(!relay.replays.any_open());
        assert!(relay.replays.take_refused().is_empty());
        assert_eq!(relay.sessions(), ["n", "s"]);
    }

    #[test]
    fn a_prompt_in_flight_when_only_the_link_broke_is_left_to_the_owner() {
        let mut relay = attached_relay();
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#,
        );
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":4,"method":"session/set_mode","params":{"sessionId":"s","modeId":"x"}}"#,
        );
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"other","prompt":[]}}"#,
        );
        let failed: Vec<Value> = relay
            .fail_pending_but_prompts_at(9, "the link broke")
            .iter()
            .map(|b| parse(b))
            .collect();
        let ids: Vec<&Value> = failed.iter().map(|f| &f["id"]).collect();
        assert_eq!(ids, [&json!(4), &json!(5)]);
        // Each re-attachment names the former member and the prompts of its session, once.
        let frames: Vec<Value> = relay.reattach().iter().map(|b| parse(b)).collect();
        assert_eq!(frames[0]["params"]["sessionId"], "n");
        assert_eq!(frames[0]["params"]["_meta"][RELAY_FORMER_MEMBER], 9);
        assert_eq!(frames[0]["params"]["_meta"][RELAY_AWAITING], json!([]));
        assert_eq!(frames[1]["params"]["_meta"][RELAY_AWAITING], json!([3]));
        assert_eq!(frames[1]["params"]["_meta"][RELAY_REPLAY_AFTER], "e2");
        let again: Vec<Value> = relay.reattach().iter().map(|b| parse(b)).collect();
        assert!(again[1]["params"]["_meta"]
            .get(RELAY_FORMER_MEMBER)
            .is_none());
        // The owner's answer on the new link reaches the client, once.
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#));
        assert!(
            relay.fail_pending("later").is_empty(),
            "nothing left pending"
        );
    }

    #[test]
    fn a_replay_leaves_out_what_the_client_got_after_its_last_position() {
        let update = |what: &str| {
            Bytes::from(
                json!({"jsonrpc": "2.0", "method": "session/update",
                       "params": {"sessionId": "s", "update": {"sessionUpdate": what}}})
                .to_string(),
            )
        };
        let mut relay = attached_relay();
        // Told e2; then the updates of e3 (its position lost), with a chunk between.
        for body in [
            update("tool_call"),
            update("agent_message_chunk"),
            update("in_progress"),
        ] {
            assert!(relay.owner_sent(&body));
            relay.delivered(&body);
        }
        let replay = vec![
            update("tool_call"),
            update("in_progress"),
            // New to the client, and so is everything after it.
            update("failed"),
            update("tool_call"),
            position("s", "e9").into(),
        ];
        let kept = relay.skip_replayed(replay, |b: &Bytes| &b[..]);
        let kinds: Vec<Value> = kept
            .iter()
            .map(|b| {
                let v = parse(b);
                v["params"]["update"]["sessionUpdate"].clone()
            })
            .collect();
        assert_eq!(kinds, [json!("failed"), json!("tool_call"), Value::Null]);
        // Compared once: a later replay is delivered whole.
        assert_eq!(
            relay
                .skip_replayed(vec![update("tool_call")], |b| &b[..])
                .len(),
            1
        );

        // A position confirms what came before it: nothing is left out after it.
        let mut relay = attached_relay();
        relay.delivered(&update("tool_call"));
        assert!(!relay.owner_sent(&position("s", "e3")));
        assert_eq!(
            relay
                .skip_replayed(vec![update("tool_call")], |b| &b[..])
                .len(),
            1
        );
    }

    #[test]
    fn a_refused_reattachment_detaches_the_session_and_says_why() {
        let mut relay = attached_relay();
        let frames: Vec<Value> = relay.reattach().iter().map(|b| parse(b)).collect();
        let refusal = json!({"jsonrpc": "2.0", "id": frames[1]["id"],
                             "error": {"code": -32602, "message": "event e2 is not in the history"}});
        assert!(!relay.owner_sent(refusal.to_string().as_bytes()));
        assert_eq!(
            relay.replays.take_refused(),
            [("s".to_owned(), "event e2 is not in the history".to_owned())]
        );
        assert_eq!(relay.sessions(), ["n"]);
    }

    #[test]
    fn unanswered_requests_fail_once_and_closed_sessions_are_not_reattached() {
        let mut relay = attached_relay();
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"n"}}"#,
        );
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#));
        assert_eq!(relay.sessions(), ["s"]);
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#,
        );
        // A failed load attaches nothing.
        relay.client_sent(
            br#"{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"x","cwd":"/w"}}"#,
        );
        assert!(relay.owner_sent(
            br#"{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"not found"}}"#
        ));
        assert_eq!(relay.sessions(), ["s"]);
        let failed: Vec<Value> = relay
            .fail_pending("node a stopped")
            .iter()
            .map(|b| parse(b))
            .collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0]["id"], 4);
        assert_eq!(
            failed[0]["error"]["message"],
            "session/prompt was not completed: node a stopped"
        );
        assert!(relay.fail_pending("again").is_empty());
    }

    #[test]
    fn frames_that_are_not_the_relays_are_delivered() {
        let mut relay = AcpRelay::default();
        assert!(relay.owner_sent(b"not json"));
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#));
        // A client's request of the same name as the position is not one.
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": RELAY_POSITION,
                             "params": {"sessionId": "s", "eventId": "e"}});
        assert!(relay.owner_sent(request.to_string().as_bytes()));
        assert!(relay.reattach().is_empty());
    }
}
