//! Issue 17 parts A and C through the **official Copilot Rust SDK** (`github-copilot-sdk`,
//! unmodified, in process): the typed `session.rpc()` / `client.rpc()` calls where the SDK
//! has them, raw `Client::call` otherwise (`session.destroy`, `user.settings.reload`, and
//! answers the typed structs cannot hold, e.g. `{"agent":null}`). Shapes and events are the
//! real runtime's (1.0.85, /work/spec17.md).

use crate::support::sdk_scenarios;

use crate::support::connect;
use agentwire_tokio::agentwire::agent::Scenario;
use agentwire_tokio::agentwire::host::HostConfig;
use agentwire_tokio::Server;
use github_copilot_sdk::rpc::*;
use github_copilot_sdk::types::{CustomAgentConfig, ProviderConfig, SessionConfig};
use github_copilot_sdk::Client;
use sdk_scenarios::{create_session, new_session_id, turn, within, Recorder, WEATHER_PROMPT};
use serde_json::{json, Value};

fn server() -> Server {
    Server::new(HostConfig::default())
}

/// Persisted events of `id` as `session.getMessages` returns them.
async fn messages(client: &Client, id: &str) -> Vec<Value> {
    let v = within(
        "session.getMessages",
        client.call("session.getMessages", Some(json!({"sessionId": id}))),
    )
    .await
    .expect("session.getMessages");
    v["events"].as_array().cloned().unwrap_or_default()
}

fn types_of(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

/// The error a raw call gets: (code, message).
async fn rpc_error(client: &Client, method: &str, params: Value) -> (Option<i32>, String) {
    let err = within(method, client.call(method, Some(params)))
        .await
        .expect_err(method);
    (err.rpc_code(), err.to_string())
}

/// Asserts a raw call failed with the runtime's "Session not found" (the SDK turns that
/// message into its own `SessionErrorKind::NotFound`).
async fn assert_session_not_found(client: &Client, method: &str, params: Value) {
    let err = within(method, client.call(method, Some(params)))
        .await
        .expect_err(method);
    assert!(
        matches!(
            err.kind(),
            github_copilot_sdk::ErrorKind::Session(github_copilot_sdk::SessionErrorKind::NotFound(
                _
            ))
        ),
        "{method}: {err:?}"
    );
}

#[tokio::test]
async fn destroy_answers_like_detach_and_writes_shutdown_after_a_turn() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let c = create_session(&client, &id, false).await;
        turn(&c.session, "hello").await;
        let result = within(
            "session.destroy",
            client.call(
                "session.destroy",
                Some(json!({"sessionId": id.to_string()})),
            ),
        )
        .await
        .expect("session.destroy is answered");
        assert_eq!(result, json!({"success": true}));
        // The destroying client let go of the session: its calls on it fail as for an
        // unloaded session; another client still reads it.
        assert_session_not_found(
            &client,
            "session.getMessages",
            json!({"sessionId": id.to_string()}),
        )
        .await;
        let other = connect(&server).await;
        let events = messages(&other, &id).await;
        assert_eq!(types_of(&events).last(), Some(&"session.shutdown"));
        assert_eq!(
            events.last().unwrap()["data"]["shutdownType"],
            json!("routine")
        );
        assert_session_not_found(
            &client,
            "session.destroy",
            json!({"sessionId": "no-such-session"}),
        )
        .await;
    })
    .await
}

#[tokio::test]
async fn shutdown_writes_one_shutdown_event_and_the_session_stays_usable() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        turn(&c.session, "hello").await;
        within(
            "session.shutdown",
            c.session.rpc().shutdown(ShutdownRequest::default()),
        )
        .await
        .expect("session.shutdown");
        let ev = c.events.wait_for("session.shutdown").await;
        assert_eq!(ev.data["shutdownType"], json!("routine"));
        assert!(ev.data["sessionStartTime"].is_u64());
        // Still loaded and usable; the last detach writes no second shutdown.
        within(
            "session.log",
            c.session.rpc().log(LogRequest {
                message: "after shutdown".into(),
                ..Default::default()
            }),
        )
        .await
        .expect("session.log after shutdown");
        within("disconnect", c.session.disconnect())
            .await
            .expect("disconnect");
        let events = messages(&client, &id).await;
        let shutdowns = types_of(&events)
            .iter()
            .filter(|t| **t == "session.shutdown")
            .count();
        assert_eq!(shutdowns, 1, "{:?}", types_of(&events));
    })
    .await
}

