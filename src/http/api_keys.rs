//! `/v1/api_keys`: the admin key manages the tenants' keys.

use axum::extract::State;
use axum::http::request::Parts;
use axum::response::NoContent;
use axum::routing::{delete, get};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::answer::Created;
use super::error::{ApiError, JsonBody, Result};
use super::error::{BadRequest, NotFound};
use super::extract::{AppJson, Segments};
use super::list_query::ListQuery;
use super::AppState;
use crate::model::{check_scopes, check_tenant, ApiKey, NewKey, Order, Page, Scope};
use crate::store::{SessionStore, StoreError};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/api_keys", get(list_api_keys).post(create_api_key))
        .route("/v1/api_keys/{key_id}", delete(delete_api_key))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKeyRequest {
    /// The tenant the key acts for.
    #[schema(example = "acme", pattern = "^[A-Za-z0-9_.-]{1,64}$")]
    tenant: String,
    /// What the key is for, to tell keys apart.
    #[schema(
        example = "support frontend",
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    name: String,
    /// `["read"]`, or `["read", "write"]` (the default; `["write"]` is the same).
    #[schema(value_type = Option<std::collections::BTreeSet<Scope>>, min_items = 1, max_items = 2)]
    scopes: Option<Vec<Scope>>,
    /// When the key stops working; never when absent.
    expires_at: Option<DateTime<Utc>>,
}

/// A new API key with its secret, which no later response shows.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKey {
    #[serde(flatten)]
    api_key: ApiKey,
    /// The key to send as `Authorization: Bearer <key>`; shown only in this response.
    #[schema(example = "ask_Xy3qVd0xJ7n1mQ9Z2bW8cK4tL6pR5sA0hE3gF1uY7oI")]
    key: String,
}

/// A key made by the admin API or the command line.
pub async fn issue_key(
    store: &dyn SessionStore, tenant: String, name: String, scopes: Option<Vec<Scope>>,
    expires_at: Option<DateTime<Utc>>,
) -> Result<(ApiKey, String)> {
    check_tenant("tenant", &tenant)?;
    if name.is_empty() || name.chars().count() > 256 || name.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "name",
            "must be 1-256 characters, none of them control characters",
        ));
    }
    let scopes = check_scopes(scopes)?;
    let new = NewKey::generate();
    let key = ApiKey {
        id: Uuid::now_v7(),
        tenant,
        name,
        prefix: new.prefix(),
        scopes,
        created_at: crate::store::now(),
        expires_at,
        last_used_at: None,
    };
    store.create_api_key(&key, &new.hash).await?;
    Ok((key, new.secret))
}

/// Create an API key for a tenant (admin key only).
#[utoipa::path(post, path = "/v1/api_keys", tag = "api_keys", request_body = CreateApiKeyRequest,
    responses(
        (status = 201, description = "The new key, with its secret", body = CreatedApiKey, headers(("location" = String, description = "The path of the new key"))),
        JsonBody,
    ))]
async fn create_api_key(
    State(state): State<AppState>, AppJson(request): AppJson<CreateApiKeyRequest>,
) -> Result<Created<CreatedApiKey>> {
    let (api_key, key) =
        issue_key(&*state.store, request.tenant, request.name, request.scopes, request.expires_at)
            .await?;
    let location = format!("/v1/api_keys/{}", api_key.id);
    Ok(Created::at(location, CreatedApiKey { api_key, key }))
}

/// `?tenant=` of the key listing.
pub struct TenantFilter(Option<String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for TenantFilter {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let tenant = form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "tenant")
            .map(|(_, value)| value.into_owned());
        if let Some(tenant) = &tenant {
            check_tenant("tenant", tenant)?;
        }
        Ok(Self(tenant))
    }
}

/// List API keys, oldest first; never their secrets (admin key only).
#[utoipa::path(get, path = "/v1/api_keys", tag = "api_keys",
    params(
        ListQuery,
        ("tenant" = Option<String>, Query, description = "Only this tenant's keys", pattern = "^[A-Za-z0-9_.-]{1,64}$"),
    ),
    responses(
        (status = 200, description = "A page of API keys", body = Page<ApiKey>),
        (status = 400, response = BadRequest),
    ))]
async fn list_api_keys(
    State(state): State<AppState>, TenantFilter(tenant): TenantFilter, query: ListQuery,
) -> Result<Json<Page<ApiKey>>> {
    let page = state
        .store
        .list_api_keys(tenant.as_deref(), &query.page(Order::Asc))
        .await
        .map_err(|e| query.store_error(e, None))?;
    Ok(Json(page))
}

/// Revoke an API key: it stops working at once on this replica, and within
/// `AUTH_CACHE_SECS` on the others (admin key only).
#[utoipa::path(delete, path = "/v1/api_keys/{key_id}", tag = "api_keys",
    params(("key_id" = String, Path, description = "The key's id")),
    responses((status = 204, description = "Revoked"), (status = 404, response = NotFound)))]
async fn delete_api_key(
    State(state): State<AppState>, Segments(raw): Segments<String>,
) -> Result<NoContent> {
    let not_found = || ApiError::ApiKeyNotFound(format!("no API key with id `{raw}`"));
    let id = Uuid::parse_str(&raw).map_err(|_| not_found())?;
    match state.store.delete_api_key(id).await {
        Ok(()) => {
            state.auth.forget(id);
            Ok(NoContent)
        }
        Err(StoreError::ApiKeyNotFound) => Err(not_found()),
        Err(other) => Err(other.into()),
    }
}
