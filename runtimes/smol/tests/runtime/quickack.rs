//! `TCP_QUICKACK` is re-armed after every read through the driver's [`QuickAckReader`].

use agentwire_driver::{rearm_quickack as rearm, QuickAckReader};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};

/// Whether the kernel says the socket is in quick-ACK mode (not in delayed-ACK mode).
#[cfg(target_os = "linux")]
fn quick(stream: &smol::net::TcpStream) -> bool {
    socket2::SockRef::from(stream).tcp_quickack().unwrap()
}

/// Puts the socket in delayed-ACK ("pingpong") mode, as a reply would.
#[cfg(target_os = "linux")]
fn delay_acks(stream: &smol::net::TcpStream) {
    socket2::SockRef::from(stream)
        .set_tcp_quickack(false)
        .unwrap();
    assert!(!quick(stream));
}

/// The option call succeeds on an accepted connection and (on Linux) switches it out of
/// delayed-ACK mode; reading through the wrapper delivers the bytes and switches it again.
#[test]
fn rearm_succeeds_on_an_accepted_connection_and_every_read_rearms() {
    smol::block_on(async {
        let listener = smol::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = smol::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        #[cfg(target_os = "linux")]
        delay_acks(&accepted);
        rearm(&accepted).expect("TCP_QUICKACK on an accepted TCP stream");
        #[cfg(target_os = "linux")]
        assert!(quick(&accepted));

        #[cfg(target_os = "linux")]
        delay_acks(&accepted);
        let mut reader = QuickAckReader(accepted.clone());
        client
            .write_all(b"Content-Length: 2\r\n\r\n{}")
            .await
            .unwrap();
        let mut got = vec![0u8; 23];
        reader.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"Content-Length: 2\r\n\r\n{}");
        #[cfg(target_os = "linux")]
        assert!(quick(&accepted), "a read re-arms TCP_QUICKACK");
    });
}
