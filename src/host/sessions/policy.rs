//! Per-session policies a dialect switches and the host applies, and the history edits
//! (truncate, fork) that rewrite a session's log.
//!
//! * **Approve-all**: while on, a permission prompt of a tool call (client tool or built-in)
//!   is not asked at all — no `permission.requested` / `permission.completed` — and the call
//!   runs at once, as the real runtime does under `session.permissions.setApproveAll`.
//!   [`HostConfig::approve_all_permissions`](crate::host::HostConfig::approve_all_permissions)
//!   (`--yolo`) turns it on for every session.
//! * **Event interest**: consumers register interest in an event type (a handle each); a
//!   registered interest counts as a consumer for the gated requests the host bridges
//!   (`sampling.requested`, `elicitation.requested`) next to the create-time flags.
//!
//! The state lives in the session's typed state store, so nothing else in the host changes.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::session::Session;

use crate::host::{Host, Output, StoreOutput};

/// The host's own per-session policy state (kept in the session's typed state store).
#[derive(Debug, Default)]
struct Policy {
    /// Approve every permission prompt without asking (set by a dialect).
    approve_all: bool,
    /// Outstanding interest registrations: handle → event type.
    interests: BTreeMap<String, String>,
    /// The number of the next handle (`interest-N`, from 1).
    next_handle: u64,
}

/// Why a history edit failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HistoryError {
    /// No such session is loaded.
    NoSession,
    /// The session has no persisted event with that id.
    NoEvent,
    /// The new session id is taken.
    Exists,
}

impl Host {
    /// Turns approve-all on or off for `session` (see the module docs). `false` when no such
    /// session is loaded.
    pub(crate) fn set_approve_all(&mut self, session: &str, enabled: bool) -> bool {
        match self.session_state::<Policy>(session) {
            Some(policy) => {
                policy.approve_all = enabled;
                true
            }
            None => false,
        }
    }

    /// Whether permission prompts of `session` are approved without asking (the session's
    /// own setting, or `--yolo` for every session).
    pub(crate) fn approves_all(&self, session: &str) -> bool {
        self.config.approve_all_permissions
            || self
                .session_state_ref::<Policy>(session)
                .is_some_and(|p| p.approve_all)
    }

    /// Registers interest in `event_type` for `session`: a fresh handle (`interest-1`,
    /// `interest-2`, … per session), or `None` when no such session is loaded.
    pub(crate) fn register_interest(&mut self, session: &str, event_type: &str) -> Option<String> {
        let policy = self.session_state::<Policy>(session)?;
        policy.next_handle += 1;
        let handle = format!("interest-{}", policy.next_handle);
        policy
            .interests
            .insert(handle.clone(), event_type.to_owned());
        Some(handle)
    }

    /// Releases an interest handle. Idempotent: an unknown or already released handle is a
    /// no-op. `false` only when no such session is loaded.
    pub(crate) fn release_interest(&mut self, session: &str, handle: &str) -> bool {
        match self.session_state::<Policy>(session) {
            Some(policy) => {
                policy.interests.remove(handle);
                true
            }
            None => false,
        }
    }

    /// Whether some consumer registered interest in `event_type` for `session`.
    pub(crate) fn has_interest(&self, session: &str, event_type: &str) -> bool {
        self.session_state_ref::<Policy>(session)
            .is_some_and(|p| p.interests.values().any(|t| t == event_type))
    }

