//! Skills: directories of `NAME/SKILL.md` files whose front matter (`name`, `description`)
//! names a skill. A session's `skillDirectories` are read when a client first asks for its
//! skills (and again on reload, or when a resume names other directories); its
//! `disabledSkills` and the enable / disable calls decide which are on. `skills.discover`
//! reads directories for a client without a session.
//!
//! The reads are the built-in tools' file operations (`EffectOp::FileOp`, or the session's file
//! provider): each directory is walked, then its `*/SKILL.md` files read. A directory that
//! cannot be read adds nothing. A request that arrives while its skills are read is answered
//! when the reads finish.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::jsonrpc::OwnedId;

use crate::host::tool_ops::{FileReply, FileRequest};
use crate::host::{ConnId, Host};

/// Most skills read from one directory.
const MAX_SKILLS: usize = 256;

/// Largest `SKILL.md` read.
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// One skill found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SkillInfo {
    /// Its front matter's `name` (else its directory's).
    pub name: String,
    /// Its front matter's `description`.
    pub description: String,
    /// Its `SKILL.md`.
    pub path: String,
    /// Not disabled for the session.
    pub enabled: bool,
    /// The file's text after its front matter: what the model gets when it loads the skill.
    pub body: String,
    /// It comes from an installed plugin (`plugins.rs`), not a skill directory.
    pub plugin: bool,
}

/// Turns the skills into a dialect's result.
pub(crate) type SkillsReply = fn(&[SkillInfo]) -> Value;

/// A session's skills (kept in the session's typed state store).
#[derive(Debug, Default)]
pub(crate) struct SessionSkills {
    dirs: Vec<String>,
    /// The installed directories of the session's enabled plugins (`plugins.rs`).
    plugin_roots: Vec<String>,
    /// The session's plugins are not known yet (the plugin registry is being read): a
    /// prompt waits for them.
    pub(in crate::host) plugins_pending: bool,
    disabled: Vec<String>,
    /// The directories and plugin directories `found` was read from (`None`: never read,
    /// or to read again).
    loaded_for: Option<(Vec<String>, Vec<String>)>,
    found: Vec<SkillInfo>,
    loading: Option<Loading>,
    waiters: Vec<Waiter>,
}

/// Reads in flight for one set of directories.
#[derive(Debug, Default)]
struct Loading {
    dirs: Vec<String>,
    /// Plugin directories, read after `dirs`.
    plugin_roots: Vec<String>,
    next: usize,
    found: Vec<SkillInfo>,
}

#[derive(Debug)]
struct Waiter {
    conn: ConnId,
    id: OwnedId,
    reply: SkillsReply,
}

/// Whose skills a read is for.
#[derive(Clone, Debug)]
pub(crate) enum SkillTarget {
    /// A session's.
    Session(String),
    /// A `skills.discover` request (its key in the host's discoveries).
    Discovery(u64),
}

/// The step of a read for skills.
#[derive(Clone, Debug)]
pub(crate) enum SkillStep {
    /// Walking a directory (`plugin`: an installed plugin's, where any `SKILL.md` up to
    /// three directories deep is a skill).
    List { root: String, plugin: bool },
    /// Reading its `SKILL.md` files.
    Read { root: String, plugin: bool },
}

impl SessionSkills {
    /// Whether `found` was read from the session's current directories.
    fn is_current(&self) -> bool {
        self.loaded_for
            .as_ref()
            .is_some_and(|(d, p)| *d == self.dirs && *p == self.plugin_roots)
    }

    fn loading(&self) -> Loading {
        Loading {
            dirs: self.dirs.clone(),
            plugin_roots: self.plugin_roots.clone(),
            ..Loading::default()
        }
    }
}

/// `skills.discover` requests in flight, by key.
#[derive(Debug, Default)]
pub(crate) struct Discoveries {
    next: u64,
    running: BTreeMap<u64, (Loading, Waiter)>,
}

