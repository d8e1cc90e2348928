//! Scenarios about sessions: handshake, turns, tools, streaming, listing, sharing, detach and delete, send correlation.

use super::*;

/// `connect` handshake plus the connection-level methods an SDK calls right after it.
pub async fn scenario_handshake(client: &Client) {
    within("connect", client.verify_protocol_version())
        .await
        .expect("connect handshake");
    assert_eq!(client.protocol_version(), Some(3), "protocol version 3");
    let pong = within("ping", client.ping(Some("hi"))).await.expect("ping");
    assert_eq!(pong.protocol_version, Some(3), "ping reports protocol 3");
    assert!(
        pong.message.starts_with("pong"),
        "ping message {:?}",
        pong.message
    );
    assert!(
        is_rfc3339(&pong.timestamp),
        "ping timestamp {:?} is RFC 3339",
        pong.timestamp
    );
    let status = within("status.get", client.get_status())
        .await
        .expect("status.get");
    assert_eq!(status.protocol_version, 3);
    assert!(!status.version.is_empty(), "status.get reports a version");
    let auth = within("auth.getStatus", client.get_auth_status())
        .await
        .expect("auth.getStatus");
    assert!(
        auth.is_authenticated,
        "a model-free host reports authenticated"
    );
    let models = within("models.list", client.list_models())
        .await
        .expect("models.list");
    assert!(!models.is_empty(), "models.list returns at least one model");
}

/// One plain turn: create with a client-chosen id, `send_and_wait` returns the scripted echo,
/// envelope + parentId chain on the stream, and `getMessages` = the persisted events.
pub async fn scenario_plain_turn(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let prompt = "hello agentwire";
    let reply = turn(&c.session, prompt).await;
    assert_eq!(
        reply.data.get("content").and_then(Value::as_str),
        Some(format!("You said: {prompt}").as_str()),
        "scripted echo"
    );
    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_eq!(
        events[0].event_type, "session.start",
        "first event is session.start"
    );
    assert_eq!(events[0].parent_id, None, "session.start has parentId null");
    assert_eq!(
        events[0].data.get("sessionId").and_then(Value::as_str),
        Some(id.as_str()),
        "session.start.data.sessionId"
    );
    assert_chain(&events, None);
    let idx = assert_subsequence(
        &events,
        &[
            "session.start",
            "user.message",
            "assistant.message",
            "session.idle",
        ],
    );
    let user = &events[idx[1]];
    let assistant = &events[idx[2]];
    assert_eq!(str_field(user, "content"), Some(prompt));
    let message_id = str_field(user, "messageId").expect("user.message.data.messageId");
    assert!(!message_id.is_empty());
    assert_eq!(
        str_field(assistant, "originatingMessageId"),
        Some(message_id),
        "assistant.message.originatingMessageId = user.message.messageId"
    );
    assert_eq!(
        assistant.id, reply.id,
        "send_and_wait returned the streamed assistant.message"
    );
    assert_eq!(
        events.last().unwrap().event_type,
        "session.idle",
        "turn ends with session.idle"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e.event_type == "session.idle")
            .count(),
        1
    );
    assert_history_matches(&c.session, &c.events.seen).await;
    within("session.detach", c.session.disconnect())
        .await
        .expect("detach");
}

