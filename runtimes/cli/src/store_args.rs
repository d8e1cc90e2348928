//! `--data-dir`, `--no-store` and `--fsync`: where the binary keeps sessions.

use std::path::PathBuf;
use std::process::ExitCode;

use agentwire_store::{default_data_dir, Store, StoreOptions, SyncPolicy};

/// The session store flags.
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// Keep sessions in DIR so they outlive the process: each session's persisted events are
    /// appended to `DIR/session-state/<sessionId>/events.jsonl` and loaded again at start
    /// [default: $COPILOT_HOME when set, else ~/.agentwire].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// Keep sessions in memory only (nothing is read from or written to disk).
    #[arg(long, conflicts_with = "data_dir")]
    no_store: bool,

    /// When to fsync the session logs: `never` (the kernel writes back; a killed process
    /// loses nothing, a power loss can lose recent events), `every-event` (clients only see
    /// events that are on disk), or an interval such as `1s`.
    #[arg(long, value_name = "POLICY", default_value = "never")]
    fsync: SyncPolicy,
}

impl StoreArgs {
    /// Whether any store flag was given.
    pub fn explicit(&self) -> bool {
        self.data_dir.is_some() || self.no_store || self.fsync != SyncPolicy::Never
    }

    /// Opens the store the flags ask for (`None`: in memory, with `--no-store`); errors are
    /// printed and turned into the exit code. Every runtime uses the same store.
    pub fn open(&self) -> Result<Option<Store>, ExitCode> {
        if self.no_store {
            return Ok(None);
        }
        let Some(dir) = self.data_dir.clone().or_else(default_data_dir) else {
            eprintln!(
                "error: no data directory: set HOME or COPILOT_HOME, or pass --data-dir DIR \
                 or --no-store"
            );
            return Err(ExitCode::from(2));
        };
        match Store::open(&dir, StoreOptions { sync: self.fsync }) {
            Ok(store) => Ok(Some(store)),
            Err(e) => {
                eprintln!(
                    "error: cannot open the session store in {}: {e}",
                    dir.display()
                );
                Err(ExitCode::FAILURE)
            }
        }
    }
}
