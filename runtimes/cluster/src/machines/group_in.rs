//! The gateway node's side of a relay group: the owner's group frames received in order
//! ([`Inbound`]) and handed to the members they name, an event for several members read once
//! ([`OwnerFrame`]), broadcasts kept for clients whose opening is unanswered, and the end:
//! closed by the owner, broken (a loss not repaired, silence, junk, the owner's `@?` frame),
//! or refused by the owner.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use agentwire::host::{RelayFrame, RelayedEventHead};
use bytes::Bytes;

use super::inbound::{Inbound, InboundEvent};

/// How many broadcasts an unanswered opening keeps.
pub const RECENT_LIMIT: usize = 256;

/// A frame of the owner for a relayed client: its body and, for a `session.event`, its head,
/// read once per group frame and shared by every member it is for (so a gateway does not
/// parse an event once per client).
#[derive(Debug, Clone)]
pub struct OwnerFrame {
    /// The frame body (a JSON-RPC message).
    pub body: Bytes,
    /// The head of a `session.event` body, if read.
    pub head: Option<Arc<RelayedEventHead>>,
}

impl From<Bytes> for OwnerFrame {
    /// A body whose head was not read.
    fn from(body: Bytes) -> Self {
        OwnerFrame { body, head: None }
    }
}

impl OwnerFrame {
    /// The frame `body`, its head read if it is a `session.event` as the host writes one
    /// (`jsonrpc`, then `method`): responses, requests and ACP updates are not parsed here,
    /// and a body written otherwise is read by the relay as before.
    pub fn read(body: Bytes) -> Self {
        let head = RelayedEventHead::read(&body).map(Arc::new);
        OwnerFrame { body, head }
    }
}

/// What the gateway node's side of a group hands out.
#[derive(Debug, Clone)]
pub enum GroupInEvent {
    /// One owner frame for these members (their gateways deliver it to their clients).
    Frame {
        /// The owner's member ids it is for.
        members: Vec<u64>,
        /// The frame.
        frame: OwnerFrame,
    },
    /// The owner ended member `member`; `link_broke`: its link broke (why), so its gateway
    /// attaches the client again.
    MemberEnded {
        /// The owner's member id.
        member: u64,
        /// Why its link broke, if it broke.
        link_broke: Option<String>,
    },
    /// The group ended (nothing follows): every member left ends with it, `broken` with the
    /// reason, otherwise closed by the owner.
    Ended {
        /// The members left.
        members: Vec<u64>,
        /// Why it broke, if it broke.
        broken: Option<String>,
    },
}

/// The gateway node's side of one relay group.
#[derive(Debug)]
pub struct GroupIn {
    inbound: Inbound,
    /// Members registered, until the owner ends them (a gateway that stopped relaying drops
    /// what it is still handed).
    members: BTreeMap<u64, ()>,
    /// Openings sent and not yet registered or abandoned.
    pending: usize,
    /// The broadcasts received while an opening is pending (at most [`RECENT_LIMIT`]).
    recent: VecDeque<OwnerFrame>,
    ended: bool,
    events: VecDeque<GroupInEvent>,
}

impl GroupIn {
    /// A group started (subscribed) at `now`, taking frames of up to `max_frame` bytes.
    pub fn new(max_frame: usize, now: Instant) -> Self {
        GroupIn {
            inbound: Inbound::new(max_frame, now),
            members: BTreeMap::new(),
            pending: 0,
            recent: VecDeque::new(),
            ended: false,
            events: VecDeque::new(),
        }
    }

    /// Whether the group ended.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// An opening naming this group is about to be sent: broadcasts received until it is
    /// registered or abandoned ([`GroupIn::open_done`]) are kept for it (the owner joins the
    /// client before it answers; broadcasts queued in between are the client's too).
    pub fn begin_open(&mut self) {
        self.pending += 1;
    }

    /// An opening of [`GroupIn::begin_open`] was answered (and its member registered) or
    /// abandoned.
    pub fn open_done(&mut self) {
        self.pending = self.pending.saturating_sub(1);
        if self.pending == 0 {
            self.recent.clear();
        }
    }

