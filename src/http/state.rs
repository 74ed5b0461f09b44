//! `/v1/sessions/{session_id}/state`: one JSON object kept beside a session, read and
//! written with the session's revision.

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::error::{ApiError, JsonBody, Lookup, Result};
use super::extract::{AppJson, TenantSession};
use super::revision::{ETag, IfMatchHeader};
use super::AppState;
use crate::model::{IfMatch, StateChange, StateDocument, StateWrite};

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/state", get(read).put(replace).patch(merge))
}

/// `MAX_STATE_BYTES`: the most a state document may hold, serialized.
#[derive(Debug, Clone, Copy)]
pub struct StateLimit(pub usize);

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StateRequest {
    /// A JSON object: on `PUT` the whole state, on `PATCH` a JSON merge patch (RFC
    /// 7396: `null` removes a member, objects merge, anything else replaces).
    #[schema(value_type = Object)]
    state: Box<RawValue>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionState {
    /// The state, exactly as it was given (key order, numbers, escapes).
    #[schema(value_type = Object)]
    state: Box<RawValue>,
    /// The session's revision; also the answer's `ETag`.
    revision: i64,
}

type Answer = (ETag, Json<SessionState>);

fn answer((state, revision): (StateDocument, i64)) -> Answer {
    (ETag(revision), Json(SessionState { state: state.as_raw().to_owned(), revision }))
}

/// Get a session's state.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/state", tag = "state",
    operation_id = "get_session_state",
    params(TenantSession),
    responses((status = 200, description = "The state and revision", body = SessionState), Lookup))]
async fn read(State(state): State<AppState>, session: TenantSession) -> Result<Answer> {
    let found = state.store.session_state(&session.tenant, &session.id).await;
    found.map(answer).map_err(|e| session.store_error(e))
}

/// Replace a session's state, creating the session if it does not exist.
#[utoipa::path(put, path = "/v1/sessions/{session_id}/state", tag = "state",
    operation_id = "replace_session_state",
    params(TenantSession, IfMatchHeader), request_body = StateRequest,
    responses((status = 200, description = "The new state and revision", body = SessionState), JsonBody))]
async fn replace(State(state): State<AppState>, write: StateWriteRequest) -> Result<Answer> {
    write.made(&state, StateChange::Replace).await
}

/// Apply a JSON merge patch to a session's state, creating the session if it does not
/// exist.
#[utoipa::path(patch, path = "/v1/sessions/{session_id}/state", tag = "state",
    operation_id = "merge_session_state",
    params(TenantSession, IfMatchHeader), request_body = StateRequest,
    responses((status = 200, description = "The new state and revision", body = SessionState), JsonBody))]
async fn merge(State(state): State<AppState>, write: StateWriteRequest) -> Result<Answer> {
    write.made(&state, StateChange::Merge).await
}

/// What a state write takes from its request: the session, `If-Match`, the limit and
/// the body.
struct StateWriteRequest {
    session: TenantSession,
    if_match: Option<IfMatch>,
    max_bytes: usize,
    request: StateRequest,
}

impl FromRequest<AppState> for StateWriteRequest {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self> {
        let (mut parts, body) = request.into_parts();
        let session = TenantSession::from_request_parts(&mut parts, state).await?;
        let IfMatchHeader(if_match) = IfMatchHeader::from_request_parts(&mut parts, state).await?;
        let max_bytes = parts.extensions.get::<StateLimit>().map_or(usize::MAX, |limit| limit.0);
        let request = Request::from_parts(parts, body);
        let AppJson(request) = AppJson::<StateRequest>::from_request(request, state).await?;
        Ok(Self { session, if_match, max_bytes, request })
    }
}

impl StateWriteRequest {
    /// Writes the body's state as `change` makes it a change.
    async fn made(
        self,
        state: &AppState,
        change: impl FnOnce(StateDocument) -> StateChange,
    ) -> Result<Answer> {
        let document = StateDocument::new("state", &self.request.state)?;
        let write = StateWrite { change: change(document), max_bytes: self.max_bytes };
        let session = &self.session;
        let written =
            state.store.write_session_state(&session.tenant, &session.id, write, self.if_match);
        written.await.map(answer).map_err(|e| session.store_error(e))
    }
}
