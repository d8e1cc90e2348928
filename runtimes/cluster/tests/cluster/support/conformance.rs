//! Engine conformance checks: the behaviour the protocol relies on, run against the in-memory
//! model and against a real nats-server, so the model cannot drift from the engine.

use std::future::Future;
use std::time::Duration;

use agentwire_cluster::call::{execute, Call, Reply};
use agentwire_cluster::drive::{append, take_over, AppendFailure};
use agentwire_cluster::takeover::TakeoverOutcome;
use agentwire_cluster::writer::{SessionWriter, WriterStep};
use agentwire_cluster::{
    AppendError, AppendRequest, Engine, KvError, Layout, LiveSubscription, NodeIdentity, RecordKind,
};
use bytes::Bytes;

fn node(name: &str, incarnation: u64) -> NodeIdentity {
    NodeIdentity {
        node: name.into(),
        incarnation,
    }
}

fn event(subject: &str, expected: u64, msg_id: &str, body: &'static str) -> AppendRequest {
    AppendRequest {
        subject: subject.into(),
        expected_last_subject_seq: expected,
        msg_id: msg_id.into(),
        kind: RecordKind::Event,
        payload: Bytes::from_static(body.as_bytes()),
    }
}

/// Claims an empty session for `me` and answers the writer.
async fn claim_empty<E: Engine>(engine: &E, me: NodeIdentity, subject: &str) -> SessionWriter {
    match take_over(engine, me, 1, subject.into()).await {
        TakeoverOutcome::Claimed { writer, events } => {
            assert!(events.is_empty());
            writer
        }
        other => panic!("claim of an empty log failed: {other:?}"),
    }
}

/// A stale expected sequence is rejected with `WrongLastSequence` and stores nothing; the check
/// is per subject.
pub async fn fenced_append_is_rejected<E: Engine>(engine: &E) {
    let layout = Layout::default();
    let (s1, s2) = (layout.log_subject("fence.1"), layout.log_subject("fence.2"));
    let a = engine.append(&event(&s1, 0, "f1", "a")).await.unwrap();
    let b = engine.append(&event(&s2, 0, "f2", "b")).await.unwrap();
    assert!(b.seq > a.seq);
    let c = engine.append(&event(&s1, a.seq, "f3", "c")).await.unwrap();
    assert!(!c.duplicate);
    let stale = engine.append(&event(&s1, a.seq, "f4", "d")).await;
    assert_eq!(stale, Err(AppendError::WrongLastSequence));
    let last = engine.last_message(&s1).await.unwrap().unwrap();
    assert_eq!((last.seq, last.payload.as_ref()), (c.seq, &b"c"[..]));
    assert_eq!(last.msg_id.as_deref(), Some("f3"));
    assert_eq!(last.kind, Some(RecordKind::Event));
    let all = engine.read_subject(&s1, 1).await.unwrap();
    let seqs: Vec<u64> = all.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, vec![a.seq, c.seq]);
}

/// A message id seen before stores nothing: with the current expected sequence the append
/// answers the first copy as a duplicate; with the now-stale one it is fenced (nats-server 2.15).
pub async fn duplicate_message_id_is_not_stored<E: Engine>(engine: &E) {
    let subject = Layout::default().log_subject("dup");
    let first = engine.append(&event(&subject, 0, "d1", "x")).await.unwrap();
    let again = engine
        .append(&event(&subject, first.seq, "d1", "x"))
        .await
        .unwrap();
    assert_eq!((again.seq, again.duplicate), (first.seq, true));
    let stale = engine.append(&event(&subject, 0, "d1", "x")).await;
    assert_eq!(stale, Err(AppendError::WrongLastSequence));
    assert_eq!(engine.read_subject(&subject, 1).await.unwrap().len(), 1);
}

