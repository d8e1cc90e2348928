//! The user's own state on this machine, beside the sessions: user settings and the GitHub
//! accounts signed in to this server.
//!
//! - **Settings** ([`settings`]) live in the data directory's `settings.json` (the runtime's
//!   `COPILOT_HOME` layout), read when first needed (and again on `user.settings.reload`) and
//!   written after each change. Without a data directory (`--no-store`) they are kept in
//!   memory for the server's lifetime.
//! - **Accounts** ([`accounts`]) are kept in memory only: agentwire has no secure store for
//!   tokens, so a login is not persisted (its answer says so).
//! - **Configuration files** read for a client outside any session ([`scan`]): custom agents
//!   and instruction files of the user and of projects.
//!
//! The host never touches the disk: each read and write is a file effect
//! ([`FileRequest`]) answered through [`Host::file_result`](super::Host). Requests on the
//! settings are served one at a time, in order, so a `set` never races a `reload`.

pub(crate) mod accounts;
pub(crate) mod scan;
pub(crate) mod settings;

use std::collections::VecDeque;

use serde_json::{Map, Value};

use crate::jsonrpc::{code, ErrorObject, OwnedId};

use super::tool_ops::{FileReply, FileRequest};
use super::{ConnId, Host};

/// The settings file, in the data directory.
pub(crate) const SETTINGS_FILE: &str = "settings.json";

/// What a settings request does once the settings are read: computes its answer from the
/// settings (changing them or not) and the request's parameters.
pub(crate) type SettingsEdit =
    fn(&mut Map<String, Value>, &Value) -> Result<SettingsOutcome, ErrorObject>;

/// The outcome of a [`SettingsEdit`].
pub(crate) struct SettingsOutcome {
    /// The request's answer.
    pub(crate) answer: Value,
    /// The settings changed and are written before the answer is sent.
    pub(crate) changed: bool,
}

/// A request on the settings.
struct SettingsJob {
    /// Who gets the answer.
    to: (ConnId, OwnedId),
    /// Read the file again first.
    reload: bool,
    work: SettingsWork,
}

/// What a settings job does once the settings are read.
enum SettingsWork {
    /// Runs the edit with the request's parameters (after a write: the answer to send).
    Edit(SettingsEdit, Value),
    /// `skills.discover`: reads the directories (their skills' `enabled` from
    /// `disabledSkills`).
    DiscoverSkills(Vec<String>, crate::host::sessions::skills::SkillsReply),
}

/// The user's local state: the settings (their requests queued) and the accounts.
#[derive(Default)]
pub(crate) struct LocalState {
    /// The settings as last read or written (`None`: not read yet).
    settings: Option<Map<String, Value>>,
    queue: VecDeque<SettingsJob>,
    /// The job whose file operation is in flight, and what it waits for.
    running: Option<(SettingsJob, LocalStep)>,
    /// The settings before the change being written (restored if the write fails).
    prior: Option<Map<String, Value>>,
    /// The accounts signed in to this server.
    pub(crate) accounts: accounts::Accounts,
    /// Configuration files being read for clients (`scan.rs`).
    pub(crate) scans: scan::Scans,
}

impl std::fmt::Debug for LocalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalState")
            .field("settings_loaded", &self.settings.is_some())
            .field("queued", &self.queue.len())
            .field("running", &self.running.as_ref().map(|(_, step)| *step))
            .finish_non_exhaustive()
    }
}

/// The file operation a settings job waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LocalStep {
    /// `settings.json` being read.
    Read,
    /// `settings.json` being written.
    Write,
}

impl Host {
    /// Serves a settings request: `edit` runs on the settings once they are read (and
    /// `reload`: read again); its answer goes to `conn`'s request `id` once any change is
    /// written.
    pub(crate) fn settings_request(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        reload: bool,
        edit: SettingsEdit,
        params: Value,
    ) {
        self.local.queue.push_back(SettingsJob {
            to: (conn, id.clone()),
            reload,
            work: SettingsWork::Edit(edit, params),
        });
        self.next_settings_job();
    }

    /// `skills.discover`: reads `dirs` once the settings are read, so the skills' `enabled`
    /// follows `disabledSkills`; answered with `reply` when the reads finish.
    pub(crate) fn discover_skills_with_settings(
        &mut self,
        dirs: Vec<String>,
        conn: ConnId,
        id: &OwnedId,
        reply: crate::host::sessions::skills::SkillsReply,
    ) {
        self.local.queue.push_back(SettingsJob {
            to: (conn, id.clone()),
            reload: false,
            work: SettingsWork::DiscoverSkills(dirs, reply),
        });
        self.next_settings_job();
    }

    /// The accounts signed in to this server.
    pub(crate) fn accounts_mut(&mut self) -> &mut accounts::Accounts {
        &mut self.local.accounts
    }

