//! One simulated agentwire node: a `Host` glued to the in-memory engine the way
//! `src/node.rs` (and the driver's `SessionLog` seam, `runtimes/driver/src/shared.rs` and
//! `tasks.rs`) glue it to NATS, one engine call per step instead of tasks:
//!
//! * the node's lease is the runtime's [`LeaseKeeper`] (`keep_lease`), and its session log
//!   the runtime's [`Sessions`] machine (`node.rs`'s `dispatch`): every
//!   `StoreOutput::Persist` gets the next *mark* and goes to its session's single writer,
//!   which claims the session on its first event and then appends, one append in flight;
//!   `ClusterOutput::LoadSession` starts a lookup (claim when the owner is gone, relay when
//!   it is live and answers, wait for its lease while it is live and silent), whose end
//!   [`Found::apply`] hands to the host. The simulation performs one piece of its work per
//!   step, in a seeded order;
//! * frames are taken from the host right after the outputs of the same input were drained,
//!   tagged with the mark of the last persisted event, and written to their client only once
//!   every mark up to it is acknowledged (`HostHandle::durable`, the writer task's
//!   `synced.wait_for`);
//! * `ClusterOutput::Forward` / `ForwardClosed` open and feed a gateway link (`link.rs`): the
//!   client's frames go to the owner on the link's own subject; the owner serves the relayed
//!   connection as a member of the gateway node's relay group (`group.rs`,
//!   `ClusterApi::join_relay_group`), whose one connection carries every member's frames back
//!   on the group's subject. Both travel as live-subject messages of the engine (so live loss
//!   hits them);
//! * a fenced writer, a failed claim or a lost lease stops the node (`Node::stop`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use agentwire::frame::{encode_frame, Framing};
use agentwire::host::{
    ClusterOutput, ConnId, ConnectionOutput, Dialect, Host, Output, RelayFrame, StoreOutput,
};
use agentwire::Timestamp;
use agentwire_cluster::call::execute;
use agentwire_cluster::drive::is_alive;
use agentwire_cluster::machines::gateway::Gateway;
use agentwire_cluster::machines::gateway_links::GatewayLinks;
use agentwire_cluster::machines::group_in::OwnerFrame;
use agentwire_cluster::machines::group_out::GroupEnd;
use agentwire_cluster::machines::keeper::LeaseKeeper;
use agentwire_cluster::machines::live::LiveIo;
use agentwire_cluster::machines::member::MemberEnd;
use agentwire_cluster::machines::owner_links::{OwnerEvent, OwnerLinks};
use agentwire_cluster::machines::sessions::{Found, Op, Sessions, SessionsEvent, Task};
use agentwire_cluster::memory::{MemoryEngine, MemoryLive};
use agentwire_cluster::{Engine, Layout, LiveSubscription, NodeIdentity};
use bytes::{Bytes, BytesMut};
use serde_json::Value;

use super::log::{Ack, LogIndex};
use super::now;
use super::sim::TTL;

/// Who is at the other end of one of the host's connections.
pub(crate) enum End {
    /// A client of this node.
    Client(usize),
    /// A client of another node, relayed over a gateway link and served by the node's
    /// [`OwnerLinks`] as a member of a relay group: it writes nothing of its own (its frames
    /// travel in the group).
    Member,
    /// A relay group connection of the node's [`OwnerLinks`]: its frames go to its gateway
    /// node on the group's subject.
    Group,
    /// The link of the gateway of connection `0` to this node's own host (`link::open_local`:
    /// the node took the session over): its frames are the gateway's owner frames.
    Local(ConnId),
}

/// The gateway side of a relayed connection (`gateway::gateway`): the crate's [`Gateway`]
/// machine, and where its link goes.
pub(crate) struct SimGateway {
    /// The session it relays (each client of the simulation uses one session).
    pub(crate) session: String,
    pub(crate) machine: Gateway,
    pub(crate) link: Option<LinkTo>,
    /// Numbers the gateway's links (each a link of the node's [`GatewayLinks`]).
    pub(crate) links_opened: u64,
}

/// Where a gateway's current link goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkTo {
    /// Another node: the link numbered so in the node's [`GatewayLinks`].
    Remote(u64),
    /// This node's host, over this connection.
    Local(ConnId),
}

