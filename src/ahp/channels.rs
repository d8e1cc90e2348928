//! AHP channel URIs and the host's sessions they name.
//!
//! | channel | what it is |
//! |---|---|
//! | `ahp-root://` | the root: agents, the session count, `root/session*` notifications |
//! | `ahp-session:/<id>` | the host session `<id>` |
//! | `ahp-chat:/<id>` | the chat host session `<id>` holds: the default chat of AHP session `<id>`, or an extra chat of another AHP session (see `chats`) |
//!
//! Every host session holds exactly one chat (an AHP session's extra chats are host
//! sessions of their own), so a chat's URI carries its host session's id.

/// The root channel.
pub(crate) const ROOT: &str = ahp_types::ROOT_RESOURCE_URI;

const SESSION_PREFIX: &str = "ahp-session:/";
const CHAT_PREFIX: &str = "ahp-chat:/";

/// A parsed channel URI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Channel<'a> {
    /// `ahp-root://`.
    Root,
    /// `ahp-session:/<id>`: the session's id.
    Session(&'a str),
    /// `ahp-chat:/<id>`: the id of the host session whose chat it is.
    Chat(&'a str),
}

impl<'a> Channel<'a> {
    /// Parses `uri`; `None` for a scheme this host does not serve or an empty id.
    pub(crate) fn parse(uri: &'a str) -> Option<Channel<'a>> {
        if uri == ROOT {
            return Some(Channel::Root);
        }
        let valid = |id: &'a str| (!id.is_empty() && !id.contains('/')).then_some(id);
        if let Some(id) = uri.strip_prefix(SESSION_PREFIX) {
            return valid(id).map(Channel::Session);
        }
        if let Some(id) = uri.strip_prefix(CHAT_PREFIX) {
            return valid(id).map(Channel::Chat);
        }
        None
    }

    /// The session the channel belongs to (`None` for the root).
    pub(crate) fn session(self) -> Option<&'a str> {
        match self {
            Channel::Root => None,
            Channel::Session(id) | Channel::Chat(id) => Some(id),
        }
    }
}

/// The channel of session `id`.
pub(crate) fn session_uri(id: &str) -> String {
    format!("{SESSION_PREFIX}{id}")
}

/// The channel of session `id`'s chat.
pub(crate) fn chat_uri(id: &str) -> String {
    format!("{CHAT_PREFIX}{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_round_trip_and_junk_is_refused() {
        assert_eq!(Channel::parse("ahp-root://"), Some(Channel::Root));
        assert_eq!(
            Channel::parse(&session_uri("s1")),
            Some(Channel::Session("s1"))
        );
        assert_eq!(Channel::parse(&chat_uri("s1")), Some(Channel::Chat("s1")));
        assert_eq!(Channel::parse("ahp-session:/"), None);
        assert_eq!(Channel::parse("ahp-chat:/a/b"), None);
        assert_eq!(Channel::parse("ahp-terminal:/t"), None);
        assert_eq!(Channel::parse(""), None);
    }
}
