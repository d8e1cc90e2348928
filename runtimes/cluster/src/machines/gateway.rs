//! A gateway with no I/O: one client connection of node B relaying one session to the node A
//! owning it, and following the session when A dies or the link breaks.
//!
//! The machine keeps the client's [`ClientRelay`] and decides; its runner (`crate::gateway`)
//! performs what it asks for ([`GatewayEvent`]), answering each call before any other input,
//! and feeds it the client's frames, the owner's frames, the end of the link and the time:
//!
//! * while relaying, the owner's lease is checked every half lease TTL; the owner's shutdown
//!   notice is held back (it is not the client's node that stops) and, once the link then
//!   ends, the gateway waits (up to two lease TTLs and three seconds) for the owner's lease to
//!   end;
//! * a broken link whose owner still answers re-attaches the client to it; an owner that is
//!   gone (its lease, or it does not answer) is followed: the session is looked up until this
//!   node loaded it or a live other node owns it (up to three lease TTLs and five seconds);
//! * a re-attachment fails the requests the owner will never answer, opens a link to the new
//!   owner, sends the relay's re-attachments and waits (up to [`REATTACH_TIMEOUT`]) for their
//!   answers, holding the owner's other frames; a Copilot SDK client is then caught up from
//!   the log; the held frames follow, without what the catch-up delivered;
//! * a client whose relay does not re-attach (AHP: [`ClientRelay::reattaches`]) is not
//!   followed: once the lost link is drained its requests are answered with the reason and
//!   its connection ends, and it reconnects.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use agentwire::host::{Dialect, RELAY_HANDSHAKE_ID};
use agentwire::relay::ClientRelay;
use bytes::Bytes;

use super::group_in::OwnerFrame;
use crate::record::NodeIdentity;

/// How long a re-attachment may wait for the new owner's answers.
pub const REATTACH_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a gateway waiting for a stopping owner's lease to end checks it.
const LEASE_END_POLL: Duration = Duration::from_millis(250);

/// How often a gateway looking for a session's new owner checks.
const OWNER_POLL: Duration = Duration::from_millis(100);

/// How often a gateway looking for a session's new owner asks for a lookup.
const LOOKUP_AGAIN: Duration = Duration::from_secs(1);

/// Where a relayed connection's frames go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Another node, over NATS.
    Remote(NodeIdentity),
    /// This node's own host (it took the sessions over).
    Local,
}

/// A session and its logged events (stream sequence and payload), oldest first.
pub type SessionLog = (String, Vec<(u64, Bytes)>);

/// What a gateway asks its runner to do.
#[derive(Debug, Clone)]
pub enum GatewayEvent {
    /// Send this client frame body to the owner over the current link.
    ToOwner(Bytes),
    /// Deliver this owner frame body to the client.
    ToClient(Bytes),
    /// Deliver this owner event to the client (its head read once for the group).
    EventToClient(OwnerFrame),
    /// The client lost `lost` streaming deltas of `session` with the link.
    DeltasLost {
        /// The session.
        session: String,
        /// How many.
        lost: u64,
    },
    /// Check whether this node's lease still holds its incarnation:
    /// [`Gateway::handle_lease`].
    CheckLease(NodeIdentity),
    /// Check whether this node answers on its link subject: [`Gateway::handle_probe`].
    Probe(NodeIdentity),
    /// Find the session's owner now (this node, when its host loaded the session; a live
    /// node other than `dead` that a lookup found): [`Gateway::handle_owner_found`].
    FindOwner {
        /// The session.
        session: String,
        /// The owner that died.
        dead: NodeIdentity,
    },
    /// Ask this node to look the session up (claimed here if its owner is gone).
    LookUp(String),
    /// Open a link to this target (replacing the current one): [`Gateway::handle_link_opened`].
    OpenLink(Target),
    /// Feed every frame already received on the current link ([`Gateway::handle_owner_frame`]),
    /// then [`Gateway::handle_drained`].
    DrainLink,
    /// Read the last stream sequence of each session's log: [`Gateway::handle_last_seqs`].
    ReadLastSeqs(Vec<String>),
    /// Read each session's log (its events): [`Gateway::handle_logs`].
    ReadLogs(Vec<String>),
    /// The client was re-attached to this target.
    Reattached(Target),
    /// The relayed connection ends with this reason (nothing follows).
    End(String),
}

/// Why a relayed connection leaves its link.
#[derive(Debug, Clone)]
enum Lost {
    /// The owner is gone: follow the sessions to their new owner.
    Died(NodeIdentity),
    /// The link to the owner, which still answers, lost a message or went silent; with the
    /// relayed connection the owner served the link as.
    Broke(NodeIdentity, String, Option<u64>),
}

impl Lost {
    fn owner(&self) -> &NodeIdentity {
        match self {
            Lost::Died(owner) | Lost::Broke(owner, ..) => owner,
        }
    }

    /// What happened, for reasons given to the client.
    fn what(&self) -> String {
        match self {
            Lost::Died(owner) => format!("the node owning the session ({}) stopped", owner.node),
            Lost::Broke(owner, why, _) => format!(
                "the link to the node owning the session ({}) broke: {why}",
                owner.node
            ),
        }
    }
}

