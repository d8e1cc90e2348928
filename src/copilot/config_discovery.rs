//! Where skills, custom agents and instructions live on this machine, and reading them for a
//! client outside any session: `skills.getDiscoveryPaths`, `agents.getDiscoveryPaths`,
//! `instructions.getDiscoveryPaths`, `agents.discover`, `instructions.discover`, and the
//! project and personal directories `skills.discover` adds to the ones it is given.
//!
//! The locations are the Copilot runtime's: a project's `.github/skills` (also `.claude/skills`
//! and `.agents/skills`), `.github/agents`, `.github/copilot-instructions.md`,
//! `.github/instructions/` and `AGENTS.md`; the user's under the data directory
//! (`COPILOT_HOME`): `skills/`, `agents/`, `copilot-instructions.md`, `instructions/`. Each
//! `*.discover` reads exactly the locations its `getDiscoveryPaths` lists. (A session reads its
//! skills and instructions from the directories its `session.create` names.)

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::local::scan::{ScanRequest, ScannedFile};
use crate::host::Host;

use super::method_table::{Call, Reply};
use super::surface::{decode, Answer};

/// Skill directories of a project, the preferred one first.
const PROJECT_SKILL_DIRS: &[&str] = &[".github/skills", ".claude/skills", ".agents/skills"];

/// A location `getDiscoveryPaths` lists.
struct Location {
    path: String,
    /// `project` / `user` (agents), `project` / `personal-copilot` (skills), `repository` /
    /// `user` (instructions).
    scope: &'static str,
    /// Instructions: `file` or `directory`.
    kind: &'static str,
    preferred: bool,
    project: Option<String>,
}

impl Location {
    fn json(&self, scope_field: &str, with_kind: bool) -> Value {
        let mut v = json!({"path": self.path, scope_field: self.scope,
                           "preferredForCreation": self.preferred});
        if with_kind {
            v["kind"] = json!(self.kind);
        }
        if let Some(project) = &self.project {
            v["projectPath"] = json!(project);
        }
        v
    }
}

