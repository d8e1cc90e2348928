//! The simulated cluster: nodes, clients, the engine and the seeded schedule.

use std::collections::BTreeMap;
use std::time::Duration;

use agentwire::agent::Scenario;
use agentwire::host::{Host, HostConfig};
use agentwire::Timestamp;
use agentwire_cluster::call::execute;
use agentwire_cluster::lease::LeaseConfig;
use agentwire_cluster::machines::keeper::{KeeperAction, LeaseKeeper};
use agentwire_cluster::memory::{Fault, MemoryCluster};
use agentwire_cluster::{Layout, NodeIdentity};

mod clients;
mod gateways;
mod links;

use super::client::{Client, ClientStats};
use super::log::{check_ack, check_owner_history, Ack, LogIndex};
use super::node::{body_of, drop_report, event_id, Counted, Effect, End, SimNode};
use super::now;

/// Steps of the faulty part of a run (the quiet end follows).
pub(crate) const STEPS: usize = 800;
pub(crate) const TTL: Duration = Duration::from_secs(6);
const NODES: usize = 3;
const SESSIONS: usize = 3;
const CLIENTS_PER_SESSION: usize = 2;
const PROMPTS_PER_CLIENT: u32 = 5;
const T0: u64 = 1_795_983_976_952;

const SCENARIO: &str = r#"{
  "rules": [
    {"match": "weather", "steps": [{"tool": "get_weather", "arguments": {"city": "Paris"}},
                                   {"say": "It is sunny in Paris."}]},
    {"match": "slow", "steps": [{"sleep_ms": 400}, {"say": "slept"}]}
  ],
  "default": [{"say": "You said: {prompt}"}]
}"#;

const PROMPTS: &[&str] = &[
    "hi",
    "What is the weather in Paris?",
    "slow one",
    "weather again",
];