/// A frame taken from the host, waiting for its mark to be acknowledged.
pub(crate) struct Held {
    mark: u64,
    frame: Bytes,
    /// Taken while this node was fenced for the session the frame concerns.
    pub(crate) fenced: bool,
}

/// Something the node's step asks the simulation to do.
pub(crate) enum Effect {
    /// Bytes for client `0`.
    ToClient(usize, Bytes, bool),
    /// The connection of client `0` ended.
    ClientClosed(usize),
    /// The node can no longer keep its promise.
    Stop(String),
    /// The log acknowledged an event.
    Acked(Ack),
    /// The node claimed a session a dead owner left.
    TookOver(String),
    /// Something the owner side did, to count.
    Count(Counted),
}

/// What the owner side did that the simulation counts.
pub(crate) enum Counted {
    LinkBroken,
    GroupIdle,
    GroupPeerGone,
}

/// One node's process (gone once killed or stopped; a restart is a new `SimNode`).
pub(crate) struct SimNode {
    pub(crate) me: NodeIdentity,
    pub(crate) engine: MemoryEngine,
    pub(crate) layout: Layout,
    pub(crate) host: Host,
    /// The node's lease (`keep_lease`'s [`LeaseKeeper`]).
    pub(crate) keeper: LeaseKeeper,
    pub(crate) paused: u32,
    mark: u64,
    /// Every mark up to this one is acknowledged.
    durable: u64,
    /// The session log: workers, lookups, acknowledged marks.
    pub(crate) sessions: Sessions,
    /// Its work handed out and not yet performed (one piece runs per step).
    pub(crate) work: Vec<(Task, Op)>,
    pub(crate) held: BTreeMap<ConnId, VecDeque<Held>>,
    pub(crate) closing: BTreeSet<ConnId>,
    pub(crate) ends: BTreeMap<ConnId, End>,
    pub(crate) gateways: BTreeMap<ConnId, SimGateway>,
    /// The gateway node's side of the links and relay groups to owners (`group.rs`'s task),
    /// its links named by connection and number.
    pub(crate) gateway: GatewayLinks<(ConnId, u64)>,
    /// The owner's side of the links and relay groups this node serves (`owner.rs`'s task).
    pub(crate) owner: OwnerLinks<ConnId>,
    /// The live subjects `owner` and `gateway` subscribed.
    pub(crate) subs: BTreeMap<String, MemoryLive>,
    /// The session events each relay group carried (invariant 5: each once).
    pub(crate) carried: BTreeMap<String, BTreeSet<String>>,
    /// Connections this node relays (forwarded once, they stay forwarded).
    pub(crate) relayed: BTreeSet<ConnId>,
    /// (relayed connection, event id) handed to it by its gateway and not yet seen by
    /// its client (invariant 5).
    pub(crate) via_gateway: BTreeSet<(ConnId, String)>,
    /// Live owners found by lookups, for the gateways.
    pub(crate) owners: BTreeMap<String, NodeIdentity>,
    /// (connection, request id) -> the session the request named.
    requests: BTreeMap<(u64, String), String>,
    pub(crate) next_sweep: Duration,
    /// The sweep found these sessions to look up (`Command::Load` from `sweep`).
    pub(crate) effects: Vec<Effect>,
}

impl SimNode {
    pub(crate) fn new(
        me: NodeIdentity,
        engine: MemoryEngine,
        host: Host,
        keeper: LeaseKeeper,
        at: Duration,
    ) -> Self {
        SimNode {
            gateway: GatewayLinks::new(Layout::default(), me.clone(), MAX_FRAME),
            sessions: Sessions::new(me.clone(), Layout::default(), TTL, usize::MAX),
            me,
            engine,
            layout: Layout::default(),
            host,
            keeper,
            paused: 0,
            mark: 0,
            durable: 0,
            work: Vec::new(),
            held: BTreeMap::new(),
            closing: BTreeSet::new(),
            ends: BTreeMap::new(),
            gateways: BTreeMap::new(),
            owner: OwnerLinks::new(Layout::default(), TTL / 2, MAX_FRAME),
            subs: BTreeMap::new(),
            carried: BTreeMap::new(),
            relayed: BTreeSet::new(),
            via_gateway: BTreeSet::new(),
            owners: BTreeMap::new(),
            requests: BTreeMap::new(),
            next_sweep: at,
            effects: Vec::new(),
        }
    }

