//! Answering a paused run: the outputs of its client tools, or a person's approvals of
//! its calls of server-side tools. Either way the run goes on.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::{Response as ResponseDoc, ResponseBuilder};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{IntoResponses, ToSchema};

use super::follow::{wait, Native};
use crate::http::error::{JsonBody, Lookup, Result};
use crate::http::event_stream::{sse, Handover};
use crate::http::extract::{AppJson, TenantRun};
use crate::http::AppState;
use crate::model::{Approval, RunAnswer, ToolOutput};

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
    responses(Answered))]
pub async fn submit_tool_outputs(
    State(state): State<AppState>, run: TenantRun, AppJson(request): AppJson<ToolOutputsRequest>,
) -> Result<Response> {
    let stream = request.stream.unwrap_or(false);
    answer(state, run, RunAnswer::ToolOutputs(request.outputs), stream).await
}

/// Approve or reject a run's calls of server-side tools (`required_action.type`
/// `approve_tool_calls`); approved calls run, rejected ones answer the model with the
/// reason, and the run goes on.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/runs/{run_id}/approvals", tag = "runs",
    params(TenantRun), request_body = ApprovalsRequest,
    responses(Answered))]
pub async fn submit_approvals(
    State(state): State<AppState>, run: TenantRun, AppJson(request): AppJson<ApprovalsRequest>,
) -> Result<Response> {
    let stream = request.stream.unwrap_or(false);
    answer(state, run, RunAnswer::Approvals(request.approvals), stream).await
}

/// What an answer to a paused run responds.
struct Answered;

impl IntoResponses for Answered {
    fn responses() -> BTreeMap<String, RefOr<ResponseDoc>> {
        let content = |schema: &str| {
            ContentBuilder::new().schema(Some(Ref::from_schema_name(schema))).build()
        };
        let mut responses = BTreeMap::from([
            (
                "200".to_owned(),
                ResponseBuilder::new()
                    .description("The run once it finishes or needs the client again, or its events with `stream: true`")
                    .content("application/json", content("Run"))
                    .content("text/event-stream", content("RunStreamEvent"))
                    .build()
                    .into(),
            ),
            (
                "202".to_owned(),
                ResponseBuilder::new()
                    .description("The run, still executing after RUN_WAIT_SECS")
                    .content("application/json", content("Run"))
                    .build()
                    .into(),
            ),
            ("409".to_owned(), Ref::from_response_name("Conflict").into()),
        ]);
        responses.extend(Lookup::responses());
        responses.extend(JsonBody::responses());
        responses
    }
}

async fn answer(
    state: AppState, run: TenantRun, answer: RunAnswer, stream: bool,
) -> Result<Response> {
    let after = (state.runs.answer(&run.tenant, &run.session, run.id, &answer).await)
        .map_err(|e| run.runs_error(e))?;
    if stream {
        let events = state.runs.events(&run.tenant, &run.session, run.id, after);
        return Ok(sse(events, Native, Handover::Reconnect(&state.closing)));
    }
    wait(&state, &run.tenant, &run.session, run.id, after).await
}
