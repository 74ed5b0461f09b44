//! Extractors that reject bad input with our problem format and name the field at fault.

use std::collections::HashMap;

use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderName, StatusCode};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::error::ApiError;
use crate::auth::Caller;
use crate::model::{json_error_message, SessionId};

/// A JSON request body. A missing `Content-Type` is taken as JSON.
pub struct AppJson<T>(pub T);

impl<T, S> FromRequest<S> for AppJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        AppJsonText::from_request(request, state)
            .await
            .map(|AppJsonText(value, _)| AppJson(value))
    }
}

/// Answers to a retry with a known `Idempotency-Key` say so in this header.
pub static IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The request's `Idempotency-Key`, if it has one.
pub fn idempotency_key(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    headers
        .get("idempotency-key")
        .map(|key| {
            key.to_str()
                .map_err(|_| ApiError::invalid("Idempotency-Key", "must be visible ASCII"))
        })
        .transpose()
}

/// `MAX_BODY_BYTES`, for the 413 to name.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// A JSON request body together with its text, for a fingerprint of the request.
pub struct AppJsonText<T>(pub T, pub Bytes);

impl<T, S> FromRequest<S> for AppJsonText<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(request.headers()) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let limit = request
            .extensions()
            .get::<BodyLimit>()
            .map_or(0, |limit| limit.0);
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge(limit)
                } else {
                    ApiError::invalid("body", rejection.body_text())
                }
            })?;
        // serde reads a struct from a JSON array too (its fields in order), so `[null, null]`
        // would be a valid PATCH; every request body of this API is an object.
        if !bytes.trim_ascii_start().starts_with(b"{") {
            return Err(ApiError::invalid("body", "must be a JSON object"));
        }
        parse_json(&bytes).map(|value| AppJsonText(value, bytes))
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(content_type) = headers.get(header::CONTENT_TYPE) else {
        return true;
    };
    let Ok(content_type) = content_type.to_str() else {
        return false;
    };
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Deserializes JSON, reporting the path of the first offending field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        // `?` stands for a segment the parser had not identified yet (say, the key of an
        // object cut short); the enclosing field is the best name for the error.
        let path = error.path().to_string();
        let field = match path.trim_end_matches(".?") {
            "." | "?" => "body",
            known => known,
        };
        ApiError::invalid(field, json_error_message(&error.into_inner()))
    })?;
    deserializer
        .end()
        .map_err(|error| ApiError::invalid("body", json_error_message(&error)))?;
    Ok(value)
}

/// The tenant a request acts for: its API key's, or `default` while auth is off. The
/// auth middleware puts the caller in the request; a route it does not guard has none.
pub struct Tenant(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .and_then(Caller::tenant)
            .map(|tenant| Tenant(tenant.to_owned()))
            .ok_or_else(|| ApiError::Unauthorized("this route needs an API key".into()))
    }
}

/// The `{session_id}` of the path, validated.
pub struct SessionPath(pub SessionId);

impl<S: Send + Sync> FromRequestParts<S> for SessionPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let id = path_param(parts, state, "session_id").await?;
        Ok(SessionPath(SessionId::parse("session_id", id)?))
    }
}

/// The `{item_id}` of the path. Item ids are UUIDs; any other text names no item, and is
/// looked up as the nil UUID (which no item has) so that an unknown session still
/// answers `session_not_found` first.
pub struct ItemPath {
    pub id: Uuid,
    pub raw: String,
}

impl<S: Send + Sync> FromRequestParts<S> for ItemPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let (id, raw) = uuid_param(parts, state, "item_id").await?;
        Ok(ItemPath { id, raw })
    }
}

/// The `{run_id}` of the path; like an item id, text that is no UUID names no run.
pub struct RunPath {
    pub id: Uuid,
    pub raw: String,
}

impl<S: Send + Sync> FromRequestParts<S> for RunPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let (id, raw) = uuid_param(parts, state, "run_id").await?;
        Ok(RunPath { id, raw })
    }
}

/// The `{agent_id}` of the path.
pub struct AgentPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for AgentPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        path_param(parts, state, "agent_id").await.map(AgentPath)
    }
}

/// A path parameter that names a row by UUID, and its text; text that is no UUID gives
/// the nil UUID, which names no row.
async fn uuid_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    name: &str,
) -> Result<(Uuid, String), ApiError> {
    let raw = path_param(parts, state, name).await?;
    Ok((Uuid::parse_str(&raw).unwrap_or(Uuid::nil()), raw))
}

async fn path_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    name: &str,
) -> Result<String, ApiError> {
    let Path(mut params) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
        .await
        .map_err(|rejection| ApiError::invalid(name, rejection.body_text()))?;
    params
        .remove(name)
        .ok_or_else(|| ApiError::Internal(format!("the route has no `{name}` parameter")))
}

/// Tells a field given as `null` (`Some(None)`) from a field left out (`None`).
pub fn present<'de, D: serde::Deserializer<'de>, T: serde::Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}
