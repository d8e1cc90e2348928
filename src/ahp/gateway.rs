//! This host as the cluster gateway of its AHP clients: a channel whose session another node
//! owns is relayed there, as the other dialects' sessions are.
//!
//! * **Routing by channel.** A command or notification names its session by its `channel`
//!   (`ahp-session:/<id>`, `ahp-chat:/<id>`; [`named_session`]): the host looks the session
//!   up, and once another node owns it the frame goes there, while the root channel and the
//!   sessions loaded here are served here. One connection may follow sessions of several
//!   owners at once.
//! * **The link's set-up.** The owner serves the client on a relayed connection initialized
//!   as the client initialized here: [`handshake`] is its `initialize` (the client's id and
//!   version), whose answer the gateway keeps from the client.
//! * **One `serverSeq`.** Every owner numbers its envelopes in its own sequence; the gateway
//!   gives each relayed envelope the next number of its own feed and each relayed snapshot
//!   its current number as `fromSeq` ([`owner_frame`]), so the client sees one increasing
//!   sequence whoever owns its channels.
//! * **`reconnect`** (and `initialize`'s initial subscriptions). A reconnecting client names
//!   channels of any owner. The relayed ones
//!   cannot be replayed here (what the owners sent while the client was away never came
//!   here), so when a subscription names a session that is not loaded here the answer is
//!   fresh snapshots: the gateway subscribes the client again on its behalf (each such
//!   `subscribe` is looked up and relayed like the client's own), gathers the owners'
//!   snapshots, then answers with those and the ones served here; what the owners send
//!   meanwhile follows the answer. A channel whose session is found nowhere is left out. An
//!   `initialize` whose initial subscriptions name such channels is answered the same way,
//!   with the snapshots in its result.

use std::borrow::Cow;

use ahp_types::commands::{
    InitializeParams, ReconnectParams, ReconnectResult, ReconnectSnapshotResult,
};
use ahp_types::state::Snapshot;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::dialect::OwnerFrameUse;
use crate::host::{ConnId, Host, RELAY_HANDSHAKE_ID};
use crate::jsonrpc::{ErrorObject, OwnedId};

use super::channels::{Channel, ROOT};
use super::feed::Feed;
use super::{ConnState, PROTOCOL_VERSIONS};

/// The id prefix of the `subscribe` requests a gathering `reconnect` makes.
const GATHER_ID: &str = "agentwire-ahp-gather-";

/// The request a gathering answers.
#[derive(Debug)]
enum Gathered {
    /// A `reconnect`: fresh snapshots.
    Reconnect,
    /// An `initialize` that agreed on this version, with initial subscriptions.
    Initialize(String),
}

/// A `reconnect` (or an `initialize` with initial subscriptions) waiting for the snapshots
/// of the nodes owning some of its channels.
#[derive(Debug)]
pub(crate) struct Gathering {
    /// The client's request.
    request: OwnedId,
    /// What it asked.
    answer: Gathered,
    /// The channels served here (the root, the sessions loaded here, and those a lookup
    /// found here), subscribed when the answer is made.
    local: Vec<String>,
    /// The `subscribe` requests made for the client and not answered yet: id and channel.
    waiting: Vec<(String, String)>,
    /// The owners' snapshots.
    relayed: Vec<Snapshot>,
    /// What the owners sent meanwhile, delivered after the answer.
    held: Vec<Vec<u8>>,
}

/// The session a frame of an AHP client names: its `channel`'s (none for the root channel
/// and for the connection-level commands).
pub(crate) fn named_session(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        method: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        params: Option<Params<'a>>,
    }
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(borrow, default)]
        channel: Option<Cow<'a, str>>,
    }
    let probe: Probe<'_> = serde_json::from_slice(body).ok()?;
    let method = probe.method?;
    if matches!(
        &*method,
        "initialize" | "reconnect" | "ping" | "listSessions"
    ) {
        return None;
    }
    let channel = probe.params?.channel?;
    Channel::parse(&channel)?.session().map(str::to_owned)
}

/// The `initialize` a node relaying `conn` sends first on each link, under
/// [`RELAY_HANDSHAKE_ID`]: the client's id, and the version it agreed on here (every version
/// this host speaks when it reconnected without one).
pub(crate) fn handshake(host: &Host, conn: ConnId) -> Option<Vec<u8>> {
    let c = host.conn_state_ref::<ConnState>(conn)?;
    if !c.initialized {
        return None;
    }
    let versions: Vec<&str> = match &c.version {
        Some(version) => vec![version.as_str()],
        None => PROTOCOL_VERSIONS.to_vec(),
    };
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": RELAY_HANDSHAKE_ID,
        "method": "initialize",
        "params": {"channel": ROOT, "protocolVersions": versions, "clientId": c.client_id},
    }))
    .ok()
}