    /// The settings' `disabledSkills`, when the settings were read (`None` before).
    pub(crate) fn disabled_skills_setting(&self) -> Option<Vec<String>> {
        let settings = self.local.settings.as_ref()?;
        Some(settings::string_list(settings, settings::DISABLED_SKILLS))
    }

    fn settings_path(&self) -> Option<String> {
        let dir = self.config.data_dir.as_deref()?;
        Some(format!("{}/{SETTINGS_FILE}", dir.trim_end_matches('/')))
    }

    /// Starts the next queued job when none runs.
    fn next_settings_job(&mut self) {
        while self.local.running.is_none() {
            let Some(job) = self.local.queue.pop_front() else {
                return;
            };
            let must_read = job.reload || self.local.settings.is_none();
            match self.settings_path() {
                Some(path) if must_read => {
                    self.local.running = Some((job, LocalStep::Read));
                    self.local_file_op(FileRequest::Read { path }, LocalStep::Read);
                }
                _ => {
                    // Read already, or kept in memory (no data directory).
                    self.local.settings.get_or_insert_with(Map::new);
                    self.apply_settings_job(job);
                }
            }
        }
    }

    /// Runs `job`'s edit on the read settings; writes them if it changed them.
    fn apply_settings_job(&mut self, job: SettingsJob) {
        let (edit, params) = match job.work {
            SettingsWork::Edit(edit, params) => (edit, params),
            SettingsWork::DiscoverSkills(dirs, reply) => {
                let (conn, id) = job.to;
                return self.discover_skills(dirs, conn, &id, reply);
            }
        };
        let settings = self.local.settings.get_or_insert_with(Map::new);
        let before = settings.clone();
        match edit(settings, &params) {
            Err(e) => {
                self.local.settings = Some(before);
                self.respond(job.to.0, &job.to.1, Err(e));
            }
            Ok(outcome) => match self.settings_path() {
                Some(path) if outcome.changed => {
                    let content = serde_json::to_string_pretty(&Value::Object(
                        self.local.settings.clone().unwrap_or_default(),
                    ))
                    .unwrap_or_default();
                    let write = SettingsJob {
                        work: SettingsWork::Edit(edit, outcome.answer),
                        ..job
                    };
                    // The settings as they were, in case the write fails.
                    self.local.running = Some((write, LocalStep::Write));
                    self.local.prior = Some(before);
                    self.local_file_op(
                        FileRequest::Write {
                            path,
                            content: content + "\n",
                            create_new: false,
                        },
                        LocalStep::Write,
                    );
                }
                _ => self.respond(job.to.0, &job.to.1, Ok(outcome.answer)),
            },
        }
    }

    /// A file operation of the running settings job finished.
    pub(in crate::host) fn local_file_done(
        &mut self,
        step: LocalStep,
        result: Result<FileReply, String>,
    ) {
        let Some((job, waiting)) = self.local.running.take() else {
            return;
        };
        debug_assert_eq!(step, waiting);
        let path = self.settings_path().unwrap_or_default();
        match step {
            LocalStep::Read => {
                let read = match result {
                    Ok(FileReply::Text(text)) if text.trim().is_empty() => Ok(Map::new()),
                    Ok(FileReply::Text(text)) => match serde_json::from_str::<Value>(&text) {
                        Ok(Value::Object(map)) => Ok(map),
                        Ok(_) => Err(format!("{path}: the settings are not a JSON object")),
                        Err(e) => Err(format!("{path}: invalid settings: {e}")),
                    },
                    Err(e) if e.ends_with(" does not exist") => Ok(Map::new()),
                    Err(e) => Err(e),
                    Ok(_) => Err(format!("{path} is not a file")),
                };
                match read {
                    Ok(map) => {
                        self.local.settings = Some(map);
                        self.apply_settings_job(job);
                    }
                    Err(e) => {
                        let err = ErrorObject::new(
                            code::INTERNAL_ERROR,
                            format!("cannot read the user settings: {e}"),
                        );
                        self.respond(job.to.0, &job.to.1, Err(err));
                    }
                }
            }
            LocalStep::Write => {
                let prior = self.local.prior.take();
                match result {
                    Ok(_) => {
                        let answer = match job.work {
                            SettingsWork::Edit(_, answer) => answer,
                            SettingsWork::DiscoverSkills(..) => Value::Null,
                        };
                        self.respond(job.to.0, &job.to.1, Ok(answer));
                    }
                    Err(e) => {
                        // Nothing changed: the settings are what the file still holds.
                        self.local.settings = prior;
                        let err = ErrorObject::new(
                            code::INTERNAL_ERROR,
                            format!("cannot write the user settings: {e}"),
                        );
                        self.respond(job.to.0, &job.to.1, Err(err));
                    }
                }
            }
        }
        self.next_settings_job();
    }
}