impl Host {
    /// Sets `session`'s skill directories and disabled skills (`session.create` /
    /// `session.resume`); other directories are read again when next asked for.
    pub(crate) fn set_skill_directories(
        &mut self,
        session: &str,
        dirs: Vec<String>,
        disabled: Vec<String>,
    ) {
        let Some(state) = self.session_state::<SessionSkills>(session) else {
            return;
        };
        state.dirs = dirs;
        state.disabled = disabled;
        let disabled = state.disabled.clone();
        for skill in &mut state.found {
            skill.enabled = !disabled.contains(&skill.name);
        }
    }

    /// Answers `conn`'s request `id` with `session`'s skills: at once (`Some`) when they are
    /// read, else when the reads finish (`reload`: read them again first).
    pub(crate) fn session_skills(
        &mut self,
        session: &str,
        conn: ConnId,
        id: &OwnedId,
        reply: SkillsReply,
        reload: bool,
    ) -> Option<Value> {
        let state = self.session_state::<SessionSkills>(session)?;
        if reload {
            state.loaded_for = None;
        }
        if state.loading.is_none() && state.is_current() {
            return Some(reply(&state.found));
        }
        state.waiters.push(Waiter {
            conn,
            id: id.clone(),
            reply,
        });
        if state.loading.is_none() {
            state.loading = Some(state.loading());
            self.next_skill_dir(SkillTarget::Session(session.to_owned()));
        }
        None
    }

    /// Sets the installed directories of `session`'s enabled plugins, whose skills are
    /// among the session's (read again when next asked for, if they changed).
    pub(in crate::host) fn set_plugin_skill_roots(&mut self, session: &str, roots: Vec<String>) {
        if let Some(state) = self.session_state::<SessionSkills>(session) {
            state.plugin_roots = roots;
        }
    }

    /// Starts reading `session`'s skills when its directories are not read yet; returns
    /// whether reads are in flight (a prompt waits for them: the model is offered the
    /// `skill` tool with the skills found).
    pub(in crate::host) fn load_skills(&mut self, session: &str) -> bool {
        let Some(state) = self.session_state::<SessionSkills>(session) else {
            return false;
        };
        if state.loading.is_some() || state.plugins_pending {
            return true;
        }
        if (state.dirs.is_empty() && state.plugin_roots.is_empty()) || state.is_current() {
            return false;
        }
        state.loading = Some(state.loading());
        self.next_skill_dir(SkillTarget::Session(session.to_owned()));
        true
    }

    /// Whether `session` has skill directories not read yet.
    pub(in crate::host) fn skills_unread(&self, session: &str) -> bool {
        self.session_state_ref::<SessionSkills>(session)
            .is_some_and(|s| {
                s.plugins_pending
                    || ((!s.dirs.is_empty() || !s.plugin_roots.is_empty()) && !s.is_current())
            })
    }

    /// The skills the model may load (`session`'s enabled ones).
    pub(in crate::host) fn enabled_skills(&self, session: &str) -> Vec<&SkillInfo> {
        self.session_state_ref::<SessionSkills>(session)
            .map(|s| s.found.iter().filter(|k| k.enabled).collect())
            .unwrap_or_default()
    }