/// What the gateway is doing.
#[derive(Debug)]
enum Phase {
    /// The first link is being opened.
    Opening,
    /// Relaying over the link to `target`; `next_check`: the owner's next lease check (`None`
    /// while one is out, or for this node's own host).
    Relaying {
        target: Target,
        member: Option<u64>,
        next_check: Option<Instant>,
    },
    /// The link broke: does the owner still answer?
    Probing {
        owner: NodeIdentity,
        why: String,
        member: Option<u64>,
    },
    /// The stopping owner closed the link: waiting for its lease to end.
    AwaitingLeaseEnd {
        owner: NodeIdentity,
        deadline: Instant,
        next_poll: Option<Instant>,
    },
    /// The frames left on the lost link are being fed.
    Draining(Lost),
    /// Looking for the session's new owner after `dead` died.
    FindingOwner {
        lost: Lost,
        deadline: Instant,
        next_poll: Option<Instant>,
        asked: Option<Instant>,
    },
    /// A link to the new owner is being opened.
    Relinking { lost: Lost, target: Target },
    /// Waiting for the answers to the re-attachments; the owner's other frames are held.
    AwaitingAnswers {
        lost: Lost,
        target: Target,
        member: Option<u64>,
        deadline: Instant,
        held: Vec<OwnerFrame>,
    },
    /// Reading the logs to catch the client up. `link_ended`: the new link already ended
    /// (when, and why it broke, if it did), handled once the client is caught up.
    CatchingUp {
        lost: Lost,
        target: Target,
        member: Option<u64>,
        held: Vec<OwnerFrame>,
        link_ended: Option<(Instant, Option<String>)>,
    },
    /// The relayed connection ended.
    Ended,
}

/// B's side of one relayed client connection and session.
#[derive(Debug)]
pub struct Gateway {
    session: String,
    owner: NodeIdentity,
    lease_ttl: Duration,
    relay: ClientRelay,
    phase: Phase,
    /// The owner sent its shutdown notice (it stops gracefully, or was fenced).
    owner_stopping: bool,
    /// Owner frames to pass on, in order; the first waits for `floors` when set.
    to_pass: VecDeque<OwnerFrame>,
    /// A frame whose delivery waits for the logs' last sequences.
    floors: Option<Bytes>,
    /// Client frames waiting for a re-attachment to end.
    waiting: Vec<Bytes>,
    events: VecDeque<GatewayEvent>,
}

impl Gateway {
    /// A gateway for a client speaking `dialect` of `session`, owned by `owner`: its first
    /// event opens the link.
    pub fn new(
        session: String,
        dialect: Dialect,
        owner: NodeIdentity,
        lease_ttl: Duration,
    ) -> Self {
        let mut events = VecDeque::new();
        events.push_back(GatewayEvent::OpenLink(Target::Remote(owner.clone())));
        Gateway {
            session,
            owner,
            lease_ttl,
            relay: ClientRelay::new(dialect),
            phase: Phase::Opening,
            owner_stopping: false,
            to_pass: VecDeque::new(),
            floors: None,
            waiting: Vec::new(),
            events,
        }
    }

    /// The sessions the client is attached to through this gateway.
    pub fn sessions(&self) -> Vec<String> {
        self.relay.sessions()
    }

    /// Whether the relayed connection ended.
    pub fn is_ended(&self) -> bool {
        matches!(self.phase, Phase::Ended)
    }

    /// The next thing to do.
    pub fn poll_event(&mut self) -> Option<GatewayEvent> {
        self.events.pop_front()
    }

