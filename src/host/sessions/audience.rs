//! Who receives an event: the ownership and opt-in filters, decided at publish time.

use std::collections::BTreeSet;

use crate::session::{is_streaming_delta_type, Attachment};

/// Whether a connection with `attachment` receives an event of `event_type`.
///
/// * Streaming deltas (`assistant.message_delta`, …) only reach connections that attached
///   with `streaming: true`.
/// * `mcp_app.*` events only reach connections that render MCP Apps.
/// * `permission.requested` is not shown to extension connections unless a non-extension
///   client approved that extension for the session (`extension-permission-access`).
///
/// Targeted events (e.g. `command.execute` to the command's owner, a client tool's
/// `external_tool.requested` to its extension) are narrowed further by the caller.
#[cfg(test)]
pub(crate) fn receives(
    attachment: &Attachment,
    event_type: &str,
    approved_extensions: &BTreeSet<String>,
) -> bool {
    Audience::of(event_type).admits(attachment, approved_extensions)
}

/// The filter class of one event type, decided once per published event: the string
/// comparisons happen here, and [`Audience::admits`] only reads an attachment's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Audience {
    /// Only connections that asked for streaming deltas.
    streaming_only: bool,
    /// Only connections that render MCP Apps.
    mcp_apps_only: bool,
    /// `permission.requested`: extensions only when approved.
    permission_prompt: bool,
    /// A sub-agent's streaming delta: only connections that kept
    /// `includeSubAgentStreamingEvents`.
    sub_agent_stream: bool,
}

impl Audience {
    /// The audience of events of `event_type` (see [`receives`] for the rules).
    pub(crate) fn of(event_type: &str) -> Self {
        Audience {
            streaming_only: is_streaming_delta_type(event_type),
            mcp_apps_only: event_type.starts_with("mcp_app."),
            permission_prompt: event_type == "permission.requested",
            sub_agent_stream: false,
        }
    }

    /// The audience of an event a sub-agent emitted (`from_sub_agent`, it carries `agentId`):
    /// its streaming deltas reach only connections that want sub-agent streaming.
    pub(crate) fn with_sub_agent(mut self, from_sub_agent: bool) -> Self {
        self.sub_agent_stream = from_sub_agent && self.streaming_only;
        self
    }

    /// Every attached connection receives it (no per-connection check is needed).
    pub(crate) fn is_everyone(self) -> bool {
        !self.streaming_only && !self.mcp_apps_only && !self.permission_prompt
    }

    /// Whether a connection with `attachment` receives the event.
    #[inline]
    pub(crate) fn admits(
        self,
        attachment: &Attachment,
        approved_extensions: &BTreeSet<String>,
    ) -> bool {
        if self.streaming_only && !attachment.streaming {
            return false;
        }
        if self.sub_agent_stream && !attachment.include_sub_agent_streaming {
            return false;
        }
        if self.mcp_apps_only && !attachment.mcp_apps {
            return false;
        }
        if self.permission_prompt {
            if let Some(extension) = &attachment.extension {
                return approved_extensions.contains(extension);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_by_opt_in_and_ownership() {
        let none = BTreeSet::new();
        let plain = Attachment::default();
        assert!(receives(&plain, "assistant.message", &none));
        assert!(!receives(&plain, "assistant.message_delta", &none));
        assert!(!receives(&plain, "mcp_app.tool_call_complete", &none));
        assert!(receives(&plain, "permission.requested", &none));
        let streaming = Attachment {
            streaming: true,
            mcp_apps: true,
            ..Attachment::default()
        };
        assert!(receives(&streaming, "assistant.message_delta", &none));
        assert!(receives(&streaming, "mcp_app.tool_call_complete", &none));
        let extension = Attachment {
            extension: Some("ext-a".into()),
            ..Attachment::default()
        };
        assert!(!receives(&extension, "permission.requested", &none));
        let approved: BTreeSet<String> = ["ext-a".to_owned()].into();
        assert!(receives(&extension, "permission.requested", &approved));
        assert!(receives(&extension, "permission.completed", &none));
        assert!(Audience::of("session.idle").is_everyone());
        assert!(!Audience::of("assistant.message_delta").is_everyone());
        assert!(!Audience::of("mcp_app.tool_call_complete").is_everyone());
        assert!(!Audience::of("permission.requested").is_everyone());
    }
}