/// The built-in weather scenario: permission → external tool on this client → final answer.
pub async fn scenario_tool_turn(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let reply = turn(&c.session, WEATHER_PROMPT).await;
    assert_eq!(
        reply.data.get("content").and_then(Value::as_str),
        Some(WEATHER_ANSWER)
    );
    let calls = c.tool_calls.lock().unwrap().clone();
    assert_eq!(
        calls.len(),
        1,
        "the tool handler ran exactly once: {calls:?}"
    );
    assert_eq!(calls[0].tool_name, "get_weather");
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    assert_eq!(calls[0].session_id, id);
    let permissions = c.permissions.lock().unwrap().clone();
    assert_eq!(
        permissions.len(),
        1,
        "one permission request: {permissions:?}"
    );

    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_chain(&events, None);
    let idx = assert_subsequence(
        &events,
        &[
            "user.message",
            "assistant.message",
            "tool.execution_start",
            "permission.requested",
            "external_tool.requested",
            "tool.execution_complete",
            "assistant.message",
            "session.idle",
        ],
    );
    let user = &events[idx[0]];
    let message_id = str_field(user, "messageId").expect("user.message.data.messageId");
    let call = &events[idx[1]];
    let requests = call
        .data
        .get("toolRequests")
        .and_then(Value::as_array)
        .expect("assistant.message.toolRequests");
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["name"], "get_weather");
    assert_eq!(requests[0]["arguments"], json!({"city": "Paris"}));
    let tool_call_id = requests[0]["toolCallId"]
        .as_str()
        .expect("toolRequests[0].toolCallId");
    assert_eq!(str_field(call, "originatingMessageId"), Some(message_id));
    let start = &events[idx[2]];
    assert_eq!(str_field(start, "toolCallId"), Some(tool_call_id));
    assert_eq!(str_field(start, "toolName"), Some("get_weather"));
    let perm = &events[idx[3]];
    assert_eq!(
        str_field(perm, "requestId"),
        Some(permissions[0].0.as_str()),
        "the handler answered the streamed permission request"
    );
    assert_eq!(perm.data["permissionRequest"]["kind"], "custom-tool");
    assert_eq!(perm.data["permissionRequest"]["toolName"], "get_weather");
    let perm_done = events
        .iter()
        .position(|e| e.event_type == "permission.completed")
        .expect("permission.completed");
    assert!(
        perm_done > idx[3] && perm_done < idx[5],
        "permission.completed lies between permission.requested and tool.execution_complete"
    );
    assert_eq!(events[perm_done].data["result"]["kind"], "approved");
    let ext = &events[idx[4]];
    assert_eq!(str_field(ext, "toolCallId"), Some(tool_call_id));
    assert_eq!(str_field(ext, "toolName"), Some("get_weather"));
    assert_eq!(str_field(ext, "sessionId"), Some(id.as_str()));
    assert_eq!(ext.data["arguments"], json!({"city": "Paris"}));
    let done = &events[idx[5]];
    assert_eq!(str_field(done, "toolCallId"), Some(tool_call_id));
    assert_eq!(done.data["success"], true);
    assert_eq!(
        done.data["result"]["content"], TOOL_REPLY,
        "the tool's answer reaches tool.execution_complete"
    );
    let answer = &events[idx[6]];
    assert_eq!(answer.id, reply.id);
    assert_eq!(str_field(answer, "originatingMessageId"), Some(message_id));
    assert_history_matches(&c.session, &c.events.seen).await;
    within("session.detach", c.session.disconnect())
        .await
        .expect("detach");
}

/// Streaming: `assistant.message_delta` events (ephemeral) add up to the final message.
pub async fn scenario_streaming(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, true).await;
    let prompt = "stream this please";
    let reply = turn(&c.session, prompt).await;
    let content = reply.data["content"].as_str().expect("content").to_string();
    assert_eq!(content, format!("You said: {prompt}"));
    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_chain(&events, None);
    let message_id = reply.data["messageId"]
        .as_str()
        .expect("assistant messageId");
    let deltas: Vec<&SessionEvent> = events
        .iter()
        .filter(|e| e.event_type == "assistant.message_delta")
        .collect();
    assert!(
        !deltas.is_empty(),
        "streaming:true yields assistant.message_delta events"
    );
    let mut joined = String::new();
    for d in &deltas {
        assert_eq!(str_field(d, "messageId"), Some(message_id));
        joined.push_str(str_field(d, "deltaContent").expect("deltaContent"));
    }
    assert_eq!(joined, content, "deltas add up to the final content");
    let last_delta = events
        .iter()
        .rposition(|e| e.event_type == "assistant.message_delta")
        .unwrap();
    let final_msg = events.iter().position(|e| e.id == reply.id).unwrap();
    assert!(
        last_delta < final_msg,
        "deltas come before the final assistant.message"
    );
    assert_history_matches(&c.session, &c.events.seen).await;
}

