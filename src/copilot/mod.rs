//! The Copilot SDK dialect (protocol v3), over the neutral host.
//!
//! The official Copilot SDKs talk to the host through this dialect unmodified
//! (`Content-Length` framing). It owns:
//!
//! * `method_table`: the method table, every method named once next to its handler
//!   ([`methods`]: `connect`, `session.create`, `session.send`, the `handlePending*`
//!   answers, …); `methods`: the core handlers, their parameter types (`params`) and the
//!   runtime's error wording (`Request <method> failed with message: …`).
//! * `turns`: how a session event reaches a client (the `session.event` envelope, encoded
//!   once per event for every Copilot SDK connection), the `session.lifecycle` notifications
//!   to every connection, and `session.sendAndWait`, answered when its turn ends.
//! * `shell`: `session.shell.exec` / `kill` and the `shell.output` / `shell.exit`
//!   notifications; `user_shell`: `session.shell.executeUserRequested` /
//!   `cancelUserRequested` (a command the user typed, answered when it ends).
//! * `queue` (`session.queue.*`), `schedule` (`session.schedule.*`), `tasks`
//!   (`session.tasks.*` and the pending-answer methods of requests this server never leaves
//!   pending) and `workspaces` (checkpoints, large pastes, the diff).
//! * `surface` and its modules: the rest of the runtime's surface (`lifecycle`,
//!   `session_state`, `account`, `history`, `discovery`, `unsupported`), `llm_inference`
//!   (a client as the model transport) and `stored_state` (the plan and workspace files in
//!   the store).
//!
//! Everything else — sessions, attachments, fan-out, the bridges behind
//! `handlePendingToolCall` and friends — is the host's, reached through its calls.

mod account;
mod client_tasks;
mod config_discovery;
mod discovery;
mod event_log_wait;
mod factories;
mod fleet;
mod github_auth;
mod history;
mod lifecycle;
mod llm_inference;
mod mcp;
mod method_table;
mod methods;
mod params;
mod permissions;
mod plugins;
mod queue;
pub(crate) mod relay;
mod relayed_turns;
mod remote_control;
mod schedule;
mod session_fs;
mod session_metadata;
mod session_state;
mod session_store;
mod shell;
mod skills;
mod slash_commands;
mod sql_todos;
mod state_files;
mod stored_state;
mod surface;
mod tasks;
mod telemetry;
mod turns;
mod unsupported;
mod user_shell;
mod workspaces;

use serde_json::Value;

use crate::host::{
    ConnId, DialectHandler, DialectId, Host, ProcessInfo, ServerRequest, SessionChange, ShellStream,
};
use crate::jsonrpc::{self, code, ErrorObject};
use crate::session::Event;

pub use method_table::methods;
pub use unsupported::UNSUPPORTED_METHODS;

/// Protocol version of the Copilot SDK dialect.
pub const PROTOCOL_VERSION: u32 = 3;

/// This dialect's entry in the host's dialect table (see [`crate::dialect`]).
pub(crate) const ID: DialectId = DialectId(0);

/// The Copilot SDK dialect's handler.
pub(crate) struct Copilot;

/// What the dialect keeps per session.
#[derive(Debug, Default)]
struct SessionState {
    /// `session.sendAndWait` callers waiting for their turn to end.
    waiters: Vec<turns::Waiter>,
    /// Relayed callers kept for a gateway's re-attachment after their link broke.
    kept: relayed_turns::KeptCallers,
    /// The last `assistant.message` event of the running turn (for `sendAndWait`).
    last_assistant: Option<Event>,
    /// The `messageId` of the prompt whose turn is running (from its `user.message`).
    current_turn: Option<String>,
    /// The MCP Apps host context a client set (`session.mcp.apps.setHostContext`).
    mcp_host_context: Option<Value>,
}

