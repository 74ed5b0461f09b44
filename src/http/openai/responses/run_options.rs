//! The fields of a `POST /v1/responses` body that configure the run, in the engine's
//! terms: function tools, `tool_choice` and `text.format` in the Chat Completions form the
//! LLM is sent, and `context_management` as the compact strategy.

use serde_json::{json, Value};

use super::super::errors::{OpenAiError, Result};
use crate::model::{ContextConfig, ContextStrategy, FunctionTool, McpTool, RequireApproval, Tool};

/// The caller's tools: `function` tools, which the engine offers and the caller answers,
/// and `mcp` servers, whose tools the service calls.
pub fn tools(given: &[Value]) -> Result<Vec<Tool>> {
    given
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let at = format!("tools[{i}]");
            let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
            match kind {
                "function" => {}
                "mcp" => return mcp(&at, tool).map(Tool::Mcp),
                _ => {
                    return Err(OpenAiError::invalid(
                        &format!("{at}.type"),
                        format!(
                            "`{kind}` tools are not available; only `function` and `mcp` tools"
                        ),
                    ))
                }
            }
            let name = match tool.get("name") {
                Some(Value::String(name)) => name.clone(),
                _ => return Err(OpenAiError::invalid(&format!("{at}.name"), "must be a string")),
            };
            let description = match tool.get("description") {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) => Some(text.clone()),
                Some(_) => {
                    return Err(OpenAiError::invalid(
                        &format!("{at}.description"),
                        "must be a string",
                    ))
                }
            };
            let parameters = match tool.get("parameters") {
                None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
                Some(Value::Object(schema)) => Value::Object(schema.clone()),
                Some(_) => {
                    return Err(OpenAiError::invalid(
                        &format!("{at}.parameters"),
                        "must be a JSON Schema object",
                    ))
                }
            };
            let (webhook, require_approval) = (None, RequireApproval::Never);
            Ok(Tool::Function(FunctionTool {
                name,
                description,
                parameters,
                webhook,
                require_approval,
            }))
        })
        .collect()
}

/// An `mcp` tool as OpenAI's clients write it; `server_description` is taken and echoed,
/// not used.
fn mcp(at: &str, tool: &Value) -> Result<McpTool> {
    let mut fields = tool.as_object().cloned().unwrap_or_default();
    fields.remove("type");
    if !matches!(fields.remove("server_description"), None | Some(Value::Null | Value::String(_))) {
        return Err(OpenAiError::invalid(&format!("{at}.server_description"), "must be a string"));
    }
    serde_path_to_error::deserialize(Value::Object(fields)).map_err(|error| {
        let field = match error.path().to_string() {
            path if path == "." => at.to_owned(),
            path => format!("{at}.{path}"),
        };
        OpenAiError::invalid(&field, crate::model::json_error_message(error.inner()))
    })
}

/// `tool_choice` in the Chat Completions form.
pub fn tool_choice(choice: &Value) -> Result<Value> {
    match choice {
        Value::String(mode) if matches!(mode.as_str(), "auto" | "none" | "required") => {
            Ok(choice.clone())
        }
        Value::Object(fields) if fields.get("type") == Some(&json!("function")) => {
            match fields.get("name") {
                Some(Value::String(name)) => {
                    Ok(json!({"type": "function", "function": {"name": name}}))
                }
                _ => Err(OpenAiError::invalid("tool_choice.name", "must be a string")),
            }
        }
        _ => Err(OpenAiError::invalid(
            "tool_choice",
            "must be `auto`, `none`, `required` or {\"type\": \"function\", \"name\"}",
        )),
    }
}

/// `text.format` as the Chat Completions `response_format`; none for plain text.
pub fn response_format(text: &Value) -> Result<Option<Value>> {
    let Some(fields) = text.as_object() else {
        return Err(OpenAiError::invalid("text", "must be an object"));
    };
    if let Some((name, _)) =
        fields.iter().find(|(k, _)| !matches!(k.as_str(), "format" | "verbosity"))
    {
        return Err(OpenAiError::invalid(&format!("text.{name}"), "is not a field of `text`"));
    }
    let verbosity = fields.get("verbosity").filter(|v| !v.is_null());
    if verbosity.is_some_and(|v| !matches!(v.as_str(), Some("low" | "medium" | "high"))) {
        return Err(OpenAiError::invalid("text.verbosity", "must be `low`, `medium` or `high`"));
    }
    let Some(format) = fields.get("format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let name = format.get("name").and_then(Value::as_str).ok_or_else(|| {
                OpenAiError::invalid("text.format.name", "is required for `json_schema`")
            })?;
            let schema = format.get("schema").filter(|s| s.is_object()).ok_or_else(|| {
                OpenAiError::invalid("text.format.schema", "must be a JSON Schema object")
            })?;
            let mut json_schema = json!({"name": name, "schema": schema});
            for key in ["strict", "description"] {
                if let Some(value) = format.get(key).filter(|v| !v.is_null()) {
                    json_schema[key] = value.clone();
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": json_schema})))
        }
        _ => Err(OpenAiError::invalid(
            "text.format.type",
            "must be `text`, `json_object` or `json_schema`",
        )),
    }
}

/// `context_management`: compaction when the input passes `compact_threshold` tokens.
pub fn context(entries: &[Value]) -> Result<Option<ContextConfig>> {
    let mut threshold = None;
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("context_management[{i}]");
        if entry.get("type").and_then(Value::as_str) != Some("compaction") {
            return Err(OpenAiError::invalid(&format!("{at}.type"), "must be `compaction`"));
        }
        let field = format!("{at}.compact_threshold");
        // A whole float (`5.0`) is a whole number, as JSON Schema's `integer` says.
        let tokens = entry
            .get("compact_threshold")
            .and_then(|value| crate::model::whole_required::<_, u64>(value).ok())
            .filter(|n| (1..=u64::from(i32::MAX as u32)).contains(n));
        threshold = Some(tokens.ok_or_else(|| {
            OpenAiError::invalid(&field, "must be a whole number of tokens from 1 to 2147483647")
        })?);
    }
    Ok(threshold.map(|tokens| ContextConfig {
        max_input_tokens: None,
        strategy: ContextStrategy::Compact,
        compact_threshold_tokens: Some(tokens),
        keep_recent_items: None,
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::context;

    #[test]
    fn a_compaction_threshold_is_a_whole_number_written_either_way() {
        let threshold = |value: serde_json::Value| {
            let entry = json!({"type": "compaction", "compact_threshold": value});
            context(&[entry]).ok().flatten().and_then(|c| c.compact_threshold_tokens)
        };
        assert_eq!(threshold(json!(2147483647.0)), Some(2147483647));
        assert_eq!(threshold(json!(1000)), Some(1000));
        for refused in [json!(0), json!(10.5), json!(2147483648.0), json!(-1.0), json!("5")] {
            assert_eq!(threshold(refused.clone()), None, "{refused}");
        }
    }
}
