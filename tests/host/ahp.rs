//! The AHP dialect over the sans-IO host: the handshake, sessions and snapshots, a turn as
//! action envelopes, a tool call confirmed by an AHP client, one session shared with a
//! Copilot SDK client, reconnect with replay, and bad input.

use agentwire::agent::Scenario;
use agentwire::frame::{FrameDecoder, FrameLimits, Framing};
use agentwire::host::{ConnectionOutput, Dialect, HostConfig, Output};
use serde_json::{json, Value};

use crate::support::{create, Peer, World};

fn ahp_peer(w: &mut World) -> Peer {
    let conn = w
        .host
        .open_with(w.now, Dialect::Ahp, Framing::ContentLength);
    Peer {
        conn,
        decoder: FrameDecoder::new(Framing::ContentLength, FrameLimits::default()),
        next_id: 0,
        inbox: Vec::new(),
    }
}

fn initialize(w: &mut World, p: &mut Peer, client: &str, subscriptions: Value) -> Value {
    w.call(
        p,
        &mut [],
        "initialize",
        json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": client,
               "initialSubscriptions": subscriptions}),
    )
}

fn dispatch(
    w: &mut World,
    p: &mut Peer,
    others: &mut [&mut Peer],
    channel: &str,
    seq: i64,
    action: Value,
) {
    w.send_frame(
        p,
        &json!({"jsonrpc": "2.0", "method": "dispatchAction",
                "params": {"channel": channel, "clientSeq": seq, "action": action}}),
    );
    let mut all: Vec<&mut Peer> = vec![p];
    all.extend(others.iter_mut().map(|o| &mut **o));
    w.pump(&mut all);
}

/// The `action` envelopes `p` received, in order.
fn envelopes(p: &Peer) -> Vec<Value> {
    p.inbox
        .iter()
        .filter(|m| m["method"] == "action")
        .map(|m| m["params"].clone())
        .collect()
}

/// The types of the accepted actions on `channel` (rejections left out).
fn action_types(p: &Peer, channel: &str) -> Vec<String> {
    envelopes(p)
        .iter()
        .filter(|e| e["channel"] == channel && e.get("rejectionReason").is_none())
        .map(|e| e["action"]["type"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn turn_started(turn: &str, text: &str) -> Value {
    json!({"type": "chat/turnStarted", "turnId": turn, "startedAt": "2026-12-04T00:00:00Z",
           "message": {"text": text, "origin": {"kind": "user"}}})
}

fn chat_snapshot(w: &mut World, p: &mut Peer, chat: &str) -> Value {
    let r = w.call(p, &mut [], "subscribe", json!({"channel": chat}));
    r["result"]["snapshot"]["state"].clone()
}

#[test]
fn the_handshake_negotiates_the_version_and_answers_ping_with_null() {
    let mut w = World::new(HostConfig::default());
    let mut p = ahp_peer(&mut w);
    let early = w.call(
        &mut p,
        &mut [],
        "listSessions",
        json!({"channel": "ahp-root://"}),
    );
    assert_eq!(early["error"]["code"], -32600, "{early}");
    let ping = w.call(&mut p, &mut [], "ping", json!({"channel": "ahp-root://"}));
    assert_eq!(ping["result"], Value::Null, "{ping}");
    assert!(ping.get("error").is_none(), "{ping}");

    let too_new = w.call(
        &mut p,
        &mut [],
        "initialize",
        json!({"channel": "ahp-root://", "protocolVersions": ["2.0.0"], "clientId": "c"}),
    );
    assert_eq!(too_new["error"]["code"], -32005, "{too_new}");
    assert_eq!(
        too_new["error"]["data"]["supportedVersions"],
        json!(["1.0.0", "0.9.0"])
    );

    let old = w.call(
        &mut p,
        &mut [],
        "initialize",
        json!({"channel": "ahp-root://", "protocolVersions": ["0.9.0"], "clientId": "c"}),
    );
    assert_eq!(old["result"]["protocolVersion"], "0.9.0", "{old}");

    let r = initialize(&mut w, &mut p, "c", json!(["ahp-root://"]));
    assert_eq!(r["result"]["protocolVersion"], "1.0.0", "{r}");
    let root = &r["result"]["snapshots"][0];
    assert_eq!(root["resource"], "ahp-root://");
    assert_eq!(
        root["state"]["agents"][0]["provider"], "agentwire",
        "{root}"
    );
    assert_eq!(root["state"]["activeSessions"], 0);
}

#[test]
fn a_turn_started_by_an_ahp_client_streams_as_actions_and_lands_in_the_snapshot() {
    let mut w = World::new(HostConfig::default());
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "client-a", json!(["ahp-root://"]));
    let created = w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/s1", "workingDirectories": ["file:///proj"]}),
    );
    assert_eq!(created["result"], Value::Null, "{created}");
    let added: Vec<&Value> = a
        .inbox
        .iter()
        .filter(|m| m["method"] == "root/sessionAdded")
        .collect();
    assert_eq!(added.len(), 1, "{:?}", a.inbox);
    assert_eq!(added[0]["params"]["summary"]["resource"], "ahp-session:/s1");
    let again = w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/s1"}),
    );
    assert_eq!(again["error"]["code"], -32003, "{again}");

    let session = w.call(
        &mut a,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-session:/s1"}),
    );
    let state = &session["result"]["snapshot"]["state"];
    assert_eq!(state["defaultChat"], "ahp-chat:/s1", "{session}");
    assert_eq!(state["chats"][0]["resource"], "ahp-chat:/s1");
    assert_eq!(state["workingDirectories"], json!(["file:///proj"]));
    let chat = chat_snapshot(&mut w, &mut a, "ahp-chat:/s1");
    assert_eq!(chat["turns"], json!([]), "{chat}");

    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/s1",
        1,
        turn_started("t1", "hello"),
    );
    let types = action_types(&a, "ahp-chat:/s1");
    assert_eq!(
        types.first().map(String::as_str),
        Some("chat/turnStarted"),
        "{types:?}"
    );
    assert_eq!(
        types.last().map(String::as_str),
        Some("chat/turnComplete"),
        "{types:?}"
    );
    assert!(types.iter().any(|t| t == "chat/responsePart"), "{types:?}");
    let all = envelopes(&a);
    let echo = all
        .iter()
        .find(|e| e["action"]["type"] == "chat/turnStarted")
        .unwrap();
    assert_eq!(
        echo["origin"],
        json!({"clientId": "client-a", "clientSeq": 1}),
        "{echo}"
    );
    let seqs: Vec<u64> = all
        .iter()
        .map(|e| e["serverSeq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|p| p[0] < p[1]),
        "serverSeq increases: {seqs:?}"
    );
    // The chat's status follows the turn, on the session channel and in the root's summaries.
    let statuses: Vec<u64> = all
        .iter()
        .filter(|e| {
            e["channel"] == "ahp-session:/s1" && e["action"]["type"] == "session/chatUpdated"
        })
        .map(|e| e["action"]["changes"]["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [8, 1], "in progress, then idle");
    let summaries: Vec<&Value> = a
        .inbox
        .iter()
        .filter(|m| m["method"] == "root/sessionSummaryChanged")
        .collect();
    assert_eq!(summaries.len(), 2, "{summaries:?}");
    assert_eq!(summaries[1]["params"]["changes"]["status"], 1);
    assert_eq!(summaries[1]["params"]["session"], "ahp-session:/s1");

    // A second client's snapshot holds the finished turn with the agent's answer.
    let mut b = ahp_peer(&mut w);
    initialize(&mut w, &mut b, "client-b", json!([]));
    let chat = chat_snapshot(&mut w, &mut b, "ahp-chat:/s1");
    let turn = &chat["turns"][0];
    assert_eq!(turn["id"], "t1", "{chat}");
    assert_eq!(turn["state"], "complete");
    assert_eq!(turn["message"]["text"], "hello");
    let text: String = turn["responseParts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "markdown")
        .map(|p| p["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "You said: hello", "{chat}");
    assert!(chat.get("activeTurn").is_none(), "{chat}");

    let list = w.call(
        &mut b,
        &mut [],
        "listSessions",
        json!({"channel": "ahp-root://"}),
    );
    assert_eq!(list["result"]["items"][0]["title"], "hello", "{list}");
    let turns = w.call(
        &mut b,
        &mut [],
        "fetchTurns",
        json!({"channel": "ahp-chat:/s1"}),
    );
    assert_eq!(turns["result"], json!({}), "{turns}");

    let gone = w.call(
        &mut b,
        &mut [&mut a],
        "disposeSession",
        json!({"channel": "ahp-session:/s1"}),
    );
    assert_eq!(gone["result"], Value::Null, "{gone}");
    assert!(
        a.inbox
            .iter()
            .any(|m| m["method"] == "root/sessionRemoved"
                && m["params"]["session"] == "ahp-session:/s1"),
        "{:?}",
        a.inbox
    );
}

#[test]
fn a_tool_call_waits_for_an_ahp_confirmation_and_late_answers_are_rejected() {
    let scenario = Scenario::from_json(
        r#"{"default":[{"read_file":"/proj/notes.txt","result":"the notes"},{"say":"done"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut a = ahp_peer(&mut w);
    let mut b = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    initialize(&mut w, &mut b, "b", json!([]));
    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/s", "workingDirectories": ["/proj"]}),
    );
    chat_snapshot(&mut w, &mut a, "ahp-chat:/s");
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/s",
        1,
        turn_started("t", "read it"),
    );
    let types = action_types(&a, "ahp-chat:/s");
    assert_eq!(
        types.last().map(String::as_str),
        Some("chat/toolCallReady"),
        "the turn waits for a confirmation: {types:?}"
    );
    let ready = envelopes(&a).last().cloned().unwrap();
    assert!(ready["action"].get("confirmed").is_none(), "{ready}");
    let tool_call_id = ready["action"]["toolCallId"].as_str().unwrap().to_owned();

    // A client joining mid-turn sees the pending confirmation in its snapshot.
    let chat = chat_snapshot(&mut w, &mut b, "ahp-chat:/s");
    let part = &chat["activeTurn"]["responseParts"][0];
    assert_eq!(part["toolCall"]["status"], "pending-confirmation", "{chat}");

    // b answers; the turn goes on; a's late answer is rejected to a alone.
    dispatch(
        &mut w,
        &mut b,
        &mut [&mut a],
        "ahp-chat:/s",
        7,
        json!({"type": "chat/toolCallConfirmed", "turnId": "t", "toolCallId": tool_call_id, "approved": true}),
    );
    let confirmed = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "chat/toolCallConfirmed")
        .expect("the confirmation is announced");
    assert_eq!(
        confirmed["origin"],
        json!({"clientId": "b", "clientSeq": 7}),
        "{confirmed}"
    );
    let types = action_types(&a, "ahp-chat:/s");
    assert!(
        types.iter().any(|t| t == "chat/toolCallComplete"),
        "{types:?}"
    );
    assert_eq!(
        types.last().map(String::as_str),
        Some("chat/turnComplete"),
        "{types:?}"
    );
    let complete = envelopes(&b)
        .into_iter()
        .find(|e| e["action"]["type"] == "chat/toolCallComplete")
        .unwrap();
    assert_eq!(complete["action"]["result"]["success"], true, "{complete}");

    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/s",
        2,
        json!({"type": "chat/toolCallConfirmed", "turnId": "t", "toolCallId": tool_call_id, "approved": false}),
    );
    let rejected = envelopes(&a).last().cloned().unwrap();
    assert!(
        rejected["rejectionReason"]
            .as_str()
            .unwrap()
            .contains("no pending confirmation"),
        "{rejected}"
    );
    assert!(
        envelopes(&b)
            .iter()
            .all(|e| e.get("rejectionReason").is_none()),
        "only the sender hears of its rejection"
    );
}

#[test]
fn a_copilot_session_streams_to_an_ahp_subscriber() {
    let mut w = World::new(HostConfig::default());
    let mut sdk = w.connect();
    create(&mut w, &mut sdk, "shared", json!({"streaming": true}));
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!(["ahp-chat:/shared"]));
    w.call(
        &mut sdk,
        &mut [&mut a],
        "session.send",
        json!({"sessionId": "shared", "prompt": "from the sdk"}),
    );
    w.pump(&mut [&mut sdk, &mut a]);
    let types = action_types(&a, "ahp-chat:/shared");
    assert_eq!(
        types.first().map(String::as_str),
        Some("chat/turnStarted"),
        "{types:?}"
    );
    assert_eq!(
        types.last().map(String::as_str),
        Some("chat/turnComplete"),
        "{types:?}"
    );
    let started = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "chat/turnStarted")
        .unwrap();
    assert_eq!(started["action"]["message"]["text"], "from the sdk");

    // And an AHP prompt reaches the SDK client as session events.
    dispatch(
        &mut w,
        &mut a,
        &mut [&mut sdk],
        "ahp-chat:/shared",
        1,
        turn_started("t2", "from ahp"),
    );
    let users: Vec<Value> = sdk
        .events("shared")
        .into_iter()
        .filter(|e| e["type"] == "user.message")
        .collect();
    assert_eq!(
        users.last().unwrap()["data"]["content"],
        "from ahp",
        "{users:?}"
    );
    assert!(
        sdk.events("shared")
            .iter()
            .any(|e| e["type"] == "assistant.message"
                && e["data"]["content"] == "You said: from ahp"),
        "{:?}",
        sdk.types("shared")
    );
}

