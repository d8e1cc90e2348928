//! One conformance suite, three runtimes: every case below runs, with the same body, against
//! `agentwire-tokio`, `agentwire-smol` and `agentwire-async-std` (see [`conformance!`]).
//!
//! Each server runs on a thread of its own under the runtime being tested, serving TCP on
//! 127.0.0.1; the clients (raw Content-Length frames, and the **official Copilot Rust SDK**,
//! `github-copilot-sdk`, which is tokio-based) run on the test's tokio runtime. The binary is
//! covered too (`binary.rs`): `agentwire --runtime <name>` over stdio and TCP, and with
//! `--allow-shell --data-dir D`: shell commands, sessions that survive a restart, and SIGTERM.
//!
//! Every wait is bounded ([`PROMPT`], and the SDK scenarios' own `STEP` / `TEST` bounds).

/// The cases that run the `agentwire` binary.
mod binary;
use crate::support;
use crate::support::sdk_scenarios as sdk;
use crate::support::wire as common;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, Instant};

use agentwire_tokio::agentwire::agent::Scenario;
use agentwire_tokio::agentwire::host::HostConfig;
use common::{assert_pong, frame, ping, ping_ok, FrameReader, PROMPT};
use github_copilot_sdk::Client;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

// ---------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------

/// Why a runtime's serving future returned, in runtime-neutral terms.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Shutdown(String),
    Disconnected,
}

/// A runtime whose server the suite can start.
trait RuntimeUnderTest {
    /// The binary's `--runtime` value.
    const FLAG: &'static str;
    /// Starts a server for `config` on 127.0.0.1 (a free port), on a thread of its own that
    /// runs this runtime, and returns once it listens.
    fn serve_tcp(config: HostConfig) -> Running;
}

/// A server running on its own thread.
struct Running {
    addr: SocketAddr,
    /// Resolves when the serving future returns.
    stopped: oneshot::Receiver<Outcome>,
    /// `Server::shutdown` of the server under test.
    shutdown: Box<dyn Fn(&str) + Send>,
}

impl Running {
    /// Waits for the serving future to return (bounded by [`PROMPT`]).
    async fn stopped(&mut self) -> Outcome {
        tokio::time::timeout(PROMPT, &mut self.stopped)
            .await
            .expect("the serving future returns in time")
            .expect("the server thread reports how it stopped")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Don't leave a server behind (a no-op if it already stopped); its thread ends by itself.
        (self.shutdown)("test over");
    }
}

/// Runs `serve` (which binds, reports its address, serves and returns the outcome) on a new
/// thread with `block_on`, and waits for the address.
fn spawn_server<S>(
    block_on: impl FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + 'static,
    serve: impl FnOnce(std::sync::mpsc::Sender<SocketAddr>) -> S + Send + 'static,
    shutdown: Box<dyn Fn(&str) + Send>,
) -> Running
where
    S: Future<Output = Outcome> + Send + 'static,
{
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stopped_tx, stopped) = oneshot::channel();
    std::thread::spawn(move || {
        block_on(Box::pin(async move {
            let outcome = serve(addr_tx).await;
            let _ = stopped_tx.send(outcome);
        }));
    });
    let addr = addr_rx
        .recv_timeout(PROMPT)
        .expect("the server listens in time");
    Running {
        addr,
        stopped,
        shutdown,
    }
}

struct Tokio;

impl RuntimeUnderTest for Tokio {
    const FLAG: &'static str = "tokio";

    fn serve_tcp(config: HostConfig) -> Running {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime for the server");
        let handle = runtime.handle().clone();
        let server = agentwire_tokio::Server::new(config);
        let stopper = server.clone();
        spawn_server(
            move |fut| {
                runtime.block_on(fut);
                runtime.shutdown_timeout(Duration::from_millis(100));
            },
            move |addr_tx| async move {
                let (addr, serving) = server.bind_tcp("127.0.0.1:0").await.expect("bind");
                addr_tx.send(addr).expect("report the address");
                match serving.await {
                    agentwire_tokio::Stopped::Shutdown { reason } => Outcome::Shutdown(reason),
                    agentwire_tokio::Stopped::Disconnected => Outcome::Disconnected,
                }
            },
            // tokio's `Server::shutdown` spawns tasks: run it inside the server's runtime.
            Box::new(move |reason| {
                let _guard = handle.enter();
                stopper.shutdown(reason);
            }),
        )
    }
}

