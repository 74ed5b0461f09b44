//! Reading runs and stopping them.

use axum::extract::State;
use axum::Json;

use super::stop_query::StopQuery;
use crate::http::error::{Conflict, Lookup, Result};
use crate::http::extract::{TenantRun, TenantSession};
use crate::http::list_query::ListQuery;
use crate::http::AppState;
use crate::model::{Order, Page, Run};
use crate::runs::RunsError;

/// List a session's runs, newest first.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/runs", tag = "runs",
    params(TenantSession, ListQuery),
    responses((status = 200, description = "A page of runs", body = Page<Run>), Lookup))]
pub async fn list_runs(
    State(state): State<AppState>, session: TenantSession, query: ListQuery,
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
    State(state): State<AppState>, run: TenantRun, query: StopQuery,
) -> Result<Json<Run>> {
    let answer = state.runs.stop(&run.tenant, &run.session, run.id, query.action).await;
    answer.map(Json).map_err(|e| run.runs_error(e))
}
