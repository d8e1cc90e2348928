//! What the link and group machines ask of the live subjects: core NATS in the runtime, the
//! in-memory engine's live subjects in the host simulation. One runner performs it for both
//! sides of a node's links ([`super::owner_links`], [`super::gateway_links`]).

use bytes::Bytes;

/// One thing to do on the live subjects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveIo {
    /// Receive `subject`'s messages (into the machine's `handle_message`) from now on.
    Subscribe(String),
    /// Stop receiving `subject`'s messages.
    Unsubscribe(String),
    /// Publish `message` on `subject`.
    Publish {
        /// Where.
        subject: String,
        /// The link message.
        message: Bytes,
    },
    /// Messages of a link or group were lost: publish the request to send them again,
    /// `message`, on the sender's resend `subject`.
    AskAgain {
        /// Where.
        subject: String,
        /// The resend request.
        message: Bytes,
    },
}
