//! Gateways: a client of node B whose session is owned by live node A is relayed to A, and
//! keeps its connection and its attachments when A dies.
//!
//! One gateway task per client connection and relayed session (the host routes each frame by
//! the session it names, so one connection may use sessions of several owners): it relays the
//! frames of that session over a [`crate::link`] and watches A's lease.
//! It remembers what it relayed ([`crate::relay::Relay`]): the client's attachments (the
//! params of each successful `session.create` / `session.resume`), its unanswered requests and
//! the last durable event it received of each session (or, for a resume with none yet, the
//! session's last event when the resume was answered, as the owner's answer names it). When A's lease is gone, or A sent its shutdown
//! notice (held back: it is not the client's node that stops) and closed the link and then its
//! lease went:
//!
//! 1. every request A did not answer gets an error answer naming the reason (once: the new
//!    owner never saw them);
//! 2. the session is looked up again, which claims it here (this node is alive and holds a
//!    client of it) unless another node claimed it first; the claim restores the session and
//!    ends its interrupted turn (`session.error`, `session.idle`);
//! 3. the gateway links to the new owner (its own host over an in-memory pipe, or another node
//!    over NATS) and re-attaches the client with a `session.resume` per session carrying the
//!    params it attached with (answer not delivered, no `session.resume` event; a refusal
//!    ends the connection with the reason);
//! 4. the events the client missed are read from the log and delivered (those it received
//!    are not sent again), the interrupted turn's `session.idle` included; the new owner's
//!    live frames follow, without the events already delivered.
//!
//! An editor (ACP) is re-attached the same way, except for step 4: its `session/update`s
//! carry no event ids, so the owner says how far the editor got ([`crate::relay_acp`]) and
//! the new owner replays the updates of the events after that before attaching it.
//!
//! The client's later frames wait while this happens, then go to the new owner.
//!
//! When the link itself breaks (a lost message not sent again in time, or silence,
//! [`crate::link_messages`]) and A
//! still answers, the same steps re-attach the client to A over a new link (step 2 is skipped:
//! A still owns the sessions), except that the requests that end with a turn (a Copilot SDK
//! client's `session.sendAndWait`s, an editor's `session/prompt`s) are not failed in step 1:
//! their turns go on at A, and the re-attachment names them and the connection A served the
//! broken link as, so that A answers them on the new link. When A
//! does not answer, it is treated as gone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire::host::{ConnId, Dialect, RELAY_HANDSHAKE_ID};
use agentwire::relay::ClientRelay;
use agentwire_driver::HostHandle;
use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::{info, warn};

use crate::engine::Engine;
use crate::group_state::OwnerFrame;
use crate::link::{answers, open_local, open_remote, LinkEnds};
use crate::record::NodeIdentity;
use crate::shared::{Lookups, Node};
use crate::wire::alive;

/// How long a re-attachment may wait for the new owner's answers.
const REATTACH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a relayed connection leaves its link.
#[derive(Debug, Clone)]
enum Lost {
    /// The owner is gone: follow the sessions to their new owner.
    Died(NodeIdentity),
    /// The link to the owner, which still answers, lost a message or went silent: re-attach
    /// to the same owner over a new link. With the relayed connection the owner served the
    /// link as (`None` for this node's own host).
    Broke(NodeIdentity, String, Option<u64>),
}

impl Lost {
    /// The node the link went to.
    fn owner(&self) -> &NodeIdentity {
        match self {
            Lost::Died(owner) | Lost::Broke(owner, ..) => owner,
        }
    }

    /// What happened, for reasons given to the client.
    fn what(&self) -> String {
        match self {
            Lost::Died(owner) => format!("the node owning the session ({}) stopped", owner.node),
            Lost::Broke(owner, why, _) => format!(
                "the link to the node owning the session ({}) broke: {why}",
                owner.node
            ),
        }
    }
}

