//! Envelope checks: ids, timestamps, the `parentId` chain, ephemeral vs persisted types.

use super::*;

/// `8-4-4-4-12` hex digits.
pub fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let num = |r: std::ops::Range<usize>| -> u32 { s[r].parse().unwrap_or(99) };
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || !(b[10] == b'T' || b[10] == b't')
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    if !(1..=12).contains(&num(5..7))
        || !(1..=31).contains(&num(8..10))
        || num(11..13) > 23
        || num(14..16) > 59
        || num(17..19) > 60
    {
        return false;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        [b'Z'] | [b'z'] => true,
        [sign, h1, h2, b':', m1, m2] if *sign == b'+' || *sign == b'-' => {
            [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit())
        }
        _ => false,
    }
}

/// Event types that must be ephemeral (`ephemeral: true`) per the session-events schema.
pub const EPHEMERAL_TYPES: &[&str] = &[
    "session.idle",
    "session.title_changed",
    "assistant.message_start",
    "assistant.message_delta",
    "assistant.reasoning_delta",
    "assistant.streaming_delta",
    "assistant.idle",
    "assistant.usage",
    "pending_messages.modified",
    "commands.changed",
    "capabilities.changed",
];

/// Event types that must be persisted (no `ephemeral` flag).
pub const PERSISTED_TYPES: &[&str] = &[
    "session.start",
    "session.resume",
    "session.error",
    "user.message",
    "assistant.turn_start",
    "assistant.message",
    "assistant.turn_end",
    "tool.execution_start",
    "tool.execution_complete",
    "permission.requested",
    "permission.completed",
    "external_tool.requested",
];

/// Checks one event envelope: UUID id, RFC 3339 timestamp, object data, `ephemeral` either
/// absent or `true`, and matching the schema's E/P classification for known types.
pub fn assert_envelope(ev: &SessionEvent) {
    let ctx = || format!("{} event {}", ev.event_type, ev.id);
    assert!(is_uuid(&ev.id), "{}: id is not a UUID", ctx());
    assert!(
        is_rfc3339(&ev.timestamp),
        "{}: timestamp {:?} is not RFC 3339",
        ctx(),
        ev.timestamp
    );
    assert!(
        ev.data.is_object(),
        "{}: data {:?} is not an object",
        ctx(),
        ev.data
    );
    if let Some(parent) = &ev.parent_id {
        assert!(
            is_uuid(parent),
            "{}: parentId {parent:?} is not a UUID",
            ctx()
        );
    }
    assert_ne!(
        ev.ephemeral,
        Some(false),
        "{}: persisted events omit `ephemeral` (got ephemeral:false)",
        ctx()
    );
    if EPHEMERAL_TYPES.contains(&ev.event_type.as_str()) {
        assert_eq!(ev.ephemeral, Some(true), "{}: must be ephemeral", ctx());
    }
    if PERSISTED_TYPES.contains(&ev.event_type.as_str()) {
        assert_eq!(ev.ephemeral, None, "{}: must be persisted", ctx());
    }
    assert!(
        ev.agent_id.is_none(),
        "{}: main-agent events carry no agentId",
        ctx()
    );
}

pub fn is_persisted(ev: &SessionEvent) -> bool {
    ev.ephemeral != Some(true)
}

/// Checks the `parentId` rule over a contiguous stream of events as one connection received
/// them: each event's parent is the id of the most recent persisted event before it
/// (`last_persisted` before the first one; `None` at the start of a session). Returns the id of
/// the last persisted event.
pub fn assert_chain(events: &[SessionEvent], mut last_persisted: Option<String>) -> Option<String> {
    for ev in events {
        assert_eq!(
            ev.parent_id, last_persisted,
            "{} event {}: parentId must be the id of the most recent persisted event",
            ev.event_type, ev.id
        );
        if is_persisted(ev) {
            last_persisted = Some(ev.id.clone());
        }
    }
    last_persisted
}

/// The types of `events`, in order.
pub fn types(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event_type.as_str()).collect()
}

/// Asserts that `wanted` occurs in `events` as an ordered subsequence; returns the matched indices.
pub fn assert_subsequence(events: &[SessionEvent], wanted: &[&str]) -> Vec<usize> {
    let mut idx = Vec::new();
    let mut from = 0;
    for w in wanted {
        match events[from..].iter().position(|e| e.event_type == *w) {
            Some(p) => {
                idx.push(from + p);
                from += p + 1;
            }
            None => panic!(
                "expected ordered subsequence {wanted:?}; missing {w:?} after index {from} in {:?}",
                types(events)
            ),
        }
    }
    idx
}

pub fn str_field<'a>(ev: &'a SessionEvent, key: &str) -> Option<&'a str> {
    ev.data.get(key).and_then(Value::as_str)
}
