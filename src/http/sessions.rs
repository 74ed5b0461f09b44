//! `/v1/sessions`: create, list, read, patch and delete sessions.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::NoContent;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use utoipa::ToSchema;

use super::agents::find_agent;
use super::answer::Created;
use super::error::{ApiError, JsonBody, Lookup, Result};
use super::error::{BadRequest, Conflict};
use super::extract::{present, AppJson, Tenant, TenantSession};
use super::list_query::ListQuery;
use super::revision::{ETag, IfMatchHeader};
use super::AppState;
use crate::model::{
    AgentId, ExpiresAfter, Identifier, Metadata, MetadataPatch, NewSession, Order, Owners, Page,
    Session, SessionId, SessionPatch,
};

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions", get(list_sessions).post(create_session)).route(
        "/v1/sessions/{session_id}",
        get(get_session).patch(update_session).delete(delete_session),
    )
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    /// 1 to 128 characters of `A-Za-z0-9_.:@-`; a UUIDv7 is generated when absent.
    #[schema(value_type = Option<Identifier>, inline)]
    id: Option<String>,
    #[schema(value_type = Option<Metadata>)]
    metadata: Option<BTreeMap<String, String>>,
    /// The agent that runs this session's turns unless a run names another; 404
    /// `agent_not_found` when there is no such agent. Deleting the agent later leaves
    /// the id here: a run on the session is then 404 `agent_not_found`.
    #[schema(value_type = Option<Identifier>, inline)]
    agent_id: Option<String>,
    /// The app the session belongs to: its appends may change the app's state document
    /// (`app_state_delta`). Fixed once set.
    #[schema(value_type = Option<Identifier>, inline)]
    app_id: Option<String>,
    /// The user of that app the session belongs to (`user_state_delta`). Fixed once set.
    #[schema(value_type = Option<Identifier>, inline)]
    user_id: Option<String>,
    /// When the session is deleted; null keeps it until it is deleted, absent takes the
    /// server's default (`SESSION_EXPIRES_AFTER_SECS` of inactivity, if set).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<ExpiresAfter>)]
    expires_after: Option<Option<ExpiresAfter>>,
}

impl CreateSessionRequest {
    fn into_new_session(self) -> Result<NewSession, ApiError> {
        Ok(NewSession {
            id: match self.id {
                Some(id) => SessionId::parse("id", id)?,
                None => SessionId::generate(),
            },
            metadata: Metadata::new(self.metadata.unwrap_or_default())?,
            agent_id: self.agent_id.map(|id| AgentId::parse("agent_id", id)).transpose()?,
            owners: Owners::parse(self.app_id, self.user_id)?,
            expires_after: checked_expiry(self.expires_after)?,
        })
    }
}

/// A requested `expires_after`, its range checked.
fn checked_expiry(
    requested: Option<Option<ExpiresAfter>>,
) -> Result<Option<Option<ExpiresAfter>>, ApiError> {
    Ok(requested.map(|e| e.map(|e| e.check("expires_after")).transpose()).transpose()?)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSessionRequest {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = MetadataPatch)]
    metadata: Option<Option<BTreeMap<String, Option<String>>>>,
    /// A new agent (404 `agent_not_found` when there is none); null detaches the session
    /// from its agent.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Identifier>, inline)]
    agent_id: Option<Option<String>>,
    /// A new retention, counted from now for `last_active_at` and from `created_at`
    /// otherwise; null keeps the session until it is deleted.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<ExpiresAfter>)]
    expires_after: Option<Option<ExpiresAfter>>,
}

impl UpdateSessionRequest {
    fn into_patch(self) -> Result<SessionPatch, ApiError> {
        Ok(SessionPatch {
            metadata: self.metadata.map(MetadataPatch::from_request).transpose()?,
            agent_id: self
                .agent_id
                .map(|id| id.map(|id| AgentId::parse("agent_id", id)).transpose())
                .transpose()?,
            expires_after: checked_expiry(self.expires_after)?,
        })
    }
}

