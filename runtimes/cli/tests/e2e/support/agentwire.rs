//! The `agentwire` binary as a child process of a test: started with the given arguments on
//! TCP, its port read from the first line of stdout, its stderr collected (and printed if the
//! test fails), killed on drop.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use super::wire::{FrameReader, PROMPT};

const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// A running `agentwire` that listens on TCP.
pub struct Agentwire {
    pub child: Child,
    pub port: u16,
    stderr: Arc<Mutex<String>>,
    /// The stdout lines after the port line (the `ahp: listening on port N` of a listener
    /// beside the main one).
    stdout: Arc<Mutex<Vec<String>>>,
}

impl Drop for Agentwire {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if std::thread::panicking() {
            eprintln!("---- agentwire stderr ----\n{}", self.stderr());
        }
    }
}

impl Agentwire {
    /// Starts `agentwire ARGS` (which must make it listen on TCP, e.g. `--port 0`) with
    /// `RUST_LOG=info` and no connection token, and waits for its port line.
    pub async fn launch<I, S>(args: I) -> Agentwire
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::launch_with_token(args, None).await
    }

    /// [`Agentwire::launch`] with `COPILOT_CONNECTION_TOKEN` set to `token` (`None`: unset).
    pub async fn launch_with_token<I, S>(args: I, token: Option<&str>) -> Agentwire
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new(BIN);
        command.env_remove("COPILOT_CONNECTION_TOKEN");
        if let Some(token) = token {
            command.env("COPILOT_CONNECTION_TOKEN", token);
        }
        let mut child = command
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn agentwire");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = err_lines.next_line().await {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(PROMPT, lines.next_line())
            .await
            .expect("the port line in time")
            .expect("read stdout")
            .expect("a port line");
        let port = line
            .strip_prefix("listening on port ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let later = stdout.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                later.lock().unwrap().push(line);
            }
        });
        Agentwire {
            child,
            port,
            stderr,
            stdout,
        }
    }

    /// The port of the listener announced as `{prefix}: listening on port N` (e.g. `ahp`),
    /// waiting (boundedly) for its line.
    pub async fn listener_port(&self, prefix: &str) -> u16 {
        let wanted = format!("{prefix}: listening on port ");
        let deadline = Instant::now() + PROMPT;
        loop {
            let found = self
                .stdout
                .lock()
                .unwrap()
                .iter()
                .find_map(|l| l.strip_prefix(&wanted).and_then(|p| p.parse().ok()));
            if let Some(port) = found {
                return port;
            }
            assert!(Instant::now() < deadline, "no `{wanted}N` line on stdout");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (boundedly) until stderr contains every one of `needles`; returns it.
    pub async fn stderr_with(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + PROMPT;
        loop {
            let stderr = self.stderr();
            if needles.iter().all(|n| stderr.contains(n)) || Instant::now() > deadline {
                return stderr;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A raw Content-Length connection.
    pub async fn raw(&self) -> (FrameReader<OwnedReadHalf>, OwnedWriteHalf) {
        let stream = TcpStream::connect(self.addr()).await.expect("connect");
        let (r, w) = stream.into_split();
        (FrameReader::new(r), w)
    }

    /// Sends it the signal `name` (`TERM`, `INT`, …).
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().expect("still running").to_string();
        let status = std::process::Command::new("kill")
            .args(["-s", name, &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {name} {pid}");
    }

    /// Waits for it to exit, at most `limit`.
    pub async fn exit(&mut self, limit: Duration) -> ExitStatus {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("agentwire did not exit within {limit:?}"))
            .expect("wait")
    }
}

/// An official Copilot SDK client connected to agentwire on `port` over TCP, as
/// `Transport::External` connects (the handshake done).
pub async fn sdk_client(port: u16) -> github_copilot_sdk::Client {
    let stream =
        super::sdk_scenarios::within("tcp connect", TcpStream::connect(("127.0.0.1", port)))
            .await
            .expect("connect to agentwire");
    let (r, w) = tokio::io::split(stream);
    let client = github_copilot_sdk::Client::from_streams(r, w, std::path::PathBuf::from("/tmp"))
        .expect("Client::from_streams");
    super::sdk_scenarios::within("connect", client.verify_protocol_version())
        .await
        .expect("connect handshake");
    client
}

/// One turn through the SDK (`send_and_wait(prompt)`): the assistant message it resolved with,
/// the turn's events, and those events as `type data` lines for a failure message.
pub async fn sdk_turn(
    c: &mut super::sdk_scenarios::Created,
    prompt: &str,
) -> (
    github_copilot_sdk::types::SessionEvent,
    Vec<github_copilot_sdk::types::SessionEvent>,
    Vec<String>,
) {
    let reply = super::sdk_scenarios::within(
        "send_and_wait",
        c.session
            .send_and_wait(github_copilot_sdk::MessageOptions::new(prompt)),
    )
    .await
    .expect("the turn ends");
    let events = c.events.turn().await;
    let seen: Vec<String> = events
        .iter()
        .map(|e| format!("{} {}", e.event_type, e.data))
        .collect();
    let reply = reply.unwrap_or_else(|| panic!("no assistant message: {seen:#?}"));
    (reply, events, seen)
}
