//! Scenarios about the bridges: permissions, tools on a joined client, elicitation, commands, abort.

use super::*;

/// The permission handler rejects: no `external_tool.requested`, the tool handler never runs,
/// `permission.completed` says `denied-interactively-by-user` with the feedback, and the tool
/// call completes with `success:false, error.code:"denied"`. The turn still ends normally.
pub async fn scenario_permission_denied(client: &Client) {
    let id = new_session_id();
    let mut c = create_session_with(
        client,
        &id,
        Setup {
            reject: Some("not now".into()),
            ..Setup::default()
        },
    )
    .await;
    within(
        "send_and_wait after a rejected permission",
        c.session
            .send_and_wait(MessageOptions::new(WEATHER_PROMPT).with_wait_timeout(TURN)),
    )
    .await
    .expect("the turn completes after a rejected permission");
    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_chain(&events, None);
    assert!(
        c.tool_calls.lock().unwrap().is_empty(),
        "a rejected tool call must not reach the tool handler"
    );
    assert_eq!(c.permissions.lock().unwrap().len(), 1);
    let idx = assert_subsequence(
        &events,
        &[
            "user.message",
            "tool.execution_start",
            "permission.requested",
            "permission.completed",
            "tool.execution_complete",
            "session.idle",
        ],
    );
    assert!(
        !events
            .iter()
            .any(|e| e.event_type == "external_tool.requested"),
        "no external_tool.requested after a rejection: {:?}",
        types(&events)
    );
    let done = &events[idx[3]];
    assert_eq!(done.data["result"]["kind"], "denied-interactively-by-user");
    assert_eq!(done.data["result"]["feedback"], "not now");
    let complete = &events[idx[4]];
    assert_eq!(complete.data["success"], false);
    assert_eq!(complete.data["error"]["code"], "denied");
}

/// Multi-client tool routing: A declares `get_weather` without a handler (declaration-only, so
/// A's SDK ignores the request), B joins with a handler and answers it; the turn A started
/// completes with the tool's result. Then both detach, A deletes the session and **both**
/// connections get the `session.deleted` lifecycle notification.
pub async fn scenario_tool_on_joined_client(a: &Client, b: &Client) {
    let id = new_session_id();
    let mut la = a.subscribe_lifecycle();
    let mut lb = b.subscribe_lifecycle();
    let mut ca = create_session_with(
        a,
        &id,
        Setup {
            tool_handler: false,
            ..Setup::default()
        },
    )
    .await;
    let calls_b = Arc::new(Mutex::new(Vec::new()));
    let prepared = b
        .prepare_resume_session(
            ResumeSessionConfig::new(id.clone()).with_tools([weather_tool(calls_b.clone())]),
        )
        .expect("prepare_resume_session");
    let mut eb = Recorder::new(prepared.subscribe());
    let sb = within("session.resume", prepared.start())
        .await
        .expect("join");
    let reply = turn(&ca.session, WEATHER_PROMPT).await;
    assert_eq!(reply.data["content"], WEATHER_ANSWER);
    let calls = calls_b.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "B's handler ran once: {calls:?}");
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    assert_eq!(
        ca.permissions.lock().unwrap().len(),
        1,
        "A answered the permission"
    );
    let ta = ca.events.turn().await;
    let idx = assert_subsequence(
        &ta,
        &[
            "external_tool.requested",
            "tool.execution_complete",
            "assistant.message",
            "session.idle",
        ],
    );
    assert_eq!(ta[idx[1]].data["success"], true);
    assert_eq!(ta[idx[1]].data["result"]["content"], TOOL_REPLY);
    let tb = eb.turn().await;
    assert!(
        tb.iter().any(|e| e.id == ta[idx[0]].id),
        "B saw the external_tool.requested it answered"
    );

    within("detach b", sb.disconnect()).await.expect("detach b");
    within("detach a", ca.session.disconnect())
        .await
        .expect("detach a");
    within("delete", a.delete_session(&id))
        .await
        .expect("delete");
    wait_lifecycle(&mut la, SessionLifecycleEventType::Deleted, &id).await;
    wait_lifecycle(&mut lb, SessionLifecycleEventType::Deleted, &id).await;
}

