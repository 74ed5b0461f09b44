//! `/v1/apps/{app_id}/state` and `/v1/apps/{app_id}/users/{user_id}/state`: the state
//! documents shared by an app's sessions and by one user's, each with its own revision.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::error::{JsonBody, Lookup, Result};
use super::extract::TenantOwner;
use super::revision::{ETag, IfMatchHeader};
use super::state::StateWriteParts;
use super::AppState;
use crate::model::{StateChange, StateDocument, StateWrite};

const APP: &str = "/v1/apps/{app_id}/state";
const USER: &str = "/v1/apps/{app_id}/users/{user_id}/state";

pub fn router() -> Router<AppState> {
    Router::new()
        .route(APP, get(read_app).put(replace_app).patch(merge_app))
        .route(USER, get(read_user).put(replace_user).patch(merge_user))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OwnerStateRequest {
    /// A JSON object: on `PUT` the whole state, on `PATCH` a JSON merge patch (RFC
    /// 7396).
    #[schema(value_type = Object)]
    state: Box<RawValue>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OwnerState {
    /// The state, exactly as it was given.
    #[schema(value_type = Object)]
    state: Box<RawValue>,
    /// The document's own revision (not a session's); also the answer's `ETag`.
    revision: i64,
}

type Answer = (ETag, Json<OwnerState>);

fn answer((state, revision): (StateDocument, i64)) -> Answer {
    (ETag(revision), Json(OwnerState { state: state.as_raw().to_owned(), revision }))
}

/// Get the state shared by an app's sessions.
#[utoipa::path(get, path = "/v1/apps/{app_id}/state", tag = "state",
    operation_id = "get_app_state", params(("app_id" = String, Path, description = "The app id")),
    responses((status = 200, description = "The state and its revision", body = OwnerState), Lookup))]
async fn read_app(State(state): State<AppState>, owner: TenantOwner) -> Result<Answer> {
    read(&state, owner).await
}

/// Replace the state shared by an app's sessions, creating it if absent.
#[utoipa::path(put, path = "/v1/apps/{app_id}/state", tag = "state",
    operation_id = "replace_app_state",
    params(("app_id" = String, Path, description = "The app id"), IfMatchHeader),
    request_body = OwnerStateRequest,
    responses((status = 200, description = "The new state and revision", body = OwnerState), JsonBody))]
async fn replace_app(State(state): State<AppState>, write: OwnerWrite) -> Result<Answer> {
    write.made(&state, StateChange::Replace).await
}

/// Apply a JSON merge patch to the state shared by an app's sessions, creating it if
/// absent.
#[utoipa::path(patch, path = "/v1/apps/{app_id}/state", tag = "state",
    operation_id = "merge_app_state",
    params(("app_id" = String, Path, description = "The app id"), IfMatchHeader),
    request_body = OwnerStateRequest,
    responses((status = 200, description = "The new state and revision", body = OwnerState), JsonBody))]
async fn merge_app(State(state): State<AppState>, write: OwnerWrite) -> Result<Answer> {
    write.made(&state, StateChange::Merge).await
}

/// Get the state shared by one user's sessions of an app.
#[utoipa::path(get, path = "/v1/apps/{app_id}/users/{user_id}/state", tag = "state",
    operation_id = "get_user_state",
    params(("app_id" = String, Path, description = "The app id"), ("user_id" = String, Path, description = "The user id")),
    responses((status = 200, description = "The state and its revision", body = OwnerState), Lookup))]
async fn read_user(State(state): State<AppState>, owner: TenantOwner) -> Result<Answer> {
    read(&state, owner).await
}

/// Replace the state shared by one user's sessions of an app, creating it if absent.
#[utoipa::path(put, path = "/v1/apps/{app_id}/users/{user_id}/state", tag = "state",
    operation_id = "replace_user_state",
    params(("app_id" = String, Path, description = "The app id"), ("user_id" = String, Path, description = "The user id"), IfMatchHeader),
    request_body = OwnerStateRequest,
    responses((status = 200, description = "The new state and revision", body = OwnerState), JsonBody))]
async fn replace_user(State(state): State<AppState>, write: OwnerWrite) -> Result<Answer> {
    write.made(&state, StateChange::Replace).await
}

/// Apply a JSON merge patch to the state shared by one user's sessions of an app,
/// creating it if absent.
#[utoipa::path(patch, path = "/v1/apps/{app_id}/users/{user_id}/state", tag = "state",
    operation_id = "merge_user_state",
    params(("app_id" = String, Path, description = "The app id"), ("user_id" = String, Path, description = "The user id"), IfMatchHeader),
    request_body = OwnerStateRequest,
    responses((status = 200, description = "The new state and revision", body = OwnerState), JsonBody))]
async fn merge_user(State(state): State<AppState>, write: OwnerWrite) -> Result<Answer> {
    write.made(&state, StateChange::Merge).await
}

async fn read(state: &AppState, owner: TenantOwner) -> Result<Answer> {
    let found = state.store.owner_state(&owner.tenant, &owner.document).await;
    found.map(answer).map_err(|e| owner.store_error(e))
}

/// What a write of an owner's document takes from its request (it has no
/// `Idempotency-Key`: the document is no session's).
type OwnerWrite = StateWriteParts<TenantOwner, OwnerStateRequest>;

impl StateWriteParts<TenantOwner, OwnerStateRequest> {
    async fn made(
        self, state: &AppState, change: impl FnOnce(StateDocument) -> StateChange,
    ) -> Result<Answer> {
        let document = StateDocument::new("state", &self.request.state)?;
        let write = StateWrite { change: change(document), max_bytes: self.max_bytes };
        let owner = &self.target;
        let written = state.store.write_owner_state(
            &owner.tenant,
            &owner.document,
            write,
            self.preconditions.if_match,
        );
        written.await.map(answer).map_err(|e| owner.store_error(e))
    }
}
