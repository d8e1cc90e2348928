//! Immediate ACKs on accepted TCP connections, so that clients with Nagle's algorithm on do
//! not stall on this server's delayed ACK.
//!
//! The official Node SDK writes each frame's header and body in two `write`s and leaves Nagle
//! on: its kernel holds the body until the header is acknowledged, and Linux delays that ACK
//! by up to 40 ms (more once its delayed-ACK timer has backed off) whenever the connection
//! looks interactive. `TCP_QUICKACK` makes the kernel send a pending ACK at once, but it is
//! not sticky: the kernel falls back to delayed ACKs by itself (every reply this server sends
//! re-enters that mode), so [`QuickAckReader`] sets it again after every read that returned
//! data. Setting it flushes the ACK for the bytes just read, which releases the client's
//! held-back body. Linux only; elsewhere the wrapper only reads.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::tcp::OwnedReadHalf;

/// Sends the ACK for what was read from `stream` now, and leaves the kernel's delayed-ACK
/// mode until it re-enters it (`TCP_QUICKACK`). A no-op outside Linux.
pub(crate) fn rearm(stream: &tokio::net::TcpStream) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    return socket2::SockRef::from(stream).set_tcp_quickack(true);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = stream;
        Ok(())
    }
}

/// The read half of an accepted TCP connection that re-arms `TCP_QUICKACK` (see [`rearm`])
/// after every read that returned data.
pub struct QuickAckReader(pub(crate) OwnedReadHalf);

impl AsyncRead for QuickAckReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.0).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            // Best effort: a failure only means the peer may wait for a delayed ACK.
            let _ = rearm(self.0.as_ref());
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Whether the kernel says the socket is in quick-ACK mode (not in delayed-ACK mode).
    #[cfg(target_os = "linux")]
    fn quick(stream: &tokio::net::TcpStream) -> bool {
        socket2::SockRef::from(stream).tcp_quickack().unwrap()
    }

    /// Puts the socket in delayed-ACK ("pingpong") mode, as a reply would.
    #[cfg(target_os = "linux")]
    fn delay_acks(stream: &tokio::net::TcpStream) {
        socket2::SockRef::from(stream)
            .set_tcp_quickack(false)
            .unwrap();
        assert!(!quick(stream));
    }

    /// The option call succeeds on an accepted connection and (on Linux) switches it out of
    /// delayed-ACK mode; reading through the wrapper delivers the bytes and switches it again.
    #[tokio::test]
    async fn rearm_succeeds_on_an_accepted_connection_and_every_read_rearms() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
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
        let (r, _w) = accepted.into_split();
        let mut reader = QuickAckReader(r);
        client
            .write_all(b"Content-Length: 2\r\n\r\n{}")
            .await
            .unwrap();
        let mut got = vec![0u8; 23];
        reader.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"Content-Length: 2\r\n\r\n{}");
        #[cfg(target_os = "linux")]
        assert!(quick(reader.0.as_ref()), "a read re-arms TCP_QUICKACK");
    }
}
