//! Where each client of a run is, so that a run that times out says what it was waiting for.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// What a client is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum Phase {
    /// Connecting, or attaching to its session.
    Attaching = 0,
    /// Attached, waiting for every other client and the prompt.
    Attached = 1,
    /// Reading the turn until `session.idle`.
    Streaming = 2,
    /// Got `session.idle`, waiting for every other client.
    Idle = 3,
    /// Checking the log (`session.getMessages`).
    Checking = 4,
    /// Done.
    Done = 5,
}

impl Phase {
    fn of(n: u8) -> Phase {
        match n {
            0 => Phase::Attaching,
            1 => Phase::Attached,
            2 => Phase::Streaming,
            3 => Phase::Idle,
            4 => Phase::Checking,
            _ => Phase::Done,
        }
    }
}

/// One client's progress.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    phase: AtomicU8,
    /// Streaming deltas received.
    deltas: AtomicU64,
    /// The port of the node it is connected to.
    port: AtomicU64,
}

impl Progress {
    /// The client is now in `phase`.
    pub(crate) fn set(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// The client connects to `port`.
    pub(crate) fn at_port(&self, port: u16) {
        self.port.store(u64::from(port), Ordering::Relaxed);
    }

    /// The client has received `deltas` streaming deltas.
    pub(crate) fn deltas(&self, deltas: u64) {
        self.deltas.store(deltas, Ordering::Relaxed);
    }
}

/// Every client's progress in a run.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tracker(Arc<Mutex<Vec<Arc<Progress>>>>);

impl Tracker {
    /// A new client's progress.
    pub(crate) fn client(&self) -> Arc<Progress> {
        let progress = Arc::new(Progress::default());
        crate::lock(&self.0).push(progress.clone());
        progress
    }

    /// How many clients are in each phase, per node port, with the fewest and most deltas
    /// of those still streaming: `attaching 0, …; streaming on :4001: 33 (4980..5000 deltas)`.
    pub(crate) fn summary(&self) -> String {
        let clients = crate::lock(&self.0);
        let mut phases: BTreeMap<(Phase, u64), (usize, u64, u64)> = BTreeMap::new();
        for c in clients.iter() {
            let phase = Phase::of(c.phase.load(Ordering::Relaxed));
            let port = c.port.load(Ordering::Relaxed);
            let deltas = c.deltas.load(Ordering::Relaxed);
            let e = phases.entry((phase, port)).or_insert((0, u64::MAX, 0));
            e.0 += 1;
            e.1 = e.1.min(deltas);
            e.2 = e.2.max(deltas);
        }
        let parts: Vec<String> = phases
            .iter()
            .map(|((phase, port), (n, lo, hi))| {
                format!("{phase:?} on :{port}: {n} ({lo}..={hi} deltas)")
            })
            .collect();
        format!("clients by phase: {}", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_clients_per_phase_and_node() {
        let tracker = Tracker::default();
        let a = tracker.client();
        let b = tracker.client();
        let c = tracker.client();
        for (p, port, phase, deltas) in [
            (&a, 1, Phase::Streaming, 10),
            (&b, 1, Phase::Streaming, 30),
            (&c, 2, Phase::Idle, 50),
        ] {
            p.at_port(port);
            p.set(phase);
            p.deltas(deltas);
        }
        assert_eq!(
            tracker.summary(),
            "clients by phase: Streaming on :1: 2 (10..=30 deltas); Idle on :2: 1 (50..=50 deltas)"
        );
    }
}
