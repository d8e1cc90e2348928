//! The permission state methods: `session.permissions.configure`, `modifyRules`,
//! `resetSessionApprovals`, `setRequired`, `notifyPromptShown`, `paths.*`, `locations.*`,
//! `folderTrust.*` and `urls.setUnrestrictedMode`: their JSON-RPC shapes (the SDK's
//! generated `rpc.ts`). The state and the decisions it drives are the host's
//! (`host::permission_rules`); `approveAllToolPermissionRequests` is `setApproveAll`'s flag.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::host::requests::permission_rules::{
    approval_rules, rules_json, PathError, PathsConfig, PermissionRule, PermissionsPatch,
    RuleScope, UrlsConfig,
};
use crate::host::Host;
use crate::jsonrpc::{code, ErrorObject};

use super::session_state::session_id;
use super::surface::{decode, failed, known, Answer};

/// The methods this module answers (also in [`METHODS`](super::METHODS)).
pub(super) const PERMISSION_METHODS: &[&str] = &[
    "session.permissions.configure",
    "session.permissions.modifyRules",
    "session.permissions.setRequired",
    "session.permissions.resetSessionApprovals",
    "session.permissions.notifyPromptShown",
    "session.permissions.paths.list",
    "session.permissions.paths.add",
    "session.permissions.paths.updatePrimary",
    "session.permissions.paths.isPathWithinAllowedDirectories",
    "session.permissions.paths.isPathWithinWorkspace",
    "session.permissions.locations.resolve",
    "session.permissions.locations.apply",
    "session.permissions.locations.addToolApproval",
    "session.permissions.folderTrust.isTrusted",
    "session.permissions.folderTrust.addTrusted",
    "session.permissions.urls.setUnrestrictedMode",
];

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

/// Answers `method` if it is one of this module's.
pub(super) fn dispatch(host: &mut Host, method: &str, params: Option<&RawValue>) -> Option<Answer> {
    if !PERMISSION_METHODS.contains(&method) {
        return None;
    }
    let answer = decode::<Value>(params).and_then(|p| {
        let session = session_id(&p)?;
        known(host, method, &session)?;
        handle(host, method, &session, p)
    });
    Some(answer)
}

fn handle(host: &mut Host, method: &str, session: &str, p: Value) -> Answer {
    let ok = || Ok(json!({"success": true}));
    match method {
        "session.permissions.configure" => {
            let c: ConfigureParams = params(p)?;
            if c.additional_content_exclusion_policies
                .as_ref()
                .is_some_and(|p| !p.is_empty())
            {
                return Err(failed(
                    method,
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
        "session.permissions.modifyRules" => {
            let m: ModifyRulesParams = params(p)?;
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
        "session.permissions.setRequired" => {
            let r: RequiredParams = params(p)?;
            host.set_permissions_required(session, r.required);
            ok()
        }
        "session.permissions.resetSessionApprovals" => {
            let r: ResetParams = params(p)?;
            host.reset_session_approvals(session, r.include_location.unwrap_or(true));
            ok()
        }
        "session.permissions.notifyPromptShown" => {
            let shown: PromptShownParams = params(p)?;
            host.note_prompt_shown(session, &shown.message);
            ok()
        }
        "session.permissions.paths.list" => match host.permission_paths(session) {
            Some((primary, directories)) => {
                Ok(json!({"primary": primary, "directories": directories}))
            }
            None => Err(failed(
                method,
                "the session has no working directory (configure `paths.workspacePath`)",
            )),
        },
        "session.permissions.paths.add" => {
            let a: PathParams = params(p)?;
            host.add_permission_path(session, &a.path)
                .map_err(invalid)?;
            ok()
        }
        "session.permissions.paths.updatePrimary" => {
            let a: PathParams = params(p)?;
            host.update_primary_path(session, &a.path)
                .map_err(invalid)?;
            ok()
        }
        "session.permissions.paths.isPathWithinAllowedDirectories" => {
            let a: PathParams = params(p)?;
            let allowed = host.path_allowed(session, &a.path).map_err(invalid)?;
            Ok(json!({"allowed": allowed}))
        }
        "session.permissions.paths.isPathWithinWorkspace" => {
            let a: PathParams = params(p)?;
            let allowed = host.path_in_workspace(session, &a.path).map_err(invalid)?;
            Ok(json!({"allowed": allowed}))
        }
        "session.permissions.locations.resolve" => {
            let w: WorkingDirectoryParams = params(p)?;
            let key = host
                .resolve_location(session, &w.working_directory)
                .map_err(invalid)?;
            Ok(json!({"locationKey": key, "locationType": "dir"}))
        }
        "session.permissions.locations.addToolApproval" => {
            let a: AddToolApprovalParams = params(p)?;
            let rules = approval_rules(&a.approval).map_err(invalid_params)?;
            host.add_location_approval(session, &a.location_key, rules)
                .map_err(invalid)?;
            ok()
        }
        "session.permissions.locations.apply" => {
            let w: WorkingDirectoryParams = params(p)?;
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
        "session.permissions.folderTrust.isTrusted" => {
            let a: PathParams = params(p)?;
            let trusted = host.is_folder_trusted(session, &a.path).map_err(invalid)?;
            Ok(json!({"trusted": trusted}))
        }
        "session.permissions.folderTrust.addTrusted" => {
            let a: PathParams = params(p)?;
            host.trust_folder(session, &a.path).map_err(invalid)?;
            ok()
        }
        "session.permissions.urls.setUnrestrictedMode" => {
            let e: EnabledParams = params(p)?;
            host.set_urls_unrestricted(session, e.enabled);
            ok()
        }
        _ => Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("Unhandled method {method}"),
        )),
    }
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