/// A frame the owner of a relayed channel sent for `conn`'s client: renumbered into this
/// host's `serverSeq`, or taken by a gathering `reconnect`.
pub(crate) fn owner_frame(host: &mut Host, conn: ConnId, body: &[u8]) -> OwnerFrameUse {
    let Some(c) = host.conn_state::<ConnState>(conn) else {
        return OwnerFrameUse::AsIs;
    };
    if let Some(gathering) = c.gathering.as_mut() {
        let answered =
            response_id(body).and_then(|id| gathering.waiting.iter().position(|(w, _)| *w == id));
        match answered {
            Some(at) => {
                gathering.waiting.swap_remove(at);
                if let Some(snapshot) = answered_snapshot(body) {
                    gathering.relayed.push(snapshot);
                }
                finish_gathering(host, conn);
            }
            None => gathering.held.push(body.to_vec()),
        }
        return OwnerFrameUse::Taken;
    }
    match renumbered(host, body) {
        Some(body) => OwnerFrameUse::Rewritten(body),
        None => OwnerFrameUse::AsIs,
    }
}

/// `body` in this host's sequence: an `action` envelope with the feed's next `serverSeq`, an
/// answer's snapshot with its current one as `fromSeq`; `None` when nothing changes.
fn renumbered(host: &mut Host, body: &[u8]) -> Option<Vec<u8>> {
    let mut message: Value = serde_json::from_slice(body).ok()?;
    let feed = host.dialect_state::<Feed>()?;
    if message.get("method").and_then(Value::as_str) == Some("action") {
        let seq = feed.next_seq();
        *message.get_mut("params")?.get_mut("serverSeq")? = json!(seq);
    } else {
        let seq = feed.seq();
        let snapshot = message.get_mut("result")?.get_mut("snapshot")?;
        *snapshot.get_mut("fromSeq")? = json!(seq);
    }
    serde_json::to_vec(&message).ok()
}

/// The id of a response, as a string (a gathering's ids are strings).
fn response_id(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Response<'a> {
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
        #[serde(borrow, default)]
        id: Option<Cow<'a, str>>,
    }
    let response: Response<'_> = serde_json::from_slice(body).ok()?;
    if response.method.is_some() {
        return None;
    }
    response
        .id
        .filter(|id| id.starts_with(GATHER_ID))
        .map(Cow::into_owned)
}

/// The snapshot a successful `subscribe` answer carries.
fn answered_snapshot(body: &[u8]) -> Option<Snapshot> {
    #[derive(Deserialize)]
    struct Answer {
        result: Option<Subscribed>,
    }
    #[derive(Deserialize)]
    struct Subscribed {
        snapshot: Option<Snapshot>,
    }
    serde_json::from_slice::<Answer>(body)
        .ok()?
        .result?
        .snapshot
}

/// Starts gathering the snapshots of `request`, a `reconnect` or an `initialize` with initial
/// subscriptions, when one of its channels names a session this host has not loaded and the
/// host looks sessions up (a cluster node); whether it did (the answer comes once every owner
/// answered; otherwise the method table answers it).
pub(crate) fn gather(
    host: &mut Host,
    conn: ConnId,
    request: &OwnedId,
    method: &str,
    params: Option<&RawValue>,
) -> bool {
    if !host.config().lookup_unknown_sessions {
        return false;
    }
    let (answer, client_id, subscriptions) = match method {
        "reconnect" => {
            let Ok(p) = super::methods::decode::<ReconnectParams>(params) else {
                return false;
            };
            (Gathered::Reconnect, p.client_id, p.subscriptions)
        }
        "initialize" => {
            let Ok(p) = super::methods::decode::<InitializeParams>(params) else {
                return false;
            };
            // A refused version or channel is answered by the method table.
            let Ok(Some(version)) = super::methods::negotiate(&p.protocol_versions) else {
                return false;
            };
            if p.channel != ROOT {
                return false;
            }
            let subscriptions = p.initial_subscriptions.unwrap_or_default();
            (Gathered::Initialize(version), p.client_id, subscriptions)
        }
        _ => return false,
    };
    let elsewhere = |uri: &str| {
        Channel::parse(uri)
            .and_then(Channel::session)
            .is_some_and(|s| host.session(s).is_none())
    };
    let (relayed, local): (Vec<String>, Vec<String>) =
        subscriptions.into_iter().partition(|uri| elsewhere(uri));
    if relayed.is_empty() {
        return false;
    }
    let Some(c) = host.conn_state::<ConnState>(conn) else {
        return false;
    };
    c.initialized = true;
    c.client_id = client_id;
    c.version = match &answer {
        Gathered::Initialize(version) => Some(version.clone()),
        Gathered::Reconnect => None,
    };
    let mut frames = Vec::with_capacity(relayed.len());
    let mut waiting = Vec::with_capacity(relayed.len());
    for uri in relayed {
        c.gathered += 1;
        let id = format!("{GATHER_ID}{}", c.gathered);
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "subscribe",
                           "params": {"channel": uri}});
        frames.push(Bytes::from(frame.to_string()));
        waiting.push((id, uri));
    }
    c.gathering = Some(Gathering {
        request: request.clone(),
        answer,
        local,
        waiting,
        relayed: Vec::new(),
        held: Vec::new(),
    });
    for frame in frames {
        host.admit_on_behalf(conn, frame);
    }
    true
}

