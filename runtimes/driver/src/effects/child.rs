//! Child processes, the same on every runtime: started with `std::process` in a process group
//! of their own, their output read by plain threads and queued, in order, for one async
//! consumer (a driver task that feeds it to the host). Shell commands run on this; so will
//! the child processes the host asks for directly (argv, env, cwd, stdin bytes).

use std::io::{self, Read};
use std::process::{Command, Stdio};
use std::sync::Arc;

use crate::sync::Queue;

/// What to start.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChildSpec {
    /// The program and its arguments.
    pub(crate) argv: Vec<String>,
    /// Extra environment variables.
    pub(crate) env: Vec<(String, String)>,
    /// The working directory (the driver's own when `None`).
    pub(crate) cwd: Option<String>,
    /// Pipe stdin (handed out as [`Child::stdin`]) instead of closing it.
    pub(crate) stdin: bool,
}

/// Which output stream a chunk came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// What a child did, in order: every chunk of output comes before the exit.
#[derive(Debug)]
pub(crate) enum ChildEvent {
    Output(Stream, Vec<u8>),
    /// The exit code; `None` when a signal ended it.
    Exit(Option<i32>),
}

/// A started child.
pub(crate) struct Child {
    /// Its process id, which is also its process group's id.
    pub(crate) pid: u32,
    /// Its output and exit.
    pub(crate) events: Arc<Queue<ChildEvent>>,
    /// Its stdin, when [`ChildSpec::stdin`] asked for it.
    pub(crate) stdin: Option<std::process::ChildStdin>,
}

/// Size of the chunks output is read in.
const CHUNK: usize = 16 * 1024;

/// Starts `spec` with stdout/stderr piped (stdin piped or closed, as `spec` says).
pub(crate) fn spawn(spec: ChildSpec) -> io::Result<Child> {
    let (program, args) = spec
        .argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no program"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(spec.env)
        .stdin(if spec.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so a kill also reaches what it started (which would otherwise
    // keep the output pipes open after it is gone).
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    if let Some(dir) = spec.cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn()?;
    let stdin = child.stdin.take();
    let events = Arc::new(Queue::new());
    let readers = [
        child
            .stdout
            .take()
            .map(|s| pump(Stream::Stdout, s, &events)),
        child
            .stderr
            .take()
            .map(|s| pump(Stream::Stderr, s, &events)),
    ];
    let pid = child.id();
    let queue = events.clone();
    std::thread::Builder::new()
        .name(format!("agentwire-child-{pid}"))
        .spawn(move || {
            let code = child.wait().ok().and_then(|s| s.code());
            // Every byte of output is reported before the exit.
            for reader in readers.into_iter().flatten() {
                let _ = reader.join();
            }
            queue.push(ChildEvent::Exit(code));
        })?;
    Ok(Child { pid, events, stdin })
}

fn pump(
    stream: Stream,
    mut from: impl Read + Send + 'static,
    events: &Arc<Queue<ChildEvent>>,
) -> std::thread::JoinHandle<()> {
    let events = events.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match from.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => events.push(ChildEvent::Output(stream, buf[..n].to_vec())),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    })
}

/// Kills the process group `pid` leads, and `pid` itself, with the `kill` utility (no
/// `unsafe` here), on a thread of its own so no executor thread waits for it.
pub(crate) fn kill_group(pid: u32) {
    let _ = std::thread::Builder::new()
        .name("agentwire-kill".into())
        .spawn(move || {
            for target in [format!("-{pid}"), pid.to_string()] {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &target])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;

    fn run(argv: &[&str]) -> Vec<ChildEvent> {
        let child = spawn(ChildSpec {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            ..ChildSpec::default()
        })
        .expect("spawn");
        let mut events = Vec::new();
        loop {
            let event = block_on(child.events.pop());
            let exit = matches!(event, ChildEvent::Exit(_));
            events.push(event);
            if exit {
                return events;
            }
        }
    }

    fn text(events: &[ChildEvent], which: Stream) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                ChildEvent::Output(s, bytes) if *s == which => Some(bytes.clone()),
                _ => None,
            })
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn output_of_both_streams_comes_before_the_exit_code() {
        let events = run(&["sh", "-c", "echo out; echo err >&2; exit 4"]);
        assert_eq!(text(&events, Stream::Stdout), "out\n");
        assert_eq!(text(&events, Stream::Stderr), "err\n");
        assert!(matches!(events.last(), Some(ChildEvent::Exit(Some(4)))));
    }

    #[test]
    fn killing_the_group_ends_what_the_shell_started() {
        let child = spawn(ChildSpec {
            argv: ["sh", "-c", "sleep 30 & sleep 30; echo never"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..ChildSpec::default()
        })
        .expect("spawn");
        let started = std::time::Instant::now();
        kill_group(child.pid);
        // The exit comes only once both output pipes closed, i.e. the background sleep died too.
        let exit = loop {
            if let ChildEvent::Exit(code) = block_on(child.events.pop()) {
                break code;
            }
        };
        assert_eq!(exit, None, "ended by a signal");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn a_missing_program_is_an_error() {
        let spec = ChildSpec {
            argv: vec!["/nonexistent/program".into()],
            ..ChildSpec::default()
        };
        assert!(spawn(spec).is_err());
        assert!(spawn(ChildSpec::default()).is_err(), "no argv");
    }
}
