//! The state of the in-memory engine: one log stream, the lease bucket, live subscribers and
//! the faults waiting to strike. Plain data with synchronous operations; no clock of its own.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use crate::engine::{
    AppendAck, AppendError, AppendRequest, EngineError, KvEntry, KvError, StoredMessage,
};

/// A fault the next write of one client suffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The request never reaches the engine: nothing is written, the client gets no answer.
    LoseRequest,
    /// The write happens but its acknowledgement is lost: the client gets no answer.
    LoseAck,
}

/// Per-client fault state.
#[derive(Debug, Default)]
pub(crate) struct ClientState {
    pub(crate) partitioned: bool,
    pub(crate) faults: VecDeque<Fault>,
}

/// One KV entry with the time it was written.
#[derive(Debug, Clone)]
struct Lease {
    value: Bytes,
    revision: u64,
    written: Duration,
}

/// A live subscriber's queue.
pub(crate) type LiveQueue = Arc<Mutex<VecDeque<Bytes>>>;

/// Everything the in-memory engine holds.
#[derive(Debug)]
pub(crate) struct World {
    pub(crate) now: Duration,
    pub(crate) lease_ttl: Duration,
    pub(crate) duplicate_window: Duration,
    log: Vec<StoredMessage>,
    last_by_subject: HashMap<String, u64>,
    dedup: HashMap<String, (u64, Duration)>,
    leases: HashMap<String, Lease>,
    kv_revision: u64,
    pub(crate) clients: HashMap<String, ClientState>,
    subscribers: Vec<(String, String, LiveQueue)>,
    pub(crate) live_drops: u32,
}

/// What a fault does to one write.
enum Delivery {
    Lost,
    AckLost,
    Normal,
}

impl World {
    pub(crate) fn new(lease_ttl: Duration, duplicate_window: Duration) -> Self {
        Self {
            now: Duration::ZERO,
            lease_ttl,
            duplicate_window,
            log: Vec::new(),
            last_by_subject: HashMap::new(),
            dedup: HashMap::new(),
            leases: HashMap::new(),
            kv_revision: 0,
            clients: HashMap::new(),
            subscribers: Vec::new(),
            live_drops: 0,
        }
    }

    /// Every stored message, in stream order.
    pub(crate) fn log(&self) -> &[StoredMessage] {
        &self.log
    }

    fn partitioned(&self, client: &str) -> bool {
        self.clients.get(client).is_some_and(|c| c.partitioned)
    }

    /// Takes the fault for `client`'s next write.
    fn delivery(&mut self, client: &str) -> Delivery {
        let state = self.clients.entry(client.to_owned()).or_default();
        if state.partitioned {
            return Delivery::Lost;
        }
        match state.faults.pop_front() {
            Some(Fault::LoseRequest) => Delivery::Lost,
            Some(Fault::LoseAck) => Delivery::AckLost,
            None => Delivery::Normal,
        }
    }

    fn reachable(&self, client: &str) -> Result<(), EngineError> {
        if self.partitioned(client) {
            Err(EngineError("partitioned from the engine".into()))
        } else {
            Ok(())
        }
    }

    pub(crate) fn append(
        &mut self,
        client: &str,
        request: &AppendRequest,
    ) -> Result<AppendAck, AppendError> {
        let delivery = self.delivery(client);
        if let Delivery::Lost = delivery {
            return Err(AppendError::Unknown("request lost".into()));
        }
        let ack = self.apply_append(request);
        match delivery {
            Delivery::AckLost => Err(AppendError::Unknown("acknowledgement lost".into())),
            _ => ack,
        }
    }

