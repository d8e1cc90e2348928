//! The relay state of connections, kept by the cluster part rather than in every
//! connection: a gateway's forwarded connections (`forward.rs`) and the relay group roles of an
//! owner's connections (`relay_group.rs`), by [`ConnId`].
//!
//! The core asks it narrow questions: the fan-out and the send path only
//! [`Relays::group_of`] (nothing is looked up while no connection is a group member), the
//! input path [`Relays::is_forwarded`] (nothing is looked up while no connection is
//! forwarded), and a connection that ends takes its entries out with [`Relays::remove`].

use std::collections::BTreeMap;

use crate::host::ConnId;

use super::forward::Forwarded;
use super::relay_group::RelayRole;

/// Relay roles and forwarded-connection state, by connection.
#[derive(Debug, Default)]
pub(in crate::host) struct Relays {
    /// Relay group roles other than [`RelayRole::None`], by connection slot (the low 32 bits
    /// of the id, as in the connection table), with the full id (a later connection in the
    /// same slot is not confused with it).
    roles: Vec<Option<(ConnId, RelayRole)>>,
    /// How many connections are members of a group.
    members: usize,
    /// The connections relaying sessions to their owners (a gateway's side).
    forwarded: BTreeMap<ConnId, Forwarded>,
}

fn slot(conn: ConnId) -> usize {
    (conn.0 & 0xFFFF_FFFF) as usize
}

impl Relays {
    /// The relay group of `conn` when it is a member (its frames go there): the one question
    /// the fan-out asks per connection, a length check while no connection is a member.
    #[inline]
    pub(in crate::host) fn group_of(&self, conn: ConnId) -> Option<ConnId> {
        if self.members == 0 {
            return None;
        }
        match self.role(conn) {
            RelayRole::Member(group) => Some(group),
            _ => None,
        }
    }

    /// `conn`'s part in relay groups.
    pub(in crate::host) fn role(&self, conn: ConnId) -> RelayRole {
        match self.roles.get(slot(conn)) {
            Some(Some((id, role))) if *id == conn => *role,
            _ => RelayRole::None,
        }
    }

    /// Sets `conn`'s part in relay groups.
    pub(in crate::host) fn set_role(&mut self, conn: ConnId, role: RelayRole) {
        let at = slot(conn);
        if self.roles.len() <= at {
            if role == RelayRole::None {
                return;
            }
            self.roles.resize(at + 1, None);
        }
        let entry = &mut self.roles[at];
        match entry {
            // Another connection's (`conn` has no role): left alone.
            Some((id, _)) if *id != conn && role == RelayRole::None => return,
            // A member before (or a stale entry of the slot's former connection).
            Some((_, RelayRole::Member(_))) => self.members -= 1,
            _ => {}
        }
        if let RelayRole::Member(_) = role {
            self.members += 1;
        }
        *entry = (role != RelayRole::None).then_some((conn, role));
    }

    /// Some connection is a relay group member.
    pub(in crate::host) fn has_members(&self) -> bool {
        self.members > 0
    }

    /// The members of `group`.
    pub(in crate::host) fn members_of(&self, group: ConnId) -> impl Iterator<Item = ConnId> + '_ {
        self.roles
            .iter()
            .flatten()
            .filter_map(move |(id, role)| (*role == RelayRole::Member(group)).then_some(*id))
    }

    /// `conn` relays sessions to their owners (a length check while none does).
    #[inline]
    pub(in crate::host) fn is_forwarded(&self, conn: ConnId) -> bool {
        !self.forwarded.is_empty() && self.forwarded.contains_key(&conn)
    }

    /// `conn` is neither forwarded nor in a relay group: a plain client of this host.
    pub(in crate::host) fn is_plain(&self, conn: ConnId) -> bool {
        !self.is_forwarded(conn) && self.role(conn) == RelayRole::None
    }

    /// What `conn` keeps of its forwarded sessions, if it is forwarded.
    pub(in crate::host) fn forwarded(&self, conn: ConnId) -> Option<&Forwarded> {
        self.forwarded.get(&conn)
    }

    /// What `conn` keeps of its forwarded sessions, mutably.
    pub(in crate::host) fn forwarded_mut(&mut self, conn: ConnId) -> Option<&mut Forwarded> {
        self.forwarded.get_mut(&conn)
    }

    /// What `conn` keeps of its forwarded sessions, made forwarded now if it was not.
    pub(in crate::host) fn forward(&mut self, conn: ConnId) -> &mut Forwarded {
        self.forwarded.entry(conn).or_default()
    }

    /// `conn` is gone: its role before, and whether it was forwarded.
    pub(in crate::host) fn remove(&mut self, conn: ConnId) -> (RelayRole, bool) {
        let role = self.role(conn);
        self.set_role(conn, RelayRole::None);
        (role, self.forwarded.remove(&conn).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_count_members_and_slots_do_not_confuse_connections() {
        let mut relays = Relays::default();
        let (group, member) = (ConnId(0), ConnId(3));
        assert_eq!(relays.group_of(member), None);
        relays.set_role(group, RelayRole::Group);
        relays.set_role(member, RelayRole::Member(group));
        assert!(relays.has_members());
        assert_eq!(relays.group_of(member), Some(group));
        // The same slot, a later generation: another connection.
        let later = ConnId((1 << 32) | 3);
        assert_eq!(relays.role(later), RelayRole::None);
        relays.set_role(later, RelayRole::None);
        assert_eq!(relays.group_of(member), Some(group));
        assert_eq!(relays.members_of(group).collect::<Vec<_>>(), [member]);
        assert_eq!(relays.remove(member), (RelayRole::Member(group), false));
        assert!(!relays.has_members());
        relays.forward(member);
        assert!(relays.is_forwarded(member) && !relays.is_plain(member));
        assert_eq!(relays.remove(member), (RelayRole::None, true));
        assert!(relays.is_plain(member));
    }
}
