//! Interop with the **official Copilot Rust SDK** (`github-copilot-sdk`, unmodified) for what
//! changes as clients join and leave a live session: the capability flags each client's SDK
//! holds (`Session::capabilities()`, fed by create/resume results and `capabilities.changed`),
//! and the per-connection streaming opt-in (only `streaming: true` clients get deltas).
//!
//! Driven like `tests/interop/copilot.rs`: the SDK's `Client::from_streams` on one end of a
//! `tokio::io::duplex` pipe, `agentwire_tokio::Server` (scripted agent) on the other.

use crate::support::sdk_scenarios;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{connect, connect_cuttable, cut};
use agentwire_tokio::agentwire::agent::Scenario;
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use github_copilot_sdk::canvas::CanvasDeclaration;
use github_copilot_sdk::session::Session;
use github_copilot_sdk::types::{MessageOptions, ResumeSessionConfig, SessionConfig, SessionEvent};
use github_copilot_sdk::Client;
use sdk_scenarios::{assert_envelope, types, within, Recorder, RecordingElicitation, TURN};
use serde_json::{json, Value};

/// `(elicitation, mcpApps, canvases)` as this client's SDK currently holds them.
type Flags = (Option<bool>, Option<bool>, Option<bool>);

fn flags(session: &Session) -> Flags {
    let ui = session.capabilities().ui.unwrap_or_default();
    (ui.elicitation, ui.mcp_apps, ui.canvases)
}

/// The full `ui` object a `capabilities.changed` must carry for these flags.
fn ui(elicitation: bool, mcp_apps: bool, canvases: bool) -> Value {
    json!({"ui": {"elicitation": elicitation, "mcpApps": mcp_apps, "canvases": canvases}})
}

/// SDK-side view for `ui(elicitation, mcp_apps, canvases)`.
fn view(elicitation: bool, mcp_apps: bool, canvases: bool) -> Flags {
    (Some(elicitation), Some(mcp_apps), Some(canvases))
}

/// The Node SDK's merge of a `capabilities.changed` payload: a shallow, top-level spread
/// (`{...capabilities, ...data}`), so a `ui` object replaces the previous one whole.
fn node_merge(current: &mut Value, data: &Value) {
    for (k, v) in data
        .as_object()
        .expect("capabilities.changed data is an object")
    {
        current[k] = v.clone();
    }
}

/// Waits for the next `capabilities.changed` and checks it carries the full `ui` object.
async fn next_change(rec: &mut Recorder, expected: &Value) {
    let ev = rec.wait_for("capabilities.changed").await;
    assert_envelope(&ev);
    assert_eq!(
        &ev.data, expected,
        "capabilities.changed carries the full ui object"
    );
}

/// Every `capabilities.changed` payload `rec` has received so far.
fn changes(rec: &mut Recorder) -> Vec<Value> {
    rec.drain();
    rec.seen
        .iter()
        .filter(|e| e.event_type == "capabilities.changed")
        .map(|e| e.data.clone())
        .collect()
}

fn server_with_mcp_apps() -> Server {
    Server::new(HostConfig::default().with_mcp_apps_enabled(true))
}

async fn create_plain(client: &Client) -> (Session, Recorder) {
    let prepared = client
        .prepare_session(
            SessionConfig::default()
                .with_session_id(sdk_scenarios::new_session_id())
                .with_model("fake-model"),
        )
        .expect("prepare_session");
    let rec = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create");
    (session, rec)
}

fn elicitation_handler() -> Arc<RecordingElicitation> {
    Arc::new(RecordingElicitation {
        requests: Arc::new(Mutex::new(Vec::new())),
    })
}

