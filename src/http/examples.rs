//! Examples for the interactive docs: "Try it out" on `/docs` sends these as they stand,
//! so each is a request the service accepts, in the order create → use → delete.
//! Server-made ids (items, runs, agents) have no example: a user pastes one from an
//! earlier answer.

use serde_json::{json, Value};
use utoipa::openapi::path::ParameterBuilder;
use utoipa::openapi::OpenApi;
use utoipa::Modify;

/// The example id of a session.
pub const SESSION_ID: &str = "support-4711";
/// The example owners of that session.
const APP_ID: &str = "support-bot";
const USER_ID: &str = "alice";

/// The example request body of each operation, by operation id.
pub fn request_body(operation_id: &str) -> Option<Value> {
    Some(match operation_id {
        "create_session" => json!({
            "id": SESSION_ID, "metadata": {"user": "alice"}, "app_id": APP_ID, "user_id": USER_ID,
        }),
        "update_session" => json!({"metadata": {"priority": "high"}}),
        "replace_session_state" => json!({"state": {"step": "triage", "order": "4711"}}),
        "merge_session_state" => json!({"state": {"step": "answered", "order": null}}),
        "replace_app_state" => json!({"state": {"greeting": "Hello", "escalate_after": 3}}),
        "merge_app_state" => json!({"state": {"escalate_after": 5}}),
        "replace_user_state" => json!({"state": {"name": "Alice", "language": "en"}}),
        "merge_user_state" => json!({"state": {"language": "de"}}),
        "put_checkpoint" => json!({
            "parent_id": null,
            "checkpoint": {"type": "json", "data": "eyJ2IjogMX0="},
            "metadata": {"source": "input", "step": -1, "run_id": "run-1"},
            "channel_versions": {"messages": "1"},
            "blobs": [{"channel": "messages", "version": "1", "type": "json", "data": "W10="}],
        }),
        "put_checkpoint_writes" => json!({
            "task_id": "task-1",
            "task_path": "~__pregel_pull, agent",
            "writes": [{"idx": 0, "channel": "messages", "type": "json", "data": "WyJoaSJd"}],
        }),
        "delete_run_checkpoints" => json!({"run_ids": ["run-1"]}),
        "prune_checkpoints" => json!({"session_ids": [SESSION_ID], "keep": "latest"}),
        "append_items" => json!({"items": [
            {"role": "user", "content": "Where is my order #4711?"},
        ]}),
        "replace_item" => json!({"item": {"role": "user", "content": "Where is my order #4712?"}}),
        "replace_items" => json!({"items": [
            {"role": "user", "content": "Where is my order #4712?"},
            {"role": "assistant", "content": "It is on its way."},
        ]}),
        "create_agent" => json!({
            "name": "support",
            "instructions": "You are a concise support agent. Look orders up before answering.",
            "tools": [order_lookup_tool()],
        }),
        "update_agent" => json!({"instructions": "You are a friendly, concise support agent."}),
        "create_run" => json!({
            "input": "Has order #4711 shipped yet?",
            "agent": {"tools": [order_lookup_tool()]},
            "stream": false,
        }),
        "compact" => json!({"keep_recent_items": 2}),
        "create_api_key" => json!({"tenant": "acme", "name": "support frontend"}),
        "fork_session" => json!({"id": "support-4711-retry", "metadata": {"user": "alice"}}),
        "create_conversation" => json!({
            "items": [{"role": "user", "content": "Where is my order #4711?"}],
            "metadata": {"user": "alice"},
        }),
        "update_conversation" => json!({"metadata": {"user": "alice", "priority": "high"}}),
        "create_conversation_items" => json!({"items": [
            {"role": "user", "content": "It was a blue jumper."},
        ]}),
        "create_response" => json!({"model": "gpt-4.1", "input": "Has order #4711 shipped yet?"}),
        "compact_response" => json!({"model": "gpt-4.1", "input": [
            {"role": "user", "content": "Where is my order #4711?"},
            {"role": "assistant", "content": "It shipped on Monday."},
        ]}),
        "submit_approvals" => json!({
            "approvals": [{"call_id": "call_1", "approve": false, "reason": "Ask the customer first."}],
        }),
        "send_chat_message" => json!({
            "id": SESSION_ID,
            "messages": [{"id": "msg-1", "role": "user", "parts": [
                {"type": "text", "text": "Has order #4711 shipped yet?"},
            ]}],
            "trigger": "submit-message",
        }),
        "submit_tool_outputs" => json!({
            "outputs": [{"call_id": "call_1", "output": "{\"status\": \"shipped\"}"}],
        }),
        _ => return None,
    })
}

/// A client tool: the model may call it, and the run waits for the caller's answer.
fn order_lookup_tool() -> Value {
    json!({
        "type": "function",
        "name": "lookup_order",
        "description": "Looks an order up by its number",
        "parameters": {
            "type": "object",
            "properties": {"number": {"type": "string"}},
            "required": ["number"],
        },
    })
}

/// The example of a parameter, by name; none for those a user must fill in.
fn parameter_example(name: &str) -> Option<Value> {
    match name {
        "session_id" => Some(json!(SESSION_ID)),
        "app_id" => Some(json!(APP_ID)),
        "user_id" => Some(json!(USER_ID)),
        "checkpoint_id" => Some(json!("1ef4f797-8335-6428-8001-8a1503f9b875")),
        "limit" => Some(json!(20)),
        _ => None,
    }
}

/// Puts the examples into the document.
pub struct Examples;

impl Modify for Examples {
    fn modify(&self, openapi: &mut OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let operations =
                [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
            for operation in operations.into_iter().flatten() {
                let example = operation.operation_id.as_deref().and_then(request_body);
                if let (Some(example), Some(body)) = (example, operation.request_body.as_mut()) {
                    for content in body.content.values_mut() {
                        content.example = Some(example.clone());
                    }
                }
                for parameter in operation.parameters.iter_mut().flatten() {
                    if let Some(example) = parameter_example(&parameter.name) {
                        *parameter = ParameterBuilder::from(parameter.clone())
                            .example(Some(example))
                            .build();
                    }
                }
            }
        }
    }
}
