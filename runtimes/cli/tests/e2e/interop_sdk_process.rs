//! Interop with the **official Copilot Rust SDK** (`github-copilot-sdk`, unmodified) against the
//! real `agentwire` binary, over TCP and over stdio.
//!
//! With `default-features = false` the SDK has no `runtime` feature, so `Client::start` (which
//! would spawn or dial the server) is compiled out; see /work/notes/SDK.md. These tests do the
//! transport part exactly as the SDK's own code does it and hand the streams to
//! `Client::from_streams`:
//!
//! * TCP: the server runs as a user would start it (`--headless --port 0`); the test waits for
//!   `listening on port N` on its stdout with the SDK's regex and timeout, then connects with
//!   `TcpStream::connect` + `tokio::io::split`, which is what `Transport::External` does.
//! * stdio: the test spawns the binary with the SDK's exact argv for `Transport::Stdio`
//!   (`--server --stdio --no-auto-update`) and environment, and speaks over its stdin/stdout.
//!
//! Everything above the byte stream (framing, handshake, sessions, waits, tool and permission
//! handlers) is the SDK's code. The shared scenarios live in the root crate's
//! `testkit/src/sdk_scenarios/`.

use crate::support::sdk_scenarios;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use github_copilot_sdk::Client;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// The SDK waits this long for the port line (`lib.rs` `spawn_tcp`: 10 s).
const PORT_TIMEOUT: Duration = Duration::from_secs(10);

/// A spawned `agentwire` process; killed on drop. Its stderr is collected and printed if the
/// test fails, so a failing run shows the server's logs.
struct Proc {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// `COPILOT_HOME` of the process (its session store), removed on drop.
    _home: tempfile::TempDir,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if std::thread::panicking() {
            eprintln!(
                "---- agentwire stderr ----\n{}",
                self.stderr.lock().unwrap()
            );
        }
    }
}

fn spawn(args: &[&str], env: &[(&str, &str)], stdin: Stdio) -> Proc {
    let home = tempfile::tempdir().expect("a temporary COPILOT_HOME");
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("COPILOT_HOME", home.path())
        .envs(env.iter().copied())
        .env("RUST_LOG", "debug")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn the agentwire binary");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut lines = BufReader::new(child.stderr.take().expect("stderr piped")).lines();
    let sink = stderr.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    Proc {
        child,
        stderr,
        _home: home,
    }
}

/// Starts `agentwire --headless --port 0` (plus `extra` args/env) and returns it with its port,
/// read from stdout the way the SDK does (`listening on port (\d+)`, case-sensitive, 10 s).
async fn spawn_tcp(extra_args: &[&str], env: &[(&str, &str)]) -> (Proc, u16) {
    let mut args = vec!["--headless", "--port", "0"];
    args.extend_from_slice(extra_args);
    let mut proc = spawn(&args, env, Stdio::null());
    let stdout = proc.child.stdout.take().expect("stdout piped");
    let mut lines = BufReader::new(stdout).lines();
    let port = tokio::time::timeout(PORT_TIMEOUT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.split("listening on port ").nth(1) {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                if let Ok(port) = digits.parse::<u16>() {
                    return port;
                }
            }
        }
        panic!("agentwire closed stdout without printing `listening on port N`");
    })
    .await
    .expect("`listening on port N` within 10 s");
    // Keep draining stdout so the server never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (proc, port)
}

/// A client over a fresh TCP connection to `port` (what `Transport::External` does), not yet
/// handshaken.
async fn tcp_client(port: u16) -> Client {
    let stream = sdk_scenarios::within("tcp connect", TcpStream::connect(("127.0.0.1", port)))
        .await
        .expect("connect to agentwire");
    let (r, w) = tokio::io::split(stream);
    Client::from_streams(r, w, PathBuf::from("/tmp")).expect("Client::from_streams")
}

async fn tcp_client_connected(port: u16) -> Client {
    let client = tcp_client(port).await;
    sdk_scenarios::within("connect", client.verify_protocol_version())
        .await
        .expect("connect handshake");
    client
}

/// Spawns the binary the way the SDK's `Transport::Stdio` does (`lib.rs` `spawn_stdio` /
/// `build_command`: `--server --stdio --no-auto-update`, `COPILOT_RUNTIME_PROCESS_FILE_LOGGING=1`)
/// and returns a client over its stdout/stdin.
fn spawn_stdio() -> (Proc, Client) {
    let mut proc = spawn(
        &["--server", "--stdio", "--no-auto-update"],
        &[("COPILOT_RUNTIME_PROCESS_FILE_LOGGING", "1")],
        Stdio::piped(),
    );
    let stdout: ChildStdout = proc.child.stdout.take().expect("stdout piped");
    let stdin: ChildStdin = proc.child.stdin.take().expect("stdin piped");
    let client = Client::from_streams(stdout, stdin, PathBuf::from("/tmp")).expect("from_streams");
    (proc, client)
}

