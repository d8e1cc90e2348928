//! `session.lifecycle` notifications to a reader that falls behind: `session.updated` is
//! coalesced per session while one is still queued (the latest metadata is what is sent),
//! `session.created` / `session.deleted` are never merged, dropped or reordered.

use crate::support::*;
use agentwire::host::HostConfig;
use serde_json::{json, Value};

/// The `session.lifecycle` notifications a peer received: (type, sessionId, metadata).
fn lifecycle(p: &Peer) -> Vec<(String, String, Value)> {
    p.inbox
        .iter()
        .filter(|m| m["method"] == "session.lifecycle")
        .map(|m| {
            let params = &m["params"];
            (
                params["type"].as_str().unwrap().to_owned(),
                params["sessionId"].as_str().unwrap().to_owned(),
                params["metadata"].clone(),
            )
        })
        .collect()
}

fn kinds(list: &[(String, String, Value)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(kind, session, _)| (kind.clone(), session.clone()))
        .collect()
}

fn send(w: &mut World, p: &mut Peer, others: &mut [&mut Peer], session: &str, prompt: &str) {
    w.call(
        p,
        others,
        "session.send",
        json!({"sessionId": session, "prompt": prompt}),
    );
}

#[test]
fn a_stalled_reader_gets_one_update_per_session_with_the_latest_metadata_and_every_create_and_delete(
) {
    let mut w = World::new(HostConfig::default());
    let mut app = w.connect();
    let mut slow = w.connect();
    // The slow reader stops reading before anything happens.
    w.stalled.insert(slow.conn);
    let sessions: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    for s in &sessions {
        create(&mut w, &mut app, s, json!({}));
    }
    // Three turns on every session, interleaved across sessions.
    for round in 0..3 {
        for s in &sessions {
            send(&mut w, &mut app, &mut [], s, &format!("{s} turn {round}"));
        }
    }
    // s0 is deleted and created again, then has one more turn.
    w.call(
        &mut app,
        &mut [],
        "session.delete",
        json!({"sessionId": "s0"}),
    );
    create(&mut w, &mut app, "s0", json!({}));
    send(&mut w, &mut app, &mut [], "s0", "again");
    // What the sessions look like now, to a reader that keeps up.
    let listed = w.call(&mut app, &mut [], "session.list", json!({}));
    let now: std::collections::BTreeMap<String, Value> = listed["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sessionId"].as_str().unwrap().to_owned(), s.clone()))
        .collect();

    w.resume_reading(slow.conn);
    w.pump(&mut [&mut slow]);
    let got = lifecycle(&slow);
    let pair = |kind: &str, s: &str| (format!("session.{kind}"), s.to_owned());
    let mut expected = Vec::new();
    // Creating a session announces its session.start (an update), then its creation: both
    // kept, in that order, so the update queued before the creation stands alone.
    for s in &sessions {
        expected.push(pair("updated", s));
        expected.push(pair("created", s));
    }
    // Then the 24 turns: one update per session, at the place of the first one it missed.
    for s in &sessions {
        expected.push(pair("updated", s));
    }
    // The deletion after them, then the new s0: its session.start update and its creation,
    // and one update for its turn (queued after the creation, not merged into the update of
    // the deleted s0).
    expected.push(pair("deleted", "s0"));
    expected.push(pair("updated", "s0"));
    expected.push(pair("created", "s0"));
    expected.push(pair("updated", "s0"));
    assert_eq!(kinds(&got), expected);

    // Each session's last update carries the metadata of its last turn, not of the turn
    // that queued it.
    for s in &sessions {
        let (_, _, metadata) = got
            .iter()
            .rev()
            .find(|(kind, session, _)| kind == "session.updated" && session == s)
            .unwrap();
        assert_eq!(
            metadata["modifiedTime"], now[s]["modifiedTime"],
            "latest modifiedTime of {s}"
        );
        assert_eq!(metadata["summary"], now[s]["summary"]);
    }
    // The update of the deleted s0 kept the state s0 had before it was deleted.
    let old_s0 = &got[2 * sessions.len()].2;
    assert_eq!(got[2 * sessions.len()].1, "s0");
    assert_eq!(old_s0["summary"], "s0 turn 0");
    assert_ne!(old_s0["modifiedTime"], now["s0"]["modifiedTime"]);
    assert_eq!(now["s0"]["summary"], "again");

    // The reader that kept up was told about every request that persisted something.
    let app_updates = kinds(&lifecycle(&app))
        .into_iter()
        .filter(|(kind, _)| kind == "session.updated")
        .count();
    assert_eq!(app_updates, sessions.len() + 3 * sessions.len() + 2);
}

