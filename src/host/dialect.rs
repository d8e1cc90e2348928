//! The seam between the neutral host and the dialects that speak to its clients.
//!
//! The host owns connections, sessions, fan-out, bridges and timers; it knows no wire
//! protocol. A dialect (the Copilot SDK protocol, ACP, later an MCP client role or cluster
//! peers) implements [`DialectHandler`] and is registered in the host's dialect table when the
//! host is built; every connection speaks one of them ([`DialectId`]). The host calls the
//! handler for what only a dialect knows (a client's message, how a session event looks on
//! its wire, its notifications about sessions), and the handler answers through the host's
//! `pub(crate)` methods — never through its fields.
//!
//! Per-connection and per-session state of a dialect is stored by the host as opaque values
//! (`Box<dyn Any + Send>`) that only the dialect can read: [`Host::conn_state`],
//! [`Host::session_state`].
//!
//! # Fan-out
//!
//! A session event is offered to every dialect once: [`DialectHandler::event_body`] encodes
//! it once for all of that dialect's connections, and the host frames it at most once per
//! framing and queues it on every receiving connection by reference. A dialect that
//! translates per connection returns `None` and gets the receiving connections in
//! [`DialectHandler::deliver_event`] instead. A new dialect therefore never touches the
//! host's fan-out loop.

use std::any::Any;

use serde_json::Value;

use crate::agent::{BuiltinCall, BuiltinOp};
use crate::jsonrpc::{self, ErrorObject, OwnedId};
use crate::session::{ConnId, Event};

use super::{Host, ShellStream};

/// Which entry of the host's dialect table a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct DialectId(pub(crate) u8);

impl DialectId {
    pub(crate) fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// A change to a session that dialects may announce to their clients (the Copilot SDK
/// dialect's `session.lifecycle` notifications).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SessionChange {
    /// A session was created.
    Created,
    /// A persisted event was appended.
    Updated,
    /// The session was deleted.
    Deleted,
}

/// A request the host sends to one client; each dialect names it on its wire
/// ([`DialectHandler::server_request_method`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServerRequest {
    /// Ask the user a question (`ask_user`).
    UserInput,
    /// Ask to leave plan mode.
    ExitPlanMode,
    /// Ask to switch to auto mode.
    AutoModeSwitch,
    /// Run a client-side hook.
    Hook,
    /// Ask for a bearer token for the session's model provider.
    ProviderToken,
    /// Open a canvas on its provider.
    CanvasOpen,
    /// Close a canvas instance on its provider.
    CanvasClose,
    /// Invoke an action of a canvas instance on its provider.
    CanvasAction,
    /// Let the client rewrite sections of the system prompt.
    SystemMessageTransform,
    /// Execute an attempt of a factory run on the extension that provides the factory.
    FactoryExecute,
    /// Abort a factory run's attempts on the extension executing it.
    FactoryAbort,
}

impl ServerRequest {
    /// What the request is, in words, for error messages that no dialect frames.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            ServerRequest::UserInput => "user input requests",
            ServerRequest::ExitPlanMode => "exit-plan-mode requests",
            ServerRequest::AutoModeSwitch => "auto-mode-switch requests",
            ServerRequest::Hook => "hook invocations",
            ServerRequest::ProviderToken => "provider token requests",
            ServerRequest::CanvasOpen => "canvas open requests",
            ServerRequest::CanvasClose => "canvas close requests",
            ServerRequest::CanvasAction => "canvas action requests",
            ServerRequest::SystemMessageTransform => "system message transforms",
            ServerRequest::FactoryExecute => "factory executions",
            ServerRequest::FactoryAbort => "factory aborts",
        }
    }
}

/// What a gateway does with a frame the owner of a relayed session sent
/// ([`DialectHandler::owner_frame`]).
pub(crate) enum OwnerFrameUse {
    /// Deliver it as it is.
    AsIs,
    /// Deliver this body instead.
    Rewritten(Vec<u8>),
    /// The dialect took it (it delivers it later, or it was not the client's).
    Taken,
}

/// `params.sessionId` of a JSON-RPC message, if it names a session (one borrowed pass).
pub(crate) fn session_id_param(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        params: Option<ProbeParams<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct ProbeParams<'a> {
        #[serde(rename = "sessionId", borrow, default)]
        session_id: Option<std::borrow::Cow<'a, str>>,
    }
    let probe: Probe<'_> = serde_json::from_slice(body).ok()?;
    let id = probe.params?.session_id?;
    (!id.is_empty()).then(|| id.into_owned())
}

