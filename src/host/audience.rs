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
pub(crate) fn receives(
    attachment: &Attachment,
    event_type: &str,
    approved_extensions: &BTreeSet<String>,
) -> bool {
    if is_streaming_delta_type(event_type) && !attachment.streaming {
        return false;
    }
    if event_type.starts_with("mcp_app.") && !attachment.mcp_apps {
        return false;
    }
    if event_type == "permission.requested" {
        if let Some(extension) = &attachment.extension {
            return approved_extensions.contains(extension);
        }
    }
    true
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
    }
}
