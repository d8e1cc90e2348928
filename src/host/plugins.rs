//! Installed plugins and plugin marketplaces, served from the local machine.
//!
//! Everything lives in the data directory ([`HostConfig::data_dir`](super::HostConfig)):
//!
//! - `plugins.json`: the registry, `{"installed_plugins": [...], "marketplaces": {...}}`.
//!   Each installed plugin is a record in the runtime's `InstalledPlugin` shape (`name`,
//!   `marketplace`, `version`, `installed_at`, `enabled`, `cache_path`, `source` for direct
//!   installs) plus `direct_source_id`; each marketplace keeps its source and the catalog read
//!   from its `marketplace.json` at `add` / `refresh` time. (The Copilot runtime keeps these
//!   records in its `config.json`; agentwire keeps them in a file of their own, so it never
//!   rewrites a `config.json` it may share with the runtime.)
//! - `installed-plugins/<marketplace>/<plugin>/`: a copy of a plugin installed from a
//!   marketplace; `installed-plugins/_direct/<directSourceId>/`: a plugin installed from a
//!   local directory. These are the runtime's `COPILOT_HOME` layout.
//!
//! Only local sources are served: a marketplace is a local directory with a
//! `marketplace.json` (`name`, `plugins[]` of `name` / `source` / `description` /
//! `version`), a plugin a local directory (a marketplace entry whose `source` is a relative
//! path, or a directory with a `plugin.json` installed directly). GitHub and URL sources,
//! and the two default marketplaces the runtime ships (`copilot-plugins`,
//! `awesome-copilot`, hosted on GitHub), are listed or refused with an error saying so.
//!
//! The host never touches the disk: every read, copy, walk and write is a file effect
//! ([`FileRequest`]), answered through [`Host::file_result`]. Requests are served one at a
//! time, in order; the registry is read once (and again by `session.plugins.reload`) and
//! written after each change.
//!
//! A session's plugins are the installed ones when the session was created (or last reloaded
//! its plugins): the skills of its enabled plugins (`SKILL.md` files in the plugin's tree) are
//! among the session's skills. Plugins' MCP servers, agents, hooks and extensions are not
//! started.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::agent::tool_text::normalize_path;
use crate::jsonrpc::{code, ErrorObject, OwnedId};

use super::tool_ops::{FileReply, FileRequest};
use super::{ConnId, Host};

/// The registry file, in the data directory.
pub(crate) const REGISTRY_FILE: &str = "plugins.json";
/// Where plugins are installed, in the data directory.
pub(crate) const INSTALL_DIR: &str = "installed-plugins";
/// The directory of direct installs, below [`INSTALL_DIR`].
const DIRECT_DIR: &str = "_direct";

/// The default marketplaces the runtime ships (name, GitHub repository): listed, not
/// browsable here (they are fetched from GitHub).
const DEFAULT_MARKETPLACES: &[(&str, &str)] = &[
    ("copilot-plugins", "github/copilot-plugins"),
    ("awesome-copilot", "github/awesome-copilot"),
];

/// Where a marketplace's manifest may be, in its directory.
const MARKETPLACE_MANIFESTS: &[&str] = &[
    "marketplace.json",
    ".github/plugin/marketplace.json",
    ".claude-plugin/marketplace.json",
];
/// Where a plugin's manifest may be, in its directory.
const PLUGIN_MANIFESTS: &[&str] = &[
    "plugin.json",
    ".plugin/plugin.json",
    ".github/plugin/plugin.json",
    ".claude-plugin/plugin.json",
];
/// Largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Most files walked in an installed plugin.
const WALK_LIMIT: usize = 20_000;

/// What the `deprecationWarning` of a direct install says.
const DIRECT_DEPRECATED: &str = "Installing a plugin directly from a local path is deprecated: \
add it to a marketplace and install it as plugin@marketplace instead.";

/// A plugins request, decoded by the dialect.
#[derive(Clone, Debug)]
pub(crate) enum PluginCommand {
    /// `plugins.list`.
    List,
    /// `plugins.install`.
    Install { source: String, cwd: Option<String> },
    /// `plugins.uninstall`.
    Uninstall {
        name: String,
        direct_source_id: Option<String>,
    },
    /// `plugins.update`.
    Update { name: String },
    /// `plugins.updateAll`.
    UpdateAll,
    /// `plugins.enable` / `plugins.disable`.
    SetEnabled { names: Vec<String>, enabled: bool },
    /// `plugins.marketplaces.list`.
    MarketplaceList,
    /// `plugins.marketplaces.add`.
    MarketplaceAdd { source: String, cwd: Option<String> },
    /// `plugins.marketplaces.remove`.
    MarketplaceRemove { name: String, force: bool },
    /// `plugins.marketplaces.browse`.
    MarketplaceBrowse { name: String },
    /// `plugins.marketplaces.refresh`.
    MarketplaceRefresh { name: Option<String> },
    /// `session.plugins.list`.
    SessionList { session: String },
    /// `session.plugins.reload`.
    SessionReload { session: String },
    /// Apply the installed plugins to sessions created before the registry was read (no
    /// request).
    ApplyToSessions,
}

/// The registry (`plugins.json`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Registry {
    #[serde(default)]
    installed_plugins: Vec<Installed>,
    #[serde(default)]
    marketplaces: BTreeMap<String, Marketplace>,
}

/// An installed plugin (the runtime's `InstalledPlugin` record).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
struct Installed {
    name: String,
    marketplace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    installed_at: String,
    enabled: bool,
    cache_path: String,
    /// Direct installs: `{"source": "local", "path": ...}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<Value>,
    /// Direct installs: the stable id of their source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    direct_source_id: Option<String>,
}

impl Installed {
    /// `plugin@marketplace` (the name alone for a direct install).
    fn spec(&self) -> String {
        if self.marketplace.is_empty() {
            self.name.clone()
        } else {
            format!("{}@{}", self.name, self.marketplace)
        }
    }

    /// The runtime's `InstalledPluginInfo`.
    fn info(&self) -> Value {
        let mut v = json!({"name": self.name, "marketplace": self.marketplace,
                           "enabled": self.enabled});
        if let Some(id) = &self.direct_source_id {
            v["directSourceId"] = json!(id);
        }
        if let Some(version) = &self.version {
            v["version"] = json!(version);
        }
        v
    }

