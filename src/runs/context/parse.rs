//! Session items as what a message is made of, before calls and outputs are paired: the
//! rows of the table in `context.rs`.

use serde_json::Value;

use super::SUMMARY_HEADING;
use crate::llm::{Message, Role, ToolCall};

/// An item worth sending, before pairing.
pub(super) enum Parsed {
    Msg(Message),
    Call(ToolCall),
    Output(String, String),
}

pub(super) fn parse(item: &Value) -> Vec<Parsed> {
    let str_field = |k: &str| item.get(k).and_then(Value::as_str);
    match str_field("type") {
        Some("mcp_call") => mcp_call(item).unwrap_or_default(),
        Some("mcp_approval_request") => {
            let (Some(call_id), Some(name)) =
                (str_field("id").filter(|s| !s.is_empty()), str_field("name"))
            else {
                return Vec::new();
            };
            let arguments = str_field("arguments").unwrap_or_default().to_owned();
            vec![Parsed::Call(ToolCall {
                call_id: call_id.to_owned(),
                name: function_name(name),
                arguments,
            })]
        }
        Some("mcp_approval_response") if item.get("approve") == Some(&Value::Bool(false)) => {
            let Some(request) = str_field("approval_request_id") else { return Vec::new() };
            let rejected = serde_json::json!({"error": "rejected", "reason": item.get("reason")});
            vec![Parsed::Output(request.to_owned(), rejected.to_string())]
        }
        _ => parse_one(item).into_iter().collect(),
    }
}

/// A call of an MCP tool and its answer, as a function call and its output.
fn mcp_call(item: &Value) -> Option<Vec<Parsed>> {
    let id = item.get("id")?.as_str().filter(|s| !s.is_empty())?;
    let call = ToolCall {
        call_id: id.to_owned(),
        name: function_name(item.get("name")?.as_str()?),
        arguments: item.get("arguments").and_then(Value::as_str).unwrap_or_default().to_owned(),
    };
    let answer = match (item.get("output"), item.get("error").and_then(Value::as_str)) {
        (_, Some(error)) => format!("error: {error}"),
        (Some(Value::String(output)), None) => output.clone(),
        (Some(other), None) => other.to_string(),
        (None, None) => String::new(),
    };
    Some(vec![Parsed::Call(call), Parsed::Output(id.to_owned(), answer)])
}

/// What a function may be called: an MCP tool's name with other characters as `_`.
fn function_name(name: &str) -> String {
    (name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }))
        .take(64)
        .collect()
}

fn parse_one(item: &Value) -> Option<Parsed> {
    let str_field = |k: &str| item.get(k).and_then(Value::as_str);
    match str_field("type") {
        None | Some("message") => {
            let role = match str_field("role")? {
                "user" => Role::User,
                "system" | "developer" => Role::System,
                "assistant" => Role::Assistant,
                _ => return None,
            };
            let text = match item.get("content")? {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts_text(parts, role == Role::Assistant),
                _ => return None,
            };
            (!text.is_empty()).then(|| Parsed::Msg(Message::text(role, text)))
        }
        Some("function_call") => Some(Parsed::Call(ToolCall {
            call_id: str_field("call_id").filter(|s| !s.is_empty())?.to_owned(),
            name: str_field("name")?.to_owned(),
            arguments: str_field("arguments")?.to_owned(),
        })),
        Some("compaction") => {
            let summary = str_field("summary").filter(|s| !s.is_empty())?;
            Some(Parsed::Msg(Message::text(
                Role::System,
                format!("{SUMMARY_HEADING}\n\n{summary}"),
            )))
        }
        Some("function_call_output") => {
            let call_id = str_field("call_id").filter(|s| !s.is_empty())?.to_owned();
            let output = match item.get("output")? {
                Value::String(s) => s.clone(),
                Value::Array(parts) if parts.iter().all(is_part) => parts_text(parts, false),
                other => other.to_string(),
            };
            Some(Parsed::Output(call_id, output))
        }
        Some(_) => None,
    }
}

fn is_part(part: &Value) -> bool {
    part.get("type").is_some_and(Value::is_string)
}

/// The texts of the text parts (and, when asked, refusals), joined with newlines.
fn parts_text(parts: &[Value], with_refusals: bool) -> String {
    let texts: Vec<&str> = (parts.iter())
        .filter_map(|p| match p.get("type").and_then(Value::as_str)? {
            "input_text" | "output_text" | "text" => p.get("text")?.as_str(),
            "refusal" if with_refusals => p.get("refusal")?.as_str(),
            _ => None,
        })
        .collect();
    texts.join("\n")
}
