//! The requests a gateway tracks for the client connection it relays, whatever its dialect:
//! the client's requests the owner has not answered (each answered once with an error if the
//! owner dies first) and the gateway's own re-attachments (whose answers are not the
//! client's). I/O-free; used by the dialects' client relays.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// The JSON-RPC error code of requests the dead owner never answered (and of a `sendAndWait`
/// whose turn ended with an error).
pub(crate) const OWNER_STOPPED: i64 = -32603;

/// Prefix of the ids of the gateway's own requests (re-attachments), never a client's.
const REATTACH_ID_PREFIX: &str = "agentwire-gateway-reattach-";

/// The parts of a message of the owner a relay reads, borrowed (one pass over the body;
/// this runs for every frame relayed to every client).
#[derive(serde::Deserialize)]
pub(crate) struct OwnerMessage<'a> {
    /// A request's or notification's method.
    #[serde(borrow, default)]
    pub(crate) method: Option<&'a RawValue>,
    /// A request's or response's id.
    #[serde(borrow, default)]
    pub(crate) id: Option<&'a RawValue>,
    /// A response's result.
    #[serde(borrow, default)]
    pub(crate) result: Option<&'a RawValue>,
    /// A response's error.
    #[serde(borrow, default)]
    pub(crate) error: Option<&'a RawValue>,
    /// A request's or notification's params.
    #[serde(borrow, default)]
    pub(crate) params: Option<&'a RawValue>,
}

/// A JSON object's members, borrowed.
pub(crate) type Fields<'a> = HashMap<&'a str, &'a RawValue>;

/// A request id as a map key (its compact JSON text).
pub(crate) fn id_key(id: &RawValue) -> Option<String> {
    serde_json::from_str::<Value>(id.get())
        .ok()
        .map(|v| v.to_string())
}

/// A JSON-RPC response body.
pub(crate) fn response(id: &Value, outcome: Result<Value, (i64, String)>) -> Bytes {
    let body = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    };
    Bytes::from(body.to_string())
}

/// A client request the owner has not answered.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    /// Its id.
    pub(crate) id: Value,
    /// Its method.
    pub(crate) method: String,
    /// Its `params.sessionId`.
    pub(crate) session: Option<String>,
    /// For a request that attaches the client to a session: its params.
    pub(crate) attach: Option<Value>,
}

/// The client's requests in flight to the owner, by arrival order.
#[derive(Debug, Default)]
pub(crate) struct ClientRequests {
    pending: BTreeMap<u64, Pending>,
    /// Order key of each pending request, by its id's JSON text.
    ids: HashMap<String, u64>,
    next: u64,
}

/// The params only a gateway's own re-attachments carry (in `params`, or in ACP's
/// `params._meta`): the owner acts on them from a relayed connection, so a client's are
/// removed before its request is relayed.
const GATEWAY_ONLY_PARAMS: &[&str] = &[
    "agentwireRelayReattach",
    crate::host::RELAY_FORMER_MEMBER,
    crate::host::RELAY_AWAITING,
];

/// Removes [`GATEWAY_ONLY_PARAMS`] from `params` and its `_meta`; whether there were any.
fn strip_gateway_params(params: &mut Value) -> bool {
    let mut removed = false;
    let Some(fields) = params.as_object_mut() else {
        return false;
    };
    for key in GATEWAY_ONLY_PARAMS {
        removed |= fields.remove(*key).is_some();
    }
    if let Some(meta) = fields.get_mut("_meta").and_then(Value::as_object_mut) {
        for key in GATEWAY_ONLY_PARAMS {
            removed |= meta.remove(*key).is_some();
        }
    }
    removed
}

