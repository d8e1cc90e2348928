//! The Agent Host Protocol against the real binary, with the official Rust client (`ahp` +
//! `ahp-ws`): the handshake, snapshots, a streamed turn reduced by the client's own reducers,
//! a tool call confirmed by an AHP client that joined mid-turn, reconnect with replay, one
//! session served to a Copilot SDK app, an AHP client and an ACP editor at once, and bad
//! input on the WebSocket.

use std::time::Duration;

use ahp::reducers::apply_action_to_chat;
use ahp::{Client, ClientConfig, ClientError, SessionSubscription, SubscriptionEvent};
use ahp_types::actions::{
    ActionEnvelope, ChatToolCallConfirmedAction, ChatToolCallReadyAction, ChatTurnStartedAction,
    StateAction,
};
use ahp_types::commands::{CreateSessionParams, ReconnectResult, SubscribeResult};
use ahp_types::state::{
    ChatState, Message, MessageKind, MessageOrigin, ResponsePart, SnapshotState, TurnState,
};
use ahp_ws::WebSocketTransport;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::support::{sdk_client, sdk_scenarios as sdk, Agentwire};

async fn server(extra: &[&str], token: Option<&str>) -> (Agentwire, u16) {
    let mut args = vec!["--port", "0", "--ahp-port", "0"];
    if !extra.contains(&"--data-dir") {
        args.push("--no-store");
    }
    args.extend_from_slice(extra);
    let server = Agentwire::launch_with_token(args, token).await;
    let port = server.listener_port("ahp").await;
    (server, port)
}

pub(crate) async fn client(port: u16) -> Client {
    let transport = sdk::within(
        "websocket connect",
        WebSocketTransport::connect(&format!("ws://127.0.0.1:{port}")),
    )
    .await
    .expect("connect");
    Client::connect(transport, ClientConfig::default())
        .await
        .expect("client")
}

pub(crate) async fn initialize(c: &Client, id: &str) {
    sdk::within(
        "initialize",
        c.initialize(id.into(), vec!["1.0.0".into()], vec!["ahp-root://".into()]),
    )
    .await
    .expect("initialize");
}

pub(crate) async fn create(c: &Client, id: &str) {
    let params = CreateSessionParams {
        channel: format!("ahp-session:/{id}"),
        meta: None,
        provider: None,
        working_directories: Some(vec!["file:///tmp".into()]),
        config: None,
        active_client: None,
        progress_token: None,
    };
    let answer: Value = sdk::within("createSession", c.request("createSession", params))
        .await
        .expect("createSession");
    assert_eq!(answer, Value::Null);
}

/// Subscribes to `chat` and returns its snapshot state and the subscription.
pub(crate) async fn subscribe_chat(c: &Client, chat: &str) -> (ChatState, SessionSubscription) {
    let (result, sub): (SubscribeResult, _) = sdk::within("subscribe", c.subscribe(chat.into()))
        .await
        .expect("subscribe");
    let snapshot = result.snapshot.expect("a chat has state");
    match snapshot.state {
        SnapshotState::Chat(chat) => (*chat, sub),
        other => panic!("not a chat snapshot: {other:?}"),
    }
}

pub(crate) fn turn_started(turn: &str, text: &str) -> StateAction {
    StateAction::ChatTurnStarted(ChatTurnStartedAction {
        turn_id: turn.into(),
        started_at: "2026-12-04T00:00:00Z".into(),
        message: Message {
            text: text.into(),
            origin: MessageOrigin {
                kind: MessageKind::User,
            },
            attachments: None,
            model: None,
            agent: None,
            meta: None,
        },
        queued_message_id: None,
        meta: None,
    })
}

/// Receives envelopes on `sub`, applying each to `state`, until one satisfies `done`.
pub(crate) async fn until(
    sub: &mut SessionSubscription,
    state: &mut ChatState,
    seen: &mut Vec<ActionEnvelope>,
    done: impl Fn(&StateAction) -> bool,
) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match sub.recv().await {
                Some(SubscriptionEvent::Action(envelope)) => {
                    apply_action_to_chat(state, &envelope.action);
                    let stop = done(&envelope.action);
                    seen.push(envelope);
                    if stop {
                        return true;
                    }
                }
                Some(_) => {}
                None => return false,
            }
        }
    })
    .await;
    assert_eq!(
        waited,
        Ok(true),
        "the awaited action did not come; seen {seen:#?}"
    );
}

