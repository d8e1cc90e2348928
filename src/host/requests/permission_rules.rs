//! Permission rules, allowed paths and URLs, location approvals and folder trust: the state
//! behind `session.permissions.configure` and friends, and the decision a permission prompt
//! of a tool call gets before any client is asked ([`Host::permission_gate`]).
//!
//! Per session (kept in the session's typed state store):
//!
//! * **Rules** (`{kind, argument}`; `argument: null` matches any): the configured `approved`
//!   and `denied` sets (`configure`), the session-scoped approvals (`modifyRules` with scope
//!   `session`) and the location-scoped ones (`locations.apply`, `modifyRules` with scope
//!   `location`). A matching denied rule fails the call as denied (`tool.execution_complete`
//!   with `error.code: "denied"`, as a client's reject does) without any `permission.*`
//!   event — it wins over approve-all, as the runtime's `--deny-tool` does over
//!   `--allow-all-tools`. Otherwise approve-all, a matching approved rule, approve-all-reads
//!   (`read` prompts, `path` prompts with `accessKind: "read"`, `url` prompts), the URL policy
//!   (`unrestricted`, `initialAllowed`) or the path policy run the call without asking, as
//!   approve-all does. Rule kinds matched: `shell` (alias `commands`; the argument is a
//!   command identifier, or a command prefix such as `git push`; a command line is approved
//!   when every command is covered, and denied when any is), `read` / `write` (the argument
//!   is a directory or file the path lies within), `url` (a domain, or a URL prefix), `mcp`
//!   (`server` or `server(tool)`), `custom-tool` (the tool name); any other kind matches a
//!   prompt of the same kind when its argument is null.
//! * **Paths**: the primary directory (the configured `workspacePath`, else the session's
//!   working directory) and the additional allowed directories. Checks are lexical, on
//!   normalized absolute paths, component by component (`/a/bc` is not within `/a/b`); a
//!   relative path is taken against the primary directory. `includeTempDirectory` is
//!   accepted, but no temp directory is listed: the core reads no environment and does not
//!   know the system's. Once the path policy was configured or changed, a `path` prompt
//!   ("outside the allowed directories") for a path within them is approved; `unrestricted`
//!   approves every `path` prompt.
//! * `setRequired` and `notifyPromptShown` are recorded; prompts are always bridged to the
//!   attached clients, and agentwire has no `permission_prompt` notification hook to run.
//!
//! Per host (in memory, lost at a restart; the real runtime keeps them in its data
//! directory): the tool approvals of each location (`locations.addToolApproval`, `modifyRules`
//! with scope `location`), keyed by the location's normalized directory, and the trusted
//! folders (`folderTrust.*`; a trusted folder covers the folders below it). A location is
//! always of type `dir`: the core does no I/O, so it cannot look for a git repository root.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::agent::builtin::{is_absolute, url_domain};
use crate::agent::ToolOutcome;

use crate::host::Host;

/// A permission rule: a kind and an optional argument (`null` matches any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PermissionRule {
    pub kind: String,
    #[serde(default)]
    pub argument: Option<String>,
}

impl PermissionRule {
    fn new(kind: &str, argument: Option<&str>) -> Self {
        PermissionRule {
            kind: kind.to_owned(),
            argument: argument.map(str::to_owned),
        }
    }

    fn label(&self) -> String {
        match &self.argument {
            Some(a) => format!("{}({a})", self.kind),
            None => self.kind.clone(),
        }
    }
}

/// The `paths` of `session.permissions.configure`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathsConfig {
    pub workspace_path: Option<String>,
    pub additional_directories: Vec<String>,
    pub unrestricted: bool,
}

/// The `urls` of `session.permissions.configure`.
#[derive(Debug, Clone, Default)]
pub(crate) struct UrlsConfig {
    pub initial_allowed: Vec<String>,
    pub unrestricted: bool,
}

