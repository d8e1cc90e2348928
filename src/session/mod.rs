//! Sessions: the event log (durable vs ephemeral, the `parentId` chain) and who is attached.

mod conn_id;
mod event;
mod session_id;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

use crate::Timestamp;

pub use conn_id::ConnId;
pub(crate) use event::push_json_str;
pub use event::{is_streaming_delta_type, Event};
pub use session_id::SessionId;

/// A tool a client declared on `session.create` / `session.resume`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolDecl {
    /// Tool name.
    pub(crate) name: String,
    /// Description shown to the model and in permission prompts.
    #[serde(default)]
    pub(crate) description: String,
    /// JSON Schema of the parameters.
    #[serde(default)]
    pub(crate) parameters: Option<Value>,
    /// The tool runs without a permission prompt.
    #[serde(default)]
    pub(crate) skip_permission: bool,
}

/// A slash command a client declared.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub(crate) struct CommandDecl {
    /// Command name without the slash.
    pub(crate) name: String,
    /// Description.
    #[serde(default)]
    pub(crate) description: String,
}

/// What one connection declared when it attached to a session.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Attachment {
    /// The connection wants streaming (delta) events.
    pub(crate) streaming: bool,
    /// The connection answers permission prompts.
    pub(crate) request_permission: bool,
    /// The connection answers elicitation requests.
    pub(crate) request_elicitation: bool,
    /// The connection answers `userInput.request`.
    pub(crate) request_user_input: bool,
    /// The connection answers `exitPlanMode.request`.
    pub(crate) request_exit_plan_mode: bool,
    /// The connection answers `autoModeSwitch.request`.
    pub(crate) request_auto_mode_switch: bool,
    /// The connection answers `hooks.invoke`.
    pub(crate) hooks: bool,
    /// The connection answers `sampling.requested` (an agentwire extension field,
    /// `requestSampling`: the official SDKs have no sampling handler).
    pub(crate) request_sampling: bool,
    /// The connection renders MCP Apps (`requestMcpApps`, honoured only when the host
    /// enables MCP Apps); `mcp_app.*` events go only to such connections.
    pub(crate) mcp_apps: bool,
    /// Canvases this connection provides (`canvases[]`), as declared.
    pub(crate) canvases: Vec<Value>,
    /// Factories this connection provides (`factories[]`: their metadata, as declared).
    pub(crate) factories: Vec<Value>,
    /// The connection renders canvases (`requestCanvasRenderer`): the agent gets the canvas
    /// tools while one is attached.
    pub(crate) canvas_renderer: bool,
    /// Stable canvas provider id (`canvasProvider.id`), used verbatim as the `extensionId` of
    /// this connection's canvases so they survive a reconnect. Ids starting with
    /// `connection:` are reserved and ignored.
    pub(crate) canvas_provider_id: Option<String>,
    /// Display name of the provider (`canvasProvider.name` or `extensionInfo.name`), reported
    /// as `extensionName`.
    pub(crate) extension_name: Option<String>,
    /// The connection wants sub-agents' streaming deltas too (`includeSubAgentStreamingEvents`,
    /// on unless a client turns it off); only with `streaming`.
    pub(crate) include_sub_agent_streaming: bool,
    /// The extension id when the connection attached as an extension (`extensionInfo`).
    pub(crate) extension: Option<String>,
    /// Tools this connection provides.
    pub(crate) tools: Vec<ToolDecl>,
    /// Commands this connection provides.
    pub(crate) commands: Vec<CommandDecl>,
}

/// One session: its metadata, its persisted events and its attached connections.
#[derive(Debug)]
pub(crate) struct Session {
    /// The session id (chosen by the client).
    pub(crate) id: String,
    /// When the session started.
    pub(crate) start_time: Timestamp,
    /// When the last persisted event was written.
    pub(crate) modified_time: Timestamp,
    /// Working directory the client declared.
    pub(crate) cwd: Option<String>,
    /// Selected model, as the client asked.
    pub(crate) model: Option<String>,
    /// First prompt, used as the session's summary.
    pub(crate) summary: Option<String>,
    /// Persisted events in order.
    events: Vec<Event>,
    /// Id of the most recent persisted event (the next event's `parentId`).
    last_persisted: Option<String>,
    /// Attached connections in attach order, with what each declared.
    pub(crate) attached: IndexMap<ConnId, Attachment>,
}

