//! The store on its own: appends, the loader's crash repair and error reporting, restore into a
//! host, deletion, sync policies.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use agentwire::frame::Framing;
use agentwire::host::{Host, HostConfig, Output};
use agentwire::Timestamp;
use agentwire_store::{Problem, Store, StoreOptions, SyncPolicy, EVENTS_FILE, SESSION_STATE};
use serde_json::{json, Value};

const NOW: Timestamp = Timestamp::from_millis(1_795_983_976_952);

fn ev(id: &str, ty: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": id, "timestamp": "2026-11-29T20:26:16.952Z", "parentId": null,
        "type": ty, "data": {"n": id}
    }))
    .unwrap()
}

fn log_path(data: &Path, session: &str) -> PathBuf {
    data.join(SESSION_STATE).join(session).join(EVENTS_FILE)
}

fn write_log(data: &Path, session: &str, contents: &[u8]) -> PathBuf {
    let path = log_path(data, session);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, contents).unwrap();
    path
}

fn lines(events: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        out.extend_from_slice(e);
        out.push(b'\n');
    }
    out
}

fn open(data: &Path) -> Store {
    Store::open(data, StoreOptions::default()).expect("open the store")
}

fn loaded_ids(store: &Store) -> Vec<String> {
    store.loaded().iter().map(|s| s.id.clone()).collect()
}

#[test]
fn a_missing_directory_is_an_empty_store_and_nothing_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("nope");
    let store = open(&data);
    assert!(store.loaded().is_empty());
    assert!(store.problems().is_empty());
    drop(store);
    assert!(!data.exists(), "opening must not create anything");
}

#[test]
fn appends_are_exact_lines_and_load_back_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let a = [ev("1", "session.start"), ev("2", "user.message")];
    let b = [ev("3", "session.start")];
    {
        let mut store = open(tmp.path());
        store.append("a", &a[0]).unwrap();
        store.append("b", &b[0]).unwrap();
        store.append("a", &a[1]).unwrap();
        store.flush().unwrap();
    }
    assert_eq!(fs::read(log_path(tmp.path(), "a")).unwrap(), lines(&a));
    assert_eq!(fs::read(log_path(tmp.path(), "b")).unwrap(), lines(&b));
    let store = open(tmp.path());
    assert!(store.problems().is_empty(), "{:?}", store.problems());
    assert_eq!(loaded_ids(&store), ["a", "b"]);
    let got: Vec<&[u8]> = store.loaded()[0].events.iter().map(|e| &e[..]).collect();
    assert_eq!(got, [&a[0][..], &a[1][..]]);
}

#[test]
fn a_torn_last_line_without_newline_is_cut_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let good = [ev("1", "session.start"), ev("2", "user.message")];
    let mut contents = lines(&good);
    let keep = contents.len() as u64;
    contents.extend_from_slice(&ev("3", "assistant.message")[..20]);
    let path = write_log(tmp.path(), "s", &contents);

    let store = open(tmp.path());
    assert_eq!(loaded_ids(&store), ["s"]);
    assert_eq!(store.loaded()[0].events.len(), 2);
    assert_eq!(store.problems().len(), 1);
    let problem = &store.problems()[0];
    assert!(
        matches!(
            problem,
            Problem::TruncatedTail {
                line: 3,
                bytes: 20,
                ..
            }
        ),
        "{problem:?}"
    );
    assert!(problem.session_loaded());
    let text = problem.to_string();
    assert!(text.contains(&format!("{}:3", path.display())), "{text}");
    assert!(text.contains("truncated 20 bytes"), "{text}");
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        keep,
        "the file is truncated"
    );
    // Appending after the repair continues on a clean line.
    drop(store);
    let mut store = open(tmp.path());
    assert!(store.problems().is_empty());
    store.append("s", &ev("4", "user.message")).unwrap();
    drop(store);
    let store = open(tmp.path());
    assert!(store.problems().is_empty(), "{:?}", store.problems());
    assert_eq!(store.loaded()[0].events.len(), 3);
}

#[test]
fn an_unparsable_last_line_is_cut_too() {
    // What a power loss can leave: the size grew, the data block is zeros.
    let tmp = tempfile::tempdir().unwrap();
    let mut contents = lines(&[ev("1", "session.start")]);
    let keep = contents.len() as u64;
    contents.extend_from_slice(&[0; 40]);
    contents.push(b'\n');
    let path = write_log(tmp.path(), "s", &contents);
    let store = open(tmp.path());
    assert_eq!(store.loaded()[0].events.len(), 1);
    assert!(
        matches!(store.problems(), [Problem::TruncatedTail { line: 2, .. }]),
        "{:?}",
        store.problems()
    );
    assert_eq!(fs::metadata(&path).unwrap().len(), keep);
}