    /// Whether `wanted` (a name or `plugin@marketplace`) names it.
    fn named(&self, wanted: &str) -> bool {
        match wanted.split_once('@') {
            Some((name, marketplace)) => self.name == name && self.marketplace == marketplace,
            None => self.name == wanted,
        }
    }
}

/// A registered marketplace.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Marketplace {
    /// `{"source": "local", "path": DIR}`.
    source: Value,
    /// The catalog read from its manifest.
    #[serde(default)]
    plugins: Vec<CatalogEntry>,
    /// When the catalog was read.
    #[serde(default)]
    updated_at: String,
}

impl Marketplace {
    fn dir(&self) -> Option<&str> {
        self.source.get("path").and_then(Value::as_str)
    }
}

/// A plugin a marketplace advertises.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct CatalogEntry {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    /// A relative path (resolved against the marketplace's directory), or an object naming
    /// a remote source.
    #[serde(default)]
    source: Value,
}

/// A request waiting for, or being served.
struct Job {
    /// Who asked (none: the host's own).
    to: Option<(ConnId, OwnedId, String)>,
    command: PluginCommand,
}

/// The file operation a running job waits for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PluginWait {
    /// `plugins.json` being read.
    Registry,
    /// A marketplace's manifests being read.
    MarketplaceManifest,
    /// A plugin's manifests being read.
    PluginManifest,
    /// A plugin being copied into place.
    Copy,
    /// An installed plugin being walked for its skills.
    Walk,
    /// An installed plugin being removed.
    Remove,
    /// `plugins.json` being written.
    Save,
}

/// The installs, marketplaces and requests (one of the host's fields).
#[derive(Default)]
pub(crate) struct Plugins {
    registry: Option<Registry>,
    /// The registry is to be read again (`session.plugins.reload`).
    stale: bool,
    queue: VecDeque<Job>,
    running: Option<Running>,
}

/// The job being served and where it is.
struct Running {
    job: Job,
    step: Step,
    /// The registry as it will be saved.
    staged: Option<Registry>,
    /// `updateAll`: the plugins left and the results so far.
    batch: Option<(VecDeque<Installed>, Vec<Value>)>,
    /// `remove` with `force`: directories left to remove, then the answer.
    removals: VecDeque<String>,
    answer: Option<Value>,
}

/// Where a running job is.
enum Step {
    /// About to start (or waiting for the registry).
    Start,
    /// Reading a marketplace's manifest.
    MarketplaceRead {
        name_hint: Option<String>,
        dir: String,
        source: Value,
    },
    /// Installing: reading the plugin's manifest.
    PluginRead(Install),
    /// Installing: copying.
    Copying(Install),
    /// Installing: counting skills.
    Walking(Install),
    /// Removing installed directories.
    Removing,
    /// Saving the registry, then answering with the value.
    Saving,
}

/// An install in progress.
#[derive(Clone, Debug)]
struct Install {
    /// The marketplace it comes from (empty: a direct install).
    marketplace: String,
    /// Its name (a direct install's is read from its manifest).
    name: Option<String>,
    version: Option<String>,
    /// The directory installed from.
    from: String,
    direct_source_id: Option<String>,
    /// The record it replaces.
    previous: Option<Installed>,
    /// `SKILL.md` files in the installed copy.
    skills: usize,
    /// Where it is installed.
    cache_path: String,
    /// What kind of request it answers.
    kind: InstallKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InstallKind {
    Install,
    Update,
    UpdateAll,
}

/// A failure of a plugins request (its message).
type Fail = String;

impl Host {
    /// Serves a plugins request (`to`: who gets the answer: connection, request id and
    /// method); answered when its file operations finish.
    pub(crate) fn plugin_request(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        method: &str,
        command: PluginCommand,
    ) {
        if self.config.data_dir.is_none() {
            let message = "this server has no data directory for plugins (it runs with \
                           --no-store; start it with --data-dir DIR)";
            return self.respond(conn, id, Err(plugin_error(method, message)));
        }
        self.plugins.queue.push_back(Job {
            to: Some((conn, id.clone(), method.to_owned())),
            command,
        });
        self.next_plugin_job();
    }

    /// A session was created or resumed: its plugins are the installed ones (applied when
    /// the registry is read).
    pub(crate) fn apply_plugins_to_session(&mut self, session: &str) {
        if self.config.data_dir.is_none() {
            return;
        }
        if self.plugins.registry.is_some() && !self.plugins.stale {
            let plugins = self.plugins.registry.clone().unwrap_or_default();
            self.set_session_plugins(session, &plugins.installed_plugins);
            return;
        }
        if let Some(state) = self.session_state::<SessionPlugins>(session) {
            if state.applied.is_some() {
                return;
            }
        }
        if let Some(state) = self.session_state::<super::sessions::skills::SessionSkills>(session) {
            state.plugins_pending = true;
        }
        let queued = self
            .plugins
            .queue
            .iter()
            .any(|j| matches!(j.command, PluginCommand::ApplyToSessions));
        if !queued {
            self.plugins.queue.push_back(Job {
                to: None,
                command: PluginCommand::ApplyToSessions,
            });
            self.next_plugin_job();
        }
    }

    fn data_path(&self, rel: &str) -> String {
        let dir = self.config.data_dir.as_deref().unwrap_or_default();
        format!("{}/{rel}", dir.trim_end_matches('/'))
    }

    /// Starts the next job when none runs.
    fn next_plugin_job(&mut self) {
        if self.plugins.running.is_some() {
            return;
        }
        let Some(job) = self.plugins.queue.pop_front() else {
            return;
        };
        self.plugins.running = Some(Running {
            job,
            step: Step::Start,
            staged: None,
            batch: None,
            removals: VecDeque::new(),
            answer: None,
        });
        self.plugin_step(None);
    }

    fn plugin_file(&mut self, request: FileRequest, wait: PluginWait) {
        self.plugin_file_op(request, wait);
    }

    /// A file operation of the running job finished.
    pub(in crate::host) fn plugin_file_done(
        &mut self,
        wait: PluginWait,
        result: Result<FileReply, String>,
    ) {
        if matches!(wait, PluginWait::Registry) {
            let registry = match result {
                Ok(FileReply::Text(text)) => serde_json::from_str::<Registry>(&text).map_err(|e| {
                    format!(
                        "{}: invalid plugin registry: {e}",
                        self.data_path(REGISTRY_FILE)
                    )
                }),
                Err(e) if e.ends_with(" does not exist") => Ok(Registry::default()),
                Err(e) => Err(e),
                Ok(_) => Err(format!("{} is not a file", self.data_path(REGISTRY_FILE))),
            };
            match registry {
                Ok(registry) => {
                    self.plugins.registry = Some(registry);
                    self.plugins.stale = false;
                    self.plugin_step(None);
                }
                Err(e) => self.finish_plugin_job(Err(e)),
            }
            return;
        }
        self.plugin_step(Some((wait, result)));
    }

