//! Broadcasts that announce the latest state of something (a dialect's "this session was
//! updated" notification), coalesced per connection.
//!
//! Such a notification is queued at most once per connection until that connection's writer
//! takes it: while one is still queued, a newer broadcast for the same key queues nothing
//! and replaces the queued frame's bytes in place, so a reader that falls behind gets one
//! notification per key, at the place of the first one it missed, carrying the latest state
//! at the time it is written. A reader that keeps up gets every broadcast, as without
//! coalescing. A notification that must not be merged (the key was created or deleted)
//! goes through [`Host::end_latest`] first: the frames already queued keep the state they
//! had, and the next broadcast for the key is queued after it.
//!
//! The key names a session. A connection not attached to it gets the notification in its
//! outbox's background lane ([`Outbox::push_latest_background`]): written only once the
//! connection's own frames are out, so other sessions' updates never delay its events, and
//! coalesced for as long as they wait. The lane moves behind the connection's own frames
//! when it attaches to a session and before [`Host::end_latest`]'s notification, so neither
//! the session's own frames nor a created/deleted notification overtakes an update.
//!
//! [`Outbox::push_latest_background`]: crate::host::io::outbox::Outbox::push_latest_background

use std::collections::BTreeMap;

use bytes::BytesMut;
use smallvec::SmallVec;

use crate::frame::{encode_frame, Framing};

use crate::host::io::outbox::{SharedFrame, SharedFrames};
use crate::host::{ConnId, DialectId, Host, OutboxOverflow};

/// The latest frame of every key broadcast with [`Host::broadcast_latest`], per dialect.
#[derive(Default)]
pub(in crate::host) struct LatestFrames {
    /// Per dialect (by [`DialectId`] index), by key.
    by_key: Vec<BTreeMap<String, Latest>>,
    /// Keys held, over every dialect.
    len: usize,
    /// Keys held when the table is next pruned of keys no connection has queued.
    prune_at: usize,
}

/// One key's latest body, framed (at most once per framing) into frames this table holds.
struct Latest {
    body: Vec<u8>,
    /// The body framed in each framing used, by [`Framing::index`].
    framed: [Option<SharedFrame>; Framing::ALL.len()],
    /// The length each framing's frame had before the last [`Latest::set`] (outboxes that
    /// have it queued were charged that much: see [`Outbox::recharge_latest`]).
    ///
    /// [`Outbox::recharge_latest`]: crate::host::io::outbox::Outbox::recharge_latest
    previous_len: [usize; Framing::ALL.len()],
}

fn framed(framing: Framing, body: &[u8]) -> bytes::Bytes {
    let mut buf = BytesMut::with_capacity(body.len() + 32);
    encode_frame(framing, body, &mut buf);
    buf.freeze()
}

impl Latest {
    /// The frame for `framing`, framed and stored on first use.
    fn get(&mut self, framing: Framing, shared: &mut SharedFrames) -> SharedFrame {
        let body = &self.body;
        *self.framed[framing.index()]
            .get_or_insert_with(|| shared.insert_held(framed(framing, body)))
    }

    /// Makes `body` the latest: every entry already queued anywhere now sends it.
    fn set(&mut self, body: Vec<u8>, shared: &mut SharedFrames) {
        self.previous_len = self.framed.map(|f| f.map_or(0, SharedFrame::len));
        for (framing, cell) in Framing::ALL.into_iter().zip(&mut self.framed) {
            if let Some(frame) = cell {
                *frame = shared.replace(*frame, framed(framing, &body));
            }
        }
        self.body = body;
    }

    fn frames(&self) -> impl Iterator<Item = SharedFrame> {
        self.framed.into_iter().flatten()
    }

    /// Whether some outbox still has one of its frames queued.
    fn queued_somewhere(&self, shared: &SharedFrames) -> bool {
        self.frames().any(|frame| shared.holders(frame) > 1)
    }

    fn let_go(self, shared: &mut SharedFrames) {
        for frame in self.frames() {
            shared.let_go(frame);
        }
    }
}

