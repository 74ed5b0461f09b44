//! `/v1/sessions/{session_id}/checkpoints` and `/v1/checkpoints`: an agent's execution
//! snapshots (LangGraph's checkpoints), one request per operation of a checkpointer.

mod query;
pub(super) mod tenant;

use std::collections::BTreeMap;

use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::response::NoContent;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::answer::Replayed;
use super::error::{ApiError, JsonBody, KeyReused, Lookup, Result};
use super::extract::{AppJsonText, Preconditions, TenantSession};
use super::revision::IfMatchHeader;
use super::AppState;
use crate::model::{
    check_name, ChannelBlob, Checkpoint, CheckpointName, CheckpointPath, NewCheckpoint,
    PendingWrite, TypedValue,
};
use crate::store::{CheckpointRef, StoreError};
use query::CheckpointQuery;

const ONE: &str = "/v1/sessions/{session_id}/checkpoints/{checkpoint_id}";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/checkpoints", get(list).delete(delete_all))
        .route(ONE, put(put_checkpoint).get(get_checkpoint))
        .route(&format!("{ONE}/writes"), post(put_writes))
        .route("/v1/checkpoints", get(tenant::list_all))
        .route("/v1/checkpoints/delete", post(tenant::delete_runs))
        .route("/v1/checkpoints/prune", post(tenant::prune))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutCheckpointRequest {
    /// The checkpoint this one follows, in the same namespace.
    #[schema(value_type = Option<CheckpointName>)]
    parent_id: Option<String>,
    /// The checkpoint itself, in the framework's serialization.
    checkpoint: TypedValue,
    /// Any JSON object; listings filter on its top-level members. `run_id` names the run
    /// that `POST /v1/checkpoints/delete` deletes by.
    #[serde(default)]
    #[schema(value_type = Object)]
    metadata: Map<String, Value>,
    /// The version of each channel the checkpoint holds.
    #[serde(default)]
    channel_versions: BTreeMap<String, String>,
    /// The values of the channels this checkpoint changed, each at the version
    /// `channel_versions` names; the others were stored with an earlier checkpoint.
    #[serde(default)]
    blobs: Vec<ChannelBlob>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointSaved {
    session_id: String,
    namespace: String,
    id: String,
    #[schema(required = true)]
    parent_id: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskWrite {
    /// Its place among the task's writes: a place written again keeps the first write,
    /// but a negative place (an error, an interrupt) takes the last.
    idx: i64,
    channel: String,
    #[serde(flatten)]
    value: TypedValue,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutWritesRequest {
    #[schema(value_type = CheckpointName)]
    task_id: String,
    #[serde(default)]
    #[schema(value_type = CheckpointPath)]
    task_path: String,
    writes: Vec<TaskWrite>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointList {
    /// Newest id first, each with its channel values and pending writes.
    data: Vec<Checkpoint>,
    /// Whether older checkpoints match too: ask again with `before` the last id.
    has_more: bool,
}

impl CheckpointList {
    fn new(data: Vec<Checkpoint>, has_more: bool) -> Self {
        Self { data, has_more }
    }
}

/// The checkpoint a request names: its session, the `{checkpoint_id}` of the path
/// (checked) and the `namespace` of the query.
struct NamedCheckpoint {
    session: TenantSession,
    namespace: String,
    id: String,
}

impl NamedCheckpoint {
    fn at(&self) -> CheckpointRef<'_> {
        CheckpointRef { session_id: &self.session.id, namespace: &self.namespace, id: &self.id }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for NamedCheckpoint {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        let session = TenantSession::from_request_parts(parts, state).await?;
        let query = CheckpointQuery::from_request_parts(parts, state).await?;
        let path = Path::<(String, String)>::from_request_parts(parts, state).await;
        let Path((_, id)) = path.map_err(|e| ApiError::invalid("checkpoint_id", e.body_text()))?;
        check_name("checkpoint_id", &id, false)?;
        Ok(Self { session, namespace: query.namespace().to_owned(), id })
    }
}

/// Store a checkpoint (the same id again replaces it), creating the session if it does
/// not exist. Changes no revision of the session.
#[utoipa::path(put, path = "/v1/sessions/{session_id}/checkpoints/{checkpoint_id}", tag = "checkpoints", operation_id = "put_checkpoint",
    params(TenantSession, ("checkpoint_id" = String, Path, description = "The checkpoint id: ids of one namespace sort in the order they were made"),
        ("namespace" = Option<String>, Query, description = "The namespace (default: the root one, empty)"),
        Preconditions),
    request_body = PutCheckpointRequest,
    responses((status = 200, description = "Stored", body = CheckpointSaved), JsonBody, (status = 422, response = KeyReused)))]
async fn put_checkpoint(
    State(state): State<AppState>, NamedCheckpoint { session, namespace, id }: NamedCheckpoint,
    preconditions: Preconditions, AppJsonText(request, text): AppJsonText<PutCheckpointRequest>,
) -> Result<(Replayed, Json<CheckpointSaved>)> {
    let new = NewCheckpoint {
        namespace,
        id,
        parent_id: request.parent_id,
        payload: request.checkpoint,
        metadata: request.metadata,
        channel_versions: request.channel_versions,
        blobs: request.blobs,
    };
    new.check()?;
    let target = format!("checkpoint\0{}\0{}", new.namespace, new.id);
    let key = preconditions.write_key(&session.id, &target, &text)?;
    let if_match = preconditions.if_match;
    let saved = CheckpointSaved {
        session_id: session.id.as_str().to_owned(),
        namespace: new.namespace.clone(),
        id: new.id.clone(),
        parent_id: new.parent_id.clone(),
    };
    let put = state.store.put_checkpoint(&session.tenant, &session.id, new, key, if_match).await;
    let replayed = put.map_err(|e| session.store_error(e))?;
    Ok((Replayed(replayed), Json(saved)))
}

/// Store a task's writes pending on a checkpoint.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/checkpoints/{checkpoint_id}/writes", tag = "checkpoints", operation_id = "put_checkpoint_writes",
    params(TenantSession, ("checkpoint_id" = String, Path, description = "The checkpoint id"),
        ("namespace" = Option<String>, Query, description = "The namespace (default: the root one, empty)"),
        Preconditions),
    request_body = PutWritesRequest,
    responses((status = 204, description = "Stored"), JsonBody, (status = 422, response = KeyReused)))]
