//! The state every task of a node shares ([`Node`]), and how a gateway asks the node's
//! dispatcher to look sessions up ([`Lookups`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentwire_driver::HostHandle;
use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;
use tracing::error;

use agentwire::host::Dialect;
use tokio::sync::oneshot;

use crate::layout::Layout;
use crate::machines::group_in::OwnerFrame;
use crate::nats::NatsEngine;
use crate::record::NodeIdentity;
use crate::sync::lock;

/// State every task of a node shares.
pub(crate) struct Node {
    pub(crate) engine: NatsEngine,
    pub(crate) layout: Layout,
    pub(crate) me: NodeIdentity,
    pub(crate) lease_ttl: Duration,
    /// Links this node opened to owners, each named apart by this count.
    pub(crate) links_opened: AtomicU64,
    /// False once the lease is no longer trusted: no more appends.
    pub(crate) lease_ok: AtomicBool,
    /// The driver, once it started the log.
    pub(crate) host: OnceLock<HostHandle>,
    pub(crate) stopping: AtomicBool,
    /// Live owners found by lookups, for the gateways.
    pub(crate) owners: Mutex<HashMap<String, NodeIdentity>>,
    /// B's task: the links and relay groups to the owners this node relays clients to
    /// ([`crate::group`]).
    pub(crate) links: UnboundedSender<LinkCommand>,
}

impl Node {
    /// The node can no longer keep its promise: stop serving, then exit.
    pub(crate) fn stop(&self, reason: String) {
        self.lease_ok.store(false, Ordering::SeqCst);
        if self.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        error!(node = %self.me.node, %reason, "cluster node stopping");
        if let Some(host) = self.host.get() {
            host.shutdown(reason);
        }
        tokio::spawn(async {
            // Let the shutdown notices go out; frames waiting for acknowledgements never do.
            tokio::time::sleep(Duration::from_secs(2)).await;
            std::process::exit(75);
        });
    }

    /// The live owner the last lookup of `session` found, if any.
    pub(crate) fn owner_of(&self, session: &str) -> Option<NodeIdentity> {
        lock(&self.owners).get(session).cloned()
    }

    /// A number no other link this node opens shares (part of a link's name).
    pub(crate) fn next_link(&self) -> u64 {
        self.links_opened.fetch_add(1, Ordering::SeqCst)
    }
}

/// What the log's dispatcher task is told.
pub(crate) enum Command {
    Persist {
        session: String,
        event: Bytes,
        mark: u64,
    },
    Deleted {
        session: String,
    },
    Load {
        session: String,
    },
}

/// Asks a node's dispatcher to look sessions up (a gateway whose owner died).
#[derive(Clone)]
pub(crate) struct Lookups(pub(crate) UnboundedSender<Command>);

impl Lookups {
    /// Looks `session` up as a client naming it would: claimed here if its owner is gone,
    /// else its live owner is recorded ([`Node::owner_of`]).
    pub(crate) fn look_up(&self, session: String) {
        let _ = self.0.send(Command::Load { session });
    }
}

/// What the gateways (and the subscriptions) tell B's task.
pub(crate) enum LinkCommand {
    /// The live group from `owner` for clients of `dialect`, started if there is none, with
    /// an opening naming it about to be sent; answered once its subject is subscribed.
    Group {
        owner: NodeIdentity,
        dialect: Dialect,
        reply: oneshot::Sender<String>,
    },
    /// The opening naming `group` was lost (not answered).
    OpenDone { group: String },
    /// The owner refused the opening naming `group`.
    Refused { group: String },
    /// The owner accepted link `link` (named `name`) as member `member` of `group`: the
    /// owner's frames for it go to `frames`; `broken` says why they ended when the link or
    /// group broke. Answers whether the group was still live.
    Attach {
        group: String,
        member: u64,
        link: u64,
        name: String,
        frames: UnboundedSender<OwnerFrame>,
        broken: Arc<Mutex<Option<String>>>,
        reply: oneshot::Sender<bool>,
    },
    /// A frame body of `link`'s client for the owner.
    Send { link: u64, body: Bytes },
    /// `link`'s client is gone from it.
    Close { link: u64 },
    /// A message on a subscribed subject (`None`: the subscription ended).
    Message(Arc<str>, Option<Bytes>),
}