#[tokio::test]
async fn log_emits_info_warning_and_ephemeral_error_events() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        let rpc = c.session.rpc();
        let logged = within(
            "session.log",
            rpc.log(LogRequest {
                message: "hello log".into(),
                ..Default::default()
            }),
        )
        .await
        .expect("session.log");
        let info = c.events.wait_for("session.info").await;
        assert_eq!(info.id, logged.event_id, "eventId names the event");
        assert_eq!(
            info.data,
            json!({"infoType": "notification", "message": "hello log"})
        );
        within(
            "session.log warning",
            rpc.log(LogRequest {
                message: "careful".into(),
                level: Some(SessionLogLevel::Warning),
                r#type: Some("custom".into()),
                url: Some("https://example.com".into()),
                ..Default::default()
            }),
        )
        .await
        .expect("session.log warning");
        let warning = c.events.wait_for("session.warning").await;
        assert_eq!(warning.data["warningType"], json!("custom"));
        assert_eq!(warning.data["url"], json!("https://example.com"));
        within(
            "session.log error",
            rpc.log(LogRequest {
                message: "eph".into(),
                level: Some(SessionLogLevel::Error),
                ephemeral: Some(true),
                ..Default::default()
            }),
        )
        .await
        .expect("session.log error");
        let error = c.events.wait_for("session.error").await;
        assert_eq!(error.ephemeral, Some(true));
        assert_eq!(error.data["errorType"], json!("notification"));
        let persisted = types_of(&messages(&client, &id).await)
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        assert!(persisted.contains(&"session.info".to_owned()));
        assert!(persisted.contains(&"session.warning".to_owned()));
        assert!(
            !persisted.contains(&"session.error".to_owned()),
            "an ephemeral log is not persisted"
        );
    })
    .await
}

#[tokio::test]
async fn interest_handles_count_up_and_release_is_idempotent() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let c = create_session(&client, &id, false).await;
        let log = c.session.rpc().event_log();
        let register = |t: &str| RegisterEventInterestParams {
            event_type: t.into(),
        };
        let first = within(
            "registerInterest",
            log.register_interest(register("mcp.oauth_required")),
        )
        .await
        .expect("registerInterest");
        let second = within(
            "registerInterest",
            log.register_interest(register("mcp.oauth_required")),
        )
        .await
        .expect("registerInterest");
        assert_eq!(first.handle, "interest-1");
        assert_eq!(second.handle, "interest-2");
        for handle in ["interest-1", "interest-1", "bogus"] {
            let released = within(
                "releaseInterest",
                log.release_interest(ReleaseEventInterestParams {
                    handle: handle.into(),
                }),
            )
            .await
            .expect("releaseInterest");
            assert!(released.success, "releasing {handle} succeeds");
        }
        assert_session_not_found(
            &client,
            "session.eventLog.registerInterest",
            json!({"sessionId": "nope", "eventType": "x"}),
        )
        .await;
    })
    .await
}

#[tokio::test]
async fn elicitation_interest_opens_the_gate_and_release_closes_it() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        let ask = json!({"sessionId": id.to_string(), "message": "Name?",
                         "requestedSchema": {"type": "object", "properties": {}}});
        // No client declared requestElicitation and nobody registered interest.
        let (code, message) = rpc_error(&client, "session.ui.elicitation", ask.clone()).await;
        assert_eq!(code, Some(-32603));
        assert!(
            message.contains("no attached client handles elicitation"),
            "{message}"
        );
        let handle = within(
            "registerInterest",
            c.session
                .rpc()
                .event_log()
                .register_interest(RegisterEventInterestParams {
                    event_type: "elicitation.requested".into(),
                }),
        )
        .await
        .expect("registerInterest")
        .handle;
        let pending = {
            let client = client.clone();
            let ask = ask.clone();
            tokio::spawn(async move { client.call("session.ui.elicitation", Some(ask)).await })
        };
        let requested = c.events.wait_for("elicitation.requested").await;
        let request_id = requested.data["requestId"].as_str().unwrap().to_owned();
        let answered = within(
            "handlePendingElicitation",
            client.call(
                "session.ui.handlePendingElicitation",
                Some(json!({"sessionId": id.to_string(), "requestId": request_id,
                            "result": {"action": "accept", "content": {"name": "Ada"}}})),
            ),
        )
        .await
        .expect("handlePendingElicitation");
        assert_eq!(answered, json!({"success": true}));
        let result = within("elicitation answer", pending)
            .await
            .expect("task")
            .expect("session.ui.elicitation is answered");
        assert_eq!(result["action"], json!("accept"));
        within(
            "releaseInterest",
            c.session
                .rpc()
                .event_log()
                .release_interest(ReleaseEventInterestParams { handle }),
        )
        .await
        .expect("releaseInterest");
        let (code, _) = rpc_error(&client, "session.ui.elicitation", ask).await;
        assert_eq!(code, Some(-32603), "the gate closed again");
    })
    .await
}

