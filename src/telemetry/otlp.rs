//! OTLP's JSON encoding of finished spans (an `ExportTraceServiceRequest`), the body the
//! OTLP/HTTP exporter posts to a collector's `/v1/traces`.

use serde_json::{json, Value};

use super::Span;

/// The `ExportTraceServiceRequest` holding `spans`: one resource (`service.name`
/// `github-copilot`, `service.version` `service_version`) with one scope named `scope`.
pub fn otlp_body(spans: &[Span], scope: &str, service_version: &str) -> String {
    let resource = json!({"attributes": [
        {"key": "service.name", "value": {"stringValue": "github-copilot"}},
        {"key": "service.version", "value": {"stringValue": service_version}},
    ]});
    let spans: Vec<Value> = spans.iter().map(Span::to_otlp).collect();
    json!({"resourceSpans": [{
        "resource": resource,
        "scopeSpans": [{
            "scope": {"name": scope, "version": service_version},
            "spans": spans,
        }],
    }]})
    .to_string()
}