/// A lost acknowledgement is resolved by the subject's last message: a landed append is
/// acknowledged once; a lost request is retried with the same id and stored once.
pub async fn lost_acks_are_resolved<E: Engine>(engine: &E) {
    let subject = Layout::default().log_subject("lost-ack");
    let mut writer = claim_empty(engine, node("a", 1), &subject).await;

    // The append lands but its acknowledgement is lost.
    let call = writer.begin(Bytes::from_static(b"one")).unwrap();
    let _ = execute(engine, &call).await;
    let step = writer.on_reply(Reply::Append(Err(AppendError::Unknown("lost".into()))));
    let WriterStep::Call(read) = step else {
        panic!("expected a read, got {step:?}")
    };
    let landed = match writer.on_reply(execute(engine, &read).await) {
        WriterStep::Acked(seq) => seq,
        other => panic!("landed append not acknowledged: {other:?}"),
    };
    // Its plain retry would now be fenced, not deduplicated.
    assert_eq!(
        execute(engine, &call).await,
        Reply::Append(Err(AppendError::WrongLastSequence))
    );

    // The request is lost: nothing stored, the writer retries the same request.
    let call = writer.begin(Bytes::from_static(b"two")).unwrap();
    let step = writer.on_reply(Reply::Append(Err(AppendError::Unknown("lost".into()))));
    let WriterStep::Call(read) = step else {
        panic!("expected a read, got {step:?}")
    };
    let retry = writer.on_reply(execute(engine, &read).await);
    assert_eq!(retry, WriterStep::Call(call.clone()));
    let stored = match writer.on_reply(execute(engine, &call).await) {
        WriterStep::Acked(seq) => seq,
        other => panic!("retried append not acknowledged: {other:?}"),
    };
    assert!(stored > landed);

    let events: Vec<Bytes> = engine
        .read_subject(&subject, 1)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.kind == Some(RecordKind::Event))
        .map(|m| m.payload)
        .collect();
    assert_eq!(
        events,
        vec![Bytes::from_static(b"one"), Bytes::from_static(b"two")]
    );
}

/// A second node takes a session over only when the owner's lease is gone; the takeover loads
/// every event and fences the old writer for good.
pub async fn takeover_fences_the_old_owner<E: Engine>(a: &E, b: &E) {
    let layout = Layout::default();
    let subject = layout.log_subject("takeover");
    let owner = node("node-a", 7);
    let key = layout.lease_key(&owner.node);
    a.kv_create(&key, Bytes::from_static(b"7")).await.unwrap();
    let mut old = claim_empty(a, owner.clone(), &subject).await;
    let first = append(a, &mut old, Bytes::from_static(b"e1"))
        .await
        .unwrap();
    append(a, &mut old, Bytes::from_static(b"e2"))
        .await
        .unwrap();

    let outcome = take_over(b, node("node-b", 1), 1, subject.clone()).await;
    assert_eq!(outcome, TakeoverOutcome::OwnedBy(owner.clone()));

    // The owner's key now holds another incarnation: the claim is no longer live.
    let entry = a.kv_get(&key).await.unwrap().unwrap();
    a.kv_update(&key, Bytes::from_static(b"8"), entry.revision)
        .await
        .unwrap();
    let (mut new, events) = match take_over(b, node("node-b", 1), 2, subject.clone()).await {
        TakeoverOutcome::Claimed { writer, events } => (writer, events),
        other => panic!("takeover failed: {other:?}"),
    };
    let payloads: Vec<&[u8]> = events.iter().map(|m| m.payload.as_ref()).collect();
    assert_eq!(payloads, vec![&b"e1"[..], &b"e2"[..]]);
    assert_eq!(events[0].seq, first);
    assert!(new.epoch() > old.last_seq());

    assert_eq!(
        append(a, &mut old, Bytes::from_static(b"stale")).await,
        Err(AppendFailure::Fenced)
    );
    assert_eq!(
        append(a, &mut old, Bytes::from_static(b"stale")).await,
        Err(AppendFailure::Fenced)
    );
    append(b, &mut new, Bytes::from_static(b"e3"))
        .await
        .unwrap();
    let stored: Vec<Bytes> = b
        .read_subject(&subject, 1)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.kind == Some(RecordKind::Event))
        .map(|m| m.payload)
        .collect();
    assert_eq!(stored, vec!["e1", "e2", "e3"]);
    // The claim record is found from the last message's id.
    let last = b.last_message(&subject).await.unwrap().unwrap();
    assert_eq!(
        last.msg_id,
        Some(format!("e:{}:{}", new.epoch(), new.epoch()))
    );
}

/// KV writes are revision-checked.
pub async fn kv_revisions_are_checked<E: Engine>(engine: &E) {
    let key = Layout::default().lease_key("rev node");
    let r1 = engine
        .kv_create(&key, Bytes::from_static(b"1"))
        .await
        .unwrap();
    assert_eq!(
        engine.kv_create(&key, Bytes::from_static(b"2")).await,
        Err(KvError::RevisionMismatch)
    );
    let r2 = engine
        .kv_update(&key, Bytes::from_static(b"3"), r1)
        .await
        .unwrap();
    assert!(r2 > r1);
    assert_eq!(
        engine.kv_update(&key, Bytes::from_static(b"4"), r1).await,
        Err(KvError::RevisionMismatch)
    );
    let entry = engine.kv_get(&key).await.unwrap().unwrap();
    assert_eq!((entry.value.as_ref(), entry.revision), (&b"3"[..], r2));
    assert_eq!(engine.kv_get("sabsent").await.unwrap(), None);
}

