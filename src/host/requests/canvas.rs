//! Canvases: the registry of canvases that attached connections provide, the session's open
//! canvas instances, and the `canvas.*` round trips to their providers.
//!
//! A connection that declares `canvases[]` provides them under an `extensionId`: its
//! `canvasProvider.id`, else its extension id (`extensionInfo`), else `connection:<n>`.
//! `session.canvas.open` / `close` / `action.invoke` (and the agent's canvas tools) become
//! server-to-client `canvas.open` / `canvas.close` / `canvas.action.invoke` requests to that
//! provider; when it answers, the host emits `session.canvas.opened` (ephemeral) +
//! `session.canvas.recorded` (persisted), or `session.canvas.closed` + `session.canvas.removed`,
//! then answers the caller (reference: `copilot-sdk.md` §5.2, `wire2.jsonl:24-49`). A provider
//! that leaves makes its open canvases `session.canvas.unavailable`; one that re-declares the
//! same canvases later rehydrates them (`session.canvas.opened` again). Open instances are
//! rebuilt from the persisted `recorded` / `removed` events when a session is restored.

use serde_json::{json, Map, Value};

use crate::agent::ToolOutcome;
use crate::correlation::Outcome;
use crate::jsonrpc::OwnedId;
use crate::session::Attachment;

use crate::host::dialect::ServerRequest;
use crate::host::{ConnId, Host, Live};

/// The agent tools a session offers while a canvas renderer (`requestCanvasRenderer`) is
/// attached.
pub const CANVAS_TOOLS: [&str; 3] = [
    "list_canvas_capabilities",
    "open_canvas",
    "invoke_canvas_action",
];

/// An open canvas instance of a session.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OpenCanvas {
    pub instance_id: String,
    pub extension_id: String,
    pub canvas_id: String,
    pub extension_name: Option<String>,
    pub title: Option<String>,
    pub url: Option<String>,
    pub status: Option<String>,
    pub input: Option<Value>,
    /// The connection serving it; `None` while its provider is away (unavailable).
    pub provider: Option<ConnId>,
}

impl OpenCanvas {
    /// The `OpenCanvasInstance` shape (results, `session.canvas.opened`).
    fn instance_json(&self) -> Value {
        let mut v = self.ids_json();
        let o = v.as_object_mut().expect("ids_json is an object");
        put(
            o,
            "extensionName",
            self.extension_name.clone().map(Value::String),
        );
        put(o, "title", self.title.clone().map(Value::String));
        put(o, "url", self.url.clone().map(Value::String));
        put(o, "status", self.status.clone().map(Value::String));
        put(o, "input", self.input.clone());
        v
    }

    /// `{instanceId, extensionId, canvasId}` (`closed`, `removed`, `unavailable`).
    fn ids_json(&self) -> Value {
        json!({"instanceId": self.instance_id, "extensionId": self.extension_id,
               "canvasId": self.canvas_id})
    }

    /// The persisted `session.canvas.recorded` data: `{instanceId, extensionId, canvasId,
    /// title?, input?}`.
    fn recorded_json(&self) -> Value {
        let mut v = self.ids_json();
        let o = v.as_object_mut().expect("ids_json is an object");
        put(o, "title", self.title.clone().map(Value::String));
        put(o, "input", self.input.clone());
        v
    }
}

fn put(o: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        o.insert(key.to_owned(), value);
    }
}

/// Which provider request a canvas call is.
#[derive(Clone, Debug)]
pub(crate) enum CanvasOp {
    /// `canvas.open`: the instance to record when the provider answers.
    Open(Box<OpenCanvas>),
    /// `canvas.close` of an instance.
    Close { instance_id: String },
    /// `canvas.action.invoke` on an instance.
    Action,
}

impl CanvasOp {
    /// The request sent to the provider.
    pub(crate) fn request(&self) -> ServerRequest {
        match self {
            CanvasOp::Open(_) => ServerRequest::CanvasOpen,
            CanvasOp::Close { .. } => ServerRequest::CanvasClose,
            CanvasOp::Action => ServerRequest::CanvasAction,
        }
    }
}

