//! AHP (Agent Host Protocol) connections in the world: what an AHP client sent and saw, and
//! the checks on the host's `action` envelopes.
//!
//! Checked as frames arrive:
//!
//! * the host sends AHP clients only responses and the notifications `action`,
//!   `root/sessionAdded`, `root/sessionRemoved` and `root/sessionSummaryChanged` (never a
//!   request);
//! * an accepted envelope (no `rejectionReason`) is on a channel the connection asked to
//!   subscribe to, and its `serverSeq` is above every accepted one the connection received
//!   live before (the host numbers envelopes in publication order);
//! * one `serverSeq` is one envelope: every connection (live or replayed) sees the same
//!   channel, action and origin under it;
//! * a rejection goes to its sender alone: its `origin.clientId` is one this connection
//!   named in `initialize` / `reconnect`;
//! * per chat channel, turns do not overlap: `chat/turnStarted` only when no turn is active,
//!   every other turn action names the active turn;
//! * a `reconnect` replay lists envelopes after `lastSeenServerSeq`, in increasing order, on
//!   the channels asked for.
//!
//! At the end ([`World::ahp_final_checks`]): every connection still open received every
//! envelope any connection saw on each channel it is subscribed to, after the `serverSeq` its
//! subscription started from (nothing lost, replay included).

use super::*;

/// A chat's turn as one connection knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnState {
    /// Not known (subscribed by a replay, whose snapshot the client did not get).
    Unknown,
    /// No turn in progress.
    Idle,
    /// This turn is in progress.
    Active(String),
}

/// What an AHP connection knows.
#[derive(Clone, Debug, Default)]
pub struct AhpView {
    /// Every `clientId` it named in `initialize` / `reconnect`.
    pub client_ids: BTreeSet<String>,
    /// Every channel it asked to subscribe to (envelopes may arrive on these).
    pub requested: BTreeSet<String>,
    /// Channels it is subscribed to, with the `serverSeq` after which it must receive every
    /// envelope on them.
    pub tracked: BTreeMap<String, u64>,
    /// The `serverSeq`s it received, per channel (live and replayed).
    pub received: BTreeMap<String, BTreeSet<u64>>,
    /// The highest `serverSeq` of an accepted envelope received live.
    pub last_live: u64,
    /// The highest `serverSeq` it saw anywhere (its `lastSeenServerSeq` for a reconnect).
    pub last_seen: u64,
    /// Each chat channel's turn.
    pub turns: BTreeMap<String, TurnState>,
    /// Its next `clientSeq`.
    pub next_client_seq: i64,
    /// When it last sent `unsubscribe` for each channel ([`Sent::order`]): a subscription
    /// answered for a request sent before that no longer holds.
    pub unsubscribed_at: BTreeMap<String, u64>,
}

/// The methods an AHP client may send (for the vocabulary and the model).
pub const AHP_REQUESTS: &[&str] = &[
    "initialize",
    "reconnect",
    "ping",
    "subscribe",
    "createSession",
    "disposeSession",
    "listSessions",
    "createChat",
    "fetchTurns",
];

/// The session id of an `ahp-session:/<id>` or `ahp-chat:/<id>` channel.
pub fn channel_session(channel: &str) -> Option<&str> {
    channel
        .strip_prefix("ahp-session:/")
        .or_else(|| channel.strip_prefix("ahp-chat:/"))
}

impl World {
    /// Opens an AHP connection for `client` (Content-Length framing, as the driver hands the
    /// core each WebSocket message); returns its index.
    pub fn open_ahp(&mut self, client: usize) -> usize {
        let id = self
            .host
            .open_with(self.now, agentwire::Dialect::Ahp, Framing::ContentLength);
        self.push_conn(id, Framing::ContentLength, client, true)
    }

    /// Whether `c` is an AHP connection.
    pub fn is_ahp(&self, c: usize) -> bool {
        self.conns[c].ahp.is_some()
    }