impl Session {
    /// A new, empty session.
    pub(crate) fn new(id: String, now: Timestamp) -> Self {
        Session {
            id,
            start_time: now,
            modified_time: now,
            cwd: None,
            model: None,
            summary: None,
            events: Vec::new(),
            last_persisted: None,
            attached: IndexMap::new(),
        }
    }

    /// Creates an event with the next `parentId` (emitted by sub-agent `agent_id`; `None`:
    /// the main agent), records it if persisted, and returns it.
    ///
    /// Its timestamp is `now`, or the last persisted event's time when `now` is earlier (a
    /// session restored from a log written by a node whose clock was ahead): a session's
    /// timestamps never step back.
    pub(crate) fn record_from(
        &mut self,
        id: String,
        event_type: &str,
        data: &Value,
        ephemeral: bool,
        now: Timestamp,
        agent_id: Option<&str>,
    ) -> Event {
        let now = now.max(self.modified_time);
        let event = Event::new_from(
            id,
            event_type,
            data,
            ephemeral,
            now,
            self.last_persisted.as_deref(),
            agent_id,
        );
        if !ephemeral {
            self.last_persisted = Some(event.id.clone());
            self.modified_time = now;
            self.events.push(event.clone());
        }
        event
    }

    /// Restores a persisted event loaded from a store (its JSON as written), keeping the
    /// `parentId` chain going from it.
    pub(crate) fn restore(&mut self, event: Event, time: Timestamp) {
        self.last_persisted = Some(event.id.clone());
        self.modified_time = time;
        self.events.push(event);
    }

    /// Drops the persisted events from `index` on (history truncation) and returns how many
    /// were dropped; the next event's `parentId` is the last one kept.
    pub(crate) fn truncate_events(&mut self, index: usize) -> usize {
        let removed = self.events.len().saturating_sub(index);
        self.events.truncate(index);
        self.last_persisted = self.events.last().map(|e| e.id.clone());
        removed
    }

    /// Persisted events in order.
    pub(crate) fn events(&self) -> &[Event] {
        &self.events
    }

    /// Whether any attached connection wants streaming deltas.
    pub(crate) fn any_streaming(&self) -> bool {
        self.attached.values().any(|a| a.streaming)
    }

    /// Whether any attached connection answers permission prompts.
    pub(crate) fn any_permission_handler(&self) -> bool {
        self.attached.values().any(|a| a.request_permission)
    }

    /// Whether any attached connection answers elicitation.
    pub(crate) fn any_elicitation_handler(&self) -> bool {
        self.attached.values().any(|a| a.request_elicitation)
    }

    /// The connection providing tool `name` (the earliest attached declarer) and its declaration.
    pub(crate) fn tool_provider(&self, name: &str) -> Option<(ConnId, &ToolDecl)> {
        self.attached
            .iter()
            .find_map(|(c, a)| a.tools.iter().find(|t| t.name == name).map(|t| (*c, t)))
    }

    /// Every client tool the session's attached connections provide, once per name (the
    /// earliest declarer's, as [`Session::tool_provider`] picks it), in attach order.
    pub(crate) fn client_tools(&self) -> Vec<&ToolDecl> {
        let mut tools: Vec<&ToolDecl> = Vec::new();
        for tool in self.attached.values().flat_map(|a| a.tools.iter()) {
            if !tools.iter().any(|t| t.name == tool.name) {
                tools.push(tool);
            }
        }
        tools
    }

    /// All commands declared by attached connections, in attach order.
    pub(crate) fn commands(&self) -> Vec<&CommandDecl> {
        self.attached
            .values()
            .flat_map(|a| a.commands.iter())
            .collect()
    }
}
