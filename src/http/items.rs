//! `/v1/sessions/{session_id}/items`: a session's history, as agent SDKs' `Session`
//! protocol uses it (`get_items`, `add_items`, `pop_item`, `clear_session`).

use axum::extract::State;
use axum::response::NoContent;
use axum::routing::{delete, get};
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::answer::Created;
use super::error::ApiError;
use super::error::Result;
use super::error::{JsonBody, KeyReused, Lookup};
use super::extract::{AppJson, IdempotencyHeader, TenantItem, TenantSession};
use super::list_query::ListQuery;
use super::revision::IfMatchHeader;
use super::state::StateLimit;
use super::AppState;
use crate::model::{
    IdempotencyKey, Item, ItemBody, Order, Page, StateChange, StateDocument, StateWrite,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/sessions/{session_id}/items",
            get(list_items).post(append_items).delete(clear_items),
        )
        .route("/v1/sessions/{session_id}/items/last", delete(pop_last_item))
        .route("/v1/sessions/{session_id}/items/{item_id}", get(get_item).delete(delete_item))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendItemsRequest {
    /// Up to 1000 JSON objects, appended in this order. With none and no state delta the
    /// append changes nothing but records its `Idempotency-Key`.
    #[schema(value_type = Vec<Object>, max_items = 1000)]
    items: Vec<Box<RawValue>>,
    /// A JSON merge patch of the session's state, committed with the items or not at all.
    #[schema(value_type = Option<Object>)]
    state_delta: Option<Box<RawValue>>,
    /// A merge patch of the state of the session's user; refused while the session has
    /// no `user_id`.
    #[schema(value_type = Option<Object>)]
    user_state_delta: Option<Box<RawValue>>,
    /// A merge patch of the state of the session's app; refused while the session has no
    /// `app_id`.
    #[schema(value_type = Option<Object>)]
    app_state_delta: Option<Box<RawValue>>,
}

impl AppendItemsRequest {
    /// The items, checked, and the state change.
    fn into_parts(self, max_state_bytes: usize) -> Result<(Vec<ItemBody>, Option<StateWrite>)> {
        // Sessions have no owners yet: a delta for one has nowhere to go.
        if self.user_state_delta.is_some() {
            return Err(ApiError::invalid("user_state_delta", "the session has no user_id"));
        }
        if self.app_state_delta.is_some() {
            return Err(ApiError::invalid("app_state_delta", "the session has no app_id"));
        }
        let bodies = match self.items.is_empty() {
            true => Vec::new(),
            false => ItemBody::batch("items", self.items)?,
        };
        let state = match self.state_delta {
            Some(delta) => Some(StateWrite {
                change: StateChange::Merge(StateDocument::new("state_delta", &delta)?),
                max_bytes: max_state_bytes,
            }),
            None => None,
        };
        Ok((bodies, state))
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendItemsResponse {
    /// The appended items, in order.
    data: Vec<Item>,
}

/// List a session's items.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/items", tag = "items",
    params(TenantSession, ListQuery),
    responses((status = 200, description = "A page of items", body = Page<Item>), Lookup))]
async fn list_items(
    State(state): State<AppState>,
    session: TenantSession,
    query: ListQuery,
) -> Result<Json<Page<Item>>> {
    let answer =
        state.store.list_items(&session.tenant, &session.id, &query.page(Order::Asc)).await;
    answer.map(Json).map_err(|e| query.store_error(e, Some(session.id.as_str())))
}

/// Append items to a session, creating the session if it does not exist.
///
/// The batch is appended atomically and in order. With an `Idempotency-Key`, a retry of
/// the same request returns the first response and appends nothing.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/items", tag = "items",
    params(TenantSession, IdempotencyHeader, IfMatchHeader),
    request_body = AppendItemsRequest,
    responses(
        (status = 201, description = "The appended items", body = AppendItemsResponse),
        JsonBody,
        (status = 422, response = KeyReused),
    ))]
async fn append_items(
    State(state): State<AppState>,
    Extension(StateLimit(limit)): Extension<StateLimit>,
    session: TenantSession,
    idempotency: IdempotencyHeader,
    IfMatchHeader(if_match): IfMatchHeader,
    AppJson(request): AppJson<AppendItemsRequest>,
) -> Result<Created<AppendItemsResponse>> {
    let (bodies, change) = request.into_parts(limit)?;
    let idempotency = idempotency.key(|key| {
        // What the request asks besides its items: part of what a retry must repeat.
        let rest = (change.is_some() || if_match.is_some()).then(|| {
            let delta = change.as_ref().map(|c| c.change.document().as_str());
            format!("{}\0{:?}", delta.unwrap_or(""), if_match)
        });
        IdempotencyKey::for_append(key, &session.id, &bodies, rest.as_deref())
    })?;
    let appended = state
        .store
        .append_with_state(&session.tenant, &session.id, bodies, change, idempotency, if_match)
        .await
        .map_err(|e| session.store_error(e))?;
    let data = appended.items;
    let answer = Created::new(AppendItemsResponse { data }).replayed(appended.replayed);
    Ok(answer.tagged(appended.revision))
}

/// Get one item.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/items/{item_id}", tag = "items",
    params(TenantItem), responses((status = 200, description = "The item", body = Item), Lookup))]
async fn get_item(State(state): State<AppState>, item: TenantItem) -> Result<Json<Item>> {
    let answer = state.store.get_item(&item.tenant, &item.session, item.id).await;
    answer.map(Json).map_err(|e| item.store_error(e))
}

/// Delete one item.
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/items/{item_id}", tag = "items",
    params(TenantItem, IfMatchHeader), responses((status = 204, description = "Deleted"), Lookup))]
async fn delete_item(
    State(state): State<AppState>,
    item: TenantItem,
    IfMatchHeader(if_match): IfMatchHeader,
) -> Result<NoContent> {
    let done = state.store.delete_item(&item.tenant, &item.session, item.id, if_match).await;
    done.map(|()| NoContent).map_err(|e| item.store_error(e))
}

/// Remove and return the newest item (the SDKs' `pop_item`).
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/items/last", tag = "items",
    params(TenantSession, IfMatchHeader),
    responses((status = 200, description = "The removed item", body = Item), Lookup))]
async fn pop_last_item(
    State(state): State<AppState>,
    session: TenantSession,
    IfMatchHeader(if_match): IfMatchHeader,
) -> Result<Json<Item>> {
    let answer = state.store.pop_last_item(&session.tenant, &session.id, if_match).await;
    answer.map(Json).map_err(|e| session.store_error(e))
}

/// Remove every item and keep the session (the SDKs' `clear_session`).
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/items", tag = "items",
    params(TenantSession, IfMatchHeader),
    responses((status = 204, description = "Cleared"), Lookup))]
async fn clear_items(
    State(state): State<AppState>,
    session: TenantSession,
    IfMatchHeader(if_match): IfMatchHeader,
) -> Result<NoContent> {
    let done = state.store.clear_items(&session.tenant, &session.id, if_match).await;
    done.map(|()| NoContent).map_err(|e| session.store_error(e))
}
