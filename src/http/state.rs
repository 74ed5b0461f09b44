//! `/v1/sessions/{session_id}/state`: one JSON object kept beside a session, read and
//! written with the session's revision.

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::routing::get;
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::{IntoParams, ToSchema};

use super::answer::Replayed;
use super::doc_params::query_param;
use super::error::{ApiError, JsonWrite, Lookup, Result};
use super::extract::{AppJson, Preconditions, TenantSession};
use super::revision::ETag;
use super::AppState;
use crate::model::{
    IdempotencyKey, Identifier, Owners, StateChange, StateChanges, StateDocument, StateWrite,
};
use crate::store::{StateSnapshot, StoreError};

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/state", get(read).put(replace).patch(merge))
}

/// `MAX_STATE_BYTES`: the most a state document may hold, serialized.
#[derive(Debug, Clone, Copy)]
pub struct StateLimit(pub usize);

impl StateLimit {
    /// The limit a request was given (none where the router has no limit).
    pub fn of(parts: &Parts) -> usize {
        parts.extensions.get::<StateLimit>().map_or(usize::MAX, |limit| limit.0)
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StateRequest {
    /// A JSON object: on `PUT` the whole state, on `PATCH` a JSON merge patch (RFC
    /// 7396: `null` removes a member, objects merge, anything else replaces).
    #[schema(value_type = Object)]
    state: Box<RawValue>,
    /// The app the session belongs to, taken by a session that has none (409
    /// `owner_mismatch` when it has another).
    #[schema(value_type = Option<Identifier>, inline)]
    app_id: Option<String>,
    /// The user of that app the session belongs to, taken like `app_id`.
    #[schema(value_type = Option<Identifier>, inline)]
    user_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionState {
    /// The state, exactly as it was given (key order, numbers, escapes).
    #[schema(value_type = Object)]
    state: Box<RawValue>,
    /// The session's revision; also the answer's `ETag`.
    revision: i64,
    /// With `include=user`: the state of the session's user (null when the session
    /// has no user or the user no state).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, nullable)]
    user_state: Option<Option<Box<RawValue>>>,
    /// With `include=app`: the state of the session's app (null when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, nullable)]
    app_state: Option<Option<Box<RawValue>>>,
}

type Answer = (ETag, Json<SessionState>);

fn answer(state: StateDocument, revision: i64) -> Answer {
    let state = state.as_raw().to_owned();
    (ETag(revision), Json(SessionState { state, revision, user_state: None, app_state: None }))
}

/// The documents of the session's owners that a state read adds: `include=user,app`.
#[derive(Debug, Default)]
pub struct Include {
    user: bool,
    app: bool,
}

impl IntoParams for Include {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let list = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^(user|app)(,(user|app))*$"));
        vec![query_param(
            "include",
            list,
            "user, app or both, separated by commas: adds user_state and app_state (null when absent), read in the same snapshot as the session's state",
        )]
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Include {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self> {
        let mut include = Self::default();
        let query = parts.uri.query().unwrap_or_default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if name != "include" {
                continue;
            }
            for part in value.split(',') {
                match part {
                    "user" => include.user = true,
                    "app" => include.app = true,
                    other => {
                        let message = format!("must list `user` or `app`, got `{other}`");
                        return Err(ApiError::invalid("include", message));
                    }
                }
            }
        }
        Ok(include)
    }
}

/// Get a session's state, and with `include` the state of its user and app.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/state", tag = "state",
    operation_id = "get_session_state",
    params(TenantSession, Include),
    responses((status = 200, description = "The state and revision", body = SessionState), Lookup))]
async fn read(
    State(state): State<AppState>, session: TenantSession, include: Include,
) -> Result<Answer> {
    let owners = include.user || include.app;
    let found = state.store.session_state(&session.tenant, &session.id, owners).await;
    let StateSnapshot { state, revision, user, app } = found.map_err(|e| session.store_error(e))?;
    let (tag, Json(mut answer)) = answer(state, revision);
    let raw = |document: Option<StateDocument>| document.map(|d| d.as_raw().to_owned());
    answer.user_state = include.user.then(|| raw(user));
    answer.app_state = include.app.then(|| raw(app));
    Ok((tag, Json(answer)))
}

/// Replace a session's state, creating the session if it does not exist.
#[utoipa::path(put, path = "/v1/sessions/{session_id}/state", tag = "state",
    operation_id = "replace_session_state",
    params(TenantSession, Preconditions), request_body = StateRequest,
    responses(
        (status = 200, description = "The new state and revision", body = SessionState),
        JsonWrite,
    ))]
