//! Reading runs, cancelling them and answering their client tools.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use super::follow::{wait, Native};
use super::schemas::RunStreamEvent;
use super::stop_query::StopQuery;
use crate::http::error::{Conflict, JsonBody, Lookup, Result};
use crate::http::event_stream::sse;
use crate::http::extract::{AppJson, TenantRun, TenantSession};
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
#[utoipa::path(get, path = "/v1/sessions/{session_id}/runs", tag = "runs",
    params(TenantSession, ListQuery),
    responses((status = 200, description = "A page of runs", body = Page<Run>), Lookup))]
pub async fn list_runs(
    State(state): State<AppState>,
    session: TenantSession,
    query: ListQuery,
) -> Result<Json<Page<Run>>> {
    state.runs.list(&session.tenant, &session.id, &query.page(Order::Desc)).await.map(Json).map_err(
        |e| match e {
            RunsError::Store(e) => query.store_error(e, Some(session.id.as_str())),
            other => session.runs_error(other),
        },
    )
}

/// Get a run.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/runs/{run_id}", tag = "runs",
    params(TenantRun), responses((status = 200, description = "The run", body = Run), Lookup))]
pub async fn get_run(State(state): State<AppState>, run: TenantRun) -> Result<Json<Run>> {
    state.runs.get(&run.tenant, &run.session, run.id).await.map(Json).map_err(|e| run.runs_error(e))
}

/// Stop a run that has not finished. By default it is cancelled and its history stays
/// exactly as it was; `action` may interrupt it (keeping what it finished as a turn) or
/// roll it back (leaving nothing of it).
#[utoipa::path(post, path = "/v1/sessions/{session_id}/runs/{run_id}/cancel", tag = "runs",
    params(TenantRun, StopQuery),
    responses(
        (status = 200, description = "The stopped run; after a rollback, as it was before it was deleted", body = Run),
        Lookup,
        (status = 409, response = Conflict),
    ))]
pub async fn cancel_run(
    State(state): State<AppState>,
    run: TenantRun,
    query: StopQuery,
) -> Result<Json<Run>> {
    let answer = state.runs.stop(&run.tenant, &run.session, run.id, query.action).await;
    answer.map(Json).map_err(|e| run.runs_error(e))
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
    let after = state
        .runs
        .submit_tool_outputs(&run.tenant, &run.session, run.id, &request.outputs)
        .await
        .map_err(|e| run.runs_error(e))?;
    if request.stream.unwrap_or(false) {
        let events = state.runs.events(&run.tenant, &run.session, run.id, after);
        return Ok(sse(events, Native));
    }
    wait(&state, &run.tenant, &run.session, run.id, after).await
}
