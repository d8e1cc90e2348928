//! The data of relay groups on the gateway's side (B), shared by the node's tasks: each group's
//! machine ([`crate::machines::group_in::GroupIn`]) with its members' channels, and B's groups
//! by owner. The group task (`crate::group`) runs the machines.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use agentwire::host::Dialect;
use tokio::sync::mpsc::UnboundedSender;

use crate::record::NodeIdentity;
use crate::sync::lock;

/// How a link opening names a dialect.
pub(crate) fn dialect_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::CopilotSdk => "copilot",
        Dialect::Acp => "acp",
        Dialect::Ahp => "ahp",
        // Never relayed: its requests name no session the lookup could follow.
        Dialect::ClientTools => "client-tools",
    }
}

/// The dialect a link opening names (the Copilot SDK protocol when it names none).
pub(crate) fn dialect_named(name: Option<&str>) -> Option<Dialect> {
    match name {
        None | Some("copilot") => Some(Dialect::CopilotSdk),
        Some("acp") => Some(Dialect::Acp),
        Some("ahp") => Some(Dialect::Ahp),
        Some(_) => None,
    }
}

pub(crate) use crate::machines::group_in::OwnerFrame;

/// A member's end of its group, on the gateway's side.
#[derive(Clone)]
pub(crate) struct MemberIn {
    /// The owner's frames for the member's client.
    pub(crate) tx: UnboundedSender<OwnerFrame>,
    /// Set before `tx` is dropped when the member's link counts as broken.
    pub(crate) broken: Arc<Mutex<Option<String>>>,
}

/// B's side of one group: its machine and the members' channels, shared by its receiver task
/// and the gateways that register members.
pub(crate) struct GroupIn {
    /// The group's name, as the openings carry it.
    pub(crate) id: String,
    pub(crate) state: Mutex<GroupInState>,
}

/// The state of a [`GroupIn`]: its machine with its members' ends.
pub(crate) type GroupInState = crate::machines::group_members::GroupMembers<MemberIn>;

/// An opening of a link naming a group, from sending it until its member is registered (or
/// the opening is abandoned): broadcasts of the group received meanwhile are kept for it.
pub(crate) struct PendingOpen(pub(crate) Arc<GroupIn>);

impl Drop for PendingOpen {
    fn drop(&mut self) {
        lock(&self.0.state).machine.open_done();
    }
}

/// B's groups, one per owner incarnation.
#[derive(Default)]
pub(crate) struct GroupsIn {
    pub(crate) groups: tokio::sync::Mutex<HashMap<(NodeIdentity, Dialect), Arc<GroupIn>>>,
    pub(crate) next: AtomicU64,
}