#[tokio::test]
async fn name_mode_and_processing_state() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        let rpc = c.session.rpc();
        let name = within("name.get", rpc.name().get())
            .await
            .expect("name.get");
        assert_eq!(name.name, None);
        within(
            "name.set",
            rpc.name().set(NameSetRequest {
                name: "My Session".into(),
            }),
        )
        .await
        .expect("name.set");
        let changed = c.events.wait_for("session.title_changed").await;
        assert_eq!(changed.data, json!({"title": "My Session"}));
        assert_eq!(changed.ephemeral, Some(true));
        let name = within("name.get", rpc.name().get())
            .await
            .expect("name.get");
        assert_eq!(name.name.as_deref(), Some("My Session"));
        let (code, message) = rpc_error(
            &client,
            "session.name.set",
            json!({"sessionId": id.to_string(), "name": "  "}),
        )
        .await;
        assert_eq!(code, Some(-32603));
        assert!(message.contains(
            "Request session.name.set failed with message: Session name cannot be empty"
        ));

        let mode = within("mode.get", rpc.mode().get())
            .await
            .expect("mode.get");
        assert_eq!(mode, SessionMode::Interactive);
        let set = within(
            "mode.set",
            rpc.mode().set(ModeSetRequest {
                mode: SessionMode::Plan,
                ..Default::default()
            }),
        )
        .await
        .expect("mode.set");
        assert!(!set.model_changed);
        let ev = c.events.wait_for("session.mode_changed").await;
        assert_eq!(
            ev.data,
            json!({"previousMode": "interactive", "newMode": "plan"})
        );
        let mode = within("mode.get", rpc.mode().get())
            .await
            .expect("mode.get");
        assert_eq!(mode, SessionMode::Plan);

        let processing = within("isProcessing", rpc.metadata().is_processing())
            .await
            .expect("isProcessing");
        assert!(!processing.processing);
        within("suspend", rpc.suspend()).await.expect("suspend");
        let metrics = within("usage.getMetrics", rpc.usage().get_metrics())
            .await
            .expect("usage.getMetrics");
        assert_eq!(metrics.total_user_requests, 0);
        turn(&c.session, "hello").await;
        let metrics = within("usage.getMetrics", rpc.usage().get_metrics())
            .await
            .expect("usage.getMetrics");
        assert_eq!(metrics.total_user_requests, 1);
    })
    .await
}

#[tokio::test]
async fn model_switch_reports_and_emits_model_change() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        let model = c.session.rpc().model();
        let current = within("getCurrent", model.get_current())
            .await
            .expect("getCurrent");
        assert_eq!(current.model_id.as_deref(), Some("fake-model"));
        let list = within("model.list", model.list())
            .await
            .expect("model.list");
        assert!(!list.list.is_empty(), "the server's models are listed");
        let switched = within(
            "switchTo",
            model.switch_to(ModelSwitchToRequest {
                model_id: "other-model".into(),
                ..Default::default()
            }),
        )
        .await
        .expect("switchTo");
        assert_eq!(switched.model_id.as_deref(), Some("other-model"));
        assert_eq!(switched.status.as_deref(), Some("applied"));
        let ev = c.events.wait_for("session.model_change").await;
        assert_eq!(ev.data["previousModel"], json!("fake-model"));
        assert_eq!(ev.data["newModel"], json!("other-model"));
        assert_eq!(ev.data["source"], json!("sdk"));
        let effort = within(
            "setReasoningEffort",
            model.set_reasoning_effort(ModelSetReasoningEffortRequest {
                reasoning_effort: "high".into(),
            }),
        )
        .await
        .expect("setReasoningEffort");
        assert_eq!(effort.reasoning_effort, "high");
        let current = within("getCurrent", model.get_current())
            .await
            .expect("getCurrent");
        assert_eq!(current.model_id.as_deref(), Some("other-model"));
        assert_eq!(current.reasoning_effort.as_deref(), Some("high"));
        // options.update changes the model without an event, and accepts unknown keys.
        let updated = within(
            "options.update",
            client.call(
                "session.options.update",
                Some(json!({"sessionId": id.to_string(), "model": "m2", "noSuchOption": 1})),
            ),
        )
        .await
        .expect("options.update");
        assert_eq!(updated["success"], json!(true));
        let current = within("getCurrent", model.get_current())
            .await
            .expect("getCurrent");
        assert_eq!(current.model_id.as_deref(), Some("m2"));
    })
    .await
}

