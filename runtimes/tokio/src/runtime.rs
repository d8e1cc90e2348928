//! [`Tokio`]: the driver's [`Runtime`] on tokio.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use agentwire_driver::{Runtime, Task};

use crate::quickack::QuickAckReader;
use tokio::net::tcp::OwnedWriteHalf;
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The tokio [`Runtime`]: tasks with `tokio::spawn`, `tokio::time::sleep`, `tokio::net` TCP and
/// `tokio::io` stdio, tokio's streams seen as `futures-io` ones through `tokio-util`'s
/// `Compat`. Everything that takes tasks must run inside a tokio runtime.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tokio;

impl Runtime for Tokio {
    type TcpListener = tokio::net::TcpListener;
    /// Re-arms `TCP_QUICKACK` after every read (see [`QuickAckReader`]).
    type TcpReader = Compat<QuickAckReader>;
    type TcpWriter = Compat<OwnedWriteHalf>;
    type Stdin = Compat<tokio::io::Stdin>;
    type Stdout = Compat<tokio::io::Stdout>;

    fn spawn(task: Task) {
        // Dropping the handle detaches the task.
        drop(tokio::spawn(task));
    }

    fn sleep(duration: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(duration)
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        // Puts the task behind the others (futures-lite's would run it again at once).
        tokio::task::yield_now()
    }

    fn tcp_listener(listener: std::net::TcpListener) -> io::Result<Self::TcpListener> {
        tokio::net::TcpListener::from_std(listener)
    }

    fn local_addr(listener: &Self::TcpListener) -> io::Result<SocketAddr> {
        listener.local_addr()
    }

    async fn accept(
        listener: &Self::TcpListener,
    ) -> io::Result<(Self::TcpReader, Self::TcpWriter, SocketAddr)> {
        let (stream, peer) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let (reader, writer) = stream.into_split();
        Ok((QuickAckReader(reader).compat(), writer.compat_write(), peer))
    }

    fn stdio() -> (Self::Stdin, Self::Stdout) {
        (
            tokio::io::stdin().compat(),
            tokio::io::stdout().compat_write(),
        )
    }
}
