//! AHP clients of one cluster node on sessions another node owns, with the **official AHP
//! client** (`ahp` + `ahp-ws`): node A serves a session a **Copilot SDK app** created there,
//! node B (`--ahp-port`) relays its AHP client's channels to A, renumbered into B's
//! `serverSeq`; when A is killed the client's connection ends with the reason, and its
//! `reconnect` to B gathers fresh snapshots once B took the session over; and a tool call of
//! a session an AHP client of A created is confirmed by an AHP client of B, while a second
//! client of B follows the turn. One real nats-server (`$AGENTWIRE_NATS_SERVER`, or `target/nats/nats-server`).

use std::time::Duration;

use ahp_types::actions::StateAction;
use ahp_types::commands::ReconnectResult;
use ahp_types::state::{SnapshotState, TurnState};
use serde_json::{json, Value};

use crate::interop_ahp::{
    approve, client, create, initialize, is_turn_end, markdown, read_scenario, subscribe_chat,
    turn_started, until,
};
use crate::support::cluster_node::{app_session, node, node_with_args, prompts};
use crate::support::{nats, sdk_scenarios as sdk};

#[tokio::test]
async fn an_ahp_client_of_node_b_runs_turns_in_a_session_of_node_a_and_follows_it_when_a_dies() {
    sdk::bounded(async {
        let server = nats::NatsServer::single();
        let url = server.url();
        let mut a = node(&url, "a").await;
        let (_app, id, session_a, first) = app_session(&a, Some("hello from the app")).await;
        assert!(first.is_some(), "the app's turn ended");
        let b = node_with_args(&url, "b", &["--ahp-port", "0"]).await;
        let port = b.listener_port("ahp").await;

        // B relays the session's chat to A: its snapshot holds the app's turn.
        let c = client(port).await;
        initialize(&c, "editor").await;
        let chat = format!("ahp-chat:/{id}");
        let (mut state, mut sub) = subscribe_chat(&c, &chat).await;
        assert_eq!(state.turns.len(), 1, "{state:#?}");
        assert_eq!(state.turns[0].message.text, "hello from the app");

        // A turn the AHP client starts runs on A and streams back through B.
        c.dispatch(chat.clone(), turn_started("t-ahp", "hello from ahp"))
            .await
            .expect("dispatch");
        let mut seen = Vec::new();
        until(&mut sub, &mut state, &mut seen, is_turn_end).await;
        assert_eq!(
            seen[0].origin.as_ref().map(|o| o.client_id.as_str()),
            Some("editor"),
            "its own turn comes back as its own action: {seen:#?}"
        );
        assert!(
            seen.windows(2).all(|w| w[0].server_seq < w[1].server_seq),
            "one increasing serverSeq: {seen:#?}"
        );
        assert_eq!(state.turns.len(), 2);
        assert_eq!(state.turns[1].state, TurnState::Complete);
        assert!(
            markdown(&state.turns[1].response_parts).contains("hello from ahp"),
            "{state:#?}"
        );
        assert_eq!(
            prompts(&session_a).await,
            ["hello from the app", "hello from ahp"],
            "it ran on A"
        );
        let last_seen = seen.last().expect("envelopes").server_seq;

        // B lists the session from the shared log, though A holds it.
        let listed = sdk::within("listSessions shows A's session", async {
            loop {
                let list: Value = c
                    .request("listSessions", json!({"channel": "ahp-root://"}))
                    .await
                    .expect("listSessions");
                let resource = format!("ahp-session:/{id}");
                if list["items"]
                    .as_array()
                    .is_some_and(|items| items.iter().any(|s| s["resource"] == resource))
                {
                    return list;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .await;
        assert!(listed["items"].is_array());

        // A dies: B ends the client's connection with the reason (what A sent meanwhile
        // never reached B, so nothing is replayed from there) ...
        a.child.start_kill().expect("SIGKILL node A");
        a.exit(sdk::STEP).await;
        let ended = tokio::time::timeout(Duration::from_secs(30), async {
            // Whatever was still on its way comes first; then the subscription ends.
            while sub.recv().await.is_some() {}
            true
        })
        .await;
        assert_eq!(ended, Ok(true), "the relayed client's connection ended");

        // ... and its reconnect to B gets fresh snapshots once B took the session over.
        let back = client(port).await;
        let result = sdk::within(
            "reconnect",
            back.reconnect(
                "editor".into(),
                i64::try_from(last_seen).unwrap(),
                vec![chat.clone()],
            ),
        )
        .await
        .expect("reconnect");
        let ReconnectResult::Snapshot(result) = result else {
            panic!("relayed channels are not replayed: {result:?}");
        };
        assert_eq!(result.snapshots.len(), 1, "{result:?}");
        let SnapshotState::Chat(restored) = &result.snapshots[0].state else {
            panic!("a chat snapshot: {result:?}");
        };
        let texts: Vec<&str> = restored
            .turns
            .iter()
            .map(|t| t.message.text.as_str())
            .collect();
        assert_eq!(texts, ["hello from the app", "hello from ahp"]);
        assert!(result.snapshots[0].from_seq >= 0);

        // The session now lives on B: a turn runs there.
        let mut sub = back.attach_subscription(&chat).await;
        let mut state = (**restored).clone();
        back.dispatch(chat.clone(), turn_started("t-after", "after the takeover"))
            .await
            .expect("dispatch");
        let mut seen = Vec::new();
        until(&mut sub, &mut state, &mut seen, is_turn_end).await;
        assert_eq!(state.turns.len(), 3);
        assert_eq!(state.turns[2].state, TurnState::Complete);
        let log = b.stderr();
        assert!(log.contains("client relayed to the owner node"), "{log}");
        drop(server);
    })
    .await;
}

#[tokio::test]
async fn a_tool_call_in_a_session_of_node_a_is_confirmed_by_an_ahp_client_of_node_b() {
    sdk::bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let scenario = read_scenario(dir.path());
        let server = nats::NatsServer::single();
        let url = server.url();
        let extra = ["--ahp-port", "0", "--scenario", scenario.to_str().unwrap()];
        let a = node_with_args(&url, "a", &extra).await;
        let b = node_with_args(&url, "b", &extra).await;
        let (port_a, port_b) = (a.listener_port("ahp").await, b.listener_port("ahp").await);

        // X creates the session on A and starts a turn whose tool call needs confirmation.
        let x = client(port_a).await;
        initialize(&x, "x").await;
        create(&x, "cluster-tool").await;
        let chat = "ahp-chat:/cluster-tool".to_owned();
        let (mut state_x, mut sub_x) = subscribe_chat(&x, &chat).await;
        x.dispatch(chat.clone(), turn_started("t1", "read it"))
            .await
            .expect("dispatch");
        let mut seen_x = Vec::new();
        until(
            &mut sub_x,
            &mut state_x,
            &mut seen_x,
            |a| matches!(a, StateAction::ChatToolCallReady(r) if r.confirmed.is_none()),
        )
        .await;
        let Some(StateAction::ChatToolCallReady(ready)) = seen_x.last().map(|e| e.action.clone())
        else {
            unreachable!()
        };

        // Y and Z on B join mid-turn through B's relay: their snapshots show the call waiting.
        let y = client(port_b).await;
        initialize(&y, "y").await;
        let (mut state_y, mut sub_y) = subscribe_chat(&y, &chat).await;
        let z = client(port_b).await;
        initialize(&z, "z").await;
        let (mut state_z, mut sub_z) = subscribe_chat(&z, &chat).await;
        for state in [&state_y, &state_z] {
            let active = state.active_turn.clone().expect("a turn in progress");
            let waiting = serde_json::to_value(&active.response_parts).unwrap();
            assert_eq!(
                waiting[0]["toolCall"]["status"], "pending-confirmation",
                "{waiting}"
            );
        }
        // Y confirms it: the answer crosses to A, the tool runs there, all three see the end.
        y.dispatch(chat.clone(), approve(&ready))
            .await
            .expect("dispatch");
        let (mut seen_y, mut seen_z) = (Vec::new(), Vec::new());
        until(&mut sub_y, &mut state_y, &mut seen_y, is_turn_end).await;
        until(&mut sub_z, &mut state_z, &mut seen_z, is_turn_end).await;
        until(&mut sub_x, &mut state_x, &mut seen_x, is_turn_end).await;
        for state in [&state_x, &state_y, &state_z] {
            assert_eq!(state.turns.len(), 1, "{state:#?}");
            assert_eq!(markdown(&state.turns[0].response_parts), "read: the notes");
        }
        let confirmed = seen_x
            .iter()
            .find(|e| matches!(e.action, StateAction::ChatToolCallConfirmed(_)))
            .expect("X hears of the confirmation");
        assert_eq!(
            confirmed.origin.as_ref().map(|o| o.client_id.as_str()),
            Some("y")
        );
        for seen in [&seen_y, &seen_z] {
            assert!(
                seen.windows(2).all(|w| w[0].server_seq < w[1].server_seq),
                "B's own increasing serverSeq: {seen:#?}"
            );
        }
        drop(server);
    })
    .await;
}
