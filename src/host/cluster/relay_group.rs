//! Relay groups: one ordered stream per gateway node for the connections it relays.
//!
//! A cluster node relays each client of a remote session as an ordinary connection of the
//! session's owner ([`ClusterApi::forward_session_lookup`] on the gateway's side). Without a group
//! the owner encodes and sends every event once per relayed client, so fan-out does not
//! scale with the number of gateway nodes. A **relay group** is a connection of the owner
//! that stands for one gateway node: its **members** (the gateway's relayed connections,
//! joined with [`ClusterApi::join_relay_group`]) queue nothing of their own. Every frame for a
//! member goes to the group instead, and an event that reaches several members of a group
//! is queued there **once**, naming the members it is for. The gateway reads the group's
//! frames ([`RelayFrame::parse`]) and fans them out to its clients with the members' own
//! audience already applied (the owner decided it, as for its own clients). A member's
//! responses, server-to-client requests and events travel in the one stream, so the gateway
//! sees them in the owner's order.
//!
//! The group's frame bodies:
//! * a plain body (a JSON-RPC message): for **every** member of the group (notifications
//!   broadcast to every connection, such as `session.lifecycle`);
//! * `@3,5,9\n` then a body: for members 3, 5 and 9 (their [`ConnId::as_u64`]);
//! * `@!3\n` then a reason: member 3's connection ended here (after every frame for it
//!   queued before);
//! * `@?3\n` then a reason: member 3 was ended because its link from the gateway broke
//!   ([`ClusterApi::relay_member_link_broke`]); the gateway may attach its client again;
//! * `@?\n` then a reason: the group's last frame when the owner closes it (it fell a whole
//!   outbox budget behind); every member ends with it, and the gateway may attach their
//!   clients again.
//!
//! Members must speak the group's dialect (their framing may differ). A group frame's head
//! ends with a newline, so the group connection must not use NDJSON framing. When the group
//! connection ends, every member ends with it; when a member ends, the group carries on.

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

use crate::frame::{encode_frame_parts, Framing};
use crate::Timestamp;

use crate::host::{ConnId, Host, OutboxOverflow};

/// A connection's part in relay groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::host) enum RelayRole {
    /// An ordinary connection.
    #[default]
    None,
    /// A member: its frames go to this group connection.
    Member(ConnId),
    /// A group connection: it carries its members' frames.
    Group,
}

impl RelayRole {
    /// Whether it is a relay group's connection.
    pub(in crate::host) fn is_group(self) -> bool {
        self == RelayRole::Group
    }

    /// Whether it is a member of a relay group.
    pub(in crate::host) fn is_member(self) -> bool {
        matches!(self, RelayRole::Member(_))
    }
}

/// The relay side of a connection's end.
impl Host {
    /// Connection `conn` ended (end of input) with relay role `role` and, when `forwarded`,
    /// sessions relayed to their owner: a member's group learns its end, a group's members
    /// end, the runtime learns a forwarded connection closed. `false` when nothing else of
    /// the connection may be resolved: a member whose runtime is stopping (its gateway
    /// follows the session to the next owner, which closes the turn left open).
    pub(in crate::host) fn relay_conn_ended(
        &mut self,
        conn: ConnId,
        role: RelayRole,
        forwarded: bool,
    ) -> bool {
        match role {
            RelayRole::Member(_) if self.runtime_stopping => return false,
            RelayRole::Member(group) => {
                self.announce_member_end(group, conn, "the relayed connection ended")
            }
            RelayRole::Group => self.end_group_members(conn),
            RelayRole::None => {}
        }
        if forwarded {
            self.outputs.push_back(crate::host::Output::Cluster(
                crate::host::ClusterOutput::ForwardClosed { conn },
            ));
        }
        true
    }

    /// Connection `conn`, relay role `role`, is being closed with `reason` (`body` is its
    /// last frame's body): a member's last frame and end travel in its group's stream, in
    /// order; a group's members end with it.
    pub(in crate::host) fn relay_conn_closing(
        &mut self,
        conn: ConnId,
        role: RelayRole,
        body: &[u8],
        reason: &str,
    ) {
        match role {
            RelayRole::Member(group) => {
                self.queue_for_members(group, &[conn], body);
                self.announce_member_end(group, conn, reason);
            }
            RelayRole::Group => self.end_group_members(conn),
            RelayRole::None => {}
        }
    }
}

