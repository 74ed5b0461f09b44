//! Items in OpenAI's shape. Stored items are already Responses items; on the way out
//! each gets an `id` and a `type`, a message gets `status` and a list of typed content
//! parts even when it was stored as `{role, content: "text"}`, and a compaction shows
//! only its sealed content. On the way in, only what the engine can send to the model is
//! taken, and a compaction item is opened to its summary.

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::errors::{OpenAiError, Result};
use super::item_shapes;
use crate::model::ItemBody;
use crate::sealing::{SealError, Sealer};

/// What a sealed compaction summary is, for the sealer.
pub const SEALED_SUMMARY: &str = "compaction_summary";

/// A stored item as OpenAI shows it, under `id`.
pub fn view(stored: &RawValue, id: &str) -> Value {
    let Ok(Value::Object(mut item)) = serde_json::from_str(stored.get()) else {
        return json!({"id": id, "type": "unknown"});
    };
    let kind = match item.get("type").and_then(Value::as_str) {
        Some(kind) => kind.to_owned(),
        None if item.contains_key("role") => "message".to_owned(),
        None => "unknown".to_owned(),
    };
    item.insert("id".into(), id.into());
    item.insert("type".into(), kind.clone().into());
    match kind.as_str() {
        "message" => {
            let role = item.get("role").and_then(Value::as_str).unwrap_or("user");
            let part = if role == "assistant" { "output_text" } else { "input_text" };
            if let Some(Value::String(text)) = item.get("content") {
                let mut text_part = json!({"type": part, "text": text});
                if part == "output_text" {
                    text_part["annotations"] = json!([]);
                }
                item.insert("content".into(), json!([text_part]));
            }
            item.entry("status").or_insert_with(|| "completed".into());
        }
        "function_call" | "function_call_output" => {
            item.entry("status").or_insert_with(|| "completed".into());
        }
        "compaction" => {
            item.remove("summary");
        }
        _ => {}
    }
    Value::Object(item)
}

/// The items of an `input` (a string, or a list of items) as the session keeps them.
/// `field` names the input in errors.
pub async fn input(
    sealer: &Sealer, tenant: &str, field: &str, input: &Value,
) -> Result<Vec<ItemBody>> {
    let items = match input {
        Value::String(text) if text.is_empty() => {
            return Err(OpenAiError::invalid(field, "must not be empty"))
        }
        Value::String(text) => {
            let message = crate::model::run_items::user_message(text);
            return Ok(vec![ItemBody::new(field, message)?]);
        }
        Value::Array(items) if items.is_empty() => {
            return Err(OpenAiError::invalid(field, "must hold at least one item"))
        }
        Value::Array(items) => items,
        _ => return Err(OpenAiError::invalid(field, "must be a string or a list of items")),
    };
    let mut taken = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let item = checked(sealer, tenant, &at, item).await?;
        let raw = RawValue::from_string(item.to_string()).expect("a value serializes");
        taken.push(ItemBody::new(&at, raw)?);
    }
    Ok(taken)
}

/// One input item, checked against its shape; a compaction opened.
async fn checked(sealer: &Sealer, tenant: &str, at: &str, item: &Value) -> Result<Value> {
    let Value::Object(fields) = item else {
        return Err(OpenAiError::invalid(at, "must be an item object"));
    };
    let kind = match fields.get("type") {
        None => "message",
        Some(Value::String(kind)) => kind.as_str(),
        Some(_) => return Err(OpenAiError::invalid(&format!("{at}.type"), "must be a string")),
    };
    let shape = item_shapes::shape(at, kind)?;
    item_shapes::check(at, shape, fields)?;
    if kind != "compaction" {
        return Ok(item.clone());
    }
    let sealed = fields["encrypted_content"].as_str().expect("a checked compaction");
    let summary = match sealer.open(tenant, SEALED_SUMMARY, sealed).await {
        Ok(summary) => summary,
        Err(SealError::Forged) => {
            return Err(OpenAiError::invalid(
                &format!("{at}.encrypted_content"),
                "is not a compaction this service made for this tenant, or it was altered",
            ))
        }
        Err(SealError::Store(error)) => return Err(error.into()),
    };
    let mut kept = Map::new();
    kept.insert("type".into(), "compaction".into());
    kept.insert("encrypted_content".into(), sealed.into());
    kept.insert("summary".into(), summary.into());
    Ok(Value::Object(kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(value: Value) -> Box<RawValue> {
        RawValue::from_string(value.to_string()).unwrap()
    }

    #[test]
    fn a_message_stored_with_text_content_reads_as_typed_parts() {
        let user = view(&raw(json!({"role": "user", "content": "hi"})), "i1");
        assert_eq!(
            user,
            json!({"id": "i1", "type": "message", "role": "user", "status": "completed",
                   "content": [{"type": "input_text", "text": "hi"}]})
        );
        let assistant = view(&raw(json!({"role": "assistant", "content": "yo"})), "i2");
        assert_eq!(assistant["content"][0]["type"], "output_text");
        assert_eq!(assistant["content"][0]["annotations"], json!([]));
        let call = view(
            &raw(json!({"type": "function_call", "call_id": "c", "name": "f",
                                    "arguments": "{}"})),
            "i3",
        );
        assert_eq!((call["status"].as_str(), call["id"].as_str()), (Some("completed"), Some("i3")));
        let compaction = view(
            &raw(json!({"type": "compaction", "summary": "s", "encrypted_content": "e"})),
            "i4",
        );
        assert_eq!(compaction, json!({"id": "i4", "type": "compaction", "encrypted_content": "e"}));
    }
}