/// A scenario whose prompts containing "read" read a file (a tool call that needs
/// confirmation) and answer with its content; written into `dir`.
pub(crate) fn read_scenario(dir: &std::path::Path) -> std::path::PathBuf {
    let scenario = dir.join("scenario.json");
    std::fs::write(
        &scenario,
        r#"{"rules":[{"match":"read","steps":[{"read_file":"/tmp/notes.txt","result":"the notes"},
                                             {"say":"read: {result}"}]}],
            "default":[{"say":"You said: {prompt}"}]}"#,
    )
    .unwrap();
    scenario
}

/// The action approving the tool call `ready` announced.
pub(crate) fn approve(ready: &ChatToolCallReadyAction) -> StateAction {
    StateAction::ChatToolCallConfirmed(ChatToolCallConfirmedAction {
        turn_id: ready.turn_id.clone(),
        tool_call_id: ready.tool_call_id.clone(),
        meta: None,
        approved: true,
        confirmed: None,
        reason: None,
        edited_tool_input: None,
        user_suggestion: None,
        reason_message: None,
        selected_option_id: None,
    })
}

pub(crate) fn markdown(parts: &[ResponsePart]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            ResponsePart::Markdown(m) => Some(m.content.as_str()),
            _ => None,
        })
        .collect()
}

pub(crate) fn is_turn_end(a: &StateAction) -> bool {
    matches!(
        a,
        StateAction::ChatTurnComplete(_)
            | StateAction::ChatError(_)
            | StateAction::ChatTurnCancelled(_)
    )
}

#[tokio::test]
async fn the_official_client_handshakes_and_runs_a_turn_its_reducers_agree_with() {
    sdk::bounded(async {
        let (_server, port) = server(&[], None).await;
        let c = client(port).await;
        let refused = c
            .initialize("x".into(), vec!["2.0.0".into()], vec![])
            .await
            .expect_err("2.0.0 is not spoken");
        match refused {
            ClientError::Rpc(e) => {
                assert_eq!(e.code, -32005, "{e:?}");
                assert_eq!(e.data.unwrap()["supportedVersions"], json!(["1.0.0", "0.9.0"]));
            }
            other => panic!("{other:?}"),
        }
        let init = c
            .initialize("a".into(), vec!["1.0.0".into()], vec!["ahp-root://".into()])
            .await
            .expect("initialize");
        assert_eq!(init.protocol_version, "1.0.0");
        assert!(matches!(&init.snapshots[0].state, SnapshotState::Root(r) if r.agents[0].provider == "agentwire"));
        sdk::within("ping", c.ping()).await.expect("ping answers null");

        let mut root = c.attach_subscription("ahp-root://").await;
        create(&c, "e2e-turn").await;
        let added = sdk::within("root/sessionAdded", async {
            loop {
                if let Some(SubscriptionEvent::SessionAdded(n)) = root.recv().await {
                    return n;
                }
            }
        })
        .await;
        assert_eq!(added.summary.resource, "ahp-session:/e2e-turn");

        let (mut state, mut sub) = subscribe_chat(&c, "ahp-chat:/e2e-turn").await;
        assert!(state.turns.is_empty());
        c.dispatch("ahp-chat:/e2e-turn".into(), turn_started("t1", "hello"))
            .await
            .expect("dispatch");
        let mut seen = Vec::new();
        until(&mut sub, &mut state, &mut seen, is_turn_end).await;
        assert!(matches!(seen[0].action, StateAction::ChatTurnStarted(_)), "{seen:#?}");
        assert_eq!(seen[0].origin.as_ref().map(|o| o.client_id.as_str()), Some("a"));
        assert!(
            seen.windows(2).all(|w| w[0].server_seq < w[1].server_seq),
            "serverSeq increases"
        );
        assert!(state.active_turn.is_none(), "{state:#?}");
        assert_eq!(state.turns.len(), 1);
        assert_eq!(state.turns[0].state, TurnState::Complete);
        assert_eq!(markdown(&state.turns[0].response_parts), "You said: hello");

        // A fresh snapshot is what the client's reducers built.
        let other = client(port).await;
        initialize(&other, "b").await;
        let (fresh, _) = subscribe_chat(&other, "ahp-chat:/e2e-turn").await;
        assert_eq!(fresh.turns.len(), 1);
        assert_eq!(fresh.turns[0].response_parts, state.turns[0].response_parts);
        assert_eq!(fresh.turns[0].message.text, "hello");
    })
    .await;
}

