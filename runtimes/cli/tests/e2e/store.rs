//! The durable session store and graceful shutdown, end to end: the real `agentwire` binary
//! with `--data-dir`, driven by the **official Copilot Rust SDK** (`Client::from_streams` over
//! TCP, as in `interop_sdk_process.rs`) and by a raw Content-Length client where the SDK
//! cannot observe what is tested (the shutdown notice, end of stream).
//!
//! Every test uses its own temporary data directory; nothing touches the real home.

use crate::support::sdk_scenarios as sdk;

use crate::support;
use crate::support::wire as common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{frame, ping_ok};
use github_copilot_sdk::types::{MessageOptions, ResumeSessionConfig, SessionEvent, SessionId};
use github_copilot_sdk::Client;
use serde_json::{json, Value};
use support::Agentwire;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// `agentwire --headless --port 0 --data-dir DIR EXTRA`.
async fn start(data: &Path, extra: &[&str]) -> Agentwire {
    let mut args = vec!["--headless", "--port", "0", "--data-dir"];
    args.push(data.to_str().expect("a UTF-8 temporary directory"));
    args.extend_from_slice(extra);
    Agentwire::launch(args).await
}

/// What the tests do with the official SDK against a running server.
trait WithSdk {
    async fn client(&self) -> Client;
    async fn shutdown_via_sdk(self, client: &Client);
}

impl WithSdk for Agentwire {
    /// An official SDK client over a fresh TCP connection, handshaken.
    async fn client(&self) -> Client {
        let stream = sdk::within("tcp connect", TcpStream::connect(("127.0.0.1", self.port)))
            .await
            .expect("connect");
        let (r, w) = tokio::io::split(stream);
        let client = Client::from_streams(r, w, PathBuf::from("/tmp")).expect("from_streams");
        sdk::within("connect", client.verify_protocol_version())
            .await
            .expect("handshake");
        client
    }

    async fn shutdown_via_sdk(mut self, client: &Client) {
        sdk::within("runtime.shutdown", client.rpc().runtime().shutdown())
            .await
            .expect("runtime.shutdown");
        let status = self.exit(sdk::STEP).await;
        assert!(status.success(), "exit status {status}");
    }
}

fn log_file(data: &Path, id: &SessionId) -> PathBuf {
    data.join("session-state")
        .join(id.as_str())
        .join("events.jsonl")
}

/// The stored events, one JSON object per line (every line must end with `\n`).
fn stored(data: &Path, id: &SessionId) -> Vec<Value> {
    let text = std::fs::read_to_string(log_file(data, id)).expect("read the log");
    assert!(text.ends_with('\n'), "the log ends with a complete line");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn ids(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.id.as_str()).collect()
}

fn value_ids(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["id"].as_str().unwrap()).collect()
}

async fn resume(client: &Client, id: &SessionId) -> github_copilot_sdk::session::Session {
    sdk::within(
        "session.resume",
        client.resume_session(ResumeSessionConfig::new(id.clone())),
    )
    .await
    .expect("resume a stored session")
}

async fn history(session: &github_copilot_sdk::session::Session) -> Vec<SessionEvent> {
    sdk::within("session.getMessages", session.get_events())
        .await
        .expect("getMessages")
}