    /// Writes `session.shutdown` for `session` (which stays loaded) with the usage totals,
    /// and clears the "ran a turn" mark, so the last detach does not write a second one.
    /// Returns the event id, or `None` when no such session is loaded.
    pub(crate) fn emit_shutdown(
        &mut self,
        session: &str,
        shutdown_type: &str,
        reason: Option<&str>,
    ) -> Option<String> {
        let start = self.session(session)?.start_time.as_millis();
        let mut data = serde_json::json!({
            "shutdownType": shutdown_type,
            "totalPremiumRequests": 0,
            "totalApiDurationMs": 0,
            "sessionStartTime": start,
            "codeChanges": {"linesAdded": 0, "linesRemoved": 0, "filesModified": []},
            "modelMetrics": {},
        });
        if let Some(reason) = reason {
            data["errorReason"] = serde_json::json!(reason);
        }
        let id = self.emit(session, "session.shutdown", &data, false);
        if let Some(live) = self.sessions.get_mut(session) {
            live.ran_turn = false;
        }
        id
    }

    /// Removes the persisted event `event_id` of `session` and every event after it; returns
    /// how many were removed. A durable store ([`HostConfig::report_persisted_events`]) is
    /// rewritten: [`StoreOutput::SessionDeleted`] then [`StoreOutput::Persist`] for each event
    /// kept.
    ///
    /// [`HostConfig::report_persisted_events`]: crate::host::HostConfig::report_persisted_events
    pub(crate) fn truncate_history(
        &mut self,
        session: &str,
        event_id: &str,
    ) -> Result<usize, HistoryError> {
        let live = self
            .sessions
            .get_mut(session)
            .ok_or(HistoryError::NoSession)?;
        let index = live
            .session
            .events()
            .iter()
            .position(|e| e.id == event_id)
            .ok_or(HistoryError::NoEvent)?;
        let removed = live.session.truncate_events(index);
        if self.config.report_persisted_events {
            self.rewrite_store(session);
        }
        Ok(removed)
    }

    /// Loads a new session `new_id` whose log is a copy of `source`'s persisted events (up
    /// to, not including, `to_event`, when given). Nothing is attached and nothing is
    /// announced; a durable store hears of every copied event.
    pub(crate) fn fork_session(
        &mut self,
        source: &str,
        new_id: &str,
        to_event: Option<&str>,
    ) -> Result<(), HistoryError> {
        self.fork_session_with(source, new_id, to_event, |_| {})
    }

    /// [`Host::fork_session`], with `start` applied to the data of the copy's first event
    /// when it is a `session.start` (same id, time and place in the chain): what the new
    /// session says of itself (a dialect's link to its parent).
    pub(crate) fn fork_session_with(
        &mut self,
        source: &str,
        new_id: &str,
        to_event: Option<&str>,
        start: impl FnOnce(&mut Value),
    ) -> Result<(), HistoryError> {
        if self.sessions.contains_key(new_id) {
            return Err(HistoryError::Exists);
        }
        let from = self.session(source).ok_or(HistoryError::NoSession)?;
        let events = from.events();
        let end = match to_event {
            Some(id) => events
                .iter()
                .position(|e| e.id == id)
                .ok_or(HistoryError::NoEvent)?,
            None => events.len(),
        };
        let mut fork = Session::new(new_id.to_owned(), self.now);
        fork.cwd = from.cwd.clone();
        fork.model = from.model.clone();
        fork.summary = from.summary.clone();
        let mut start = Some(start);
        for event in &events[..end] {
            let mut event = event.clone();
            if event.event_type == "session.start" {
                if let Some(start) = start.take() {
                    event = restarted(&event, start).unwrap_or(event);
                }
            }
            start = None;
            fork.restore(event, self.now);
        }
        let live = self.new_live(fork);
        self.sessions.insert(new_id.to_owned(), live);
        if self.config.report_persisted_events {
            self.rewrite_store(new_id);
        }
        Ok(())
    }

