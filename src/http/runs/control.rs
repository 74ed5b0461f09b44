//! Reading runs, cancelling them and answering their client tools.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use super::follow::{wait, Native};
use super::schemas::RunStreamEvent;
use crate::http::error::{
    ApiError, BadRequest, Conflict, Internal, NotFound, PayloadTooLarge, Result,
    UnsupportedMediaType,
};
use crate::http::event_stream::sse;
use crate::http::extract::{AppJson, RunPath, SessionPath, Tenant};
use crate::http::list_query::ListQuery;
use crate::http::AppState;
use crate::model::{Order, Page, Run, ToolOutput};
use crate::runs::RunsError;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolOutputsRequest {
    /// One output for each of `required_action.tool_calls`.
    #[schema(min_items = 1, max_items = 128)]
    outputs: Vec<ToolOutput>,
    /// Answer with the run's further events as server-sent events.
    stream: Option<bool>,
}

/// List a session's runs, newest first.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/runs",
    tag = "runs",
    params(("session_id" = String, Path, description = "The session id"), ListQuery),
    responses(
        (status = 200, description = "A page of runs", body = Page<Run>),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
pub async fn list_runs(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(session_id): SessionPath,
    query: ListQuery,
) -> Result<Json<Page<Run>>> {
    let page = state
        .runs
        .list(tenant, &session_id, &query.page(Order::Desc))
        .await
        .map_err(|e| match e {
            RunsError::Store(e) => query.store_error(e, Some(session_id.as_str())),
            other => ApiError::from_runs(other, session_id.as_str(), None),
        })?;
    Ok(Json(page))
}

/// Get a run.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/runs/{run_id}",
    tag = "runs",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("run_id" = String, Path, description = "The run id"),
    ),
    responses(
        (status = 200, description = "The run", body = Run),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
pub async fn get_run(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(session_id): SessionPath,
    run: RunPath,
) -> Result<Json<Run>> {
    let found = state
        .runs
        .get(tenant, &session_id, run.id)
        .await
        .map_err(|e| ApiError::from_runs(e, session_id.as_str(), Some(&run.raw)))?;
    Ok(Json(found))
}

/// Cancel a run that has not finished. Its history stays exactly as it was.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/runs/{run_id}/cancel",
    tag = "runs",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("run_id" = String, Path, description = "The run id"),
    ),
    responses(
        (status = 200, description = "The cancelled run", body = Run),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 500, response = Internal),
    )
)]
pub async fn cancel_run(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(session_id): SessionPath,
    run: RunPath,
) -> Result<Json<Run>> {
    let cancelled = state
        .runs
        .cancel(tenant, &session_id, run.id)
        .await
        .map_err(|e| ApiError::from_runs(e, session_id.as_str(), Some(&run.raw)))?;
    Ok(Json(cancelled))
}

/// Answer a `requires_action` run's client tool calls; the run goes on.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/runs/{run_id}/tool_outputs",
    tag = "runs",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("run_id" = String, Path, description = "The run id"),
    ),
    request_body = ToolOutputsRequest,
    responses(
        (status = 200, description = "The run once it finishes or needs the client again, or its events with `stream: true`", content(
            (Run = "application/json"),
            (RunStreamEvent = "text/event-stream"),
        )),
        (status = 202, description = "The run, still executing after RUN_WAIT_SECS", body = Run),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
pub async fn submit_tool_outputs(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(session_id): SessionPath,
    run: RunPath,
    AppJson(request): AppJson<ToolOutputsRequest>,
) -> Result<Response> {
    let after = state
        .runs
        .submit_tool_outputs(tenant, &session_id, run.id, &request.outputs)
        .await
        .map_err(|e| ApiError::from_runs(e, session_id.as_str(), Some(&run.raw)))?;
    if request.stream.unwrap_or(false) {
        let events = state.runs.events(tenant, &session_id, run.id, after);
        return Ok(sse(events, Native));
    }
    wait(&state, tenant, &session_id, run.id, after).await
}