/// Who gets the result of a canvas call.
#[derive(Clone, Debug)]
pub(crate) enum CanvasReply {
    /// A client's `session.canvas.*` request (the method, for error wording).
    Caller(ConnId, OwnedId, &'static str),
    /// The agent's canvas tool call.
    Tool(String),
}

/// A canvas request in flight to a provider.
#[derive(Clone, Debug)]
pub(crate) struct CanvasCall {
    pub session: String,
    pub op: CanvasOp,
    pub reply: CanvasReply,
}

/// A failed canvas operation: the message and, from a provider's error, its `data`.
struct CanvasFailure {
    message: String,
    data: Option<Box<serde_json::value::RawValue>>,
}

impl From<String> for CanvasFailure {
    fn from(message: String) -> Self {
        CanvasFailure {
            message,
            data: None,
        }
    }
}

/// The `extensionId` under which `conn`'s canvases are registered.
pub(crate) fn provider_extension_id(conn: ConnId, attachment: &Attachment) -> String {
    attachment
        .canvas_provider_id
        .clone()
        .or_else(|| attachment.extension.clone())
        .unwrap_or_else(|| format!("connection:{}", conn.as_u64()))
}

/// The session's canvas registry as `DiscoveredCanvas[]`, in attach order.
pub(crate) fn registry_json(live: &Live) -> Value {
    let mut out = Vec::new();
    for (conn, a) in &live.session.attached {
        if a.canvases.is_empty() {
            continue;
        }
        let extension_id = provider_extension_id(*conn, a);
        for decl in &a.canvases {
            let Some(canvas_id) = decl.get("id").and_then(Value::as_str) else {
                continue;
            };
            let mut entry = json!({
                "extensionId": extension_id,
                "canvasId": canvas_id,
                "displayName": decl.get("displayName").cloned().unwrap_or_else(|| json!(canvas_id)),
                "description": decl.get("description").cloned().unwrap_or_else(|| json!("")),
            });
            let o = entry.as_object_mut().expect("an object");
            put(
                o,
                "extensionName",
                a.extension_name.clone().map(Value::String),
            );
            for key in ["icon", "inputSchema", "actions"] {
                put(o, key, decl.get(key).cloned());
            }
            out.push(entry);
        }
    }
    Value::Array(out)
}

/// Open canvas instances rebuilt from a restored session's persisted events (their
/// providers are away until they re-declare).
pub(crate) fn restore_open_canvases(live: &Live) -> indexmap::IndexMap<String, OpenCanvas> {
    let mut open = indexmap::IndexMap::new();
    for event in live.session.events() {
        let kind = event.event_type.as_str();
        if kind != "session.canvas.recorded" && kind != "session.canvas.removed" {
            continue;
        }
        let Ok(value) = serde_json::from_slice::<Value>(&event.json) else {
            continue;
        };
        let data = &value["data"];
        let field = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_owned);
        let Some(instance_id) = field("instanceId") else {
            continue;
        };
        if kind == "session.canvas.removed" {
            open.shift_remove(&instance_id);
            continue;
        }
        open.insert(
            instance_id.clone(),
            OpenCanvas {
                instance_id,
                extension_id: field("extensionId").unwrap_or_default(),
                canvas_id: field("canvasId").unwrap_or_default(),
                extension_name: None,
                title: field("title"),
                url: None,
                status: None,
                input: data.get("input").cloned(),
                provider: None,
            },
        );
    }
    open
}

/// What a canvas agent tool asked for.
enum ToolRequest {
    List,
    Open {
        canvas_id: String,
        extension_id: Option<String>,
        instance_id: Option<String>,
        input: Option<Value>,
    },
    Action {
        instance_id: String,
        action_name: String,
        input: Option<Value>,
    },
}

fn parse_tool(name: &str, arguments: &Value) -> Result<ToolRequest, String> {
    let text = |k: &str| arguments.get(k).and_then(Value::as_str).map(str::to_owned);
    let required =
        |k: &str| text(k).ok_or_else(|| format!("{name}: missing string argument `{k}`"));
    Ok(match name {
        "list_canvas_capabilities" => ToolRequest::List,
        "open_canvas" => ToolRequest::Open {
            canvas_id: required("canvasId")?,
            extension_id: text("extensionId"),
            instance_id: text("instanceId"),
            input: arguments.get("input").cloned(),
        },
        _ => ToolRequest::Action {
            instance_id: required("instanceId")?,
            action_name: required("actionName")?,
            input: arguments.get("input").cloned(),
        },
    })
}

impl Host {
    /// Whether an attached connection renders canvases (the canvas tools are offered).
    pub(crate) fn canvas_renderer_attached(&self, session: &str) -> bool {
        self.sessions
            .get(session)
            .is_some_and(|l| l.session.attached.values().any(|a| a.canvas_renderer))
    }