#[tokio::test]
async fn approve_all_runs_tools_without_permission_events() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        let permissions = c.session.rpc().permissions();
        let ok = within(
            "setApproveAll",
            permissions.set_approve_all(PermissionsSetApproveAllRequest {
                enabled: true,
                ..Default::default()
            }),
        )
        .await
        .expect("setApproveAll");
        assert!(ok.success);
        let mode = within("getMode", permissions.get_mode())
            .await
            .expect("getMode");
        assert_eq!(
            mode.mode,
            PermissionMode::Manual,
            "approve-all is not a mode"
        );
        turn(&c.session, WEATHER_PROMPT).await;
        let events = c.events.turn().await;
        let types = sdk_scenarios::types(&events);
        assert!(types.contains(&"external_tool.requested"), "{types:?}");
        assert!(
            !types.iter().any(|t| t.starts_with("permission.")),
            "no permission events under approve-all: {types:?}"
        );
        assert!(
            c.permissions.lock().unwrap().is_empty(),
            "the handler was not asked"
        );
        assert_eq!(c.tool_calls.lock().unwrap().len(), 1, "the tool ran");

        within(
            "setApproveAll off",
            permissions.set_approve_all(PermissionsSetApproveAllRequest {
                enabled: false,
                ..Default::default()
            }),
        )
        .await
        .expect("setApproveAll off");
        turn(&c.session, WEATHER_PROMPT).await;
        let types: Vec<String> = sdk_scenarios::types(&c.events.turn().await)
            .into_iter()
            .map(str::to_owned)
            .collect();
        assert!(
            types.contains(&"permission.requested".to_owned()),
            "{types:?}"
        );
        assert_eq!(c.permissions.lock().unwrap().len(), 1, "asked again");

        let set = within(
            "setMode allow-all",
            permissions.set_mode(PermissionsSetModeRequest {
                mode: PermissionMode::AllowAll,
                ..Default::default()
            }),
        )
        .await
        .expect("setMode");
        assert!(set.success);
        assert_eq!(set.mode, PermissionMode::AllowAll);
        let ev = c.events.wait_for("session.permissions_changed").await;
        assert_eq!(
            ev.data,
            json!({"previousMode": "manual", "mode": "allow-all"})
        );
        turn(&c.session, WEATHER_PROMPT).await;
        let types = sdk_scenarios::types(&c.events.turn().await)
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        assert!(
            !types.iter().any(|t| t.starts_with("permission.")),
            "{types:?}"
        );
        assert_eq!(
            c.permissions.lock().unwrap().len(),
            1,
            "not asked under allow-all"
        );
    })
    .await
}

#[tokio::test]
async fn yolo_config_approves_every_session() {
    sdk_scenarios::bounded(async {
        let server = Server::new(HostConfig::default().with_approve_all_permissions(true));
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        turn(&c.session, WEATHER_PROMPT).await;
        let types = sdk_scenarios::types(&c.events.turn().await)
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        assert!(
            !types.iter().any(|t| t.starts_with("permission.")),
            "{types:?}"
        );
        assert!(c.permissions.lock().unwrap().is_empty());
        assert_eq!(c.tool_calls.lock().unwrap().len(), 1);
    })
    .await
}

#[tokio::test]
async fn approve_all_covers_builtin_tool_prompts() {
    sdk_scenarios::bounded(async {
        let scenario = Scenario::from_json(
            r#"{"rules":[{"match":"run","steps":[{"shell":"ls -la","result":"total 0"},{"say":"done"}]}]}"#,
        )
        .expect("scenario");
        let server = Server::new(HostConfig::with_scenario(scenario).with_approve_all_permissions(true));
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        turn(&c.session, "run it").await;
        let events = c.events.turn().await;
        let types = sdk_scenarios::types(&events);
        assert!(types.contains(&"tool.execution_complete"), "{types:?}");
        assert!(!types.iter().any(|t| t.starts_with("permission.")), "{types:?}");
        let done = events
            .iter()
            .find(|e| e.event_type == "tool.execution_complete")
            .unwrap();
        assert_eq!(done.data["success"], json!(true), "{:?}", done.data);
    })
    .await
}

