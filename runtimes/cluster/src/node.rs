//! One agentwire node of a cluster: its lease, and the [`SessionLog`] that writes its sessions'
//! events to JetStream through the fenced writer and finds the sessions it has not loaded.
//!
//! * **Lease.** [`ClusterNode::start`] creates the node's lease key (value: its incarnation)
//!   and waits until it holds, then renews it on a task of its own. A node whose lease is lost
//!   shuts down and exits: another node may already have claimed its sessions.
//! * **Appends.** Every persisted event the host reports goes to its session's worker task,
//!   which runs a [`SessionWorker`]: it claims the session the first time (a new session: its
//!   log is empty) and then appends, one append in flight per session, each fenced by the
//!   expected last subject sequence. Acknowledged events release the frames that carry
//!   them ([`HostHandle::durable`]). A writer that finds itself fenced (another node claimed
//!   the session) shuts the node down: nothing it emitted after the fence reached a client.
//! * **Lookups.** A session the host has not loaded is looked for in the log (a [`Lookup`]): if it is there
//!   and its owner's lease is gone (or the log was written by an earlier incarnation of this
//!   node), this node claims it, restores it from the log and closes the turn the dead owner
//!   left open (`Host::interrupt_open_turn`). A session owned by a live node is not served
//!   here (gateways are not built yet): the client gets "session not found".

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use agentwire::host::{ConnId, RestoreError};
use agentwire_driver::{HostHandle, SessionLog};
use bytes::Bytes;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tracing::{error, info, warn};

use crate::drive::{perform, tend_lease};
use crate::engine::Engine;
use crate::lease::{LeaseConfig, NodeLease};
use crate::machines::lookup::{Lookup, LookupAction, LookupOutcome};
use crate::machines::worker::{SessionWorker, WorkerEvent};
use crate::nats::{ConnectError, NatsConfig, NatsEngine};
use crate::record::NodeIdentity;
use crate::shared::{Acks, Command, Lookups, Node};
use crate::sync::lock;
use crate::takeover::sessions_to_sweep;
use crate::writer::SessionWriter;

/// How a node joins its cluster.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// NATS server URLs (`nats://HOST:PORT`).
    pub servers: Vec<String>,
    /// This node's id (`--node-id`).
    pub node_id: String,
    /// Distinguishes restarts of the node id (e.g. the start time in nanoseconds).
    pub incarnation: u64,
    /// Stream, bucket and replication settings; `lease_ttl` is the lease bucket's `max_age`.
    pub nats: NatsConfig,
}

/// How long a node waits for its lease at start (an older incarnation's key lives a TTL).
fn lease_wait(ttl: Duration) -> Duration {
    ttl * 3 + Duration::from_secs(5)
}

/// A running cluster node: connected, holding its lease.
pub struct ClusterNode {
    node: Arc<Node>,
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("node", &self.node.me)
            .finish_non_exhaustive()
    }
}

impl ClusterNode {
    /// Connects (with `connect` options: credentials, TLS), sets the stream and bucket up,
    /// creates this node's lease and waits until it holds, and starts renewing it. Must run
    /// inside a tokio runtime.
    pub async fn start(
        options: NodeOptions,
        connect: async_nats::ConnectOptions,
    ) -> Result<ClusterNode, ConnectError> {
        // A NATS cluster that just started elects its JetStream meta leader first: retry.
        let ready_by = Instant::now() + Duration::from_secs(30);
        let client = NatsEngine::connect_client(&options.servers, connect).await?;
        let engine = loop {
            match NatsEngine::with_client(client.clone(), options.nats.clone()).await {
                Ok(engine) => break engine,
                Err(e) if Instant::now() < ready_by => {
                    warn!(error = %e, "JetStream not ready; retrying");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e),
            }
        };
        if !engine.wait_for_leaders(Duration::from_secs(20)).await {
            warn!("the log stream or the lease bucket has no leader yet");
        }
        let me = NodeIdentity {
            node: options.node_id.clone(),
            incarnation: options.incarnation,
        };
        let layout = options.nats.layout.clone();
        let node = Arc::new(Node {
            engine,
            me,
            layout,
            lease_ttl: options.nats.lease_ttl,
            owners: Mutex::new(HashMap::new()),
            groups_in: Default::default(),
            claims: AtomicU64::new(1),
            links_opened: AtomicU64::new(0),
            lease_ok: AtomicBool::new(false),
            host: OnceLock::new(),
            acks: Mutex::new(Acks::default()),
            stopping: AtomicBool::new(false),
        });
        let ttl = options.nats.lease_ttl;
        let mut lease = NodeLease::new(
            LeaseConfig::with_ttl(ttl),
            node.layout.lease_key(&node.me.node),
            node.me.incarnation,
        );
        let started = Instant::now();
        loop {
            let now = started.elapsed();
            let next = tend_lease(&node.engine, &mut lease, now).await;
            if lease.is_valid(started.elapsed()) {
                break;
            }
            if started.elapsed() > lease_wait(ttl) {
                return Err(ConnectError(format!(
                    "node {} could not take its lease",
                    node.me.node
                )));
            }
            if next.is_none() {
                // Lost before it was ever held (nodes starting together race for the
                // bucket): start over.
                warn!(node = %node.me.node, "lease attempt failed; retrying");
                lease = NodeLease::new(
                    LeaseConfig::with_ttl(ttl),
                    node.layout.lease_key(&node.me.node),
                    node.me.incarnation,
                );
            }
            let wait = next
                .unwrap_or_default()
                .saturating_sub(started.elapsed())
                .clamp(Duration::from_millis(50), Duration::from_millis(500));
            tokio::time::sleep(wait).await;
        }
        node.lease_ok.store(true, Ordering::SeqCst);
        info!(node = %node.me.node, incarnation = node.me.incarnation, "cluster lease taken");
        tokio::spawn(keep_lease(node.clone(), lease, started));
        Ok(ClusterNode { node })
    }