    /// Runs one of [`CANVAS_TOOLS`] for the agent; the tool call completes when the provider
    /// answers (or at once when nothing needs asking).
    pub(crate) fn run_canvas_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        name: &str,
        arguments: &Value,
    ) {
        let reply = CanvasReply::Tool(tool_call_id.to_owned());
        match parse_tool(name, arguments) {
            Err(message) => self.canvas_reply(session, reply, Err(message.into())),
            Ok(ToolRequest::List) => {
                let list = self.canvas_list(session);
                self.canvas_reply(session, reply, Ok(list));
            }
            Ok(ToolRequest::Open {
                canvas_id,
                extension_id,
                instance_id,
                input,
            }) => {
                let instance_id = instance_id.unwrap_or_else(|| self.ids.next_uuid());
                self.open_canvas(
                    session,
                    extension_id.as_deref(),
                    &canvas_id,
                    &instance_id,
                    input,
                    reply,
                );
            }
            Ok(ToolRequest::Action {
                instance_id,
                action_name,
                input,
            }) => self.invoke_canvas_action(session, &instance_id, &action_name, input, reply),
        }
    }

    /// `session.canvas.list`.
    pub(crate) fn canvas_list(&self, session: &str) -> Value {
        let canvases = self
            .sessions
            .get(session)
            .map(registry_json)
            .unwrap_or_else(|| json!([]));
        json!({ "canvases": canvases })
    }

    /// The session's open canvases whose provider is attached (`OpenCanvasInstance[]`).
    pub(crate) fn open_canvases_json(&self, session: &str) -> Value {
        let Some(live) = self.sessions.get(session) else {
            return json!([]);
        };
        Value::Array(
            live.canvases
                .values()
                .filter(|c| c.provider.is_some())
                .map(OpenCanvas::instance_json)
                .collect(),
        )
    }

    /// Opens canvas `canvas_id` as `instance_id`: asks its provider (`canvas.open`), then
    /// records the instance and answers `reply`.
    pub(crate) fn open_canvas(
        &mut self,
        session: &str,
        extension_id: Option<&str>,
        canvas_id: &str,
        instance_id: &str,
        input: Option<Value>,
        reply: CanvasReply,
    ) {
        let Some(live) = self.sessions.get(session) else {
            let message = format!("Session not found for sessionId: {session}");
            return self.canvas_reply(session, reply, Err(message.into()));
        };
        let provider = live.session.attached.iter().find_map(|(conn, a)| {
            let id = provider_extension_id(*conn, a);
            let declares = a
                .canvases
                .iter()
                .any(|d| d.get("id").and_then(Value::as_str) == Some(canvas_id));
            (declares && extension_id.is_none_or(|e| e == id)).then_some((*conn, id, a))
        });
        let Some((conn, extension_id, attachment)) = provider else {
            let message = format!("No canvas registered with id \"{canvas_id}\"");
            return self.canvas_reply(session, reply, Err(message.into()));
        };
        let instance = OpenCanvas {
            instance_id: instance_id.to_owned(),
            extension_id,
            canvas_id: canvas_id.to_owned(),
            extension_name: attachment.extension_name.clone(),
            title: None,
            url: None,
            status: None,
            input,
            provider: Some(conn),
        };
        let mut params = json!({"extensionId": instance.extension_id, "canvasId": canvas_id,
                                "instanceId": instance_id});
        if let Some(input) = &instance.input {
            params["input"] = input.clone();
        }
        let op = CanvasOp::Open(Box::new(instance));
        self.send_canvas_call(session, conn, params, op, reply);
    }

    /// Closes an open instance: asks its provider (`canvas.close`) if it is attached, then
    /// emits `session.canvas.closed` + `session.canvas.removed` and answers `reply`.
    pub(crate) fn close_canvas(&mut self, session: &str, instance_id: &str, reply: CanvasReply) {
        let instance = match self.open_instance(session, instance_id) {
            Ok(instance) => instance,
            Err(message) => return self.canvas_reply(session, reply, Err(message.into())),
        };
        let Some(conn) = instance.provider else {
            // Its provider is away: nothing to ask, the host forgets it.
            self.remove_canvas(session, instance_id);
            return self.canvas_reply(session, reply, Ok(Value::Null));
        };
        let params = instance.ids_json();
        let op = CanvasOp::Close {
            instance_id: instance_id.to_owned(),
        };
        self.send_canvas_call(session, conn, params, op, reply);
    }

    /// Invokes `action_name` on an open instance (`canvas.action.invoke` to its provider).
    pub(crate) fn invoke_canvas_action(
        &mut self,
        session: &str,
        instance_id: &str,
        action_name: &str,
        input: Option<Value>,
        reply: CanvasReply,
    ) {
        let instance = match self.open_instance(session, instance_id) {
            Ok(instance) => instance,
            Err(message) => return self.canvas_reply(session, reply, Err(message.into())),
        };
        let Some(conn) = instance.provider else {
            let message = format!(
                "Canvas instance {instance_id} is unavailable: its provider ({}) is not connected",
                instance.extension_id
            );
            return self.canvas_reply(session, reply, Err(message.into()));
        };
        let mut params = instance.ids_json();
        params["actionName"] = json!(action_name);
        if let Some(input) = input {
            params["input"] = input;
        }
        self.send_canvas_call(session, conn, params, CanvasOp::Action, reply);
    }

    /// A copy of the session's open instance `instance_id`, or why there is none.
    fn open_instance(&self, session: &str, instance_id: &str) -> Result<OpenCanvas, String> {
        self.sessions
            .get(session)
            .and_then(|l| l.canvases.get(instance_id))
            .cloned()
            .ok_or_else(|| format!("Canvas instance not found: {instance_id}"))
    }

    /// Adds the session context to `params` and sends the request to the provider.
    fn send_canvas_call(
        &mut self,
        session: &str,
        conn: ConnId,
        mut params: Value,
        op: CanvasOp,
        reply: CanvasReply,
    ) {
        if let Some(cwd) = self
            .sessions
            .get(session)
            .and_then(|l| l.session.cwd.clone())
        {
            params["session"] = json!({ "workingDirectory": cwd });
        }
        params["sessionId"] = json!(session);
        let request = op.request();
        let call = CanvasCall {
            session: session.to_owned(),
            op,
            reply: reply.clone(),
        };
        if let Err(message) = self.send_client_call(conn, request, &params, call.into()) {
            self.canvas_reply(session, reply, Err(message.into()));
        }
    }

    /// A provider answered a canvas request (or never will: closed, timed out).
    pub(crate) fn finish_canvas_call(&mut self, call: CanvasCall, outcome: Outcome) {
        let CanvasCall { session, op, reply } = call;
        let method = self.request_name(op.request());
        // The provider said no (an error object), as opposed to being gone or silent.
        let refused = matches!(outcome, Outcome::Error(_));
        let answer: Result<Value, CanvasFailure> = match outcome {
            Outcome::Result(raw) => serde_json::from_str(raw.get())
                .map_err(|e| CanvasFailure::from(format!("bad {method} result: {e}"))),
            Outcome::Error(e) => Err(CanvasFailure {
                message: e.message,
                data: e.data,
            }),
            Outcome::Cancelled => Err("cancelled".to_owned().into()),
            Outcome::TimedOut => {
                Err(format!("the canvas provider did not answer {method} in time").into())
            }
            Outcome::Closed => Err("the canvas provider disconnected".to_owned().into()),
        };
        let answer = match op {
            CanvasOp::Open(mut instance) => answer.and_then(|result| {
                let provider_here = instance.provider.is_some_and(|p| {
                    self.sessions
                        .get(&session)
                        .is_some_and(|l| l.session.attached.contains_key(&p))
                });
                if !provider_here {
                    return Err("the canvas provider left the session".to_owned().into());
                }
                let text = |k: &str| result.get(k).and_then(Value::as_str).map(str::to_owned);
                instance.title = text("title");
                instance.url = text("url");
                instance.status = text("status");
                Ok(self.record_open_canvas(&session, *instance))
            }),
            CanvasOp::Close { instance_id } => match answer {
                // A provider that refuses keeps its canvas open; one that is gone or silent
                // cannot keep it open, so the host closes it anyway.
                Err(f) if refused => Err(f),
                _ => {
                    self.remove_canvas(&session, &instance_id);
                    Ok(Value::Null)
                }
            },
            CanvasOp::Action => answer.map(|result| match &reply {
                CanvasReply::Caller(..) => json!({ "result": result }),
                CanvasReply::Tool(_) => result,
            }),
        };
        self.canvas_reply(&session, reply, answer);
    }

    /// Records an instance its provider opened: `session.canvas.opened` (ephemeral), then
    /// `session.canvas.recorded` (persisted). Returns the `OpenCanvasInstance`.
    fn record_open_canvas(&mut self, session: &str, instance: OpenCanvas) -> Value {
        let opened = instance.instance_json();
        let recorded = instance.recorded_json();
        if let Some(live) = self.sessions.get_mut(session) {
            live.canvases.insert(instance.instance_id.clone(), instance);
        }
        self.emit(session, "session.canvas.opened", &opened, true);
        self.emit(session, "session.canvas.recorded", &recorded, false);
        opened
    }

    /// Forgets an instance: `session.canvas.closed` (ephemeral) + `session.canvas.removed`
    /// (persisted).
    fn remove_canvas(&mut self, session: &str, instance_id: &str) {
        let Some(instance) = self
            .sessions
            .get_mut(session)
            .and_then(|l| l.canvases.shift_remove(instance_id))
        else {
            return;
        };
        let ids = instance.ids_json();
        self.emit(session, "session.canvas.closed", &ids, true);
        self.emit(session, "session.canvas.removed", &ids, false);
    }

    /// Answers a canvas operation's caller or completes the agent's tool call.
    fn canvas_reply(
        &mut self,
        session: &str,
        reply: CanvasReply,
        answer: Result<Value, CanvasFailure>,
    ) {
        match reply {
            CanvasReply::Caller(conn, id, method) => {
                let result = answer.map_err(|f| {
                    let error = self.caller_error(conn, Some(method), &f.message);
                    match f.data {
                        Some(data) => error.with_data(data),
                        None => error,
                    }
                });
                self.respond(conn, &id, result);
            }
            CanvasReply::Tool(tool_call_id) => {
                let outcome = match answer {
                    Ok(Value::String(text)) => ToolOutcome::Success(text),
                    Ok(value) => ToolOutcome::Success(value.to_string()),
                    Err(f) => ToolOutcome::Failure {
                        message: f.message,
                        code: "failure".into(),
                    },
                };
                self.complete_tool(session, &tool_call_id, outcome);
            }
        }
    }

    /// `conn` left the session: its open canvases become unavailable
    /// (`session.canvas.unavailable`).
    pub(crate) fn canvases_provider_left(&mut self, session: &str, conn: ConnId) {
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let mut gone = Vec::new();
        for instance in live.canvases.values_mut() {
            if instance.provider == Some(conn) {
                instance.provider = None;
                gone.push(instance.ids_json());
            }
        }
        for ids in gone {
            self.emit(session, "session.canvas.unavailable", &ids, true);
        }
    }

    /// `conn` (re)declared canvases: unavailable instances of the canvases it provides come
    /// back (`session.canvas.opened` again). An instance matches when its `extensionId` is the
    /// provider's, or when both are connection-derived (`connection:<n>`, which changes on
    /// every reconnect).
    pub(crate) fn rehydrate_canvases(&mut self, session: &str, conn: ConnId) {
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let Some(attachment) = live.session.attached.get(&conn) else {
            return;
        };
        if attachment.canvases.is_empty() {
            return;
        }
        let extension_id = provider_extension_id(conn, attachment);
        let declared: Vec<&str> = attachment
            .canvases
            .iter()
            .filter_map(|d| d.get("id").and_then(Value::as_str))
            .collect();
        let connection_derived = |id: &str| id.starts_with("connection:");
        let mut back = Vec::new();
        for instance in live.canvases.values_mut() {
            let same_provider = instance.extension_id == extension_id
                || (connection_derived(&instance.extension_id)
                    && connection_derived(&extension_id));
            if instance.provider.is_none()
                && same_provider
                && declared.contains(&instance.canvas_id.as_str())
            {
                instance.provider = Some(conn);
                instance.extension_id = extension_id.clone();
                if instance.extension_name.is_none() {
                    instance.extension_name = attachment.extension_name.clone();
                }
                back.push(instance.instance_json());
            }
        }
        for opened in back {
            self.emit(session, "session.canvas.opened", &opened, true);
        }
    }
}

/// Params of `session.canvas.open`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OpenParams {
    pub session_id: String,
    #[serde(default)]
    pub extension_id: Option<String>,
    pub canvas_id: String,
    pub instance_id: String,
    #[serde(default)]
    pub input: Option<Value>,
}

/// Params of `session.canvas.close`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CloseParams {
    pub session_id: String,
    pub instance_id: String,
}

/// Params of `session.canvas.action.invoke`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ActionParams {
    pub session_id: String,
    pub instance_id: String,
    pub action_name: String,
    #[serde(default)]
    pub input: Option<Value>,
}
