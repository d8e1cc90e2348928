//! Built-in tool calls of the agent (`read_file`, `write_file`, `shell` scenario steps).
//!
//! The flow mirrors a client tool call: `tool.execution_start` → `permission.requested`
//! (kind `read` / `write` / `shell`, or the `path` / `url` / `hook` prompt the step asks for)
//! → the decision → the operation → `tool.execution_complete`. The operation runs on an
//! attached client whose dialect can run it (ACP clients that advertised `fs/*` or
//! `terminal/*`); it is then a pending client call of the session (so an abort or the client
//! leaving resolves it exactly once). With no such client, the call completes with the
//! step's scripted result, or, for a model's call, the runtime performs it (`tool_ops`).

use crate::host::pending::{Approval, PermissionAsk, ToolCaller};

use crate::agent::{BuiltinCall, ToolOutcome};

use crate::host::{Host, Pending};

impl Host {
    /// Starts a built-in tool call for the session's agent.
    pub(crate) fn start_builtin(
        &mut self,
        session: &str,
        tool_call_id: &str,
        call: &BuiltinCall,
        turn_id: &str,
    ) {
        let Some(live) = self.sessions.get(session) else {
            return;
        };
        let mut call = call.clone();
        call.resolve_path(live.session.cwd.as_deref());
        let problem = if call.model_arguments.is_some() {
            self.prepare_model_builtin(session, &mut call)
        } else {
            None
        };
        let name = call.tool_name();
        let arguments = call.arguments();
        self.emit_tool_start(session, tool_call_id, name, &arguments, turn_id);
        if let Some(message) = problem {
            let code = "failure".to_owned();
            self.complete_tool(
                session,
                tool_call_id,
                ToolOutcome::Failure { message, code },
            );
            return;
        }
        let Some(request) = call.permission_request(tool_call_id) else {
            self.run_builtin(session, tool_call_id, call);
            return;
        };
        self.ask_permission(
            session,
            PermissionAsk {
                tool_call_id: tool_call_id.to_owned(),
                tool_name: name.to_owned(),
                arguments,
                request,
                approval: Approval::Builtin(Box::new(call)),
            },
        );
    }

    /// Runs an approved built-in tool call: on a capable client (a dialect's
    /// [`builtin_executor`](crate::host::DialectHandler::builtin_executor)), else with the
    /// scripted result.
    pub(crate) fn run_builtin(&mut self, session: &str, tool_call_id: &str, call: BuiltinCall) {
        let executor = self.dialects.iter().find_map(|handler| {
            handler
                .builtin_executor(self, session, &call.op)
                .map(|conn| (*handler, conn))
        });
        let Some((handler, conn)) = executor else {
            if call.model_arguments.is_some() {
                // A model's call: the runtime performs it.
                self.perform_builtin(session, tool_call_id, call);
            } else {
                self.complete_tool(session, tool_call_id, ToolOutcome::Success(call.result));
            }
            return;
        };
        let request_id = self.ids.next_uuid();
        if let Some(live) = self.sessions.get_mut(session) {
            // A client call of the session: an abort or the client leaving resolves it.
            live.pending.insert(
                request_id.clone(),
                Pending::ExternalTool {
                    tool_call_id: tool_call_id.to_owned(),
                    owner: conn,
                    caller: ToolCaller::Agent,
                },
            );
        }
        handler.start_builtin(self, conn, session, &request_id, tool_call_id, call);
    }
}
