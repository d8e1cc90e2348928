//! The method table: every JSON-RPC method the Copilot SDK dialect answers, each named once,
//! next to its handler.
//!
//! In the manner of rust-analyzer's `RequestDispatcher` (`.on::<R>(handler)`), a handler is
//! registered with the *kind* of call it is, and the table does the shared work of that
//! kind before the handler runs: decoding the params as an object, checking the session
//! named by `sessionId` is loaded (the runtime's "Session not found" otherwise), naming the
//! method in a bare failure. Handlers get the method's name from the [`Call`], so no name is
//! written twice, and [`methods`] (the answered list: the docs and their test) is read off
//! the same table.
//!
//! The table is built once, sorted by name; a request finds its route by binary search
//! (about nine string comparisons for the ~290 names, no hashing, no allocation). A name
//! registered twice fails the build of the table (its unit test).

use std::sync::LazyLock;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::host::{ConnId, Host};
use crate::jsonrpc::{code, ErrorObject, OwnedId};

use super::session_state::session_id;
use super::surface::{decode, known, Answer};
use super::{
    account, client_tasks, config_discovery, discovery, event_log_wait, factories, fleet,
    github_auth, history, lifecycle, llm_inference, mcp, methods as core, permissions, plugins,
    queue, remote_control, schedule, session_metadata, session_state, session_store, skills,
    sql_todos, tasks, unsupported, user_shell, workspaces,
};

/// A method's answer, or `None` when it is answered later (`session.sendAndWait`, …).
pub(super) type Reply = Option<Answer>;

/// One request being answered.
pub(super) struct Call<'a> {
    /// The connection that sent it.
    pub(super) conn: ConnId,
    /// Its JSON-RPC id (for answers that come later).
    pub(super) id: &'a OwnedId,
    /// The method, as the table names it.
    pub(super) method: &'static str,
}