/// The request's `projectPaths` (non-empty strings, without a trailing `/`).
fn projects(p: &Value) -> Vec<String> {
    p.get("projectPaths")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| s.trim_end_matches('/'))
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn flag(p: &Value, name: &str) -> bool {
    p.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// The user's directory (the data directory), unless the request excludes the host's.
fn user_dir(host: &Host, p: &Value, exclude: &str) -> Option<String> {
    if flag(p, exclude) {
        return None;
    }
    let dir = host.config().data_dir.as_deref()?;
    Some(dir.trim_end_matches('/').to_owned())
}

fn skill_locations(host: &Host, p: &Value) -> Vec<Location> {
    let mut out = Vec::new();
    for project in projects(p) {
        for (i, dir) in PROJECT_SKILL_DIRS.iter().enumerate() {
            out.push(Location {
                path: format!("{project}/{dir}"),
                scope: "project",
                kind: "directory",
                preferred: i == 0,
                project: Some(project.clone()),
            });
        }
    }
    if let Some(user) = user_dir(host, p, "excludeHostSkills") {
        out.push(Location {
            path: format!("{user}/skills"),
            scope: "personal-copilot",
            kind: "directory",
            preferred: true,
            project: None,
        });
    }
    out
}

fn agent_locations(host: &Host, p: &Value) -> Vec<Location> {
    let mut out: Vec<Location> = projects(p)
        .into_iter()
        .map(|project| Location {
            path: format!("{project}/.github/agents"),
            scope: "project",
            kind: "directory",
            preferred: true,
            project: Some(project),
        })
        .collect();
    if let Some(user) = user_dir(host, p, "excludeHostAgents") {
        out.push(Location {
            path: format!("{user}/agents"),
            scope: "user",
            kind: "directory",
            preferred: true,
            project: None,
        });
    }
    out
}

fn instruction_locations(host: &Host, p: &Value) -> Vec<Location> {
    let mut out = Vec::new();
    for project in projects(p) {
        for (rel, kind, preferred) in [
            (".github/copilot-instructions.md", "file", true),
            (".github/instructions", "directory", false),
            ("AGENTS.md", "file", false),
        ] {
            out.push(Location {
                path: format!("{project}/{rel}"),
                scope: "repository",
                kind,
                preferred,
                project: Some(project.clone()),
            });
        }
    }
    if let Some(user) = user_dir(host, p, "excludeHostInstructions") {
        out.push(Location {
            path: format!("{user}/copilot-instructions.md"),
            scope: "user",
            kind: "file",
            preferred: true,
            project: None,
        });
        out.push(Location {
            path: format!("{user}/instructions"),
            scope: "user",
            kind: "directory",
            preferred: false,
            project: None,
        });
    }
    out
}

fn params(params: Option<&RawValue>) -> Result<Value, crate::jsonrpc::ErrorObject> {
    match params {
        None => Ok(json!({})),
        Some(_) => decode(params),
    }
}

/// `skills.getDiscoveryPaths {projectPaths?, excludeHostSkills?}`.
pub(super) fn skill_paths(host: &mut Host, _: &Call<'_>, raw: Option<&RawValue>) -> Answer {
    let p = params(raw)?;
    let paths: Vec<Value> = skill_locations(host, &p)
        .iter()
        .map(|l| l.json("scope", false))
        .collect();
    Ok(json!({ "paths": paths }))
}

/// `agents.getDiscoveryPaths {projectPaths?, excludeHostAgents?}`.
pub(super) fn agent_paths(host: &mut Host, _: &Call<'_>, raw: Option<&RawValue>) -> Answer {
    let p = params(raw)?;
    let paths: Vec<Value> = agent_locations(host, &p)
        .iter()
        .map(|l| l.json("scope", false))
        .collect();
    Ok(json!({ "paths": paths }))
}

/// `instructions.getDiscoveryPaths {projectPaths?, excludeHostInstructions?}`.
pub(super) fn instruction_paths(host: &mut Host, _: &Call<'_>, raw: Option<&RawValue>) -> Answer {
    let p = params(raw)?;
    let paths: Vec<Value> = instruction_locations(host, &p)
        .iter()
        .map(|l| l.json("location", true))
        .collect();
    Ok(json!({ "paths": paths }))
}

/// The project and personal skill directories `skills.discover {projectPaths?,
/// excludeHostSkills?}` reads after its `skillDirectories`.
pub(super) fn discovered_skill_dirs(host: &Host, p: &Value) -> Vec<String> {
    skill_locations(host, p)
        .into_iter()
        .map(|l| l.path)
        .collect()
}

/// What a scan's `context` carries: each root's source and project.
fn roots_context(locations: &[Location]) -> Value {
    Value::Array(
        locations
            .iter()
            .map(|l| json!({"scope": l.scope, "project": l.project}))
            .collect(),
    )
}

/// `agents.discover {projectPaths?, excludeHostAgents?}`: the `*.agent.md` (and `*.md`)
/// files directly in each agent directory.
pub(super) fn discover_agents(host: &mut Host, call: &Call<'_>, raw: Option<&RawValue>) -> Reply {
    let p = match params(raw) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let locations = agent_locations(host, &p);
    let request = ScanRequest {
        roots: locations.iter().map(|l| l.path.clone()).collect(),
        filter: |_, rel| !rel.contains('/') && rel.ends_with(".md"),
        finish: agents_found,
        context: roots_context(&locations),
    };
    host.scan_files(request, call.conn, call.id);
    None
}

fn agents_found(files: &[ScannedFile], roots: &Value) -> Value {
    let mut seen = std::collections::BTreeSet::new();
    let mut agents = Vec::new();
    for file in files {
        let stem = file.path.rsplit('/').next().unwrap_or_default();
        let stem = stem
            .strip_suffix(".agent.md")
            .or_else(|| stem.strip_suffix(".md"))
            .unwrap_or(stem);
        let front = FrontMatter::parse(&file.text);
        let name = front.get("name").unwrap_or(stem).to_owned();
        if name.trim().is_empty() || !seen.insert(name.clone()) {
            continue; // the first location wins, as the runtime's priority order
        }
        let source = roots[file.root]["scope"].as_str().unwrap_or("user");
        let mut agent = json!({
            "id": name, "name": name,
            "displayName": front.get("displayName").unwrap_or(&name),
            "description": front.get("description").unwrap_or_default(),
            "path": file.path, "source": source, "userInvocable": true,
            "prompt": front.body.trim(),
        });
        if let Some(tools) = front.list("tools") {
            agent["tools"] = json!(tools);
        }
        if let Some(model) = front.get("model") {
            agent["model"] = json!(model);
        }
        agents.push(agent);
    }
    json!({ "agents": agents })
}

/// `instructions.discover {projectPaths?, excludeHostInstructions?}`: the instruction files
/// (and the `*.instructions.md` files of instruction directories) that exist.
pub(super) fn discover_instructions(
    host: &mut Host,
    call: &Call<'_>,
    raw: Option<&RawValue>,
) -> Reply {
    let p = match params(raw) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let locations = instruction_locations(host, &p);
    let request = ScanRequest {
        roots: locations.iter().map(|l| l.path.clone()).collect(),
        filter: |_, rel| rel.is_empty() || rel.ends_with(".instructions.md"),
        finish: instructions_found,
        context: roots_context(&locations),
    };
    host.scan_files(request, call.conn, call.id);
    None
}

fn instructions_found(files: &[ScannedFile], roots: &Value) -> Value {
    let sources: Vec<Value> = files
        .iter()
        .map(|file| {
            let root = &roots[file.root];
            let location = root["scope"].as_str().unwrap_or("user");
            let front = FrontMatter::parse(&file.text);
            let label = file.path.rsplit('/').next().unwrap_or_default();
            let mut source = json!({
                "id": file.path, "label": label, "sourcePath": file.path,
                "content": front.body.trim(),
                "type": if location == "user" { "home" } else { "repo" },
                "location": location,
            });
            if let Some(project) = root["project"].as_str() {
                source["projectPath"] = json!(project);
            }
            if let Some(apply_to) = front.list("applyTo") {
                source["applyTo"] = json!(apply_to);
            }
            if let Some(description) = front.get("description") {
                source["description"] = json!(description);
            }
            source
        })
        .collect();
    json!({ "sources": sources })
}

/// A Markdown file's `---` front matter (flat `key: value` lines, `[a, b]` and
/// comma-separated lists) and the text after it.
struct FrontMatter<'a> {
    fields: Vec<(&'a str, &'a str)>,
    body: &'a str,
}

