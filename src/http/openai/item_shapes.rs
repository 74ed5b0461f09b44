//! What an input item may hold, declared once: the table below is what `items.rs` checks
//! an item against and what the document's `OpenAiInputItem` and `OpenAiContentPart`
//! schemas are built from, so the two cannot drift apart.
//!
//! A table rather than serde types: serde reports a field missing from a tagged item at
//! the item, not at the field, and an untagged content list as matching no variant,
//! where a client needs the field at fault (`input[0].content`).

use serde_json::{json, Map, Value};

use super::errors::{OpenAiError, Result};

/// What one field of an item must be.
pub enum Field {
    Text,
    /// A string among these.
    OneOf(&'static [&'static str]),
    /// A string, or a list of content parts.
    Parts,
    Flag,
    /// A string, null or absent.
    OptionalText,
}

/// An item type and the fields it must have.
pub struct Shape {
    pub kind: &'static str,
    pub fields: &'static [(&'static str, Field)],
}

/// The items the engine sends to the model or keeps with the history: what the model
/// reasoned and what an MCP server listed are kept, not sent. A message may leave out
/// its `type`.
pub const ITEMS: &[Shape] = &[
    Shape {
        kind: "message",
        fields: &[
            ("role", Field::OneOf(&["user", "assistant", "system", "developer"])),
            ("content", Field::Parts),
        ],
    },
    Shape {
        kind: "function_call",
        fields: &[("call_id", Field::Text), ("name", Field::Text), ("arguments", Field::Text)],
    },
    Shape {
        kind: "function_call_output",
        fields: &[("call_id", Field::Text), ("output", Field::Parts)],
    },
    Shape { kind: "reasoning", fields: &[] },
    Shape { kind: "mcp_list_tools", fields: &[] },
    Shape { kind: "mcp_call", fields: MCP_CALL },
    Shape { kind: "mcp_approval_request", fields: MCP_CALL },
    Shape {
        kind: "mcp_approval_response",
        fields: &[
            ("approval_request_id", Field::Text),
            ("approve", Field::Flag),
            ("reason", Field::OptionalText),
        ],
    },
    Shape { kind: "compaction", fields: &[("encrypted_content", Field::Text)] },
];

const MCP_CALL: &[(&str, Field)] = &[
    ("id", Field::Text),
    ("server_label", Field::Text),
    ("name", Field::Text),
    ("arguments", Field::Text),
];

/// The content parts the engine sends, by type, and the string field each carries: text,
/// and an assistant's refusal.
pub const PARTS: &[(&[&str], &str)] =
    &[(&["input_text", "output_text", "text", "summary_text"], "text"), (&["refusal"], "refusal")];

/// The shape of an item of type `kind`; the error names `{at}.type` when there is none.
pub fn shape(at: &str, kind: &str) -> Result<&'static Shape> {
    ITEMS.iter().find(|shape| shape.kind == kind).ok_or_else(|| {
        let known: Vec<_> = ITEMS.iter().map(|shape| shape.kind).collect();
        OpenAiError::invalid(
            &format!("{at}.type"),
            format!("`{kind}` items cannot be sent to the model; use {}", listed(&known)),
        )
    })
}

/// Checks the fields of an item at `at` against its shape. A field's path is spelled
/// only for an error, or for a list of parts to name its members by: input items are
/// checked on every request that sends them.
pub fn check(at: &str, shape: &Shape, item: &Map<String, Value>) -> Result<()> {
    for (name, field) in shape.fields {
        let value = item.get(*name);
        if let (Field::Parts, Some(Value::Array(parts))) = (field, value) {
            check_parts(&format!("{at}.{name}"), parts)?;
        } else if let Some(fault) = fault(field, value) {
            return Err(OpenAiError::invalid(&format!("{at}.{name}"), fault));
        }
    }
    Ok(())
}

/// What is wrong with `value` as `field`, if anything (a list of parts is checked apart).
fn fault(field: &Field, value: Option<&Value>) -> Option<String> {
    match (field, value) {
        (Field::Text | Field::OneOf(_), None) => Some("is required".to_owned()),
        (Field::OneOf(allowed), Some(Value::String(given)))
            if !allowed.contains(&given.as_str()) =>
        {
            Some(format!("must be {}", listed(allowed)))
        }
        (Field::Text | Field::OneOf(_) | Field::OptionalText, Some(Value::String(_)))
        | (Field::OptionalText, None | Some(Value::Null))
        | (Field::Parts, Some(Value::String(_) | Value::Array(_)))
        | (Field::Flag, Some(Value::Bool(_))) => None,
        (Field::Text | Field::OneOf(_) | Field::OptionalText, Some(_)) => {
            Some("must be a string".to_owned())
        }
        (Field::Parts, _) => Some("must be a string or a list of content parts".to_owned()),
        (Field::Flag, _) => Some("must be true or false".to_owned()),
    }
}

/// Content parts at `field`, each of a type the engine sends with its string.
fn check_parts(field: &str, parts: &[Value]) -> Result<()> {
    for (j, part) in parts.iter().enumerate() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
        let Some((_, text)) = PARTS.iter().find(|(kinds, _)| kinds.contains(&kind)) else {
            return Err(OpenAiError::invalid(
                &format!("{field}[{j}].type"),
                format!("`{kind}` parts cannot be sent to the model; only text parts"),
            ));
        };
        if !part.get(*text).is_some_and(Value::is_string) {
            return Err(OpenAiError::invalid(&format!("{field}[{j}].{text}"), "must be a string"));
        }
    }
    Ok(())
}

