//! One session's single writer, with no I/O: the session's events appended in order, one in
//! flight, claiming the session first when this node has not (a new session: its log is
//! empty). Each append is fenced by the subject's last sequence ([`SessionWriter`]); lost
//! acknowledgements are resolved by the writer's calls, with back-off.

use std::collections::VecDeque;

use bytes::Bytes;

use super::claim::{Claim, ClaimOutcome, ClaimStep, EngineCall};
use crate::call::Reply;
use crate::record::NodeIdentity;
use crate::writer::{SessionWriter, WriterStep};

/// What a session's worker hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerEvent {
    /// The log stored the event pushed with `mark` at `seq`.
    Acked {
        /// The event's mark.
        mark: u64,
        /// Its stream sequence.
        seq: u64,
        /// The event.
        event: Bytes,
    },
    /// The engine refused the event pushed with `mark` (nothing stored; the worker goes on).
    Refused {
        /// The event's mark.
        mark: u64,
        /// Why.
        why: String,
    },
    /// The node can no longer keep its promise for the session: why (nothing follows).
    Stop(String),
}

/// What the worker is doing.
#[derive(Debug)]
enum Step {
    Idle,
    Claiming(Box<Claim>),
    /// Appending the queue's first event; `retries`: calls after the first.
    Appending {
        mark: u64,
        retries: u32,
    },
    Stopped,
}

/// One session's single writer.
#[derive(Debug)]
pub struct SessionWorker {
    me: NodeIdentity,
    session: String,
    subject: String,
    piece_limit: usize,
    writer: Option<SessionWriter>,
    queue: VecDeque<(Bytes, u64)>,
    step: Step,
    /// The call to perform next.
    call: Option<EngineCall>,
    events: VecDeque<WorkerEvent>,
}

impl SessionWorker {
    /// The worker of `session`, logged on `subject`, by node `me`: it claims the session
    /// before its first append (or writes with `writer`, from a claim made already), storing
    /// events larger than `piece_limit` in pieces.
    pub fn new(
        me: NodeIdentity,
        session: String,
        subject: String,
        writer: Option<SessionWriter>,
        piece_limit: usize,
    ) -> Self {
        SessionWorker {
            me,
            session,
            subject,
            piece_limit,
            writer,
            queue: VecDeque::new(),
            step: Step::Idle,
            call: None,
            events: VecDeque::new(),
        }
    }

    /// Queues an event to append; `mark` names it in [`WorkerEvent`]s.
    pub fn push(&mut self, event: Bytes, mark: u64) {
        if !matches!(self.step, Step::Stopped) {
            self.queue.push_back((event, mark));
        }
    }

    /// Whether the worker holds the session's writer (its claim was acknowledged).
    pub fn holds_writer(&self) -> bool {
        self.writer.is_some()
    }

    /// Whether it has engine work to do.
    pub fn is_busy(&self) -> bool {
        !matches!(self.step, Step::Stopped) && (self.call.is_some() || !self.queue.is_empty())
    }

    /// The next call to perform, if any; `next_counter` gives a claim counter when a claim
    /// starts. Answer it with [`SessionWorker::handle_reply`] before polling again.
    pub fn poll_call(&mut self, next_counter: impl FnOnce() -> u64) -> Option<EngineCall> {
        if self.call.is_none() && matches!(self.step, Step::Idle) {
            let (event, mark) = self.queue.front().cloned()?;
            match self.writer.as_mut() {
                None => {
                    let (claim, call) =
                        Claim::start(self.me.clone(), self.subject.clone(), next_counter());
                    self.step = Step::Claiming(Box::new(claim));
                    self.call = Some(call);
                }
                Some(writer) => match writer.begin(event) {
                    Ok(call) => {
                        self.step = Step::Appending { mark, retries: 0 };
                        self.call = Some(EngineCall { call, backoff: 0 });
                    }
                    Err(_) => self.fenced(),
                },
            }
        }
        self.call.clone()
    }