/// A `session.permissions.configure` patch (`None`: unchanged).
#[derive(Debug, Clone, Default)]
pub(crate) struct PermissionsPatch {
    pub approve_all_reads: Option<bool>,
    pub rules: Option<(Vec<PermissionRule>, Vec<PermissionRule>)>,
    pub paths: Option<PathsConfig>,
    pub urls: Option<UrlsConfig>,
}

/// Where `modifyRules` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleScope {
    Session,
    Location,
}

/// What `locations.apply` applied.
#[derive(Debug, Clone)]
pub(crate) struct AppliedLocation {
    pub key: String,
    pub changed: bool,
    pub rules: Vec<PermissionRule>,
}

/// A path argument that cannot be taken as an absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathError(pub String);

/// What a permission prompt gets before a client is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// No standing decision: ask the clients.
    Ask,
    /// Approved without asking: run the call.
    Run,
    /// Denied by a rule: the call was completed as denied.
    Denied,
}

/// The session's path policy, once configured or changed.
#[derive(Debug, Clone, Default)]
struct PathPolicy {
    /// The primary directory, when set (else the session's working directory).
    primary: Option<String>,
    additional: Vec<String>,
    unrestricted: bool,
}

/// The per-session state (the session's typed state store).
#[derive(Debug, Default)]
struct SessionPermissions {
    approved: Vec<PermissionRule>,
    denied: Vec<PermissionRule>,
    session_rules: Vec<PermissionRule>,
    location_rules: Vec<PermissionRule>,
    /// The location applied last (`locations.apply`).
    location: Option<String>,
    approve_all_reads: bool,
    paths: Option<PathPolicy>,
    urls_unrestricted: bool,
    urls_allowed: Vec<String>,
    required: bool,
    /// The prompts a client said it showed (`notifyPromptShown`), the last message.
    prompts_shown: u64,
    last_prompt_shown: Option<String>,
}

/// The per-host state: location approvals and trusted folders.
#[derive(Debug, Default)]
pub(crate) struct HostPermissions {
    locations: BTreeMap<String, Vec<PermissionRule>>,
    trusted: BTreeSet<String>,
}

impl Host {
    fn perms(&mut self, session: &str) -> Option<&mut SessionPermissions> {
        self.session_state::<SessionPermissions>(session)
    }

    fn perms_ref(&self, session: &str) -> Option<&SessionPermissions> {
        self.session_state_ref::<SessionPermissions>(session)
    }

    fn session_cwd(&self, session: &str) -> Option<String> {
        self.session(session)?
            .cwd
            .as_deref()
            .and_then(|c| normalize(c, None))
    }

    /// The primary directory: the configured one, else the session's working directory.
    fn primary_dir(&self, session: &str) -> Option<String> {
        self.perms_ref(session)
            .and_then(|p| p.paths.as_ref())
            .and_then(|p| p.primary.clone())
            .or_else(|| self.session_cwd(session))
    }

    /// `path` normalized, relative to the primary directory.
    fn session_path(&self, session: &str, path: &str) -> Result<String, PathError> {
        if path.trim().is_empty() {
            return Err(PathError("`path` must not be empty".into()));
        }
        let base = self.primary_dir(session);
        normalize(path, base.as_deref()).ok_or_else(|| {
            PathError(format!(
                "`{path}` is relative and the session has no working directory"
            ))
        })
    }

    fn path_policy(&mut self, session: &str) -> Option<&mut PathPolicy> {
        let primary = self.primary_dir(session);
        let perms = self.perms(session)?;
        Some(perms.paths.get_or_insert_with(|| PathPolicy {
            primary,
            ..PathPolicy::default()
        }))
    }

