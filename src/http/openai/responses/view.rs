//! A run as OpenAI's Response object: the run's status, output and usage, with the
//! request's fields as the adapter kept them.

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::super::ids;
use super::super::items::view;
use crate::model::{Run, RunStatus, Usage};

/// The Response's `status` for a run's.
pub fn status(run: &Run) -> &'static str {
    match run.status {
        RunStatus::Queued => "queued",
        RunStatus::Running | RunStatus::RequiresAction => "in_progress",
        RunStatus::Completed if run.incomplete_details.is_some() => "incomplete",
        RunStatus::Completed => "completed",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
        // A turn the client cut short, kept as far as it got.
        RunStatus::Interrupted => "incomplete",
    }
}

/// The Response for `run`, whose request the adapter kept as `echo`; `with_output`
/// false shows an empty output, as the first events of a stream do.
pub fn response(run: &Run, echo: &Map<String, Value>, with_output: bool) -> Value {
    let mut response = echo.clone();
    let fields = json!({
        "id": ids::response_id(run.id),
        "object": "response",
        "created_at": run.created_at.timestamp(),
        "completed_at": run.finished_at.filter(|_| run.status == RunStatus::Completed)
            .map(|t| t.timestamp()),
        "status": status(run),
        "output": if with_output { output(run) } else { Vec::new() },
        "usage": usage(&run.usage),
        "error": run.error.as_ref().map(|error| json!({
            "code": if error.code == "llm_rate_limited" { "rate_limit_exceeded" } else { "server_error" },
            "message": format!("{}: {}", error.code, error.message),
        })),
        "incomplete_details": match (&run.incomplete_details, run.status) {
            (None, RunStatus::Interrupted) => json!({"reason": "interrupted"}),
            (details, _) => json!(details),
        },
        "metadata": run.metadata,
    });
    if let Value::Object(fields) = fields {
        response.extend(fields);
    }
    Value::Object(response)
}

/// Usage as OpenAI's `ResponseUsage`, every field it requires present; the service
/// sees no cache or reasoning tokens.
pub fn usage(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    })
}

/// The kind of a generated item; none for the items OpenAI's output has no place for
/// (the answers to tool calls).
pub fn output_kind(item: &RawValue) -> Option<String> {
    let value: Value = serde_json::from_str(item.get()).ok()?;
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("message").to_owned();
    (kind != "function_call_output").then_some(kind)
}

/// The item at `position` of the run's output, as the Response shows it. MCP items keep
/// their own ids: a client answers an `mcp_approval_request` by its id.
pub fn output_item(run: &Run, position: usize, item: &RawValue) -> Option<Value> {
    let kind = output_kind(item)?;
    let own =
        kind.starts_with("mcp_").then(|| serde_json::from_str::<Value>(item.get()).ok()).flatten();
    match own.as_ref().and_then(|own| own["id"].as_str()) {
        Some(id) => Some(view(item, id)),
        None => Some(view(item, &ids::output_item(run.id, position))),
    }
}

fn output(run: &Run) -> Vec<Value> {
    (run.output.iter().enumerate())
        .filter_map(|(position, item)| output_item(run, position, item))
        .collect()
}