/// The two runtimes on the shared futures-io driver differ only in `R` and `block_on`.
fn serve_futures_io<R: agentwire_smol::Runtime>(
    config: HostConfig,
    block_on: impl FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + 'static,
) -> Running {
    let server = agentwire_smol::Driver::<R>::new(config);
    let stopper = server.clone();
    spawn_server(
        block_on,
        move |addr_tx| async move {
            let (addr, serving) = server.bind_tcp("127.0.0.1:0").await.expect("bind");
            addr_tx.send(addr).expect("report the address");
            match serving.await {
                agentwire_smol::Stopped::Shutdown { reason } => Outcome::Shutdown(reason),
                agentwire_smol::Stopped::Disconnected => Outcome::Disconnected,
            }
        },
        Box::new(move |reason| stopper.shutdown(reason)),
    )
}

struct Smol;

impl RuntimeUnderTest for Smol {
    const FLAG: &'static str = "smol";

    fn serve_tcp(config: HostConfig) -> Running {
        serve_futures_io::<agentwire_smol::Smol>(config, smol::block_on)
    }
}

struct AsyncStd;

impl RuntimeUnderTest for AsyncStd {
    const FLAG: &'static str = "async-std";

    fn serve_tcp(config: HostConfig) -> Running {
        serve_futures_io::<agentwire_async_std::AsyncStd>(config, async_std::task::block_on)
    }
}

/// Instantiates every case for every runtime: `tokio_rt::ping_over_tcp`,
/// `smol_rt::ping_over_tcp`, `async_std_rt::ping_over_tcp`, …
macro_rules! conformance {
    ($($module:ident => $runtime:ty),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[tokio::test]
            async fn ping_over_tcp() {
                super::ping_over_tcp::<$runtime>().await
            }
            #[tokio::test]
            async fn half_close_flushes_then_closes() {
                super::half_close_flushes_then_closes::<$runtime>().await
            }
            #[tokio::test]
            async fn framing_error_is_answered_then_closed() {
                super::framing_error_is_answered_then_closed::<$runtime>().await
            }
            #[tokio::test]
            async fn sdk_conversation() {
                super::sdk_conversation::<$runtime>().await
            }
            #[tokio::test]
            async fn sdk_tool_turn() {
                super::sdk_tool_turn::<$runtime>().await
            }
            #[tokio::test]
            async fn slow_reader_does_not_stall_others() {
                super::slow_reader_does_not_stall_others::<$runtime>().await
            }
            #[tokio::test]
            async fn timers_drive_sleep_steps() {
                super::timers_drive_sleep_steps::<$runtime>().await
            }
            #[tokio::test]
            async fn runtime_shutdown_returns() {
                super::runtime_shutdown_returns::<$runtime>().await
            }
            #[tokio::test]
            async fn binary_over_stdio_and_tcp() {
                binary::binary_over_stdio_and_tcp::<$runtime>().await
            }
            #[tokio::test]
            async fn binary_shell_exec_reports_output_exit_and_kill() {
                binary::shell_exec_reports_output_exit_and_kill::<$runtime>().await
            }
            #[tokio::test]
            async fn binary_sessions_survive_a_restart_on_the_same_data_dir() {
                binary::sessions_survive_a_restart_on_the_same_data_dir::<$runtime>().await
            }
            #[tokio::test]
            async fn binary_sigterm_sends_the_shutdown_notice_before_end_of_stream() {
                binary::sigterm_sends_the_shutdown_notice_before_end_of_stream::<$runtime>().await
            }
            #[tokio::test]
            async fn binary_a_second_sigint_exits_at_once() {
                binary::a_second_sigint_exits_at_once::<$runtime>().await
            }
        }
    )*};
}

