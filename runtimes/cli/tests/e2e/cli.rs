//! Tests of the `agentwire` binary as the Copilot SDKs spawn it: flags, the port line,
//! stdio framing, exit codes.

use crate::support::wire as common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{assert_pong, frame, ping, ping_ok, FrameReader, PROMPT};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("COPILOT_CONNECTION_TOKEN")
        .env_remove("RUST_LOG")
        // The default session store is $COPILOT_HOME/session-state: never the real home.
        // These tests create no session, so nothing is written there.
        .env(
            "COPILOT_HOME",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/cli-copilot-home"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Spawns a TCP-mode server and returns it with the port it announced.
async fn spawn_tcp(mut cmd: Command) -> (Child, u16) {
    let mut child = cmd.spawn().expect("spawn agentwire");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    tokio::time::timeout(PROMPT, BufReader::new(stdout).read_line(&mut line))
        .await
        .expect("port line within the timeout")
        .expect("read stdout");
    let port = line
        .strip_suffix('\n')
        .and_then(|l| l.strip_prefix("listening on port "))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("expected `listening on port N`, got {line:?}"));
    assert_ne!(port, 0);
    (child, port)
}

async fn connect(
    port: u16,
) -> (
    FrameReader<tokio::net::tcp::OwnedReadHalf>,
    tokio::net::tcp::OwnedWriteHalf,
) {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let (r, w) = stream.into_split();
    (FrameReader::new(r), w)
}

async fn exit_code(child: &mut Child) -> i32 {
    let status = tokio::time::timeout(PROMPT, child.wait())
        .await
        .expect("process exits within the timeout")
        .expect("wait");
    status.code().expect("exit code")
}

#[tokio::test]
async fn tcp_port_zero_announces_port_and_answers_ping() {
    let (_child, port) = spawn_tcp(command(&[
        "--headless",
        "--no-auto-update",
        "--log-level",
        "debug",
        "--port",
        "0",
    ]))
    .await;
    let (mut r, mut w) = connect(port).await;
    ping_ok(&mut r, &mut w, 1).await;
    // Request ids are echoed as sent, strings included.
    w.write_all(&frame(
        &json!({"jsonrpc":"2.0","id":"a-b","method":"ping","params":{"message":"hi"}}),
    ))
    .await
    .unwrap();
    let resp = r.expect().await;
    assert_eq!(resp["id"], "a-b");
    assert_pong(&resp);
}

#[tokio::test]
async fn no_flags_serves_tcp_with_defaults() {
    let (_child, port) = spawn_tcp(command(&[])).await;
    let (mut r, mut w) = connect(port).await;
    ping_ok(&mut r, &mut w, 1).await;
}

#[tokio::test]
async fn explicit_host_and_server_flag() {
    let (_child, port) =
        spawn_tcp(command(&["--server", "--host", "127.0.0.1", "--port", "0"])).await;
    let (mut r, mut w) = connect(port).await;
    ping_ok(&mut r, &mut w, 9).await;
}

#[tokio::test]
async fn stdio_answers_ping_and_exits_zero_at_end_of_input() {
    // The argument order the Node SDK uses (user args first).
    let mut child = command(&[
        "--no-auto-login",
        "--headless",
        "--no-auto-update",
        "--log-level",
        "info",
        "--stdio",
    ])
    .stdin(Stdio::piped())
    .spawn()
    .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();

    stdin.write_all(&ping(1, None)).await.unwrap();
    stdin.flush().await.unwrap();
    // Read exactly one frame's worth: check the bytes themselves, not just the JSON.
    let mut reader = FrameReader::new(&mut stdout);
    let resp = reader.expect().await;
    assert_eq!(resp["id"], 1);
    assert_pong(&resp);
    drop(reader);

    stdin.write_all(&ping(2, Some("again"))).await.unwrap();
    drop(stdin); // end of input: the queued response is still written, then exit 0
    let mut rest = Vec::new();
    tokio::time::timeout(PROMPT, stdout.read_to_end(&mut rest))
        .await
        .expect("stdout closes")
        .unwrap();
    let text = String::from_utf8(rest).expect("utf-8");
    assert!(
        text.starts_with("Content-Length: "),
        "stdout carries only frames: {text:?}"
    );
    let mut frames = FrameReader::new(text.as_bytes());
    let resp = frames.expect().await;
    assert_eq!(resp["id"], 2);
    assert_eq!(resp["result"]["message"], "pong: again");
    assert!(
        frames.next().await.unwrap().is_none(),
        "nothing else on stdout"
    );
    assert_eq!(exit_code(&mut child).await, 0);
}

