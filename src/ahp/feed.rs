//! The action feed: one `serverSeq` for the whole host, who is subscribed to which channel,
//! and the recent envelopes a reconnecting client can catch up from.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use ahp_types::actions::{ActionEnvelope, ActionOrigin, StateAction};
use serde_json::Value;

use bytes::{Bytes, BytesMut};

use crate::frame::{encode_frame, Framing};
use crate::host::{ConnId, Host};
use crate::jsonrpc;

/// How many envelopes are kept for `reconnect`; a client further behind gets snapshots.
pub(crate) const REPLAY_LIMIT: usize = 4096;

/// The host-wide AHP state ([`Host::dialect_state`]).
#[derive(Debug, Default)]
pub(crate) struct Feed {
    /// The last `serverSeq` given out.
    seq: u64,
    /// The most recent envelopes (at most [`REPLAY_LIMIT`]), oldest first.
    recent: VecDeque<ActionEnvelope>,
    /// The connections subscribed to each channel.
    subscribers: BTreeMap<String, BTreeSet<ConnId>>,
    /// The `serverSeq` at which each session and chat channel began to be published here
    /// (its projection went live): a client that last saw an earlier envelope may have missed
    /// what happened before (on another node, or before a restore), so it takes a snapshot.
    live_since: BTreeMap<String, u64>,
    /// Extra chats' host sessions and the AHP session each belongs to (known while loaded,
    /// so that a deleted one can be announced in its session).
    chats: BTreeMap<String, String>,
}

impl Feed {
    /// The last `serverSeq` given out.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// Gives out the next `serverSeq` for an envelope kept elsewhere (one another node sent,
    /// relayed here: not replayed from here).
    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Channel `channel` is published here from now on.
    pub(crate) fn note_live(&mut self, channel: &str) {
        self.live_since.insert(channel.to_owned(), self.seq);
    }

    /// The envelopes after `after` on `channels`, or `None` when the client must take
    /// snapshots instead: some were already dropped, a channel began to be published here
    /// at or after `after` (the number `after` was given out before: the client's view of
    /// the channel may come from elsewhere), or `after` is beyond this host's sequence (another numbering: a
    /// restarted host's, or another node's).
    pub(crate) fn since(
        &self,
        after: u64,
        channels: &BTreeSet<String>,
    ) -> Option<Vec<ActionEnvelope>> {
        let oldest = self.recent.front().map_or(self.seq + 1, |e| e.server_seq);
        if after + 1 < oldest && after < self.seq {
            return None;
        }
        let began_later = channels
            .iter()
            .any(|c| self.live_since.get(c).is_some_and(|since| *since >= after));
        if after > self.seq || began_later {
            return None;
        }
        Some(
            self.recent
                .iter()
                .filter(|e| e.server_seq > after && channels.contains(&e.channel))
                .cloned()
                .collect(),
        )
    }

    /// Subscribes `conn` to `channel`.
    pub(crate) fn subscribe(&mut self, channel: &str, conn: ConnId) {
        self.subscribers
            .entry(channel.to_owned())
            .or_default()
            .insert(conn);
    }

    /// Unsubscribes `conn` from `channel`.
    pub(crate) fn unsubscribe(&mut self, channel: &str, conn: ConnId) {
        if let Some(conns) = self.subscribers.get_mut(channel) {
            conns.remove(&conn);
            if conns.is_empty() {
                self.subscribers.remove(channel);
            }
        }
    }

    /// Forgets `conn` everywhere (it ended).
    pub(crate) fn forget(&mut self, conn: ConnId) {
        self.subscribers.retain(|_, conns| {
            conns.remove(&conn);
            !conns.is_empty()
        });
    }

    /// Forgets a channel and its subscribers (its session is gone).
    pub(crate) fn drop_channel(&mut self, channel: &str) {
        self.subscribers.remove(channel);
        self.live_since.remove(channel);
    }

    /// Host session `chat` is an extra chat of AHP session `parent`.
    pub(crate) fn note_chat(&mut self, chat: &str, parent: &str) {
        self.chats.insert(chat.to_owned(), parent.to_owned());
    }

    /// Forgets extra chat `chat`; returns its AHP session.
    pub(crate) fn forget_chat(&mut self, chat: &str) -> Option<String> {
        self.chats.remove(chat)
    }