/// Create a session.
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", request_body = CreateSessionRequest,
    responses(
        (status = 201, description = "The new session", body = Session, headers(("location" = String, description = "The path of the new session"))),
        Lookup,
        JsonBody,
        (status = 409, response = Conflict),
    ))]
async fn create_session(
    State(state): State<AppState>, Tenant(ref tenant): Tenant,
    AppJson(request): AppJson<CreateSessionRequest>,
) -> Result<Created<Session>> {
    let session = request.into_new_session()?;
    if let Some(agent_id) = &session.agent_id {
        find_agent(&state, tenant, agent_id.as_str()).await?;
    }
    let id = session.id.clone();
    let created = state
        .store
        .create_session(tenant, session)
        .await
        .map_err(|e| ApiError::from_store(e, id.as_str(), None))?;
    let revision = Some(created.revision);
    Ok(Created::at(format!("/v1/sessions/{}", created.id), created).tagged(revision))
}

/// List sessions, newest first.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions",
    params(
        ListQuery,
        ("metadata" = Option<Metadata>, Query, style = DeepObject, explode, description = "Only sessions whose metadata holds all these pairs: `metadata[user]=alice`"),
        ("app_id" = Option<String>, Query, description = "Only the sessions of this app"),
        ("user_id" = Option<String>, Query, description = "Only the sessions of this user"),
    ),
    responses(
        (status = 200, description = "A page of sessions", body = Page<Session>),
        (status = 400, response = BadRequest),
    ))]
async fn list_sessions(
    State(state): State<AppState>, Tenant(ref tenant): Tenant, query: ListQuery,
) -> Result<Json<Page<Session>>> {
    let page = state
        .store
        .list_sessions(tenant, &query.session_filter(), &query.page(Order::Desc))
        .await
        .map_err(|e| query.store_error(e, None))?;
    Ok(Json(page))
}

/// Get a session.
#[utoipa::path(get, path = "/v1/sessions/{session_id}", tag = "sessions", params(TenantSession),
    responses((status = 200, description = "The session", body = Session), Lookup))]
async fn get_session(
    State(state): State<AppState>, session: TenantSession,
) -> Result<(ETag, Json<Session>)> {
    let answer = state.store.get_session(&session.tenant, &session.id).await;
    answer.map(tagged).map_err(|e| session.store_error(e))
}

/// A session with its revision as the answer's `ETag`.
fn tagged(session: Session) -> (ETag, Json<Session>) {
    (ETag(session.revision), Json(session))
}

/// Change a session's metadata (a JSON merge patch) or agent.
#[utoipa::path(patch, path = "/v1/sessions/{session_id}", tag = "sessions",
    params(TenantSession, IfMatchHeader),
    request_body = UpdateSessionRequest,
    responses(
        (status = 200, description = "The updated session", body = Session),
        Lookup,
        JsonBody,
    ))]
async fn update_session(
    State(state): State<AppState>, session: TenantSession, IfMatchHeader(if_match): IfMatchHeader,
    AppJson(request): AppJson<UpdateSessionRequest>,
) -> Result<(ETag, Json<Session>)> {
    let patch = request.into_patch()?;
    if let Some(Some(agent_id)) = &patch.agent_id {
        find_agent(&state, &session.tenant, agent_id.as_str()).await?;
    }
    let answer = state.store.update_session(&session.tenant, &session.id, patch, if_match).await;
    answer.map(tagged).map_err(|e| session.store_error(e))
}

/// Delete a session with all its items.
#[utoipa::path(delete, path = "/v1/sessions/{session_id}", tag = "sessions",
    params(TenantSession, IfMatchHeader),
    responses((status = 204, description = "Deleted"), Lookup))]
async fn delete_session(
    State(state): State<AppState>, session: TenantSession, IfMatchHeader(if_match): IfMatchHeader,
) -> Result<NoContent> {
    let done = state.store.delete_session(&session.tenant, &session.id, if_match).await;
    done.map(|()| NoContent).map_err(|e| session.store_error(e))
}