    /// Moves the running job on.
    fn plugin_step(&mut self, done: Option<(PluginWait, Result<FileReply, String>)>) {
        let Some(running) = self.plugins.running.as_mut() else {
            return;
        };
        // Every job needs the registry first.
        if (self.plugins.registry.is_none() || self.plugins.stale)
            && matches!(running.step, Step::Start)
            && done.is_none()
        {
            let path = self.data_path(REGISTRY_FILE);
            return self.plugin_file(FileRequest::Read { path }, PluginWait::Registry);
        }
        let step = std::mem::replace(&mut running.step, Step::Start);
        let outcome = match (step, done) {
            (Step::Start, None) => self.plugin_start(),
            (
                Step::MarketplaceRead {
                    name_hint,
                    dir,
                    source,
                },
                Some((_, result)),
            ) => self.marketplace_read(name_hint, dir, source, result),
            (Step::PluginRead(install), Some((_, result))) => self.plugin_read(install, result),
            (Step::Copying(install), Some((_, result))) => match result {
                Ok(_) => {
                    let root = install.cache_path.clone();
                    self.set_step(Step::Walking(install));
                    self.plugin_file(
                        FileRequest::Walk {
                            root,
                            limit: WALK_LIMIT,
                        },
                        PluginWait::Walk,
                    );
                    Ok(None)
                }
                Err(e) => self.install_failed(install, e),
            },
            (Step::Walking(mut install), Some((_, result))) => {
                if let Ok(FileReply::Entries(paths)) = &result {
                    install.skills = paths
                        .iter()
                        .filter(|p| *p == "SKILL.md" || p.ends_with("/SKILL.md"))
                        .count();
                }
                self.installed(install)
            }
            (Step::Removing, Some((_, result))) => match result {
                Ok(_) => self.next_removal(),
                Err(e) => Err(e),
            },
            (Step::Saving, Some((_, result))) => match result {
                Ok(_) => {
                    let running = self.plugins.running.as_mut().expect("running");
                    if let Some(staged) = running.staged.take() {
                        self.plugins.registry = Some(staged);
                    }
                    let answer = running.answer.take().unwrap_or_else(|| json!({}));
                    Ok(Some(answer))
                }
                Err(e) => Err(format!(
                    "cannot save {}: {e}",
                    self.data_path(REGISTRY_FILE)
                )),
            },
            (_, _) => Err("the plugin request lost its place".to_owned()),
        };
        match outcome {
            Ok(Some(answer)) => self.finish_plugin_job(Ok(answer)),
            Ok(None) => {}
            Err(e) => self.finish_plugin_job(Err(e)),
        }
    }

    fn set_step(&mut self, step: Step) {
        if let Some(running) = self.plugins.running.as_mut() {
            running.step = step;
        }
    }

    fn registry(&self) -> Registry {
        self.plugins.registry.clone().unwrap_or_default()
    }

    fn command(&self) -> Option<PluginCommand> {
        self.plugins.running.as_ref().map(|r| r.job.command.clone())
    }

    /// Starts the running job with the registry read: answers at once, or starts its first
    /// file operation (`Ok(None)`).
    fn plugin_start(&mut self) -> Result<Option<Value>, Fail> {
        let Some(command) = self.command() else {
            return Ok(None);
        };
        let registry = self.registry();
        match command {
            PluginCommand::List => Ok(Some(json!({"plugins": registry
                .installed_plugins
                .iter()
                .map(Installed::info)
                .collect::<Vec<_>>()}))),
            PluginCommand::MarketplaceList => {
                let mut list: Vec<Value> = DEFAULT_MARKETPLACES
                    .iter()
                    .map(|(name, repo)| {
                        json!({"name": name, "source": format!("GitHub: {repo}"), "isDefault": true})
                    })
                    .collect();
                for (name, m) in &registry.marketplaces {
                    list.push(json!({"name": name,
                                     "source": format!("Local: {}", m.dir().unwrap_or_default())}));
                }
                Ok(Some(json!({ "marketplaces": list })))
            }
            PluginCommand::MarketplaceBrowse { name } => {
                let m = marketplace(&registry, &name)?;
                Ok(Some(json!({"plugins": m.plugins.iter().map(|p| {
                    let mut v = json!({"name": p.name});
                    if let Some(d) = &p.description { v["description"] = json!(d); }
                    v
                }).collect::<Vec<_>>()})))
            }
            PluginCommand::MarketplaceAdd { source, cwd } => {
                let dir = self.local_path(&source, cwd.as_deref(), "marketplace")?;
                let source = json!({"source": "local", "path": dir});
                self.read_marketplace(None, dir, source);
                Ok(None)
            }
            PluginCommand::MarketplaceRefresh { name } => {
                let names: Vec<String> = match name {
                    Some(name) => {
                        if !is_default(&name) {
                            marketplace(&registry, &name)?;
                        }
                        vec![name]
                    }
                    None => DEFAULT_MARKETPLACES
                        .iter()
                        .map(|(n, _)| (*n).to_owned())
                        .chain(registry.marketplaces.keys().cloned())
                        .collect(),
                };
                self.refresh_next(names, Vec::new())
            }
            PluginCommand::MarketplaceRemove { name, force } => {
                if is_default(&name) {
                    return Err(format!(
                        "{name} is a default marketplace and cannot be removed"
                    ));
                }
                marketplace(&registry, &name)?;
                let dependents: Vec<&Installed> = registry
                    .installed_plugins
                    .iter()
                    .filter(|p| p.marketplace == name)
                    .collect();
                if !dependents.is_empty() && !force {
                    let names: Vec<&str> = dependents.iter().map(|p| p.name.as_str()).collect();
                    return Ok(Some(json!({"removed": false, "dependentPlugins": names})));
                }
                let mut staged = registry.clone();
                staged.marketplaces.remove(&name);
                let dirs = dependents.iter().map(|p| p.cache_path.clone()).collect();
                staged.installed_plugins.retain(|p| p.marketplace != name);
                self.stage_removals(staged, dirs, json!({"removed": true}))
            }
            PluginCommand::Uninstall {
                name,
                direct_source_id,
            } => {
                let found = find_installed(&registry, &name, direct_source_id.as_deref())?;
                let mut staged = registry.clone();
                staged.installed_plugins.retain(|p| *p != found);
                self.stage_removals(staged, vec![found.cache_path.clone()], json!({}))
            }
            PluginCommand::SetEnabled { names, enabled } => {
                let mut staged = registry.clone();
                let mut changed = false;
                for plugin in &mut staged.installed_plugins {
                    // Direct installs are always enabled.
                    if plugin.marketplace.is_empty() {
                        continue;
                    }
                    if names.iter().any(|n| plugin.named(n)) && plugin.enabled != enabled {
                        plugin.enabled = enabled;
                        changed = true;
                    }
                }
                if !changed {
                    return Ok(Some(json!({})));
                }
                self.save_registry(staged, json!({}));
                Ok(None)
            }
            PluginCommand::Install { source, cwd } => {
                self.start_install(&registry, &source, cwd.as_deref())
            }
            PluginCommand::Update { name } => {
                let found = find_installed(&registry, &name, None)?;
                self.start_update(&registry, found, InstallKind::Update)
            }
            PluginCommand::UpdateAll => {
                let left: VecDeque<Installed> = registry.installed_plugins.clone().into();
                if let Some(running) = self.plugins.running.as_mut() {
                    running.batch = Some((left, Vec::new()));
                    running.staged = Some(registry);
                }
                self.update_next()
            }
            PluginCommand::SessionList { session } => {
                if self
                    .session_state_ref::<SessionPlugins>(&session)
                    .and_then(|s| s.applied.as_ref())
                    .is_none()
                {
                    self.set_session_plugins(&session, &registry.installed_plugins);
                }
                Ok(Some(self.session_plugin_list(&session)))
            }
            PluginCommand::SessionReload { session } => {
                self.set_session_plugins(&session, &registry.installed_plugins);
                Ok(Some(json!({})))
            }
            PluginCommand::ApplyToSessions => {
                let sessions: Vec<String> = self.sessions.keys().cloned().collect();
                for session in sessions {
                    let applied = self
                        .session_state_ref::<SessionPlugins>(&session)
                        .is_some_and(|s| s.applied.is_some());
                    if !applied {
                        self.set_session_plugins(&session, &registry.installed_plugins);
                    }
                }
                Ok(Some(json!({})))
            }
        }
    }