    /// Masks `values` (non-empty) in every event emitted from now on (`******`), for every
    /// session and every dialect.
    pub(crate) fn add_secret_filters(&mut self, values: Vec<String>) {
        for value in values {
            if !value.is_empty() && !self.secret_filters.contains(&value) {
                self.secret_filters.push(value);
            }
        }
        // Longest first, so a value containing another is masked whole.
        self.secret_filters
            .sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// `data` with the secret filter values masked in every string, or `None` when nothing
    /// needs masking.
    pub(crate) fn mask_secrets(&self, data: &serde_json::Value) -> Option<serde_json::Value> {
        if self.secret_filters.is_empty() || !contains_secret(data, &self.secret_filters) {
            return None;
        }
        let mut masked = data.clone();
        mask_value(&mut masked, &self.secret_filters);
        Some(masked)
    }

    /// `text` with the secret filter values masked (session summaries, which are not events).
    pub(crate) fn mask_text(&self, text: &str) -> String {
        mask_str(text, &self.secret_filters)
    }

    /// Tells a durable store to replace `session`'s log with the events it has now.
    fn rewrite_store(&mut self, session: &str) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let events: Vec<_> = live
            .session
            .events()
            .iter()
            .map(|e| e.json.clone())
            .collect();
        self.outputs
            .push_back(Output::Store(StoreOutput::SessionDeleted {
                session: session.to_owned(),
            }));
        for event in events {
            self.outputs.push_back(Output::Store(StoreOutput::Persist {
                session: session.to_owned(),
                event,
            }));
        }
    }
}

/// The mask a secret filter value is replaced with.
const MASK: &str = "******";

fn contains_secret(value: &serde_json::Value, filters: &[String]) -> bool {
    use serde_json::Value;
    match value {
        Value::String(s) => filters.iter().any(|f| s.contains(f.as_str())),
        Value::Array(items) => items.iter().any(|v| contains_secret(v, filters)),
        Value::Object(map) => map.iter().any(|(k, v)| {
            filters.iter().any(|f| k.contains(f.as_str())) || contains_secret(v, filters)
        }),
        _ => false,
    }
}

fn mask_str(s: &str, filters: &[String]) -> String {
    let mut out = s.to_owned();
    for f in filters {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), MASK);
        }
    }
    out
}

fn mask_value(value: &mut serde_json::Value, filters: &[String]) {
    use serde_json::Value;
    match value {
        Value::String(s) => *s = mask_str(s, filters),
        Value::Array(items) => items.iter_mut().for_each(|v| mask_value(v, filters)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (k, mut v) in entries {
                mask_value(&mut v, filters);
                map.insert(mask_str(&k, filters), v);
            }
        }
        _ => {}
    }
}

/// `event` (a `session.start`) with `change` applied to its data; `None` when its envelope
/// cannot be read.
fn restarted(
    event: &crate::session::Event,
    change: impl FnOnce(&mut Value),
) -> Option<crate::session::Event> {
    let envelope: Value = serde_json::from_slice(&event.json).ok()?;
    let mut data = envelope.get("data")?.clone();
    change(&mut data);
    let at = envelope
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(crate::Timestamp::parse_rfc3339)?;
    let parent = envelope.get("parentId").and_then(Value::as_str);
    Some(crate::session::Event::new(
        event.id.clone(),
        &event.event_type,
        &data,
        false,
        at,
        parent,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filters(values: &[&str]) -> Vec<String> {
        let mut f: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        f.sort_by_key(|v| std::cmp::Reverse(v.len()));
        f
    }

    #[test]
    fn masks_strings_keys_and_nested_values() {
        let f = filters(&["tok", "tok-long"]);
        let mut v = json!({"a": "x tok-long y", "tok": ["tok", 1, {"b": "no"}]});
        assert!(contains_secret(&v, &f));
        mask_value(&mut v, &f);
        assert_eq!(
            v,
            json!({"a": "x ****** y", "******": ["******", 1, {"b": "no"}]})
        );
        assert!(!contains_secret(&v, &f));
    }

    #[test]
    fn nothing_to_mask_leaves_data_alone() {
        let f = filters(&["secret"]);
        assert!(!contains_secret(&json!({"a": "public", "n": 3}), &f));
        assert_eq!(mask_str("public", &f), "public");
    }
}