#[tokio::test]
async fn a_tool_call_is_confirmed_by_a_client_that_joined_mid_turn_and_a_dropped_client_catches_up()
{
    sdk::bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let scenario = read_scenario(dir.path());
        let (_server, port) = server(&["--scenario", scenario.to_str().unwrap()], None).await;
        let a = client(port).await;
        initialize(&a, "a").await;
        create(&a, "e2e-tool").await;
        let (mut state_a, mut sub_a) = subscribe_chat(&a, "ahp-chat:/e2e-tool").await;
        a.dispatch("ahp-chat:/e2e-tool".into(), turn_started("t1", "read it"))
            .await
            .expect("dispatch");
        let mut seen_a = Vec::new();
        until(
            &mut sub_a,
            &mut state_a,
            &mut seen_a,
            |a| matches!(a, StateAction::ChatToolCallReady(r) if r.confirmed.is_none()),
        )
        .await;
        let Some(StateAction::ChatToolCallReady(ready)) = seen_a.last().map(|e| e.action.clone())
        else {
            unreachable!()
        };

        // B joins mid-turn: its snapshot shows the call waiting; B confirms it.
        let b = client(port).await;
        initialize(&b, "b").await;
        let (mut state_b, mut sub_b) = subscribe_chat(&b, "ahp-chat:/e2e-tool").await;
        let active = state_b.active_turn.clone().expect("a turn in progress");
        let waiting = serde_json::to_value(&active.response_parts).unwrap();
        assert_eq!(
            waiting[0]["toolCall"]["status"], "pending-confirmation",
            "{waiting}"
        );
        b.dispatch("ahp-chat:/e2e-tool".into(), approve(&ready))
            .await
            .expect("dispatch");
        let mut seen_b = Vec::new();
        until(&mut sub_b, &mut state_b, &mut seen_b, is_turn_end).await;
        until(&mut sub_a, &mut state_a, &mut seen_a, is_turn_end).await;
        for state in [&state_a, &state_b] {
            assert_eq!(state.turns.len(), 1, "{state:#?}");
            assert_eq!(markdown(&state.turns[0].response_parts), "read: the notes");
            let parts = serde_json::to_value(&state.turns[0].response_parts).unwrap();
            assert_eq!(parts[0]["toolCall"]["status"], "completed", "{parts}");
        }
        let confirmed = seen_a
            .iter()
            .find(|e| matches!(e.action, StateAction::ChatToolCallConfirmed(_)))
            .expect("A hears of the confirmation");
        assert_eq!(
            confirmed.origin.as_ref().map(|o| o.client_id.as_str()),
            Some("b")
        );

        // A drops; a turn runs without it; A reconnects and is replayed what it missed.
        let last_seen = seen_a.last().unwrap().server_seq;
        a.shutdown().await;
        drop(sub_a);
        b.dispatch("ahp-chat:/e2e-tool".into(), turn_started("t2", "again"))
            .await
            .expect("dispatch");
        until(&mut sub_b, &mut state_b, &mut seen_b, is_turn_end).await;
        let back = client(port).await;
        let result = sdk::within(
            "reconnect",
            back.reconnect(
                "a".into(),
                i64::try_from(last_seen).unwrap(),
                vec!["ahp-chat:/e2e-tool".into()],
            ),
        )
        .await
        .expect("reconnect");
        let ReconnectResult::Replay(replay) = result else {
            panic!("expected a replay: {result:?}")
        };
        assert!(replay.missing.is_empty());
        for envelope in &replay.actions {
            assert!(envelope.server_seq > last_seen);
            apply_action_to_chat(&mut state_a, &envelope.action);
        }
        assert_eq!(state_a.turns.len(), 2, "{:#?}", replay.actions);
        assert_eq!(state_a.turns[1].id, "t2");
        assert_eq!(
            state_a.turns[1].response_parts,
            state_b.turns[1].response_parts
        );
    })
    .await;
}

