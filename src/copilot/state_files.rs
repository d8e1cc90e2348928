//! The runtime's session state directory, as a file provider keeps it
//! (`sessionFs.setProvider {sessionStatePath}`, the host's `state_files.rs` writes
//! `events.jsonl`): `workspace.yaml` (the session's workspace metadata, rewritten at the end
//! of each turn), `plan.md` (the plan, written when it changes, removed when it is deleted),
//! and the compaction checkpoints, `checkpoints/NNN-title.md` (the summary a compaction
//! wrote) with their index `checkpoints/index.md`.
//!
//! The checkpoints themselves are read from the log (`session.compaction_complete` with
//! `checkpointNumber`), so `session.workspaces.listCheckpoints` / `readCheckpoint` answer
//! them whether or not a provider keeps the files.

use serde_json::Value;

use crate::host::Host;
use crate::session::Event;

use super::session_state;

/// The checkpoint index file.
const INDEX_FILE: &str = "checkpoints/index.md";

/// One compaction checkpoint of a session.
pub(super) struct Checkpoint {
    /// Its number, from 1.
    pub(super) number: u64,
    /// Its title.
    pub(super) title: String,
    /// Its file in `checkpoints/`.
    pub(super) filename: String,
    /// The summary it keeps.
    pub(super) summary: String,
}

impl Checkpoint {
    /// The checkpoint file's content.
    pub(super) fn content(&self) -> String {
        format!(
            "# Checkpoint {}: {}\n\n{}",
            self.number, self.title, self.summary
        )
    }
}

/// The title of a checkpoint keeping `summary`: its first message, cut short.
pub(super) fn checkpoint_title(summary: &str) -> String {
    let first = summary
        .lines()
        .find_map(|l| l.strip_prefix("- user: "))
        .or_else(|| summary.lines().find_map(|l| l.strip_prefix("- ")))
        .unwrap_or("Conversation summary");
    let cut: String = first.chars().take(60).collect();
    cut.trim().to_owned()
}

/// The file name of checkpoint `number` titled `title`: `NNN-slug.md`.
pub(super) fn checkpoint_filename(number: u64, title: &str) -> String {
    let mut slug = String::new();
    for c in title.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= 40 {
            break;
        }
    }
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() { "checkpoint" } else { slug };
    format!("{number:03}-{slug}.md")
}

/// The checkpoints of a log, in order.
pub(super) fn checkpoints(events: &[Event]) -> Vec<Checkpoint> {
    events
        .iter()
        .filter(|e| e.event_type == "session.compaction_complete")
        .filter_map(|e| serde_json::from_slice::<Value>(&e.json).ok())
        .filter_map(|v| {
            let data = &v["data"];
            let number = data["checkpointNumber"].as_u64()?;
            let summary = data["summaryContent"].as_str().unwrap_or_default();
            let title = checkpoint_title(summary);
            Some(Checkpoint {
                number,
                filename: checkpoint_filename(number, &title),
                title,
                summary: summary.to_owned(),
            })
        })
        .collect()
}

/// The checkpoint index.
fn index(checkpoints: &[Checkpoint]) -> String {
    let mut index = String::from(
        "# Checkpoint History\n\nCheckpoints are listed in chronological order. \
         Checkpoint 1 is the oldest.\n\n| # | Title | File |\n|---|-------|------|\n",
    );
    for c in checkpoints {
        index.push_str(&format!(
            "| {} | {} | {} |\n",
            c.number,
            c.title.replace('|', "\\|"),
            c.filename
        ));
    }
    index
}

/// `workspace.yaml`: the session's workspace metadata.
fn workspace_yaml(host: &mut Host, session: &str) -> String {
    let workspace = session_state::workspace_fields(host, session);
    let mut yaml = String::new();
    if let Some(fields) = workspace.as_object() {
        for (key, value) in fields {
            let text = match value {
                Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
                other => other.to_string(),
            };
            yaml.push_str(&format!("{key}: {text}\n"));
        }
    }
    yaml
}

/// A provider started keeping `session`'s state: its workspace metadata, checkpoints and
/// plan as they are now.
pub(super) fn mirror_started(host: &mut Host, session: &str) {
    let yaml = workspace_yaml(host, session);
    host.write_state_file(session, "workspace.yaml", yaml);
    let checkpoints = host
        .session(session)
        .map(|s| checkpoints(s.events()))
        .unwrap_or_default();
    for c in &checkpoints {
        host.write_state_file(session, &format!("checkpoints/{}", c.filename), c.content());
    }
    host.write_state_file(session, INDEX_FILE, index(&checkpoints));
    if let Some(plan) = session_state::plan(host, session) {
        host.write_state_file(session, "plan.md", plan);
    }
}

/// An event of `session` was emitted: the state files it changes are written.
pub(super) fn event_emitted(host: &mut Host, session: &str, event: &Event) {
    let kind = event.event_type.as_str();
    if !matches!(
        kind,
        "session.plan_changed" | "session.compaction_complete" | "session.idle"
    ) || host.provided_state_dir(session).is_none()
    {
        return;
    }
    match kind {
        "session.plan_changed" => match session_state::plan(host, session) {
            Some(plan) => {
                host.write_state_file(session, "plan.md", plan);
            }
            None => {
                host.remove_state_file(session, "plan.md");
            }
        },
        "session.compaction_complete" => {
            let all = host
                .session(session)
                .map(|s| checkpoints(s.events()))
                .unwrap_or_default();
            // The one this event made (the last), then the index.
            if let Some(c) = all.last().filter(|c| event_number(event) == Some(c.number)) {
                host.write_state_file(session, &format!("checkpoints/{}", c.filename), c.content());
                host.write_state_file(session, INDEX_FILE, index(&all));
            }
        }
        _ => {
            let yaml = workspace_yaml(host, session);
            host.write_state_file(session, "workspace.yaml", yaml);
        }
    }
}

/// The `checkpointNumber` of a `session.compaction_complete` event.
fn event_number(event: &Event) -> Option<u64> {
    let v: Value = serde_json::from_slice(&event.json).ok()?;
    v["data"]["checkpointNumber"].as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_names_come_from_the_first_user_message() {
        let summary = "Summary of the earlier conversation (each message cut to its first \
                       characters):\n- user: What is 2+2?\n- assistant: 4\n";
        let title = checkpoint_title(summary);
        assert_eq!(title, "What is 2+2?");
        assert_eq!(checkpoint_filename(1, &title), "001-what-is-2-2.md");
        assert_eq!(checkpoint_filename(12, ""), "012-checkpoint.md");
        assert_eq!(checkpoint_title(""), "Conversation summary");
    }
}
