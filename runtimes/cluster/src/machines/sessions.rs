//! A node's session log, with no I/O: one [`SessionWorker`] per session it writes, one
//! [`Lookup`] at a time per session it has not loaded, and the *marks* of the events the host
//! persisted, acknowledged in order (a frame carrying an event is released once every mark up
//! to the event's is acknowledged).
//!
//! The runtime feeds it the host's persisted events and lookups ([`Sessions::persist`],
//! [`Sessions::load`]), hands out its work ([`Sessions::poll_work`]: an engine call, a probe
//! of a live owner or a wait, each tagged with the [`Task`] it answers), performs each piece
//! as it likes (several at once: one per task is handed out at a time) and answers it
//! ([`Sessions::handle_reply`], [`Sessions::handle_probe`], [`Sessions::handle_timeout`]).
//! What follows comes out of [`Sessions::poll_event`]; the host side of a lookup's end is
//! [`Found::apply`].
//!
//! One lookup runs at a time per session, and none of a session this node writes (a second
//! claim by the same node would fence its own writer). A lookup asked for while one runs runs
//! after it: the first hands the host's waiting connections over when it ends, and a
//! connection that asked meanwhile waits for the next.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use agentwire::host::{Host, RestoreError};
use agentwire::Timestamp;
use bytes::Bytes;

use super::claim::EngineCall;
use super::lookup::{Lookup, LookupAction, LookupOutcome};
use super::worker::{SessionWorker, WorkerEvent};
use crate::call::Reply;
use crate::layout::Layout;
use crate::record::NodeIdentity;
use crate::writer::SessionWriter;

/// Which of the session log's machines a piece of work is for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Task {
    /// The single writer of a session.
    Worker(String),
    /// The lookup of a session.
    Lookup(String),
}

/// One piece of work for the runtime.
#[derive(Debug, Clone)]
pub enum Op {
    /// Perform this engine call (after its back-off); answer with [`Sessions::handle_reply`].
    Call(EngineCall),
    /// Ask whether this node answers on its link subject; answer with
    /// [`Sessions::handle_probe`].
    Probe(NodeIdentity),
    /// Call [`Sessions::handle_timeout`] at this instant.
    Wait(Instant),
}

/// What the session log hands out.
#[derive(Debug)]
pub enum SessionsEvent {
    /// Every mark up to this one is acknowledged (or refused: it will not be).
    Durable(u64),
    /// The log stored `session`'s event at `seq`.
    Acked {
        /// The session.
        session: String,
        /// Its stream sequence.
        seq: u64,
        /// The event.
        event: Bytes,
    },
    /// The engine refused one of `session`'s events: it lives on in memory only.
    Refused {
        /// The session.
        session: String,
        /// Why.
        why: String,
    },
    /// The node can no longer keep its promise: it must stop.
    Stop(String),
    /// A lookup of `session` ended (or was not needed).
    Found {
        /// The session.
        session: String,
        /// What it found.
        found: Found,
    },
}

/// How a lookup ended.
#[derive(Debug)]
pub enum Found {
    /// The session is not in the log (nor written here): the host may create it.
    Nothing,
    /// Whether the session can be served here could not be told, or it is in the log and
    /// cannot be claimed: why. The host fails the requests that waited for it.
    Failed(String),
    /// A live node owns the session: this node's clients of it are relayed there.
    Owned(NodeIdentity),
    /// This node claimed the session (its writer is in place): restore it from these events.
    Claimed(Vec<Bytes>),
}

impl Found {
    /// Hands the host's connections waiting for `session` over: relayed to a live owner,
    /// served from the restored session (its open turn closed, as node `me` took it over),
    /// answered that it is not here, or (the lookup failed) refused with the reason. A claimed
    /// log that cannot be restored is an error.
    pub fn apply(
        self,
        host: &mut Host,
        now: Timestamp,
        me: &NodeIdentity,
        session: &str,
    ) -> Result<(), String> {
        let mut result = Ok(());
        match self {
            Found::Owned(_) => {
                host.cluster().forward_session_lookup(now, session);
                return Ok(());
            }
            Found::Failed(reason) => {
                host.cluster().fail_session_lookup(now, session, &reason);
                return Ok(());
            }
            Found::Nothing => {}
            Found::Claimed(events) => match host.restore_session(now, session, events) {
                Ok(()) => {
                    let reason = format!(
                        "the turn was interrupted: the node running it stopped and node {} \
                         took the session over",
                        me.node
                    );
                    host.interrupt_open_turn(now, session, &reason);
                }
                Err(RestoreError::Empty) => {}
                Err(e) => result = Err(format!("cannot restore a claimed session: {e}")),
            },
        }
        host.cluster().finish_session_lookup(now, session);
        result
    }
}

