//! Interop with the official ACP Rust SDK (`agent-client-protocol` 5.2) as the client, driving
//! the `agentwire --acp` binary over stdio.
//!
//! Every test spawns a fresh process. The SDK talks through a line tap that records every
//! line the agent writes (to check wire order and that stdout carries only compact JSON) and
//! lets a test inject raw lines into the agent's stdin.
//!
//! `session/load` is exercised within one process: loading a session from an earlier process
//! needs the durable session store, which is not in the binary yet.

use crate::support::acp_stdio;

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, FileSystemCapabilities,
    InitializeRequest, LoadSessionRequest, NewSessionRequest, PromptRequest, ReadTextFileRequest,
    ReadTextFileResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionNotification, SessionUpdate,
    StopReason, TextContent, ToolCallStatus,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, Client, Lines};
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const SCENARIO: &str = r#"{
  "rules": [
    {"match": "read file", "steps": [{"read_file": "{path}"}, {"say": "{result}"}]},
    {"match": "hook", "steps": [{"read_file": "hello.txt", "permission": "hook"},
                                {"say": "after the hook: {result}"}]},
    {"match": "slow", "steps": [{"say": "one two three"}, {"sleep_ms": 300}, {"say": "four"},
                                {"sleep_ms": 300}, {"say": "five"}, {"sleep_ms": 300},
                                {"say": "six"}]}
  ],
  "default": [{"say": "You said: {prompt}"}]
}"#;

const LIMIT: Duration = Duration::from_secs(30);

/// What the client saw through the SDK.
#[derive(Default)]
struct Seen {
    updates: Vec<SessionNotification>,
    permissions: Vec<RequestPermissionRequest>,
    reads: Vec<ReadTextFileRequest>,
}

/// How the client answers permission requests: an option id, or `None` for `cancelled`.
type Policy = Arc<Mutex<Option<&'static str>>>;

/// A spawned `agentwire --acp` and the tap on its stdio.
struct AgentProcess {
    /// The process (`None` for a second connection to another `AgentProcess`'s server).
    child: Option<tokio::process::Child>,
    /// Every line the agent wrote to stdout, in order.
    wire: Arc<Mutex<Vec<String>>>,
    /// Writes raw lines to the agent's stdin (shared with the SDK's outgoing lines).
    inject: mpsc::UnboundedSender<String>,
    transport: Option<Lines<OutSink, mpsc::UnboundedReceiver<io::Result<String>>>>,
    dir: PathBuf,
    /// Served on stdio (the process exits when its stdin ends); else on TCP.
    stdio: bool,
}

type OutSink =
    futures::sink::SinkMapErr<mpsc::UnboundedSender<String>, fn(mpsc::SendError) -> io::Error>;

fn closed(_: mpsc::SendError) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the agent's stdin is closed")
}

