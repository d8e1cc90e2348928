//! The permission state methods: `session.permissions.configure`, `modifyRules`,
//! `resetSessionApprovals`, `setRequired`, `notifyPromptShown`, `paths.*`, `locations.*`,
//! `folderTrust.*` and `urls.setUnrestrictedMode`: their JSON-RPC shapes (the SDK's
//! generated `rpc.ts`). The state and the decisions it drives are the host's
//! (`host::permission_rules`); `approveAllToolPermissionRequests` is `setApproveAll`'s flag.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::host::requests::permission_rules::{
    approval_rules, rules_json, PathError, PathsConfig, PermissionRule, PermissionsPatch,
    RuleScope, UrlsConfig,
};
use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

use super::method_table::Call;
use super::surface::{failed, Answer};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigureParams {
    approve_all_tool_permission_requests: Option<bool>,
    approve_all_read_permission_requests: Option<bool>,
    rules: Option<RulesSet>,
    paths: Option<PathsParams>,
    urls: Option<UrlsParams>,
    #[serde(default)]
    additional_content_exclusion_policies: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct RulesSet {
    approved: Vec<PermissionRule>,
    denied: Vec<PermissionRule>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PathsParams {
    #[serde(default)]
    unrestricted: bool,
    #[serde(default)]
    additional_directories: Vec<String>,
    /// Accepted; no temp directory is listed (see `host::permission_rules`).
    #[serde(rename = "includeTempDirectory")]
    _include_temp_directory: Option<bool>,
    workspace_path: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UrlsParams {
    #[serde(default)]
    unrestricted: bool,
    #[serde(default)]
    initial_allowed: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModifyRulesParams {
    scope: String,
    #[serde(default)]
    add: Vec<PermissionRule>,
    #[serde(default)]
    remove: Vec<PermissionRule>,
    #[serde(default)]
    remove_all: bool,
}

#[derive(Deserialize)]
struct PathParams {
    path: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkingDirectoryParams {
    working_directory: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddToolApprovalParams {
    location_key: String,
    approval: Value,
}

#[derive(Deserialize)]
struct RequiredParams {
    required: bool,
}

#[derive(Deserialize)]
struct PromptShownParams {
    message: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResetParams {
    include_location: Option<bool>,
}

#[derive(Deserialize)]
struct EnabledParams {
    enabled: bool,
}

fn ok() -> Answer {
    Ok(json!({"success": true}))
}

pub(super) fn configure(host: &mut Host, call: &Call<'_>, session: &str, p: &Value) -> Answer {
    let c: ConfigureParams = params(p.clone())?;
    if c.additional_content_exclusion_policies
        .as_ref()
        .is_some_and(|p| !p.is_empty())
    {
        return Err(failed(
            call.method,
            "content exclusion policies are not supported on this server",
        ));
    }
    let rules = match c.rules {
        Some(set) => Some((checked(set.approved)?, checked(set.denied)?)),
        None => None,
    };
    let patch = PermissionsPatch {
        approve_all_reads: c.approve_all_read_permission_requests,
        rules,
        paths: c.paths.map(|p| PathsConfig {
            workspace_path: p.workspace_path,
            additional_directories: p.additional_directories,
            unrestricted: p.unrestricted,
        }),
        urls: c.urls.map(|u| UrlsConfig {
            initial_allowed: u.initial_allowed,
            unrestricted: u.unrestricted,
        }),
    };
    host.configure_permissions(session, patch)
        .map_err(invalid)?;
    if let Some(on) = c.approve_all_tool_permission_requests {
        super::session_state::set_approve_all(host, session, on);
    }
    ok()
}

pub(super) fn modify_rules(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let m: ModifyRulesParams = params(p.clone())?;
    let scope = match m.scope.as_str() {
        "session" => RuleScope::Session,
        "location" => RuleScope::Location,
        other => {
            return Err(invalid_params(format!(
                "unknown scope `{other}` (session, location)"
            )))
        }
    };
    let add = checked(m.add)?;
    host.modify_permission_rules(session, scope, add, &m.remove, m.remove_all)
        .map_err(invalid)?;
    ok()
}

pub(super) fn set_required(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let r: RequiredParams = params(p.clone())?;
    host.set_permissions_required(session, r.required);
    ok()
}

pub(super) fn reset_session_approvals(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    let r: ResetParams = params(p.clone())?;
    host.reset_session_approvals(session, r.include_location.unwrap_or(true));
    ok()
}

pub(super) fn notify_prompt_shown(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    let shown: PromptShownParams = params(p.clone())?;
    host.note_prompt_shown(session, &shown.message);
    ok()
}

pub(super) fn paths_list(host: &mut Host, call: &Call<'_>, session: &str, _: &Value) -> Answer {
    match host.permission_paths(session) {
        Some((primary, directories)) => Ok(json!({"primary": primary, "directories": directories})),
        None => Err(failed(
            call.method,
            "the session has no working directory (configure `paths.workspacePath`)",
        )),
    }
}

pub(super) fn paths_add(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let a: PathParams = params(p.clone())?;
    host.add_permission_path(session, &a.path)
        .map_err(invalid)?;
    ok()
}

pub(super) fn paths_update_primary(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    let a: PathParams = params(p.clone())?;
    host.update_primary_path(session, &a.path)
        .map_err(invalid)?;
    ok()
}

pub(super) fn path_allowed(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let a: PathParams = params(p.clone())?;
    let allowed = host.path_allowed(session, &a.path).map_err(invalid)?;
    Ok(json!({"allowed": allowed}))
}

pub(super) fn path_in_workspace(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let a: PathParams = params(p.clone())?;
    let allowed = host.path_in_workspace(session, &a.path).map_err(invalid)?;
    Ok(json!({"allowed": allowed}))
}

pub(super) fn locations_resolve(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let w: WorkingDirectoryParams = params(p.clone())?;
    let key = host
        .resolve_location(session, &w.working_directory)
        .map_err(invalid)?;
    Ok(json!({"locationKey": key, "locationType": "dir"}))
}

pub(super) fn locations_add_tool_approval(
    host: &mut Host,
    _: &Call<'_>,
    session: &str,
    p: &Value,
) -> Answer {
    let a: AddToolApprovalParams = params(p.clone())?;
    let rules = approval_rules(&a.approval).map_err(invalid_params)?;
    host.add_location_approval(session, &a.location_key, rules)
        .map_err(invalid)?;
    ok()
}

pub(super) fn locations_apply(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let w: WorkingDirectoryParams = params(p.clone())?;
    let applied = host
        .apply_location(session, &w.working_directory)
        .map_err(invalid)?;
    Ok(json!({
        "locationKey": applied.key,
        "locationType": "dir",
        "changed": applied.changed,
        "appliedRuleCount": applied.rules.len(),
        "appliedDirectoryCount": 0,
        "appliedRules": rules_json(&applied.rules),
    }))
}

pub(super) fn folder_trusted(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let a: PathParams = params(p.clone())?;
    let trusted = host.is_folder_trusted(session, &a.path).map_err(invalid)?;
    Ok(json!({"trusted": trusted}))
}

pub(super) fn folder_trust(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let a: PathParams = params(p.clone())?;
    host.trust_folder(session, &a.path).map_err(invalid)?;
    ok()
}

pub(super) fn urls_unrestricted(host: &mut Host, _: &Call<'_>, session: &str, p: &Value) -> Answer {
    let e: EnabledParams = params(p.clone())?;
    host.set_urls_unrestricted(session, e.enabled);
    ok()
}

/// The typed params (`sessionId` and unknown fields are ignored).
fn params<T: DeserializeOwned>(p: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(p).map_err(|e| invalid_params(e.to_string()))
}

/// Rules with a non-empty kind.
fn checked(rules: Vec<PermissionRule>) -> Result<Vec<PermissionRule>, ErrorObject> {
    if rules.iter().any(|r| r.kind.trim().is_empty()) {
        return Err(invalid_params("a rule's `kind` must not be empty"));
    }
    Ok(rules)
}

fn invalid_params(message: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {message}"))
}

fn invalid(e: PathError) -> ErrorObject {
    invalid_params(e.0)
}
