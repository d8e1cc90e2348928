//! Exporting sessions' spans ([`HostConfig::telemetry`](crate::host::HostConfig::telemetry)):
//! every emitted event goes through the [`SpanTracker`], and the spans it finishes are
//! exported together: appended to the telemetry file (one file effect), or posted to an
//! OTLP/HTTP collector (one HTTP effect; its answer is not waited for by anything, and a
//! failed post loses those spans, never the session's work).

use std::collections::BTreeSet;

use bytes::Bytes;
use serde_json::Value;

use crate::host::tool_ops::FileRequest;
use crate::host::{EffectOp, Host};
use crate::model::{HttpHeader, HttpMethod, HttpRequest};
use crate::telemetry::{otlp_body, SpanExporter, SpanTracker};

/// The span tracker and the exporter's posts in flight.
#[derive(Debug)]
pub(crate) struct SpanExport {
    tracker: SpanTracker,
    /// OTLP posts whose exchange has not ended (HTTP call ids).
    posts: BTreeSet<u64>,
}

impl SpanExport {
    pub(crate) fn new(seed: u64, capture_content: bool) -> Self {
        SpanExport {
            tracker: SpanTracker::new(seed, capture_content),
            posts: BTreeSet::new(),
        }
    }
}

/// Exporting.
impl Host {
    /// Feeds one event of `session` to the span tracker (when spans are exported).
    pub(in crate::host) fn trace_event(&mut self, session: &str, event_type: &str, data: &Value) {
        let Some(export) = self.spans.as_mut() else {
            return;
        };
        let mut finished = Vec::new();
        export
            .tracker
            .observe(session, event_type, data, self.now, &mut finished);
        if finished.is_empty() {
            return;
        }
        let Some(config) = self.config.telemetry.as_ref() else {
            return;
        };
        let version = &self.config.version;
        match &config.exporter {
            SpanExporter::File(file) => {
                let mut content = String::new();
                for span in &finished {
                    content.push_str(&span.to_json_line(&config.source_name, version));
                }
                let path = match self.config.server_cwd.as_deref() {
                    Some(cwd) if !file.starts_with('/') => format!("{cwd}/{file}"),
                    _ => file.clone(),
                };
                self.telemetry_file_op(FileRequest::Append { path, content });
            }
            SpanExporter::OtlpHttp { url, headers } => {
                let mut request_headers =
                    vec![HttpHeader::plain("content-type", "application/json")];
                // Collector credentials travel in these headers: never echoed.
                request_headers.extend(
                    headers
                        .iter()
                        .map(|(name, value)| HttpHeader::secret(name.clone(), value.clone())),
                );
                let request = HttpRequest {
                    method: HttpMethod::Post,
                    url: url.clone(),
                    headers: request_headers,
                    body: Bytes::from(otlp_body(&finished, &config.source_name, version)),
                };
                let id = self.next_effect_id();
                if let Some(export) = self.spans.as_mut() {
                    export.posts.insert(id.get());
                }
                self.push_effect(id, EffectOp::HttpRequest(request));
            }
        }
    }

    /// Whether HTTP exchange `call` is an OTLP post; its end (`last`) forgets it.
    pub(in crate::host) fn telemetry_post_event(&mut self, call: u64, last: bool) -> bool {
        let Some(export) = self.spans.as_mut() else {
            return false;
        };
        if !export.posts.contains(&call) {
            return false;
        }
        if last {
            export.posts.remove(&call);
        }
        true
    }
}
