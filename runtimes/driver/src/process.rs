//! Runs the long-lived child processes the host asks for (`Output::ProcessSpawn` /
//! `ProcessWrite` / `ProcessKill`: MCP servers), the same on every runtime.
//!
//! Each process is a [`child`](crate::child) in a process group of its own with stdin,
//! stdout and stderr piped. Its stdout and stderr are fed back in chunks with
//! `Host::handle_process_stdout` / `handle_process_stderr`, its end with
//! `Host::handle_process_exit` (after all of its output), by one driver task per process;
//! a process that cannot be started is reported with `Host::handle_process_spawn_error`.
//! Writes go, in order, through a channel to a plain thread that owns the stdin pipe (a
//! blocking write never holds up an executor thread). A kill ends the whole process group;
//! so does the server shutting down ([`kill_all`]).

use std::collections::HashMap;
use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::child::{self, Child, ChildEvent, ChildSpec, Stream};
use crate::shared::Shared;
use crate::sync::lock;

/// What the host asked for.
pub(crate) enum ProcessCommand {
    Spawn {
        process: u64,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
    },
    Write {
        process: u64,
        bytes: Bytes,
    },
    Kill {
        process: u64,
    },
}

/// A running process: its process group and its stdin writer.
struct Running {
    pid: u32,
    stdin: Option<mpsc::Sender<Bytes>>,
}

/// Running processes by the host's process id.
#[derive(Default)]
pub(crate) struct Processes {
    running: Mutex<HashMap<u64, Running>>,
}

/// Performs one command. Runs outside the host lock, in the order the host produced them
/// (so a process is started before its first write).
pub(crate) fn perform(shared: &Arc<Shared>, command: ProcessCommand) {
    match command {
        ProcessCommand::Spawn {
            process,
            argv,
            env,
            cwd,
        } => spawn(shared, process, argv, env, cwd),
        ProcessCommand::Write { process, bytes } => {
            if let Some(stdin) = lock(&shared.processes.running)
                .get(&process)
                .and_then(|r| r.stdin.as_ref())
            {
                let _ = stdin.send(bytes);
            }
        }
        ProcessCommand::Kill { process } => {
            if let Some(running) = lock(&shared.processes.running).remove(&process) {
                child::kill_group(running.pid);
            }
        }
    }
}

/// Kills every running process group (the server is shutting down).
pub(crate) fn kill_all(shared: &Shared) {
    for (_, running) in lock(&shared.processes.running).drain() {
        child::kill_group(running.pid);
    }
}

fn spawn(
    shared: &Arc<Shared>,
    process: u64,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
) {
    let spec = ChildSpec {
        argv,
        env,
        cwd: cwd.filter(|d| std::path::Path::new(d).is_dir()),
        stdin: true,
    };
    match child::spawn(spec) {
        Ok(mut child) => {
            let stdin = child.stdin.take().and_then(writer);
            lock(&shared.processes.running).insert(
                process,
                Running {
                    pid: child.pid,
                    stdin,
                },
            );
            shared.spawn(report(shared.clone(), process, child));
        }
        Err(e) => {
            let message = e.to_string();
            shared.with_inner(|inner, now| {
                inner
                    .host
                    .handle_process_spawn_error(now, process, &message)
            });
        }
    }
}

/// A thread that writes what the channel carries to `stdin`, in order, until the channel
/// closes or the pipe breaks.
fn writer(mut stdin: std::process::ChildStdin) -> Option<mpsc::Sender<Bytes>> {
    let (tx, rx) = mpsc::channel::<Bytes>();
    std::thread::Builder::new()
        .name("agentwire-stdin".into())
        .spawn(move || {
            for bytes in rx {
                if stdin
                    .write_all(&bytes)
                    .and_then(|()| stdin.flush())
                    .is_err()
                {
                    return;
                }
            }
        })
        .ok()?;
    Some(tx)
}

/// Feeds the process's output and exit to the host.
async fn report(shared: Arc<Shared>, process: u64, child: Child) {
    loop {
        match child.events.pop().await {
            ChildEvent::Output(stream, bytes) => shared.with_inner(|inner, now| match stream {
                Stream::Stdout => inner.host.handle_process_stdout(now, process, &bytes),
                Stream::Stderr => inner.host.handle_process_stderr(now, process, &bytes),
            }),
            ChildEvent::Exit(code) => {
                lock(&shared.processes.running).remove(&process);
                shared.with_inner(|inner, now| inner.host.handle_process_exit(now, process, code));
                return;
            }
        }
    }
}
