//! Engine calls as data: what the I/O-free state machines ask for and what they are told.
//!
//! The protocol machines ([`crate::writer::SessionWriter`], [`crate::takeover::Takeover`],
//! [`crate::lease::NodeLease`]) never do I/O. They hand out a [`Call`]; whoever runs them (the
//! async driver [`execute`], or a simulation that interleaves many machines one call at a time)
//! performs it and feeds the [`Reply`] back.

use bytes::Bytes;

use crate::engine::{
    AppendAck, AppendError, AppendRequest, Engine, EngineError, KvEntry, KvError, StoredMessage,
};

/// One engine operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// [`Engine::append`].
    Append(AppendRequest),
    /// [`Engine::last_message`].
    LastMessage {
        /// The log subject.
        subject: String,
    },
    /// [`Engine::message_at`].
    MessageAt {
        /// The stream sequence.
        seq: u64,
    },
    /// [`Engine::read_subject`].
    ReadSubject {
        /// The log subject.
        subject: String,
        /// The first stream sequence wanted.
        from_seq: u64,
    },
    /// [`Engine::kv_get`].
    KvGet {
        /// The lease key.
        key: String,
    },
    /// [`Engine::kv_create`].
    KvCreate {
        /// The lease key.
        key: String,
        /// The value.
        value: Bytes,
    },
    /// [`Engine::kv_update`].
    KvUpdate {
        /// The lease key.
        key: String,
        /// The value.
        value: Bytes,
        /// The revision the key must have.
        revision: u64,
    },
}

/// The result of a [`Call`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Result of [`Call::Append`].
    Append(Result<AppendAck, AppendError>),
    /// Result of [`Call::LastMessage`] and [`Call::MessageAt`].
    Message(Result<Option<StoredMessage>, EngineError>),
    /// Result of [`Call::ReadSubject`].
    Messages(Result<Vec<StoredMessage>, EngineError>),
    /// Result of [`Call::KvGet`].
    KvEntry(Result<Option<KvEntry>, EngineError>),
    /// Result of [`Call::KvCreate`] and [`Call::KvUpdate`].
    KvWrite(Result<u64, KvError>),
}

/// Performs `call` on `engine`.
pub async fn execute<E: Engine>(engine: &E, call: &Call) -> Reply {
    match call {
        Call::Append(request) => Reply::Append(engine.append(request).await),
        Call::LastMessage { subject } => Reply::Message(engine.last_message(subject).await),
        Call::MessageAt { seq } => Reply::Message(engine.message_at(*seq).await),
        Call::ReadSubject { subject, from_seq } => {
            Reply::Messages(engine.read_subject(subject, *from_seq).await)
        }
        Call::KvGet { key } => Reply::KvEntry(engine.kv_get(key).await),
        Call::KvCreate { key, value } => Reply::KvWrite(engine.kv_create(key, value.clone()).await),
        Call::KvUpdate {
            key,
            value,
            revision,
        } => Reply::KvWrite(engine.kv_update(key, value.clone(), *revision).await),
    }
}
