//! [`Engine`] for [`NatsEngine`].

use std::future::Future;
use std::time::Duration;

use async_nats::header::{NATS_EXPECTED_LAST_SUBJECT_SEQUENCE, NATS_MESSAGE_ID};
use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use async_nats::jetstream::kv::Operation;
use async_nats::jetstream::stream::RawMessageErrorKind;
use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt;

use super::convert::{append_error, create_error, header_value, stored, update_error, KIND_HEADER};
use super::NatsEngine;
use crate::engine::{
    AppendAck, AppendError, AppendRequest, Engine, EngineError, KvEntry, KvError, LiveSubscription,
    StoredMessage,
};

/// The bytes of `max_payload` left for a log message's headers (the expected sequence, the
/// message id and the kind take under 200).
const RECORD_HEADROOM: usize = 1024;

fn engine_error(what: &str, error: impl std::fmt::Display) -> EngineError {
    EngineError(format!("{what}: {error}"))
}

impl NatsEngine {
    /// The last message on `subject` of `stream`, read from the stream leader.
    async fn leader_last(
        stream: &async_nats::jetstream::stream::Stream,
        subject: &str,
    ) -> Result<Option<async_nats::jetstream::message::StreamMessage>, EngineError> {
        match stream.get_last_raw_message_by_subject(subject).await {
            Ok(message) => Ok(Some(message)),
            Err(e) if matches!(e.kind(), RawMessageErrorKind::NoMessageFound) => Ok(None),
            Err(e) => Err(engine_error("last message", e)),
        }
    }

    async fn read(&self, subject: &str, from_seq: u64) -> Result<Vec<StoredMessage>, EngineError> {
        self.read_at_most(subject, from_seq, usize::MAX).await
    }

    /// The first `limit` messages on `subject` from `from_seq` on (fewer if the subject's newest
    /// message comes first), in order.
    pub(crate) async fn read_at_most(
        &self,
        subject: &str,
        from_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, EngineError> {
        let Some(last) = Self::leader_last(&self.log, subject).await? else {
            return Ok(Vec::new());
        };
        let until = last.sequence;
        if until < from_seq.max(1) {
            return Ok(Vec::new());
        }
        let consumer = self
            .log
            .create_consumer(pull::OrderedConfig {
                filter_subject: subject.to_owned(),
                deliver_policy: DeliverPolicy::ByStartSequence {
                    start_sequence: from_seq.max(1),
                },
                ..Default::default()
            })
            .await
            .map_err(|e| engine_error("ordered consumer", e))?;
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| engine_error("ordered consumer messages", e))?;
        let mut out = Vec::new();
        loop {
            let next = tokio::time::timeout(self.read_timeout, messages.next())
                .await
                .map_err(|_| EngineError("ordered consumer timed out".into()))?;
            let message = match next {
                Some(Ok(message)) => message,
                Some(Err(e)) => return Err(engine_error("ordered consumer", e)),
                None => return Err(EngineError("ordered consumer ended early".into())),
            };
            let seq = message
                .info()
                .map_err(|e| engine_error("message info", e))?
                .stream_sequence;
            out.push(stored(
                seq,
                message.subject.as_str(),
                message.headers.as_ref(),
                message.payload.clone(),
            ));
            if seq >= until || out.len() >= limit {
                return Ok(out);
            }
        }
    }

    async fn lease_entry(&self, key: &str) -> Result<Option<KvEntry>, EngineError> {
        let subject = format!("{}{key}", self.lease_subject_prefix);
        let Some(message) = Self::leader_last(&self.lease_stream, &subject).await? else {
            return Ok(None);
        };
        let operation = header_value(Some(&message.headers), "KV-Operation");
        let deleted = matches!(
            operation.as_deref().map(str::parse::<Operation>),
            Some(Ok(Operation::Delete | Operation::Purge))
        );
        Ok((!deleted).then(|| KvEntry {
            value: message.payload,
            revision: message.sequence,
        }))
    }
}

impl NatsEngine {
    /// Why a message with `headers` and `payload` is larger than the connected server's
    /// `max_payload` (which counts headers and payload together), or `None` when it fits.
    fn exceeds_max_payload(&self, headers: &HeaderMap, payload: &[u8]) -> Option<String> {
        // Reading the server info clones it: only for messages that might not fit.
        const SURELY_FITS: usize = 64 * 1024;
        if payload.len() < SURELY_FITS {
            return None;
        }
        // `NATS/1.0\r\n`, `Name: value\r\n` per header, the closing `\r\n`.
        let header_len = 10
            + headers
                .iter()
                .map(|(name, values)| {
                    values
                        .iter()
                        .map(|v| AsRef::<[u8]>::as_ref(name).len() + 4 + v.as_str().len())
                        .sum::<usize>()
                })
                .sum::<usize>()
            + 2;
        let max_payload = self.client.server_info().max_payload;
        (header_len + payload.len() > max_payload).then(|| {
            format!(
                "the message ({} bytes with its headers) is larger than the server's max_payload \
                 ({max_payload} bytes)",
                header_len + payload.len()
            )
        })
    }
}

