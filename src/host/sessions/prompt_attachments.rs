//! What the runtime adds to a prompt for the model because of its attachments, as the
//! runtime writes it (the recorded conversations are the reference):
//!
//! ~~~text
//! <ide_selection>
//! The user has the following text selected in their IDE. This may or may not be related to their request.
//! File: NAME (line N)            (lines N-M for several lines)
//! ```
//! TEXT
//! ```
//! </ide_selection>
//!
//!
//!
//! PROMPT
//!
//!
//!
//! <tagged_files>
//! * PATH (line S of N lines)     (lines S-E of N lines with a range; N lines without)
//! * DIR (N items)
//! </tagged_files>
//!
//!
//!
//! <github_references>
//! #NUMBER - TITLE [TYPE] [STATE] (URL)
//! </github_references>
//! ~~~
//!
//! Files are counted and directories listed through the same file operations as the built-in
//! tools ([`EffectOp::FileOp`](crate::host::EffectOp::FileOp), or the session's file provider); a
//! path that cannot be read is tagged without counts. Image blobs become image parts of the user
//! message when the history is built (`model::conversation`); other attachments are carried on
//! `user.message` only.

use serde_json::Value;

use crate::agent::{AgentInput, PromptContext};
use crate::host::tool_ops::{FileReply, FileRequest};
use crate::host::Host;

/// The blank lines between the prompt and each block the runtime adds.
const GAP: &str = "\n\n\n\n";

/// A prompt's attachments being counted: the reads in flight and what they found.
#[derive(Debug, Default)]
pub(crate) struct Preparing {
    /// Reads not answered yet.
    reads_left: usize,
    /// Per attachment, what its read found (`None`: not read, or it failed).
    found: Vec<Option<Found>>,
}

/// What a read of a file or directory attachment found.
#[derive(Clone, Copy, Debug)]
enum Found {
    Lines(usize),
    Items(usize),
}

impl Host {
    /// Starts rendering the attachments of `session`'s first held input (a prompt whose
    /// attachments are not rendered): reads for its files and directories, or, when there
    /// are none, the rendering at once. Returns whether reads are in flight.
    pub(in crate::host) fn prepare_attachments(&mut self, session: &str) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        let Some(AgentInput::Prompt { attachments, .. }) = live.held.front() else {
            return false;
        };
        let reads: Vec<(usize, String)> = attachments
            .sent
            .iter()
            .enumerate()
            .filter(|(_, a)| matches!(kind(a), "file" | "directory"))
            .filter_map(|(i, a)| Some((i, a.get("path")?.as_str()?.to_owned())))
            .collect();
        let count = attachments.sent.len();
        if reads.is_empty() {
            self.render_held_attachments(session, &[]);
            return false;
        }
        live.preparing = Some(Preparing {
            reads_left: reads.len(),
            found: vec![None; count],
        });
        for (index, path) in reads {
            self.attachment_read(session, index, FileRequest::Read { path });
        }
        true
    }

    /// A read for attachment `index` of the prompt `session` prepares was answered.
    pub(in crate::host) fn attachment_read_done(
        &mut self,
        session: &str,
        index: usize,
        result: Result<FileReply, String>,
    ) {
        let Some(preparing) = self
            .sessions
            .get_mut(session)
            .and_then(|l| l.preparing.as_mut())
        else {
            return;
        };
        let found = match result {
            Ok(FileReply::Text(text)) => Some(Found::Lines(text.lines().count())),
            Ok(FileReply::Entries(entries)) => Some(Found::Items(entries.len())),
            _ => None,
        };
        if let Some(slot) = preparing.found.get_mut(index) {
            *slot = found;
        }
        preparing.reads_left = preparing.reads_left.saturating_sub(1);
        if preparing.reads_left > 0 {
            return;
        }
        let found = self
            .sessions
            .get_mut(session)
            .and_then(|l| l.preparing.take())
            .map(|p| p.found)
            .unwrap_or_default();
        self.render_held_attachments(session, &found);
        self.release_held(session);
    }

    /// Renders the first held prompt's attachments with what the reads `found`.
    fn render_held_attachments(&mut self, session: &str, found: &[Option<Found>]) {
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        if let Some(AgentInput::Prompt { attachments, .. }) = live.held.front_mut() {
            render(attachments, found);
        }
    }
}

/// Whether `input` is a prompt whose attachments are not rendered yet.
pub(in crate::host) fn needs_rendering(input: &AgentInput) -> bool {
    matches!(input, AgentInput::Prompt { attachments, .. } if !attachments.rendered)
}

