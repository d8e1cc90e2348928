//! The single writer of one session's log: fenced appends, idempotent retries, self-fencing.
//!
//! A [`SessionWriter`] exists only after its node's claim record is stored (see
//! [`crate::takeover`]); its epoch is the claim's stream sequence. Each append expects the
//! subject's last sequence to be the writer's last acknowledged one, so once another node's claim
//! is stored every append of this writer fails, forever. One append is in flight at a time,
//! because the next expected sequence is only known from the previous acknowledgement. An
//! event larger than one message ([`SessionWriter::with_piece_limit`]) is appended as a run of
//! pieces ([`crate::parts`]), one after the other, and acknowledged with its last piece.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::call::{Call, Reply};
use crate::engine::{AppendError, AppendRequest};
use crate::record::{MessageId, RecordKind};
use crate::resolve::{resolve, Resolution};

/// How many times one append is sent or resolved before the writer gives up and fences itself.
pub const MAX_ATTEMPTS: u32 = 12;

/// What the writer wants next after a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriterStep {
    /// Perform this call and feed its reply to [`SessionWriter::on_reply`].
    Call(Call),
    /// The append is stored at this stream sequence (acknowledged; clients may see it).
    Acked(u64),
    /// The engine refused the append (for example, too large); nothing is stored and the writer
    /// can go on with the next append.
    Refused(String),
    /// Another owner took the session, or the outcome stayed unknown for [`MAX_ATTEMPTS`]
    /// attempts: the writer is fenced and must not be used again. The append is not acknowledged.
    Fenced,
}

/// Why [`SessionWriter::begin`] refused to start an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeginError {
    /// An append is in flight; wait for its outcome.
    Busy,
    /// The writer is fenced.
    Fenced,
}

/// Where the writer is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// No append in flight.
    Ready,
    /// `request` was sent; waiting for its answer.
    Appending {
        request: AppendRequest,
        attempts: u32,
    },
    /// The outcome of `request` is being resolved by reading the subject's last message.
    Resolving {
        request: AppendRequest,
        attempts: u32,
    },
    /// Done for good.
    Fenced,
}

/// The single writer of one session's log subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionWriter {
    subject: String,
    epoch: u64,
    last_seq: u64,
    state: State,
    /// The most bytes of an event one message holds.
    piece_limit: usize,
    /// The pieces of the event being appended that follow the one in flight.
    pieces: VecDeque<(RecordKind, Bytes)>,
}

impl SessionWriter {
    /// The writer of `subject` whose claim record is stored at stream sequence `epoch`.
    pub fn new(subject: String, epoch: u64) -> Self {
        Self {
            subject,
            epoch,
            last_seq: epoch,
            state: State::Ready,
            piece_limit: usize::MAX,
            pieces: VecDeque::new(),
        }
    }

    /// The writer, appending an event larger than `bytes` as pieces of at most `bytes`.
    pub fn with_piece_limit(mut self, bytes: usize) -> Self {
        self.piece_limit = bytes.max(1);
        self
    }

    /// The log subject.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Stream sequence of this writer's claim record.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Stream sequence of the last acknowledged message on the subject.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Whether the writer is fenced.
    pub fn is_fenced(&self) -> bool {
        self.state == State::Fenced
    }

    /// Whether an append is in flight.
    pub fn is_busy(&self) -> bool {
        matches!(
            self.state,
            State::Appending { .. } | State::Resolving { .. }
        )
    }

    /// Fences the writer from outside (its node's lease is no longer valid).
    pub fn fence(&mut self) {
        self.state = State::Fenced;
    }

    /// Starts appending one event; perform the returned call.
    pub fn begin(&mut self, payload: Bytes) -> Result<Call, BeginError> {
        match self.state {
            State::Ready => {}
            State::Fenced => return Err(BeginError::Fenced),
            _ => return Err(BeginError::Busy),
        }
        self.pieces = crate::parts::split(&payload, self.piece_limit).into();
        Ok(self.append_next())
    }

    /// Sends the next record of the event being appended (there is one).
    fn append_next(&mut self) -> Call {
        let (kind, payload) = self
            .pieces
            .pop_front()
            .unwrap_or((RecordKind::Event, Bytes::new()));
        let request = AppendRequest {
            subject: self.subject.clone(),
            expected_last_subject_seq: self.last_seq,
            msg_id: MessageId::Event {
                epoch: self.epoch,
                prev: self.last_seq,
            }
            .to_string(),
            kind,
            payload,
        };
        self.state = State::Appending {
            request: request.clone(),
            attempts: 1,
        };
        Call::Append(request)
    }