/// `session.list`, `session.getMetadata` (known and unknown id) and `session.getLastId`.
pub async fn scenario_list_and_metadata(client: &Client) {
    let id = new_session_id();
    let c = create_session(client, &id, false).await;
    turn(&c.session, "remember me").await;
    let sessions = within("session.list", client.list_sessions(None))
        .await
        .expect("session.list");
    let mine = sessions
        .iter()
        .find(|s| s.session_id == id)
        .unwrap_or_else(|| panic!("session.list contains {id}: {sessions:?}"));
    assert!(
        is_rfc3339(&mine.start_time),
        "startTime {:?}",
        mine.start_time
    );
    assert!(
        is_rfc3339(&mine.modified_time),
        "modifiedTime {:?}",
        mine.modified_time
    );
    assert!(
        mine.start_time <= mine.modified_time,
        "startTime <= modifiedTime"
    );
    assert!(!mine.is_remote);
    let meta = within("session.getMetadata", client.get_session_metadata(&id))
        .await
        .expect("session.getMetadata")
        .expect("metadata for a known session");
    assert_eq!(meta.session_id, id);
    assert_eq!(meta.start_time, mine.start_time);
    let unknown = new_session_id();
    let none = within(
        "session.getMetadata(unknown)",
        client.get_session_metadata(&unknown),
    )
    .await
    .expect("session.getMetadata for an unknown id is not an error");
    assert!(none.is_none(), "unknown id → no metadata, got {none:?}");
    let last = within("session.getLastId", client.get_last_session_id())
        .await
        .expect("session.getLastId");
    assert_eq!(last.as_ref(), Some(&id), "the most recently used session");
    within("session.detach", c.session.disconnect())
        .await
        .expect("detach");
}

/// A second client resumes the session; both see the next turn's events, with identical ids;
/// the second client's view continues the parentId chain; history agrees on both.
pub async fn scenario_resume_shared(a: &Client, b: &Client) {
    let id = new_session_id();
    let mut ca = create_session(a, &id, false).await;
    turn(&ca.session, "first turn").await;
    ca.events.turn().await;
    let history_before = within("getMessages", ca.session.get_events())
        .await
        .expect("getMessages");
    let last_persisted = history_before.last().map(|e| e.id.clone());

    let prepared = b
        .prepare_resume_session(ResumeSessionConfig::new(id.clone()))
        .expect("prepare_resume_session");
    let mut eb = Recorder::new(prepared.subscribe());
    let sb = within("session.resume", prepared.start())
        .await
        .expect("session.resume of a live session (join) succeeds");
    assert_eq!(sb.id(), &id);
    // The resume event goes to every attached connection and continues the chain.
    let resume_b = eb.wait_for("session.resume").await;
    assert_envelope(&resume_b);
    assert_eq!(
        resume_b.parent_id, last_persisted,
        "session.resume continues the chain"
    );
    let resume_a = ca.events.wait_for("session.resume").await;
    assert_eq!(
        resume_a.id, resume_b.id,
        "both connections see the same session.resume"
    );

    // A drives the next turn; B observes it.
    let prompt = "second turn";
    let reply = turn(&ca.session, prompt).await;
    assert_eq!(reply.data["content"], format!("You said: {prompt}"));
    let ta = ca.events.turn().await;
    let tb = eb.turn().await;
    let ids_a: Vec<&str> = ta.iter().map(|e| e.id.as_str()).collect();
    let ids_b: Vec<&str> = tb.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids_a, ids_b,
        "both clients receive the same events in the same order"
    );
    assert_eq!(ta[0].event_type, "session.resume");
    for ev in &tb {
        assert_envelope(ev);
    }
    assert_chain(&tb, last_persisted.clone());
    assert_subsequence(
        &tb,
        &[
            "session.resume",
            "user.message",
            "assistant.message",
            "session.idle",
        ],
    );

    // B drives a turn; A observes it.
    let reply_b = turn(&sb, "from b").await;
    assert_eq!(reply_b.data["content"], "You said: from b");
    let ta2 = ca.events.turn().await;
    let tb2 = eb.turn().await;
    assert_eq!(
        ta2.iter().map(|e| &e.id).collect::<Vec<_>>(),
        tb2.iter().map(|e| &e.id).collect::<Vec<_>>()
    );

    let ha = within("getMessages(a)", ca.session.get_events())
        .await
        .expect("history a");
    let hb = within("getMessages(b)", sb.get_events())
        .await
        .expect("history b");
    assert_eq!(
        ha.iter().map(|e| &e.id).collect::<Vec<_>>(),
        hb.iter().map(|e| &e.id).collect::<Vec<_>>(),
        "both clients read the same history"
    );
    assert_history_matches(&ca.session, &ca.events.seen).await;

    within("detach b", sb.disconnect()).await.expect("detach b");
    within("detach a", ca.session.disconnect())
        .await
        .expect("detach a");
}

