//! Where cluster state lives in NATS: stream, subjects, KV bucket and keys.

use crate::escape::escape_id;

/// The names of the stream, subjects and bucket a cluster uses.
///
/// Every session has one subject in the log stream (`<log_prefix>.<escaped id>`) and one core NATS
/// subject for its live feed (`<live_prefix>.<escaped id>`). The live prefix must not be captured
/// by the log stream: a core subscriber on a stream subject also receives publishes JetStream
/// rejected, so a fenced owner's events would reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The JetStream stream holding every session's log.
    pub log_stream: String,
    /// Subject prefix of the session logs; the stream captures `<log_prefix>.*`.
    pub log_prefix: String,
    /// Subject prefix of the sessions' live feeds (core NATS, never stored).
    pub live_prefix: String,
    /// The KV bucket holding node leases.
    pub lease_bucket: String,
}

impl Default for Layout {
    fn default() -> Self {
        Self::with_prefix("agentwire")
    }
}

impl Layout {
    /// A layout whose names all start with `prefix` (tests use distinct prefixes to stay apart).
    pub fn with_prefix(prefix: &str) -> Self {
        Self {
            log_stream: format!("{}_LOG", prefix.to_ascii_uppercase()),
            log_prefix: format!("{prefix}.log"),
            live_prefix: format!("{prefix}.live"),
            lease_bucket: format!("{prefix}_nodes"),
        }
    }

    /// The subject filter the log stream captures.
    pub fn log_filter(&self) -> String {
        format!("{}.*", self.log_prefix)
    }

    /// The log subject of `session`.
    pub fn log_subject(&self, session: &str) -> String {
        format!("{}.{}", self.log_prefix, escape_id(session))
    }

    /// The live-feed subject of `session`.
    pub fn live_subject(&self, session: &str) -> String {
        format!("{}.{}", self.live_prefix, escape_id(session))
    }

    /// Where node `owner` accepts gateway links (and answers probes).
    pub fn link_open_subject(&self, owner: &str) -> String {
        format!("{}.link.{}", self.live_prefix, escape_id(owner))
    }

    /// The gateway-to-owner subject of link `link`.
    pub fn link_in_subject(&self, link: &str) -> String {
        format!("{}.in.{link}", self.live_prefix)
    }

    /// The owner-to-gateway subject of relay group `group`.
    pub fn group_subject(&self, group: &str) -> String {
        format!("{}.grp.{group}", self.live_prefix)
    }

    /// Where the receiver of the link or group messages on `subject` asks for lost ones again.
    pub fn resend_subject(&self, subject: &str) -> String {
        let tail = subject
            .strip_prefix(self.live_prefix.as_str())
            .and_then(|t| t.strip_prefix('.'))
            .unwrap_or(subject);
        format!("{}.re.{tail}", self.live_prefix)
    }

    /// The lease key of `node`.
    pub fn lease_key(&self, node: &str) -> String {
        lease_key(node)
    }
}

/// The lease-bucket key of `node`: its escaped id.
pub fn lease_key(node: &str) -> String {
    escape_id(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_with_dots_stays_one_token() {
        let layout = Layout::default();
        assert_eq!(layout.log_subject("a.b"), "agentwire.log.sa_2Eb");
        assert_eq!(layout.live_subject("a.b"), "agentwire.live.sa_2Eb");
        assert_eq!(layout.log_filter(), "agentwire.log.*");
        assert!(!layout.live_subject("x").starts_with(&layout.log_prefix));
    }
}
