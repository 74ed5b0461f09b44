//! Revisions on the wire: `If-Match` on writes, `ETag` on what reads and writes answer.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponseParts, ResponseParts};
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::IntoParams;

use super::doc_params::header_param;
use super::error::ApiError;
use crate::model::{entity_tag, IfMatch};

/// The request's `If-Match`: none, `*`, or a revision in quotes. A value that is none
/// of these is 400 naming the header; an empty one is an empty list of tags, which
/// HTTP's list syntax allows, and asks nothing.
pub struct IfMatchHeader(pub Option<IfMatch>);

impl<S: Send + Sync> FromRequestParts<S> for IfMatchHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(header::IF_MATCH) else {
            return Ok(Self(None));
        };
        let value = value.to_str().map_err(|_| ApiError::invalid("If-Match", "must be ASCII"))?;
        if value.trim().is_empty() {
            return Ok(Self(None));
        }
        Ok(Self(Some(IfMatch::parse(value)?)))
    }
}

impl IntoParams for IfMatchHeader {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let tag = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(r#"^(\*|(W/)?"[0-9]{1,18}")?$"#));
        vec![header_param(
            "If-Match",
            tag,
            "Writes only if the session is at this revision (the ETag of a read, such as \"3\"), or with * only if it exists; else 412 revision_mismatch and nothing is written",
        )]
    }
}

/// `ETag: "<revision>"` on an answer.
pub struct ETag(pub i64);

impl IntoResponseParts for ETag {
    type Error = Infallible;

    fn into_response_parts(self, mut parts: ResponseParts) -> Result<ResponseParts, Infallible> {
        let tag = HeaderValue::try_from(entity_tag(self.0)).expect("digits in quotes");
        parts.headers_mut().insert(header::ETAG, tag);
        Ok(parts)
    }
}
