//! The engine interface: what the cluster needs from NATS JetStream, small enough to model.
//!
//! Two implementations: [`crate::memory::MemoryEngine`] (deterministic, with fault injection)
//! and [`crate::nats::NatsEngine`] (async-nats). Both pass the same conformance checks.
//!
//! Semantics both follow, as JetStream does:
//! * one log stream with a stream-wide sequence; each message is on one subject; the *last
//!   subject sequence* of a subject is the stream sequence of its newest message (0 if none);
//! * [`Engine::append`] stores the message only if the subject's last sequence equals
//!   `expected_last_subject_seq` ([`AppendError::WrongLastSequence`] otherwise); a message id seen
//!   within the duplicate window is not stored again: the append answers the first copy's
//!   sequence with `duplicate: true`. The fence check runs before the duplicate check (as on
//!   nats-server 2.15), so a retry whose expected sequence is now stale gets `WrongLastSequence`;
//! * [`AppendError::Unknown`] means the outcome is not known (timeout, lost acknowledgement):
//!   the message may or may not be stored; resolve it by reading the subject's last message;
//! * the KV bucket holds node leases; a key vanishes `ttl` after its last write; updates are
//!   revision-checked;
//! * live subjects are core publish/subscribe: at-most-once, never stored.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use crate::record::{NodeIdentity, RecordKind};

/// A message to append to a session's log subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRequest {
    /// The log subject.
    pub subject: String,
    /// The stream sequence the subject's newest message must have (0: the subject is empty).
    pub expected_last_subject_seq: u64,
    /// The `Nats-Msg-Id`: makes retries idempotent within the duplicate window.
    pub msg_id: String,
    /// Event or claim record.
    pub kind: RecordKind,
    /// The message body.
    pub payload: Bytes,
}

/// A stored append's acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendAck {
    /// Stream sequence of the stored message.
    pub seq: u64,
    /// The message id had been stored before; this append stored nothing.
    pub duplicate: bool,
}

/// Why an append was not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendError {
    /// The subject's newest message is not the expected one (JetStream error 10071). Nothing was
    /// stored by this append.
    WrongLastSequence,
    /// No answer: the message may or may not be stored (timeout, lost acknowledgement).
    Unknown(String),
    /// The engine refused the append for another reason; nothing was stored.
    Failed(String),
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongLastSequence => write!(f, "wrong last subject sequence"),
            Self::Unknown(why) => write!(f, "append outcome unknown: {why}"),
            Self::Failed(why) => write!(f, "append failed: {why}"),
        }
    }
}

impl std::error::Error for AppendError {}

/// A message read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Stream sequence.
    pub seq: u64,
    /// The log subject.
    pub subject: String,
    /// Its `Nats-Msg-Id`, if it had one.
    pub msg_id: Option<String>,
    /// Event or claim record (`None`: a message agentwire did not write).
    pub kind: Option<RecordKind>,
    /// The body.
    pub payload: Bytes,
}

/// A KV entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEntry {
    /// The value.
    pub value: Bytes,
    /// The entry's revision; pass it to [`Engine::kv_update`].
    pub revision: u64,
}

/// Whether `read`, a read of `who`'s lease key, found its incarnation there; a read that
/// failed counts as alive (a hiccup of the engine must not cut every relayed client).
pub fn holds_lease<E>(who: &NodeIdentity, read: &Result<Option<KvEntry>, E>) -> bool {
    match read {
        Ok(Some(entry)) => entry.value == who.incarnation.to_string().as_bytes(),
        Ok(None) => false,
        Err(_) => true,
    }
}

/// Why a KV write failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvError {
    /// `create` of a key that exists, or `update` with a revision that is not the key's latest
    /// (including a key that expired). Nothing was written.
    RevisionMismatch,
    /// No answer: the write may or may not have happened.
    Unknown(String),
    /// The engine refused the write for another reason; nothing was written.
    Failed(String),
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RevisionMismatch => write!(f, "kv revision mismatch"),
            Self::Unknown(why) => write!(f, "kv write outcome unknown: {why}"),
            Self::Failed(why) => write!(f, "kv write failed: {why}"),
        }
    }
}

impl std::error::Error for KvError {}

/// A failed read or a failed core publish/subscribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError(pub String);

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "engine error: {}", self.0)
    }
}

impl std::error::Error for EngineError {}

/// The cluster's view of NATS JetStream. See the module docs for the semantics.
pub trait Engine: Send + Sync {
    /// A subscription to a live subject.
    type Live: LiveSubscription;

    /// Appends one message to a log subject, fenced by the expected last subject sequence.
    fn append(
        &self,
        request: &AppendRequest,
    ) -> impl Future<Output = Result<AppendAck, AppendError>> + Send;

    /// The newest message on `subject`, read from the stream leader; `None` if it is empty.
    fn last_message(
        &self,
        subject: &str,
    ) -> impl Future<Output = Result<Option<StoredMessage>, EngineError>> + Send;

    /// The message at stream sequence `seq`, if it exists.
    fn message_at(
        &self,
        seq: u64,
    ) -> impl Future<Output = Result<Option<StoredMessage>, EngineError>> + Send;

    /// Every message on `subject` with stream sequence `>= from_seq`, in order, up to the
    /// subject's newest message when the read started.
    fn read_subject(
        &self,
        subject: &str,
        from_seq: u64,
    ) -> impl Future<Output = Result<Vec<StoredMessage>, EngineError>> + Send;

    /// The lease bucket's entry for `key`, if it exists and has not expired.
    fn kv_get(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<KvEntry>, EngineError>> + Send;

    /// Creates `key` if it does not exist (or expired); answers the new revision.
    fn kv_create(
        &self,
        key: &str,
        value: Bytes,
    ) -> impl Future<Output = Result<u64, KvError>> + Send;

    /// Writes `key` if its latest revision is `revision`; answers the new revision.
    fn kv_update(
        &self,
        key: &str,
        value: Bytes,
        revision: u64,
    ) -> impl Future<Output = Result<u64, KvError>> + Send;

    /// Publishes on a live subject (core NATS, at-most-once).
    fn publish_live(
        &self,
        subject: &str,
        payload: Bytes,
    ) -> impl Future<Output = Result<(), EngineError>> + Send;

    /// Waits before retry number `attempt` (1, 2, ...) of a call whose outcome was unknown.
    /// The in-memory model does not wait; NATS backs off exponentially up to a second, so a
    /// retry loop outlasts a stream-leader election (several seconds).
    fn pause(&self, attempt: u32) -> impl Future<Output = ()> + Send;

    /// The most bytes of an event one log message holds (the writer appends a larger one in
    /// pieces, [`crate::parts`]). Unlimited unless the engine says otherwise.
    fn max_record_bytes(&self) -> usize {
        usize::MAX
    }

    /// Subscribes to a live subject. Messages published after this returns through the same
    /// server are delivered (at most once); interest reaches the other servers of a cluster
    /// asynchronously, so a joiner reads the log after subscribing to close any gap.
    fn subscribe_live(
        &self,
        subject: &str,
    ) -> impl Future<Output = Result<Self::Live, EngineError>> + Send;
}

/// A live-subject subscription.
pub trait LiveSubscription: Send {
    /// The next message, or `None` if none arrives within `wait`. The in-memory model answers
    /// at once (its time only moves when the test moves it).
    fn next(&mut self, wait: Duration) -> impl Future<Output = Option<Bytes>> + Send;
}