    /// This node's identity.
    pub fn identity(&self) -> &NodeIdentity {
        &self.node.me
    }

    /// The session log for `Driver::with_session_log`.
    pub fn session_log(&self) -> Box<dyn SessionLog> {
        let (tx, rx) = unbounded_channel();
        Box::new(ClusterLog {
            node: self.node.clone(),
            tx,
            rx: Some(rx),
            links: HashMap::new(),
        })
    }
}

/// Renews the lease until it is lost; then the node stops.
async fn keep_lease(node: Arc<Node>, mut lease: NodeLease, started: Instant) {
    loop {
        let next = tend_lease(&node.engine, &mut lease, started.elapsed()).await;
        if !lease.is_valid(started.elapsed()) {
            node.stop("this node's cluster lease expired".into());
            return;
        }
        let Some(at) = next else {
            node.stop("this node's cluster lease was lost".into());
            return;
        };
        // Frames go out only while the lease is valid, whichever task runs first after a
        // pause (SIGSTOP) past it.
        if let (Some(host), Some(until)) = (node.host.get(), lease.valid_until()) {
            host.release_until(started + until);
        }
        let wait = at
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(20));
        tokio::time::sleep(wait).await;
    }
}

/// The [`SessionLog`] of a node.
struct ClusterLog {
    node: Arc<Node>,
    tx: UnboundedSender<Command>,
    rx: Option<UnboundedReceiver<Command>>,
    /// The gateways of relayed sessions, by client connection and session.
    links: HashMap<ConnId, HashMap<String, UnboundedSender<Vec<Bytes>>>>,
}

impl SessionLog for ClusterLog {
    fn start(&mut self, host: HostHandle) {
        let _ = self.node.host.set(host);
        if let Some(rx) = self.rx.take() {
            tokio::spawn(dispatch(self.node.clone(), self.tx.clone(), rx));
            tokio::spawn(crate::link::serve_links(self.node.clone()));
            tokio::spawn(sweep(self.node.clone(), self.tx.clone()));
            tokio::spawn(crate::catalog::keep_catalog(self.node.clone()));
        }
    }

    fn forward(&mut self, conn: ConnId, session: String, frames: Vec<Bytes>) {
        let links = self.links.entry(conn).or_default();
        if let Some(link) = links.get(&session) {
            let _ = link.send(frames);
            return;
        }
        let Some(owner) = self.node.owner_of(&session) else {
            return;
        };
        let (tx, rx) = unbounded_channel();
        let _ = tx.send(frames);
        tokio::spawn(crate::gateway::gateway(
            self.node.clone(),
            Lookups(self.tx.clone()),
            conn,
            session.clone(),
            owner,
            rx,
        ));
        links.insert(session, tx);
    }

    fn forward_closed(&mut self, conn: ConnId) {
        self.links.remove(&conn);
    }

    fn persist(&mut self, session: &str, event: Bytes, mark: u64) {
        let _ = self.tx.send(Command::Persist {
            session: session.to_owned(),
            event,
            mark,
        });
    }

    fn deleted(&mut self, session: &str) {
        let _ = self.tx.send(Command::Deleted {
            session: session.to_owned(),
        });
    }

    fn load(&mut self, session: String) {
        let _ = self.tx.send(Command::Load { session });
    }
}