    /// Applies a `session.permissions.configure` patch. Nothing changes when a path fails.
    pub(crate) fn configure_permissions(
        &mut self,
        session: &str,
        patch: PermissionsPatch,
    ) -> Result<(), PathError> {
        let paths = match &patch.paths {
            Some(config) => {
                let primary = match &config.workspace_path {
                    Some(p) => Some(self.session_path(session, p)?),
                    None => self.session_cwd(session),
                };
                let mut additional = Vec::new();
                for dir in &config.additional_directories {
                    let dir = normalize(dir, primary.as_deref()).ok_or_else(|| {
                        PathError(format!(
                            "`{dir}` is relative and the session has no working directory"
                        ))
                    })?;
                    if !additional.contains(&dir) {
                        additional.push(dir);
                    }
                }
                Some(PathPolicy {
                    primary,
                    additional,
                    unrestricted: config.unrestricted,
                })
            }
            None => None,
        };
        let Some(perms) = self.perms(session) else {
            return Ok(());
        };
        if let Some(on) = patch.approve_all_reads {
            perms.approve_all_reads = on;
        }
        if let Some((approved, denied)) = patch.rules {
            perms.approved = approved;
            perms.denied = denied;
        }
        if paths.is_some() {
            perms.paths = paths;
        }
        if let Some(urls) = patch.urls {
            perms.urls_unrestricted = urls.unrestricted;
            perms.urls_allowed = urls.initial_allowed;
        }
        Ok(())
    }

    /// `paths.list`: the primary directory and every allowed directory (the primary first),
    /// or `None` when the session has neither a configured primary nor a working directory.
    pub(crate) fn permission_paths(&self, session: &str) -> Option<(String, Vec<String>)> {
        let primary = self.primary_dir(session)?;
        let mut dirs = vec![primary.clone()];
        if let Some(policy) = self.perms_ref(session).and_then(|p| p.paths.as_ref()) {
            for d in &policy.additional {
                if !dirs.contains(d) {
                    dirs.push(d.clone());
                }
            }
        }
        Some((primary, dirs))
    }

    /// `paths.add`: another allowed directory.
    pub(crate) fn add_permission_path(
        &mut self,
        session: &str,
        path: &str,
    ) -> Result<(), PathError> {
        let dir = self.session_path(session, path)?;
        if let Some(policy) = self.path_policy(session) {
            if !policy.additional.contains(&dir) {
                policy.additional.push(dir);
            }
        }
        Ok(())
    }

    /// `paths.updatePrimary`: a new primary directory (the previous one stays allowed only
    /// if it was added as an additional directory).
    pub(crate) fn update_primary_path(
        &mut self,
        session: &str,
        path: &str,
    ) -> Result<(), PathError> {
        let dir = self.session_path(session, path)?;
        if let Some(policy) = self.path_policy(session) {
            policy.primary = Some(dir);
        }
        Ok(())
    }

    /// `paths.isPathWithinAllowedDirectories` (an unrestricted policy allows every path).
    pub(crate) fn path_allowed(&self, session: &str, path: &str) -> Result<bool, PathError> {
        let path = self.session_path(session, path)?;
        if self
            .perms_ref(session)
            .and_then(|p| p.paths.as_ref())
            .is_some_and(|p| p.unrestricted)
        {
            return Ok(true);
        }
        Ok(self
            .permission_paths(session)
            .is_some_and(|(_, dirs)| dirs.iter().any(|d| within(&path, d))))
    }

    /// `paths.isPathWithinWorkspace`: within the primary directory.
    pub(crate) fn path_in_workspace(&self, session: &str, path: &str) -> Result<bool, PathError> {
        let path = self.session_path(session, path)?;
        Ok(self
            .primary_dir(session)
            .is_some_and(|primary| within(&path, &primary)))
    }