    /// Registers member `member` (the owner's id of the relayed connection): the broadcasts
    /// kept since the opening was sent are handed to it first. `false` once the group ended.
    pub fn add_member(&mut self, member: u64) -> bool {
        if self.ended {
            return false;
        }
        for frame in &self.recent {
            self.events.push_back(GroupInEvent::Frame {
                members: vec![member],
                frame: frame.clone(),
            });
        }
        self.members.insert(member, ());
        true
    }

    /// The owner refused an opening naming the group (it ended there).
    pub fn refused(&mut self) {
        self.end(Some(
            "the owner node ended this node's relay group".to_owned(),
        ));
    }

    /// A link message of the group arrived.
    pub fn handle_message(&mut self, payload: &Bytes) {
        self.inbound.handle_message(payload);
        self.pump();
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.inbound.handle_timeout(now);
        self.pump();
    }

    /// The group's subscription ended.
    pub fn handle_unsubscribed(&mut self) {
        self.end(None);
    }

    fn pump(&mut self) {
        while let Some(event) = self.inbound.poll_event() {
            if self.ended {
                return;
            }
            match event {
                InboundEvent::Frame(body) => {
                    if let Err(why) = self.dispatch(&body) {
                        self.end(Some(format!("relay group ended ({why})")));
                    }
                }
                InboundEvent::Closed => self.end(None),
                InboundEvent::Broken(why) => self.end(Some(why)),
            }
        }
    }

    /// Hands one group frame to its members; `Err` for junk and the owner's closing frame.
    fn dispatch(&mut self, body: &Bytes) -> Result<(), String> {
        let frame =
            RelayFrame::parse(body).map_err(|_| "the owner sent a malformed frame".to_owned())?;
        match frame {
            RelayFrame::All(part) => {
                if self.members.is_empty() && self.pending == 0 {
                    return Ok(());
                }
                let frame = OwnerFrame::read(body.slice_ref(part));
                if self.pending > 0 {
                    if self.recent.len() == RECENT_LIMIT {
                        self.recent.pop_front();
                    }
                    self.recent.push_back(frame.clone());
                }
                let members = self.members.keys().copied().collect();
                self.events
                    .push_back(GroupInEvent::Frame { members, frame });
            }
            RelayFrame::To {
                members,
                body: part,
            } => {
                let members: Vec<u64> = members
                    .into_iter()
                    .filter(|m| self.members.contains_key(m))
                    .collect();
                if !members.is_empty() {
                    let frame = OwnerFrame::read(body.slice_ref(part));
                    self.events
                        .push_back(GroupInEvent::Frame { members, frame });
                }
            }
            RelayFrame::GroupEnded { reason } => {
                return Err(format!(
                    "the owner node closed it: {}",
                    String::from_utf8_lossy(reason)
                ));
            }
            RelayFrame::Ended {
                member,
                reason,
                link_broke,
            } => {
                if self.members.remove(&member).is_some() {
                    let link_broke =
                        link_broke.then(|| String::from_utf8_lossy(reason).into_owned());
                    self.events
                        .push_back(GroupInEvent::MemberEnded { member, link_broke });
                }
            }
        }
        Ok(())
    }

    fn end(&mut self, broken: Option<String>) {
        if self.ended {
            return;
        }
        self.ended = true;
        let members = std::mem::take(&mut self.members).into_keys().collect();
        self.events
            .push_back(GroupInEvent::Ended { members, broken });
    }