    /// Feeds the reply to the last call this writer asked for.
    ///
    /// A reply of the wrong kind (a driver bug) fences the writer: that is always safe.
    pub fn on_reply(&mut self, reply: Reply) -> WriterStep {
        match (std::mem::replace(&mut self.state, State::Fenced), reply) {
            (State::Appending { request, attempts }, Reply::Append(result)) => match result {
                Ok(ack) => self.acked(ack.seq),
                Err(AppendError::Failed(why)) => {
                    // The pieces stored before this one are an incomplete run: no event.
                    self.pieces.clear();
                    self.state = State::Ready;
                    WriterStep::Refused(why)
                }
                Err(AppendError::WrongLastSequence | AppendError::Unknown(_)) => {
                    self.resolving(request, attempts)
                }
            },
            (State::Resolving { request, attempts }, Reply::Message(result)) => match result {
                Ok(last) => match resolve(&request, last.as_ref()) {
                    Resolution::Landed(seq) => self.acked(seq),
                    Resolution::Superseded => WriterStep::Fenced,
                    Resolution::NotStored if attempts < MAX_ATTEMPTS => {
                        let call = Call::Append(request.clone());
                        self.state = State::Appending {
                            request,
                            attempts: attempts + 1,
                        };
                        WriterStep::Call(call)
                    }
                    Resolution::NotStored => WriterStep::Fenced,
                },
                Err(_) => self.resolving(request, attempts + 1),
            },
            _ => WriterStep::Fenced,
        }
    }

    /// Records an acknowledgement at `seq`: the event's, or one piece's (then the next piece
    /// follows).
    fn acked(&mut self, seq: u64) -> WriterStep {
        self.last_seq = seq;
        if !self.pieces.is_empty() {
            return WriterStep::Call(self.append_next());
        }
        self.state = State::Ready;
        WriterStep::Acked(seq)
    }