    /// The connections subscribed to `channel`.
    pub(crate) fn subscribers(&self, channel: &str) -> Vec<ConnId> {
        self.subscribers
            .get(channel)
            .map(|c| c.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Numbers `action` and keeps it for replay; returns its envelope.
    fn record(
        &mut self,
        channel: &str,
        action: StateAction,
        origin: Option<ActionOrigin>,
    ) -> ActionEnvelope {
        self.seq += 1;
        let envelope = ActionEnvelope {
            channel: channel.to_owned(),
            action,
            server_seq: self.seq,
            origin,
            rejection_reason: None,
        };
        if self.recent.len() == REPLAY_LIMIT {
            self.recent.pop_front();
        }
        self.recent.push_back(envelope.clone());
        envelope
    }
}

/// The `action` notification body carrying `envelope`.
pub(crate) fn action_body(envelope: &ActionEnvelope) -> Vec<u8> {
    let mut body = Vec::with_capacity(256);
    if jsonrpc::write_notification(&mut body, "action", envelope).is_err() {
        body.clear();
    }
    body
}

/// Publishes `action` on `channel`: numbered, kept for replay and sent to every subscriber.
pub(crate) fn publish(
    host: &mut Host,
    channel: &str,
    action: StateAction,
    origin: Option<ActionOrigin>,
) {
    let Some(feed) = host.dialect_state::<Feed>() else {
        return;
    };
    let envelope = feed.record(channel, action, origin);
    let conns = feed.subscribers(channel);
    if conns.is_empty() {
        return;
    }
    let body = action_body(&envelope);
    // Framed once per framing and queued on every subscriber by reference (never dropped: a
    // reducer cannot skip an action). A subscriber that cannot keep up is closed after the
    // loop: its departure publishes actions of its own (its tools leave), which must not
    // reach the other subscribers before this one.
    let mut framed: Vec<(Framing, Bytes)> = Vec::with_capacity(1);
    let mut overflowed = Vec::new();
    for conn in conns {
        let Some(framing) = host.conn_framing(conn) else {
            continue;
        };
        let frame = match framed.iter().find(|(f, _)| *f == framing) {
            Some((_, frame)) => frame.clone(),
            None => {
                let mut buf = BytesMut::with_capacity(body.len() + 32);
                encode_frame(framing, &body, &mut buf);
                let frame = buf.freeze();
                framed.push((framing, frame.clone()));
                frame
            }
        };
        if !host.try_deliver(conn, frame, false) {
            overflowed.push(conn);
        }
    }
    for conn in overflowed {
        host.fail_slow_consumer(conn);
    }
}

/// Tells `conn` alone that its dispatched `action` was rejected, with `reason` (the envelope
/// carries the current `serverSeq`; nothing is recorded, no other client hears of it).
pub(crate) fn reject(
    host: &mut Host,
    conn: ConnId,
    channel: &str,
    action: StateAction,
    origin: ActionOrigin,
    reason: String,
) {
    let seq = host.dialect_state::<Feed>().map_or(0, |f| f.seq());
    let envelope = ActionEnvelope {
        channel: channel.to_owned(),
        action,
        server_seq: seq,
        origin: Some(origin),
        rejection_reason: Some(reason),
    };
    host.send_body(conn, &action_body(&envelope));
}

/// Sends the notification `method` with `params` to every subscriber of `channel`.
pub(crate) fn notify_subscribers(host: &mut Host, channel: &str, method: &str, params: &Value) {
    let conns = host
        .dialect_state::<Feed>()
        .map(|f| f.subscribers(channel))
        .unwrap_or_default();
    let mut body = Vec::with_capacity(256);
    if jsonrpc::write_notification(&mut body, method, params).is_err() {
        return;
    }
    for conn in conns {
        host.send_body(conn, &body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_types::actions::SessionTitleChangedAction;

    fn title(t: &str) -> StateAction {
        StateAction::SessionTitleChanged(SessionTitleChangedAction { title: t.into() })
    }

    #[test]
    fn replay_gives_what_follows_or_nothing_when_too_old() {
        let mut feed = Feed::default();
        for i in 0..5 {
            feed.record(if i % 2 == 0 { "a" } else { "b" }, title("t"), None);
        }
        let only_a: BTreeSet<String> = ["a".to_owned()].into();
        let seqs: Vec<u64> = feed
            .since(1, &only_a)
            .unwrap()
            .iter()
            .map(|e| e.server_seq)
            .collect();
        assert_eq!(seqs, [3, 5]);
        assert!(feed.since(5, &only_a).unwrap().is_empty());
        for _ in 0..REPLAY_LIMIT {
            feed.record("a", title("t"), None);
        }
        assert!(
            feed.since(1, &only_a).is_none(),
            "dropped envelopes cannot be replayed"
        );
    }

    #[test]
    fn a_channel_published_only_since_later_or_another_numbering_gets_snapshots() {
        let mut feed = Feed::default();
        feed.note_live("a");
        feed.record("a", title("t"), None);
        // Envelopes relayed from another node take numbers, but are not replayed from here.
        let relayed = feed.next_seq();
        // Channel b goes live here (a session taken over) after the client's last envelope.
        feed.note_live("b");
        feed.record("b", title("t"), None);
        let a: BTreeSet<String> = ["a".to_owned()].into();
        let ab: BTreeSet<String> = ["a".to_owned(), "b".to_owned()].into();
        assert_eq!(feed.since(relayed, &a).map(|e| e.len()), Some(0));
        assert!(
            feed.since(relayed - 1, &ab).is_none(),
            "b was not published here when the client last saw an envelope"
        );
        assert!(
            feed.since(relayed, &ab).is_none(),
            "b went live at the client's last"
        );
        assert_eq!(feed.since(relayed + 1, &ab).map(|e| e.len()), Some(0));
        assert!(
            feed.since(feed.seq() + 1, &a).is_none(),
            "another numbering"
        );
        feed.drop_channel("b");
        assert!(
            feed.since(relayed - 1, &ab).is_some(),
            "a dropped channel is forgotten"
        );
    }
}
