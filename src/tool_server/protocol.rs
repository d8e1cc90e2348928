//! The MCP server side of the client-tools server: what each answer says. Pure functions of
//! the session's tool declarations and the tools' outcomes.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::mcp::{LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
use crate::session::ToolDecl;

/// The `initialize` result: the client's protocol version when this server speaks it (else
/// the latest), the `tools` capability, and who serves.
pub(super) fn initialize_result(params: &Value, version: &str) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let protocol = asked
        .filter(|v| SUPPORTED_PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(LATEST_PROTOCOL_VERSION);
    json!({
        "protocolVersion": protocol,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "agentwire-client-tools", "version": version},
        "instructions": "Tools provided by the applications connected to this session; each call is run by the application that declared the tool.",
    })
}

/// The `tools/list` result: one entry per client tool, its parameters as the input schema
/// (an object schema with no properties when the client declared none).
pub(super) fn tools_list<'a>(tools: impl Iterator<Item = &'a ToolDecl>) -> Value {
    let tools: Vec<Value> = tools
        .map(|tool| {
            let schema = match &tool.parameters {
                Some(Value::Object(schema)) if schema.contains_key("type") => {
                    Value::Object(schema.clone())
                }
                Some(Value::Object(schema)) => {
                    let mut schema = schema.clone();
                    schema.insert("type".into(), json!("object"));
                    Value::Object(schema)
                }
                _ => json!({"type": "object", "properties": {}}),
            };
            let mut entry = Map::new();
            entry.insert("name".into(), json!(tool.name));
            if !tool.description.is_empty() {
                entry.insert("description".into(), json!(tool.description));
            }
            entry.insert("inputSchema".into(), schema);
            Value::Object(entry)
        })
        .collect();
    json!({ "tools": tools })
}

/// `tools/call` params.
#[derive(Deserialize)]
pub(super) struct CallParams {
    pub(super) name: String,
    #[serde(default)]
    pub(super) arguments: Option<Value>,
}
