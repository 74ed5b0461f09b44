//! `/v1/conversations`: a conversation is a session, its items the session's items in
//! OpenAI's shape. Unlike a native append, adding items to an unknown conversation is
//! 404, as OpenAI answers.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::errors::{OpenAiError, Result};
use super::items::{input, view};
use super::list::{IncludeQuery, List, ListQuery};
use super::OpenAiErrors;
use crate::http::extract::{AppJson, Segments, Tenant};
use crate::http::{ApiError, AppState};
use crate::model::{
    Item, ItemBody, Metadata, MetadataPatch, NewSession, Session, SessionId, SessionPatch,
};
use crate::store::StoreError;

/// The most items one request may add, as OpenAI allows.
const MAX_ITEMS: usize = 20;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/conversations", post(create))
        .route("/v1/conversations/{conversation_id}", get(read).post(update).delete(remove))
        .route("/v1/conversations/{conversation_id}/items", get(list_items).post(add_items))
        .route(
            "/v1/conversations/{conversation_id}/items/{item_id}",
            get(read_item).delete(delete_item),
        )
}

/// A conversation: a session, as OpenAI shows it.
#[derive(Serialize, ToSchema)]
pub struct Conversation {
    id: String,
    /// `conversation`.
    object: &'static str,
    /// Unix seconds.
    created_at: i64,
    metadata: Metadata,
}

impl From<Session> for Conversation {
    fn from(session: Session) -> Self {
        Self {
            id: session.id,
            object: "conversation",
            created_at: session.created_at.timestamp(),
            metadata: session.metadata,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct ConversationDeleted {
    id: String,
    /// `conversation.deleted`.
    object: &'static str,
    deleted: bool,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConversation {
    /// Up to 20 items to start with.
    #[schema(schema_with = super::schemas::initial_items)]
    items: Option<Value>,
    #[schema(value_type = Option<Metadata>)]
    metadata: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateConversation {
    /// Replaces the metadata.
    #[schema(value_type = Metadata)]
    metadata: BTreeMap<String, String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddItems {
    /// 1 to 20 items, added in this order.
    #[schema(schema_with = super::schemas::added_items)]
    items: Value,
}

/// The conversation of the path, which must exist.
pub(super) async fn existing(
    state: &AppState, tenant: &str, id: &str,
) -> Result<(SessionId, Session)> {
    let id = parse_id(id)?;
    match state.store.get_session(tenant, &id).await {
        Ok(session) => Ok((id, session)),
        Err(StoreError::SessionNotFound) => Err(not_found(id.as_str())),
        Err(error) => Err(error.into()),
    }
}

/// A conversation's id; one that cannot name a session names no conversation.
pub(super) fn parse_id(id: &str) -> Result<SessionId> {
    SessionId::parse("conversation_id", id.to_owned()).map_err(|_| not_found(id))
}

pub(super) fn not_found(id: &str) -> OpenAiError {
    OpenAiError::conversation_not_found(id)
}

/// Checked items of a request: a list of at most [`MAX_ITEMS`].
async fn taken(state: &AppState, tenant: &str, items: &Value) -> Result<Vec<ItemBody>> {
    match items.as_array() {
        None => Err(OpenAiError::invalid("items", "must be a list of items")),
        Some(list) if list.len() > MAX_ITEMS => {
            Err(OpenAiError::invalid("items", format!("must hold at most {MAX_ITEMS} items")))
        }
        Some(_) => input(&state.sealer, tenant, "items", items).await,
    }
}

/// Create a conversation.
#[utoipa::path(post, path = "/v1/conversations", tag = "openai", operation_id = "create_conversation",
    request_body = CreateConversation,
    responses((status = 200, description = "The conversation", body = Conversation), OpenAiErrors))]
async fn create(
    State(state): State<AppState>, Tenant(tenant): Tenant,
    AppJson(request): AppJson<CreateConversation>,
) -> Result<Json<Conversation>> {
    let metadata = Metadata::new(request.metadata.unwrap_or_default())?;
    let items = match &request.items {
        None => Vec::new(),
        Some(Value::Array(items)) if items.is_empty() => Vec::new(),
        Some(items) => taken(&state, &tenant, items).await?,
    };
    let id = SessionId::parse("id", super::ids::new_conversation())?;
    let new = NewSession {
        id: id.clone(),
        metadata,
        agent_id: None,
        owners: Default::default(),
        expires_after: None,
    };
    let session = state.store.create_session(&tenant, new).await?;
    if !items.is_empty() {
        if let Err(error) = state.store.append_items(&tenant, &id, items, None, None).await {
            // Not half a conversation: without its items, none at all.
            let _ = state.store.delete_session(&tenant, &id, None).await;
            return Err(error.into());
        }
    }
    Ok(Json(session.into()))
}

/// Get a conversation.
#[utoipa::path(get, path = "/v1/conversations/{conversation_id}", tag = "openai", operation_id = "get_conversation",
    params(("conversation_id" = String, Path, description = "The conversation id")),
    responses((status = 200, description = "The conversation", body = Conversation), OpenAiErrors))]
async fn read(
    State(state): State<AppState>, Tenant(tenant): Tenant, Segments(id): Segments<String>,
) -> Result<Json<Conversation>> {
    Ok(Json(existing(&state, &tenant, &id).await?.1.into()))
}

/// Replace a conversation's metadata.
#[utoipa::path(post, path = "/v1/conversations/{conversation_id}", tag = "openai", operation_id = "update_conversation",
    params(("conversation_id" = String, Path, description = "The conversation id")),
    request_body = UpdateConversation,
    responses((status = 200, description = "The conversation", body = Conversation), OpenAiErrors))]