    /// Bytes from a client (or a link) into the host; requests are remembered with the
    /// session they name, to tell later which session a response concerns.
    pub(crate) fn feed(&mut self, t: Timestamp, conn: ConnId, bytes: &[u8]) {
        if let Some(body) = body_of(bytes) {
            if let Ok(message) = serde_json::from_slice::<Value>(body) {
                if let (Some(_), Some(session)) = (
                    message["method"].as_str(),
                    message["params"]["sessionId"].as_str(),
                ) {
                    if !message["id"].is_null() {
                        let key = (conn.as_u64(), message["id"].to_string());
                        self.requests.insert(key, session.to_owned());
                    }
                }
            }
        }
        self.host.handle_bytes(t, conn, bytes);
    }

    /// What every call into the host is followed by (`Shared::with_inner` + the writer
    /// tasks): act on the outputs, take the frames with the current mark, release those
    /// whose mark is acknowledged, finish closing connections.
    pub(crate) fn pump(&mut self, t: Timestamp, at: Duration, index: &LogIndex) {
        loop {
            let mut again = false;
            while let Some(output) = self.host.poll_output() {
                again |= self.output(output);
            }
            if self.session_events(t) {
                // The host's outputs first: frames are tagged with the mark after them.
                continue;
            }
            while self.host.poll_ready().is_some() {}
            let conns: Vec<ConnId> = self.ends.keys().copied().collect();
            for conn in conns {
                while let Some(frame) = self.host.poll_transmit(conn) {
                    if let Some(End::Member) = self.ends.get(&conn) {
                        // Invariant 5: a member's frames travel in its group; one written to the
                        // member itself would be lost (the node drains it into a sink). Only a
                        // member whose group ended gets its own farewell.
                        assert!(
                            !self.owner.is_member_of_live_group(conn),
                            "invariant 5: {:?} wrote a frame for relay group member {conn:?} of \
                             a live group outside the group: {}",
                            self.me,
                            String::from_utf8_lossy(&frame)
                        );
                        continue;
                    }
                    let fenced = self.concerns(conn, &frame).is_some_and(|s| {
                        self.host.session_events(&s).is_some()
                            && index.fenced(&self.layout.log_subject(&s), &self.me)
                    });
                    if fenced && std::env::var_os("SIM_TRACE").is_some() {
                        eprintln!(
                            "{:?} took while fenced (mark {}, acked {}): {}",
                            self.me,
                            self.mark,
                            self.durable,
                            String::from_utf8_lossy(&frame)
                        );
                    }
                    let mark = self.mark;
                    self.held.entry(conn).or_default().push_back(Held {
                        mark,
                        frame,
                        fenced,
                    });
                }
            }
            self.release(at);
            again |= self.owner_events(t, at);
            let done: Vec<ConnId> = self
                .closing
                .iter()
                .filter(|c| self.held.get(c).is_none_or(VecDeque::is_empty))
                .copied()
                .collect();
            for conn in done {
                self.closing.remove(&conn);
                self.close_end(conn, at);
                self.host.handle_eof(t, conn);
                again = true;
            }
            if !again {
                return;
            }
        }
    }

    /// The session a frame concerns: a notification's `sessionId`, or the session its
    /// request named (a group frame's body for its first member).
    fn concerns(&self, conn: ConnId, frame: &[u8]) -> Option<String> {
        let body = body_of(frame)?;
        let (body, member) = match self.ends.get(&conn) {
            Some(End::Group) => match RelayFrame::parse(body).ok()? {
                RelayFrame::All(body) => (body, None),
                RelayFrame::To { members, body } => (body, members.first().copied()),
                RelayFrame::Ended { .. } | RelayFrame::GroupEnded { .. } => return None,
            },
            _ => (body, Some(conn.as_u64())),
        };
        let message: Value = serde_json::from_slice(body).ok()?;
        if message.get("method").is_some() {
            return message["params"]["sessionId"].as_str().map(str::to_owned);
        }
        self.requests
            .get(&(member?, message["id"].to_string()))
            .cloned()
    }

