//! Connection ids: how a session names the connections attached to it.

/// Identifies one connection of the host. An id is never reused for a later connection of
/// the same host (slot index plus generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub(crate) u64);

impl ConnId {
    /// The raw number (stable for the host's lifetime; useful in logs).
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "conn#{}.{}", self.0 & 0xFFFF_FFFF, self.0 >> 32)
    }
}
