//! What the log stream holds, indexed incrementally (the log is append-only), and the
//! invariants that rest on it alone.

use std::collections::{BTreeMap, HashMap, HashSet};

use agentwire_cluster::memory::MemoryCluster;
use agentwire_cluster::{MessageId, NodeIdentity, RecordKind};
use serde_json::Value;

/// One session's log subject.
#[derive(Default, Debug)]
pub(crate) struct SubjectLog {
    /// Events in log order: (stream sequence, event id, event).
    pub(crate) events: Vec<(u64, String, Value)>,
    /// Event id -> position in `events`.
    pub(crate) by_id: HashMap<String, usize>,
    /// The newest claim record: (stream sequence, claimant).
    pub(crate) claim: Option<(u64, NodeIdentity)>,
    /// Every claimant, oldest first.
    pub(crate) claimants: Vec<NodeIdentity>,
}

impl SubjectLog {
    /// The event ids in log order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &str> {
        self.events.iter().map(|(_, id, _)| id.as_str())
    }
}

/// The log stream, indexed by subject.
#[derive(Default, Debug)]
pub(crate) struct LogIndex {
    indexed: usize,
    pub(crate) subjects: BTreeMap<String, SubjectLog>,
    /// Stream sequence -> (subject, event id) of every stored event.
    pub(crate) at_seq: HashMap<u64, (String, String)>,
}

impl LogIndex {
    /// Indexes the messages stored since the last call, checking that no event is stored
    /// twice on a subject.
    pub(crate) fn refresh(&mut self, cluster: &MemoryCluster) {
        let fresh = cluster.inspect_log(|log| log[self.indexed..].to_vec());
        self.indexed += fresh.len();
        for message in fresh {
            let subject = self.subjects.entry(message.subject.clone()).or_default();
            let id = message.msg_id.as_deref().and_then(MessageId::parse);
            match (message.kind, id) {
                (Some(RecordKind::Claim), Some(MessageId::Claim { claimant, .. })) => {
                    if std::env::var_os("SIM_TRACE").is_some() {
                        eprintln!(
                            "log {}: claim by {claimant:?} on {}",
                            message.seq, message.subject
                        );
                    }
                    subject.claimants.push(claimant.clone());
                    subject.claim = Some((message.seq, claimant));
                }
                (Some(RecordKind::Event), Some(MessageId::Event { .. })) => {
                    let event: Value =
                        serde_json::from_slice(&message.payload).expect("a logged event is JSON");
                    let event_id = event["id"].as_str().expect("an event id").to_owned();
                    let position = subject.events.len();
                    assert!(
                        subject.by_id.insert(event_id.clone(), position).is_none(),
                        "invariant 2: event {event_id} stored twice on {}",
                        message.subject
                    );
                    self.at_seq
                        .insert(message.seq, (message.subject.clone(), event_id.clone()));
                    subject.events.push((message.seq, event_id, event));
                }
                other => panic!("unexpected log message {other:?}"),
            }
        }
    }

    /// The subject's log, if anything was stored on it.
    pub(crate) fn subject(&self, subject: &str) -> Option<&SubjectLog> {
        self.subjects.get(subject)
    }

    /// Whether `me` is fenced for the session logged on `subject`: it claimed the session,
    /// and another node's claim is newer. (A node that has not claimed yet is not fenced: its
    /// first append claims, or fails and releases nothing.)
    pub(crate) fn fenced(&self, subject: &str, me: &NodeIdentity) -> bool {
        self.subject(subject).is_some_and(|s| {
            s.claimants.contains(me) && s.claim.as_ref().is_some_and(|(_, newest)| newest != me)
        })
    }
}

/// An acknowledged append: the event and where the log acknowledged it.
#[derive(Debug, Clone)]
pub(crate) struct Ack {
    pub(crate) subject: String,
    pub(crate) seq: u64,
    pub(crate) event_id: String,
}

/// Invariant 2 for one acknowledgement: the event is in the log, at its sequence, once.
pub(crate) fn check_ack(index: &LogIndex, ack: &Ack) {
    let stored = index.at_seq.get(&ack.seq);
    assert_eq!(
        stored,
        Some(&(ack.subject.clone(), ack.event_id.clone())),
        "invariant 2: acknowledged event {} is not at sequence {} of {}",
        ack.event_id,
        ack.seq,
        ack.subject
    );
}

/// Invariant 2 at the host: the owner's history starts with every logged event of the
/// session, in order, once (a takeover restored everything; nothing is duplicated).
pub(crate) fn check_owner_history(log: Option<&SubjectLog>, host_ids: &[&str], what: &str) {
    let mut seen = HashSet::new();
    for id in host_ids {
        assert!(
            seen.insert(*id),
            "invariant 2: {what} holds event {id} twice"
        );
    }
    let Some(log) = log else {
        return;
    };
    let logged: Vec<&str> = log.ids().collect();
    assert!(
        host_ids.len() >= logged.len() && host_ids[..logged.len()] == logged[..],
        "invariant 2: {what} does not start with the log's {} events\n host: {host_ids:?}\n log:  {logged:?}",
        logged.len()
    );
}
