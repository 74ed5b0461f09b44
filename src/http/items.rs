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
use super::error::Result;
use super::error::{JsonWrite, KeyReused, Lookup};
use super::extract::{AppJson, Preconditions, TenantItem, TenantSession};
use super::list_query::ListQuery;
use super::revision::ETag;
use super::state::StateLimit;
use super::AppState;
use crate::model::{
    IdempotencyKey, Identifier, Item, ItemBody, Order, Owners, Page, StateChange, StateChanges,
    StateDocument, StateWrite,
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
    /// A merge patch of the state of the session's user (of its app), in the same
    /// transaction; 400 while the session has no `user_id` and `app_id`.
    #[schema(value_type = Option<Object>)]
    user_state_delta: Option<Box<RawValue>>,
    /// A merge patch of the state of the session's app, in the same transaction; 400
    /// while the session has no `app_id`.
    #[schema(value_type = Option<Object>)]
    app_state_delta: Option<Box<RawValue>>,
    /// The app the session belongs to, taken by a session that has none (409
    /// `owner_mismatch` when it has another).
    #[schema(value_type = Option<Identifier>, inline)]
    app_id: Option<String>,
    /// The user of that app the session belongs to, taken like `app_id`.
    #[schema(value_type = Option<Identifier>, inline)]
    user_id: Option<String>,
}

impl AppendItemsRequest {
    /// The items, checked, and what the append changes besides them.
    fn into_parts(self, max_bytes: usize) -> Result<(Vec<ItemBody>, StateChanges)> {
        let bodies = match self.items.is_empty() {
            true => Vec::new(),
            false => ItemBody::batch("items", self.items)?,
        };
        let merge = |field: &str, delta: Option<Box<RawValue>>| -> Result<Option<StateWrite>> {
            let Some(delta) = delta else { return Ok(None) };
            let change = StateChange::Merge(StateDocument::new(field, &delta)?);
            Ok(Some(StateWrite { change, max_bytes }))
        };
        let changes = StateChanges {
            owners: Owners::parse(self.app_id, self.user_id)?,
            session: merge("state_delta", self.state_delta)?,
            user: merge("user_state_delta", self.user_state_delta)?,
            app: merge("app_state_delta", self.app_state_delta)?,
        };
        Ok((bodies, changes))
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
    params(
        TenantSession,
        ListQuery,
        ("created_after" = Option<String>, Query, format = DateTime, description = "Only the items created after this instant (RFC 3339)"),
    ),
    responses((status = 200, description = "A page of items", body = Page<Item>), Lookup))]
async fn list_items(
    State(state): State<AppState>, session: TenantSession, query: ListQuery,
) -> Result<(Option<ETag>, Json<Page<Item>>)> {
    let answer =
        state.store.list_items(&session.tenant, &session.id, &query.page(Order::Asc)).await;
    let page = answer.map_err(|e| query.store_error(e, Some(session.id.as_str())))?;
    Ok((page.revision.map(ETag), Json(page)))
}

/// Append items to a session, creating the session if it does not exist.
///
/// The batch is appended atomically and in order. With an `Idempotency-Key`, a retry of
/// the same request returns the first response and appends nothing.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/items", tag = "items",
    params(TenantSession, Preconditions),
    request_body = AppendItemsRequest,
    responses(
        (status = 201, description = "The appended items", body = AppendItemsResponse),
        JsonWrite,
    ))]
async fn append_items(
    State(state): State<AppState>, Extension(StateLimit(limit)): Extension<StateLimit>,
    session: TenantSession, preconditions: Preconditions,
    AppJson(request): AppJson<AppendItemsRequest>,
) -> Result<Created<AppendItemsResponse>> {
    let (bodies, changes) = request.into_parts(limit)?;
    let if_match = preconditions.if_match;
    let idempotency = preconditions.key(|key, if_match| {
        // What the request asks besides its items: part of what a retry must repeat.
        let rest = (!changes.is_empty() || if_match.is_some())
            .then(|| format!("{}\0{:?}", changes.fingerprint(), if_match));
        IdempotencyKey::for_append(key, &session.id, &bodies, rest.as_deref())
    })?;
    let appended = state
        .store
        .append_with_state(&session.tenant, &session.id, bodies, changes, idempotency, if_match)
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
    params(TenantItem, Preconditions),
    responses((status = 204, description = "Deleted"), Lookup, (status = 422, response = KeyReused)))]
async fn delete_item(
    State(state): State<AppState>, item: TenantItem, preconditions: Preconditions,
) -> Result<NoContent> {
    let key = preconditions.write_key(&item.session, &format!("delete item\0{}", item.id), "")?;
    let if_match = preconditions.if_match;
    let done = state.store.delete_item(&item.tenant, &item.session, item.id, key, if_match).await;
    done.map(|()| NoContent).map_err(|e| item.store_error(e))
}

/// Remove and return the newest item (the SDKs' `pop_item`).
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/items/last", tag = "items",
    params(TenantSession, Preconditions),
    responses((status = 200, description = "The removed item", body = Item), Lookup, (status = 422, response = KeyReused)))]
async fn pop_last_item(
    State(state): State<AppState>, session: TenantSession, preconditions: Preconditions,
) -> Result<Json<Item>> {
    let key = preconditions.write_key(&session.id, "pop", "")?;
    let if_match = preconditions.if_match;
    let answer = state.store.pop_last_item(&session.tenant, &session.id, key, if_match).await;
    answer.map(Json).map_err(|e| session.store_error(e))
}

/// Remove every item and keep the session (the SDKs' `clear_session`).
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/items", tag = "items",
    params(TenantSession, Preconditions),
    responses((status = 204, description = "Cleared"), Lookup, (status = 422, response = KeyReused)))]
async fn clear_items(
    State(state): State<AppState>, session: TenantSession, preconditions: Preconditions,
) -> Result<NoContent> {
    let key = preconditions.write_key(&session.id, "clear", "")?;
    let if_match = preconditions.if_match;
    let done = state.store.clear_items(&session.tenant, &session.id, key, if_match).await;
    done.map(|()| NoContent).map_err(|e| session.store_error(e))
}