/// Create and converse, stop the server, start a new one on the same `--data-dir`: the
/// session is listed with its metadata, resumes continuing the `parentId` chain, and
/// `getMessages` returns the same history. The last detach wrote `session.shutdown`.
#[tokio::test]
async fn sessions_survive_a_restart_with_the_official_sdk() {
    sdk::bounded(async {
        let data = tempfile::tempdir().unwrap();
        let server = start(data.path(), &[]).await;
        let client = server.client().await;
        let id = sdk::new_session_id();
        let mut c = sdk::create_session(&client, &id, true).await;
        sdk::turn(&c.session, "remember me").await;
        sdk::turn(&c.session, sdk::WEATHER_PROMPT).await;
        c.events.turn().await;
        c.events.turn().await;
        sdk::assert_history_matches(&c.session, &c.events.seen).await;
        let before = history(&c.session).await;
        // Every persisted event the client saw is in the log, in order, nothing ephemeral.
        assert_eq!(value_ids(&stored(data.path(), &id)), ids(&before));
        assert!(before
            .iter()
            .any(|e| e.event_type == "tool.execution_complete"));

        // Part 3: the last detach writes `session.shutdown`, and it lands in the log.
        sdk::within("detach", c.session.disconnect())
            .await
            .expect("detach");
        let log = stored(data.path(), &id);
        assert_eq!(log.len(), before.len() + 1);
        assert_eq!(log.last().unwrap()["type"], "session.shutdown");
        assert_eq!(
            log.last().unwrap()["parentId"],
            json!(before.last().unwrap().id)
        );
        server.shutdown_via_sdk(&client).await;
        drop(client);

        let server = start(data.path(), &[]).await;
        let client = server.client().await;
        let listed = sdk::within("session.list", client.list_sessions(None))
            .await
            .expect("session.list");
        let meta = listed
            .iter()
            .find(|s| s.session_id == id)
            .expect("the stored session is listed");
        assert_eq!(meta.summary.as_deref(), Some("remember me"));
        let meta = sdk::within("getMetadata", client.get_session_metadata(&id))
            .await
            .expect("getMetadata")
            .expect("metadata of the stored session");
        assert_eq!(meta.start_time, before[0].timestamp);

        let session = resume(&client, &id).await;
        let after = history(&session).await;
        assert_eq!(ids(&after)[..log.len()], value_ids(&log)[..]);
        for (h, l) in after.iter().zip(&log) {
            assert_eq!(h.event_type, l["type"].as_str().unwrap());
            assert_eq!(h.parent_id.as_deref(), l["parentId"].as_str());
            assert_eq!(h.timestamp, l["timestamp"].as_str().unwrap());
            assert_eq!(h.data, l["data"]);
        }
        let resumed = &after[log.len()];
        assert_eq!(resumed.event_type, "session.resume");
        assert_eq!(
            resumed.parent_id.as_deref(),
            log.last().unwrap()["id"].as_str(),
            "session.resume continues the parentId chain"
        );
        // The conversation goes on, and is stored too.
        let reply = sdk::turn(&session, "still there?").await;
        assert_eq!(reply.data["content"], "You said: still there?");
        let full = history(&session).await;
        sdk::assert_chain(&full, None);
        assert_eq!(value_ids(&stored(data.path(), &id)), ids(&full));
        server.shutdown_via_sdk(&client).await;
    })
    .await
}

/// The plan and the workspace files a client wrote are there after a restart on the same
/// `--data-dir`; the content stored for them never shows in the events clients receive.
#[tokio::test]
async fn plan_and_workspace_files_survive_a_restart() {
    use github_copilot_sdk::rpc::{
        PlanUpdateRequest, WorkspacesCreateFileRequest, WorkspacesReadFileRequest,
    };
    sdk::bounded(async {
        let data = tempfile::tempdir().unwrap();
        let server = start(data.path(), &[]).await;
        let client = server.client().await;
        let id = sdk::new_session_id();
        let c = sdk::create_session(&client, &id, false).await;
        let rpc = c.session.rpc();
        for content in ["# Plan v1", "# Plan v2"] {
            sdk::within(
                "plan.update",
                rpc.plan().update(PlanUpdateRequest {
                    content: content.to_owned(),
                }),
            )
            .await
            .expect("plan.update");
        }
        for (path, content) in [
            ("notes/a.md", "alpha"),
            ("b.txt", "beta"),
            ("b.txt", "beta 2"),
        ] {
            sdk::within(
                "workspaces.createFile",
                rpc.workspaces().create_file(WorkspacesCreateFileRequest {
                    content: content.to_owned(),
                    path: path.to_owned(),
                }),
            )
            .await
            .expect("createFile");
        }
        let seen = history(&c.session).await;
        assert!(seen.iter().any(|e| e.event_type == "session.plan_changed"));
        for e in &seen {
            assert!(e.data.get("agentwireContent").is_none(), "{:?}", e.data);
        }
        server.shutdown_via_sdk(&client).await;
        drop(client);

        let server = start(data.path(), &[]).await;
        let client = server.client().await;
        let session = resume(&client, &id).await;
        let rpc = session.rpc();
        let plan = sdk::within("plan.read", rpc.plan().read())
            .await
            .expect("plan.read");
        assert!(plan.exists);
        assert_eq!(plan.content.as_deref(), Some("# Plan v2"));
        let files = sdk::within("listFiles", rpc.workspaces().list_files())
            .await
            .expect("listFiles");
        assert_eq!(files.files, ["b.txt", "notes/a.md"]);
        let file = sdk::within(
            "readFile",
            rpc.workspaces().read_file(WorkspacesReadFileRequest {
                path: "b.txt".to_owned(),
            }),
        )
        .await
        .expect("readFile");
        assert_eq!(file.content, "beta 2");
        for e in history(&session).await {
            assert!(e.data.get("agentwireContent").is_none(), "{:?}", e.data);
        }
        server.shutdown_via_sdk(&client).await;
    })
    .await
}

