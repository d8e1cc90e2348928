//! WebSocket listeners: one JSON-RPC message per text frame (the Agent Host Protocol's
//! transport), on every runtime.
//!
//! The handshake and the framing are `async-tungstenite`'s, over the runtime's own TCP
//! streams (`futures-io`), so tokio, smol and async-std serve WebSocket the same way. The
//! host sees a byte stream like any other: each incoming text (or binary) message is handed
//! to it whole, behind a `Content-Length` header ([`WsReader`]), so a pretty-printed message
//! with newlines inside is one message; each body the host writes leaves as one text frame
//! ([`WsWriter`] cuts the host's `Content-Length` frames apart again).
//!
//! Limits: a message or frame larger than [`WebSocketOptions::max_message_bytes`] ends the
//! connection with close code 1009 (message too big). With a connection token, the upgrade
//! request must carry `Authorization: Bearer <token>`; otherwise it is answered 401 and no
//! connection is opened.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use agentwire::frame::{FrameDecoder, FrameLimits, Framing};
use agentwire::host::Dialect;
use agentwire::serve::Stopped;
use async_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use async_tungstenite::tungstenite::http::StatusCode;
use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use async_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use async_tungstenite::tungstenite::{Error as WsError, Message};
use async_tungstenite::WebSocketStream;
use futures_lite::future;
use futures_lite::io::{AsyncRead, AsyncWrite};
use futures_lite::Stream;
use futures_sink::Sink;
use tracing::{debug, warn};

use crate::tasks::{attach_streams_with, ensure_timer};
use crate::{Driver, Runtime};

/// How a WebSocket listener serves its connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebSocketOptions {
    /// The protocol its connections speak (the Agent Host Protocol, [`Dialect::Ahp`]).
    pub dialect: Dialect,
    /// The token the upgrade request must carry as `Authorization: Bearer <token>`; `None`:
    /// no token is asked for.
    pub bearer_token: Option<String>,
    /// The largest message (and frame) accepted, in bytes. Default: 16 MiB.
    pub max_message_bytes: usize,
}

impl WebSocketOptions {
    /// The default for [`WebSocketOptions::max_message_bytes`]: 16 MiB.
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

    /// Options for an AHP listener with `bearer_token`.
    pub fn ahp(bearer_token: Option<String>) -> Self {
        WebSocketOptions {
            dialect: Dialect::Ahp,
            bearer_token,
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

impl<R: Runtime> Driver<R> {
    /// Binds a WebSocket listener on `addr` (port 0 picks a free port) and returns its local
    /// address together with the future that serves it (see [`Driver::serve_websocket`]).
    pub async fn bind_websocket(
        &self,
        addr: impl std::net::ToSocketAddrs,
        options: WebSocketOptions,
    ) -> io::Result<(
        SocketAddr,
        impl std::future::Future<Output = Stopped> + Send + 'static,
    )> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let listener = R::tcp_listener(listener)?;
        let local = R::local_addr(&listener)?;
        let server = self.clone();
        Ok((local, async move {
            server.serve_websocket(listener, options).await
        }))
    }

    /// Accepts WebSocket connections on `listener` until the host shuts down: each is
    /// upgraded (its token checked) on a task of its own, then served as a connection
    /// speaking `options.dialect`. Returns when the server shut down.
    pub async fn serve_websocket(
        &self,
        listener: R::TcpListener,
        options: WebSocketOptions,
    ) -> Stopped {
        ensure_timer(&self.shared);
        let options = Arc::new(options);
        loop {
            let next = future::or(async { Err(self.shutdown_requested().await) }, async {
                Ok(R::accept(&listener).await)
            })
            .await;
            match next {
                Err(reason) => return Stopped::Shutdown { reason },
                Ok(Ok((reader, writer, peer))) => {
                    let server = self.clone();
                    let options = options.clone();
                    R::spawn(Box::pin(async move {
                        server.upgrade(reader, writer, peer, &options).await;
                    }));
                }
                Ok(Err(e)) => {
                    warn!(error = %e, "accept failed");
                    R::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// The WebSocket handshake on one accepted connection, then the connection.
    // The token check's refusal is the library's `ErrorResponse` (an HTTP response), as its
    // `Callback` requires.
    #[allow(clippy::result_large_err)]
    async fn upgrade(
        &self,
        reader: R::TcpReader,
        writer: R::TcpWriter,
        peer: SocketAddr,
        options: &WebSocketOptions,
    ) {
        let token = options.bearer_token.clone();
        let check =
            move |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
                let Some(token) = token else {
                    return Ok(response);
                };
                let presented = request
                    .headers()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "));
                if presented == Some(token.as_str()) {
                    Ok(response)
                } else {
                    let mut refusal = ErrorResponse::new(Some(
                        "a connection token is required: Authorization: Bearer <token>".into(),
                    ));
                    *refusal.status_mut() = StatusCode::UNAUTHORIZED;
                    Err(refusal)
                }
            };
        let config = WebSocketConfig::default()
            .max_message_size(Some(options.max_message_bytes))
            .max_frame_size(Some(options.max_message_bytes));
        let stream = Duplex { reader, writer };
        let ws = match async_tungstenite::accept_hdr_async_with_config(stream, check, Some(config))
            .await
        {
            Ok(ws) => ws,
            Err(e) => {
                debug!(%peer, error = %e, "websocket handshake failed");
                return;
            }
        };
        let shared = Arc::new(Mutex::new(ws));
        let reader = WsReader {
            ws: shared.clone(),
            pending: Vec::new(),
            at: 0,
            closing: None,
        };
        let writer = WsWriter {
            ws: shared,
            decoder: FrameDecoder::new(Framing::ContentLength, FrameLimits::default()),
            queue: VecDeque::new(),
        };
        let state = attach_streams_with(
            &self.shared,
            options.dialect,
            Framing::ContentLength,
            reader,
            writer,
        );
        debug!(conn = %state.id, %peer, "websocket accepted");
    }
}

/// A connection's two halves as one stream (what the handshake needs).
struct Duplex<Rd, Wr> {
    reader: Rd,
    writer: Wr,
}

impl<Rd: AsyncRead + Unpin, Wr: Unpin> AsyncRead for Duplex<Rd, Wr> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().reader).poll_read(cx, buf)
    }
}

impl<Rd: Unpin, Wr: AsyncWrite + Unpin> AsyncWrite for Duplex<Rd, Wr> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().writer).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().writer).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().writer).poll_close(cx)
    }
}