#[tokio::test]
async fn runtime_shutdown_exits_zero() {
    let (mut child, port) = spawn_tcp(command(&["--headless", "--port", "0"])).await;
    let (mut r, mut w) = connect(port).await;
    ping_ok(&mut r, &mut w, 1).await;
    w.write_all(&frame(
        &json!({"jsonrpc":"2.0","id":2,"method":"runtime.shutdown","params":{}}),
    ))
    .await
    .unwrap();
    let resp = r.response(2).await;
    assert!(resp.get("result").is_some(), "{resp}");
    assert_eq!(exit_code(&mut child).await, 0);
}

#[tokio::test]
async fn stdio_runtime_shutdown_exits_zero_with_stdin_open() {
    let mut child = command(&["--headless", "--stdio"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    stdin
        .write_all(&frame(
            &json!({"jsonrpc":"2.0","id":7,"method":"runtime.shutdown","params":{}}),
        ))
        .await
        .unwrap();
    let mut reader = FrameReader::new(stdout);
    let resp = reader.response(7).await;
    assert!(resp.get("result").is_some(), "{resp}");
    // stdin stays open: the process must not wait for it.
    assert_eq!(exit_code(&mut child).await, 0);
    drop(stdin);
}

#[tokio::test]
async fn connection_token_from_environment_is_required() {
    let mut cmd = command(&["--headless", "--port", "0"]);
    cmd.env("COPILOT_CONNECTION_TOKEN", "s3cret");
    let (_child, port) = spawn_tcp(cmd).await;
    let (mut r, mut w) = connect(port).await;
    w.write_all(&ping(1, None)).await.unwrap();
    let resp = r.response(1).await;
    assert!(
        resp.get("error").is_some() && resp.get("result").is_none(),
        "ping before connect must be refused when a token is configured: {resp}"
    );
    w.write_all(&frame(
        &json!({"jsonrpc":"2.0","id":2,"method":"connect","params":{"token":"s3cret"}}),
    ))
    .await
    .unwrap();
    let resp = r.response(2).await;
    assert_eq!(resp["result"]["protocolVersion"], 3, "{resp}");
    ping_ok(&mut r, &mut w, 3).await;
}

async fn usage_error(args: &[&str], expected: &str) {
    let output = tokio::time::timeout(PROMPT, command(args).output())
        .await
        .expect("exits")
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: stderr {stderr}");
    assert!(
        stderr.contains(expected),
        "{args:?}: stderr should contain {expected:?}, got {stderr:?}"
    );
    assert!(output.stdout.is_empty(), "nothing on stdout");
}

#[tokio::test]
async fn stdio_with_port_or_host_is_an_error() {
    usage_error(
        &["--stdio", "--port", "1"],
        "--stdio cannot be combined with --port",
    )
    .await;
    usage_error(
        &["--headless", "--stdio", "--host", "127.0.0.1"],
        "--stdio cannot be combined with --host",
    )
    .await;
}

#[tokio::test]
async fn bad_scenario_file_is_named_in_the_error() {
    let dir = std::env::temp_dir().join(format!("agentwire-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad-scenario.json");
    std::fs::write(&bad, "{ this is not json").unwrap();
    let bad = bad.to_str().unwrap();
    usage_error(&["--scenario", bad], "bad-scenario.json").await;
    usage_error(&["--scenario", bad], "invalid scenario file").await;
    let missing = dir.join("missing.json");
    usage_error(
        &["--scenario", missing.to_str().unwrap()],
        "cannot read scenario file",
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_bad_nats_credentials_file_is_named_in_the_error() {
    let dir = std::env::temp_dir().join(format!("agentwire-cli-creds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cluster = |creds: &str| {
        [
            "--headless",
            "--port",
            "0",
            "--cluster",
            "nats://127.0.0.1:1",
            "--node-id",
            "n1",
            "--cluster-creds",
            creds,
        ]
        .map(str::to_owned)
    };
    let missing = dir.join("missing.creds");
    let args = cluster(missing.to_str().unwrap());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&args, "cannot read NATS credentials file").await;
    usage_error(&args, "missing.creds").await;

    let garbage = dir.join("garbage.creds");
    std::fs::write(&garbage, "not a user JWT\nnor an nkey seed\n").unwrap();
    let args = cluster(garbage.to_str().unwrap());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&args, "invalid NATS credentials file").await;
    usage_error(&args, "garbage.creds").await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn unknown_flag_is_rejected() {
    usage_error(&["--no-such-flag"], "--no-such-flag").await;
}

#[tokio::test]
async fn ignored_sdk_flags_are_accepted() {
    let (_child, port) = spawn_tcp(command(&[
        "--headless",
        "--no-auto-update",
        "--log-level",
        "all",
        "--port",
        "0",
        "--auth-token-env",
        "COPILOT_SDK_AUTH_TOKEN",
        "--no-auto-login",
        "--session-idle-timeout",
        "30",
        "--remote",
        "--seed",
        "42",
    ]))
    .await;
    let (mut r, mut w) = connect(port).await;
    ping_ok(&mut r, &mut w, 1).await;
}

/// One TCP client floods the server with pings whose responses are large and never reads
/// them (with a tiny receive buffer), so the server's writer for it blocks. Another client's
/// pings must still complete promptly.
#[tokio::test]
async fn slow_tcp_reader_does_not_stall_other_clients() {
    let (_child, port) = spawn_tcp(command(&["--headless", "--port", "0"])).await;

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stalled = socket
        .connect(([127, 0, 0, 1], port).into())
        .await
        .expect("connect stalled client");
    let (_stalled_r, mut stalled_w) = stalled.into_split();
    let big = "x".repeat(16 * 1024);
    let flood = tokio::spawn(async move {
        // ~8 MiB of responses if the message is echoed; the client never reads them.
        for id in 0..512u64 {
            if stalled_w.write_all(&ping(id, Some(&big))).await.is_err() {
                break; // the host may close it for exceeding its outbox budget
            }
        }
        stalled_w
    });
    tokio::time::sleep(Duration::from_millis(200)).await;

    let (mut r, mut w) = connect(port).await;
    for id in 0..50 {
        let started = Instant::now();
        ping_ok(&mut r, &mut w, 10_000 + id).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "ping {id} took {:?} while another client was stalled",
            started.elapsed()
        );
    }
    flood.abort();
}

/// The binary: the stdio client (the process owner) runs shell commands (TCP clients need
/// `--allow-shell` or the token: `host_copilot`); MCP Apps from `COPILOT_MCP_APPS=true`.
#[test]
fn the_binary_gates_shell_and_mcp_apps() {
    use std::io::{BufReader, Read, Write};
    use std::process::{Command, Stdio};
    let frame = |v: Value| {
        let body = serde_json::to_vec(&v).unwrap();
        let mut f = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        f.extend_from_slice(&body);
        f
    };
    let run = |args: &[&str], mcp_env: bool| -> String {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwire"));
        cmd.args(["--stdio", "--no-store"]).args(args);
        cmd.env_remove("COPILOT_MCP_APPS");
        if mcp_env {
            cmd.env("COPILOT_MCP_APPS", "true");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&frame(json!({"jsonrpc":"2.0","id":1,"method":"session.create","params":{"sessionId":"s","requestMcpApps":true}}))).unwrap();
        stdin.write_all(&frame(json!({"jsonrpc":"2.0","id":2,"method":"session.shell.exec","params":{"sessionId":"s","command":"true"}}))).unwrap();
        stdin
            .write_all(&frame(
                json!({"jsonrpc":"2.0","id":3,"method":"runtime.shutdown","params":{}}),
            ))
            .unwrap();
        let mut out = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_to_string(&mut out)
            .unwrap();
        drop(stdin);
        let _ = child.wait();
        out
    };
    let plain = run(&[], false);
    assert!(plain.contains(r#""processId":"proc-"#), "{plain}");
    assert!(!plain.contains("--allow-shell"), "{plain}");
    assert!(plain.contains(r#""mcpApps":false"#), "{plain}");
    let enabled = run(&["--allow-shell", "--mcp-apps"], false);
    assert!(enabled.contains(r#""processId":"proc-"#), "{enabled}");
    assert!(enabled.contains(r#""mcpApps":true"#), "{enabled}");
    let from_env = run(&[], true);
    assert!(from_env.contains(r#""mcpApps":true"#), "{from_env}");
}

/// Runs one client-tool turn ("weather") against a server started with `flags` and returns
/// the event types the client saw, answering the tool call and any permission prompt.
async fn weather_turn_event_types(flags: &[&str]) -> Vec<String> {
    let mut args = vec!["--port", "0", "--no-store"];
    args.extend_from_slice(flags);
    let (_child, port) = spawn_tcp(command(&args)).await;
    let (mut r, mut w) = connect(port).await;
    let tools = json!([{"name":"get_weather","description":"Get weather for a city",
        "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]);
    let create = json!({"jsonrpc":"2.0","id":1,"method":"session.create",
        "params":{"sessionId":"yolo","requestPermission":true,"tools":tools}});
    w.write_all(&frame(&create)).await.unwrap();
    assert!(
        r.response(1).await.get("result").is_some(),
        "session created"
    );
    let send = json!({"jsonrpc":"2.0","id":2,"method":"session.send",
        "params":{"sessionId":"yolo","prompt":"weather please"}});
    w.write_all(&frame(&send)).await.unwrap();
    let mut types = Vec::new();
    let mut next_id = 10;
    loop {
        let msg = r.expect().await;
        if msg["method"] != "session.event" {
            continue;
        }
        let event = &msg["params"]["event"];
        let ty = event["type"].as_str().unwrap_or_default().to_owned();
        let answer = match ty.as_str() {
            "permission.requested" => Some((
                "session.permissions.handlePendingPermissionRequest",
                json!({"sessionId":"yolo","requestId":event["data"]["requestId"],
                       "result":{"kind":"approve-once"}}),
            )),
            "external_tool.requested" => Some((
                "session.tools.handlePendingToolCall",
                json!({"sessionId":"yolo","requestId":event["data"]["requestId"],"result":"sunny"}),
            )),
            _ => None,
        };
        if let Some((method, params)) = answer {
            next_id += 1;
            let req = json!({"jsonrpc":"2.0","id":next_id,"method":method,"params":params});
            w.write_all(&frame(&req)).await.unwrap();
        }
        let done = ty == "session.idle";
        types.push(ty);
        if done {
            return types;
        }
    }
}

/// `--yolo` approves every permission prompt without asking: the client tool runs and no
/// `permission.*` event is emitted; without it the same turn asks first.
#[tokio::test]
async fn yolo_runs_tools_without_permission_prompts() {
    let asked = weather_turn_event_types(&[]).await;
    assert!(
        asked.contains(&"permission.requested".to_owned()),
        "{asked:?}"
    );
    let yolo = weather_turn_event_types(&["--yolo"]).await;
    assert!(
        yolo.contains(&"external_tool.requested".to_owned()),
        "{yolo:?}"
    );
    assert!(
        !yolo.iter().any(|t| t.starts_with("permission.")),
        "no permission events with --yolo: {yolo:?}"
    );
    assert!(
        yolo.contains(&"tool.execution_complete".to_owned()),
        "{yolo:?}"
    );
}