    /// One output; `true` if it called into the host again.
    fn output(&mut self, output: Output) -> bool {
        match output {
            Output::Store(StoreOutput::Persist { session, event }) => {
                self.mark += 1;
                self.sessions.persist(&session, event, self.mark);
                false
            }
            Output::Store(StoreOutput::SessionDeleted { .. }) => false,
            Output::Cluster(ClusterOutput::LoadSession { session }) => {
                self.sessions.load(&session, true);
                false
            }
            Output::Cluster(ClusterOutput::Forward {
                conn,
                session,
                frames,
            }) => {
                // One gateway per connection: each client of the simulation uses one session
                // (`ClusterLog::forward`: a gateway for the live owner a lookup found).
                if !self.gateways.contains_key(&conn) {
                    let Some(owner) = self.owners.get(&session).cloned() else {
                        return false;
                    };
                    let machine = Gateway::new(session.clone(), Dialect::CopilotSdk, owner, TTL);
                    let gateway = SimGateway {
                        session: session.clone(),
                        machine,
                        link: None,
                        links_opened: 0,
                    };
                    self.gateways.insert(conn, gateway);
                    self.relayed.insert(conn);
                }
                let gateway = self.gateways.get_mut(&conn).expect("a gateway");
                assert_eq!(gateway.session, session, "one session per simulated client");
                gateway.machine.handle_client_frames(frames);
                false
            }
            Output::Cluster(ClusterOutput::ForwardClosed { conn }) => {
                self.close_gateway(conn);
                true
            }
            Output::Connection(ConnectionOutput::Close { conn, .. }) => {
                // A group the host closes (it fell behind) takes no member any more.
                self.owner.handle_group_closing(conn);
                self.closing.insert(conn);
                false
            }
            Output::Connection(ConnectionOutput::Shutdown { reason }) => {
                self.effects.push(Effect::Stop(reason));
                false
            }
            Output::Effect(effect) => panic!("the simulation's hosts do not ask for {effect:?}"),
        }
    }

    /// Releases held frames whose mark is acknowledged, in order per connection, while the
    /// node's lease is valid (`HostHandle::release_until`).
    fn release(&mut self, at: Duration) {
        if !self.keeper.is_valid(at) {
            return;
        }
        for (conn, queue) in self.held.iter_mut() {
            while queue.front().is_some_and(|h| h.mark <= self.durable) {
                let held = queue.pop_front().expect("front");
                match self.ends.get_mut(conn) {
                    Some(End::Client(c)) => {
                        self.effects
                            .push(Effect::ToClient(*c, held.frame, held.fenced))
                    }
                    Some(End::Group) => {
                        assert!(
                            !held.fenced,
                            "invariant 1: a fenced owner relayed a frame toward a client"
                        );
                        let body = body_of(&held.frame).expect("one frame");
                        let id = self.owner.group_of(*conn).expect("a group's name");
                        if let Some(event) = relayed_event(body) {
                            // Invariant 5: an event crosses once per group, however many of
                            // the gateway node's clients it is for.
                            assert!(
                                self.carried
                                    .entry(id.clone())
                                    .or_default()
                                    .insert(event.clone()),
                                "invariant 5: event {event} crossed twice in relay group {id}"
                            );
                        }
                        self.owner
                            .handle_group_frame(instant(at), *conn, body, usize::MAX);
                    }
                    Some(End::Member) => unreachable!("a member holds nothing"),
                    Some(End::Local(gw)) => {
                        let body = body_of(&held.frame).expect("one frame");
                        let frame = OwnerFrame::from(Bytes::copy_from_slice(body));
                        if let Some(g) = self.gateways.get_mut(gw) {
                            if g.link == Some(LinkTo::Local(*conn)) {
                                g.machine.handle_owner_frame(frame);
                            }
                        }
                    }
                    None => {}
                }
            }
        }
    }

    /// The gateway of `conn` ends (its client is gone, or it ended the relayed connection):
    /// its link closes (its group still names the member until the owner ends it).
    pub(crate) fn close_gateway(&mut self, conn: ConnId) {
        if let Some(mut gateway) = self.gateways.remove(&conn) {
            self.close_link(conn, &mut gateway);
        }
    }

    /// The current link of `gateway` (of connection `conn`) closes.
    pub(crate) fn close_link(&mut self, conn: ConnId, gateway: &mut SimGateway) {
        match gateway.link.take() {
            Some(LinkTo::Remote(n)) => self.gateway.close_link(&(conn, n)),
            Some(LinkTo::Local(local)) if self.ends.contains_key(&local) => {
                self.closing.insert(local);
            }
            Some(LinkTo::Local(_)) | None => {}
        }
    }

