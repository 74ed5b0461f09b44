//! Deleting and cancelling a response.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{session_of, stored, view};
use crate::http::extract::{Segments, Tenant};
use crate::http::openai::errors::Result;
use crate::http::openai::{ids, OpenAiErrors};
use crate::http::{ApiError, AppState};
use crate::model::StopAction;
use crate::runs::RunsError;
use crate::store::StoreError;

#[derive(Serialize, ToSchema)]
pub struct ResponseDeleted {
    id: String,
    /// `response.deleted`.
    object: &'static str,
    deleted: bool,
}

/// Delete a response.
///
/// A response without a conversation goes with its session; one in a conversation
/// leaves its turn there.
#[utoipa::path(delete, path = "/v1/responses/{response_id}", tag = "openai", operation_id = "delete_response",
    params(("response_id" = String, Path, description = "The response id")),
    responses((status = 200, description = "Deleted", body = ResponseDeleted), OpenAiErrors))]
pub(super) async fn remove(
    State(state): State<AppState>, Tenant(tenant): Tenant, Segments(id): Segments<String>,
) -> Result<Json<ResponseDeleted>> {
    let (record, _) = stored(&state, &tenant, &id).await?;
    let session = session_of(&record.run)?;
    if !record.run.status.is_final() {
        return Err(ApiError::SessionBusy(format!(
            "response `{id}` has not finished; cancel it first"
        ))
        .into());
    }
    let deleted = if session.as_str() == ids::own_session(record.run.id) {
        state.store.delete_session(&tenant, &session, None).await.map_err(RunsError::from)
    } else {
        state.runs.delete(&tenant, &session, record.run.id).await
    };
    match deleted {
        Ok(()) | Err(RunsError::Store(StoreError::SessionNotFound | StoreError::RunNotFound)) => {}
        Err(error) => return Err(ApiError::from_runs(error, session.as_str(), Some(&id)).into()),
    }
    Ok(Json(ResponseDeleted { id, object: "response.deleted", deleted: true }))
}

/// Cancel a response that has not finished; a finished one is answered as it is.
#[utoipa::path(post, path = "/v1/responses/{response_id}/cancel", tag = "openai", operation_id = "cancel_response",
    params(("response_id" = String, Path, description = "The response id")),
    responses((status = 200, description = "The response", body = Object), OpenAiErrors))]
pub(super) async fn cancel(
    State(state): State<AppState>, Tenant(tenant): Tenant, Segments(id): Segments<String>,
) -> Result<Json<Value>> {
    let (record, echo) = stored(&state, &tenant, &id).await?;
    let session = session_of(&record.run)?;
    let run = match state.runs.stop(&tenant, &session, record.run.id, StopAction::Cancel).await {
        Ok(run) => run,
        Err(RunsError::Store(StoreError::RunFinished(_))) => state
            .runs
            .get(&tenant, &session, record.run.id)
            .await
            .map_err(|e| ApiError::from_runs(e, session.as_str(), Some(&id)))?,
        Err(error) => return Err(ApiError::from_runs(error, session.as_str(), Some(&id)).into()),
    };
    Ok(Json(view::response(&run, &echo, true)))
}
