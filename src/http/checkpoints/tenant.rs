//! `/v1/checkpoints`: checkpoints across every session of the tenant: listed, deleted
//! by run, pruned.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::query::CheckpointQuery;
use super::CheckpointList;
use crate::http::error::{JsonBody, Lookup, Result};
use crate::http::extract::{AppJson, Tenant};
use crate::http::AppState;
use crate::model::{check_name, CheckpointName, Identifier, SessionId};
use crate::store::Keep;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteRunsRequest {
    /// Checkpoints whose `metadata.run_id` is one of these go, in every session of the
    /// tenant, with their writes.
    #[schema(value_type = Vec<CheckpointName>)]
    run_ids: Vec<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PruneKeep {
    /// The newest checkpoint of each namespace.
    Latest,
    /// Nothing.
    None,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PruneRequest {
    #[schema(value_type = Vec<Identifier>)]
    session_ids: Vec<String>,
    keep: PruneKeep,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointsDeleted {
    /// How many checkpoints went.
    deleted: u64,
}

/// List the checkpoints of every session of the tenant, newest first.
#[utoipa::path(get, path = "/v1/checkpoints", tag = "checkpoints", operation_id = "list_tenant_checkpoints", params(CheckpointQuery),
    responses((status = 200, description = "Checkpoints, newest first", body = CheckpointList), Lookup))]
pub(crate) async fn list_all(
    State(state): State<AppState>, Tenant(tenant): Tenant, query: CheckpointQuery,
) -> Result<Json<CheckpointList>> {
    let listed = state.store.list_checkpoints(&tenant, None, &query.filter).await?;
    Ok(query.answer(listed))
}

/// Delete the checkpoints of runs, in every session of the tenant.
#[utoipa::path(post, path = "/v1/checkpoints/delete", tag = "checkpoints", operation_id = "delete_run_checkpoints",
    request_body = DeleteRunsRequest,
    responses((status = 200, description = "Deleted", body = CheckpointsDeleted), JsonBody))]
pub(crate) async fn delete_runs(
    State(state): State<AppState>, Tenant(tenant): Tenant,
    AppJson(request): AppJson<DeleteRunsRequest>,
) -> Result<Json<CheckpointsDeleted>> {
    for (n, id) in request.run_ids.iter().enumerate() {
        check_name(&format!("run_ids[{n}]"), id, false)?;
    }
    let deleted = state.store.delete_checkpoints_of_runs(&tenant, &request.run_ids).await?;
    Ok(Json(CheckpointsDeleted { deleted }))
}

/// Keep of each namespace of these sessions only the newest checkpoint, or none.
#[utoipa::path(post, path = "/v1/checkpoints/prune", tag = "checkpoints", operation_id = "prune_checkpoints",
    request_body = PruneRequest,
    responses((status = 200, description = "Pruned", body = CheckpointsDeleted), JsonBody))]
pub(crate) async fn prune(
    State(state): State<AppState>, Tenant(tenant): Tenant, AppJson(request): AppJson<PruneRequest>,
) -> Result<Json<CheckpointsDeleted>> {
    let ids = request
        .session_ids
        .into_iter()
        .enumerate()
        .map(|(n, id)| SessionId::parse(&format!("session_ids[{n}]"), id))
        .collect::<Result<Vec<_>, _>>()?;
    let keep = match request.keep {
        PruneKeep::Latest => Keep::Latest,
        PruneKeep::None => Keep::Nothing,
    };
    let deleted = state.store.prune_checkpoints(&tenant, &ids, keep).await?;
    Ok(Json(CheckpointsDeleted { deleted }))
}
