//! What a cluster gateway remembers about a client connection it relays to the owner of its
//! sessions, in the client's dialect (this sits beside the dialect registry, above the host
//! and the dialects, so that the host never reaches into a dialect), as one opaque value ([`ClientRelay`]) the cluster
//! runtime carries: the dialects read and write their own JSON (the Copilot SDK relay in
//! `copilot/relay.rs`, ACP's in `acp/relay.rs`, AHP's in `ahp/relay.rs`); the runtime only feeds it the frames it
//! relays and sends what it returns. I/O-free.

use bytes::Bytes;

use crate::acp::relay::AcpRelay;
use crate::ahp::relay::AhpRelay;
use crate::copilot::relay::Relay;
use crate::host::{ClusterApi, ConnId, Dialect, RelayedEventHead};

/// What a gateway remembers about the client connection it relays, so that a takeover of the
/// owner (or a broken link) does not cost the client its connection: its attachments to
/// re-establish at the new owner, its requests to answer if the owner dies first, and how
/// far it got in each session. Made by [`ClusterApi::client_relay`].
#[derive(Debug)]
pub struct ClientRelay(Inner);

#[derive(Debug)]
enum Inner {
    /// A Copilot SDK client: the gateway catches it up from the log itself.
    Copilot(Relay),
    /// An editor: the new owner replays what it missed.
    Acp(AcpRelay),
    /// An AHP client: not re-attached (it reconnects and takes fresh snapshots).
    Ahp(AhpRelay),
}

impl ClusterApi<'_> {
    /// A new [`ClientRelay`] for the connection `conn`, in its dialect (the Copilot SDK
    /// protocol's when `conn` is unknown).
    pub fn client_relay(&self, conn: ConnId) -> ClientRelay {
        ClientRelay::new(
            self.host()
                .connection_dialect(conn)
                .unwrap_or(Dialect::CopilotSdk),
        )
    }
}

impl ClientRelay {
    /// A relay that follows a client speaking `dialect`.
    pub fn new(dialect: Dialect) -> ClientRelay {
        ClientRelay(match dialect {
            Dialect::Acp => Inner::Acp(AcpRelay::default()),
            Dialect::Ahp => Inner::Ahp(AhpRelay::default()),
            _ => Inner::Copilot(Relay::default()),
        })
    }

    /// A frame the client sends to the owner; the body to relay instead, if it is rewritten.
    pub fn client_sent(&mut self, body: &[u8]) -> Option<Bytes> {
        match &mut self.0 {
            Inner::Copilot(r) => r.client_sent(body),
            Inner::Acp(r) => r.client_sent(body),
            Inner::Ahp(r) => r.client_sent(body),
        }
    }

    /// A frame of the owner for the client: whether to deliver it (the answers of the
    /// gateway's own re-attachments are not the client's).
    pub fn owner_sent(&mut self, body: &[u8]) -> bool {
        match &mut self.0 {
            Inner::Copilot(r) => r.owner_sent(body),
            Inner::Acp(r) => r.owner_sent(body),
            Inner::Ahp(r) => r.owner_sent(body),
        }
    }

    /// An event notification of the owner, its head read ([`RelayedEventHead`]): whether to
    /// deliver it.
    pub fn owner_sent_event(&mut self, head: &RelayedEventHead) -> bool {
        match &mut self.0 {
            Inner::Copilot(r) => r.owner_sent_event(head),
            Inner::Acp(_) | Inner::Ahp(_) => true,
        }
    }

    /// The error answers of every request the owner has not answered, in the order the
    /// client sent them (each answered once).
    pub fn fail_pending(&mut self, reason: &str) -> Vec<Bytes> {
        match &mut self.0 {
            Inner::Copilot(r) => r.fail_pending(reason),
            Inner::Acp(r) => r.fail_pending(reason),
            Inner::Ahp(r) => r.fail_pending(reason),
        }
    }

    /// [`ClientRelay::fail_pending`] after the owner died: a Copilot SDK client's requests
    /// that end with a turn are answered when the catch-up ends the turn the new owner
    /// interrupts ([`ClientRelay::catch_up`], [`ClientRelay::fail_turn_waiters`]).
    pub fn fail_pending_after_owner_died(&mut self, reason: &str) -> Vec<Bytes> {
        match &mut self.0 {
            Inner::Copilot(r) => r.fail_pending_but_turns(reason),
            Inner::Acp(r) => r.fail_pending(reason),
            Inner::Ahp(r) => r.fail_pending(reason),
        }
    }

    /// [`ClientRelay::fail_pending`] after the link broke (the owner, which served it as
    /// relayed connection `member`, still answers), except for the requests that end with a
    /// turn, which the owner answers on the next link.
    pub fn fail_pending_but_turns_at(&mut self, member: u64, reason: &str) -> Vec<Bytes> {
        match &mut self.0 {
            Inner::Copilot(r) => r.fail_pending_but_turns_at(member, reason),
            Inner::Acp(r) => r.fail_pending_but_prompts_at(member, reason),
            Inner::Ahp(r) => r.fail_pending(reason),
        }
    }

    /// The sessions the client is attached to through this relay.
    pub fn sessions(&self) -> Vec<String> {
        match &self.0 {
            Inner::Copilot(r) => r.sessions(),
            Inner::Acp(r) => r.sessions(),
            Inner::Ahp(r) => r.sessions(),
        }
    }