    /// The model called the `skill` tool: an enabled skill's instructions are announced by a
    /// persisted `skill.invoked` (the history puts them after the call's results as a
    /// `<skill-context>` user message) and the call succeeds with the runtime's words; an
    /// unknown or disabled skill fails the call, naming the skills there are.
    pub(crate) fn start_skill_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        arguments: &Value,
        turn_id: &str,
    ) {
        self.emit_tool_start(session, tool_call_id, "skill", arguments, turn_id);
        let wanted = arguments
            .get("skill")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let skill = self
            .enabled_skills(session)
            .into_iter()
            .find(|s| s.name == wanted)
            .cloned();
        let outcome = match skill {
            Some(skill) => {
                self.emit(
                    session,
                    "skill.invoked",
                    &serde_json::json!({"name": skill.name, "path": skill.path,
                                        "content": skill.body, "description": skill.description,
                                        "source": "custom"}),
                    false,
                );
                crate::agent::ToolOutcome::Success(format!(
                    "Skill \"{}\" loaded successfully. Follow the instructions in the skill context.",
                    skill.name
                ))
            }
            None => {
                let names: Vec<String> = self
                    .enabled_skills(session)
                    .iter()
                    .map(|s| s.name.clone())
                    .collect();
                crate::agent::ToolOutcome::Failure {
                    message: format!(
                        "Skill \"{wanted}\" not found. Available skills: {}",
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    ),
                    code: "failure".to_owned(),
                }
            }
        };
        self.complete_tool(session, tool_call_id, outcome);
    }

    /// Turns skill `name` of `session` on or off (a skill not read yet is on or off when it
    /// is).
    pub(crate) fn set_skill_enabled(&mut self, session: &str, name: &str, enabled: bool) {
        let Some(state) = self.session_state::<SessionSkills>(session) else {
            return;
        };
        if let Some(skill) = state.found.iter_mut().find(|s| s.name == name) {
            skill.enabled = enabled;
        }
        state.disabled.retain(|d| d != name);
        if !enabled {
            state.disabled.push(name.to_owned());
        }
    }

    /// Reads the skills of `dirs` for `conn`'s request `id` (`skills.discover`), answered when
    /// the reads finish.
    pub(crate) fn discover_skills(
        &mut self,
        dirs: Vec<String>,
        conn: ConnId,
        id: &OwnedId,
        reply: SkillsReply,
    ) {
        let key = self.skill_discoveries.next;
        self.skill_discoveries.next += 1;
        let loading = Loading {
            dirs,
            ..Loading::default()
        };
        let waiter = Waiter {
            conn,
            id: id.clone(),
            reply,
        };
        self.skill_discoveries
            .running
            .insert(key, (loading, waiter));
        self.next_skill_dir(SkillTarget::Discovery(key));
    }

    fn loading_of(&mut self, target: &SkillTarget) -> Option<&mut Loading> {
        match target {
            SkillTarget::Session(session) => self
                .session_state::<SessionSkills>(session)?
                .loading
                .as_mut(),
            SkillTarget::Discovery(key) => {
                self.skill_discoveries.running.get_mut(key).map(|(l, _)| l)
            }
        }
    }

    /// Walks the next directory, or finishes.
    fn next_skill_dir(&mut self, target: SkillTarget) {
        let Some(loading) = self.loading_of(&target) else {
            return;
        };
        let (dir, plugin) = match loading.dirs.get(loading.next) {
            Some(dir) => (dir.clone(), false),
            None => match loading.plugin_roots.get(loading.next - loading.dirs.len()) {
                Some(dir) => (dir.clone(), true),
                None => return self.finish_skills(target),
            },
        };
        loading.next += 1;
        let root = dir.trim_end_matches('/').to_owned();
        let request = FileRequest::Walk {
            root: root.clone(),
            limit: 4096,
        };
        self.skill_read(target, request, SkillStep::List { root, plugin });
    }

    /// A read for skills was answered.
    pub(in crate::host) fn skill_read_done(
        &mut self,
        target: SkillTarget,
        step: SkillStep,
        result: Result<FileReply, String>,
    ) {
        match (step, result) {
            (SkillStep::List { root, plugin }, Ok(FileReply::Entries(mut paths))) => {
                paths.retain(|p| {
                    if plugin {
                        return p == "SKILL.md"
                            || p.strip_suffix("/SKILL.md")
                                .is_some_and(|dir| dir.split('/').count() <= 3);
                    }
                    p.strip_suffix("/SKILL.md")
                        .is_some_and(|dir| !dir.is_empty() && !dir.contains('/'))
                });
                paths.sort();
                paths.truncate(MAX_SKILLS);
                if !paths.is_empty() {
                    let request = FileRequest::ReadMany {
                        root: root.clone(),
                        paths,
                        max_file_bytes: MAX_FILE_BYTES,
                    };
                    return self.skill_read(target, request, SkillStep::Read { root, plugin });
                }
            }
            (SkillStep::Read { root, plugin }, Ok(FileReply::Texts(texts))) => {
                let disabled = match &target {
                    SkillTarget::Session(s) => self
                        .session_state::<SessionSkills>(s)
                        .map(|st| st.disabled.clone())
                        .unwrap_or_default(),
                    SkillTarget::Discovery(_) => Vec::new(),
                };
                if let Some(loading) = self.loading_of(&target) {
                    for (path, text) in texts {
                        let dir_name = match path.trim_end_matches("SKILL.md").trim_end_matches('/')
                        {
                            // A plugin's own `SKILL.md`: named after the plugin's directory.
                            "" => root.rsplit('/').next().unwrap_or_default(),
                            dir => dir.rsplit('/').next().unwrap_or(dir),
                        };
                        let (name, description) = front_matter(&text);
                        let body = body_of(&text).to_owned();
                        let name = name.unwrap_or_else(|| dir_name.to_owned());
                        if loading.found.iter().any(|s| s.name == name) {
                            continue;
                        }
                        loading.found.push(SkillInfo {
                            enabled: !disabled.contains(&name),
                            name,
                            description: description.unwrap_or_default(),
                            path: format!("{root}/{path}"),
                            body,
                            plugin,
                        });
                    }
                }
            }
            // A directory that cannot be read adds nothing.
            _ => {}
        }
        self.next_skill_dir(target);
    }

    /// The reads are done: the skills are kept (a session's) and the waiting requests
    /// answered.
    fn finish_skills(&mut self, target: SkillTarget) {
        let (found, waiters) = match &target {
            SkillTarget::Session(session) => {
                let Some(state) = self.session_state::<SessionSkills>(session) else {
                    return;
                };
                let Some(loading) = state.loading.take() else {
                    return;
                };
                state.found = loading.found;
                state.loaded_for = Some((loading.dirs, loading.plugin_roots));
                let done = (state.found.clone(), std::mem::take(&mut state.waiters));
                // A prompt held for the skills goes on.
                self.release_held(session);
                done
            }
            SkillTarget::Discovery(key) => {
                let Some((mut loading, waiter)) = self.skill_discoveries.running.remove(key) else {
                    return;
                };
                // Outside a session a skill is on unless the user's settings disable it.
                let disabled = self.disabled_skills_setting().unwrap_or_default();
                for skill in &mut loading.found {
                    skill.enabled = !disabled.contains(&skill.name);
                }
                (loading.found, vec![waiter])
            }
        };
        for w in waiters {
            let result = (w.reply)(&found);
            self.respond(w.conn, &w.id, Ok(result));
        }
    }
}

