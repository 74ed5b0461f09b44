//! The items of MCP tools, in OpenAI's shapes: `mcp_list_tools` (what a server offered
//! at the start of a run), `mcp_call` (a call with its output or error),
//! `mcp_approval_request` and `mcp_approval_response` (a call waiting for a person, and
//! the decision). The run engine writes them and reads back what a run decided.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// A new item id: `prefix` (`mcpl`, `mcp`, `mcpr`, as OpenAI's ids begin) and a UUIDv7,
/// unique across runs (a model's own call ids may repeat).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

/// Keys are written in the order the Responses API uses, which a map would sort.
fn raw(item: impl Serialize) -> Box<RawValue> {
    serde_json::value::to_raw_value(&item).expect("an item serializes")
}

#[derive(Serialize)]
struct ListTools<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    server_label: &'a str,
    tools: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// The tools `server_label` listed, or why it could not list them.
pub fn list_tools(id: &str, server_label: &str, tools: Result<&[Value], &str>) -> Box<RawValue> {
    let (tools, error) = match tools {
        Ok(tools) => (tools, None),
        Err(error) => (&[][..], Some(error)),
    };
    raw(ListTools { kind: "mcp_list_tools", id, server_label, tools, error })
}

/// What a call of a server's tool and a request to approve one both say, first.
#[derive(Serialize)]
struct ToolCall<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    server_label: &'a str,
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct Call<'a> {
    #[serde(flatten)]
    call: ToolCall<'a>,
    output: Option<&'a str>,
    error: Option<&'a str>,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_request_id: Option<&'a str>,
}

/// A call of the server's tool `name`, with its output or why it has none.
pub fn call(
    id: &str, server_label: &str, name: &str, arguments: &str, result: Result<&str, &str>,
    approval_request_id: Option<&str>,
) -> Box<RawValue> {
    let (output, error, status) = match result {
        Ok(output) => (Some(output), None, "completed"),
        Err(error) => (None, Some(error), "failed"),
    };
    let call = ToolCall { kind: "mcp_call", id, server_label, name, arguments };
    raw(Call { call, output, error, status, approval_request_id })
}

/// A call that waits for a person's approval.
pub fn approval_request(
    id: &str, server_label: &str, name: &str, arguments: &str,
) -> Box<RawValue> {
    raw(ToolCall { kind: "mcp_approval_request", id, server_label, name, arguments })
}

#[derive(Serialize)]
struct ApprovalResponse<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    approval_request_id: &'a str,
    approve: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

/// A person's decision on the call `request_id`.
pub fn approval_response(request_id: &str, approve: bool, reason: Option<&str>) -> Box<RawValue> {
    let kind = "mcp_approval_response";
    raw(ApprovalResponse { kind, approval_request_id: request_id, approve, reason })
}

/// The fields of any MCP item that the engine reads back.
#[derive(Deserialize)]
struct Fields {
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<String>,
    server_label: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
    tools: Option<Vec<Value>>,
    error: Option<Value>,
    approval_request_id: Option<String>,
    approve: Option<bool>,
}

fn fields<'a>(items: impl IntoIterator<Item = &'a Box<RawValue>>, kind: &str) -> Vec<Fields> {
    items
        .into_iter()
        .filter_map(|item| serde_json::from_str::<Fields>(item.get()).ok())
        .filter(|fields| fields.kind.as_deref() == Some(kind))
        .collect()
}

/// What the servers of a run listed: per server label, its tools, or none when it could
/// not list them (the server is listed all the same, and not asked again).
pub fn listed<'a>(
    items: impl IntoIterator<Item = &'a Box<RawValue>>,
) -> Vec<(String, Option<Vec<Value>>)> {
    fields(items, "mcp_list_tools")
        .into_iter()
        .filter_map(|item| {
            let tools = item.tools.filter(|_| item.error.as_ref().is_none_or(Value::is_null));
            Some((item.server_label?, tools))
        })
        .collect()
}

/// A call waiting for approval, as its request item holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    pub id: String,
    pub server_label: String,
    pub name: String,
    pub arguments: String,
}

/// The approval requests among `items`.
pub fn approval_requests<'a>(
    items: impl IntoIterator<Item = &'a Box<RawValue>>,
) -> Vec<ApprovalRequest> {
    fields(items, "mcp_approval_request")
        .into_iter()
        .filter_map(|item| {
            Some(ApprovalRequest {
                id: item.id?,
                server_label: item.server_label?,
                name: item.name?,
                arguments: item.arguments.unwrap_or_default(),
            })
        })
        .collect()
}

/// The decisions among `items`, by request id.
pub fn approval_responses<'a>(
    items: impl IntoIterator<Item = &'a Box<RawValue>>,
) -> HashMap<String, bool> {
    fields(items, "mcp_approval_response")
        .into_iter()
        .filter_map(|item| Some((item.approval_request_id?, item.approve?)))
        .collect()
}

/// The requests whose approved calls have run, among `items`.
pub fn calls_made<'a>(items: impl IntoIterator<Item = &'a Box<RawValue>>) -> HashSet<String> {
    fields(items, "mcp_call").into_iter().filter_map(|item| item.approval_request_id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_a_run_wrote_reads_back() {
        let tools = [json!({"name": "add", "input_schema": {"type": "object"}})];
        let items = [
            list_tools("l1", "calc", Ok(&tools)),
            list_tools("l2", "down", Err("cannot be reached")),
            approval_request("r1", "calc", "add", r#"{"a":1}"#),
            approval_response("r1", true, None),
            approval_request("r2", "calc", "add", "{}"),
            approval_response("r2", false, Some("no")),
            call("c1", "calc", "add", r#"{"a":1}"#, Ok("1"), Some("r1")),
        ];
        let listed = listed(&items);
        assert_eq!(listed[0], ("calc".to_owned(), Some(tools.to_vec())));
        assert_eq!(listed[1], ("down".to_owned(), None));
        assert_eq!(approval_requests(&items).len(), 2);
        assert_eq!(
            approval_responses(&items),
            HashMap::from([("r1".into(), true), ("r2".into(), false)])
        );
        assert_eq!(calls_made(&items), HashSet::from(["r1".to_owned()]));
        assert_eq!(
            call("c3", "calc", "add", "{}", Ok("1"), None).get(),
            r#"{"type":"mcp_call","id":"c3","server_label":"calc","name":"add","arguments":"{}","output":"1","error":null,"status":"completed"}"#,
            "OpenAI's order of fields"
        );
        let failed: Value =
            serde_json::from_str(call("c2", "calc", "add", "{}", Err("boom"), None).get()).unwrap();
        assert_eq!(
            (failed["output"].clone(), failed["error"].clone(), failed["status"].clone()),
            (Value::Null, json!("boom"), json!("failed"))
        );
    }
}