impl AgentProcess {
    /// A workspace directory with the scenario and two files, and the command spawning the
    /// agent on it.
    fn prepare(name: &str, extra: &[&str]) -> (PathBuf, tokio::process::Command) {
        let dir = std::env::temp_dir().join(format!("agentwire-acp-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let scenario = dir.join("scenario.json");
        std::fs::write(&scenario, SCENARIO).unwrap();
        std::fs::write(dir.join("hello.txt"), "Hello from the workspace!\n").unwrap();
        std::fs::write(dir.join("second.txt"), "Second file.\n").unwrap();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"));
        command.arg("--acp").args(extra);
        // In memory and with fixed ids unless the test says otherwise (a stored session must
        // not meet the same ids again in a second process).
        if !extra.contains(&"--data-dir") {
            command.arg("--no-store");
        }
        if !extra.contains(&"--seed") {
            command.arg("--seed").arg("7");
        }
        // A proxy (`--acp-agent`) runs its sessions on the agent it names, not on a scenario.
        if !extra.contains(&"--acp-agent") {
            command.arg("--scenario").arg(&scenario);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        (dir, command)
    }

    /// `agentwire --acp` on stdio.
    fn spawn(name: &str) -> AgentProcess {
        AgentProcess::spawn_with(name, &[])
    }

    /// `agentwire --acp EXTRA…` on stdio.
    fn spawn_with(name: &str, extra: &[&str]) -> AgentProcess {
        AgentProcess::spawn_with_env(name, extra, &[])
    }

    /// [`AgentProcess::spawn_with`] with extra environment variables.
    fn spawn_with_env(name: &str, extra: &[&str], env: &[(String, String)]) -> AgentProcess {
        let (dir, mut command) = AgentProcess::prepare(name, extra);
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = command.spawn().expect("spawn agentwire --acp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        AgentProcess::tap(Some(child), dir, stdout, stdin, true)
    }

    /// `agentwire --acp --port 0`, connected over TCP.
    async fn spawn_tcp(name: &str) -> AgentProcess {
        AgentProcess::spawn_tcp_with_env(name, &[], &[]).await.0
    }

    /// `agentwire --acp --port 0 EXTRA…` with extra environment variables, connected over
    /// TCP; and its port (for [`AgentProcess::connect_tcp`]).
    async fn spawn_tcp_with_env(
        name: &str,
        extra: &[&str],
        env: &[(String, String)],
    ) -> (AgentProcess, u16) {
        let mut args = vec!["--port", "0"];
        args.extend_from_slice(extra);
        let (dir, mut command) = AgentProcess::prepare(name, &args);
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = command.spawn().expect("spawn agentwire --acp --port 0");
        let stdout = child.stdout.take().unwrap();
        let mut first = String::new();
        BufReader::new(stdout).read_line(&mut first).await.unwrap();
        let port: u16 = first
            .trim()
            .strip_prefix("listening on port ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        let socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let (reader, writer) = socket.into_split();
        (
            AgentProcess::tap(Some(child), dir, reader, writer, false),
            port,
        )
    }

    /// Another connection to the server of `first` (on `port`).
    async fn connect_tcp(first: &AgentProcess, port: u16) -> AgentProcess {
        let socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let (reader, writer) = socket.into_split();
        AgentProcess::tap(None, first.dir.clone(), reader, writer, false)
    }

    /// Pumps lines between the agent's byte streams and the SDK, recording what it writes.
    fn tap(
        child: Option<tokio::process::Child>,
        dir: PathBuf,
        reader: impl tokio::io::AsyncRead + Unpin + Send + 'static,
        mut writer: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
        stdio: bool,
    ) -> AgentProcess {
        let (out_tx, mut out_rx) = mpsc::unbounded::<String>();
        tokio::spawn(async move {
            while let Some(line) = out_rx.next().await {
                let mut bytes = line.into_bytes();
                bytes.push(b'\n');
                if writer.write_all(&bytes).await.is_err() || writer.flush().await.is_err() {
                    break;
                }
            }
        });
        let wire = Arc::new(Mutex::new(Vec::new()));
        let (in_tx, in_rx) = mpsc::unbounded::<io::Result<String>>();
        tokio::spawn({
            let wire = wire.clone();
            async move {
                let mut lines = BufReader::new(reader).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    wire.lock().unwrap().push(line.clone());
                    if in_tx.unbounded_send(Ok(line)).is_err() {
                        break;
                    }
                }
            }
        });
        let sink: OutSink = out_tx.clone().sink_map_err(closed as fn(_) -> _);
        AgentProcess {
            child,
            wire,
            inject: out_tx,
            transport: Some(Lines::new(sink, in_rx)),
            dir,
            stdio,
        }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The agent's stdout so far, each line parsed.
    fn wire(&self) -> Vec<Value> {
        self.wire
            .lock()
            .unwrap()
            .iter()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// Every stdout line is one compact JSON-RPC 2.0 object.
    fn assert_strict_output(&self) {
        for line in self.wire.lock().unwrap().iter() {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
            assert!(value.is_object(), "not an object: {line}");
            assert_eq!(value["jsonrpc"], "2.0", "{line}");
            assert_eq!(
                serde_json::to_string(&value).unwrap(),
                *line,
                "not compact JSON"
            );
        }
    }

    async fn finish(mut self) {
        drop(self.inject);
        // A second connection leaves the process and its directory to the first.
        let Some(mut child) = self.child.take() else {
            return;
        };
        if self.stdio {
            // The end of stdin ends the process.
            let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            assert!(
                matches!(status, Ok(Ok(s)) if s.success()),
                "agentwire --acp exits 0 when stdin ends: {status:?}"
            );
        }
        let _ = child.kill().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Index (in wire order) of the response to our request with numeric or string id `id`.
fn response_index(wire: &[Value], id: &Value) -> usize {
    wire.iter()
        .position(|m| m.get("method").is_none() && &m["id"] == id)
        .unwrap_or_else(|| panic!("no response with id {id} on the wire"))
}

fn text(s: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(TextContent::new(s))]
}

fn caps() -> ClientCapabilities {
    ClientCapabilities::new().fs(FileSystemCapabilities::new()
        .read_text_file(true)
        .write_text_file(false))
}

/// Runs `main` as an SDK client of a fresh agent process whose permission requests are
/// answered with `policy` and whose `fs/read_text_file` requests read the real file.
async fn with_client<R: Send + 'static>(
    agent: &mut AgentProcess,
    seen: Arc<Mutex<Seen>>,
    policy: Policy,
    main: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<R, agent_client_protocol::Error>,
) -> R {
    let transport = agent.transport.take().unwrap();
    let on_update = seen.clone();
    let on_permission = seen.clone();
    let on_read = seen.clone();
    let run = Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                on_update.lock().unwrap().updates.push(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                on_permission
                    .lock()
                    .unwrap()
                    .permissions
                    .push(request.clone());
                let choice = *policy.lock().unwrap();
                let outcome = match choice {
                    Some(option) => {
                        assert!(
                            request
                                .options
                                .iter()
                                .any(|o| o.option_id.0.as_ref() == option),
                            "option {option} offered"
                        );
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option))
                    }
                    None => RequestPermissionOutcome::Cancelled,
                };
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx| {
                on_read.lock().unwrap().reads.push(request.clone());
                match std::fs::read_to_string(&request.path) {
                    Ok(content) => responder.respond(ReadTextFileResponse::new(content)),
                    Err(e) => responder.respond_with_internal_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, main);
    tokio::time::timeout(LIMIT, run)
        .await
        .expect("the client finished in time")
        .expect("the client ran without a protocol error")
}

async fn init_and_new(
    cx: &ConnectionTo<Agent>,
    cwd: &Path,
) -> Result<String, agent_client_protocol::Error> {
    let init = cx
        .send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps()))
        .block_task()
        .await?;
    assert_eq!(init.protocol_version, ProtocolVersion::V1);
    assert!(init.agent_capabilities.load_session);
    assert!(init.auth_methods.is_empty());
    let new = cx
        .send_request(NewSessionRequest::new(cwd.to_path_buf()))
        .block_task()
        .await?;
    Ok(new.session_id.0.to_string())
}

/// Waits until the SDK handed the client as many `session/update`s as the agent wrote.
async fn settle(agent_wire: &Arc<Mutex<Vec<String>>>, seen: &Arc<Mutex<Seen>>) {
    for _ in 0..200 {
        let on_wire = agent_wire
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("\"method\":\"session/update\""))
            .count();
        if seen.lock().unwrap().updates.len() == on_wire {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let on_wire = agent_wire.lock().unwrap().len();
    panic!(
        "the SDK delivered {} session/update(s); the agent wrote {on_wire} lines",
        seen.lock().unwrap().updates.len()
    );
}

/// How many `session/update`s the agent wrote after line `index`.
fn update_lines_after(wire: &[Value], index: usize) -> usize {
    wire[index + 1..]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .count()
}

#[tokio::test]
async fn a_prompt_reads_a_workspace_file_through_the_client() {
    reads_a_workspace_file("read", &[]).await;
}

#[tokio::test]
async fn the_same_on_the_smol_runtime() {
    reads_a_workspace_file("read-smol", &["--runtime", "smol"]).await;
}

#[tokio::test]
async fn the_same_on_the_async_std_runtime() {
    reads_a_workspace_file("read-async-std", &["--runtime", "async-std"]).await;
}

/// initialize → session/new → a prompt that reads a workspace file: the tool call is
/// announced, permission asked (allow once), the file read through `fs/read_text_file`, the
/// call completed and the content answered — every update before the prompt's response.
async fn reads_a_workspace_file(name: &str, extra: &[&str]) {
    let mut agent = AgentProcess::spawn_with(name, extra);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let cwd = agent.dir.clone();
    let wire = agent.wire.clone();
    let (session, stop) = with_client(&mut agent, seen.clone(), policy, async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        let response = cx
            .send_request(PromptRequest::new(
                session.clone(),
                text("Please read file hello.txt"),
            ))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        Ok((session, response.stop_reason))
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    {
        let seen = seen.lock().unwrap();
        // Permission: once, for the announced tool call, then the read of the real file.
        assert_eq!(seen.permissions.len(), 1);
        let asked = &seen.permissions[0];
        let tool_call_id = asked.tool_call.tool_call_id.clone();
        assert_eq!(seen.reads.len(), 1);
        assert_eq!(seen.reads[0].path, agent.path("hello.txt"));
        let mut announced = false;
        let mut completed = false;
        for n in &seen.updates {
            assert_eq!(n.session_id.0.as_ref(), session);
            match &n.update {
                SessionUpdate::ToolCall(call) => {
                    assert_eq!(call.tool_call_id, tool_call_id);
                    assert_eq!(
                        call.title,
                        format!("Read {}", agent.path("hello.txt").display())
                    );
                    announced = true;
                }
                SessionUpdate::ToolCallUpdate(update) => {
                    assert!(announced, "tool_call before its updates");
                    assert_eq!(update.tool_call_id, tool_call_id);
                    if update.fields.status == Some(ToolCallStatus::Completed) {
                        completed = true;
                    }
                }
                _ => {}
            }
        }
        assert!(
            announced && completed,
            "the tool call reached a terminal status"
        );
        assert_eq!(
            acp_stdio::agent_text(&seen.updates),
            "Hello from the workspace!\n"
        );
    }
    // On the wire: every update before the prompt's response, none after it.
    let wire = agent.wire();
    let prompt_response = wire
        .iter()
        .rposition(|m| m["result"]["stopReason"] == "end_turn")
        .expect("the prompt's response");
    assert_eq!(update_lines_after(&wire, prompt_response), 0);
    agent.assert_strict_output();
    agent.finish().await;
}

#[tokio::test]
async fn load_replays_the_history_before_its_response_then_prompts_work() {
    let mut agent = AgentProcess::spawn("load");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let cwd = agent.dir.clone();
    let wire = agent.wire.clone();
    let (before_load, stop) = with_client(&mut agent, seen.clone(), policy, async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        cx.send_request(PromptRequest::new(
            session.clone(),
            text("read file hello.txt"),
        ))
        .block_task()
        .await?;
        settle(&wire, &seen).await;
        let before_load = seen.lock().unwrap().updates.len();
        cx.send_request(LoadSessionRequest::new(session.clone(), cwd.clone()))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        let response = cx
            .send_request(PromptRequest::new(session.clone(), text("and a follow-up")))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        Ok((before_load, response.stop_reason))
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let wire = agent.wire();
    // The load's response is the first `{}` result after the first prompt's response; all
    // the replayed updates come before it.
    let first_turn_end = wire
        .iter()
        .position(|m| m["result"]["stopReason"] == "end_turn")
        .unwrap();
    let load_response = first_turn_end
        + 1
        + wire[first_turn_end + 1..]
            .iter()
            .position(|m| m.get("method").is_none() && m["result"]["modes"].is_object())
            .expect("the load response");
    let replayed: Vec<&Value> = wire[first_turn_end + 1..load_response]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .collect();
    let kinds: Vec<&str> = replayed
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[0], "user_message_chunk", "{kinds:?}");
    assert_eq!(replayed[0]["content"]["text"], "read file hello.txt");
    assert!(kinds.contains(&"tool_call"));
    let replayed_text: String = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(replayed_text, "Hello from the workspace!\n");
    {
        let seen = seen.lock().unwrap();
        assert!(seen.updates.len() > before_load + replayed.len());
        assert!(acp_stdio::agent_text(&seen.updates).ends_with("You said: and a follow-up"));
    }
    agent.assert_strict_output();
    agent.finish().await;
}

#[tokio::test]
async fn a_streaming_prompt_cancelled_midway_ends_cancelled() {
    let mut agent = AgentProcess::spawn("cancel");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let cwd = agent.dir.clone();
    let wire = agent.wire.clone();
    let stop = with_client(&mut agent, seen.clone(), policy, async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        let sent = cx.send_request(PromptRequest::new(session.clone(), text("slow please")));
        // Cancel once the first chunk arrived.
        for _ in 0..500 {
            if !seen.lock().unwrap().updates.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            !seen.lock().unwrap().updates.is_empty(),
            "streaming started"
        );
        cx.send_notification(CancelNotification::new(session.clone()))?;
        let response = sent.block_task().await?;
        settle(&wire, &seen).await;
        Ok(response.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::Cancelled);
    let text = acp_stdio::agent_text(&seen.lock().unwrap().updates);
    assert!(text.starts_with("one two three"), "{text}");
    assert!(!text.contains("six"), "the turn stopped: {text}");
    let wire = agent.wire();
    let response = wire
        .iter()
        .position(|m| m["result"]["stopReason"] == "cancelled")
        .expect("cancelled, not an error");
    assert_eq!(update_lines_after(&wire, response), 0);
    assert!(wire.iter().all(|m| m.get("error").is_none()));
    agent.assert_strict_output();
    agent.finish().await;
}

#[tokio::test]
async fn deny_and_allow_always() {
    let mut agent = AgentProcess::spawn("deny");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let policy: Policy = Arc::new(Mutex::new(Some("reject-once")));
    let cwd = agent.dir.clone();
    let wire = agent.wire.clone();
    let policy_for_test = policy.clone();
    with_client(&mut agent, seen.clone(), policy, async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        // Denied: the tool call fails, nothing is read, the turn still ends normally.
        let r = cx
            .send_request(PromptRequest::new(
                session.clone(),
                text("read file hello.txt"),
            ))
            .block_task()
            .await?;
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        settle(&wire, &seen).await;
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.permissions.len(), 1);
            assert!(seen.reads.is_empty());
            let failed = seen.updates.iter().any(|n| {
                matches!(&n.update, SessionUpdate::ToolCallUpdate(u)
                    if u.fields.status == Some(ToolCallStatus::Failed))
            });
            assert!(failed, "a denied tool call fails");
        }
        // Always allow: asked once, then the same kind of request is not asked again.
        *policy_for_test.lock().unwrap() = Some("allow-always");
        for file in ["hello.txt", "second.txt"] {
            let r = cx
                .send_request(PromptRequest::new(
                    session.clone(),
                    text(&format!("read file {file}")),
                ))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
        }
        settle(&wire, &seen).await;
        let seen = seen.lock().unwrap();
        assert_eq!(seen.permissions.len(), 2, "the second read was not asked");
        assert_eq!(seen.reads.len(), 2);
        assert!(acp_stdio::agent_text(&seen.updates).ends_with("Second file.\n"));
        Ok(())
    })
    .await;
    agent.assert_strict_output();
    agent.finish().await;
}

#[tokio::test]
async fn a_hook_prompt_is_denied_without_a_round_trip() {
    let mut agent = AgentProcess::spawn("hook");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let cwd = agent.dir.clone();
    let wire = agent.wire.clone();
    let stop = with_client(&mut agent, seen.clone(), policy, async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        let r = cx
            .send_request(PromptRequest::new(session.clone(), text("the hook one")))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        Ok(r.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    {
        let seen = seen.lock().unwrap();
        assert!(seen.permissions.is_empty(), "the client was not asked");
        assert!(seen.reads.is_empty());
        assert!(acp_stdio::agent_text(&seen.updates).starts_with("after the hook: "));
        assert!(!agent
            .wire()
            .iter()
            .any(|m| m["method"] == "session/request_permission"));
    }
    agent.assert_strict_output();
    agent.finish().await;
}

#[tokio::test]
async fn junk_unknown_methods_and_null_id_errors_never_break_the_session() {
    let mut agent = AgentProcess::spawn("junk");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let cwd = agent.dir.clone();
    let wire = agent.wire.clone();
    let inject = agent.inject.clone();
    let stop = with_client(&mut agent, seen.clone(), policy, async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        for line in [
            "this is not JSON",
            "",
            "[1,2]",
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
            r#"{"jsonrpc":"2.0","id":"raw-1","method":"_agentwire/unknown","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"_agentwire/notice","params":{}}"#,
        ] {
            inject.unbounded_send(line.to_owned()).unwrap();
        }
        let r = cx
            .send_request(PromptRequest::new(session.clone(), text("still there?")))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        Ok(r.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(
        acp_stdio::agent_text(&seen.lock().unwrap().updates),
        "You said: still there?"
    );
    let wire = agent.wire();
    let unknown = &wire[response_index(&wire, &Value::from("raw-1"))];
    assert_eq!(unknown["error"]["code"], -32601);
    let parse_errors = wire
        .iter()
        .filter(|m| m["id"].is_null() && m["error"]["code"] == -32700)
        .count();
    assert_eq!(parse_errors, 1, "one parse error for the one non-JSON line");
    agent.assert_strict_output();
    drop(inject);
    agent.finish().await;
}

#[tokio::test]
async fn acp_over_tcp_with_port() {
    let mut agent = AgentProcess::spawn_tcp("tcp").await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let cwd = agent.dir.clone();
    let wire = agent.wire.clone();
    let stop = with_client(&mut agent, seen.clone(), policy, async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        let r = cx
            .send_request(PromptRequest::new(session.clone(), text("over tcp")))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        Ok(r.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(
        acp_stdio::agent_text(&seen.lock().unwrap().updates),
        "You said: over tcp"
    );
    agent.assert_strict_output();
    agent.finish().await;
}

#[tokio::test]
async fn a_fresh_process_loads_a_stored_session_then_prompts_work() {
    let data = std::env::temp_dir().join(format!("agentwire-acp-data-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let data_arg = data.to_str().unwrap().to_owned();
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));

    // First process: a turn that reads a workspace file, then the process exits.
    let mut first =
        AgentProcess::spawn_with("persist-1", &["--data-dir", &data_arg, "--seed", "1"]);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = first.dir.clone();
    let wire = first.wire.clone();
    let session = with_client(&mut first, seen.clone(), policy.clone(), async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        cx.send_request(PromptRequest::new(
            session.clone(),
            text("read file hello.txt"),
        ))
        .block_task()
        .await?;
        settle(&wire, &seen).await;
        Ok(session)
    })
    .await;
    first.finish().await;

    // A fresh process on the same data directory loads it.
    let mut second =
        AgentProcess::spawn_with("persist-2", &["--data-dir", &data_arg, "--seed", "2"]);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = second.dir.clone();
    let wire = second.wire.clone();
    let loaded = session.clone();
    let stop = with_client(&mut second, seen.clone(), policy, async |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps()))
            .block_task()
            .await?;
        cx.send_request(LoadSessionRequest::new(loaded.clone(), cwd.clone()))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        let response = cx
            .send_request(PromptRequest::new(loaded.clone(), text("and a follow-up")))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        Ok(response.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let wire = second.wire();
    let load_response = wire
        .iter()
        .position(|m| m.get("method").is_none() && m["result"]["modes"].is_object())
        .expect("the load response");
    let replayed: Vec<&Value> = wire[..load_response]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .collect();
    assert_eq!(
        replayed[0]["sessionUpdate"], "user_message_chunk",
        "{replayed:?}"
    );
    assert_eq!(replayed[0]["content"]["text"], "read file hello.txt");
    let replayed_text: String = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(replayed_text, "Hello from the workspace!\n");
    assert!(
        acp_stdio::agent_text(&seen.lock().unwrap().updates).ends_with("You said: and a follow-up")
    );
    second.assert_strict_output();
    second.finish().await;
    let _ = std::fs::remove_dir_all(&data);
}

/// `agentwire --acp --acp-agent "agentwire --acp …"`: agentwire as an ACP proxy between the
/// official ACP SDK (the editor) and a second agentwire process (the agent). The editor's
/// prompt reaches the agent, the agent's permission request reaches the editor through the
/// proxy's permission path, and the agent's answer streams back.
#[tokio::test]
async fn an_editor_through_agentwire_as_an_acp_proxy() {
    let name = "proxy";
    let dir = std::env::temp_dir().join(format!("agentwire-acp-{}-{name}", std::process::id()));
    let agent_command = format!(
        "'{}' --acp --no-store --scenario '{}'",
        env!("CARGO_BIN_EXE_agentwire"),
        dir.join("scenario.json").display()
    );
    let mut agent = AgentProcess::spawn_with(name, &["--acp-agent", agent_command.as_str()]);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let cwd = agent.dir.clone();
    let wire = agent.wire.clone();
    let (first, second) = with_client(&mut agent, seen.clone(), policy, async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        let first = cx
            .send_request(PromptRequest::new(
                session.clone(),
                text("read file hello.txt"),
            ))
            .block_task()
            .await?;
        let second = cx
            .send_request(PromptRequest::new(session.clone(), text("hello proxy")))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        Ok((first.stop_reason, second.stop_reason))
    })
    .await;
    assert_eq!((first, second), (StopReason::EndTurn, StopReason::EndTurn));
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.permissions.len(), 1, "the agent's read was asked once");
        let asked = &seen.permissions[0];
        let announced: Vec<_> = seen
            .updates
            .iter()
            .filter_map(|n| match &n.update {
                SessionUpdate::ToolCall(call) => Some(call.tool_call_id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            announced,
            std::slice::from_ref(&asked.tool_call.tool_call_id)
        );
        assert!(acp_stdio::agent_text(&seen.updates).ends_with("You said: hello proxy"));
    }
    agent.assert_strict_output();
    agent.finish().await;
}

/// The official Copilot CLI (`copilot --acp --stdio`, offline on the fake model) behind
/// `agentwire --acp --acp-agent`, with the official ACP SDK as the editor: the CLI views a
/// file and runs a command (asked of the editor first), its answer streams to the editor, and
/// the editor's `session/cancel` ends a turn stalled on the model as cancelled.
#[tokio::test]
async fn an_editor_on_the_copilot_cli_through_agentwire() {
    use crate::support::copilot_cli::{copilot_cli, offline_env};
    let _exclusive = crate::support::exclusive().await;
    use crate::support::fake_model::{FakeMode, FakeModel, FakeReply};
    let files = tempfile::tempdir().unwrap();
    let notes = files.path().join("notes.txt");
    std::fs::write(&notes, "the notes say: editor-notes-7\n").unwrap();
    let fake = FakeModel::start_script(vec![
        FakeReply::tool(
            "call_1",
            "view",
            serde_json::json!({"path": notes.display().to_string()}),
        ),
        FakeReply::tool(
            "call_2",
            "bash",
            serde_json::json!({"command": "echo editor-was-here", "description": "Say hi"}),
        ),
        FakeReply::Text("The command said hi.".into()),
    ]);
    let home = tempfile::tempdir().unwrap();
    let agent_command = format!("'{}' --acp --stdio", copilot_cli().display());
    let env = offline_env(&fake.base_url(), "fake-model", home.path());
    let mut agent =
        AgentProcess::spawn_with_env("copilot", &["--acp-agent", agent_command.as_str()], &env);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let cwd = agent.dir.clone();
    let wire = agent.wire.clone();
    let fake_for_cancel = &fake;
    let (first, cancelled) = with_client(&mut agent, seen.clone(), policy, async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        let response = cx
            .send_request(PromptRequest::new(
                session.clone(),
                text("Read my notes, then run a command"),
            ))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        // The model now sends its first delta and then nothing: the turn runs until the
        // editor cancels it.
        fake_for_cancel.set_mode(FakeMode::Stall);
        let calls = fake_for_cancel.completion_bodies().len();
        let sent = cx.send_request(PromptRequest::new(session.clone(), text("A long story")));
        for _ in 0..200 {
            if fake_for_cancel.completion_bodies().len() > calls {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        cx.send_notification(CancelNotification::new(session.clone()))?;
        let cancelled = sent.block_task().await?;
        settle(&wire, &seen).await;
        Ok((response.stop_reason, cancelled.stop_reason))
    })
    .await;
    assert_eq!(first, StopReason::EndTurn);
    assert_eq!(cancelled, StopReason::Cancelled);
    {
        let seen = seen.lock().unwrap();
        assert!(
            !seen.permissions.is_empty(),
            "the CLI's command was asked of the editor"
        );
        let text = acp_stdio::agent_text(&seen.updates);
        assert!(text.contains("The command said hi."), "{text}");
        let tool_calls = seen
            .updates
            .iter()
            .filter(|n| matches!(n.update, SessionUpdate::ToolCall(_)))
            .count();
        assert!(tool_calls >= 2, "the view and the command were announced");
    }
    let bodies: Vec<String> = fake
        .completion_bodies()
        .iter()
        .map(|b| b.to_string())
        .collect();
    assert!(
        bodies.len() >= 4,
        "three calls for the first turn, one stalled: {}",
        bodies.len()
    );
    assert!(
        bodies[1].contains("editor-notes-7"),
        "the view result reached the model"
    );
    assert!(bodies[2].contains("editor-was-here"), "the command ran");
    agent.finish().await;
}

/// `agentwire --acp --data-dir D --acp-agent …` keeps the log the agent does not: after a
/// restart, with an agent that forgot everything (no store), the editor's `session/load`
/// replays the session from the proxy's log and the next prompt runs on a new agent session.
#[tokio::test]
async fn the_proxy_loads_a_session_its_agent_forgot() {
    let data =
        std::env::temp_dir().join(format!("agentwire-acp-proxy-data-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let data_arg = data.to_str().unwrap().to_owned();
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let agent_command = |name: &str| {
        let dir = std::env::temp_dir().join(format!("agentwire-acp-{}-{name}", std::process::id()));
        format!(
            "'{}' --acp --no-store --scenario '{}'",
            env!("CARGO_BIN_EXE_agentwire"),
            dir.join("scenario.json").display()
        )
    };

    let first_agent = agent_command("proxy-load-1");
    let mut first = AgentProcess::spawn_with(
        "proxy-load-1",
        &["--data-dir", &data_arg, "--acp-agent", first_agent.as_str()],
    );
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = first.dir.clone();
    let wire = first.wire.clone();
    let session = with_client(&mut first, seen.clone(), policy.clone(), async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        cx.send_request(PromptRequest::new(session.clone(), text("remember this")))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        Ok(session)
    })
    .await;
    first.finish().await;

    let second_agent = agent_command("proxy-load-2");
    let mut second = AgentProcess::spawn_with(
        "proxy-load-2",
        &[
            "--data-dir",
            &data_arg,
            "--acp-agent",
            second_agent.as_str(),
        ],
    );
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = second.dir.clone();
    let wire = second.wire.clone();
    let loaded = session.clone();
    let stop = with_client(&mut second, seen.clone(), policy, async |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps()))
            .block_task()
            .await?;
        cx.send_request(LoadSessionRequest::new(loaded.clone(), cwd.clone()))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        let response = cx
            .send_request(PromptRequest::new(loaded.clone(), text("and now")))
            .block_task()
            .await?;
        settle(&wire, &seen).await;
        Ok(response.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let wire = second.wire();
    let load_response = wire
        .iter()
        .position(|m| m.get("method").is_none() && m["result"]["modes"].is_object())
        .expect("the load response");
    let replayed: Vec<&Value> = wire[..load_response]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .collect();
    assert!(
        replayed
            .iter()
            .any(|u| u["sessionUpdate"] == "user_message_chunk"
                && u["content"]["text"] == "remember this"),
        "the proxy replayed its log: {replayed:?}"
    );
    let text = acp_stdio::agent_text(&seen.lock().unwrap().updates);
    assert!(
        text.ends_with("You said: and now"),
        "the new agent session answered: {text}"
    );
    second.finish().await;
    let _ = std::fs::remove_dir_all(&data);
}

/// Two editors (the official ACP SDK, over TCP) on one session of the Copilot CLI through
/// `agentwire --acp --port 0 --acp-agent`: the second loads the session the first created,
/// and the first's turn (a command the editors allowed, then the answer) streams to both.
#[tokio::test]
async fn two_editors_share_a_copilot_cli_session_through_agentwire() {
    use crate::support::copilot_cli::{copilot_cli, offline_env};
    use crate::support::fake_model::{FakeModel, FakeReply};
    let _exclusive = crate::support::exclusive().await;
    let fake = FakeModel::start_script(vec![
        FakeReply::tool(
            "call_1",
            "bash",
            serde_json::json!({"command": "echo shared-was-here", "description": "Say hi"}),
        ),
        FakeReply::Text("The command said hi.".into()),
    ]);
    let home = tempfile::tempdir().unwrap();
    let agent_command = format!("'{}' --acp --stdio", copilot_cli().display());
    let env = offline_env(&fake.base_url(), "fake-model", home.path());
    let (mut a, port) = AgentProcess::spawn_tcp_with_env(
        "copilot-two",
        &["--acp-agent", agent_command.as_str()],
        &env,
    )
    .await;
    let mut b = AgentProcess::connect_tcp(&a, port).await;
    let policy: Policy = Arc::new(Mutex::new(Some("allow-once")));
    let (seen_a, seen_b) = (
        Arc::new(Mutex::new(Seen::default())),
        Arc::new(Mutex::new(Seen::default())),
    );
    let (session_tx, session_rx) = tokio::sync::oneshot::channel();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
    let cwd = a.dir.clone();
    let (wire_a, seen_a2, seen_b2) = (a.wire.clone(), seen_a.clone(), seen_b.clone());
    let first = with_client(&mut a, seen_a.clone(), policy.clone(), async |cx| {
        let session = init_and_new(&cx, &cwd).await?;
        let _ = session_tx.send(session.clone());
        let _ = ready_rx.await;
        let response = cx
            .send_request(PromptRequest::new(session.clone(), text("Run a command")))
            .block_task()
            .await?;
        settle(&wire_a, &seen_a2).await;
        Ok(response.stop_reason)
    });
    let cwd_b = b.dir.clone();
    let second = with_client(&mut b, seen_b.clone(), policy, async |cx| {
        let session = session_rx.await.expect("the first editor's session");
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps()))
            .block_task()
            .await?;
        cx.send_request(LoadSessionRequest::new(session, cwd_b))
            .block_task()
            .await?;
        let _ = ready_tx.send(());
        for _ in 0..600 {
            if acp_stdio::agent_text(&seen_b2.lock().unwrap().updates)
                .contains("The command said hi.")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    });
    let (stop, ()) = tokio::join!(first, second);
    assert_eq!(stop, StopReason::EndTurn);
    let text_a = acp_stdio::agent_text(&seen_a.lock().unwrap().updates);
    let text_b = acp_stdio::agent_text(&seen_b.lock().unwrap().updates);
    assert!(text_a.ends_with("The command said hi."), "{text_a}");
    assert!(
        text_b.ends_with("The command said hi."),
        "the second editor saw it: {text_b}"
    );
    let tool_calls = |seen: &Arc<Mutex<Seen>>| {
        seen.lock()
            .unwrap()
            .updates
            .iter()
            .filter(|n| matches!(n.update, SessionUpdate::ToolCall(_)))
            .count()
    };
    assert!(
        tool_calls(&seen_b) >= 1,
        "the command's tool call reached the second editor"
    );
    let asked = seen_a.lock().unwrap().permissions.len() + seen_b.lock().unwrap().permissions.len();
    assert!(asked >= 1, "the command was asked of the editors");
    let last = fake
        .completion_bodies()
        .last()
        .expect("model calls")
        .to_string();
    assert!(last.contains("shared-was-here"), "the command ran");
    b.finish().await;
    a.finish().await;
}