/// Takes over the sessions of dead nodes without waiting for a client: every lease TTL, each
/// session in the log whose preferred claimant among the live nodes is this node, and which
/// this node does not write, is looked up (claimed if its owner is dead).
async fn sweep(node: Arc<Node>, tx: UnboundedSender<Command>) {
    let me = crate::escape::escape_id(&node.me.node);
    loop {
        tokio::time::sleep(node.lease_ttl).await;
        if !node.lease_ok.load(Ordering::SeqCst) {
            return;
        }
        let (Ok(subjects), Ok(live)) = (
            node.engine.log_subjects(&node.layout.log_filter()).await,
            node.engine.lease_keys().await,
        ) else {
            continue;
        };
        let loaded = |session: &str| {
            node.host
                .get()
                .and_then(|h| h.with_host(|host, _| host.session_events(session).is_some()))
                .unwrap_or(true)
        };
        let subjects = subjects.iter().map(String::as_str);
        for session in sessions_to_sweep(subjects, &node.layout.log_prefix, &me, &live, loaded) {
            let _ = tx.send(Command::Load { session });
        }
    }
}

/// Routes commands to one worker per session, in order.
async fn dispatch(
    node: Arc<Node>,
    tx: UnboundedSender<Command>,
    mut rx: UnboundedReceiver<Command>,
) {
    let mut workers: HashMap<String, UnboundedSender<(Bytes, u64)>> = HashMap::new();
    // Sessions being looked up: one lookup at a time per session, and none of a session this
    // node writes (a second claim by the same node would fence its own writer).
    let mut loading = Loading::default();
    while let Some(command) = rx.recv().await {
        match command {
            Command::Persist {
                session,
                event,
                mark,
            } => {
                let worker = workers
                    .entry(session.clone())
                    .or_insert_with(|| spawn_worker(&node, session, None));
                let _ = worker.send((event, mark));
            }
            Command::Claimed { session, writer } => {
                let worker = spawn_worker(&node, session.clone(), Some(writer));
                workers.insert(session, worker);
            }
            Command::Looked { session } => {
                if loading.finished(&session) {
                    // Asked for again while this lookup ran (after it handed the connections
                    // waiting then, before it ended here): those connections wait for this.
                    tokio::spawn(look_up(node.clone(), tx.clone(), session));
                }
            }
            Command::Deleted { session } => {
                workers.remove(&session);
                let node = node.clone();
                tokio::spawn(async move {
                    let subject = node.layout.log_subject(&session);
                    if let Err(e) = node.engine.purge_subject(&subject).await {
                        warn!(%session, error = %e, "cannot remove a deleted session's log");
                    }
                });
            }
            Command::Load { session } => {
                if workers.contains_key(&session) {
                    // Already written here (e.g. claimed with an empty log): nothing to find.
                    if let Some(host) = node.host.get() {
                        host.with_host(|host, now| {
                            host.cluster().finish_session_lookup(now, &session)
                        });
                    }
                } else if loading.start(&session) {
                    tokio::spawn(look_up(node.clone(), tx.clone(), session));
                }
            }
        }
    }
}

/// The sessions being looked up, one lookup at a time per session, and those asked for again
/// meanwhile.
///
/// A lookup hands the host's connections waiting for the session over (forwarded, restored
/// or not found) *before* it reports here that it ended. A connection that asks for the
/// session in between waits for a lookup of its own: it is started when the running one
/// ends, rather than dropped as a duplicate (which left the connection waiting for ever).
#[derive(Debug, Default)]
struct Loading {
    running: HashSet<String>,
    again: HashSet<String>,
}

impl Loading {
    /// A lookup of `session` is asked for: whether to start one now (none is running).
    fn start(&mut self, session: &str) -> bool {
        if self.running.contains(session) {
            self.again.insert(session.to_owned());
            return false;
        }
        self.running.insert(session.to_owned());
        true
    }

    /// The lookup of `session` ended: whether to start another (it was asked for meanwhile;
    /// it counts as running).
    fn finished(&mut self, session: &str) -> bool {
        if self.again.remove(session) {
            return true;
        }
        self.running.remove(session);
        false
    }
}

fn spawn_worker(
    node: &Arc<Node>,
    session: String,
    writer: Option<SessionWriter>,
) -> UnboundedSender<(Bytes, u64)> {
    let (tx, rx) = unbounded_channel();
    tokio::spawn(write_session(node.clone(), session, writer, rx));
    tx
}