/// A node's session log: its workers, lookups and acknowledged marks.
#[derive(Debug)]
pub struct Sessions {
    me: NodeIdentity,
    layout: Layout,
    lease_ttl: Duration,
    piece_limit: usize,
    claims: u64,
    workers: BTreeMap<String, SessionWorker>,
    lookups: BTreeMap<String, Lookup>,
    /// Sessions asked for again while their lookup ran (and whether that lookup may claim).
    again: BTreeMap<String, bool>,
    /// Tasks whose work is out with the runtime.
    out: BTreeSet<Task>,
    /// Of those, the workers of deleted sessions: their answer is dropped (until it comes, a
    /// new worker of the session waits).
    stale: BTreeSet<Task>,
    /// Every mark up to `through` is acknowledged; `above` holds later ones.
    through: u64,
    above: BTreeSet<u64>,
    events: VecDeque<SessionsEvent>,
}

impl Sessions {
    /// The session log of node `me`, its logs named by `layout`, a live owner waited for
    /// about two `lease_ttl`s, events larger than `piece_limit` stored in pieces.
    pub fn new(me: NodeIdentity, layout: Layout, lease_ttl: Duration, piece_limit: usize) -> Self {
        Sessions {
            me,
            layout,
            lease_ttl,
            piece_limit,
            claims: 0,
            workers: BTreeMap::new(),
            lookups: BTreeMap::new(),
            again: BTreeMap::new(),
            out: BTreeSet::new(),
            stale: BTreeSet::new(),
            through: 0,
            above: BTreeSet::new(),
            events: VecDeque::new(),
        }
    }

    /// The host persisted `event` of `session` as mark `mark` (marks count up from 1).
    pub fn persist(&mut self, session: &str, event: Bytes, mark: u64) {
        if !self.workers.contains_key(session) {
            let worker = self.worker(session, None);
            self.workers.insert(session.to_owned(), worker);
        }
        self.workers
            .get_mut(session)
            .expect("a worker")
            .push(event, mark);
    }

    /// The host deleted `session`: its worker goes (the runtime purges its log).
    pub fn deleted(&mut self, session: &str) {
        self.workers.remove(session);
        let task = Task::Worker(session.to_owned());
        if self.out.contains(&task) {
            self.stale.insert(task);
        }
    }

    /// The host asks for `session`, which it has not loaded; `may_claim`: this node's lease
    /// is trusted (a session in the log is not claimed otherwise).
    pub fn load(&mut self, session: &str, may_claim: bool) {
        if self.workers.contains_key(session) {
            // Already written here (e.g. claimed with an empty log): nothing to find.
            self.found(session, Found::Nothing);
        } else if self.lookups.contains_key(session) {
            self.again.insert(session.to_owned(), may_claim);
        } else {
            let subject = self.layout.log_subject(session);
            let lookup = Lookup::new(self.me.clone(), subject, self.lease_ttl, may_claim);
            self.lookups.insert(session.to_owned(), lookup);
        }
    }