#[tokio::test]
async fn plan_and_workspace_files() {
    sdk_scenarios::bounded(async {
        let server = Server::new(HostConfig::default().with_workspace_root(Some("/state".into())));
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        let plan = c.session.rpc().plan();
        let read = within("plan.read", plan.read()).await.expect("plan.read");
        assert!(!read.exists);
        assert_eq!(read.content, None);
        assert_eq!(
            read.path,
            Some(format!("/state/session-state/{id}/plan.md"))
        );
        for (content, operation) in [("# Plan\n- step", "create"), ("# Plan\n- two", "update")] {
            within(
                "plan.update",
                plan.update(PlanUpdateRequest {
                    content: content.into(),
                }),
            )
            .await
            .expect("plan.update");
            let ev = c.events.wait_for("session.plan_changed").await;
            assert_eq!(ev.data, json!({"operation": operation}));
        }
        let read = within("plan.read", plan.read()).await.expect("plan.read");
        assert!(read.exists);
        assert_eq!(read.content.as_deref(), Some("# Plan\n- two"));
        within("plan.delete", plan.delete())
            .await
            .expect("plan.delete");
        let ev = c.events.wait_for("session.plan_changed").await;
        assert_eq!(ev.data, json!({"operation": "delete"}));
        assert!(!within("plan.read", plan.read()).await.expect("read").exists);

        let files = c.session.rpc().workspaces();
        let listed = within("listFiles", files.list_files())
            .await
            .expect("listFiles");
        assert!(listed.files.is_empty());
        for operation in ["create", "update"] {
            within(
                "createFile",
                files.create_file(WorkspacesCreateFileRequest {
                    path: "notes/a.txt".into(),
                    content: "A".into(),
                }),
            )
            .await
            .expect("createFile");
            let ev = c.events.wait_for("session.workspace_file_changed").await;
            assert_eq!(
                ev.data,
                json!({"path": "notes/a.txt", "operation": operation})
            );
        }
        let listed = within("listFiles", files.list_files())
            .await
            .expect("listFiles");
        assert_eq!(listed.files, vec!["notes/a.txt".to_owned()]);
        let (code, _) = rpc_error(
            &client,
            "session.workspaces.createFile",
            json!({"sessionId": id.to_string(), "path": "../escape", "content": "x"}),
        )
        .await;
        assert_eq!(code, Some(-32603), "paths may not leave the workspace");
    })
    .await
}

#[tokio::test]
async fn truncate_removes_the_event_and_everything_after_it() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        turn(&c.session, "first").await;
        let before = messages(&client, &id).await;
        let user = before
            .iter()
            .position(|e| e["type"] == "user.message")
            .expect("a user.message");
        let event_id = before[user]["id"].as_str().unwrap().to_owned();
        let result = within(
            "history.truncate",
            c.session.rpc().history().truncate(HistoryTruncateRequest {
                event_id: event_id.clone(),
            }),
        )
        .await
        .expect("history.truncate");
        assert_eq!(result.events_removed as usize, before.len() - user);
        let rewind = c.events.wait_for("session.snapshot_rewind").await;
        assert_eq!(rewind.data["upToEventId"], json!(event_id));
        let after = messages(&client, &id).await;
        assert_eq!(after.len(), user, "only the events before it remain");
        let (code, message) = rpc_error(
            &client,
            "session.history.truncate",
            json!({"sessionId": id.to_string(), "eventId": "missing-event"}),
        )
        .await;
        assert_eq!(code, Some(-32603));
        assert!(message.contains("Event missing-event not found in session"));
        // The log continues from the last kept event.
        turn(&c.session, "second").await;
        let again = messages(&client, &id).await;
        assert_eq!(again[user]["parentId"], before[user - 1]["id"]);
    })
    .await
}

#[tokio::test]
async fn fork_copies_history_into_a_new_resumable_session() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        turn(&c.session, "first prompt").await;
        turn(&c.session, "second prompt").await;
        let source = messages(&client, &id).await;
        let fork = within(
            "sessions.fork",
            client.rpc().sessions().fork(SessionsForkRequest {
                session_id: id.clone(),
                ..Default::default()
            }),
        )
        .await
        .expect("sessions.fork");
        assert_ne!(fork.session_id, id);
        assert_eq!(fork.name.as_deref(), Some("first prompt (fork)"));
        let info = c.events.wait_for("session.info").await;
        assert_eq!(info.data["infoType"], json!("fork"));
        assert!(info.data["message"]
            .as_str()
            .unwrap()
            .contains(&fork.session_id.to_string()));
        let copied = messages(&client, &fork.session_id).await;
        assert_eq!(copied.len(), source.len(), "the whole history is copied");
        let second_user = source
            .iter()
            .rposition(|e| e["type"] == "user.message")
            .unwrap();
        let partial = within(
            "sessions.fork toEventId",
            client.rpc().sessions().fork(SessionsForkRequest {
                session_id: id.clone(),
                to_event_id: source[second_user]["id"].as_str().map(str::to_owned),
                name: Some("fork-two".into()),
            }),
        )
        .await
        .expect("sessions.fork toEventId");
        assert_eq!(partial.name.as_deref(), Some("fork-two"));
        let copied = messages(&client, &partial.session_id).await;
        assert_eq!(copied.len(), second_user, "the boundary event is excluded");
        let resumed = within(
            "resume fork",
            client.resume_session(github_copilot_sdk::types::ResumeSessionConfig::new(
                partial.session_id.clone(),
            )),
        )
        .await
        .expect("the fork resumes");
        turn(&resumed, "in the fork").await;
        let (code, message) = rpc_error(
            &client,
            "sessions.fork",
            json!({"sessionId": id.to_string(), "toEventId": "nope"}),
        )
        .await;
        assert_eq!(code, Some(-32603));
        assert!(message.contains("Event nope not found in session"));
    })
    .await
}