/// Elicitation on one client: the session advertises `capabilities.ui.elicitation`, and
/// `session.ui().confirm()` round-trips through `elicitation.requested` → the client's
/// handler → `session.ui.handlePendingElicitation` → `elicitation.completed`.
pub async fn scenario_elicitation(client: &Client) {
    let id = new_session_id();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let prepared = client
        .prepare_session(
            SessionConfig::default()
                .with_session_id(id.clone())
                .with_elicitation_handler(Arc::new(RecordingElicitation {
                    requests: requests.clone(),
                })),
        )
        .expect("prepare_session");
    let mut events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create");
    assert_eq!(
        session.capabilities().ui.and_then(|u| u.elicitation),
        Some(true),
        "a session whose client handles elicitation advertises ui.elicitation"
    );
    let confirmed = within("ui.confirm", session.ui().confirm("Proceed?"))
        .await
        .expect("session.ui.elicitation");
    assert!(confirmed, "the handler accepted with confirmed:true");
    let seen = requests.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "the handler ran once");
    assert_eq!(seen[0].message, "Proceed?");
    let schema = seen[0].requested_schema.clone().expect("requestedSchema");
    assert_eq!(schema["properties"]["confirmed"]["type"], "boolean");
    let requested = events.wait_for("elicitation.requested").await;
    let completed = events.wait_for("elicitation.completed").await;
    for ev in [&requested, &completed] {
        assert_envelope(ev);
        assert_eq!(ev.ephemeral, Some(true), "{} is ephemeral", ev.event_type);
    }
    assert_eq!(str_field(&requested, "message"), Some("Proceed?"));
    assert_eq!(
        str_field(&requested, "requestId"),
        str_field(&completed, "requestId")
    );
    assert_eq!(str_field(&completed, "action"), Some("accept"));
    assert_eq!(completed.data["content"], json!({"confirmed": true}));
    within("detach", session.disconnect())
        .await
        .expect("detach");
}

/// Elicitation across clients: A has no elicitation handler, so its session starts without
/// `ui.elicitation`; when B joins with one, A is told by `capabilities.changed`, and A's
/// `ui().confirm()` is answered by B's handler.
pub async fn scenario_elicitation_via_joined_client(a: &Client, b: &Client) {
    let id = new_session_id();
    let mut ca = create_session(a, &id, false).await;
    assert_ne!(
        ca.session.capabilities().ui.and_then(|u| u.elicitation),
        Some(true),
        "no client can answer elicitation yet"
    );
    let requests = Arc::new(Mutex::new(Vec::new()));
    let sb = within(
        "session.resume",
        b.resume_session(
            ResumeSessionConfig::new(id.clone()).with_elicitation_handler(Arc::new(
                RecordingElicitation {
                    requests: requests.clone(),
                },
            )),
        ),
    )
    .await
    .expect("join with an elicitation handler");
    assert_eq!(
        sb.capabilities().ui.and_then(|u| u.elicitation),
        Some(true),
        "the joining client gets ui.elicitation in its resume result"
    );
    let changed = ca.events.wait_for("capabilities.changed").await;
    assert_envelope(&changed);
    assert_eq!(changed.data["ui"]["elicitation"], true);
    assert_eq!(
        ca.session.capabilities().ui.and_then(|u| u.elicitation),
        Some(true),
        "A's SDK applied capabilities.changed"
    );
    let confirmed = within("ui.confirm via B", ca.session.ui().confirm("Deploy?"))
        .await
        .expect("session.ui.elicitation");
    assert!(confirmed);
    assert_eq!(requests.lock().unwrap().len(), 1, "B's handler answered");
    within("detach b", sb.disconnect()).await.expect("detach b");
    within("detach a", ca.session.disconnect())
        .await
        .expect("detach a");
}