async fn put_writes(
    State(state): State<AppState>, named: NamedCheckpoint, preconditions: Preconditions,
    AppJsonText(request, text): AppJsonText<PutWritesRequest>,
) -> Result<(Replayed, NoContent)> {
    let writes: Vec<PendingWrite> = request
        .writes
        .into_iter()
        .map(|w| PendingWrite {
            task_id: request.task_id.clone(),
            task_path: request.task_path.clone(),
            idx: w.idx,
            channel: w.channel,
            value: w.value,
        })
        .collect();
    for (n, write) in writes.iter().enumerate() {
        write.check(&format!("writes[{n}]"))?;
    }
    let target = format!("checkpoint writes\0{}\0{}", named.namespace, named.id);
    let session = &named.session;
    let key = preconditions.write_key(&session.id, &target, &text)?;
    let if_match = preconditions.if_match;
    let put = state.store.put_writes(&session.tenant, named.at(), writes, key, if_match).await;
    let replayed = put.map_err(|e| session.store_error(e))?;
    Ok((Replayed(replayed), NoContent))
}

/// Get one checkpoint with its channel values and pending writes.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/checkpoints/{checkpoint_id}", tag = "checkpoints", operation_id = "get_checkpoint",
    params(TenantSession, ("checkpoint_id" = String, Path, description = "The checkpoint id"),
        ("namespace" = Option<String>, Query, description = "The namespace (default: the root one, empty)")),
    responses((status = 200, description = "The checkpoint", body = Checkpoint), Lookup))]
async fn get_checkpoint(
    State(state): State<AppState>, named: NamedCheckpoint,
) -> Result<Json<Checkpoint>> {
    let found = state.store.get_checkpoint(&named.session.tenant, named.at()).await;
    found.map(Json).map_err(|e| match e {
        StoreError::CheckpointNotFound => ApiError::CheckpointNotFound(format!(
            "no checkpoint `{}` in namespace `{}` of session `{}`",
            named.id,
            named.namespace,
            named.session.id.as_str()
        )),
        other => named.session.store_error(other),
    })
}

/// List a session's checkpoints, newest first; `limit=1` gets the newest.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/checkpoints", tag = "checkpoints", operation_id = "list_checkpoints",
    params(TenantSession, CheckpointQuery),
    responses((status = 200, description = "Checkpoints, newest first", body = CheckpointList), Lookup))]
async fn list(
    State(state): State<AppState>, session: TenantSession, query: CheckpointQuery,
) -> Result<Json<CheckpointList>> {
    let listed = state.store.list_checkpoints(&session.tenant, Some(&session.id), &query.filter);
    Ok(query.answer(listed.await.map_err(|e| session.store_error(e))?))
}

/// Delete a session's checkpoints with their writes and channel values; the session
/// stays.
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/checkpoints", tag = "checkpoints", operation_id = "delete_checkpoints",
    params(TenantSession, IfMatchHeader),
    responses((status = 204, description = "Deleted"), Lookup))]
async fn delete_all(
    State(state): State<AppState>, session: TenantSession, IfMatchHeader(if_match): IfMatchHeader,
) -> Result<NoContent> {
    let deleted = state.store.delete_checkpoints(&session.tenant, &session.id, if_match).await;
    deleted.map(|_| NoContent).map_err(|e| session.store_error(e))
}