    /// The model learns what an AHP client sent (before the host reads it).
    pub(super) fn ahp_note_sent(&mut self, c: usize, body: &[u8]) {
        let Some(view) = self.conns[c].ahp.as_mut() else {
            return;
        };
        let (method, params) = match jsonrpc::parse(body) {
            Parsed::Single(Ok(Message::Request { method, params, .. }))
            | Parsed::Single(Ok(Message::Notification { method, params })) => (
                method.into_owned(),
                params
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .unwrap_or(Value::Null),
            ),
            _ => return,
        };
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        if let Some(id) = params["clientId"].as_str() {
            if matches!(method.as_str(), "initialize" | "reconnect") {
                view.client_ids.insert(id.to_owned());
            }
        }
        match method.as_str() {
            "initialize" => view
                .requested
                .extend(strings(&params["initialSubscriptions"])),
            "reconnect" => view.requested.extend(strings(&params["subscriptions"])),
            "subscribe" => {
                if let Some(ch) = params["channel"].as_str() {
                    view.requested.insert(ch.to_owned());
                }
            }
            "unsubscribe" => {
                // Envelopes already queued may still arrive; nothing more is owed.
                if let Some(ch) = params["channel"].as_str() {
                    view.tracked.remove(ch);
                    view.turns.remove(ch);
                    view.unsubscribed_at.insert(ch.to_owned(), self.bodies_sent);
                }
            }
            _ => {}
        }
    }

    /// A session was deleted (any dialect): its channels are gone, so nothing more is owed
    /// on them (a session created again under the same id starts unsubscribed).
    pub(super) fn ahp_session_gone(&mut self, session: &str) {
        let channels = [
            format!("ahp-session:/{session}"),
            format!("ahp-chat:/{session}"),
        ];
        for conn in &mut self.conns {
            if let Some(view) = conn.ahp.as_mut() {
                for ch in &channels {
                    view.tracked.remove(ch);
                    view.turns.remove(ch);
                }
            }
        }
    }

    /// A notification from the host on AHP connection `c`.
    pub(super) fn receive_ahp_notification(
        &mut self,
        c: usize,
        method: &str,
        value: &Value,
    ) -> Check {
        match method {
            "action" => self.receive_envelope(c, &value["params"], false),
            "root/sessionAdded" | "root/sessionRemoved" | "root/sessionSummaryChanged" => {
                let requested = self.conns[c]
                    .ahp
                    .as_ref()
                    .is_some_and(|v| v.requested.contains("ahp-root://"));
                ensure!(
                    requested || !self.conns[c].modelled(),
                    "c{c}: {method} without having subscribed to ahp-root://"
                );
                Ok(())
            }
            other => Err(format!(
                "c{c}: unexpected AHP notification {other}: {value}"
            )),
        }
    }