    /// An absolute local directory from a `source` (relative ones against `cwd`, else the
    /// server's working directory); remote sources are refused.
    fn local_path(&self, source: &str, cwd: Option<&str>, what: &str) -> Result<String, Fail> {
        let source = source.trim();
        if source.is_empty() {
            return Err(format!("the {what} source is empty"));
        }
        if source.starts_with('/') {
            return Ok(normalize_path(source).trim_end_matches('/').to_owned());
        }
        if source.starts_with('.') {
            let base = cwd
                .map(str::to_owned)
                .or_else(|| self.config.server_cwd.clone())
                .ok_or_else(|| format!("cannot resolve {source}: no working directory"))?;
            let joined = format!("{}/{source}", base.trim_end_matches('/'));
            return Ok(normalize_path(&joined).trim_end_matches('/').to_owned());
        }
        if source.starts_with('~') {
            return Err(format!("cannot resolve {source}: give an absolute path"));
        }
        Err(format!(
            "{what} source {source} is not a local directory: this server installs from local \
             directories only (GitHub and URL sources need the hosted service)"
        ))
    }

    fn read_marketplace(&mut self, name_hint: Option<String>, dir: String, source: Value) {
        let request = FileRequest::ReadMany {
            root: dir.clone(),
            paths: MARKETPLACE_MANIFESTS
                .iter()
                .map(|p| (*p).to_owned())
                .collect(),
            max_file_bytes: MAX_MANIFEST_BYTES,
        };
        self.set_step(Step::MarketplaceRead {
            name_hint,
            dir,
            source,
        });
        self.plugin_file(request, PluginWait::MarketplaceManifest);
    }

    /// A marketplace's manifest was read (`add`, `refresh`, or before an update).
    fn marketplace_read(
        &mut self,
        name_hint: Option<String>,
        dir: String,
        source: Value,
        result: Result<FileReply, String>,
    ) -> Result<Option<Value>, Fail> {
        let parsed = first_manifest(&dir, MARKETPLACE_MANIFESTS, "marketplace.json", result)
            .and_then(|(path, text)| parse_marketplace(&path, &text));
        let now = self.now.to_rfc3339();
        let command = self.command();
        match command {
            Some(PluginCommand::MarketplaceAdd { .. }) => {
                let (name, plugins) = parsed?;
                let mut staged = self.registry();
                staged.marketplaces.insert(
                    name.clone(),
                    Marketplace {
                        source,
                        plugins,
                        updated_at: now,
                    },
                );
                self.save_registry(staged, json!({ "name": name }));
                Ok(None)
            }
            Some(PluginCommand::MarketplaceRefresh { .. }) => {
                let Some(Value::Array(mut results)) = self.take_answer() else {
                    return Err("the refresh lost its results".into());
                };
                let name = name_hint.unwrap_or_default();
                match parsed {
                    Ok((_, plugins)) => {
                        let staged = self.staged_mut();
                        if let Some(m) = staged.marketplaces.get_mut(&name) {
                            m.plugins = plugins;
                            m.updated_at = now;
                        }
                        results.push(json!({"name": name, "success": true}));
                    }
                    Err(e) => results.push(json!({"name": name, "success": false, "error": e})),
                }
                let left = self.take_refresh_left();
                self.refresh_next(left, results)
            }
            Some(PluginCommand::Update { .. } | PluginCommand::UpdateAll) => {
                // The catalog read again before a marketplace plugin is updated.
                let Some(Value::Object(pending)) = self.take_answer() else {
                    return Err("the update lost its place".into());
                };
                let previous: Installed =
                    serde_json::from_value(Value::Object(pending)).map_err(|e| e.to_string())?;
                let kind = if matches!(command, Some(PluginCommand::UpdateAll)) {
                    InstallKind::UpdateAll
                } else {
                    InstallKind::Update
                };
                match parsed {
                    Ok((_, plugins)) => {
                        let staged = self.staged_mut();
                        if let Some(m) = staged.marketplaces.get_mut(&previous.marketplace) {
                            m.plugins = plugins;
                            m.updated_at = now;
                        }
                        let registry = self.staged_mut().clone();
                        self.install_from_marketplace(
                            &registry,
                            &previous.name,
                            &previous.marketplace,
                            Some(previous.clone()),
                            kind,
                        )
                    }
                    Err(e) => self.install_failed_for(previous, kind, e),
                }
            }
            _ => Err("the marketplace read lost its place".into()),
        }
    }

