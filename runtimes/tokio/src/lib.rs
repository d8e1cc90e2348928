//! A tokio runtime for the [`agentwire`] sans-IO core: stdio, TCP and in-memory streams.
//!
//! One [`Server`] drives one [`Host`](agentwire::host::Host) over any number of connections:
//! a reader and a writer task per connection, one timer task, and every host output acted on
//! — close, shutdown with the [`SHUTDOWN_NOTIFICATION`], the session store
//! ([`Server::with_store`]), shell commands — plus graceful shutdown on signals
//! ([`Server::shutdown_on_signals`]). All of that is written once, in `agentwire-driver`,
//! for every runtime; this crate supplies tokio's spawning, timers and I/O ([`Tokio`]) and a
//! [`Server`] that takes tokio's streams.
//!
//! # Example
//!
//! ```no_run
//! use agentwire_tokio::agentwire::host::HostConfig;
//! use agentwire_tokio::Server;
//!
//! # async fn demo() -> std::io::Result<()> {
//! let server = Server::new(HostConfig::default());
//! let (addr, serving) = server.bind_tcp("127.0.0.1:0").await?;
//! println!("listening on port {}", addr.port());
//! let stopped = serving.await; // returns after a client calls `runtime.shutdown`
//! println!("{stopped:?}");
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod quickack;
pub use quickack::QuickAckReader;
mod runtime;
mod server;

pub use agentwire_driver::{
    agentwire, agentwire_store, now, Connection, Driver, ServerOptions, Stopped, READ_CHUNK,
    SHUTDOWN_NOTIFICATION,
};
pub use runtime::Tokio;
pub use server::Server;
