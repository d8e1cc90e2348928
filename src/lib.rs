//! agentwire: a sans-IO protocol host for AI-agent sessions.
//!
//! Agent runtimes expose their sessions over JSON-RPC so that IDEs, SDK apps and extensions
//! can watch a session's events and serve its requests (run a client-side tool, answer a
//! permission prompt, …). agentwire is that protocol host as a synchronous, deterministic
//! core: **bytes and timestamps in; frames to write and actions to perform out**. It speaks
//! the Copilot SDK protocol v3 (`Content-Length` framing) so the official Copilot SDKs can
//! drive it unmodified. Runtimes (tokio in `agentwire-tokio`) are thin drivers around it.
//!
//! # Layers
//!
//! * [`frame`]: incremental `Content-Length` and NDJSON decoders with limits, and encoders.
//! * [`jsonrpc`]: borrowed JSON-RPC 2.0 parse (raw `params`), byte-exact ids, writers.
//! * [`correlation`]: exactly one outcome per outgoing request; one response per incoming one.
//! * [`endpoint`]: one JSON-RPC peer (decoder + correlation + outbox), usable on its own.
//! * [`host`]: many connections and sessions, event fan-out, bridges, the Copilot dialect.
//! * [`agent`]: the agent seam and the built-in scripted agent.
//!
//! # The run loop
//!
//! The core never reads a clock, touches a socket, sleeps or spawns. A runtime feeds it
//! inputs (`open`, `handle_bytes`, `handle_eof`, `handle_timeout`) and, after **every**
//! input, drains its outputs (`poll_ready` + `poll_transmit`, `poll_output`), then sleeps
//! until `poll_timeout()` or the next input. Any call order is safe, and draining
//! everything before sleeping is sufficient.
//!
//! ```
//! use agentwire::frame::Framing;
//! use agentwire::host::{Host, HostConfig, Output};
//! use agentwire::Timestamp;
//!
//! let mut host = Host::new(HostConfig::default());
//! let mut now = Timestamp::from_millis(1_795_983_976_952);
//! let conn = host.open(now, Framing::ContentLength);
//!
//! // Bytes read from the socket (here: one framed `ping`, split in two reads).
//! let body = br#"{"jsonrpc":"2.0","id":0,"method":"ping","params":{"message":"hi"}}"#;
//! let wire = [format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(), body].concat();
//! let mut written = Vec::new();
//! for chunk in wire.chunks(20) {
//!     host.handle_bytes(now, conn, chunk);
//!     // Drain everything the input produced.
//!     while let Some(ready) = host.poll_ready() {
//!         while let Some(frame) = host.poll_transmit(ready) {
//!             written.extend_from_slice(&frame); // socket.write_all(&frame)
//!         }
//!     }
//!     while let Some(output) = host.poll_output() {
//!         match output {
//!             Output::Close { conn, reason } => { /* flush conn, close it, log reason */ }
//!             Output::Shutdown { reason } => { /* stop accepting, flush all, exit */ }
//!             // Output::Persist / SessionDeleted (a durable store), and later additions.
//!             _ => {}
//!         }
//!     }
//!     // Sleep until the next deadline (or the next input), then:
//!     if let Some(deadline) = host.poll_timeout() {
//!         now = deadline;
//!         host.handle_timeout(now);
//!     }
//! }
//! let text = String::from_utf8(written).unwrap();
//! assert!(text.starts_with("Content-Length: "));
//! assert!(text.contains(r#""message":"pong: hi""#));
//! ```
//!
//! Time and randomness are inputs too: [`Timestamp`] values come from the runtime and event
//! ids come from [`host::HostConfig::seed`], so a whole run replays from its inputs.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod acp;
pub mod agent;
pub mod copilot;
pub mod correlation;
pub mod endpoint;
pub mod frame;
pub mod host;
pub mod ids;
pub mod jsonrpc;
pub mod model;
pub mod serve;
pub mod session;
pub mod time;

pub use time::Timestamp;