/// What the dialect keeps per connection.
#[derive(Debug, Default)]
struct ConnState {
    /// Sessions this connection let go of with `session.destroy` (the SDK's `disconnect`):
    /// until it creates or resumes them again, its calls on them fail with "Session not
    /// found", as for an unloaded session. Other connections keep the session.
    released: Vec<String>,
    /// `session.create` requests waiting for their `gitHubToken`'s lookup.
    waiting_creates: Vec<github_auth::WaitingCreate>,
    /// `account.getQuota` requests waiting for their token's lookup.
    waiting_quotas: Vec<github_auth::WaitingQuota>,
    /// Its `connect` declared the `client` task kind: `session.tasks.list` shows it
    /// client-owned tasks.
    decodes_client_tasks: bool,
}

impl ConnState {
    fn is_released(host: &Host, conn: ConnId, session: &str) -> bool {
        host.conn_state_ref::<ConnState>(conn)
            .is_some_and(|c| c.released.iter().any(|s| s == session))
    }

    fn release(host: &mut Host, conn: ConnId, session: &str) {
        if let Some(c) = host.conn_state::<ConnState>(conn) {
            if !c.released.iter().any(|s| s == session) {
                c.released.push(session.to_owned());
            }
        }
    }

    fn reacquire(host: &mut Host, conn: ConnId, session: &str) {
        if let Some(c) = host.conn_state::<ConnState>(conn) {
            c.released.retain(|s| s != session);
        }
    }
}

