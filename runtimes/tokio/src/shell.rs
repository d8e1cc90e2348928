//! Runs the commands the host asks for (`Output::ShellExec` / `Output::ShellKill`).
//!
//! Each command runs as `sh -c COMMAND` in its own task; its stdout and stderr are read in
//! chunks and fed back with `Host::handle_shell_output`, its end with `Host::handle_shell_exit`.
//! It is killed when its timeout passes or when the host asks (`session.shell.kill`, or the
//! client that started it left).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire::host::{Host, ShellStream};
use agentwire::Timestamp;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::oneshot;

/// Running commands: process id → the sender that kills it.
#[derive(Default)]
pub(crate) struct Processes {
    kill: Mutex<HashMap<String, oneshot::Sender<()>>>,
}

/// How a running command reaches the host: a callback run under the host lock.
pub(crate) type WithHost = Arc<dyn Fn(&mut dyn FnMut(&mut Host, Timestamp)) + Send + Sync>;

impl Processes {
    /// Starts `command`; output and exit are reported through `with_host`.
    pub(crate) fn start(
        self: &Arc<Self>,
        with_host: WithHost,
        process_id: String,
        command: String,
        cwd: Option<String>,
        timeout_ms: u64,
    ) {
        let (kill_tx, kill_rx) = oneshot::channel();
        self.kill
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(process_id.clone(), kill_tx);
        let processes = Arc::clone(self);
        tokio::spawn(async move {
            let code = run(&with_host, &process_id, &command, cwd, timeout_ms, kill_rx).await;
            processes
                .kill
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&process_id);
            with_host(&mut |host, now| host.handle_shell_exit(now, &process_id, code));
        });
    }

    /// Kills a running command (any signal ends it: the runtime does not forward signal names).
    pub(crate) fn kill(&self, process_id: &str) {
        let sender = self
            .kill
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(process_id);
        if let Some(sender) = sender {
            let _ = sender.send(());
        }
    }
}

async fn run(
    with_host: &WithHost,
    process_id: &str,
    command: &str,
    cwd: Option<String>,
    timeout_ms: u64,
    kill: oneshot::Receiver<()>,
) -> Option<i32> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, so a kill also reaches what `sh` started (which would otherwise
    // keep the output pipes open after `sh` is gone).
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(dir) = cwd.filter(|d| std::path::Path::new(d).is_dir()) {
        cmd.current_dir(dir);
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let message = format!("cannot start the command: {e}\n");
            with_host(&mut |host, now| {
                host.handle_shell_output(now, process_id, ShellStream::Stderr, message.as_bytes())
            });
            return Some(127);
        }
    };
    let stdout = child.stdout.take().map(|s| {
        pump(
            with_host.clone(),
            process_id.to_owned(),
            ShellStream::Stdout,
            s,
        )
    });
    let stderr = child.stderr.take().map(|s| {
        pump(
            with_host.clone(),
            process_id.to_owned(),
            ShellStream::Stderr,
            s,
        )
    });
    let status = tokio::select! {
        status = child.wait() => status.ok(),
        _ = kill => { kill_group(&mut child).await; None }
        _ = tokio::time::sleep(Duration::from_millis(timeout_ms)) => { kill_group(&mut child).await; None }
    };
    // Every byte of output is reported before the exit.
    for task in [stdout, stderr].into_iter().flatten() {
        let _ = task.await;
    }
    status.and_then(|s| s.code())
}

/// Kills the command's whole process group (with the `kill` utility: no `unsafe` here), then
/// the child itself.
async fn kill_group(child: &mut tokio::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = child.id() {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
    let _ = child.kill().await;
}

fn pump<R: AsyncRead + Unpin + Send + 'static>(
    with_host: WithHost,
    process_id: String,
    stream: ShellStream,
    mut reader: R,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = reader.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let chunk = &buf[..n];
            with_host(&mut |host, now| host.handle_shell_output(now, &process_id, stream, chunk));
        }
    })
}