/// Slash commands: a command declared on `session.create` is executed with
/// `session.commands.execute`; the host emits `command.execute`, the SDK runs the handler and
/// answers `handlePendingCommand`; an undeclared command does not succeed.
pub async fn scenario_command(client: &Client) {
    let id = new_session_id();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let prepared = client
        .prepare_session(
            SessionConfig::default()
                .with_session_id(id.clone())
                .with_commands(vec![CommandDefinition::new(
                    "hello",
                    Arc::new(RecordingCommand {
                        calls: calls.clone(),
                    }),
                )
                .with_description("say hi")]),
        )
        .expect("prepare_session");
    let mut events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create");
    let result = within(
        "session.commands.execute",
        session.rpc().commands().execute(ExecuteCommandParams {
            command_name: "hello".into(),
            args: "world".into(),
        }),
    )
    .await
    .expect("session.commands.execute");
    assert_eq!(result.error, None, "the command succeeded");
    let seen = calls.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "the handler ran once");
    assert_eq!(seen[0].command_name, "hello");
    assert_eq!(seen[0].args, "world");
    assert_eq!(seen[0].command, "/hello world");
    assert_eq!(seen[0].session_id, id);
    let exec = events.wait_for("command.execute").await;
    let done = events.wait_for("command.completed").await;
    for ev in [&exec, &done] {
        assert_envelope(ev);
        assert_eq!(ev.ephemeral, Some(true), "{} is ephemeral", ev.event_type);
    }
    assert_eq!(str_field(&exec, "requestId"), str_field(&done, "requestId"));
    assert_eq!(str_field(&exec, "commandName"), Some("hello"));

    let unknown = within(
        "session.commands.execute(unknown)",
        session.rpc().commands().execute(ExecuteCommandParams {
            command_name: "nope".into(),
            args: String::new(),
        }),
    )
    .await;
    if let Ok(r) = unknown {
        assert!(r.error.is_some(), "an undeclared command reports an error");
    }
    assert_eq!(calls.lock().unwrap().len(), 1, "no handler ran for it");
    within("detach", session.disconnect())
        .await
        .expect("detach");
}

/// A scenario whose "slow" prompts sleep for 30 s before answering (for abort tests); other
/// prompts are echoed like the built-in scenario.
pub const SLOW_SCENARIO: &str = r#"{
  "rules": [ { "match": "slow", "steps": [ { "sleep_ms": 30000 }, { "say": "too late" } ] } ],
  "default": [ { "say": "You said: {prompt}" } ]
}"#;

/// `session.abort` during a turn (needs a server playing [`SLOW_SCENARIO`]): the pending
/// `send_and_wait` fails as aborted, the stream carries `abort` (persisted) and
/// `session.idle {aborted:true}`, no answer is produced, and the session takes the next turn.
pub async fn scenario_abort(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let session = &c.session;
    let events = &mut c.events;
    let (result, ()) = tokio::join!(
        within(
            "send_and_wait(slow)",
            session.send_and_wait(MessageOptions::new("slow please").with_wait_timeout(TURN)),
        ),
        async {
            events.wait_for("assistant.turn_start").await;
            within("session.abort", session.abort())
                .await
                .expect("session.abort");
        }
    );
    let err = result.expect_err("an aborted send_and_wait fails");
    assert!(
        err.to_string().contains("aborted"),
        "the SDK reports the abort: {err}"
    );
    let turn_events = c.events.turn().await;
    for ev in &turn_events {
        assert_envelope(ev);
    }
    assert_chain(&turn_events, None);
    let idx = assert_subsequence(&turn_events, &["user.message", "abort", "session.idle"]);
    assert_eq!(turn_events[idx[1]].ephemeral, None, "abort is persisted");
    assert_eq!(turn_events[idx[1]].data["reason"], "user_initiated");
    assert_eq!(turn_events[idx[2]].data["aborted"], true);
    assert!(
        !turn_events
            .iter()
            .any(|e| e.event_type == "assistant.message"),
        "an aborted turn says nothing: {:?}",
        types(&turn_events)
    );
    let reply = turn(&c.session, "after abort").await;
    assert_eq!(reply.data["content"], "You said: after abort");
    c.events.turn().await;
    assert_history_matches(&c.session, &c.events.seen).await;
}