    /// `modifyRules`: adds, then removes (or removes all) approval rules of the scope. The
    /// location scope is the location applied last, else the primary directory's.
    pub(crate) fn modify_permission_rules(
        &mut self,
        session: &str,
        scope: RuleScope,
        add: Vec<PermissionRule>,
        remove: &[PermissionRule],
        remove_all: bool,
    ) -> Result<(), PathError> {
        let edit = |rules: &mut Vec<PermissionRule>| {
            for rule in &add {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
            if remove_all {
                rules.clear();
            } else {
                rules.retain(|r| !remove.contains(r));
            }
        };
        match scope {
            RuleScope::Session => {
                if let Some(perms) = self.perms(session) {
                    edit(&mut perms.session_rules);
                }
            }
            RuleScope::Location => {
                let applied = self.perms_ref(session).and_then(|p| p.location.clone());
                let key = match applied {
                    Some(key) => key,
                    None => self.primary_dir(session).ok_or_else(|| {
                        PathError("the session has no location (no working directory)".into())
                    })?,
                };
                edit(
                    self.permission_store
                        .locations
                        .entry(key.clone())
                        .or_default(),
                );
                let rules = self.permission_store.locations[&key].clone();
                if let Some(perms) = self.perms(session) {
                    perms.location = Some(key);
                    perms.location_rules = rules;
                }
            }
        }
        Ok(())
    }

    /// `resetSessionApprovals`: forgets the session-scoped approvals, and the applied
    /// location's when `include_location`.
    pub(crate) fn reset_session_approvals(&mut self, session: &str, include_location: bool) {
        if let Some(perms) = self.perms(session) {
            perms.session_rules.clear();
            if include_location {
                perms.location_rules.clear();
            }
        }
    }

    /// `urls.setUnrestrictedMode`.
    pub(crate) fn set_urls_unrestricted(&mut self, session: &str, enabled: bool) {
        if let Some(perms) = self.perms(session) {
            perms.urls_unrestricted = enabled;
        }
    }

    /// `setRequired` (recorded; prompts are always bridged).
    pub(crate) fn set_permissions_required(&mut self, session: &str, required: bool) {
        if let Some(perms) = self.perms(session) {
            perms.required = required;
        }
    }

    /// `notifyPromptShown` (counted; there is no notification hook to run).
    pub(crate) fn note_prompt_shown(&mut self, session: &str, message: &str) {
        if let Some(perms) = self.perms(session) {
            perms.prompts_shown += 1;
            perms.last_prompt_shown = Some(message.to_owned());
        }
    }

    /// `locations.resolve`: the location key of a working directory (its normalized path;
    /// always of type `dir`, see the module docs).
    pub(crate) fn resolve_location(
        &self,
        session: &str,
        working_directory: &str,
    ) -> Result<String, PathError> {
        self.session_path(session, working_directory)
    }

    /// `locations.addToolApproval`: remembers `rules` for the location `key` (host-wide); a
    /// session that applied that location gets them at once.
    pub(crate) fn add_location_approval(
        &mut self,
        session: &str,
        key: &str,
        rules: Vec<PermissionRule>,
    ) -> Result<(), PathError> {
        let key = self.session_path(session, key)?;
        let stored = self
            .permission_store
            .locations
            .entry(key.clone())
            .or_default();
        for rule in rules {
            if !stored.contains(&rule) {
                stored.push(rule);
            }
        }
        let stored = stored.clone();
        let sessions: Vec<String> = self.sessions.keys().cloned().collect();
        for s in sessions {
            if let Some(perms) = self.session_state::<SessionPermissions>(&s) {
                if perms.location.as_deref() == Some(key.as_str()) {
                    perms.location_rules = stored.clone();
                }
            }
        }
        Ok(())
    }

    /// `locations.apply`: the location's approvals become the session's location rules.
    pub(crate) fn apply_location(
        &mut self,
        session: &str,
        working_directory: &str,
    ) -> Result<AppliedLocation, PathError> {
        let key = self.resolve_location(session, working_directory)?;
        let rules = self
            .permission_store
            .locations
            .get(&key)
            .cloned()
            .unwrap_or_default();
        let mut changed = false;
        if let Some(perms) = self.perms(session) {
            changed = perms.location.as_deref() != Some(key.as_str());
            perms.location = Some(key.clone());
            perms.location_rules = rules.clone();
        }
        Ok(AppliedLocation {
            key,
            changed,
            rules,
        })
    }

    /// `folderTrust.isTrusted`: the folder or one above it was trusted.
    pub(crate) fn is_folder_trusted(&self, session: &str, path: &str) -> Result<bool, PathError> {
        let path = self.session_path(session, path)?;
        Ok(self
            .permission_store
            .trusted
            .iter()
            .any(|t| within(&path, t)))
    }

    /// `folderTrust.addTrusted` (host-wide).
    pub(crate) fn trust_folder(&mut self, session: &str, path: &str) -> Result<(), PathError> {
        let path = self.session_path(session, path)?;
        self.permission_store.trusted.insert(path);
        Ok(())
    }

    /// The standing decision for a tool call's permission prompt `request` (see the module
    /// docs). [`Gate::Denied`]: the call was completed as denied here.
    pub(crate) fn permission_gate(
        &mut self,
        session: &str,
        tool_call_id: &str,
        request: &Value,
    ) -> Gate {
        let gate = self.standing_decision(session, request);
        match gate {
            Ok(gate) => gate,
            Err(rules) => {
                let labels: Vec<String> = rules.iter().map(PermissionRule::label).collect();
                let message = format!("Permission denied by rules: {}", labels.join(", "));
                self.complete_tool(
                    session,
                    tool_call_id,
                    ToolOutcome::Failure {
                        message,
                        code: "denied".into(),
                    },
                );
                Gate::Denied
            }
        }
    }

    /// What approve-all and the session's rules decide for `request` without asking anyone:
    /// `Err(rules)`: denied by these rules.
    pub(in crate::host) fn standing_permission(
        &self,
        session: &str,
        request: &Value,
    ) -> Result<Gate, Vec<PermissionRule>> {
        self.standing_decision(session, request)
    }

    /// `Err(rules)`: denied by these rules.
    fn standing_decision(
        &self,
        session: &str,
        request: &Value,
    ) -> Result<Gate, Vec<PermissionRule>> {
        let perms = self.perms_ref(session);
        if let Some(perms) = perms {
            let denied = denying(&perms.denied, request);
            if !denied.is_empty() {
                return Err(denied);
            }
        }
        if self.approves_all(session) {
            return Ok(Gate::Run);
        }
        let Some(perms) = perms else {
            return Ok(Gate::Ask);
        };
        let approved: Vec<&PermissionRule> = perms
            .approved
            .iter()
            .chain(&perms.session_rules)
            .chain(&perms.location_rules)
            .collect();
        if covering(&approved, request) {
            return Ok(Gate::Run);
        }
        let kind = request.get("kind").and_then(Value::as_str).unwrap_or("");
        let field = |name: &str| request.get(name).and_then(Value::as_str).unwrap_or("");
        let run = match kind {
            "read" => perms.approve_all_reads,
            "url" => {
                perms.approve_all_reads
                    || perms.urls_unrestricted
                    || perms
                        .urls_allowed
                        .iter()
                        .any(|pattern| url_matches(field("url"), pattern))
            }
            "path" => {
                (perms.approve_all_reads && field("accessKind") == "read")
                    || perms.paths.as_ref().is_some_and(|policy| {
                        policy.unrestricted
                            || normalize(field("path"), None).is_some_and(|path| {
                                self.permission_paths(session)
                                    .is_some_and(|(_, dirs)| dirs.iter().any(|d| within(&path, d)))
                            })
                    })
            }
            _ => false,
        };
        Ok(if run { Gate::Run } else { Gate::Ask })
    }
}

/// The rules of a location approval (`locations.addToolApproval`'s `approval`): `commands`
/// gives a `shell` rule per command identifier; the other kinds keep their kind, with their
/// distinctive field as the argument. `Err`: a message for invalid params.
pub(crate) fn approval_rules(approval: &Value) -> Result<Vec<PermissionRule>, String> {
    let kind = approval
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("`approval.kind` must be a string")?;
    let text = |name: &str, required: bool| -> Result<Option<&str>, String> {
        match approval.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
            None | Some(Value::Null) if !required => Ok(None),
            _ => Err(format!("`approval.{name}` must be a non-empty string")),
        }
    };
    let one = |argument: Option<&str>| Ok(vec![PermissionRule::new(kind, argument)]);
    match kind {
        "commands" => {
            let ids = approval
                .get("commandIdentifiers")
                .and_then(Value::as_array)
                .ok_or("`approval.commandIdentifiers` must be an array of strings")?;
            ids.iter()
                .map(|id| match id.as_str() {
                    Some(id) if !id.is_empty() => Ok(PermissionRule::new("shell", Some(id))),
                    _ => Err("`approval.commandIdentifiers` must be non-empty strings".to_owned()),
                })
                .collect()
        }
        "read" | "write" | "memory" => one(None),
        "mcp" => {
            let server = text("serverName", true)?.unwrap_or_default();
            match text("toolName", false)? {
                Some(tool) => Ok(vec![PermissionRule::new(
                    "mcp",
                    Some(&format!("{server}({tool})")),
                )]),
                None => one(Some(server)),
            }
        }
        "mcp-sampling" => one(text("serverName", true)?),
        "custom-tool" => one(text("toolName", true)?),
        "extension-management" => one(text("operation", false)?),
        "factory" => one(text("approvalKey", false)?),
        "extension-permission-access" | "extension-env-access" => one(text("extensionName", true)?),
        other => Err(format!("unknown approval kind `{other}`")),
    }
}