    fn take_answer(&mut self) -> Option<Value> {
        self.plugins.running.as_mut()?.answer.take()
    }

    fn staged_mut(&mut self) -> &mut Registry {
        let registry = self.registry();
        let running = self.plugins.running.as_mut().expect("running");
        running.staged.get_or_insert(registry)
    }

    fn take_refresh_left(&mut self) -> Vec<String> {
        self.plugins
            .running
            .as_mut()
            .map(|r| std::mem::take(&mut r.removals).into())
            .unwrap_or_default()
    }

    /// Refreshes the next marketplace of `left` (the local ones are read again; the default
    /// ones cannot be fetched here), then saves and answers.
    fn refresh_next(
        &mut self,
        mut left: Vec<String>,
        mut results: Vec<Value>,
    ) -> Result<Option<Value>, Fail> {
        while !left.is_empty() {
            let name = left.remove(0);
            if is_default(&name) {
                results.push(json!({"name": name, "success": false,
                    "error": format!("{name} is fetched from GitHub, which this server does not reach (it serves local marketplaces only)")}));
                continue;
            }
            let Some(m) = self.staged_mut().marketplaces.get(&name).cloned() else {
                continue;
            };
            let Some(dir) = m.dir().map(str::to_owned) else {
                results.push(
                    json!({"name": name, "success": false, "error": "not a local marketplace"}),
                );
                continue;
            };
            if let Some(running) = self.plugins.running.as_mut() {
                running.answer = Some(Value::Array(results));
                running.removals = left.into();
            }
            self.read_marketplace(Some(name), dir, m.source.clone());
            return Ok(None);
        }
        let staged = self.staged_mut().clone();
        self.save_registry(staged, json!({ "results": results }));
        Ok(None)
    }

    /// Starts `plugins.install`.
    fn start_install(
        &mut self,
        registry: &Registry,
        source: &str,
        cwd: Option<&str>,
    ) -> Result<Option<Value>, Fail> {
        if let Some((name, marketplace)) = marketplace_spec(source) {
            let previous = registry
                .installed_plugins
                .iter()
                .find(|p| p.name == name && p.marketplace == marketplace)
                .cloned();
            return self.install_from_marketplace(
                registry,
                name,
                marketplace,
                previous,
                InstallKind::Install,
            );
        }
        let dir = self.local_path(source, cwd, "plugin")?;
        let id = direct_source_id(&dir);
        let previous = registry
            .installed_plugins
            .iter()
            .find(|p| p.direct_source_id.as_deref() == Some(id.as_str()))
            .cloned();
        let install = Install {
            marketplace: String::new(),
            name: None,
            version: None,
            cache_path: self.data_path(&format!("{INSTALL_DIR}/{DIRECT_DIR}/{id}")),
            from: dir,
            direct_source_id: Some(id),
            previous,
            skills: 0,
            kind: InstallKind::Install,
        };
        self.read_plugin_manifest(install);
        Ok(None)
    }

    /// Installs (or updates) `name` from `marketplace`'s catalog.
    fn install_from_marketplace(
        &mut self,
        registry: &Registry,
        name: &str,
        marketplace_name: &str,
        previous: Option<Installed>,
        kind: InstallKind,
    ) -> Result<Option<Value>, Fail> {
        let entry = marketplace(registry, marketplace_name).and_then(|m| {
            let entry = m
                .plugins
                .iter()
                .find(|p| p.name == name)
                .ok_or_else(|| format!("plugin {name} is not in marketplace {marketplace_name}"))?;
            let rel = entry.source.as_str().ok_or_else(|| {
                format!(
                    "plugin {name}@{marketplace_name} comes from a remote source, which this \
                     server does not fetch (it installs local plugins only)"
                )
            })?;
            let dir = m.dir().ok_or_else(|| format!("{marketplace_name} is not a local marketplace"))?;
            let from = normalize_path(&format!("{dir}/{rel}")).trim_end_matches('/').to_owned();
            if !crate::agent::builtin::is_within(&from, dir) {
                return Err(format!(
                    "plugin {name}@{marketplace_name}: its source {rel} is outside the marketplace's directory"
                ));
            }
            Ok((entry.clone(), from))
        });
        let (entry, from) = match entry {
            Ok(found) => found,
            Err(e) => {
                return match previous {
                    Some(previous) if kind != InstallKind::Install => {
                        self.install_failed_for(previous, kind, e)
                    }
                    _ => Err(e),
                }
            }
        };
        let install = Install {
            cache_path: self.data_path(&format!("{INSTALL_DIR}/{marketplace_name}/{name}")),
            marketplace: marketplace_name.to_owned(),
            name: Some(entry.name.clone()),
            version: entry.version.clone(),
            from,
            direct_source_id: None,
            previous,
            skills: 0,
            kind,
        };
        self.read_plugin_manifest(install);
        Ok(None)
    }

    fn read_plugin_manifest(&mut self, install: Install) {
        let request = FileRequest::ReadMany {
            root: install.from.clone(),
            paths: PLUGIN_MANIFESTS.iter().map(|p| (*p).to_owned()).collect(),
            max_file_bytes: MAX_MANIFEST_BYTES,
        };
        self.set_step(Step::PluginRead(install));
        self.plugin_file(request, PluginWait::PluginManifest);
    }

