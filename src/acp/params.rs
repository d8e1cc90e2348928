//! Typed params of the ACP agent methods (only the fields the host acts on; anything else a
//! client sends, `_meta` included, is accepted and ignored).

use serde::Deserialize;
use serde_json::Value;

use crate::host::ConnId;
use crate::jsonrpc::OwnedId;

/// `initialize` params.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct InitializeParams {
    pub protocol_version: Option<Value>,
    pub client_capabilities: Value,
}

/// `session/new` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSessionParams {
    pub cwd: String,
    /// The session's MCP servers (read with [`crate::mcp::acp_servers`]).
    #[serde(default)]
    pub mcp_servers: Value,
}

/// `session/load` and `session/resume` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoadSessionParams {
    pub session_id: String,
    #[serde(default)]
    pub cwd: Option<String>,
    /// The session's MCP servers (read with [`crate::mcp::acp_servers`]).
    #[serde(default)]
    pub mcp_servers: Value,
    /// Extension metadata: agentwire reads [`super::RELAY_REPLAY_AFTER`] from it.
    #[serde(rename = "_meta", default)]
    pub meta: Option<Value>,
}

impl LoadSessionParams {
    /// The event [`super::RELAY_REPLAY_AFTER`] names: replay only what follows it.
    pub(crate) fn replay_after(&self) -> Option<&str> {
        self.meta.as_ref()?.get(super::RELAY_REPLAY_AFTER)?.as_str()
    }

    /// The relayed connection this one replaces ([`crate::host::RELAY_FORMER_MEMBER`]) and
    /// the ids of its `session/prompt`s the editor still waits for
    /// ([`crate::host::RELAY_AWAITING`]), as a gateway re-attaching its editor names them.
    pub(crate) fn relay_former(&self) -> Option<(ConnId, Vec<OwnedId>)> {
        let meta = self.meta.as_ref()?;
        let former = meta.get(crate::host::RELAY_FORMER_MEMBER)?.as_u64()?;
        let awaiting = meta
            .get(crate::host::RELAY_AWAITING)
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| OwnedId::parse(&id.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        Some((ConnId(former), awaiting))
    }
}

/// Params naming one session (`session/close`, `session/delete`, `session/cancel`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionParams {
    pub session_id: String,
}

/// `session/list` params.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ListParams {
    pub cwd: Option<String>,
}

/// `session/prompt` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptParams {
    pub session_id: String,
    pub prompt: Vec<Value>,
}

/// `session/set_mode` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SetModeParams {
    pub session_id: String,
    pub mode_id: String,
}

/// `session/set_config_option` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SetConfigParams {
    pub session_id: String,
    pub config_id: String,
    pub value: Value,
}

/// `$/cancel_request` params (`requestId`; `id` is accepted too).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CancelRequestParams {
    #[serde(alias = "id")]
    pub request_id: crate::jsonrpc::OwnedId,
}
