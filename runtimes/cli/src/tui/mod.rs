//! `agentwire --ui-server`: a terminal UI on top of the server, with SDK clients served on TCP.
//!
//! The UI is an **in-process client**: it attaches a `tokio::io::duplex` pipe to the
//! [`Server`] with [`Server::attach`] and speaks the Copilot protocol over it, so it sees
//! exactly what SDK clients see and needs no host internals. The pieces:
//!
//! * [`transcript`]: session events → readable lines and pending prompts (pure);
//! * [`app`]: UI state and protocol logic, keys and host messages in, requests out (pure);
//! * [`view`]: drawing the app with ratatui;
//! * [`peer`]: the JSON-RPC client, the crate's own [`Endpoint`](agentwire::endpoint::Endpoint);
//! * this module: the IO around them (terminal, keyboard thread, the pipe, the TCP listener).

pub mod app;
pub mod peer;
pub mod transcript;
pub mod view;

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agentwire::host::HostConfig;
use agentwire_tokio::Server;
use bytes::Bytes;
use crossterm::event::{self, Event};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use app::{App, AppOptions};
use view::Chrome;

/// Buffer size of the in-process pipe between the UI and the host.
const PIPE_BYTES: usize = 256 * 1024;

/// How often the keyboard thread checks whether the UI has stopped.
const KEY_POLL: Duration = Duration::from_millis(100);

/// How often the screen is redrawn without input (to refresh the client count).
const TICK: Duration = Duration::from_millis(500);

/// How long to wait for SDK connections to flush when the UI quits.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Serves SDK clients on TCP at `host:port` and runs the terminal UI until the user quits
/// (Ctrl-C, `/quit`) or a client calls `runtime.shutdown`. Prints `listening on port N` on
/// stdout before the UI takes over the screen, so SDK-style launchers can find the port.
pub fn serve(host: &str, port: u16, config: HostConfig) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(serve_async(host, port, config));
    // The keyboard thread may be parked in a poll; don't wait for it.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

async fn serve_async(host: &str, port: u16, config: HostConfig) -> ExitCode {
    let options = AppOptions {
        token: config.connection_token.clone(),
        cwd: std::env::current_dir()
            .ok()
            .map(|d| d.to_string_lossy().into_owned()),
    };
    let server = Server::new(config);
    let (addr, serving) = match server.bind_tcp((host, port)).await {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!("error: cannot listen on {host}:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let serving = tokio::spawn(serving);
    {
        let mut stdout = io::stdout().lock();
        let _ = writeln!(stdout, "listening on port {}", addr.port()).and_then(|()| stdout.flush());
    }
    let result = run(&server, addr.port(), options).await;
    server.shutdown("the UI closed");
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, serving).await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: the terminal UI failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the UI on this process's terminal as an in-process client of `server`, until the
/// user quits, the server shuts down or the connection ends. Restores the terminal on
/// return (and on panic).
pub async fn run(server: &Server, port: u16, options: AppOptions) -> io::Result<()> {
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let (host_reader, host_writer) = tokio::io::split(theirs);
    server.attach(host_reader, host_writer);
    let (mut reader, mut writer) = tokio::io::split(ours);

    // Host → UI: the bytes as read (the app's peer decodes them).
    let (inbound_tx, mut inbound) = mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = reader.read(&mut buf).await {
            if inbound_tx.send(Bytes::copy_from_slice(&buf[..n])).is_err() {
                return;
            }
        }
    });
    // UI → host: framed requests.
    let (outbound, mut outbound_rx) = mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(async move {
        while let Some(bytes) = outbound_rx.recv().await {
            if writer.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = writer.shutdown().await;
    });
    // Keyboard: crossterm reads are blocking, so a thread forwards them.
    let stop = Arc::new(AtomicBool::new(false));
    let (key_tx, mut keys) = mpsc::unbounded_channel::<Event>();
    let stop_keys = stop.clone();
    std::thread::spawn(move || {
        while !stop_keys.load(Ordering::SeqCst) {
            match event::poll(KEY_POLL) {
                Ok(true) => {
                    let sent = event::read().map(|ev| key_tx.send(ev));
                    if !matches!(sent, Ok(Ok(()))) {
                        return;
                    }
                }
                Ok(false) => {}
                Err(_) => return,
            }
        }
    });

    let mut terminal = ratatui::try_init()?;
    let mut app = App::new(options);
    app.start();
    let result = event_loop(
        server,
        port,
        &mut terminal,
        &mut app,
        &mut inbound,
        &mut keys,
        &outbound,
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let _ = terminal.show_cursor();
    ratatui::try_restore()?;
    result
}

async fn event_loop(
    server: &Server,
    port: u16,
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    inbound: &mut mpsc::UnboundedReceiver<Bytes>,
    keys: &mut mpsc::UnboundedReceiver<Event>,
    outbound: &mpsc::UnboundedSender<Bytes>,
) -> io::Result<()> {
    let mut tick = tokio::time::interval(TICK);
    loop {
        let out = app.take_output();
        if !out.is_empty() && outbound.send(out).is_err() {
            return Ok(());
        }
        if app.should_quit() || app.is_disconnected() {
            return Ok(());
        }
        let chrome = Chrome {
            port,
            clients: server.connection_count().saturating_sub(1),
        };
        terminal.draw(|frame| view::draw(frame, app, chrome))?;
        tokio::select! {
            key = keys.recv() => match key {
                Some(Event::Key(key)) => app.on_key(key),
                Some(_) => {}
                // The keyboard is gone (the terminal closed).
                None => return Ok(()),
            },
            bytes = inbound.recv() => match bytes {
                Some(bytes) => app.on_bytes(&bytes),
                // The host closed the connection (it is shutting down).
                None => return Ok(()),
            },
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = server.shutdown_requested() => return Ok(()),
        }
        // Take everything already waiting before drawing again.
        while let Ok(bytes) = inbound.try_recv() {
            app.on_bytes(&bytes);
        }
        while let Ok(key) = keys.try_recv() {
            if let Event::Key(key) = key {
                app.on_key(key);
            }
        }
    }
}