/// A `SKILL.md`'s text after its front matter (all of it without one), leading blank lines
/// left out.
fn body_of(text: &str) -> &str {
    let rest = match text.strip_prefix("---") {
        Some(after) => match after.find("\n---") {
            Some(end) => {
                let tail = &after[end + 4..];
                tail.split_once('\n').map_or("", |(_, body)| body)
            }
            None => text,
        },
        None => text,
    };
    rest.trim_start_matches(['\n', '\r'])
}

/// The `name` and `description` of a `SKILL.md`'s front matter (`---` lines around
/// `key: value` lines), if it has them.
fn front_matter(text: &str) -> (Option<String>, Option<String>) {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return (None, None);
    }
    let (mut name, mut description) = (None, None);
    for line in lines {
        if line.trim() == "---" {
            break;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value
            .trim()
            .trim_matches(|c| c == '"' || c == '\'')
            .to_owned();
        if value.is_empty() {
            continue;
        }
        match key.trim() {
            "name" => name = Some(value),
            "description" => description = Some(value),
            _ => {}
        }
    }
    (name, description)
}

#[cfg(test)]
mod tests {
    use super::front_matter;

    #[test]
    fn the_body_follows_the_front_matter() {
        let text = "---\nname: a\n---\n\n# Title\n\nText.\n";
        assert_eq!(super::body_of(text), "# Title\n\nText.\n");
        assert_eq!(super::body_of("# Only\n"), "# Only\n");
    }

    #[test]
    fn front_matter_names_and_describes() {
        let text = "---\nname: my-skill\ndescription: \"Does things.\"\n---\n\n# Body\nname: no";
        assert_eq!(
            front_matter(text),
            (Some("my-skill".into()), Some("Does things.".into()))
        );
        assert_eq!(front_matter("# no front matter"), (None, None));
    }
}