    /// The reply to the call [`SessionWorker::poll_call`] handed out.
    pub fn handle_reply(&mut self, reply: Reply, next_counter: impl FnOnce() -> u64) {
        if self.call.take().is_none() {
            return;
        }
        match std::mem::replace(&mut self.step, Step::Idle) {
            Step::Claiming(mut claim) => match claim.handle_reply(reply, next_counter) {
                ClaimStep::Call(call) => {
                    self.call = Some(call);
                    self.step = Step::Claiming(claim);
                }
                ClaimStep::Done(ClaimOutcome::Claimed { writer, events }) if events.is_empty() => {
                    self.writer = Some(writer.with_piece_limit(self.piece_limit));
                }
                // Another node created the same session first (both lookups found an empty
                // log): this node's history is not the log's. Its events stay
                // unacknowledged, so none reaches a client; the log keeps the other creation.
                ClaimStep::Done(ClaimOutcome::Claimed { events, .. }) => self.stop(format!(
                    "session {} was created on another node too ({} events in its log)",
                    self.session,
                    events.len()
                )),
                // The events stay unacknowledged: nothing of this session reaches a client,
                // and the node cannot keep serving it.
                ClaimStep::Done(outcome) => {
                    self.stop(format!("cannot write session {}: {outcome}", self.session))
                }
            },
            Step::Appending { mark, retries } => {
                let Some(writer) = self.writer.as_mut() else {
                    return;
                };
                match writer.on_reply(reply) {
                    WriterStep::Call(call) => {
                        let retries = retries + 1;
                        self.call = Some(EngineCall {
                            call,
                            backoff: retries,
                        });
                        self.step = Step::Appending { mark, retries };
                    }
                    WriterStep::Acked(seq) => {
                        let (event, _) = self.queue.pop_front().expect("the appended event");
                        self.events
                            .push_back(WorkerEvent::Acked { mark, seq, event });
                    }
                    WriterStep::Refused(why) => {
                        self.queue.pop_front();
                        self.events.push_back(WorkerEvent::Refused { mark, why });
                    }
                    WriterStep::Fenced => self.fenced(),
                }
            }
            step => self.step = step,
        }
    }

    fn fenced(&mut self) {
        self.stop(format!(
            "session {} was taken over by another node (this node is fenced)",
            self.session
        ));
    }

    fn stop(&mut self, why: String) {
        self.step = Step::Stopped;
        self.call = None;
        self.queue.clear();
        self.events.push_back(WorkerEvent::Stop(why));
    }

    /// The next thing that happened.
    pub fn poll_event(&mut self) -> Option<WorkerEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use futures_util::FutureExt;

    use super::*;
    use crate::call::execute;
    use crate::engine::Engine;
    use crate::layout::lease_key;
    use crate::memory::{MemoryCluster, MemoryEngine};

    pub(crate) fn node(name: &str) -> NodeIdentity {
        NodeIdentity {
            node: name.into(),
            incarnation: 1,
        }
    }

    /// Performs `call` on the in-memory `engine` (ready at once).
    pub(crate) fn perform(engine: &MemoryEngine, call: &EngineCall) -> Reply {
        execute(engine, &call.call).now_or_never().expect("ready")
    }

    /// Gives `who` a live lease.
    pub(crate) fn lease(engine: &MemoryEngine, who: &NodeIdentity) {
        let value = Bytes::from(who.incarnation.to_string());
        engine
            .kv_create(&lease_key(&who.node), value)
            .now_or_never()
            .expect("ready")
            .expect("created");
    }

    /// Runs `worker` until it has no call left; what it handed out.
    fn run(engine: &MemoryEngine, worker: &mut SessionWorker) -> Vec<WorkerEvent> {
        let mut counter = 0;
        while let Some(call) = worker.poll_call(|| {
            counter += 1;
            counter
        }) {
            let reply = perform(engine, &call);
            worker.handle_reply(reply, || 99);
        }
        std::iter::from_fn(|| worker.poll_event()).collect()
    }