    /// The requests that re-attach the client to a (new) owner, to send first on its link.
    pub fn reattach(&mut self) -> Vec<Bytes> {
        match &mut self.0 {
            Inner::Copilot(r) => r.reattach(),
            Inner::Acp(r) => r.reattach(),
            Inner::Ahp(_) => Vec::new(),
        }
    }

    /// Whether the client follows its sessions to a new owner (or a new link) when the owner
    /// dies or the link breaks; an AHP client does not: its connection ends and it
    /// reconnects, taking fresh snapshots.
    pub fn reattaches(&self) -> bool {
        !matches!(self.0, Inner::Ahp(_))
    }

    /// A re-attachment sent by [`ClientRelay::reattach`] is still unanswered.
    pub fn reattachments_open(&self) -> bool {
        self.reattachments().any_open()
    }

    /// `body` (of the owner) answers a re-attachment.
    pub fn is_reattachment_answer(&self, body: &[u8]) -> bool {
        self.reattachments().is_answer(body)
    }

    /// The re-attachments the owner refused: session and why.
    pub fn take_refused(&mut self) -> Vec<(String, String)> {
        match &mut self.0 {
            Inner::Copilot(r) => r.replays.take_refused(),
            Inner::Acp(r) => r.replays.take_refused(),
            Inner::Ahp(r) => r.replays.take_refused(),
        }
    }

    fn reattachments(&self) -> &crate::host::cluster::relay_requests::Reattachments {
        match &self.0 {
            Inner::Copilot(r) => &r.replays,
            Inner::Acp(r) => &r.replays,
            Inner::Ahp(r) => &r.replays,
        }
    }

    /// `body`, a frame of the owner, was delivered to the client (an editor's updates are
    /// remembered until their position comes).
    pub fn delivered(&mut self, body: &Bytes) {
        if let Inner::Acp(r) = &mut self.0 {
            r.delivered(body);
        }
    }

    /// The frames a new owner sent before answering the re-attachments, without an editor's
    /// updates it already received (its owner replays what follows the last position the
    /// client got); `body` reads a held frame's body.
    pub fn skip_replayed<T>(&mut self, held: Vec<T>, body: impl Fn(&T) -> &[u8]) -> Vec<T> {
        match &mut self.0 {
            Inner::Acp(r) => r.skip_replayed(held, body),
            Inner::Copilot(_) | Inner::Ahp(_) => held,
        }
    }

    /// The gateway catches the client up from the session logs after a re-attachment
    /// ([`ClientRelay::catch_up`]): a Copilot SDK client (an editor's new owner replays what
    /// it missed itself).
    pub fn catches_up_from_log(&self) -> bool {
        matches!(self.0, Inner::Copilot(_))
    }

    /// Sessions the client just resumed, with no event received yet: read the log's last
    /// sequence for each and report it with [`ClientRelay::set_floor`] before delivering the
    /// frame that made this call return them.
    pub fn floors_wanted(&mut self) -> Vec<String> {
        match &mut self.0 {
            Inner::Copilot(r) => r.floors_wanted(),
            Inner::Acp(_) | Inner::Ahp(_) => Vec::new(),
        }
    }

    /// The log's last sequence of `session` (`0`: empty), read after its resume was answered.
    pub fn set_floor(&mut self, session: &str, seq: u64) {
        if let Inner::Copilot(r) = &mut self.0 {
            r.set_floor(session, seq);
        }
    }

    /// The body to deliver instead of the last frame [`ClientRelay::owner_sent`] accepted,
    /// when it is rewritten (the gateway's own fields taken out of an answer).
    pub fn take_rewritten(&mut self) -> Option<Bytes> {
        match &mut self.0 {
            Inner::Copilot(r) => r.take_rewritten(),
            Inner::Acp(_) | Inner::Ahp(_) => None,
        }
    }

    /// The owner died and the sessions follow to a new one.
    pub fn owner_changed(&mut self) {
        if let Inner::Copilot(r) = &mut self.0 {
            r.owner_changed();
        }
    }

    /// The streaming deltas lost with a broken link, per session.
    pub fn take_gaps(&mut self) -> Vec<(String, u64)> {
        match &mut self.0 {
            Inner::Copilot(r) => r.take_gaps(),
            Inner::Acp(_) | Inner::Ahp(_) => Vec::new(),
        }
    }

    /// The frames that catch the client up on `session` from its log (`events`: sequence and
    /// stored event, in order) after a re-attachment.
    pub fn catch_up(&mut self, session: &str, events: &[(u64, Bytes)]) -> Vec<Bytes> {
        match &mut self.0 {
            Inner::Copilot(r) => r.catch_up(session, events),
            Inner::Acp(_) | Inner::Ahp(_) => Vec::new(),
        }
    }

    /// After a re-attachment and its catch-up: the end of each turn the client saw start
    /// and missed the end of (stamped `timestamp`).
    pub fn missed_idles(&mut self, timestamp: &str) -> Vec<Bytes> {
        match &mut self.0 {
            Inner::Copilot(r) => r.missed_idles(timestamp),
            Inner::Acp(_) | Inner::Ahp(_) => Vec::new(),
        }
    }

    /// The error answers of the requests waiting for a turn that no catch-up ended.
    pub fn fail_turn_waiters(&mut self) -> Vec<Bytes> {
        match &mut self.0 {
            Inner::Copilot(r) => r.fail_turn_waiters(),
            Inner::Acp(_) | Inner::Ahp(_) => Vec::new(),
        }
    }
}
