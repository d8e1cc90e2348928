//! The data of relay groups on the gateway's side (B), shared by the node's tasks: the owner
//! frames members get, each member's channel, and B's groups by owner. The group task
//! (`crate::group`) runs them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use agentwire::host::{Dialect, RelayedEventHead};
use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;

use crate::record::NodeIdentity;
use crate::sync::lock;

/// How a link opening names a dialect.
pub(crate) fn dialect_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::CopilotSdk => "copilot",
        Dialect::Acp => "acp",
        // Never relayed: its requests name no session the lookup could follow.
        Dialect::ClientTools => "client-tools",
    }
}

/// The dialect a link opening names (the Copilot SDK protocol when it names none).
pub(crate) fn dialect_named(name: Option<&str>) -> Option<Dialect> {
    match name {
        None | Some("copilot") => Some(Dialect::CopilotSdk),
        Some("acp") => Some(Dialect::Acp),
        Some(_) => None,
    }
}

/// A frame of the owner for a relayed client: its body and, for a `session.event`, its head,
/// read once per group frame and shared by every member it is for (so a gateway does not
/// parse an event once per client).
#[derive(Debug, Clone)]
pub(crate) struct OwnerFrame {
    /// The frame body (a JSON-RPC message).
    pub(crate) body: Bytes,
    /// The head of a `session.event` body, if read.
    pub(crate) head: Option<Arc<RelayedEventHead>>,
}

impl From<Bytes> for OwnerFrame {
    /// A body whose head was not read.
    fn from(body: Bytes) -> Self {
        OwnerFrame { body, head: None }
    }
}

impl OwnerFrame {
    /// The frame `body`, its head read if it is a `session.event` as the host writes one
    /// (`jsonrpc`, then `method`): responses, requests and ACP updates are not parsed here,
    /// and a body written otherwise is read by the relay as before.
    pub(crate) fn read(body: Bytes) -> Self {
        let head = RelayedEventHead::read(&body).map(Arc::new);
        OwnerFrame { body, head }
    }
}

/// A member's end of its group, on the gateway's side.
pub(crate) struct MemberIn {
    /// The owner's frames for the member's client.
    pub(crate) tx: UnboundedSender<OwnerFrame>,
    /// Set before `tx` is dropped when the member's link counts as broken.
    pub(crate) broken: Arc<Mutex<Option<String>>>,
}

/// B's side of one group: the members it dispatches to.
pub(crate) struct GroupIn {
    /// The group's name, as the openings carry it.
    pub(crate) id: String,
    pub(crate) members: Mutex<HashMap<u64, MemberIn>>,
    pub(crate) dead: AtomicBool,
    /// Broadcasts (`All` frames) received while an opening is unanswered.
    pub(crate) recent: Mutex<Recent>,
}

/// What a client being relayed must not miss: the owner joins it to the group before it
/// answers the opening, the gateway registers it after, and broadcasts queued in between are
/// its too.
#[derive(Default)]
pub(crate) struct Recent {
    /// Openings sent and not yet registered or abandoned.
    pub(crate) pending: usize,
    /// The broadcasts received meanwhile (at most [`RECENT_LIMIT`]).
    pub(crate) frames: std::collections::VecDeque<OwnerFrame>,
}

/// How many broadcasts an unanswered opening keeps.
pub(crate) const RECENT_LIMIT: usize = 256;

/// An opening of a link naming a group, from sending it until its member is registered (or
/// the opening is abandoned): broadcasts of the group received meanwhile are kept for it.
pub(crate) struct PendingOpen(pub(crate) Arc<GroupIn>);

impl Drop for PendingOpen {
    fn drop(&mut self) {
        let mut recent = lock(&self.0.recent);
        recent.pending = recent.pending.saturating_sub(1);
        if recent.pending == 0 {
            recent.frames.clear();
        }
    }
}

/// B's groups, one per owner incarnation.
#[derive(Default)]
pub(crate) struct GroupsIn {
    pub(crate) groups: tokio::sync::Mutex<HashMap<(NodeIdentity, Dialect), Arc<GroupIn>>>,
    pub(crate) next: AtomicU64,
}
