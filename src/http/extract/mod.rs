//! Extractors that reject bad input with our problem format and name the field at fault.

mod path;
mod preconditions;

use std::convert::Infallible;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::IntoParams;

use super::doc_params::header_param;
use super::error::ApiError;
use crate::model::{json_error_message, IdempotencyKey, InvalidField};
pub use path::{id_schema, Tenant, TenantAgent, TenantItem, TenantOwner, TenantRun, TenantSession};
pub use preconditions::Preconditions;

/// A JSON request body. A missing `Content-Type` is taken as JSON.
pub struct AppJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for AppJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        json_body(request, state).await.map(|(value, _)| AppJson(value))
    }
}

/// Path parameters, as axum's `Path` reads them; a path it cannot read (an escape that
/// is not UTF-8, say) is 400 `invalid_request` naming the path, not axum's plain text.
pub struct Segments<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Segments<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let params = axum::extract::Path::<T>::from_request_parts(parts, state).await;
        params.map(|params| Self(params.0)).map_err(|r| ApiError::invalid("path", r.body_text()))
    }
}

/// The request's `Idempotency-Key` header. It is checked when the handler takes the
/// fingerprint of the request with it, after the body's own checks.
pub struct IdempotencyHeader(Option<HeaderValue>);

impl IdempotencyHeader {
    /// The key with the fingerprint that `fingerprint` takes of the request; none when the
    /// request has no key.
    pub fn key(
        &self, fingerprint: impl FnOnce(&str) -> Result<IdempotencyKey, InvalidField>,
    ) -> Result<Option<IdempotencyKey>, ApiError> {
        let Some(key) = &self.0 else {
            return Ok(None);
        };
        let key = key
            .to_str()
            .map_err(|_| ApiError::invalid("Idempotency-Key", "must be visible ASCII"))?;
        Ok(Some(fingerprint(key)?))
    }
}

impl IntoParams for IdempotencyHeader {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let key = ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(255))
            .pattern(Some("^[!-~]+$"));
        vec![header_param(
            "Idempotency-Key",
            key,
            "Makes retries safe: the same key with the same request answers as the first request did and does nothing more; kept for 24 hours",
        )]
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyHeader {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(Self(parts.headers.get("idempotency-key").cloned()))
    }
}

/// `MAX_BODY_BYTES`, for the 413 to name.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// A JSON request body together with its text, for a fingerprint of the request.
pub struct AppJsonText<T>(pub T, pub String);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for AppJsonText<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (value, bytes) = json_body(request, state).await?;
        Ok(AppJsonText(value, String::from_utf8(bytes.into()).unwrap_or_default()))
    }
}

/// A JSON object body, parsed, and its bytes.
async fn json_body<T: DeserializeOwned, S: Send + Sync>(
    request: Request, state: &S,
) -> Result<(T, Bytes), ApiError> {
    if !is_json(request.headers()) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let limit = request.extensions().get::<BodyLimit>().map_or(0, |limit| limit.0);
    let bytes = Bytes::from_request(request, state).await.map_err(|rejection| {
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
    let value = parse_json(&bytes)?;
    Ok((value, bytes))
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(content_type) = headers.get(header::CONTENT_TYPE) else {
        return true;
    };
    let Ok(content_type) = content_type.to_str() else {
        return false;
    };
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
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
    deserializer.end().map_err(|error| ApiError::invalid("body", json_error_message(&error)))?;
    Ok(value)
}

/// Tells a field given as `null` (`Some(None)`) from a field left out (`None`).
pub fn present<'de, D: serde::Deserializer<'de>, T: serde::Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}
