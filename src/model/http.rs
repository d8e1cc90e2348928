//! Plain-data HTTP requests: what the core asks a runtime to send to a model endpoint.
//!
//! The core never opens a socket. A request builder ([`super::request`]) produces an
//! [`HttpRequest`]; the host hands it to the runtime, which performs it with its own HTTP
//! client and feeds the response back (status and headers, body chunks, end or a transport
//! error) into a [`super::ModelCall`].
//!
//! Header values that carry credentials are marked [`HttpHeader::sensitive`]: `Debug` output
//! of a request shows `<redacted>` instead of them, so a request can be logged safely.

use std::fmt;

use bytes::Bytes;

/// The HTTP methods the model client uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HttpMethod {
    /// `GET` (the model list).
    Get,
    /// `POST` (a completion).
    Post,
}

impl HttpMethod {
    /// The method's name as sent on the wire, e.g. `"POST"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
        }
    }
}

impl fmt::Display for HttpMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request header. Names and values never contain CR or LF (the builders reject them).
#[derive(Clone, PartialEq, Eq)]
pub struct HttpHeader {
    /// The header name, e.g. `authorization`.
    pub name: String,
    /// The header value as sent.
    pub value: String,
    /// Whether the value is a credential (or may hold one): hidden from `Debug` output, and
    /// scrubbed from error messages that echo it.
    pub sensitive: bool,
}

impl HttpHeader {
    /// A header whose value is not secret.
    pub fn plain(name: impl Into<String>, value: impl Into<String>) -> Self {
        HttpHeader {
            name: name.into(),
            value: value.into(),
            sensitive: false,
        }
    }

    /// A header whose value is a credential.
    pub fn secret(name: impl Into<String>, value: impl Into<String>) -> Self {
        HttpHeader {
            name: name.into(),
            value: value.into(),
            sensitive: true,
        }
    }
}

impl fmt::Debug for HttpHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sensitive {
            write!(f, "{}: <redacted>", self.name)
        } else {
            write!(f, "{}: {:?}", self.name, self.value)
        }
    }
}

/// A complete HTTP request to perform: method, absolute URL, headers and body.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method.
    pub method: HttpMethod,
    /// The absolute URL (`http://` or `https://`), query included.
    pub url: String,
    /// Request headers in order (`content-type` and `accept` included where needed).
    pub headers: Vec<HttpHeader>,
    /// The request body (empty for `GET`).
    pub body: Bytes,
}

impl HttpRequest {
    /// The value of the first header called `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    }

    /// The URL without user info (`user:password@`), fit for messages and logs.
    pub fn display_url(&self) -> String {
        display_url(&self.url)
    }

    /// Replaces every occurrence of a sensitive header value (and of a bearer token inside
    /// one) in `text` with `<redacted>`: for error bodies that echo the credential back.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for h in self.headers.iter().filter(|h| h.sensitive) {
            let token = h
                .value
                .strip_prefix("Bearer ")
                .or_else(|| h.value.strip_prefix("bearer "))
                .unwrap_or(&h.value);
            for secret in [h.value.as_str(), token] {
                // Very short values would redact ordinary words; credentials are longer.
                if secret.len() >= 4 && out.contains(secret) {
                    out = out.replace(secret, "<redacted>");
                }
            }
        }
        out
    }
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &self.display_url())
            .field("headers", &self.headers)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

/// `url` without the user info part of its authority (`scheme://user:pw@host` → `scheme://host`).
pub fn display_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}{}", &url[..scheme_end + 3], &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> HttpRequest {
        HttpRequest {
            method: HttpMethod::Post,
            url: "https://me:pw@example.com/v1/chat/completions".into(),
            headers: vec![
                HttpHeader::plain("content-type", "application/json"),
                HttpHeader::secret("authorization", "Bearer sk-very-secret"),
            ],
            body: Bytes::from_static(b"{}"),
        }
    }

    #[test]
    fn debug_hides_credentials_and_user_info() {
        let text = format!("{:?}", request());
        assert!(!text.contains("sk-very-secret"), "{text}");
        assert!(!text.contains("me:pw"), "{text}");
        assert!(text.contains("authorization: <redacted>"), "{text}");
        assert!(text.contains("application/json"), "{text}");
    }

    #[test]
    fn scrub_removes_tokens_echoed_by_a_server() {
        let r = request();
        assert_eq!(
            r.scrub("Incorrect API key provided: sk-very-secret."),
            "Incorrect API key provided: <redacted>."
        );
    }

    #[test]
    fn display_url_strips_user_info_only() {
        assert_eq!(display_url("http://h:1/a@b"), "http://h:1/a@b");
        assert_eq!(display_url("http://u@h/x"), "http://h/x");
        assert_eq!(display_url("nonsense"), "nonsense");
    }
}