impl<'a> FrontMatter<'a> {
    fn parse(text: &'a str) -> Self {
        let none = FrontMatter {
            fields: Vec::new(),
            body: text,
        };
        let Some(rest) = text.strip_prefix("---") else {
            return none;
        };
        let Some(end) = rest.find("\n---") else {
            return none;
        };
        let head = &rest[..end];
        let body = rest[end + 4..].split_once('\n').map_or("", |(_, b)| b);
        let fields = head
            .lines()
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim(), v.trim().trim_matches(|c| c == '"' || c == '\'')))
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .collect();
        FrontMatter { fields, body }
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    fn list(&self, key: &str) -> Option<Vec<&'a str>> {
        let value = self.get(key)?;
        let inner = value
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(value);
        Some(
            inner
                .split(',')
                .map(|s| s.trim().trim_matches(|c| c == '"' || c == '\''))
                .filter(|s| !s.is_empty())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_fields_lists_and_body() {
        let text = "---\nname: reviewer\ntools: [\"view\", grep]\napplyTo: '**/*.rs, *.toml'\n---\nReview it.\n";
        let f = FrontMatter::parse(text);
        assert_eq!(f.get("name"), Some("reviewer"));
        assert_eq!(f.list("tools"), Some(vec!["view", "grep"]));
        assert_eq!(f.list("applyTo"), Some(vec!["**/*.rs", "*.toml"]));
        assert_eq!(f.body, "Review it.\n");
        let plain = FrontMatter::parse("# Title\nname: no");
        assert_eq!(plain.get("name"), None);
        assert_eq!(plain.body, "# Title\nname: no");
    }
}
