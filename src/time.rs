//! Time as an input: the core never reads a clock.

use std::fmt;
use std::time::{Duration, SystemTime};

/// A point in time, supplied by the runtime: nanoseconds since the Unix epoch.
///
/// The core never reads a clock. Runtimes convert their own notion of time into a
/// `Timestamp` and pass it to every `handle_*` call; deadlines come back out through
/// `poll_timeout()`. Using wall-clock nanoseconds (rather than an opaque monotonic
/// instant) lets the core stamp events with RFC 3339 times as the protocol requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The Unix epoch, `1970-01-01T00:00:00Z`.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// A timestamp `nanos` nanoseconds after the Unix epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// A timestamp `millis` milliseconds after the Unix epoch.
    pub const fn from_millis(millis: u64) -> Self {
        Timestamp(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the Unix epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Milliseconds since the Unix epoch (truncated).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// This timestamp moved forward by `d` (saturating).
    pub fn saturating_add(self, d: Duration) -> Self {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// Converts a `SystemTime` (as a runtime reads it) into a `Timestamp`.
    ///
    /// Times before the epoch map to [`Timestamp::EPOCH`].
    pub fn from_system_time(t: SystemTime) -> Self {
        let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        Timestamp::EPOCH.saturating_add(d)
    }

    /// Formats as RFC 3339 in UTC with millisecond precision, e.g. `2026-11-29T20:26:17.139Z`,
    /// the form the Copilot runtime uses in event timestamps.
    pub fn to_rfc3339(self) -> String {
        let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(self.0);
        humantime::format_rfc3339_millis(t).to_string()
    }

    /// Reads an RFC 3339 timestamp (as [`Timestamp::to_rfc3339`] writes, e.g. an event's
    /// `timestamp`); `None` when it is not one or is before the epoch.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        let t = humantime::parse_rfc3339_weak(text).ok()?;
        let since = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
        Some(Timestamp::EPOCH.saturating_add(since))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_millis_utc() {
        // 2026-11-29T20:26:17.139Z, the timestamp of wire.jsonl:10.
        let ts = Timestamp::from_millis(1_795_983_977_139);
        assert_eq!(ts.to_rfc3339(), "2026-11-29T20:26:17.139Z");
        assert_eq!(Timestamp::parse_rfc3339(&ts.to_rfc3339()), Some(ts));
        assert_eq!(Timestamp::parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_nanos(u64::MAX - 1);
        assert_eq!(
            t.saturating_add(Duration::from_secs(1)).as_nanos(),
            u64::MAX
        );
        assert_eq!(
            Timestamp::EPOCH.saturating_duration_since(t),
            Duration::ZERO
        );
    }
}
