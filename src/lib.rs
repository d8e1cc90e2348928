//! agentwire: a sans-IO protocol host for AI-agent sessions.
//!
//! Agent runtimes expose their sessions over JSON-RPC so that IDEs, SDK apps and extensions
//! can watch a session's events and serve its requests (run a client-side tool, answer a
//! permission prompt, …). agentwire is that protocol host as a synchronous, deterministic
//! core: **bytes and timestamps in; frames to write and actions to perform out**. It speaks
//! the Copilot SDK protocol v3 (`Content-Length` framing) so the official Copilot SDKs can
//! drive it unmodified, and the Agent Client Protocol v1 for editors. Runtimes (tokio, smol,
//! async-std) are thin drivers around it.
//!
//! # Layers
//!
//! Imports run one way, from the dialects down to the wire:
//!
//! * [`frame`]: incremental `Content-Length` and NDJSON decoders with limits, and encoders.
//! * [`jsonrpc`]: borrowed JSON-RPC 2.0 parse (raw `params`), byte-exact ids, writers.
//! * [`correlation`]: exactly one outcome per outgoing request; one response per incoming one.
//! * [`endpoint`]: one JSON-RPC peer (decoder + correlation + outbox), usable on its own.
//! * sessions (internal): the event log (durable vs ephemeral, the `parentId` chain) and who
//!   is attached ([`Event`], [`ConnId`]).
//! * [`host`]: the dialect-neutral core — connections, sessions, fan-out with the audience
//!   rules, the pending-request bridges, capabilities, timers — and the seam its dialects
//!   plug into.
//! * [`agent`]: the agent seam ([`Agent`], [`SessionControl`]) and the built-in scripted
//!   agent ([`Scenario`]).
//!
//! # Dialects
//!
//! Every connection speaks one [`Dialect`]; each owns its method table, parameter types,
//! error wording and how a session event looks on its wire:
//!
//! * [`copilot`]: the Copilot SDK protocol v3 (`session.event`, `session.lifecycle`,
//!   `session.sendAndWait`, …) — [`Host::open`].
//! * [`acp`]: the Agent Client Protocol v1 (`session/update`, `session/request_permission`,
//!   `fs/*`, `terminal/*`) — [`Host::open_dialect`] with [`Dialect::Acp`].
//! * [`ahp`]: the Agent Host Protocol 1.0 (`subscribe`, `dispatchAction`, `action` envelopes
//!   with one `serverSeq`) — [`Host::open_dialect`] with [`Dialect::Ahp`]; its runtime cuts
//!   WebSocket messages apart (`agentwire-driver`'s WebSocket listener).
//!
//! [`serve`] holds the plain data every runtime shares ([`ServerOptions`], [`Stopped`]).
//!
//! # The run loop
//!
//! The core never reads a clock, touches a socket, sleeps or spawns. A runtime feeds it
//! inputs (`open_with`, `handle_bytes`, `handle_eof`, `handle_timeout`, and `handle_effect`
//! for its reports about the work the host asked for) and, after **every** input, drains its
//! outputs (`poll_ready` + `poll_transmit`, `poll_output`), then sleeps until
//! `poll_timeout()` or the next input. Any call order is safe, and draining everything before
//! sleeping is sufficient. Every [`Output`] must be handled: it has four variants, grouped by
//! concern (connections, the store, the cluster, effects), and it and its nested enums are
//! matched exhaustively (a new variant is a breaking change). An effect
//! ([`host::Effect`]) carries its [`EffectId`](host::EffectId), one id space for every kind;
//! the runtime reports what happened with [`Host::handle_effect`] and an
//! [`EffectEvent`](host::EffectEvent).
//!
//! ```
//! use agentwire::frame::Framing;
//! use agentwire::host::{
//!     ClusterOutput, ConnectionOutput, Effect, EffectEvent, EffectOp, Host, HostConfig, Output,
//!     StoreOutput,
//! };
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
//!             Output::Connection(ConnectionOutput::Close { conn, reason }) => {
//!                 /* flush conn, close it, log reason */
//!             }
//!             Output::Connection(ConnectionOutput::Shutdown { reason }) => {
//!                 /* stop accepting, flush all, exit */
//!             }
//!             Output::Store(StoreOutput::Persist { session, event }) => {
//!                 /* append to the session's log */
//!             }
//!             Output::Store(StoreOutput::SessionDeleted { session }) => {
//!                 /* remove the session's log */
//!             }
//!             Output::Cluster(ClusterOutput::LoadSession { session }) => {
//!                 /* restore it from a shared log if it can be served here, then: */
//!                 host.cluster().finish_session_lookup(now, &session);
//!                 /* or, when the log cannot tell: fail_session_lookup(now, &session, why) */
//!             }
//!             Output::Cluster(ClusterOutput::Forward { conn, session, frames }) => {
//!                 /* relay to the owner node */
//!             }
//!             Output::Cluster(ClusterOutput::ForwardClosed { conn }) => {
//!                 /* tell the owner node */
//!             }
//!             Output::Effect(Effect { id, op }) => match op {
//!                 EffectOp::ProcessSpawn(spec) => {
//!                     /* spawn spec.argv in its own process group (kill it after
//!                     spec.timeout_ms); report Stdout / Stderr chunks, then Exit or
//!                     SpawnFailed: host.handle_effect(now, id, EffectEvent::Exit(code)) */
//!                 }
//!                 EffectOp::ProcessWrite(bytes) => { /* write to its stdin */ }
//!                 EffectOp::ProcessKill { signal } => { /* kill its process group */ }
//!                 EffectOp::HttpRequest(request) => {
//!                     /* perform it; report HttpHead, HttpBody chunks, HttpEnd or HttpError */
//!                 }
//!                 EffectOp::HttpCancel => { /* drop the exchange, report nothing more */ }
//!                 EffectOp::FileOp(request) => {
//!                     /* perform it, then: */
//!                     let result = Err("no file system here".to_owned());
//!                     host.handle_effect(now, id, EffectEvent::FileDone(result));
//!                 }
//!             },
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
//! ids come from [`HostConfig::seed`], so a whole run replays from its inputs.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod acp;
pub mod agent;
pub mod ahp;
pub mod copilot;
pub mod correlation;
mod dialect;
pub mod endpoint;
pub mod frame;
pub mod host;
mod ids;
pub mod jsonrpc;
pub mod mcp;
pub mod model;
pub mod relay;
pub mod serve;
mod session;
pub mod telemetry;
mod time;
pub mod tool_server;

pub use agent::{Agent, AgentFactory, AgentInput, Scenario, SessionControl};
pub use dialect::Dialect;
pub use endpoint::{Endpoint, EndpointConfig, EndpointEvent};
pub use frame::{encode_frame, FrameDecoder, FrameLimits, Framing};
pub use host::{ConnId, Host, HostConfig, Output, RestoreError};
pub use serve::{ServerOptions, Stopped};
pub use session::{is_streaming_delta_type, Event, SessionId};
pub use time::Timestamp;