/// A lease key not written for the TTL is gone: reads miss it, an update of its last revision
/// fails, a create succeeds. `wait_past_ttl` lets more than the bucket TTL pass.
pub async fn kv_leases_expire<E: Engine, F, W>(engine: &E, wait_past_ttl: F)
where
    F: FnOnce() -> W,
    W: Future<Output = ()>,
{
    let key = Layout::default().lease_key("expiring");
    let revision = engine
        .kv_create(&key, Bytes::from_static(b"1"))
        .await
        .unwrap();
    assert!(engine.kv_get(&key).await.unwrap().is_some());
    wait_past_ttl().await;
    assert_eq!(engine.kv_get(&key).await.unwrap(), None);
    assert_eq!(
        engine
            .kv_update(&key, Bytes::from_static(b"1"), revision)
            .await,
        Err(KvError::RevisionMismatch)
    );
    engine
        .kv_create(&key, Bytes::from_static(b"2"))
        .await
        .unwrap();
}

/// Subject reads start at the given stream sequence.
pub async fn subject_reads_start_at_a_sequence<E: Engine>(engine: &E) {
    let subject = Layout::default().log_subject("read");
    let mut prev = 0;
    let mut seqs = Vec::new();
    for i in 0..5u64 {
        let request = AppendRequest {
            subject: subject.clone(),
            expected_last_subject_seq: prev,
            msg_id: format!("r{i}"),
            kind: RecordKind::Event,
            payload: Bytes::from(i.to_string()),
        };
        prev = engine.append(&request).await.unwrap().seq;
        seqs.push(prev);
    }
    let tail = engine.read_subject(&subject, seqs[2]).await.unwrap();
    let got: Vec<u64> = tail.iter().map(|m| m.seq).collect();
    assert_eq!(got, seqs[2..].to_vec());
    assert!(engine
        .read_subject(&subject, prev + 1)
        .await
        .unwrap()
        .is_empty());
    assert!(engine
        .read_subject(&Layout::default().log_subject("never"), 1)
        .await
        .unwrap()
        .is_empty());
    let at = engine.message_at(seqs[1]).await.unwrap().unwrap();
    assert_eq!(at.payload.as_ref(), b"1");
}

/// Live subjects deliver in publish order and are not stored in the log.
pub async fn live_subjects_deliver_in_order<E: Engine>(publisher: &E, subscriber: &E) {
    let layout = Layout::default();
    let subject = layout.live_subject("live");
    let mut live = subscriber.subscribe_live(&subject).await.unwrap();
    for i in 0..3 {
        publisher
            .publish_live(&subject, Bytes::from(format!("m{i}")))
            .await
            .unwrap();
    }
    for i in 0..3 {
        let got = live.next(Duration::from_secs(2)).await;
        assert_eq!(got, Some(Bytes::from(format!("m{i}"))));
    }
    assert!(publisher
        .last_message(&layout.log_subject("live"))
        .await
        .unwrap()
        .is_none());
}

/// Runs `call` on `engine` (re-export for tests).
pub async fn run_call<E: Engine>(engine: &E, call: &Call) -> Reply {
    execute(engine, call).await
}