    /// When [`Gateway::handle_timeout`] is wanted next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Relaying { next_check, .. } => *next_check,
            Phase::AwaitingLeaseEnd { next_poll, .. } | Phase::FindingOwner { next_poll, .. } => {
                *next_poll
            }
            Phase::AwaitingAnswers { deadline, .. } => Some(*deadline),
            _ => None,
        }
    }

    /// Frame bodies the client sent for the session.
    pub fn handle_client_frames(&mut self, bodies: Vec<Bytes>) {
        if matches!(self.phase, Phase::Relaying { .. }) {
            for body in bodies {
                let body = self.relay.client_sent(&body).unwrap_or(body);
                self.events.push_back(GatewayEvent::ToOwner(body));
            }
        } else if !self.is_ended() {
            // They wait while the client is re-attached, then go to the new owner.
            self.waiting.extend(bodies);
        }
    }

    /// A frame of the owner for the client arrived on the link.
    pub fn handle_owner_frame(&mut self, frame: OwnerFrame) {
        if let Phase::AwaitingAnswers { held, .. } = &mut self.phase {
            if self.relay.is_reattachment_answer(&frame.body) {
                self.relay.owner_sent(&frame.body);
            } else {
                held.push(frame);
            }
            if !self.relay.reattachments_open() {
                self.answered();
            }
            return;
        }
        if !self.is_ended() {
            self.to_pass.push_back(frame);
            self.pass_on();
        }
    }

    /// The link ended; `broken`: why it broke (a lost message, or silence), `None` when the
    /// owner closed it.
    pub fn handle_link_ended(&mut self, now: Instant, broken: Option<String>) {
        if let Phase::CatchingUp { link_ended, .. } = &mut self.phase {
            // The client is caught up first (the log is read whatever the link does); then
            // the end is handled as if it came while relaying.
            *link_ended = Some((now, broken));
            return;
        }
        match std::mem::replace(&mut self.phase, Phase::Ended) {
            Phase::Relaying { target, member, .. } => self.link_lost(now, target, member, broken),
            Phase::AwaitingAnswers { lost, .. } => self.not_taken_back(&lost),
            phase => self.phase = phase,
        }
    }

    /// The link to `target`, the client's current one, ended at `now` (see
    /// [`Gateway::handle_link_ended`]).
    fn link_lost(
        &mut self,
        now: Instant,
        target: Target,
        member: Option<u64>,
        broken: Option<String>,
    ) {
        // The owner said it is stopping: its link ends because it stops, so wait for its
        // lease to end rather than re-attach to it.
        let broken = broken.filter(|_| !self.owner_stopping);
        match (target, broken) {
            (Target::Remote(owner), Some(why)) => {
                // A lost message: the same owner takes the client back if it answers.
                self.events.push_back(GatewayEvent::Probe(owner.clone()));
                self.phase = Phase::Probing { owner, why, member };
            }
            (Target::Remote(owner), None) if self.owner_stopping => {
                self.events
                    .push_back(GatewayEvent::CheckLease(owner.clone()));
                let deadline = now + self.lease_ttl * 2 + Duration::from_secs(3);
                self.phase = Phase::AwaitingLeaseEnd {
                    owner,
                    deadline,
                    next_poll: None,
                };
            }
            (target, _) => self.closed_by(&target),
        }
    }

    /// The answer to [`GatewayEvent::CheckLease`] at `now`.
    pub fn handle_lease(&mut self, now: Instant, alive: bool) {
        match &mut self.phase {
            Phase::Relaying {
                target: Target::Remote(owner),
                next_check,
                ..
            } => {
                if alive {
                    *next_check = Some(now + self.lease_ttl / 2);
                } else {
                    let owner = owner.clone();
                    self.lose(Lost::Died(owner));
                }
            }
            Phase::AwaitingLeaseEnd {
                owner,
                deadline,
                next_poll,
            } => {
                if !alive {
                    let owner = owner.clone();
                    self.lose(Lost::Died(owner));
                } else if now >= *deadline {
                    let owner = owner.clone();
                    self.closed_by(&Target::Remote(owner));
                } else {
                    *next_poll = Some(now + LEASE_END_POLL);
                }
            }
            _ => {}
        }
    }

    /// The answer to [`GatewayEvent::Probe`].
    pub fn handle_probe(&mut self, answers: bool) {
        if let Phase::Probing { owner, why, member } = &self.phase {
            let lost = match answers {
                true => Lost::Broke(owner.clone(), why.clone(), *member),
                false => Lost::Died(owner.clone()),
            };
            self.lose(lost);
        }
    }

    /// The frames left on the lost link were fed: the client is re-attached.
    pub fn handle_drained(&mut self, now: Instant) {
        let Phase::Draining(lost) = std::mem::replace(&mut self.phase, Phase::Ended) else {
            return;
        };
        if !self.relay.reattaches() {
            // An AHP client: it reconnects and takes the sessions' state afresh.
            return self.fail(format!(
                "{}; reconnect to take the sessions' state again",
                lost.what()
            ));
        }
        let reason = match &lost {
            Lost::Died(owner) => format!(
                "node {} owning the session stopped before answering",
                owner.node
            ),
            Lost::Broke(..) => format!("{} before answering", lost.what()),
        };
        // A `sendAndWait` of a Copilot SDK client ends with the turn the new owner
        // interrupts; when only the link broke, it (or an editor's `session/prompt`) is
        // answered by the owner on the next link.
        let answers = match &lost {
            Lost::Died(_) => self.relay.fail_pending_after_owner_died(&reason),
            Lost::Broke(_, _, Some(member)) => {
                self.relay.fail_pending_but_turns_at(*member, &reason)
            }
            Lost::Broke(..) => self.relay.fail_pending(&reason),
        };
        self.deliver_all(answers);
        match &lost {
            Lost::Broke(owner, ..) => {
                let target = Target::Remote(owner.clone());
                self.events
                    .push_back(GatewayEvent::OpenLink(target.clone()));
                self.phase = Phase::Relinking { lost, target };
            }
            Lost::Died(dead) => {
                self.events.push_back(GatewayEvent::FindOwner {
                    session: self.session.clone(),
                    dead: dead.clone(),
                });
                self.phase = Phase::FindingOwner {
                    lost,
                    deadline: now + self.lease_ttl * 3 + Duration::from_secs(5),
                    next_poll: None,
                    asked: None,
                };
            }
        }
    }

    /// The answer to [`GatewayEvent::FindOwner`] at `now`.
    pub fn handle_owner_found(&mut self, now: Instant, found: Option<Target>) {
        let Phase::FindingOwner {
            lost,
            deadline,
            next_poll,
            asked,
        } = &mut self.phase
        else {
            return;
        };
        if let Some(target) = found {
            let lost = lost.clone();
            self.relay.owner_changed();
            self.events
                .push_back(GatewayEvent::OpenLink(target.clone()));
            self.phase = Phase::Relinking { lost, target };
            return;
        }
        if now > *deadline {
            let reason = format!(
                "the node owning session {} ({}) stopped and no node took the session over; \
                 reconnect and resume the session",
                self.session,
                lost.owner().node
            );
            return self.fail(reason);
        }
        // A lookup that found nothing ends; ask again now and then.
        if asked.is_none_or(|at| now.saturating_duration_since(at) > LOOKUP_AGAIN) {
            self.events
                .push_back(GatewayEvent::LookUp(self.session.clone()));
            *asked = Some(now);
        }
        *next_poll = Some(now + OWNER_POLL);
    }

    /// The answer to [`GatewayEvent::OpenLink`] at `now`: the relayed connection the owner
    /// serves the link as (`None` for this node's own host), or why it did not open.
    pub fn handle_link_opened(&mut self, now: Instant, opened: Result<Option<u64>, String>) {
        match (std::mem::replace(&mut self.phase, Phase::Ended), opened) {
            (Phase::Opening, Ok(member)) => {
                self.phase = Phase::Relaying {
                    target: Target::Remote(self.owner.clone()),
                    member,
                    next_check: Some(now + self.lease_ttl / 2),
                };
                let waiting = std::mem::take(&mut self.waiting);
                self.handle_client_frames(waiting);
            }
            (Phase::Opening, Err(reason)) => self.end(reason),
            (Phase::Relinking { lost, target }, Ok(member)) => {
                for frame in self.relay.reattach() {
                    self.events.push_back(GatewayEvent::ToOwner(frame));
                }
                self.phase = Phase::AwaitingAnswers {
                    lost,
                    target,
                    member,
                    deadline: now + REATTACH_TIMEOUT,
                    held: Vec::new(),
                };
                if !self.relay.reattachments_open() {
                    self.answered();
                }
            }
            (Phase::Relinking { .. }, Err(reason)) => self.fail(reason),
            (phase, _) => self.phase = phase,
        }
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.poll_timeout().is_none_or(|at| at > now) {
            return;
        }
        match &mut self.phase {
            Phase::Relaying {
                target: Target::Remote(owner),
                next_check,
                ..
            } => {
                *next_check = None;
                self.events
                    .push_back(GatewayEvent::CheckLease(owner.clone()));
            }
            Phase::AwaitingLeaseEnd {
                owner, next_poll, ..
            } => {
                *next_poll = None;
                self.events
                    .push_back(GatewayEvent::CheckLease(owner.clone()));
            }
            Phase::FindingOwner {
                lost, next_poll, ..
            } => {
                *next_poll = None;
                let dead = lost.owner().clone();
                self.events.push_back(GatewayEvent::FindOwner {
                    session: self.session.clone(),
                    dead,
                });
            }
            Phase::AwaitingAnswers { lost, .. } => {
                let lost = lost.clone();
                self.not_taken_back(&lost);
            }
            _ => {}
        }
    }

    /// The answer to [`GatewayEvent::ReadLastSeqs`]: each session's last sequence (`None`
    /// when it could not be read; 0 for an empty log).
    pub fn handle_last_seqs(&mut self, seqs: Vec<(String, Option<u64>)>) {
        let Some(body) = self.floors.take() else {
            return;
        };
        for (session, seq) in seqs {
            if let Some(seq) = seq {
                self.relay.set_floor(&session, seq);
            }
        }
        self.deliver_passed(&body);
        self.pass_on();
    }

    /// The answer to [`GatewayEvent::ReadLogs`]: each session's events (stream sequence and
    /// payload, in order), or the session whose log could not be read and why; `timestamp`:
    /// the time now as the host writes it (RFC 3339).
    pub fn handle_logs(
        &mut self,
        logs: Result<Vec<SessionLog>, (String, String)>,
        timestamp: &str,
    ) {
        let Phase::CatchingUp {
            lost,
            target,
            member,
            held,
            link_ended,
        } = std::mem::replace(&mut self.phase, Phase::Ended)
        else {
            return;
        };
        let logs = match logs {
            Ok(logs) => logs,
            Err((session, e)) => {
                return self.fail(format!(
                    "cannot read session {session}'s log after {} ({e}); reconnect and resume \
                     the session",
                    lost.what()
                ))
            }
        };
        for (session, events) in logs {
            let frames = self.relay.catch_up(&session, &events);
            self.deliver_all(frames);
        }
        // A turn that ended while the link was down: its `session.idle` was lost with it.
        let idles = self.relay.missed_idles(timestamp);
        self.deliver_all(idles);
        let answers = self.relay.fail_turn_waiters();
        self.deliver_all(answers);
        match link_ended {
            None => self.reattached(target, member, held),
            Some((at, broken)) => {
                // The new link ended meanwhile: what the owner sent on it before is the
                // client's, the client's own frames keep waiting, and the end is handled as
                // if it came while relaying (not announced as a re-attachment).
                self.hand_on(held);
                self.link_lost(at, target, member, broken);
            }
        }
    }

    /// The owner's answers to the re-attachments are in.
    fn answered(&mut self) {
        let Phase::AwaitingAnswers {
            lost,
            target,
            member,
            held,
            ..
        } = std::mem::replace(&mut self.phase, Phase::Ended)
        else {
            return;
        };
        if let Some((session, why)) = self.relay.take_refused().into_iter().next() {
            return self.fail(format!(
                "{} and the new owner refused to take this client back to session {session} \
                 ({why}); reconnect and resume the session",
                lost.what()
            ));
        }
        if !self.relay.catches_up_from_log() {
            // An editor's new owner replayed what it missed before taking it back.
            return self.reattached(target, member, held);
        }
        // Streaming deltas lost with the link, reported before the catch-up's first durable
        // event.
        for (session, lost) in self.relay.take_gaps() {
            self.events
                .push_back(GatewayEvent::DeltasLost { session, lost });
        }
        self.events
            .push_back(GatewayEvent::ReadLogs(self.relay.sessions()));
        self.phase = Phase::CatchingUp {
            lost,
            target,
            member,
            held,
            link_ended: None,
        };
    }

    /// The client is re-attached to `target`: the held frames follow, then the client's.
    fn reattached(&mut self, target: Target, member: Option<u64>, held: Vec<OwnerFrame>) {
        self.events
            .push_back(GatewayEvent::Reattached(target.clone()));
        self.owner_stopping = false;
        // The new owner's lease is checked at once, then every half lease TTL.
        if let Target::Remote(owner) = &target {
            self.events
                .push_back(GatewayEvent::CheckLease(owner.clone()));
        }
        let next_check = None;
        self.phase = Phase::Relaying {
            target,
            member,
            next_check,
        };
        self.hand_on(held);
        let waiting = std::mem::take(&mut self.waiting);
        self.handle_client_frames(waiting);
    }

    /// Passes on the owner's frames `held` during a re-attachment, less those the catch-up
    /// delivered already.
    fn hand_on(&mut self, held: Vec<OwnerFrame>) {
        let held = self.relay.skip_replayed(held, |f| &f.body[..]);
        self.to_pass.extend(held);
        self.pass_on();
    }

    /// The link is lost: the frames left on it are fed first.
    fn lose(&mut self, lost: Lost) {
        self.events.push_back(GatewayEvent::DrainLink);
        self.phase = Phase::Draining(lost);
    }

    /// The owner closed the relayed connection.
    fn closed_by(&mut self, target: &Target) {
        let who = match target {
            Target::Remote(owner) => format!("node {}", owner.node),
            Target::Local => "this node".to_owned(),
        };
        self.end(format!("{who} closed the relayed connection"));
    }

    fn not_taken_back(&mut self, lost: &Lost) {
        self.fail(format!(
            "{} and the new owner did not take this client back; reconnect and resume the \
             session",
            lost.what()
        ));
    }

    /// A re-attachment failed: what was kept for the owner to answer is answered, and the
    /// connection ends.
    fn fail(&mut self, reason: String) {
        let answers = self.relay.fail_pending(&reason);
        self.deliver_all(answers);
        self.end(reason);
    }

    fn end(&mut self, reason: String) {
        self.phase = Phase::Ended;
        self.events.push_back(GatewayEvent::End(reason));
    }

    fn deliver_all(&mut self, bodies: Vec<Bytes>) {
        self.events
            .extend(bodies.into_iter().map(GatewayEvent::ToClient));
    }

    /// Passes the owner's frames on to the client, until one waits for the logs' ends.
    fn pass_on(&mut self) {
        while self.floors.is_none() {
            let Some(frame) = self.to_pass.pop_front() else {
                return;
            };
            if let Some(head) = &frame.head {
                // An event, read once for all this node's clients of it.
                if self.relay.owner_sent_event(head) {
                    self.events.push_back(GatewayEvent::EventToClient(frame));
                }
                continue;
            }
            let body = &frame.body[..];
            if is_shutdown_notice(body) {
                self.owner_stopping = true;
                continue;
            }
            // The answer to the client's handshake replayed on the owner: it had its own.
            if is_handshake_answer(body) || !self.relay.owner_sent(body) {
                continue;
            }
            self.relay.delivered(&frame.body);
            // The answer to a resume from an owner that does not name the session's last
            // event is delivered once the log's last sequence is read (where a catch-up
            // would start if the client receives no event of the session before the owner
            // dies).
            let wanted = self.relay.floors_wanted();
            if wanted.is_empty() {
                self.deliver_passed(&frame.body);
            } else {
                self.floors = Some(frame.body);
                self.events.push_back(GatewayEvent::ReadLastSeqs(wanted));
            }
        }
    }

    fn deliver_passed(&mut self, body: &Bytes) {
        let body = self.relay.take_rewritten().unwrap_or_else(|| body.clone());
        self.events.push_back(GatewayEvent::ToClient(body));
    }
}