/// A dialect: how one kind of client talks to the host.
///
/// Every method has a no-op default except [`DialectHandler::handle_message`]. Handlers are
/// stateless (`&'static`): their state lives in the host as per-connection and per-session
/// values, so a handler may be re-entered (a message it handles emits an event it delivers).
pub(crate) trait DialectHandler: Sync {
    /// The state of a new connection of this dialect (read back with [`Host::conn_state`]).
    fn new_conn_state(&self) -> Box<dyn Any + Send> {
        Box::new(())
    }

    /// One JSON-RPC message from a connection of this dialect.
    fn handle_message(&self, host: &mut Host, conn: ConnId, message: jsonrpc::Message<'_>);

    /// One whole HTTP request ([`Framing::Http`](crate::Framing::Http): head and body) from
    /// a connection of this dialect, instead of [`DialectHandler::handle_message`]. A dialect
    /// whose connections use that framing reads the head itself (path, credentials) before
    /// the body; the default refuses the request and closes the connection.
    fn handle_http_request(&self, host: &mut Host, conn: ConnId, request: &[u8]) {
        let _ = request;
        host.fail_connection(
            conn,
            -32600,
            "this connection does not take HTTP requests".into(),
        );
    }

    /// Something `conn`'s requests waited for is ready (a GitHub token lookup,
    /// [`Host::github_identity`]): answer the requests that can be answered now.
    fn deferred_ready(&self, host: &mut Host, conn: ConnId) {
        let _ = (host, conn);
    }

    /// The requests that set up a connection of this dialect as `conn` was set up, in order,
    /// for a cluster node that relays `conn` to another node (which must see the same
    /// set-up): ACP's `initialize` with the client's own params; the Copilot SDK's
    /// connection-level registrations (`sessionFs.setProvider`, `llmInference.setProvider`).
    /// Each has the id [`RELAY_HANDSHAKE_ID`](super::RELAY_HANDSHAKE_ID). Empty when there is
    /// nothing to set up.
    fn relay_handshake(&self, _host: &Host, _conn: ConnId) -> Vec<Vec<u8>> {
        Vec::new()
    }

    /// The session a client frame of this dialect names: the one a cluster node looks up
    /// when it has not loaded it, and routes the frame by once another node owns it.
    /// `params.sessionId` by default (the Copilot SDK protocol's and ACP's way).
    fn named_session(&self, body: &[u8]) -> Option<String> {
        session_id_param(body)
    }

    /// A frame the owner of a relayed session sent for the client of `conn` (this host is
    /// its cluster gateway), before it is queued: deliver it as it is, rewritten, or not at
    /// all (the dialect took it). Events (`session.event`) do not come here.
    fn owner_frame(&self, _host: &mut Host, _conn: ConnId, _body: &[u8]) -> OwnerFrameUse {
        OwnerFrameUse::AsIs
    }

    /// The sessions the runtime found in its shared log changed
    /// ([`ClusterApi::set_cluster_sessions`](crate::host::ClusterApi::set_cluster_sessions)):
    /// these sessions, not loaded here, were `added` to it or `removed` from it.
    fn cluster_sessions_changed(&self, _host: &mut Host, _added: &[String], _removed: &[String]) {}

    /// The body every connection of this dialect receives for `event`, built once per event
    /// (the host frames it and queues it by reference). `None`: the dialect translates per
    /// connection in [`DialectHandler::deliver_event`].
    fn event_body(&self, _session: &str, _event: &Event) -> Option<Vec<u8>> {
        None
    }

    /// `event` for the connections of this dialect the event's audience admits, when
    /// [`DialectHandler::event_body`] returned `None`.
    fn deliver_event(&self, _host: &mut Host, _session: &str, _event: &Event, _conns: &[ConnId]) {}

    /// Called once per emitted event, after it was delivered (whether or not a connection of
    /// this dialect is attached). `data` is the event's data.
    fn event_emitted(&self, _host: &mut Host, _session: &str, _event: &Event, _data: &Value) {}

    /// The agent of `session` finished handling one input (its state, such as its prompt
    /// queue, can be read again: while it handles an input, the events it emits see no agent).
    fn agent_input_handled(&self, _host: &mut Host, _session: &str) {}

    /// A session was created, updated or deleted.
    fn session_changed(&self, _host: &mut Host, _change: SessionChange, _session: &str) {}

    /// `conn` (of this dialect) left `session`, before the host resolves what it leaves
    /// behind.
    fn conn_detached(&self, _host: &mut Host, _session: &str, _conn: ConnId) {}

    /// `conn` (of this dialect) ended because its peer closed it; `state` is its state
    /// ([`DialectHandler::new_conn_state`]), no longer in the host. Called before its sessions
    /// are detached, so that the dialect may keep what must outlive the connection.
    fn conn_ended(&self, _host: &mut Host, _conn: ConnId, _state: &mut (dyn Any + Send)) {}

    /// `session` is being deleted (still loaded, with its connections attached).
    fn session_deleting(&self, _host: &mut Host, _session: &str) {}

    /// A timer this dialect started with [`Host::start_dialect_timer`] is due.
    fn timer_fired(&self, _host: &mut Host, _conn: ConnId, _id: &OwnedId) {}

    /// A permission prompt of `session` is pending (its entry exists): the dialect may ask
    /// its clients, or decide it without asking.
    fn permission_requested(&self, _host: &mut Host, _session: &str, _request_id: &str) {}

    /// An attached connection of this dialect that runs the built-in operation `op` on its
    /// client, if any.
    fn builtin_executor(&self, _host: &Host, _session: &str, _op: &BuiltinOp) -> Option<ConnId> {
        None
    }

    /// Runs an approved built-in tool call on `conn` (returned by
    /// [`DialectHandler::builtin_executor`]); the host's pending request `request_id` ends
    /// with [`Host::resolve_tool_call`].
    fn start_builtin(
        &self,
        _host: &mut Host,
        _conn: ConnId,
        _session: &str,
        _request_id: &str,
        _tool_call_id: &str,
        _call: BuiltinCall,
    ) {
    }

    /// The server-to-client request (method and params) that asks a file provider of this
    /// dialect to perform `op` for `session`, if the dialect has one.
    fn fs_request(
        &self,
        _session: &str,
        _op: &super::FsPrimitive,
    ) -> Option<(&'static str, Value)> {
        None
    }

    /// Reads a file provider's answer to `op`.
    fn fs_answer(
        &self,
        _op: &super::FsPrimitive,
        _result: &Value,
    ) -> Result<super::FsAnswer, String> {
        Err("this client does not provide files".into())
    }

    /// A persisted event as this dialect's clients keep it in a session's `events.jsonl`
    /// (fields only the store needs left out).
    fn stored_event_json<'a>(&self, event: &'a Event) -> std::borrow::Cow<'a, [u8]> {
        std::borrow::Cow::Borrowed(&event.json)
    }

    /// A file provider of this dialect started keeping `session`'s state (its log is being
    /// written): the dialect writes its own state files ([`Host::write_state_file`]).
    fn state_mirror_started(&self, _host: &mut Host, _session: &str) {}

    /// Whether a client of this dialect that answers permission prompts (and is not an
    /// extension) may grant an extension access to them.
    fn grants_extension_access(&self) -> bool {
        false
    }

    /// The method name of `request` on this dialect's wire, or `None` when the dialect has
    /// no such request (the host then fails the call with a reason).
    fn server_request_method(&self, _request: ServerRequest) -> Option<&'static str> {
        None
    }

    /// A server-to-client request this dialect sent itself ([`ClientCall::Dialect`], with
    /// its `session` and `tag`) ended with `outcome`: its answer, an error, a timeout or the
    /// connection's close. Default: nothing to do.
    ///
    /// [`ClientCall::Dialect`]: crate::host::pending::ClientCall::Dialect
    fn client_call_finished(
        &self,
        _host: &mut Host,
        _session: &str,
        _tag: u64,
        _outcome: crate::correlation::Outcome,
    ) {
    }

    /// How a client of this dialect catches up after the host closed its connection for
    /// reading too slowly (the end of the closing message, after the reason).
    fn slow_reader_advice(&self) -> &'static str {
        "reconnect and load the session again to catch up"
    }

    /// The error a client of this dialect gets when a request it made through a bridge
    /// (`method`, when known) fails with `message`.
    fn request_failed(&self, _method: Option<&str>, message: &str) -> ErrorObject {
        ErrorObject::internal(message.to_owned())
    }

    /// Performs model HTTP exchange `call` of `session` through `conn`, a connection of
    /// this dialect that registered as an HTTP provider: send `request` to its client. The
    /// client's answers come back through [`Host::provided_http_event`]. `Err`: the exchange
    /// fails with that message.
    fn start_provided_http(
        &self,
        _host: &mut Host,
        _conn: ConnId,
        _call: u64,
        _session: &str,
        _request: &crate::model::HttpRequest,
    ) -> Result<(), String> {
        Err("this connection's protocol cannot perform HTTP requests".to_owned())
    }

    /// Tells the client of `conn` to abandon exchange `call` (nothing it sends for it
    /// matches any more).
    fn cancel_provided_http(&self, _host: &mut Host, _conn: ConnId, _call: u64) {}

    /// Output of a process `conn` started through the runtime.
    fn process_output(
        &self,
        _host: &mut Host,
        _conn: ConnId,
        _process: &super::ProcessInfo,
        _stream: ShellStream,
        _data: &[u8],
    ) {
    }

    /// A process `conn` started ended.
    fn process_exit(
        &self,
        _host: &mut Host,
        _conn: ConnId,
        _process: &super::ProcessInfo,
        _exit_code: Option<i32>,
    ) {
    }
}