/// Three clients on one session. A (no providers) creates it; B joins providing elicitation;
/// C joins providing elicitation, MCP Apps and a canvas; B detaches and joins again; C's
/// connection is cut; B detaches. After every transition each attached client's SDK holds the
/// right flags, and `capabilities.changed` is emitted exactly when a capability gains its
/// first or loses its last provider — not for C's second elicitation, not for B leaving or
/// rejoining while C provides it. Each event carries the full `ui` object, so a Node-style
/// shallow merge (which replaces `ui` whole) ends with the same flags as the Rust SDK's.
#[tokio::test]
async fn three_clients_capability_flags_follow_joins_and_leaves() {
    sdk_scenarios::bounded(async {
        let server = server_with_mcp_apps();
        let a = connect(&server).await;
        let b = connect(&server).await;
        let (c, relay_c) = connect_cuttable(&server).await;

        // A alone: nothing provided, every flag reported (false).
        let (sa, mut ea) = create_plain(&a).await;
        let id = sa.id().clone();
        assert_eq!(flags(&sa), view(false, false, false), "A after create");
        let mut node_a = json!({"ui": {"elicitation": false, "mcpApps": false, "canvases": false}});

        // B joins with an elicitation handler: first elicitation provider.
        let prepared = b
            .prepare_resume_session(
                ResumeSessionConfig::new(id.clone())
                    .with_elicitation_handler(elicitation_handler()),
            )
            .expect("prepare_resume_session");
        let mut eb = Recorder::new(prepared.subscribe());
        let sb = within("B joins", prepared.start()).await.expect("B joins");
        assert_eq!(flags(&sb), view(true, false, false), "B's resume result");
        next_change(&mut ea, &ui(true, false, false)).await;
        assert_eq!(flags(&sa), view(true, false, false), "A after B joined");

        // C joins with elicitation (second provider), MCP Apps and a canvas (first providers).
        let prepared = c
            .prepare_resume_session(
                ResumeSessionConfig::new(id.clone())
                    .with_elicitation_handler(elicitation_handler())
                    .with_enable_mcp_apps(true)
                    .with_canvases([CanvasDeclaration::new("board", "Board", "A test canvas")]),
            )
            .expect("prepare_resume_session");
        let mut ec = Recorder::new(prepared.subscribe());
        let sc = within("C joins", prepared.start()).await.expect("C joins");
        assert_eq!(flags(&sc), view(true, true, true), "C's resume result");
        next_change(&mut ea, &ui(true, true, true)).await;
        assert_eq!(flags(&sa), view(true, true, true), "A after C joined");
        next_change(&mut eb, &ui(true, false, false)).await; // B's own join
        next_change(&mut eb, &ui(true, true, true)).await;
        assert_eq!(flags(&sb), view(true, true, true), "B after C joined");

        // B detaches and joins again: C still provides elicitation, so nothing changes.
        within("B detaches", sb.disconnect())
            .await
            .expect("detach b");
        assert_eq!(flags(&sa), view(true, true, true), "A after B left");
        assert_eq!(flags(&sc), view(true, true, true), "C after B left");
        let prepared = b
            .prepare_resume_session(
                ResumeSessionConfig::new(id.clone())
                    .with_elicitation_handler(elicitation_handler()),
            )
            .expect("prepare_resume_session");
        let mut eb2 = Recorder::new(prepared.subscribe());
        let sb2 = within("B rejoins", prepared.start())
            .await
            .expect("B rejoins");
        assert_eq!(
            flags(&sb2),
            view(true, true, true),
            "B's second resume result"
        );

        // C's connection is cut: MCP Apps and canvases lose their only provider, elicitation
        // keeps B.
        cut(relay_c).await;
        next_change(&mut ea, &ui(true, false, false)).await;
        assert_eq!(flags(&sa), view(true, false, false), "A after C vanished");
        next_change(&mut eb2, &ui(true, false, false)).await;
        assert_eq!(flags(&sb2), view(true, false, false), "B after C vanished");

        // B detaches: the last elicitation provider is gone.
        within("B detaches again", sb2.disconnect())
            .await
            .expect("detach b");
        next_change(&mut ea, &ui(false, false, false)).await;
        assert_eq!(
            flags(&sa),
            view(false, false, false),
            "A after B left again"
        );
        let refused = within(
            "elicitation with no provider",
            sa.ui()
                .elicitation("Anyone?", json!({"type": "object", "properties": {}})),
        )
        .await;
        assert!(
            refused.is_err(),
            "with no provider left, session.ui.elicitation fails: {refused:?}"
        );

        // Exactly the transitions, nothing else (B's detach and rejoin emitted no event).
        let seen_a = changes(&mut ea);
        assert_eq!(
            seen_a,
            vec![
                ui(true, false, false),
                ui(true, true, true),
                ui(true, false, false),
                ui(false, false, false)
            ],
            "A's capabilities.changed events"
        );
        for (i, data) in seen_a.iter().enumerate() {
            node_merge(&mut node_a, data);
            let rust_view = match i {
                0 => view(true, false, false),
                1 => view(true, true, true),
                2 => view(true, false, false),
                _ => view(false, false, false),
            };
            let node_view = (
                node_a["ui"]["elicitation"].as_bool(),
                node_a["ui"]["mcpApps"].as_bool(),
                node_a["ui"]["canvases"].as_bool(),
            );
            assert_eq!(
                node_view, rust_view,
                "a shallow merge after event {i} keeps every flag"
            );
        }
        assert_eq!(
            changes(&mut eb),
            vec![ui(true, false, false), ui(true, true, true)],
            "B's capabilities.changed events while first attached"
        );
        assert_eq!(
            changes(&mut eb2),
            vec![ui(true, false, false)],
            "B's capabilities.changed events after rejoining"
        );
        assert_eq!(
            changes(&mut ec),
            vec![ui(true, true, true)],
            "C's capabilities.changed events (its own join's)"
        );
        within("detach a", sa.disconnect()).await.expect("detach a");
        drop(sc);
    })
    .await
}

