//! Relay groups over NATS: one ordered stream from a session's owner A to each gateway node B
//! for all the clients B relays to A, so that an event for many of B's clients crosses NATS
//! once.
//!
//! A serves every relayed client as an ordinary connection made a *member* of B's group
//! connection ([`agentwire::host::ClusterApi::join_relay_group`]): the members queue nothing of
//! their own, and the group connection's frames ([`agentwire::host::RelayFrame`]) carry each member's
//! responses, requests and events, an event for several members once, naming them. A
//! publishes the group connection's frames on the group subject as numbered link messages
//! with heartbeats ([`crate::link_messages`]); B reads them and hands each body to the
//! members' gateways. The client → owner direction stays one link per client.
//!
//! A group is named by B (its node, incarnation, the owner and a counter) in each link's
//! opening. A starts a group on the first opening that names it; it ends when B's lease is
//! gone, after a lease TTL without members, or when the host closes it. An opening naming an
//! ended group is refused (`{"error":"group"}`) and B starts a new group. When B's receiver
//! sees a skipped number, silence or junk, the group is **broken**: every member's link is
//! broken with the reason, and each gateway re-attaches its client as after any broken link.
//!
//! Both sides are sans-IO machines composing every link and group of a node
//! ([`crate::machines::owner_links::OwnerLinks`] on A, run by [`crate::owner`];
//! [`crate::machines::gateway_links::GatewayLinks`] on B). The task here runs B's: the
//! gateways' link openings ([`crate::link::open_remote`]) ask it for a group, then attach
//! their link to it; their clients' frames go out through it, and the owner's frames for
//! them come back through it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentwire::host::Dialect;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;
use tracing::{info, warn};

use crate::machines::gateway_links::{GatewayEvent, GatewayLinks, GroupEnd, LinkEnd};
use crate::machines::group_in::OwnerFrame;
use crate::record::NodeIdentity;
use crate::shared::{LinkCommand, Node};
use crate::sync::lock;
use crate::wire::{max_payload, Subscriptions, MAX_LINK_FRAME};

/// An opening naming a group, from asking for the group until its outcome: dropped without
/// one, it tells B's task the opening is done.
pub(crate) struct PendingOpen {
    pub(crate) group: String,
    links: UnboundedSender<LinkCommand>,
    settled: bool,
}

impl PendingOpen {
    /// Asks B's task for the live group from `owner` for clients of `dialect`, with an
    /// opening naming it about to be sent; `None` when the node is shutting down.
    pub(crate) async fn begin(
        links: &UnboundedSender<LinkCommand>,
        owner: &NodeIdentity,
        dialect: Dialect,
    ) -> Option<PendingOpen> {
        let (reply, group) = oneshot::channel();
        let owner = owner.clone();
        links
            .send(LinkCommand::Group {
                owner,
                dialect,
                reply,
            })
            .ok()?;
        Some(PendingOpen {
            group: group.await.ok()?,
            links: links.clone(),
            settled: false,
        })
    }

    /// The owner refused the opening.
    pub(crate) fn refused(mut self) {
        self.settled = true;
        let group = std::mem::take(&mut self.group);
        let _ = self.links.send(LinkCommand::Refused { group });
    }

    /// The owner accepted the link as member `member`: it is attached (named `name`, link
    /// number `link`), its frames to `frames`. Answers whether the group was still live.
    pub(crate) async fn attach(
        mut self,
        member: u64,
        link: u64,
        name: String,
        frames: UnboundedSender<OwnerFrame>,
        broken: Arc<Mutex<Option<String>>>,
    ) -> bool {
        self.settled = true;
        let (reply, attached) = oneshot::channel();
        let group = std::mem::take(&mut self.group);
        let command = LinkCommand::Attach {
            group,
            member,
            link,
            name,
            frames,
            broken,
            reply,
        };
        self.links.send(command).is_ok() && attached.await.unwrap_or(false)
    }
}

impl Drop for PendingOpen {
    fn drop(&mut self) {
        if !self.settled {
            let group = std::mem::take(&mut self.group);
            let _ = self.links.send(LinkCommand::OpenDone { group });
        }
    }
}