/// Declares [`Stats`] (counters of a run, plus the clients' counters) and its sum.
macro_rules! stats {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// What a run did (to show the schedule exercised the protocol).
        #[derive(Default, Debug, Clone, Copy)]
        pub(crate) struct Stats {
            $($(#[$doc])* pub(crate) $name: u64,)*
            pub(crate) client: ClientStats,
        }

        impl Stats {
            pub(crate) fn add(&mut self, o: &Stats) {
                $(self.$name += o.$name;)*
                self.client.add(&o.client);
            }
        }
    };
}

stats! {
    acked,
    takeovers,
    fenced_stops,
    other_stops,
    kills,
    pauses,
    gateways,
    /// Links (gateway to owner) the owner saw lose a message or fall silent.
    links_broken,
    /// Resend requests a link's or group's sender answered (lost messages repaired, or
    /// refused as no longer kept).
    resends,
    /// Relay groups started on owners.
    groups,
    /// Relay groups (owner to gateway) a gateway node saw lose a message, fall silent or
    /// end with the owner's `@?` frame.
    groups_broken,
    /// Openings the owner refused because they named a group that had ended there.
    groups_refused,
    /// Groups an owner ended after three checks without a member.
    groups_idle,
    /// Groups an owner ended because the gateway node's lease was gone.
    groups_peer_gone,
    /// Relayed connections whose link the owner's `@?` frame said broke.
    ended_link_broke,
    /// Relayed connections whose group broke.
    ended_group_broke,
    /// Relayed clients their gateway re-attached (to the same owner after a broken link, or
    /// to the session's new owner after a takeover).
    reattached,
    /// Of those, clients re-attached to their own node's host (it took the session over).
    reattached_here,
    /// `events_dropped` warnings a gateway node's host made for its relayed clients.
    drop_reports,
    /// Group messages carrying a session event that a gateway node dispatched.
    group_events,
    /// Of those, messages handed to two or more of the gateway node's clients.
    shared_events,
    resumes_elsewhere,
    quiet_steps,
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A client-chosen session id that needs escaping in subjects and keys.
fn session_id(index: usize) -> String {
    format!("chat.{index} *>")
}

struct Sim {
    rng: Rng,
    seed: u64,
    cluster: MemoryCluster,
    layout: Layout,
    index: LogIndex,
    names: Vec<String>,
    nodes: Vec<Option<SimNode>>,
    dead_since: Vec<u64>,
    partitioned: Vec<u32>,
    next_incarnation: u64,
    clients: Vec<Client>,
    /// The client's previous node (to count resumes on another node).
    last_node: Vec<Option<usize>>,
    created: Vec<bool>,
    acked: BTreeMap<String, Vec<Ack>>,
    /// Time still to move in small slices (a node paused past its lease).
    drift: Duration,
    /// Steps a resumed node runs its other tasks before its lease task.
    burst: Vec<u32>,
    step: u64,
    stats: Stats,
}

pub(crate) fn run(seed: u64, steps: usize) -> Stats {
    let mut sim = Sim::new(seed);
    for _ in 0..steps {
        sim.step();
        sim.check();
    }
    sim.quiesce();
    sim.final_checks();
    sim.stats
}

impl Sim {
    fn new(seed: u64) -> Self {
        let cluster = MemoryCluster::new(TTL);
        let names: Vec<String> = (0..NODES).map(|i| format!("node {i}.")).collect();
        let mut clients = Vec::new();
        for s in 0..SESSIONS {
            for k in 0..CLIENTS_PER_SESSION {
                clients.push(Client::new(session_id(s), k == 0, PROMPTS_PER_CLIENT));
            }
        }
        let mut sim = Sim {
            rng: Rng(seed),
            seed,
            cluster,
            layout: Layout::default(),
            index: LogIndex::default(),
            nodes: (0..NODES).map(|_| None).collect(),
            dead_since: vec![0; NODES],
            partitioned: vec![0; NODES],
            names,
            next_incarnation: 1,
            last_node: vec![None; clients.len()],
            clients,
            created: vec![false; SESSIONS],
            acked: BTreeMap::new(),
            drift: Duration::ZERO,
            burst: vec![0; NODES],
            step: 0,
            stats: Stats::default(),
        };
        for i in 0..NODES {
            sim.start_node(i);
        }
        while sim
            .nodes
            .iter()
            .any(|n| n.as_ref().is_some_and(|n| !n.keeper.is_serving()))
        {
            for i in 0..NODES {
                sim.lease_step(i);
            }
        }
        sim
    }

    fn trace(&self, what: String) {
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("step {} at {:?}: {what}", self.step, self.cluster.now());
        }
    }

    fn t(&self) -> Timestamp {
        Timestamp::from_millis(T0 + self.cluster.now().as_millis() as u64)
    }

    fn start_node(&mut self, i: usize) {
        let incarnation = self.next_incarnation;
        self.next_incarnation += 1;
        let name = self.names[i].clone();
        let config = HostConfig::with_scenario(Scenario::from_json(SCENARIO).expect("scenario"))
            .with_seed(self.seed.wrapping_mul(1_000_003).wrapping_add(incarnation))
            .with_node_id(Some(name.clone()))
            .with_report_persisted_events(true)
            .with_lookup_unknown_sessions(true);
        let me = NodeIdentity {
            node: name.clone(),
            incarnation,
        };
        let key = self.layout.lease_key(&name);
        let lease = LeaseKeeper::new(LeaseConfig::with_ttl(TTL), key, incarnation);
        let engine = self.cluster.client(&name);
        let at = self.cluster.now();
        self.nodes[i] = Some(SimNode::new(me, engine, Host::new(config), lease, at + TTL));
    }

    fn node(&mut self, i: usize) -> &mut SimNode {
        self.nodes[i].as_mut().expect("a live node")
    }

    fn serving(&self, i: usize) -> bool {
        self.nodes[i]
            .as_ref()
            .is_some_and(|n| n.keeper.is_serving())
    }

    // ----- the schedule -----

    fn step(&mut self) {
        self.step += 1;
        match self.rng.below(100) {
            0..=44 => {
                let i = self.rng.below(NODES as u64) as usize;
                self.node_step(i);
            }
            45..=74 => {
                let c = self.rng.below(self.clients.len() as u64) as usize;
                self.client_step(c, true);
            }
            75..=81 => {
                let by = Duration::from_millis(self.rng.below(700));
                self.cluster.advance(by);
            }
            82 if self.rng.below(2) == 0 => self.pause(),
            84..=86 => {
                let i = self.rng.below(NODES as u64) as usize;
                let fault = [Fault::LoseAck, Fault::LoseRequest][self.rng.below(2) as usize];
                self.cluster.inject(&self.names[i], fault);
            }
            87..=88 => {
                let count = 1 + self.rng.below(2) as u32;
                // Gateway links and relay groups are the only live subjects: a lost message
                // (resend requests included) is sent again or breaks its link or group.
                if link_loss() {
                    self.cluster.drop_live(count);
                }
            }
            89 if self.rng.below(4) == 0 => {
                let serving = (0..NODES).filter(|&i| self.serving(i)).count();
                let i = self.rng.below(NODES as u64) as usize;
                if serving >= 2 && self.serving(i) {
                    self.stats.kills += 1;
                    self.trace(format!("node {i} killed"));
                    self.die(i, None);
                }
            }
            90..=92 => {
                let c = self.rng.below(self.clients.len() as u64) as usize;
                self.move_client(c);
            }
            // A partition loses the node's live messages too: only with link loss.
            93 if self.rng.below(4) == 0 && link_loss() => {
                let i = self.rng.below(NODES as u64) as usize;
                if self.partitioned[i] == 0 {
                    self.partitioned[i] = 3 + self.rng.below(20) as u32;
                    self.trace(format!("node {i} partitioned"));
                    self.cluster.set_partitioned(&self.names[i], true);
                }
            }
            _ => {
                let by = Duration::from_millis(500 + self.rng.below(1500));
                self.cluster.advance(by);
            }
        }
        self.tick();
    }

    /// What happens every step whatever was scheduled: slices of a drift, partitions that
    /// heal, dead nodes that restart.
    fn tick(&mut self) {
        if !self.drift.is_zero() {
            let slice = self.drift.min(Duration::from_millis(300));
            self.drift -= slice;
            self.cluster.advance(slice);
        }
        for i in 0..NODES {
            if self.partitioned[i] > 0 {
                self.partitioned[i] -= 1;
                if self.partitioned[i] == 0 {
                    self.cluster.set_partitioned(&self.names[i], false);
                }
            }
            if self.nodes[i].is_none() && self.step >= self.dead_since[i] + 15 {
                self.start_node(i);
            }
            // The lease task runs on its own timer (`keep_lease`), except in a paused process
            // and, for a few steps, in one just resumed.
            if self.nodes[i].as_ref().is_some_and(|n| n.paused == 0) && self.burst[i] == 0 {
                self.lease_step(i);
            }
        }
    }

    /// Pauses a serving node (SIGSTOP); most of the time long enough for its lease to expire.
    fn pause(&mut self) {
        // Preferably an owner with appends in flight or a turn running.
        let busy: Vec<usize> = (0..NODES)
            .filter(|&i| {
                self.nodes[i].as_ref().is_some_and(|n| {
                    n.keeper.is_serving()
                        && n.paused == 0
                        && (n.sessions.is_busy() || n.host.poll_timeout().is_some())
                })
            })
            .collect();
        let i = match busy.is_empty() {
            true => self.rng.below(NODES as u64) as usize,
            false => busy[self.rng.below(busy.len() as u64) as usize],
        };
        if !self.serving(i) || self.node(i).paused > 0 {
            return;
        }
        self.stats.pauses += 1;
        self.trace(format!("node {i} paused"));
        let steps = 10 + self.rng.below(16) as u32;
        self.node(i).paused = steps;
        if self.rng.below(3) > 0 {
            self.drift += TTL * 2 + Duration::from_secs(2);
        }
    }

    /// A node dies: killed (`None`) or stopped because it could no longer keep its promise.
    /// Its clients' connections end; its lease key lives on until it expires.
    fn die(&mut self, i: usize, reason: Option<String>) {
        let Some(node) = self.nodes[i].take() else {
            return;
        };
        if let Some(reason) = reason {
            if std::env::var_os("SIM_TRACE").is_some() {
                eprintln!("step {}: node {i} stops: {reason}", self.step);
            }
            if reason.contains("fenced") {
                self.stats.fenced_stops += 1;
            } else {
                self.stats.other_stops += 1;
            }
        }
        for end in node.ends.values() {
            if let End::Client(c) = end {
                if self.clients[*c].link.is_some_and(|l| l.node == i) {
                    self.clients[*c].disconnected();
                }
            }
        }
        self.dead_since[i] = self.step;
        self.burst[i] = 0;
    }

    // ----- nodes -----

    /// The lease task (`keep_lease`, the [`LeaseKeeper`]): one call; a lease lost or no
    /// longer valid stops the node. Answers whether it did anything.
    fn lease_step(&mut self, i: usize) -> bool {
        let at = self.cluster.now();
        let Some(node) = self.nodes[i].as_mut() else {
            return false;
        };
        let did = match node.keeper.poll(at) {
            KeeperAction::Call(call) => {
                node.keeper.handle_reply(now(execute(&node.engine, &call)));
                true
            }
            KeeperAction::IdleUntil(_) => false,
            KeeperAction::Stop(why) => {
                self.die(i, Some(why));
                return true;
            }
        };
        if let Err(why) = node.keeper.check(at) {
            self.die(i, Some(why));
            return true;
        }
        did
    }

    fn node_step(&mut self, i: usize) {
        let Some(node) = self.nodes[i].as_mut() else {
            return;
        };
        if node.paused > 0 {
            node.paused -= 1;
            if node.paused == 0 {
                // Resumed: its other tasks may run before its lease task notices.
                self.burst[i] = 4;
                self.trace(format!("node {i} resumed"));
            }
            return;
        }
        if !node.keeper.is_serving() {
            self.lease_step(i);
            return;
        }
        if self.burst[i] == 0 {
            if self.lease_step(i) {
                return;
            }
        } else {
            self.burst[i] -= 1;
        }
        let at = self.cluster.now();
        let t = self.t();
        let node = self.node(i);
        // Every other task of the node that has something to do; one of them runs.
        let mut tasks: Vec<Task> = (0..node.work.len()).map(Task::Work).collect();
        if node.host.poll_timeout().is_some_and(|d| d <= t) {
            tasks.push(Task::Timer);
        }
        if !node.gateways.is_empty() || !node.gateway.is_empty() || !node.owner.is_empty() {
            tasks.push(Task::Links);
        }
        if at >= node.next_sweep {
            tasks.push(Task::Sweep);
        }
        if self.burst[i] > 0 {
            tasks.push(Task::Lease);
        }
        if tasks.is_empty() {
            return;
        }
        let task = tasks.swap_remove(self.rng.below(tasks.len() as u64) as usize);
        match task {
            Task::Work(k) => {
                let owners: Vec<Option<(NodeIdentity, bool)>> = (0..NODES)
                    .map(|j| {
                        self.nodes[j]
                            .as_ref()
                            .map(|n| (n.me.clone(), n.paused == 0 && self.partitioned[j] == 0))
                    })
                    .collect();
                let answers = move |who: &NodeIdentity| {
                    owners.iter().flatten().any(|(me, up)| me == who && *up)
                };
                self.node(i).work_step(k, at, answers);
            }
            Task::Timer => self.node(i).host.handle_timeout(t),
            Task::Links => self.links_step(i),
            Task::Sweep => self.sweep(i),
            Task::Lease => {
                self.lease_step(i);
            }
        }
        self.settle(i);
    }

    /// Whether `who` answers on its link subject (a killed node's subscription is gone; a
    /// paused or partitioned one times out).
    fn answers(&self, who: &NodeIdentity) -> bool {
        (0..NODES).any(|j| {
            self.nodes[j]
                .as_ref()
                .is_some_and(|n| &n.me == who && n.paused == 0 && self.partitioned[j] == 0)
        })
    }

    /// Pumps node `i` and acts on what it asked for, until nothing is left.
    fn settle(&mut self, i: usize) {
        loop {
            self.index.refresh(&self.cluster);
            let t = self.t();
            let Some(node) = self.nodes[i].as_mut() else {
                return;
            };
            node.pump(t, self.cluster.now(), &self.index);
            let effects = std::mem::take(&mut node.effects);
            if effects.is_empty() && !self.run_gateways(i) {
                return;
            }
            self.index.refresh(&self.cluster);
            for effect in effects {
                self.effect(i, effect);
            }
        }
    }

    fn effect(&mut self, i: usize, effect: Effect) {
        match effect {
            Effect::ToClient(c, bytes, fenced) => {
                assert!(
                    !fenced,
                    "invariant 1: a frame node {i} ({:?}) took while fenced reached client {c}: {}\nclaims: {:?}",
                    self.nodes[i].as_ref().map(|n| &n.me),
                    String::from_utf8_lossy(&bytes),
                    self.index.subjects.values().map(|s| &s.claim).collect::<Vec<_>>()
                );
                let client = &mut self.clients[c];
                if let Some(link) = client.link.filter(|l| l.node == i) {
                    let node = self.nodes[i].as_mut().expect("a live node");
                    let body = body_of(&bytes).unwrap_or_default();
                    if drop_report(body) && node.relayed.contains(&link.conn) {
                        // The gateway node's own report of the streaming events its client
                        // lost (with a broken link, or reading slowly), not the owner's.
                        self.stats.drop_reports += 1;
                    } else if let Some(id) = node
                        .relayed
                        .contains(&link.conn)
                        .then(|| event_id(body))
                        .flatten()
                    {
                        // Invariant 5: a relayed client's events were all handed to it by its
                        // gateway.
                        assert!(
                            node.via_gateway.remove(&(link.conn, id.clone())),
                            "invariant 5: relayed client {c} on node {i} got event {id}, which \
                             its gateway did not hand it: {}",
                            String::from_utf8_lossy(&bytes)
                        );
                    }
                    let subject = self.layout.log_subject(&client.session);
                    let session = client.session.clone();
                    if let Some(created) =
                        client.receive(&bytes, &self.index, &subject, &mut self.stats.client)
                    {
                        let s = (0..SESSIONS)
                            .find(|&s| session_id(s) == session)
                            .expect("s");
                        self.created[s] |= created;
                    }
                }
            }
            Effect::ClientClosed(c) => {
                if self.clients[c].link.is_some_and(|l| l.node == i) {
                    self.clients[c].disconnected();
                }
            }
            Effect::Stop(reason) => self.die(i, Some(reason)),
            Effect::TookOver(session) => {
                self.stats.takeovers += 1;
                self.trace(format!("node {i} took {session} over"));
            }
            Effect::Count(Counted::LinkBroken) => self.stats.links_broken += 1,
            Effect::Count(Counted::GroupIdle) => self.stats.groups_idle += 1,
            Effect::Count(Counted::GroupPeerGone) => self.stats.groups_peer_gone += 1,
            Effect::Acked(ack) => {
                check_ack(&self.index, &ack);
                self.stats.acked += 1;
                self.acked.entry(ack.subject.clone()).or_default().push(ack);
            }
        }
    }

    // ----- invariants -----

    fn check(&mut self) {
        self.index.refresh(&self.cluster);
        for node in self.nodes.iter().flatten() {
            for s in 0..SESSIONS {
                let session = session_id(s);
                let subject = self.layout.log_subject(&session);
                let Some(events) = node.host.session_events(&session) else {
                    continue;
                };
                // The session's owner: its claim is the newest and it knows (it holds the
                // writer). A node that has not claimed yet holds nothing durable; a superseded
                // one is fenced; one whose claim is stored but whose acknowledgement was lost
                // finds out when the takeover reads it back, and stops if the log holds
                // another node's creation of the session (`write_session`), having released
                // nothing of it.
                let owner = self.index.subject(&subject).and_then(|s| s.claim.as_ref());
                if owner.is_none_or(|(_, claimant)| claimant != &node.me)
                    || !node.sessions.holds_writer(&session)
                {
                    continue;
                }
                let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
                let what = format!(
                    "node {} (incarnation {})",
                    node.me.node, node.me.incarnation
                );
                check_owner_history(self.index.subject(&subject), &ids, &what);
            }
        }
    }
}

/// Drop live-subject messages (the gateway links and relay groups) and partition nodes (which
/// loses their live messages too): on unless `SIM_LINK_LOSS=0`. Links and groups number their
/// messages and send heartbeats, so a lost one is asked for again; one that is not sent again
/// in time breaks the link or the group, with a reason (the clients' gateways re-attach them).
pub(crate) fn link_loss() -> bool {
    std::env::var_os("SIM_LINK_LOSS").is_none_or(|v| v != "0")
}

/// One task of a node.
enum Task {
    /// A piece of the session log's work.
    Work(usize),
    Timer,
    Links,
    Sweep,
    Lease,
}
