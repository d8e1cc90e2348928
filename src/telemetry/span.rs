//! One span and its JSON line.

use serde_json::{json, Map, Value};

use crate::time::Timestamp;

/// OpenTelemetry's span kind `INTERNAL` (the JS SDK's numbering).
pub(super) const KIND_INTERNAL: u8 = 0;
/// OpenTelemetry's span kind `CLIENT` (the JS SDK's numbering).
pub(super) const KIND_CLIENT: u8 = 2;

/// OpenTelemetry's status code `ERROR`.
const STATUS_ERROR: u8 = 2;
/// OTLP's `STATUS_CODE_ERROR`.
const OTLP_STATUS_ERROR: u8 = 2;

/// An attribute value in OTLP's JSON encoding (`AnyValue`).
fn otlp_value(value: &Value) -> Value {
    match value {
        Value::String(s) => json!({"stringValue": s}),
        Value::Bool(b) => json!({"boolValue": b}),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({"intValue": n.to_string()}),
        Value::Number(n) => json!({"doubleValue": n.as_f64()}),
        Value::Array(items) => {
            json!({"arrayValue": {"values": items.iter().map(otlp_value).collect::<Vec<_>>()}})
        }
        other => json!({"stringValue": other.to_string()}),
    }
}

/// A span, open or finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub(super) trace_id: u128,
    pub(super) span_id: u64,
    parent: Option<u64>,
    pub(super) name: String,
    kind: u8,
    start: Timestamp,
    end: Timestamp,
    pub(super) attributes: Map<String, Value>,
    /// `None`: unset; `Some(message)`: an error.
    error: Option<String>,
}

impl Span {
    pub(super) fn new(
        trace_id: u128,
        span_id: u64,
        parent: Option<u64>,
        name: &str,
        kind: u8,
        start: Timestamp,
    ) -> Self {
        Span {
            trace_id,
            span_id,
            parent,
            name: name.to_owned(),
            kind,
            start,
            end: start,
            attributes: Map::new(),
            error: None,
        }
    }

    pub(super) fn set(&mut self, key: &str, value: Value) {
        self.attributes.insert(key.to_owned(), value);
    }

    pub(super) fn finish(&mut self, at: Timestamp, error: Option<&str>) {
        self.end = at.max(self.start);
        self.error = error.map(str::to_owned);
    }

    /// The span's name (`invoke_agent`, `chat MODEL`, `execute_tool TOOL`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its attribute `key`.
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }

    /// Its trace id, 32 hex digits.
    pub fn trace_id(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// Its id, 16 hex digits.
    pub fn span_id(&self) -> String {
        format!("{:016x}", self.span_id)
    }

    /// Its parent's id (`None` for a trace's root).
    pub fn parent_span_id(&self) -> Option<String> {
        self.parent.map(|p| format!("{p:016x}"))
    }

    /// Whether it ended in error.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }

    /// The span in OTLP's JSON encoding (`Span` of `ExportTraceServiceRequest`): ids in hex,
    /// times in Unix nanoseconds as strings, attributes as typed key–value pairs, OTLP's
    /// kind and status numbering.
    pub(super) fn to_otlp(&self) -> Value {
        let attributes: Vec<Value> = self
            .attributes
            .iter()
            .map(|(key, value)| json!({"key": key, "value": otlp_value(value)}))
            .collect();
        let status = match &self.error {
            Some(message) => json!({"code": OTLP_STATUS_ERROR, "message": message}),
            None => json!({"code": 0}),
        };
        let mut span = json!({
            "traceId": self.trace_id(),
            "spanId": self.span_id(),
            "name": self.name,
            // OTLP counts kinds from UNSPECIFIED = 0 (INTERNAL = 1, CLIENT = 3).
            "kind": self.kind + 1,
            "startTimeUnixNano": self.start.as_nanos().to_string(),
            "endTimeUnixNano": self.end.as_nanos().to_string(),
            "attributes": attributes,
            "status": status,
        });
        if let Some(parent) = self.parent_span_id() {
            span["parentSpanId"] = json!(parent);
        }
        span
    }

    /// The span as one JSON line (with its newline), as the file exporter writes it, its
    /// instrumentation scope named `scope` and its resource naming `service_version`.
    pub fn to_json_line(&self, scope: &str, service_version: &str) -> String {
        let time = |t: Timestamp| {
            let nanos = t.as_nanos();
            json!([nanos / 1_000_000_000, nanos % 1_000_000_000])
        };
        let duration = self.end.saturating_duration_since(self.start);
        let status = match &self.error {
            Some(message) => json!({"code": STATUS_ERROR, "message": message}),
            None => json!({"code": 0}),
        };
        let mut line = json!({
            "type": "span",
            "traceId": self.trace_id(),
            "spanId": self.span_id(),
            "parentSpanId": self.parent_span_id().unwrap_or_default(),
            "name": self.name,
            "kind": self.kind,
            "startTime": time(self.start),
            "endTime": time(self.end),
            "duration": [duration.as_secs(), duration.subsec_nanos()],
            "attributes": self.attributes,
            "status": status,
            "events": [],
            "links": [],
            "resource": {"attributes": {
                "service.name": "github-copilot",
                "service.version": service_version,
            }},
            "instrumentationScope": {"name": scope, "version": service_version},
        })
        .to_string();
        line.push('\n');
        line
    }
}