/// An ACP editor's NDJSON connection.
struct Editor {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl Editor {
    async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.writer.write_all(&line).await.unwrap();
    }

    /// Reads messages until one satisfies `done`; returns it.
    async fn until(&mut self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        sdk::within(what, async {
            loop {
                let line = self.lines.next_line().await.unwrap().expect("a line");
                let message: Value = serde_json::from_str(&line).unwrap();
                if done(&message) {
                    return message;
                }
            }
        })
        .await
    }

    /// Reads `session/update`s until the agent's message chunks (deltas or whole) spell
    /// `text`.
    async fn agent_says(&mut self, text: &str) {
        let mut said = String::new();
        sdk::within(&format!("{text:?} on ACP"), async {
            while !said.contains(text) {
                let line = self.lines.next_line().await.unwrap().expect("a line");
                let m: Value = serde_json::from_str(&line).unwrap();
                if m["method"] == "session/update"
                    && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                {
                    said.push_str(
                        m["params"]["update"]["content"]["text"]
                            .as_str()
                            .unwrap_or(""),
                    );
                }
            }
        })
        .await;
    }
}

#[tokio::test]
async fn one_session_streams_to_a_copilot_app_an_ahp_client_and_an_acp_editor() {
    sdk::bounded(async {
        let (server, ahp_port) = server(&["--acp-port", "0"], None).await;
        let acp_port = server.listener_port("acp").await;

        // The Copilot SDK app creates the session.
        let sdk_app = sdk_client(server.port).await;
        let id = sdk::new_session_id();
        let mut app = sdk::create_session(&sdk_app, &id, true).await;
        let session = id.to_string();
        let chat = format!("ahp-chat:/{session}");

        // The AHP client subscribes to its chat; the ACP editor loads it.
        let c = client(ahp_port).await;
        initialize(&c, "ahp").await;
        let (mut state, mut sub) = subscribe_chat(&c, &chat).await;
        let socket = tokio::net::TcpStream::connect(("127.0.0.1", acp_port))
            .await
            .unwrap();
        let (r, w) = socket.into_split();
        let mut editor = Editor {
            lines: BufReader::new(r).lines(),
            writer: w,
        };
        editor
            .send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": 1, "clientCapabilities": {}}}))
            .await;
        editor.until("ACP initialize", |m| m["id"] == 1).await;
        editor
            .send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
                         "params": {"sessionId": session, "cwd": "/tmp", "mcpServers": []}}))
            .await;
        let loaded = editor.until("session/load", |m| m["id"] == 2).await;
        assert!(loaded.get("error").is_none(), "{loaded}");

        // A prompt from the app streams to all three.
        let reply = sdk::turn(&app.session, "from the app").await;
        assert_eq!(reply.data["content"], "You said: from the app");
        let mut seen = Vec::new();
        until(&mut sub, &mut state, &mut seen, is_turn_end).await;
        assert_eq!(state.turns[0].message.text, "from the app");
        assert_eq!(
            markdown(&state.turns[0].response_parts),
            "You said: from the app"
        );
        editor.agent_says("You said: from the app").await;

        // A prompt from the AHP client reaches the app and the editor.
        app.events.turn().await;
        c.dispatch(chat.clone(), turn_started("from-ahp", "from ahp"))
            .await
            .expect("dispatch");
        until(&mut sub, &mut state, &mut seen, is_turn_end).await;
        assert_eq!(
            markdown(&state.turns[1].response_parts),
            "You said: from ahp"
        );
        let events = app.events.turn().await;
        assert!(
            events
                .iter()
                .any(|e| e.event_type == "user.message" && e.data["content"] == "from ahp"),
            "{events:#?}"
        );
        assert!(events
            .iter()
            .any(|e| e.event_type == "assistant.message"
                && e.data["content"] == "You said: from ahp"));
        editor.agent_says("You said: from ahp").await;
    })
    .await;
}