#[tokio::test]
async fn custom_agents_list_select_and_deselect() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let config = SessionConfig::default()
            .with_session_id(id.clone())
            .with_custom_agents([CustomAgentConfig::new("test-agent", "You test.")
                .with_display_name("Test Agent")
                .with_description("A test agent")]);
        let prepared = client.prepare_session(config).expect("prepare");
        let mut events = Recorder::new(prepared.subscribe());
        let session = within("create", prepared.start()).await.expect("create");
        let agent = session.rpc().agent();
        let list = within("agent.list", agent.list())
            .await
            .expect("agent.list");
        assert_eq!(list.agents.len(), 1);
        assert_eq!(list.agents[0].name, "test-agent");
        assert_eq!(list.agents[0].id, "test-agent");
        assert_eq!(list.agents[0].display_name, "Test Agent");
        assert_eq!(list.agents[0].description, "A test agent");
        let none = within(
            "agent.getCurrent",
            client.call(
                "session.agent.getCurrent",
                Some(json!({"sessionId": id.to_string()})),
            ),
        )
        .await
        .expect("agent.getCurrent");
        assert_eq!(none, json!({"agent": null}));
        let selected = within(
            "agent.select",
            agent.select(AgentSelectRequest {
                name: "test-agent".into(),
            }),
        )
        .await
        .expect("agent.select");
        assert_eq!(selected.agent.display_name, "Test Agent");
        let ev = events.wait_for("subagent.selected").await;
        assert_eq!(ev.data["agentName"], json!("test-agent"));
        assert_eq!(ev.data["agentDisplayName"], json!("Test Agent"));
        let current = within("agent.getCurrent", agent.get_current())
            .await
            .expect("agent.getCurrent");
        assert_eq!(current.agent.name, "test-agent");
        within("agent.deselect", agent.deselect())
            .await
            .expect("deselect");
        events.wait_for("subagent.deselected").await;
        let (code, message) = rpc_error(
            &client,
            "session.agent.select",
            json!({"sessionId": id.to_string(), "name": "nope"}),
        )
        .await;
        assert_eq!(code, Some(-32603));
        assert!(message.contains("Custom agent 'nope' not found"));
    })
    .await
}

#[tokio::test]
async fn provider_endpoint_is_the_sessions_byok_provider() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let config = SessionConfig::default()
            .with_session_id(id.clone())
            .with_model("fake-model")
            .with_provider(
                ProviderConfig::new("http://127.0.0.1:9/v1")
                    .with_provider_type("openai")
                    .with_api_key("sk-fake"),
            );
        let session = within("create", client.create_session(config))
            .await
            .expect("create");
        let endpoint = within("getEndpoint", session.rpc().provider().get_endpoint())
            .await
            .expect("getEndpoint");
        assert_eq!(endpoint.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(endpoint.api_key.as_deref(), Some("sk-fake"));
        let plain = create_session(&client, &new_session_id(), false).await;
        let err = within("getEndpoint", plain.session.rpc().provider().get_endpoint())
            .await
            .expect_err("no provider");
        assert_eq!(err.rpc_code(), Some(-32603));
    })
    .await
}

#[tokio::test]
async fn account_and_settings_of_a_server_without_a_github_account_or_data_directory() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        let account = client.rpc().account();
        let auth = within("getCurrentAuth", account.get_current_auth())
            .await
            .expect("getCurrentAuth");
        assert!(auth.auth_info.is_none());
        let users = within(
            "getAllUsers",
            client.call("account.getAllUsers", Some(json!({}))),
        )
        .await
        .expect("getAllUsers");
        assert_eq!(users, json!([]));
        let status = within(
            "gitHubAuth.getStatus",
            c.session.rpc().git_hub_auth().get_status(),
        )
        .await
        .expect("getStatus");
        assert!(!status.is_authenticated);
        // Without a data directory the settings are kept in memory: the known keys at their
        // defaults, and what a client sets.
        let settings = within("user.settings.get", client.rpc().user().settings().get())
            .await
            .expect("user.settings.get");
        let stream = &settings.settings["stream"];
        assert_eq!(
            (stream.value.clone(), stream.is_default),
            (json!(true), true)
        );
        within(
            "user.settings.set",
            client.call(
                "user.settings.set",
                Some(json!({"settings": {"stream": false}})),
            ),
        )
        .await
        .expect("user.settings.set");
        let settings = within("user.settings.get", client.rpc().user().settings().get())
            .await
            .expect("user.settings.get");
        let stream = &settings.settings["stream"];
        assert_eq!(
            (stream.value.clone(), stream.is_default),
            (json!(false), false)
        );
        let reloaded = within(
            "user.settings.reload",
            client.call("user.settings.reload", Some(json!({}))),
        )
        .await
        .expect("user.settings.reload");
        assert_eq!(reloaded, Value::Null);
        let tools = within(
            "tools.list",
            client.rpc().tools().list(ToolsListRequest::default()),
        )
        .await
        .expect("tools.list");
        let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["view", "create", "bash"]);

        // Secrets are masked in every event from now on.
        let ok = within(
            "secrets.addFilterValues",
            client
                .rpc()
                .secrets()
                .add_filter_values(SecretsAddFilterValuesRequest {
                    values: vec!["s3cr3t-value".into()],
                }),
        )
        .await
        .expect("secrets.addFilterValues");
        assert!(ok.ok);
        within(
            "session.log",
            c.session.rpc().log(LogRequest {
                message: "secret is s3cr3t-value here".into(),
                ..Default::default()
            }),
        )
        .await
        .expect("session.log");
        let info = c.events.wait_for("session.info").await;
        assert_eq!(info.data["message"], json!("secret is ****** here"));
        let stored = serde_json::to_string(&messages(&client, &id).await).unwrap();
        assert!(!stored.contains("s3cr3t-value"), "the log holds no secret");
        // A prompt with the secret: masked in its events and in the session's summary.
        turn(&c.session, "my token is s3cr3t-value").await;
        let user = c.events.wait_for("user.message").await;
        assert_eq!(user.data["content"], json!("my token is ******"));
        let listed = within("session.list", client.list_sessions(None))
            .await
            .expect("session.list");
        let summary = listed
            .iter()
            .find(|s| s.session_id == id)
            .and_then(|s| s.summary.clone())
            .unwrap_or_default();
        assert!(!summary.contains("s3cr3t-value"), "summary: {summary}");
    })
    .await
}