    /// When [`GroupIn::handle_timeout`] is wanted next; `None` once ended.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.ended {
            return None;
        }
        self.inbound.poll_timeout()
    }

    /// The next thing to do.
    pub fn poll_event(&mut self) -> Option<GroupInEvent> {
        self.events.pop_front()
    }

    /// The next resend request to publish on the owner's resend subject.
    pub fn poll_resend_request(&mut self) -> Option<Bytes> {
        self.inbound.poll_resend_request()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machines::outbound::Outbound;

    /// `g`, fed the owner's `bodies`: what it handed out.
    fn run(g: &mut GroupIn, owner: &mut Outbound, bodies: &[&[u8]]) -> Vec<GroupInEvent> {
        for body in bodies {
            owner.send(body, usize::MAX);
        }
        while let Some(m) = owner.poll_transmit() {
            g.handle_message(&m);
        }
        std::iter::from_fn(|| g.poll_event()).collect()
    }

    /// A group with members `members`, and its owner's side.
    fn group(members: &[u64]) -> (GroupIn, Outbound) {
        let mut g = GroupIn::new(1 << 20, Instant::now());
        for m in members {
            assert!(g.add_member(*m));
        }
        (g, Outbound::new(Instant::now()))
    }

    fn frames(events: &[GroupInEvent]) -> Vec<(Vec<u64>, Bytes)> {
        events
            .iter()
            .filter_map(|e| match e {
                GroupInEvent::Frame { members, frame } => {
                    Some((members.clone(), frame.body.clone()))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn frames_reach_the_members_they_name() {
        let (mut g, mut owner) = group(&[1, 2]);
        let got = run(
            &mut g,
            &mut owner,
            &[
                b"@2,3\n{\"to\":2}",
                b"{\"all\":1}",
                b"@!2\nbye",
                b"{\"all\":2}",
            ],
        );
        assert_eq!(
            frames(&got),
            [
                (vec![2], Bytes::from_static(b"{\"to\":2}")),
                (vec![1, 2], Bytes::from_static(b"{\"all\":1}")),
                (vec![1], Bytes::from_static(b"{\"all\":2}")),
            ]
        );
        assert!(got.iter().any(|e| matches!(
            e,
            GroupInEvent::MemberEnded {
                member: 2,
                link_broke: None
            }
        )));
    }

    #[test]
    fn junk_breaks_the_group_and_ends_every_member() {
        let (mut g, mut owner) = group(&[1, 2]);
        let got = run(&mut g, &mut owner, &[b"@x\n"]);
        let [GroupInEvent::Ended {
            members,
            broken: Some(_),
        }] = &got[..]
        else {
            panic!("{got:?}");
        };
        assert_eq!(members, &[1, 2]);
        assert!(!g.add_member(3), "no member joins an ended group");
        assert_eq!(g.poll_timeout(), None);
    }

    #[test]
    fn an_event_for_several_members_is_read_once_for_all_of_them() {
        let (mut g, mut owner) = group(&[1, 2]);
        let event = format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"sessionId":"s","event":{{"id":"e1","type":"assistant.message_delta","ephemeral":true,"data":{{}}}}}}}}"#,
            RelayedEventHead::EVENT_METHOD
        );
        let got = run(&mut g, &mut owner, &[event.as_bytes()]);
        let [GroupInEvent::Frame { members, frame }] = &got[..] else {
            panic!("{got:?}");
        };
        assert_eq!(members, &[1, 2]);
        let head = frame.head.as_ref().expect("the event's head is read");
        assert_eq!((head.session.as_str(), head.id.as_str()), ("s", "e1"));
        assert!(head.ephemeral);
        let got = run(
            &mut g,
            &mut owner,
            &[b"@1,2\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"],
        );
        let [GroupInEvent::Frame { frame, .. }] = &got[..] else {
            panic!("{got:?}");
        };
        assert!(frame.head.is_none(), "a response is not read");
    }

    #[test]
    fn a_client_being_relayed_gets_the_broadcasts_queued_before_it_was_registered() {
        let (mut g, mut owner) = group(&[]);
        g.begin_open();
        // The owner joined the client and broadcast before the gateway registered it.
        run(&mut g, &mut owner, &[b"{\"lifecycle\":1}"]);
        assert!(g.add_member(1));
        g.open_done();
        assert_eq!(
            frames(&std::iter::from_fn(|| g.poll_event()).collect::<Vec<_>>()),
            [(vec![1], Bytes::from_static(b"{\"lifecycle\":1}"))]
        );
        // Without an opening in flight nothing is kept.
        let (mut g, mut owner) = group(&[]);
        run(&mut g, &mut owner, &[b"{\"lifecycle\":2}"]);
        assert!(g.add_member(2));
        assert!(g.poll_event().is_none());
    }

    #[test]
    fn a_refused_group_ends_its_members_as_broken() {
        let (mut g, _) = group(&[4]);
        g.refused();
        let got: Vec<GroupInEvent> = std::iter::from_fn(|| g.poll_event()).collect();
        assert!(matches!(
            &got[..],
            [GroupInEvent::Ended { members, broken: Some(_) }] if members == &[4]
        ));
    }
}
