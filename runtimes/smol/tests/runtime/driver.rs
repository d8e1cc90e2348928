//! The driver's API over in-memory pipes (`piper`), on smol alone: `attach`, `serve_stream`,
//! `Connection::closed`, `shutdown` with a stalled peer, `with_host`. The TCP behaviour, the
//! SDK and the binary are covered for all three runtimes by
//! `runtimes/cli/tests/e2e/conformance.rs`.

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use agentwire_smol::agentwire::host::HostConfig;
use agentwire_smol::{Server, ServerOptions, Stopped};
use futures_lite::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use futures_lite::{future, AsyncRead};
use serde_json::{json, Value};

const PROMPT: Duration = Duration::from_secs(10);

fn server() -> Server {
    Server::new(HostConfig::default().with_seed(7))
}

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    future::or(async { Some(fut.await) }, async {
        smol::Timer::after(PROMPT).await;
        None
    })
    .await
    .unwrap_or_else(|| panic!("{what}: not within {PROMPT:?}"))
}

fn ping(id: u64) -> Vec<u8> {
    let body = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": {"message": "hi"}}),
    )
    .unwrap();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(&body);
    out
}

/// The next Content-Length frame's body; `None` at a clean end of stream.
async fn next_frame<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> io::Result<Option<Value>> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            len = v.parse().ok();
        }
    }
    let mut body = vec![0; len.expect("Content-Length")];
    r.read_exact(&mut body).await?;
    Ok(Some(serde_json::from_slice(&body).expect("JSON body")))
}

async fn expect_pong<R: AsyncRead + Unpin>(r: &mut BufReader<R>, id: u64) {
    let v = within("a response", next_frame(r))
        .await
        .unwrap()
        .expect("a frame");
    assert_eq!(v["id"], json!(id), "{v}");
    assert_eq!(v["result"]["message"], "pong: hi", "{v}");
}

#[test]
fn serve_stream_answers_then_returns_disconnected_at_end_of_input() {
    smol::block_on(async {
        let server = server();
        let (server_r, mut client_w) = piper::pipe(64 * 1024);
        let (mut client_r, server_w) = piper::pipe(64 * 1024);
        let serving = smol::spawn({
            let server = server.clone();
            async move { server.serve_stream(server_r, server_w).await }
        });
        let mut reader = BufReader::new(&mut client_r);
        for id in 1..=3 {
            client_w.write_all(&ping(id)).await.unwrap();
            expect_pong(&mut reader, id).await;
        }
        assert_eq!(server.connection_count(), 1);
        drop(client_w);
        let end = within("the stream ends", next_frame(&mut reader)).await;
        assert!(matches!(end, Ok(None)), "{end:?}");
        assert_eq!(
            within("serve_stream returns", serving).await,
            Stopped::Disconnected
        );
        assert_eq!(server.connection_count(), 0);
    })
}

#[test]
fn shutdown_flushes_and_is_bounded_by_the_flush_timeout() {
    smol::block_on(async {
        let server = Server::with_options(
            HostConfig::default(),
            ServerOptions {
                flush_timeout: Duration::from_millis(500),
                ..ServerOptions::default()
            },
        );
        // A peer that never reads, behind a pipe too small for one response.
        let (stalled_r, mut stalled_w) = piper::pipe(1024);
        let (_stalled_out, stalled_sink) = piper::pipe(16);
        let stalled = server.attach(stalled_r, stalled_sink);
        stalled_w.write_all(&ping(1)).await.unwrap();

        let (r, mut w) = piper::pipe(64 * 1024);
        let (mut out, sink) = piper::pipe(64 * 1024);
        let healthy = server.attach(r, sink);
        w.write_all(&ping(2)).await.unwrap();
        let mut reader = BufReader::new(&mut out);
        expect_pong(&mut reader, 2).await;

        let started = Instant::now();
        server.shutdown("test is over");
        assert_eq!(
            within("shutdown_requested", server.shutdown_requested()).await,
            "test is over"
        );
        within("the healthy connection closes", healthy.closed()).await;
        within("the stalled connection is dropped", stalled.closed()).await;
        assert!(stalled.is_closed() && healthy.is_closed());
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "bounded by the flush timeout: {:?}",
            started.elapsed()
        );
        assert_eq!(server.connection_count(), 0);
        // The last frame is the shutdown notice (as on every runtime), then the stream ends.
        let notice = within("the shutdown notice", next_frame(&mut reader)).await;
        assert_eq!(
            notice.ok().flatten(),
            Some(json!({"jsonrpc":"2.0","method":"agentwire/shutdown",
                        "params":{"reason":"test is over"}}))
        );
        let end = within("the healthy stream ends", next_frame(&mut reader)).await;
        assert!(matches!(end, Ok(None)), "{end:?}");
    })
}

#[test]
fn with_host_runs_under_the_lock_with_the_time() {
    let server = server();
    let (r, _w) = piper::pipe(1024);
    let (_out, sink) = piper::pipe(1024);
    let conn = server.attach(r, sink);
    let (count, now) = server.with_host(|host, now| (host.connection_count(), now));
    assert_eq!(count, 1);
    assert!(now.as_millis() > 0);
    assert!(!conn.is_closed());
}