#[tokio::test]
async fn bad_input_on_the_websocket_gets_clear_answers_and_the_token_is_checked() {
    sdk::bounded(async {
        let (_server, port) = server(&[], Some("s3cret")).await;
        let url = format!("ws://127.0.0.1:{port}");

        // No token: the upgrade is refused.
        let refused = tokio_tungstenite::connect_async(url.as_str()).await;
        let err = refused.expect_err("no token, no connection").to_string();
        assert!(err.contains("401"), "{err}");

        let mut request = url.as_str().into_client_request().unwrap();
        request
            .headers_mut()
            .insert("authorization", "Bearer s3cret".parse().unwrap());
        let (mut ws, _) = tokio_tungstenite::connect_async(request).await.expect("with the token");
        async fn next(ws: &mut (impl StreamExt<Item = Result<WsMessage, tokio_tungstenite::tungstenite::Error>> + Unpin)) -> Value {
            sdk::within("a reply", async {
                loop {
                    match ws.next().await.expect("open").expect("a message") {
                        WsMessage::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
                        _ => continue,
                    }
                }
            })
            .await
        }
        ws.send(WsMessage::text("this is not json")).await.unwrap();
        assert_eq!(next(&mut ws).await["error"]["code"], -32700);
        // A pretty-printed message (newlines inside) is one message.
        let pretty = "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"method\": \"ping\",\n  \"params\": {\"channel\": \"ahp-root://\"}\n}";
        ws.send(WsMessage::text(pretty)).await.unwrap();
        let pong = next(&mut ws).await;
        assert_eq!(pong["id"], 1, "{pong}");
        assert_eq!(pong["result"], Value::Null, "{pong}");
        ws.send(WsMessage::text(
            json!({"jsonrpc": "2.0", "id": 2, "method": "initialize",
                   "params": {"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "raw"}})
            .to_string(),
        ))
        .await
        .unwrap();
        assert_eq!(next(&mut ws).await["result"]["protocolVersion"], "1.0.0");
        ws.send(WsMessage::text(
            json!({"jsonrpc": "2.0", "id": 3, "method": "subscribe", "params": {"channel": "ahp-nowhere:/x"}})
                .to_string(),
        ))
        .await
        .unwrap();
        let unknown = next(&mut ws).await;
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
        ws.send(WsMessage::text(
            json!({"jsonrpc": "2.0", "method": "dispatchAction",
                   "params": {"channel": "ahp-chat:/none", "clientSeq": 1, "action": {"type": "no/such"}}})
            .to_string(),
        ))
        .await
        .unwrap();
        let rejected = next(&mut ws).await;
        assert_eq!(rejected["method"], "action", "{rejected}");
        assert!(rejected["params"]["rejectionReason"].is_string(), "{rejected}");

        // An oversize message ends that connection with close code 1009; others go on.
        let huge = "x".repeat(17 * 1024 * 1024);
        let _ = ws.send(WsMessage::text(huge)).await;
        let closed = sdk::within("the close", async {
            loop {
                match ws.next().await {
                    Some(Ok(WsMessage::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                    Some(Ok(_)) => continue,
                    Some(Err(_)) | None => return None,
                }
            }
        })
        .await;
        assert_eq!(closed, Some(1009), "the close frame says: message too big");
        let mut request = url.as_str().into_client_request().unwrap();
        request
            .headers_mut()
            .insert("authorization", "Bearer s3cret".parse().unwrap());
        let (ws2, _) = tokio_tungstenite::connect_async(request).await.expect("still serving");
        let c = Client::connect(WebSocketTransport::from_stream(ws2), ClientConfig::default())
            .await
            .unwrap();
        initialize(&c, "after").await;
        tokio::time::timeout(Duration::from_secs(5), c.ping()).await.unwrap().unwrap();
    })
    .await;
}

#[tokio::test]
async fn smol_and_async_std_serve_ahp_too() {
    sdk::bounded(async {
        for runtime in ["smol", "async-std"] {
            let (_server, port) = server(&["--runtime", runtime], None).await;
            let c = client(port).await;
            initialize(&c, runtime).await;
            create(&c, "rt").await;
            let (mut state, mut sub) = subscribe_chat(&c, "ahp-chat:/rt").await;
            c.dispatch("ahp-chat:/rt".into(), turn_started("t", runtime))
                .await
                .expect("dispatch");
            let mut seen = Vec::new();
            until(&mut sub, &mut state, &mut seen, is_turn_end).await;
            assert_eq!(
                markdown(&state.turns[0].response_parts),
                format!("You said: {runtime}"),
                "on {runtime}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn a_restarted_server_gives_ahp_clients_the_stored_turns() {
    sdk::bounded(async {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().to_str().unwrap();
        let (mut first, port) = server(&["--data-dir", dir], None).await;
        let c = client(port).await;
        initialize(&c, "before").await;
        create(&c, "stored").await;
        let (mut state, mut sub) = subscribe_chat(&c, "ahp-chat:/stored").await;
        c.dispatch("ahp-chat:/stored".into(), turn_started("t1", "keep me"))
            .await
            .expect("dispatch");
        let mut seen = Vec::new();
        until(&mut sub, &mut state, &mut seen, is_turn_end).await;
        c.shutdown().await;
        first.signal("TERM");
        assert!(first.exit(Duration::from_secs(10)).await.success());

        let (_second, port) = server(&["--data-dir", dir], None).await;
        let c = client(port).await;
        initialize(&c, "after").await;
        let listed: Value = sdk::within(
            "listSessions",
            c.request("listSessions", json!({"channel": "ahp-root://"})),
        )
        .await
        .expect("listSessions");
        assert!(
            listed["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["resource"] == "ahp-session:/stored"),
            "{listed}"
        );
        let (restored, _) = subscribe_chat(&c, "ahp-chat:/stored").await;
        assert_eq!(restored.turns.len(), 1, "{restored:#?}");
        assert_eq!(restored.turns[0].message.text, "keep me");
        assert_eq!(
            markdown(&restored.turns[0].response_parts),
            "You said: keep me"
        );
        assert_eq!(restored.turns[0].state, TurnState::Complete);
        let fetched: Value = sdk::within(
            "fetchTurns",
            c.request("fetchTurns", json!({"channel": "ahp-chat:/stored"})),
        )
        .await
        .expect("fetchTurns");
        assert_eq!(fetched, json!({}));
    })
    .await;
}

#[tokio::test]
async fn turns_started_during_a_turn_are_queued_and_run_in_order_for_every_client() {
    sdk::bounded(async {
        let dir = tempfile::tempdir().unwrap();
        let scenario = dir.path().join("scenario.json");
        std::fs::write(
            &scenario,
            r#"{"rules":[{"match":"slow","steps":[{"sleep_ms":1500},{"say":"slept"}]}],
                "default":[{"say":"You said: {prompt}"}]}"#,
        )
        .unwrap();
        let (_server, port) = server(&["--scenario", scenario.to_str().unwrap()], None).await;
        let a = client(port).await;
        initialize(&a, "a").await;
        create(&a, "e2e-queue").await;
        let (mut state_a, mut sub_a) = subscribe_chat(&a, "ahp-chat:/e2e-queue").await;
        let b = client(port).await;
        initialize(&b, "b").await;
        let (mut state_b, mut sub_b) = subscribe_chat(&b, "ahp-chat:/e2e-queue").await;

        a.dispatch(
            "ahp-chat:/e2e-queue".into(),
            turn_started("t1", "slow please"),
        )
        .await
        .expect("dispatch");
        let mut seen_a = Vec::new();
        until(&mut sub_a, &mut state_a, &mut seen_a, |x| {
            matches!(x, StateAction::ChatTurnStarted(_))
        })
        .await;
        // While t1 runs, B and then A start turns: both are queued, in order.
        b.dispatch("ahp-chat:/e2e-queue".into(), turn_started("t2", "second"))
            .await
            .expect("dispatch");
        let mut seen_b = Vec::new();
        until(&mut sub_b, &mut state_b, &mut seen_b, |x| {
            matches!(x, StateAction::ChatPendingMessageSet(_))
        })
        .await;
        a.dispatch("ahp-chat:/e2e-queue".into(), turn_started("t3", "third"))
            .await
            .expect("dispatch");
        until(
            &mut sub_a,
            &mut state_a,
            &mut seen_a,
            |x| matches!(x, StateAction::ChatPendingMessageSet(p) if p.id == "t3"),
        )
        .await;
        let queued: Vec<&str> = state_a
            .queued_messages
            .iter()
            .flatten()
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(queued, ["t2", "t3"], "{state_a:#?}");
        assert_eq!(
            state_a.active_turn.as_ref().map(|t| t.id.as_str()),
            Some("t1")
        );
        let queued_echo = seen_a
            .iter()
            .find(|e| matches!(&e.action, StateAction::ChatPendingMessageSet(p) if p.id == "t2"))
            .expect("B's queued message reached A");
        assert_eq!(
            queued_echo.origin.as_ref().map(|o| o.client_id.as_str()),
            Some("b")
        );

        // Every client sees t1 end, then t2 and t3 run from the queue, in order.
        for (sub, state, seen) in [
            (&mut sub_a, &mut state_a, &mut seen_a),
            (&mut sub_b, &mut state_b, &mut seen_b),
        ] {
            until(
                sub,
                state,
                seen,
                |x| matches!(x, StateAction::ChatTurnComplete(c) if c.turn_id == "t3"),
            )
            .await;
            let order: Vec<(String, Option<String>)> = seen
                .iter()
                .filter_map(|e| match &e.action {
                    StateAction::ChatTurnStarted(s) => {
                        Some((format!("start {}", s.turn_id), s.queued_message_id.clone()))
                    }
                    StateAction::ChatTurnComplete(c) => Some((format!("end {}", c.turn_id), None)),
                    _ => None,
                })
                .collect();
            let tail = &order[order.len() - 5..];
            assert_eq!(
                tail,
                [
                    ("end t1".to_owned(), None),
                    ("start t2".to_owned(), Some("t2".to_owned())),
                    ("end t2".to_owned(), None),
                    ("start t3".to_owned(), Some("t3".to_owned())),
                    ("end t3".to_owned(), None),
                ],
                "{order:?}"
            );
            assert!(state.queued_messages.is_none(), "{state:#?}");
            let texts: Vec<&str> = state
                .turns
                .iter()
                .map(|t| t.message.text.as_str())
                .collect();
            assert_eq!(texts, ["slow please", "second", "third"]);
            let replies: Vec<String> = state
                .turns
                .iter()
                .map(|t| markdown(&t.response_parts))
                .collect();
            assert_eq!(replies, ["slept", "You said: second", "You said: third"]);
        }
        // A fresh snapshot agrees with what the reducers built.
        let c = client(port).await;
        initialize(&c, "c").await;
        let (fresh, _) = subscribe_chat(&c, "ahp-chat:/e2e-queue").await;
        assert_eq!(fresh.turns.len(), 3);
        for (f, s) in fresh.turns.iter().zip(&state_a.turns) {
            assert_eq!(f.id, s.id);
            assert_eq!(f.response_parts, s.response_parts);
        }
    })
    .await;
}

#[tokio::test]
async fn a_second_chat_runs_its_own_turns_and_stays_in_its_session_across_a_restart() {
    sdk::bounded(async {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().to_str().unwrap();
        let (mut first, port) = server(&["--data-dir", dir], None).await;
        let c = client(port).await;
        let init = c
            .initialize("a".into(), vec!["1.0.0".into()], vec!["ahp-root://".into()])
            .await
            .expect("initialize");
        let SnapshotState::Root(root) = &init.snapshots[0].state else {
            panic!("not the root");
        };
        let chats = root.agents[0]
            .capabilities
            .as_ref()
            .and_then(|c| c.multiple_chats.as_ref())
            .expect("the agent advertises multipleChats");
        assert_eq!((chats.fork, chats.side_chat), (Some(true), Some(false)));
        create(&c, "multi").await;
        let params = ahp_types::commands::CreateChatParams {
            channel: "ahp-session:/multi".into(),
            meta: None,
            chat: "ahp-chat:/multi-side".into(),
            initial_message: None,
            source: None,
            working_directories: None,
        };
        let answer: Value = sdk::within("createChat", c.request("createChat", params))
            .await
            .expect("createChat");
        assert_eq!(answer, Value::Null);
        let (mut state, mut sub) = subscribe_chat(&c, "ahp-chat:/multi-side").await;
        c.dispatch("ahp-chat:/multi-side".into(), turn_started("s1", "aside"))
            .await
            .expect("dispatch");
        let mut seen = Vec::new();
        until(&mut sub, &mut state, &mut seen, is_turn_end).await;
        assert_eq!(markdown(&state.turns[0].response_parts), "You said: aside");
        let (main_chat, _) = subscribe_chat(&c, "ahp-chat:/multi").await;
        assert!(main_chat.turns.is_empty(), "{main_chat:#?}");
        c.shutdown().await;
        first.signal("TERM");
        assert!(first.exit(Duration::from_secs(10)).await.success());

        // After a restart the chat is still the session's (the link is in its log).
        let (_second, port) = server(&["--data-dir", dir], None).await;
        let c = client(port).await;
        initialize(&c, "after").await;
        // Load the session, then its chat (a restored session's chats come from the store).
        let (restored, _) = subscribe_chat(&c, "ahp-chat:/multi-side").await;
        assert_eq!(restored.turns.len(), 1);
        assert_eq!(
            restored.turns[0].response_parts,
            state.turns[0].response_parts
        );
        let (session, _): (SubscribeResult, _) =
            sdk::within("subscribe", c.subscribe("ahp-session:/multi".into()))
                .await
                .expect("subscribe");
        let SnapshotState::Session(session) = session.snapshot.expect("state").state else {
            panic!("not a session");
        };
        let chats: Vec<&str> = session.chats.iter().map(|c| c.resource.as_str()).collect();
        assert_eq!(chats, ["ahp-chat:/multi", "ahp-chat:/multi-side"]);
        let listed: Value = sdk::within(
            "listSessions",
            c.request("listSessions", json!({"channel": "ahp-root://"})),
        )
        .await
        .expect("listSessions");
        let resources: Vec<&Value> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| &s["resource"])
            .collect();
        assert_eq!(resources, [&json!("ahp-session:/multi")], "{listed}");

        // A fork of the chat at its turn: a third chat of the session holding that turn.
        let params = ahp_types::commands::CreateChatParams {
            channel: "ahp-session:/multi".into(),
            meta: None,
            chat: "ahp-chat:/multi-fork".into(),
            initial_message: None,
            source: Some(ahp_types::commands::ChatSource::Fork(
                ahp_types::commands::ForkChatSource {
                    chat: "ahp-chat:/multi-side".into(),
                    turn_id: restored.turns[0].id.clone(),
                },
            )),
            working_directories: None,
        };
        let answer: Value = sdk::within("createChat", c.request("createChat", params))
            .await
            .expect("createChat with a fork source");
        assert_eq!(answer, Value::Null);
        let (forked, _) = subscribe_chat(&c, "ahp-chat:/multi-fork").await;
        assert_eq!(forked.turns.len(), 1);
        assert_eq!(
            forked.turns[0].response_parts,
            state.turns[0].response_parts
        );
    })
    .await;
}
