//! The conformance cases that run the binary, `agentwire --runtime <name>`: stdio and TCP,
//! and with `--allow-shell --data-dir D` the parts of the driver every runtime shares —
//! shell commands (`shell.output` / `shell.exit`, kill), the session store (a session is in
//! `session.list` after a restart on the same `D`), and SIGINT/SIGTERM handling (the
//! `agentwire/shutdown` notice before end of stream; a second signal exits at once).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::Command;

use super::common::{frame, ping_ok, FrameReader, PROMPT};
use super::support::Agentwire;
use super::{within, RuntimeUnderTest};

const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// `agentwire --runtime <R> --port 0 --data-dir D EXTRA`.
async fn start<R: RuntimeUnderTest>(data: &Path, extra: &[&str]) -> Agentwire {
    let mut args = vec!["--runtime", R::FLAG, "--port", "0", "--data-dir"];
    args.push(data.to_str().expect("a UTF-8 temporary directory"));
    args.extend_from_slice(extra);
    Agentwire::launch(args).await
}

async fn client(server: &Agentwire) -> Raw {
    let (reader, writer) = server.raw().await;
    Raw { reader, writer }
}

/// `runtime.shutdown` through `client`, then a clean exit.
async fn shutdown(mut server: Agentwire, client: &mut Raw) {
    let answer = client.call(999, "runtime.shutdown", json!({})).await;
    assert!(answer.get("result").is_some(), "{answer}");
    let status = server.exit(PROMPT).await;
    assert!(status.success(), "exit status {status}");
}

/// A raw Content-Length client.
struct Raw {
    reader: FrameReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl Raw {
    async fn send(&mut self, id: u64, method: &str, params: Value) {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.writer.write_all(&frame(&request)).await.unwrap();
    }

    /// Sends a request and returns its response (notifications before it are skipped).
    async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(id, method, params).await;
        self.reader.response(id).await
    }

    /// Every message up to and including the first that `pred` accepts.
    async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.reader.expect().await;
            let done = pred(&message);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }
}

/// `session.shell.exec` with `--allow-shell`: stdout and stderr arrive as `shell.output`
/// before `shell.exit` with the exit code; `session.shell.kill` ends a long command (no exit
/// code: a signal ended it), and so does its timeout.
pub(super) async fn shell_exec_reports_output_exit_and_kill<R: RuntimeUnderTest>() {
    let data = tempfile::tempdir().unwrap();
    let server = start::<R>(data.path(), &["--allow-shell"]).await;
    let mut c = client(&server).await;
    let created = c
        .call(
            1,
            "session.create",
            json!({"sessionId": "shell", "workingDirectory": std::env::temp_dir()}),
        )
        .await;
    assert_eq!(created["result"]["sessionId"], "shell", "{created}");

    let command = "echo hello; echo oops >&2; exit 3";
    c.send(
        2,
        "session.shell.exec",
        json!({"sessionId": "shell", "command": command}),
    )
    .await;
    let seen = c.until(|m| m["method"] == "shell.exit").await;
    let started = seen
        .iter()
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("exec answered before the exit: {seen:#?}"));
    let process_id = started["result"]["processId"].clone();
    assert!(process_id.is_string(), "{started}");
    let text = |stream: &str| -> String {
        seen.iter()
            .filter(|m| m["method"] == "shell.output" && m["params"]["stream"] == stream)
            .map(|m| m["params"]["data"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(text("stdout"), "hello\n", "{seen:#?}");
    assert_eq!(text("stderr"), "oops\n", "{seen:#?}");
    let exit = seen.last().unwrap();
    assert_eq!(exit["params"]["processId"], process_id);
    assert_eq!(exit["params"]["exitCode"], 3);

    let began = Instant::now();
    let sleeping = c
        .call(
            3,
            "session.shell.exec",
            json!({"sessionId": "shell", "command": "sleep 30"}),
        )
        .await;
    let process_id = sleeping["result"]["processId"].clone();
    let killed = c
        .call(
            4,
            "session.shell.kill",
            json!({"sessionId": "shell", "processId": process_id}),
        )
        .await;
    assert_eq!(killed["result"]["killed"], true, "{killed}");
    let seen = c.until(|m| m["method"] == "shell.exit").await;
    let exit = seen.last().unwrap();
    assert_eq!(exit["params"]["processId"], process_id);
    assert_eq!(
        exit["params"]["exitCode"],
        Value::Null,
        "killed by a signal"
    );
    let timed = c
        .call(
            5,
            "session.shell.exec",
            json!({"sessionId": "shell", "command": "sleep 30", "timeout": 200}),
        )
        .await;
    assert!(timed["result"]["processId"].is_string(), "{timed}");
    c.until(|m| m["method"] == "shell.exit").await;
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "neither waited for sleep 30"
    );
    shutdown(server, &mut c).await;
}

/// `--data-dir D`: a session created (and prompted) on one process is in `session.list` of
/// the next process started on the same `D`, with its history.
pub(super) async fn sessions_survive_a_restart_on_the_same_data_dir<R: RuntimeUnderTest>() {
    let data = tempfile::tempdir().unwrap();
    let id = format!("stored-{}", R::FLAG);
    let server = start::<R>(data.path(), &[]).await;
    let mut c = client(&server).await;
    let created = c.call(1, "session.create", json!({"sessionId": id})).await;
    assert_eq!(created["result"]["sessionId"], id.as_str(), "{created}");
    c.send(
        2,
        "session.send",
        json!({"sessionId": id, "prompt": "remember me"}),
    )
    .await;
    c.until(|m| m["method"] == "session.event" && m["params"]["event"]["type"] == "session.idle")
        .await;
    shutdown(server, &mut c).await;

    let server = start::<R>(data.path(), &[]).await;
    let mut c = client(&server).await;
    let list = c.call(1, "session.list", json!({})).await;
    let ids: Vec<&str> = list["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions in {list}"))
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()], "{list}");
    let history = c
        .call(2, "session.getMessages", json!({"sessionId": id}))
        .await;
    let events = history["result"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "user.message" && e["data"]["content"] == "remember me"),
        "{history}"
    );
    shutdown(server, &mut c).await;
}