/// Where a relayed connection's frames go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Another node, over NATS.
    Remote(NodeIdentity),
    /// This node's own host (it took the sessions over).
    Local,
}

/// B's side: relays the client connection `conn` to `owner`, the node owning `session`, and
/// re-attaches it to the new owner when `owner` dies.
pub(crate) async fn gateway(
    node: Arc<Node>,
    lookups: Lookups,
    conn: ConnId,
    session: String,
    owner: NodeIdentity,
    mut frames: UnboundedReceiver<Vec<Bytes>>,
) {
    let Some(host) = node.host.get().cloned() else {
        return;
    };
    let end = |reason: String| {
        host.with_host(|host, now| host.cluster().end_forwarding(now, conn, reason));
    };
    let dialect = host
        .with_host(|h, _| h.connection_dialect(conn))
        .flatten()
        .unwrap_or(Dialect::CopilotSdk);
    let mut link = match open_remote(&node, conn, &owner).await {
        Ok(link) => link,
        Err(reason) => return end(reason),
    };
    info!(%session, owner = %owner.node, "client relayed to the owner node");
    let mut target = Target::Remote(owner);
    let mut relay = ClientRelay::new(dialect);
    let mut check = tokio::time::interval(node.lease_ttl / 2);
    // The owner sent its shutdown notice (it stops gracefully, or was fenced).
    let mut owner_stopping = false;
    loop {
        let watched = match &target {
            Target::Remote(owner) => Some(owner.clone()),
            Target::Local => None,
        };
        // Set when the owner is gone (follow the sessions to their new owner) or the link broke.
        let gone: Option<Lost> = tokio::select! {
            batch = frames.recv() => match batch {
                Some(batch) => {
                    for body in batch {
                        let body = relay.client_sent(&body).unwrap_or(body);
                        let _ = link.to_owner.send(body);
                    }
                    None
                }
                // The client is gone: dropping the link closes it.
                None => return,
            },
            body = link.from_owner.recv() => match body {
                Some(body) => {
                    owner_stopping |= pass_on(&node, &host, conn, &session, &mut relay, &body).await;
                    None
                }
                None => {
                    // The owner said it is stopping: its link ends (broken or closed) because
                    // it stops, so wait for its lease to end rather than re-attach to it.
                    let broken = if owner_stopping { None } else { link.broken() };
                    if let (Some(why), Some(owner)) = (broken, &watched) {
                        // A lost message: the same owner takes the client back if it answers,
                        // otherwise it is gone.
                        if answers(&node, &owner.node).await {
                            Some(Lost::Broke(owner.clone(), why, link.member))
                        } else {
                            Some(Lost::Died(owner.clone()))
                        }
                    } else {
                        let stopped = match &watched {
                            Some(owner) if owner_stopping => lease_ends(&node, owner).await,
                            _ => false,
                        };
                        if !stopped {
                            let who = match &target {
                                Target::Remote(owner) => format!("node {}", owner.node),
                                Target::Local => "this node".to_owned(),
                            };
                            return end(format!("{who} closed the relayed connection"));
                        }
                        watched.map(Lost::Died)
                    }
                }
            },
            _ = check.tick(), if watched.is_some() => match watched {
                Some(owner) if !alive(&node, &owner).await => Some(Lost::Died(owner)),
                _ => None,
            },
        };
        let Some(lost) = gone else { continue };
        // What the owner sent before it died is the client's.
        while let Ok(body) = link.from_owner.try_recv() {
            pass_on(&node, &host, conn, &session, &mut relay, &body).await;
        }
        match reattach(&node, &lookups, &host, conn, &session, &mut relay, &lost).await {
            Ok((next, ends)) => {
                info!(sessions = ?relay.sessions(), to = ?next, "relayed client re-attached");
                target = next;
                link = ends;
                owner_stopping = false;
            }
            Err(reason) => {
                // What was kept for the owner to answer (a broken link's `sendAndWait`s).
                for answer in relay.fail_pending(&reason) {
                    deliver(&host, conn, &session, &answer);
                }
                return end(reason);
            }
        }
    }
}