    /// The plugin's manifest was read: its name and version, then the copy.
    fn plugin_read(
        &mut self,
        mut install: Install,
        result: Result<FileReply, String>,
    ) -> Result<Option<Value>, Fail> {
        let direct = install.marketplace.is_empty();
        match first_manifest(&install.from, PLUGIN_MANIFESTS, "plugin.json", result) {
            Ok((path, text)) => match parse_plugin(&path, &text) {
                Ok((name, version)) => {
                    // A marketplace plugin is known by its catalog name.
                    if direct {
                        install.name = Some(name);
                    }
                    if version.is_some() {
                        install.version = version;
                    }
                }
                Err(e) => return self.install_failed(install, e),
            },
            // A marketplace plugin needs no manifest of its own (its catalog entry names it).
            Err(_) if !direct => {}
            Err(e) => return self.install_failed(install, e),
        }
        let request = FileRequest::CopyDir {
            from: install.from.clone(),
            to: install.cache_path.clone(),
        };
        self.set_step(Step::Copying(install));
        self.plugin_file(request, PluginWait::Copy);
        Ok(None)
    }

    /// The plugin is in place: its record is staged, then saved.
    fn installed(&mut self, install: Install) -> Result<Option<Value>, Fail> {
        let name = install.name.clone().unwrap_or_default();
        let record = Installed {
            name: name.clone(),
            marketplace: install.marketplace.clone(),
            version: install.version.clone(),
            installed_at: self.now.to_rfc3339(),
            enabled: install
                .previous
                .as_ref()
                .is_none_or(|p| p.enabled || install.marketplace.is_empty()),
            cache_path: install.cache_path.clone(),
            source: install
                .direct_source_id
                .as_ref()
                .map(|_| json!({"source": "local", "path": install.from})),
            direct_source_id: install.direct_source_id.clone(),
        };
        let staged = self.staged_mut();
        staged.installed_plugins.retain(|p| {
            let replaced = p.name == record.name
                && p.marketplace == record.marketplace
                && p.direct_source_id == record.direct_source_id;
            let previous = install.previous.as_ref().is_some_and(|prev| prev == p);
            !(replaced || previous)
        });
        staged.installed_plugins.push(record.clone());
        let previous_version = install.previous.as_ref().and_then(|p| p.version.clone());
        match install.kind {
            InstallKind::Install => {
                let mut answer =
                    json!({"plugin": record.info(), "skillsInstalled": install.skills});
                if install.marketplace.is_empty() {
                    answer["deprecationWarning"] = json!(DIRECT_DEPRECATED);
                }
                let staged = self.staged_mut().clone();
                self.save_registry(staged, answer);
                Ok(None)
            }
            InstallKind::Update => {
                let mut answer = json!({"skillsInstalled": install.skills});
                if let Some(v) = previous_version {
                    answer["previousVersion"] = json!(v);
                }
                if let Some(v) = &record.version {
                    answer["newVersion"] = json!(v);
                }
                let staged = self.staged_mut().clone();
                self.save_registry(staged, answer);
                Ok(None)
            }
            InstallKind::UpdateAll => {
                let mut entry = json!({"name": record.name, "marketplace": record.marketplace,
                                       "success": true, "skillsInstalled": install.skills});
                if let Some(v) = previous_version {
                    entry["previousVersion"] = json!(v);
                }
                if let Some(v) = &record.version {
                    entry["newVersion"] = json!(v);
                }
                self.push_batch_result(entry);
                self.update_next()
            }
        }
    }

    fn install_failed(&mut self, install: Install, e: String) -> Result<Option<Value>, Fail> {
        match install.previous {
            Some(previous) if install.kind == InstallKind::UpdateAll => {
                self.install_failed_for(previous, install.kind, e)
            }
            _ => Err(e),
        }
    }

    /// An update of `previous` failed: `updateAll` records it and goes on.
    fn install_failed_for(
        &mut self,
        previous: Installed,
        kind: InstallKind,
        e: String,
    ) -> Result<Option<Value>, Fail> {
        if kind != InstallKind::UpdateAll {
            return Err(e);
        }
        let mut entry = json!({"name": previous.name, "marketplace": previous.marketplace,
                               "success": false, "error": e});
        if let Some(v) = &previous.version {
            entry["previousVersion"] = json!(v);
        }
        self.push_batch_result(entry);
        self.update_next()
    }

    fn push_batch_result(&mut self, entry: Value) {
        if let Some((_, results)) = self.plugins.running.as_mut().and_then(|r| r.batch.as_mut()) {
            results.push(entry);
        }
    }

    /// `updateAll`: the next plugin, or the save and the answer.
    fn update_next(&mut self) -> Result<Option<Value>, Fail> {
        let next = self
            .plugins
            .running
            .as_mut()
            .and_then(|r| r.batch.as_mut())
            .and_then(|(left, _)| left.pop_front());
        match next {
            Some(plugin) => {
                let registry = self.staged_mut().clone();
                self.start_update(&registry, plugin, InstallKind::UpdateAll)
            }
            None => {
                let results = self
                    .plugins
                    .running
                    .as_mut()
                    .and_then(|r| r.batch.take())
                    .map(|(_, r)| r)
                    .unwrap_or_default();
                let staged = self.staged_mut().clone();
                self.save_registry(staged, json!({ "results": results }));
                Ok(None)
            }
        }
    }

    /// Updates an installed plugin: a marketplace plugin from its marketplace's catalog
    /// (read again first), a direct install from its directory.
    fn start_update(
        &mut self,
        registry: &Registry,
        plugin: Installed,
        kind: InstallKind,
    ) -> Result<Option<Value>, Fail> {
        if plugin.marketplace.is_empty() {
            let Some(from) = plugin
                .source
                .as_ref()
                .and_then(|s| s.get("path"))
                .and_then(Value::as_str)
                .map(str::to_owned)
            else {
                return self.install_failed_for(
                    plugin,
                    kind,
                    "the plugin's source is not recorded".into(),
                );
            };
            let install = Install {
                marketplace: String::new(),
                name: Some(plugin.name.clone()),
                version: None,
                from,
                direct_source_id: plugin.direct_source_id.clone(),
                cache_path: plugin.cache_path.clone(),
                previous: Some(plugin),
                skills: 0,
                kind,
            };
            self.read_plugin_manifest(install);
            return Ok(None);
        }
        let m = match marketplace(registry, &plugin.marketplace) {
            Ok(m) => m.clone(),
            Err(e) => return self.install_failed_for(plugin, kind, e),
        };
        let Some(dir) = m.dir().map(str::to_owned) else {
            let e = format!("{} is not a local marketplace", plugin.marketplace);
            return self.install_failed_for(plugin, kind, e);
        };
        if let Some(running) = self.plugins.running.as_mut() {
            running.answer = Some(serde_json::to_value(&plugin).unwrap_or(Value::Null));
        }
        self.read_marketplace(Some(plugin.marketplace.clone()), dir, m.source.clone());
        Ok(None)
    }