/// Where B's task hands a link's owner frames: its gateway's channel, and why they ended.
struct GatewayEnd {
    frames: UnboundedSender<OwnerFrame>,
    broken: Arc<Mutex<Option<String>>>,
}

/// Runs B's side of every link and relay group of the node for as long as it runs.
pub(crate) async fn serve_gateway_links(
    node: Arc<Node>,
    tx: UnboundedSender<LinkCommand>,
    mut rx: UnboundedReceiver<LinkCommand>,
) {
    let client = node.engine.client().clone();
    let mut links = GatewayLinks::new(node.layout.clone(), node.me.clone(), MAX_LINK_FRAME);
    let mut subscriptions = Subscriptions::new(client.clone(), tx, LinkCommand::Message);
    let mut ends: HashMap<u64, GatewayEnd> = HashMap::new();
    loop {
        let wake = links.poll_timeout();
        let command = tokio::select! {
            command = rx.recv() => match command {
                Some(command) => Some(command),
                None => return,
            },
            _ = sleep_until(wake) => None,
        };
        let now = Instant::now();
        let mut group_reply = None;
        match command {
            None => links.handle_timeout(now),
            Some(LinkCommand::Group {
                owner,
                dialect,
                reply,
            }) => {
                let group = links.group_to(now, &owner, dialect);
                links.begin_open(&group);
                group_reply = Some((reply, group));
            }
            Some(LinkCommand::OpenDone { group }) => links.open_done(&group),
            Some(LinkCommand::Refused { group }) => {
                links.refused(&group);
                links.open_done(&group);
            }
            Some(LinkCommand::Attach {
                group,
                member,
                link,
                name,
                frames,
                broken,
                reply,
            }) => {
                ends.insert(link, GatewayEnd { frames, broken });
                // Attached before the opening is done: the group's broadcasts since it was
                // sent are the member's.
                let attached = links.attach(now, &group, member, link, &name);
                links.open_done(&group);
                if !attached {
                    // The group broke between the answer and now (or the owner named a member
                    // it serves already): the gateway re-attaches.
                    if let Some(end) = ends.remove(&link) {
                        *lock(&end.broken) = Some(
                            "the relay group from the owner node broke before the link joined it"
                                .to_owned(),
                        );
                    }
                }
                let _ = reply.send(attached);
            }
            Some(LinkCommand::Send { link, body }) => {
                links.send(&link, &body, max_payload(&client, body.len()))
            }
            Some(LinkCommand::Close { link }) => {
                ends.remove(&link);
                links.close_link(&link);
            }
            Some(LinkCommand::Message(subject, Some(payload))) => {
                links.handle_message(&subject, &payload)
            }
            Some(LinkCommand::Message(subject, None)) => links.handle_unsubscribed(&subject),
        }
        let mut subscribed = false;
        while let Some(event) = links.poll_event() {
            match event {
                GatewayEvent::Live(io) => subscribed |= subscriptions.perform(io).await,
                GatewayEvent::Frame { to, frame } => {
                    for link in to {
                        if let Some(end) = ends.get(&link) {
                            let _ = end.frames.send(frame.clone());
                        }
                    }
                }
                GatewayEvent::LinkEnded { link, end, .. } => {
                    // Its channel ends, with why when the link or group broke.
                    if let Some(ends) = ends.remove(&link) {
                        if let LinkEnd::LinkBroke(why) | LinkEnd::GroupBroke(why) = end {
                            *lock(&ends.broken) = Some(why);
                        }
                    }
                }
                GatewayEvent::GroupEnded { group, end, .. } => match end {
                    GroupEnd::Broken(why) => {
                        warn!(%group, reason = %why, "the relay group from the owner node broke")
                    }
                    GroupEnd::Closed => info!(%group, "the owner node closed the relay group"),
                    GroupEnd::Refused => info!(%group, "the owner node refused the relay group"),
                },
            }
        }
        if let Some((reply, group)) = group_reply {
            if subscribed {
                // The server has the subscription before the owner publishes on it.
                subscriptions.flush().await;
            }
            let _ = reply.send(group);
        }
    }
}

/// Sleeps until `at`; for ever when `None`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
