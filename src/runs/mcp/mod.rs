//! MCP servers as tools (docs/runs.md, "MCP tools"): the engine is the MCP client over the
//! Streamable HTTP transport. A run lists each server's tools once, at its start, as an
//! `mcp_list_tools` item of its turn; offers them to the model beside its functions; and
//! records each call as an `mcp_call` item, or, when a person must approve it first, as
//! an `mcp_approval_request` the run pauses for.

mod http;
mod offer;
mod sessions;

use futures::stream::{FuturesUnordered, StreamExt};
use tracing::Instrument;

pub(super) use offer::Offer;
pub(super) use sessions::McpSessions;

use super::execution::Execution;
use super::spans;
use crate::model::{mcp_items, McpTool, RunConfig};
use crate::telemetry;

/// A call of an MCP tool, decided and about to run.
pub(super) struct McpCall<'a> {
    pub server: &'a McpTool,
    /// The server's name of the tool.
    pub name: String,
    pub arguments: String,
    /// The request a person approved, when the call waited for one.
    pub approval_request_id: Option<String>,
}

/// Lists the tools of each of the run's servers it has not listed yet (in an earlier
/// execution, the run did), as `mcp_list_tools` items of the tools `allowed_tools` lets
/// through; a server that cannot list them, or lists more than a request may offer, gets
/// an item with the error, and the run goes on with the other tools.
pub(super) async fn discover(exec: &mut Execution, sessions: &mut McpSessions, config: &RunConfig) {
    let listed = mcp_items::listed(&exec.record.run.output);
    let new: Vec<&McpTool> = (config.mcp_servers())
        .filter(|server| !listed.iter().any(|(label, _)| *label == server.server_label))
        .collect();
    if new.is_empty() {
        return;
    }
    let failed = sessions.open(&new).await;
    // Listed all at once, then numbered in the agent's order.
    let lists = futures::future::join_all(new.iter().map(|server| async {
        match failed.get(&server.server_label) {
            Some(why) => Err(why.clone()),
            None => sessions.list(server).await,
        }
    }))
    .await;
    let mut offered = Offer::new(config, &listed).specs.len();
    for (server, tools) in new.into_iter().zip(lists) {
        let label = &server.server_label;
        let tools = tools.and_then(|tools| {
            if offered + tools.len() > offer::MAX_TOOLS {
                return Err(format!(
                    "MCP server `{label}` lists {} tools to offer, and a run offers at most {} tools in all: name the ones to offer in `allowed_tools`",
                    tools.len(),
                    offer::MAX_TOOLS
                ));
            }
            offered += tools.len();
            Ok(tools)
        });
        let id = mcp_items::new_id("mcpl");
        let item = match &tools {
            Ok(tools) => mcp_items::list_tools(&id, label, Ok(tools)),
            Err(why) => mcp_items::list_tools(&id, label, Err(why)),
        };
        exec.push_item(item);
    }
}

/// Makes the calls at once, adding each one's `mcp_call` item as it answers: an
/// interruption keeps the calls that finished.
pub(super) async fn run_calls(
    exec: &mut Execution, sessions: &mut McpSessions, calls: Vec<McpCall<'_>>,
) {
    if calls.is_empty() {
        return;
    }
    let servers: Vec<&McpTool> = calls.iter().map(|call| call.server).collect();
    let failed = sessions.open(&servers).await;
    let sessions = &*sessions;
    let mut answers: FuturesUnordered<_> = (calls.iter())
        .map(|call| {
            let id = mcp_items::new_id("mcp");
            let span = spans::execute_tool(&call.name, &id, "extension");
            let failed = failed.get(&call.server.server_label).cloned();
            let answer = async move {
                let result = match failed {
                    Some(why) => Err(why),
                    None => sessions.call(call.server, &call.name, &call.arguments).await,
                };
                if result.is_err() {
                    telemetry::failed(&tracing::Span::current(), "tool_error");
                }
                (call, id, result)
            };
            answer.instrument(span)
        })
        .collect();
    while let Some((call, id, result)) = answers.next().await {
        let result = result.as_deref().map_err(String::as_str);
        let (label, request) = (&call.server.server_label, call.approval_request_id.as_deref());
        let item = mcp_items::call(&id, label, &call.name, &call.arguments, result, request);
        exec.push_item(item);
    }
}