#[test]
fn reconnect_replays_what_the_client_missed() {
    let mut w = World::new(HostConfig::default());
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/r"}),
    );
    chat_snapshot(&mut w, &mut a, "ahp-chat:/r");
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/r",
        1,
        turn_started("t1", "one"),
    );
    let last_seen = envelopes(&a).last().unwrap()["serverSeq"].as_u64().unwrap();
    w.host.handle_eof(w.now, a.conn);

    // A turn runs while the client is away.
    let mut other = ahp_peer(&mut w);
    initialize(&mut w, &mut other, "o", json!([]));
    dispatch(
        &mut w,
        &mut other,
        &mut [],
        "ahp-chat:/r",
        1,
        turn_started("t2", "two"),
    );

    let mut back = ahp_peer(&mut w);
    let r = w.call(
        &mut back,
        &mut [],
        "reconnect",
        json!({"channel": "ahp-root://", "clientId": "a", "lastSeenServerSeq": last_seen,
               "subscriptions": ["ahp-chat:/r", "ahp-chat:/gone"]}),
    );
    let result = &r["result"];
    assert_eq!(result["type"], "replay", "{r}");
    assert_eq!(result["missing"], json!(["ahp-chat:/gone"]));
    let actions = result["actions"].as_array().unwrap();
    assert_eq!(actions[0]["action"]["type"], "chat/turnStarted", "{r}");
    assert_eq!(actions[0]["action"]["turnId"], "t2");
    assert!(actions
        .iter()
        .all(|e| e["serverSeq"].as_u64().unwrap() > last_seen));
    assert_eq!(
        actions.last().unwrap()["action"]["type"],
        "chat/turnComplete"
    );
}

#[test]
fn bad_input_gets_clear_errors_and_the_connection_keeps_working() {
    let mut w = World::new(HostConfig::default());
    let mut a = ahp_peer(&mut w);
    w.send_frame(&a, &json!("not a request"));
    let junk = b"{ this is not json";
    w.send_raw(
        &a,
        format!("Content-Length: {}\r\n\r\n", junk.len()).as_bytes(),
    );
    w.send_raw(&a, junk);
    w.pump(&mut [&mut a]);
    assert!(
        a.inbox.iter().any(|m| m["error"]["code"] == -32700),
        "{:?}",
        a.inbox
    );
    initialize(&mut w, &mut a, "a", json!([]));
    let unknown = w.call(
        &mut a,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-terminal:/x"}),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let missing = w.call(
        &mut a,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-chat:/nope"}),
    );
    assert_eq!(missing["error"]["code"], -32001, "{missing}");
    let method = w.call(&mut a, &mut [], "frobnicate", json!({}));
    assert_eq!(method["error"]["code"], -32601, "{method}");
    let bad = w.call(&mut a, &mut [], "createSession", json!({"channel": 7}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let chats = w.call(
        &mut a,
        &mut [],
        "createChat",
        json!({"channel": "ahp-session:/x", "chat": "ahp-chat:/y"}),
    );
    // A chat of a session that does not exist.
    assert_eq!(chats["error"]["code"], -32001, "{chats}");

    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/b"}),
    );
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-session:/b",
        3,
        json!({"type": "session/isReadChanged", "isRead": true}),
    );
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/b",
        4,
        json!({"type": "no/suchAction"}),
    );
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/nope",
        5,
        turn_started("t", "x"),
    );
    let reasons: Vec<String> = envelopes(&a)
        .iter()
        .filter_map(|e| e["rejectionReason"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[2].contains("session not found"), "{reasons:?}");

    let ping = w.call(&mut a, &mut [], "ping", json!({"channel": "ahp-root://"}));
    assert_eq!(ping["result"], Value::Null, "still answering: {ping}");
}

#[test]
fn an_error_turn_a_cancelled_turn_and_a_title_reach_ahp_clients() {
    let scenario = Scenario::from_json(
        r#"{"rules":[{"match":"fail","steps":[{"error":"the model is down"}]},
                     {"match":"slow","steps":[{"sleep_ms":5000},{"say":"late"}]}],
            "default":[{"say":"ok"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/e"}),
    );
    chat_snapshot(&mut w, &mut a, "ahp-chat:/e");
    w.call(
        &mut a,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-session:/e"}),
    );

    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/e",
        1,
        turn_started("t1", "fail now"),
    );
    let error = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "chat/error")
        .expect("the turn ends in an error");
    assert_eq!(
        error["action"]["part"]["error"]["message"], "the model is down",
        "{error}"
    );

    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/e",
        2,
        turn_started("t2", "slow one"),
    );
    // A turn id already in use is refused, to its sender.
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/e",
        3,
        turn_started("t2", "again"),
    );
    let refused = envelopes(&a).last().cloned().unwrap();
    assert!(
        refused["rejectionReason"]
            .as_str()
            .unwrap()
            .contains("already exists"),
        "{refused}"
    );
    // A second turn while this one runs is queued; the abort drops it (as the agent's queue
    // is cleared by an abort).
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/e",
        6,
        turn_started("t3", "meanwhile"),
    );
    let queued = envelopes(&a).last().cloned().unwrap();
    assert_eq!(
        queued["action"]["type"], "chat/pendingMessageSet",
        "{queued}"
    );
    assert_eq!(queued["origin"]["clientSeq"], 6, "{queued}");
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/e",
        4,
        json!({"type": "chat/turnCancelled", "turnId": "t2", "duration": 0}),
    );
    w.run_timers(&mut [&mut a]);
    let removed = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "chat/pendingMessageRemoved")
        .expect("the abort drops the queued message");
    assert_eq!(removed["action"]["id"], "t3", "{removed}");
    assert!(
        !action_types(&a, "ahp-chat:/e")
            .iter()
            .skip_while(|t| *t != "chat/pendingMessageRemoved")
            .any(|t| t == "chat/turnStarted"),
        "the dropped message never starts a turn"
    );
    let types = action_types(&a, "ahp-chat:/e");
    assert_eq!(
        types[types.len() - 2..],
        ["chat/turnCancelled", "chat/pendingMessageRemoved"],
        "{types:?}"
    );

    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-session:/e",
        5,
        json!({"type": "session/titleChanged", "title": "Renamed"}),
    );
    let title = envelopes(&a).last().cloned().unwrap();
    assert_eq!(title["channel"], "ahp-session:/e", "{title}");
    assert_eq!(title["action"]["title"], "Renamed");
    let chat = chat_snapshot(&mut w, &mut a, "ahp-chat:/e");
    assert_eq!(chat["title"], "Renamed", "{chat}");
    let states: Vec<&Value> = chat["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["state"])
        .collect();
    assert_eq!(states, [&json!("error"), &json!("cancelled")], "{chat}");
}