/// How a method is answered: what the table does before (and after) its handler.
#[derive(Clone, Copy)]
enum Handler {
    /// Answered now, from the raw params.
    Raw(fn(&mut Host, &Call<'_>, Option<&RawValue>) -> Answer),
    /// Answered now or later (`None`), from the raw params.
    Later(fn(&mut Host, &Call<'_>, Option<&RawValue>) -> Reply),
    /// Answered now, from the params as a JSON value (absent params are `{}`).
    Object(fn(&mut Host, &Call<'_>, &Value) -> Answer),
    /// A loaded session's method: the params' `sessionId` must name a loaded session.
    Session(fn(&mut Host, &Call<'_>, &str, &Value) -> Answer),
    /// As `Session`, for handlers that fail with a bare message (`session_state`): the
    /// table adds the runtime's `Request <method> failed with message:` wording.
    State(fn(&mut Host, &str, &Value) -> Answer),
    /// Always the same answer (JSON text).
    Constant(&'static str),
    /// Always the same answer (JSON text) for a loaded session.
    SessionConstant(&'static str),
    /// A hosted-product feature this server does not offer ([`unsupported`]).
    Unsupported(&'static str),
}

struct Route {
    method: &'static str,
    /// Answered before the connection authenticated (`connect` only).
    open: bool,
    handler: Handler,
}

/// The routes, sorted by method name.
pub(super) struct Table {
    routes: Vec<Route>,
}

impl Table {
    fn on(&mut self, method: &'static str, handler: Handler) -> &mut Self {
        self.routes.push(Route {
            method,
            open: false,
            handler,
        });
        self
    }

    fn open(
        &mut self,
        method: &'static str,
        f: fn(&mut Host, &Call<'_>, Option<&RawValue>) -> Answer,
    ) -> &mut Self {
        self.routes.push(Route {
            method,
            open: true,
            handler: Handler::Raw(f),
        });
        self
    }

    fn raw(
        &mut self,
        method: &'static str,
        f: fn(&mut Host, &Call<'_>, Option<&RawValue>) -> Answer,
    ) -> &mut Self {
        self.on(method, Handler::Raw(f))
    }

    fn later(
        &mut self,
        method: &'static str,
        f: fn(&mut Host, &Call<'_>, Option<&RawValue>) -> Reply,
    ) -> &mut Self {
        self.on(method, Handler::Later(f))
    }

    fn object(
        &mut self,
        method: &'static str,
        f: fn(&mut Host, &Call<'_>, &Value) -> Answer,
    ) -> &mut Self {
        self.on(method, Handler::Object(f))
    }

    fn session(
        &mut self,
        method: &'static str,
        f: fn(&mut Host, &Call<'_>, &str, &Value) -> Answer,
    ) -> &mut Self {
        self.on(method, Handler::Session(f))
    }

    fn state(
        &mut self,
        method: &'static str,
        f: fn(&mut Host, &str, &Value) -> Answer,
    ) -> &mut Self {
        self.on(method, Handler::State(f))
    }

    fn constant(&mut self, method: &'static str, json: &'static str) -> &mut Self {
        self.on(method, Handler::Constant(json))
    }

    fn session_constant(&mut self, method: &'static str, json: &'static str) -> &mut Self {
        self.on(method, Handler::SessionConstant(json))
    }

    /// Sorts the routes; a name registered twice is a bug of the table.
    fn sorted(mut self) -> Self {
        self.routes.sort_unstable_by_key(|r| r.method);
        for pair in self.routes.windows(2) {
            assert!(
                pair[0].method != pair[1].method,
                "{} is in the Copilot method table twice",
                pair[0].method
            );
        }
        self
    }

    fn find(&self, method: &str) -> Option<&Route> {
        let i = self
            .routes
            .binary_search_by(|r| r.method.cmp(method))
            .ok()?;
        Some(&self.routes[i])
    }
}

/// The table. Each method once, grouped by the module that answers it.
#[rustfmt::skip]
fn table() -> Table {
    let mut t = Table { routes: Vec::with_capacity(320) };
    // Core (`methods`, here `core`): connection, sessions, turns, pending answers, canvases.
    t.open("connect", core::connect)
        .raw("ping", core::ping)
        .raw("status.get", core::status)
        .raw("auth.getStatus", core::auth_status)
        .later("models.list", core::models_list)
        .later("session.create", github_auth::create)
        .raw("session.resume", core::resume)
        .raw("session.send", core::send_message)
        .later("session.sendAndWait", core::send_and_wait)
        .raw("session.abort", core::abort)
        .raw("session.detach", core::detach)
        .raw("session.delete", core::delete)
        .raw("session.list", core::list)
        .raw("session.getMetadata", core::get_metadata)
        .raw("session.getLastId", core::last_id)
        .raw("session.getMessages", core::get_messages)
        .raw("session.getForeground", core::foreground)
        .raw("session.setForeground", core::set_foreground)
        .raw("session.permissions.handlePendingPermissionRequest", core::answer_permission)
        .raw("session.tools.handlePendingToolCall", core::answer_tool)
        .later("session.ui.elicitation", core::elicitation)
        .later("session.ui.ephemeralQuery", mcp::ephemeral_query)
        .raw("session.ui.handlePendingElicitation", core::answer_elicitation)
        .raw("session.ui.handlePendingSampling", core::answer_sampling)
        .later("session.commands.execute", core::execute_command)
        .raw("session.commands.handlePendingCommand", core::answer_command)
        .raw("session.commands.enqueue", core::enqueue_command)
        .raw("session.commands.respondToQueuedCommand", core::answer_queued_command)
        .raw("session.canvas.list", core::canvas_list)
        .raw("session.canvas.listOpen", core::canvas_list_open)
        .later("session.canvas.open", core::canvas_open)
        .later("session.canvas.close", core::canvas_close)
        .later("session.canvas.action.invoke", core::canvas_action)
        .later("session.factory.run", factories::run)
        .later("session.factory.resume", factories::resume)
        .raw("session.factory.getRun", factories::get_run)
        .raw("session.factory.cancel", factories::cancel)
        .raw("session.mcp.apps.setHostContext", core::mcp_set_host_context)
        .raw("session.mcp.apps.getHostContext", core::mcp_get_host_context)
        .raw("session.shell.exec", core::shell_exec)
        .raw("session.shell.kill", core::shell_kill)
        .raw("sessionFs.setProvider", core::set_file_provider)
        .raw("runtime.shutdown", core::shutdown);
    // `mcp`: a session's MCP servers and apps, and the user configuration.
    t.session("session.mcp.list", mcp::list)
        .session("session.mcp.listTools", mcp::list_tools)
        .session("session.mcp.startServer", mcp::start_server)
        .session("session.mcp.stopServer", mcp::stop_server)
        .session("session.mcp.restartServer", mcp::restart_server)
        .session("session.mcp.isServerRunning", mcp::is_server_running)
        .session("session.mcp.enable", mcp::enable)
        .session("session.mcp.disable", mcp::disable)
        .session("session.mcp.reload", mcp::reload)
        .session("session.mcp.setEnvValueMode", mcp::set_env_value_mode)
        .session("session.mcp.removeGitHub", mcp::remove_github)
        .later("session.mcp.executeSampling", mcp::execute_sampling)
        .session("session.mcp.cancelSamplingExecution", mcp::cancel_sampling)
        .session("session.mcp.oauth.login", mcp::oauth_login)
        .session("session.mcp.oauth.handlePendingRequest", mcp::oauth_answer)
        .session("session.mcp.apps.listTools", mcp::app_tools)
        .later("session.mcp.apps.readResource", mcp::read_resource)
        .later("session.mcp.apps.callTool", mcp::call_tool)
        .raw("session.mcp.apps.diagnose", mcp::diagnose)
        .object("mcp.config.list", mcp::config_list)
        .object("mcp.config.add", mcp::config_add)
        .object("mcp.config.update", mcp::config_update)
        .object("mcp.config.remove", mcp::config_remove)
        .constant("mcp.config.reload", "null")
        .object("mcp.config.enable", mcp::config_enable)
        .object("mcp.config.disable", mcp::config_disable)
        .object("mcp.discover", mcp::discover);
    // `skills`, `shell` and `user_shell`.
    // `plugins`: installed plugins and marketplaces in the data directory.
    t.later("plugins.list", plugins::list)
        .later("plugins.install", plugins::install)
        .later("plugins.uninstall", plugins::uninstall)
        .later("plugins.update", plugins::update)
        .later("plugins.updateAll", plugins::update_all)
        .later("plugins.enable", plugins::enable)
        .later("plugins.disable", plugins::disable)
        .later("plugins.marketplaces.list", plugins::marketplaces_list)
        .later("plugins.marketplaces.add", plugins::marketplaces_add)
        .later("plugins.marketplaces.remove", plugins::marketplaces_remove)
        .later("plugins.marketplaces.browse", plugins::marketplaces_browse)
        .later("plugins.marketplaces.refresh", plugins::marketplaces_refresh)
        .later("session.plugins.list", plugins::session_list)
        .later("session.plugins.reload", plugins::session_reload);
    t.later("skills.discover", skills::discover)
        .later("session.skills.list", skills::list)
        .later("session.skills.ensureLoaded", skills::ensure_loaded)
        .later("session.skills.reload", skills::reload)
        .later("session.skills.enable", skills::enable)
        .later("session.skills.disable", skills::disable)
        .later("session.shell.executeUserRequested", user_shell::execute)
        .raw("session.shell.cancelUserRequested", user_shell::cancel)
        .later("session.workspaces.diff", user_shell::diff);
    // `lifecycle`.
    t.session("sessions.fork", lifecycle::fork)
        .session("session.destroy", lifecycle::destroy)
        .session("session.shutdown", lifecycle::shutdown)
        // The session's state is in memory and its events are handed to the store as they
        // are written: nothing to flush or unload.
        .session_constant("session.suspend", "null")
        .session_constant("sessions.save", "{}")
        .session("session.log", lifecycle::log)
        .session("session.eventLog.registerInterest", lifecycle::register_interest)
        .session("session.eventLog.releaseInterest", lifecycle::release_interest)
        .session("session.metadata.isProcessing", lifecycle::is_processing)
        .session("session.usage.getMetrics", lifecycle::usage_metrics)
        .session("session.history.truncate", lifecycle::truncate)
        .session("session.history.listRewindPoints", lifecycle::rewind_points)
        .session("session.history.previewRewind", lifecycle::preview_rewind)
        .later("session.history.rewind", lifecycle::rewind);
    // `session_state`: name, mode, model, plan, workspace files, agents, permission mode.
    t.state("session.name.get", session_state::name_get)
        .state("session.name.set", session_state::name_set)
        .state("session.name.setAuto", session_state::name_set_auto)
        .state("session.metadata.snapshot", session_state::snapshot)
        .state("session.mode.get", session_state::mode_get)
        .state("session.mode.set", session_state::mode_set)
        .state("session.model.getCurrent", session_state::model_current)
        .later("session.model.list", session_state::model_list)
        .state("session.model.switchTo", session_state::model_switch)
        .session("session.provider.add", session_state::provider_add)
        .state("session.model.setReasoningEffort", session_state::reasoning_effort)
        .state("session.plan.read", session_state::plan_read)
        .state("session.plan.update", session_state::plan_update)
        .state("session.plan.delete", session_state::plan_delete)
        .state("session.workspaces.getWorkspace", session_state::workspace)
        .state("session.workspaces.listFiles", session_state::files_list)
        .state("session.workspaces.createFile", session_state::file_create)
        .state("session.workspaces.readFile", session_state::file_read)
        .state("session.agent.list", session_state::agent_list)
        .state("session.agent.reload", session_state::agent_list)
        .state("session.agent.getCurrent", session_state::agent_current)
        .state("session.agent.select", session_state::agent_select)
        .state("session.agent.deselect", session_state::agent_deselect)
        .state("session.provider.getEndpoint", session_state::endpoint)
        .state("session.permissions.setApproveAll", session_state::approve_all)
        .state("session.permissions.setMode", session_state::permission_mode_set)
        .state("session.permissions.getMode", session_state::permission_mode_get)
        .state("session.options.update", session_state::options_update);
    // `account`: accounts signed in to this server, the user's settings file.
    t.later("account.getQuota", github_auth::get_quota)
        .later("user.settings.get", account::settings_get)
        .later("user.settings.set", account::settings_set)
        .later("user.settings.reload", account::settings_reload)
        .later("skills.config.setDisabledSkills", account::set_disabled_skills)
        .later("skills.config.setSkillDisabled", account::set_skill_disabled);
    t.raw("account.getCurrentAuth", account::current_auth)
        .raw("account.getAllUsers", account::all_users)
        .raw("account.login", account::login)
        .raw("account.logout", account::logout)
        .session("session.gitHubAuth.getStatus", account::github_status)
        .session("session.gitHubAuth.setCredentials", account::github_credentials)
        .raw("secrets.addFilterValues", account::secrets)
        .raw("tools.list", account::tools_list);
    // `llm_inference`: a client as the model's HTTP transport.
    t.raw("llmInference.setProvider", llm_inference::set_provider)
        .raw("llmInference.httpResponseStart", llm_inference::http_response_start)
        .raw("llmInference.httpResponseChunk", llm_inference::http_response_chunk);
    // `history` and `event_log_wait`.
    t.later("session.eventLog.read", event_log_wait::read)
        .session("session.eventLog.tail", history::tail)
        .session("session.history.compact", history::compact)
        .session("session.history.summarizeForHandoff", history::summarize_for_handoff);
    // `discovery`: what this server has none of, and the cheap session queries.
    t.later("agents.discover", config_discovery::discover_agents)
        .later("instructions.discover", config_discovery::discover_instructions)
        .raw("skills.getDiscoveryPaths", config_discovery::skill_paths)
        .raw("agents.getDiscoveryPaths", config_discovery::agent_paths)
        .raw("instructions.getDiscoveryPaths", config_discovery::instruction_paths);
    t.constant("hooks.discover", r#"{"hooks":[],"warnings":[],"errors":[]}"#)
        .constant("models.getBuiltInCatalog", r#"{"models":[]}"#)
        .session("session.skills.getInvoked", skills::invoked)
        .session("session.extensions.list", factories::extensions_list)
        .session_constant("session.instructions.getSources", r#"{"sources":[]}"#)
        .session_constant("session.gitHubAuth.getCurrentAuthInfo", "null")
        .session_constant("session.gitHubAuth.getAllAuthAvailable", "[]")
        .session_constant("session.gitHubAuth.lastAuthErrors", "[]")
        // Compaction is synchronous: there is never one to cancel or abort.
        .session_constant("session.history.cancelBackgroundCompaction", r#"{"cancelled":false}"#)
        .session_constant("session.history.abortManualCompaction", r#"{"aborted":false}"#)
        .session("session.metadata.activity", discovery::activity)
        .session("session.interruptMainTurn", discovery::interrupt_main_turn)
        .raw("commands.list", discovery::builtin_commands)
        .session("session.commands.list", discovery::commands_list)
        .session("session.commands.invoke", discovery::commands_invoke)
        .session("session.extensions.enable", discovery::no_extensions)
        .session("session.extensions.disable", discovery::no_extensions)
        .session("session.extensions.reload", discovery::no_extensions)
        .session("session.metadata.getClientMetadata", discovery::client_metadata_get)
        .session("session.metadata.updateClientMetadata", discovery::client_metadata_update)
        .session("session.permissions.pendingRequests", discovery::pending_permissions)
        .session("sessions.delete", discovery::delete)
        .object("sessions.findByPrefix", discovery::find_by_prefix)
        // One process holds every session of this server: none is in use elsewhere.
        .constant("sessions.checkInUse", r#"{"inUse":[]}"#)
        .raw("sessions.listNonEmptySessionIds", discovery::non_empty_sessions);
    // `remote_control`: this server has no Mission Control.
    t.constant("sessions.getRemoteControlStatus", r#"{"status":{"state":"off"}}"#)
    .object("sessions.setRemoteControlSteering", remote_control::set_steering)
    .constant("sessions.stopRemoteControl", r#"{"stopped":false,"status":{"state":"off"}}"#)
    .object("sessions.transferRemoteControl", remote_control::transfer)
    .object("sessions.startRemoteControl", remote_control::start)
    .object("agentRegistry.spawn", remote_control::spawn)
    .object("sessions.open", remote_control::open)
    .object("session.remote.notifySteerableChanged", remote_control::steerable_changed);
    // `session_store`: the server-level `sessions.*` over the loaded sessions.
    t.raw("sessions.list", core::list)
        .object("sessions.close", session_store::close)
        .object("sessions.releaseLock", session_store::release_lock)
        .object("sessions.getSizes", session_store::sizes)
        .object("sessions.bulkDelete", session_store::bulk_delete)
        .object("sessions.pruneOld", session_store::prune)
        .object("sessions.findByTaskId", session_store::find_by_task_id)
        .object("sessions.getLastForContext", session_store::last_for_context)
        .object("sessions.enrichMetadata", session_store::enrich)
        .object("sessions.setAdditionalPlugins", session_store::set_additional_plugins)
        .session_constant("sessions.reloadPluginHooks", "{}")
        .session_constant("sessions.loadDeferredRepoHooks", r#"{"startupPrompts":[],"hookCount":0}"#);
    // `session_metadata`: context, tools, visibility, completions, telemetry.
    t.session("session.metadata.setWorkingDirectory", session_metadata::set_working_directory)
    .session("session.metadata.recordContextChange", session_metadata::record_context_change)
    .session("session.metadata.contextInfo", session_metadata::context_info)
    .session("session.metadata.recomputeContextTokens", session_metadata::recompute_context_tokens)
    .session("session.metadata.getContextAttribution", session_metadata::context_attribution)
    .session("session.metadata.getContextHeaviestMessages", session_metadata::heaviest_messages)
    .session("session.tools.getCurrentMetadata", session_metadata::tools_metadata)
    // The tools are the session's declared and built-in ones, known at once: nothing to
    // initialize or validate.
    .session_constant("session.tools.initializeAndValidate", "{}")
    .session("session.tools.updateSubagentSettings", session_metadata::update_subagent_settings)
    // A local session is not synced to Mission Control: no status, no share URL.
    .session_constant("session.visibility.get", r#"{"synced":false}"#)
    .session("session.visibility.set", session_metadata::visibility_set)
    // No completion provider is registered with agentwire.
    .session_constant("session.completions.getTriggerCharacters", r#"{"triggerCharacters":[]}"#)
    .session("session.completions.request", session_metadata::completions_request)
    .session("session.fleet.start", fleet::start)
    .later("session.plan.readSqlTodos", sql_todos::todos)
    .later("session.plan.readSqlTodosWithDependencies", sql_todos::with_dependencies)
    // agentwire runs no language servers for a session: nothing to start.
    .session_constant("session.lsp.initialize", "null")
    // agentwire sends no telemetry: there is no engagement id.
    .session_constant("session.telemetry.getEngagementId", "{}")
    .session("session.telemetry.setFeatureOverrides", session_metadata::set_feature_overrides)
    .session("session.extensions.sendAttachmentsToMessage", session_metadata::send_attachments);
    // `permissions`: rules, paths, locations, folder trust, URLs.
    t.session("session.permissions.configure", permissions::configure)
        .session("session.permissions.modifyRules", permissions::modify_rules)
        .session("session.permissions.setRequired", permissions::set_required)
        .session("session.permissions.resetSessionApprovals", permissions::reset_session_approvals)
        .session("session.permissions.notifyPromptShown", permissions::notify_prompt_shown)
        .session("session.permissions.paths.list", permissions::paths_list)
        .session("session.permissions.paths.add", permissions::paths_add)
        .session("session.permissions.paths.updatePrimary", permissions::paths_update_primary)
        .session("session.permissions.paths.isPathWithinAllowedDirectories", permissions::path_allowed)
        .session("session.permissions.paths.isPathWithinWorkspace", permissions::path_in_workspace)
        .session("session.permissions.locations.resolve", permissions::locations_resolve)
        .session("session.permissions.locations.apply", permissions::locations_apply)
        .session("session.permissions.locations.addToolApproval", permissions::locations_add_tool_approval)
        .session("session.permissions.folderTrust.isTrusted", permissions::folder_trusted)
        .session("session.permissions.folderTrust.addTrusted", permissions::folder_trust)
        .session("session.permissions.urls.setUnrestrictedMode", permissions::urls_unrestricted);
    // `queue`, `schedule`, `tasks`, `workspaces`.
    t.raw("session.queue.pendingItems", queue::pending_items)
        .raw("session.queue.removeMostRecent", queue::remove_most_recent)
        .raw("session.queue.clear", queue::clear)
        .raw("session.schedule.list", schedule::list)
        .raw("session.schedule.stop", schedule::stop)
        .raw("session.tasks.list", tasks::list)
        .raw("session.tasks.refresh", tasks::nothing_to_do)
        .later("session.tasks.waitForPending", tasks::wait_for_pending)
        .raw("session.tasks.startAgent", tasks::start_agent)
        .raw("session.cancelAllBackgroundAgents", tasks::cancel_all)
        // No task is running to promote.
        .raw("session.tasks.getCurrentPromotable", tasks::nothing_to_do)
        .raw("session.tasks.promoteCurrentToBackground", tasks::nothing_to_do)
        .raw("session.tasks.getProgress", tasks::progress)
        .raw("session.tasks.promoteToBackground", tasks::promote)
        .later("session.tasks.cancel", tasks::cancel)
        .raw("session.tasks.register", client_tasks::register)
        .raw("session.tasks.update", client_tasks::update)
        .raw("session.tasks.remove", tasks::remove)
        .raw("session.tasks.sendMessage", tasks::send_message)
        // Requests this server never leaves pending: there is nothing to answer.
        .raw("session.ui.handlePendingUserInput", tasks::nothing_pending)
        .raw("session.ui.handlePendingAutoModeSwitch", tasks::nothing_pending)
        .raw("session.ui.handlePendingExitPlanMode", tasks::nothing_pending)
        .raw("session.ui.handlePendingSessionLimitsExhausted", tasks::nothing_pending)
        .raw("session.mcp.headers.handlePendingHeadersRefreshRequest", tasks::nothing_pending)
        .raw("session.ui.registerDirectAutoModeSwitchHandler", tasks::register_direct_handler)
        .raw("session.ui.unregisterDirectAutoModeSwitchHandler", tasks::unregister_direct_handler)
        .raw("session.workspaces.listCheckpoints", workspaces::list_checkpoints)
        .raw("session.workspaces.readCheckpoint", workspaces::read_checkpoint)
        .raw("session.workspaces.saveLargePaste", workspaces::save_large_paste);
    // The hosted product's features, each answered "not available on this server".
    for (method, feature) in unsupported::UNSUPPORTED_METHODS {
        t.on(method, Handler::Unsupported(feature));
    }
    t.sorted()
}

static TABLE: LazyLock<Table> = LazyLock::new(table);

/// Every method this dialect answers, by name (anything else gets -32601 `Unhandled method
/// <m>`, except the hosted-product features of
/// [`UNSUPPORTED_METHODS`](super::UNSUPPORTED_METHODS), which get a "not available on this
/// server" error).
pub fn methods() -> impl Iterator<Item = &'static str> {
    TABLE
        .routes
        .iter()
        .filter(|r| !matches!(r.handler, Handler::Unsupported(_)))
        .map(|r| r.method)
}

/// Answers one request. `None` means the answer comes later (`session.sendAndWait`).
pub(super) fn dispatch(
    host: &mut Host,
    conn: ConnId,
    id: &OwnedId,
    method: &str,
    params: Option<&RawValue>,
) -> Reply {
    let route = TABLE.find(method);
    if !route.is_some_and(|r| r.open) && !host.is_authenticated(conn) {
        return Some(Err(ErrorObject::new(-32001, "AUTHENTICATION_REQUIRED")));
    }
    let Some(route) = route else {
        return Some(Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("Unhandled method {method}"),
        )));
    };
    let call = Call {
        conn,
        id,
        method: route.method,
    };
    let answer = match route.handler {
        Handler::Raw(f) => f(host, &call, params),
        Handler::Later(f) => return f(host, &call, params),
        Handler::Object(f) => decode::<Value>(params).and_then(|p| f(host, &call, &p)),
        Handler::Session(f) => decode::<Value>(params).and_then(|p| {
            let session = loaded(host, &call, &p)?;
            f(host, &call, &session, &p)
        }),
        Handler::State(f) => decode::<Value>(params).and_then(|p| {
            let session = loaded(host, &call, &p)?;
            f(host, &session, &p).map_err(|e| session_state::with_method(e, call.method))
        }),
        Handler::Constant(json) => Ok(constant(json)),
        Handler::SessionConstant(json) => decode::<Value>(params).and_then(|p| {
            loaded(host, &call, &p)?;
            Ok(constant(json))
        }),
        Handler::Unsupported(feature) => Err(unsupported::error(call.method, feature)),
    };
    Some(answer)
}

/// The params' `sessionId`, when it names a loaded session (the runtime's "Session not
/// found" otherwise).
fn loaded(host: &Host, call: &Call<'_>, p: &Value) -> Result<String, ErrorObject> {
    let session = session_id(p)?;
    known(host, call.method, &session)?;
    Ok(session)
}

fn constant(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_routed_once_and_constants_are_json() {
        let table = table();
        let answered = methods().count();
        assert_eq!(
            answered + unsupported::UNSUPPORTED_METHODS.len(),
            table.routes.len()
        );
        for route in &table.routes {
            assert!(table.find(route.method).is_some(), "{}", route.method);
            if let Handler::Constant(json) | Handler::SessionConstant(json) = route.handler {
                assert!(
                    serde_json::from_str::<Value>(json).is_ok(),
                    "{}: {json}",
                    route.method
                );
            }
        }
        assert!(table.find("no.such.method").is_none());
        assert_eq!(table.routes.iter().filter(|r| r.open).count(), 1);
    }
}