    /// Removes `dirs`, then saves `staged` and answers `answer`.
    fn stage_removals(
        &mut self,
        staged: Registry,
        dirs: Vec<String>,
        answer: Value,
    ) -> Result<Option<Value>, Fail> {
        if let Some(running) = self.plugins.running.as_mut() {
            running.staged = Some(staged);
            running.removals = dirs.into();
            running.answer = Some(answer);
        }
        self.next_removal()
    }

    fn next_removal(&mut self) -> Result<Option<Value>, Fail> {
        let Some(running) = self.plugins.running.as_mut() else {
            return Ok(None);
        };
        match running.removals.pop_front() {
            Some(path) => {
                running.step = Step::Removing;
                self.plugin_file(FileRequest::Remove { path }, PluginWait::Remove);
            }
            None => {
                let staged = running.staged.take().unwrap_or_default();
                let answer = running.answer.take().unwrap_or_else(|| json!({}));
                self.save_registry(staged, answer);
            }
        }
        Ok(None)
    }

    /// Writes `staged` to `plugins.json`; once written it is the registry and `answer` is
    /// sent.
    fn save_registry(&mut self, staged: Registry, answer: Value) {
        let content = serde_json::to_string_pretty(&staged).unwrap_or_default();
        let path = self.data_path(REGISTRY_FILE);
        if let Some(running) = self.plugins.running.as_mut() {
            running.staged = Some(staged);
            running.answer = Some(answer);
            running.step = Step::Saving;
        }
        self.plugin_file(
            FileRequest::Write {
                path,
                content,
                create_new: false,
            },
            PluginWait::Save,
        );
    }

    /// The running job is answered; the next one starts.
    fn finish_plugin_job(&mut self, result: Result<Value, Fail>) {
        let Some(running) = self.plugins.running.take() else {
            return;
        };
        if let PluginCommand::ApplyToSessions = running.job.command {
            // Sessions waiting for their plugins go on, with or without them.
            let sessions: Vec<String> = self.sessions.keys().cloned().collect();
            for session in sessions {
                let pending = self
                    .session_state::<super::sessions::skills::SessionSkills>(&session)
                    .is_some_and(|s| std::mem::take(&mut s.plugins_pending));
                if pending {
                    self.release_held(&session);
                }
            }
        }
        if let Some((conn, id, method)) = running.job.to {
            let result = result.map_err(|e| plugin_error(&method, e));
            self.respond(conn, &id, result);
        }
        self.next_plugin_job();
    }

    /// `session`'s plugins become `installed`: its skills include their skills.
    fn set_session_plugins(&mut self, session: &str, installed: &[Installed]) {
        let Some(state) = self.session_state::<SessionPlugins>(session) else {
            return;
        };
        state.applied = Some(installed.to_vec());
        let roots: Vec<String> = installed
            .iter()
            .filter(|p| p.enabled)
            .map(|p| p.cache_path.clone())
            .collect();
        self.set_plugin_skill_roots(session, roots);
        if let Some(s) = self.session_state::<super::sessions::skills::SessionSkills>(session) {
            if std::mem::take(&mut s.plugins_pending) {
                self.release_held(session);
            }
        }
    }