#[tokio::test]
async fn hosted_product_features_are_not_available_here() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let c = create_session(&client, &id, false).await;
        for (method, feature) in agentwire::copilot::UNSUPPORTED_METHODS {
            let (code, message) = rpc_error(
                &client,
                method,
                json!({"sessionId": id.to_string()}),
            )
            .await;
            assert_eq!(code, Some(-32603), "{method}");
            assert!(
                message.contains(&format!(
                    "Request {method} failed with message: {feature} is not available on this server"
                )),
                "{method}: {message}"
            );
        }
        // What the runtime answers when there is nothing: no tasks, no direct handler.
        let session = &c.session;
        let tasks = within("tasks.list", session.rpc().tasks().list())
            .await
            .expect("tasks.list");
        assert!(tasks.tasks.is_empty());
        within("tasks.waitForPending", session.rpc().tasks().wait_for_pending())
            .await
            .expect("tasks.waitForPending");
        let unregistered = within(
            "unregisterDirectAutoModeSwitchHandler",
            session.rpc().ui().unregister_direct_auto_mode_switch_handler(
                UIUnregisterDirectAutoModeSwitchHandlerRequest {
                    handle: "x".into(),
                },
            ),
        )
        .await
        .expect("unregisterDirectAutoModeSwitchHandler");
        assert!(!unregistered.unregistered);
        let err = within("plugins.list", client.rpc().plugins().list())
            .await
            .expect_err("plugins.list");
        assert_eq!(err.rpc_code(), Some(-32603));
        let (code, _) = rpc_error(&client, "no.such.method", json!({})).await;
        assert_eq!(code, Some(-32601), "unknown methods are still -32601");
    })
    .await
}

/// Every name in the method table is answered (never `-32601`), and docs/methods.md lists
/// exactly the table plus the not-available methods.
#[tokio::test]
async fn method_table_matches_dispatch_and_docs() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let _c = create_session(&client, &id, false).await;
        let skip = [
            "runtime.shutdown",
            "session.sendAndWait",
            "session.ui.elicitation",
            "session.commands.execute",
            "session.canvas.open",
            "session.canvas.close",
            "session.canvas.action.invoke",
            "session.delete",
            "session.detach",
            "session.destroy",
        ];
        for method in agentwire::copilot::methods() {
            if skip.contains(&method) {
                continue;
            }
            let outcome = within(
                method,
                client.call(method, Some(json!({"sessionId": "nope"}))),
            )
            .await;
            if let Err(e) = outcome {
                assert_ne!(
                    e.rpc_code(),
                    Some(-32601),
                    "{method} is in the method table but unhandled"
                );
            }
        }
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/methods.md"))
            .expect("docs/methods.md");
        let listed: std::collections::BTreeSet<&str> = docs
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        let mut expected: std::collections::BTreeSet<&str> =
            agentwire::copilot::methods().collect();
        expected.extend(
            agentwire::copilot::UNSUPPORTED_METHODS
                .iter()
                .map(|(m, _)| *m),
        );
        assert_eq!(
            listed, expected,
            "docs/methods.md lists exactly the answered methods"
        );
    })
    .await
}

