//! `agentwire --ui-server` in a **real pseudo-terminal**: the binary runs on the slave side of
//! a pty (portable-pty), its output is fed to a terminal emulator (vt100) and the tests assert
//! on the emulated screen, while keys are typed into the master side. SDK clients talk to the
//! same process over TCP with the official Copilot Rust SDK.
//!
//! Every wait is bounded by [`STEP`]; a failing wait prints the screen.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use github_copilot_sdk::types::{MessageOptions, SessionConfig, SessionId};
use github_copilot_sdk::Client;
use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// Upper bound for one step (a screen change, a process exit, one SDK call).
const STEP: Duration = Duration::from_secs(10);

const ROWS: u16 = 30;
const COLS: u16 = 120;

/// The UI running in a pty, with an emulated screen.
struct Tui {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    output: mpsc::Receiver<Vec<u8>>,
    /// Everything the process wrote, as text (lossy), for lines printed before the UI.
    raw: String,
    screen: vt100::Parser,
    exited: Option<portable_pty::ExitStatus>,
    _master: Box<dyn MasterPty + Send>,
    _dir: TempDir,
}

impl Tui {
    /// Starts `agentwire --ui-server --port 0 <extra>` in a fresh pty.
    fn spawn(extra: &[&str]) -> Tui {
        let dir = TempDir::new();
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a pty");
        let mut cmd = CommandBuilder::new(BIN);
        cmd.args(["--ui-server", "--port", "0"]);
        cmd.args(extra);
        cmd.cwd(&dir.0);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("RUST_LOG");
        let child = pty
            .slave
            .spawn_command(cmd)
            .expect("spawn agentwire in the pty");
        // Only the child keeps the slave side open, so the reader sees EOF when it exits.
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().expect("pty reader");
        let writer = pty.master.take_writer().expect("pty writer");
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Tui {
            child,
            writer,
            output,
            raw: String::new(),
            screen: vt100::Parser::new(ROWS, COLS, 0),
            exited: None,
            _master: pty.master,
            _dir: dir,
        }
    }

    /// Takes what the process wrote within `wait` into the emulator.
    fn pump(&mut self, wait: Duration) {
        let mut next = self.output.recv_timeout(wait).ok();
        while let Some(chunk) = next {
            self.screen.process(&chunk);
            self.raw.push_str(&String::from_utf8_lossy(&chunk));
            // Answer cursor position queries as a terminal would.
            if chunk.windows(4).any(|w| w == b"\x1b[6n") {
                let (row, col) = self.screen.screen().cursor_position();
                let _ = write!(self.writer, "\x1b[{};{}R", row + 1, col + 1);
                let _ = self.writer.flush();
            }
            next = self.output.try_recv().ok();
        }
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
    }

    /// The emulated screen's text.
    fn text(&self) -> String {
        self.screen.screen().contents()
    }