type Shared<S> = Arc<Mutex<WebSocketStream<S>>>;

fn lock<S>(ws: &Shared<S>) -> MutexGuard<'_, WebSocketStream<S>> {
    // A poisoned lock only means another half panicked mid-call; the stream is still usable.
    ws.lock().unwrap_or_else(|e| e.into_inner())
}

fn io_error(e: WsError) -> io::Error {
    match e {
        WsError::Io(e) => e,
        WsError::ConnectionClosed | WsError::AlreadyClosed => io::ErrorKind::BrokenPipe.into(),
        other => io::Error::new(io::ErrorKind::InvalidData, other),
    }
}

/// The reading half: each message, whole, behind a `Content-Length` header.
struct WsReader<S> {
    ws: Shared<S>,
    /// The current message, framed, and how much of it was read.
    pending: Vec<u8>,
    at: usize,
    /// A close frame to send before reporting the error that ends the connection.
    closing: Option<(Message, io::Error)>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for WsReader<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        loop {
            if me.at < me.pending.len() {
                let n = buf.len().min(me.pending.len() - me.at);
                buf[..n].copy_from_slice(&me.pending[me.at..me.at + n]);
                me.at += n;
                return Poll::Ready(Ok(n));
            }
            if let Some((close, _)) = &me.closing {
                // Tell the peer why, then end the connection (best effort).
                let mut ws = lock(&me.ws);
                let mut sink = Pin::new(&mut *ws);
                if let Poll::Ready(Ok(())) = sink.as_mut().poll_ready(cx) {
                    let _ = sink.as_mut().start_send(close.clone());
                    let _ = sink.as_mut().poll_flush(cx);
                }
                drop(ws);
                let Some((_, error)) = me.closing.take() else {
                    return Poll::Ready(Ok(0));
                };
                return Poll::Ready(Err(error));
            }
            let next = {
                let mut ws = lock(&me.ws);
                Pin::new(&mut *ws).poll_next(cx)
            };
            let body: Vec<u8> = match next {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) | Poll::Ready(Some(Ok(Message::Close(_)))) => {
                    return Poll::Ready(Ok(0))
                }
                Poll::Ready(Some(Ok(Message::Text(text)))) => text.as_bytes().to_vec(),
                Poll::Ready(Some(Ok(Message::Binary(data)))) => data.to_vec(),
                // Pings are answered by the library; nothing for the host.
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(Some(Err(WsError::Capacity(e)))) => {
                    let reason = e.to_string();
                    let close = Message::Close(Some(CloseFrame {
                        code: CloseCode::Size,
                        reason: reason.clone().into(),
                    }));
                    me.closing = Some((close, io::Error::new(io::ErrorKind::InvalidData, reason)));
                    continue;
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(io_error(e))),
            };
            me.pending.clear();
            me.pending
                .extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            me.pending.extend_from_slice(&body);
            me.at = 0;
        }
    }
}

/// The writing half: the host's `Content-Length` frames, each sent as one text message.
struct WsWriter<S> {
    ws: Shared<S>,
    decoder: FrameDecoder,
    /// Whole messages cut from what the host wrote, not yet handed to the socket.
    queue: VecDeque<Message>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> WsWriter<S> {
    /// Hands every queued message to the socket; `Pending` while it cannot take more.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut ws = lock(&self.ws);
        let mut sink = Pin::new(&mut *ws);
        while let Some(message) = self.queue.pop_front() {
            match sink.as_mut().poll_ready(cx) {
                Poll::Ready(Ok(())) => sink.as_mut().start_send(message).map_err(io_error)?,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(io_error(e))),
                Poll::Pending => {
                    self.queue.push_front(message);
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for WsWriter<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        me.decoder
            .push(buf)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        loop {
            match me.decoder.next_frame() {
                Ok(Some(body)) => me.queue.push_back(match String::from_utf8(body.to_vec()) {
                    Ok(text) => Message::text(text),
                    Err(e) => Message::binary(e.into_bytes()),
                }),
                Ok(None) => break,
                Err(e) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
            }
        }
        // Accepted; what the socket cannot take yet goes out on the next write or flush.
        let _ = me.drain(cx)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        let mut ws = lock(&me.ws);
        Pin::new(&mut *ws).poll_flush(cx).map_err(io_error)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        let mut ws = lock(&me.ws);
        match Pin::new(&mut *ws).poll_close(cx) {
            Poll::Ready(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => {
                Poll::Ready(Ok(()))
            }
            other => other.map_err(io_error),
        }
    }
}
