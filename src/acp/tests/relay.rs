//! What a cluster gateway needs to re-attach an editor after a takeover: the positions a relay
//! group member is told ([`RELAY_POSITION`]) and the replay of what follows one
//! ([`RELAY_REPLAY_AFTER`]).

use super::*;
use crate::acp::{RELAY_POSITION, RELAY_REPLAY_AFTER};
use crate::host::RelayFrame;

/// The ids and types of the session's durable events, oldest first.
fn history(w: &World, session: &str) -> Vec<(String, String)> {
    w.host
        .session(session)
        .unwrap()
        .events()
        .iter()
        .map(|e| (e.id.clone(), e.event_type.clone()))
        .collect()
}

fn positions(inbox: &[Value]) -> Vec<String> {
    inbox
        .iter()
        .filter(|m| m["method"] == RELAY_POSITION)
        .map(|m| m["params"]["eventId"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_replay_after_an_event_sends_the_updates_of_what_follows_it_then_attaches() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let first = prompt(&mut w, &mut peer, &session, "hello");
    assert!(peer.response(first).is_some());
    let second = prompt(&mut w, &mut peer, &session, "second");
    assert!(peer.response(second).is_some());
    let events = history(&w, &session);
    let first_message = events
        .iter()
        .find(|(_, kind)| kind == "user.message")
        .map(|(id, _)| id.clone())
        .unwrap();

    // The whole history, as `session/load` replays it.
    let mut loader = w.connect();
    w.call(&mut loader, "initialize", json!({"protocolVersion": 1}));
    w.call(
        &mut loader,
        "session/load",
        json!({"sessionId": session, "cwd": "/work/project", "mcpServers": []}),
    );
    let all = loader.updates();
    assert_eq!(all[0]["content"]["text"], "hello");

    // After the first prompt's message: everything but its update, before the answer.
    let mut editor = w.connect();
    w.call(&mut editor, "initialize", json!({"protocolVersion": 1}));
    let before = editor.inbox.len();
    let id = w.request(
        &mut editor,
        "session/resume",
        json!({"sessionId": session, "cwd": "/work/project",
               "_meta": {RELAY_REPLAY_AFTER: first_message}}),
    );
    let at = editor.position_of_response(id);
    assert!(editor.inbox[at]["result"]["modes"].is_object());
    assert_eq!(editor.updates(), all[1..]);
    assert!(editor.inbox[before..at]
        .iter()
        .all(|m| m["method"] == "session/update"));
    // After the last event: nothing.
    let mut idle = w.connect();
    w.call(&mut idle, "initialize", json!({"protocolVersion": 1}));
    let last = &events.last().unwrap().0;
    let resumed = w.call(
        &mut idle,
        "session/load",
        json!({"sessionId": session, "cwd": "/work/project", "mcpServers": [],
               "_meta": {RELAY_REPLAY_AFTER: last}}),
    );
    assert!(resumed.get("result").is_some(), "{resumed}");
    assert!(idle.updates().is_empty());

    // Attached: the next turn reaches both, live.
    let third = prompt(&mut w, &mut peer, &session, "third");
    assert!(peer.response(third).is_some());
    w.pump(&mut editor);
    w.pump(&mut idle);
    for conn in [&editor, &idle] {
        let seen = conn.updates().into_iter().last_where("user_message_chunk");
        assert_eq!(seen["content"]["text"], "third");
        assert!(conn.agent_text().ends_with("You said: third"));
    }
    // Ordinary connections are never told positions.
    for conn in [&peer, &loader, &editor, &idle] {
        assert!(positions(&conn.inbox).is_empty());
    }
}

#[test]
fn a_replay_after_an_event_the_history_does_not_hold_is_refused_and_attaches_nothing() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let done = prompt(&mut w, &mut peer, &session, "hello");
    assert!(peer.response(done).is_some());
    let mut editor = w.connect();
    w.call(&mut editor, "initialize", json!({"protocolVersion": 1}));
    let refused = w.call(
        &mut editor,
        "session/resume",
        json!({"sessionId": session, "cwd": "/work/project",
               "_meta": {RELAY_REPLAY_AFTER: "not-an-event"}}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not-an-event"));
    assert!(editor.updates().is_empty());
    // Not attached: its prompt is refused as for any session it did not load.
    let prompted = prompt(&mut w, &mut editor, &session, "me?");
    assert_eq!(editor.response(prompted).unwrap()["error"]["code"], -32002);
}

/// A gateway's relay group on this host, with one ACP member; the member's bodies, decoded.
struct Group {
    group: ConnId,
    member: ConnId,
    decoder: FrameDecoder,
    inbox: Vec<Value>,
    next_id: u64,
}

impl Group {
    fn new(w: &mut World) -> Group {
        let group = w
            .host
            .open_with(w.now, Dialect::Acp, Framing::ContentLength);
        let member = w.host.open_dialect(w.now, Dialect::Acp);
        assert!(w.host.cluster().join_relay_group(member, group));
        Group {
            group,
            member,
            decoder: FrameDecoder::new(Framing::ContentLength, FrameLimits::default()),
            inbox: Vec::new(),
            next_id: 0,
        }
    }

    fn pump(&mut self, w: &mut World) {
        while w.host.poll_ready().is_some() {}
        while let Some(frame) = w.host.poll_transmit(self.group) {
            self.decoder.push(&frame).unwrap();
        }
        assert!(
            w.host.poll_transmit(self.member).is_none(),
            "through the group only"
        );
        while let Some(body) = self.decoder.next_frame().unwrap() {
            let body = match RelayFrame::parse(&body).unwrap() {
                RelayFrame::All(body) => body,
                RelayFrame::To { members, body } => {
                    assert_eq!(members.as_slice(), [self.member.as_u64()]);
                    body
                }
                _ => continue,
            };
            self.inbox.push(serde_json::from_slice(body).unwrap());
        }
    }

    fn call(&mut self, w: &mut World, method: &str, params: Value) -> usize {
        let id = self.send(w, method, params);
        self.answer_at(id)
            .unwrap_or_else(|| panic!("no answer to {method}: {:#?}", self.inbox))
    }

    /// Sends a request of the member without waiting for its answer; its id.
    fn send(&mut self, w: &mut World, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap();
        line.push(b'\n');
        w.host.handle_bytes(w.now, self.member, &line);
        self.pump(w);
        id
    }

    /// Where the answer to request `id` is in the inbox.
    fn answer_at(&self, id: u64) -> Option<usize> {
        self.inbox
            .iter()
            .position(|m| m["id"] == json!(id) && m.get("method").is_none())
    }

    /// The gateway's new link: a new member of the group takes this one's place (its
    /// requests keep counting from here).
    fn replace_member(&mut self, w: &mut World) -> ConnId {
        let former = self.member;
        self.member = w.host.open_dialect(w.now, Dialect::Acp);
        assert!(w.host.cluster().join_relay_group(self.member, self.group));
        former
    }
}

#[test]
fn a_relay_group_member_is_told_the_last_durable_event_it_has_after_its_updates() {
    let mut w = World::new();
    let (mut peer, session) = w.ready(json!({}));
    let done = prompt(&mut w, &mut peer, &session, "hello");
    assert!(peer.response(done).is_some());
    let mut g = Group::new(&mut w);
    g.call(&mut w, "initialize", json!({"protocolVersion": 1}));
    let at = g.call(
        &mut w,
        "session/load",
        json!({"sessionId": session, "cwd": "/work/project", "mcpServers": []}),
    );
    // After the replay and before the answer: the history's last event.
    let history_end = history(&w, &session).last().unwrap().0.clone();
    assert_eq!(g.inbox[at - 1]["method"], RELAY_POSITION);
    assert_eq!(
        g.inbox[at - 1]["params"],
        json!({"sessionId": session, "eventId": history_end})
    );
    assert_eq!(positions(&g.inbox), std::slice::from_ref(&history_end));

    // A live turn: each durable event with updates is followed by its position.
    let from = g.inbox.len();
    let next = prompt(&mut w, &mut peer, &session, "again");
    assert!(peer.response(next).is_some());
    g.pump(&mut w);
    let live = &g.inbox[from..];
    let turn: Vec<(String, String)> = history(&w, &session)
        .into_iter()
        .skip_while(|(id, _)| *id != history_end)
        .skip(1)
        .collect();
    let told = positions(live);
    let durable = |kind: &str| {
        turn.iter()
            .find(|(_, k)| k == kind)
            .map(|(id, _)| id.clone())
            .unwrap()
    };
    assert_eq!(
        told,
        [durable("user.message"), durable("assistant.message")],
        "{live:#?}"
    );
    let agent_chunk = live
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .unwrap();
    let message_position = live
        .iter()
        .position(|m| m["params"]["eventId"] == json!(durable("assistant.message")))
        .unwrap();
    assert!(agent_chunk < message_position, "{live:#?}");
    // The connections that are not relayed are never told.
    assert!(positions(&peer.inbox).is_empty());
}

/// An editor's `session/prompt` outlives its broken link: the gateway takes the editor back
/// on a new member connection with a `session/resume` whose `_meta` names the former member
/// and the prompts it waits for, and each is answered there once — with the answer kept when
/// the turn ended before the re-attachment, at the turn's end when it ended after — and an id
/// the owner never kept gets an error.
#[test]
fn a_relayed_prompt_is_answered_on_the_member_that_replaces_its_broken_link() {
    for turn_ends_first in [true, false] {
        let mut w = World::new();
        let (mut peer, session) = w.ready(json!({}));
        let mut g = Group::new(&mut w);
        g.call(&mut w, "initialize", json!({"protocolVersion": 1}));
        g.call(
            &mut w,
            "session/load",
            json!({"sessionId": session, "cwd": "/work/project", "mcpServers": []}),
        );
        let asked = g.send(
            &mut w,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "slow"}]}),
        );
        w.advance(&mut peer, Duration::from_millis(500));
        g.pump(&mut w);
        assert!(g.answer_at(asked).is_none(), "its turn runs");
        let position = positions(&g.inbox).last().unwrap().clone();

        // The link breaks; the member's connection ends.
        w.host
            .cluster()
            .relay_member_link_broke(w.now, g.member, "message 4 lost");
        w.host.handle_eof(w.now, g.member);
        g.pump(&mut w);
        if turn_ends_first {
            w.advance(&mut peer, Duration::from_secs(3));
        }
        let former = g.replace_member(&mut w);
        g.call(&mut w, "initialize", json!({"protocolVersion": 1}));
        let resumed = g.call(
            &mut w,
            "session/resume",
            json!({"sessionId": session, "cwd": "/work/project",
                   "_meta": {RELAY_REPLAY_AFTER: position,
                             crate::host::RELAY_FORMER_MEMBER: former.as_u64(),
                             crate::host::RELAY_AWAITING: [asked, "never-sent"]}}),
        );
        assert!(
            g.inbox[resumed].get("result").is_some(),
            "{:?}",
            g.inbox[resumed]
        );
        if !turn_ends_first {
            assert!(g.answer_at(asked).is_none(), "its turn runs on");
            w.advance(&mut peer, Duration::from_secs(3));
            g.pump(&mut w);
        }
        let answers: Vec<&Value> = g
            .inbox
            .iter()
            .filter(|m| m["id"] == json!(asked) && m.get("method").is_none())
            .collect();
        assert_eq!(
            answers.len(),
            1,
            "answered once ({turn_ends_first}): {:#?}",
            g.inbox
        );
        assert_eq!(
            answers[0]["result"]["stopReason"], "end_turn",
            "{}",
            answers[0]
        );
        let unknown = g.inbox.iter().find(|m| m["id"] == "never-sent").unwrap();
        assert!(unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer knows"));
        // The whole turn reached the editor: the replay after its position, then live.
        assert!(g
            .inbox
            .iter()
            .any(|m| m["params"]["update"]["content"]["text"] == "three"));
    }
}
