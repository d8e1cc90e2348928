//! Seeded identifiers: UUIDv4-shaped ids from a deterministic generator.

/// A deterministic pseudo-random generator (SplitMix64) for ids.
///
/// The core takes no OS randomness: the runtime passes a seed (from the OS, or a fixed
/// one in tests and simulation) and every event id and request id follows from it, so a
/// run replays identically from its inputs. This is not a cryptographic generator; the
/// ids it makes are unique labels, not secrets.
#[derive(Clone, Debug)]
pub(crate) struct IdGenerator {
    state: u64,
}

impl IdGenerator {
    /// A generator whose whole output is determined by `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        IdGenerator { state: seed }
    }

    /// A generator for the node `node` of a cluster (`None`: a single process): the node id
    /// is hashed into the seed, so nodes started with the same seed generate different ids.
    pub(crate) fn for_node(seed: u64, node: Option<&str>) -> Self {
        let Some(node) = node else {
            return IdGenerator::new(seed);
        };
        // FNV-1a of the node id, finalised, then mixed into the seed.
        let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
        for &byte in node.as_bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
        }
        let mut mixer = IdGenerator::new(hash);
        IdGenerator::new(seed ^ mixer.next_u64())
    }

    /// The next 64 pseudo-random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next UUID with version 4 and RFC 4122 variant bits, hyphenated lower case,
    /// e.g. `c766e7de-b35d-4fc8-8596-fc5fb367963b`.
    pub(crate) fn next_uuid(&mut self) -> String {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_ids() {
        let mut a = IdGenerator::new(7);
        let mut b = IdGenerator::new(7);
        assert_eq!(a.next_uuid(), b.next_uuid());
        assert_ne!(a.next_uuid(), IdGenerator::new(8).next_uuid());
    }

    #[test]
    fn nodes_with_the_same_seed_get_different_ids() {
        let mut a = IdGenerator::for_node(7, Some("node-a"));
        let mut b = IdGenerator::for_node(7, Some("node-b"));
        let mut a2 = IdGenerator::for_node(7, Some("node-a"));
        let (x, y) = (a.next_uuid(), b.next_uuid());
        assert_ne!(x, y);
        assert_eq!(x, a2.next_uuid(), "still deterministic per node");
        assert_eq!(
            IdGenerator::for_node(7, None).next_uuid(),
            IdGenerator::new(7).next_uuid()
        );
    }

    #[test]
    fn uuids_are_version_4() {
        let mut g = IdGenerator::new(1);
        for _ in 0..100 {
            let id = g.next_uuid();
            let parsed = uuid::Uuid::parse_str(&id).expect("valid uuid");
            assert_eq!(parsed.get_version_num(), 4);
            assert_eq!(id.len(), 36);
        }
    }
}