#[test]
fn a_session_with_history_is_snapshotted_from_its_events() {
    let mut w = World::new(HostConfig::default());
    let mut sdk = w.connect();
    create(&mut w, &mut sdk, "old", json!({}));
    for prompt in ["first", "second"] {
        w.call(
            &mut sdk,
            &mut [],
            "session.send",
            json!({"sessionId": "old", "prompt": prompt}),
        );
    }
    // The first AHP look at the session builds its chat from the session's events.
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    let chat = chat_snapshot(&mut w, &mut a, "ahp-chat:/old");
    let turns = chat["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{chat}");
    assert_eq!(turns[0]["message"]["text"], "first");
    assert_eq!(
        turns[1]["responseParts"][0]["content"], "You said: second",
        "{chat}"
    );
    assert!(turns.iter().all(|t| t["state"] == "complete"));
}

mod junk {
    use proptest::prelude::*;

    use super::*;

    /// Pieces of AHP traffic, valid and not, for random sequences.
    fn message() -> impl Strategy<Value = Value> {
        let channel = prop_oneof![
            Just("ahp-root://"),
            Just("ahp-session:/p"),
            Just("ahp-chat:/p"),
            Just("ahp-chat:/q"),
            Just("ahp-junk:/x"),
            Just(""),
        ];
        let method = prop_oneof![
            Just("initialize"),
            Just("reconnect"),
            Just("ping"),
            Just("subscribe"),
            Just("createSession"),
            Just("disposeSession"),
            Just("listSessions"),
            Just("fetchTurns"),
            Just("createChat"),
            Just("nope"),
        ];
        let action = prop_oneof![
            Just(turn_started("t", "hi")),
            Just(
                json!({"type": "chat/toolCallConfirmed", "turnId": "t", "toolCallId": "c", "approved": true})
            ),
            Just(json!({"type": "chat/turnCancelled", "turnId": "t", "duration": 1})),
            Just(json!({"type": "session/titleChanged", "title": "x"})),
            Just(json!({"type": "nope"})),
            Just(json!(42)),
        ];
        prop_oneof![
            (0u64..50, method, channel.clone()).prop_map(|(id, m, c)| json!({
                "jsonrpc": "2.0", "id": id, "method": m,
                "params": {"channel": c, "protocolVersions": ["1.0.0"], "clientId": "f",
                           "lastSeenServerSeq": 1, "subscriptions": [c]}})),
            (channel.clone(), action, any::<i64>()).prop_map(|(c, a, s)| json!({
                "jsonrpc": "2.0", "method": "dispatchAction",
                "params": {"channel": c, "clientSeq": s, "action": a}})),
            channel.prop_map(
                |c| json!({"jsonrpc": "2.0", "method": "unsubscribe", "params": {"channel": c}})
            ),
            Just(json!([])),
            Just(json!("junk")),
            Just(json!({"jsonrpc": "2.0", "id": 1, "result": null})),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

        /// Whatever two clients send, nothing panics and every request gets one answer.
        #[test]
        fn any_sequence_is_answered_once_per_request(steps in proptest::collection::vec((any::<bool>(), message()), 1..40)) {
            let mut w = World::new(HostConfig::default());
            let mut a = ahp_peer(&mut w);
            let mut b = ahp_peer(&mut w);
            let mut sent = [Vec::new(), Vec::new()];
            for (to_b, m) in &steps {
                let peer = if *to_b { &b } else { &a };
                w.send_frame(peer, m);
                if m.get("method").is_some() {
                    if let Some(id) = m.get("id") {
                        sent[usize::from(*to_b)].push(id.clone());
                    }
                }
                w.pump(&mut [&mut a, &mut b]);
                w.run_timers(&mut [&mut a, &mut b]);
            }
            for (peer, ids) in [(&a, &sent[0]), (&b, &sent[1])] {
                let answers = peer.inbox.iter().filter(|m| m.get("method").is_none() && !m["id"].is_null()).count();
                // Duplicate ids in flight are refused with their own error: one answer each.
                prop_assert_eq!(answers, ids.len(), "{:?}", peer.inbox);
            }
        }
    }
}

#[test]
fn a_permission_is_answered_by_whichever_client_of_either_dialect_answers_first() {
    let scenario = Scenario::from_json(
        r#"{"default":[{"read_file":"/proj/notes.txt","result":"the notes"},{"say":"done"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut sdk = w.connect();
    create(
        &mut w,
        &mut sdk,
        "both",
        json!({"workingDirectory": "/proj"}),
    );
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!(["ahp-chat:/both"]));

    // Turn 1: the SDK client answers; the AHP client sees the confirmation, then cannot
    // answer any more.
    w.call(
        &mut sdk,
        &mut [&mut a],
        "session.send",
        json!({"sessionId": "both", "prompt": "one"}),
    );
    w.pump(&mut [&mut sdk, &mut a]);
    let asked = sdk.event("both", "permission.requested");
    let ready = envelopes(&a)
        .into_iter()
        .rev()
        .find(|e| e["action"]["type"] == "chat/toolCallReady")
        .unwrap();
    let tool_call = ready["action"]["toolCallId"].clone();
    w.call(
        &mut sdk,
        &mut [&mut a],
        "session.permissions.handlePendingPermissionRequest",
        json!({"sessionId": "both", "requestId": asked["data"]["requestId"], "result": {"kind": "approve-once"}}),
    );
    w.pump(&mut [&mut sdk, &mut a]);
    let confirmed = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "chat/toolCallConfirmed")
        .expect("the SDK's answer reaches the AHP client");
    assert_eq!(confirmed["action"]["approved"], true);
    assert!(
        confirmed.get("origin").is_none(),
        "not an AHP client's: {confirmed}"
    );
    dispatch(
        &mut w,
        &mut a,
        &mut [&mut sdk],
        "ahp-chat:/both",
        1,
        json!({"type": "chat/toolCallConfirmed", "turnId": confirmed["action"]["turnId"],
               "toolCallId": tool_call, "approved": false}),
    );
    assert!(envelopes(&a).last().unwrap()["rejectionReason"].is_string());
    assert_eq!(
        action_types(&a, "ahp-chat:/both")
            .last()
            .map(String::as_str),
        Some("chat/turnComplete")
    );

    // Turn 2: the AHP client answers first (a denial); the SDK client sees the decision.
    let before = sdk
        .events("both")
        .iter()
        .filter(|e| e["type"] == "permission.completed")
        .count();
    w.call(
        &mut sdk,
        &mut [&mut a],
        "session.send",
        json!({"sessionId": "both", "prompt": "two"}),
    );
    w.pump(&mut [&mut sdk, &mut a]);
    let ready = envelopes(&a)
        .into_iter()
        .rev()
        .find(|e| e["action"]["type"] == "chat/toolCallReady")
        .unwrap();
    dispatch(
        &mut w,
        &mut a,
        &mut [&mut sdk],
        "ahp-chat:/both",
        2,
        json!({"type": "chat/toolCallConfirmed", "turnId": ready["action"]["turnId"],
               "toolCallId": ready["action"]["toolCallId"], "approved": false}),
    );
    let completed: Vec<Value> = sdk
        .events("both")
        .into_iter()
        .filter(|e| e["type"] == "permission.completed")
        .collect();
    assert_eq!(completed.len(), before + 1, "one decision");
    assert!(
        !completed.last().unwrap()["data"]["result"]["kind"]
            .as_str()
            .unwrap()
            .starts_with("approved"),
        "{completed:?}"
    );
    let done = sdk
        .events("both")
        .into_iter()
        .rev()
        .find(|e| e["type"] == "tool.execution_complete")
        .unwrap();
    assert_eq!(done["data"]["success"], false, "denied: {done}");
}

