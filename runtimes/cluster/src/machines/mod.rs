//! The cluster's top half as sans-IO machines: a gateway following its client's session
//! ([`gateway::Gateway`]), one direction of a link or relay group ([`outbound::Outbound`],
//! [`inbound::Inbound`]), the owner's side of a relayed client ([`member::MemberLink`]), both
//! sides of a relay group ([`group_out::GroupOut`] on the owner, [`group_in::GroupIn`] on the
//! gateway node, with its members' ends in [`group_members::GroupMembers`]), and the session log's side: a session's claim ([`claim::Claim`]), its
//! single writer ([`worker::SessionWorker`]), the lookup of a session this node has not
//! loaded ([`lookup::Lookup`]), and the node's session log composing them with the marks of
//! acknowledged events ([`sessions::Sessions`]), the node's lease over its life
//! ([`keeper::LeaseKeeper`]), and both sides of every link and relay group of a node: the
//! owner's, composing the member links and the groups' owner sides
//! ([`owner_links::OwnerLinks`]), and the gateway node's, composing its groups from owners and
//! the links it sends on ([`gateway_links::GatewayLinks`]), both asking the same things of
//! the live subjects ([`live::LiveIo`]).
//!
//! As in quinn-proto's `Connection` or str0m's `Rtc`, a machine does no I/O and reads no
//! clock: it takes inputs (a message arrived, `handle_timeout(now)`, the answer to a lease
//! check, a body the host wrote) and hands out what to do (`poll_transmit`: bytes to publish,
//! `poll_event`: a frame for the host, a lease to check, an end), with `poll_timeout` saying
//! when it wants `handle_timeout` next. The tokio tasks of [`crate::node`] run them against
//! NATS and the driver; the host simulation runs the same machines against the in-memory
//! engine.

pub mod claim;
pub mod gateway;
pub mod gateway_links;
pub mod group_in;
pub mod group_members;
pub mod group_out;
pub mod inbound;
pub mod keeper;
pub mod live;
pub mod lookup;
pub mod member;
pub mod outbound;
pub mod owner_links;
pub mod sessions;
pub mod worker;

/// Earliest of two optional deadlines.
pub(crate) fn earliest(
    a: Option<std::time::Instant>,
    b: Option<std::time::Instant>,
) -> Option<std::time::Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
