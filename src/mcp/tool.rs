//! MCP tools: the definitions `tools/list` returns and the results `tools/call` returns,
//! mapped to what the session shows (`tool.execution_complete.result`) and what a model reads.

use serde_json::{json, Map, Value};

/// A tool a server offers.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    /// The tool's name on its server.
    pub name: String,
    /// `title` (or `annotations.title`), else the name.
    pub title: String,
    /// What it does.
    pub description: String,
    /// Its `inputSchema`.
    pub input_schema: Value,
    /// `annotations.readOnlyHint`: runs without a permission prompt.
    pub read_only: bool,
    /// `_meta.ui` (MCP Apps), if any.
    pub ui: Option<Value>,
}

/// One page of a `tools/list` result: its tools (malformed entries skipped) and `nextCursor`.
pub(crate) fn parse_tools_page(result: &Value) -> (Vec<McpTool>, Option<String>) {
    let tools = result
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(parse_tool)
        .collect();
    let cursor = result
        .get("nextCursor")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    (tools, cursor)
}

fn parse_tool(tool: &Value) -> Option<McpTool> {
    let name = tool.get("name")?.as_str()?.to_owned();
    if name.is_empty() {
        return None;
    }
    let annotations = tool.get("annotations");
    let title = tool
        .get("title")
        .or_else(|| annotations.and_then(|a| a.get("title")))
        .and_then(Value::as_str)
        .unwrap_or(&name)
        .to_owned();
    let input_schema = match tool.get("inputSchema") {
        Some(s @ Value::Object(_)) => s.clone(),
        _ => json!({"type": "object", "properties": {}}),
    };
    Some(McpTool {
        title,
        description: tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        input_schema,
        read_only: annotations
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        ui: tool
            .get("_meta")
            .and_then(|m| m.get("ui"))
            .filter(|u| u.is_object())
            .cloned(),
        name,
    })
}

/// A `tools/call` result mapped for the session.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MappedResult {
    /// The text a model reads (text blocks joined; other blocks described).
    pub text: String,
    /// `isError: true`.
    pub is_error: bool,
    /// Extra members of `tool.execution_complete.result`: `contents` (the content blocks, as
    /// the server sent them) and `structuredContent`.
    pub extra: Map<String, Value>,
}

/// Maps a `tools/call` result (`{content: [...], structuredContent?, isError?}`).
pub(crate) fn map_result(result: &Value) -> MappedResult {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut parts = Vec::new();
    for block in &blocks {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let part = match kind {
            "text" => block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            "image" | "audio" => format!(
                "[{kind} {}]",
                block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream")
            ),
            "resource" => {
                let resource = block.get("resource");
                match resource.and_then(|r| r.get("text")).and_then(Value::as_str) {
                    Some(text) => text.to_owned(),
                    None => format!(
                        "[resource {}]",
                        resource
                            .and_then(|r| r.get("uri"))
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                    ),
                }
            }
            "resource_link" => format!(
                "[resource link {}{}]",
                block.get("uri").and_then(Value::as_str).unwrap_or_default(),
                block
                    .get("name")
                    .and_then(Value::as_str)
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ),
            _ => continue,
        };
        parts.push(part);
    }
    let structured = result
        .get("structuredContent")
        .filter(|v| !v.is_null())
        .cloned();
    if parts.is_empty() {
        if let Some(s) = &structured {
            parts.push(s.to_string());
        }
    }
    let mut extra = Map::new();
    extra.insert("contents".into(), Value::Array(blocks));
    if let Some(s) = structured {
        extra.insert("structuredContent".into(), s);
    }
    MappedResult {
        text: parts.join("\n"),
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
        extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_annotations() {
        let (tools, cursor) = parse_tools_page(&json!({
            "tools": [
                {"name": "echo", "description": "Echoes", "inputSchema": {"type": "object"},
                 "annotations": {"readOnlyHint": true, "title": "Echo"}},
                {"name": ""}, {"nope": 1},
                {"name": "app", "_meta": {"ui": {"resourceUri": "ui://x"}}},
            ],
            "nextCursor": "2",
        }));
        assert_eq!(tools.len(), 2);
        assert!(tools[0].read_only);
        assert_eq!(tools[0].title, "Echo");
        assert_eq!(tools[1].title, "app");
        assert!(tools[1].ui.is_some());
        assert_eq!(cursor.as_deref(), Some("2"));
    }

    #[test]
    fn results_map_every_block_kind() {
        let m = map_result(&json!({"content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "x://1", "text": "inner"}},
            {"type": "resource_link", "uri": "x://2", "name": "two"},
        ], "structuredContent": {"n": 1}, "isError": true}));
        assert_eq!(
            m.text,
            "a\n[image image/png]\ninner\n[resource link x://2 (two)]"
        );
        assert!(m.is_error);
        assert_eq!(m.extra["structuredContent"], json!({"n": 1}));
        assert_eq!(m.extra["contents"].as_array().unwrap().len(), 4);
    }
}