impl LatestFrames {
    /// The entry of `key`, with `body` as its latest content.
    fn set(
        &mut self,
        dialect: DialectId,
        key: &str,
        body: Vec<u8>,
        shared: &mut SharedFrames,
    ) -> &mut Latest {
        if self.by_key.len() <= dialect.index() {
            self.by_key.resize_with(dialect.index() + 1, BTreeMap::new);
        }
        let map = &mut self.by_key[dialect.index()];
        // Looked up by `&str` first: a key seen before costs no allocation.
        if map.contains_key(key) {
            let latest = map.get_mut(key).expect("present");
            latest.set(body, shared);
            return latest;
        }
        self.len += 1;
        map.entry(key.to_owned()).or_insert(Latest {
            body,
            framed: [None; Framing::ALL.len()],
            previous_len: [0; Framing::ALL.len()],
        })
    }

    /// Forgets `key`: its queued frames keep their content, later broadcasts start afresh.
    fn end(&mut self, dialect: DialectId, key: &str, shared: &mut SharedFrames) {
        if let Some(latest) = self
            .by_key
            .get_mut(dialect.index())
            .and_then(|map| map.remove(key))
        {
            self.len -= 1;
            latest.let_go(shared);
        }
    }

    /// Drops the keys no outbox has queued once the table has doubled since the last time
    /// (amortised O(1) per broadcast), so keys that are never ended do not accumulate.
    fn prune(&mut self, shared: &mut SharedFrames) {
        if self.len <= self.prune_at {
            return;
        }
        for map in &mut self.by_key {
            let idle: Vec<String> = map
                .iter()
                .filter(|(_, latest)| !latest.queued_somewhere(shared))
                .map(|(key, _)| key.clone())
                .collect();
            for key in idle {
                if let Some(latest) = map.remove(&key) {
                    self.len -= 1;
                    latest.let_go(shared);
                }
            }
        }
        self.prune_at = 2 * self.len + 64;
    }

    /// Shared frames this table holds (each key's latest, per framing used).
    #[cfg(test)]
    pub(in crate::host) fn held_frames(&self) -> usize {
        self.by_key
            .iter()
            .flat_map(|map| map.values())
            .map(|latest| latest.frames().count())
            .sum()
    }

    /// Keys currently held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }
}

impl Host {
    /// Queues the durable notification `body`, the latest state of `key`, on every open
    /// connection of `dialect`, except on those that still have an earlier notification for
    /// `key` queued: that one now carries `body` (see the module documentation).
    pub(crate) fn broadcast_latest(&mut self, dialect: DialectId, key: &str, body: Vec<u8>) {
        // A relay group counts as attached where one of its members is.
        let groups = self.groups_attached_to(key);
        let Host {
            conns,
            ready,
            latest,
            relays,
            ..
        } = self;
        let mut overflowed: SmallVec<[ConnId; 2]> = SmallVec::new();
        let (all, shared) = conns.iter_mut_and_frames();
        let entry = latest.set(dialect, key, body, shared);
        for (conn, c) in all {
            // A relay group member gets it through its group (for all its members).
            if c.dialect != dialect || relays.group_of(conn).is_some() {
                continue;
            }
            // A connection (closing or not) that has the frame queued now sends the new
            // content: charge its budget the new length instead of the old one.
            let frame = entry.get(c.framing, shared);
            let previous = entry.previous_len[c.framing.index()];
            c.outbox.recharge_latest(frame, previous);
            if c.closing {
                continue;
            }
            // About a session this connection is not attached to: behind its own frames.
            let pushed = if c.sessions.iter().any(|s| s == key) || groups.contains(&conn) {
                c.outbox.push_latest(frame, shared)
            } else {
                c.outbox.push_latest_background(frame, shared)
            };
            match pushed {
                Ok(became_ready) => {
                    if became_ready && !c.in_ready {
                        c.in_ready = true;
                        ready.push_back(conn);
                    }
                }
                Err(OutboxOverflow::DurableDoesNotFit) => overflowed.push(conn),
            }
        }
        latest.prune(conns.frames_mut());
        for conn in overflowed {
            self.fail_slow_consumer(conn);
        }
    }

