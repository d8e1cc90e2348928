//! Graceful shutdown on SIGINT / SIGTERM, the same on every runtime.

use std::io;
use std::sync::Arc;

use tracing::info;

use crate::shared::Shared;
use crate::sync::Watch;

/// A signal: its name and the exit status that conventionally reports it.
type Signal = (&'static str, i32);

/// Waits for SIGINT/SIGTERM on a thread of its own. The first one starts the shutdown through
/// a task spawned now (so the shutdown runs on the server's runtime, from a task, like every
/// other call into the driver); a second one ends the process at once with 128 + the signal
/// number. The task holds the driver weakly: the handler does not keep the server alive.
pub(crate) fn shutdown_on_signals(shared: &Arc<Shared>) -> io::Result<()> {
    let first: Arc<Watch<Option<Signal>>> = Arc::new(Watch::new(None));
    let mut signals = platform::Signals::new()?;
    let seen = first.clone();
    std::thread::Builder::new()
        .name("agentwire-signals".into())
        .spawn(move || {
            let Some(signal) = signals.next() else {
                return;
            };
            seen.set(Some(signal));
            if let Some((name, code)) = signals.next() {
                eprintln!("agentwire: {name} again while shutting down: exiting now");
                std::process::exit(code);
            }
        })?;
    let server = Arc::downgrade(shared);
    shared.spawn(async move {
        let Some((name, _)) = first.wait_for(Option::is_some).await else {
            return;
        };
        info!(signal = name, "shutting down");
        if let Some(shared) = server.upgrade() {
            shared.shutdown(format!("received {name}"));
        }
    });
    Ok(())
}

#[cfg(unix)]
mod platform {
    use std::io;

    use signal_hook::consts::{SIGINT, SIGTERM};

    pub(super) struct Signals(signal_hook::iterator::Signals);

    impl Signals {
        pub(super) fn new() -> io::Result<Signals> {
            signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map(Signals)
        }

        /// Blocks until the next signal.
        pub(super) fn next(&mut self) -> Option<super::Signal> {
            self.0.forever().next().map(|signal| match signal {
                SIGINT => ("SIGINT", 130),
                _ => ("SIGTERM", 143),
            })
        }
    }
}

#[cfg(not(unix))]
mod platform {
    use std::io;

    pub(super) struct Signals;

    impl Signals {
        pub(super) fn new() -> io::Result<Signals> {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "signal handling needs a Unix platform",
            ))
        }

        pub(super) fn next(&mut self) -> Option<super::Signal> {
            None
        }
    }
}
