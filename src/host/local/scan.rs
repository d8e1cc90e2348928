//! Reading configuration files for a client request outside any session
//! (`agents.discover`, `instructions.discover`): each root, a file or a directory, is walked
//! and the files a filter accepts are read; the request is answered from what was read.
//!
//! The reads are the runtime's file operations ([`FileRequest::Walk`], then
//! [`FileRequest::ReadMany`]); a root that does not exist or cannot be read adds nothing.
//! Roots are read one after another, in order, so the answer lists files in root order.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::jsonrpc::OwnedId;

use super::super::tool_ops::{FileReply, FileRequest};
use super::super::{ConnId, Host};

/// Most paths walked below one root.
const WALK_LIMIT: usize = 4096;
/// Largest file read.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Most files read below one root.
const MAX_FILES: usize = 256;

/// One file a scan read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScannedFile {
    /// Which root (its index in the scan's roots) it was found below.
    pub(crate) root: usize,
    /// Its absolute path.
    pub(crate) path: String,
    /// Its text.
    pub(crate) text: String,
}

/// Whether a path below root `root` (relative, `/`-separated; empty: the root is a file)
/// is read.
pub(crate) type ScanFilter = fn(root: usize, relative: &str) -> bool;

/// The answer, from the files read and the request's context value.
pub(crate) type ScanFinish = fn(&[ScannedFile], &Value) -> Value;

/// What a scan was asked for.
pub(crate) struct ScanRequest {
    /// Files or directories, read in order.
    pub(crate) roots: Vec<String>,
    pub(crate) filter: ScanFilter,
    pub(crate) finish: ScanFinish,
    /// Passed to `finish` (e.g. the request's parameters and the roots' meaning).
    pub(crate) context: Value,
}

struct Scan {
    request: ScanRequest,
    to: (ConnId, OwnedId),
    /// The root being read.
    next: usize,
    found: Vec<ScannedFile>,
}

/// The scans in flight, by key.
#[derive(Default)]
pub(crate) struct Scans {
    next_key: u64,
    running: BTreeMap<u64, Scan>,
}

impl std::fmt::Debug for Scans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scans")
            .field("running", &self.running.len())
            .finish()
    }
}

/// The file operation a scan waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ScanStep {
    /// Root `root` of scan `key` being walked.
    Walk { key: u64, root: String },
    /// Files below root `root` of scan `key` being read.
    Read { key: u64, root: String },
}

impl Host {
    /// Reads `request`'s files for `conn`'s request `id`; answered when the reads finish.
    pub(crate) fn scan_files(&mut self, request: ScanRequest, conn: ConnId, id: &OwnedId) {
        let key = self.local.scans.next_key;
        self.local.scans.next_key += 1;
        self.local.scans.running.insert(
            key,
            Scan {
                request,
                to: (conn, id.clone()),
                next: 0,
                found: Vec::new(),
            },
        );
        self.next_scan_root(key);
    }

    /// Walks the scan's next root, or answers.
    fn next_scan_root(&mut self, key: u64) {
        let Some(scan) = self.local.scans.running.get_mut(&key) else {
            return;
        };
        let Some(root) = scan.request.roots.get(scan.next).cloned() else {
            let scan = self.local.scans.running.remove(&key).expect("present");
            let answer = (scan.request.finish)(&scan.found, &scan.request.context);
            return self.respond(scan.to.0, &scan.to.1, Ok(answer));
        };
        let root = root.trim_end_matches('/').to_owned();
        let request = FileRequest::Walk {
            root: root.clone(),
            limit: WALK_LIMIT,
        };
        self.scan_file_op(request, ScanStep::Walk { key, root });
    }

    /// A file operation of a scan finished.
    pub(in crate::host) fn scan_file_done(
        &mut self,
        step: ScanStep,
        result: Result<FileReply, String>,
    ) {
        match step {
            ScanStep::Walk { key, root } => {
                let Some(scan) = self.local.scans.running.get_mut(&key) else {
                    return;
                };
                let index = scan.next;
                let paths: Vec<String> = match result {
                    Ok(FileReply::Entries(entries)) => entries
                        .into_iter()
                        .filter(|rel| (scan.request.filter)(index, rel))
                        .take(MAX_FILES)
                        .collect(),
                    _ => Vec::new(),
                };
                if paths.is_empty() {
                    scan.next += 1;
                    return self.next_scan_root(key);
                }
                let request = FileRequest::ReadMany {
                    root: root.clone(),
                    paths,
                    max_file_bytes: MAX_FILE_BYTES,
                };
                self.scan_file_op(request, ScanStep::Read { key, root });
            }
            ScanStep::Read { key, root } => {
                let Some(scan) = self.local.scans.running.get_mut(&key) else {
                    return;
                };
                if let Ok(FileReply::Texts(texts)) = result {
                    for (rel, text) in texts {
                        let path = if rel.is_empty() {
                            root.clone()
                        } else {
                            format!("{root}/{rel}")
                        };
                        scan.found.push(ScannedFile {
                            root: scan.next,
                            path,
                            text,
                        });
                    }
                }
                scan.next += 1;
                self.next_scan_root(key);
            }
        }
    }
}