/// One frame of a relay group's stream, as the gateway reads it.
#[derive(Debug, PartialEq, Eq)]
pub enum RelayFrame<'a> {
    /// A body for every member of the group.
    All(&'a [u8]),
    /// A body for the listed members.
    To {
        /// The members' ids ([`ConnId::as_u64`] on the owner).
        members: SmallVec<[u64; 4]>,
        /// The frame body (a JSON-RPC message).
        body: &'a [u8],
    },
    /// A member's connection ended on the owner, after every frame for it before this one.
    Ended {
        /// The member's id.
        member: u64,
        /// Why.
        reason: &'a [u8],
        /// It ended because its link from the gateway broke: its client may be attached
        /// again.
        link_broke: bool,
    },
    /// The owner closed the group (it could not keep up): its last frame. Every member's
    /// client may be attached again.
    GroupEnded {
        /// Why.
        reason: &'a [u8],
    },
}

/// A group frame that is not one of [`RelayFrame`]'s forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRelayFrame;

impl std::fmt::Display for BadRelayFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("malformed relay group frame")
    }
}

impl std::error::Error for BadRelayFrame {}

impl<'a> RelayFrame<'a> {
    /// Reads one group frame body.
    pub fn parse(body: &'a [u8]) -> Result<Self, BadRelayFrame> {
        let Some(rest) = body.strip_prefix(b"@") else {
            return Ok(RelayFrame::All(body));
        };
        let newline = rest.iter().position(|&b| b == b'\n').ok_or(BadRelayFrame)?;
        let (head, tail) = (&rest[..newline], &rest[newline + 1..]);
        let ended = match head.first() {
            Some(b'!') => Some(false),
            Some(b'?') => Some(true),
            _ => None,
        };
        if head == b"?" {
            return Ok(RelayFrame::GroupEnded { reason: tail });
        }
        if let Some(link_broke) = ended {
            return Ok(RelayFrame::Ended {
                member: parse_id(&head[1..])?,
                reason: tail,
                link_broke,
            });
        }
        let members = head
            .split(|&b| b == b',')
            .map(parse_id)
            .collect::<Result<SmallVec<[u64; 4]>, _>>()?;
        Ok(RelayFrame::To {
            members,
            body: tail,
        })
    }
}

/// A decimal member id.
fn parse_id(digits: &[u8]) -> Result<u64, BadRelayFrame> {
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(BadRelayFrame);
    }
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(BadRelayFrame)
}

/// The head of a group frame for `members` (`@3,5\n`; the body follows it).
pub(in crate::host) fn addressed_head(members: &[ConnId]) -> SmallVec<[u8; 32]> {
    let mut head = SmallVec::new();
    head.push(b'@');
    for (i, member) in members.iter().enumerate() {
        if i > 0 {
            head.push(b',');
        }
        head.extend_from_slice(itoa(member.as_u64(), &mut [0u8; 20]));
    }
    head.push(b'\n');
    head
}

/// `n` in decimal, written into `buf`.
fn itoa(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[start..];
        }
    }
}

/// The framed group frame `head` then `body`, for a group connection using `framing`.
pub(in crate::host) fn group_frame(framing: Framing, head: &[u8], body: &[u8]) -> Bytes {
    let mut buf = BytesMut::new();
    encode_frame_parts(framing, head, body, &mut buf);
    buf.freeze()
}

/// The result field of a `session.resume` that a cluster gateway sent to re-attach a client
/// (params `agentwireRelayReattach: true`): whether the session's agent is in a turn. A
/// client that missed the turn's `session.idle` while its link was broken is sent one when
/// it is not. Clients' own resumes never carry it.
pub const RELAY_SESSION_BUSY: &str = "agentwireSessionBusy";

/// The result field of a `session.create` / `session.resume` answered to a relay group member
/// (a client a cluster gateway relays): the streaming deltas the session emitted so far,
/// `[main agent, sub-agents]`. The gateway takes it out of the answer, counts the deltas it
/// relays, and so knows how many its client lost when a link breaks and the client is
/// attached again to the same owner.
pub const RELAY_DELTAS_EMITTED: &str = "agentwireDeltasEmitted";

/// The result field of a `session.resume` answered to a relay group member: the id of the
/// session's last persisted event when the client attached (`null` for none). Every later
/// event reaches the client live; the gateway takes the field out of the answer and, should
/// the owner die before the client received any event, catches the client up from the log
/// after exactly that event.
pub const RELAY_LAST_EVENT: &str = "agentwireLastEventId";

/// A param of a gateway's re-attaching `session.resume` (with `agentwireRelayReattach`) after
/// the link of a client it relays broke while this host stayed the owner: the relayed
/// connection (its number, as the owner answered the link's opening) the new one replaces.
/// With [`RELAY_AWAITING`], the `session.sendAndWait`s of the former connection are answered
/// on the new one.
pub const RELAY_FORMER_MEMBER: &str = "agentwireFormerMember";

