//! The effects the host asks for ([`Output::Effect`](agentwire::host::Output::Effect)),
//! performed the same on every runtime, outside the host lock.
//!
//! This layer knows nothing of connections or of the driver's shared state: an executor gets
//! the [`Effect`] and a [`Port`], the way back into the host (a report, which the driver
//! feeds to `Host::handle_effect` under the lock, then drains as after every input) and the
//! runtime's spawn and sleep. Each kind of work runs on plain threads whose results are
//! queued, in order, for one driver task per effect:
//!
//! * processes (`process.rs` on `child.rs`): `std::process` in a process group of its own,
//!   argv, env, cwd, stdin bytes written in order by a thread of its own, stdout / stderr
//!   chunks and the exit reported, killed (the whole group) on request, at its timeout or
//!   when the server shuts down ([`Effects::kill_all`]). Shell commands are processes too
//!   (`sh -c COMMAND`, with a timeout);
//! * HTTP exchanges (`http.rs`): blocking `ureq` calls (rustls), the response start, body
//!   chunks (as they arrive), end or transport error reported; a cancel stops the thread at
//!   its next chunk and nothing more is reported. Threads rather than reqwest on a
//!   background tokio runtime: no second runtime inside smol and async-std processes, the
//!   same mechanism as child processes, a much smaller dependency tree, and streaming bodies
//!   (SSE) read chunk by chunk all the same;
//! * file operations (`files.rs`): `std::fs` on a thread, the result reported.

mod child;
mod files;
mod http;
mod process;

use std::sync::Arc;
use std::time::Duration;

use agentwire::host::{Effect, EffectEvent, EffectId, EffectOp};

use crate::Task;

/// The executors' way back: into the host, and onto the runtime.
pub(crate) trait Port: Send + Sync + 'static {
    /// Feeds `event` about effect `id` to the host (under its lock, followed by what every
    /// input is followed by). Reports of one effect are made in order.
    fn report(self: Arc<Self>, id: EffectId, event: EffectEvent);
    /// Starts a detached task on the runtime.
    fn spawn(&self, task: Task);
    /// The runtime's sleep.
    fn sleep(&self, duration: Duration) -> Task;
}

/// The effects in flight (those that can be cancelled or killed).
#[derive(Default)]
pub(crate) struct Effects {
    processes: Arc<process::Processes>,
    https: Arc<http::Https>,
}

impl Effects {
    /// Performs one effect. Runs outside the host lock, in the order the host produced them
    /// (so a process is started before its first write).
    pub(crate) fn perform(&self, port: &Arc<dyn Port>, effect: Effect) {
        let Effect { id, op } = effect;
        match op {
            EffectOp::ProcessSpawn(spec) => process::spawn(&self.processes, port, id, spec),
            EffectOp::ProcessWrite(bytes) => self.processes.write(id, bytes),
            // Any signal ends the process: its whole process group is killed.
            EffectOp::ProcessKill { signal: _ } => self.processes.kill(id),
            EffectOp::HttpRequest(request) => http::start(&self.https, port, id, request),
            EffectOp::HttpCancel => self.https.cancel(id),
            EffectOp::FileOp(request) => files::perform(port, id, request),
        }
    }

    /// Kills every running process group (the server is shutting down).
    pub(crate) fn kill_all(&self) {
        self.processes.kill_all();
    }
}
