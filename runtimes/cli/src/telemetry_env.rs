//! The runtime's OpenTelemetry variables, read as the Copilot runtime reads them:
//!
//! * `COPILOT_OTEL_FILE_EXPORTER_PATH`: write spans to this file as JSON lines (setting it
//!   turns telemetry on, with the file exporter unless `COPILOT_OTEL_EXPORTER_TYPE` says
//!   otherwise);
//! * `COPILOT_OTEL_EXPORTER_TYPE`: `file` (needs the path) or `otlp-http`;
//! * `COPILOT_OTEL_ENABLED=true`, or `OTEL_EXPORTER_OTLP_ENDPOINT` set: OTLP/HTTP export to
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the whole URL), else
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`, else `http://localhost:4318/v1/traces`,
//!   with the headers of `OTEL_EXPORTER_OTLP_TRACES_HEADERS` / `OTEL_EXPORTER_OTLP_HEADERS`
//!   (`key=value,…`, values percent-decoded). Bodies are OTLP's JSON encoding, which
//!   collectors accept on the same path as protobuf; `grpc`
//!   (`OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`) is refused with a reason;
//! * `COPILOT_OTEL_SOURCE_NAME`: the instrumentation scope's name;
//! * `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: spans carry prompts, answers,
//!   tool arguments and results.

use agentwire::telemetry::TelemetryConfig;

/// The collector's traces path under `OTEL_EXPORTER_OTLP_ENDPOINT`.
const TRACES_PATH: &str = "/v1/traces";
/// Where OTLP/HTTP goes when no endpoint is set (the OpenTelemetry default).
const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// The telemetry configuration the environment asks for, or why it asks for none that
/// agentwire can serve (a warning for the log).
pub(crate) fn from_env(
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<TelemetryConfig>, String> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    let path = set("COPILOT_OTEL_FILE_EXPORTER_PATH");
    let exporter = set("COPILOT_OTEL_EXPORTER_TYPE");
    let endpoint = set("OTEL_EXPORTER_OTLP_ENDPOINT");
    let enabled = set("COPILOT_OTEL_ENABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || endpoint.is_some();
    let config = match (exporter.as_deref(), path) {
        (None | Some("file"), Some(path)) => TelemetryConfig::new(path),
        (Some("file"), None) => {
            return Err(
                "COPILOT_OTEL_EXPORTER_TYPE=file requires COPILOT_OTEL_FILE_EXPORTER_PATH; \
                 no telemetry is exported"
                    .to_owned(),
            )
        }
        (Some("otlp-http"), _) => otlp(&set, endpoint)?,
        (None, None) if enabled => otlp(&set, endpoint)?,
        (Some(other), _) => {
            return Err(format!(
                "telemetry exporter '{other}' is not supported (`file` or `otlp-http`); no \
                 telemetry is exported"
            ))
        }
        (None, None) => return Ok(None),
    };
    let mut config = config.with_capture_content(
        set("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .is_some_and(|v| v.eq_ignore_ascii_case("true")),
    );
    if let Some(name) = set("COPILOT_OTEL_SOURCE_NAME") {
        config = config.with_source_name(name);
    }
    Ok(Some(config))
}

/// The OTLP/HTTP exporter the `OTEL_EXPORTER_OTLP_*` variables describe.
fn otlp(
    set: &impl Fn(&str) -> Option<String>,
    endpoint: Option<String>,
) -> Result<TelemetryConfig, String> {
    let protocol =
        set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if protocol.as_deref() == Some("grpc") {
        return Err("OTLP over gRPC is not supported (OTLP/HTTP is: unset \
             OTEL_EXPORTER_OTLP_PROTOCOL or set http/json); no telemetry is exported"
            .to_owned());
    }
    let url = match set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        Some(url) => url,
        None => {
            let base = endpoint.unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
            format!("{}{TRACES_PATH}", base.trim_end_matches('/'))
        }
    };
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(format!(
            "the OTLP endpoint '{url}' is not an http:// or https:// URL; no telemetry is \
             exported"
        ));
    }
    let headers = set("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        .or_else(|| set("OTEL_EXPORTER_OTLP_HEADERS"))
        .map(|h| parse_headers(&h))
        .transpose()?
        .unwrap_or_default();
    Ok(TelemetryConfig::otlp(url, headers))
}

/// `key=value,key2=value2` (W3C baggage form, values percent-encoded).
fn parse_headers(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                format!("OTEL_EXPORTER_OTLP_HEADERS: '{pair}' is not key=value; no telemetry is exported")
            })?;
            Ok((key.trim().to_owned(), percent_decode(value.trim())))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire::telemetry::SpanExporter;

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
        assert_eq!(config.exporter, SpanExporter::File("t.jsonl".to_owned()));
        assert_eq!(config.source_name, "mine");
        assert!(config.capture_content);
        let plain = env(&[("COPILOT_OTEL_FILE_EXPORTER_PATH", "t.jsonl")])
            .unwrap()
            .unwrap();
        assert_eq!(plain.source_name, "github.copilot");
        assert!(!plain.capture_content);
    }

    #[test]
    fn otlp_goes_to_the_endpoint_the_standard_variables_name() {
        let otlp = |pairs: &[(&str, &str)]| match env(pairs).unwrap().unwrap().exporter {
            SpanExporter::OtlpHttp { url, headers } => (url, headers),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            otlp(&[("COPILOT_OTEL_ENABLED", "true")]),
            ("http://localhost:4318/v1/traces".to_owned(), vec![])
        );
        assert_eq!(
            otlp(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318/"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x-team=obs"),
            ]),
            (
                "https://collector:4318/v1/traces".to_owned(),
                vec![
                    ("api-key".to_owned(), "a b".to_owned()),
                    ("x-team".to_owned(), "obs".to_owned())
                ]
            )
        );
        assert_eq!(
            otlp(&[
                ("COPILOT_OTEL_EXPORTER_TYPE", "otlp-http"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:1/custom"),
                ("COPILOT_OTEL_FILE_EXPORTER_PATH", "t.jsonl"),
            ])
            .0,
            "http://c:1/custom"
        );
    }

    #[test]
    fn nothing_set_exports_nothing_and_what_cannot_be_served_is_refused_with_a_reason() {
        assert_eq!(env(&[]), Ok(None));
        let file = env(&[("COPILOT_OTEL_EXPORTER_TYPE", "file")]).unwrap_err();
        assert!(
            file.contains("requires COPILOT_OTEL_FILE_EXPORTER_PATH"),
            "{file}"
        );
        let grpc = env(&[
            ("COPILOT_OTEL_ENABLED", "true"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ])
        .unwrap_err();
        assert!(grpc.contains("gRPC"), "{grpc}");
        let other = env(&[("COPILOT_OTEL_EXPORTER_TYPE", "console")]).unwrap_err();
        assert!(other.contains("console"), "{other}");
        let bad = env(&[
            ("COPILOT_OTEL_ENABLED", "true"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
        ])
        .unwrap_err();
        assert!(bad.contains("key=value"), "{bad}");
    }
}
