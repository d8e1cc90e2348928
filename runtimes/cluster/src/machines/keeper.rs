//! A node's lease over the node's life, with no I/O: taken at start (a lease lost before it
//! ever held, as when nodes starting together race for the bucket, is made again), then kept
//! while the node serves; once serving, a lease lost or no longer valid means the node must
//! stop (another node may already have claimed its sessions).

use std::time::Duration;

use crate::call::{Call, Reply};
use crate::lease::{LeaseAction, LeaseConfig, NodeLease};

/// What the keeper wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeeperAction {
    /// Perform this call and answer it with [`LeaseKeeper::handle_reply`].
    Call(Call),
    /// Nothing to do before this time.
    IdleUntil(Duration),
    /// The node must stop: why.
    Stop(String),
}

/// A node's lease, from its start to its end.
#[derive(Debug)]
pub struct LeaseKeeper {
    config: LeaseConfig,
    key: String,
    incarnation: u64,
    lease: NodeLease,
    /// The call handed out and not answered yet.
    call: Option<Call>,
    serving: bool,
}

impl LeaseKeeper {
    /// The lease of the node whose lease key is `key`, holding `incarnation`.
    pub fn new(config: LeaseConfig, key: String, incarnation: u64) -> Self {
        let lease = NodeLease::new(config, key.clone(), incarnation);
        LeaseKeeper {
            config,
            key,
            incarnation,
            lease,
            call: None,
            serving: false,
        }
    }

    /// What to do at `now`.
    pub fn poll(&mut self, now: Duration) -> KeeperAction {
        if let Some(call) = &self.call {
            return KeeperAction::Call(call.clone());
        }
        match self.lease.poll(now) {
            LeaseAction::Call(call) => {
                self.call = Some(call.clone());
                KeeperAction::Call(call)
            }
            LeaseAction::Lost if self.serving => {
                KeeperAction::Stop("this node's cluster lease was lost".into())
            }
            LeaseAction::Lost => {
                // Not yet serving: start over.
                let (key, config) = (self.key.clone(), self.config);
                self.lease = NodeLease::new(config, key, self.incarnation);
                KeeperAction::IdleUntil(now)
            }
            LeaseAction::IdleUntil(at) => KeeperAction::IdleUntil(at),
        }
    }

    /// The reply to the call [`LeaseKeeper::poll`] handed out.
    pub fn handle_reply(&mut self, reply: Reply) {
        if self.call.take().is_some() {
            self.call = self.lease.on_reply(reply);
        }
    }

    /// Checks the lease at `now`: the node serves from the first time it is valid, and must
    /// stop (why) once it is no longer valid after that.
    pub fn check(&mut self, now: Duration) -> Result<(), String> {
        let valid = self.lease.is_valid(now);
        if self.serving && !valid {
            return Err("this node's cluster lease expired".into());
        }
        self.serving |= valid;
        Ok(())
    }

    /// Whether the node serves: its lease held at the last check.
    pub fn is_serving(&self) -> bool {
        self.serving
    }

    /// Until when the lease is valid, if it is held.
    pub fn valid_until(&self) -> Option<Duration> {
        self.lease.valid_until()
    }

    /// Whether the lease is valid at `now` (frames are released only then).
    pub fn is_valid(&self, now: Duration) -> bool {
        self.lease.is_valid(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::execute;
    use crate::memory::MemoryCluster;
    use futures_util::FutureExt;

    const TTL: Duration = Duration::from_secs(6);

    #[test]
    fn a_lease_is_taken_kept_and_its_loss_stops_the_node() {
        let cluster = MemoryCluster::new(TTL);
        let engine = cluster.client("a");
        let mut keeper = LeaseKeeper::new(LeaseConfig::with_ttl(TTL), "a".into(), 1);
        let step = |keeper: &mut LeaseKeeper, now| match keeper.poll(now) {
            KeeperAction::Call(call) => {
                let reply = execute(&engine, &call).now_or_never().expect("ready");
                keeper.handle_reply(reply);
                None
            }
            other => Some(other),
        };
        while step(&mut keeper, cluster.now()).is_none() {}
        assert_eq!(keeper.check(cluster.now()), Ok(()));
        assert!(keeper.is_serving());
        // Past its validity without renewing: the node must stop.
        let until = keeper.valid_until().expect("held");
        assert!(keeper.check(until + Duration::from_millis(1)).is_err());
    }
}
