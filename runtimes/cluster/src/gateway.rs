//! Gateways: a client of node B whose session is owned by live node A is relayed to A, and
//! keeps its connection and its attachments when A dies.
//!
//! One gateway task per client connection and relayed session (the host routes each frame by
//! the session it names, so one connection may use sessions of several owners): it relays the
//! frames of that session over a [`crate::link`] and watches A's lease. The task runs a sans-IO
//! [`crate::machines::gateway::Gateway`], which decides everything below, and performs what it
//! asks for against NATS, the log and the driver.
//! It remembers what it relayed ([`agentwire::relay::ClientRelay`]): the client's attachments (the
//! params of each successful `session.create` / `session.resume`), its unanswered requests and
//! the last durable event it received of each session (or, for a resume with none yet, the
//! session's last event when the resume was answered, as the owner's answer names it). When A's lease is gone, or A sent its shutdown
//! notice (held back: it is not the client's node that stops) and closed the link and then its
//! lease went:
//!
//! 1. every request A did not answer gets an error answer naming the reason (once: the new
//!    owner never saw them);
//! 2. the session is looked up again, which claims it here (this node is alive and holds a
//!    client of it) unless another node claimed it first; the claim restores the session and
//!    ends its interrupted turn (`session.error`, `session.idle`);
//! 3. the gateway links to the new owner (its own host over an in-memory pipe, or another node
//!    over NATS) and re-attaches the client with a `session.resume` per session carrying the
//!    params it attached with (answer not delivered, no `session.resume` event; a refusal
//!    ends the connection with the reason);
//! 4. the events the client missed are read from the log and delivered (those it received
//!    are not sent again), the interrupted turn's `session.idle` included; the new owner's
//!    live frames follow, without the events already delivered.
//!
//! An editor (ACP) is re-attached the same way, except for step 4: its `session/update`s
//! carry no event ids, so the owner says how far the editor got (the ACP dialect's relay) and
//! the new owner replays the updates of the events after that before attaching it.
//!
//! The client's later frames wait while this happens, then go to the new owner.
//!
//! When the link itself breaks (a lost message not sent again in time, or silence,
//! [`crate::link_messages`]) and A
//! still answers, the same steps re-attach the client to A over a new link (step 2 is skipped:
//! A still owns the sessions), except that the requests that end with a turn (a Copilot SDK
//! client's `session.sendAndWait`s, an editor's `session/prompt`s) are not failed in step 1:
//! their turns go on at A, and the re-attachment names them and the connection A served the
//! broken link as, so that A answers them on the new link. When A
//! does not answer, it is treated as gone.

use std::sync::Arc;
use std::time::Instant;

use agentwire::host::{ConnId, Dialect};
use agentwire_driver::HostHandle;
use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::info;

use crate::drive::{last_seqs, read_logs};
use crate::link::{answers, open_local, open_remote, LinkEnds};
use crate::machines::gateway::{Gateway, GatewayEvent, Target};
use crate::machines::group_in::OwnerFrame;
use crate::record::NodeIdentity;
use crate::shared::{Lookups, Node};
use crate::wire::alive;