/// kill -9 in the middle of a stream of turns: every persisted event the client had
/// received is in the history after a restart.
#[tokio::test]
async fn every_event_a_client_saw_survives_sigkill() {
    sdk::bounded(async {
        let data = tempfile::tempdir().unwrap();
        let mut server = start(data.path(), &[]).await;
        let client = server.client().await;
        let id = sdk::new_session_id();
        let sdk::Created {
            session,
            mut events,
            ..
        } = sdk::create_session(&client, &id, true).await;
        let driver = tokio::spawn(async move {
            for i in 0.. {
                let prompt = format!("turn {i}");
                let options = MessageOptions::new(prompt).with_wait_timeout(sdk::TURN);
                if session.send_and_wait(options).await.is_err() {
                    break;
                }
            }
        });
        // Kill at an arbitrary point of the stream, mid-turn most of the time.
        while events.seen.len() < 57 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            events.drain();
        }
        server.child.start_kill().expect("SIGKILL");
        server.exit(sdk::STEP).await;
        // Everything that reached the client, including what was in flight, counts.
        tokio::time::sleep(Duration::from_millis(200)).await;
        events.drain();
        driver.abort();
        let received: Vec<&SessionEvent> = events
            .seen
            .iter()
            .filter(|e| e.ephemeral.is_none())
            .collect();
        assert!(received.len() > 10, "{} persisted events", received.len());

        let server = start(data.path(), &[]).await;
        let client = server.client().await;
        let session = resume(&client, &id).await;
        let after = history(&session).await;
        let received_ids: Vec<&str> = received.iter().map(|e| e.id.as_str()).collect();
        assert!(
            after.len() > received_ids.len(),
            "history {} events, received {}",
            after.len(),
            received_ids.len()
        );
        assert_eq!(
            ids(&after)[..received_ids.len()],
            received_ids[..],
            "every event the client saw is stored, in order"
        );
        sdk::assert_chain(&after, None);
        server.shutdown_via_sdk(&client).await;
    })
    .await
}