impl DialectHandler for Copilot {
    fn slow_reader_advice(&self) -> &'static str {
        "reconnect, resume the session and call session.getMessages to catch up"
    }

    fn new_conn_state(&self) -> Box<dyn std::any::Any + Send> {
        Box::new(ConnState::default())
    }

    fn deferred_ready(&self, host: &mut Host, conn: ConnId) {
        github_auth::deferred_ready(host, conn);
    }

    fn handle_message(&self, host: &mut Host, conn: ConnId, message: jsonrpc::Message<'_>) {
        match message {
            jsonrpc::Message::Request { id, method, params } => {
                let id = id.to_owned();
                if !host.admit_request(conn, &id, "") {
                    return;
                }
                // `None`: answered later (e.g. `session.sendAndWait`).
                if let Some(result) = method_table::dispatch(host, conn, &id, &method, params) {
                    host.respond(conn, &id, result);
                }
            }
            jsonrpc::Message::Notification { method, params } => {
                if let Some(id) = crate::correlation::parse_cancel(&method, params) {
                    // Every request completes synchronously except sendAndWait, which still
                    // answers once when its turn ends.
                    host.mark_cancelled(conn, &id);
                }
            }
            jsonrpc::Message::Response { id, outcome } => {
                host.handle_client_response(conn, &id, outcome)
            }
        }
    }

    fn relay_handshake(&self, host: &Host, conn: ConnId) -> Vec<Vec<u8>> {
        let registration = |method: &str, params: Value| {
            let body = serde_json::json!({"jsonrpc": "2.0", "id": crate::host::RELAY_HANDSHAKE_ID,
                                          "method": method, "params": params});
            body.to_string().into_bytes()
        };
        let mut setup = Vec::new();
        if host.is_file_provider(conn) {
            // Where the client keeps its sessions' state, for the owner to keep it there too.
            let params = match host.file_state_path(conn) {
                Some(path) => serde_json::json!({"sessionStatePath": path}),
                None => serde_json::json!({}),
            };
            setup.push(registration("sessionFs.setProvider", params));
        }
        if host.is_http_provider(conn) {
            setup.push(registration(
                "llmInference.setProvider",
                serde_json::json!({}),
            ));
        }
        setup
    }

    fn event_body(&self, session: &str, event: &Event) -> Option<Vec<u8>> {
        Some(turns::event_body(session, event))
    }

    fn event_emitted(&self, host: &mut Host, session: &str, event: &Event, data: &Value) {
        turns::event_emitted(host, session, event, data);
        session_metadata::event_emitted(host, session, event, data);
        event_log_wait::event_emitted(host, session, event);
        state_files::event_emitted(host, session, event);
        telemetry::event_emitted(host, session, event, data);
    }

    fn state_mirror_started(&self, host: &mut Host, session: &str) {
        state_files::mirror_started(host, session);
    }

    fn stored_event_json<'a>(&self, event: &'a Event) -> std::borrow::Cow<'a, [u8]> {
        stored_state::wire_json(event)
    }

    fn session_changed(&self, host: &mut Host, change: SessionChange, session: &str) {
        let kind = match change {
            SessionChange::Created => "session.created",
            SessionChange::Updated => "session.updated",
            SessionChange::Deleted => "session.deleted",
        };
        turns::lifecycle(host, kind, session);
    }

    fn conn_detached(&self, host: &mut Host, session: &str, conn: ConnId) {
        turns::conn_detached(host, session, conn);
        client_tasks::owner_left(host, session, conn);
    }

    fn client_call_finished(
        &self,
        host: &mut Host,
        session: &str,
        tag: u64,
        outcome: crate::correlation::Outcome,
    ) {
        client_tasks::cancel_answered(host, session, tag, outcome);
    }

    fn session_deleting(&self, host: &mut Host, session: &str) {
        turns::session_deleting(host, session);
        event_log_wait::session_deleting(host, session);
        client_tasks::session_deleting(host, session);
    }

    fn timer_fired(&self, host: &mut Host, conn: ConnId, id: &jsonrpc::OwnedId) {
        event_log_wait::timer_fired(host, conn, id);
    }

    fn start_provided_http(
        &self,
        host: &mut Host,
        conn: ConnId,
        call: u64,
        session: &str,
        request: &crate::model::HttpRequest,
    ) -> Result<(), String> {
        llm_inference::start(host, conn, call, session, request)
    }

    fn cancel_provided_http(&self, host: &mut Host, conn: ConnId, call: u64) {
        llm_inference::cancel(host, conn, call);
    }

    fn fs_request(
        &self,
        session: &str,
        op: &crate::host::FsPrimitive,
    ) -> Option<(&'static str, Value)> {
        Some(session_fs::request(session, op))
    }

    fn fs_answer(
        &self,
        op: &crate::host::FsPrimitive,
        result: &Value,
    ) -> Result<crate::host::FsAnswer, String> {
        session_fs::answer(op, result)
    }

    fn grants_extension_access(&self) -> bool {
        true
    }

    fn server_request_method(&self, request: ServerRequest) -> Option<&'static str> {
        Some(match request {
            ServerRequest::UserInput => "userInput.request",
            ServerRequest::ExitPlanMode => "exitPlanMode.request",
            ServerRequest::AutoModeSwitch => "autoModeSwitch.request",
            ServerRequest::Hook => "hooks.invoke",
            ServerRequest::ProviderToken => "providerToken.getToken",
            ServerRequest::CanvasOpen => "canvas.open",
            ServerRequest::CanvasClose => "canvas.close",
            ServerRequest::CanvasAction => "canvas.action.invoke",
            ServerRequest::SystemMessageTransform => "systemMessage.transform",
            ServerRequest::FactoryExecute => "factory.execute",
            ServerRequest::FactoryAbort => "factory.abort",
        })
    }

    fn request_failed(&self, method: Option<&str>, message: &str) -> ErrorObject {
        let message = match method {
            Some(method) => format!("Request {method} failed with message: {message}"),
            None => format!("Request failed with message: {message}"),
        };
        ErrorObject::new(code::INTERNAL_ERROR, message)
    }

    fn process_output(
        &self,
        host: &mut Host,
        conn: ConnId,
        process: &ProcessInfo,
        stream: ShellStream,
        data: &[u8],
    ) {
        if !user_shell::output(host, process, data) {
            shell::output(host, conn, process, stream, data);
        }
    }

    fn process_exit(
        &self,
        host: &mut Host,
        conn: ConnId,
        process: &ProcessInfo,
        exit_code: Option<i32>,
    ) {
        if !user_shell::exit(host, process, exit_code) {
            shell::exit(host, conn, process, exit_code);
        }
    }
}