async fn replace(
    State(state): State<AppState>, write: StateWriteRequest,
) -> Result<(Replayed, Answer)> {
    write.made(&state, "replace", StateChange::Replace).await
}

/// Apply a JSON merge patch to a session's state, creating the session if it does not
/// exist.
#[utoipa::path(patch, path = "/v1/sessions/{session_id}/state", tag = "state",
    operation_id = "merge_session_state",
    params(TenantSession, Preconditions), request_body = StateRequest,
    responses(
        (status = 200, description = "The new state and revision", body = SessionState),
        JsonWrite,
    ))]
async fn merge(
    State(state): State<AppState>, write: StateWriteRequest,
) -> Result<(Replayed, Answer)> {
    write.made(&state, "merge", StateChange::Merge).await
}

/// What a write of a state document takes from its request: what the path names (`P`),
/// its `Idempotency-Key` and `If-Match`, the limit and the body (`B`).
pub struct StateWriteParts<P, B> {
    pub target: P,
    pub preconditions: Preconditions,
    pub max_bytes: usize,
    pub request: B,
}

impl<P, B> FromRequest<AppState> for StateWriteParts<P, B>
where
    P: FromRequestParts<AppState, Rejection = ApiError> + Send,
    B: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self> {
        let (mut parts, body) = request.into_parts();
        let target = P::from_request_parts(&mut parts, state).await?;
        let preconditions = Preconditions::from_request_parts(&mut parts, state).await?;
        let max_bytes = StateLimit::of(&parts);
        let request = Request::from_parts(parts, body);
        let AppJson(request) = AppJson::<B>::from_request(request, state).await?;
        Ok(Self { target, preconditions, max_bytes, request })
    }
}

type StateWriteRequest = StateWriteParts<TenantSession, StateRequest>;

impl StateWriteRequest {
    /// Writes the body's state as `change` makes it a change (`route` names which, for
    /// a retry's fingerprint).
    async fn made(
        self, state: &AppState, route: &str, change: impl FnOnce(StateDocument) -> StateChange,
    ) -> Result<(Replayed, Answer)> {
        let document = StateDocument::new("state", &self.request.state)?;
        let changes = StateChanges {
            owners: Owners::parse(self.request.app_id, self.request.user_id)?,
            session: Some(StateWrite { change: change(document), max_bytes: self.max_bytes }),
            ..StateChanges::default()
        };
        let (session, if_match) = (&self.target, self.preconditions.if_match);
        let idempotency = self.preconditions.key(|key, if_match| {
            let rest = format!("state {route}\0{}\0{if_match:?}", changes.fingerprint());
            IdempotencyKey::for_append(key, &session.id, &[], Some(&rest))
        })?;
        let written = state
            .store
            .append_with_state(
                &session.tenant,
                &session.id,
                Vec::new(),
                changes,
                idempotency,
                if_match,
            )
            .await
            .map_err(|e| session.store_error(e))?;
        match (written.state, written.revision) {
            (Some(document), Some(revision)) => {
                Ok((Replayed(written.replayed), answer(document, revision)))
            }
            _ => Err(StoreError::Corrupt("a state write without its state".into()).into()),
        }
    }
}