    fn close_end(&mut self, conn: ConnId, at: Duration) {
        self.held.remove(&conn);
        // The gateway task ends: its link closes.
        self.close_gateway(conn);
        match self.ends.remove(&conn) {
            Some(End::Client(c)) => self.effects.push(Effect::ClientClosed(c)),
            // Its end travels in its group (`@!`).
            Some(End::Member) => self.owner.handle_member_closed(conn),
            // Its publisher sends its close; its name is refused from now on.
            Some(End::Group) => self.owner.handle_group_closed(instant(at), conn),
            Some(End::Local(gw)) => {
                if let Some(g) = self.gateways.get_mut(&gw) {
                    if g.link == Some(LinkTo::Local(conn)) {
                        g.link = None;
                        g.machine.handle_link_ended(instant(at), None);
                    }
                }
            }
            None => {}
        }
    }

    /// Performs what the owner side of the node's links and groups handed out (`owner.rs`'s
    /// task); `true` if it called into the host.
    pub(crate) fn owner_events(&mut self, t: Timestamp, at: Duration) -> bool {
        let mut called = false;
        while let Some(event) = self.owner.poll_event() {
            match event {
                OwnerEvent::Live(io) => self.live_io(io),
                OwnerEvent::CheckLease(peer) => {
                    let alive = alive(&self.engine, &peer);
                    self.owner.handle_lease(instant(at), &peer, alive);
                }
                OwnerEvent::Deliver { member, body } => {
                    let mut framed = BytesMut::new();
                    encode_frame(Framing::ContentLength, &body, &mut framed);
                    self.feed(t, member, &framed);
                    called = true;
                }
                OwnerEvent::MemberEnded { member, end, .. } => {
                    if let MemberEnd::Broken(why) = &end {
                        self.effects.push(Effect::Count(Counted::LinkBroken));
                        self.host.cluster().relay_member_link_broke(t, member, why);
                    }
                    self.ends.remove(&member);
                    self.held.remove(&member);
                    self.host.handle_eof(t, member);
                    called = true;
                }
                OwnerEvent::GroupEnded { conn, end, .. } => {
                    self.effects.push(Effect::Count(match end {
                        GroupEnd::Idle => Counted::GroupIdle,
                        GroupEnd::PeerGone => Counted::GroupPeerGone,
                    }));
                    self.ends.remove(&conn);
                    self.held.remove(&conn);
                    self.host.handle_eof(t, conn);
                    self.owner.handle_group_closed(instant(at), conn);
                    called = true;
                }
            }
        }
        called
    }

    /// Performs a subscription or publication one side of the node's links asked for.
    pub(crate) fn live_io(&mut self, io: LiveIo) {
        match io {
            LiveIo::Subscribe(subject) => {
                let live = now(self.engine.subscribe_live(&subject)).expect("reachable");
                self.subs.insert(subject, live);
            }
            LiveIo::Unsubscribe(subject) => drop(self.subs.remove(&subject)),
            LiveIo::Publish { subject, message } | LiveIo::AskAgain { subject, message } => {
                now(self.engine.publish_live(&subject, message)).expect("publish")
            }
        }
    }

    /// The owner side's step: the messages of the subjects it subscribed, and the time.
    pub(crate) fn owner_step(&mut self, t: Timestamp, at: Duration) {
        let subjects: Vec<String> = self.subs.keys().cloned().collect();
        for subject in subjects {
            let messages = self
                .subs
                .get_mut(&subject)
                .map(messages)
                .unwrap_or_default();
            for message in messages {
                // Each side takes the subjects it subscribed.
                self.owner.handle_message(instant(at), &subject, &message);
                self.gateway.handle_message(&subject, &message);
            }
        }
        self.owner.handle_timeout(instant(at));
        self.gateway.handle_timeout(instant(at));
        self.owner_events(t, at);
    }

    /// Whether frames, appends or lookups are still on their way.
    pub(crate) fn quiet(&self) -> bool {
        !self.sessions.is_busy()
            && self.closing.is_empty()
            && self.held.values().all(VecDeque::is_empty)
    }