/// Hands a frame of the owner to the client (unless the relay holds it back); whether it was
/// the owner's shutdown notice, which is not passed on: the owner is stopping, not the
/// client's node, and the client follows the session once the owner's lease is gone.
///
/// The answer to a resume of the client from an owner that does not name the session's last
/// event is delivered once the log's last sequence is read (where a catch-up would start if
/// the client receives no event of the session before the owner dies).
async fn pass_on(
    node: &Node,
    host: &HostHandle,
    conn: ConnId,
    route: &str,
    relay: &mut ClientRelay,
    frame: &OwnerFrame,
) -> bool {
    if let Some(head) = &frame.head {
        // An event, read once for all this node's clients of it.
        if relay.owner_sent_event(head) {
            host.with_host(|host, now| {
                host.cluster()
                    .deliver_forwarded_with_head(now, conn, &frame.body, head)
            });
        }
        return false;
    }
    let body = &frame.body[..];
    if is_shutdown_notice(body) {
        return true;
    }
    if is_handshake_answer(body) {
        // The answer to the client's handshake replayed on the owner: it had its own.
        return false;
    }
    if !relay.owner_sent(body) {
        return false;
    }
    relay.delivered(&frame.body);
    for session in relay.floors_wanted() {
        let subject = node.layout.log_subject(&session);
        match node.engine.last_message(&subject).await {
            Ok(last) => relay.set_floor(&session, last.map_or(0, |m| m.seq)),
            Err(e) => warn!(%session, error = %e, "cannot read the log's end after a resume"),
        }
    }
    match relay.take_rewritten() {
        Some(rewritten) => deliver(host, conn, route, &rewritten),
        None => deliver(host, conn, route, body),
    }
    false
}

/// Whether `body` is a node's shutdown notice ([`agentwire_driver::SHUTDOWN_NOTIFICATION`],
/// `_`-prefixed for ACP). The driver writes it with its keys in order, so only a frame that
/// starts as it does is parsed (this runs for every frame relayed to every client).
fn is_shutdown_notice(body: &[u8]) -> bool {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","method":""#;
    let Some(rest) = body.strip_prefix(HEAD) else {
        return false;
    };
    let rest = rest.strip_prefix(b"_").unwrap_or(rest);
    // The notice is a short notification: a long frame is not one.
    body.len() < 4096
        && rest.starts_with(agentwire_driver::SHUTDOWN_NOTIFICATION.as_bytes())
        && serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| {
            let method = v["method"].as_str().unwrap_or("");
            method.strip_prefix('_').unwrap_or(method) == agentwire_driver::SHUTDOWN_NOTIFICATION
                && v.get("id").is_none()
        })
}

/// Whether `body` answers the handshake the link replayed on the owner
/// ([`agentwire::host::RELAY_HANDSHAKE_ID`]). The host writes `jsonrpc` then `id` first in
/// every response, so only a frame that starts so is parsed.
fn is_handshake_answer(body: &[u8]) -> bool {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":""#;
    body.strip_prefix(HEAD)
        .is_some_and(|rest| rest.starts_with(RELAY_HANDSHAKE_ID.as_bytes()))
        && serde_json::from_slice::<serde_json::Value>(body)
            .is_ok_and(|v| v["id"] == RELAY_HANDSHAKE_ID && v.get("method").is_none())
}

