//! `session.shell.exec` through the tokio runtime: real commands, output and exit reported as
//! `shell.output` / `shell.exit`, killed on request or at their timeout.

use std::time::Duration;

use agentwire_tokio::agentwire::frame::{FrameDecoder, FrameLimits, Framing};
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

struct Client {
    stream: DuplexStream,
    decoder: FrameDecoder,
    next_id: u64,
}

impl Client {
    async fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let body = serde_json::to_vec(
            &json!({"jsonrpc":"2.0","id":self.next_id,"method":method,"params":params}),
        )
        .unwrap();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).await.unwrap();
        self.next_id
    }

    /// Reads messages until one matches, within 10 s.
    async fn until(&mut self, mut pred: impl FnMut(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut buf = vec![0u8; 8192];
        loop {
            while let Some(body) = self.decoder.next_frame().unwrap() {
                let v: Value = serde_json::from_slice(&body).unwrap();
                let done = pred(&v);
                seen.push(v);
                if done {
                    return seen;
                }
            }
            let n = tokio::time::timeout_at(deadline, self.stream.read(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("timed out; saw {seen:#?}"))
                .unwrap();
            assert!(n > 0, "connection closed; saw {seen:#?}");
            self.decoder.push(&buf[..n]).unwrap();
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        let seen = self.until(|v| v["id"] == id).await;
        seen.last().unwrap().clone()
    }
}

async fn start() -> (Server, Client) {
    let server = Server::new(HostConfig::default().with_shell_enabled(true));
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (r, w) = tokio::io::split(theirs);
    server.attach(r, w);
    let mut client = Client {
        stream: ours,
        decoder: FrameDecoder::new(Framing::ContentLength, FrameLimits::default()),
        next_id: 0,
    };
    let dir = std::env::temp_dir();
    let r = client
        .call(
            "session.create",
            json!({"sessionId":"s","workingDirectory": dir}),
        )
        .await;
    assert_eq!(r["result"]["sessionId"], "s");
    (server, client)
}

#[tokio::test]
async fn a_command_reports_its_output_and_exit_code() {
    let (_server, mut c) = start().await;
    let r = c
        .call(
            "session.shell.exec",
            json!({"sessionId":"s","command":"echo hello; echo oops >&2; exit 3"}),
        )
        .await;
    let pid = r["result"]["processId"].as_str().unwrap().to_owned();
    let seen = c.until(|v| v["method"] == "shell.exit").await;
    let text = |stream: &str| -> String {
        seen.iter()
            .filter(|v| v["method"] == "shell.output" && v["params"]["stream"] == stream)
            .map(|v| v["params"]["data"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(text("stdout"), "hello\n");
    assert_eq!(text("stderr"), "oops\n");
    let exit = seen.last().unwrap();
    assert_eq!(exit["params"]["processId"], pid.as_str());
    assert_eq!(exit["params"]["exitCode"], 3);
    // Output always precedes the exit.
    let exit_at = seen
        .iter()
        .position(|v| v["method"] == "shell.exit")
        .unwrap();
    assert!(seen[..exit_at]
        .iter()
        .any(|v| v["method"] == "shell.output"));
}

#[tokio::test]
async fn kill_and_timeout_end_a_command() {
    let (_server, mut c) = start().await;
    let started = std::time::Instant::now();
    let r = c
        .call(
            "session.shell.exec",
            json!({"sessionId":"s","command":"sleep 30"}),
        )
        .await;
    let pid = r["result"]["processId"].clone();
    let r = c
        .call(
            "session.shell.kill",
            json!({"sessionId":"s","processId":pid}),
        )
        .await;
    assert_eq!(r["result"]["killed"], true);
    let seen = c.until(|v| v["method"] == "shell.exit").await;
    assert_eq!(
        seen.last().unwrap()["params"]["exitCode"],
        Value::Null,
        "killed by a signal"
    );
    let r = c
        .call(
            "session.shell.exec",
            json!({"sessionId":"s","command":"sleep 30","timeout":200}),
        )
        .await;
    assert!(r["result"]["processId"].is_string());
    c.until(|v| v["method"] == "shell.exit").await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "neither waited for sleep 30"
    );
}