conformance! {
    tokio_rt => Tokio,
    smol_rt => Smol,
    async_std_rt => AsyncStd,
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn config() -> HostConfig {
    HostConfig::default().with_seed(7)
}

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(PROMPT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {PROMPT:?}"))
}

async fn connect(
    addr: SocketAddr,
) -> (
    FrameReader<tokio::net::tcp::OwnedReadHalf>,
    tokio::net::tcp::OwnedWriteHalf,
) {
    let stream = within("connect", TcpStream::connect(addr))
        .await
        .expect("connect");
    let (r, w) = stream.into_split();
    (FrameReader::new(r), w)
}

/// An SDK client over a fresh TCP connection, handshake done (what `Transport::External`
/// does: `TcpStream::connect` + `tokio::io::split`).
async fn sdk_client(addr: SocketAddr) -> Client {
    let stream = within("connect", TcpStream::connect(addr))
        .await
        .expect("connect");
    let (r, w) = tokio::io::split(stream);
    let client = Client::from_streams(r, w, PathBuf::from("/tmp")).expect("Client::from_streams");
    sdk::within("connect handshake", client.verify_protocol_version())
        .await
        .expect("connect handshake");
    client
}

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

/// Pings are answered, and pipelined requests in the order they were sent.
async fn ping_over_tcp<R: RuntimeUnderTest>() {
    let server = R::serve_tcp(config());
    let (mut reader, mut w) = connect(server.addr).await;
    ping_ok(&mut reader, &mut w, 1).await;
    let mut all = Vec::new();
    for id in 2..=200u64 {
        all.extend(ping(id, Some(&format!("n{id}"))));
    }
    w.write_all(&all).await.unwrap();
    for id in 2..=200u64 {
        let resp = reader.expect().await;
        assert_eq!(resp["id"], json!(id), "responses in emit order");
        assert_pong(&resp);
        assert_eq!(resp["result"]["message"], format!("pong: n{id}"));
    }
}

/// The peer half-closes right after a request: the queued response is still written, then
/// the connection is closed (the host's `handle_eof` path).
async fn half_close_flushes_then_closes<R: RuntimeUnderTest>() {
    let server = R::serve_tcp(config());
    let (mut reader, mut w) = connect(server.addr).await;
    w.write_all(&ping(5, Some("bye"))).await.unwrap();
    w.shutdown().await.unwrap();
    assert_pong(&reader.response(5).await);
    let end = within("the server closes", reader.next()).await;
    assert!(matches!(end, Ok(None)), "no frame after the close: {end:?}");
}

/// A framing error makes the host output `Close`: its error frame is flushed, then the
/// connection is closed; other connections are unaffected.
async fn framing_error_is_answered_then_closed<R: RuntimeUnderTest>() {
    let server = R::serve_tcp(config());
    let (mut bad, mut bad_w) = connect(server.addr).await;
    let (mut good, mut good_w) = connect(server.addr).await;
    bad_w
        .write_all(b"Content-Length: nope\r\n\r\n{}")
        .await
        .unwrap();
    let err = bad.expect().await;
    assert_eq!(err["id"], json!(null), "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("framing")),
        "{err}"
    );
    let end = within("the server closes", bad.next()).await;
    assert!(
        matches!(end, Ok(None) | Err(_)),
        "closed after the error: {end:?}"
    );
    ping_ok(&mut good, &mut good_w, 1).await;
}

/// The official SDK: create a session, `send_and_wait` returns "You said: …", the event
/// stream's envelope and parent chain, `getMessages` equals what was streamed.
async fn sdk_conversation<R: RuntimeUnderTest>() {
    let server = R::serve_tcp(config());
    sdk::bounded(async {
        let client = sdk_client(server.addr).await;
        sdk::scenario_plain_turn(&client).await;
    })
    .await
}

/// The official SDK: a turn that calls a client-side tool through a permission prompt.
async fn sdk_tool_turn<R: RuntimeUnderTest>() {
    let server = R::serve_tcp(config());
    sdk::bounded(async {
        let client = sdk_client(server.addr).await;
        sdk::scenario_tool_turn(&client).await;
    })
    .await
}

/// One client floods pings with large messages and never reads: far more response bytes than
/// the kernel's socket buffers hold, so its writer blocks and the rest waits in the host's
/// outbox. Another client's pings stay fast, and the stalled one later gets every response,
/// in order.
async fn slow_reader_does_not_stall_others<R: RuntimeUnderTest>() {
    const STALLED: u64 = 256;
    const MESSAGE: usize = 64 * 1024;
    // 16 MiB of responses: make sure that exceeds what the kernel can buffer (send buffer up
    // to `tcp_wmem`'s maximum, plus the tiny receive buffer below), or the test proves nothing.
    if let Ok(wmem) = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem") {
        let max: u64 = wmem
            .split_whitespace()
            .last()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        assert!(
            STALLED * MESSAGE as u64 > 2 * max,
            "tcp_wmem max {max} is too large for this test"
        );
    }
    let server = R::serve_tcp(config().with_outbox_budget_bytes(64 * 1024 * 1024));

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stalled = within("connect", socket.connect(server.addr))
        .await
        .expect("connect the stalled client");
    let (stalled_r, mut stalled_w) = stalled.into_split();
    let big = "x".repeat(MESSAGE);
    let flood = tokio::spawn(async move {
        for id in 1..=STALLED {
            stalled_w.write_all(&ping(id, Some(&big))).await.unwrap();
        }
        stalled_w
    });
    // The server keeps reading the flood although it cannot write the responses.
    let _stalled_w = within("the server reads the whole flood", flood)
        .await
        .unwrap();

    let (mut fast, mut fast_w) = connect(server.addr).await;
    for id in 0..20 {
        let started = Instant::now();
        ping_ok(&mut fast, &mut fast_w, 10_000 + id).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "ping {id} took {:?} while another client was stalled",
            started.elapsed()
        );
    }

    let mut stalled = FrameReader::new(stalled_r);
    for id in 1..=STALLED {
        let resp = stalled.expect().await;
        assert_eq!(resp["id"], json!(id), "responses in order");
        assert_pong(&resp);
        assert_eq!(
            resp["result"]["message"].as_str().map(str::len),
            Some(MESSAGE + "pong: ".len())
        );
    }
}