/// `a, b or c`.
fn listed(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [only] => (*only).to_owned(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// The JSON Schema of an input item: one object per shape.
pub fn item_schema(parts: Value) -> Value {
    let shapes = ITEMS.iter().map(|shape| {
        let mut required: Vec<&str> = if shape.kind == "message" { vec![] } else { vec!["type"] };
        let mut properties = Map::new();
        properties.insert("type".into(), json!({"type": "string", "enum": [shape.kind]}));
        for (name, field) in shape.fields {
            let schema = match field {
                Field::Text => json!({"type": "string"}),
                Field::OneOf(allowed) => json!({"type": "string", "enum": allowed}),
                Field::Parts => parts.clone(),
                Field::Flag => json!({"type": "boolean"}),
                Field::OptionalText => json!({"type": ["string", "null"]}),
            };
            if !matches!(field, Field::OptionalText) {
                required.push(name);
            }
            properties.insert((*name).into(), schema);
        }
        json!({"type": "object", "required": required, "properties": properties})
    });
    json!({
        "description": "A message (its `type` may be left out), a function call or its output, \
                        a reasoning item, an MCP server's listed tools, call, approval request \
                        or approval response, or a compaction this service made.",
        "oneOf": shapes.collect::<Vec<_>>(),
    })
}

/// The JSON Schema of a content part: one object per part type's string.
pub fn part_schema() -> Value {
    let parts = PARTS.iter().map(|(kinds, text)| {
        json!({
            "type": "object",
            "required": ["type", text],
            "properties": {"type": {"type": "string", "enum": kinds}, *text: {"type": "string"}},
        })
    });
    json!({"oneOf": parts.collect::<Vec<_>>()})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::ApiError;

    /// The field an item's check names, or None when the item passes.
    fn refused(shape: &Shape, item: &Value) -> Option<String> {
        match check("input[0]", shape, item.as_object().unwrap()) {
            Ok(()) => None,
            Err(OpenAiError::Api(ApiError::InvalidRequest { field, .. })) => Some(field),
            Err(other) => panic!("{other:?}"),
        }
    }

    /// An item of the shape with every field given.
    fn whole(shape: &Shape) -> Value {
        let mut item = Map::new();
        item.insert("type".into(), shape.kind.into());
        for (name, field) in shape.fields {
            let value = match field {
                Field::Text | Field::OptionalText | Field::Parts => json!("x"),
                Field::OneOf(allowed) => json!(allowed[0]),
                Field::Flag => json!(true),
            };
            item.insert((*name).into(), value);
        }
        Value::Object(item)
    }

    #[test]
    fn the_schema_requires_what_the_check_requires_of_every_shape() {
        let schema = item_schema(json!({"type": "string"}));
        let listed = schema["oneOf"].as_array().unwrap();
        assert_eq!(listed.len(), ITEMS.len());
        for (shape, listed) in ITEMS.iter().zip(listed) {
            assert_eq!(listed["properties"]["type"]["enum"], json!([shape.kind]));
            assert_eq!(refused(shape, &whole(shape)), None, "{}", shape.kind);
            let mut required = vec![];
            for (name, _) in shape.fields {
                let mut item = whole(shape);
                item.as_object_mut().unwrap().remove(*name);
                if let Some(field) = refused(shape, &item) {
                    assert_eq!(field, format!("input[0].{name}"));
                    required.push(*name);
                }
                assert!(listed["properties"].get(*name).is_some(), "{name}");
            }
            let in_schema: Vec<_> = listed["required"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .filter(|name| *name != "type")
                .collect();
            assert_eq!(in_schema, required, "{}", shape.kind);
        }
    }

    #[test]
    fn a_field_of_the_wrong_kind_is_named() {
        let message = shape("input[0]", "message").unwrap();
        let role = json!({"role": "robot", "content": "hi"});
        assert_eq!(refused(message, &role).as_deref(), Some("input[0].role"));
        let parts = json!({"role": "user", "content": [{"type": "input_text", "text": "a"},
                                                       {"type": "input_image"}]});
        assert_eq!(refused(message, &parts).as_deref(), Some("input[0].content[1].type"));
        let text = json!({"role": "user", "content": [{"type": "refusal", "text": "a"}]});
        assert_eq!(refused(message, &text).as_deref(), Some("input[0].content[0].refusal"));
        let answer = shape("input[0]", "mcp_approval_response").unwrap();
        let flag = json!({"approval_request_id": "a", "approve": "yes"});
        assert_eq!(refused(answer, &flag).as_deref(), Some("input[0].approve"));
        let reason = json!({"approval_request_id": "a", "approve": true, "reason": null});
        assert_eq!(refused(answer, &reason), None);
        assert!(shape("input[0]", "item_reference").is_err());
    }

    #[test]
    fn choices_read_as_a_list() {
        assert_eq!(listed(&["a"]), "a");
        assert_eq!(listed(&["a", "b", "c"]), "a, b or c");
    }
}
