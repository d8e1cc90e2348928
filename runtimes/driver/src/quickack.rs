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

use futures_lite::io::AsyncRead;

/// A TCP stream whose socket the driver can reach to re-arm `TCP_QUICKACK`: on Linux every
/// type with a file descriptor (`AsFd`, as `smol::net::TcpStream` and `async_std::net::TcpStream`
/// have, the latter with its `io_safety` feature); elsewhere every type, since nothing is set
/// there.
#[cfg(target_os = "linux")]
pub trait TcpSocket: std::os::fd::AsFd {}
#[cfg(target_os = "linux")]
impl<T: std::os::fd::AsFd> TcpSocket for T {}

/// A TCP stream whose socket the driver can reach to re-arm `TCP_QUICKACK`: on Linux every
/// type with a file descriptor (`AsFd`, as `smol::net::TcpStream` and `async_std::net::TcpStream`
/// have, the latter with its `io_safety` feature); elsewhere every type, since nothing is set
/// there.
#[cfg(not(target_os = "linux"))]
pub trait TcpSocket {}
#[cfg(not(target_os = "linux"))]
impl<T> TcpSocket for T {}

/// Sends the ACK for what was read from `stream` now, and leaves the kernel's delayed-ACK
/// mode until it re-enters it (`TCP_QUICKACK`). A no-op outside Linux.
pub fn rearm(stream: &impl TcpSocket) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    return socket2::SockRef::from(stream).set_tcp_quickack(true);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = stream;
        Ok(())
    }
}

/// The reading half (or clone) of an accepted TCP connection that re-arms `TCP_QUICKACK` (see
/// [`rearm`]) after every read that returned data.
pub struct QuickAckReader<S>(pub S);

impl<S: AsyncRead + TcpSocket + Unpin> AsyncRead for QuickAckReader<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.0).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            // Best effort: a failure only means the peer may wait for a delayed ACK.
            let _ = rearm(&self.0);
        }
        polled
    }
}