/// Lifecycle notifications, detach and delete.
pub async fn scenario_detach_delete(client: &Client) {
    let mut lifecycle = client.subscribe_lifecycle();
    let id = new_session_id();
    let c = create_session(client, &id, false).await;
    let created = wait_lifecycle(&mut lifecycle, SessionLifecycleEventType::Created, &id).await;
    if let Some(meta) = &created.metadata {
        assert!(is_rfc3339(&meta.start_time));
        assert!(is_rfc3339(&meta.modified_time));
    }
    turn(&c.session, "before detach").await;
    within("session.detach", c.session.disconnect())
        .await
        .expect("session.detach answers success:true");
    // Detached, not deleted: still listed and resumable.
    let listed = within("session.list", client.list_sessions(None))
        .await
        .expect("session.list");
    assert!(
        listed.iter().any(|s| s.session_id == id),
        "detached session still listed"
    );
    within("session.delete", client.delete_session(&id))
        .await
        .expect("session.delete");
    let deleted = wait_lifecycle(&mut lifecycle, SessionLifecycleEventType::Deleted, &id).await;
    assert_eq!(deleted.session_id, id);
    let listed = within("session.list", client.list_sessions(None))
        .await
        .expect("session.list");
    assert!(
        !listed.iter().any(|s| s.session_id == id),
        "deleted session is gone from session.list"
    );
    let meta = within("session.getMetadata", client.get_session_metadata(&id))
        .await
        .expect("session.getMetadata");
    assert!(meta.is_none(), "deleted session has no metadata");
    let resumed = within(
        "session.resume(deleted)",
        client.resume_session(ResumeSessionConfig::new(id.clone())),
    )
    .await;
    assert!(resumed.is_err(), "resuming a deleted session fails");
}

/// `Session::send` (no wait): the returned `messageId` is the one on `user.message`, and the
/// turn's `assistant.message` carries it as `originatingMessageId` — the correlation the
/// SDKs' event-based waits rely on.
pub async fn scenario_send_correlation(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let prompt = "fire and forget";
    let message_id = within("session.send", c.session.send(MessageOptions::new(prompt)))
        .await
        .expect("session.send");
    assert!(!message_id.is_empty(), "session.send returns a messageId");
    let events = c.events.turn().await;
    for ev in &events {
        assert_envelope(ev);
    }
    assert_chain(&events, None);
    let idx = assert_subsequence(
        &events,
        &["user.message", "assistant.message", "session.idle"],
    );
    assert_eq!(
        str_field(&events[idx[0]], "messageId"),
        Some(message_id.as_str())
    );
    assert_eq!(str_field(&events[idx[0]], "content"), Some(prompt));
    assert_eq!(
        str_field(&events[idx[1]], "originatingMessageId"),
        Some(message_id.as_str())
    );
    assert_eq!(
        str_field(&events[idx[1]], "content"),
        Some(format!("You said: {prompt}").as_str())
    );
    assert_history_matches(&c.session, &c.events.seen).await;
}

/// Two `send_and_wait` calls in flight at once on one session: each resolves with the answer
/// to its own prompt (the SDK correlates by message id; the host queues the second turn).
pub async fn scenario_concurrent_sends(client: &Client) {
    let id = new_session_id();
    let mut c = create_session(client, &id, false).await;
    let (one, two) = tokio::join!(turn(&c.session, "first"), turn(&c.session, "second"));
    assert_eq!(one.data["content"], "You said: first");
    assert_eq!(two.data["content"], "You said: second");
    assert_ne!(
        one.data["originatingMessageId"], two.data["originatingMessageId"],
        "each answer belongs to its own message"
    );
    let first = c.events.turn().await;
    let second = c.events.turn().await;
    let mut all = first.clone();
    all.extend(second.iter().cloned());
    for ev in &all {
        assert_envelope(ev);
    }
    assert_chain(&all, None);
    assert_history_matches(&c.session, &c.events.seen).await;
}