    /// Performs the piece of the session log's work `k` at `at` (as `node.rs`'s `run_op`).
    /// `answers` tells whether a node answers on its link subject.
    pub(crate) fn work_step(
        &mut self,
        k: usize,
        at: Duration,
        answers: impl Fn(&NodeIdentity) -> bool,
    ) {
        let (task, op) = self.work.swap_remove(k);
        let (at, sessions) = (instant(at), &mut self.sessions);
        match (op, &task) {
            (Op::Call(call), _) => {
                sessions.handle_reply(task.clone(), at, now(execute(&self.engine, &call.call)))
            }
            (Op::Probe(owner), Task::Lookup(s)) => sessions.handle_probe(s, at, answers(&owner)),
            (Op::Wait(_), Task::Lookup(s)) => sessions.handle_timeout(s, at),
            (_, Task::Worker(_)) => unreachable!("a worker only calls the engine"),
        }
    }

    /// Acts on what the session log handed out (`node.rs`'s `on_event`); `true` if it called
    /// into the host.
    fn session_events(&mut self, t: Timestamp) -> bool {
        let mut called = false;
        while let Some(event) = self.sessions.poll_event() {
            match event {
                SessionsEvent::Durable(mark) => self.durable = mark,
                SessionsEvent::Acked {
                    session,
                    seq,
                    event,
                } => {
                    let event: Value = serde_json::from_slice(&event).expect("JSON");
                    let event_id = event["id"].as_str().expect("an id").to_owned();
                    let subject = self.layout.log_subject(&session);
                    self.effects.push(Effect::Acked(Ack {
                        subject,
                        seq,
                        event_id,
                    }));
                }
                SessionsEvent::Refused { why, .. } => panic!("the model refused an append: {why}"),
                SessionsEvent::Stop(why) => self.effects.push(Effect::Stop(why)),
                SessionsEvent::Found { session, found } => {
                    match &found {
                        Found::Owned(owner) => {
                            self.owners.insert(session.clone(), owner.clone());
                        }
                        Found::Claimed(_) => self.effects.push(Effect::TookOver(session.clone())),
                        Found::Nothing | Found::Failed(_) => {}
                    }
                    let applied = found.apply(&mut self.host, t, &self.me, &session);
                    applied.expect("a claimed session is restored");
                    called = true;
                }
            }
        }
        while let Some(work) = self.sessions.poll_work(true) {
            self.work.push(work);
        }
        called
    }
}

/// The messages waiting on a live subscription.
pub(crate) fn messages(live: &mut MemoryLive) -> Vec<Bytes> {
    std::iter::from_fn(|| now(live.next(Duration::ZERO))).collect()
}

/// Whether `who`'s lease key holds its incarnation (errors count as alive).
pub(crate) fn alive(engine: &MemoryEngine, who: &NodeIdentity) -> bool {
    now(is_alive(engine, &LAYOUT, who))
}

/// The largest frame a simulated link carries.
pub(crate) const MAX_FRAME: usize = 16 * 1024 * 1024;

/// The machines' clock: `at` (the engine's time) after a fixed instant.
pub(crate) fn instant(at: Duration) -> std::time::Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now) + at
}

/// The body of one Content-Length frame.
pub(crate) fn body_of(frame: &[u8]) -> Option<&[u8]> {
    let at = frame.windows(4).position(|w| w == b"\r\n\r\n")?;
    Some(&frame[at + 4..])
}

/// The simulation's layout: its nodes' subjects are the runtime's (`Layout::group_subject`...).
pub(crate) static LAYOUT: std::sync::LazyLock<Layout> = std::sync::LazyLock::new(Layout::default);

/// The id of the session event a group frame body carries, if it carries one.
pub(crate) fn relayed_event(body: &[u8]) -> Option<String> {
    let body = match RelayFrame::parse(body).ok()? {
        RelayFrame::All(body) | RelayFrame::To { body, .. } => body,
        RelayFrame::Ended { .. } | RelayFrame::GroupEnded { .. } => return None,
    };
    event_id(body)
}

/// Whether a body is a `session.warning` reporting dropped streaming events
/// (`events_dropped`), which a node's host makes for its own client.
pub(crate) fn drop_report(body: &[u8]) -> bool {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let event = &message["params"]["event"];
    message["method"] == "session.event"
        && event["type"] == "session.warning"
        && event["data"]["warningType"] == "events_dropped"
}

/// The id of the event a `session.event` notification body carries.
pub(crate) fn event_id(body: &[u8]) -> Option<String> {
    let message: Value = serde_json::from_slice(body).ok()?;
    if message["method"] != "session.event" {
        return None;
    }
    message["params"]["event"]["id"].as_str().map(str::to_owned)
}