/// Whether the approved `rules` cover all of `request`.
fn covering(rules: &[&PermissionRule], request: &Value) -> bool {
    let kind = request.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "shell" {
        let ids = crate::host::requests::permission::command_ids(request);
        let text = request
            .get("fullCommandText")
            .and_then(Value::as_str)
            .unwrap_or("");
        if ids.is_empty() {
            return rules.iter().any(|r| is_shell(r) && r.argument.is_none());
        }
        return ids
            .iter()
            .all(|id| rules.iter().any(|r| shell_covers(r, id, text)));
    }
    rules.iter().any(|r| matches(r, request))
}

/// The denied `rules` that match any part of `request`.
fn denying(rules: &[PermissionRule], request: &Value) -> Vec<PermissionRule> {
    let kind = request.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind == "shell" {
        let ids = crate::host::requests::permission::command_ids(request);
        let text = request
            .get("fullCommandText")
            .and_then(Value::as_str)
            .unwrap_or("");
        return rules
            .iter()
            .filter(|r| {
                (is_shell(r) && r.argument.is_none())
                    || ids.iter().any(|id| shell_covers(r, id, text))
            })
            .cloned()
            .collect();
    }
    rules
        .iter()
        .filter(|r| matches(r, request))
        .cloned()
        .collect()
}