/// SIGTERM: every client receives `agentwire/shutdown` with the reason as its last message,
/// then end of stream, and the process exits 0.
pub(super) async fn sigterm_sends_the_shutdown_notice_before_end_of_stream<R: RuntimeUnderTest>() {
    let data = tempfile::tempdir().unwrap();
    let mut server = start::<R>(data.path(), &[]).await;
    let mut c = client(&server).await;
    ping_ok(&mut c.reader, &mut c.writer, 1).await;
    let started = Instant::now();
    server.signal("TERM");
    let notice = within("the shutdown notice", c.reader.next())
        .await
        .expect("read")
        .expect("the notice before end of stream");
    assert_eq!(
        notice,
        json!({"jsonrpc":"2.0","method":"agentwire/shutdown",
               "params":{"reason":"received SIGTERM"}})
    );
    let end = within("end of stream", c.reader.next()).await;
    assert!(matches!(end, Ok(None)), "{end:?}");
    let status = server.exit(Duration::from_secs(4)).await;
    assert!(status.success(), "exit status {status}");
    assert!(started.elapsed() < Duration::from_secs(4));
}

/// A second SIGINT while the first one waits for a client that does not read exits at once
/// with 130.
pub(super) async fn a_second_sigint_exits_at_once<R: RuntimeUnderTest>() {
    let data = tempfile::tempdir().unwrap();
    let mut server = start::<R>(data.path(), &[]).await;
    // A client with a tiny receive buffer that asks for 7 MiB of responses and never reads
    // them: more than the kernel holds (the server's send buffer is at most `tcp_wmem`'s 4
    // MiB), so a graceful shutdown has to wait for the flush timeout; less than the host's
    // outbox budget (8 MiB), so the host never drops the connection itself.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = within("connect", socket.connect(server.addr()))
        .await
        .expect("connect");
    let (reader, writer) = stream.into_split();
    let mut c = Raw {
        reader: FrameReader::new(reader),
        writer,
    };
    ping_ok(&mut c.reader, &mut c.writer, 1).await;
    let big = "x".repeat(1024 * 1024);
    for id in 2..9u64 {
        let ping = json!({"jsonrpc":"2.0","id":id,"method":"ping","params":{"message":big}});
        c.writer.write_all(&frame(&ping)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.signal("INT");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let early = server.child.try_wait().unwrap();
    assert!(
        early.is_none(),
        "still flushing to the stalled client: {early:?}"
    );
    let second = Instant::now();
    server.signal("INT");
    let status = server.exit(Duration::from_secs(2)).await;
    assert!(second.elapsed() < Duration::from_secs(2));
    assert_eq!(status.code(), Some(130), "{status:?}");
    drop(c);
}

/// `agentwire --runtime <name>`: stdio (ping, end of input, exit 0) and TCP (port line, ping,
/// `runtime.shutdown`, exit 0).
pub(super) async fn binary_over_stdio_and_tcp<R: RuntimeUnderTest>() {
    let mut child = Command::new(BIN)
        .args(["--runtime", R::FLAG, "--stdio", "--no-store"])
        .env_remove("COPILOT_CONNECTION_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agentwire --stdio");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = FrameReader::new(child.stdout.take().unwrap());
    ping_ok(&mut stdout, &mut stdin, 1).await;
    drop(stdin);
    let end = within("stdout ends", stdout.next()).await;
    assert!(matches!(end, Ok(None)), "{end:?}");
    let status = within("exit after end of input", child.wait())
        .await
        .unwrap();
    assert!(status.success(), "--stdio exited with {status}");

    let mut server = Agentwire::launch(["--runtime", R::FLAG, "--port", "0", "--no-store"]).await;
    let (mut reader, mut w) = server.raw().await;
    ping_ok(&mut reader, &mut w, 1).await;
    w.write_all(&frame(
        &json!({"jsonrpc":"2.0","id":2,"method":"runtime.shutdown","params":{}}),
    ))
    .await
    .unwrap();
    assert!(reader.response(2).await.get("result").is_some());
    let status = server.exit(PROMPT).await;
    assert!(status.success(), "--port 0 exited with {status}");
}