/// A scenario step `{"sleep_ms": 200}` runs through the host's timers (`poll_timeout` /
/// `handle_timeout`): the turn completes, and not before the delay.
async fn timers_drive_sleep_steps<R: RuntimeUnderTest>() {
    let scenario =
        Scenario::from_json(r#"{"default":[{"sleep_ms":200},{"say":"You said: {prompt}"}]}"#)
            .expect("scenario");
    let server = R::serve_tcp(HostConfig::with_scenario(scenario).with_seed(7));
    sdk::bounded(async {
        let client = sdk_client(server.addr).await;
        let created = sdk::create_session(&client, &sdk::new_session_id(), false).await;
        let started = Instant::now();
        let reply = sdk::turn(&created.session, "wait for it").await;
        let took = started.elapsed();
        assert_eq!(
            reply
                .data
                .get("content")
                .and_then(serde_json::Value::as_str),
            Some("You said: wait for it")
        );
        assert!(
            took >= Duration::from_millis(200),
            "the sleep was skipped: {took:?}"
        );
        assert!(
            took < Duration::from_secs(5),
            "the timer fired late: {took:?}"
        );
    })
    .await
}

/// `runtime.shutdown`: answered, a request that arrives after it answered with a
/// shutting-down error, every connection flushed and closed, the serving future returns
/// `Shutdown`, and the listener is gone.
async fn runtime_shutdown_returns<R: RuntimeUnderTest>() {
    let mut server = R::serve_tcp(config());
    let (mut other, mut other_w) = connect(server.addr).await;
    ping_ok(&mut other, &mut other_w, 1).await;
    let (mut reader, mut w) = connect(server.addr).await;
    ping_ok(&mut reader, &mut w, 1).await;
    w.write_all(&frame(
        &json!({"jsonrpc":"2.0","id":2,"method":"runtime.shutdown","params":{}}),
    ))
    .await
    .unwrap();
    let resp = reader.response(2).await;
    assert!(resp.get("result").is_some(), "shutdown answered: {resp}");
    // A request sent as the shutdown begins is answered with an error, not lost with the
    // connection.
    other_w
        .write_all(&frame(
            &json!({"jsonrpc":"2.0","id":3,"method":"ping","params":{}}),
        ))
        .await
        .unwrap();
    let late = other.response(3).await;
    assert_eq!(late["error"]["code"], -32000, "{late}");
    let outcome = server.stopped().await;
    assert!(matches!(outcome, Outcome::Shutdown(_)), "{outcome:?}");
    for r in [&mut reader, &mut other] {
        // Notifications may come first; then the stream ends.
        while let Ok(Some(_notification)) = within("the connection closes", r.next()).await {}
    }
    assert!(
        TcpStream::connect(server.addr).await.is_err(),
        "the listener is closed"
    );
}
