//! An in-memory model of the engine, deterministic and with fault injection.
//!
//! [`MemoryCluster`] is the shared engine; each node talks to it through its own
//! [`MemoryEngine`] handle, so faults can target one node: a partition (every request of that
//! node is lost and its reads fail), a lost request or a lost acknowledgement on its next write,
//! and message loss on live subjects. Time moves only when [`MemoryCluster::advance`] is called;
//! lease keys expire `lease_ttl` after their last write and message ids leave the duplicate window
//! after `duplicate_window`, as in JetStream.
//!
//! Every future it returns is ready at once, so a simulation can drive it with
//! `FutureExt::now_or_never` and interleave nodes one call at a time.

mod world;

use std::future::{ready, Future};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;

pub use world::Fault;
use world::{LiveQueue, World};

use crate::engine::{
    AppendAck, AppendError, AppendRequest, Engine, EngineError, KvEntry, KvError, LiveSubscription,
    StoredMessage,
};

/// The shared in-memory engine.
#[derive(Debug, Clone)]
pub struct MemoryCluster {
    world: Arc<Mutex<World>>,
}

impl MemoryCluster {
    /// An empty engine whose lease keys live `lease_ttl` and whose duplicate window is two
    /// minutes (JetStream's default).
    pub fn new(lease_ttl: Duration) -> Self {
        Self {
            world: Arc::new(Mutex::new(World::new(lease_ttl, Duration::from_secs(120)))),
        }
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().expect("memory engine state")
    }

    /// A handle for the client (node) `name`.
    pub fn client(&self, name: &str) -> MemoryEngine {
        self.world().clients.entry(name.to_owned()).or_default();
        MemoryEngine {
            world: self.world.clone(),
            name: name.to_owned(),
        }
    }

    /// The engine's current time.
    pub fn now(&self) -> Duration {
        self.world().now
    }

    /// Moves time forward.
    pub fn advance(&self, by: Duration) {
        self.world().now += by;
    }

    /// Cuts `client` off from the engine (`true`) or reconnects it.
    pub fn set_partitioned(&self, client: &str, partitioned: bool) {
        self.world()
            .clients
            .entry(client.to_owned())
            .or_default()
            .partitioned = partitioned;
    }

    /// Queues `fault` for `client`'s next write (append or KV write).
    pub fn inject(&self, client: &str, fault: Fault) {
        self.world()
            .clients
            .entry(client.to_owned())
            .or_default()
            .faults
            .push_back(fault);
    }

    /// Drops the next `count` live-subject deliveries.
    pub fn drop_live(&self, count: u32) {
        self.world().live_drops += count;
    }

    /// Ends every fault: partitions heal, queued write faults and live-message drops are
    /// forgotten (a simulation's quiet end).
    pub fn heal(&self) {
        let mut world = self.world();
        world.live_drops = 0;
        for client in world.clients.values_mut() {
            client.partitioned = false;
            client.faults.clear();
        }
    }

    /// Every message in the log stream, in stream order.
    pub fn log(&self) -> Vec<StoredMessage> {
        self.world().log().to_vec()
    }

    /// Runs `inspect` on the log stream without copying it.
    pub fn inspect_log<R>(&self, inspect: impl FnOnce(&[StoredMessage]) -> R) -> R {
        inspect(self.world().log())
    }
}

/// One node's handle on a [`MemoryCluster`].
#[derive(Debug, Clone)]
pub struct MemoryEngine {
    world: Arc<Mutex<World>>,
    name: String,
}

impl MemoryEngine {
    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().expect("memory engine state")
    }
}

impl Engine for MemoryEngine {
    type Live = MemoryLive;

    fn append(
        &self,
        request: &AppendRequest,
    ) -> impl Future<Output = Result<AppendAck, AppendError>> + Send {
        ready(self.world().append(&self.name, request))
    }

    fn last_message(
        &self,
        subject: &str,
    ) -> impl Future<Output = Result<Option<StoredMessage>, EngineError>> + Send {
        ready(self.world().last_message(&self.name, subject))
    }

    fn message_at(
        &self,
        seq: u64,
    ) -> impl Future<Output = Result<Option<StoredMessage>, EngineError>> + Send {
        ready(self.world().message_at(&self.name, seq))
    }

    fn read_subject(
        &self,
        subject: &str,
        from_seq: u64,
    ) -> impl Future<Output = Result<Vec<StoredMessage>, EngineError>> + Send {
        ready(self.world().read_subject(&self.name, subject, from_seq))
    }

    fn kv_get(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<KvEntry>, EngineError>> + Send {
        ready(self.world().kv_get(&self.name, key))
    }

    fn kv_create(
        &self,
        key: &str,
        value: Bytes,
    ) -> impl Future<Output = Result<u64, KvError>> + Send {
        ready(self.world().kv_write(&self.name, key, value, None))
    }

    fn kv_update(
        &self,
        key: &str,
        value: Bytes,
        revision: u64,
    ) -> impl Future<Output = Result<u64, KvError>> + Send {
        ready(
            self.world()
                .kv_write(&self.name, key, value, Some(revision)),
        )
    }

    fn publish_live(
        &self,
        subject: &str,
        payload: Bytes,
    ) -> impl Future<Output = Result<(), EngineError>> + Send {
        self.world().publish_live(&self.name, subject, payload);
        ready(Ok(()))
    }

    fn pause(&self, _attempt: u32) -> impl Future<Output = ()> + Send {
        ready(())
    }

    fn subscribe_live(
        &self,
        subject: &str,
    ) -> impl Future<Output = Result<MemoryLive, EngineError>> + Send {
        ready(
            self.world()
                .subscribe_live(&self.name, subject)
                .map(|queue| MemoryLive { queue }),
        )
    }
}

/// A live subscription on the in-memory engine.
#[derive(Debug)]
pub struct MemoryLive {
    queue: LiveQueue,
}

impl LiveSubscription for MemoryLive {
    fn next(&mut self, _wait: Duration) -> impl Future<Output = Option<Bytes>> + Send {
        ready(self.queue.lock().expect("live queue").pop_front())
    }
}
