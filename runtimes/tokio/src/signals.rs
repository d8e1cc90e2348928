//! Graceful shutdown on SIGINT / SIGTERM.

use std::io;

use tracing::info;

use crate::driver::Server;

impl Server {
    /// Shuts the server down gracefully on the first SIGINT or SIGTERM (Ctrl-C on platforms
    /// without Unix signals), as [`Server::shutdown`] does with the reason `received SIGTERM`
    /// (or `SIGINT`): the listener stops accepting, queued frames are written (bounded by the
    /// flush timeout), every client receives the
    /// [`SHUTDOWN_NOTIFICATION`](crate::SHUTDOWN_NOTIFICATION) and then end of stream, and the
    /// session store is synced; the `serve_*` futures then return [`crate::Stopped::Shutdown`].
    ///
    /// A second signal during that shutdown ends the process at once with status 128 + the
    /// signal number (130 for SIGINT, 143 for SIGTERM), without waiting for any connection.
    /// No stored event is lost by that: every event is in the store (the kernel's page cache)
    /// before any client can receive it.
    ///
    /// The signals are awaited on a thread of their own (with a small runtime of its own), so
    /// a second signal ends the process even when every worker of the server's runtime is
    /// busy; that thread lives as long as the process. Must be called within the tokio runtime
    /// that runs the server; the handler does not keep the server alive.
    pub fn shutdown_on_signals(&self) -> io::Result<()> {
        let server = self.downgrade();
        let main = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        let own = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut signals = {
            let _in_own = own.enter();
            Signals::new()?
        };
        std::thread::Builder::new()
            .name("agentwire-signals".into())
            .spawn(move || {
                own.block_on(async move {
                    let (name, _) = signals.next().await;
                    info!(signal = name, "shutting down");
                    match server.upgrade() {
                        Some(server) => {
                            // `shutdown` starts tasks: on the server's runtime.
                            let _in_main = main.enter();
                            server.shutdown(format!("received {name}"));
                        }
                        None => return,
                    }
                    let (name, code) = signals.next().await;
                    eprintln!("agentwire: {name} again while shutting down: exiting now");
                    std::process::exit(code);
                })
            })?;
        Ok(())
    }
}

#[cfg(unix)]
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn new() -> io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next signal: its name and the exit status that conventionally reports it.
    async fn next(&mut self) -> (&'static str, i32) {
        tokio::select! {
            _ = self.term.recv() => ("SIGTERM", 143),
            _ = self.int.recv() => ("SIGINT", 130),
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn new() -> io::Result<Signals> {
        Ok(Signals)
    }

    async fn next(&mut self) -> (&'static str, i32) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        ("SIGINT", 130)
    }
}