#[test]
fn a_log_with_only_a_torn_line_loads_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_log(tmp.path(), "s", br#"{"id":"1","ty"#);
    let store = open(tmp.path());
    assert!(store.loaded().is_empty());
    let problem = &store.problems()[0];
    assert!(!problem.session_loaded());
    assert!(
        problem.to_string().contains("no complete event"),
        "{problem}"
    );
    assert_eq!(fs::metadata(&path).unwrap().len(), 0);
}

#[test]
fn bad_json_in_the_middle_skips_that_session_and_names_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut bad = lines(&[ev("1", "session.start")]);
    bad.extend_from_slice(b"{not json\n");
    bad.extend_from_slice(&lines(&[ev("3", "user.message")]));
    let bad_path = write_log(tmp.path(), "bad", &bad);
    write_log(tmp.path(), "good", &lines(&[ev("9", "session.start")]));
    let mut middle_blank = lines(&[ev("1", "session.start")]);
    middle_blank.push(b'\n');
    middle_blank.extend_from_slice(&lines(&[ev("3", "user.message")]));
    write_log(tmp.path(), "blank", &middle_blank);
    write_log(
        tmp.path(),
        "array",
        &lines(&[b"[1,2]".to_vec(), ev("2", "user.message")]),
    );

    let store = open(tmp.path());
    assert_eq!(
        loaded_ids(&store),
        ["good"],
        "only the intact session loads"
    );
    let texts: Vec<String> = store.problems().iter().map(|p| p.to_string()).collect();
    assert_eq!(store.problems().len(), 3, "{texts:?}");
    for p in store.problems() {
        assert!(matches!(p, Problem::BadLine { .. }), "{p:?}");
        assert!(!p.session_loaded());
    }
    let bad_text = texts
        .iter()
        .find(|t| t.contains("session bad "))
        .expect("the bad session is reported");
    assert!(
        bad_text.starts_with(&format!("{}:2: invalid JSON", bad_path.display())),
        "{bad_text}"
    );
    assert!(
        texts.iter().any(|t| t.contains(":2: empty line")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains(":1: not a JSON object")),
        "{texts:?}"
    );
    assert_eq!(
        fs::read(&bad_path).unwrap(),
        bad,
        "a damaged log is left as it is"
    );
}

#[test]
fn empty_directories_and_empty_logs_are_skipped_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join(SESSION_STATE);
    fs::create_dir_all(state.join("empty-dir")).unwrap();
    write_log(tmp.path(), "empty-log", b"");
    fs::write(state.join("stray-file.txt"), "hello").unwrap();
    fs::create_dir_all(state.join("%zz")).unwrap();
    write_log(tmp.path(), "ok", &lines(&[ev("1", "session.start")]));
    let store = open(tmp.path());
    assert_eq!(loaded_ids(&store), ["ok"]);
    assert!(
        matches!(store.problems(), [Problem::Foreign { path }] if path.ends_with("%zz")),
        "{:?}",
        store.problems()
    );
}

#[test]
fn client_chosen_ids_cannot_escape_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut store = open(&data);
    for id in ["../escape", "/abs", ".."] {
        store.append(id, &ev("1", "session.start")).unwrap();
    }
    assert!(store.append("", &ev("1", "session.start")).is_err());
    drop(store);
    assert_eq!(
        fs::read_dir(tmp.path()).unwrap().count(),
        1,
        "nothing outside the data directory"
    );
    let store = open(&data);
    let mut ids = loaded_ids(&store);
    ids.sort();
    assert_eq!(ids, ["..", "../escape", "/abs"]);
}

#[test]
fn delete_removes_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    store.append("s", &ev("1", "session.start")).unwrap();
    let dir = store.session_dir("s").unwrap();
    assert!(dir.is_dir());
    store.delete("s").unwrap();
    assert!(!dir.exists());
    store.delete("never-stored").unwrap();
    // A later event for the same id starts a fresh log.
    store.append("s", &ev("2", "session.start")).unwrap();
    drop(store);
    let store = open(tmp.path());
    assert_eq!(store.loaded()[0].events.len(), 1);
}

fn request(host: &mut Host, conn: agentwire::host::ConnId, body: Value) {
    let body = serde_json::to_vec(&body).unwrap();
    let mut wire = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    wire.extend_from_slice(&body);
    host.handle_bytes(NOW, conn, &wire);
}

/// Runs the host's outputs through the store (what a runtime does after every input).
fn apply_outputs(host: &mut Host, store: &mut Store) -> usize {
    let mut n = 0;
    while let Some(out) = host.poll_output() {
        if let Output::Store(out) = out {
            store.apply(&out).unwrap();
            n += 1;
        }
    }
    while let Some(conn) = host.poll_ready() {
        while host.poll_transmit(conn).is_some() {}
    }
    n
}