#[test]
fn an_ahp_client_provides_a_tool_executes_its_calls_and_only_it_may_complete_them() {
    let mut w = World::new(HostConfig::default());
    let mut a = ahp_peer(&mut w);
    let mut b = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    initialize(&mut w, &mut b, "b", json!([]));
    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/tools"}),
    );
    chat_snapshot(&mut w, &mut a, "ahp-chat:/tools");
    chat_snapshot(&mut w, &mut b, "ahp-chat:/tools");
    w.call(
        &mut b,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-session:/tools"}),
    );
    let weather = json!({"name": "get_weather", "description": "Weather for a city",
                         "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}});
    // Setting another client active is refused.
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-session:/tools",
        1,
        json!({"type": "session/activeClientSet", "activeClient": {"clientId": "b", "tools": [weather]}}),
    );
    assert!(envelopes(&a).last().unwrap()["rejectionReason"]
        .as_str()
        .unwrap()
        .contains("only itself"));
    dispatch(
        &mut w,
        &mut a,
        &mut [&mut b],
        "ahp-session:/tools",
        2,
        json!({"type": "session/activeClientSet", "activeClient": {"clientId": "a", "tools": [weather]}}),
    );
    assert_eq!(
        action_types(&b, "ahp-session:/tools"),
        ["session/activeClientSet"]
    );
    let session = w.call(
        &mut b,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-session:/tools"}),
    );
    assert_eq!(
        session["result"]["snapshot"]["state"]["activeClients"][0]["clientId"], "a",
        "{session}"
    );

    dispatch(
        &mut w,
        &mut b,
        &mut [&mut a],
        "ahp-chat:/tools",
        1,
        turn_started("t", "weather in Paris?"),
    );
    let start = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "chat/toolCallStart")
        .expect("the tool is called");
    assert_eq!(
        start["action"]["contributor"],
        json!({"kind": "client", "clientId": "a"}),
        "{start}"
    );
    let call = start["action"]["toolCallId"].clone();
    // Asked first (a custom tool needs permission); b approves.
    dispatch(
        &mut w,
        &mut b,
        &mut [&mut a],
        "ahp-chat:/tools",
        2,
        json!({"type": "chat/toolCallConfirmed", "turnId": "t", "toolCallId": call, "approved": true}),
    );
    let result = json!({"success": true, "pastTenseMessage": "Got the weather",
                        "content": [{"type": "text", "text": "sunny, 24°C"}]});
    // b does not provide the tool: its result is refused; a's is taken.
    dispatch(
        &mut w,
        &mut b,
        &mut [&mut a],
        "ahp-chat:/tools",
        3,
        json!({"type": "chat/toolCallComplete", "turnId": "t", "toolCallId": call, "result": result}),
    );
    let refused = envelopes(&b).last().cloned().unwrap();
    assert!(
        refused["rejectionReason"]
            .as_str()
            .unwrap()
            .contains("executed by client"),
        "{refused}"
    );
    dispatch(
        &mut w,
        &mut a,
        &mut [&mut b],
        "ahp-chat:/tools",
        3,
        json!({"type": "chat/toolCallComplete", "turnId": "t", "toolCallId": call, "result": result}),
    );
    let complete = envelopes(&b)
        .into_iter()
        .find(|e| {
            e["action"]["type"] == "chat/toolCallComplete" && e.get("rejectionReason").is_none()
        })
        .expect("the result is announced");
    assert_eq!(
        complete["origin"],
        json!({"clientId": "a", "clientSeq": 3}),
        "{complete}"
    );
    assert_eq!(
        complete["action"]["result"]["content"][0]["text"],
        "sunny, 24°C"
    );
    let types = action_types(&b, "ahp-chat:/tools");
    assert_eq!(
        types.last().map(String::as_str),
        Some("chat/turnComplete"),
        "{types:?}"
    );

    // a leaves: its tools go with it.
    w.host.handle_eof(w.now, a.conn);
    w.pump(&mut [&mut b]);
    assert_eq!(
        action_types(&b, "ahp-session:/tools")
            .last()
            .map(String::as_str),
        Some("session/activeClientRemoved")
    );
}

#[test]
fn an_elicitation_is_a_chat_input_request_an_ahp_client_answers() {
    let scenario = Scenario::from_json(
        r#"{"default":[{"ask":"Deploy now?","schema":{"type":"object","required":["confirmed"],
              "properties":{"confirmed":{"type":"boolean","description":"Really?"},
                            "env":{"type":"string","enum":["prod","dev"]}}}},
            {"say":"The form said {answer}"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/ask"}),
    );
    chat_snapshot(&mut w, &mut a, "ahp-chat:/ask");
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/ask",
        1,
        turn_started("t", "go"),
    );
    let requested = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "chat/inputRequested")
        .expect("the elicitation is asked");
    let request = &requested["action"]["request"];
    assert_eq!(request["message"], "Deploy now?", "{requested}");
    let questions = request["questions"].as_array().unwrap();
    assert!(
        questions
            .iter()
            .any(|q| q["kind"] == "boolean" && q["id"] == "confirmed" && q["required"] == true),
        "{request}"
    );
    assert!(
        questions
            .iter()
            .any(|q| q["kind"] == "single-select" && q["options"][0]["id"] == "prod"),
        "{request}"
    );
    let id = request["id"].clone();

    // The snapshot of a client joining now has the open request in the active turn.
    let chat = chat_snapshot(&mut w, &mut a, "ahp-chat:/ask");
    assert_eq!(
        chat["activeTurn"]["responseParts"][0]["kind"], "inputRequest",
        "{chat}"
    );

    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/ask",
        2,
        json!({"type": "chat/inputCompleted", "requestId": id, "response": "accept",
               "answers": {"confirmed": {"state": "submitted", "value": {"kind": "boolean", "value": true}},
                           "env": {"state": "submitted", "value": {"kind": "selected", "value": "dev"}}}}),
    );
    let completed = envelopes(&a)
        .into_iter()
        .find(|e| {
            e["action"]["type"] == "chat/inputCompleted" && e.get("rejectionReason").is_none()
        })
        .expect("the answer is announced");
    assert_eq!(completed["origin"]["clientId"], "a", "{completed}");
    assert_eq!(completed["action"]["response"], "accept");
    let chat = chat_snapshot(&mut w, &mut a, "ahp-chat:/ask");
    let text: String = chat["turns"][0]["responseParts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "markdown")
        .map(|p| p["content"].as_str().unwrap())
        .collect();
    assert!(
        text.contains("\"confirmed\":true") && text.contains("\"env\":\"dev\""),
        "{text}"
    );
    // Answering again is refused.
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/ask",
        3,
        json!({"type": "chat/inputCompleted", "requestId": id, "response": "decline"}),
    );
    assert!(envelopes(&a).last().unwrap()["rejectionReason"]
        .as_str()
        .unwrap()
        .contains("not waiting"));
}

#[test]
fn the_mode_is_session_config_and_autopilot_runs_tools_without_asking() {
    let scenario = Scenario::from_json(
        r#"{"default":[{"read_file":"/proj/notes.txt","result":"the notes"},{"say":"done"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/m", "workingDirectories": ["/proj"]}),
    );
    let session = w.call(
        &mut a,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-session:/m"}),
    );
    let config = &session["result"]["snapshot"]["state"]["config"];
    assert_eq!(config["values"]["mode"], "interactive", "{session}");
    assert_eq!(
        config["schema"]["properties"]["mode"]["enum"],
        json!(["interactive", "autopilot"])
    );
    assert_eq!(config["schema"]["properties"]["model"]["readOnly"], true);

    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-session:/m",
        1,
        json!({"type": "session/configChanged", "config": {"model": "gpt-9"}}),
    );
    assert!(envelopes(&a).last().unwrap()["rejectionReason"]
        .as_str()
        .unwrap()
        .contains("read-only"));
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-session:/m",
        2,
        json!({"type": "session/configChanged", "config": {"mode": "autopilot"}}),
    );
    let changed = envelopes(&a).last().cloned().unwrap();
    assert_eq!(
        changed["action"]["type"], "session/configChanged",
        "{changed}"
    );
    assert_eq!(changed["action"]["config"]["mode"], "autopilot");
    assert_eq!(changed["origin"]["clientSeq"], 2, "{changed}");
    assert!(
        w.host
            .session_events("m")
            .unwrap()
            .iter()
            .any(|e| e.event_type == "session.mode_changed"),
        "the mode change is in the session's history"
    );

    chat_snapshot(&mut w, &mut a, "ahp-chat:/m");
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/m",
        3,
        turn_started("t", "read it"),
    );
    let types = action_types(&a, "ahp-chat:/m");
    assert_eq!(
        types.last().map(String::as_str),
        Some("chat/turnComplete"),
        "not asked: {types:?}"
    );
    assert!(!envelopes(&a)
        .iter()
        .any(|e| e["action"]["type"] == "chat/toolCallReady"
            && e["action"].get("confirmed").is_none()));
}

#[test]
fn a_client_too_far_behind_reconnects_to_fresh_snapshots() {
    let scenario = Scenario::from_json(r#"{"default":[{"stream":5000,"batch":5000}]}"#).unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/far"}),
    );
    chat_snapshot(&mut w, &mut a, "ahp-chat:/far");
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/far",
        1,
        turn_started("t", "stream"),
    );
    w.run_timers(&mut [&mut a]);
    let deltas = action_types(&a, "ahp-chat:/far")
        .iter()
        .filter(|t| *t == "chat/delta")
        .count();
    assert_eq!(deltas, 5000, "every delta is an action");

    let mut back = ahp_peer(&mut w);
    let r = w.call(
        &mut back,
        &mut [],
        "reconnect",
        json!({"channel": "ahp-root://", "clientId": "a", "lastSeenServerSeq": 1,
               "subscriptions": ["ahp-chat:/far"]}),
    );
    assert_eq!(
        r["result"]["type"], "snapshot",
        "more than the replay window was missed"
    );
    let snapshot = &r["result"]["snapshots"][0];
    assert_eq!(snapshot["resource"], "ahp-chat:/far");
    assert_eq!(
        snapshot["state"]["turns"][0]["state"], "complete",
        "{}",
        snapshot["state"]["turns"][0]["state"]
    );
}