    /// Asks for the subject's last message to resolve `request`.
    fn resolving(&mut self, request: AppendRequest, attempts: u32) -> WriterStep {
        if attempts > MAX_ATTEMPTS {
            return WriterStep::Fenced;
        }
        let call = Call::LastMessage {
            subject: request.subject.clone(),
        };
        self.state = State::Resolving { request, attempts };
        WriterStep::Call(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{AppendAck, EngineError, StoredMessage};

    fn stored(seq: u64, msg_id: &str) -> StoredMessage {
        StoredMessage {
            seq,
            subject: "log.s".into(),
            msg_id: Some(msg_id.into()),
            kind: Some(RecordKind::Event),
            payload: Bytes::new(),
        }
    }

    fn request_of(call: &Call) -> &AppendRequest {
        match call {
            Call::Append(request) => request,
            other => panic!("expected an append, got {other:?}"),
        }
    }

    #[test]
    fn appends_chain_expected_sequences_and_ids() {
        let mut writer = SessionWriter::new("log.s".into(), 5);
        let call = writer.begin(Bytes::from_static(b"a")).unwrap();
        assert_eq!(request_of(&call).expected_last_subject_seq, 5);
        assert_eq!(request_of(&call).msg_id, "e:5:5");
        assert_eq!(writer.begin(Bytes::new()), Err(BeginError::Busy));
        let ack = Reply::Append(Ok(AppendAck {
            seq: 9,
            duplicate: false,
        }));
        assert_eq!(writer.on_reply(ack), WriterStep::Acked(9));
        let call = writer.begin(Bytes::from_static(b"b")).unwrap();
        assert_eq!(request_of(&call).expected_last_subject_seq, 9);
        assert_eq!(request_of(&call).msg_id, "e:5:9");
    }

    #[test]
    fn a_lost_ack_whose_message_landed_is_acked() {
        let mut writer = SessionWriter::new("log.s".into(), 5);
        writer.begin(Bytes::new()).unwrap();
        let step = writer.on_reply(Reply::Append(Err(AppendError::Unknown("timeout".into()))));
        assert!(matches!(step, WriterStep::Call(Call::LastMessage { .. })));
        let step = writer.on_reply(Reply::Message(Ok(Some(stored(12, "e:5:5")))));
        assert_eq!(step, WriterStep::Acked(12));
        assert_eq!(writer.last_seq(), 12);
    }

    #[test]
    fn a_lost_request_is_retried_with_the_same_id() {
        let mut writer = SessionWriter::new("log.s".into(), 5);
        let first = writer.begin(Bytes::new()).unwrap();
        writer.on_reply(Reply::Append(Err(AppendError::Unknown("timeout".into()))));
        let step = writer.on_reply(Reply::Message(Ok(Some(stored(5, "c:sA:1:1")))));
        assert_eq!(step, WriterStep::Call(first));
    }

    #[test]
    fn another_writer_fences_for_good() {
        let mut writer = SessionWriter::new("log.s".into(), 5);
        writer.begin(Bytes::new()).unwrap();
        writer.on_reply(Reply::Append(Err(AppendError::WrongLastSequence)));
        let step = writer.on_reply(Reply::Message(Ok(Some(stored(7, "c:sB:1:1")))));
        assert_eq!(step, WriterStep::Fenced);
        assert!(writer.is_fenced());
        assert_eq!(writer.begin(Bytes::new()), Err(BeginError::Fenced));
    }

    #[test]
    fn an_outcome_that_stays_unknown_fences() {
        let mut writer = SessionWriter::new("log.s".into(), 5);
        writer.begin(Bytes::new()).unwrap();
        let mut step = writer.on_reply(Reply::Append(Err(AppendError::Unknown("t".into()))));
        let mut rounds = 0;
        while let WriterStep::Call(_) = step {
            rounds += 1;
            assert!(rounds < 100, "never gave up");
            step = writer.on_reply(Reply::Message(Err(EngineError("down".into()))));
        }
        assert_eq!(step, WriterStep::Fenced);
    }

    fn ack(seq: u64) -> Reply {
        Reply::Append(Ok(AppendAck {
            seq,
            duplicate: false,
        }))
    }

    #[test]
    fn a_large_event_is_appended_piece_after_piece_and_acked_with_the_last() {
        let mut writer = SessionWriter::new("log.s".into(), 5).with_piece_limit(4);
        let call = writer.begin(Bytes::from_static(b"0123456789")).unwrap();
        let first = request_of(&call).clone();
        assert_eq!(first.kind, RecordKind::Part { index: 0, count: 3 });
        assert_eq!(first.payload, Bytes::from_static(b"0123"));
        assert_eq!(
            (first.expected_last_subject_seq, first.msg_id.as_str()),
            (5, "e:5:5")
        );
        assert_eq!(writer.begin(Bytes::new()), Err(BeginError::Busy));
        // Each piece is fenced on the one before it.
        let WriterStep::Call(call) = writer.on_reply(ack(6)) else {
            panic!("the second piece")
        };
        let second = request_of(&call).clone();
        assert_eq!(second.kind, RecordKind::Part { index: 1, count: 3 });
        assert_eq!(
            (second.expected_last_subject_seq, second.msg_id.as_str()),
            (6, "e:5:6")
        );
        // A lost acknowledgement of a piece resolves like any append's.
        let step = writer.on_reply(Reply::Append(Err(AppendError::Unknown("t".into()))));
        assert!(matches!(step, WriterStep::Call(Call::LastMessage { .. })));
        let WriterStep::Call(call) = writer.on_reply(Reply::Message(Ok(Some(stored(7, "e:5:6")))))
        else {
            panic!("the third piece")
        };
        let third = request_of(&call).clone();
        assert_eq!(third.kind, RecordKind::Part { index: 2, count: 3 });
        assert_eq!(third.payload, Bytes::from_static(b"89"));
        assert_eq!(writer.on_reply(ack(8)), WriterStep::Acked(8));
        // The next event fits: one record, after the last piece.
        let call = writer.begin(Bytes::from_static(b"ab")).unwrap();
        assert_eq!(request_of(&call).kind, RecordKind::Event);
        assert_eq!(request_of(&call).expected_last_subject_seq, 8);
    }

    #[test]
    fn a_refused_piece_refuses_the_event_and_a_superseded_one_fences() {
        let mut writer = SessionWriter::new("log.s".into(), 5).with_piece_limit(2);
        writer.begin(Bytes::from_static(b"abcdef")).unwrap();
        writer.on_reply(ack(6));
        let step = writer.on_reply(Reply::Append(Err(AppendError::Failed("no".into()))));
        assert_eq!(step, WriterStep::Refused("no".into()));
        // Nothing of the refused event is sent after it.
        let call = writer.begin(Bytes::from_static(b"x")).unwrap();
        assert_eq!(request_of(&call).kind, RecordKind::Event);
        assert_eq!(writer.on_reply(ack(7)), WriterStep::Acked(7));
        writer.begin(Bytes::from_static(b"abcd")).unwrap();
        writer.on_reply(ack(8));
        writer.on_reply(Reply::Append(Err(AppendError::WrongLastSequence)));
        let step = writer.on_reply(Reply::Message(Ok(Some(stored(9, "c:sB:1:1")))));
        assert_eq!(step, WriterStep::Fenced);
    }

    #[test]
    fn a_refused_append_leaves_the_writer_usable() {
        let mut writer = SessionWriter::new("log.s".into(), 5);
        writer.begin(Bytes::new()).unwrap();
        let step = writer.on_reply(Reply::Append(Err(AppendError::Failed("too big".into()))));
        assert_eq!(step, WriterStep::Refused("too big".into()));
        assert!(writer.begin(Bytes::new()).is_ok());
    }
}