impl ClientRequests {
    /// A frame the client sends to the owner: a request is remembered (only its envelope is
    /// parsed, and the params of the methods in `attaches`); anything else is ignored. Returns
    /// the body to relay instead when the client's attach request carried params only a
    /// gateway may send ([`GATEWAY_ONLY_PARAMS`], removed).
    pub(crate) fn sent(&mut self, body: &[u8], attaches: &[&str]) -> Option<Bytes> {
        let message = serde_json::from_slice::<Fields<'_>>(body).ok()?;
        let (Some(id), Some(method)) = (message.get("id"), message.get("method")) else {
            return None;
        };
        let (Ok(id), Ok(method)) = (
            serde_json::from_str::<Value>(id.get()),
            serde_json::from_str::<String>(method.get()),
        ) else {
            return None;
        };
        if id == crate::host::RELAY_HANDSHAKE_ID {
            // The link's set-up, made again on the owner by the client's node: its answer
            // is not the client's, and a link lost before it came fails nothing of the client.
            return None;
        }
        let params = message.get("params");
        let session = params
            .and_then(|p| serde_json::from_str::<Fields<'_>>(p.get()).ok())
            .and_then(|p| serde_json::from_str::<String>(p.get("sessionId")?.get()).ok());
        let mut attach = attaches.contains(&method.as_str()).then(|| {
            params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .unwrap_or(Value::Null)
        });
        let stripped = attach.as_mut().is_some_and(strip_gateway_params);
        let relayed = stripped.then(|| {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": attach});
            Bytes::from(body.to_string())
        });
        let order = self.next;
        self.next += 1;
        self.ids.insert(id.to_string(), order);
        self.pending.insert(
            order,
            Pending {
                id,
                method,
                session,
                attach,
            },
        );
        relayed
    }

    /// The pending request whose id has the JSON text `key`, now answered.
    pub(crate) fn answered(&mut self, key: &str) -> Option<Pending> {
        let order = self.ids.remove(key)?;
        self.pending.remove(&order)
    }

    /// The owner died: an error answer (with `reason`) for every request it did not answer,
    /// in the order the client sent them. Each request is answered once: the new owner never
    /// saw them.
    pub(crate) fn fail_all(&mut self, reason: &str) -> Vec<Bytes> {
        self.take_all().iter().map(|p| failure(p, reason)).collect()
    }

    /// Every pending request, in the order the client sent them; none is pending after.
    pub(crate) fn take_all(&mut self) -> Vec<Pending> {
        self.ids.clear();
        std::mem::take(&mut self.pending).into_values().collect()
    }

    /// The pending requests `keep` does not accept, in the order the client sent them; those
    /// it accepts stay pending.
    pub(crate) fn take_unless(&mut self, keep: impl Fn(&Pending) -> bool) -> Vec<Pending> {
        let (kept, taken): (BTreeMap<u64, Pending>, BTreeMap<u64, Pending>) =
            std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|(_, p)| keep(p));
        self.ids.retain(|_, order| kept.contains_key(order));
        self.pending = kept;
        taken.into_values().collect()
    }

    /// The link broke, the owner still answers: an error answer (with `reason`) for every
    /// pending request but those of `turn_method` (the request that ends with a turn) naming
    /// a session `attached` accepts, which stay pending for the owner to answer on the next
    /// link.
    pub(crate) fn fail_all_but_turns(
        &mut self,
        turn_method: &str,
        attached: impl Fn(&str) -> bool,
        reason: &str,
    ) -> Vec<Bytes> {
        self.take_unless(|p| p.method == turn_method && p.session.as_deref().is_some_and(&attached))
            .iter()
            .map(|pending| failure(pending, reason))
            .collect()
    }

    /// The ids of the pending requests of `method` naming `session`, in the order sent.
    pub(crate) fn ids_of(&self, method: &str, session: &str) -> Vec<Value> {
        self.pending
            .values()
            .filter(|p| p.method == method && p.session.as_deref() == Some(session))
            .map(|p| p.id.clone())
            .collect()
    }
}

/// The error answer to `pending`, which the owner did not complete because of `reason`.
pub(crate) fn failure(pending: &Pending, reason: &str) -> Bytes {
    let message = format!("{} was not completed: {reason}", pending.method);
    response(&pending.id, Err((OWNER_STOPPED, message)))
}

/// The gateway's own requests re-attaching the client to a session, not answered yet, and
/// those the new owner refused.
#[derive(Debug, Default)]
pub(crate) struct Reattachments {
    /// Id (JSON text) → session.
    open: HashMap<String, String>,
    next: u64,
    /// Refused re-attachments: session and the owner's error message.
    refused: Vec<(String, String)>,
}

impl Reattachments {
    /// The request re-attaching the client to `session` with `method` and `params`.
    pub(crate) fn request(&mut self, session: &str, method: &str, params: Value) -> Bytes {
        let id = format!("{REATTACH_ID_PREFIX}{}", self.next);
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.open
            .insert(Value::String(id).to_string(), session.to_owned());
        Bytes::from(body.to_string())
    }

    /// The session of the re-attachment whose id has the JSON text `key`, now answered.
    pub(crate) fn answered(&mut self, key: &str) -> Option<String> {
        self.open.remove(key)
    }

    /// Whether `body` answers one of the re-attachments.
    pub(crate) fn is_answer(&self, body: &[u8]) -> bool {
        match serde_json::from_slice::<Fields<'_>>(body) {
            Ok(message) if !message.contains_key("method") => message
                .get("id")
                .and_then(|id| id_key(id))
                .is_some_and(|key| self.open.contains_key(&key)),
            _ => false,
        }
    }

    /// Whether re-attachments are still unanswered.
    pub(crate) fn any_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// Forgets the unanswered re-attachments (their owner is gone).
    pub(crate) fn clear(&mut self) {
        self.open.clear();
    }

    /// The new owner refused to re-attach the client to `session`, saying `why`.
    pub(crate) fn refused(&mut self, session: String, why: String) {
        self.refused.push((session, why));
    }

    /// The re-attachments refused since the last call (session, reason).
    pub(crate) fn take_refused(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.refused)
    }
}

