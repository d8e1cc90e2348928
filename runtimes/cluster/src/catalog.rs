//! The cluster-wide session list: every node keeps, in its host, a summary of each session in
//! the log that it has not loaded (owned by a live other node, or by no one), read from the log
//! itself, so `session.list` on any node lists every session of the cluster.
//!
//! Every `lease TTL / 3` the node lists the log stream's subjects with their message counts
//! (one `STREAM.INFO` request) and reads only the sessions whose count changed since the last
//! pass: while it has not seen the session's first prompt, the next few messages from the
//! session's start (`session.start` and the first `user.message` give the start time, working
//! directory and summary), and the subject's last message (its modified time). An idle
//! session costs nothing but its line in the `STREAM.INFO` answer; a changed one, one or two
//! bounded reads. The log is the source of truth, so the
//! list is the same whoever owns a session, before and after a takeover; it lags the log by at
//! most one pass.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use agentwire::host::SessionSummary;
use tracing::debug;

use crate::engine::{Engine, EngineError};
use crate::record::RecordKind;
use crate::shared::Node;

/// What a node knows of one session it has not loaded.
struct Known {
    /// The subject's message count when it was last read.
    count: usize,
    /// The stream sequence of the last message read in order from the subject's start.
    head_seq: u64,
    /// At least one event was read.
    seen_event: bool,
    summary: SessionSummary,
}

/// Messages read in order from a session's start per pass, until its first prompt is found.
const HEAD: usize = 8;

/// How often the list is refreshed.
fn every(lease_ttl: Duration) -> Duration {
    (lease_ttl / 3).max(Duration::from_millis(100))
}

/// Keeps the host's list of the cluster's other sessions ([`agentwire::host::ClusterApi::set_cluster_sessions`])
/// in step with the log, for as long as the node runs.
pub(crate) async fn keep_catalog(node: Arc<Node>) {
    let prefix = format!("{}.", node.layout.log_prefix);
    let mut known: HashMap<String, Known> = HashMap::new();
    loop {
        tokio::time::sleep(every(node.lease_ttl)).await;
        let Some(host) = node.host.get() else {
            continue;
        };
        let subjects = match node
            .engine
            .log_subject_counts(&node.layout.log_filter())
            .await
        {
            Ok(subjects) => subjects,
            Err(e) => {
                debug!(error = %e, "session list: cannot list the log");
                continue;
            }
        };
        let sessions: Vec<(String, String, usize)> = subjects
            .into_iter()
            .filter_map(|(subject, count)| {
                let session = subject
                    .strip_prefix(&prefix)
                    .and_then(|token| crate::escape::unescape_id(token).ok())?;
                Some((session, subject, count))
            })
            .collect();
        let loaded: Vec<bool> = host
            .with_host(|h, _| {
                sessions
                    .iter()
                    .map(|(s, _, _)| h.session_events(s).is_some())
                    .collect()
            })
            .unwrap_or_default();
        let present: HashSet<&str> = sessions.iter().map(|(s, _, _)| s.as_str()).collect();
        known.retain(|s, _| present.contains(s.as_str()));
        for ((session, subject, count), loaded) in sessions.iter().zip(loaded) {
            if loaded {
                // Listed from the host's own state.
                continue;
            }
            let entry = known.entry(session.clone()).or_insert_with(|| Known {
                count: 0,
                head_seq: 0,
                seen_event: false,
                summary: SessionSummary::new(session.clone()),
            });
            if entry.count == *count {
                continue;
            }
            match refresh(&node, subject, entry).await {
                Ok(()) => entry.count = *count,
                Err(e) => debug!(%session, error = %e, "session list: cannot read a session"),
            }
        }
        let summaries: Vec<SessionSummary> = known
            .values()
            .filter(|k| k.seen_event)
            .map(|k| k.summary.clone())
            .collect();
        host.with_host(|h, _| h.cluster().set_cluster_sessions(summaries));
    }
}

/// Reads what changed in one session's log since `known` was last brought up to date: the
/// next [`HEAD`] messages from its start while its first prompt is not known, and the
/// subject's last message (its modified time) unless that read reached it. An event stored
/// in pieces counts as one: a run the read cut short is read to its end, and a last message
/// that ends a run is read with the run's other pieces.
async fn refresh(node: &Node, subject: &str, known: &mut Known) -> Result<(), EngineError> {
    let mut reached_the_end = false;
    if !known.seen_event || known.summary.wants_more_than_the_last_event() {
        let mut head = node
            .engine
            .read_at_most(subject, known.head_seq + 1, HEAD)
            .await?;
        reached_the_end = head.len() < HEAD;
        if let Some(run) = head.last().and_then(|m| unfinished_run(m.kind, m.seq)) {
            head.extend(
                node.engine
                    .read_at_most(subject, run.next, run.left)
                    .await?,
            );
        }
        // A run still being appended is read again, whole, next time.
        let through = head.last().map(|m| match unfinished_run(m.kind, m.seq) {
            Some(run) => run.first.saturating_sub(1),
            None => m.seq,
        });
        known.head_seq = known.head_seq.max(through.unwrap_or(0));
        for message in crate::parts::events(head) {
            if known.summary.add_event(&message.payload) {
                known.seen_event = true;
            }
        }
    }
    if !reached_the_end {
        if let Some(last) = node.engine.last_message(subject).await? {
            let last = match last.kind {
                Some(RecordKind::Part { index, count }) if index + 1 == count => {
                    let first = last.seq.saturating_sub(u64::from(index));
                    let run = node
                        .engine
                        .read_at_most(subject, first, count as usize)
                        .await?;
                    crate::parts::events(run)
                        .pop()
                        .filter(|e| e.seq == last.seq)
                }
                _ => Some(last),
            };
            if let Some(last) = last {
                if last.seq > known.head_seq
                    && last.kind == Some(RecordKind::Event)
                    && known.summary.add_last_event(&last.payload)
                {
                    known.seen_event = true;
                }
            }
        }
    }
    Ok(())
}

/// A run of pieces a read ended inside of: where it starts, where the rest of it starts and
/// how many pieces are left.
#[derive(Debug, PartialEq, Eq)]
struct UnfinishedRun {
    first: u64,
    next: u64,
    left: usize,
}

/// The run a message of kind `kind` at `seq` is in, if it is a piece but its run's last.
fn unfinished_run(kind: Option<RecordKind>, seq: u64) -> Option<UnfinishedRun> {
    match kind {
        Some(RecordKind::Part { index, count }) if index + 1 < count => Some(UnfinishedRun {
            first: seq.saturating_sub(u64::from(index)),
            next: seq + 1,
            left: (count - index - 1) as usize,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_that_ends_inside_a_run_of_pieces_reads_the_rest() {
        let part = |index, count| Some(RecordKind::Part { index, count });
        let run = |first, next, left| Some(UnfinishedRun { first, next, left });
        assert_eq!(unfinished_run(part(0, 3), 10), run(10, 11, 2));
        assert_eq!(unfinished_run(part(1, 3), 11), run(10, 12, 1));
        assert_eq!(unfinished_run(part(2, 3), 12), None, "the run is complete");
        assert_eq!(unfinished_run(Some(RecordKind::Event), 5), None);
        assert_eq!(unfinished_run(Some(RecordKind::Claim), 5), None);
        assert_eq!(unfinished_run(None, 5), None);
    }
}