async fn update(
    State(state): State<AppState>, Tenant(tenant): Tenant, Segments(id): Segments<String>,
    AppJson(request): AppJson<UpdateConversation>,
) -> Result<Json<Conversation>> {
    let (id, session) = existing(&state, &tenant, &id).await?;
    Metadata::new(request.metadata.clone())?;
    // Keys of the old metadata that the new one lacks are removed.
    let mut changes: BTreeMap<String, Option<String>> =
        session.metadata.iter().map(|(key, _)| (key.clone(), None)).collect();
    changes.extend(request.metadata.into_iter().map(|(key, value)| (key, Some(value))));
    let patch =
        SessionPatch { metadata: Some(MetadataPatch::Merge(changes)), ..SessionPatch::default() };
    let session = state.store.update_session(&tenant, &id, patch, None).await;
    Ok(Json(session.map_err(|e| ApiError::from_store(e, id.as_str(), None))?.into()))
}

/// Delete a conversation with all its items.
#[utoipa::path(delete, path = "/v1/conversations/{conversation_id}", tag = "openai", operation_id = "delete_conversation",
    params(("conversation_id" = String, Path, description = "The conversation id")),
    responses((status = 200, description = "Deleted", body = ConversationDeleted), OpenAiErrors))]
async fn remove(
    State(state): State<AppState>, Tenant(tenant): Tenant, Segments(id): Segments<String>,
) -> Result<Json<ConversationDeleted>> {
    let (id, _) = existing(&state, &tenant, &id).await?;
    match state.store.delete_session(&tenant, &id, None).await {
        Ok(()) | Err(StoreError::SessionNotFound) => {}
        Err(error) => return Err(error.into()),
    }
    let id = id.as_str().to_owned();
    Ok(Json(ConversationDeleted { id, object: "conversation.deleted", deleted: true }))
}

/// List a conversation's items.
#[utoipa::path(get, path = "/v1/conversations/{conversation_id}/items", tag = "openai", operation_id = "list_conversation_items",
    params(("conversation_id" = String, Path, description = "The conversation id"), ListQuery),
    responses((status = 200, description = "A page of items", body = List<Object>), OpenAiErrors))]
