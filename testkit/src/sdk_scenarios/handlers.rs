//! Handlers (implemented by hand: the traits are `#[async_trait]`, whose expansion is this) and session setup helpers.

use super::*;

pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A `get_weather` tool handler that records every invocation and answers [`TOOL_REPLY`].
pub struct RecordingTool {
    /// Every invocation, in order.
    pub calls: Arc<Mutex<Vec<ToolInvocation>>>,
}

impl ToolHandler for RecordingTool {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        invocation: ToolInvocation,
    ) -> BoxFut<'async_trait, Result<ToolResult, Error>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.calls.lock().unwrap().push(invocation);
        Box::pin(async { Ok(ToolResult::Text(TOOL_REPLY.to_string())) })
    }
}

/// A permission handler that records each request's event data and approves it once, or
/// rejects it with feedback when `reject` is set.
pub struct RecordingPermission {
    /// `(requestId, full permission.requested data)` for every request.
    pub requests: Arc<Mutex<Vec<(String, Value)>>>,
    /// `Some(feedback)`: answer `reject{feedback}` instead of `approve-once`.
    pub reject: Option<String>,
}

impl PermissionHandler for RecordingPermission {
    fn handle<'life0, 'async_trait>(
        &'life0 self,
        _session_id: SessionId,
        request_id: RequestId,
        data: PermissionRequestData,
    ) -> BoxFut<'async_trait, PermissionResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.requests
            .lock()
            .unwrap()
            .push((request_id.to_string(), data.extra));
        let result = match &self.reject {
            Some(feedback) => PermissionResult::reject(Some(feedback.clone())),
            None => PermissionResult::approve_once(),
        };
        Box::pin(async move { result })
    }
}

/// An elicitation handler that records each request and accepts with `{"confirmed": true}`.
pub struct RecordingElicitation {
    /// Every request, in order.
    pub requests: Arc<Mutex<Vec<ElicitationRequest>>>,
}

impl ElicitationHandler for RecordingElicitation {
    fn handle<'life0, 'async_trait>(
        &'life0 self,
        _session_id: SessionId,
        _request_id: RequestId,
        request: ElicitationRequest,
    ) -> BoxFut<'async_trait, ElicitationResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.requests.lock().unwrap().push(request);
        Box::pin(async {
            ElicitationResult {
                action: "accept".into(),
                content: Some(json!({"confirmed": true})),
            }
        })
    }
}

/// A slash-command handler that records each invocation.
pub struct RecordingCommand {
    /// Every invocation, in order.
    pub calls: Arc<Mutex<Vec<CommandContext>>>,
}

impl CommandHandler for RecordingCommand {
    fn on_command<'life0, 'async_trait>(
        &'life0 self,
        ctx: CommandContext,
    ) -> BoxFut<'async_trait, Result<(), Error>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.calls.lock().unwrap().push(ctx);
        Box::pin(async { Ok(()) })
    }
}

/// The `get_weather` tool declaration, without a handler (declaration-only).
pub fn weather_declaration() -> Tool {
    Tool::new("get_weather")
        .with_description("Get weather for a city")
        .with_parameters(json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"]
        }))
}

/// The `get_weather` tool declaration, with a recording handler attached.
pub fn weather_tool(calls: Arc<Mutex<Vec<ToolInvocation>>>) -> Tool {
    weather_declaration().with_handler(Arc::new(RecordingTool { calls }))
}

/// How a test session is set up.
#[derive(Clone, Debug)]
pub struct Setup {
    /// `streaming` on `session.create`.
    pub streaming: bool,
    /// Attach a recording handler to `get_weather` (else declaration-only).
    pub tool_handler: bool,
    /// Install a recording permission handler.
    pub permission_handler: bool,
    /// Make that handler reject with this feedback.
    pub reject: Option<String>,
    /// `mcpServers` of `session.create`, by name.
    pub mcp_servers: Vec<(String, github_copilot_sdk::types::McpServerConfig)>,
    /// `workingDirectory` of `session.create`.
    pub working_directory: Option<std::path::PathBuf>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            streaming: false,
            tool_handler: true,
            permission_handler: true,
            reject: None,
            mcp_servers: Vec::new(),
            working_directory: None,
        }
    }
}