#[test]
fn a_turn_started_while_another_runs_is_queued_and_starts_when_it_ends() {
    let scenario = Scenario::from_json(
        r#"{"rules":[{"match":"slow","steps":[{"sleep_ms":5000},{"say":"late"}]}],
            "default":[{"say":"ok"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut a = ahp_peer(&mut w);
    let mut b = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/q"}),
    );
    chat_snapshot(&mut w, &mut a, "ahp-chat:/q");
    initialize(&mut w, &mut b, "b", json!(["ahp-chat:/q"]));
    dispatch(
        &mut w,
        &mut a,
        &mut [&mut b],
        "ahp-chat:/q",
        1,
        turn_started("t1", "slow one"),
    );
    // Two more while t1 runs, from both clients: queued in order, each echoed to everyone
    // as a queued message with its sender's origin.
    dispatch(
        &mut w,
        &mut b,
        &mut [&mut a],
        "ahp-chat:/q",
        1,
        turn_started("t2", "second"),
    );
    dispatch(
        &mut w,
        &mut a,
        &mut [&mut b],
        "ahp-chat:/q",
        2,
        turn_started("t3", "third"),
    );
    let snapshot = chat_snapshot(&mut w, &mut a, "ahp-chat:/q");
    assert_eq!(snapshot["activeTurn"]["id"], "t1", "{snapshot}");
    let queued: Vec<&Value> = snapshot["queuedMessages"]
        .as_array()
        .expect("queued messages in the snapshot")
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(queued, [&json!("t2"), &json!("t3")], "{snapshot}");
    // The Copilot view of the same queue: the prompts wait in the agent.
    let sets: Vec<Value> = envelopes(&b)
        .into_iter()
        .filter(|e| e["action"]["type"] == "chat/pendingMessageSet")
        .collect();
    assert_eq!(sets.len(), 2, "{sets:?}");
    assert_eq!(sets[0]["origin"], json!({"clientId": "b", "clientSeq": 1}));
    assert_eq!(sets[1]["origin"], json!({"clientId": "a", "clientSeq": 2}));
    assert!(
        !action_types(&b, "ahp-chat:/q").contains(&"chat/turnComplete".to_owned()),
        "nothing ended yet"
    );

    w.run_timers(&mut [&mut a, &mut b]);
    // Each client sees t1 end, then t2 start (from the queue) and end, then t3.
    for p in [&a, &b] {
        let turns: Vec<(String, String, Value)> = envelopes(p)
            .iter()
            .filter(|e| e["channel"] == "ahp-chat:/q" && e.get("rejectionReason").is_none())
            .filter(|e| {
                matches!(
                    e["action"]["type"].as_str(),
                    Some("chat/turnStarted" | "chat/turnComplete")
                )
            })
            .map(|e| {
                (
                    e["action"]["type"].as_str().unwrap().to_owned(),
                    e["action"]["turnId"].as_str().unwrap().to_owned(),
                    e["action"]["queuedMessageId"].clone(),
                )
            })
            .collect();
        let expected = [
            ("chat/turnComplete", "t1", Value::Null),
            ("chat/turnStarted", "t2", json!("t2")),
            ("chat/turnComplete", "t2", Value::Null),
            ("chat/turnStarted", "t3", json!("t3")),
            ("chat/turnComplete", "t3", Value::Null),
        ];
        let tail: Vec<(String, String, Value)> = turns[turns.len() - expected.len()..].to_vec();
        let expected: Vec<(String, String, Value)> = expected
            .iter()
            .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), c.clone()))
            .collect();
        assert_eq!(tail, expected, "{turns:?}");
    }
    let snapshot = chat_snapshot(&mut w, &mut a, "ahp-chat:/q");
    assert!(snapshot.get("queuedMessages").is_none(), "{snapshot}");
    let texts: Vec<&Value> = snapshot["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["message"]["text"])
        .collect();
    assert_eq!(
        texts,
        [&json!("slow one"), &json!("second"), &json!("third")],
        "{snapshot}"
    );
    let replies: Vec<&Value> = snapshot["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["responseParts"][0]["content"])
        .collect();
    assert_eq!(
        replies,
        [&json!("late"), &json!("ok"), &json!("ok")],
        "{snapshot}"
    );
}

#[test]
fn an_elicitation_outside_a_turn_that_only_ahp_clients_could_answer_is_cancelled() {
    let mut w = World::new(HostConfig::default());
    let mut sdk = w.connect();
    create(&mut w, &mut sdk, "u", json!({}));
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!(["ahp-chat:/u"]));
    // AHP shows input requests only inside a turn: with nobody else to answer, the caller
    // gets `cancel` at once instead of waiting forever.
    let r = w.call(
        &mut sdk,
        &mut [&mut a],
        "session.ui.elicitation",
        json!({"sessionId": "u", "message": "Proceed?",
               "requestedSchema": {"type": "object"}}),
    );
    assert_eq!(r["result"]["action"], "cancel", "{r}");
    assert!(
        !action_types(&a, "ahp-chat:/u").contains(&"chat/inputRequested".to_owned()),
        "nothing was shown to the AHP client"
    );
}

#[test]
fn a_slow_ahp_subscriber_closed_mid_fan_out_does_not_reorder_the_others_envelopes() {
    // Sweep budgets so that the overflow lands on some envelope's fan-out.
    for budget in (1_500..6_000).step_by(97) {
        let mut w = World::new(HostConfig::default().with_outbox_budget_bytes(budget));
        // The slow client subscribes first (it comes first in each fan-out) and provides a
        // tool: its departure publishes `session/activeClientRemoved`.
        let mut slow = ahp_peer(&mut w);
        let mut fast = ahp_peer(&mut w);
        initialize(&mut w, &mut fast, "fast", json!(["ahp-root://"]));
        w.call(
            &mut fast,
            &mut [],
            "createSession",
            json!({"channel": "ahp-session:/f"}),
        );
        initialize(
            &mut w,
            &mut slow,
            "slow",
            json!(["ahp-chat:/f", "ahp-session:/f"]),
        );
        dispatch(
            &mut w,
            &mut slow,
            &mut [],
            "ahp-session:/f",
            1,
            json!({"type": "session/activeClientSet", "activeClient": {"clientId": "slow",
                   "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}}),
        );
        w.call(
            &mut fast,
            &mut [],
            "subscribe",
            json!({"channel": "ahp-chat:/f"}),
        );
        w.call(
            &mut fast,
            &mut [],
            "subscribe",
            json!({"channel": "ahp-session:/f"}),
        );
        w.stalled.insert(slow.conn);
        for i in 0..4 {
            dispatch(
                &mut w,
                &mut fast,
                &mut [],
                "ahp-chat:/f",
                i + 1,
                turn_started(&format!("t{i}"), &"x".repeat(400)),
            );
        }
        let seqs: Vec<u64> = envelopes(&fast)
            .iter()
            .filter(|e| e.get("rejectionReason").is_none())
            .map(|e| e["serverSeq"].as_u64().unwrap())
            .collect();
        assert!(
            seqs.windows(2).all(|p| p[0] < p[1]),
            "budget {budget}: serverSeq out of order: {seqs:?}"
        );
    }
}

#[test]
fn a_session_gets_more_chats_each_with_its_own_turns_and_they_go_with_it() {
    let mut w = World::new(HostConfig::default());
    let mut a = ahp_peer(&mut w);
    let r = initialize(&mut w, &mut a, "a", json!(["ahp-root://"]));
    assert_eq!(
        r["result"]["snapshots"][0]["state"]["agents"][0]["capabilities"]["multipleChats"],
        json!({"fork": true, "sideChat": false}),
        "{r}"
    );
    w.call(
        &mut a,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/m", "workingDirectories": ["file:///proj"]}),
    );
    w.call(
        &mut a,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-session:/m"}),
    );
    chat_snapshot(&mut w, &mut a, "ahp-chat:/m");
    let created = w.call(
        &mut a,
        &mut [],
        "createChat",
        json!({"channel": "ahp-session:/m", "chat": "ahp-chat:/m-2"}),
    );
    assert_eq!(created["result"], Value::Null, "{created}");
    let added = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "session/chatAdded")
        .expect("the session announces its new chat");
    assert_eq!(added["channel"], "ahp-session:/m");
    assert_eq!(added["action"]["summary"]["resource"], "ahp-chat:/m-2");
    // Chats are not sessions: the root hears nothing, lists one session.
    let roots: Vec<&Value> = a
        .inbox
        .iter()
        .filter(|m| m["method"] == "root/sessionAdded")
        .collect();
    assert_eq!(roots.len(), 1, "{roots:?}");
    let list = w.call(
        &mut a,
        &mut [],
        "listSessions",
        json!({"channel": "ahp-root://"}),
    );
    assert_eq!(
        list["result"]["items"].as_array().unwrap().len(),
        1,
        "{list}"
    );
    let session = w.call(
        &mut a,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-session:/m"}),
    );
    let chats: Vec<&Value> = session["result"]["snapshot"]["state"]["chats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["resource"])
        .collect();
    assert_eq!(chats, [&json!("ahp-chat:/m"), &json!("ahp-chat:/m-2")]);

    // Each chat runs its own turns: one on the new chat streams on its channel only.
    chat_snapshot(&mut w, &mut a, "ahp-chat:/m-2");
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/m-2",
        1,
        turn_started("c2", "in the second chat"),
    );
    assert_eq!(
        action_types(&a, "ahp-chat:/m-2").last().map(String::as_str),
        Some("chat/turnComplete")
    );
    assert!(action_types(&a, "ahp-chat:/m").is_empty());
    let second = chat_snapshot(&mut w, &mut a, "ahp-chat:/m-2");
    assert_eq!(second["turns"][0]["message"]["text"], "in the second chat");
    let first = chat_snapshot(&mut w, &mut a, "ahp-chat:/m");
    assert_eq!(first["turns"], json!([]));
    // Its status is news in its session.
    assert!(
        envelopes(&a)
            .iter()
            .any(|e| e["channel"] == "ahp-session:/m"
                && e["action"]["type"] == "session/chatUpdated"
                && e["action"]["chat"] == "ahp-chat:/m-2"),
        "{:?}",
        envelopes(&a)
    );

    // The mode is the session's: every chat follows it.
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-session:/m",
        2,
        json!({"type": "session/configChanged", "config": {"mode": "autopilot"}}),
    );
    let modes: Vec<String> = w
        .host
        .session_events("m-2")
        .unwrap()
        .iter()
        .filter(|e| e.event_type == "session.mode_changed")
        .map(|e| String::from_utf8_lossy(&e.json).into_owned())
        .collect();
    assert_eq!(modes.len(), 1, "{modes:?}");
    assert!(modes[0].contains("autopilot"), "{modes:?}");

    // Bad requests: an existing chat, a fork, a chat of a chat, the default chat disposed,
    // a move.
    for (method, params, code) in [
        (
            "createChat",
            json!({"channel": "ahp-session:/m", "chat": "ahp-chat:/m-2"}),
            -32003,
        ),
        (
            "createChat",
            json!({"channel": "ahp-session:/m", "chat": "ahp-chat:/m-3",
                   "source": {"kind": "fork", "chat": "ahp-chat:/m", "turnId": "c2"}}),
            -32602,
        ),
        (
            "createChat",
            json!({"channel": "ahp-session:/m-2", "chat": "ahp-chat:/m-4"}),
            -32602,
        ),
        ("disposeChat", json!({"channel": "ahp-chat:/m"}), -32602),
        (
            "moveChat",
            json!({"channel": "ahp-chat:/m-2",
                   "destination": {"kind": "session", "session": "ahp-session:/x"}}),
            -32602,
        ),
    ] {
        let r = w.call(&mut a, &mut [], method, params.clone());
        assert_eq!(r["error"]["code"], code, "{method} {params}: {r}");
    }

    let disposed = w.call(
        &mut a,
        &mut [],
        "disposeChat",
        json!({"channel": "ahp-chat:/m-2"}),
    );
    assert_eq!(disposed["result"], Value::Null, "{disposed}");
    let removed = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "session/chatRemoved")
        .expect("the session announces the chat's removal");
    assert_eq!(removed["action"]["chat"], "ahp-chat:/m-2");
    assert!(w.host.session_events("m-2").is_none());

    // A disposed session takes its chats with it.
    w.call(
        &mut a,
        &mut [],
        "createChat",
        json!({"channel": "ahp-session:/m", "chat": "ahp-chat:/m-5",
               "initialMessage": {"text": "hello", "origin": {"kind": "user"}}}),
    );
    let fifth = chat_snapshot(&mut w, &mut a, "ahp-chat:/m-5");
    assert_eq!(fifth["turns"][0]["message"]["text"], "hello", "{fifth}");
    w.call(
        &mut a,
        &mut [],
        "disposeSession",
        json!({"channel": "ahp-session:/m"}),
    );
    assert!(w.host.session_events("m").is_none());
    assert!(w.host.session_events("m-5").is_none());
}

