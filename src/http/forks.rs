//! `/v1/sessions/{session_id}/fork`: a new session starting from a copy of another's
//! history, to carry on from a point or retry a turn another way.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::answer::Created;
use super::error::{ApiError, JsonWrite, Lookup, Result};
use super::extract::{AppJsonText, IdempotencyHeader, TenantSession};
use super::AppState;
use crate::model::{ForkPoint, IdempotencyKey, Identifier, Metadata, NewFork, Session, SessionId};
use crate::store::StoreError;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/fork", post(fork_session))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkSessionRequest {
    /// The fork's id: 1 to 128 characters of `A-Za-z0-9_.:@-`; a UUIDv7 when absent.
    #[schema(value_type = Option<Identifier>, inline)]
    id: Option<String>,
    /// The fork's metadata; the source's when absent.
    #[schema(value_type = Option<Metadata>)]
    metadata: Option<BTreeMap<String, String>>,
    /// Copy the items up to and including this one. Not with `before_run_id`.
    through_item_id: Option<Uuid>,
    /// Copy the history as it stood before this run's turn. Not with `through_item_id`.
    before_run_id: Option<Uuid>,
}

/// Fork a session: a new session holding copies of its items (all, up to an item, or
/// before a run's turn) and of the compactions within them.
///
/// The copies have the same JSON in the same order, new ids and `seq` from 1; the fork
/// keeps the agent and (unless given) the metadata, and starts with no runs and zero
/// usage. The source is neither waited for nor changed: a turn in flight is not copied.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/fork", tag = "sessions",
    params(TenantSession, IdempotencyHeader),
    request_body = ForkSessionRequest,
    responses(
        (status = 201, description = "The fork", body = Session, headers(("location" = String, description = "The path of the fork"))),
        Lookup,
        JsonWrite,
    ))]
async fn fork_session(
    State(state): State<AppState>, source: TenantSession, idempotency: IdempotencyHeader,
    AppJsonText(request, text): AppJsonText<ForkSessionRequest>,
) -> Result<Created<Session>> {
    let point = ForkPoint::from_request(request.through_item_id, request.before_run_id)?;
    let id = match request.id {
        Some(id) => SessionId::parse("id", id)?,
        None => SessionId::generate(),
    };
    let idempotency = idempotency.key(|key| IdempotencyKey::for_fork(key, &source.id, &text))?;
    let fork = NewFork {
        metadata: request.metadata.map(Metadata::new).transpose()?,
        id: id.clone(),
        point,
        idempotency,
    };
    let forked = state.store.fork_session(&source.tenant, &source.id, fork).await.map_err(
        |error| match (error, point) {
            (StoreError::SessionExists, _) => ApiError::SessionExists(format!(
                "a session with id `{}` already exists",
                id.as_str()
            )),
            (error, ForkPoint::ThroughItem(item)) => {
                ApiError::from_store(error, source.id.as_str(), Some(&item.to_string()))
            }
            (error, ForkPoint::BeforeRun(run) | ForkPoint::AfterRun(run)) => {
                ApiError::from_store(error, source.id.as_str(), Some(&run.to_string()))
            }
            (error, ForkPoint::All) => source.store_error(error),
        },
    )?;
    let location = format!("/v1/sessions/{}", forked.session.id);
    Ok(Created::at(location, forked.session).replayed(forked.replayed))
}
