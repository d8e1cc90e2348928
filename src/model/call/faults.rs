//! Classifying HTTP failures into user-facing errors, and reading `Retry-After`.

use std::time::Duration;

use super::super::error::{ModelError, ModelErrorKind};
use super::super::openai::excerpt;
use crate::Timestamp;

/// The error for a non-success `status` with `body`, from `url` for `model` after `attempts`.
pub(super) fn http_error(
    status: u16,
    body: &[u8],
    url: &str,
    model: &str,
    attempts: u32,
) -> ModelError {
    let server = server_message(body);
    let detail = match &server {
        Some(m) => format!(": {m}"),
        None => String::new(),
    };
    let lower = server.as_deref().unwrap_or("").to_ascii_lowercase();
    let mentions_missing_model = lower.contains("model")
        && [
            "not found",
            "does not exist",
            "not exist",
            "unknown",
            "no such",
            "try pulling",
        ]
        .iter()
        .any(|w| lower.contains(w));
    let (kind, message) = match status {
        401 => (
            ModelErrorKind::Unauthorized,
            format!("The model endpoint {url} rejected the credentials (HTTP 401 Unauthorized){detail}. Check the provider's apiKey or bearerToken."),
        ),
        403 => (
            ModelErrorKind::Forbidden,
            format!("The model endpoint {url} refused access (HTTP 403 Forbidden){detail}. Check that the credentials may use the model `{}`.", model),
        ),
        404 | 400 | 422 if status == 404 || mentions_missing_model => {
            if mentions_missing_model {
                (
                    ModelErrorKind::NotFound,
                    format!("The model `{}` is not available at {url} (HTTP {status}){detail}.", model),
                )
            } else {
                (
                    ModelErrorKind::NotFound,
                    format!("The model endpoint {url} was not found (HTTP 404){detail}. Check the provider's baseUrl (OpenAI-compatible servers usually end in /v1) and the model `{}`.", model),
                )
            }
        }
        429 => (
            ModelErrorKind::RateLimited,
            format!("The model endpoint {url} is rate limiting requests (HTTP 429, after {attempts} attempt{}){detail}.", plural(attempts)),
        ),
        500..=599 => (
            ModelErrorKind::ServerError,
            format!("The model endpoint {url} failed with HTTP {status}{} (after {attempts} attempt{}){detail}.", reason_suffix(status), plural(attempts)),
        ),
        _ => (
            ModelErrorKind::HttpStatus,
            format!("The model endpoint {url} answered HTTP {status}{}{detail}.", reason_suffix(status)),
        ),
    };
    let mut error = ModelError::new(kind, message).with_status(status);
    error.code = server_code(body);
    error
}

/// The error code of a JSON error body (`error.code`, else `error.type`, when a string).
fn server_code(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let error = v.get("error")?;
    let code = error
        .get("code")
        .and_then(|c| c.as_str())
        .or_else(|| error.get("type").and_then(|t| t.as_str()))?;
    (!code.is_empty() && code.len() <= 100).then(|| code.to_owned())
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

pub(super) fn reason_suffix(status: u16) -> &'static str {
    match status {
        400 => " Bad Request",
        408 => " Request Timeout",
        413 => " Payload Too Large",
        422 => " Unprocessable Entity",
        429 => " Too Many Requests",
        500 => " Internal Server Error",
        502 => " Bad Gateway",
        503 => " Service Unavailable",
        504 => " Gateway Timeout",
        _ => "",
    }
}

pub(super) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The server's explanation in an error body: `error.message`, `error` (a string),
/// `message`, `detail`, or the text itself.
fn server_message(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let found = v
            .get("error")
            .and_then(|e| {
                e.get("message")
                    .and_then(|m| m.as_str())
                    .or_else(|| e.as_str())
            })
            .or_else(|| v.get("message").and_then(|m| m.as_str()))
            .or_else(|| v.get("detail").and_then(|m| m.as_str()));
        if let Some(m) = found {
            return Some(excerpt(m));
        }
    }
    Some(excerpt(text))
}

/// `retry-after-ms` (milliseconds), or `Retry-After` as seconds or an HTTP date.
pub(super) fn retry_after(headers: &[(String, String)], now: Timestamp) -> Option<Duration> {
    if let Some(ms) = header(headers, "retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_millis(ms as u64));
        }
    }
    let value = header(headers, "retry-after")?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_millis((secs * 1000.0) as u64));
    }
    let at = parse_http_date(value)?;
    Some(Duration::from_secs(
        at.saturating_sub(now.as_millis() / 1000),
    ))
}

/// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn parse_http_date(s: &str) -> Option<u64> {
    let rest = s.split_once(", ").map_or(s, |(_, r)| r);
    let mut parts = rest.split_ascii_whitespace();
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * mo as i64 + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days)
        .ok()
        .map(|d| d * 86_400 + h * 3600 + m * 60 + sec)
}