/// Whether `body` is a node's shutdown notice ([`agentwire_driver::SHUTDOWN_NOTIFICATION`],
/// `_`-prefixed for ACP). The driver writes it with its keys in order, so only a frame that
/// starts as it does is parsed (this runs for every frame relayed to every client).
fn is_shutdown_notice(body: &[u8]) -> bool {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","method":""#;
    let Some(rest) = body.strip_prefix(HEAD) else {
        return false;
    };
    let rest = rest.strip_prefix(b"_").unwrap_or(rest);
    // The notice is a short notification: a long frame is not one.
    body.len() < 4096
        && rest.starts_with(agentwire_driver::SHUTDOWN_NOTIFICATION.as_bytes())
        && serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| {
            let method = v["method"].as_str().unwrap_or("");
            method.strip_prefix('_').unwrap_or(method) == agentwire_driver::SHUTDOWN_NOTIFICATION
                && v.get("id").is_none()
        })
}

/// Whether `body` answers the handshake the link replayed on the owner
/// ([`agentwire::host::RELAY_HANDSHAKE_ID`]). The host writes `jsonrpc` then `id` first in
/// every response, so only a frame that starts so is parsed.
fn is_handshake_answer(body: &[u8]) -> bool {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":""#;
    body.strip_prefix(HEAD)
        .is_some_and(|rest| rest.starts_with(RELAY_HANDSHAKE_ID.as_bytes()))
        && serde_json::from_slice::<serde_json::Value>(body)
            .is_ok_and(|v| v["id"] == RELAY_HANDSHAKE_ID && v.get("method").is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(6);

    fn node(name: &str) -> NodeIdentity {
        NodeIdentity {
            node: name.into(),
            incarnation: 1,
        }
    }

    fn events(g: &mut Gateway) -> Vec<GatewayEvent> {
        std::iter::from_fn(|| g.poll_event()).collect()
    }

    /// What kind of event each is (and its target or reason), to compare sequences.
    fn kinds(events: &[GatewayEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                GatewayEvent::ToOwner(_) => "to-owner".to_owned(),
                GatewayEvent::ToClient(_) => "to-client".to_owned(),
                GatewayEvent::EventToClient(_) => "event-to-client".to_owned(),
                GatewayEvent::DeltasLost { .. } => "deltas-lost".to_owned(),
                GatewayEvent::CheckLease(n) => format!("check-lease {}", n.node),
                GatewayEvent::Probe(n) => format!("probe {}", n.node),
                GatewayEvent::FindOwner { dead, .. } => format!("find-owner {}", dead.node),
                GatewayEvent::LookUp(_) => "look-up".to_owned(),
                GatewayEvent::OpenLink(Target::Remote(n)) => format!("open {}", n.node),
                GatewayEvent::OpenLink(Target::Local) => "open local".to_owned(),
                GatewayEvent::DrainLink => "drain".to_owned(),
                GatewayEvent::ReadLastSeqs(_) => "read-last-seqs".to_owned(),
                GatewayEvent::ReadLogs(_) => "read-logs".to_owned(),
                GatewayEvent::Reattached(_) => "reattached".to_owned(),
                GatewayEvent::End(why) => format!("end: {why}"),
            })
            .collect()
    }

    const RESUME: &[u8] =
        br#"{"jsonrpc":"2.0","id":1,"method":"session.resume","params":{"sessionId":"s"}}"#;
    const RESUMED: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#;

    /// A gateway of `s` to node `a` whose client resumed the session; at `t0`.
    fn relaying(t0: Instant) -> Gateway {
        let mut g = Gateway::new("s".into(), Dialect::CopilotSdk, node("a"), TTL);
        assert_eq!(kinds(&events(&mut g)), ["open a"]);
        // Frames sent before the link opened wait for it.
        g.handle_client_frames(vec![Bytes::from_static(RESUME)]);
        assert!(events(&mut g).is_empty());
        g.handle_link_opened(t0, Ok(Some(5)));
        assert_eq!(kinds(&events(&mut g)), ["to-owner"]);
        g.handle_owner_frame(OwnerFrame::from(Bytes::from_static(RESUMED)));
        // The answer waits for the log's end (where a catch-up would start).
        let got = events(&mut g);
        assert_eq!(kinds(&got), ["read-last-seqs"]);
        g.handle_last_seqs(vec![("s".into(), Some(3))]);
        assert_eq!(kinds(&events(&mut g)), ["to-client"]);
        g
    }

    /// Answers the re-attachments the gateway sent in `sent` as the new owner does.
    fn answer_reattachments(g: &mut Gateway, sent: &[GatewayEvent]) {
        for event in sent {
            if let GatewayEvent::ToOwner(body) = event {
                let request: serde_json::Value = serde_json::from_slice(body).unwrap();
                if request["method"] == "session.resume" {
                    let answer = serde_json::json!({"jsonrpc": "2.0", "id": request["id"],
                                                    "result": {"sessionId": "s"}});
                    g.handle_owner_frame(OwnerFrame::from(Bytes::from(answer.to_string())));
                }
            }
        }
    }

    #[test]
    fn the_owners_death_follows_the_session_to_its_new_owner() {
        let t0 = Instant::now();
        let mut g = relaying(t0);
        assert_eq!(g.poll_timeout(), Some(t0 + TTL / 2));
        let now = t0 + TTL / 2;
        g.handle_timeout(now);
        assert_eq!(kinds(&events(&mut g)), ["check-lease a"]);
        g.handle_lease(now, false);
        assert_eq!(kinds(&events(&mut g)), ["drain"]);
        g.handle_drained(now);
        assert_eq!(kinds(&events(&mut g)), ["find-owner a"]);
        // The client's frames wait while it is re-attached.
        g.handle_client_frames(vec![Bytes::from_static(b"{\"later\":1}")]);
        g.handle_owner_found(now, None);
        assert_eq!(kinds(&events(&mut g)), ["look-up"]);
        g.handle_timeout(now + OWNER_POLL);
        assert_eq!(kinds(&events(&mut g)), ["find-owner a"]);
        g.handle_owner_found(now + OWNER_POLL, Some(Target::Remote(node("b"))));
        assert_eq!(kinds(&events(&mut g)), ["open b"]);
        g.handle_link_opened(now, Ok(Some(9)));
        let sent = events(&mut g);
        assert!(kinds(&sent).iter().all(|k| k == "to-owner"), "{sent:?}");
        // A frame of the new owner that is not an answer is held until the client caught up.
        g.handle_owner_frame(OwnerFrame::from(Bytes::from_static(
            br#"{"jsonrpc":"2.0","method":"x","params":{}}"#,
        )));
        answer_reattachments(&mut g, &sent);
        assert_eq!(kinds(&events(&mut g)), ["read-logs"]);
        g.handle_logs(Ok(vec![("s".into(), Vec::new())]), "2026-12-04T00:00:00Z");
        assert_eq!(
            kinds(&events(&mut g)),
            ["reattached", "check-lease b", "to-client", "to-owner"]
        );
        assert!(!g.is_ended());
    }

    /// A gateway of `s` whose broken link to `a` was probed (`a` answers): it opens a new
    /// link, which `a` takes as `member`, re-attaches the client over it and asks for the
    /// logs (the catch-up is left to the caller).
    fn relinked_to_catch_up(g: &mut Gateway, t0: Instant, member: u64) {
        g.handle_probe(true);
        g.handle_drained(t0);
        assert_eq!(kinds(&events(g)), ["drain", "open a"]);
        g.handle_link_opened(t0, Ok(Some(member)));
        let sent = events(g);
        answer_reattachments(g, &sent);
        let reading = kinds(&events(g));
        assert_eq!(reading.last().map(String::as_str), Some("read-logs"));
    }

    /// A link that ends while the client is caught up from the log is not forgotten: once
    /// caught up, the gateway handles its end (a broken one: does the owner still answer?).
    #[test]
    fn a_link_that_ends_during_the_catch_up_is_handled_after_it() {
        let t0 = Instant::now();
        for broken in [Some("silence".to_owned()), None] {
            let mut g = relaying(t0);
            g.handle_link_ended(t0, Some("lost".into()));
            assert_eq!(kinds(&events(&mut g)), ["probe a"]);
            relinked_to_catch_up(&mut g, t0, 6);
            g.handle_link_ended(t0, broken.clone());
            assert!(events(&mut g).is_empty(), "the catch-up goes on");
            // A client frame sent meanwhile waits for the next link.
            g.handle_client_frames(vec![Bytes::from_static(b"{\"later\":1}")]);
            g.handle_logs(Ok(vec![("s".into(), Vec::new())]), "2026-12-04T00:00:00Z");
            let after = kinds(&events(&mut g));
            assert!(
                !after.iter().any(|k| k == "reattached" || k == "to-owner"),
                "nothing goes over the ended link: {after:?}"
            );
            match broken {
                Some(_) => {
                    assert_eq!(after.last().map(String::as_str), Some("probe a"));
                    relinked_to_catch_up(&mut g, t0, 8);
                    g.handle_logs(Ok(vec![("s".into(), Vec::new())]), "2026-12-04T00:00:00Z");
                    let relayed = kinds(&events(&mut g));
                    assert_eq!(relayed[0], "reattached", "{relayed:?}");
                    assert_eq!(
                        relayed.last().map(String::as_str),
                        Some("to-owner"),
                        "the waiting frame follows the re-attachment: {relayed:?}"
                    );
                }
                None => {
                    let last = after.last().cloned().unwrap_or_default();
                    assert!(last.starts_with("end: ") && g.is_ended(), "{after:?}");
                }
            }
        }
    }

    #[test]
    fn an_ahp_client_is_not_followed_its_requests_fail_and_its_connection_ends() {
        let t0 = Instant::now();
        for owner_died in [true, false] {
            let mut g = Gateway::new("s".into(), Dialect::Ahp, node("a"), TTL);
            assert_eq!(kinds(&events(&mut g)), ["open a"]);
            g.handle_link_opened(t0, Ok(Some(5)));
            let fetch = br#"{"jsonrpc":"2.0","id":7,"method":"fetchTurns","params":{"channel":"ahp-chat:/s"}}"#;
            g.handle_client_frames(vec![Bytes::from_static(fetch)]);
            assert_eq!(kinds(&events(&mut g)), ["to-owner"]);
            if owner_died {
                g.handle_timeout(t0 + TTL / 2);
                assert_eq!(kinds(&events(&mut g)), ["check-lease a"]);
                g.handle_lease(t0 + TTL / 2, false);
            } else {
                g.handle_link_ended(t0, Some("silence".into()));
                assert_eq!(kinds(&events(&mut g)), ["probe a"]);
                g.handle_probe(true);
            }
            assert_eq!(kinds(&events(&mut g)), ["drain"]);
            g.handle_drained(t0);
            let ended = events(&mut g);
            let kinds = kinds(&ended);
            assert_eq!(kinds.len(), 2, "{kinds:?}");
            assert_eq!(kinds[0], "to-client", "the fetchTurns is answered");
            assert!(kinds[1].starts_with("end: ") && kinds[1].contains("reconnect"));
            let GatewayEvent::ToClient(answer) = &ended[0] else {
                unreachable!()
            };
            let answer: serde_json::Value = serde_json::from_slice(answer).unwrap();
            assert_eq!(answer["id"], 7);
            assert!(answer["error"]["message"].is_string());
            assert!(g.is_ended());
        }
    }

    #[test]
    fn a_broken_link_reattaches_to_the_owner_when_it_answers_and_follows_it_otherwise() {
        let t0 = Instant::now();
        let mut g = relaying(t0);
        g.handle_link_ended(t0, Some("silence".into()));
        assert_eq!(kinds(&events(&mut g)), ["probe a"]);
        g.handle_probe(true);
        assert_eq!(kinds(&events(&mut g)), ["drain"]);
        g.handle_drained(t0);
        assert_eq!(
            kinds(&events(&mut g)),
            ["open a"],
            "no lookup: a still owns it"
        );
        let mut g = relaying(t0);
        g.handle_link_ended(t0, Some("silence".into()));
        events(&mut g);
        g.handle_probe(false);
        g.handle_drained(t0);
        assert_eq!(kinds(&events(&mut g)), ["drain", "find-owner a"]);
    }

    #[test]
    fn a_closed_link_or_a_failed_opening_ends_the_relayed_connection() {
        let t0 = Instant::now();
        let mut g = relaying(t0);
        g.handle_link_ended(t0, None);
        assert_eq!(
            kinds(&events(&mut g)),
            ["end: node a closed the relayed connection"]
        );
        assert!(g.is_ended());
        let mut g = Gateway::new("s".into(), Dialect::CopilotSdk, node("a"), TTL);
        events(&mut g);
        g.handle_link_opened(t0, Err("a does not answer".into()));
        assert_eq!(kinds(&events(&mut g)), ["end: a does not answer"]);
    }

    #[test]
    fn a_stopping_owner_is_followed_once_its_lease_ends() {
        let t0 = Instant::now();
        let mut g = relaying(t0);
        let notice = format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"reason":"stopping"}}}}"#,
            agentwire_driver::SHUTDOWN_NOTIFICATION
        );
        g.handle_owner_frame(OwnerFrame::from(Bytes::from(notice)));
        assert!(events(&mut g).is_empty(), "the notice is held back");
        // Its link ends because it stops: no probe, its lease is watched.
        g.handle_link_ended(t0, Some("silence".into()));
        assert_eq!(kinds(&events(&mut g)), ["check-lease a"]);
        g.handle_lease(t0, true);
        assert_eq!(g.poll_timeout(), Some(t0 + LEASE_END_POLL));
        g.handle_timeout(t0 + LEASE_END_POLL);
        assert_eq!(kinds(&events(&mut g)), ["check-lease a"]);
        g.handle_lease(t0 + LEASE_END_POLL, false);
        assert_eq!(kinds(&events(&mut g)), ["drain"]);
        // A lease that does not end in time: the owner closed the connection.
        let mut g = relaying(t0);
        g.handle_owner_frame(OwnerFrame::from(Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","method":"{}"}}"#,
            agentwire_driver::SHUTDOWN_NOTIFICATION
        ))));
        g.handle_link_ended(t0, None);
        events(&mut g);
        g.handle_lease(t0 + TTL * 3, true);
        assert_eq!(
            kinds(&events(&mut g)),
            ["end: node a closed the relayed connection"]
        );
    }

    #[test]
    fn a_new_owner_that_does_not_take_the_client_back_in_time_ends_it() {
        let t0 = Instant::now();
        let mut g = relaying(t0);
        g.handle_link_ended(t0, Some("silence".into()));
        g.handle_probe(true);
        g.handle_drained(t0);
        g.handle_link_opened(t0, Ok(Some(6)));
        events(&mut g);
        assert_eq!(g.poll_timeout(), Some(t0 + REATTACH_TIMEOUT));
        g.handle_timeout(t0 + REATTACH_TIMEOUT);
        let got = kinds(&events(&mut g));
        assert!(
            got.last()
                .unwrap()
                .contains("did not take this client back"),
            "{got:?}"
        );
        assert!(g.is_ended());
    }

    #[test]
    fn no_new_owner_in_time_ends_the_connection_and_lookups_are_not_asked_too_often() {
        let t0 = Instant::now();
        let mut g = relaying(t0);
        g.handle_link_ended(t0, Some("silence".into()));
        g.handle_probe(false);
        g.handle_drained(t0);
        events(&mut g);
        let mut now = t0;
        let mut lookups = 0;
        while !g.is_ended() {
            g.handle_owner_found(now, None);
            let got = events(&mut g);
            lookups += got
                .iter()
                .filter(|e| matches!(e, GatewayEvent::LookUp(_)))
                .count();
            now += OWNER_POLL;
            g.handle_timeout(now);
            events(&mut g);
        }
        let waited = now - t0;
        assert!(waited > TTL * 3 + Duration::from_secs(5), "{waited:?}");
        assert!(lookups as u64 <= waited.as_secs() + 1, "{lookups}");
    }

    #[test]
    fn only_the_owners_shutdown_notice_is_held_back() {
        let notice = format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"reason":"stopping"}}}}"#,
            agentwire_driver::SHUTDOWN_NOTIFICATION
        );
        assert!(is_shutdown_notice(notice.as_bytes()));
        let event = format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"sessionId":"s","event":{{"data":{{"content":"{}"}}}}}}}}"#,
            agentwire::host::RelayedEventHead::EVENT_METHOD,
            agentwire_driver::SHUTDOWN_NOTIFICATION
        );
        assert!(!is_shutdown_notice(event.as_bytes()));
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#,
            agentwire_driver::SHUTDOWN_NOTIFICATION
        );
        assert!(!is_shutdown_notice(request.as_bytes()));
        let acp = r#"{"jsonrpc":"2.0","method":"_agentwire/shutdown","params":{"reason":"x"}}"#;
        assert!(is_shutdown_notice(acp.as_bytes()));
    }

    #[test]
    fn only_the_replayed_handshakes_answer_is_kept_from_the_client() {
        let answer = format!(r#"{{"jsonrpc":"2.0","id":"{RELAY_HANDSHAKE_ID}","result":{{}}}}"#);
        assert!(is_handshake_answer(answer.as_bytes()));
        let clients = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#;
        assert!(!is_handshake_answer(clients.as_bytes()));
        let request = format!(r#"{{"jsonrpc":"2.0","id":"{RELAY_HANDSHAKE_ID}","method":"x"}}"#);
        assert!(!is_handshake_answer(request.as_bytes()));
    }
}