    /// Waits until `done` holds for the screen text, else fails showing the screen.
    fn wait_for(&mut self, what: &str, done: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + STEP;
        loop {
            if done(&self.text()) {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out after {STEP:?} waiting for {what}; the screen:\n{}",
                    self.text()
                );
            }
            self.pump(Duration::from_millis(50));
        }
    }

    /// Waits until the screen shows `needle`.
    fn wait_for_text(&mut self, needle: &str) {
        self.wait_for(&format!("{needle:?} on screen"), |s| s.contains(needle));
    }

    /// The port from the `listening on port N` line printed before the UI started.
    fn port(&mut self) -> u16 {
        let deadline = Instant::now() + STEP;
        loop {
            if let Some(rest) = self.raw.split("listening on port ").nth(1) {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                if let (Ok(port), true) = (digits.parse::<u16>(), digits.len() < rest.len()) {
                    return port;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no `listening on port N` line within {STEP:?}; output so far: {:?}",
                self.raw
            );
            self.pump(Duration::from_millis(50));
        }
    }

    /// The session id shown in the header (`session <id>`), once there is one.
    fn header_session(&mut self) -> String {
        self.wait_for("a session in the header", |s| {
            header_session(s).is_some_and(|id| id.len() == 36)
        });
        header_session(&self.text()).expect("checked above")
    }

    /// Types `keys` (raw bytes, e.g. `"hello\r"`).
    fn type_keys(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).expect("type");
        self.writer.flush().expect("flush");
    }

    /// Waits for the process to exit and returns its exit code.
    fn wait_exit(&mut self) -> u32 {
        let deadline = Instant::now() + STEP;
        while self.exited.is_none() {
            assert!(
                Instant::now() < deadline,
                "the UI did not exit within {STEP:?}; the screen:\n{}",
                self.text()
            );
            self.pump(Duration::from_millis(50));
        }
        // Take the last output (the terminal restore): the reader may lag behind the exit on a
        // loaded machine, so read until the alternate screen is left, within a bound.
        self.pump(Duration::from_millis(200));
        let deadline = Instant::now() + STEP;
        while self.screen.screen().alternate_screen() && Instant::now() < deadline {
            self.pump(Duration::from_millis(50));
        }
        self.exited.as_ref().expect("checked above").exit_code()
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The id after `session ` on the header row.
fn header_session(screen: &str) -> Option<String> {
    let header = screen.lines().next()?;
    let rest = header.split("session ").nth(1)?;
    Some(
        rest.chars()
            .take_while(|c| c.is_ascii_hexdigit() || *c == '-')
            .collect(),
    )
}

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "agentwire-tui-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create a temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn prompts_are_answered_and_the_ui_follows_the_foreground_session() {
    let mut tui = Tui::spawn(&[]);
    let port = tui.port();
    let first = tui.header_session();
    tui.wait_for_text(&format!("listening on port {port}"));

    tui.type_keys("hello\r");
    tui.wait_for_text("You said: hello");
    tui.wait_for_text("you › hello");

    // An SDK client over TCP: a second session with a turn in it, then made foreground.
    let second = SessionId::new("3f1c9a6e-8d2b-4c7a-9e5f-0a1b2c3d4e5f");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let (client, session) = rt.block_on(async {
        let connect = async {
            let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect to the UI's port");
            let (r, w) = tokio::io::split(stream);
            let client = Client::from_streams(r, w, PathBuf::from("/tmp")).expect("from_streams");
            client
                .verify_protocol_version()
                .await
                .expect("connect handshake");
            // The UI makes its session foreground right after creating it.
            let first = Some(SessionId::new(first.clone()));
            while client
                .get_foreground_session_id()
                .await
                .expect("getForeground")
                != first
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let session = client
                .create_session(SessionConfig::default().with_session_id(second.clone()))
                .await
                .expect("session.create");
            session
                .send_and_wait(MessageOptions::new("before the switch").with_wait_timeout(STEP))
                .await
                .expect("send_and_wait");
            client
                .set_foreground_session_id(&second)
                .await
                .expect("session.setForeground");
            (client, session)
        };
        tokio::time::timeout(STEP, connect)
            .await
            .expect("the SDK steps finish in time")
    });

    // The UI follows: the header names the new session and its history is loaded.
    tui.wait_for(&format!("the header to show {second}"), |s| {
        header_session(s).as_deref() == Some(second.as_str())
    });
    tui.wait_for_text("You said: before the switch");
    assert!(
        !tui.text().contains("You said: hello"),
        "the old session's transcript is gone:\n{}",
        tui.text()
    );
    tui.wait_for_text("clients: 1");

    // Typing in the UI now talks to the SDK's session, live.
    tui.type_keys("from the terminal\r");
    tui.wait_for_text("You said: from the terminal");
    let history = rt.block_on(async {
        tokio::time::timeout(STEP, session.get_events())
            .await
            .expect("getMessages in time")
            .expect("getMessages")
    });
    assert!(
        history
            .iter()
            .any(|e| e.data.get("content").and_then(|c| c.as_str()) == Some("from the terminal")),
        "the prompt typed in the UI reached the SDK's session"
    );
    drop((session, client, rt));

    tui.type_keys("/quit\r");
    assert_eq!(tui.wait_exit(), 0, "/quit exits 0");
    assert!(
        !tui.screen.screen().alternate_screen(),
        "the terminal is restored"
    );
}

#[test]
fn permission_prompts_and_forms_are_answered_from_the_keyboard() {
    let dir = TempDir::new();
    let scenario = dir.0.join("scenario.json");
    std::fs::write(
        &scenario,
        r#"{"rules": [
             {"match": "form", "steps": [
               {"ask": "Who is there?", "schema": {"type": "object",
                  "properties": {"name": {"type": "string", "title": "Name"},
                                 "age": {"type": "integer"}},
                  "required": ["name"]}},
               {"say": "Got {answer}"}]},
             {"match": "secret", "steps": [
               {"read_file": "secret.txt", "result": "the file says hi"},
               {"say": "Read: {result}"}]}],
           "default": [{"say": "You said: {prompt}"}]}"#,
    )
    .expect("write the scenario");
    let mut tui = Tui::spawn(&["--scenario", scenario.to_str().expect("utf-8 path")]);
    tui.header_session();

    // Permission: denied with `n`, then approved with `y`.
    tui.type_keys("show the secret\r");
    tui.wait_for_text("Allow? Read file:");
    tui.type_keys("n");
    tui.wait_for_text("permission denied");
    tui.wait_for_text("The user rejected this tool call.");
    tui.type_keys("secret again\r");
    tui.wait_for("a second prompt", |s| {
        s.matches("Allow? Read file:").count() == 1
    });
    tui.type_keys("y");
    tui.wait_for_text("permission approved");
    tui.wait_for_text("Read: the file says hi");

    // A form: a required name, an optional age left empty.
    tui.type_keys("fill the form\r");
    tui.wait_for_text("Who is there?");
    tui.wait_for_text("Name (text) · field 1 of 2");
    tui.type_keys("Ada\r");
    tui.wait_for_text("field 2 of 2");
    tui.type_keys("\r");
    tui.wait_for_text(r#"Got {"action":"accept","content":{"name":"Ada"}}"#);

    // Ctrl-C exits 0 and restores the terminal.
    tui.type_keys("\x03");
    assert_eq!(tui.wait_exit(), 0, "Ctrl-C exits 0");
    assert!(!tui.screen.screen().alternate_screen());
    assert!(
        tui.text().contains("listening on port"),
        "the main screen is back:\n{}",
        tui.text()
    );
}

#[test]
fn ui_server_rejects_stdio() {
    let out = std::process::Command::new(BIN)
        .args(["--ui-server", "--stdio"])
        .output()
        .expect("run agentwire");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ui-server"));
}
