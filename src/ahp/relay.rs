//! What a cluster gateway remembers of an AHP client it relays (the AHP side of
//! [`crate::relay::ClientRelay`]): the client's requests the owner has not answered (each
//! answered with the reason when the owner is lost) and the sessions whose channels it
//! relays.
//!
//! An AHP client is not re-attached when the node owning its channels dies or its link
//! breaks: what it missed meanwhile cannot be replayed to it from here (`serverSeq`s are the
//! gateway's, the owner's envelopes in between never came), so its connection ends with the
//! reason and the client reconnects as AHP clients do; its `reconnect`, on any node, gathers
//! fresh snapshots from wherever the sessions are then (`gateway`).

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::host::cluster::relay_requests::{id_key, ClientRequests, Reattachments};

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct AhpRelay {
    requests: ClientRequests,
    /// The sessions the client's relayed frames named, in order.
    sessions: Vec<String>,
    /// Never holds anything (an AHP client is not re-attached); the gateway's re-attachment
    /// checks read it.
    pub(crate) replays: Reattachments,
}

/// The parts of an owner's frame the relay reads.
#[derive(Deserialize)]
struct OwnerMessage<'a> {
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
}

impl AhpRelay {
    /// A frame the client sends to the owner: its request is remembered.
    pub(crate) fn client_sent(&mut self, body: &[u8]) -> Option<Bytes> {
        if let Some(session) = super::gateway::named_session(body) {
            if !self.sessions.contains(&session) {
                self.sessions.push(session);
            }
        }
        self.requests.sent(body, &[])
    }

    /// A frame of the owner for the client: whether to deliver it (the answer to the link's
    /// `initialize` is the gateway's).
    pub(crate) fn owner_sent(&mut self, body: &[u8]) -> bool {
        let Ok(message) = serde_json::from_slice::<OwnerMessage<'_>>(body) else {
            return true;
        };
        let (None, Some(id)) = (message.method, message.id) else {
            return true;
        };
        let Some(key) = id_key(id) else {
            return true;
        };
        if serde_json::from_str::<String>(&key)
            .is_ok_and(|id| id == crate::host::RELAY_HANDSHAKE_ID)
        {
            return false;
        }
        self.requests.answered(&key);
        true
    }

    /// The error answers of every request the owner has not answered.
    pub(crate) fn fail_pending(&mut self, reason: &str) -> Vec<Bytes> {
        self.requests.fail_all(reason)
    }

    /// The sessions the client's relayed frames named.
    pub(crate) fn sessions(&self) -> Vec<String> {
        self.sessions.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unanswered_requests_fail_with_the_reason_and_the_links_initialize_is_kept_back() {
        let mut relay = AhpRelay::default();
        let subscribe =
            br#"{"jsonrpc":"2.0","id":4,"method":"subscribe","params":{"channel":"ahp-chat:/s1"}}"#;
        let fetch = br#"{"jsonrpc":"2.0","id":5,"method":"fetchTurns","params":{"channel":"ahp-chat:/s2"}}"#;
        let dispatched = br#"{"jsonrpc":"2.0","method":"dispatchAction","params":{"channel":"ahp-chat:/s1","clientSeq":1,"action":{}}}"#;
        for body in [&subscribe[..], fetch, dispatched] {
            assert!(relay.client_sent(body).is_none(), "relayed as sent");
        }
        assert_eq!(relay.sessions(), ["s1", "s2"]);
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","id":4,"result":{}}"#));
        assert!(
            !relay.owner_sent(br#"{"jsonrpc":"2.0","id":"agentwire-relay-handshake","result":{}}"#)
        );
        assert!(relay.owner_sent(br#"{"jsonrpc":"2.0","method":"action","params":{}}"#));
        let failed = relay.fail_pending("the owner stopped");
        assert_eq!(failed.len(), 1, "only the unanswered fetchTurns");
        let answer: serde_json::Value = serde_json::from_slice(&failed[0]).unwrap();
        assert_eq!(answer["id"], 5);
        assert_eq!(
            answer["error"]["message"],
            "fetchTurns was not completed: the owner stopped"
        );
        assert!(relay.fail_pending("again").is_empty(), "each answered once");
    }
}