/// Waits for the process to exit and asserts it exited 0.
async fn assert_exits_cleanly(proc: &mut Proc, why: &str) {
    let status = sdk_scenarios::within(why, proc.child.wait())
        .await
        .expect("wait for agentwire");
    assert!(status.success(), "{why}: agentwire exited with {status}");
}

// ---------------------------------------------------------------------------------------------
// TCP
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn tcp_handshake() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client(port).await;
        sdk_scenarios::scenario_handshake(&client).await;
    })
    .await
}

#[tokio::test]
async fn tcp_plain_turn() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::scenario_plain_turn(&client).await;
    })
    .await
}

#[tokio::test]
async fn tcp_tool_turn() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::scenario_tool_turn(&client).await;
    })
    .await
}

#[tokio::test]
async fn tcp_streaming_turn() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::scenario_streaming(&client).await;
    })
    .await
}

#[tokio::test]
async fn tcp_list_and_metadata() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::scenario_list_and_metadata(&client).await;
    })
    .await
}

#[tokio::test]
async fn tcp_resume_from_second_client() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let a = tcp_client_connected(port).await;
        let b = tcp_client_connected(port).await;
        sdk_scenarios::scenario_resume_shared(&a, &b).await;
    })
    .await
}

#[tokio::test]
async fn tcp_detach_and_delete() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::scenario_detach_delete(&client).await;
    })
    .await
}

#[tokio::test]
async fn tcp_send_correlation_and_concurrent_sends() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::scenario_send_correlation(&client).await;
        sdk_scenarios::scenario_concurrent_sends(&client).await;
    })
    .await
}

#[tokio::test]
async fn tcp_permission_denied() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::scenario_permission_denied(&client).await;
    })
    .await
}

#[tokio::test]
async fn tcp_tool_on_joined_client() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let a = tcp_client_connected(port).await;
        let b = tcp_client_connected(port).await;
        sdk_scenarios::scenario_tool_on_joined_client(&a, &b).await;
    })
    .await
}

#[tokio::test]
async fn tcp_elicitation_and_command() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::scenario_elicitation(&client).await;
        sdk_scenarios::scenario_command(&client).await;
    })
    .await
}

#[tokio::test]
async fn tcp_elicitation_via_joined_client() {
    sdk_scenarios::bounded(async {
        let (_proc, port) = spawn_tcp(&[], &[]).await;
        let a = tcp_client_connected(port).await;
        let b = tcp_client_connected(port).await;
        sdk_scenarios::scenario_elicitation_via_joined_client(&a, &b).await;
    })
    .await
}

