//! The gateway node's side of a relay group with its members' ends: the [`GroupIn`] machine,
//! and for each member the owner named, whatever the runtime hands that member's frames to
//! (a gateway's channel, a connection). Each frame, member end and group end comes out
//! addressed to those ends.

use std::collections::BTreeMap;

use super::group_in::{GroupIn, GroupInEvent, OwnerFrame};

/// What a group with members hands out, addressed to the members' ends `M`.
#[derive(Debug)]
pub enum MembersEvent<M> {
    /// One owner frame for these members (those registered here).
    Frame {
        /// The members' ends.
        to: Vec<M>,
        /// The frame.
        frame: OwnerFrame,
    },
    /// The owner ended this member; `link_broke`: its link broke (why).
    MemberEnded {
        /// The member's end.
        member: M,
        /// Why its link broke, if it broke.
        link_broke: Option<String>,
    },
    /// The group ended: these members end with it, `broken` with the reason, otherwise
    /// closed by the owner. Nothing follows.
    Ended {
        /// The ends of the members left.
        members: Vec<M>,
        /// Why it broke, if it broke.
        broken: Option<String>,
    },
}

/// A relay group on the gateway node, with its members' ends.
#[derive(Debug)]
pub struct GroupMembers<M> {
    /// The group's machine (fed messages, the time and openings by the runtime).
    pub machine: GroupIn,
    members: BTreeMap<u64, M>,
}

impl<M: Clone> GroupMembers<M> {
    /// A group run by `machine`, with no member yet.
    pub fn new(machine: GroupIn) -> Self {
        GroupMembers {
            machine,
            members: BTreeMap::new(),
        }
    }

    /// Registers the owner's member `member` with its end; `false` when the group ended, or
    /// when the owner named a member the group has already (a confused owner: the member
    /// registered first keeps its frames).
    pub fn add_member(&mut self, member: u64, end: M) -> bool {
        if self.members.contains_key(&member) || !self.machine.add_member(member) {
            return false;
        }
        self.members.insert(member, end);
        true
    }

    /// The next thing the group hands out.
    pub fn poll_event(&mut self) -> Option<MembersEvent<M>> {
        Some(match self.machine.poll_event()? {
            GroupInEvent::Frame { members, frame } => MembersEvent::Frame {
                to: members
                    .iter()
                    .filter_map(|m| self.members.get(m).cloned())
                    .collect(),
                frame,
            },
            GroupInEvent::MemberEnded { member, link_broke } => {
                match self.members.remove(&member) {
                    Some(member) => MembersEvent::MemberEnded { member, link_broke },
                    None => return self.poll_event(),
                }
            }
            GroupInEvent::Ended { broken, .. } => MembersEvent::Ended {
                members: std::mem::take(&mut self.members).into_values().collect(),
                broken,
            },
        })
    }
}