/// The lease state machine on the engine: created, renewed with revisions, and, once renewals
/// stop, lost on the node's own clock no later than the key vanishes from the engine; a new
/// incarnation can then create the key. `clock` reads the node's monotonic time and `sleep`
/// lets time pass (real time on NATS, model time in memory). The bucket TTL must be `ttl`.
pub async fn leases_renew_and_lapse<E, C, S, W>(engine: &E, ttl: Duration, clock: C, sleep: S)
where
    E: Engine,
    C: Fn() -> Duration,
    S: Fn(Duration) -> W,
    W: Future<Output = ()>,
{
    use agentwire_cluster::drive::tend_lease;
    use agentwire_cluster::lease::{LeaseConfig, NodeLease};

    let key = Layout::default().lease_key("lapsing node");
    let mut lease = NodeLease::new(LeaseConfig::with_ttl(ttl), key.clone(), 1);
    tend_lease(engine, &mut lease, clock())
        .await
        .expect("created");
    assert!(lease.is_valid(clock()));
    let first = engine.kv_get(&key).await.unwrap().expect("key exists");
    assert_eq!(first.value.as_ref(), b"1");

    // Renew twice, at the requested times.
    for _ in 0..2 {
        let due = tend_lease(engine, &mut lease, clock()).await.expect("held");
        sleep(due.saturating_sub(clock())).await;
        tend_lease(engine, &mut lease, clock())
            .await
            .expect("renewed");
        assert!(lease.is_valid(clock()));
    }
    let renewed = engine.kv_get(&key).await.unwrap().expect("key exists");
    assert!(
        renewed.revision > first.revision,
        "renewals wrote new revisions"
    );

    // Stop renewing: the node gives the lease up before the engine drops the key.
    sleep(ttl - ttl / 8).await;
    assert!(!lease.is_valid(clock()));
    assert_eq!(tend_lease(engine, &mut lease, clock()).await, None);
    sleep(ttl / 2).await;
    assert_eq!(
        engine.kv_get(&key).await.unwrap(),
        None,
        "key outlived its TTL"
    );

    let mut next = NodeLease::new(LeaseConfig::with_ttl(ttl), key.clone(), 2);
    tend_lease(engine, &mut next, clock())
        .await
        .expect("re-created");
    assert!(next.is_valid(clock()));
    let entry = engine.kv_get(&key).await.unwrap().expect("key exists");
    assert_eq!(entry.value.as_ref(), b"2");
}

/// An event larger than one message is appended in pieces, acknowledged with the last one and
/// restored whole by a takeover; a run its writer did not finish is no event, and the next
/// owner's claim follows it.
pub async fn large_events_are_stored_in_pieces<E: Engine>(a: &E, b: &E) {
    let layout = Layout::default();
    let subject = layout.log_subject("large");
    let owner = node("node-a", 3);
    let key = layout.lease_key(&owner.node);
    a.kv_create(&key, Bytes::from_static(b"3")).await.unwrap();
    let piece = a.max_record_bytes().min(256 * 1024);
    let mut writer = claim_empty(a, owner.clone(), &subject)
        .await
        .with_piece_limit(piece);
    let large: Bytes = (0..piece * 5 / 2)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let acked = append(a, &mut writer, large.clone()).await.unwrap();
    let small = append(a, &mut writer, Bytes::from_static(b"small"))
        .await
        .unwrap();
    let stored = a.read_subject(&subject, 1).await.unwrap();
    let kinds: Vec<Option<RecordKind>> = stored.iter().map(|m| m.kind).collect();
    let part = |index| Some(RecordKind::Part { index, count: 3 });
    assert_eq!(
        kinds,
        [
            Some(RecordKind::Claim),
            part(0),
            part(1),
            part(2),
            Some(RecordKind::Event)
        ]
    );
    assert!(stored.iter().all(|m| m.payload.len() <= piece));
    assert_eq!(stored[3].seq, acked, "acknowledged with its last piece");
    // The owner dies after the first piece of another large event.
    let request = AppendRequest {
        subject: subject.clone(),
        expected_last_subject_seq: small,
        msg_id: format!("e:{}:{small}", writer.epoch()),
        kind: RecordKind::Part { index: 0, count: 2 },
        payload: Bytes::from_static(b"cut short"),
    };
    let cut = a.append(&request).await.unwrap();
    let entry = a.kv_get(&key).await.unwrap().unwrap();
    a.kv_update(&key, Bytes::from_static(b"4"), entry.revision)
        .await
        .unwrap();
    let (mut new, events) = match take_over(b, node("node-b", 1), 1, subject.clone()).await {
        TakeoverOutcome::Claimed { writer, events } => (writer, events),
        other => panic!("takeover failed: {other:?}"),
    };
    let restored: Vec<(u64, Bytes)> = events.into_iter().map(|m| (m.seq, m.payload)).collect();
    assert_eq!(
        restored,
        [
            (acked, large.clone()),
            (small, Bytes::from_static(b"small"))
        ]
    );
    assert!(new.epoch() > cut.seq, "the claim follows the cut-short run");
    append(b, &mut new, Bytes::from_static(b"next"))
        .await
        .unwrap();
    let all: Vec<Bytes> =
        agentwire_cluster::parts::events(b.read_subject(&subject, 1).await.unwrap())
            .into_iter()
            .map(|m| m.payload)
            .collect();
    assert_eq!(
        all,
        [
            large,
            Bytes::from_static(b"small"),
            Bytes::from_static(b"next")
        ]
    );
}
