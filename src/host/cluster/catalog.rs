//! Sessions held elsewhere (other cluster nodes, or no one), as the runtime reads them from its
//! shared log: listed beside the loaded sessions.
//!
//! The runtime builds one [`SessionSummary`] per session from its stored events (the same rules
//! as [`Host::restore_session`]: start time of the first event, working directory of
//! `session.start`, summary of the first `user.message`, modified time of the last event) and
//! hands the whole set to [`ClusterApi::set_cluster_sessions`]. The dialects' session lists show the
//! loaded sessions, then every summary of a session that is not loaded here.

use serde::Deserialize;

use crate::Timestamp;

use crate::host::Host;

/// What a session list shows of a session the host has not loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// The timestamp of its first stored event.
    pub start_time: Timestamp,
    /// The timestamp of its last stored event.
    pub modified_time: Timestamp,
    /// Its first prompt (at most 200 characters), if it had one.
    pub summary: Option<String>,
    /// The working directory its `session.start` declared.
    pub cwd: Option<String>,
}

/// The fields of a stored event a summary reads.
#[derive(Deserialize)]
struct Stored<'a> {
    #[serde(rename = "type", borrow)]
    event_type: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    timestamp: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    data: serde_json::Value,
}

impl SessionSummary {
    /// An empty summary of `id` (no event seen yet: both times are the epoch).
    pub fn new(id: impl Into<String>) -> Self {
        SessionSummary {
            id: id.into(),
            start_time: Timestamp::EPOCH,
            modified_time: Timestamp::EPOCH,
            summary: None,
            cwd: None,
        }
    }

    /// Folds in the session's next stored event (compact JSON, as
    /// [`StoreOutput::Persist`](crate::host::StoreOutput::Persist) handed it out). Answers false,
    /// and changes nothing, if it is not a stored event.
    pub fn add_event(&mut self, json: &[u8]) -> bool {
        let Ok(stored) = serde_json::from_slice::<Stored<'_>>(json) else {
            return false;
        };
        let time = stored
            .timestamp
            .and_then(|t| humantime::parse_rfc3339(&t).ok())
            .map(Timestamp::from_system_time);
        if let Some(time) = time {
            if self.start_time == Timestamp::EPOCH {
                self.start_time = time;
            }
            self.modified_time = time;
        }
        match stored.event_type.as_ref() {
            "session.start" => {
                if let Some(cwd) = stored.data.pointer("/context/cwd").and_then(|v| v.as_str()) {
                    self.cwd = Some(cwd.to_owned());
                }
            }
            "user.message" if self.summary.is_none() => {
                if let Some(c) = stored.data.get("content").and_then(|v| v.as_str()) {
                    self.summary = Some(c.chars().take(200).collect());
                }
            }
            _ => {}
        }
        true
    }

    /// Folds in the session's newest event when the events before it were not all read: only
    /// its time counts (the modified time). Answers false if it is not a stored event.
    pub fn add_last_event(&mut self, json: &[u8]) -> bool {
        let (summary, cwd) = (self.summary.take(), self.cwd.take());
        let start = self.start_time;
        let added = self.add_event(json);
        self.start_time = start;
        self.summary = summary;
        self.cwd = cwd;
        added
    }

    /// Whether a later event can still change more than the modified time (no first prompt
    /// seen yet).
    pub fn wants_more_than_the_last_event(&self) -> bool {
        self.summary.is_none()
    }
}

impl Host {
    /// See [`ClusterApi::set_cluster_sessions`].
    pub(in crate::host) fn set_cluster_sessions(
        &mut self,
        sessions: impl IntoIterator<Item = SessionSummary>,
    ) {
        let before = std::mem::replace(
            &mut self.cluster_sessions,
            sessions.into_iter().map(|s| (s.id.clone(), s)).collect(),
        );
        let elsewhere = |id: &&String| !self.sessions.contains_key(*id);
        let added: Vec<String> = (self.cluster_sessions.keys())
            .filter(|id| !before.contains_key(*id))
            .filter(elsewhere)
            .cloned()
            .collect();
        let removed: Vec<String> = (before.keys())
            .filter(|id| !self.cluster_sessions.contains_key(*id))
            .filter(elsewhere)
            .cloned()
            .collect();
        if added.is_empty() && removed.is_empty() {
            return;
        }
        for handler in self.dialects {
            handler.cluster_sessions_changed(self, &added, &removed);
        }
    }

    /// The summaries of [`ClusterApi::set_cluster_sessions`] whose session is not loaded here, by id.
    pub(crate) fn cluster_sessions(&self) -> impl Iterator<Item = &SessionSummary> {
        self.cluster_sessions
            .values()
            .filter(|s| !self.sessions.contains_key(&s.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_start_cwd_first_prompt_and_last_time() {
        let mut s = SessionSummary::new("s1");
        assert!(s.add_event(
            br#"{"id":"1","type":"session.start","timestamp":"2026-01-01T00:00:00Z","data":{"context":{"cwd":"/w"}}}"#
        ));
        assert!(s.wants_more_than_the_last_event());
        assert!(s.add_event(
            br#"{"id":"2","type":"user.message","timestamp":"2026-01-01T00:00:01Z","data":{"content":"first"}}"#
        ));
        assert!(s.add_event(
            br#"{"id":"3","type":"user.message","timestamp":"2026-01-01T00:00:05Z","data":{"content":"second"}}"#
        ));
        assert!(!s.add_event(b"not json"));
        assert!(s.add_last_event(
            br#"{"id":"9","type":"user.message","timestamp":"2026-01-01T00:00:09Z","data":{"content":"later"}}"#
        ));
        assert_eq!(s.cwd.as_deref(), Some("/w"));
        assert_eq!(s.summary.as_deref(), Some("first"));
        assert!(!s.wants_more_than_the_last_event());
        assert_eq!(s.start_time.to_rfc3339(), "2026-01-01T00:00:00.000Z");
        assert_eq!(s.modified_time.to_rfc3339(), "2026-01-01T00:00:09.000Z");
    }
}
