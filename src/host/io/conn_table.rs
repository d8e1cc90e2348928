//! The host's connections in a slab: O(1) lookup by [`ConnId`], deterministic iteration.

use bytes::Bytes;

use crate::host::io::conn::Conn;
use crate::host::io::outbox::SharedFrames;
use crate::host::ConnId;

/// One slot: the connection living there, and how many times the slot was reused.
struct Slot {
    generation: u32,
    conn: Option<Conn>,
}

/// Connections indexed by [`ConnId`]: the low 32 bits are a slot index, the high 32 bits the
/// slot's generation, so an id is never confused with a later connection in the same slot.
///
/// The table also keeps the frames queued on several connections at once
/// ([`SharedFrames`]): every outbox operation that may queue, take or drop a frame goes
/// through a method that lends both, and a removed connection's queue is released here.
#[derive(Default)]
pub(in crate::host) struct ConnTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    len: usize,
    shared: SharedFrames,
}

impl ConnTable {
    fn split(id: ConnId) -> (usize, u32) {
        ((id.0 & 0xFFFF_FFFF) as usize, (id.0 >> 32) as u32)
    }

    /// Stores `conn` and returns its new id.
    pub(in crate::host) fn insert(&mut self, conn: Conn) -> ConnId {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.generation = slot.generation.wrapping_add(1);
            slot.conn = Some(conn);
            return ConnId((u64::from(slot.generation) << 32) | u64::from(index));
        }
        let index = self.slots.len() as u64;
        self.slots.push(Slot {
            generation: 0,
            conn: Some(conn),
        });
        ConnId(index)
    }

    /// The connection with this id, if it is still open.
    pub(in crate::host) fn get(&self, id: &ConnId) -> Option<&Conn> {
        let (index, generation) = Self::split(*id);
        let slot = self.slots.get(index)?;
        (slot.generation == generation).then_some(())?;
        slot.conn.as_ref()
    }

    /// The connection with this id, mutably.
    pub(in crate::host) fn get_mut(&mut self, id: &ConnId) -> Option<&mut Conn> {
        let (index, generation) = Self::split(*id);
        let slot = self.slots.get_mut(index)?;
        (slot.generation == generation).then_some(())?;
        slot.conn.as_mut()
    }

    /// The connection with this id and the shared-frame table its outbox needs.
    #[inline]
    pub(in crate::host) fn get_mut_and_frames(
        &mut self,
        id: &ConnId,
    ) -> Option<(&mut Conn, &mut SharedFrames)> {
        let (index, generation) = Self::split(*id);
        let slot = self.slots.get_mut(index)?;
        (slot.generation == generation).then_some(())?;
        Some((slot.conn.as_mut()?, &mut self.shared))
    }

    /// The next frame queued for `id`.
    #[inline]
    pub(in crate::host) fn pop_frame(&mut self, id: &ConnId) -> Option<Bytes> {
        let (c, shared) = self.get_mut_and_frames(id)?;
        c.outbox.pop(shared)
    }

    /// Removes and returns the connection; whatever it still had queued is discarded.
    pub(in crate::host) fn remove(&mut self, id: &ConnId) -> Option<Conn> {
        let (index, generation) = Self::split(*id);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let mut conn = slot.conn.take()?;
        conn.outbox.clear(&mut self.shared);
        self.free.push(index as u32);
        self.len -= 1;
        Some(conn)
    }

    /// Open connections in slot order, with the shared-frame table.
    pub(in crate::host) fn iter_mut_and_frames(
        &mut self,
    ) -> (impl Iterator<Item = (ConnId, &mut Conn)>, &mut SharedFrames) {
        let conns = self.slots.iter_mut().enumerate().filter_map(|(i, slot)| {
            let id = ConnId((u64::from(slot.generation) << 32) | i as u64);
            slot.conn.as_mut().map(|c| (id, c))
        });
        (conns, &mut self.shared)
    }

    /// The shared-frame table.
    pub(in crate::host) fn frames_mut(&mut self) -> &mut SharedFrames {
        &mut self.shared
    }

    /// Shared frames still queued somewhere (0 once every outbox is empty).
    #[cfg(test)]
    pub(in crate::host) fn shared_frames(&self) -> usize {
        self.shared.len()
    }

    /// Number of open connections.
    pub(in crate::host) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameLimits, Framing};
    use crate::host::dialect::DialectId;

    fn conn() -> Conn {
        Conn::new(
            DialectId(0),
            Box::new(()),
            Framing::ContentLength,
            FrameLimits::default(),
            1024,
            true,
        )
    }

    #[test]
    fn ids_of_removed_connections_never_match_later_ones() {
        let mut t = ConnTable::default();
        let a = t.insert(conn());
        let b = t.insert(conn());
        assert_eq!(t.len(), 2);
        assert!(t.remove(&a).is_some());
        assert!(t.remove(&a).is_none());
        let c = t.insert(conn());
        assert_ne!(a, c, "the slot is reused with a new generation");
        assert!(t.get(&a).is_none());
        assert!(t.get(&c).is_some() && t.get(&b).is_some());
        assert_eq!(
            t.iter_mut_and_frames()
                .0
                .map(|(id, _)| id)
                .collect::<Vec<_>>(),
            vec![c, b]
        );
        assert_eq!(t.len(), 2);
    }
}