    /// One envelope received by `c`, live or (`replayed`) in a `reconnect` result.
    fn receive_envelope(&mut self, c: usize, envelope: &Value, replayed: bool) -> Check {
        let channel = envelope["channel"].as_str().unwrap_or("").to_owned();
        let seq = envelope["serverSeq"]
            .as_u64()
            .ok_or_else(|| format!("c{c}: envelope without a serverSeq: {envelope}"))?;
        let ty = envelope["action"]["type"].as_str().unwrap_or("").to_owned();
        let modelled = self.conns[c].modelled();
        let Some(view) = self.conns[c].ahp.as_mut() else {
            return Err(format!("c{c}: an AHP envelope on a non-AHP connection"));
        };
        view.last_seen = view.last_seen.max(seq);
        if envelope.get("rejectionReason").is_some() {
            ensure!(
                !replayed,
                "c{c}: a reconnect replay holds a rejection: {envelope}"
            );
            let client = envelope["origin"]["clientId"].as_str().unwrap_or("");
            ensure!(
                !modelled || view.client_ids.contains(client),
                "c{c}: received the rejection of client {client:?}'s action (a rejection goes \
                 to its sender alone; this connection is {:?}): {envelope}",
                view.client_ids
            );
            ensure!(
                envelope["rejectionReason"]
                    .as_str()
                    .is_some_and(|r| !r.is_empty()),
                "c{c}: a rejection without a reason: {envelope}"
            );
            return Ok(());
        }
        self.stats.actions += 1;
        ensure!(
            !modelled || view.requested.contains(&channel),
            "c{c}: {ty} (serverSeq {seq}) on {channel}, which this connection never subscribed \
             to"
        );
        if !replayed {
            ensure!(
                seq > view.last_live,
                "c{c}: {ty} on {channel} has serverSeq {seq}, not above the previous envelope's \
                 {} (envelopes out of order)",
                view.last_live
            );
            view.last_live = seq;
        }
        view.received
            .entry(channel.clone())
            .or_default()
            .insert(seq);
        if ty == "chat/inputRequested" {
            // An elicitation only AHP clients were shown (it is ephemeral: no log has it).
            if let (Some(session), Some(rid)) = (
                channel_session(&channel),
                envelope["action"]["request"]["id"].as_str(),
            ) {
                self.note_event(
                    session,
                    &json!({"id": format!("ahp-input-{rid}"), "type": "elicitation.requested",
                            "data": {"requestId": rid}}),
                );
            }
        }
        let Some(view) = self.conns[c].ahp.as_mut() else {
            return Ok(());
        };
        // The turn lifecycle of a chat.
        if channel.starts_with("ahp-chat:/") && view.tracked.contains_key(&channel) {
            let turn = envelope["action"]["turnId"].as_str().map(str::to_owned);
            let state = view
                .turns
                .entry(channel.clone())
                .or_insert(TurnState::Unknown);
            match (ty.as_str(), turn) {
                ("chat/turnStarted", Some(t)) => {
                    if let TurnState::Active(active) = &*state {
                        return Err(format!(
                            "c{c}: turn {t} started on {channel} (serverSeq {seq}) while turn \
                             {active} is in progress"
                        ));
                    }
                    *state = TurnState::Active(t);
                }
                ("chat/turnComplete" | "chat/turnCancelled" | "chat/error", Some(t)) => {
                    if let TurnState::Active(active) = &*state {
                        ensure!(
                            *active == t,
                            "c{c}: {ty} for turn {t} on {channel} (serverSeq {seq}) while turn \
                             {active} is the one in progress"
                        );
                    }
                    *state = TurnState::Idle;
                }
                (_, Some(t)) => {
                    if let TurnState::Active(active) = &*state {
                        ensure!(
                            *active == t,
                            "c{c}: {ty} for turn {t} on {channel} (serverSeq {seq}) while turn \
                             {active} is the one in progress"
                        );
                    } else if *state == TurnState::Idle {
                        return Err(format!(
                            "c{c}: {ty} for turn {t} on {channel} (serverSeq {seq}) while no \
                             turn is in progress"
                        ));
                    }
                }
                _ => {}
            }
        }
        // One serverSeq, one envelope, whoever received it.
        let what = json!({"channel": channel, "action": envelope["action"],
                          "origin": envelope.get("origin")})
        .to_string();
        match self.ahp_known.get(&seq) {
            Some((_, known)) => ensure!(
                *known == what,
                "c{c}: serverSeq {seq} is {what} here but {known} on another connection"
            ),
            None => {
                self.ahp_known.insert(seq, (channel, what));
            }
        }
        Ok(())
    }