/// One session's single writer: runs its [`SessionWorker`], appending its events in order, one
/// in flight.
async fn write_session(
    node: Arc<Node>,
    session: String,
    writer: Option<SessionWriter>,
    mut rx: UnboundedReceiver<(Bytes, u64)>,
) {
    let subject = node.layout.log_subject(&session);
    let limit = node.engine.max_record_bytes();
    let mut worker = SessionWorker::new(node.me.clone(), session.clone(), subject, writer, limit);
    while let Some((event, mark)) = rx.recv().await {
        worker.push(event, mark);
        while let Some(call) = worker.poll_call(|| node.next_claim()) {
            if worker.holds_writer() && !node.lease_ok.load(Ordering::SeqCst) {
                return;
            }
            let reply = perform(&node.engine, &call).await;
            worker.handle_reply(reply, || node.next_claim());
            while let Some(event) = worker.poll_event() {
                match event {
                    WorkerEvent::Acked { mark, .. } => node.acked(mark),
                    WorkerEvent::Refused { mark, why } => {
                        // Nothing stored (the engine refused it; a large event is stored in
                        // pieces, so not for its size): the event lives on in memory only.
                        error!(%session, %why, "the cluster log refused an event; it is not durable");
                        node.acked(mark);
                    }
                    WorkerEvent::Stop(reason) => {
                        node.stop(reason);
                        return;
                    }
                }
            }
        }
    }
}

/// Finds a session this node has not loaded: claims and restores it when its owner is gone.
async fn look_up(node: Arc<Node>, tx: UnboundedSender<Command>, session: String) {
    look_up_once(&node, &tx, &session).await;
    let _ = tx.send(Command::Looked { session });
}

async fn look_up_once(node: &Arc<Node>, tx: &UnboundedSender<Command>, session: &str) {
    let session = session.to_owned();
    let subject = node.layout.log_subject(&session);
    let may_claim = node.lease_ok.load(Ordering::SeqCst);
    let mut lookup = Lookup::new(node.me.clone(), subject, node.lease_ttl, may_claim);
    let outcome = loop {
        match lookup.poll() {
            LookupAction::Call(call) => {
                let reply = perform(&node.engine, &call).await;
                lookup.handle_reply(Instant::now(), reply, || node.next_claim());
            }
            LookupAction::Probe(owner) => {
                let answers = crate::link::answers(node, &owner.node).await;
                lookup.handle_probe(Instant::now(), answers);
            }
            LookupAction::WaitUntil(until) => {
                tokio::time::sleep_until(until.into()).await;
                lookup.handle_timeout(Instant::now(), || node.next_claim());
            }
            LookupAction::Done => break lookup.take_outcome(),
        }
    };
    let (mut owner, mut found) = (None, None);
    match outcome {
        Some(LookupOutcome::Owned(live)) => owner = Some(live),
        Some(LookupOutcome::Claimed { writer, events }) => {
            found = Some((
                writer.with_piece_limit(node.engine.max_record_bytes()),
                events,
            ))
        }
        Some(LookupOutcome::NotFound(Some(reason))) => {
            info!(%session, %reason, "session not served here")
        }
        Some(LookupOutcome::NotFound(None)) | None => {}
    }
    let Some(host) = node.host.get() else {
        return;
    };
    if let Some(owner) = owner {
        // A gateway: this node's clients of the session are relayed to its owner.
        lock(&node.owners).insert(session.clone(), owner);
        host.with_host(|host, now| host.cluster().forward_session_lookup(now, &session));
        return;
    }
    let Some((writer, events)) = found else {
        host.with_host(|host, now| host.cluster().finish_session_lookup(now, &session));
        return;
    };
    // The worker exists before the host can persist anything for the session.
    let _ = tx.send(Command::Claimed {
        session: session.clone(),
        writer,
    });
    let reason = format!(
        "the turn was interrupted: the node running it stopped and node {} took the session over",
        node.me.node
    );
    let count = events.len();
    host.with_host(|host, now| {
        match host.restore_session(now, &session, events) {
            Ok(()) => {
                let interrupted = host.interrupt_open_turn(now, &session, &reason);
                info!(%session, events = count, interrupted, "session taken over");
            }
            Err(RestoreError::Empty) => {}
            Err(e) => warn!(%session, error = %e, "cannot restore a claimed session"),
        }
        host.cluster().finish_session_lookup(now, &session);
    });
}

#[cfg(test)]
mod tests {
    use super::Loading;

    #[test]
    fn a_lookup_asked_for_while_one_runs_runs_after_it() {
        let mut loading = Loading::default();
        assert!(loading.start("s"));
        // Asked for again (twice) while it runs: not now, but once more after it.
        assert!(!loading.start("s"));
        assert!(!loading.start("s"));
        assert!(loading.start("t"), "other sessions are looked up at once");
        assert!(
            loading.finished("s"),
            "the waiting connections get their lookup"
        );
        assert!(!loading.start("s"), "that lookup runs");
        assert!(loading.finished("s"));
        assert!(!loading.finished("s"));
        assert!(loading.start("s"), "nothing runs any more");
        assert!(!loading.finished("t"));
    }
}
