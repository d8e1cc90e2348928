//! Library-level tests of the driver over in-memory streams and TCP. Only `ping` (and, for the
//! shutdown path, `runtime.shutdown`) of the host's protocol is relied on.

use std::time::{Duration, Instant};

use agentwire_testkit::wire::{assert_pong, frame, ping, ping_ok, FrameReader, PROMPT};
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::{Server, ServerOptions, Stopped};
use serde_json::json;
use tokio::io::AsyncWriteExt;

fn server() -> Server {
    Server::new(HostConfig::default().with_seed(7))
}

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PROMPT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {PROMPT:?}"))
}

#[tokio::test]
async fn ping_over_duplex_then_disconnect() {
    let server = server();
    let (client, remote) = tokio::io::duplex(64 * 1024);
    let (sr, sw) = tokio::io::split(remote);
    let serving = tokio::spawn({
        let server = server.clone();
        async move { server.serve_stream(sr, sw).await }
    });
    let (cr, mut cw) = tokio::io::split(client);
    let mut reader = FrameReader::new(cr);
    ping_ok(&mut reader, &mut cw, 1).await;
    ping_ok(&mut reader, &mut cw, 2).await;
    assert_eq!(server.connection_count(), 1);

    drop(cw);
    drop(reader);
    let stopped = within("serve_stream returns", serving).await.unwrap();
    assert_eq!(stopped, Stopped::Disconnected);
    assert_eq!(server.connection_count(), 0);
}

#[tokio::test]
async fn input_split_into_single_bytes_is_reassembled() {
    let server = server();
    let (client, remote) = tokio::io::duplex(64 * 1024);
    let (sr, sw) = tokio::io::split(remote);
    server.attach(sr, sw);
    let (cr, mut cw) = tokio::io::split(client);
    for b in ping(41, Some("bytes")) {
        cw.write_all(&[b]).await.unwrap();
        cw.flush().await.unwrap();
        tokio::task::yield_now().await;
    }
    let resp = FrameReader::new(cr).response(41).await;
    assert_pong(&resp);
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let server = server();
    let (client, remote) = tokio::io::duplex(1024);
    let (sr, sw) = tokio::io::split(remote);
    server.attach(sr, sw);
    let (cr, mut cw) = tokio::io::split(client);
    let writer = tokio::spawn(async move {
        let mut all = Vec::new();
        for id in 1..=200 {
            all.extend(ping(id, Some(&format!("n{id}"))));
        }
        cw.write_all(&all).await.unwrap();
        cw
    });
    let mut reader = FrameReader::new(cr);
    for id in 1..=200u64 {
        let resp = reader.response(id).await;
        assert_pong(&resp);
        assert_eq!(resp["result"]["message"], format!("pong: n{id}"));
    }
    writer.await.unwrap();
}

/// The peer stops sending (half-close) right after a request: the response already queued is
/// still written, then the connection ends.
#[tokio::test]
async fn end_of_input_flushes_queued_frames_then_closes() {
    let server = server();
    let (client, remote) = tokio::io::duplex(64 * 1024);
    let (sr, sw) = tokio::io::split(remote);
    let conn = server.attach(sr, sw);
    let (cr, mut cw) = tokio::io::split(client);
    cw.write_all(&ping(5, None)).await.unwrap();
    cw.shutdown().await.unwrap();
    let mut reader = FrameReader::new(cr);
    assert_pong(&reader.response(5).await);
    within("connection ends", conn.closed()).await;
    assert!(conn.is_closed());
    let end = within("stream ends", reader.next()).await.unwrap();
    assert!(end.is_none(), "no frame after close: {end:?}");
    assert_eq!(server.connection_count(), 0);
}

/// One client stops reading entirely; its writer blocks on a full pipe. Another client's
/// pings must still complete promptly, and the stalled client later gets all its responses
/// in order.
#[tokio::test]
async fn slow_reader_does_not_stall_other_connections() {
    let server = server();

    // Stalled client: a tiny pipe that it never reads while the other client works.
    let (slow, slow_remote) = tokio::io::duplex(512);
    let (sr, sw) = tokio::io::split(slow_remote);
    server.attach(sr, sw);
    let (slow_r, mut slow_w) = tokio::io::split(slow);
    const STALLED: u64 = 50;
    let mut burst = Vec::new();
    for id in 1..=STALLED {
        burst.extend(ping(
            id,
            Some("a message long enough to fill the pipe quickly"),
        ));
    }
    slow_w.write_all(&burst).await.unwrap();

    // Healthy client.
    let (fast, fast_remote) = tokio::io::duplex(64 * 1024);
    let (fr, fw) = tokio::io::split(fast_remote);
    server.attach(fr, fw);
    let (fast_r, mut fast_w) = tokio::io::split(fast);
    let mut fast_reader = FrameReader::new(fast_r);
    for id in 1..=20 {
        let started = Instant::now();
        ping_ok(&mut fast_reader, &mut fast_w, 1000 + id).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "ping {id} took {:?} while another client was stalled",
            started.elapsed()
        );
    }

    // Now drain the stalled client: everything arrives, in order.
    let mut slow_reader = FrameReader::new(slow_r);
    for id in 1..=STALLED {
        let resp = slow_reader.expect().await;
        assert_eq!(resp["id"], json!(id), "responses in order");
        assert_pong(&resp);
    }
}