    /// Ends the coalescing of `key`'s notifications of `dialect`: call it before queuing a
    /// notification about `key` that must come after every earlier one and before every
    /// later one (its creation, its deletion).
    pub(crate) fn end_latest(&mut self, dialect: DialectId, key: &str) {
        self.latest.end(dialect, key, self.conns.frames_mut());
        // What is queued next must not overtake the background lane (it may hold `key`'s
        // last update).
        let (all, _) = self.conns.iter_mut_and_frames();
        for (_, c) in all {
            if c.dialect == dialect {
                c.outbox.promote_background();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Outbox;

    #[test]
    fn a_queued_latest_frame_is_replaced_in_place_and_requeued_once_taken() {
        let mut shared = SharedFrames::default();
        let mut table = LatestFrames::default();
        let mut slow = Outbox::new(10_000);
        let mut fast = Outbox::new(10_000);
        let d = DialectId(0);
        let f = Framing::Ndjson;
        for n in 0..3 {
            let latest = table.set(d, "s", format!("v{n}").into_bytes(), &mut shared);
            let frame = latest.get(f, &mut shared);
            slow.push_latest(frame, &mut shared).unwrap();
            fast.push_latest(frame, &mut shared).unwrap();
            assert_eq!(fast.pop(&mut shared).unwrap(), format!("v{n}\n"));
        }
        assert_eq!(slow.pop(&mut shared).unwrap(), "v2\n");
        assert!(slow.pop(&mut shared).is_none());
        // Ended: the next one is a new frame, queued after whatever came before.
        let frame = table
            .set(d, "s", b"v3".to_vec(), &mut shared)
            .get(f, &mut shared);
        slow.push_latest(frame, &mut shared).unwrap();
        slow.push(bytes::Bytes::from_static(b"barrier\n"), false, &mut shared)
            .unwrap();
        table.end(d, "s", &mut shared);
        let frame = table
            .set(d, "s", b"v4".to_vec(), &mut shared)
            .get(f, &mut shared);
        slow.push_latest(frame, &mut shared).unwrap();
        let mut out = Vec::new();
        slow.pop_into(usize::MAX, &mut out, &mut shared);
        assert_eq!(out, vec!["v3\n", "barrier\n", "v4\n"]);
        // Pruning frees what no outbox holds.
        table.end(d, "s", &mut shared);
        assert_eq!(table.len(), 0);
        assert!(shared.is_empty());
    }

    #[test]
    fn a_replaced_frame_is_charged_its_new_length() {
        let mut shared = SharedFrames::default();
        let mut table = LatestFrames::default();
        let mut slow = Outbox::new(100_000);
        let (d, f) = (DialectId(0), Framing::Ndjson);
        let frame = table
            .set(d, "s", b"v1".to_vec(), &mut shared)
            .get(f, &mut shared);
        slow.push_latest(frame, &mut shared).unwrap();
        assert_eq!(slow.queued_bytes(), 3);
        let latest = table.set(d, "s", b"a longer v2".to_vec(), &mut shared);
        let (frame, previous) = (latest.get(f, &mut shared), latest.previous_len[1]);
        slow.recharge_latest(frame, previous);
        assert_eq!(slow.queued_bytes(), 12, "what it will write");
        assert_eq!(slow.pop(&mut shared).unwrap(), "a longer v2\n");
        assert_eq!(slow.queued_bytes(), 0);
    }

    #[test]
    fn pruning_forgets_only_the_keys_no_outbox_has_queued() {
        let mut shared = SharedFrames::default();
        let mut table = LatestFrames::default();
        let mut slow = Outbox::new(100_000);
        let d = DialectId(0);
        for n in 0..100 {
            let key = format!("s{n}");
            let frame = table
                .set(d, &key, key.clone().into_bytes(), &mut shared)
                .get(Framing::Ndjson, &mut shared);
            // Only the first ten stay queued.
            if n < 10 {
                slow.push_latest(frame, &mut shared).unwrap();
            }
        }
        table.prune(&mut shared);
        assert_eq!(table.len(), 10);
        assert_eq!(shared.len(), 10);
        // A pruned key starts afresh; a kept one is still replaced in place.
        let latest = table.set(d, "s3", b"s3 again".to_vec(), &mut shared);
        let (kept, previous) = (
            latest.get(Framing::Ndjson, &mut shared),
            latest.previous_len[1],
        );
        assert!(slow.has_latest(kept));
        slow.recharge_latest(kept, previous);
        let mut out = Vec::new();
        slow.pop_into(usize::MAX, &mut out, &mut shared);
        assert_eq!(out[3], "s3 again\n");
        assert_eq!(out.len(), 10);
    }
}
