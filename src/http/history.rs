//! Replacing a session's history: one item in place, or every item (or every item after
//! one) at once, as the agent frameworks that rewrite history need.

use axum::extract::{Query, State};
use axum::routing::put;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::error::{ApiError, JsonBody, KeyReused, Lookup, Result};
use super::extract::{AppJson, Preconditions, TenantItem, TenantSession};
use super::revision::ETag;
use super::AppState;
use crate::model::{IdempotencyKey, Item, ItemBody};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/items", put(replace_items))
        .route("/v1/sessions/{session_id}/items/{item_id}", put(replace_item))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceItemRequest {
    /// The item's new JSON object; its id, seq and time stay.
    #[schema(value_type = Object)]
    item: Box<RawValue>,
}

/// Replace one item in place.
#[utoipa::path(put, path = "/v1/sessions/{session_id}/items/{item_id}", tag = "items",
    params(TenantItem, Preconditions), request_body = ReplaceItemRequest,
    responses((status = 200, description = "The item as it is now", body = Item), Lookup, JsonBody,
        (status = 422, response = KeyReused)))]
async fn replace_item(
    State(state): State<AppState>, item: TenantItem, preconditions: Preconditions,
    AppJson(request): AppJson<ReplaceItemRequest>,
) -> Result<(ETag, Json<Item>)> {
    let body = ItemBody::new("item", request.item)?;
    let target = format!("replace item\0{}", item.id);
    let key = preconditions.write_key(&item.session, &target, body.as_str())?;
    let if_match = preconditions.if_match;
    let replaced =
        state.store.replace_item(&item.tenant, &item.session, item.id, body, key, if_match);
    let (replaced, revision) = replaced.await.map_err(|e| item.store_error(e))?;
    Ok((ETag(revision), Json(replaced)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceItemsRequest {
    /// Up to 1000 JSON objects: the new history (or what follows `after`), in order.
    #[schema(value_type = Vec<Object>, max_items = 1000)]
    items: Vec<Box<RawValue>>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReplaceQuery {
    /// Replace only the items that follow this one (a suffix); without it, every item.
    #[param(value_type = Option<String>, format = Uuid)]
    after: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReplaceItemsResponse {
    /// The new items, with new ids and seqs above every seq the session has used.
    data: Vec<Item>,
}

/// Replace a session's history, or what follows one of its items.
///
/// Atomic: the old items go and the new ones come in one transaction, creating the
/// session if it does not exist. With `If-Match` this is compare-and-swap on the history.
#[utoipa::path(put, path = "/v1/sessions/{session_id}/items", tag = "items",
    params(TenantSession, ReplaceQuery, Preconditions),
    request_body = ReplaceItemsRequest,
    responses(
        (status = 200, description = "The new items", body = ReplaceItemsResponse),
        Lookup,
        JsonBody,
        (status = 422, response = KeyReused),
    ))]
async fn replace_items(
    State(state): State<AppState>, session: TenantSession, Query(query): Query<ReplaceQuery>,
    preconditions: Preconditions, AppJson(request): AppJson<ReplaceItemsRequest>,
) -> Result<(ETag, Json<ReplaceItemsResponse>)> {
    let after = match &query.after {
        Some(id) => {
            Some(Uuid::parse_str(id).map_err(|_| ApiError::invalid("after", "is no item id"))?)
        }
        None => None,
    };
    let bodies = match request.items.is_empty() {
        true => Vec::new(),
        false => ItemBody::batch("items", request.items)?,
    };
    let idempotency = preconditions.key(|key, if_match| {
        let rest = format!("replace\0{after:?}\0{if_match:?}");
        IdempotencyKey::for_append(key, &session.id, &bodies, Some(&rest))
    })?;
    let if_match = preconditions.if_match;
    let replaced = state
        .store
        .replace_items(&session.tenant, &session.id, bodies, after, idempotency, if_match)
        .await
        .map_err(|e| ApiError::from_store(e, session.id.as_str(), query.after.as_deref()))?;
    let revision = replaced.revision.unwrap_or_default();
    Ok((ETag(revision), Json(ReplaceItemsResponse { data: replaced.items })))
}