#[test]
fn once_its_update_is_written_a_reader_gets_the_next_one() {
    let mut w = World::new(HostConfig::default());
    let mut app = w.connect();
    let mut slow = w.connect();
    create(&mut w, &mut app, "s", json!({}));
    w.pump(&mut [&mut slow]);
    w.stalled.insert(slow.conn);
    send(&mut w, &mut app, &mut [], "s", "one");
    send(&mut w, &mut app, &mut [], "s", "two");
    // Written: the next update is queued again, after it.
    w.resume_reading(slow.conn);
    w.pump(&mut [&mut slow]);
    w.stalled.insert(slow.conn);
    send(&mut w, &mut app, &mut [], "s", "three");
    send(&mut w, &mut app, &mut [], "s", "four");
    w.resume_reading(slow.conn);
    w.pump(&mut [&mut slow]);
    let got = lifecycle(&slow);
    assert_eq!(
        kinds(&got),
        [
            ("session.updated".to_owned(), "s".to_owned()),
            ("session.created".to_owned(), "s".to_owned()),
            ("session.updated".to_owned(), "s".to_owned()),
            ("session.updated".to_owned(), "s".to_owned()),
        ]
    );
    let listed = w.call(&mut app, &mut [], "session.list", json!({}));
    assert_eq!(
        got[3].2["modifiedTime"],
        listed["result"]["sessions"][0]["modifiedTime"]
    );
    assert_ne!(got[2].2["modifiedTime"], got[3].2["modifiedTime"]);
}

/// Updates about sessions a reader is not attached to wait behind its own frames: a reader
/// that fell behind gets its own session's events first, then one update per other session
/// (with the latest metadata), while its own session's updates keep their place among its
/// events.
#[test]
fn other_sessions_updates_never_delay_a_readers_own_events() {
    let mut w = World::new(HostConfig::default());
    let mut app = w.connect();
    let mut reader = w.connect();
    create(&mut w, &mut reader, "mine", json!({}));
    let others: Vec<String> = (0..5).map(|i| format!("o{i}")).collect();
    for s in &others {
        create(&mut w, &mut app, s, json!({}));
    }
    w.pump(&mut [&mut reader]);
    let before = reader.inbox.len();
    w.stalled.insert(reader.conn);
    for round in 0..2 {
        for s in &others {
            send(&mut w, &mut app, &mut [], s, &format!("{s} turn {round}"));
        }
    }
    // The stalled reader's own prompt (its response waits in its outbox too).
    w.send_frame(
        &reader,
        &json!({"jsonrpc":"2.0","id":900,"method":"session.send",
                "params":{"sessionId":"mine","prompt":"my turn"}}),
    );
    w.pump(&mut []);
    w.run_timers(&mut []);
    w.resume_reading(reader.conn);
    w.pump(&mut [&mut reader]);

    let got: Vec<&Value> = reader.inbox[before..].iter().collect();
    let is_other_update = |m: &Value| {
        m["method"] == "session.lifecycle"
            && m["params"]["type"] == "session.updated"
            && m["params"]["sessionId"] != "mine"
    };
    let last_own_event = got
        .iter()
        .rposition(|m| m["method"] == "session.event")
        .expect("the reader's own events");
    let first_other = got
        .iter()
        .position(|m| is_other_update(m))
        .expect("the other sessions' updates");
    assert!(
        last_own_event < first_other,
        "every own event before the other sessions' updates: {got:#?}"
    );
    // The reader's own session's updates stay among its events, before the others'.
    let own_updates = got[..first_other]
        .iter()
        .filter(|m| m["method"] == "session.lifecycle" && m["params"]["sessionId"] == "mine")
        .count();
    assert!(own_updates >= 1, "{got:#?}");
    // One update per other session, coalesced to its latest metadata.
    let updated: Vec<&str> = got
        .iter()
        .filter(|m| is_other_update(m))
        .map(|m| m["params"]["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(updated, ["o0", "o1", "o2", "o3", "o4"]);
    let listed = w.call(&mut app, &mut [], "session.list", json!({}));
    for m in got.iter().filter(|m| is_other_update(m)) {
        let s = m["params"]["sessionId"].as_str().unwrap();
        let now = listed["result"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["sessionId"] == s)
            .unwrap();
        assert_eq!(m["params"]["metadata"]["summary"], now["summary"], "{s}");
    }
}