/// `session.abort` mid-turn, with the binary playing a scenario file (`--scenario FILE`).
#[tokio::test]
async fn tcp_abort_with_scenario_file() {
    sdk_scenarios::bounded(async {
        let path = std::env::temp_dir().join(format!(
            "agentwire-interop-slow-{}.json",
            std::process::id()
        ));
        std::fs::write(&path, sdk_scenarios::SLOW_SCENARIO).expect("write scenario file");
        let file = path.to_str().expect("utf-8 temp path").to_owned();
        let (_proc, port) = spawn_tcp(&["--scenario", &file], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::scenario_abort(&client).await;
        let _ = std::fs::remove_file(&path);
    })
    .await
}

/// `runtime.shutdown` (what `client.stop()` sends to a runtime the SDK owns) makes the server
/// answer and exit 0.
#[tokio::test]
async fn tcp_runtime_shutdown_exits() {
    sdk_scenarios::bounded(async {
        let (mut proc, port) = spawn_tcp(&[], &[]).await;
        let client = tcp_client_connected(port).await;
        sdk_scenarios::within("runtime.shutdown", client.rpc().runtime().shutdown())
            .await
            .expect("runtime.shutdown answers before the process exits");
        assert_exits_cleanly(&mut proc, "exit after runtime.shutdown").await;
    })
    .await
}

/// The SDK's `Transport::Tcp` spawn: `--server --port 0 --no-auto-update` with
/// `COPILOT_CONNECTION_TOKEN` in the environment. A client that does not present the token is
/// refused at `connect` with -32002 (AUTHENTICATION_FAILED), and `verify_protocol_version`
/// surfaces that error instead of falling back to `ping`.
#[tokio::test]
async fn tcp_token_required() {
    sdk_scenarios::bounded(async {
        let token = "0123456789abcdef0123456789abcdef";
        let mut proc = spawn(
            &["--server", "--port", "0", "--no-auto-update"],
            &[
                ("COPILOT_CONNECTION_TOKEN", token),
                ("COPILOT_RUNTIME_PROCESS_FILE_LOGGING", "1"),
            ],
            Stdio::null(),
        );
        let stdout = proc.child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(PORT_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line.split("listening on port ").nth(1) {
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    return digits.parse::<u16>().expect("port number");
                }
            }
            panic!("no port line");
        })
        .await
        .expect("port line within 10 s");
        let client = tcp_client(port).await;
        let err = sdk_scenarios::within("connect without token", client.verify_protocol_version())
            .await
            .expect_err("connect without the token must fail");
        assert_eq!(err.rpc_code(), Some(-32002), "AUTHENTICATION_FAILED: {err}");
        // Nothing else is allowed before a successful connect.
        let err = sdk_scenarios::within("ping before connect", client.ping(None))
            .await
            .expect_err("ping before a successful connect must fail");
        assert_eq!(
            err.rpc_code(),
            Some(-32001),
            "AUTHENTICATION_REQUIRED: {err}"
        );
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// stdio
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn stdio_handshake() {
    sdk_scenarios::bounded(async {
        let (_proc, client) = spawn_stdio();
        sdk_scenarios::scenario_handshake(&client).await;
    })
    .await
}

#[tokio::test]
async fn stdio_plain_turn() {
    sdk_scenarios::bounded(async {
        let (_proc, client) = spawn_stdio();
        sdk_scenarios::within("connect", client.verify_protocol_version())
            .await
            .expect("connect");
        sdk_scenarios::scenario_plain_turn(&client).await;
    })
    .await
}

#[tokio::test]
async fn stdio_tool_turn() {
    sdk_scenarios::bounded(async {
        let (_proc, client) = spawn_stdio();
        sdk_scenarios::within("connect", client.verify_protocol_version())
            .await
            .expect("connect");
        sdk_scenarios::scenario_tool_turn(&client).await;
    })
    .await
}

#[tokio::test]
async fn stdio_list_metadata_detach_delete() {
    sdk_scenarios::bounded(async {
        let (_proc, client) = spawn_stdio();
        sdk_scenarios::within("connect", client.verify_protocol_version())
            .await
            .expect("connect");
        sdk_scenarios::scenario_list_and_metadata(&client).await;
        sdk_scenarios::scenario_detach_delete(&client).await;
    })
    .await
}

#[tokio::test]
async fn stdio_elicitation_and_command() {
    sdk_scenarios::bounded(async {
        let (_proc, client) = spawn_stdio();
        sdk_scenarios::within("connect", client.verify_protocol_version())
            .await
            .expect("connect");
        sdk_scenarios::scenario_elicitation(&client).await;
        sdk_scenarios::scenario_command(&client).await;
        sdk_scenarios::scenario_send_correlation(&client).await;
    })
    .await
}

/// What `client.stop()` does to a stdio runtime it owns: detach sessions, `runtime.shutdown`,
/// then close stdin and wait for the exit. The server must answer and exit 0.
#[tokio::test]
async fn stdio_runtime_shutdown_exits() {
    sdk_scenarios::bounded(async {
        let (mut proc, client) = spawn_stdio();
        sdk_scenarios::within("connect", client.verify_protocol_version())
            .await
            .expect("connect");
        let id = sdk_scenarios::new_session_id();
        let c = sdk_scenarios::create_session(&client, &id, false).await;
        sdk_scenarios::turn(&c.session, "bye").await;
        sdk_scenarios::within("detach", c.session.disconnect())
            .await
            .expect("detach");
        sdk_scenarios::within("runtime.shutdown", client.rpc().runtime().shutdown())
            .await
            .expect("runtime.shutdown answers");
        assert_exits_cleanly(&mut proc, "exit after runtime.shutdown").await;
    })
    .await
}

/// Closing stdin (end of input) ends a stdio server with exit status 0.
#[tokio::test]
async fn stdio_eof_exits() {
    sdk_scenarios::bounded(async {
        let (mut proc, client) = spawn_stdio();
        sdk_scenarios::within("connect", client.verify_protocol_version())
            .await
            .expect("connect");
        client.force_stop(); // closes the SDK's side of the pipes, like a crashed host app
        drop(client);
        assert_exits_cleanly(&mut proc, "exit on stdin EOF").await;
    })
    .await
}
