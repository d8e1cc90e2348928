//! Async loops that run the protocol state machines against an [`Engine`].

use std::time::Duration;

use bytes::Bytes;

use crate::call::Reply;
use crate::call::{execute, Call};
use crate::engine::{holds_lease, Engine};
use crate::layout::Layout;
use crate::lease::{LeaseAction, NodeLease};
use crate::machines::claim::EngineCall;
use crate::machines::gateway::SessionLog;
use crate::machines::keeper::{KeeperAction, LeaseKeeper};
use crate::record::NodeIdentity;
use crate::takeover::{Takeover, TakeoverOutcome, TakeoverStep};
use crate::writer::{BeginError, SessionWriter, WriterStep};

/// Why [`append`] did not store an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendFailure {
    /// The writer is fenced (another owner claimed the session, or the outcome stayed unknown).
    Fenced,
    /// An append of this writer is already in flight.
    Busy,
    /// The engine refused this event; the writer can go on.
    Refused(String),
}

/// Appends one event with `writer`, resolving lost acknowledgements; answers its sequence.
pub async fn append<E: Engine>(
    engine: &E,
    writer: &mut SessionWriter,
    payload: Bytes,
) -> Result<u64, AppendFailure> {
    let mut call = writer.begin(payload).map_err(|e| match e {
        BeginError::Busy => AppendFailure::Busy,
        BeginError::Fenced => AppendFailure::Fenced,
    })?;
    let mut retries = 0;
    loop {
        let reply = execute(engine, &call).await;
        match writer.on_reply(reply) {
            WriterStep::Call(next) => {
                retries += 1;
                engine.pause(retries).await;
                call = next;
            }
            WriterStep::Acked(seq) => return Ok(seq),
            WriterStep::Refused(why) => return Err(AppendFailure::Refused(why)),
            WriterStep::Fenced => return Err(AppendFailure::Fenced),
        }
    }
}

/// Runs one takeover of the session logged on `subject` to its end.
pub async fn take_over<E: Engine>(
    engine: &E,
    me: NodeIdentity,
    claim_counter: u64,
    subject: String,
) -> TakeoverOutcome {
    let (mut takeover, mut call) = Takeover::start(me, claim_counter, subject);
    let mut retries = 0;
    loop {
        let claimed = matches!(call, Call::Append(_));
        let reply = execute(engine, &call).await;
        match takeover.on_reply(reply) {
            TakeoverStep::Call(next) => {
                // Calls after the claim was sent resolve or retry it: back off.
                if claimed || retries > 0 {
                    retries += 1;
                    engine.pause(retries).await;
                }
                call = next;
            }
            TakeoverStep::Done(outcome) => return outcome,
        }
    }
}

/// Does what `lease` wants at `now` (create or renew, with any follow-up check).
/// Answers when to poll next, or `None` if the lease is lost.
pub async fn tend_lease<E: Engine>(
    engine: &E,
    lease: &mut NodeLease,
    now: Duration,
) -> Option<Duration> {
    // A failed write leaves the lease due at once; one retry per call keeps a failing engine
    // from spinning here.
    for _ in 0..2 {
        match lease.poll(now) {
            LeaseAction::Lost => return None,
            LeaseAction::IdleUntil(at) => return Some(at),
            LeaseAction::Call(call) => {
                let mut call = Some(call);
                while let Some(current) = call.take() {
                    let reply = execute(engine, &current).await;
                    call = lease.on_reply(reply);
                }
            }
        }
    }
    Some(now)
}

/// Does what `keeper` wants at `now` (a few calls at most, so that a failing engine does
/// not spin here) and checks the lease. Answers when to poll next, or why the node must stop.
pub async fn tend_keeper<E: Engine>(
    engine: &E,
    keeper: &mut LeaseKeeper,
    now: Duration,
) -> Result<Duration, String> {
    let mut next = now;
    for _ in 0..6 {
        match keeper.poll(now) {
            KeeperAction::Call(call) => keeper.handle_reply(execute(engine, &call).await),
            KeeperAction::IdleUntil(at) => {
                next = at;
                break;
            }
            KeeperAction::Stop(why) => return Err(why),
        }
    }
    keeper.check(now)?;
    Ok(next)
}

/// Performs a machine's `call` on `engine`, pausing first when it asks for a back-off.
pub async fn perform<E: Engine>(engine: &E, call: &EngineCall) -> Reply {
    if call.backoff > 0 {
        engine.pause(call.backoff).await;
    }
    execute(engine, &call.call).await
}

/// Whether `who`'s lease key still holds its incarnation (a failed read counts as alive:
/// only a lease seen gone or replaced ends a node, [`holds_lease`]).
pub async fn is_alive<E: Engine>(engine: &E, layout: &Layout, who: &NodeIdentity) -> bool {
    let read = engine.kv_get(&layout.lease_key(&who.node)).await;
    holds_lease(who, &read)
}

/// The events of each session's log, pieces put back together, for a gateway's catch-up
/// ([`crate::machines::gateway::GatewayEvent::ReadLogs`]); the first session whose log cannot
/// be read, and why.
pub async fn read_logs<E: Engine>(
    engine: &E,
    layout: &Layout,
    sessions: Vec<String>,
) -> Result<Vec<SessionLog>, (String, String)> {
    let mut logs = Vec::with_capacity(sessions.len());
    for session in sessions {
        match engine.read_subject(&layout.log_subject(&session), 1).await {
            Ok(stored) => {
                let events = crate::parts::events(stored)
                    .into_iter()
                    .map(|m| (m.seq, m.payload))
                    .collect();
                logs.push((session, events));
            }
            Err(e) => return Err((session, e.to_string())),
        }
    }
    Ok(logs)
}

/// The sequence of the last message of each session's log (0 for an empty log, `None` when it
/// cannot be read), for a gateway's re-attachment
/// ([`crate::machines::gateway::GatewayEvent::ReadLastSeqs`]).
pub async fn last_seqs<E: Engine>(
    engine: &E,
    layout: &Layout,
    sessions: Vec<String>,
) -> Vec<(String, Option<u64>)> {
    let mut seqs = Vec::with_capacity(sessions.len());
    for session in sessions {
        let seq = match engine.last_message(&layout.log_subject(&session)).await {
            Ok(last) => Some(last.map_or(0, |m| m.seq)),
            Err(e) => {
                tracing::warn!(%session, error = %e, "cannot read the log's end after a resume");
                None
            }
        };
        seqs.push((session, seq));
    }
    seqs
}