/// Everything a test needs to look at after creating a session through the SDK.
pub struct Created {
    pub session: Session,
    pub events: Recorder,
    pub tool_calls: Arc<Mutex<Vec<ToolInvocation>>>,
    pub permissions: Arc<Mutex<Vec<(String, Value)>>>,
}

/// Creates a session with a client-chosen id, the `get_weather` tool (with handler) and a
/// recording permission handler. The event subscription is installed before `session.create`
/// goes out (`prepare_session`), so the recorder sees every event, `session.start` included.
pub async fn create_session(client: &Client, id: &SessionId, streaming: bool) -> Created {
    create_session_with(
        client,
        id,
        Setup {
            streaming,
            ..Setup::default()
        },
    )
    .await
}

/// [`create_session`] with a custom [`Setup`].
pub async fn create_session_with(client: &Client, id: &SessionId, setup: Setup) -> Created {
    let tool_calls = Arc::new(Mutex::new(Vec::new()));
    let permissions = Arc::new(Mutex::new(Vec::new()));
    let tool = if setup.tool_handler {
        weather_tool(tool_calls.clone())
    } else {
        weather_declaration()
    };
    let mut config = SessionConfig::default()
        .with_session_id(id.clone())
        .with_model("fake-model")
        .with_streaming(setup.streaming)
        .with_tools([tool]);
    if let Some(dir) = &setup.working_directory {
        config = config.with_working_directory(dir.clone());
    }
    if !setup.mcp_servers.is_empty() {
        let servers: indexmap::IndexMap<_, _> = setup.mcp_servers.iter().cloned().collect();
        config = config.with_mcp_servers(servers);
    }
    if setup.permission_handler {
        config = config.with_permission_handler(Arc::new(RecordingPermission {
            requests: permissions.clone(),
            reject: setup.reject.clone(),
        }));
    }
    let prepared = client
        .prepare_session(config)
        .expect("prepare_session accepts the config");
    let events = Recorder::new(prepared.subscribe());
    let session = within("session.create", prepared.start())
        .await
        .expect("session.create succeeds");
    assert_eq!(session.id(), id, "the session keeps the client-chosen id");
    Created {
        session,
        events,
        tool_calls,
        permissions,
    }
}

/// Runs `send_and_wait(prompt)` and returns the assistant message it resolved with.
pub async fn turn(session: &Session, prompt: &str) -> SessionEvent {
    let reply = within(
        &format!("send_and_wait({prompt:?})"),
        session.send_and_wait(MessageOptions::new(prompt).with_wait_timeout(TURN)),
    )
    .await
    .unwrap_or_else(|e| panic!("send_and_wait({prompt:?}) failed: {e}"))
    .unwrap_or_else(|| panic!("send_and_wait({prompt:?}) returned no assistant message"));
    assert_eq!(reply.event_type, "assistant.message");
    assert_envelope(&reply);
    reply
}

/// Asserts the `getMessages` contract against what the connection received: persisted events
/// only, in emission order, starting with `session.start` (parent null), linked by parentId.
pub async fn assert_history_matches(session: &Session, received: &[SessionEvent]) {
    let history = within("session.getMessages", session.get_events())
        .await
        .expect("session.getMessages succeeds");
    for ev in &history {
        assert_envelope(ev);
        assert_eq!(
            ev.ephemeral, None,
            "getMessages must hold persisted events only, got {} {}",
            ev.event_type, ev.id
        );
    }
    assert_chain(&history, None);
    assert_eq!(
        history.first().map(|e| e.event_type.as_str()),
        Some("session.start"),
        "history starts with session.start"
    );
    let persisted: Vec<&str> = received
        .iter()
        .filter(|e| is_persisted(e))
        .map(|e| e.id.as_str())
        .collect();
    let ids: Vec<&str> = history.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        persisted,
        "getMessages must equal the persisted events the client received, in order\n history: {:?}\nreceived: {:?}",
        types(&history),
        received.iter().filter(|e| is_persisted(e)).map(|e| e.event_type.as_str()).collect::<Vec<_>>()
    );
    for (h, r) in history
        .iter()
        .zip(received.iter().filter(|e| is_persisted(e)))
    {
        assert_eq!(h.event_type, r.event_type);
        assert_eq!(h.parent_id, r.parent_id);
        assert_eq!(h.timestamp, r.timestamp);
        assert_eq!(
            h.data, r.data,
            "{} data differs between stream and history",
            h.event_type
        );
    }
}
