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

impl LiveIo {
    /// Queues every message `next` hands out as a [`LiveIo::Publish`] (or, with `ask_again`,
    /// a [`LiveIo::AskAgain`]) on the subject `subject` builds, wrapped by `wrap`. The
    /// subject is built only when there is a message: a machine pumped after every input
    /// usually has none.
    pub(crate) fn queue_each<E>(
        events: &mut std::collections::VecDeque<E>,
        wrap: fn(LiveIo) -> E,
        ask_again: bool,
        subject: impl FnOnce() -> String,
        mut next: impl FnMut() -> Option<Bytes>,
    ) {
        let Some(mut message) = next() else {
            return;
        };
        let subject = subject();
        loop {
            let subject = subject.clone();
            events.push_back(wrap(match ask_again {
                true => LiveIo::AskAgain { subject, message },
                false => LiveIo::Publish { subject, message },
            }));
            match next() {
                Some(more) => message = more,
                None => return,
            }
        }
    }
}
