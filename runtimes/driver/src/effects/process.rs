//! Runs the child processes the host asks for (`EffectOp::ProcessSpawn` / `ProcessWrite` /
//! `ProcessKill`: MCP servers, and commands as `sh -c COMMAND`), the same on every runtime.
//!
//! Each process is a [`child`](super::child) in a process group of its own with stdout and
//! stderr piped (stdin too when the spec asks for it). Its output is reported in chunks
//! (`EffectEvent::Stdout` / `Stderr`), its end (`EffectEvent::Exit`) after all of its output,
//! by one driver task per process; a process that cannot be started is reported with
//! `EffectEvent::SpawnFailed`. Writes go, in order, through a channel to a plain thread that
//! owns the stdin pipe (a blocking write never holds up an executor thread). A kill ends the
//! whole process group; so does the spec's timeout, and the server shutting down
//! ([`Processes::kill_all`]).

use std::collections::HashMap;
use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentwire::host::{EffectEvent, EffectId, ProcessSpec};
use bytes::Bytes;
use futures_lite::future;

use super::child::{self, Child, ChildEvent, ChildSpec, Stream};
use super::Port;
use crate::sync::lock;

/// A running process: its process group and its stdin writer.
struct Running {
    pid: u32,
    stdin: Option<mpsc::Sender<Bytes>>,
}

/// Running processes by effect id.
#[derive(Default)]
pub(super) struct Processes {
    running: Mutex<HashMap<EffectId, Running>>,
}

impl Processes {
    /// Writes `bytes` to the stdin of process `id`, after earlier writes.
    pub(super) fn write(&self, id: EffectId, bytes: Bytes) {
        if let Some(stdin) = lock(&self.running).get(&id).and_then(|r| r.stdin.as_ref()) {
            let _ = stdin.send(bytes);
        }
    }

    /// Kills process `id` (its whole group); its exit is still reported.
    pub(super) fn kill(&self, id: EffectId) {
        if let Some(running) = lock(&self.running).remove(&id) {
            child::kill_group(running.pid);
        }
    }

    /// Kills every running process group (the server is shutting down).
    pub(super) fn kill_all(&self) {
        for (_, running) in lock(&self.running).drain() {
            child::kill_group(running.pid);
        }
    }
}

/// Starts process `id`. Runs outside the host lock.
pub(super) fn spawn(
    processes: &Arc<Processes>,
    port: &Arc<dyn Port>,
    id: EffectId,
    spec: ProcessSpec,
) {
    let ProcessSpec {
        argv,
        mut env,
        env_from_host,
        cwd,
        stdin,
        timeout_ms,
    } = spec;
    env.extend(resolve_from_host(env_from_host, |name| {
        std::env::var(name).ok()
    }));
    let spec = ChildSpec {
        argv,
        env,
        cwd: cwd.filter(|d| std::path::Path::new(d).is_dir()),
        stdin,
    };
    match child::spawn(spec) {
        Ok(mut child) => {
            let stdin = child.stdin.take().and_then(writer);
            lock(&processes.running).insert(
                id,
                Running {
                    pid: child.pid,
                    stdin,
                },
            );
            let timeout = timeout_ms.map(Duration::from_millis);
            let task = report(processes.clone(), port.clone(), id, child, timeout);
            port.spawn(Box::pin(task));
        }
        Err(e) => port
            .clone()
            .report(id, EffectEvent::SpawnFailed(e.to_string())),
    }
}

/// The variables whose value is the driver's own variable of the name given (`NAME`,
/// `$NAME` or `${NAME}`), as `lookup` reads them; one it does not have is left out.
fn resolve_from_host(
    refs: Vec<(String, String)>,
    lookup: impl Fn(&str) -> Option<String>,
) -> impl Iterator<Item = (String, String)> {
    refs.into_iter().filter_map(move |(key, reference)| {
        let name = reference.trim();
        let name = name
            .strip_prefix("${")
            .and_then(|n| n.strip_suffix('}'))
            .or_else(|| name.strip_prefix('$'))
            .unwrap_or(name);
        lookup(name).map(|value| (key, value))
    })
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

/// Feeds the process's output and exit to the host; kills it once `timeout` has passed.
async fn report(
    processes: Arc<Processes>,
    port: Arc<dyn Port>,
    id: EffectId,
    child: Child,
    timeout: Option<Duration>,
) {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut timed_out = false;
    loop {
        let event = match deadline.filter(|_| !timed_out) {
            None => Some(child.events.pop().await),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                future::or(async { Some(child.events.pop().await) }, async {
                    port.sleep(left).await;
                    None
                })
                .await
            }
        };
        match event {
            None => {
                timed_out = true;
                processes.kill(id);
            }
            Some(ChildEvent::Output(stream, bytes)) => {
                let event = match stream {
                    Stream::Stdout => EffectEvent::Stdout(bytes),
                    Stream::Stderr => EffectEvent::Stderr(bytes),
                };
                port.clone().report(id, event);
            }
            Some(ChildEvent::Exit(code)) => {
                lock(&processes.running).remove(&id);
                port.report(id, EffectEvent::Exit(code));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_from_host;

    #[test]
    fn indirect_env_values_name_the_drivers_variables() {
        let lookup = |name: &str| (name == "TOKEN").then(|| "secret".to_owned());
        let refs = vec![
            ("A".to_owned(), "TOKEN".to_owned()),
            ("B".to_owned(), "$TOKEN".to_owned()),
            ("C".to_owned(), "${TOKEN}".to_owned()),
            ("D".to_owned(), "MISSING".to_owned()),
        ];
        let resolved: Vec<_> = resolve_from_host(refs, lookup).collect();
        let secret = || "secret".to_owned();
        assert_eq!(
            resolved,
            [
                ("A".to_owned(), secret()),
                ("B".to_owned(), secret()),
                ("C".to_owned(), secret())
            ]
        );
    }
}
