//! `/v1/sessions/{session_id}/items`: a session's history, as agent SDKs' `Session`
//! protocol uses it (`get_items`, `add_items`, `pop_item`, `clear_session`).

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::error::{ApiError, Result};
use super::error::{
    BadRequest, Internal, KeyReused, NotFound, PayloadTooLarge, UnsupportedMediaType,
};
use super::extract::{
    idempotency_key, AppJson, ItemPath, SessionPath, Tenant, IDEMPOTENT_REPLAYED,
};
use super::list_query::ListQuery;
use super::AppState;
use crate::model::{IdempotencyKey, Item, ItemBody, Order, Page};

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/sessions/{session_id}/items",
            get(list_items).post(append_items).delete(clear_items),
        )
        .route(
            "/v1/sessions/{session_id}/items/last",
            delete(pop_last_item),
        )
        .route(
            "/v1/sessions/{session_id}/items/{item_id}",
            get(get_item).delete(delete_item),
        )
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
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/items",
    tag = "items",
    params(("session_id" = String, Path, description = "The session id"), ListQuery),
    responses(
        (status = 200, description = "A page of items", body = Page<Item>),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn list_items(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(id): SessionPath,
    query: ListQuery,
) -> Result<Json<Page<Item>>> {
    let page = state
        .store
        .list_items(tenant, &id, &query.page(Order::Asc))
        .await
        .map_err(|e| query.store_error(e, Some(id.as_str())))?;
    Ok(Json(page))
}

/// Append items to a session, creating the session if it does not exist.
///
/// The batch is appended atomically and in order. With an `Idempotency-Key`, a retry of
/// the same request returns the first response and appends nothing.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/items",
    tag = "items",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes retries safe; kept for 24 hours"),
    ),
    request_body = AppendItemsRequest,
    responses(
        (status = 201, description = "The appended items", body = AppendItemsResponse,
         headers(("idempotent-replayed" = String, description = "`true` when this answers a retry"))),
        (status = 400, response = BadRequest),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = KeyReused),
        (status = 500, response = Internal),
    )
)]
async fn append_items(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(id): SessionPath,
    headers: HeaderMap,
    AppJson(request): AppJson<AppendItemsRequest>,
) -> Result<(StatusCode, HeaderMap, Json<AppendItemsResponse>)> {
    let bodies = ItemBody::batch("items", request.items)?;
    let idempotency = idempotency_key(&headers)?
        .map(|key| IdempotencyKey::new(key, &id, &bodies))
        .transpose()?;
    let appended = state
        .store
        .append_items(tenant, &id, bodies, idempotency)
        .await
        .map_err(|e| ApiError::from_store(e, id.as_str(), None))?;
    let mut response_headers = HeaderMap::new();
    if appended.replayed {
        response_headers.insert(
            IDEMPOTENT_REPLAYED.clone(),
            HeaderValue::from_static("true"),
        );
    }
    Ok((
        StatusCode::CREATED,
        response_headers,
        Json(AppendItemsResponse {
            data: appended.items,
        }),
    ))
}

/// Get one item.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/items/{item_id}",
    tag = "items",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("item_id" = String, Path, description = "The item id"),
    ),
    responses(
        (status = 200, description = "The item", body = Item),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn get_item(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(id): SessionPath,
    item: ItemPath,
) -> Result<Json<Item>> {
    let found = state
        .store
        .get_item(tenant, &id, item.id)
        .await
        .map_err(|e| ApiError::from_store(e, id.as_str(), Some(&item.raw)))?;
    Ok(Json(found))
}

/// Delete one item.
#[utoipa::path(
    delete,
    path = "/v1/sessions/{session_id}/items/{item_id}",
    tag = "items",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("item_id" = String, Path, description = "The item id"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn delete_item(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(id): SessionPath,
    item: ItemPath,
) -> Result<StatusCode> {
    state
        .store
        .delete_item(tenant, &id, item.id)
        .await
        .map_err(|e| ApiError::from_store(e, id.as_str(), Some(&item.raw)))?;
    Ok(StatusCode::NO_CONTENT)
}

/// Remove and return the newest item (the SDKs' `pop_item`).
#[utoipa::path(
    delete,
    path = "/v1/sessions/{session_id}/items/last",
    tag = "items",
    params(("session_id" = String, Path, description = "The session id")),
    responses(
        (status = 200, description = "The removed item", body = Item),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn pop_last_item(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(id): SessionPath,
) -> Result<Json<Item>> {
    let item = state
        .store
        .pop_last_item(tenant, &id)
        .await
        .map_err(|e| ApiError::from_store(e, id.as_str(), None))?;
    Ok(Json(item))
}

/// Remove every item and keep the session (the SDKs' `clear_session`).
#[utoipa::path(
    delete,
    path = "/v1/sessions/{session_id}/items",
    tag = "items",
    params(("session_id" = String, Path, description = "The session id")),
    responses(
        (status = 204, description = "Cleared"),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn clear_items(
    State(state): State<AppState>,
    Tenant(ref tenant): Tenant,
    SessionPath(id): SessionPath,
) -> Result<StatusCode> {
    state
        .store
        .clear_items(tenant, &id)
        .await
        .map_err(|e| ApiError::from_store(e, id.as_str(), None))?;
    Ok(StatusCode::NO_CONTENT)
}