fn is_shell(rule: &PermissionRule) -> bool {
    rule.kind == "shell" || rule.kind == "commands"
}

/// A shell rule covers command `id`: any command, the identifier itself, or a command
/// prefix (`git push`) starting with it that the command line contains.
fn shell_covers(rule: &PermissionRule, id: &str, text: &str) -> bool {
    if !is_shell(rule) {
        return false;
    }
    match rule.argument.as_deref() {
        None => true,
        Some(arg) => {
            arg == id
                || (arg.split_whitespace().next() == Some(id)
                    && text
                        .split(['|', ';', '&', '\n'])
                        .any(|part| starts_with_words(part.trim(), arg)))
        }
    }
}

/// `text` starts with the words of `prefix`, whole words only.
fn starts_with_words(text: &str, prefix: &str) -> bool {
    let mut words = text.split_whitespace();
    prefix.split_whitespace().all(|w| words.next() == Some(w))
}

/// A rule matches a (non-shell) request.
fn matches(rule: &PermissionRule, request: &Value) -> bool {
    let field = |name: &str| request.get(name).and_then(Value::as_str).unwrap_or("");
    let kind = field("kind");
    let arg = rule.argument.as_deref();
    match (rule.kind.as_str(), kind) {
        ("read", "read") => arg.is_none_or(|a| path_matches(field("path"), a)),
        ("write", "write") => arg.is_none_or(|a| path_matches(field("fileName"), a)),
        ("url", "url") => arg.is_none_or(|a| url_matches(field("url"), a)),
        ("mcp", "mcp") => arg.is_none_or(|a| {
            a == field("serverName")
                || a == format!("{}({})", field("serverName"), field("toolName"))
        }),
        ("custom-tool", "custom-tool") => arg.is_none_or(|a| a == field("toolName")),
        (r, k) => r == k && !k.is_empty() && arg.is_none(),
    }
}