/// A param of a re-attaching `session.resume` naming [`RELAY_FORMER_MEMBER`]: the request ids
/// of the former connection's `session.sendAndWait`s its client still waits for. Each is
/// answered once on the new connection: at once when its turn ended meanwhile (the answer
/// may have been lost with the link), when its turn ends otherwise, or with an error when
/// the owner kept nothing of it (it keeps a relayed caller's turn for
/// [`RELAYED_CALLER_KEPT_FOR`] after its connection ended or its turn did).
pub const RELAY_AWAITING: &str = "agentwireAwaiting";

/// How long an owner keeps the `session.sendAndWait` callers of a relayed connection that
/// ended, and the outcomes of relayed callers' turns, for a re-attachment
/// ([`RELAY_AWAITING`]).
pub const RELAYED_CALLER_KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// The id of the set-up requests a relaying node replays on the owner
/// ([`ClusterApi::relay_handshake`]); their answers are not the client's.
pub const RELAY_HANDSHAKE_ID: &str = "agentwire-relay-handshake";

/// The body of `frame`, a frame in `framing`.
fn unframe(framing: Framing, frame: &[u8]) -> &[u8] {
    match framing {
        Framing::Ndjson => frame.strip_suffix(b"\n").unwrap_or(frame),
        Framing::ContentLength | Framing::Http => frame
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(frame, |at| &frame[at + 4..]),
    }
}

impl Host {
    /// See [`ClusterApi::relay_handshake`].
    pub(in crate::host) fn relay_handshake(&self, conn: ConnId) -> Vec<Vec<u8>> {
        let Some(c) = self.conns.get(&conn) else {
            return Vec::new();
        };
        self.dialects[c.dialect.index()].relay_handshake(self, conn)
    }

    /// Queues the framed `frame` of relay group member `member` on its group (a dialect
    /// that frames its own bodies, e.g. ACP's shared update lines).
    pub(in crate::host) fn queue_member_frame(
        &mut self,
        group: ConnId,
        member: ConnId,
        frame: &[u8],
    ) {
        let Some(framing) = self.conns.get(&member).map(|c| c.framing) else {
            return;
        };
        self.queue_for_members(group, &[member], unframe(framing, frame));
    }

    /// See [`ClusterApi::join_relay_group`].
    pub(in crate::host) fn join_relay_group(&mut self, member: ConnId, group: ConnId) -> bool {
        if member == group {
            return false;
        }
        let (Some(m), Some(g)) = (self.conns.get(&member), self.conns.get(&group)) else {
            return false;
        };
        if m.closing
            || g.closing
            || m.dialect != g.dialect
            || g.framing == Framing::Ndjson
            || self.relays.role(member) != RelayRole::None
            || matches!(self.relays.role(group), RelayRole::Member(_))
        {
            return false;
        }
        self.relays.set_role(group, RelayRole::Group);
        self.relays.set_role(member, RelayRole::Member(group));
        true
    }

    /// See [`ClusterApi::relay_member_link_broke`].
    pub(in crate::host) fn relay_member_link_broke(
        &mut self,
        now: Timestamp,
        member: ConnId,
        reason: &str,
    ) {
        self.advance_time(now);
        if self.conns.get(&member).is_none() {
            return;
        }
        let Some(group) = self.relays.group_of(member) else {
            return;
        };
        self.relays.set_role(member, RelayRole::None);
        let head = format!("@?{}\n", member.as_u64());
        self.queue_on_group(group, head.as_bytes(), reason.as_bytes());
    }

    /// The runtime is stopping: every connection is about to end, each with the runtime's
    /// own farewell. From now on a relay group member's end is not announced in its group
    /// (the group's farewell, written after everything queued for its members, tells the
    /// gateway that this node stops, rather than that it ended their connections), and
    /// nothing of a member is resolved when its connection ends: its client is not gone, its
    /// gateway follows the session to the next owner, which closes the turn left open (its
    /// prompts are not denied here, its tool calls not failed). A request a plain client
    /// sends from now on is answered at once with a `-32000 the server is shutting down`
    /// error (the runtime keeps its connections open briefly for that).
    pub fn runtime_stopping(&mut self) {
        self.runtime_stopping = true;
    }

    /// The streaming deltas `session` emitted since it was loaded here: the main agent's and
    /// the sub-agents' (`[0, 0]` when it is not loaded).
    pub(crate) fn deltas_emitted(&self, session: &str) -> [u64; 2] {
        self.sessions
            .get(session)
            .map_or([0; 2], |l| l.deltas_emitted)
    }

    /// Whether `conn` is gone or closing (its sessions are being detached because it ends,
    /// not because it asked).
    pub(crate) fn is_conn_ending(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_none_or(|c| c.closing)
    }

    /// Whether `conn` is a member of a relay group (a client a cluster gateway relays here).
    pub(crate) fn is_relay_member(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some() && self.relays.group_of(conn).is_some()
    }