#[tokio::test]
async fn peer_vanishing_ends_only_its_connection() {
    let server = server();
    let (gone, gone_remote) = tokio::io::duplex(1024);
    let (gr, gw) = tokio::io::split(gone_remote);
    let gone_conn = server.attach(gr, gw);
    let (stay, stay_remote) = tokio::io::duplex(64 * 1024);
    let (tr, tw) = tokio::io::split(stay_remote);
    let stay_conn = server.attach(tr, tw);
    assert_eq!(server.connection_count(), 2);

    {
        let mut gone = gone;
        gone.write_all(&ping(1, None)).await.unwrap();
    } // dropped: reads fail/EOF and writes fail on the server side.
    within("vanished connection ends", gone_conn.closed()).await;
    assert_eq!(server.connection_count(), 1);
    assert!(!stay_conn.is_closed());

    let (r, mut w) = tokio::io::split(stay);
    let mut reader = FrameReader::new(r);
    ping_ok(&mut reader, &mut w, 2).await;
}

#[tokio::test]
async fn server_shutdown_flushes_and_closes_every_connection() {
    let server = Server::with_options(
        HostConfig::default(),
        ServerOptions {
            flush_timeout: Duration::from_secs(2),
            ..ServerOptions::default()
        },
    );
    let (a, a_remote) = tokio::io::duplex(64 * 1024);
    let (ar, aw) = tokio::io::split(a_remote);
    let serving = tokio::spawn({
        let server = server.clone();
        async move { server.serve_stream(ar, aw).await }
    });
    // A stalled peer must not hold shutdown up beyond the flush timeout.
    let (stalled, stalled_remote) = tokio::io::duplex(64);
    let (sr, sw) = tokio::io::split(stalled_remote);
    let stalled_conn = server.attach(sr, sw);
    let (_stalled_r, mut stalled_w) = tokio::io::split(stalled);
    stalled_w.write_all(&ping(1, None)).await.unwrap();

    let (a_r, mut a_w) = tokio::io::split(a);
    let mut a_reader = FrameReader::new(a_r);
    ping_ok(&mut a_reader, &mut a_w, 1).await;

    let started = Instant::now();
    server.shutdown("test is over");
    let stopped = within("serve_stream returns", serving).await.unwrap();
    assert_eq!(
        stopped,
        Stopped::Shutdown {
            reason: "test is over".into()
        }
    );
    within("stalled connection dropped", stalled_conn.closed()).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "bounded by the flush timeout"
    );
    assert_eq!(server.connection_count(), 0);
    // The last message says why, then the stream ends.
    let notice = within("the shutdown notice", a_reader.next())
        .await
        .unwrap();
    assert_eq!(
        notice,
        Some(json!({"jsonrpc":"2.0","method":"agentwire/shutdown",
                    "params":{"reason":"test is over"}}))
    );
    let end = within("a's stream ends", a_reader.next()).await.unwrap();
    assert!(end.is_none());
    assert_eq!(server.shutdown_requested().await, "test is over");
}

/// `runtime.shutdown` (the host's `ConnectionOutput::Shutdown`): its response is flushed before the
/// connection closes, and the serving future returns.
#[tokio::test]
async fn runtime_shutdown_is_answered_then_serving_returns() {
    let server = server();
    let (bound, serving) = server.bind_tcp("127.0.0.1:0").await.unwrap();
    let serving = tokio::spawn(serving);
    let stream = tokio::net::TcpStream::connect(bound).await.unwrap();
    let (r, mut w) = stream.into_split();
    let mut reader = FrameReader::new(r);
    ping_ok(&mut reader, &mut w, 1).await;
    w.write_all(&frame(
        &json!({"jsonrpc":"2.0","id":2,"method":"runtime.shutdown","params":{}}),
    ))
    .await
    .unwrap();
    let resp = reader.response(2).await;
    assert!(resp.get("result").is_some(), "shutdown answered: {resp}");
    let stopped = within("serve_tcp returns", serving).await.unwrap();
    assert!(matches!(stopped, Stopped::Shutdown { .. }), "{stopped:?}");
    // The listener is gone.
    assert!(tokio::net::TcpStream::connect(bound).await.is_err());
}

#[tokio::test]
async fn tcp_clients_share_one_host() {
    let server = server();
    let (bound, serving) = server.bind_tcp("127.0.0.1:0").await.unwrap();
    let serving = tokio::spawn(serving);
    let mut clients = Vec::new();
    for _ in 0..3 {
        let (r, w) = tokio::net::TcpStream::connect(bound)
            .await
            .unwrap()
            .into_split();
        clients.push((FrameReader::new(r), w));
    }
    for round in 0..3u64 {
        for (i, (r, w)) in clients.iter_mut().enumerate() {
            ping_ok(r, w, round * 10 + i as u64).await;
        }
    }
    assert_eq!(server.connection_count(), 3);
    let (_, mut w) = clients.pop().unwrap();
    w.shutdown().await.unwrap();
    let deadline = Instant::now() + PROMPT;
    while server.connection_count() != 2 {
        assert!(Instant::now() < deadline, "closed client not forgotten");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.shutdown("done");
    within("serve_tcp returns", serving).await.unwrap();
    for (mut r, _) in clients {
        let notice = within("client sees the shutdown notice", r.next()).await;
        assert!(
            matches!(&notice, Ok(Some(m)) if m["method"] == "agentwire/shutdown"),
            "{notice:?}"
        );
        let end = within("client sees the close", r.next()).await;
        assert!(matches!(end, Ok(None) | Err(_)), "{end:?}");
    }
}

#[tokio::test]
async fn with_host_runs_under_the_lock() {
    let server = server();
    let (_client, remote) = tokio::io::duplex(1024);
    let (r, w) = tokio::io::split(remote);
    let conn = server.attach(r, w);
    let (id, now) = server.with_host(|_host, now| (conn.id(), now));
    assert_eq!(id, conn.id());
    assert!(now.as_millis() > 0);
}