    fn apply_append(&mut self, request: &AppendRequest) -> Result<AppendAck, AppendError> {
        let last = self
            .last_by_subject
            .get(&request.subject)
            .copied()
            .unwrap_or(0);
        if last != request.expected_last_subject_seq {
            return Err(AppendError::WrongLastSequence);
        }
        let (now, window) = (self.now, self.duplicate_window);
        self.dedup
            .retain(|_, (_, at)| now.saturating_sub(*at) < window);
        if let Some(&(seq, _)) = self.dedup.get(&request.msg_id) {
            return Ok(AppendAck {
                seq,
                duplicate: true,
            });
        }
        let seq = self.log.len() as u64 + 1;
        self.log.push(StoredMessage {
            seq,
            subject: request.subject.clone(),
            msg_id: Some(request.msg_id.clone()),
            kind: Some(request.kind),
            payload: request.payload.clone(),
        });
        self.last_by_subject.insert(request.subject.clone(), seq);
        self.dedup.insert(request.msg_id.clone(), (seq, now));
        Ok(AppendAck {
            seq,
            duplicate: false,
        })
    }

    pub(crate) fn last_message(
        &self,
        client: &str,
        subject: &str,
    ) -> Result<Option<StoredMessage>, EngineError> {
        self.reachable(client)?;
        Ok(self
            .last_by_subject
            .get(subject)
            .map(|&seq| self.log[seq as usize - 1].clone()))
    }

    pub(crate) fn message_at(
        &self,
        client: &str,
        seq: u64,
    ) -> Result<Option<StoredMessage>, EngineError> {
        self.reachable(client)?;
        Ok(seq
            .checked_sub(1)
            .and_then(|index| self.log.get(index as usize))
            .cloned())
    }

    pub(crate) fn read_subject(
        &self,
        client: &str,
        subject: &str,
        from_seq: u64,
    ) -> Result<Vec<StoredMessage>, EngineError> {
        self.reachable(client)?;
        Ok(self
            .log
            .iter()
            .filter(|m| m.subject == subject && m.seq >= from_seq)
            .cloned()
            .collect())
    }

    fn live_lease(&self, key: &str) -> Option<&Lease> {
        self.leases
            .get(key)
            .filter(|lease| self.now < lease.written + self.lease_ttl)
    }

    pub(crate) fn kv_get(&self, client: &str, key: &str) -> Result<Option<KvEntry>, EngineError> {
        self.reachable(client)?;
        Ok(self.live_lease(key).map(|lease| KvEntry {
            value: lease.value.clone(),
            revision: lease.revision,
        }))
    }

    /// Writes `key` if `expected` (None: absent) matches; applies `client`'s fault.
    pub(crate) fn kv_write(
        &mut self,
        client: &str,
        key: &str,
        value: Bytes,
        expected: Option<u64>,
    ) -> Result<u64, KvError> {
        let delivery = self.delivery(client);
        if let Delivery::Lost = delivery {
            return Err(KvError::Unknown("request lost".into()));
        }
        let current = self.live_lease(key).map(|lease| lease.revision);
        if current != expected {
            return match delivery {
                Delivery::AckLost => Err(KvError::Unknown("acknowledgement lost".into())),
                _ => Err(KvError::RevisionMismatch),
            };
        }
        self.kv_revision += 1;
        let revision = self.kv_revision;
        let written = self.now;
        self.leases.insert(
            key.to_owned(),
            Lease {
                value,
                revision,
                written,
            },
        );
        match delivery {
            Delivery::AckLost => Err(KvError::Unknown("acknowledgement lost".into())),
            _ => Ok(revision),
        }
    }

    pub(crate) fn publish_live(&mut self, client: &str, subject: &str, payload: Bytes) {
        if self.partitioned(client) {
            return;
        }
        for (subscriber, wanted, queue) in &self.subscribers {
            if wanted != subject || self.clients.get(subscriber).is_some_and(|c| c.partitioned) {
                continue;
            }
            if self.live_drops > 0 {
                self.live_drops -= 1;
                continue;
            }
            queue.lock().expect("live queue").push_back(payload.clone());
        }
    }

    pub(crate) fn subscribe_live(
        &mut self,
        client: &str,
        subject: &str,
    ) -> Result<LiveQueue, EngineError> {
        self.reachable(client)?;
        let queue = LiveQueue::default();
        self.subscribers
            .push((client.to_owned(), subject.to_owned(), queue.clone()));
        Ok(queue)
    }
}