#[test]
fn an_ahp_client_answers_prompts_only_while_it_sees_the_chat() {
    let scenario = Scenario::from_json(
        r#"{"rules":[{"match":"weather","steps":[{"tool":"get_weather","arguments":{}},
                                                 {"say":"done"}]}],
            "default":[{"say":"ok"}]}"#,
    )
    .unwrap();
    let mut w = World::new(HostConfig::with_scenario(scenario));
    let mut sdk = w.connect();
    create(&mut w, &mut sdk, "p", json!({"requestPermission": false}));
    // The AHP client provides the tool from the session's channel, without the chat.
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!(["ahp-session:/p"]));
    dispatch(
        &mut w,
        &mut a,
        &mut [&mut sdk],
        "ahp-session:/p",
        1,
        json!({"type": "session/activeClientSet", "activeClient": {"clientId": "a",
               "tools": [{"name": "get_weather", "inputSchema": {"type": "object"}}]}}),
    );
    // Nobody who could see a permission prompt: it is answered at once, the turn ends.
    w.call(
        &mut sdk,
        &mut [&mut a],
        "session.send",
        json!({"sessionId": "p", "prompt": "weather?"}),
    );
    let types = w
        .host
        .session_events("p")
        .unwrap()
        .iter()
        .map(|e| e.event_type.clone())
        .collect::<Vec<_>>();
    assert!(
        types.contains(&"permission.completed".to_owned())
            && types.last().map(String::as_str) == Some("assistant.turn_end"),
        "the prompt nobody could see did not hold the turn: {types:?}"
    );
    // Once it sees the chat, it answers: the next prompt waits for its confirmation.
    chat_snapshot(&mut w, &mut a, "ahp-chat:/p");
    w.call(
        &mut sdk,
        &mut [&mut a],
        "session.send",
        json!({"sessionId": "p", "prompt": "weather again"}),
    );
    let waiting = envelopes(&a)
        .into_iter()
        .filter(|e| e["action"]["type"] == "chat/toolCallReady")
        .any(|e| e["action"].get("confirmed").is_none());
    assert!(waiting, "{:?}", envelopes(&a));
    let last = w
        .host
        .session_events("p")
        .unwrap()
        .last()
        .unwrap()
        .event_type
        .clone();
    assert_eq!(
        last, "permission.requested",
        "the turn waits for the AHP client"
    );
}

/// A slow AHP reader is closed with advice in its own protocol: `reconnect` with the last
/// `serverSeq` it saw (not the Copilot SDK's `session.getMessages`).
#[test]
fn a_slow_ahp_reader_is_told_to_reconnect_with_its_last_server_seq() {
    let mut w = World::new(HostConfig::default().with_outbox_budget_bytes(2_000));
    let mut slow = ahp_peer(&mut w);
    let mut fast = ahp_peer(&mut w);
    initialize(&mut w, &mut fast, "fast", json!(["ahp-root://"]));
    w.call(
        &mut fast,
        &mut [],
        "createSession",
        json!({"channel": "ahp-session:/z"}),
    );
    initialize(&mut w, &mut slow, "slow", json!(["ahp-chat:/z"]));
    w.call(
        &mut fast,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-chat:/z"}),
    );
    w.stalled.insert(slow.conn);
    let mut reason = None;
    for i in 0..6 {
        dispatch(
            &mut w,
            &mut fast,
            &mut [],
            "ahp-chat:/z",
            i + 1,
            turn_started(&format!("t{i}"), &"x".repeat(400)),
        );
        while let Some(o) = w.host.poll_output() {
            if let Output::Connection(ConnectionOutput::Close { conn, reason: r }) = o {
                if conn == slow.conn {
                    reason = Some(r);
                }
            }
        }
    }
    let reason = reason.expect("the stalled AHP client is closed");
    assert!(reason.contains("not reading fast enough"), "{reason}");
    assert!(reason.contains("`reconnect`"), "{reason}");
    assert!(!reason.contains("session.getMessages"), "{reason}");
}

/// A model session (Copilot client `c`) whose turn waits for its client weather tool, seen
/// by AHP client `a` on its chat.
fn turn_waiting_for_its_tool() -> (World, Peer, Peer) {
    let (mut w, mut c, call) = crate::model::weather_turn();
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!(["ahp-chat:/s"]));
    crate::model::answer(
        &mut w,
        call,
        &crate::model::tool_stream("chatcmpl-1"),
        &mut [&mut c, &mut a],
    );
    (w, c, a)
}

/// A steering `chat/pendingMessageSet` of message `id`.
fn steer(id: &str, text: &str) -> Value {
    json!({"type": "chat/pendingMessageSet", "kind": "steering", "id": id,
           "message": {"text": text, "origin": {"kind": "user"}}})
}

/// `chat/pendingMessageSet` with `kind: steering` steers the running turn of a model
/// session: echoed to the chat's subscribers and listed in the snapshot, the agent takes it
/// at the turn's next model call (after the tool results), and the host then announces
/// `chat/pendingMessageRemoved`. With no turn running, or for a message not waiting, the
/// action is rejected.
#[test]
fn a_steering_message_reaches_the_running_turn_and_leaves_the_chat_when_taken() {
    use crate::model::{
        answer, answer_external_tool, answer_permission, messages, next_request, text_stream,
    };
    let (mut w, mut c, mut a) = turn_waiting_for_its_tool();
    let steer = steer("st1", "Use Celsius.");
    dispatch(&mut w, &mut a, &mut [&mut c], "ahp-chat:/s", 1, steer);
    let set = envelopes(&a)
        .into_iter()
        .rfind(|e| e["action"]["type"] == "chat/pendingMessageSet")
        .expect("echoed");
    assert!(set.get("rejectionReason").is_none(), "{set}");
    assert_eq!(set["action"]["kind"], "steering");
    assert_eq!(set["origin"]["clientId"], "a");
    let snapshot = chat_snapshot(&mut w, &mut a, "ahp-chat:/s");
    assert_eq!(snapshot["steeringMessage"]["id"], "st1");
    // A removal of a message that is not waiting is refused.
    let unknown = json!({"type": "chat/pendingMessageRemoved", "kind": "steering", "id": "nope"});
    dispatch(&mut w, &mut a, &mut [], "ahp-chat:/s", 2, unknown);
    let refused = envelopes(&a).pop().unwrap();
    assert!(refused["rejectionReason"]
        .as_str()
        .unwrap()
        .contains("not waiting"));

    answer_permission(&mut w, &mut c, "approve-once");
    answer_external_tool(&mut w, &mut c, "sunny, 68F");
    let (call2, request2) = next_request(&mut w);
    let last = messages(&request2).last().unwrap().clone();
    assert_eq!(last["role"], "user");
    assert!(last["content"].as_str().unwrap().contains("Use Celsius."));
    w.pump(&mut [&mut a, &mut c]);
    let removed = envelopes(&a)
        .into_iter()
        .rfind(|e| e["action"]["type"] == "chat/pendingMessageRemoved")
        .expect("the host says it was taken");
    assert!(removed.get("rejectionReason").is_none(), "{removed}");
    assert_eq!(removed["action"]["id"], "st1");
    answer(
        &mut w,
        call2,
        &text_stream("chatcmpl-2", &["20C."]),
        &mut [&mut c, &mut a],
    );
    assert!(action_types(&a, "ahp-chat:/s").contains(&"chat/turnComplete".to_owned()));
    let snapshot = chat_snapshot(&mut w, &mut a, "ahp-chat:/s");
    assert!(snapshot.get("steeringMessage").is_none(), "{snapshot}");

    // No turn runs now: nothing to steer.
    let idle = json!({"type": "chat/pendingMessageSet", "kind": "steering", "id": "st2",
                      "message": {"text": "Hm", "origin": {"kind": "user"}}});
    dispatch(&mut w, &mut a, &mut [], "ahp-chat:/s", 3, idle);
    let refused = envelopes(&a).pop().unwrap();
    assert!(refused["rejectionReason"]
        .as_str()
        .unwrap()
        .contains("no turn"));
}

