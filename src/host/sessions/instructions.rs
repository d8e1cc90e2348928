//! A session's `instructionDirectories`: before its first prompt (and again when a resume
//! names other directories) the `*.instructions.md` files under each directory's
//! `.github/instructions/` are read, in order, and their texts become the system prompt's
//! `custom_instructions` section. The reads are the built-in tools' file operations
//! (`EffectOp::FileOp`, or the session's file provider); a directory that cannot be read adds
//! nothing.

use crate::host::tool_ops::{FileReply, FileRequest};
use crate::host::Host;

/// Most instruction files read from one directory.
const MAX_FILES: usize = 64;

/// Largest instruction file read.
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// A session's instructions: the directories they were read from and their text.
#[derive(Debug, Default)]
pub(crate) struct Instructions {
    /// The directories the text was read from (`None`: never read).
    loaded_for: Option<Vec<String>>,
    /// The files' texts, joined.
    pub(crate) text: String,
    /// A read in flight.
    loading: Option<Loading>,
}

#[derive(Debug)]
struct Loading {
    dirs: Vec<String>,
    next: usize,
    texts: Vec<String>,
}

/// The step of a read for a session's instructions.
#[derive(Clone, Debug)]
pub(crate) enum InstructionStep {
    /// Listing a directory's `.github/instructions/`.
    List { root: String },
    /// Reading the files listed.
    Read,
}

impl Instructions {
    /// Whether a read is in flight.
    pub(crate) fn loading(&self) -> bool {
        self.loading.is_some()
    }
}

impl Host {
    /// Starts reading `session`'s instruction files when its directories changed since the
    /// last read; returns whether reads are in flight.
    pub(in crate::host) fn load_instructions(&mut self, session: &str) -> bool {
        let Some(live) = self.sessions.get_mut(session) else {
            return false;
        };
        if live.instructions.loading.is_some() {
            return true;
        }
        let dirs = live.model.instruction_directories.clone();
        if live.instructions.loaded_for.as_ref() == Some(&dirs) {
            return false;
        }
        if dirs.is_empty() {
            live.instructions.loaded_for = Some(dirs);
            live.instructions.text.clear();
            return false;
        }
        live.instructions.loading = Some(Loading {
            dirs,
            next: 0,
            texts: Vec::new(),
        });
        self.next_instruction_dir(session);
        true
    }

    /// Lists the next directory, or finishes.
    fn next_instruction_dir(&mut self, session: &str) {
        let Some(loading) = self
            .sessions
            .get_mut(session)
            .and_then(|l| l.instructions.loading.as_mut())
        else {
            return;
        };
        let Some(dir) = loading.dirs.get(loading.next).cloned() else {
            let loading = self
                .sessions
                .get_mut(session)
                .and_then(|l| l.instructions.loading.take());
            if let (Some(live), Some(loading)) = (self.sessions.get_mut(session), loading) {
                live.instructions.text = loading.texts.join("\n\n");
                live.instructions.loaded_for = Some(loading.dirs);
            }
            self.release_held(session);
            return;
        };
        loading.next += 1;
        let root = format!("{}/.github/instructions", dir.trim_end_matches('/'));
        self.instruction_read(
            session,
            FileRequest::Walk {
                root: root.clone(),
                limit: 4096,
            },
            InstructionStep::List { root },
        );
    }

    /// A read for `session`'s instructions was answered.
    pub(in crate::host) fn instruction_read_done(
        &mut self,
        session: &str,
        step: InstructionStep,
        result: Result<FileReply, String>,
    ) {
        match (step, result) {
            (InstructionStep::List { root }, Ok(FileReply::Entries(mut paths))) => {
                paths.retain(|p| p.ends_with(".instructions.md"));
                paths.sort();
                paths.truncate(MAX_FILES);
                if !paths.is_empty() {
                    let request = FileRequest::ReadMany {
                        root,
                        paths,
                        max_file_bytes: MAX_FILE_BYTES,
                    };
                    self.instruction_read(session, request, InstructionStep::Read);
                    return;
                }
            }
            (InstructionStep::Read, Ok(FileReply::Texts(texts))) => {
                if let Some(loading) = self
                    .sessions
                    .get_mut(session)
                    .and_then(|l| l.instructions.loading.as_mut())
                {
                    loading
                        .texts
                        .extend(texts.into_iter().map(|(_, t)| t.trim().to_owned()));
                }
            }
            // A directory that cannot be read adds nothing.
            _ => {}
        }
        self.next_instruction_dir(session);
    }
}
