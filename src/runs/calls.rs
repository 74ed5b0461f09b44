//! The tool calls of a turn: what the model's calls become (function calls, MCP calls, or
//! MCP calls waiting for a person), and answering the calls a run has made so far, which
//! may pause it for a person or for the client.

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::value::RawValue;

use super::execution::{Execution, Outcome};
use super::mcp::{self, McpCall, McpSessions, Offer};
use super::tools::call_webhook;
use super::Engine;
use crate::llm::ToolCall;
use crate::model::{
    mcp_items, run_items, RequireApproval, RequiredAction, RequiredActionKind, RequiredToolCall,
    RunConfig,
};

/// Adds the model's calls to the run: a function call as it is (answered when the run
/// settles its calls), an MCP call waiting for approval as its request, and the other
/// MCP calls made now.
pub(super) async fn take(
    exec: &mut Execution, offer: &Offer<'_>, sessions: &mut McpSessions, calls: &[ToolCall],
) {
    let mut now = Vec::new();
    for call in calls {
        match offer.mcp(&call.name) {
            Some((server, name)) if server.require_approval.requires(name) => {
                let id = mcp_items::new_id("mcpr");
                let label = &server.server_label;
                exec.push_item(mcp_items::approval_request(&id, label, name, &call.arguments));
            }
            Some((server, name)) => now.push(McpCall {
                server,
                name: name.to_owned(),
                arguments: call.arguments.clone(),
                approval_request_id: None,
            }),
            None => {
                exec.push_item(run_items::function_call(&call.call_id, &call.name, &call.arguments))
            }
        }
    }
    mcp::run_calls(exec, sessions, now).await;
}

/// Answers the calls in the run's output that have none yet: calls of webhook tools run
/// concurrently (those needing approval once a person approved them), calls of tools the
/// agent lacks get an error, approved MCP calls run. The run pauses for the approvals
/// still missing, then for the client's tools; None when every call is answered.
///
/// `earlier`: the MCP items of the session's history, where a run answering approvals
/// given in its input (as the Responses API does) finds the requests.
pub(super) async fn settle(
    engine: &Engine, tenant: &str, exec: &mut Execution, config: &RunConfig,
    sessions: &mut McpSessions, earlier: &[Box<RawValue>],
) -> Option<Outcome> {
    let (mut to_approve, mut client_calls, mut webhook_calls) =
        (Vec::new(), Vec::new(), Vec::new());
    for call in run_items::unanswered_calls(&exec.record.run.output) {
        match config.functions().find(|t| t.name == call.name) {
            Some(tool) if tool.webhook.is_some() => {
                let approved = exec.record.approved.contains(&call.call_id);
                if tool.require_approval == RequireApproval::Always && !approved {
                    to_approve.push(call);
                } else {
                    webhook_calls.push((tool, call));
                }
            }
            Some(_) => client_calls.push(call),
            None => exec.push_item(run_items::function_call_output(
                &call.call_id,
                &format!("error: there is no tool named `{}`", call.name),
            )),
        }
    }
    let (session_id, run_id) = (exec.record.run.session_id.clone(), exec.record.run.id);
    // Each output is kept as it comes: an interruption keeps the calls that finished.
    let mut outputs: FuturesUnordered<_> = (webhook_calls.iter())
        .map(|(tool, call)| {
            let session_id = &session_id;
            async move { (call, call_webhook(engine, tool, call, tenant, session_id, run_id).await) }
        })
        .collect();
    while let Some((call, output)) = outputs.next().await {
        exec.push_item(run_items::function_call_output(&call.call_id, &output));
        exec.record.approved.retain(|id| *id != call.call_id);
    }
    let (waiting, approved) = mcp_decisions(exec, config, earlier);
    to_approve.extend(waiting);
    mcp::run_calls(exec, sessions, approved).await;
    let (kind, tool_calls) = if !to_approve.is_empty() {
        (RequiredActionKind::ApproveToolCalls, to_approve)
    } else if !client_calls.is_empty() {
        (RequiredActionKind::SubmitToolOutputs, client_calls)
    } else {
        return None;
    };
    // The protocol's client answers in its next request, which is another run.
    if config.client_calls_complete {
        return Some(Outcome::Completed);
    }
    Some(Outcome::RequiresAction(RequiredAction { kind, tool_calls }))
}

/// The MCP calls of the run that wait for a person, and those approved and not yet made.
/// A request is made only from the session (this run's output, or its history, as a
/// response's input answers one of an earlier response's) and only of a tool the run
/// offers: a request in the input is what a client says, never an order. (A client that
/// may write a session may configure its tools too; the approval a person gives is what
/// `require_approval` guards.) A call is made once, whoever sends its decision again.
fn mcp_decisions<'a>(
    exec: &mut Execution, config: &'a RunConfig, earlier: &[Box<RawValue>],
) -> (Vec<RequiredToolCall>, Vec<McpCall<'a>>) {
    let run = &exec.record.run;
    let decided = mcp_items::approval_responses(run.input.iter().chain(&run.output));
    let made = mcp_items::calls_made(earlier.iter().chain(&run.input).chain(&run.output));
    let waiting = (mcp_items::approval_requests(&run.output).into_iter())
        .filter(|request| !decided.contains_key(&request.id))
        .map(|request| RequiredToolCall {
            call_id: request.id,
            name: request.name,
            arguments: request.arguments,
            server_label: Some(request.server_label),
        })
        .collect();
    let mut approved = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for request in mcp_items::approval_requests(run.output.iter().chain(earlier)) {
        let to_make = decided.get(&request.id) == Some(&true) && !made.contains(&request.id);
        if !seen.insert(request.id.clone()) || !to_make {
            continue;
        }
        let server = (config.mcp_servers())
            .find(|s| s.server_label == request.server_label && s.allows(&request.name));
        let Some(server) = server else {
            let why = format!(
                "the run offers no tool `{}` of an MCP server labelled `{}`",
                request.name, request.server_label
            );
            let (label, name, arguments) =
                (&request.server_label, &request.name, &request.arguments);
            let id = mcp_items::new_id("mcp");
            let made = mcp_items::call(&id, label, name, arguments, Err(&why), Some(&request.id));
            exec.push_item(made);
            continue;
        };
        approved.push(McpCall {
            server,
            name: request.name,
            arguments: request.arguments,
            approval_request_id: Some(request.id),
        });
    }
    (waiting, approved)
}
