//! Exporting sessions' spans ([`HostConfig::telemetry`](crate::host::HostConfig::telemetry)):
//! every emitted event goes through the [`SpanTracker`](crate::telemetry::SpanTracker), and
//! the spans it finishes are appended to the telemetry file, one file effect per event that
//! finished any.

use serde_json::Value;

use crate::host::tool_ops::FileRequest;
use crate::host::Host;

/// Exporting.
impl Host {
    /// Feeds one event of `session` to the span tracker (when spans are exported).
    pub(in crate::host) fn trace_event(&mut self, session: &str, event_type: &str, data: &Value) {
        let Some(tracker) = self.spans.as_mut() else {
            return;
        };
        let mut finished = Vec::new();
        tracker.observe(session, event_type, data, self.now, &mut finished);
        if finished.is_empty() {
            return;
        }
        let Some(config) = self.config.telemetry.as_ref() else {
            return;
        };
        let mut content = String::new();
        for span in &finished {
            content.push_str(&span.to_json_line(&config.source_name, &self.config.version));
        }
        let path = match self.config.server_cwd.as_deref() {
            Some(cwd) if !config.file.starts_with('/') => format!("{cwd}/{}", config.file),
            _ => config.file.clone(),
        };
        self.telemetry_file_op(FileRequest::Append { path, content });
    }
}