/// A request `id` of `conn` that reached this host's own method table: when it is one a
/// gathering `reconnect` made (its session was found here after all, or nowhere), its channel
/// is served here and the request is not answered; whether it was.
pub(crate) fn served_here(host: &mut Host, conn: ConnId, id: &OwnedId) -> bool {
    let Some(gathering) = host
        .conn_state::<ConnState>(conn)
        .and_then(|c| c.gathering.as_mut())
    else {
        return false;
    };
    let Some(at) = gathering
        .waiting
        .iter()
        .position(|(w, _)| OwnedId::from_string(w) == *id)
    else {
        return false;
    };
    let (_, uri) = gathering.waiting.swap_remove(at);
    gathering.local.push(uri);
    finish_gathering(host, conn);
    true
}

/// Answers the gathering request of `conn` once nothing is awaited: the snapshots served here
/// (subscribed now), then the owners', all as of the feed's current `serverSeq`; then what
/// the owners sent meanwhile.
fn finish_gathering(host: &mut Host, conn: ConnId) {
    let Some(c) = host.conn_state::<ConnState>(conn) else {
        return;
    };
    if c.gathering.as_ref().is_none_or(|g| !g.waiting.is_empty()) {
        return;
    }
    let Some(gathering) = c.gathering.take() else {
        return;
    };
    let mut snapshots = Vec::new();
    for uri in &gathering.local {
        // A channel found nowhere is left out, as the owners' refusals are.
        if let Ok(snapshot) = super::methods::subscribe_to(host, conn, uri) {
            snapshots.push(snapshot);
        }
    }
    let seq = host.dialect_state::<Feed>().map_or(0, |f| f.seq());
    for mut snapshot in gathering.relayed {
        snapshot.from_seq = i64::try_from(seq).unwrap_or(i64::MAX);
        snapshots.push(snapshot);
    }
    let result = match gathering.answer {
        Gathered::Reconnect => {
            serde_json::to_value(ReconnectResult::Snapshot(ReconnectSnapshotResult {
                snapshots,
            }))
            .map_err(|e| ErrorObject::internal(e.to_string()))
        }
        Gathered::Initialize(version) => {
            super::methods::initialize_result(host, version, snapshots)
        }
    };
    host.respond(conn, &gathering.request, result);
    for body in gathering.held {
        let body = renumbered(host, &body).unwrap_or(body);
        host.send_body(conn, &body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_name_the_session_of_their_channel() {
        let frame = |method: &str, channel: &str| {
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"channel": channel}})
                .to_string()
        };
        let named = |body: String| named_session(body.as_bytes());
        assert_eq!(
            named(frame("subscribe", "ahp-session:/s1")),
            Some("s1".into())
        );
        assert_eq!(
            named(frame("fetchTurns", "ahp-chat:/c2")),
            Some("c2".into())
        );
        assert_eq!(
            named(frame("dispatchAction", "ahp-chat:/c2")),
            Some("c2".into())
        );
        // The root and the connection-level commands are served where the client is.
        assert_eq!(named(frame("subscribe", "ahp-root://")), None);
        assert_eq!(named(frame("reconnect", "ahp-session:/s1")), None);
        assert_eq!(named(frame("listSessions", "ahp-session:/s1")), None);
        assert_eq!(named(frame("subscribe", "ahp-terminal:/t")), None);
        assert_eq!(named_session(b"junk"), None);
        // A response names none.
        assert_eq!(
            named(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into()),
            None
        );
    }

    #[test]
    fn a_gatherings_answers_are_told_by_their_id_and_carry_their_snapshot() {
        let answer = br#"{"jsonrpc":"2.0","id":"agentwire-ahp-gather-1","result":{"snapshot":{"resource":"ahp-root://","fromSeq":7,"state":{"agents":[],"activeSessions":0}}}}"#;
        assert_eq!(
            response_id(answer).as_deref(),
            Some("agentwire-ahp-gather-1")
        );
        assert_eq!(
            response_id(br#"{"jsonrpc":"2.0","id":1,"result":null}"#),
            None
        );
        let snapshot = answered_snapshot(answer).expect("a snapshot");
        assert_eq!(snapshot.from_seq, 7);
        let refused = br#"{"jsonrpc":"2.0","id":"agentwire-ahp-gather-2","error":{"code":-32001,"message":"Session not found"}}"#;
        assert!(answered_snapshot(refused).is_none());
    }
}