/// The `message` of a JSON-RPC error object (empty when it has none).
pub(crate) fn error_message(error: &RawValue) -> String {
    serde_json::from_str::<Value>(error.get())
        .ok()
        .and_then(|e| e["message"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_attach_request_is_relayed_without_the_params_only_a_gateway_sends() {
        let mut requests = ClientRequests::default();
        let forged = json!({"jsonrpc": "2.0", "id": 4, "method": "session.resume",
            "params": {"sessionId": "s", "streaming": true, "agentwireRelayReattach": true,
                       "agentwireFormerMember": 7, "agentwireAwaiting": [1, 2]}});
        let relayed = requests
            .sent(forged.to_string().as_bytes(), &["session.resume"])
            .expect("rewritten");
        let relayed: Value = serde_json::from_slice(&relayed).unwrap();
        assert_eq!(
            relayed,
            json!({"jsonrpc": "2.0", "id": 4, "method": "session.resume",
                   "params": {"sessionId": "s", "streaming": true}})
        );
        // What the gateway remembers to re-attach with is the cleaned params too.
        let pending = requests.take_all();
        assert_eq!(pending[0].attach, Some(relayed["params"].clone()));

        // ACP's `_meta`: only the gateway's own fields go.
        let forged = json!({"jsonrpc": "2.0", "id": 5, "method": "session/resume",
            "params": {"sessionId": "s", "cwd": "/w",
                       "_meta": {"agentwireFormerMember": 7, "agentwireAwaiting": [3],
                                 "agentwireReplayAfter": "e1", "other": 1}}});
        let relayed = requests
            .sent(forged.to_string().as_bytes(), &["session/resume"])
            .expect("rewritten");
        let relayed: Value = serde_json::from_slice(&relayed).unwrap();
        assert_eq!(
            relayed["params"]["_meta"],
            json!({"agentwireReplayAfter": "e1", "other": 1})
        );

        // Anything else is relayed as sent.
        let plain =
            br#"{"jsonrpc":"2.0","id":6,"method":"session.resume","params":{"sessionId":"s"}}"#;
        assert!(requests.sent(plain, &["session.resume"]).is_none());
        let other = br#"{"jsonrpc":"2.0","id":7,"method":"session.send","params":{"sessionId":"s","agentwireAwaiting":[1]}}"#;
        assert!(requests.sent(other, &["session.resume"]).is_none());
    }

    #[test]
    fn unanswered_requests_fail_once_in_the_order_they_were_sent() {
        let mut requests = ClientRequests::default();
        requests.sent(
            br#"{"jsonrpc":"2.0","id":"a","method":"m1","params":{"sessionId":"s"}}"#,
            &[],
        );
        requests.sent(br#"{"jsonrpc":"2.0","id":2,"method":"m2"}"#, &["m2"]);
        requests.sent(br#"{"jsonrpc":"2.0","method":"note"}"#, &[]);
        // The link's set-up, made again on the owner: not the client's request.
        let setup = format!(
            r#"{{"jsonrpc":"2.0","id":"{}","method":"sessionFs.setProvider","params":{{}}}}"#,
            crate::host::RELAY_HANDSHAKE_ID
        );
        requests.sent(setup.as_bytes(), &[]);
        let first = requests.answered(r#""a""#).expect("pending");
        assert_eq!(first.session.as_deref(), Some("s"));
        assert!(first.attach.is_none());
        requests.sent(br#"{"jsonrpc":"2.0","id":3,"method":"m3"}"#, &[]);
        let failed: Vec<Value> = requests
            .fail_all("gone")
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert_eq!(failed[0]["id"], 2);
        assert_eq!(failed[0]["error"]["message"], "m2 was not completed: gone");
        assert_eq!(failed[1]["id"], 3);
        assert!(requests.fail_all("again").is_empty());
        assert!(requests.answered("2").is_none());
    }

    #[test]
    fn only_answers_to_the_gateways_own_requests_are_reattachment_answers() {
        let mut reattach = Reattachments::default();
        let body = reattach.request("s", "session.resume", json!({"sessionId": "s"}));
        let sent: Value = serde_json::from_slice(&body).unwrap();
        let id = sent["id"].clone();
        assert!(reattach.any_open());
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string();
        assert!(reattach.is_answer(answer.as_bytes()));
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "x"}).to_string();
        assert!(!reattach.is_answer(request.as_bytes()));
        assert!(!reattach.is_answer(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert_eq!(reattach.answered(&id.to_string()).as_deref(), Some("s"));
        assert!(!reattach.any_open());
    }
}