impl Engine for NatsEngine {
    type Live = NatsLive;

    fn append(
        &self,
        request: &AppendRequest,
    ) -> impl Future<Output = Result<AppendAck, AppendError>> + Send {
        let mut headers = HeaderMap::new();
        headers.insert(
            NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            request.expected_last_subject_seq.to_string(),
        );
        headers.insert(NATS_MESSAGE_ID, request.msg_id.as_str());
        headers.insert(KIND_HEADER, request.kind.to_string());
        let subject = request.subject.clone();
        let payload = request.payload.clone();
        let too_large = self.exceeds_max_payload(&headers, &payload);
        async move {
            if let Some(why) = too_large {
                // The server would end the connection ("Maximum Payload Violation"), and the
                // writer's retry would do it again: refused here, nothing stored.
                return Err(AppendError::Failed(why));
            }
            let ack = self
                .context
                .publish_with_headers(subject, headers, payload)
                .await
                .map_err(append_error)?
                .await
                .map_err(append_error)?;
            Ok(AppendAck {
                seq: ack.sequence,
                duplicate: ack.duplicate,
            })
        }
    }

    async fn last_message(&self, subject: &str) -> Result<Option<StoredMessage>, EngineError> {
        Ok(Self::leader_last(&self.log, subject)
            .await?
            .map(|m| stored(m.sequence, m.subject.as_str(), Some(&m.headers), m.payload)))
    }

    async fn message_at(&self, seq: u64) -> Result<Option<StoredMessage>, EngineError> {
        match self.log.get_raw_message(seq).await {
            Ok(m) => Ok(Some(stored(
                m.sequence,
                m.subject.as_str(),
                Some(&m.headers),
                m.payload,
            ))),
            Err(e) if matches!(e.kind(), RawMessageErrorKind::NoMessageFound) => Ok(None),
            Err(e) => Err(engine_error("message at", e)),
        }
    }

    fn read_subject(
        &self,
        subject: &str,
        from_seq: u64,
    ) -> impl Future<Output = Result<Vec<StoredMessage>, EngineError>> + Send {
        self.read(subject, from_seq)
    }

    /// The server's `max_payload` less [`RECORD_HEADROOM`] for the headers.
    fn max_record_bytes(&self) -> usize {
        let max_payload = self.client.server_info().max_payload;
        max_payload
            .saturating_sub(RECORD_HEADROOM)
            .max(max_payload / 2)
            .max(1)
    }

    fn kv_get(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<KvEntry>, EngineError>> + Send {
        self.lease_entry(key)
    }

    async fn kv_create(&self, key: &str, value: Bytes) -> Result<u64, KvError> {
        self.leases.create(key, value).await.map_err(create_error)
    }

    async fn kv_update(&self, key: &str, value: Bytes, revision: u64) -> Result<u64, KvError> {
        self.leases
            .update(key, value, revision)
            .await
            .map_err(update_error)
    }

    fn publish_live(
        &self,
        subject: &str,
        payload: Bytes,
    ) -> impl Future<Output = Result<(), EngineError>> + Send {
        let subject = subject.to_owned();
        async move {
            self.client
                .publish(subject, payload)
                .await
                .map_err(|e| engine_error("live publish", e))
        }
    }

    fn pause(&self, attempt: u32) -> impl Future<Output = ()> + Send {
        let millis = 50u64.saturating_mul(1 << attempt.min(10)).min(1_000);
        tokio::time::sleep(Duration::from_millis(millis))
    }

    fn subscribe_live(
        &self,
        subject: &str,
    ) -> impl Future<Output = Result<NatsLive, EngineError>> + Send {
        let subject = subject.to_owned();
        async move {
            let subscriber = self
                .client
                .subscribe(subject)
                .await
                .map_err(|e| engine_error("live subscribe", e))?;
            // `flush` only writes the buffer out. A request nobody serves is answered at once
            // with "no responders" by the server, after it has processed the SUB sent before it
            // on this connection: once it returns, the subscription is live on this server.
            let probe = self.client.new_inbox();
            match self.client.request(probe, Bytes::new()).await {
                Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {}
                Ok(_) => {}
                Err(e) => return Err(engine_error("subscription round trip", e)),
            }
            Ok(NatsLive { subscriber })
        }
    }
}

/// A live subscription on NATS.
#[derive(Debug)]
pub struct NatsLive {
    subscriber: async_nats::Subscriber,
}

impl LiveSubscription for NatsLive {
    async fn next(&mut self, wait: Duration) -> Option<Bytes> {
        tokio::time::timeout(wait, self.subscriber.next())
            .await
            .ok()
            .flatten()
            .map(|message| message.payload)
    }
}