/// The built-in slash commands: listed next to the clients' (each group only when asked),
/// `/help` lists them, `/compact` compacts the history, an unknown name is refused.
#[tokio::test]
async fn builtin_slash_commands_are_listed_and_invoked() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let mut c = create_session(&client, &id, false).await;
        turn(&c.session, "hello").await;
        let call = |method: &'static str, params: Value| {
            let client = &client;
            async move {
                within(method, client.call(method, Some(params)))
                    .await
                    .expect(method)
            }
        };
        let sid = id.to_string();
        let listed = call(
            "session.commands.list",
            json!({"sessionId": sid, "includeBuiltins": true, "includeClientCommands": false}),
        )
        .await;
        let names: Vec<&str> = listed["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "builtin")
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, ["help", "compact"]);
        let without = call(
            "session.commands.list",
            json!({"sessionId": sid, "includeBuiltins": false}),
        )
        .await;
        assert!(!without["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["kind"] == "builtin"));
        let help = call(
            "session.commands.invoke",
            json!({"sessionId": sid, "name": "/HELP"}),
        )
        .await;
        assert_eq!(help["kind"], "text");
        assert!(
            help["text"].as_str().unwrap().contains("/compact"),
            "{help}"
        );
        let compact = call(
            "session.commands.invoke",
            json!({"sessionId": sid, "name": "compact"}),
        )
        .await;
        assert_eq!(compact["kind"], "completed");
        let done = c.events.wait_for("session.compaction_complete").await;
        assert_eq!(done.data["success"], true);
        let (_, message) = rpc_error(
            &client,
            "session.commands.invoke",
            json!({"sessionId": sid, "name": "nope"}),
        )
        .await;
        assert!(message.contains("Unknown command: /nope"), "{message}");
    })
    .await
}

/// Client-owned tasks with the SDK's typed calls: the SDK declares the `client` task kind,
/// registers a task it owns, reports progress and completion in sequence (a repeat is a
/// duplicate), sees it in the session's task list, and a second SDK client cannot update it.
#[tokio::test]
async fn an_sdk_client_registers_and_updates_a_task_it_owns() {
    sdk_scenarios::bounded(async {
        let server = server();
        let client = connect(&server).await;
        let id = new_session_id();
        let c = create_session(&client, &id, false).await;
        let tasks = c.session.rpc().tasks();
        let registered = tasks
            .register(TasksRegisterRequest {
                cancellable: false,
                client_task_id: "index-1".into(),
                description: "Indexing".into(),
                display_name: Some("Indexer".into()),
                expected_sequence: None,
                r#type: TaskClientType::Client,
            })
            .await
            .expect("register");
        assert!(registered.created && !registered.reclaimed);
        let task_id = registered.task.id.clone();
        assert_eq!(registered.task.sequence, 0);
        assert!(!registered.task.can_cancel);

        let progress = TaskClientUpdate::Progress(TaskClientUpdateProgress {
            kind: TaskClientUpdateProgressKind::Progress,
            message: Some("halfway".into()),
            percentage: Some(50.0),
            phase: None,
            status: None,
        });
        let request = |sequence, update| TasksUpdateRequest {
            id: task_id.clone(),
            sequence,
            update,
        };
        let applied = tasks.update(request(1, progress.clone())).await.unwrap();
        assert!(applied.applied && !applied.duplicate);
        let repeated = tasks.update(request(1, progress)).await.unwrap();
        assert!(!repeated.applied && repeated.duplicate);
        let done = TaskClientUpdate::Completed(TaskClientUpdateCompleted {
            kind: TaskClientUpdateCompletedKind::Completed,
            message: Some("done".into()),
            result: Some(json!({"files": 3})),
        });
        let done = tasks.update(request(2, done)).await.unwrap();
        assert!(done.task.completed_at.is_some());
        assert_eq!(done.task.result, Some(json!({"files": 3})));

        let listed = tasks.list().await.unwrap().tasks;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0]["id"], task_id.as_str());
        assert_eq!(listed[0]["status"], "completed");

        // Another client of the session is not the owner.
        let second = connect(&server).await;
        let resumed = within(
            "session.resume",
            second.resume_session(github_copilot_sdk::types::ResumeSessionConfig::new(
                id.clone(),
            )),
        )
        .await
        .expect("the second client joins");
        let error = resumed
            .rpc()
            .tasks()
            .update(TasksUpdateRequest {
                id: task_id.clone(),
                sequence: 3,
                update: TaskClientUpdate::Cancelled(TaskClientUpdateCancelled {
                    kind: TaskClientUpdateCancelledKind::Cancelled,
                    message: None,
                    reason: None,
                }),
            })
            .await
            .expect_err("not the owner");
        assert!(
            error.to_string().contains("owned by another client"),
            "{error}"
        );
    })
    .await
}
