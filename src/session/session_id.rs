//! Session ids: how every dialect names a session (`sessionId` on the wire).

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A session's id, as clients of every dialect name it (the Copilot SDK's and ACP's
/// `sessionId`). A string with a type of its own, so that a session id is never mixed up
/// with another string; it borrows as `&str`, so maps keyed by it are looked up with one.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// The id `id`.
    pub fn new(id: impl Into<String>) -> Self {
        SessionId(id.into())
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for SessionId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<String> for SessionId {
    fn from(id: String) -> Self {
        SessionId(id)
    }
}

impl From<&str> for SessionId {
    fn from(id: &str) -> Self {
        SessionId(id.to_owned())
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> Self {
        id.0
    }
}

impl PartialEq<str> for SessionId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for SessionId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::SessionId;

    #[test]
    fn a_session_id_is_its_string_on_the_wire_and_in_maps() {
        let id = SessionId::from("s-1");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"s-1\"");
        assert_eq!(serde_json::from_str::<SessionId>("\"s-1\"").unwrap(), id);
        assert!(serde_json::from_str::<SessionId>("7").is_err());
        let mut sessions = BTreeMap::new();
        sessions.insert(id.clone(), 1);
        assert_eq!(sessions.get("s-1"), Some(&1));
        assert_eq!(id.to_string(), "s-1");
        assert_eq!(id, "s-1");
    }
}
