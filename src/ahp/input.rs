//! Elicitations as AHP chat input requests: a session's `elicitation.requested` (an MCP
//! server's `elicitation/create`, a client's `session.ui.elicitation`, a scenario's `ask`)
//! becomes `chat/inputRequested` with one question per property of its form schema; a
//! client's `chat/inputCompleted` becomes the elicitation's answer.
//!
//! | schema property | question |
//! |---|---|
//! | `enum` (string) | `single-select`, one option per value |
//! | `type: array` with `items.enum` | `multi-select` |
//! | `type: boolean` | `boolean` |
//! | `type: number` / `integer` | `number` / `integer` |
//! | anything else | `text` |
//!
//! A URL-mode elicitation carries its `url` and no questions.

use std::collections::HashMap;

use ahp_types::state::{
    ChatInputAnswer, ChatInputAnswerValue, ChatInputBooleanQuestion, ChatInputMultiSelectQuestion,
    ChatInputNumberQuestion, ChatInputOption, ChatInputQuestion, ChatInputRequest,
    ChatInputSingleSelectQuestion, ChatInputTextQuestion,
};
use serde_json::{Map, Value};

fn options(values: &Value) -> Vec<ChatInputOption> {
    values
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|v| ChatInputOption {
            id: v.to_owned(),
            label: v.to_owned(),
            description: None,
            recommended: None,
        })
        .collect()
}

/// The question for form property `id` with schema `schema`.
fn question(id: &str, schema: &Value, required: bool) -> ChatInputQuestion {
    let text = |name: &str| schema.get(name).and_then(Value::as_str).map(str::to_owned);
    let id = id.to_owned();
    let title = text("title");
    let message = text("description")
        .or_else(|| title.clone())
        .unwrap_or_else(|| id.clone());
    let required = Some(required);
    if let Some(values) = schema.get("enum") {
        return ChatInputQuestion::SingleSelect(ChatInputSingleSelectQuestion {
            id,
            title,
            message,
            required,
            options: options(values),
            allow_freeform_input: None,
        });
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("array") => ChatInputQuestion::MultiSelect(ChatInputMultiSelectQuestion {
            id,
            title,
            message,
            required,
            options: options(schema.pointer("/items/enum").unwrap_or(&Value::Null)),
            allow_freeform_input: None,
            min: schema.get("minItems").and_then(Value::as_i64),
            max: schema.get("maxItems").and_then(Value::as_i64),
        }),
        Some("boolean") => ChatInputQuestion::Boolean(ChatInputBooleanQuestion {
            id,
            title,
            message,
            required,
            default_value: schema.get("default").and_then(Value::as_bool),
        }),
        Some(kind @ ("number" | "integer")) => {
            let q = ChatInputNumberQuestion {
                id,
                title,
                message,
                required,
                min: schema.get("minimum").and_then(Value::as_f64),
                max: schema.get("maximum").and_then(Value::as_f64),
                default_value: schema.get("default").and_then(Value::as_f64),
            };
            if kind == "integer" {
                ChatInputQuestion::Integer(q)
            } else {
                ChatInputQuestion::Number(q)
            }
        }
        _ => ChatInputQuestion::Text(ChatInputTextQuestion {
            id,
            title,
            message,
            required,
            format: text("format"),
            min: schema.get("minLength").and_then(Value::as_i64),
            max: schema.get("maxLength").and_then(Value::as_i64),
            default_value: text("default"),
        }),
    }
}

/// The input request for an `elicitation.requested` event's `data`.
pub(crate) fn request(data: &Value) -> ChatInputRequest {
    let schema = data.get("requestedSchema").unwrap_or(&Value::Null);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let questions: Vec<ChatInputQuestion> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(id, s)| question(id, s, required.contains(&id.as_str())))
        .collect();
    ChatInputRequest {
        id: data
            .get("requestId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        message: data
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned),
        url: data.get("url").and_then(Value::as_str).map(str::to_owned),
        questions: (!questions.is_empty()).then_some(questions),
        answers: None,
    }
}

/// The elicitation's `content` for a client's submitted answers: each answered question's
/// value under its id (skipped and draft answers left out).
pub(crate) fn content(answers: &HashMap<String, ChatInputAnswer>) -> Value {
    let mut content = Map::new();
    for (id, answer) in answers {
        let ChatInputAnswer::Submitted(answered) = answer else {
            continue;
        };
        let value = match &answered.value {
            ChatInputAnswerValue::Text(v) => Value::from(v.value.clone()),
            ChatInputAnswerValue::Number(v) => Value::from(v.value),
            ChatInputAnswerValue::Boolean(v) => Value::from(v.value),
            ChatInputAnswerValue::Selected(v) => Value::from(v.value.clone()),
            ChatInputAnswerValue::SelectedMany(v) => Value::from(v.value.clone()),
            ChatInputAnswerValue::Unknown(v) => v.clone(),
        };
        content.insert(id.clone(), value);
    }
    Value::Object(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_form_schema_becomes_questions_and_answers_become_content() {
        let r = request(&json!({
            "requestId": "e1", "message": "Deploy?",
            "requestedSchema": {"type": "object", "required": ["env"], "properties": {
                "env": {"type": "string", "enum": ["prod", "dev"]},
                "confirmed": {"type": "boolean", "description": "Sure?"},
                "replicas": {"type": "integer", "minimum": 1},
                "note": {"type": "string"}}}}));
        assert_eq!(r.id, "e1");
        let questions = serde_json::to_value(r.questions.unwrap()).unwrap();
        let kinds: Vec<&str> = questions
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["kind"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(kinds.len(), 4, "{questions}");
        for kind in ["single-select", "boolean", "integer", "text"] {
            assert!(kinds.contains(&kind), "{kind} in {questions}");
        }
        let answers: HashMap<String, ChatInputAnswer> = serde_json::from_value(json!({
            "env": {"state": "submitted", "value": {"kind": "selected", "value": "prod"}},
            "confirmed": {"state": "submitted", "value": {"kind": "boolean", "value": true}},
            "note": {"state": "skipped"}}))
        .unwrap();
        assert_eq!(content(&answers), json!({"env": "prod", "confirmed": true}));
    }
}
