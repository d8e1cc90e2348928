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
//! Both sides are sans-IO machines ([`crate::machines::group_out::GroupOut`] on A, with the
//! names of its groups in [`crate::machines::group_out::GroupNames`];
//! [`crate::machines::group_in::GroupIn`] on B); the tasks here run them.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentwire::host::Dialect;
use futures_util::StreamExt;
use tokio::sync::mpsc::UnboundedSender;
use tracing::{info, warn};

use crate::group_state::{
    dialect_name, GroupIn, GroupInState, GroupsIn, MemberIn, OwnerFrame, PendingOpen,
};
use crate::machines::group_members::MembersEvent;
use crate::record::NodeIdentity;
use crate::shared::Node;
use crate::sync::lock;
use crate::wire::{ask_again, resend_subject, MAX_LINK_FRAME};

/// The subject a group's frames travel on.
pub(crate) fn group_subject(node: &Node, group: &str) -> String {
    node.layout.group_subject(group)
}

impl GroupIn {
    /// Registers member `member` (A's id of the relayed connection): its frames go to `tx`.
    /// `false` when the group already ended.
    pub(crate) fn add_member(
        &self,
        member: u64,
        tx: UnboundedSender<OwnerFrame>,
        broken: Arc<Mutex<Option<String>>>,
    ) -> bool {
        let mut state = lock(&self.state);
        if !state.add_member(member, MemberIn { tx, broken }) {
            return false;
        }
        // The broadcasts since the opening was sent (some may predate the owner's join: a
        // lifecycle notification more is harmless, one less is not).
        hand_out(&mut state);
        true
    }

    /// An opening naming this group is about to be sent (see [`PendingOpen`]).
    pub(crate) fn begin_open(self: &Arc<Self>) -> PendingOpen {
        lock(&self.state).machine.begin_open();
        PendingOpen(self.clone())
    }

    /// Whether the group ended.
    pub(crate) fn is_dead(&self) -> bool {
        lock(&self.state).machine.is_ended()
    }

    /// Marks the group ended because the owner refused it (it ended there).
    pub(crate) fn refused(&self) {
        let mut state = lock(&self.state);
        state.machine.refused();
        hand_out(&mut state);
    }
}

/// Hands what a group produced to its members' channels; when the group ended, why
/// (`Some(None)`: closed by the owner).
fn hand_out(state: &mut GroupInState) -> Option<Option<String>> {
    let mut ended = None;
    while let Some(event) = state.poll_event() {
        match event {
            MembersEvent::Frame { to, frame } => {
                for member in to {
                    let _ = member.tx.send(frame.clone());
                }
            }
            MembersEvent::MemberEnded { member, link_broke } => {
                if let Some(why) = link_broke {
                    *lock(&member.broken) = Some(why);
                }
            }
            MembersEvent::Ended { members, broken } => {
                // Every member's channel ends, with `broken` as its link's reason.
                for member in members {
                    if let Some(why) = &broken {
                        *lock(&member.broken) = Some(why.clone());
                    }
                }
                ended = Some(broken);
            }
        }
    }
    ended
}

impl GroupsIn {
    /// The live group to `owner` for clients speaking `dialect`, started (subscribed, and
    /// its receiver running) if there is none.
    pub(crate) async fn to(
        &self,
        node: &Arc<Node>,
        owner: &NodeIdentity,
        dialect: Dialect,
    ) -> Result<Arc<GroupIn>, String> {
        let mut groups = self.groups.lock().await;
        let key = (owner.clone(), dialect);
        if let Some(group) = groups.get(&key).filter(|g| !g.is_dead()) {
            return Ok(group.clone());
        }
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let id = node.me.group_name(owner, dialect_name(dialect), n);
        let client = node.engine.client().clone();
        let subscription = client
            .subscribe(group_subject(node, &id))
            .await
            .map_err(|e| format!("cannot relay to node {}: {e}", owner.node))?;
        // The server has the subscription before the owner publishes on it.
        let _ = client.flush().await;
        let group = Arc::new(GroupIn {
            id,
            state: Mutex::new(GroupInState::new(crate::machines::group_in::GroupIn::new(
                MAX_LINK_FRAME,
                Instant::now(),
            ))),
        });
        groups.insert(key, group.clone());
        let resend = resend_subject(node, &group_subject(node, &group.id));
        tokio::spawn(receive(group.clone(), client, resend, subscription));
        Ok(group)
    }
}

/// B's receiver of one group: runs its machine until the group is closed or breaks; lost
/// messages are asked for again on `resend`.
async fn receive(
    group: Arc<GroupIn>,
    client: async_nats::Client,
    resend: String,
    mut subscription: async_nats::Subscriber,
) {
    let ended = loop {
        let wake = lock(&group.state)
            .machine
            .poll_timeout()
            .unwrap_or_else(Instant::now);
        let message = tokio::select! {
            m = subscription.next() => Some(m),
            _ = tokio::time::sleep_until(wake.into()) => None,
        };
        let (requests, ended) = {
            let mut state = lock(&group.state);
            match message {
                Some(Some(m)) => state.machine.handle_message(&m.payload),
                Some(None) => state.machine.handle_unsubscribed(),
                None => state.machine.handle_timeout(Instant::now()),
            }
            let requests: Vec<_> =
                std::iter::from_fn(|| state.machine.poll_resend_request()).collect();
            (requests, hand_out(&mut state))
        };
        for request in requests {
            ask_again(&client, &resend, request).await;
        }
        if let Some(ended) = ended {
            break ended;
        }
    };
    match &ended {
        Some(why) => {
            warn!(group = %group.id, reason = %why, "the relay group from the owner node broke")
        }
        None => info!(group = %group.id, "the owner node closed the relay group"),
    }
}
