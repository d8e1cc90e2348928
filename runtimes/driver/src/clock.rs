//! The runtime's clock: the only place this crate reads the time for the host.

use std::time::SystemTime;

use agentwire::Timestamp;

/// The current wall-clock time as a [`Timestamp`], as passed to every host call.
pub fn now() -> Timestamp {
    Timestamp::from_system_time(SystemTime::now())
}
