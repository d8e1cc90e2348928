//! One agentwire node of a cluster: its lease, and the [`SessionLog`] that writes its sessions'
//! events to JetStream through the fenced writer and finds the sessions it has not loaded.
//!
//! * **Lease.** [`ClusterNode::start`] creates the node's lease key (value: its incarnation)
//!   and waits until it holds, then renews it on a task of its own. A node whose lease is lost
//!   shuts down and exits: another node may already have claimed its sessions.
//! * **Session log.** One task runs the node's [`Sessions`] machine, each piece of its work
//!   (an engine call, a probe, a wait) on a task of its own. Every persisted event the host
//!   reports goes to its session's [`crate::machines::worker::SessionWorker`]: it claims the
//!   session the first time (a new session: its log is empty) and then appends, one append
//!   in flight per session, each fenced by the expected last subject sequence. Acknowledged
//!   events release the frames that carry them ([`HostHandle::durable`]). A writer that finds
//!   itself fenced (another node claimed the session) shuts the node down: nothing it
//!   emitted after the fence reached a client.
//! * **Lookups.** A session the host has not loaded is looked for in the log (a
//!   [`crate::machines::lookup::Lookup`]): if it is there and its owner's lease is gone (or
//!   the log was written by an earlier incarnation of this node), this node claims it,
//!   restores it from the log and closes the turn the dead owner left open
//!   ([`crate::machines::sessions::Found::apply`]). A session owned by a live node is relayed
//!   there by a gateway (`gateway.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use agentwire::host::ConnId;
use agentwire_driver::{HostHandle, SessionLog};
use bytes::Bytes;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tracing::{error, info, warn};

use crate::call::Reply;
use crate::drive::{perform, tend_keeper};
use crate::engine::Engine;
use crate::lease::LeaseConfig;
use crate::machines::keeper::LeaseKeeper;
use crate::machines::sessions::{Found, Op, Sessions, SessionsEvent, Task};
use crate::nats::{ConnectError, NatsConfig, NatsEngine};
use crate::record::NodeIdentity;
use crate::shared::{Command, Lookups, Node};
use crate::sync::lock;
use crate::takeover::sessions_to_sweep;

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
        let (links_tx, links_rx) = unbounded_channel();
        let node = Arc::new(Node {
            engine,
            me,
            layout,
            lease_ttl: options.nats.lease_ttl,
            owners: Mutex::new(HashMap::new()),
            links: links_tx.clone(),
            links_opened: AtomicU64::new(0),
            lease_ok: AtomicBool::new(false),
            host: OnceLock::new(),
            stopping: AtomicBool::new(false),
        });
        tokio::spawn(crate::group::serve_gateway_links(
            node.clone(),
            links_tx,
            links_rx,
        ));
        let ttl = options.nats.lease_ttl;
        let key = node.layout.lease_key(&node.me.node);
        let mut keeper = LeaseKeeper::new(LeaseConfig::with_ttl(ttl), key, node.me.incarnation);
        let started = Instant::now();
        loop {
            // Not serving yet, the keeper never stops: a lease lost before it ever held
            // (nodes starting together race for the bucket) is made again.
            let next = tend_keeper(&node.engine, &mut keeper, started.elapsed()).await;
            if keeper.is_serving() {
                break;
            }
            if started.elapsed() > lease_wait(ttl) {
                return Err(ConnectError(format!(
                    "node {} could not take its lease",
                    node.me.node
                )));
            }
            let wait = next
                .unwrap_or_default()
                .saturating_sub(started.elapsed())
                .clamp(Duration::from_millis(50), Duration::from_millis(500));
            tokio::time::sleep(wait).await;
        }
        node.lease_ok.store(true, Ordering::SeqCst);
        info!(node = %node.me.node, incarnation = node.me.incarnation, "cluster lease taken");
        tokio::spawn(keep_lease(node.clone(), keeper, started));
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

