//! Issue 17, the history and metadata methods through the **official Copilot Rust SDK**
//! (`github-copilot-sdk`, unmodified, in process), with its typed `session.rpc()` calls (so
//! every result also deserialises into the SDK's own types): `session.eventLog.read` /
//! `tail`, `session.history.compact` (against the fake model endpoint: the next request
//! carries the summary instead of the compacted messages), `session.metadata.snapshot`,
//! `session.name.setAuto`, and the truthful empty answers of `discovery`.

use crate::support::fake_model;
use crate::support::sdk_scenarios;

use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use fake_model::{FakeMode, FakeModel};
use github_copilot_sdk::rpc::*;
use std::sync::{Arc, Mutex};

use crate::support::connect;
use github_copilot_sdk::types::{CommandDefinition, MessageOptions, ProviderConfig, SessionConfig};
use github_copilot_sdk::Client;
use sdk_scenarios::{
    create_session, new_session_id, turn, within, Recorder, RecordingCommand, WEATHER_ANSWER,
};
use serde_json::{json, Value};

fn server() -> Server {
    Server::new(HostConfig::default())
}

/// Persisted event ids of `id`, as `session.getMessages` returns them.
async fn message_ids(client: &Client, id: &str) -> Vec<String> {
    let v = within(
        "session.getMessages",
        client.call("session.getMessages", Some(json!({"sessionId": id}))),
    )
    .await
    .expect("session.getMessages");
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

fn read_request(cursor: Option<&str>, max: i64, backward: bool) -> EventLogReadRequest {
    EventLogReadRequest {
        cursor: cursor.map(str::to_owned),
        max: Some(max),
        direction: Some(if backward {
            EventsReadDirection::Backward
        } else {
            EventsReadDirection::Forward
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn event_log_pages_forward_and_backward_from_the_tail() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let c = create_session(&client, &id, false).await;
        turn(&c.session, "hello").await;
        turn(&c.session, "hello again").await;
        let all = message_ids(&client, id.as_ref()).await;
        assert!(all.len() > 6, "{all:?}");
        let log = c.session.rpc().event_log();

        // Forward, three at a time, from the beginning: exactly the persisted events.
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = within(
                "eventLog.read",
                log.read(read_request(cursor.as_deref(), 3, false)),
            )
            .await
            .expect("eventLog.read");
            assert!(matches!(page.cursor_status, EventsCursorStatus::Ok));
            assert!(page.events.len() <= 3);
            seen.extend(page.events.iter().map(|e| e.id.clone()));
            cursor = Some(page.cursor);
            if !page.has_more {
                break;
            }
        }
        assert_eq!(seen, all);

        // The tail cursor: nothing yet; after another turn, exactly the new events.
        let tail = within("eventLog.tail", log.tail())
            .await
            .expect("tail")
            .cursor;
        let page = within(
            "read at tail",
            log.read(read_request(Some(&tail), 50, false)),
        )
        .await
        .expect("read");
        assert!(page.events.is_empty() && !page.has_more);
        turn(&c.session, "third").await;
        let page = within(
            "read after tail",
            log.read(read_request(Some(&tail), 50, false)),
        )
        .await
        .expect("read");
        let now = message_ids(&client, id.as_ref()).await;
        let new: Vec<String> = page.events.iter().map(|e| e.id.clone()).collect();
        assert_eq!(new, now[all.len()..]);
        assert_eq!(page.events[0].event_type, "user.message");

        // Backward: the newest two, in chronological order, then the two before them.
        let newest = within("backward", log.read(read_request(None, 2, true)))
            .await
            .expect("read backward");
        let ids: Vec<&str> = newest.events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [now[now.len() - 2].as_str(), now[now.len() - 1].as_str()]
        );
        assert!(newest.has_more);
        let older = within(
            "backward page 2",
            log.read(read_request(Some(&newest.cursor), 2, true)),
        )
        .await
        .expect("read backward");
        let ids: Vec<&str> = older.events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [now[now.len() - 4].as_str(), now[now.len() - 3].as_str()]
        );

        // A type filter, and a cursor naming no event (expired: back to the beginning).
        let prompts = within(
            "read types",
            log.read(EventLogReadRequest {
                types: Some(json!(["user.message"])),
                ..Default::default()
            }),
        )
        .await
        .expect("read");
        assert_eq!(prompts.events.len(), 3);
        let expired = within(
            "expired",
            log.read(read_request(Some("after:no-such-event"), 1, false)),
        )
        .await
        .expect("read");
        assert!(matches!(expired.cursor_status, EventsCursorStatus::Expired));
        assert_eq!(expired.events[0].id, now[0]);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_replaces_the_earlier_conversation_with_its_summary() {
    sdk_scenarios::bounded(async {
        let fake = FakeModel::start(FakeMode::Text);
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let config = SessionConfig::default()
            .with_session_id(id.clone())
            .with_model("fake-model")
            .with_provider(
                ProviderConfig::new(fake.base_url())
                    .with_provider_type("openai")
                    .with_api_key("sk-compact"),
            );
        let prepared = client.prepare_session(config).expect("prepare_session");
        let mut events = Recorder::new(prepared.subscribe());
        let session = within("session.create", prepared.start())
            .await
            .expect("session.create");
        let fresh = within(
            "history.summarizeForHandoff",
            client.call(
                "session.history.summarizeForHandoff",
                Some(json!({"sessionId": id.to_string()})),
            ),
        )
        .await
        .expect("session.history.summarizeForHandoff");
        assert_eq!(fresh, json!({"summary": ""}), "nothing said yet");
        within(
            "send",
            session.send(MessageOptions::new("first question about Paris")),
        )
        .await
        .expect("send");
        events.turn().await;

        // The handoff summary is the summary a compaction would write, without compacting.
        let handoff = within(
            "history.summarizeForHandoff",
            client.call(
                "session.history.summarizeForHandoff",
                Some(json!({"sessionId": id.to_string()})),
            ),
        )
        .await
        .expect("session.history.summarizeForHandoff");
        let handoff = handoff["summary"].as_str().unwrap_or_default().to_owned();
        assert!(
            handoff.contains("- user: first question about Paris"),
            "{handoff}"
        );

        let result = within(
            "history.compact",
            session
                .rpc()
                .history()
                .compact_with_params(HistoryCompactRequest {
                    custom_instructions: Some("keep the city".to_owned()),
                    token_limit: None,
                    trigger: Some(HistoryCompactRequestTrigger::Manual),
                }),
        )
        .await
        .expect("session.history.compact");
        assert!(result.success);
        assert_eq!(result.messages_removed, 2, "the prompt and the answer");
        let summary = result.summary_content.clone().unwrap_or_default();
        assert!(summary.contains("first question about Paris"), "{summary}");
        assert!(summary.contains(WEATHER_ANSWER), "{summary}");
        let start = events.wait_for("session.compaction_start").await;
        assert_eq!(start.data["trigger"], "manual");
        assert_ne!(start.ephemeral, Some(true));
        let complete = events.wait_for("session.compaction_complete").await;
        assert_eq!(complete.data["success"], true);
        assert_eq!(complete.data["summaryContent"], json!(summary));
        assert_eq!(complete.data["customInstructions"], "keep the city");

        within("send", session.send(MessageOptions::new("second question")))
            .await
            .expect("send");
        events.turn().await;
        let bodies = fake.completion_bodies();
        assert_eq!(bodies.len(), 2);
        let messages = bodies[1]["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "user"], "{messages:?}");
        assert_eq!(messages[1]["content"], json!(summary));
        assert!(messages[2]["content"]
            .as_str()
            .unwrap()
            .contains("second question"));

        // A second compaction summarises only what came after the first.
        let again = within("compact again", session.rpc().history().compact())
            .await
            .expect("compact");
        assert_eq!(again.messages_removed, 2);
        let again = again.summary_content.unwrap_or_default();
        assert!(again.contains("second question"), "{again}");
        assert!(
            again.contains("first question about Paris"),
            "the first summary is carried: {again}"
        );
    })
    .await
}

#[tokio::test]
async fn metadata_snapshot_and_auto_name() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let c = create_session(&client, &id, false).await;
        let rpc = c.session.rpc();
        let applied = within(
            "name.setAuto",
            rpc.name().set_auto(NameSetAutoRequest {
                summary: "  Weather in Paris ".to_owned(),
            }),
        )
        .await
        .expect("setAuto");
        assert!(applied.applied);
        let name = within("name.get", rpc.name().get())
            .await
            .expect("name.get");
        assert_eq!(name.name.as_deref(), Some("Weather in Paris"));
        let blank = within(
            "setAuto blank",
            rpc.name().set_auto(NameSetAutoRequest {
                summary: "   ".to_owned(),
            }),
        )
        .await
        .expect("setAuto");
        assert!(!blank.applied);

        let snapshot = within("metadata.snapshot", rpc.metadata().snapshot())
            .await
            .expect("snapshot");
        assert_eq!(snapshot.session_id, id);
        assert!(!snapshot.is_remote && !snapshot.already_in_use);
        assert!(matches!(
            snapshot.current_mode,
            MetadataSnapshotCurrentMode::Interactive
        ));
        assert_eq!(snapshot.selected_model.as_deref(), Some("fake-model"));
        let raw = within(
            "snapshot raw",
            client.call(
                "session.metadata.snapshot",
                Some(json!({"sessionId": id.to_string()})),
            ),
        )
        .await
        .expect("snapshot");
        assert_eq!(raw["workspace"]["name"], "Weather in Paris");
        assert_eq!(raw["workspace"]["user_named"], false);

        // A user-set name wins over later auto names.
        within(
            "name.set",
            rpc.name().set(NameSetRequest {
                name: "Mine".to_owned(),
            }),
        )
        .await
        .expect("name.set");
        let later = within(
            "setAuto after set",
            rpc.name().set_auto(NameSetAutoRequest {
                summary: "Other".to_owned(),
            }),
        )
        .await
        .expect("setAuto");
        assert!(!later.applied);
        let name = within("name.get", rpc.name().get())
            .await
            .expect("name.get");
        assert_eq!(name.name.as_deref(), Some("Mine"));
    })
    .await
}