fn kind(attachment: &Value) -> &str {
    attachment
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn text<'a>(attachment: &'a Value, key: &str) -> &'a str {
    attachment
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Fills `before` / `after` from the attachments and what their reads found.
fn render(attachments: &mut PromptContext, found: &[Option<Found>]) {
    let mut selections = String::new();
    let mut files = String::new();
    let mut references = String::new();
    for (i, a) in attachments.sent.iter().enumerate() {
        let found = found.get(i).copied().flatten();
        match kind(a) {
            "selection" => {
                let name = match text(a, "displayName") {
                    "" => text(a, "filePath"),
                    name => name,
                };
                let line = |end: &str| {
                    a.pointer(&format!("/selection/{end}/line"))
                        .and_then(Value::as_u64)
                        .map(|l| l + 1)
                };
                let lines = match (line("start"), line("end")) {
                    (Some(s), Some(e)) if e > s => format!(" (lines {s}-{e})"),
                    (Some(s), _) => format!(" (line {s})"),
                    _ => String::new(),
                };
                selections.push_str(&format!(
                    "<ide_selection>\nThe user has the following text selected in their IDE. \
                     This may or may not be related to their request.\nFile: {name}{lines}\n```\n{}\n```\n</ide_selection>{GAP}",
                    text(a, "text")
                ));
            }
            "file" => {
                let path = text(a, "path");
                let range = |end: &str| {
                    a.pointer(&format!("/lineRange/{end}"))
                        .and_then(Value::as_u64)
                };
                let counts = match (found, range("start"), range("end")) {
                    (Some(Found::Lines(n)), Some(s), Some(e)) if e > s => {
                        format!(" (lines {s}-{e} of {n} lines)")
                    }
                    (Some(Found::Lines(n)), Some(s), _) => format!(" (line {s} of {n} lines)"),
                    (Some(Found::Lines(n)), None, _) => format!(" ({n} lines)"),
                    _ => String::new(),
                };
                files.push_str(&format!("* {path}{counts}\n"));
            }
            "directory" => {
                let path = text(a, "path");
                let counts = match found {
                    Some(Found::Items(n)) => format!(" ({n} items)"),
                    _ => String::new(),
                };
                files.push_str(&format!("* {path}{counts}\n"));
            }
            "github_reference" => {
                let number = a.get("number").map(|n| match n {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
                references.push_str(&format!(
                    "#{} - {} [{}] [{}] ({})\n",
                    number.unwrap_or_default(),
                    text(a, "title"),
                    text(a, "referenceType"),
                    text(a, "state"),
                    text(a, "url"),
                ));
            }
            _ => {}
        }
    }
    attachments.before = selections;
    let mut after = String::new();
    if !files.is_empty() {
        after.push_str(&format!("{GAP}<tagged_files>\n{files}</tagged_files>"));
    }
    if !references.is_empty() {
        after.push_str(&format!(
            "{GAP}<github_references>\n{references}</github_references>"
        ));
    }
    attachments.after = after;
    attachments.rendered = true;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(sent: Vec<Value>, found: &[Option<Found>]) -> PromptContext {
        let mut a = PromptContext::sent(sent);
        render(&mut a, found);
        a
    }

    #[test]
    fn files_directories_and_references_follow_the_prompt() {
        let a = rendered(
            vec![
                json!({"type": "file", "path": "/w/a.txt", "lineRange": {"start": 1, "end": 1}}),
                json!({"type": "file", "path": "/w/b.txt"}),
                json!({"type": "directory", "path": "/w/dir"}),
                json!({"type": "github_reference", "number": 1234, "referenceType": "issue",
                       "state": "open", "title": "Add it", "url": "https://x/1234"}),
            ],
            &[
                Some(Found::Lines(1)),
                Some(Found::Lines(7)),
                Some(Found::Items(3)),
                None,
            ],
        );
        assert_eq!(a.before, "");
        assert_eq!(
            a.after,
            "\n\n\n\n<tagged_files>\n* /w/a.txt (line 1 of 1 lines)\n* /w/b.txt (7 lines)\n\
             * /w/dir (3 items)\n</tagged_files>\n\n\n\n<github_references>\n\
             #1234 - Add it [issue] [open] (https://x/1234)\n</github_references>"
        );
    }

    #[test]
    fn a_selection_goes_before_the_prompt_with_its_one_based_lines() {
        let a = rendered(
            vec![
                json!({"type": "selection", "filePath": "/w/f.cs", "displayName": "f.cs",
                        "text": "x = 1;", "selection": {"start": {"line": 1, "character": 0},
                                                      "end": {"line": 1, "character": 6}}}),
            ],
            &[None],
        );
        assert_eq!(
            a.before,
            "<ide_selection>\nThe user has the following text selected in their IDE. This may or \
             may not be related to their request.\nFile: f.cs (line 2)\n```\nx = 1;\n```\n\
             </ide_selection>\n\n\n\n"
        );
        assert_eq!(a.after, "");
    }

    #[test]
    fn an_unreadable_file_is_tagged_without_counts_and_junk_is_ignored() {
        let a = rendered(
            vec![
                json!({"type": "file", "path": "/w/gone.txt"}),
                json!({"type": 7}),
                json!("not an object"),
            ],
            &[None, None, None],
        );
        assert_eq!(
            a.after,
            "\n\n\n\n<tagged_files>\n* /w/gone.txt\n</tagged_files>"
        );
    }
}