    fn session_plugin_list(&self, session: &str) -> Value {
        let plugins = self
            .session_state_ref::<SessionPlugins>(session)
            .and_then(|s| s.applied.as_ref())
            .map(|list| {
                list.iter()
                    .map(|p| {
                        let mut v = json!({"name": p.name, "marketplace": p.marketplace,
                                           "enabled": p.enabled});
                        if let Some(version) = &p.version {
                            v["version"] = json!(version);
                        }
                        v
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        json!({ "plugins": plugins })
    }

    /// `session.plugins.reload`: the registry is read again first.
    pub(crate) fn reload_session_plugins(
        &mut self,
        conn: ConnId,
        id: &OwnedId,
        method: &str,
        session: &str,
    ) {
        if self.config.data_dir.is_some()
            && self.plugins.running.is_none()
            && self.plugins.queue.is_empty()
        {
            self.plugins.stale = true;
        }
        self.plugin_request(
            conn,
            id,
            method,
            PluginCommand::SessionReload {
                session: session.to_owned(),
            },
        );
    }
}

/// A session's plugins (kept in the session's typed state store).
#[derive(Debug, Default)]
pub(crate) struct SessionPlugins {
    /// The installed plugins when the session took them (`None`: not yet).
    applied: Option<Vec<Installed>>,
}

/// The "failed" error of a plugins request, in the runtime's wording.
fn plugin_error(method: &str, message: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(
        code::INTERNAL_ERROR,
        format!("Request {method} failed with message: {message}"),
    )
}

fn is_default(name: &str) -> bool {
    DEFAULT_MARKETPLACES.iter().any(|(n, _)| *n == name)
}

/// A registered marketplace by name (the default ones are not browsable here).
fn marketplace<'a>(registry: &'a Registry, name: &str) -> Result<&'a Marketplace, Fail> {
    if let Some(m) = registry.marketplaces.get(name) {
        return Ok(m);
    }
    if let Some((_, repo)) = DEFAULT_MARKETPLACES.iter().find(|(n, _)| *n == name) {
        return Err(format!(
            "marketplace {name} is fetched from GitHub ({repo}), which this server does not \
             reach: it serves local marketplaces only"
        ));
    }
    Err(format!("marketplace {name} is not registered"))
}

/// The installed plugin `wanted` names (a name, `plugin@marketplace`, or a direct install's
/// name with its `directSourceId`).
fn find_installed(
    registry: &Registry,
    wanted: &str,
    direct: Option<&str>,
) -> Result<Installed, Fail> {
    let matches: Vec<&Installed> = registry
        .installed_plugins
        .iter()
        .filter(|p| p.named(wanted))
        .filter(|p| direct.is_none_or(|id| p.direct_source_id.as_deref() == Some(id)))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!("plugin {wanted} is not installed")),
        many => Err(format!(
            "plugin {wanted} is ambiguous: name one of {}",
            many.iter().map(|p| p.spec()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// `plugin@marketplace`, when `source` is one.
fn marketplace_spec(source: &str) -> Option<(&str, &str)> {
    let (name, marketplace) = source.split_once('@')?;
    let plain = |s: &str| {
        !s.is_empty() && !s.contains(['/', '\\', ':', '@']) && !s.chars().any(char::is_whitespace)
    };
    (plain(name) && plain(marketplace) && !source.starts_with('.')).then_some((name, marketplace))
}

/// The stable id of a direct install from local directory `dir`.
fn direct_source_id(dir: &str) -> String {
    let digest = Sha256::digest(format!("local:{dir}").as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The first manifest found among `candidates` of `dir` (path, text).
fn first_manifest(
    dir: &str,
    candidates: &[&str],
    what: &str,
    result: Result<FileReply, String>,
) -> Result<(String, String), Fail> {
    let texts = match result {
        Ok(FileReply::Texts(texts)) => texts,
        Ok(_) => Vec::new(),
        Err(e) => return Err(e),
    };
    for candidate in candidates {
        if let Some((_, text)) = texts.iter().find(|(p, _)| p == candidate) {
            return Ok((format!("{dir}/{candidate}"), text.clone()));
        }
    }
    Err(format!(
        "no {what} in {dir} (looked for {})",
        candidates.join(", ")
    ))
}

/// A string field of a manifest object, or the error naming the file and the field.
fn string_field(
    path: &str,
    object: &serde_json::Map<String, Value>,
    field: &str,
    required: bool,
) -> Result<Option<String>, Fail> {
    match object.get(field) {
        None | Some(Value::Null) if !required => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        Some(Value::String(_)) if !required => Ok(None),
        None | Some(Value::Null) => Err(format!("{path}: `{field}` is missing")),
        Some(_) => Err(format!("{path}: `{field}` must be a non-empty string")),
    }
}

/// A marketplace manifest: its name and catalog.
fn parse_marketplace(path: &str, text: &str) -> Result<(String, Vec<CatalogEntry>), Fail> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("{path}: not valid JSON: {e}"))?;
    let Value::Object(object) = value else {
        return Err(format!("{path}: the manifest must be a JSON object"));
    };
    let name = string_field(path, &object, "name", true)?.unwrap_or_default();
    check_name(path, "name", &name)?;
    let plugin_root = object
        .get("metadata")
        .and_then(|m| m.get("pluginRoot"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let plugins = match object.get("plugins") {
        Some(Value::Array(plugins)) => plugins,
        None => return Err(format!("{path}: `plugins` is missing")),
        Some(_) => return Err(format!("{path}: `plugins` must be an array")),
    };
    let mut catalog = Vec::new();
    for (i, plugin) in plugins.iter().enumerate() {
        let Value::Object(entry) = plugin else {
            return Err(format!("{path}: `plugins[{i}]` must be an object"));
        };
        let field = |f: &str| format!("plugins[{i}].{f}");
        let name = string_field(path, entry, "name", true)
            .map_err(|_| format!("{path}: `{}` must be a non-empty string", field("name")))?
            .unwrap_or_default();
        check_name(path, &field("name"), &name)?;
        let description = string_field(path, entry, "description", false)
            .map_err(|_| format!("{path}: `{}` must be a string", field("description")))?;
        let version = string_field(path, entry, "version", false)
            .map_err(|_| format!("{path}: `{}` must be a string", field("version")))?;
        let source = match entry.get("source") {
            Some(Value::String(s)) if !s.trim().is_empty() => {
                let s = s.trim();
                if s.starts_with('/') || s.contains("..") {
                    return Err(format!(
                        "{path}: `{}` must be a path inside the marketplace's directory",
                        field("source")
                    ));
                }
                match (&plugin_root, s.starts_with("./")) {
                    (Some(root), false) => json!(format!("{}/{s}", root.trim_end_matches('/'))),
                    _ => json!(s),
                }
            }
            Some(Value::Object(o)) => Value::Object(o.clone()),
            None => return Err(format!("{path}: `{}` is missing", field("source"))),
            Some(_) => {
                return Err(format!(
                    "{path}: `{}` must be a relative path or a source object",
                    field("source")
                ))
            }
        };
        catalog.push(CatalogEntry {
            name,
            description,
            version,
            source,
        });
    }
    Ok((name, catalog))
}

/// A plugin manifest: its name and version.
fn parse_plugin(path: &str, text: &str) -> Result<(String, Option<String>), Fail> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("{path}: not valid JSON: {e}"))?;
    let Value::Object(object) = value else {
        return Err(format!("{path}: the manifest must be a JSON object"));
    };
    let name = string_field(path, &object, "name", true)?.unwrap_or_default();
    check_name(path, "name", &name)?;
    let version = string_field(path, &object, "version", false)?;
    Ok((name, version))
}

/// Names become directory names: letters, digits, `-`, `_`, `.` (not only dots), at most
/// 64 characters.
fn check_name(path: &str, field: &str, name: &str) -> Result<(), Fail> {
    let ok = name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.chars().all(|c| c == '.')
        && name != DIRECT_DIR;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{path}: `{field}` ({name}) must be at most 64 letters, digits, '-', '_' or '.'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_and_sources() {
        assert_eq!(marketplace_spec("a@b"), Some(("a", "b")));
        assert_eq!(marketplace_spec("git@github.com:o/r"), None);
        assert_eq!(marketplace_spec("./x@y"), None);
        assert_eq!(marketplace_spec("/tmp/p"), None);
        assert_eq!(direct_source_id("/a"), direct_source_id("/a"));
        assert_ne!(direct_source_id("/a"), direct_source_id("/b"));
    }

    #[test]
    fn bad_manifests_name_the_file_and_field() {
        let e = parse_marketplace(
            "/m/marketplace.json",
            r#"{"name":"m","plugins":[{"source":"./p"}]}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("/m/marketplace.json") && e.contains("plugins[0].name"),
            "{e}"
        );
        let e = parse_marketplace("/m/marketplace.json", r#"{"plugins":[]}"#).unwrap_err();
        assert!(e.contains("`name` is missing"), "{e}");
        let e = parse_plugin("/p/plugin.json", r#"{"name":"../x"}"#).unwrap_err();
        assert!(e.contains("/p/plugin.json") && e.contains("`name`"), "{e}");
        let e = parse_marketplace(
            "/m/marketplace.json",
            r#"{"name":"m","plugins":[{"name":"p","source":"../up"}]}"#,
        )
        .unwrap_err();
        assert!(e.contains("plugins[0].source"), "{e}");
    }
}