    fn worker(who: &str) -> SessionWorker {
        SessionWorker::new(node(who), "s".into(), "log.s".into(), None, usize::MAX)
    }

    #[test]
    fn a_new_session_is_claimed_then_its_events_are_appended_in_order() {
        let cluster = MemoryCluster::new(Duration::from_secs(6));
        let engine = cluster.client("a");
        let mut w = worker("a");
        w.push(Bytes::from_static(b"{\"id\":\"e1\"}"), 1);
        w.push(Bytes::from_static(b"{\"id\":\"e2\"}"), 2);
        assert!(w.is_busy() && !w.holds_writer());
        let got = run(&engine, &mut w);
        let marks: Vec<(u64, u64)> = got
            .iter()
            .map(|e| match e {
                WorkerEvent::Acked { mark, seq, .. } => (*mark, *seq),
                other => panic!("{other:?}"),
            })
            .collect();
        // The claim record is message 1.
        assert_eq!(marks, [(1, 2), (2, 3)]);
        assert!(w.holds_writer() && !w.is_busy());
    }

    #[test]
    fn a_worker_fenced_by_another_claim_stops() {
        let cluster = MemoryCluster::new(Duration::from_secs(6));
        let (a, b) = (cluster.client("a"), cluster.client("b"));
        let mut wa = worker("a");
        wa.push(Bytes::from_static(b"{\"id\":\"e1\"}"), 1);
        run(&a, &mut wa);
        // a's lease is gone (it never had one): b claims the session (a lookup's claim).
        let (mut claim, mut call) = Claim::start(node("b"), "log.s".into(), 7);
        loop {
            match claim.handle_reply(perform(&b, &call), || 8) {
                ClaimStep::Call(next) => call = next,
                ClaimStep::Done(ClaimOutcome::Claimed { events, .. }) => {
                    assert_eq!(events.len(), 1, "b restores a's event");
                    break;
                }
                ClaimStep::Done(other) => panic!("{other:?}"),
            }
        }
        wa.push(Bytes::from_static(b"{\"id\":\"e2\"}"), 2);
        let got = run(&a, &mut wa);
        assert!(
            matches!(&got[..], [WorkerEvent::Stop(why)] if why.contains("fenced")),
            "{got:?}"
        );
        assert!(!wa.is_busy());
        wa.push(Bytes::from_static(b"{\"id\":\"e3\"}"), 3);
        assert_eq!(wa.poll_call(|| 1), None, "a stopped worker appends nothing");
    }

    #[test]
    fn a_session_created_on_another_node_too_stops_the_worker() {
        let cluster = MemoryCluster::new(Duration::from_secs(6));
        let (a, b) = (cluster.client("a"), cluster.client("b"));
        let mut wa = worker("a");
        wa.push(Bytes::from_static(b"{\"id\":\"e1\"}"), 1);
        run(&a, &mut wa);
        // b created the same session (its lookup found the log empty too).
        let mut wb = worker("b");
        wb.push(Bytes::from_static(b"{\"id\":\"x1\"}"), 1);
        let got = run(&b, &mut wb);
        assert!(
            matches!(&got[..], [WorkerEvent::Stop(why)] if why.contains("created on another node too (1 events")),
            "{got:?}"
        );
    }

    #[test]
    fn a_session_owned_by_a_live_node_is_not_written() {
        let cluster = MemoryCluster::new(Duration::from_secs(6));
        let (a, b) = (cluster.client("a"), cluster.client("b"));
        lease(&b, &node("b"));
        let mut wb = worker("b");
        wb.push(Bytes::from_static(b"{\"id\":\"e1\"}"), 1);
        run(&b, &mut wb);
        let mut wa = worker("a");
        wa.push(Bytes::from_static(b"{\"id\":\"e2\"}"), 1);
        let got = run(&a, &mut wa);
        assert!(
            matches!(&got[..], [WorkerEvent::Stop(why)] if why.contains("owned by live node b")),
            "{got:?}"
        );
    }
}