    /// The next piece of work not yet handed out; `may_write`: the node's lease holds (a
    /// worker holding its writer appends nothing otherwise).
    pub fn poll_work(&mut self, may_write: bool) -> Option<(Task, Op)> {
        let claims = &mut self.claims;
        for (session, worker) in &mut self.workers {
            let task = Task::Worker(session.clone());
            if self.out.contains(&task) || (worker.holds_writer() && !may_write) {
                continue;
            }
            let next = || {
                *claims += 1;
                *claims
            };
            if let Some(call) = worker.poll_call(next) {
                self.out.insert(task.clone());
                return Some((task, Op::Call(call)));
            }
        }
        for (session, lookup) in &self.lookups {
            let task = Task::Lookup(session.clone());
            if self.out.contains(&task) {
                continue;
            }
            let op = match lookup.poll() {
                LookupAction::Call(call) => Op::Call(call),
                LookupAction::Probe(owner) => Op::Probe(owner),
                LookupAction::WaitUntil(at) => Op::Wait(at),
                LookupAction::Done => continue,
            };
            self.out.insert(task.clone());
            return Some((task, op));
        }
        None
    }

    /// The reply to the engine call handed out for `task`, at `now`.
    pub fn handle_reply(&mut self, task: Task, now: Instant, reply: Reply) {
        if !self.out.remove(&task) || self.stale.remove(&task) {
            return;
        }
        let claims = &mut self.claims;
        let next = || {
            *claims += 1;
            *claims
        };
        match &task {
            Task::Worker(session) => {
                if let Some(worker) = self.workers.get_mut(session) {
                    worker.handle_reply(reply, next);
                    self.worker_events(session);
                }
            }
            Task::Lookup(session) => {
                if let Some(lookup) = self.lookups.get_mut(session) {
                    lookup.handle_reply(now, reply, next);
                    self.lookup_ended(session);
                }
            }
        }
    }

    /// Whether the owner probed for `session`'s lookup answers, at `now`.
    pub fn handle_probe(&mut self, session: &str, now: Instant, answers: bool) {
        if self.out.remove(&Task::Lookup(session.to_owned())) {
            if let Some(lookup) = self.lookups.get_mut(session) {
                lookup.handle_probe(now, answers);
                self.lookup_ended(session);
            }
        }
    }

    /// The wait handed out for `session`'s lookup is over (or `now` came).
    pub fn handle_timeout(&mut self, session: &str, now: Instant) {
        if self.out.remove(&Task::Lookup(session.to_owned())) {
            let claims = &mut self.claims;
            if let Some(lookup) = self.lookups.get_mut(session) {
                lookup.handle_timeout(now, || {
                    *claims += 1;
                    *claims
                });
                self.lookup_ended(session);
            }
        }
    }

    /// What happened since the last call.
    pub fn poll_event(&mut self) -> Option<SessionsEvent> {
        self.events.pop_front()
    }

    /// Whether this node holds `session`'s writer (its claim was acknowledged to it).
    pub fn holds_writer(&self, session: &str) -> bool {
        self.workers
            .get(session)
            .is_some_and(SessionWorker::holds_writer)
    }

    /// Whether appends or lookups are still on their way.
    pub fn is_busy(&self) -> bool {
        !self.lookups.is_empty() || self.workers.values().any(SessionWorker::is_busy)
    }

    fn worker(&self, session: &str, writer: Option<SessionWriter>) -> SessionWorker {
        let subject = self.layout.log_subject(session);
        let (me, limit) = (self.me.clone(), self.piece_limit);
        SessionWorker::new(me, session.to_owned(), subject, writer, limit)
    }

    fn worker_events(&mut self, session: &str) {
        let worker = self.workers.get_mut(session).expect("a worker");
        let events: Vec<WorkerEvent> = std::iter::from_fn(|| worker.poll_event()).collect();
        for event in events {
            let session = session.to_owned();
            match event {
                WorkerEvent::Acked { mark, seq, event } => {
                    let acked = SessionsEvent::Acked {
                        session,
                        seq,
                        event,
                    };
                    self.events.push_back(acked);
                    self.acked(mark);
                }
                WorkerEvent::Refused { mark, why } => {
                    self.events
                        .push_back(SessionsEvent::Refused { session, why });
                    self.acked(mark);
                }
                WorkerEvent::Stop(why) => self.events.push_back(SessionsEvent::Stop(why)),
            }
        }
    }

    fn acked(&mut self, mark: u64) {
        self.above.insert(mark);
        let before = self.through;
        while self.above.remove(&(self.through + 1)) {
            self.through += 1;
        }
        if self.through > before {
            self.events.push_back(SessionsEvent::Durable(self.through));
        }
    }