/// Renews the lease until it is lost or expires; then the node stops.
async fn keep_lease(node: Arc<Node>, mut keeper: LeaseKeeper, started: Instant) {
    loop {
        let tended = tend_keeper(&node.engine, &mut keeper, started.elapsed()).await;
        // Checked again after the calls, which take time.
        let checked = tended.and_then(|at| keeper.check(started.elapsed()).map(|()| at));
        let at = match checked {
            Ok(at) => at,
            Err(why) => {
                node.stop(why);
                return;
            }
        };
        // Frames go out only while the lease is valid, whichever task runs first after a
        // pause (SIGSTOP) past it.
        if let (Some(host), Some(until)) = (node.host.get(), keeper.valid_until()) {
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
            tokio::spawn(dispatch(self.node.clone(), rx));
            tokio::spawn(crate::owner::serve_links(self.node.clone()));
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

/// Runs the node's session log ([`Sessions`]): the host's commands go in, each piece of its
/// work runs on a task of its own (several sessions at once), and its answers come back.
async fn dispatch(node: Arc<Node>, mut rx: UnboundedReceiver<Command>) {
    let limit = node.engine.max_record_bytes();
    let (me, layout) = (node.me.clone(), node.layout.clone());
    let mut sessions = Sessions::new(me, layout, node.lease_ttl, limit);
    let (done_tx, mut done_rx) = unbounded_channel::<(Task, Done)>();
    loop {
        while let Some(event) = sessions.poll_event() {
            on_event(&node, event);
        }
        while let Some((task, op)) = sessions.poll_work(node.lease_ok.load(Ordering::SeqCst)) {
            tokio::spawn(run_op(node.clone(), task, op, done_tx.clone()));
        }
        tokio::select! {
            command = rx.recv() => match command {
                Some(Command::Persist { session, event, mark }) => {
                    sessions.persist(&session, event, mark)
                }
                Some(Command::Load { session }) => {
                    sessions.load(&session, node.lease_ok.load(Ordering::SeqCst))
                }
                Some(Command::Deleted { session }) => {
                    sessions.deleted(&session);
                    let node = node.clone();
                    tokio::spawn(async move {
                        let subject = node.layout.log_subject(&session);
                        if let Err(e) = node.engine.purge_subject(&subject).await {
                            warn!(%session, error = %e, "cannot remove a deleted session's log");
                        }
                    });
                }
                None => return,
            },
            Some((task, done)) = done_rx.recv() => match (task, done) {
                (task, Done::Reply(reply)) => sessions.handle_reply(task, Instant::now(), reply),
                (Task::Lookup(session), Done::Probe(answers)) => {
                    sessions.handle_probe(&session, Instant::now(), answers)
                }
                (Task::Lookup(session), Done::Timeout) => {
                    sessions.handle_timeout(&session, Instant::now())
                }
                (Task::Worker(_), _) => {}
            },
        }
    }
}

/// How a piece of the session log's work ended.
enum Done {
    Reply(Reply),
    Probe(bool),
    Timeout,
}

/// Performs one piece of the session log's work against NATS.
async fn run_op(node: Arc<Node>, task: Task, op: Op, done: UnboundedSender<(Task, Done)>) {
    let result = match op {
        Op::Call(call) => Done::Reply(perform(&node.engine, &call).await),
        Op::Probe(owner) => Done::Probe(crate::link::answers(&node, &owner.node).await),
        Op::Wait(until) => {
            tokio::time::sleep_until(until.into()).await;
            Done::Timeout
        }
    };
    let _ = done.send((task, result));
}

/// Acts on what the session log handed out.
fn on_event(node: &Arc<Node>, event: SessionsEvent) {
    let host = node.host.get();
    match event {
        SessionsEvent::Durable(mark) => {
            if let Some(host) = host {
                host.durable(mark);
            }
        }
        SessionsEvent::Acked { .. } => {}
        SessionsEvent::Refused { session, why } => {
            // Nothing stored (the engine refused it; a large event is stored in pieces, so
            // not for its size): the event lives on in memory only.
            error!(%session, %why, "the cluster log refused an event; it is not durable");
        }
        // Its writers append nothing more (the lease is no longer trusted).
        SessionsEvent::Stop(reason) => node.stop(reason),
        SessionsEvent::Found { session, found } => {
            match &found {
                Found::Failed(reason) => {
                    warn!(%session, %reason, "session not served here: its waiting requests fail")
                }
                // A gateway: this node's clients of the session are relayed to its owner.
                Found::Owned(owner) => {
                    lock(&node.owners).insert(session.clone(), owner.clone());
                }
                Found::Claimed(events) => {
                    info!(%session, events = events.len(), "session taken over")
                }
                Found::Nothing => {}
            }
            if let Some(host) = host {
                let me = &node.me;
                let applied = host.with_host(|host, now| found.apply(host, now, me, &session));
                if let Some(Err(e)) = applied {
                    warn!(%session, error = %e, "cannot restore a claimed session");
                }
            }
        }
    }
}