fn path_matches(path: &str, rule_path: &str) -> bool {
    match (normalize(path, None), normalize(rule_path, None)) {
        (Some(p), Some(r)) => within(&p, &r),
        _ => path == rule_path,
    }
}

/// A URL matches a pattern: a URL prefix (with a scheme) or a domain (and its subdomains).
fn url_matches(url: &str, pattern: &str) -> bool {
    if url.is_empty() || pattern.is_empty() {
        return false;
    }
    if pattern.contains("://") {
        return url.starts_with(pattern);
    }
    let pattern = pattern.trim_end_matches('/').to_ascii_lowercase();
    let (domain, path) = pattern.split_once('/').unwrap_or((&pattern, ""));
    let Some(host) = url_domain(url) else {
        return false;
    };
    let host_ok = host == domain || host.ends_with(&format!(".{domain}"));
    host_ok
        && (path.is_empty() || {
            let rest = url.split_once("://").map_or(url, |(_, r)| r);
            rest.split_once('/')
                .is_some_and(|(_, p)| p.to_ascii_lowercase().starts_with(path))
        })
}

/// A path split into its root (`/`, `C:\`, `\\`) and components.
fn split(path: &str) -> (String, Vec<&str>) {
    let b = path.as_bytes();
    let (root, rest) = if let Some(rest) = path.strip_prefix("\\\\") {
        ("\\\\".to_owned(), rest)
    } else if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        (
            format!("{}:\\", (b[0] as char).to_ascii_uppercase()),
            &path[2..],
        )
    } else {
        ("/".to_owned(), path)
    };
    let parts = rest
        .split(['/', '\\'])
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    (root, parts)
}

/// `path` made absolute (against `base`, itself absolute) and normalized lexically: no
/// `.`, `..` resolved (never above the root), no repeated or trailing separators. `None`
/// when `path` is relative and there is no base.
pub(crate) fn normalize(path: &str, base: Option<&str>) -> Option<String> {
    let joined;
    let full = if is_absolute(path) {
        path
    } else {
        let base = base.filter(|b| is_absolute(b))?;
        joined = format!("{base}/{path}");
        &joined
    };
    let (root, parts) = split(full);
    let mut out: Vec<&str> = Vec::new();
    for part in parts {
        if part == ".." {
            out.pop();
        } else {
            out.push(part);
        }
    }
    let sep = if root == "/" { "/" } else { "\\" };
    Some(format!("{root}{}", out.join(sep)))
}