    fn lookup_ended(&mut self, session: &str) {
        let Some(outcome) = self.lookups.get_mut(session).and_then(Lookup::take_outcome) else {
            return;
        };
        self.lookups.remove(session);
        let found = match outcome {
            LookupOutcome::NotFound => Found::Nothing,
            LookupOutcome::Failed(why) => Found::Failed(why),
            LookupOutcome::Owned(owner) => Found::Owned(owner),
            LookupOutcome::Claimed { writer, events } => {
                // The worker exists before the host can persist anything for the session.
                let writer = writer.with_piece_limit(self.piece_limit);
                let worker = self.worker(session, Some(writer));
                self.workers.insert(session.to_owned(), worker);
                Found::Claimed(events)
            }
        };
        self.found(session, found);
        if let Some(may_claim) = self.again.remove(session) {
            self.load(session, may_claim);
        }
    }

    fn found(&mut self, session: &str, found: Found) {
        let session = session.to_owned();
        self.events
            .push_back(SessionsEvent::Found { session, found });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Call;

    fn sessions() -> Sessions {
        let me = NodeIdentity {
            node: "a".into(),
            incarnation: 1,
        };
        Sessions::new(me, Layout::default(), Duration::from_secs(6), usize::MAX)
    }

    /// Answers the lookup of `session` that its log is empty.
    fn empty_log(sessions: &mut Sessions, session: &str) {
        let (task, op) = sessions.poll_work(true).expect("a lookup");
        assert_eq!(task, Task::Lookup(session.into()));
        assert!(matches!(
            op,
            Op::Call(EngineCall {
                call: Call::LastMessage { .. },
                ..
            })
        ));
        sessions.handle_reply(task, Instant::now(), Reply::Message(Ok(None)));
    }

    fn found(sessions: &mut Sessions) -> Vec<String> {
        std::iter::from_fn(|| sessions.poll_event())
            .filter_map(|e| match e {
                SessionsEvent::Found { session, .. } => Some(session),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_lookup_asked_for_while_one_runs_runs_after_it() {
        let mut s = sessions();
        s.load("s", true);
        // Asked for again (twice) while it runs: not now, but once more after it.
        s.load("s", true);
        s.load("s", true);
        empty_log(&mut s, "s");
        assert_eq!(
            found(&mut s),
            ["s"],
            "the waiting connections are handed over"
        );
        empty_log(&mut s, "s");
        assert_eq!(
            found(&mut s),
            ["s"],
            "those that asked meanwhile get their lookup"
        );
        assert!(s.poll_work(true).is_none(), "nothing runs any more");
        assert!(!s.is_busy());
    }

    #[test]
    fn marks_are_durable_in_order_and_a_written_session_is_not_looked_up() {
        let mut s = sessions();
        s.persist("s", Bytes::from_static(b"{}"), 1);
        let (task, _) = s.poll_work(true).expect("the claim");
        assert_eq!(task, Task::Worker("s".into()));
        assert!(s.poll_work(true).is_none(), "one call per task at a time");
        s.load("s", true);
        assert_eq!(found(&mut s), ["s"]);
        s.acked(2);
        assert!(s.poll_event().is_none(), "mark 1 is not acknowledged yet");
        s.acked(1);
        assert!(matches!(s.poll_event(), Some(SessionsEvent::Durable(2))));
    }

    #[test]
    fn the_answer_to_a_deleted_sessions_worker_is_dropped() {
        let mut s = sessions();
        s.persist("s", Bytes::from_static(b"{}"), 1);
        let (task, _) = s.poll_work(true).expect("the claim");
        s.deleted("s");
        s.persist("s", Bytes::from_static(b"{}"), 2);
        assert!(
            s.poll_work(true).is_none(),
            "the new worker waits for the old answer"
        );
        s.handle_reply(task, Instant::now(), Reply::Message(Ok(None)));
        assert!(s.poll_event().is_none());
        let (task, op) = s.poll_work(true).expect("the new worker's claim");
        assert_eq!(task, Task::Worker("s".into()));
        assert!(matches!(op, Op::Call(_)));
    }
}
