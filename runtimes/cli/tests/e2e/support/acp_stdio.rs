//! The official ACP SDK's line transport over the stdin and stdout of a spawned
//! `agentwire --acp` (one JSON-RPC message per line, as the ACP dialect frames them), and
//! what tests read from the updates it delivers.
#![allow(dead_code)]

use std::io;
use std::path::Path;
use std::process::Stdio;

use agent_client_protocol::v1::schema::{ContentBlock, SessionNotification, SessionUpdate};
use agent_client_protocol::Lines;
use futures::channel::mpsc;
use futures::sink::SinkMapErr;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// What [`lines`] returns: the SDK's transport over the child's pipes.
pub type StdioLines = Lines<
    SinkMapErr<mpsc::UnboundedSender<String>, fn(mpsc::SendError) -> io::Error>,
    mpsc::UnboundedReceiver<io::Result<String>>,
>;

fn closed(_: mpsc::SendError) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the agent's stdin is closed")
}

/// Takes `child`'s stdin and stdout (both must be piped) and connects them to the SDK: each
/// line the client sends is written and flushed, each line the agent writes is read.
pub fn lines(child: &mut tokio::process::Child) -> StdioLines {
    lines_recorded(child, None)
}

/// [`lines`], and each line the agent writes is also pushed to `record` (when given).
pub fn lines_recorded(
    child: &mut tokio::process::Child,
    record: Option<std::sync::Arc<std::sync::Mutex<Vec<String>>>>,
) -> StdioLines {
    let mut writer = child.stdin.take().expect("the agent's stdin is piped");
    let reader = child.stdout.take().expect("the agent's stdout is piped");
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
    let (in_tx, in_rx) = mpsc::unbounded::<io::Result<String>>();
    tokio::spawn(async move {
        let mut lines = BufReader::new(reader).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(record) = &record {
                record.lock().unwrap().push(line.clone());
            }
            if in_tx.unbounded_send(Ok(line)).is_err() {
                break;
            }
        }
    });
    Lines::new(out_tx.sink_map_err(closed as fn(_) -> _), in_rx)
}

/// Spawns `agentwire --acp --no-store --seed 7` in `dir`, running the scripted agent of
/// `scenario` (written to `dir/scenario.json`), with stdin and stdout piped for [`lines`].
#[allow(dead_code)]
pub fn spawn_scripted(dir: &Path, scenario: &str) -> tokio::process::Child {
    let path = dir.join("scenario.json");
    std::fs::write(&path, scenario).expect("write the scenario");
    tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .args(["--acp", "--no-store", "--seed", "7", "--scenario"])
        .arg(&path)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agentwire --acp")
}

/// The text of the agent message chunks among `updates`, in order.
pub fn agent_text(updates: &[SessionNotification]) -> String {
    chunk_text(updates, false)
}

/// The text of the user message chunks among `updates` (a loaded session's replayed prompts).
pub fn user_text(updates: &[SessionNotification]) -> String {
    chunk_text(updates, true)
}

fn chunk_text(updates: &[SessionNotification], user: bool) -> String {
    updates
        .iter()
        .filter_map(|n| match (&n.update, user) {
            (SessionUpdate::AgentMessageChunk(chunk), false)
            | (SessionUpdate::UserMessageChunk(chunk), true) => match &chunk.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}
