//! Answering a paused run: the outputs of its client tools, or a person's approvals of
//! its calls of server-side tools. Either way the run goes on.

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use utoipa::ToSchema;

use super::follow::{wait, Native};
use super::schemas::RunStreamEvent;
use crate::http::error::{Conflict, JsonBody, Lookup, Result};
use crate::http::event_stream::{sse, Handover};
use crate::http::extract::{AppJson, TenantRun};
use crate::http::AppState;
use crate::model::{Approval, Run, RunAnswer, ToolOutput};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolOutputsRequest {
    /// One output for each of `required_action.tool_calls`.
    #[schema(min_items = 1, max_items = 128)]
    outputs: Vec<ToolOutput>,
    /// Answer with the run's further events as server-sent events.
    stream: Option<bool>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsRequest {
    /// One decision for each of `required_action.tool_calls`.
    #[schema(min_items = 1, max_items = 128)]
    approvals: Vec<Approval>,
    /// Answer with the run's further events as server-sent events.
    stream: Option<bool>,
}

/// Answer a `requires_action` run's client tool calls; the run goes on.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/runs/{run_id}/tool_outputs", tag = "runs",
    params(TenantRun), request_body = ToolOutputsRequest,
    responses(
        (status = 200, description = "The run once it finishes or needs the client again, or its events with `stream: true`", content((Run = "application/json"), (RunStreamEvent = "text/event-stream"))),
        (status = 202, description = "The run, still executing after RUN_WAIT_SECS", body = Run),
        Lookup,
        JsonBody,
        (status = 409, response = Conflict),
    ))]
pub async fn submit_tool_outputs(
    State(state): State<AppState>,
    run: TenantRun,
    AppJson(request): AppJson<ToolOutputsRequest>,
) -> Result<Response> {
    let stream = request.stream.unwrap_or(false);
    answer(state, run, RunAnswer::ToolOutputs(request.outputs), stream).await
}

/// Approve or reject a run's calls of server-side tools (`required_action.type`
/// `approve_tool_calls`); approved calls run, rejected ones answer the model with the
/// reason, and the run goes on.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/runs/{run_id}/approvals", tag = "runs",
    params(TenantRun), request_body = ApprovalsRequest,
    responses(
        (status = 200, description = "The run once it finishes or needs the client again, or its events with `stream: true`", content((Run = "application/json"), (RunStreamEvent = "text/event-stream"))),
        (status = 202, description = "The run, still executing after RUN_WAIT_SECS", body = Run),
        Lookup,
        JsonBody,
        (status = 409, response = Conflict),
    ))]
pub async fn submit_approvals(
    State(state): State<AppState>,
    run: TenantRun,
    AppJson(request): AppJson<ApprovalsRequest>,
) -> Result<Response> {
    let stream = request.stream.unwrap_or(false);
    answer(state, run, RunAnswer::Approvals(request.approvals), stream).await
}

async fn answer(
    state: AppState,
    run: TenantRun,
    answer: RunAnswer,
    stream: bool,
) -> Result<Response> {
    let after = (state.runs.answer(&run.tenant, &run.session, run.id, &answer).await)
        .map_err(|e| run.runs_error(e))?;
    if stream {
        let events = state.runs.events(&run.tenant, &run.session, run.id, after);
        return Ok(sse(events, Native, Handover::Reconnect(&state.closing)));
    }
    wait(&state, &run.tenant, &run.session, run.id, after).await
}