/// A second steering message replaces the first (the agent gets only the second), and a
/// client withdraws the one still waiting: the model then gets neither.
#[test]
fn a_steering_message_is_replaced_or_withdrawn_while_it_waits() {
    use crate::model::{answer_external_tool, answer_permission, messages, next_request};
    for withdraw in [false, true] {
        let (mut w, mut c, mut a) = turn_waiting_for_its_tool();
        dispatch(
            &mut w,
            &mut a,
            &mut [],
            "ahp-chat:/s",
            1,
            steer("st1", "first"),
        );
        dispatch(
            &mut w,
            &mut a,
            &mut [],
            "ahp-chat:/s",
            2,
            steer("st2", "second"),
        );
        let snapshot = chat_snapshot(&mut w, &mut a, "ahp-chat:/s");
        assert_eq!(snapshot["steeringMessage"]["id"], "st2");
        if withdraw {
            let remove = json!({"type": "chat/pendingMessageRemoved", "kind": "steering",
                                "id": "st2"});
            dispatch(&mut w, &mut a, &mut [], "ahp-chat:/s", 3, remove);
            let echo = envelopes(&a).pop().unwrap();
            assert!(echo.get("rejectionReason").is_none(), "{echo}");
            assert_eq!(echo["action"]["type"], "chat/pendingMessageRemoved");
        }
        answer_permission(&mut w, &mut c, "approve-once");
        answer_external_tool(&mut w, &mut c, "sunny");
        let (_, request) = next_request(&mut w);
        let texts: Vec<String> = messages(&request)
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(!texts.iter().any(|t| t.contains("first")), "{texts:?}");
        assert_eq!(
            texts.iter().any(|t| t.contains("second")),
            !withdraw,
            "{texts:?}"
        );
    }
}

/// `createChat` with `source: {kind: "fork"}`: the new chat holds the source chat's turns
/// through the named completed turn (not the later ones), is announced on the session's
/// channel, and goes its own way afterwards; a turn that is not a completed turn of the
/// source, a source chat of another session and a side chat are refused.
#[test]
fn a_chat_forked_at_a_turn_holds_the_turns_up_to_it_and_goes_its_own_way() {
    let mut w = World::new(HostConfig::default());
    let mut a = ahp_peer(&mut w);
    initialize(&mut w, &mut a, "a", json!([]));
    for session in ["f", "other"] {
        w.call(
            &mut a,
            &mut [],
            "createSession",
            json!({"channel": format!("ahp-session:/{session}")}),
        );
    }
    w.call(
        &mut a,
        &mut [],
        "subscribe",
        json!({"channel": "ahp-session:/f"}),
    );
    chat_snapshot(&mut w, &mut a, "ahp-chat:/f");
    for (seq, turn) in [(1, "t1"), (2, "t2")] {
        dispatch(
            &mut w,
            &mut a,
            &mut [],
            "ahp-chat:/f",
            seq,
            turn_started(turn, turn),
        );
    }
    let source = chat_snapshot(&mut w, &mut a, "ahp-chat:/f");
    assert_eq!(source["turns"].as_array().unwrap().len(), 2, "{source}");

    let fork = |w: &mut World, a: &mut Peer, chat: &str, source: Value| {
        w.call(
            a,
            &mut [],
            "createChat",
            json!({"channel": "ahp-session:/f", "chat": chat, "source": source}),
        )
    };
    let created = fork(
        &mut w,
        &mut a,
        "ahp-chat:/f-fork",
        json!({"kind": "fork", "chat": "ahp-chat:/f", "turnId": "t1"}),
    );
    assert_eq!(created["result"], Value::Null, "{created}");
    let added = envelopes(&a)
        .into_iter()
        .find(|e| e["action"]["type"] == "session/chatAdded")
        .expect("the session announces the fork");
    assert_eq!(added["action"]["summary"]["resource"], "ahp-chat:/f-fork");
    let forked = chat_snapshot(&mut w, &mut a, "ahp-chat:/f-fork");
    let turns = forked["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "through t1 only: {forked}");
    assert_eq!(turns[0]["message"]["text"], "t1");

    // Its own way: a turn on the fork is not the source's.
    dispatch(
        &mut w,
        &mut a,
        &mut [],
        "ahp-chat:/f-fork",
        3,
        turn_started("t3", "fork only"),
    );
    let forked = chat_snapshot(&mut w, &mut a, "ahp-chat:/f-fork");
    assert_eq!(forked["turns"].as_array().unwrap().len(), 2);
    let source = chat_snapshot(&mut w, &mut a, "ahp-chat:/f");
    assert_eq!(source["turns"].as_array().unwrap().len(), 2, "{source}");

    for (chat, source) in [
        (
            "ahp-chat:/f-x",
            json!({"kind": "fork", "chat": "ahp-chat:/f", "turnId": "nope"}),
        ),
        (
            "ahp-chat:/f-y",
            json!({"kind": "fork", "chat": "ahp-chat:/other", "turnId": "t1"}),
        ),
        (
            "ahp-chat:/f-z",
            json!({"kind": "sideChat", "chat": "ahp-chat:/f", "turnId": "t1"}),
        ),
    ] {
        let refused = fork(&mut w, &mut a, chat, source);
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        let probe = w.call(&mut a, &mut [], "subscribe", json!({"channel": chat}));
        assert!(probe.get("error").is_some(), "nothing was created: {probe}");
    }
}

/// A host as a cluster node runs it: sessions it has not loaded are looked up.
fn cluster_node() -> World {
    let config = HostConfig::default()
        .with_node_id(Some("b".into()))
        .with_lookup_unknown_sessions(true);
    World::new(config)
}

/// Takes the host's outputs: the sessions it asks the runtime to look up, and the frames it
/// relays (session and parsed body).
fn cluster_outputs(w: &mut World) -> (Vec<String>, Vec<(String, Value)>) {
    use agentwire::host::ClusterOutput;
    let (mut lookups, mut relayed) = (Vec::new(), Vec::new());
    while let Some(output) = w.host.poll_output() {
        match output {
            Output::Cluster(ClusterOutput::LoadSession { session }) => lookups.push(session),
            Output::Cluster(ClusterOutput::Forward {
                session, frames, ..
            }) => {
                for frame in frames {
                    relayed.push((session.clone(), serde_json::from_slice(&frame).unwrap()));
                }
            }
            _ => {}
        }
    }
    (lookups, relayed)
}

/// The owner's `body` for the client of `p`, relayed from the owner of `session`.
fn from_owner(w: &mut World, p: &mut Peer, session: &str, body: Value) {
    let body = serde_json::to_vec(&body).unwrap();
    w.host
        .cluster()
        .deliver_forwarded(w.now, p.conn, session, &body);
    w.pump(&mut [p]);
}

#[test]
fn channels_owned_by_another_node_are_relayed_in_one_server_seq_and_a_reconnect_gathers_them() {
    let mut w = cluster_node();
    let mut p = ahp_peer(&mut w);
    initialize(&mut w, &mut p, "c1", json!([]));
    // A session of this node (its lookup finds nothing: it is created here).
    w.write_request(
        &mut p,
        "createSession",
        json!({"channel": "ahp-session:/here"}),
    );
    w.pump(&mut [&mut p]);
    assert_eq!(cluster_outputs(&mut w).0, ["here"]);
    w.host.cluster().finish_session_lookup(w.now, "here");
    w.pump(&mut [&mut p]);
    let chat = chat_snapshot(&mut w, &mut p, "ahp-chat:/here");

    // The link to the owner is set up as the client set up its connection here.
    let handshake = w.host.cluster().relay_handshake(p.conn);
    assert_eq!(handshake.len(), 1);
    let init: Value = serde_json::from_slice(&handshake[0]).unwrap();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["clientId"], "c1");
    assert_eq!(init["params"]["protocolVersions"], json!(["1.0.0"]));

    // A channel of a session another node owns: looked up, then relayed there by channel.
    let sub = w.write_request(&mut p, "subscribe", json!({"channel": "ahp-chat:/far"}));
    w.pump(&mut [&mut p]);
    assert_eq!(cluster_outputs(&mut w).0, ["far"]);
    w.host.cluster().forward_session_lookup(w.now, "far");
    let (_, relayed) = cluster_outputs(&mut w);
    assert_eq!(relayed.len(), 1);
    assert_eq!(relayed[0].0, "far");
    assert_eq!(relayed[0].1["id"], json!(sub));
    // The root and this node's sessions are still served here.
    w.write_request(&mut p, "listSessions", json!({"channel": "ahp-root://"}));
    dispatch(
        &mut w,
        &mut p,
        &mut [],
        "ahp-chat:/here",
        1,
        json!({"type": "session/titleChanged", "title": "t"}),
    );
    assert!(cluster_outputs(&mut w).1.is_empty(), "nothing more relayed");
    let here_seq = envelopes(&p).last().unwrap()["serverSeq"].as_u64().unwrap();

    // The owner's snapshot and envelopes come in the owner's numbers; the client sees this
    // node's sequence.
    let mut far_chat = chat.clone();
    far_chat["title"] = json!("far away");
    from_owner(
        &mut w,
        &mut p,
        "far",
        json!({"jsonrpc": "2.0", "id": sub, "result":
        {"snapshot": {"resource": "ahp-chat:/far", "fromSeq": 900, "state": far_chat}}}),
    );
    let answer = p.inbox.iter().find(|m| m["id"] == json!(sub)).unwrap();
    assert_eq!(answer["result"]["snapshot"]["fromSeq"], json!(here_seq));
    let envelope = json!({"jsonrpc": "2.0", "method": "action", "params":
        {"channel": "ahp-chat:/far", "serverSeq": 901,
         "action": {"type": "session/titleChanged", "title": "renamed"}}});
    from_owner(&mut w, &mut p, "far", envelope.clone());
    let last = envelopes(&p).last().unwrap().clone();
    assert_eq!(last["channel"], "ahp-chat:/far");
    assert_eq!(last["serverSeq"], json!(here_seq + 1));
    let seen = here_seq + 1;
    w.host.handle_eof(w.now, p.conn);
    w.pump(&mut []);
    cluster_outputs(&mut w);

    // The client reconnects naming channels of this node, of the owner, and of a session
    // found nowhere: fresh snapshots, the owner's gathered through the relay.
    let mut back = ahp_peer(&mut w);
    let re = w.write_request(
        &mut back,
        "reconnect",
        json!({"channel": "ahp-root://", "clientId": "c1", "lastSeenServerSeq": seen,
               "subscriptions": ["ahp-root://", "ahp-chat:/here", "ahp-chat:/far",
                                 "ahp-chat:/nowhere"]}),
    );
    w.pump(&mut [&mut back]);
    assert!(back.inbox.is_empty(), "the answer waits for the owner");
    let (lookups, _) = cluster_outputs(&mut w);
    assert_eq!(lookups, ["far"]);
    w.host.cluster().forward_session_lookup(w.now, "far");
    let (lookups, relayed) = cluster_outputs(&mut w);
    assert_eq!(lookups, ["nowhere"], "the next one waits its turn");
    assert_eq!(relayed.len(), 1);
    assert_eq!(relayed[0].1["method"], "subscribe");
    assert_eq!(relayed[0].1["params"]["channel"], "ahp-chat:/far");
    let gather_id = relayed[0].1["id"].clone();
    w.host.cluster().finish_session_lookup(w.now, "nowhere");
    w.pump(&mut [&mut back]);
    assert!(back.inbox.is_empty(), "still waiting for the owner");
    // An envelope of the owner before its answer waits for the reconnect's answer.
    from_owner(&mut w, &mut back, "far", envelope);
    assert!(back.inbox.is_empty());
    from_owner(
        &mut w,
        &mut back,
        "far",
        json!({"jsonrpc": "2.0", "id": gather_id, "result":
        {"snapshot": {"resource": "ahp-chat:/far", "fromSeq": 905, "state": far_chat}}}),
    );
    assert_eq!(back.inbox.len(), 2, "{:#?}", back.inbox);
    let answer = &back.inbox[0];
    assert_eq!(answer["id"], json!(re));
    assert_eq!(answer["result"]["type"], "snapshot", "{answer}");
    let snapshots = answer["result"]["snapshots"].as_array().unwrap();
    let resources: Vec<&str> = snapshots
        .iter()
        .map(|s| s["resource"].as_str().unwrap())
        .collect();
    assert_eq!(
        resources,
        ["ahp-root://", "ahp-chat:/here", "ahp-chat:/far"]
    );
    let from = snapshots[2]["fromSeq"].as_u64().unwrap();
    assert_eq!(snapshots[2]["state"]["title"], "far away");
    let held = &back.inbox[1];
    assert_eq!(held["method"], "action");
    assert_eq!(
        held["params"]["serverSeq"],
        json!(from + 1),
        "after the snapshot"
    );
}