    /// Queues `body` for the members `members` of `group`.
    pub(in crate::host) fn queue_for_members(
        &mut self,
        group: ConnId,
        members: &[ConnId],
        body: &[u8],
    ) {
        self.queue_on_group(group, &addressed_head(members), body);
    }

    /// Announces on its group that member `member` ended, with `reason`.
    pub(in crate::host) fn announce_member_end(
        &mut self,
        group: ConnId,
        member: ConnId,
        reason: &str,
    ) {
        if self.runtime_stopping {
            return;
        }
        let head = format!("@!{}\n", member.as_u64());
        self.queue_on_group(group, head.as_bytes(), reason.as_bytes());
    }

    /// Queues the group frame `head` then `body` on `group` (durable: the gateway applies its
    /// own clients' budgets); a group that cannot keep up is closed, and its members with it.
    pub(in crate::host) fn queue_on_group(&mut self, group: ConnId, head: &[u8], body: &[u8]) {
        let Some(framing) = self.conns.get(&group).map(|g| g.framing) else {
            return;
        };
        self.push_on_group(group, group_frame(framing, head, body));
    }

    /// Queues the framed group frame `frame` on `group` (see [`Host::queue_on_group`]).
    pub(in crate::host) fn push_on_group(&mut self, group: ConnId, frame: Bytes) {
        let Some((g, shared)) = self.conns.get_mut_and_frames(&group) else {
            return;
        };
        if g.closing {
            return;
        }
        match g.outbox.push(frame, false, shared) {
            Ok(became_ready) => {
                if became_ready && !g.in_ready {
                    g.in_ready = true;
                    self.ready.push_back(group);
                }
            }
            Err(OutboxOverflow::DurableDoesNotFit) => self.fail_slow_consumer(group),
        }
    }

    /// The relay groups with a member attached to `session` (empty when there are no groups).
    pub(in crate::host) fn groups_attached_to(&self, session: &str) -> SmallVec<[ConnId; 2]> {
        let mut groups = SmallVec::new();
        if !self.relays.has_members() {
            return groups;
        }
        let Some(live) = self.sessions.get(session) else {
            return groups;
        };
        for conn in live.session.attached.keys() {
            if let Some(group) = self.relays.group_of(*conn) {
                if !groups.contains(&group) {
                    groups.push(group);
                }
            }
        }
        groups
    }

    /// `group` ended (it was closed or its peer is gone): so does every member.
    pub(in crate::host) fn end_group_members(&mut self, group: ConnId) {
        if self.runtime_stopping {
            // The members end with the runtime, as it stops (see `Host::runtime_stopping`).
            return;
        }
        let members: SmallVec<[ConnId; 8]> = self.relays.members_of(group).collect();
        for &member in &members {
            self.relays.set_role(member, RelayRole::None);
        }
        for member in members {
            self.fail_connection(
                member,
                -32603,
                "the relay stream of this connection's gateway node ended".to_owned(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_form_and_refuses_junk() {
        assert_eq!(
            RelayFrame::parse(br#"{"jsonrpc":"2.0"}"#),
            Ok(RelayFrame::All(br#"{"jsonrpc":"2.0"}"#))
        );
        assert_eq!(
            RelayFrame::parse(b"@3,5,18446744073709551615\n{}"),
            Ok(RelayFrame::To {
                members: SmallVec::from_slice(&[3, 5, u64::MAX]),
                body: b"{}"
            })
        );
        assert_eq!(
            RelayFrame::parse(b"@!7\nbye"),
            Ok(RelayFrame::Ended {
                member: 7,
                reason: b"bye",
                link_broke: false
            })
        );
        assert_eq!(
            RelayFrame::parse(b"@?\nbehind"),
            Ok(RelayFrame::GroupEnded { reason: b"behind" })
        );
        assert_eq!(
            RelayFrame::parse(b"@?7\n"),
            Ok(RelayFrame::Ended {
                member: 7,
                reason: b"",
                link_broke: true
            })
        );
        for junk in [
            &b"@"[..],
            b"@3",
            b"@\n{}",
            b"@3,\n{}",
            b"@x\n{}",
            b"@!\n",
            b"@99999999999999999999999\n{}",
        ] {
            assert_eq!(RelayFrame::parse(junk), Err(BadRelayFrame), "{junk:?}");
        }
    }

    #[test]
    fn addressed_heads_round_trip() {
        let members = [ConnId(1), ConnId(u64::MAX), ConnId(42)];
        let mut body = addressed_head(&members).to_vec();
        body.extend_from_slice(b"{}");
        let Ok(RelayFrame::To {
            members: read,
            body,
        }) = RelayFrame::parse(&body)
        else {
            panic!("not addressed");
        };
        assert_eq!(&read[..], &[1, u64::MAX, 42]);
        assert_eq!(body, b"{}");
    }
}