/// Waits (up to a little over two lease TTLs) for the lease of `owner`, which is stopping, to
/// end; whether it did.
async fn lease_ends(node: &Node, owner: &NodeIdentity) -> bool {
    let deadline = Instant::now() + node.lease_ttl * 2 + Duration::from_secs(3);
    while Instant::now() < deadline {
        if !alive(node, owner).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

/// Queues `body`, relayed from the owner of session `route`, for the client of `conn`.
fn deliver(host: &HostHandle, conn: ConnId, route: &str, body: &[u8]) {
    host.with_host(|host, now| host.cluster().deliver_forwarded(now, conn, route, body));
}

/// The link to the owner is `lost`: answers what the owner did not, finds the sessions' new
/// owner (the same one when only the link broke), links to it, re-attaches the client and
/// delivers what the client missed.
async fn reattach(
    node: &Arc<Node>,
    lookups: &Lookups,
    host: &HostHandle,
    conn: ConnId,
    route: &str,
    relay: &mut ClientRelay,
    lost: &Lost,
) -> Result<(Target, LinkEnds), String> {
    let dead = lost.owner();
    let what = lost.what();
    let reason = match lost {
        Lost::Died(owner) => format!(
            "node {} owning the session stopped before answering",
            owner.node
        ),
        Lost::Broke(..) => format!("{what} before answering"),
    };
    // A `sendAndWait` of a Copilot SDK client ends with the turn the new owner interrupts;
    // when only the link broke, it (or an editor's `session/prompt`) is answered by the
    // owner on the next link.
    let answers = match lost {
        Lost::Died(_) => relay.fail_pending_after_owner_died(&reason),
        Lost::Broke(_, _, Some(member)) => relay.fail_pending_but_turns_at(*member, &reason),
        Lost::Broke(..) => relay.fail_pending(&reason),
    };
    for answer in answers {
        deliver(host, conn, route, &answer);
    }
    // The link's session follows to its new owner (the same one when only the link broke).
    let target = match lost {
        Lost::Broke(owner, ..) => Target::Remote(owner.clone()),
        Lost::Died(_) => new_owner(node, lookups, route, dead).await.ok_or_else(|| {
            format!(
                "the node owning session {route} ({}) stopped and no node took the session \
                 over; reconnect and resume the session",
                dead.node
            )
        })?,
    };
    if let Lost::Died(_) = lost {
        relay.owner_changed();
    }
    let mut link = match &target {
        Target::Remote(owner) => open_remote(node, conn, owner).await?,
        Target::Local => open_local(node, conn).ok_or("this node is shutting down")?,
    };
    for frame in relay.reattach() {
        let _ = link.to_owner.send(frame);
    }
    // Frames of the new owner that are not answers to the re-attachments wait until the
    // client has caught up.
    let mut held = Vec::new();
    let deadline = Instant::now() + REATTACH_TIMEOUT;
    while relay.reattachments_open() {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, link.from_owner.recv()).await {
            Ok(Some(body)) => {
                if relay.is_reattachment_answer(&body.body) {
                    relay.owner_sent(&body.body);
                } else {
                    held.push(body);
                }
            }
            _ => {
                return Err(format!(
                    "{what} and the new owner did not take this client back; reconnect and \
                     resume the session"
                ))
            }
        }
    }
    if let Some((session, why)) = relay.take_refused().into_iter().next() {
        return Err(format!(
            "{what} and the new owner refused to take this client back to session {session} \
             ({why}); reconnect and resume the session"
        ));
    }
    // An editor's new owner replayed what it missed before taking it back.
    if relay.catches_up_from_log() {
        catch_up(node, host, conn, route, relay, &what).await?;
    }
    for body in relay.skip_replayed(held, |f| &f.body[..]) {
        pass_on(node, host, conn, route, relay, &body).await;
    }
    Ok((target, link))
}

/// Delivers what a Copilot SDK client missed while its link was down, once the new owner took
/// it back: the count of streaming deltas it lost, the durable events read from the log (with
/// the answers of the `sendAndWait`s their interrupted turns end), the `session.idle` of a
/// turn that ended meanwhile, then the error answers of the `sendAndWait`s left.
async fn catch_up(
    node: &Node,
    host: &HostHandle,
    conn: ConnId,
    route: &str,
    relay: &mut ClientRelay,
    what: &str,
) -> Result<(), String> {
    // Streaming deltas lost with the link, reported before the catch-up's first durable event.
    for (session, lost) in relay.take_gaps() {
        info!(%session, lost, "streaming deltas lost with the link");
        host.with_host(|host, now| {
            host.cluster()
                .forwarded_deltas_lost(now, conn, &session, lost)
        });
    }
    for session in relay.sessions() {
        let subject = node.layout.log_subject(&session);
        let stored = node.engine.read_subject(&subject, 1).await.map_err(|e| {
            format!("cannot read session {session}'s log after {what} ({e}); reconnect and resume the session")
        })?;
        let events: Vec<(u64, Bytes)> = crate::parts::events(stored)
            .into_iter()
            .map(|m| (m.seq, m.payload))
            .collect();
        for frame in relay.catch_up(&session, &events) {
            deliver(host, conn, route, &frame);
        }
    }
    // A turn that ended while the link was down: its `session.idle` was lost with it.
    let now = host
        .with_host(|_, now| now.to_rfc3339())
        .unwrap_or_default();
    for frame in relay.missed_idles(&now) {
        deliver(host, conn, route, &frame);
    }
    for answer in relay.fail_turn_waiters() {
        deliver(host, conn, route, &answer);
    }
    Ok(())
}

/// Looks `session` up again after its owner `dead` died, until it is loaded here (this node
/// claimed it) or owned by another live node.
async fn new_owner(
    node: &Arc<Node>,
    lookups: &Lookups,
    session: &str,
    dead: &NodeIdentity,
) -> Option<Target> {
    let deadline = Instant::now() + node.lease_ttl * 3 + Duration::from_secs(5);
    let mut asked: Option<Instant> = None;
    loop {
        let loaded = node
            .host
            .get()
            .and_then(|h| h.with_host(|host, _| host.session_events(session).is_some()))
            .unwrap_or(false);
        if loaded {
            return Some(Target::Local);
        }
        if let Some(owner) = node.owner_of(session).filter(|o| o != dead) {
            if alive(node, &owner).await {
                return Some(Target::Remote(owner));
            }
        }
        if Instant::now() > deadline {
            warn!(%session, "no node took the session over");
            return None;
        }
        // A lookup that found nothing ends; ask again now and then.
        if asked.is_none_or(|at| at.elapsed() > Duration::from_secs(1)) {
            lookups.look_up(session.to_owned());
            asked = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owners_shutdown_notice_is_held_back() {
        let notice = format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"reason":"stopping"}}}}"#,
            agentwire_driver::SHUTDOWN_NOTIFICATION
        );
        assert!(is_shutdown_notice(notice.as_bytes()));
        let event = format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"sessionId":"s","event":{{"data":{{"content":"{}"}}}}}}}}"#,
            agentwire::host::RelayedEventHead::EVENT_METHOD,
            agentwire_driver::SHUTDOWN_NOTIFICATION
        );
        assert!(!is_shutdown_notice(event.as_bytes()));
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#,
            agentwire_driver::SHUTDOWN_NOTIFICATION
        );
        assert!(!is_shutdown_notice(request.as_bytes()));
        let acp = r#"{"jsonrpc":"2.0","method":"_agentwire/shutdown","params":{"reason":"x"}}"#;
        assert!(is_shutdown_notice(acp.as_bytes()));
    }

    #[test]
    fn only_the_replayed_handshakes_answer_is_kept_from_the_client() {
        let answer = format!(r#"{{"jsonrpc":"2.0","id":"{RELAY_HANDSHAKE_ID}","result":{{}}}}"#);
        assert!(is_handshake_answer(answer.as_bytes()));
        let clients = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#;
        assert!(!is_handshake_answer(clients.as_bytes()));
        let request = format!(r#"{{"jsonrpc":"2.0","id":"{RELAY_HANDSHAKE_ID}","method":"x"}}"#);
        assert!(!is_handshake_answer(request.as_bytes()));
    }
}