/// Two clients: A (elicitation provider) creates; B joins without one and still gets
/// `ui.elicitation: true` in its resume result (the session's capabilities across all
/// attached connections), with no `capabilities.changed`. A's connection is cut: B's flag
/// drops and B's elicitation fails. A comes back on a new connection with a handler: B's flag
/// rises again and B's elicitation is answered by A's handler.
#[tokio::test]
async fn provider_leaves_and_returns_two_clients() {
    sdk_scenarios::bounded(async {
        let server = server_with_mcp_apps();
        let (a, relay_a) = connect_cuttable(&server).await;
        let b = connect(&server).await;
        let id = sdk_scenarios::new_session_id();
        let prepared = a
            .prepare_session(
                SessionConfig::default()
                    .with_session_id(id.clone())
                    .with_model("fake-model")
                    .with_elicitation_handler(elicitation_handler()),
            )
            .expect("prepare_session");
        let _ea = Recorder::new(prepared.subscribe());
        let sa = within("session.create", prepared.start())
            .await
            .expect("session.create");
        assert_eq!(
            flags(&sa),
            view(true, false, false),
            "A provides elicitation"
        );

        let prepared = b
            .prepare_resume_session(ResumeSessionConfig::new(id.clone()))
            .expect("prepare_resume_session");
        let mut eb = Recorder::new(prepared.subscribe());
        let sb = within("B joins", prepared.start()).await.expect("B joins");
        assert_eq!(
            flags(&sb),
            view(true, false, false),
            "B's resume result reports A's elicitation"
        );

        // A vanishes: the last elicitation provider is gone.
        cut(relay_a).await;
        next_change(&mut eb, &ui(false, false, false)).await;
        assert_eq!(flags(&sb), view(false, false, false), "B after A vanished");
        let refused = within("confirm with no provider", sb.ui().confirm("Still there?")).await;
        assert!(refused.is_err(), "no provider: {refused:?}");
        drop(sa);

        // A comes back on a new connection, again with a handler.
        let a2 = connect(&server).await;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let sa2 = within(
            "A rejoins",
            a2.resume_session(
                ResumeSessionConfig::new(id.clone()).with_elicitation_handler(Arc::new(
                    RecordingElicitation {
                        requests: requests.clone(),
                    },
                )),
            ),
        )
        .await
        .expect("A rejoins");
        assert_eq!(flags(&sa2), view(true, false, false));
        next_change(&mut eb, &ui(true, false, false)).await;
        assert_eq!(flags(&sb), view(true, false, false), "B after A returned");
        let confirmed = within("confirm via A", sb.ui().confirm("Deploy?"))
            .await
            .expect("A's handler answers");
        assert!(confirmed);
        assert_eq!(requests.lock().unwrap().len(), 1, "A's handler ran once");
        assert_eq!(
            changes(&mut eb),
            vec![ui(false, false, false), ui(true, false, false)],
            "B saw exactly the two transitions"
        );
        within("detach b", sb.disconnect()).await.expect("detach b");
        within("detach a2", sa2.disconnect())
            .await
            .expect("detach a2");
    })
    .await
}

/// One `say` of five words: streamed as five deltas (one per word) to streaming clients.
const STREAM_SCENARIO: &str = r#"{"default": [ { "say": "d0 d1 d2 d3 d4" } ]}"#;
const STREAMED: &str = "d0 d1 d2 d3 d4";