    /// The semantic checks of a successful response to an AHP request.
    pub(super) fn check_ahp_response(&mut self, c: usize, sent: &Sent, result: &Value) -> Check {
        let order = sent.order;
        let snapshot_start = |view: &mut AhpView, snapshot: &Value| {
            let (Some(resource), Some(from)) =
                (snapshot["resource"].as_str(), snapshot["fromSeq"].as_u64())
            else {
                return;
            };
            if view
                .unsubscribed_at
                .get(resource)
                .is_some_and(|t| *t > order)
            {
                return;
            }
            view.tracked.insert(resource.to_owned(), from);
            view.last_seen = view.last_seen.max(from);
            if resource.starts_with("ahp-chat:/") {
                let state = match snapshot["state"]["activeTurn"]["id"].as_str() {
                    Some(t) => TurnState::Active(t.to_owned()),
                    None => TurnState::Idle,
                };
                view.turns.insert(resource.to_owned(), state);
            }
        };
        let Some(view) = self.conns[c].ahp.as_mut() else {
            return Ok(());
        };
        match sent.method.as_str() {
            "initialize" => {
                for s in result["snapshots"].as_array().into_iter().flatten() {
                    snapshot_start(view, s);
                }
                if let Some(seq) = result["serverSeq"].as_u64() {
                    view.last_seen = view.last_seen.max(seq);
                }
            }
            "subscribe" => snapshot_start(view, &result["snapshot"]),
            "reconnect" => {
                let after = sent.params["lastSeenServerSeq"].as_u64().unwrap_or(0);
                let Some(actions) = result["actions"].as_array() else {
                    for s in result["snapshots"].as_array().into_iter().flatten() {
                        snapshot_start(view, s);
                    }
                    self.stats.replays += 1;
                    return Ok(());
                };
                let missing: BTreeSet<&str> = result["missing"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let asked: Vec<String> = sent.params["subscriptions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .filter(|ch| !missing.contains(ch))
                    .map(str::to_owned)
                    .collect();
                for ch in &asked {
                    if view
                        .unsubscribed_at
                        .get(ch)
                        .is_some_and(|t| *t > sent.order)
                    {
                        continue;
                    }
                    view.tracked.insert(ch.clone(), after);
                    if ch.starts_with("ahp-chat:/") {
                        view.turns.insert(ch.clone(), TurnState::Unknown);
                    }
                }
                self.stats.replays += 1;
                let mut previous = after;
                for envelope in actions {
                    let seq = envelope["serverSeq"].as_u64().unwrap_or(0);
                    let channel = envelope["channel"].as_str().unwrap_or("");
                    ensure!(
                        seq > previous,
                        "c{c}: reconnect after serverSeq {after} replays {seq} after {previous} \
                         (not increasing, or not after lastSeenServerSeq)"
                    );
                    ensure!(
                        asked.iter().any(|ch| ch == channel),
                        "c{c}: reconnect replays an envelope on {channel}, which is not one of \
                         the channels asked for ({asked:?})"
                    );
                    previous = seq;
                    self.receive_envelope(c, envelope, true)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// At the end: every open AHP connection received every envelope known on each channel
    /// it is subscribed to, after its subscription's start.
    pub fn ahp_final_checks(&self) -> Check {
        for (c, conn) in self.conns.iter().enumerate() {
            let Some(view) = conn.ahp.as_ref() else {
                continue;
            };
            if !conn.usable() || !conn.modelled() {
                continue;
            }
            for (channel, from) in &view.tracked {
                let got = view.received.get(channel);
                for (seq, (ch, what)) in self.ahp_known.range(from + 1..) {
                    if ch == channel {
                        ensure!(
                            got.is_some_and(|g| g.contains(seq)),
                            "c{c}: subscribed to {channel} from serverSeq {from}, but never \
                             received envelope {seq} ({}), which another connection saw \
                             (an envelope lost)",
                            truncate(what, 200)
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// The chat channel of `session`.
pub fn chat_of(session: &str) -> String {
    format!("ahp-chat:/{session}")
}

/// The session channel of `session`.
pub fn session_of(session: &str) -> String {
    format!("ahp-session:/{session}")
}

/// A `chat/turnStarted` action running `text` as turn `turn`.
pub fn turn_started(turn: &str, text: &str) -> Value {
    json!({"type": "chat/turnStarted", "turnId": turn, "startedAt": "2026-12-04T00:00:00Z",
           "message": {"text": text, "origin": {"kind": "user"}}})
}

impl World {
    /// Queues `initialize` on AHP connection `c` as `client_id`, subscribing `channels`.
    pub fn ahp_initialize(&mut self, c: usize, client_id: &str, channels: &[String]) -> String {
        self.request(
            c,
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"],
                   "clientId": client_id, "initialSubscriptions": channels}),
        )
    }

    /// Queues a `dispatchAction` of `action` on `channel` from AHP connection `c` (with its
    /// next `clientSeq`).
    pub fn ahp_dispatch(&mut self, c: usize, channel: &str, action: Value) {
        let seq = self.conns[c].ahp.as_mut().map_or(0, |v| {
            v.next_client_seq += 1;
            v.next_client_seq
        });
        self.request_raw_id(
            c,
            None,
            "dispatchAction",
            &json!({"channel": channel, "clientSeq": seq, "action": action}),
        );
    }

    /// The action an AHP client dispatches to answer `ask` (`variant` picks the answer), and
    /// the chat channel it goes on; `None` for kinds AHP clients do not answer.
    pub fn ahp_answer(ask: &Ask, variant: u8) -> Option<(String, Value)> {
        let chat = chat_of(&ask.session);
        let call = ask.tool_call_id.clone().unwrap_or_default();
        let response = ["accept", "decline", "cancel"][usize::from(variant % 3)];
        let action = match ask.kind {
            AskKind::Permission => json!({"type": "chat/toolCallConfirmed",
                "turnId": "t", "toolCallId": call, "approved": variant % 3 != 2}),
            AskKind::Tool => json!({"type": "chat/toolCallComplete", "turnId": "t",
                "toolCallId": call, "result": {"success": variant % 3 != 2,
                "pastTenseMessage": "done",
                "content": [{"type": "text", "text": "sunny"}]}}),
            AskKind::Elicitation => json!({"type": "chat/inputCompleted", "turnId": "t",
                "requestId": ask.request_id,
                "response": response,
                "answers": {}}),
            _ => return None,
        };
        Some((chat, action))
    }
}
