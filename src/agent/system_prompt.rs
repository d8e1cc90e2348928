//! The model agent's system prompt, in the sections the runtime names (`systemMessage` with
//! `mode: "customize"` addresses them): `preamble`, `tone`, `tool_efficiency` (together the
//! `identity` group), `environment_context`, `code_change_rules`, `guidelines`, `safety`,
//! `tool_instructions`, `custom_instructions`, `runtime_instructions`, `last_instructions`.
//! The wording is agentwire's own; each section is wrapped in a tag of its own so a removed
//! one leaves no trace.
//!
//! A section override is `replace` (with `content`, empty when absent), `remove`, `append`,
//! `prepend`, `preserve` (keeps a sub-section of a removed group) or `transform` (the client
//! rewrites it: `systemMessage.transform`, see the host's turn gate). `identity` addresses the
//! group for `remove` and the preamble otherwise.

use std::collections::BTreeMap;

use serde_json::Value;

/// The default sections, in order: (id, text).
pub const DEFAULT_SECTIONS: [(&str, &str); 11] = [
    (
        "preamble",
        "You are an AI coding agent hosted by agentwire, a runtime for GitHub Copilot SDK apps \
         and ACP editors. You help the user with software engineering tasks in their working \
         directory.",
    ),
    (
        "tone",
        "<tone>\nAnswer concisely and directly. Prefer short paragraphs and lists; show code \
         only when it helps.\n</tone>",
    ),
    (
        "tool_efficiency",
        "<tool_efficiency>\nWhen several tool calls do not depend on each other, make them in \
         the same response.\n</tool_efficiency>",
    ),
    ("environment_context", ""),
    (
        "code_change_rules",
        "<code_change_instructions>\nMake the smallest change that does what was asked; keep \
         the project's style; run its tests when you can.\n</code_change_instructions>",
    ),
    (
        "guidelines",
        "<guidelines>\nWhen a tool can answer better than you can, call it, and report what it \
         returned.\n</guidelines>",
    ),
    (
        "safety",
        "<safety>\nDo not run destructive commands or reveal secrets unless the user asks for \
         it explicitly.\n</safety>",
    ),
    ("tool_instructions", ""),
    ("custom_instructions", ""),
    ("runtime_instructions", ""),
    ("last_instructions", ""),
];

/// The sections of the `identity` group.
const IDENTITY_GROUP: [&str; 3] = ["preamble", "tone", "tool_efficiency"];

/// One section override of `systemMessage.sections`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionOverride {
    /// `replace`, `remove`, `append`, `prepend`, `preserve` or `transform`.
    pub action: String,
    /// The override's text.
    pub content: String,
}

/// Parses `systemMessage.sections` (unknown shapes are skipped).
pub fn parse_sections(value: Option<&Value>) -> Vec<(String, SectionOverride)> {
    let Some(Value::Object(map)) = value else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(id, o)| {
            let action = o.get("action")?.as_str()?.to_owned();
            let content = o
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            Some((id.clone(), SectionOverride { action, content }))
        })
        .collect()
}

/// The section a customize id names (`identity` → `preamble`).
fn target(id: &str) -> &str {
    if id == "identity" {
        "preamble"
    } else {
        id
    }
}

/// The default sections with the static overrides applied (transforms not yet): (id, text).
pub fn customized_sections(overrides: &[(String, SectionOverride)]) -> Vec<(String, String)> {
    let action_of = |id: &str| {
        overrides
            .iter()
            .find(|(o, _)| o == id)
            .map(|(_, o)| o.action.as_str())
    };
    let group_removed = action_of("identity") == Some("remove");
    let mut out = Vec::new();
    for (id, text) in DEFAULT_SECTIONS {
        let in_group = IDENTITY_GROUP.contains(&id);
        let own = overrides
            .iter()
            .find(|(o, _)| target(o) == id && o != "identity");
        let group = overrides
            .iter()
            .find(|(o, _)| o == "identity")
            .filter(|_| id == "preamble");
        let removed =
            (in_group && group_removed && own.map(|(_, o)| o.action.as_str()) != Some("preserve"))
                || own.is_some_and(|(_, o)| o.action == "remove");
        if removed {
            continue;
        }
        let mut text = text.to_owned();
        for (_, o) in own.into_iter().chain(group) {
            match o.action.as_str() {
                "replace" => text = o.content.clone(),
                "append" => text = format!("{text}\n{}", o.content),
                "prepend" => text = format!("{}\n{text}", o.content),
                _ => {}
            }
        }
        out.push((id.to_owned(), text));
    }
    out
}

/// The ids (as the client named them) whose sections the client transforms, with their
/// current text.
pub fn transform_requests(
    overrides: &[(String, SectionOverride)],
    sections: &[(String, String)],
) -> BTreeMap<String, String> {
    overrides
        .iter()
        .filter(|(_, o)| o.action == "transform")
        .filter_map(|(id, _)| {
            let text = sections.iter().find(|(s, _)| s == target(id))?.1.clone();
            Some((id.clone(), text))
        })
        .collect()
}

/// Joins sections (empty ones left out), with the client's transformed texts and `appended`.
pub fn compose(
    sections: &[(String, String)],
    transformed: &BTreeMap<String, String>,
    appended: &str,
) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for (id, text) in sections {
        let text = transformed
            .iter()
            .find(|(t, _)| target(t) == id)
            .map_or(text.as_str(), |(_, t)| t.as_str());
        if !text.is_empty() {
            parts.push(text);
        }
    }
    if !appended.is_empty() {
        parts.push(appended);
    }
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_replace_remove_and_append() {
        let overrides = parse_sections(Some(&json!({
            "tone": {"action": "replace", "content": "Be warm."},
            "code_change_rules": {"action": "remove"},
            "safety": {"action": "append", "content": "Extra."},
            "junk": 7
        })));
        let sections = customized_sections(&overrides);
        let text = compose(&sections, &BTreeMap::new(), "Appended.");
        assert!(text.contains("Be warm."), "{text}");
        assert!(!text.contains("<tone>"), "{text}");
        assert!(!text.contains("<code_change_instructions>"), "{text}");
        assert!(text.contains("</safety>\nExtra."), "{text}");
        assert!(text.ends_with("\n\nAppended."), "{text}");
    }

    #[test]
    fn removing_the_identity_group_keeps_preserved_sections() {
        let overrides = parse_sections(Some(&json!({
            "identity": {"action": "remove"},
            "tone": {"action": "preserve"}
        })));
        let ids: Vec<String> = customized_sections(&overrides)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert!(!ids.contains(&"preamble".to_owned()));
        assert!(!ids.contains(&"tool_efficiency".to_owned()));
        assert!(ids.contains(&"tone".to_owned()));
    }

    #[test]
    fn transforms_ask_for_current_text_and_replace_it() {
        let overrides = parse_sections(Some(&json!({
            "identity": {"action": "transform"},
            "tone": {"action": "transform"}
        })));
        let sections = customized_sections(&overrides);
        let asked = transform_requests(&overrides, &sections);
        assert_eq!(asked.len(), 2);
        assert!(asked["identity"].contains("agentwire"));
        let mut back = BTreeMap::new();
        back.insert("identity".to_owned(), "MARKER identity".to_owned());
        let text = compose(&sections, &back, "");
        assert!(text.starts_with("MARKER identity\n\n<tone>"), "{text}");
    }
}