/// Three clients on one session: A created it with `streaming: true`, B joined with
/// `streaming: false`, C joined with `streaming: true`. B drives a turn whose answer is
/// streamed: A and C each get exactly the five `assistant.message_delta` events (ephemeral,
/// adding up to the answer, before it); B gets none and no `assistant.message_start`; all
/// three get the same final `assistant.message`.
#[tokio::test]
async fn only_streaming_clients_get_deltas() {
    sdk_scenarios::bounded(async {
        let scenario = Scenario::from_json(STREAM_SCENARIO).expect("valid scenario");
        let server = Server::new(HostConfig::with_scenario(scenario));
        let a = connect(&server).await;
        let b = connect(&server).await;
        let c = connect(&server).await;
        let id = sdk_scenarios::new_session_id();
        let prepared = a
            .prepare_session(
                SessionConfig::default()
                    .with_session_id(id.clone())
                    .with_model("fake-model")
                    .with_streaming(true),
            )
            .expect("prepare_session");
        let mut ea = Recorder::new(prepared.subscribe());
        let sa = within("session.create", prepared.start())
            .await
            .expect("session.create");
        let join = |client: &Client, streaming: bool| {
            let prepared = client
                .prepare_resume_session(
                    ResumeSessionConfig::new(id.clone()).with_streaming(streaming),
                )
                .expect("prepare_resume_session");
            let rec = Recorder::new(prepared.subscribe());
            (prepared, rec)
        };
        let (pb, mut eb) = join(&b, false);
        let sb = within("B joins", pb.start()).await.expect("B joins");
        let (pc, mut ec) = join(&c, true);
        let sc = within("C joins", pc.start()).await.expect("C joins");

        let reply = within(
            "send_and_wait from B",
            sb.send_and_wait(MessageOptions::new("go").with_wait_timeout(TURN)),
        )
        .await
        .expect("the turn completes")
        .expect("an assistant message");
        assert_eq!(reply.data["content"], STREAMED);

        let ta = ea.turn().await;
        let tb = eb.turn().await;
        let tc = ec.turn().await;
        for ev in ta.iter().chain(&tb).chain(&tc) {
            assert_envelope(ev);
        }
        let final_of = |who: &str, turn: &[SessionEvent]| -> SessionEvent {
            let finals: Vec<&SessionEvent> = turn
                .iter()
                .filter(|e| e.event_type == "assistant.message")
                .collect();
            assert_eq!(
                finals.len(),
                1,
                "{who}: one assistant.message: {:?}",
                types(turn)
            );
            assert_eq!(finals[0].id, reply.id, "{who}: the same final message");
            assert_eq!(finals[0].data["content"], STREAMED);
            finals[0].clone()
        };
        for (who, turn) in [("A", &ta), ("C", &tc)] {
            let message = final_of(who, turn);
            let deltas: Vec<&SessionEvent> = turn
                .iter()
                .filter(|e| e.event_type == "assistant.message_delta")
                .collect();
            assert_eq!(deltas.len(), 5, "{who}: five deltas: {:?}", types(turn));
            let starts = turn
                .iter()
                .filter(|e| e.event_type == "assistant.message_start")
                .count();
            assert_eq!(starts, 1, "{who}: one assistant.message_start");
            let joined: String = deltas
                .iter()
                .map(|d| d.data["deltaContent"].as_str().expect("deltaContent"))
                .collect();
            assert_eq!(joined, STREAMED, "{who}: deltas add up to the message");
            for d in &deltas {
                assert_eq!(d.ephemeral, Some(true));
                assert_eq!(d.data["messageId"], message.data["messageId"]);
            }
            let last_delta = turn
                .iter()
                .rposition(|e| e.event_type == "assistant.message_delta")
                .unwrap();
            let at = turn.iter().position(|e| e.id == message.id).unwrap();
            assert!(last_delta < at, "{who}: deltas precede the final message");
        }
        final_of("B", &tb);
        for streaming_only in ["assistant.message_delta", "assistant.message_start"] {
            assert!(
                !tb.iter().any(|e| e.event_type == streaming_only),
                "B (streaming:false) gets no {streaming_only}: {:?}",
                types(&tb)
            );
        }
        // Nothing else differs: B's stream is A's minus the streaming-only events.
        let non_streaming = |turn: &[SessionEvent]| -> Vec<String> {
            turn.iter()
                .filter(|e| {
                    e.event_type != "assistant.message_delta"
                        && e.event_type != "assistant.message_start"
                })
                .filter(|e| e.event_type != "session.start")
                .map(|e| e.id.clone())
                .collect()
        };
        let user_b = tb
            .iter()
            .position(|e| e.event_type == "user.message")
            .expect("user.message on B");
        let user_a = ta
            .iter()
            .position(|e| e.id == tb[user_b].id)
            .expect("the same user.message on A");
        assert_eq!(
            non_streaming(&ta[user_a..]),
            non_streaming(&tb[user_b..]),
            "A and B agree on every non-streaming event of the turn"
        );
        ea.assert_quiet(Duration::from_millis(50)).await;
        within("detach c", sc.disconnect()).await.expect("detach c");
        within("detach b", sb.disconnect()).await.expect("detach b");
        within("detach a", sa.disconnect()).await.expect("detach a");
    })
    .await
}