async fn list_items(
    State(state): State<AppState>, Tenant(tenant): Tenant, Segments(id): Segments<String>,
    query: ListQuery,
) -> Result<Json<List<Value>>> {
    let (id, _) = existing(&state, &tenant, &id).await?;
    let page =
        state.store.list_items(&tenant, &id, &query.page()).await.map_err(|error| match error {
            StoreError::UnknownCursor => ApiError::invalid(
                "after",
                format!(
                    "no item with id `{}` in this conversation",
                    query.after.as_deref().unwrap_or_default()
                ),
            ),
            error => ApiError::from_store(error, id.as_str(), None),
        })?;
    let data = page.data.iter().map(item_view).collect();
    Ok(Json(List::new(data, page.first_id, page.last_id, page.has_more)))
}

fn item_view(item: &Item) -> Value {
    view(&item.item, &item.id.to_string())
}

/// Add items to a conversation.
#[utoipa::path(post, path = "/v1/conversations/{conversation_id}/items", tag = "openai", operation_id = "create_conversation_items",
    params(("conversation_id" = String, Path, description = "The conversation id")),
    request_body = AddItems,
    responses((status = 200, description = "The items added", body = List<Object>), OpenAiErrors))]
async fn add_items(
    State(state): State<AppState>, Tenant(tenant): Tenant, Segments(id): Segments<String>,
    AppJson(request): AppJson<AddItems>,
) -> Result<Json<List<Value>>> {
    let items = taken(&state, &tenant, &request.items).await?;
    let (id, _) = existing(&state, &tenant, &id).await?;
    let appended = state.store.append_items(&tenant, &id, items, None, None).await;
    let appended = appended.map_err(|e| ApiError::from_store(e, id.as_str(), None))?;
    Ok(Json(List::of_items(appended.items.iter().map(item_view).collect(), false)))
}

/// The item of the path; text that is no UUID names no item.
async fn item_of(
    state: &AppState, tenant: &str, id: &str, item_id: &str,
) -> Result<(SessionId, Item)> {
    let (id, _) = existing(state, tenant, id).await?;
    let item = uuid::Uuid::parse_str(item_id).unwrap_or(uuid::Uuid::nil());
    match state.store.get_item(tenant, &id, item).await {
        Ok(item) => Ok((id, item)),
        Err(error) => Err(ApiError::from_store(error, id.as_str(), Some(item_id)).into()),
    }
}

/// Get an item of a conversation.
#[utoipa::path(get, path = "/v1/conversations/{conversation_id}/items/{item_id}", tag = "openai", operation_id = "get_conversation_item",
    params(
        ("conversation_id" = String, Path, description = "The conversation id"),
        ("item_id" = String, Path, description = "The item id"),
        IncludeQuery,
    ),
    responses((status = 200, description = "The item", body = Object), OpenAiErrors))]
async fn read_item(
    State(state): State<AppState>, Tenant(tenant): Tenant,
    Segments((id, item_id)): Segments<(String, String)>,
) -> Result<Json<Value>> {
    Ok(Json(item_view(&item_of(&state, &tenant, &id, &item_id).await?.1)))
}

/// Delete an item of a conversation; answers with the conversation.
#[utoipa::path(delete, path = "/v1/conversations/{conversation_id}/items/{item_id}", tag = "openai", operation_id = "delete_conversation_item",
    params(
        ("conversation_id" = String, Path, description = "The conversation id"),
        ("item_id" = String, Path, description = "The item id"),
    ),
    responses((status = 200, description = "The conversation", body = Conversation), OpenAiErrors))]
async fn delete_item(
    State(state): State<AppState>, Tenant(tenant): Tenant,
    Segments((id, item_id)): Segments<(String, String)>,
) -> Result<Json<Conversation>> {
    let (id, item) = item_of(&state, &tenant, &id, &item_id).await?;
    let deleted = state.store.delete_item(&tenant, &id, item.id, None, None).await;
    deleted.map_err(|e| ApiError::from_store(e, id.as_str(), Some(&item_id)))?;
    Ok(Json(existing(&state, &tenant, id.as_str()).await?.1.into()))
}