/// B's side: relays the client connection `conn` to `owner`, the node owning `session`, and
/// re-attaches it to the new owner when `owner` dies, running a [`Gateway`].
pub(crate) async fn gateway(
    node: Arc<Node>,
    lookups: Lookups,
    conn: ConnId,
    session: String,
    owner: NodeIdentity,
    mut frames: UnboundedReceiver<Vec<Bytes>>,
) {
    let Some(host) = node.host.get().cloned() else {
        return;
    };
    let dialect = host
        .with_host(|h, _| h.connection_dialect(conn))
        .flatten()
        .unwrap_or(Dialect::CopilotSdk);
    let mut machine = Gateway::new(session.clone(), dialect, owner, node.lease_ttl);
    let mut link: Option<LinkEnds> = None;
    loop {
        while let Some(event) = machine.poll_event() {
            match event {
                GatewayEvent::ToOwner(body) => {
                    if let Some(link) = &link {
                        let _ = link.to_owner.send(body);
                    }
                }
                GatewayEvent::ToClient(body) => deliver(&host, conn, &session, &body),
                GatewayEvent::EventToClient(frame) => {
                    if let Some(head) = &frame.head {
                        host.with_host(|host, now| {
                            host.cluster()
                                .deliver_forwarded_with_head(now, conn, &frame.body, head)
                        });
                    }
                }
                GatewayEvent::DeltasLost { session: s, lost } => {
                    info!(session = %s, lost, "streaming deltas lost with the link");
                    host.with_host(|host, now| {
                        host.cluster().forwarded_deltas_lost(now, conn, &s, lost)
                    });
                }
                GatewayEvent::CheckLease(owner) => {
                    let alive = alive(&node, &owner).await;
                    machine.handle_lease(Instant::now(), alive);
                }
                GatewayEvent::Probe(owner) => {
                    let answers = answers(&node, &owner.node).await;
                    machine.handle_probe(answers);
                }
                GatewayEvent::FindOwner { session: s, dead } => {
                    let found = find_owner(&node, &host, &s, &dead).await;
                    machine.handle_owner_found(Instant::now(), found);
                }
                GatewayEvent::LookUp(s) => lookups.look_up(s),
                GatewayEvent::OpenLink(target) => {
                    let opened = match &target {
                        Target::Remote(owner) => open_remote(&node, conn, owner).await,
                        Target::Local => {
                            open_local(&node, conn).ok_or("this node is shutting down".into())
                        }
                    };
                    if let Target::Remote(owner) = &target {
                        if opened.is_ok() {
                            info!(%session, owner = %owner.node, "client relayed to the owner node");
                        }
                    }
                    let member = opened
                        .as_ref()
                        .map(|ends| ends.member)
                        .map_err(Clone::clone);
                    link = opened.ok();
                    machine.handle_link_opened(Instant::now(), member);
                }
                GatewayEvent::DrainLink => {
                    // What the owner sent before the link was lost is the client's; the link
                    // is dropped (closed) after it.
                    if let Some(mut lost) = link.take() {
                        while let Ok(frame) = lost.from_owner.try_recv() {
                            machine.handle_owner_frame(frame);
                        }
                    }
                    machine.handle_drained(Instant::now());
                }
                GatewayEvent::ReadLastSeqs(sessions) => {
                    let seqs = last_seqs(&node.engine, &node.layout, sessions).await;
                    machine.handle_last_seqs(seqs);
                }
                GatewayEvent::ReadLogs(sessions) => {
                    let logs = read_logs(&node.engine, &node.layout, sessions).await;
                    let now = host
                        .with_host(|_, now| now.to_rfc3339())
                        .unwrap_or_default();
                    machine.handle_logs(logs, &now);
                }
                GatewayEvent::Reattached(to) => {
                    info!(sessions = ?machine.sessions(), ?to, "relayed client re-attached")
                }
                GatewayEvent::End(reason) => {
                    info!(%session, %reason, "relayed connection ended");
                    host.with_host(|host, now| host.cluster().end_forwarding(now, conn, reason));
                    return;
                }
            }
        }
        let wake = machine.poll_timeout();
        tokio::select! {
            batch = frames.recv() => match batch {
                Some(batch) => machine.handle_client_frames(batch),
                // The client is gone: dropping the link closes it.
                None => return,
            },
            frame = from_owner(&mut link) => match frame {
                Some(frame) => machine.handle_owner_frame(frame),
                None => {
                    let broken = link.take().and_then(|link| link.broken());
                    machine.handle_link_ended(Instant::now(), broken);
                }
            },
            _ = sleep_until(wake) => machine.handle_timeout(Instant::now()),
        }
    }
}

/// The owner's next frame on `link`; never when there is no link.
async fn from_owner(link: &mut Option<LinkEnds>) -> Option<OwnerFrame> {
    match link {
        Some(link) => link.from_owner.recv().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; for ever when `None`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Queues `body`, relayed from the owner of session `route`, for the client of `conn`.
fn deliver(host: &HostHandle, conn: ConnId, route: &str, body: &[u8]) {
    host.with_host(|host, now| host.cluster().deliver_forwarded(now, conn, route, body));
}

/// Where `session` is owned now that `dead` died: here once this node's host loaded it (it
/// claimed it), or the live other node a lookup found.
async fn find_owner(
    node: &Node,
    host: &HostHandle,
    session: &str,
    dead: &NodeIdentity,
) -> Option<Target> {
    let loaded = host
        .with_host(|host, _| host.session_events(session).is_some())
        .unwrap_or(false);
    if loaded {
        return Some(Target::Local);
    }
    let owner = node.owner_of(session).filter(|o| o != dead)?;
    if alive(node, &owner).await {
        return Some(Target::Remote(owner));
    }
    None
}