fn reporting() -> HostConfig {
    HostConfig::default().with_report_persisted_events(true)
}

#[test]
fn a_host_session_round_trips_through_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = open(tmp.path());
    let mut host = Host::new(reporting());
    let conn = host.open(NOW, Framing::ContentLength);
    request(
        &mut host,
        conn,
        json!({"jsonrpc":"2.0","id":1,"method":"session.create","params":{"sessionId":"s1"}}),
    );
    request(
        &mut host,
        conn,
        json!({"jsonrpc":"2.0","id":2,"method":"session.send","params":{"sessionId":"s1","prompt":"hi"}}),
    );
    for _ in 0..50 {
        if let Some(t) = host.poll_timeout() {
            host.handle_timeout(t);
        }
    }
    assert!(apply_outputs(&mut host, &mut store) > 2);
    let before: Vec<Vec<u8>> = host
        .session_events("s1")
        .unwrap()
        .iter()
        .filter(|e| !e.ephemeral)
        .map(|e| e.json.to_vec())
        .collect();
    assert_eq!(
        fs::read(log_path(tmp.path(), "s1")).unwrap(),
        lines(&before)
    );
    drop(store);

    let mut store = open(tmp.path());
    let mut host2 = Host::new(reporting());
    assert!(store.restore(&mut host2, NOW).is_empty());
    let after: Vec<Vec<u8>> = host2
        .session_events("s1")
        .unwrap()
        .iter()
        .map(|e| e.json.to_vec())
        .collect();
    assert_eq!(after, before);

    // Deleting through the host removes the directory.
    let conn = host2.open(NOW, Framing::ContentLength);
    request(
        &mut host2,
        conn,
        json!({"jsonrpc":"2.0","id":1,"method":"session.delete","params":{"sessionId":"s1"}}),
    );
    apply_outputs(&mut host2, &mut store);
    assert!(!tmp.path().join(SESSION_STATE).join("s1").exists());
}

#[test]
fn a_log_the_host_refuses_is_reported_with_its_line_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let ephemeral = serde_json::to_vec(&json!({
        "id": "2", "timestamp": "2026-11-29T20:26:16.952Z", "parentId": "1",
        "type": "session.idle", "ephemeral": true, "data": {}
    }))
    .unwrap();
    let path = write_log(
        tmp.path(),
        "refused",
        &lines(&[ev("1", "session.start"), ephemeral, ev("3", "user.message")]),
    );
    write_log(tmp.path(), "fine", &lines(&[ev("1", "session.start")]));
    let mut store = open(tmp.path());
    let mut host = Host::new(reporting());
    let problems = store.restore(&mut host, NOW);
    assert_eq!(problems.len(), 1, "{problems:?}");
    let text = problems[0].to_string();
    assert!(
        text.starts_with(&format!("{}:2: refused event", path.display())),
        "{text}"
    );
    assert!(host.session_events("refused").is_none());
    assert!(host.session_events("fine").is_some());
}

#[test]
fn sync_policies_parse_and_every_event_reports_synced_appends() {
    assert_eq!("never".parse::<SyncPolicy>(), Ok(SyncPolicy::Never));
    assert_eq!(
        "every-event".parse::<SyncPolicy>(),
        Ok(SyncPolicy::EveryEvent)
    );
    assert_eq!(
        "250ms".parse::<SyncPolicy>(),
        Ok(SyncPolicy::Interval(Duration::from_millis(250)))
    );
    assert!("0s".parse::<SyncPolicy>().is_err());
    assert!("sometimes".parse::<SyncPolicy>().is_err());

    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(
        tmp.path(),
        StoreOptions {
            sync: SyncPolicy::EveryEvent,
        },
    )
    .unwrap();
    let (tx, rx) = mpsc::channel();
    store.set_sync_listener(move |seq| {
        let _ = tx.send(seq);
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(0));
    store.append("s", &ev("1", "session.start")).unwrap();
    store.append("s", &ev("2", "user.message")).unwrap();
    let mark = store.durability_mark().expect("every-event has a mark");
    assert_eq!(mark, 2);
    let mut synced = 0;
    while synced < mark {
        synced = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the sync thread reports the appends as synced");
    }

    // An interval policy syncs on its own and has no mark.
    let mut store = Store::open(
        tmp.path().join("other"),
        StoreOptions {
            sync: SyncPolicy::Interval(Duration::from_millis(10)),
        },
    )
    .unwrap();
    let (tx, rx) = mpsc::channel();
    store.set_sync_listener(move |seq| {
        let _ = tx.send(seq);
    });
    store.append("s", &ev("1", "session.start")).unwrap();
    assert_eq!(store.durability_mark(), None);
    let mut synced = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    while synced < 1 {
        synced = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }
}
