//! Runs the commands the host asks for (`Output::ShellExec` / `Output::ShellKill`).
//!
//! Each command runs as `sh -c COMMAND` (a [`child`](crate::child) process in its own process
//! group); its stdout and stderr are fed back in chunks with `Host::handle_shell_output`, its
//! end with `Host::handle_shell_exit`, by one driver task per command. It is killed when its
//! timeout passes or when the host asks (`session.shell.kill`, or the client that started it
//! left).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentwire::host::ShellStream;
use futures_lite::future;

use crate::child::{self, Child, ChildEvent, ChildSpec, Stream};
use crate::shared::Shared;
use crate::sync::lock;

/// What the host asked for.
pub(crate) enum ShellCommand {
    Exec {
        process_id: String,
        command: String,
        cwd: Option<String>,
        timeout: Duration,
    },
    Kill {
        process_id: String,
    },
}

/// Running commands: process id → the process (group) id to kill.
#[derive(Default)]
pub(crate) struct Shells {
    running: Mutex<HashMap<String, u32>>,
}

/// Starts or kills a command. Runs outside the host lock.
pub(crate) fn perform(shared: &Arc<Shared>, command: ShellCommand) {
    match command {
        ShellCommand::Exec {
            process_id,
            command,
            cwd,
            timeout,
        } => exec(shared, process_id, command, cwd, timeout),
        ShellCommand::Kill { process_id } => {
            if let Some(pid) = lock(&shared.shells.running).remove(&process_id) {
                child::kill_group(pid);
            }
        }
    }
}

fn exec(
    shared: &Arc<Shared>,
    process_id: String,
    command: String,
    cwd: Option<String>,
    timeout: Duration,
) {
    let spec = ChildSpec {
        argv: vec!["sh".into(), "-c".into(), command],
        env: Vec::new(),
        cwd: cwd.filter(|d| std::path::Path::new(d).is_dir()),
        stdin: false,
    };
    match child::spawn(spec) {
        Ok(child) => {
            lock(&shared.shells.running).insert(process_id.clone(), child.pid);
            let shared2 = shared.clone();
            shared.spawn(report(shared2, process_id, child, timeout));
        }
        Err(e) => {
            let message = format!("cannot start the command: {e}\n");
            shared.with_inner(|inner, now| {
                let host = &mut inner.host;
                host.handle_shell_output(now, &process_id, ShellStream::Stderr, message.as_bytes());
                host.handle_shell_exit(now, &process_id, Some(127));
            });
        }
    }
}

/// Feeds the command's output and exit to the host; kills it once `timeout` has passed.
async fn report(shared: Arc<Shared>, process_id: String, child: Child, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    loop {
        let event = if timed_out {
            Some(child.events.pop().await)
        } else {
            let left = deadline.saturating_duration_since(Instant::now());
            future::or(async { Some(child.events.pop().await) }, async {
                shared.sleep(left).await;
                None
            })
            .await
        };
        match event {
            None => {
                timed_out = true;
                if lock(&shared.shells.running).remove(&process_id).is_some() {
                    child::kill_group(child.pid);
                }
            }
            Some(ChildEvent::Output(stream, bytes)) => {
                let stream = match stream {
                    Stream::Stdout => ShellStream::Stdout,
                    Stream::Stderr => ShellStream::Stderr,
                };
                shared.with_inner(|inner, now| {
                    inner
                        .host
                        .handle_shell_output(now, &process_id, stream, &bytes)
                });
            }
            Some(ChildEvent::Exit(code)) => {
                lock(&shared.shells.running).remove(&process_id);
                shared
                    .with_inner(|inner, now| inner.host.handle_shell_exit(now, &process_id, code));
                return;
            }
        }
    }
}