#[test]
fn an_initialize_whose_initial_subscriptions_are_owned_elsewhere_waits_for_their_snapshots() {
    let mut w = cluster_node();
    let mut p = ahp_peer(&mut w);
    let init = w.write_request(
        &mut p,
        "initialize",
        json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "c",
               "initialSubscriptions": ["ahp-root://", "ahp-chat:/far"]}),
    );
    w.pump(&mut [&mut p]);
    assert!(p.inbox.is_empty(), "the answer waits for the owner");
    assert_eq!(cluster_outputs(&mut w).0, ["far"]);
    w.host.cluster().forward_session_lookup(w.now, "far");
    let (_, relayed) = cluster_outputs(&mut w);
    assert_eq!(relayed.len(), 1);
    assert_eq!(relayed[0].1["method"], "subscribe");
    // The link's set-up carries the version agreed on.
    let handshake = w.host.cluster().relay_handshake(p.conn);
    let handshake: Value = serde_json::from_slice(&handshake[0]).unwrap();
    assert_eq!(handshake["params"]["protocolVersions"], json!(["1.0.0"]));
    // The owner's snapshot (a root snapshot's shape stands in for any state).
    let mut other = ahp_peer(&mut w);
    let root = initialize(&mut w, &mut other, "o", json!(["ahp-root://"]));
    let state = root["result"]["snapshots"][0]["state"].clone();
    from_owner(
        &mut w,
        &mut p,
        "far",
        json!({"jsonrpc": "2.0", "id": relayed[0].1["id"],
        "result": {"snapshot": {"resource": "ahp-chat:/far", "fromSeq": 77, "state": state}}}),
    );
    let answer = p
        .inbox
        .iter()
        .find(|m| m["id"] == json!(init))
        .expect("answered");
    assert_eq!(answer["result"]["protocolVersion"], "1.0.0", "{answer}");
    let snapshots = answer["result"]["snapshots"].as_array().unwrap();
    let resources: Vec<&str> = snapshots
        .iter()
        .map(|s| s["resource"].as_str().unwrap())
        .collect();
    assert_eq!(resources, ["ahp-root://", "ahp-chat:/far"]);
    assert_eq!(snapshots[1]["fromSeq"], answer["result"]["serverSeq"]);
    // The connection works on: ping is answered here.
    let ping = w.call(&mut p, &mut [], "ping", json!({}));
    assert_eq!(ping["result"], Value::Null);
}

#[test]
fn sessions_of_other_nodes_are_listed_and_announced_on_the_root_as_the_log_shows_them() {
    use agentwire::host::SessionSummary;
    let mut w = cluster_node();
    let mut p = ahp_peer(&mut w);
    initialize(&mut w, &mut p, "c", json!(["ahp-root://"]));
    w.write_request(
        &mut p,
        "createSession",
        json!({"channel": "ahp-session:/here"}),
    );
    w.pump(&mut [&mut p]);
    w.host.cluster().finish_session_lookup(w.now, "here");
    w.pump(&mut [&mut p]);
    p.inbox.clear();
    let summary = |id: &str, prompt: &str| {
        let mut s = SessionSummary::new(id);
        let start = json!({"id": "1", "type": "session.start",
            "timestamp": "2026-01-01T00:00:00Z", "data": {"context": {"cwd": "/w"}}});
        let user = json!({"id": "2", "type": "user.message",
            "timestamp": "2026-01-01T00:00:01Z", "data": {"content": prompt}});
        assert!(s.add_event(start.to_string().as_bytes()));
        assert!(s.add_event(user.to_string().as_bytes()));
        s
    };
    let root_notes = |p: &Peer| -> Vec<(String, Value)> {
        p.inbox
            .iter()
            .filter(|m| m["method"].as_str().is_some_and(|m| m.starts_with("root/")))
            .map(|m| {
                (
                    m["method"].as_str().unwrap().to_owned(),
                    m["params"].clone(),
                )
            })
            .collect()
    };
    // The log shows a session of another node (and this node's own, which is not announced
    // again).
    w.host
        .cluster()
        .set_cluster_sessions([summary("far", "from afar"), summary("here", "x")]);
    w.pump(&mut [&mut p]);
    let notes = root_notes(&p);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].0, "root/sessionAdded");
    assert_eq!(notes[0].1["summary"]["resource"], "ahp-session:/far");
    assert_eq!(notes[0].1["summary"]["title"], "from afar");
    assert_eq!(
        notes[0].1["summary"]["workingDirectories"],
        json!(["file:///w"])
    );
    // The same set again announces nothing; listSessions shows both.
    w.host
        .cluster()
        .set_cluster_sessions([summary("far", "from afar"), summary("here", "x")]);
    w.pump(&mut [&mut p]);
    assert_eq!(root_notes(&p).len(), 1);
    let list = w.call(
        &mut p,
        &mut [],
        "listSessions",
        json!({"channel": "ahp-root://"}),
    );
    let mut listed: Vec<&str> = list["result"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["resource"].as_str().unwrap())
        .collect();
    listed.sort_unstable();
    assert_eq!(listed, ["ahp-session:/far", "ahp-session:/here"]);
    // Gone from the log: announced as removed.
    w.host
        .cluster()
        .set_cluster_sessions([summary("here", "x")]);
    w.pump(&mut [&mut p]);
    let notes = root_notes(&p);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(notes[1].0, "root/sessionRemoved");
    assert_eq!(notes[1].1["session"], "ahp-session:/far");
}
