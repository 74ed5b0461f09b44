//! `/v1/sessions/{session_id}/items`: a session's history, as agent SDKs' `Session`
//! protocol uses it (`get_items`, `add_items`, `pop_item`, `clear_session`).

use axum::extract::State;
use axum::response::NoContent;
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::answer::Created;
use super::error::Result;
use super::error::{JsonBody, KeyReused, Lookup};
use super::extract::{AppJson, IdempotencyHeader, TenantItem, TenantSession};
use super::list_query::ListQuery;
use super::AppState;
use crate::model::{IdempotencyKey, Item, ItemBody, Order, Page};

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
    /// 1 to 1000 JSON objects, appended in this order.
    #[schema(value_type = Vec<Object>, min_items = 1, max_items = 1000)]
    items: Vec<Box<RawValue>>,
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
    params(TenantSession, IdempotencyHeader),
    request_body = AppendItemsRequest,
    responses(
        (status = 201, description = "The appended items", body = AppendItemsResponse),
        JsonBody,
        (status = 422, response = KeyReused),
    ))]
async fn append_items(
    State(state): State<AppState>,
    session: TenantSession,
    idempotency: IdempotencyHeader,
    AppJson(request): AppJson<AppendItemsRequest>,
) -> Result<Created<AppendItemsResponse>> {
    let bodies = ItemBody::batch("items", request.items)?;
    let idempotency = idempotency.key(|key| IdempotencyKey::new(key, &session.id, &bodies))?;
    let appended = state
        .store
        .append_items(&session.tenant, &session.id, bodies, idempotency)
        .await
        .map_err(|e| session.store_error(e))?;
    let data = appended.items;
    Ok(Created::new(AppendItemsResponse { data }).replayed(appended.replayed))
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
    params(TenantItem), responses((status = 204, description = "Deleted"), Lookup))]
async fn delete_item(State(state): State<AppState>, item: TenantItem) -> Result<NoContent> {
    let done = state.store.delete_item(&item.tenant, &item.session, item.id).await;
    done.map(|()| NoContent).map_err(|e| item.store_error(e))
}

/// Remove and return the newest item (the SDKs' `pop_item`).
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/items/last", tag = "items",
    params(TenantSession),
    responses((status = 200, description = "The removed item", body = Item), Lookup))]
async fn pop_last_item(
    State(state): State<AppState>,
    session: TenantSession,
) -> Result<Json<Item>> {
    let answer = state.store.pop_last_item(&session.tenant, &session.id).await;
    answer.map(Json).map_err(|e| session.store_error(e))
}

/// Remove every item and keep the session (the SDKs' `clear_session`).
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/items", tag = "items",
    params(TenantSession), responses((status = 204, description = "Cleared"), Lookup))]
async fn clear_items(State(state): State<AppState>, session: TenantSession) -> Result<NoContent> {
    let done = state.store.clear_items(&session.tenant, &session.id).await;
    done.map(|()| NoContent).map_err(|e| session.store_error(e))
}