/// A log whose last line is torn: the rest loads, stderr names the file and line, the file is
/// truncated. A log with bad JSON in the middle is skipped with its file and line named, and
/// does not keep the other sessions from loading.
#[tokio::test]
async fn a_torn_last_line_is_cut_and_reported_and_the_rest_loads() {
    sdk::bounded(async {
        let data = tempfile::tempdir().unwrap();
        let server = start(data.path(), &[]).await;
        let client = server.client().await;
        let (good, damaged) = (sdk::new_session_id(), sdk::new_session_id());
        for id in [&good, &damaged] {
            let c = sdk::create_session(&client, id, false).await;
            sdk::turn(&c.session, "hello").await;
        }
        server.shutdown_via_sdk(&client).await;

        let good_path = log_file(data.path(), &good);
        let intact = std::fs::read(&good_path).unwrap();
        let lines = intact.iter().filter(|&&b| b == b'\n').count();
        let mut torn = intact.clone();
        torn.extend_from_slice(br#"{"id":"0a6d","timestamp":"2026-"#);
        std::fs::write(&good_path, &torn).unwrap();
        let damaged_path = log_file(data.path(), &damaged);
        let mut text = std::fs::read_to_string(&damaged_path).unwrap();
        text.insert_str(text.find('\n').unwrap() + 1, "{\"id\": oops\n");
        std::fs::write(&damaged_path, &text).unwrap();

        let server = start(data.path(), &[]).await;
        // The repair happens before the port line.
        assert_eq!(std::fs::read(&good_path).unwrap(), intact, "truncated");
        assert_eq!(
            std::fs::read_to_string(&damaged_path).unwrap(),
            text,
            "a damaged log is left alone"
        );
        let torn_at = format!("{}:{}: torn last line", good_path.display(), lines + 1);
        let bad_at = format!("{}:2: invalid JSON", damaged_path.display());
        let stderr = server.stderr_with(&[&torn_at, &bad_at]).await;
        assert!(
            stderr.contains(&torn_at),
            "{torn_at:?} in stderr:\n{stderr}"
        );
        assert!(stderr.contains("truncated 31 bytes"), "{stderr}");
        assert!(stderr.contains(&bad_at), "{bad_at:?} in stderr:\n{stderr}");

        let client = server.client().await;
        let listed = sdk::within("session.list", client.list_sessions(None))
            .await
            .unwrap();
        assert!(listed.iter().any(|s| s.session_id == good));
        assert!(!listed.iter().any(|s| s.session_id == damaged));
        let session = resume(&client, &good).await;
        let after = history(&session).await;
        assert_eq!(
            after.len(),
            lines + 1,
            "the intact events plus session.resume"
        );
        server.shutdown_via_sdk(&client).await;
    })
    .await
}

/// `session.delete` removes the session's directory before the client hears back.
#[tokio::test]
async fn session_delete_removes_the_directory() {
    sdk::bounded(async {
        let data = tempfile::tempdir().unwrap();
        let server = start(data.path(), &[]).await;
        let client = server.client().await;
        let (kept, deleted) = (sdk::new_session_id(), sdk::new_session_id());
        for id in [&kept, &deleted] {
            let c = sdk::create_session(&client, id, false).await;
            sdk::turn(&c.session, "hi").await;
            sdk::within("detach", c.session.disconnect()).await.unwrap();
        }
        let dir = log_file(data.path(), &deleted).parent().unwrap().to_owned();
        assert!(dir.join("events.jsonl").is_file());
        sdk::within("session.delete", client.delete_session(&deleted))
            .await
            .expect("delete");
        assert!(!dir.exists(), "the directory is gone when delete answers");
        assert!(log_file(data.path(), &kept).is_file());
        server.shutdown_via_sdk(&client).await;

        let server = start(data.path(), &[]).await;
        let client = server.client().await;
        let listed = sdk::within("session.list", client.list_sessions(None))
            .await
            .unwrap();
        let listed: Vec<&SessionId> = listed.iter().map(|s| &s.session_id).collect();
        assert_eq!(listed, [&kept], "a deleted session stays deleted");
        server.shutdown_via_sdk(&client).await;
    })
    .await
}

/// SIGTERM with clients attached: each receives `agentwire/shutdown {reason}` and then end of
/// stream, the session store gets the `session.shutdown` of the session left behind, and the
/// process exits 0 well within the flush bound.
#[tokio::test]
async fn sigterm_tells_clients_why_then_exits_zero() {
    sdk::bounded(async {
        let data = tempfile::tempdir().unwrap();
        let mut server = start(data.path(), &[]).await;
        let (mut raw, mut raw_w) = server.raw().await;
        ping_ok(&mut raw, &mut raw_w, 1).await;
        let client = server.client().await;
        let id = sdk::new_session_id();
        let c = sdk::create_session(&client, &id, false).await;
        sdk::turn(&c.session, "before the signal").await;

        let started = Instant::now();
        server.signal("TERM");
        // What was queued before (lifecycle notifications of the other client's session) is
        // still delivered; the notice is the last message.
        let notice = loop {
            let message = sdk::within("the shutdown notice", raw.next())
                .await
                .expect("read")
                .expect("the notice before end of stream");
            if message["method"] != "session.lifecycle" {
                break message;
            }
        };
        assert_eq!(
            notice,
            json!({"jsonrpc":"2.0","method":"agentwire/shutdown",
                   "params":{"reason":"received SIGTERM"}})
        );
        let end = sdk::within("end of stream", raw.next()).await;
        assert!(matches!(end, Ok(None)), "{end:?}");
        let status = server.exit(Duration::from_secs(4)).await;
        assert!(status.success(), "exit status {status}");
        assert!(started.elapsed() < Duration::from_secs(4));
        let log = stored(data.path(), &id);
        assert_eq!(log.last().unwrap()["type"], "session.shutdown");
        drop(c);
    })
    .await
}

/// A second SIGTERM while the first one waits for a client that does not read exits at once.
#[tokio::test]
async fn a_second_sigterm_exits_at_once() {
    use std::os::unix::process::ExitStatusExt;
    sdk::bounded(async {
        let _exclusive = crate::support::exclusive().await;
        let data = tempfile::tempdir().unwrap();
        let mut server = start(data.path(), &[]).await;
        let (mut raw, mut w) = server.raw().await;
        ping_ok(&mut raw, &mut w, 1).await;
        // Ask for far more than the socket buffers hold and never read: this connection
        // cannot finish flushing, so a graceful shutdown has to wait for the flush timeout.
        let big = "x".repeat(1024 * 1024);
        let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let progress = written.clone();
        tokio::spawn(async move {
            for i in 2..26u64 {
                let body = json!({"jsonrpc":"2.0","id":i,"method":"ping","params":{"message":big}});
                if w.write_all(&frame(&body)).await.is_err() {
                    break;
                }
                progress.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            std::future::pending::<()>().await;
        });
        // Wait until the server stopped reading (its answers fill the socket and its queue),
        // rather than a fixed time: on a loaded machine a fixed 500 ms could end while the
        // server had few answers queued, and it then flushed them and exited at once.
        let mut last = u64::MAX;
        let mut still = 0;
        // (600 ms without a completed write: a loaded machine can take a few hundred ms to
        // read one megabyte.)
        let deadline = Instant::now() + Duration::from_secs(10);
        while still < 12 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = written.load(std::sync::atomic::Ordering::SeqCst);
            still = if now == last { still + 1 } else { 0 };
            last = now;
        }
        server.signal("TERM");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "still flushing to the stalled client"
        );
        let second = Instant::now();
        server.signal("TERM");
        let status = server.exit(Duration::from_secs(2)).await;
        assert!(second.elapsed() < Duration::from_secs(2));
        assert_eq!(status.code(), Some(143), "{status:?}");
        assert!(status.signal().is_none());
        let stderr = server
            .stderr_with(&["SIGTERM again while shutting down"])
            .await;
        assert!(
            stderr.contains("SIGTERM again while shutting down"),
            "{stderr}"
        );
        drop(raw);
    })
    .await
}

/// `--fsync every-event` (frames wait for the sync that covers their events) and an interval
/// policy serve a conversation normally, and the log holds what the client saw.
#[tokio::test]
async fn fsync_policies_serve_and_store_normally() {
    sdk::bounded(async {
        for policy in ["every-event", "20ms"] {
            let data = tempfile::tempdir().unwrap();
            let server = start(data.path(), &["--fsync", policy]).await;
            let client = server.client().await;
            let id = sdk::new_session_id();
            let mut c = sdk::create_session(&client, &id, true).await;
            for prompt in ["one", sdk::WEATHER_PROMPT, "three"] {
                sdk::turn(&c.session, prompt).await;
                c.events.turn().await;
            }
            sdk::assert_history_matches(&c.session, &c.events.seen).await;
            let persisted: Vec<&str> = c
                .events
                .seen
                .iter()
                .filter(|e| e.ephemeral.is_none())
                .map(|e| e.id.as_str())
                .collect();
            assert_eq!(
                value_ids(&stored(data.path(), &id)),
                persisted,
                "--fsync {policy}"
            );
            server.shutdown_via_sdk(&client).await;
        }
    })
    .await
}
