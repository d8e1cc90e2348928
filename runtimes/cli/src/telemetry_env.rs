//! The runtime's OpenTelemetry variables, read as the Copilot runtime reads them:
//!
//! * `COPILOT_OTEL_FILE_EXPORTER_PATH`: write spans to this file as JSON lines (setting it
//!   turns telemetry on);
//! * `COPILOT_OTEL_EXPORTER_TYPE`: `file` (needs the path) or `otlp-http`;
//! * `COPILOT_OTEL_SOURCE_NAME`: the instrumentation scope's name;
//! * `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: spans carry prompts, answers,
//!   tool arguments and results;
//! * `COPILOT_OTEL_ENABLED=true` alone (or with `otlp-http`) asks for OTLP export, which
//!   agentwire does not do: a warning says so and nothing is exported.

use agentwire::telemetry::TelemetryConfig;

/// The telemetry configuration the environment asks for, or why it asks for none that
/// agentwire can serve (a warning for the log).
pub(crate) fn from_env(
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<TelemetryConfig>, String> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    let path = set("COPILOT_OTEL_FILE_EXPORTER_PATH");
    let exporter = set("COPILOT_OTEL_EXPORTER_TYPE");
    let enabled = set("COPILOT_OTEL_ENABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let file = match (exporter.as_deref(), path) {
        (None | Some("file"), Some(path)) => path,
        (Some("file"), None) => {
            return Err(
                "COPILOT_OTEL_EXPORTER_TYPE=file requires COPILOT_OTEL_FILE_EXPORTER_PATH; \
                 no telemetry is exported"
                    .to_owned(),
            )
        }
        (Some(other), _) => {
            return Err(format!(
                "telemetry exporter '{other}' is not supported (only the file exporter, \
                 COPILOT_OTEL_FILE_EXPORTER_PATH); no telemetry is exported"
            ))
        }
        (None, None) if enabled => {
            return Err(
                "COPILOT_OTEL_ENABLED asks for OTLP export, which agentwire does not do (set \
                 COPILOT_OTEL_FILE_EXPORTER_PATH for the file exporter); no telemetry is \
                 exported"
                    .to_owned(),
            )
        }
        (None, None) => return Ok(None),
    };
    let mut config = TelemetryConfig::new(file).with_capture_content(
        set("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .is_some_and(|v| v.eq_ignore_ascii_case("true")),
    );
    if let Some(name) = set("COPILOT_OTEL_SOURCE_NAME") {
        config = config.with_source_name(name);
    }
    Ok(Some(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<Option<TelemetryConfig>, String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        from_env(|name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn the_file_path_turns_the_file_exporter_on() {
        let config = env(&[
            ("COPILOT_OTEL_FILE_EXPORTER_PATH", "t.jsonl"),
            ("COPILOT_OTEL_EXPORTER_TYPE", "file"),
            ("COPILOT_OTEL_SOURCE_NAME", "mine"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(config.file, "t.jsonl");
        assert_eq!(config.source_name, "mine");
        assert!(config.capture_content);
        let plain = env(&[("COPILOT_OTEL_FILE_EXPORTER_PATH", "t.jsonl")])
            .unwrap()
            .unwrap();
        assert_eq!(plain.source_name, "github.copilot");
        assert!(!plain.capture_content);
    }

    #[test]
    fn nothing_set_exports_nothing_and_otlp_is_refused_with_a_reason() {
        assert_eq!(env(&[]), Ok(None));
        let otlp = env(&[("COPILOT_OTEL_ENABLED", "true")]).unwrap_err();
        assert!(otlp.contains("OTLP"), "{otlp}");
        let file = env(&[("COPILOT_OTEL_EXPORTER_TYPE", "file")]).unwrap_err();
        assert!(
            file.contains("requires COPILOT_OTEL_FILE_EXPORTER_PATH"),
            "{file}"
        );
        let http = env(&[
            ("COPILOT_OTEL_EXPORTER_TYPE", "otlp-http"),
            ("COPILOT_OTEL_FILE_EXPORTER_PATH", "t.jsonl"),
        ])
        .unwrap_err();
        assert!(http.contains("otlp-http"), "{http}");
    }
}
