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
