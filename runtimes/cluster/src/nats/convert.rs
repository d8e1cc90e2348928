//! Translating between async-nats types and the engine's.

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::kv::{CreateErrorKind, UpdateErrorKind};
use async_nats::{HeaderMap, HeaderName};

use crate::engine::{AppendError, KvError, StoredMessage};
use crate::record::RecordKind;

/// The header carrying a message's [`RecordKind`].
pub(crate) const KIND_HEADER: &str = "Agentwire-Kind";

/// A publish error as an append outcome. Only a fence check is a sure "not stored"; everything
/// else (timeouts, broken connections, no responders during a leader election) is resolved by
/// reading the subject.
pub(crate) fn append_error(error: async_nats::jetstream::context::PublishError) -> AppendError {
    match error.kind() {
        PublishErrorKind::WrongLastSequence => AppendError::WrongLastSequence,
        _ => AppendError::Unknown(error.to_string()),
    }
}

/// A KV create error.
pub(crate) fn create_error(error: async_nats::jetstream::kv::CreateError) -> KvError {
    match error.kind() {
        CreateErrorKind::AlreadyExists => KvError::RevisionMismatch,
        CreateErrorKind::InvalidKey => KvError::Failed(error.to_string()),
        _ => KvError::Unknown(error.to_string()),
    }
}

/// A KV update error.
pub(crate) fn update_error(error: async_nats::jetstream::kv::UpdateError) -> KvError {
    match error.kind() {
        UpdateErrorKind::WrongLastRevision => KvError::RevisionMismatch,
        UpdateErrorKind::InvalidKey => KvError::Failed(error.to_string()),
        _ => KvError::Unknown(error.to_string()),
    }
}

/// The value of header `name`, looked up by its parsed name: known NATS headers parse to their
/// standard form, which a plain `&str` key would not match.
pub(crate) fn header_value(headers: Option<&HeaderMap>, name: &str) -> Option<String> {
    let name: HeaderName = name.parse().ok()?;
    headers
        .and_then(|h| h.get(name))
        .map(|v| v.as_str().to_owned())
}

/// A stored message from its parts.
pub(crate) fn stored(
    seq: u64,
    subject: &str,
    headers: Option<&HeaderMap>,
    payload: bytes::Bytes,
) -> StoredMessage {
    let header = |name: &str| header_value(headers, name);
    StoredMessage {
        seq,
        subject: subject.to_owned(),
        msg_id: header("Nats-Msg-Id"),
        kind: header(KIND_HEADER).as_deref().and_then(RecordKind::parse),
        payload,
    }
}