/// Whether normalized `path` is `dir` or below it, component by component (Windows paths
/// compare without case).
fn within(path: &str, dir: &str) -> bool {
    let (proot, pparts) = split(path);
    let (droot, dparts) = split(dir);
    let windows = proot != "/";
    let eq = |a: &str, b: &str| {
        if windows {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    eq(&proot, &droot)
        && pparts.len() >= dparts.len()
        && dparts.iter().zip(&pparts).all(|(d, p)| eq(d, p))
}

/// The `PermissionRule` list as JSON.
pub(crate) fn rules_json(rules: &[PermissionRule]) -> Value {
    json!(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(kind: &str, argument: Option<&str>) -> PermissionRule {
        PermissionRule::new(kind, argument)
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(
            normalize("/a/./b//c/../d/", None).as_deref(),
            Some("/a/b/d")
        );
        assert_eq!(
            normalize("x/../y", Some("/base")).as_deref(),
            Some("/base/y")
        );
        assert_eq!(normalize("/../..", None).as_deref(), Some("/"));
        assert_eq!(normalize("rel", None), None);
        assert_eq!(
            normalize("c:/Users\\me/", None).as_deref(),
            Some("C:\\Users\\me")
        );
    }

    #[test]
    fn within_is_component_wise() {
        assert!(within("/a/b/c", "/a/b"));
        assert!(within("/a/b", "/a/b"));
        assert!(!within("/a/bc", "/a/b"));
        assert!(within("/a", "/"));
        assert!(within("C:\\X\\y", "c:\\x"));
        assert!(!within("/a", "/a/b"));
    }

    #[test]
    fn shell_rules_cover_every_command_and_deny_any() {
        let request = json!({"kind": "shell", "fullCommandText": "git push origin && rm -rf x",
            "commands": [{"identifier": "git"}, {"identifier": "rm"}]});
        let git_push = rule("shell", Some("git push"));
        let rm = rule("commands", Some("rm"));
        assert!(!covering(&[&git_push], &request));
        assert!(covering(&[&git_push, &rm], &request));
        assert!(!covering(
            &[&rule("shell", Some("git status")), &rm],
            &request
        ));
        assert_eq!(
            denying(std::slice::from_ref(&rm), &request),
            vec![rm.clone()]
        );
        assert!(denying(&[rule("shell", Some("ls"))], &request).is_empty());
        assert_eq!(denying(&[rule("shell", None)], &request).len(), 1);
    }

    #[test]
    fn other_rules_match_their_kind_and_argument() {
        let read = json!({"kind": "read", "path": "/w/src/a.rs"});
        assert!(matches(&rule("read", None), &read));
        assert!(matches(&rule("read", Some("/w")), &read));
        assert!(!matches(&rule("read", Some("/w/s")), &read));
        assert!(!matches(&rule("write", None), &read));
        let url = json!({"kind": "url", "url": "https://api.example.com/x"});
        assert!(matches(&rule("url", Some("example.com")), &url));
        assert!(!matches(&rule("url", Some("example.org")), &url));
        assert!(matches(
            &rule("url", Some("https://api.example.com/")),
            &url
        ));
        let mcp = json!({"kind": "mcp", "serverName": "gh", "toolName": "issue"});
        assert!(matches(&rule("mcp", Some("gh")), &mcp));
        assert!(matches(&rule("mcp", Some("gh(issue)")), &mcp));
        assert!(!matches(&rule("mcp", Some("gh(pr)")), &mcp));
        let tool = json!({"kind": "custom-tool", "toolName": "get_weather"});
        assert!(matches(&rule("custom-tool", Some("get_weather")), &tool));
        assert!(!matches(&rule("custom-tool", Some("other")), &tool));
        assert!(matches(&rule("memory", None), &json!({"kind": "memory"})));
    }

    #[test]
    fn location_approvals_become_rules() {
        let rules =
            approval_rules(&json!({"kind": "commands", "commandIdentifiers": ["ls", "git"]}))
                .unwrap();
        assert_eq!(
            rules,
            vec![rule("shell", Some("ls")), rule("shell", Some("git"))]
        );
        assert_eq!(
            approval_rules(&json!({"kind": "mcp", "serverName": "gh", "toolName": null})).unwrap(),
            vec![rule("mcp", Some("gh"))]
        );
        assert!(approval_rules(&json!({"kind": "nope"})).is_err());
        assert!(approval_rules(&json!({"kind": "commands"})).is_err());
        assert!(approval_rules(&json!({"kind": "custom-tool"})).is_err());
    }

    #[test]
    fn url_patterns() {
        assert!(url_matches(
            "https://example.invalid/permissions-configure/x",
            "https://example.invalid/permissions-configure"
        ));
        assert!(url_matches("https://sub.example.com/", "example.com"));
        assert!(url_matches(
            "https://example.com/docs/a",
            "example.com/docs"
        ));
        assert!(!url_matches("https://example.com/blog", "example.com/docs"));
        assert!(!url_matches("https://badexample.com/", "example.com"));
    }
}
