//! Cluster foundation for agentwire on NATS JetStream.
//!
//! Several agentwire nodes share sessions through one JetStream stream (one subject per
//! session, one event per message), a KV bucket of node leases, and core NATS live subjects.
//! This crate holds the parts that do not depend on the host:
//!
//! * I/O-free protocol state machines, usable by a deterministic simulation:
//!   [`escape`] (session ids as subject tokens and KV keys), [`link_messages`] (numbered gateway
//!   link messages and heartbeats), [`record`] (message ids and claim
//!   records), [`writer`] (the fenced single writer of a session log), [`resolve`] (lost
//!   acknowledgements), [`lease`] (node leases), [`takeover`] (the claim and who should make it).
//!   They talk to the engine only through [`call::Call`] and [`call::Reply`] values.
//! * [`machines`]: the node's top half, sans-IO as well (no tokio, no clock: inputs, a `now`,
//!   and `poll_*` outputs, as quinn-proto's `Connection`): a gateway following its client's
//!   session ([`machines::gateway`]), both directions of a link or relay group
//!   ([`machines::outbound`], [`machines::inbound`]), the owner's side of a relayed client
//!   ([`machines::member`]), both sides of a relay group ([`machines::group_out`],
//!   [`machines::group_in`]), and a session's claim, single writer and lookup
//!   ([`machines::claim`], [`machines::worker`], [`machines::lookup`]), the node's session log
//!   composing them ([`machines::sessions`]), its lease over its life
//!   ([`machines::keeper`]), and both sides of all its links and groups
//!   ([`machines::owner_links`], [`machines::gateway_links`]). The host simulation
//!   (`tests/cluster/host_simulation`) runs the same machines over the in-memory engine.
//! * [`engine::Engine`]: what the protocol needs from JetStream, implemented by
//!   [`memory::MemoryEngine`] (a deterministic model with fault injection) and
//!   [`nats::NatsEngine`] (the official `async-nats` client).
//! * [`drive`]: async loops that run the state machines against any engine.
//! * [`node`]: one agentwire node on NATS: its lease, and the driver's session log that
//!   appends its sessions' events with the fenced writer and claims sessions of dead nodes;
//!   its gateways relay clients of remote sessions to their owner over links (client → owner,
//!   one per client) and relay groups (owner → gateway node, one ordered stream for all the
//!   clients that node relays, each event once: `agentwire::host::ClusterApi::join_relay_group`).
//!   Its tokio tasks (`gateway.rs`, `link.rs`, `group.rs`, `owner.rs`, `node.rs`) are the
//!   glue: each runs a machine against NATS, the engine and the driver's `HostHandle`.
//!
//! Safety rests on the log, not the lease: every append expects the subject's last sequence,
//! so once a new owner's claim record is stored, no append of an older owner can be stored.
//! The lease only keeps nodes from trying to own a session at the same time.
#![warn(missing_docs)]

pub mod call;
mod catalog;
pub mod drive;
pub mod engine;
pub mod escape;
mod gateway;
mod group;
pub mod layout;
pub mod lease;
mod link;
pub mod link_messages;
pub mod machines;
pub mod memory;
pub mod nats;
pub mod node;
mod owner;
pub mod parts;
pub mod record;
pub mod resolve;
mod shared;
mod sync;
pub mod takeover;
mod wire;
pub mod writer;

pub use engine::{
    AppendAck, AppendError, AppendRequest, Engine, EngineError, KvEntry, KvError, LiveSubscription,
    StoredMessage,
};
pub use layout::Layout;
pub use record::{MessageId, NodeIdentity, RecordKind};