#[tokio::test]
async fn discovery_methods_answer_what_the_server_has() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let c = create_session(&client, &id, false).await;
        turn(&c.session, "hello").await;
        let call = |method: &'static str, params: Value| {
            let client = client.clone();
            async move {
                within(method, client.call(method, Some(params)))
                    .await
                    .unwrap_or_else(|e| panic!("{method}: {e}"))
            }
        };
        assert_eq!(
            call("skills.discover", json!({})).await,
            json!({"skills": []})
        );
        assert_eq!(
            call("hooks.discover", json!({})).await,
            json!({"hooks": [], "warnings": [], "errors": []})
        );
        let session = json!({"sessionId": id.to_string()});
        assert_eq!(
            call("session.skills.list", session.clone()).await,
            json!({"skills": []})
        );
        assert_eq!(
            call("session.metadata.activity", session.clone()).await,
            json!({"abortable": false, "hasActiveWork": false})
        );
        assert_eq!(
            call("session.interruptMainTurn", session.clone()).await,
            json!({"interrupted": false})
        );
        let prefix = &id.to_string()[..8];
        assert_eq!(
            call("sessions.findByPrefix", json!({"prefix": prefix})).await,
            json!({"sessionId": id.to_string()})
        );
        let ids = call("sessions.listNonEmptySessionIds", json!({})).await;
        assert_eq!(ids, json!({"sessionIds": [id.to_string()]}));
        assert_eq!(
            call(
                "sessions.checkInUse",
                json!({"sessionIds": [id.to_string()]})
            )
            .await,
            json!({"inUse": []})
        );
        assert_eq!(
            call("session.history.abortManualCompaction", session.clone()).await,
            json!({"aborted": false})
        );
        // The client metadata bag: clear, remove, then set; reserved keys are refused.
        let bag = call(
            "session.metadata.updateClientMetadata",
            json!({"sessionId": id.to_string(), "set": {"app/tab": "3", "app/x": "1"}}),
        )
        .await;
        assert_eq!(bag, json!({"app/tab": "3", "app/x": "1"}));
        let bag = call(
            "session.metadata.updateClientMetadata",
            json!({"sessionId": id.to_string(), "remove": ["app/x"], "set": {"app/y": "2"}}),
        )
        .await;
        assert_eq!(bag, json!({"app/tab": "3", "app/y": "2"}));
        assert_eq!(
            call("session.metadata.getClientMetadata", session.clone()).await,
            bag
        );
        let reserved = within(
            "reserved key",
            client.call(
                "session.metadata.updateClientMetadata",
                Some(json!({"sessionId": id.to_string(), "set": {"copilot/x": "1"}})),
            ),
        )
        .await
        .expect_err("a reserved key");
        assert_eq!(reserved.rpc_code(), Some(-32602));
        // The commands the session's clients declared (the built-ins left out).
        let mut clients_only = session.clone();
        clients_only["includeBuiltins"] = json!(false);
        assert_eq!(
            call("session.commands.list", clients_only).await,
            json!({"commands": []})
        );
        let with_command = new_session_id();
        let prepared = client
            .prepare_session(
                SessionConfig::default()
                    .with_session_id(with_command.clone())
                    .with_commands(vec![CommandDefinition::new(
                        "hello",
                        Arc::new(RecordingCommand {
                            calls: Arc::new(Mutex::new(Vec::new())),
                        }),
                    )
                    .with_description("say hi")]),
            )
            .expect("prepare_session");
        let _s = within("session.create", prepared.start())
            .await
            .expect("session.create");
        let commands = call(
            "session.commands.list",
            json!({"sessionId": with_command.to_string(), "includeBuiltins": false}),
        )
        .await;
        assert_eq!(
            commands,
            json!({"commands": [{"name": "hello", "description": "say hi", "kind": "client",
                                 "allowDuringAgentExecution": false}]})
        );
        // sessions.delete deletes a loaded session.
        let other = new_session_id();
        let _o = create_session(&client, &other, false).await;
        assert_eq!(
            call("sessions.delete", json!({"sessionId": other.to_string()})).await,
            Value::Null
        );
        let listed = call("session.list", json!({})).await;
        assert!(!listed.to_string().contains(&other.to_string()), "{listed}");
        // Unknown sessions get the runtime's "Session not found".
        let err = within(
            "unknown session",
            client.call("session.skills.list", Some(json!({"sessionId": "nope"}))),
        )
        .await
        .expect_err("unknown session");
        assert!(
            err.to_string().to_lowercase().contains("session not found"),
            "{err}"
        );
    })
    .await
}
