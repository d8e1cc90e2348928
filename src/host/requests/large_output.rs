//! Large client tool output, as the runtime handles it (`largeOutput {enabled, maxSizeBytes,
//! outputDir}` of `session.create` / `resume`; on, 50 KiB, by default): a client tool's result
//! longer than the limit is written to a file and the model gets, instead of the whole text,
//! where it is, its size and its first 500 characters:
//!
//! ```text
//! Output too large to read at once (97.7 KB). Saved to: <path>
//! Consider using tools like grep (for searching), head/tail (for viewing start/end), view with view_range (for specific sections), or jq (for JSON) to examine portions of the output.
//!
//! Preview (first 500 chars):
//! <the first 500 characters>
//! ```
//!
//! The file is `<epoch ms>-copilot-tool-output-<id>.txt` in the session's state directory on
//! its file provider (`<sessionStatePath>/temp/`), else in `outputDir`, else in the runtime's
//! session state directory (`<workspace root>/session-state/<id>/temp/`); with none of them,
//! or when the write fails, the model gets the whole result.

use serde_json::Value;

use crate::agent::ToolOutcome;
use crate::host::Host;

/// The limit when the session names none.
const DEFAULT_MAX_BYTES: usize = 50 * 1024;

/// Characters of the result the model still sees.
const PREVIEW_CHARS: usize = 500;

/// A session's large-output settings.
#[derive(Clone, Debug)]
pub(crate) struct LargeOutput {
    enabled: bool,
    max_bytes: usize,
    dir: Option<String>,
}

impl Default for LargeOutput {
    fn default() -> Self {
        LargeOutput {
            enabled: true,
            max_bytes: DEFAULT_MAX_BYTES,
            dir: None,
        }
    }
}

/// `97.7 KB`, `1.2 MB`.
fn size_text(bytes: usize) -> String {
    let kb = bytes as f64 / 1024.0;
    if kb < 1024.0 {
        format!("{kb:.1} KB")
    } else {
        format!("{:.1} MB", kb / 1024.0)
    }
}

/// What the model gets for a result of `bytes` saved at `path`.
fn reference(bytes: usize, path: &str, text: &str) -> String {
    let preview: String = text.chars().take(PREVIEW_CHARS).collect();
    format!(
        "Output too large to read at once ({}). Saved to: {path}\nConsider using tools like \
         grep (for searching), head/tail (for viewing start/end), view with view_range (for \
         specific sections), or jq (for JSON) to examine portions of the output.\n\nPreview \
         (first {PREVIEW_CHARS} chars):\n{preview}",
        size_text(bytes)
    )
}

/// Large client tool output.
impl Host {
    /// The `largeOutput` of `session.create` / `session.resume` params (absent: unchanged).
    pub(crate) fn set_large_output(&mut self, session: &str, params: &Value) {
        let Some(config) = params.get("largeOutput").filter(|c| c.is_object()) else {
            return;
        };
        let Some(live) = self.sessions.get_mut(session) else {
            return;
        };
        let settings = &mut live.large_output;
        if let Some(enabled) = config.get("enabled").and_then(Value::as_bool) {
            settings.enabled = enabled;
        }
        if let Some(max) = config.get("maxSizeBytes").and_then(Value::as_u64) {
            settings.max_bytes = usize::try_from(max).unwrap_or(usize::MAX);
        }
        if let Some(dir) = config.get("outputDir").and_then(Value::as_str) {
            settings.dir = (!dir.is_empty()).then(|| dir.to_owned());
        }
    }

    /// Where `session` saves a large output now, if anywhere.
    fn large_output_path(&mut self, session: &str) -> Option<String> {
        let live = self.sessions.get(session)?;
        let dir = match (self.provided_state_dir(session), &live.large_output.dir) {
            (Some(state), _) => format!("{}/temp", state.trim_end_matches('/')),
            (None, Some(dir)) => dir.trim_end_matches('/').to_owned(),
            (None, None) => {
                let root = self.config.workspace_root.as_ref()?;
                format!(
                    "{}/session-state/{session}/temp",
                    root.trim_end_matches('/')
                )
            }
        };
        let millis = self.now.as_millis();
        let id: String = self
            .ids
            .next_uuid()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(6)
            .collect();
        Some(format!("{dir}/{millis}-copilot-tool-output-{id}.txt"))
    }

    /// Completes a client tool call of `session`: a successful result longer than the
    /// session's limit is saved first (the completion follows the write).
    pub(in crate::host) fn complete_client_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        outcome: ToolOutcome,
    ) {
        let large = match (&outcome, self.sessions.get(session)) {
            (ToolOutcome::Success(text), Some(live)) => {
                live.large_output.enabled && text.len() > live.large_output.max_bytes
            }
            _ => false,
        };
        let path = if large {
            self.large_output_path(session)
        } else {
            None
        };
        let (Some(path), ToolOutcome::Success(text)) = (path, &outcome) else {
            return self.complete_tool(session, tool_call_id, outcome);
        };
        let message = reference(text.len(), &path, text);
        self.save_large_output(session, tool_call_id, path, text.clone(), message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_told_where_the_output_is() {
        assert_eq!(size_text(100_000), "97.7 KB");
        assert_eq!(size_text(3 * 1024 * 1024), "3.0 MB");
        let text = "x".repeat(600);
        let told = reference(600, "/s/temp/1-copilot-tool-output-ab12cd.txt", &text);
        assert!(told.starts_with(
            "Output too large to read at once (0.6 KB). Saved to: /s/temp/1-copilot-tool-output-ab12cd.txt\n"
        ));
        assert!(told.ends_with(&format!("(first 500 chars):\n{}", "x".repeat(500))));
    }
}
